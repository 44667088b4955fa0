"""The Admin gRPC service (``grpc.aio``): thin handlers that decode, call the domain, encode.

Writes are accepted only by the leader, which stamps them (``raftsched.leader.writes``) and
proposes them; a follower answers ``FAILED_PRECONDITION`` with trailing metadata
``raftsched-leader: host:port`` and the SDK follows it. Reads are linearizable: answered by the
leader, the same way, once it has confirmed a read index (a read barrier committed after the read
arrived, shared by every read waiting: :mod:`raftsched.leader.reads`); a leader that cannot
confirm within the bound answers ``UNAVAILABLE`` "not sure I still lead; retry". A caller that
accepts stale reads sends metadata ``raftsched-allow-stale: 1`` and then any node answers from its
own applied state at once. Every read reply carries trailing metadata ``raftsched-read`` saying
which it was and, for a stale one, how far behind the node may be (:mod:`raftsched.readinfo`).
Status RPCs (NodeStatus, ClusterStatus, GetMembership, ListExecutors) report the answering
node's own view and are marked stale.

Reads never hold the state lock while they sort, parse or encode: committed data is read
through a store reader, in-memory data is copied under the lock and worked on outside it, and
the list RPCs run on a worker thread in pages (``page_size``, ``page_token``), so a crowd of
readers cannot hold up apply or the event loop that dispatches attempts.

Error contract: a gRPC status plus trailing metadata ``raftsched-code`` (see raftsched/errors.py
and :mod:`raftsched.rpc.plumbing`).
"""

from __future__ import annotations

import asyncio
import collections
import functools
import uuid
from collections.abc import AsyncIterator, Callable, Mapping, Sequence
from typing import Any, Protocol

import grpc

from raftsched import codec
from raftsched.alerts.delivery import delivery_view
from raftsched.backup import backup_stream
from raftsched.errors import (
    Conflict,
    InvalidSpec,
    NotFound,
    PermissionDenied,
    RaftschedError,
    Unavailable,
    quote,
)
from raftsched.explain import explain, explain_from_reads
from raftsched.fsm import keys, queries
from raftsched.fsm.access import audit_records
from raftsched.fsm.events import list_events
from raftsched.fsm.policy import QUOTA_KINDS, validate_pool, validate_quota
from raftsched.leader import writes
from raftsched.leader.dispatch.liveness import ExecutorHealth
from raftsched.model import validate_name
from raftsched.readinfo import READ_KEY, ReadInfo
from raftsched.rpc.plumbing import NodeServices, abort, caller, propose_and_wait, rpc
from raftsched.security import authz, tokens
from raftsched.security.auth import DEFAULT_NAMESPACE, Role
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc
from raftsched.workflow.dag import compile_dag, lineage
from raftsched.workflow.validate import workflow_version_conflict

MAX_BULK_TASKS = 10_000
DEFAULT_LIST_LIMIT = 1000
MAX_RECENT_FIRES = 100  # per task, ListTasks.recent_fires
DEFAULT_WORKFLOW_RUNS = 100
DEFAULT_PAGE_SIZE = 500
MAX_PAGE_SIZE = 5000
STALE_KEY = "raftsched-allow-stale"
# List reads that run at once on a node; more wait their turn. Reads and the apply and dispatch
# path share one interpreter lock on a node: 200 concurrent readers each holding a worker thread
# made runs finish late enough that per-second fires were skipped for overlap (bench/readers.py);
# one at a time served as many reads per second, faster, with no run finishing late.
MAX_CONCURRENT_READS = 1


def allows_stale(metadata: Sequence[tuple[str, str | bytes]] | None) -> bool:
    """Whether the call's invocation metadata accepts a stale (follower) read."""
    return any(k == STALE_KEY and v in ("1", "true", b"1", b"true") for k, v in metadata or ())


def page_size(requested: int, limit: int) -> int:
    """Rows in one page: the requested size (default, capped), never more than ``limit`` (0: none)."""
    size = min(requested or DEFAULT_PAGE_SIZE, MAX_PAGE_SIZE)
    return min(size, limit) if limit else size


def run_cursor(token: str) -> queries.RunCursor | None:
    """Decode a ListRuns page token (``<nominal_ms>:<run_id>``); empty means the first page."""
    if not token:
        return None
    nominal, sep, run_id = token.partition(":")
    if not sep or not run_id or not nominal.lstrip("-").isdigit() or len(token) > 1024:
        raise InvalidSpec("page_token", "not a token this service issued")
    return int(nominal), run_id


def run_token(run: pb.Run) -> str:
    return f"{run.nominal_ms}:{run.run_id}"


LiveExecutors = Callable[[], dict[str, tuple[int, str]] | None]
"""The leader's view of its executors, ``name -> (last heartbeat ms, peer address)``; None when
this node does not lead (see :meth:`raftsched.leader.dispatch.hub.ExecutorHub.live_view`)."""


class MembershipChanges(Protocol):
    """The node's membership operations (:class:`raftsched.server.membership.MembershipOps`)."""

    async def add(self, member: logpb.Member) -> tuple[logpb.MembershipRecord, str]: ...

    async def remove(self, node_id: str) -> tuple[logpb.MembershipRecord, str]: ...


