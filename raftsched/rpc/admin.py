"""The Admin gRPC service (``grpc.aio``): thin handlers that decode, call the domain, encode.

Writes are accepted only by the leader, which stamps them (``raftsched.leader.writes``) and
proposes them; a follower answers ``FAILED_PRECONDITION`` with trailing metadata
``raftsched-leader: host:port`` and the SDK follows it. Reads are served from this node's applied
state (sequentially consistent: a follower may lag the leader by a few milliseconds).

Error contract: a gRPC status plus trailing metadata ``raftsched-code`` (see raftsched/errors.py
and :mod:`raftsched.rpc.plumbing`).
"""

from __future__ import annotations

import asyncio
import uuid
from collections.abc import Callable
from typing import Any

import grpc

from raftsched import codec
from raftsched.errors import InvalidSpec, NotFound
from raftsched.explain import explain
from raftsched.fsm import queries
from raftsched.leader import writes
from raftsched.rpc.plumbing import NodeServices, propose_and_wait, rpc
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc
from raftsched.workflow.dag import compile_dag, lineage

MAX_BULK_TASKS = 10_000
DEFAULT_LIST_LIMIT = 1000
DEFAULT_WORKFLOW_RUNS = 100


class AdminServicer(pb_grpc.AdminServicer):  # type: ignore[misc]
    def __init__(self, node: NodeServices) -> None:
        self.node = node

    # -- writes --------------------------------------------------------------------------------

    def _stamp(self) -> dict[str, Any]:
        return self.node.gate.stamp().as_kwargs()

    async def _write(
        self, request: Any, build: Callable[[dict[str, Any]], bytes], method: str
    ) -> logpb.CommandResult:
        fingerprint = codec.request_fingerprint(method, request)
        return await self._propose(codec.with_fingerprint(build(self._stamp()), fingerprint))

    async def _propose(self, data: bytes) -> logpb.CommandResult:
        return await propose_and_wait(self.node, data)

    @staticmethod
    def _key(key: str) -> str:
        if len(key) > 128:
            raise InvalidSpec("idempotency_key", "at most 128 characters")
        return key or uuid.uuid4().hex

    @rpc
    async def AddTask(self, request: pb.AddTaskRequest, context: grpc.aio.ServicerContext) -> pb.TaskReply:
        spec = codec.spec_from_pb(request.spec)
        key = self._key(request.idempotency_key)
        res = await self._write(
            request,
            method="AddTask",
            build=lambda s: writes.create_task(spec, disabled=request.disabled, key=key, **s),
        )
        return pb.TaskReply(task=res.task)

    @rpc
    async def AddTasks(
        self, request: pb.AddTasksRequest, context: grpc.aio.ServicerContext
    ) -> pb.AddTasksReply:
        if len(request.tasks) > MAX_BULK_TASKS:
            raise InvalidSpec("tasks", f"{len(request.tasks)} tasks in one call, at most {MAX_BULK_TASKS}")
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
        fingerprint = codec.request_fingerprint("AddTasks", request)
        outcomes = await asyncio.gather(
            *(self._propose(codec.with_fingerprint(c, fingerprint)) for c in commands)
        )
        for outcome in outcomes:
            for item in outcome.items:
                results[next(accepted)] = item
        return pb.AddTasksReply(results=[r for r in results if r is not None])

    @rpc
    async def UpdateTask(
        self, request: pb.UpdateTaskRequest, context: grpc.aio.ServicerContext
    ) -> pb.TaskReply:
        spec = codec.spec_from_pb(request.spec)
        key = self._key(request.idempotency_key)
        res = await self._write(
            request,
            method="UpdateTask",
            build=lambda s: writes.update_task(
                self.node.state, spec, expected_version=request.expected_version, key=key, **s
            ),
        )
        return pb.TaskReply(task=res.task)

    @rpc
    async def DeleteTask(
        self, request: pb.DeleteTaskRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteTaskReply:
        key = self._key(request.idempotency_key)
        await self._write(
            request, method="DeleteTask", build=lambda s: writes.delete_task(request.name, key=key, **s)
        )
        return pb.DeleteTaskReply()

    @rpc
    async def SetEnabled(
        self, request: pb.SetEnabledRequest, context: grpc.aio.ServicerContext
    ) -> pb.TaskReply:
        key = self._key(request.idempotency_key)
        res = await self._write(
            request,
            method="SetEnabled",
            build=lambda s: writes.set_enabled(self.node.state, request.name, request.enabled, key=key, **s),
        )
        return pb.TaskReply(task=res.task)

    @rpc
    async def TriggerNow(
        self, request: pb.TriggerNowRequest, context: grpc.aio.ServicerContext
    ) -> pb.RunReply:
        key = self._key(request.idempotency_key)
        res = await self._write(
            request,
            method="TriggerNow",
            build=lambda s: writes.trigger_now(request.name, request.params_json, key=key, **s),
        )
        return pb.RunReply(run=res.run)

    @rpc
    async def RetryRun(self, request: pb.RetryRunRequest, context: grpc.aio.ServicerContext) -> pb.RunReply:
        key = self._key(request.idempotency_key)
        res = await self._write(
            request, method="RetryRun", build=lambda s: writes.retry_run(request.run_id, key=key, **s)
        )
        return pb.RunReply(run=res.run)

    # -- workflow writes ------------------------------------------------------------------------

    @rpc
    async def ApplyWorkflow(
        self, request: pb.ApplyWorkflowRequest, context: grpc.aio.ServicerContext
    ) -> pb.WorkflowReply:
        key = self._key(request.idempotency_key)
        res = await self._write(
            request, method="ApplyWorkflow", build=lambda s: writes.apply_workflow(request.spec, key=key, **s)
        )
        return pb.WorkflowReply(workflow=res.workflow, changed=res.changed)

    @rpc
    async def StartWorkflowRun(
        self, request: pb.StartWorkflowRunRequest, context: grpc.aio.ServicerContext
    ) -> pb.WorkflowRunReply:
        key = self._key(request.idempotency_key)
        res = await self._write(
            request,
            method="StartWorkflowRun",
            build=lambda s: writes.start_workflow_run(
                self.node.state,
                request.workflow,
                request.logical_ms,
                request.params_json,
                key=key,
                **s,
            ),
        )
        return pb.WorkflowRunReply(run=res.workflow_run)

    @rpc
    async def OperateWorkflowRun(
        self, request: pb.WorkflowRunOpRequest, context: grpc.aio.ServicerContext
    ) -> pb.WorkflowRunReply:
        key = self._key(request.idempotency_key)
        res = await self._write(
            request,
            method="OperateWorkflowRun",
            build=lambda s: writes.workflow_run_op(
                self.node.state,
                request.op,
                request.run_id,
                request.task,
                request.reason,
                key=key,
                **s,
            ),
        )
        return pb.WorkflowRunReply(run=res.workflow_run)

    @rpc
    async def Backfill(
        self, request: pb.BackfillRequest, context: grpc.aio.ServicerContext
    ) -> pb.BackfillReply:
        key = self._key(request.idempotency_key)
        res = await self._write(
            request,
            method="Backfill",
            build=lambda s: writes.start_backfill(
                self.node.state,
                request.workflow,
                request.from_ms,
                request.to_ms,
                request.params_json,
                key=key,
                **s,
            ),
        )
        return pb.BackfillReply(backfill=res.backfill)

    # -- reads ---------------------------------------------------------------------------------

    @rpc
    async def GetTask(self, request: pb.GetTaskRequest, context: grpc.aio.ServicerContext) -> pb.TaskReply:
        rec = self.node.state.get_task(request.name)
        if rec is None:
            raise NotFound(f"task {request.name!r} does not exist")
        return pb.TaskReply(task=rec)

    @rpc
    async def ListTasks(
        self, request: pb.ListTasksRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListTasksReply:
        return pb.ListTasksReply(tasks=self.node.state.list_tasks(request.prefix, request.limit))

    @rpc
    async def ListRuns(
        self, request: pb.ListRunsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListRunsReply:
        limit = request.limit or DEFAULT_LIST_LIMIT
        tasks = [request.task] if request.task else [t.spec.name for t in self.node.state.list_tasks()]
        if request.task and self.node.state.get_task(request.task) is None:
            raise NotFound(f"task {request.task!r} does not exist")
        with self.node.store.reader() as r:
            runs = queries.list_runs(r, tasks, request.since_ms, request.until_ms, request.state, limit)
        return pb.ListRunsReply(runs=runs)

    @rpc
    async def FireAccounting(
        self, request: pb.FireAccountingRequest, context: grpc.aio.ServicerContext
    ) -> pb.FireAccountingReply:
        if self.node.state.get_task(request.task) is None:
            raise NotFound(f"task {request.task!r} does not exist")
        limit = request.limit or 10 * DEFAULT_LIST_LIMIT
        out = pb.FireAccountingReply()
        with self.node.store.reader() as r:
            out.fires.extend(queries.fire_records(r, request.task, request.since_ms, request.until_ms, limit))
        return out

    @rpc
    async def Explain(self, request: pb.ExplainRequest, context: grpc.aio.ServicerContext) -> pb.ExplainReply:
        rec = self.node.state.get_task(request.task)
        if rec is None:
            raise NotFound(f"task {request.task!r} does not exist")
        with self.node.store.reader() as r:
            around, run = queries.fires_around(r, request.task, request.at_ms)
        return explain(rec, request.at_ms, around, run)

    # -- workflow reads -------------------------------------------------------------------------

    def _workflow(self, name: str, version: int = 0) -> pb.WorkflowRecord:
        rec = self.node.state.get_workflow(name, version)
        if rec is None:
            if version and self.node.state.get_workflow(name) is not None:
                raise NotFound(f"workflow {name!r} has no version {version}")
            raise NotFound(f"workflow {name!r} does not exist")
        return rec

    @rpc
    async def GetWorkflow(
        self, request: pb.GetWorkflowRequest, context: grpc.aio.ServicerContext
    ) -> pb.WorkflowReply:
        return pb.WorkflowReply(workflow=self._workflow(request.name, request.version))

    @rpc
    async def ListWorkflows(
        self, request: pb.ListWorkflowsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListWorkflowsReply:
        return pb.ListWorkflowsReply(workflows=self.node.state.list_workflows(request.prefix, request.limit))

    @rpc
    async def GetWorkflowRun(
        self, request: pb.GetWorkflowRunRequest, context: grpc.aio.ServicerContext
    ) -> pb.WorkflowRunReply:
        run = self.node.state.get_workflow_run(request.run_id)
        if run is None:
            raise NotFound(f"workflow run {request.run_id!r} does not exist")
        return pb.WorkflowRunReply(run=run)

    @rpc
    async def ListWorkflowRuns(
        self, request: pb.ListWorkflowRunsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListWorkflowRunsReply:
        self._workflow(request.workflow)
        runs = self.node.state.list_workflow_runs(
            request.workflow, request.limit or DEFAULT_WORKFLOW_RUNS, request.active_only
        )
        return pb.ListWorkflowRunsReply(runs=runs)

    @rpc
    async def GetBackfill(
        self, request: pb.GetBackfillRequest, context: grpc.aio.ServicerContext
    ) -> pb.BackfillReply:
        rec = self.node.state.get_backfill(request.backfill_id)
        if rec is None:
            raise NotFound(f"backfill {request.backfill_id!r} does not exist")
        return pb.BackfillReply(backfill=rec)

    @rpc
    async def ListBackfills(
        self, request: pb.ListBackfillsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListBackfillsReply:
        self._workflow(request.workflow)
        return pb.ListBackfillsReply(backfills=self.node.state.list_backfills(request.workflow))

    @rpc
    async def Lineage(self, request: pb.LineageRequest, context: grpc.aio.ServicerContext) -> pb.LineageReply:
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

    @rpc
    async def NodeStatus(
        self, request: pb.NodeStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.NodeStatusReply:
        return self.node.node_status(
            request.lateness_since_ms, request.include_digest, request.chain_at_index
        )

    @rpc
    async def ClusterStatus(
        self, request: pb.ClusterStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.ClusterStatusReply:
        return self.node.cluster_status()
