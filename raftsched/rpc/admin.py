"""The Admin gRPC service (``grpc.aio``): thin handlers that decode, call the domain, encode.

Writes are accepted only by the leader, which stamps them (``raftsched.leader.writes``) and
proposes them; a follower answers ``FAILED_PRECONDITION`` with trailing metadata
``raftsched-leader: host:port`` and the SDK follows it. Reads are served from this node's applied
state (sequentially consistent: a follower may lag the leader by a few milliseconds).

Error contract: a gRPC status plus trailing metadata ``raftsched-code`` (see raftsched/errors.py).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, TypeVar

import grpc

from raftsched import codec
from raftsched.errors import InvalidSpec, NotFound, RaftschedError
from raftsched.explain import explain
from raftsched.fsm import queries
from raftsched.leader import writes
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc
from raftsched.workflow.dag import compile_dag, lineage

if TYPE_CHECKING:
    from raftsched.node import Node

T = TypeVar("T")

_STATUS = {
    "invalid_argument": grpc.StatusCode.INVALID_ARGUMENT,
    "not_found": grpc.StatusCode.NOT_FOUND,
    "already_exists": grpc.StatusCode.ALREADY_EXISTS,
    "conflict": grpc.StatusCode.ABORTED,
    "stale_epoch": grpc.StatusCode.UNAVAILABLE,
    "unavailable": grpc.StatusCode.UNAVAILABLE,
    "not_leader": grpc.StatusCode.FAILED_PRECONDITION,
    "snapshot_format": grpc.StatusCode.FAILED_PRECONDITION,
    "internal": grpc.StatusCode.INTERNAL,
}

PROPOSE_TIMEOUT_S = 10.0
MAX_BULK_TASKS = 10_000
DEFAULT_LIST_LIMIT = 1000
DEFAULT_WORKFLOW_RUNS = 100


class _Abort(Exception):
    def __init__(self, code: str, message: str, leader: str = "") -> None:
        self.code = code
        self.message = message
        self.leader = leader


async def _guard(context: grpc.aio.ServicerContext, call: Callable[[], Awaitable[T]]) -> T:
    """Run a handler body, mapping every raftsched error to a status with ``raftsched-code``."""
    try:
        return await call()
    except _Abort as exc:
        code, message, leader = exc.code, exc.message, exc.leader
    except RaftschedError as exc:
        code, message, leader = exc.code, str(exc), ""
    metadata: list[tuple[str, str]] = [("raftsched-code", code)]
    if leader:
        metadata.append(("raftsched-leader", leader))
    context.set_trailing_metadata(tuple(metadata))
    await context.abort(_STATUS.get(code, grpc.StatusCode.UNKNOWN), message)
    raise AssertionError("unreachable")  # context.abort raises


class AdminServicer(pb_grpc.AdminServicer):  # type: ignore[misc]
    def __init__(self, node: Node) -> None:
        self.node = node

    # -- writes --------------------------------------------------------------------------------

    def _stamp(self) -> dict[str, Any]:
        node = self.node
        driver = node.driver
        if not (
            node.consensus is not None and node.consensus.is_leader() and driver.leading and driver.ready
        ):
            leader = node.leader_grpc() or ""
            raise _Abort(
                "not_leader",
                f"{node.node_id} is not the leader"
                + (f"; the leader is at {leader}" if leader else "; no leader is elected yet, retry shortly"),
                leader,
            )
        if driver.epoch != node.consensus.epoch():
            # Leadership changed under us and the driver has not caught up (its barrier for the
            # new term is not applied yet): a stamp now would carry a stale epoch.
            raise _Abort("unavailable", f"{node.node_id} is changing leadership; retry shortly")
        now = max(node.clock.now_ms(), node.state.max_now_ms)
        return {"now_ms": now, "epoch": driver.epoch, "origin": node.node_id}

    async def _write(self, build: Callable[[dict[str, Any]], bytes]) -> pb.CommandResult:
        return await self._propose(build(self._stamp()))

    async def _propose(self, data: bytes) -> pb.CommandResult:
        return await propose_and_wait(self.node, data)

    @staticmethod
    def _key(key: str) -> str:
        if len(key) > 128:
            raise InvalidSpec("idempotency_key", "at most 128 characters")
        return key or uuid.uuid4().hex

    async def AddTask(self, request: pb.AddTaskRequest, context: grpc.aio.ServicerContext) -> pb.TaskReply:
        async def body() -> pb.TaskReply:
            spec = codec.spec_from_pb(request.spec)
            key = self._key(request.idempotency_key)
            res = await self._write(
                lambda s: writes.create_task(spec, disabled=request.disabled, key=key, **s)
            )
            return pb.TaskReply(task=res.task)

        return await _guard(context, body)

    async def AddTasks(
        self, request: pb.AddTasksRequest, context: grpc.aio.ServicerContext
    ) -> pb.AddTasksReply:
        async def body() -> pb.AddTasksReply:
            if len(request.tasks) > MAX_BULK_TASKS:
                raise InvalidSpec(
                    "tasks", f"{len(request.tasks)} tasks in one call, at most {MAX_BULK_TASKS}"
                )
            key = self._key(request.idempotency_key)
            results: list[pb.ItemResult | None] = [None] * len(request.tasks)
            items = []
            positions = []
            for i, req in enumerate(request.tasks):
                try:
                    items.append((codec.spec_from_pb(req.spec), req.disabled))
                    positions.append(i)
                except InvalidSpec as exc:
                    results[i] = pb.ItemResult(name=req.spec.name, ok=False, code=exc.code, message=str(exc))
            stamp = self._stamp()
            commands, refused = writes.create_tasks(items, key=key, **stamp)
            for j, problem in refused.items():
                i = positions[j]
                results[i] = pb.ItemResult(
                    name=request.tasks[i].spec.name, ok=False, code=problem.code, message=str(problem)
                )
            accepted = iter(i for j, i in enumerate(positions) if j not in refused)
            outcomes = await asyncio.gather(*(self._propose(c) for c in commands))
            for outcome in outcomes:
                for item in outcome.items:
                    results[next(accepted)] = item
            return pb.AddTasksReply(results=[r for r in results if r is not None])

        return await _guard(context, body)

    async def UpdateTask(
        self, request: pb.UpdateTaskRequest, context: grpc.aio.ServicerContext
    ) -> pb.TaskReply:
        async def body() -> pb.TaskReply:
            spec = codec.spec_from_pb(request.spec)
            key = self._key(request.idempotency_key)
            res = await self._write(
                lambda s: writes.update_task(
                    self.node.state, spec, expected_version=request.expected_version, key=key, **s
                )
            )
            return pb.TaskReply(task=res.task)

        return await _guard(context, body)

    async def DeleteTask(
        self, request: pb.DeleteTaskRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteTaskReply:
        async def body() -> pb.DeleteTaskReply:
            key = self._key(request.idempotency_key)
            await self._write(lambda s: writes.delete_task(request.name, key=key, **s))
            return pb.DeleteTaskReply()

        return await _guard(context, body)

    async def SetEnabled(
        self, request: pb.SetEnabledRequest, context: grpc.aio.ServicerContext
    ) -> pb.TaskReply:
        async def body() -> pb.TaskReply:
            key = self._key(request.idempotency_key)
            res = await self._write(
                lambda s: writes.set_enabled(self.node.state, request.name, request.enabled, key=key, **s)
            )
            return pb.TaskReply(task=res.task)

        return await _guard(context, body)

    async def TriggerNow(
        self, request: pb.TriggerNowRequest, context: grpc.aio.ServicerContext
    ) -> pb.RunReply:
        async def body() -> pb.RunReply:
            key = self._key(request.idempotency_key)
            res = await self._write(
                lambda s: writes.trigger_now(request.name, request.params_json, key=key, **s)
            )
            return pb.RunReply(run=res.run)

        return await _guard(context, body)

    async def RetryRun(self, request: pb.RetryRunRequest, context: grpc.aio.ServicerContext) -> pb.RunReply:
        async def body() -> pb.RunReply:
            key = self._key(request.idempotency_key)
            res = await self._write(lambda s: writes.retry_run(request.run_id, key=key, **s))
            return pb.RunReply(run=res.run)

        return await _guard(context, body)

    # -- workflow writes ------------------------------------------------------------------------

    async def ApplyWorkflow(
        self, request: pb.ApplyWorkflowRequest, context: grpc.aio.ServicerContext
    ) -> pb.WorkflowReply:
        async def body() -> pb.WorkflowReply:
            key = self._key(request.idempotency_key)
            res = await self._write(lambda s: writes.apply_workflow(request.spec, key=key, **s))
            return pb.WorkflowReply(workflow=res.workflow, changed=res.changed)

        return await _guard(context, body)

    async def StartWorkflowRun(
        self, request: pb.StartWorkflowRunRequest, context: grpc.aio.ServicerContext
    ) -> pb.WorkflowRunReply:
        async def body() -> pb.WorkflowRunReply:
            key = self._key(request.idempotency_key)
            res = await self._write(
                lambda s: writes.start_workflow_run(
                    self.node.state,
                    request.workflow,
                    request.logical_ms,
                    request.params_json,
                    key=key,
                    **s,
                )
            )
            return pb.WorkflowRunReply(run=res.workflow_run)

        return await _guard(context, body)

    async def OperateWorkflowRun(
        self, request: pb.WorkflowRunOpRequest, context: grpc.aio.ServicerContext
    ) -> pb.WorkflowRunReply:
        async def body() -> pb.WorkflowRunReply:
            key = self._key(request.idempotency_key)
            res = await self._write(
                lambda s: writes.workflow_run_op(
                    self.node.state,
                    request.op,
                    request.run_id,
                    request.task,
                    request.reason,
                    key=key,
                    **s,
                )
            )
            return pb.WorkflowRunReply(run=res.workflow_run)

        return await _guard(context, body)

    async def Backfill(
        self, request: pb.BackfillRequest, context: grpc.aio.ServicerContext
    ) -> pb.BackfillReply:
        async def body() -> pb.BackfillReply:
            key = self._key(request.idempotency_key)
            res = await self._write(
                lambda s: writes.start_backfill(
                    self.node.state,
                    request.workflow,
                    request.from_ms,
                    request.to_ms,
                    request.params_json,
                    key=key,
                    **s,
                )
            )
            return pb.BackfillReply(backfill=res.backfill)

        return await _guard(context, body)

    # -- reads ---------------------------------------------------------------------------------

    async def GetTask(self, request: pb.GetTaskRequest, context: grpc.aio.ServicerContext) -> pb.TaskReply:
        async def body() -> pb.TaskReply:
            rec = self.node.state.get_task(request.name)
            if rec is None:
                raise NotFound(f"task {request.name!r} does not exist")
            return pb.TaskReply(task=rec)

        return await _guard(context, body)

    async def ListTasks(
        self, request: pb.ListTasksRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListTasksReply:
        async def body() -> pb.ListTasksReply:
            return pb.ListTasksReply(tasks=self.node.state.list_tasks(request.prefix, request.limit))

        return await _guard(context, body)

    async def ListRuns(
        self, request: pb.ListRunsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListRunsReply:
        async def body() -> pb.ListRunsReply:
            limit = request.limit or DEFAULT_LIST_LIMIT
            tasks = [request.task] if request.task else [t.spec.name for t in self.node.state.list_tasks()]
            if request.task and self.node.state.get_task(request.task) is None:
                raise NotFound(f"task {request.task!r} does not exist")
            with self.node.store.reader() as r:
                runs = queries.list_runs(r, tasks, request.since_ms, request.until_ms, request.state, limit)
            return pb.ListRunsReply(runs=runs)

        return await _guard(context, body)

    async def FireAccounting(
        self, request: pb.FireAccountingRequest, context: grpc.aio.ServicerContext
    ) -> pb.FireAccountingReply:
        async def body() -> pb.FireAccountingReply:
            if self.node.state.get_task(request.task) is None:
                raise NotFound(f"task {request.task!r} does not exist")
            limit = request.limit or 10 * DEFAULT_LIST_LIMIT
            out = pb.FireAccountingReply()
            with self.node.store.reader() as r:
                out.fires.extend(
                    queries.fire_records(r, request.task, request.since_ms, request.until_ms, limit)
                )
            return out

        return await _guard(context, body)

    async def Explain(self, request: pb.ExplainRequest, context: grpc.aio.ServicerContext) -> pb.ExplainReply:
        async def body() -> pb.ExplainReply:
            rec = self.node.state.get_task(request.task)
            if rec is None:
                raise NotFound(f"task {request.task!r} does not exist")
            with self.node.store.reader() as r:
                around, run = queries.fires_around(r, request.task, request.at_ms)
            return explain(rec, request.at_ms, around, run)

        return await _guard(context, body)

    # -- workflow reads -------------------------------------------------------------------------

    def _workflow(self, name: str, version: int = 0) -> pb.WorkflowRecord:
        rec = self.node.state.get_workflow(name, version)
        if rec is None:
            if version and self.node.state.get_workflow(name) is not None:
                raise NotFound(f"workflow {name!r} has no version {version}")
            raise NotFound(f"workflow {name!r} does not exist")
        return rec

    async def GetWorkflow(
        self, request: pb.GetWorkflowRequest, context: grpc.aio.ServicerContext
    ) -> pb.WorkflowReply:
        async def body() -> pb.WorkflowReply:
            return pb.WorkflowReply(workflow=self._workflow(request.name, request.version))

        return await _guard(context, body)

    async def ListWorkflows(
        self, request: pb.ListWorkflowsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListWorkflowsReply:
        async def body() -> pb.ListWorkflowsReply:
            return pb.ListWorkflowsReply(
                workflows=self.node.state.list_workflows(request.prefix, request.limit)
            )

        return await _guard(context, body)

    async def GetWorkflowRun(
        self, request: pb.GetWorkflowRunRequest, context: grpc.aio.ServicerContext
    ) -> pb.WorkflowRunReply:
        async def body() -> pb.WorkflowRunReply:
            run = self.node.state.get_workflow_run(request.run_id)
            if run is None:
                raise NotFound(f"workflow run {request.run_id!r} does not exist")
            return pb.WorkflowRunReply(run=run)

        return await _guard(context, body)

    async def ListWorkflowRuns(
        self, request: pb.ListWorkflowRunsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListWorkflowRunsReply:
        async def body() -> pb.ListWorkflowRunsReply:
            self._workflow(request.workflow)
            runs = self.node.state.list_workflow_runs(
                request.workflow, request.limit or DEFAULT_WORKFLOW_RUNS, request.active_only
            )
            return pb.ListWorkflowRunsReply(runs=runs)

        return await _guard(context, body)

    async def GetBackfill(
        self, request: pb.GetBackfillRequest, context: grpc.aio.ServicerContext
    ) -> pb.BackfillReply:
        async def body() -> pb.BackfillReply:
            rec = self.node.state.get_backfill(request.backfill_id)
            if rec is None:
                raise NotFound(f"backfill {request.backfill_id!r} does not exist")
            return pb.BackfillReply(backfill=rec)

        return await _guard(context, body)

    async def ListBackfills(
        self, request: pb.ListBackfillsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListBackfillsReply:
        async def body() -> pb.ListBackfillsReply:
            self._workflow(request.workflow)
            return pb.ListBackfillsReply(backfills=self.node.state.list_backfills(request.workflow))

        return await _guard(context, body)

    async def Lineage(self, request: pb.LineageRequest, context: grpc.aio.ServicerContext) -> pb.LineageReply:
        async def body() -> pb.LineageReply:
            rec = self._workflow(request.workflow, request.version)
            dag = compile_dag(rec.spec)
            if request.task not in dag.index:
                raise NotFound(
                    f"workflow {request.workflow!r} (version {rec.version}) has no task {request.task!r}"
                )
            return pb.LineageReply(
                upstream=[pb.LineageEntry(task=t, depth=d) for t, d in lineage(dag, request.task, "up")],
                downstream=[pb.LineageEntry(task=t, depth=d) for t, d in lineage(dag, request.task, "down")],
            )

        return await _guard(context, body)

    async def NodeStatus(
        self, request: pb.NodeStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.NodeStatusReply:
        return self.node.node_status(
            request.lateness_since_ms, request.include_digest, request.chain_at_index
        )

    async def ClusterStatus(
        self, request: pb.ClusterStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.ClusterStatusReply:
        return self.node.cluster_status()


async def propose_and_wait(node: Node, data: bytes) -> pb.CommandResult:
    """Propose one command and wait until it is applied here; map failures to errors."""
    loop = asyncio.get_running_loop()
    fut: asyncio.Future[bytes] = loop.create_future()

    def done(result: bytes | None, error: Exception | None) -> None:
        def settle() -> None:
            if fut.done():
                return
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(result or b"")

        loop.call_soon_threadsafe(settle)

    assert node.consensus is not None
    node.consensus.propose(data, done)
    try:
        raw = await asyncio.wait_for(fut, PROPOSE_TIMEOUT_S)
    except TimeoutError:
        raise _Abort(
            "unavailable",
            "the write was not confirmed in time; its outcome is unknown "
            "(retry with the same idempotency key)",
        ) from None
    except Exception as exc:  # ProposeError
        code = getattr(exc, "code", "unavailable")
        raise _Abort(code if code in _STATUS else "unavailable", f"write not committed: {exc}") from None
    result = pb.CommandResult()
    result.ParseFromString(raw)
    if not raw:
        raise _Abort("unavailable", "the write's outcome is unknown (retry with the same idempotency key)")
    if not result.ok:
        raise _Abort(result.code or "internal", result.message)
    return result