class AdminServicer(pb_grpc.AdminServicer):  # type: ignore[misc]
    def __init__(
        self,
        node: NodeServices,
        live_executors: LiveExecutors | None = None,
        membership: MembershipChanges | None = None,
        executor_health: Callable[[], Mapping[str, ExecutorHealth]] | None = None,
    ) -> None:
        self.node = node
        self._live_executors = live_executors or (lambda: None)
        # What each executor last reported to this leader: clock offset, disk and log use.
        self._executor_health = executor_health or dict
        self._reads = asyncio.Semaphore(MAX_CONCURRENT_READS)
        self._membership = membership

    # -- membership ----------------------------------------------------------------------------

    def _changes(self) -> MembershipChanges:
        if self._membership is None:
            raise Unavailable("this node does not change membership (embedded without Raft)")
        return self._membership

    @rpc
    async def AddNode(
        self, request: pb.AddNodeRequest, context: grpc.aio.ServicerContext
    ) -> pb.MembershipReply:
        record, note = await self._changes().add(request.member)
        return pb.MembershipReply(membership=record, note=note)

    @rpc
    async def RemoveNode(
        self, request: pb.RemoveNodeRequest, context: grpc.aio.ServicerContext
    ) -> pb.MembershipReply:
        record, note = await self._changes().remove(request.id)
        return pb.MembershipReply(membership=record, note=note)

    @rpc
    async def GetMembership(
        self, request: pb.GetMembershipRequest, context: grpc.aio.ServicerContext
    ) -> pb.MembershipReply:
        self._stale(context)  # this node's own view, whoever asks
        return pb.MembershipReply(membership=self.node.state.membership.record)

    # -- writes --------------------------------------------------------------------------------

    def _stamp(self) -> dict[str, Any]:
        return self.node.gate.stamp().as_kwargs()

    async def _write(
        self,
        request: Any,
        build: Callable[[dict[str, Any]], bytes],
        method: str,
        target: str | None = None,
    ) -> logpb.CommandResult:
        fingerprint = codec.request_fingerprint(method, request)
        return await self._propose(codec.with_fingerprint(build(self._stamp()), fingerprint), target)

    async def _propose(self, data: bytes, target: str | None = None) -> logpb.CommandResult:
        if authz.auth_on():
            # Who asked, for the audit log (recorded by apply if the write is accepted).
            who = caller()
            cmd = codec.decode_command(data)
            cmd.audit.principal = who.principal.id
            cmd.audit.rpc = who.method
            cmd.audit.target = who.target if target is None else target
            data = codec.encode_command(cmd)
        return await propose_and_wait(self.node, data)

    def _task_namespace(self, name: str) -> None:
        """Refuse a call on an existing task outside the caller's namespaces (a missing task is
        left to the write or read itself to report)."""
        if not authz.auth_on():
            return
        workflow, internal, _ = name.partition("#")
        if internal:  # a workflow's internal task: its workflow's namespace
            self._workflow_namespace(workflow)
            return
        rec = self.node.state.get_task(name)
        if rec is not None:
            authz.require_namespace(rec.spec.namespace, f"task {quote(name)}")

    def _workflow_namespace(self, name: str) -> None:
        if not authz.auth_on():
            return
        rec = self.node.state.get_workflow(name)
        if rec is not None:
            authz.require_namespace(rec.spec.namespace, f"workflow {quote(name)}")

    @staticmethod
    def _key(key: str) -> str:
        if len(key) > 128:
            raise InvalidSpec("idempotency_key", "at most 128 characters")
        return key or uuid.uuid4().hex

    @rpc
    async def AddTask(self, request: pb.AddTaskRequest, context: grpc.aio.ServicerContext) -> pb.TaskReply:
        spec = codec.spec_from_pb(request.spec)
        authz.require_namespace(spec.namespace, f"task {quote(spec.name)}")
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
                spec = codec.spec_from_pb(req.spec)
                authz.require_namespace(spec.namespace, f"task {quote(spec.name)}")
                items.append((spec, req.disabled))
                positions.append(i)
            except (InvalidSpec, PermissionDenied) as exc:
                results[i] = pb.ItemResult(name=req.spec.name, ok=False, code=exc.code, message=str(exc))
        stamp = self._stamp()
        commands, refused = writes.create_tasks(items, key=key, **stamp)
        for j, problem in refused.items():
            i = positions[j]
            results[i] = pb.ItemResult(
                name=request.tasks[i].spec.name, ok=False, code=problem.code, message=str(problem)
            )
        fingerprint = codec.request_fingerprint("AddTasks", request)
        outcomes = await asyncio.gather(
            *(self._propose(codec.with_fingerprint(c, fingerprint)) for c in commands)
        )
        # Results are matched to request positions by name, not by counting: a repeat answers
        # with the outcomes the first call recorded, and the leader may have refused other items
        # this time (a one-shot time now past) or split the items into commands differently.
        slots: dict[str, collections.deque[int]] = {}
        proposed = [i for j, i in enumerate(positions) if j not in refused]
        for i in proposed + [positions[j] for j in sorted(refused)]:
            slots.setdefault(request.tasks[i].spec.name, collections.deque()).append(i)
        for outcome in outcomes:
            for item in outcome.items:
                free = slots.get(item.name)
                if free:
                    results[free.popleft()] = item
        for i in proposed:
            if results[i] is None:
                results[i] = pb.ItemResult(
                    name=request.tasks[i].spec.name,
                    ok=False,
                    code="unavailable",
                    message="no outcome was recorded for this item under the idempotency key "
                    "(read the task to see whether it exists)",
                )
        return pb.AddTasksReply(results=[r for r in results if r is not None])

    @rpc
    async def UpdateTask(
        self, request: pb.UpdateTaskRequest, context: grpc.aio.ServicerContext
    ) -> pb.TaskReply:
        spec = codec.spec_from_pb(request.spec)
        authz.require_namespace(spec.namespace, f"task {quote(spec.name)}")
        self._task_namespace(spec.name)
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
        self._task_namespace(request.name)
        key = self._key(request.idempotency_key)
        await self._write(
            request, method="DeleteTask", build=lambda s: writes.delete_task(request.name, key=key, **s)
        )
        return pb.DeleteTaskReply()

    @rpc
    async def SetEnabled(
        self, request: pb.SetEnabledRequest, context: grpc.aio.ServicerContext
    ) -> pb.TaskReply:
        self._task_namespace(request.name)
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
        self._task_namespace(request.name)
        key = self._key(request.idempotency_key)
        res = await self._write(
            request,
            method="TriggerNow",
            build=lambda s: writes.trigger_now(request.name, request.params_json, key=key, **s),
        )
        return pb.RunReply(run=res.run)

    @rpc
    async def RetryRun(self, request: pb.RetryRunRequest, context: grpc.aio.ServicerContext) -> pb.RunReply:
        self._task_namespace(request.run_id.partition("@")[0])
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
        # A workflow's own tasks are in its one namespace; a cross-workflow dependency reads the
        # upstream workflow's runs, so the writer must be allowed the upstream's namespace too.
        ns = request.spec.namespace or "default"
        if len(ns) > 128:
            raise InvalidSpec("namespace", "at most 128 characters")
        authz.require_namespace(ns, f"workflow {quote(request.spec.name)}")
        self._workflow_namespace(request.spec.name)
        for upstream in sorted({d.workflow for t in request.spec.tasks for d in t.depends_on if d.workflow}):
            self._workflow_namespace(upstream)
        key = self._key(request.idempotency_key)
        if len(request.spec.tasks) <= writes.STAGE_CHUNK_TASKS:
            res = await self._write(
                request,
                method="ApplyWorkflow",
                build=lambda s: writes.apply_workflow(
                    request.spec, key=key, expected_version=request.expected_version, **s
                ),
            )
            return pb.WorkflowReply(workflow=res.workflow, changed=res.changed)
        # A big workflow: checked on a worker thread (not on the loop the executors' streams
        # share), then applied chunk by chunk so that no single apply holds the state long.
        # An unchanged definition makes no version, as the state machine answers a small one.
        self.node.gate.require_leading()
        current = self.node.state.get_workflow(request.spec.name)
        at = current.version if current is not None else 0
        if request.expected_version and at != request.expected_version:
            raise Conflict(workflow_version_conflict(request.spec.name, at, request.expected_version))
        if current is not None and current.spec.SerializeToString(
            deterministic=True
        ) == request.spec.SerializeToString(deterministic=True):
            return pb.WorkflowReply(workflow=current, changed=False)
        stamp = self._stamp()
        commands = await asyncio.to_thread(
            functools.partial(
                writes.staged_workflow,
                request.spec,
                key=key,
                expected_version=request.expected_version,
                **stamp,
            )
        )
        for data in commands[:-1]:
            await propose_and_wait(self.node, data)  # raises if a chunk is refused
        fingerprint = codec.request_fingerprint("ApplyWorkflow", request)
        res = await self._propose(codec.with_fingerprint(commands[-1], fingerprint))
        return pb.WorkflowReply(workflow=res.workflow, changed=res.changed)

    @rpc
    async def StartWorkflowRun(
        self, request: pb.StartWorkflowRunRequest, context: grpc.aio.ServicerContext
    ) -> pb.WorkflowRunReply:
        self._workflow_namespace(request.workflow)
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
        self._workflow_namespace(request.run_id.partition("@")[0])
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
        self._workflow_namespace(request.workflow)
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

    @rpc
    async def SetWorkflowPaused(
        self, request: pb.SetWorkflowPausedRequest, context: grpc.aio.ServicerContext
    ) -> pb.WorkflowReply:
        self._workflow_namespace(request.name)
        key = self._key(request.idempotency_key)
        res = await self._write(
            request,
            method="SetWorkflowPaused",
            build=lambda s: writes.set_workflow_paused(
                self.node.state, request.name, request.paused, key=key, **s
            ),
        )
        return pb.WorkflowReply(workflow=res.workflow, changed=res.changed)

    @rpc
    async def DeleteWorkflow(
        self, request: pb.DeleteWorkflowRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteWorkflowReply:
        self._workflow_namespace(request.name)
        key = self._key(request.idempotency_key)
        res = await self._write(
            request,
            method="DeleteWorkflow",
            build=lambda s: writes.delete_workflow(
                self.node.state, request.name, request.force, request.reason, key=key, **s
            ),
        )
        return pb.DeleteWorkflowReply(workflow=res.workflow, runs_killed=res.runs_killed)

    # -- calendars ------------------------------------------------------------------------------

    def _calendar_users(self, name: str) -> list[str]:
        users = self.node.state.calendar_users(name)
        if not authz.auth_on() or caller().principal.every_namespace:
            return users
        seen = []
        for user in users:
            kind, _, who = user.partition(" ")
            rec = self.node.state.get_task(who) if kind == "task" else self.node.state.get_workflow(who)
            if rec is not None and authz.visible(rec.spec.namespace):
                seen.append(user)
        return seen

    @rpc
    async def SetCalendar(
        self, request: pb.SetCalendarRequest, context: grpc.aio.ServicerContext
    ) -> pb.CalendarReply:
        key = self._key(request.idempotency_key)
        res = await self._write(
            request,
            method="SetCalendar",
            build=lambda s: writes.set_calendar(request.spec, key=key, **s),
            target=request.spec.name,
        )
        return pb.CalendarReply(calendar=res.calendar, used_by=self._calendar_users(request.spec.name))

    @rpc
    async def DeleteCalendar(
        self, request: pb.DeleteCalendarRequest, context: grpc.aio.ServicerContext
    ) -> pb.DeleteCalendarReply:
        key = self._key(request.idempotency_key)
        await self._write(
            request,
            method="DeleteCalendar",
            build=lambda s: writes.delete_calendar(self.node.state, request.name, key=key, **s),
        )
        return pb.DeleteCalendarReply()

    @rpc
    async def GetCalendar(
        self, request: pb.GetCalendarRequest, context: grpc.aio.ServicerContext
    ) -> pb.CalendarReply:
        await self._consistent(context)
        rec = self.node.state.get_calendar(request.name)
        if rec is None:
            raise NotFound(f"calendar {request.name!r} does not exist")
        return pb.CalendarReply(calendar=rec, used_by=self._calendar_users(request.name))

    @rpc
    async def ListCalendars(
        self, request: pb.ListCalendarsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListCalendarsReply:
        await self._consistent(context)
        return pb.ListCalendarsReply(calendars=self.node.state.list_calendars())

    # -- events --------------------------------------------------------------------------------

    @rpc
    async def EmitEvent(
        self, request: pb.EmitEventRequest, context: grpc.aio.ServicerContext
    ) -> pb.EmitEventReply:
        namespace = request.namespace or DEFAULT_NAMESPACE
        authz.require_namespace(namespace, f"event {quote(request.name)}")
        key = self._key(request.idempotency_key)
        res = await self._write(
            request,
            method="EmitEvent",
            build=lambda s: writes.emit_event(
                request.name, request.key, request.payload_json, namespace, key=key, **s
            ),
            target=request.name,
        )
        return pb.EmitEventReply(event=res.event, duplicate=res.duplicate)

    @rpc
    async def ListEvents(
        self, request: pb.ListEventsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListEventsReply:
        await self._consistent(context)
        limit = request.limit or DEFAULT_LIST_LIMIT
        with self.node.store.reader() as r:
            records = list_events(r, request.name, limit)
        if authz.auth_on() and not caller().principal.every_namespace:
            records = [e for e in records if authz.visible(e.namespace)]
        return pb.ListEventsReply(events=records)

    # -- pools ---------------------------------------------------------------------------------

    @rpc
    async def SetPool(self, request: pb.SetPoolRequest, context: grpc.aio.ServicerContext) -> pb.PoolReply:
        validate_pool(request.pool)  # refused here with the field, before anything is proposed
        key = self._key(request.idempotency_key)
        res = await self._write(
            request,
            method="SetPool",
            build=lambda s: writes.set_pool(request.pool, key=key, **s),
            target=request.pool.name,
        )
        return pb.PoolReply(pool=res.pool)

    @rpc
    async def DeletePool(
        self, request: pb.DeletePoolRequest, context: grpc.aio.ServicerContext
    ) -> pb.PoolReply:
        validate_name(request.name, "pool.name")
        key = self._key(request.idempotency_key)
        res = await self._write(
            request,
            method="DeletePool",
            build=lambda s: writes.delete_pool(request.name, key=key, **s),
            target=request.name,
        )
        return pb.PoolReply(pool=res.pool)

    @rpc
    async def ListPools(
        self, request: pb.ListPoolsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListPoolsReply:
        await self._consistent(context)
        reply = pb.ListPoolsReply()
        for view in self.node.state.pools():
            reply.pools.add(
                pool=view.pool, used=len(view.holders), waiting=view.waiting, holders=view.holders
            )
        return reply

    # -- task backfills --------------------------------------------------------------------------

    @rpc
    async def BackfillTask(
        self, request: pb.TaskBackfillRequest, context: grpc.aio.ServicerContext
    ) -> pb.BackfillReply:
        self._task_namespace(request.task)
        key = self._key(request.idempotency_key)
        res = await self._write(
            request,
            method="BackfillTask",
            build=lambda s: writes.start_task_backfill(
                self.node.state,
                request.task,
                request.from_ms,
                request.to_ms,
                request.params_json,
                key=key,
                **s,
            ),
            target=request.task,
        )
        return pb.BackfillReply(backfill=res.backfill)

    # -- cancel (issue 29 §1) ---------------------------------------------------------------------

    @rpc
    async def CancelRun(self, request: pb.CancelRunRequest, context: grpc.aio.ServicerContext) -> pb.RunReply:
        """Cancel one unfinished run (or one shard of it): the permission of a trigger
        (``runs.operate``) in the task's namespace."""
        self._task_namespace(request.run_id.partition("@")[0])
        key = self._key(request.idempotency_key)
        shard = request.shard if request.HasField("shard") else None
        res = await self._write(
            request,
            method="CancelRun",
            build=lambda s: writes.cancel_run(request.run_id, request.reason, shard=shard, key=key, **s),
        )
        return pb.RunReply(run=res.run)

    @rpc
    async def CancelRuns(
        self, request: pb.CancelRunsRequest, context: grpc.aio.ServicerContext
    ) -> pb.CancelRunsReply:
        """Cancel every unfinished run of a task, namespace or owner (a dry run lists them). The
        leader picks the runs from its state; runs in namespaces the caller may not use are left
        out (a task or namespace named outright is refused instead)."""
        given = [f for f in ("task", "namespace", "owner") if getattr(request, f)]
        if len(given) != 1:
            raise InvalidSpec("task", "give exactly one of task, namespace or owner")
        if request.state not in ("", *writes.CANCEL_STATES):
            raise InvalidSpec("state", f"{quote(request.state)}: one of {', '.join(writes.CANCEL_STATES)}")
        if len(request.reason.encode("utf-8")) > writes.MAX_REASON_BYTES:
            raise InvalidSpec("reason", f"at most {writes.MAX_REASON_BYTES} bytes")
        if request.task:
            self._task_namespace(request.task)
            if self.node.state.get_task(request.task) is None:
                raise NotFound(f"task {quote(request.task)} does not exist")
        if request.namespace and authz.auth_on():
            authz.require_namespace(request.namespace, f"namespace {quote(request.namespace)}")
        self.node.gate.require_leading()
        with self.node.state.view() as v:
            found = v.cancellable_runs(request.task, request.namespace, request.owner, request.state)
        run_ids = [run_id for run_id, ns in found if not authz.auth_on() or authz.visible(ns)]
        if request.dry_run or not run_ids:
            return pb.CancelRunsReply(run_ids=run_ids, dry_run=request.dry_run)
        key = self._key(request.idempotency_key)
        fingerprint = codec.request_fingerprint("CancelRuns", request)
        commands = writes.cancel_runs(run_ids, request.reason, skip_finished=True, key=key, **self._stamp())
        cancelled: list[str] = []
        for data in commands:
            res = await self._propose(codec.with_fingerprint(data, fingerprint))
            cancelled.extend(res.cancelled_runs)
        return pb.CancelRunsReply(run_ids=cancelled)

    # -- reads ---------------------------------------------------------------------------------

    async def _consistent(self, context: grpc.aio.ServicerContext) -> None:
        """Make this read linearizable, or say how stale it may be.

        A caller that accepts stale reads is answered from this node's state at once, with a
        ``raftsched-read: stale ...`` trailer saying how far behind it may be. Any other read
        is answered by the leader only (a follower redirects it) after the leader confirmed a
        read index (:mod:`raftsched.leader.reads`); a leader that cannot confirm within the bound
        refuses it as ``unavailable`` ("not sure I still lead; retry"), never with stale data."""
        if allows_stale(context.invocation_metadata()):
            self._stale(context)
            return
        self.node.gate.require_leading()
        index = await self.node.reads.confirm()
        context.set_trailing_metadata(((READ_KEY, ReadInfo(True, self.node.node_id, index).header()),))

    def _stale(self, context: grpc.aio.ServicerContext) -> None:
        """Mark a reply as this node's own view (a stale read, or a node-local status)."""
        context.set_trailing_metadata(((READ_KEY, self.node.stale_read_info().header()),))

    @rpc
    async def GetTask(self, request: pb.GetTaskRequest, context: grpc.aio.ServicerContext) -> pb.TaskReply:
        await self._consistent(context)
        return pb.TaskReply(task=self._task(request.name))

    @rpc
    async def ListTasks(
        self, request: pb.ListTasksRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListTasksReply:
        await self._consistent(context)
        size = page_size(request.page_size, request.limit)
        every = not authz.auth_on() or caller().principal.every_namespace

        # Task records are in memory (the store may not hold the newest write yet): the state
        # copies names and the page's bytes under its lock; the rest runs on a worker thread.
        # A caller limited to some namespaces gets pages of the tasks it may see: the scan goes
        # on past hidden ones until the page is full, and the token names the last one scanned.
        def read() -> tuple[list[pb.TaskRecord], str]:
            out: list[pb.TaskRecord] = []
            after = request.page_token
            while True:
                recs, more = self.node.state.list_tasks_page(request.prefix, after, size)
                for i, rec in enumerate(recs):
                    if every or authz.visible(rec.spec.namespace):
                        out.append(rec)
                        if len(out) == size:
                            last = i == len(recs) - 1
                            return out, rec.spec.name if (more or not last) else ""
                if not more or not recs:
                    return out, ""
                after = recs[-1].spec.name

        def recent(reply: pb.ListTasksReply) -> None:
            # One read for a page of tasks with their recent fires (the console's task list).
            count = min(request.recent_fires, MAX_RECENT_FIRES)
            # The state's own runs first (no stored record yet, or not committed), then the store.
            names = [rec.spec.name for rec in reply.tasks]
            mine, _ = self.node.state.runs_in_memory(names, 0, 0, 0)
            with self.node.store.reader() as r:
                for rec in reply.tasks:
                    fires = reply.recent.add(task=rec.spec.name)
                    live = [run for run in mine if run.task == rec.spec.name]
                    for fire, state in queries.recent_fires(r, rec.spec.name, count, live):
                        fires.fires.append(fire)
                        fires.run_states.append(state)  # type: ignore[arg-type]  # a RunState value

        async with self._reads:
            recs, token = await asyncio.to_thread(read)
            reply = pb.ListTasksReply(tasks=recs, next_page_token=token)
            if request.recent_fires:
                await asyncio.to_thread(recent, reply)
        return reply

    @rpc
    async def ListRuns(
        self, request: pb.ListRunsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListRunsReply:
        await self._consistent(context)
        size = page_size(request.page_size, request.limit or DEFAULT_LIST_LIMIT)
        before = run_cursor(request.page_token)
        if request.task:
            self._task(request.task)
        every = not authz.auth_on() or caller().principal.every_namespace

        def read() -> list[pb.Run]:
            if request.task:
                tasks = [request.task]
            elif every:
                tasks = self.node.state.user_task_names()
            else:
                tasks = [t.spec.name for t in self.node.state.list_tasks() if authz.visible(t.spec.namespace)]
            # Live runs of the columnar hot path have no stored record yet (raftsched.fsm.hot),
            # and a run that just ended has its record in the applier's uncommitted batch: read
            # those first, then the store (SchedulerState.runs_in_memory).
            live, seen = self.node.state.runs_in_memory(
                tasks, request.since_ms, request.until_ms, request.state
            )
            with self.node.store.reader() as r:
                runs = queries.list_runs(
                    r, tasks, request.since_ms, request.until_ms, request.state, size + 1 + len(seen), before
                )
            if before is not None:
                live = [run for run in live if (run.nominal_ms, run.run_id) < before]
            if not seen:
                return runs[: size + 1]
            runs = [run for run in runs if run.run_id not in seen]
            runs = sorted([*runs, *live], key=lambda x: (x.nominal_ms, x.run_id), reverse=True)
            return runs[: size + 1]

        async with self._reads:
            runs = await asyncio.to_thread(read)
        more = len(runs) > size
        runs = runs[:size]
        return pb.ListRunsReply(runs=runs, next_page_token=run_token(runs[-1]) if more and runs else "")

    @rpc
    async def GetRun(self, request: pb.GetRunRequest, context: grpc.aio.ServicerContext) -> pb.RunReply:
        """One stored run (active or retained) with its timeline and output tails."""
        await self._consistent(context)
        run = None
        if "@" in request.run_id:
            try:  # (a live run of the columnar hot path has no stored record yet: read_run)
                run = self.node.state.read_run(request.run_id)
            except ValueError:  # not a run id (its nominal part is not a number)
                run = None
        if run is None or not authz.visible(self.node.state.task_namespace(run.task)):
            raise NotFound(f"run {request.run_id!r} does not exist (or its history was pruned)")
        return pb.RunReply(run=run)

    @rpc
    async def FireAccounting(
        self, request: pb.FireAccountingRequest, context: grpc.aio.ServicerContext
    ) -> pb.FireAccountingReply:
        await self._consistent(context)
        self._task(request.task)
        limit = request.limit or 10 * DEFAULT_LIST_LIMIT
        out = pb.FireAccountingReply()
        live, _ = self.node.state.runs_in_memory([request.task], 0, 0, 0)  # no stored record yet
        with self.node.store.reader() as r:
            out.fires.extend(
                queries.fire_records(
                    r, request.task, request.since_ms, request.until_ms, limit, request.newest, live
                )
            )
        return out

    @rpc
    async def Explain(self, request: pb.ExplainRequest, context: grpc.aio.ServicerContext) -> pb.ExplainReply:
        await self._consistent(context)
        rec = self._task(request.task)
        live, _ = self.node.state.runs_in_memory([request.task], 0, 0, 0)  # no stored record yet
        with self.node.store.reader() as r:
            around, run = queries.fires_around(r, request.task, request.at_ms, live)
        calendars = [c for n in rec.spec.exclude if (c := self.node.state.calendar_for(n)) is not None]
        return explain(rec, request.at_ms, around, run, calendars, now_ms=self.node.gate.now_ms())

    @rpc
    async def ExplainWorkflowTask(
        self, request: pb.ExplainWorkflowTaskRequest, context: grpc.aio.ServicerContext
    ) -> pb.ExplainWorkflowTaskReply:
        await self._consistent(context)

        def readable(name: str) -> bool:
            try:
                self._workflow(name)
            except NotFound:
                return False
            return True

        got = explain_from_reads(
            self.node.state, request.run_id, request.task, self.node.gate.now_ms(), readable
        )
        return got.to_reply()

    # -- workflow reads -------------------------------------------------------------------------

    def _task(self, name: str) -> pb.TaskRecord:
        """Task ``name`` if it exists and the caller may see it; NotFound otherwise (a task in
        another namespace is reported as missing, not as forbidden: its name is not disclosed)."""
        rec = self.node.state.get_task(name)
        if rec is None or not authz.visible(rec.spec.namespace):
            raise NotFound(f"task {quote(name)} does not exist")
        return rec

    def _workflow(self, name: str, version: int = 0) -> pb.WorkflowRecord:
        rec = self.node.state.get_workflow(name, version)
        current = self.node.state.get_workflow(name) if rec is not None and version else rec
        if current is not None and not authz.visible(current.spec.namespace):
            rec = None
            version = 0
        if rec is None:
            if version and self.node.state.get_workflow(name) is not None:
                raise NotFound(f"workflow {quote(name)} has no version {version}")
            raise NotFound(f"workflow {quote(name)} does not exist")
        return rec

    @rpc
    async def GetWorkflow(
        self, request: pb.GetWorkflowRequest, context: grpc.aio.ServicerContext
    ) -> pb.WorkflowReply:
        await self._consistent(context)
        return pb.WorkflowReply(workflow=self._workflow(request.name, request.version))

    @rpc
    async def ListWorkflows(
        self, request: pb.ListWorkflowsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListWorkflowsReply:
        await self._consistent(context)
        if not authz.auth_on() or caller().principal.every_namespace:
            return pb.ListWorkflowsReply(
                workflows=self.node.state.list_workflows(request.prefix, request.limit)
            )
        seen = [
            w for w in self.node.state.list_workflows(request.prefix, 0) if authz.visible(w.spec.namespace)
        ]
        return pb.ListWorkflowsReply(workflows=seen[: request.limit] if request.limit else seen)

    @rpc
    async def GetWorkflowRun(
        self, request: pb.GetWorkflowRunRequest, context: grpc.aio.ServicerContext
    ) -> pb.WorkflowRunReply:
        await self._consistent(context)
        run = self.node.state.get_workflow_run(request.run_id)
        if run is not None:
            try:
                self._workflow(run.workflow)
            except NotFound:
                run = None
        if run is None:
            raise NotFound(f"workflow run {quote(request.run_id)} does not exist")
        return pb.WorkflowRunReply(run=run)

    @rpc
    async def ListWorkflowRuns(
        self, request: pb.ListWorkflowRunsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListWorkflowRunsReply:
        await self._consistent(context)
        self._workflow(request.workflow)
        runs = self.node.state.list_workflow_runs(
            request.workflow, request.limit or DEFAULT_WORKFLOW_RUNS, request.active_only
        )
        return pb.ListWorkflowRunsReply(runs=runs)

    @rpc
    async def GetBackfill(
        self, request: pb.GetBackfillRequest, context: grpc.aio.ServicerContext
    ) -> pb.BackfillReply:
        await self._consistent(context)
        rec = self.node.state.get_backfill(request.backfill_id)
        if rec is not None:
            try:
                self._task(rec.task) if rec.task else self._workflow(rec.workflow)
            except NotFound:
                rec = None
        if rec is None:
            raise NotFound(f"backfill {quote(request.backfill_id)} does not exist")
        return pb.BackfillReply(backfill=rec)

    @rpc
    async def ListBackfills(
        self, request: pb.ListBackfillsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListBackfillsReply:
        await self._consistent(context)
        if request.task:
            self._task(request.task)
            return pb.ListBackfillsReply(backfills=self.node.state.list_task_backfills(request.task))
        self._workflow(request.workflow)
        return pb.ListBackfillsReply(backfills=self.node.state.list_backfills(request.workflow))

    @rpc
    async def Lineage(self, request: pb.LineageRequest, context: grpc.aio.ServicerContext) -> pb.LineageReply:
        await self._consistent(context)
        rec = self._workflow(request.workflow, request.version)
        dag = compile_dag(rec.spec)
        if request.task not in dag.index:
            raise NotFound(
                f"workflow {quote(request.workflow)} (version {rec.version}) "
                f"has no task {quote(request.task)}"
            )
        return pb.LineageReply(
            upstream=[pb.LineageEntry(task=t, depth=d) for t, d in lineage(dag, request.task, "up")],
            downstream=[pb.LineageEntry(task=t, depth=d) for t, d in lineage(dag, request.task, "down")],
        )

    # -- tokens and the audit log (admin only: see raftsched.security.authz.TABLE) -------------

    @rpc
    async def CreateToken(
        self, request: pb.CreateTokenRequest, context: grpc.aio.ServicerContext
    ) -> pb.TokenReply:
        try:
            role = Role(request.role)
        except ValueError:
            raise InvalidSpec(
                "role", f"{quote(request.role)} is not one of {', '.join(r.value for r in Role)}"
            ) from None
        tokens.parse_token(request.token)  # before any work; the message never echoes it
        key = self._key(request.idempotency_key)
        creator = caller().principal.id
        loop = asyncio.get_running_loop()
        # scrypt takes tens of milliseconds: off the event loop.
        body = await loop.run_in_executor(
            None,
            lambda: tokens.create_command(
                request.token,
                role,
                list(request.namespaces),
                ttl_ms=request.ttl_ms,
                description=request.description,
                created_by=creator,
            ),
        )

        def build(stamp: dict[str, Any]) -> bytes:
            cmd = logpb.Command(idempotency_key=key, **stamp)
            cmd.create_token.CopyFrom(body)
            return codec.encode_command(cmd)

        # The secret stays out of the fingerprint (it is kept with the key); its public id stands in.
        plain = pb.CreateTokenRequest()
        plain.CopyFrom(request)
        plain.token = body.info.id
        res = await self._write(plain, build, method="CreateToken", target=body.info.id)
        return pb.TokenReply(token=res.token)

    @rpc
    async def ListTokens(
        self, request: pb.ListTokensRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListTokensReply:
        await self._consistent(context)
        out = pb.ListTokensReply()
        for rec in self.node.state.access.records():
            tid = rec.info.id
            info = out.tokens.add()
            info.CopyFrom(rec.info)
            info.last_used_ms = self.node.token_last_used(tid)
        return out

    @rpc
    async def RevokeToken(
        self, request: pb.RevokeTokenRequest, context: grpc.aio.ServicerContext
    ) -> pb.TokenReply:
        key = self._key(request.idempotency_key)

        def build(stamp: dict[str, Any]) -> bytes:
            cmd = logpb.Command(idempotency_key=key, **stamp)
            cmd.revoke_token.id = request.id
            return codec.encode_command(cmd)

        res = await self._write(request, build, method="RevokeToken")
        return pb.TokenReply(token=res.token)

    @rpc
    async def ListAudit(
        self, request: pb.ListAuditRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListAuditReply:
        await self._consistent(context)
        limit = request.limit or DEFAULT_LIST_LIMIT
        with self.node.store.reader() as r:
            records = audit_records(r, request.since_ms, request.principal, limit)
        return pb.ListAuditReply(records=records)

    @rpc
    async def ListAlerts(
        self, request: pb.ListAlertsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListAlertsReply:
        await self._consistent(context)
        infos = delivery_view(
            self.node.store, self.node.config.alerts, request.since_ms, request.limit or DEFAULT_LIST_LIMIT
        )
        if authz.auth_on() and not caller().principal.every_namespace:
            # A workflow's events carry no namespace; a caller limited to namespaces sees its own.
            infos = [i for i in infos if i.alert.namespace and authz.visible(i.alert.namespace)]
        return pb.ListAlertsReply(alerts=infos)

    @rpc
    async def AckAlert(
        self, request: pb.AckAlertRequest, context: grpc.aio.ServicerContext
    ) -> pb.AckAlertReply:
        key = self._key(request.idempotency_key)
        res = await self._write(
            request, method="AckAlert", build=lambda s: writes.ack_alert(request.id, key=key, **s)
        )
        return pb.AckAlertReply(alert=res.alert)

    @rpc
    async def SetQuota(self, request: pb.SetQuotaRequest, context: grpc.aio.ServicerContext) -> pb.QuotaReply:
        validate_quota(request.quota)  # refused here with the field, before anything is proposed
        key = self._key(request.idempotency_key)

        def build(stamp: dict[str, Any]) -> bytes:
            return writes.set_quota(request.quota, key=key, **stamp)

        res = await self._write(
            request, build, "SetQuota", target=f"{request.quota.kind} {request.quota.name}"
        )
        return pb.QuotaReply(quota=res.quota)

    @rpc
    async def DeleteQuota(
        self, request: pb.DeleteQuotaRequest, context: grpc.aio.ServicerContext
    ) -> pb.QuotaReply:
        if request.kind not in QUOTA_KINDS:
            raise InvalidSpec("quota.kind", f"{request.kind!r} is not one of owner, namespace")
        key = self._key(request.idempotency_key)

        def build(stamp: dict[str, Any]) -> bytes:
            return writes.delete_quota(request.kind, request.name, key=key, **stamp)

        res = await self._write(request, build, "DeleteQuota", target=f"{request.kind} {request.name}")
        return pb.QuotaReply(quota=res.quota)

    @rpc
    async def ListQuotas(
        self, request: pb.ListQuotasRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListQuotasReply:
        await self._consistent(context)
        return pb.ListQuotasReply(quotas=self.node.state.quotas())

    @rpc
    async def ListLocks(
        self, request: pb.ListLocksRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListLocksReply:
        await self._consistent(context)
        reply = pb.ListLocksReply()
        for view in self.node.state.locks():
            info = reply.locks.add(name=view.name)
            for user in view.holders:
                info.holders.add(**user._asdict())
            for user in view.waiters:
                info.waiters.add(**user._asdict())
        return reply

    @rpc
    async def ListExecutors(
        self, request: pb.ListExecutorsRequest, context: grpc.aio.ServicerContext
    ) -> pb.ListExecutorsReply:
        self._stale(context)  # this node's own view, whoever asks
        live = self._live_executors()
        reply = pb.ListExecutorsReply(node_id=self.node.node_id, leader_view=live is not None)
        with self.node.state.view() as v:
            rows = [(rec, used, v.usage_of(rec.name)) for rec, used in v.executor_usage(request.include_left)]
        health = self._executor_health() if live is not None else {}
        for rec, used, held in rows:
            reply.executors.append(_executor_info(rec, used, live, held, health.get(rec.name)))
        return reply

    @rpc
    async def DrainExecutor(
        self, request: pb.DrainExecutorRequest, context: grpc.aio.ServicerContext
    ) -> pb.DrainExecutorReply:
        key = self._key(request.idempotency_key)
        await self._write(
            request,
            method="DrainExecutor",
            build=lambda s: writes.drain_executor(request.name, request.reason, key=key, **s),
            target=request.name,
        )
        live = self._live_executors()
        for rec, used in self.node.state.executor_usage():
            if rec.name == request.name:
                return pb.DrainExecutorReply(executor=_executor_info(rec, used, live))
        raise NotFound(f"executor {quote(request.name)} left meanwhile")

    async def Backup(
        self, request: pb.BackupRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.BackupChunk]:
        """A consistent snapshot of this node's committed state (any node): the image is read
        in one read transaction, with the applied index committed with it, off the event loop."""
        node = self.node
        status = node.node_status()

        def encode() -> list[pb.BackupChunk]:
            # Read and encode off the event loop: a big state takes a while.
            with node.store.reader() as r:
                index, items = r.applied_index(), list(r.scan(b"", keys.LOCAL_PREFIX))
            stream = backup_stream(
                items, log_index=index, term=status.term, node_id=node.node_id, now_ms=node.gate.now_ms()
            )
            return list(stream)

        try:
            chunks = await asyncio.to_thread(encode)
        except RaftschedError as exc:
            await abort(context, exc)
        for chunk in chunks:
            yield chunk

    @rpc
    async def NodeStatus(
        self, request: pb.NodeStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.NodeStatusReply:
        self._stale(context)  # this node's own view, whoever asks
        return self.node.node_status(
            request.lateness_since_ms, request.include_digest, request.chain_at_index
        )

    @rpc
    async def ClusterStatus(
        self, request: pb.ClusterStatusRequest, context: grpc.aio.ServicerContext
    ) -> pb.ClusterStatusReply:
        self._stale(context)  # this node's own view, whoever asks
        return self.node.cluster_status()


def _executor_info(
    rec: logpb.ExecutorRecord,
    used: int,
    live: dict[str, tuple[int, str]] | None,
    held: tuple[int, float, int] = (0, 0.0, 0),
    health: ExecutorHealth | None = None,
) -> pb.ExecutorInfo:
    """``held``: slots, declared cpu and memory its running attempts hold (the state's usage);
    ``health``: what it last reported to this leader (None: nothing, or not the leader)."""
    beat, peer = live.get(rec.name, (0, "")) if live is not None and rec.alive else (0, "")
    if not rec.alive:
        state = pb.EXECUTOR_LEFT
    elif rec.draining:
        state = pb.EXECUTOR_DRAINED if used == 0 else pb.EXECUTOR_DRAINING
    else:
        state = pb.EXECUTOR_ALIVE
    info = pb.ExecutorInfo(
        name=rec.name,
        state=state,
        slots=rec.slots,
        slots_used=used,
        labels=rec.labels,
        joined_ms=rec.joined_ms,
        left_ms=rec.left_ms,
        left_reason=rec.left_reason,
        last_heartbeat_ms=beat,
        address=peer,
        draining_ms=rec.draining_ms if rec.alive else 0,
        draining_reason=rec.draining_reason if rec.alive else "",
        cpu=rec.cpu,
        memory_mb=rec.memory_mb,
        cpu_used=held[1],
        memory_used_mb=held[2],
        health_drain=rec.alive and rec.draining and rec.health_drain,
    )
    if health is not None and rec.alive:
        info.disk_used, info.log_used = health.disk_used, health.log_used
        if health.clock_offset_ms is not None:
            info.clock_offset_ms = health.clock_offset_ms
    return info
