"""The typed, synchronous gRPC SDK: :class:`Client` talks to a raftsched cluster's Admin service.

Contract
    * Every write (add, update, delete, enable, disable, trigger) carries an idempotency key drawn
      once per call and reused on every retry of that call. A retry after a timeout, a leader change
      or an unknown outcome therefore applies at most once (for as long as the cluster remembers
      keys, ``scheduler.idempotency_keep_seconds``).
    * A node that is not the leader answers a write with ``not_leader`` and, when it knows one, the
      leader's address; the client follows that hint at once (adding the address to its targets if
      it is new). Reads are answered by the leader; a read refused with ``not_leader`` is
      redirected the same way. Reads are linearizable: the leader answers once a read barrier
      committed after the read arrived confirms it still leads (a read sees every write
      acknowledged before it); a leader that cannot confirm answers UNAVAILABLE ("not sure I
      still lead; retry") and the call moves to the next target. With ``stale_reads=True`` (on
      the client, or ``stale=True`` on one call) any node answers from its local state at once,
      which may lag the leader (a few milliseconds, more while a node catches up or is cut off):
      this spreads read load over the followers. :attr:`Client.last_read` says how fresh the
      calling thread's last read was (for a stale one: the node's applied index against the
      newest commit index it had heard of, and how long since it heard from the leader).
    * ``list_tasks`` and ``runs`` fetch pages (``page_size`` rows each) until ``limit`` rows or the
      end; each page is one RPC, so a long listing never holds a node up in one call.
    * UNAVAILABLE, a deadline, ``not_leader`` without a hint, ``unavailable`` and ``stale_epoch`` (a
      deposed leader stamped the write) move the call to the next target after a short backoff
      (50 ms doubling to 1 s). A call makes at most ``1 + retries`` attempts, then raises
      :class:`~raftsched.errors.Unavailable` naming every target tried and the last error.
    * Every other error is raised at once as its :mod:`raftsched.errors` exception
      (:class:`~raftsched.errors.NotFound`, :class:`~raftsched.errors.InvalidSpec`, ...).
    * Input the model can check (names, params) is validated locally, before any RPC.
    * ``tls=TlsConfig(...)`` dials over TLS (a client certificate too, for mutual TLS); without it
      the client dials plaintext. A handshake that fails for a reason retrying cannot fix
      (plaintext against a TLS port or the reverse, an untrusted server certificate, a client
      certificate missing or refused) raises :class:`~raftsched.errors.TlsError` at once, naming
      the address and what to pass, instead of being retried.

Threading: a client may be shared between threads; each call is independent. One gRPC channel per
target is opened lazily and kept until :meth:`Client.close`.
"""

from __future__ import annotations

import datetime as dt
import json
import os
import re
import threading
import time
import uuid
from collections.abc import Callable, Generator, Iterable, Mapping, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final

import grpc
from google.protobuf.message import Message

from raftsched import codec
from raftsched.bounds import MAX_POOL_SLOTS
from raftsched.config.values import parse_address
from raftsched.errors import (
    AlreadyExists,
    Conflict,
    InvalidSpec,
    InvalidWorkflow,
    NotFound,
    NotLeader,
    RaftschedError,
    StaleEpoch,
    TlsError,
    Unavailable,
    error_for_code,
)
from raftsched.explain import WorkflowTaskExplanation, wait_rows
from raftsched.fsm.events import check_event
from raftsched.fsm.policy import parse_rate, validate_pool, validate_quota
from raftsched.model import MAX_TIME_MS, RunState, TaskSpec, validate_name, validate_params
from raftsched.readinfo import ReadInfo
from raftsched.security.tls import TlsConfig, diagnose_handshake, speaks_tls, sync_channel
from raftsched.security.tokens import BearerInterceptor, new_token, resolve_token, token_id
from raftsched.timing import calendar as calendar_mod
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc
from raftsched.workflow.dag import LINEAGE_MAX_DEPTH, CrossNode, cross_workflow_lineage

__all__ = ["WORKFLOW_FINISHED", "Client", "ClusterView", "NodeView", "params_to_json", "to_epoch_ms"]

CODE_KEY: Final = "raftsched-code"
LEADER_KEY: Final = "raftsched-leader"
_STALE_METADATA: Final = (("raftsched-allow-stale", "1"),)
DEFAULT_RUNS_LIMIT: Final = 1000

_BACKOFF_INITIAL_S: Final = 0.05
_BACKOFF_MAX_S: Final = 1.0
# The generated gRPC module is untyped (or Any when mypy does not analyse it); one Any-typed handle
# keeps calls into it type-clean either way.
_GENERATED: Any = pb_grpc
# The one place the client waits; a module attribute so tests can record backoffs instead of waiting.
_sleep: Callable[[float], None] = time.sleep
_PROBE_INTERVAL_S: Final = 5.0  # at most one TLS probe per target in this long
_BULK_RETRIES = 5  # rounds of resending the items of a bulk import refused as "unavailable"
_monotonic: Callable[[], float] = time.monotonic

# Errors after which another node (or the same one a little later) may succeed.
_RETRY_CODES: Final = frozenset({NotLeader.code, Unavailable.code, StaleEpoch.code})
_RETRY_STATUS: Final = frozenset({grpc.StatusCode.UNAVAILABLE, grpc.StatusCode.DEADLINE_EXCEEDED})
# For a server that answers without ``raftsched-code`` (a proxy, a crash before the handler ran).
_STATUS_ERRORS: Final[dict[grpc.StatusCode, Callable[[str], RaftschedError]]] = {
    grpc.StatusCode.NOT_FOUND: NotFound,
    grpc.StatusCode.ALREADY_EXISTS: AlreadyExists,
    grpc.StatusCode.ABORTED: Conflict,
    grpc.StatusCode.INVALID_ARGUMENT: lambda details: error_for_code(InvalidSpec.code, details),
}


@dataclass(frozen=True, slots=True)
class NodeView:
    """What one target said about itself: its status, or why it could not be asked."""

    target: str
    status: pb.NodeStatusReply | None
    error: str = ""

    @property
    def reachable(self) -> bool:
        return self.status is not None


@dataclass(frozen=True, slots=True)
class ClusterView:
    """The cluster as seen by asking every target for its NodeStatus at (about) the same time.

    ``leader_id``/``leader_addr`` are empty when no reachable node at the newest ``term`` knows a
    leader. ``commit_index`` is the leader's when it answered, else the highest reported. ``nodes``
    keeps the client's target order.
    """

    leader_id: str
    leader_addr: str
    term: int
    commit_index: int
    nodes: tuple[NodeView, ...]

    @property
    def reachable(self) -> tuple[NodeView, ...]:
        return tuple(n for n in self.nodes if n.status is not None)


class _Retry(Exception):
    """An attempt failed in a way another attempt may not: move on (to ``leader`` if given)."""

    def __init__(self, message: str, leader: str | None = None) -> None:
        super().__init__(message)
        self.leader = leader


class Client:
    """A synchronous client of a raftsched cluster (see the module docstring for the contract).

    ``targets`` is ``"host:port,host:port"`` or a sequence of ``host:port`` strings: the nodes'
    gRPC addresses. ``timeout`` is the deadline of each attempt, in seconds; ``retries`` bounds the
    attempts after the first. ``stale_reads`` lets any node answer reads (see the module
    docstring). ``tls`` dials over TLS (its files are read here, once). ``token`` is a bearer
    token for a cluster with auth on (else ``RAFTSCHED_TOKEN`` is used if set); it is sent with
    every call and never logged. Raises :class:`InvalidSpec` for a malformed target list or
    token, or a TLS file that cannot be used.
    """

    def __init__(
        self,
        targets: str | Sequence[str],
        *,
        timeout: float = 10.0,
        retries: int = 8,
        stale_reads: bool = False,
        tls: TlsConfig | None = None,
        token: str | None = None,
    ) -> None:
        if timeout <= 0:
            raise InvalidSpec("timeout", f"must be > 0 seconds, got {timeout!r}")
        if retries < 0:
            raise InvalidSpec("retries", f"must be >= 0, got {retries!r}")
        self._targets = _parse_targets(targets)
        self._token = resolve_token(token)
        self._tls = tls
        self._credentials = tls.channel_credentials() if tls is not None else None
        self._probed: dict[str, float] = {}  # target -> when it was last probed for TLS
        self._timeout = timeout
        self._retries = retries
        self._stale_reads = stale_reads
        self._preferred = 0  # index into _targets of the node that last answered
        self._channels: dict[str, Any] = {}
        self._stubs: dict[str, Any] = {}  # target -> AdminStub over its channel (thread-safe)
        self._lock = threading.Lock()
        self._closed = False
        self._local = threading.local()

    @property
    def last_read(self) -> ReadInfo | None:
        """How fresh the last read this thread made with this client was (None before any, or
        from a node that does not say): linearizable at a confirmed log index, or stale with the
        answering node's applied index, the commit index it had heard of and its contact age."""
        info: ReadInfo | None = getattr(getattr(self, "_local", None), "read", None)
        return info

    @property
    def stale_reads(self) -> bool:
        """Whether reads accept an answer from any node (``stale_reads`` at construction)."""
        return self._stale_reads

    @property
    def targets(self) -> tuple[str, ...]:
        """The known targets: the ones given, then any leader addresses learned from hints."""
        with self._lock:
            return tuple(self._targets)

    def close(self) -> None:
        """Close every channel. The client cannot be used afterwards."""
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
            self._stubs = {}
            self._closed = True
        for channel in channels:
            channel.close()

    def __enter__(self) -> Client:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    # -- writes ------------------------------------------------------------------------------------

    def add_task(self, spec: TaskSpec, *, disabled: bool = False) -> pb.TaskRecord:
        """Create a task. Raises AlreadyExists if the name is taken, InvalidSpec for a bad trigger."""
        request = pb.AddTaskRequest(spec=codec.spec_to_pb(spec), disabled=disabled, idempotency_key=_key())
        reply: pb.TaskReply = self._call("AddTask", request, write=True)
        return reply.task

    def add_tasks(self, specs: Sequence[TaskSpec], *, disabled: bool = False) -> list[pb.ItemResult]:
        """Bulk import: create many tasks, a few hundred per log entry.

        Each task is created or refused on its own (``ItemResult.ok``, ``code``, ``message``, in
        input order); one bad spec does not stop the rest. Calls are made per 5,000 tasks, each
        with its own idempotency key, so a retried call never creates a task twice.
        """
        results: list[pb.ItemResult] = []
        for start in range(0, len(specs), 5000):
            chunk = specs[start : start + 5000]
            out: list[pb.ItemResult] = [pb.ItemResult() for _ in chunk]
            todo = list(range(len(chunk)))
            # Items refused as "unavailable" (transient: e.g. stamped by a clock behind the
            # committed leader time right after a leader change) are resent, as single writes are.
            for attempt in range(_BULK_RETRIES):
                request = pb.AddTasksRequest(
                    tasks=[
                        pb.AddTaskRequest(spec=codec.spec_to_pb(chunk[i]), disabled=disabled) for i in todo
                    ],
                    idempotency_key=_key(),
                )
                reply: pb.AddTasksReply = self._call("AddTasks", request, write=True)
                for i, item in zip(todo, reply.results, strict=True):
                    out[i] = item
                todo = [i for i, item in zip(todo, reply.results, strict=True) if item.code == "unavailable"]
                if not todo:
                    break
                _sleep(0.2 * 2**attempt)
            results.extend(out)
        return results

    def update_task(self, spec: TaskSpec, *, expected_version: int = 0) -> pb.TaskRecord:
        """Replace a task's spec. ``expected_version`` > 0 makes it conditional (else Conflict)."""
        if expected_version < 0:
            raise InvalidSpec("expected_version", f"must be >= 0, got {expected_version}")
        request = pb.UpdateTaskRequest(
            spec=codec.spec_to_pb(spec), expected_version=expected_version, idempotency_key=_key()
        )
        reply: pb.TaskReply = self._call("UpdateTask", request, write=True)
        return reply.task

    def delete_task(self, name: str) -> None:
        """Delete a task and its pending fires. Raises NotFound if there is no such task."""
        request = pb.DeleteTaskRequest(name=validate_name(name), idempotency_key=_key())
        self._call("DeleteTask", request, write=True)

    def enable_task(self, name: str) -> pb.TaskRecord:
        return self._set_enabled(name, True)

    def disable_task(self, name: str) -> pb.TaskRecord:
        """Stop a task from firing. Fires that fall due while it is disabled are not owed: enabling
        it later starts from the time it is enabled (a fire already planned when the disable
        commits is accounted as ``skipped_disabled``)."""
        return self._set_enabled(name, False)

    def trigger(self, name: str, params_json: str = "") -> pb.Run:
        """Start a manual run now, with optional params (a JSON object). Returns the run created."""
        validate_name(name)
        validate_params(params_json)
        request = pb.TriggerNowRequest(name=name, params_json=params_json, idempotency_key=_key())
        reply: pb.RunReply = self._call("TriggerNow", request, write=True)
        return reply.run

    def _set_enabled(self, name: str, enabled: bool) -> pb.TaskRecord:
        request = pb.SetEnabledRequest(name=validate_name(name), enabled=enabled, idempotency_key=_key())
        reply: pb.TaskReply = self._call("SetEnabled", request, write=True)
        return reply.task

    # -- reads (any node, from its local state) ----------------------------------------------------

    def retry(self, run_id: str) -> pb.Run:
        """Force a retry of a failed run: its failed shards run again with a fresh retry count."""
        request = pb.RetryRunRequest(run_id=run_id, idempotency_key=_key())
        reply: pb.RunReply = self._call("RetryRun", request, write=True)
        return reply.run

    def get_task(self, name: str, *, stale: bool | None = None) -> pb.TaskRecord:
        request = pb.GetTaskRequest(name=validate_name(name))
        reply: pb.TaskReply = self._call("GetTask", request, stale=stale)
        return reply.task

    def list_tasks(
        self, prefix: str = "", limit: int = 0, *, page_size: int = 0, stale: bool | None = None
    ) -> list[pb.TaskRecord]:
        """Tasks in name order whose names start with ``prefix``; ``limit`` 0 means all.

        Fetched in pages of ``page_size`` (0: the server's default) until ``limit`` or the end.
        """
        out: list[pb.TaskRecord] = []
        token = ""
        while True:
            request = pb.ListTasksRequest(
                prefix=prefix, limit=limit - len(out) if limit else 0, page_token=token, page_size=page_size
            )
            reply: pb.ListTasksReply = self._call("ListTasks", request, stale=stale)
            out.extend(reply.tasks)
            token = reply.next_page_token
            if not token or (limit and len(out) >= limit):
                return out[:limit] if limit else out

    def list_tasks_recent(
        self, prefix: str = "", limit: int = 0, fires: int = 10, *, stale: bool | None = None
    ) -> list[tuple[pb.TaskRecord, pb.RecentFires]]:
        """As :meth:`list_tasks`, each task with its newest ``fires`` fire records (at most 100;
        oldest first) and the state of each one's run, fetched with the tasks, page by page."""
        out: list[tuple[pb.TaskRecord, pb.RecentFires]] = []
        token = ""
        while True:
            request = pb.ListTasksRequest(
                prefix=prefix, limit=limit - len(out) if limit else 0, page_token=token, recent_fires=fires
            )
            reply: pb.ListTasksReply = self._call("ListTasks", request, stale=stale)
            out.extend(zip(reply.tasks, reply.recent, strict=True))
            token = reply.next_page_token
            if not token or (limit and len(out) >= limit):
                return out[:limit] if limit else out

    def runs(
        self,
        task: str = "",
        *,
        since_ms: int = 0,
        until_ms: int = 0,
        state: RunState | None = None,
        limit: int = 0,
        page_size: int = 0,
        stale: bool | None = None,
    ) -> list[pb.Run]:
        """Runs (of ``task``, or all) whose nominal time is in [since, until]; 0 means unbounded.

        Newest first, at most ``limit`` (0: 1000), fetched in pages of ``page_size``.
        """
        if task:
            # A workflow's task runs belong to the internal task "<workflow>#<task>".
            for part in task.split("#", 1):
                validate_name(part, "task")
        total = limit or DEFAULT_RUNS_LIMIT
        out: list[pb.Run] = []
        token = ""
        while True:
            request = pb.ListRunsRequest(
                task=task,
                since_ms=since_ms,
                until_ms=until_ms,
                state=codec.RUN_STATE_TO_PB[state] if state is not None else pb.RUN_STATE_UNSPECIFIED,
                limit=total - len(out),
                page_token=token,
                page_size=page_size,
            )
            reply: pb.ListRunsReply = self._call("ListRuns", request, stale=stale)
            out.extend(reply.runs)
            token = reply.next_page_token
            if not token or len(out) >= total:
                return out[:total]

    def get_run(self, run_id: str, *, stale: bool | None = None) -> pb.Run:
        """One run, active or retained: its state, shards (with their output tails) and its
        ``timeline`` of transitions (``raftsched.fsm.timeline.describe`` renders an entry).
        Raises ``NotFound`` if it does not exist or its history was pruned."""
        reply: pb.RunReply = self._call("GetRun", pb.GetRunRequest(run_id=run_id), stale=stale)
        return reply.run

    def fire_accounting(
        self,
        task: str,
        *,
        since_ms: int = 0,
        until_ms: int = 0,
        limit: int = 0,
        newest: bool = False,
        stale: bool | None = None,
    ) -> list[pb.FireRecord]:
        """How each nominal fire of ``task`` in [since, until] was accounted (fired, coalesced, ...),
        in time order: the first ``limit`` records, or with ``newest`` the last ``limit``."""
        request = pb.FireAccountingRequest(
            task=validate_name(task, "task"), since_ms=since_ms, until_ms=until_ms, limit=limit, newest=newest
        )
        reply: pb.FireAccountingReply = self._call("FireAccounting", request, stale=stale)
        return list(reply.fires)

    def explain(self, task: str, at_ms: int, *, stale: bool | None = None) -> pb.ExplainReply:
        """Why ``task`` did (or did not) fire at ``at_ms``."""
        reply: pb.ExplainReply = self._call(
            "Explain", pb.ExplainRequest(task=validate_name(task, "task"), at_ms=at_ms), stale=stale
        )
        return reply

    def node_status(self, target: str | None = None) -> pb.NodeStatusReply:
        """The status of ``target`` (one attempt, no redirect), or of the first target that answers."""
        if target is None:
            reply: pb.NodeStatusReply = self._call("NodeStatus", pb.NodeStatusRequest())
            return reply
        address = _parse_target(target)
        try:
            answer: pb.NodeStatusReply = self._stub(address).NodeStatus(
                pb.NodeStatusRequest(), timeout=self._timeout
            )
        except grpc.RpcError as err:
            outcome = self._outcome(address, err)
            if isinstance(outcome, _Retry):
                raise Unavailable(f"{address}: {outcome}") from None
            raise outcome from None
        return answer

    def cluster_status(self, *, digests: bool = False) -> ClusterView:
        """Ask every known target for its NodeStatus, concurrently; unreachable ones are reported too.

        ``digests``: each node also hashes its whole replicated state (``state_digest``); nodes at
        the same applied index must report the same digest. It reads every key of the store, so
        it is for a look by hand, not for polling. Raises :class:`~raftsched.errors.Unauthenticated`
        or :class:`~raftsched.errors.PermissionDenied` if no node answered and a node refused the
        credentials (a cluster with auth on, and no or a wrong token)."""
        targets = self.targets
        request = pb.NodeStatusRequest(include_digest=digests)
        futures = [(t, self._stub(t).NodeStatus.future(request, timeout=self._timeout)) for t in targets]
        views: list[NodeView] = []
        refused: RaftschedError | None = None
        for target, future in futures:
            try:
                views.append(NodeView(target, future.result()))
            except grpc.RpcError as err:
                problem = self._tls_problem(target, err)
                if err.code() in (grpc.StatusCode.UNAUTHENTICATED, grpc.StatusCode.PERMISSION_DENIED):
                    outcome = _classify(err)
                    refused = outcome if isinstance(outcome, RaftschedError) else refused
                views.append(NodeView(target, None, problem or _describe(err)))
        if refused is not None and not any(v.reachable for v in views):
            raise refused
        return _summarise(tuple(views))

    def content_sums(self, index: int) -> dict[str, str]:
        """Each reachable node's checksum of its replicated content at log ``index`` (hex), by node
        id; a node that no longer (or not yet) knows it is left out. Equal on every replica: a
        node whose differs holds a state that diverged (see ``raftsched status``)."""
        request = pb.NodeStatusRequest(chain_at_index=index)
        futures = [self._stub(t).NodeStatus.future(request, timeout=self._timeout) for t in self.targets]
        out: dict[str, str] = {}
        for future in futures:
            try:
                reply = future.result()
            except grpc.RpcError:
                continue
            if reply.content_sum_at_index:
                out[reply.node_id] = reply.content_sum_at_index
        return out

    def add_node(self, node_id: str, raft: str, grpc_addr: str, http: str = "") -> pb.MembershipReply:
        """Add a scheduler node to the replicated membership (one change at a time: refused with
        :class:`~raftsched.errors.Conflict` while another is in progress). Start the node with
        ``raftsched-node --join`` afterwards; it catches up from the leader."""
        request = pb.AddNodeRequest(member=pb.Member(id=node_id, raft=raft, grpc=grpc_addr, http=http))
        reply: pb.MembershipReply = self._call("AddNode", request, write=True)
        return reply

    def remove_node(self, node_id: str) -> pb.MembershipReply:
        """Remove a scheduler node from the replicated membership (one change at a time)."""
        reply: pb.MembershipReply = self._call("RemoveNode", pb.RemoveNodeRequest(id=node_id), write=True)
        return reply

    def membership(self) -> pb.MembershipRecord:
        """The replicated membership as the answering node applied it."""
        reply: pb.MembershipReply = self._call("GetMembership", pb.GetMembershipRequest())
        return reply.membership

    def list_executors(self, *, include_left: bool = False) -> pb.ListExecutorsReply:
        """The executors in the replicated membership (``include_left``: also those that left),
        by name, each with its slots, the attempts assigned to it and not finished, and labels.

        Heartbeats and stream addresses are known to the leader only: the leader is asked when
        it can be found (``leader_view`` in the reply), else the answer of another node stands
        with them left empty."""
        request = pb.ListExecutorsRequest(include_left=include_left)
        reply: pb.ListExecutorsReply = self._call("ListExecutors", request)
        if reply.leader_view:
            return reply
        try:
            leader = self.node_status().leader_grpc
            if leader:
                answer: pb.ListExecutorsReply = self._stub(self._learn(leader)).ListExecutors(
                    request, timeout=self._timeout
                )
                return answer
        except (grpc.RpcError, RaftschedError):
            pass  # the follower's answer is still right about membership and slots
        return reply

    # -- quotas and locks ----------------------------------------------------------------------------

    def set_quota(
        self,
        *,
        owner: str = "",
        namespace: str = "",
        rate: str | float | None = None,
        burst: int = 0,
        max_running: int = 0,
    ) -> pb.QuotaRecord:
        """Create or replace the quota of one ``owner`` or one ``namespace`` (give exactly one).

        ``rate``: attempt starts allowed, ``"50/s"``, ``"300/m"``, ``"2/h"`` or a number per
        second, with a bucket of ``burst`` attempts (default: one second's worth);
        ``max_running``: attempts running at once (0 = no cap). Work over quota waits, it is
        never dropped. Needs the admin role with auth on."""
        if bool(owner) == bool(namespace):
            raise InvalidSpec("quota", "give exactly one of owner or namespace")
        rate_milli = 0 if rate is None else parse_rate(str(rate))
        quota = pb.QuotaRecord(
            kind="owner" if owner else "namespace",
            name=owner or namespace,
            rate_milli=rate_milli,
            burst=burst,
            max_running=max_running,
        )
        validate_quota(quota)
        request = pb.SetQuotaRequest(quota=quota, idempotency_key=_key())
        reply: pb.QuotaReply = self._call("SetQuota", request, write=True)
        return reply.quota

    def delete_quota(self, *, owner: str = "", namespace: str = "") -> pb.QuotaRecord:
        """Delete the quota of ``owner`` or ``namespace`` (NotFound if there is none); work that
        waited for it starts as slots allow."""
        if bool(owner) == bool(namespace):
            raise InvalidSpec("quota", "give exactly one of owner or namespace")
        request = pb.DeleteQuotaRequest(
            kind="owner" if owner else "namespace", name=owner or namespace, idempotency_key=_key()
        )
        reply: pb.QuotaReply = self._call("DeleteQuota", request, write=True)
        return reply.quota

    def list_quotas(self, *, stale: bool | None = None) -> list[pb.QuotaRecord]:
        """Every quota, by kind then name, with its bucket (``tokens_micro`` / 1e6 attempts) and
        the attempts running against it."""
        reply: pb.ListQuotasReply = self._call("ListQuotas", pb.ListQuotasRequest(), stale=stale)
        return list(reply.quotas)

    def list_locks(self, *, stale: bool | None = None) -> list[pb.LockInfo]:
        """Every resource lock held or waited for, by name, with its holders and waiters."""
        reply: pb.ListLocksReply = self._call("ListLocks", pb.ListLocksRequest(), stale=stale)
        return list(reply.locks)

    def drain_executor(self, name: str, reason: str = "") -> pb.ExecutorInfo:
        """Stop placing new attempts on executor ``name`` (replicated); the attempts it runs go
        on. Its state reads ``draining`` while some still run, then ``drained``: it may leave.
        Raises NotFound if it is not a live member. Draining a draining executor is a no-op."""
        request = pb.DrainExecutorRequest(
            name=validate_name(name, "executor.name"), reason=reason, idempotency_key=_key()
        )
        reply: pb.DrainExecutorReply = self._call("DrainExecutor", request, write=True)
        return reply.executor

    def backup(self, path: str | os.PathLike[str]) -> pb.BackupHeader:
        """Write a consistent backup of the replicated state to ``path`` and return its header.

        Any node can answer (the first target that does, in order): the image is that node's
        committed state at the log index in the header. The file is written to a temporary name,
        its checksum verified, fsynced and renamed onto ``path``, so ``path`` is either a whole,
        verified backup or untouched. Raises InvalidBackup if the stream arrived damaged, and
        Unavailable if no node answered."""
        from pathlib import Path

        from raftsched.backup import BackupSink

        problems: list[str] = []
        for target in list(self.targets):
            sink = BackupSink(Path(path))
            try:
                for chunk in self._stub(target).Backup(pb.BackupRequest(), timeout=max(self._timeout, 600)):
                    sink.add(chunk)
            except grpc.RpcError as err:
                sink.abort()
                outcome = self._outcome(target, err)
                if not isinstance(outcome, _Retry):
                    raise outcome from None
                problems.append(f"{target}: {outcome}")
                continue
            except BaseException:
                sink.abort()
                raise
            return sink.finish()
        raise Unavailable(f"Backup failed on every node: {'; '.join(problems)}")

    # -- full logs ---------------------------------------------------------------------------------

    def logs(
        self,
        run_id: str,
        *,
        shard: int = 0,
        attempt: int = 0,
        stderr: bool = False,
        follow: bool = False,
        since_line: int = 0,
        tail_bytes: int = 0,
    ) -> Generator[pb.ReadLogsChunk, None, None]:
        """An attempt's whole stdout (or ``stderr``), streamed from the executor that ran it
        through the leader: first a ``header`` (``source`` is ``"executor"``, or
        ``"stored_tail"`` with a ``note`` saying why only the stored 8 KiB tail follows: the
        executor is gone, its file aged out...), then ``data`` chunks (bytes, at most 64 KiB each,
        in order), then an ``end`` (``complete``: the whole file came). ``attempt`` 0 is the
        shard's latest; ``since_line`` starts at that line (1-based); ``tail_bytes`` sends only
        about the last that many bytes (from a line start); ``follow`` keeps streaming while the
        attempt runs. Memory stays bounded whatever the size of the log.

        Redirects to the leader (only it reaches executors) before the first chunk; a failure
        after that raises (Unavailable: start again, with ``since_line`` to skip what you have).
        Raises NotFound for a run, shard or attempt that does not exist (or is not visible to
        the caller), PermissionDenied without ``tasks.read``. Close the iterator to stop early."""
        request = pb.ReadLogsRequest(
            run_id=run_id,
            shard=shard,
            attempt=attempt,
            stderr=stderr,
            follow=follow,
            since_line=since_line,
            tail_bytes=tail_bytes,
        )
        with self._lock:
            target = self._targets[self._preferred]
        tried: list[str] = []
        delay = _BACKOFF_INITIAL_S
        for _ in range(self._retries + 1):
            if target not in tried:
                tried.append(target)
            self._stub(target)  # opens the channel
            stub = _GENERATED.LogsStub(self._channels[target])
            # No deadline on a followed stream; else generous (a 1 GB log takes a while).
            call = stub.ReadLogs(request, timeout=None if follow else max(self._timeout, 3600))
            started = False
            try:
                for chunk in call:
                    started = True
                    yield chunk
                self._prefer(target)
                return
            except grpc.RpcError as err:
                outcome = self._outcome(target, err)
                if started or not isinstance(outcome, _Retry):
                    raise (
                        outcome if isinstance(outcome, RaftschedError) else Unavailable(str(outcome))
                    ) from None
            finally:
                call.cancel()
            hint = _parse_hint(outcome.leader)
            if hint is not None and hint not in tried:
                target = self._learn(hint)
                continue
            _sleep(delay)
            delay = min(delay * 2, _BACKOFF_MAX_S)
            target = self._learn(hint) if hint is not None and hint != target else self._next_after(target)
        raise Unavailable(f"ReadLogs failed on {', '.join(tried)}")

    # -- workflows ---------------------------------------------------------------------------------

    def apply_workflow(
        self,
        spec_or_path: pb.WorkflowSpec | str | os.PathLike[str],
        idempotency_key: str | None = None,
        *,
        expected_version: int = 0,
    ) -> tuple[pb.WorkflowRecord, bool]:
        """Create a workflow, or a new version of it: ``(record, changed)``.

        ``spec_or_path`` is a spec or the path of a workflow file (YAML or TOML, see docs/guide/workflows.md),
        read and validated here: an invalid file raises
        :class:`~raftsched.errors.InvalidWorkflow` listing every problem with its ``file:line``
        before anything is sent. The leader validates again (cron and zones against its tzdata).
        ``changed`` is False when the definition equals the current version: no version is
        created, so applying the same file twice is harmless. Runs keep the version they started
        with. ``idempotency_key`` (default: a fresh one) makes a retried call apply once.
        ``expected_version`` (0: any) applies only if the workflow is still at that version
        (else :class:`~raftsched.errors.Conflict`), checked when the state machine applies it.
        """
        if isinstance(spec_or_path, pb.WorkflowSpec):
            spec = spec_or_path
        else:
            from raftsched.workflow.files import load_workflow_file  # file formats: only when used

            spec = load_workflow_file(os.fspath(spec_or_path))
        if idempotency_key is not None and not 0 < len(idempotency_key) <= 128:
            raise InvalidSpec("idempotency_key", "1-128 characters")
        _check_count(expected_version, "expected_version")
        request = pb.ApplyWorkflowRequest(
            spec=spec, idempotency_key=idempotency_key or _key(), expected_version=expected_version
        )
        try:
            reply: pb.WorkflowReply = self._call("ApplyWorkflow", request, write=True)
        except InvalidSpec as exc:
            raise _as_invalid_workflow(exc, spec.name) from None
        return reply.workflow, reply.changed

    def get_workflow(self, name: str, version: int = 0, *, stale: bool | None = None) -> pb.WorkflowRecord:
        """A workflow's current record, or (``version`` > 0) the spec of that older version.

        Raises NotFound for an unknown workflow or version."""
        _check_count(version, "version")
        request = pb.GetWorkflowRequest(name=validate_name(name, "workflow"), version=version)
        reply: pb.WorkflowReply = self._call("GetWorkflow", request, stale=stale)
        return reply.workflow

    def list_workflows(
        self, prefix: str = "", limit: int = 0, *, stale: bool | None = None
    ) -> list[pb.WorkflowRecord]:
        """Workflows in name order whose names start with ``prefix``; ``limit`` 0 means all."""
        _check_count(limit, "limit")
        reply: pb.ListWorkflowsReply = self._call(
            "ListWorkflows", pb.ListWorkflowsRequest(prefix=prefix, limit=limit), stale=stale
        )
        return list(reply.workflows)

    def pause_workflow(self, name: str) -> pb.WorkflowRecord:
        """Stop the workflow's scheduled runs (its fires are accounted as ``skipped_disabled``)
        until :meth:`resume_workflow`; runs in flight go on, and manual runs and backfills still
        start. Pausing a paused workflow changes nothing. NotFound for an unknown workflow."""
        return self._set_paused(name, True)

    def resume_workflow(self, name: str) -> pb.WorkflowRecord:
        """Schedule the workflow again, from now on: fires that fell due while it was paused are
        not owed. Resuming a running workflow changes nothing. NotFound for an unknown workflow."""
        return self._set_paused(name, False)

    def _set_paused(self, name: str, paused: bool) -> pb.WorkflowRecord:
        request = pb.SetWorkflowPausedRequest(
            name=validate_name(name, "workflow"), paused=paused, idempotency_key=_key()
        )
        reply: pb.WorkflowReply = self._call("SetWorkflowPaused", request, write=True)
        return reply.workflow

    def delete_workflow(
        self, name: str, *, force: bool = False, reason: str = ""
    ) -> tuple[pb.WorkflowRecord, int]:
        """Delete a workflow: its versions, runs, backfills and the internal tasks that ran its
        tasks; ``(record as it was, active runs killed)``.

        Refused with Conflict while a run of it is active, unless ``force``: then those runs are
        killed first (their running attempts terminated, ``reason`` in their timelines).
        NotFound for an unknown workflow."""
        request = pb.DeleteWorkflowRequest(
            name=validate_name(name, "workflow"), force=force, reason=reason, idempotency_key=_key()
        )
        reply: pb.DeleteWorkflowReply = self._call("DeleteWorkflow", request, write=True)
        return reply.workflow, reply.runs_killed

    # -- calendars --------------------------------------------------------------------------------

    def set_calendar(
        self,
        name: str,
        *,
        dates: Iterable[str | dt.date] = (),
        weekdays: str = "",
        zone: str = "UTC",
        description: str = "",
    ) -> pb.CalendarRecord:
        """Create or replace calendar ``name``: its days are ``dates`` (``YYYY-MM-DD`` strings or
        dates) and every weekday of ``weekdays`` (``"mon-fri"``, ``"sat,sun"``), in ``zone``.

        Tasks and workflows that ``exclude`` it skip fires whose local date (in ``zone``) is one of
        its days; those fires are accounted ``skipped_calendar``. Setting replaces the whole
        calendar (a new version). InvalidSpec for a bad name, date, weekday or zone."""
        days: set[int] = set()
        for i, value in enumerate(dates):
            if isinstance(value, dt.date):
                days.add(calendar_mod.day_number(value))
            else:
                days.update(calendar_mod.parse_dates_text(str(value), f"dates[{i}]"))
        mask = calendar_mod.parse_weekdays(weekdays) if weekdays else 0
        spec = pb.CalendarSpec(
            name=validate_name(name, "calendar"),
            dates=sorted(days),
            weekdays=mask,
            zone=zone or "UTC",
            description=description,
        )
        request = pb.SetCalendarRequest(spec=spec, idempotency_key=_key())
        reply: pb.CalendarReply = self._call("SetCalendar", request, write=True)
        return reply.calendar

    def get_calendar(self, name: str, *, stale: bool | None = None) -> tuple[pb.CalendarRecord, list[str]]:
        """Calendar ``name`` and who excludes it (``"task NAME"``, ``"workflow NAME"``). NotFound if none."""
        request = pb.GetCalendarRequest(name=validate_name(name, "calendar"))
        reply: pb.CalendarReply = self._call("GetCalendar", request, stale=stale)
        return reply.calendar, list(reply.used_by)

    def list_calendars(self, *, stale: bool | None = None) -> list[pb.CalendarRecord]:
        """Every calendar, by name."""
        reply: pb.ListCalendarsReply = self._call("ListCalendars", pb.ListCalendarsRequest(), stale=stale)
        return list(reply.calendars)

    def delete_calendar(self, name: str) -> None:
        """Delete calendar ``name``. Conflict while a task or workflow excludes it (the message
        lists them: remove it from their ``exclude`` first); NotFound if there is none."""
        request = pb.DeleteCalendarRequest(name=validate_name(name, "calendar"), idempotency_key=_key())
        self._call("DeleteCalendar", request, write=True)

    # -- events -----------------------------------------------------------------------------------

    def emit_event(
        self,
        name: str,
        *,
        key: str = "",
        payload: Mapping[str, Any] | str | None = None,
        namespace: str = "",
    ) -> tuple[pb.EventRecord, bool]:
        """Emit event ``name`` with dedupe ``key``: ``(record, duplicate)``.

        The cluster accepts one event per distinct ``(name, key)`` within its dedupe window
        (default 7 days): a duplicate is answered with the first acceptance and ``duplicate``
        True. An empty ``key`` makes each call a new event (a retry of this call is still one).
        ``payload`` is a JSON object (a mapping or its JSON text), at most 64 KiB. Needs the
        ``events.emit`` permission in ``namespace`` (default: ``default``). InvalidSpec for a bad
        name, key or payload."""
        text = payload if isinstance(payload, str) else json.dumps(payload, sort_keys=True) if payload else ""
        check_event(validate_name(name, "event"), key, text)
        request = pb.EmitEventRequest(
            name=name, key=key, payload_json=text, namespace=namespace, idempotency_key=_key()
        )
        reply: pb.EmitEventReply = self._call("EmitEvent", request, write=True)
        return reply.event, reply.duplicate

    def events(self, name: str = "", *, limit: int = 0, stale: bool | None = None) -> list[pb.EventRecord]:
        """Accepted events still inside the dedupe window (of ``name`` if given), newest first."""
        request = pb.ListEventsRequest(name=name, limit=limit)
        reply: pb.ListEventsReply = self._call("ListEvents", request, stale=stale)
        return list(reply.events)

    # -- pools ------------------------------------------------------------------------------------

    def set_pool(self, name: str, slots: int, *, description: str = "") -> pb.PoolRecord:
        """Create pool ``name`` or resize it to ``slots`` (1-1,000,000): at most that many attempts
        of tasks naming it (``pool``) run at once, any owner; the rest wait, by priority then age.
        Shrinking stops no attempt: new ones wait until enough have finished. Needs the
        ``pools.manage`` permission (admin) with auth on."""
        if not 1 <= slots <= MAX_POOL_SLOTS:  # before the uint32 field refuses it with a ValueError
            raise InvalidSpec("pool.slots", f"{slots} is not in 1-{MAX_POOL_SLOTS}")
        pool = pb.PoolRecord(name=name, slots=slots, description=description)
        validate_pool(pool)
        reply: pb.PoolReply = self._call(
            "SetPool", pb.SetPoolRequest(pool=pool, idempotency_key=_key()), write=True
        )
        return reply.pool

    def delete_pool(self, name: str) -> pb.PoolRecord:
        """Delete pool ``name``. Conflict while a task or workflow task names it (the message lists
        them); NotFound if there is none."""
        request = pb.DeletePoolRequest(name=validate_name(name, "pool.name"), idempotency_key=_key())
        reply: pb.PoolReply = self._call("DeletePool", request, write=True)
        return reply.pool

    def list_pools(self, *, stale: bool | None = None) -> list[pb.PoolInfo]:
        """Every pool by name with its slots, the attempts holding it (``used``, ``holders``) and
        how many wait for it."""
        reply: pb.ListPoolsReply = self._call("ListPools", pb.ListPoolsRequest(), stale=stale)
        return list(reply.pools)

    # -- task backfills ---------------------------------------------------------------------------

    def backfill_task(
        self,
        task: str,
        start: int | dt.date | dt.datetime,
        end: int | dt.date | dt.datetime,
        params: Mapping[str, Any] | str | None = None,
    ) -> pb.BackfillRecord:
        """Backfill plain task ``task``: one run per nominal time of its schedule in ``[start,
        end]`` (both inclusive: cron occurrences with the DST policy of its fires, or interval
        steps), skipping times that have a run already and those the scheduler has not reached
        yet (``runs_skipped`` counts both). ``start``/``end`` as for :meth:`backfill`. The runs use
        only the slots regular work leaves (the backfill share, 30 % of the slots) and do not count
        for the task's overlap policy. Refused (InvalidSpec) for a reversed range, a task without
        a schedule, a range with no nominal time or more than 1,000; NotFound for an unknown
        task. Watch progress with :meth:`get_backfill`."""
        request = pb.TaskBackfillRequest(
            task=validate_name(task, "task"),
            from_ms=to_epoch_ms(start, "start"),
            to_ms=to_epoch_ms(end, "end", end_of_day=True),
            params_json=params_to_json(params),
            idempotency_key=_key(),
        )
        reply: pb.BackfillReply = self._call("BackfillTask", request, write=True)
        return reply.backfill

    def list_task_backfills(self, task: str, *, stale: bool | None = None) -> list[pb.BackfillRecord]:
        """Every backfill of plain task ``task``, newest first."""
        request = pb.ListBackfillsRequest(task=validate_name(task, "task"))
        reply: pb.ListBackfillsReply = self._call("ListBackfills", request, stale=stale)
        return list(reply.backfills)

    def start_workflow_run(
        self, workflow: str, logical_ms: int = 0, params: Mapping[str, Any] | str | None = None
    ) -> pb.WorkflowRun:
        """Start a run of the workflow's current version now. Returns the run created.

        ``logical_ms`` is its logical time (``{{ ds }}``, ``{{ ts }}``; 0 = now). ``params`` (a
        mapping, or a JSON object as text) override the workflow's and tasks' params.
        """
        _check_time(logical_ms, "logical_ms")
        request = pb.StartWorkflowRunRequest(
            workflow=validate_name(workflow, "workflow"),
            logical_ms=logical_ms,
            params_json=params_to_json(params),
            idempotency_key=_key(),
        )
        reply: pb.WorkflowRunReply = self._call("StartWorkflowRun", request, write=True)
        return reply.run

    def get_workflow_run(self, run_id: str, *, stale: bool | None = None) -> pb.WorkflowRun:
        """One workflow run: its state and every task's state, tries, reason and timeline."""
        reply: pb.WorkflowRunReply = self._call(
            "GetWorkflowRun", pb.GetWorkflowRunRequest(run_id=_run_id(run_id)), stale=stale
        )
        return reply.run

    def list_workflow_runs(
        self, workflow: str, limit: int = 100, active_only: bool = False, *, stale: bool | None = None
    ) -> list[pb.WorkflowRun]:
        """Runs of ``workflow``, newest first; ``active_only`` keeps the unfinished ones."""
        _check_count(limit, "limit")
        request = pb.ListWorkflowRunsRequest(
            workflow=validate_name(workflow, "workflow"), limit=limit, active_only=active_only
        )
        reply: pb.ListWorkflowRunsReply = self._call("ListWorkflowRuns", request, stale=stale)
        return list(reply.runs)

    def kill_workflow_run(self, run_id: str, reason: str = "") -> pb.WorkflowRun:
        """Kill a run: its live task runs are cancelled (running attempts terminated) and every
        unfinished task becomes KILLED; the run ends KILLED."""
        return self._run_op(pb.WorkflowRunOp.KILL, run_id, "", reason)

    def rerun_workflow_task(self, run_id: str, task: str) -> pb.WorkflowRun:
        """Run ``task`` again, and everything downstream of it, inside the existing run; results
        upstream of it are kept. NotFound names an unknown run or task."""
        return self._run_op(pb.WorkflowRunOp.RERUN, run_id, validate_name(task, "task"), "")

    def mark_task_success(self, run_id: str, task: str, reason: str = "") -> pb.WorkflowRun:
        """Mark ``task`` succeeded by hand (its dependents proceed as after a success)."""
        return self._run_op(pb.WorkflowRunOp.MARK_SUCCESS, run_id, validate_name(task, "task"), reason)

    def _run_op(self, op: int, run_id: str, task: str, reason: str) -> pb.WorkflowRun:
        request = pb.WorkflowRunOpRequest(
            op=op,  # type: ignore[arg-type]  # one of the WorkflowRunOp.Op values
            run_id=_run_id(run_id),
            task=task,
            reason=reason,
            idempotency_key=_key(),
        )
        reply: pb.WorkflowRunReply = self._call("OperateWorkflowRun", request, write=True)
        return reply.run

    def wait_workflow_run(self, run_id: str, timeout_s: float, *, poll_s: float = 0.5) -> pb.WorkflowRun:
        """Poll until the run is finished (SUCCESS, FAILED or KILLED) and return it.

        Raises :class:`TimeoutError` (with the run's last state) if it is still running after
        ``timeout_s`` seconds, and NotFound for an unknown run.
        """
        if timeout_s < 0 or poll_s <= 0:
            raise InvalidSpec("timeout_s", "timeout must be >= 0 and poll interval > 0 seconds")
        deadline = _monotonic() + timeout_s
        while True:
            run = self.get_workflow_run(run_id)
            if run.state in WORKFLOW_FINISHED:
                return run
            left = deadline - _monotonic()
            if left <= 0:
                state = pb.WorkflowRunState.Name(run.state)
                raise TimeoutError(f"workflow run {run_id!r} still {state} after {timeout_s:g}s")
            _sleep(min(poll_s, left))

    def backfill(
        self,
        workflow: str,
        start: int | dt.date | dt.datetime,
        end: int | dt.date | dt.datetime,
        params: Mapping[str, Any] | str | None = None,
    ) -> pb.BackfillRecord:
        """Create one run per logical time in ``[start, end]`` (both inclusive).

        The logical times are the workflow's schedule occurrences in the range, or every UTC
        midnight when it has no schedule; the leader computes them. A ``date`` ``start`` means its
        midnight (UTC), a ``date`` ``end`` the end of that day; a ``datetime`` must carry a zone;
        an ``int`` is epoch ms. Backfill runs use at most the workflow's backfill share of the
        executor slots and only what regular work leaves free. Refused (InvalidSpec) for an
        empty or reversed range and for more runs than one backfill may hold (1,000). Watch progress with
        :meth:`get_backfill`.
        """
        request = pb.BackfillRequest(
            workflow=validate_name(workflow, "workflow"),
            from_ms=to_epoch_ms(start, "start"),
            to_ms=to_epoch_ms(end, "end", end_of_day=True),
            params_json=params_to_json(params),
            idempotency_key=_key(),
        )
        reply: pb.BackfillReply = self._call("Backfill", request, write=True)
        return reply.backfill

    def get_backfill(self, backfill_id: str, *, stale: bool | None = None) -> pb.BackfillRecord:
        """One backfill and its progress (``runs_finished`` / ``runs_total``, ``runs_failed``)."""
        if not backfill_id or len(backfill_id) > 256:
            raise InvalidSpec("backfill_id", "required (<workflow>~b<seq> or <task>~t<seq>)")
        reply: pb.BackfillReply = self._call(
            "GetBackfill", pb.GetBackfillRequest(backfill_id=backfill_id), stale=stale
        )
        return reply.backfill

    def list_backfills(self, workflow: str, *, stale: bool | None = None) -> list[pb.BackfillRecord]:
        """Every backfill of ``workflow``."""
        reply: pb.ListBackfillsReply = self._call(
            "ListBackfills",
            pb.ListBackfillsRequest(workflow=validate_name(workflow, "workflow")),
            stale=stale,
        )
        return list(reply.backfills)

    def alerts(self, since_ms: int = 0, limit: int = 0, *, stale: bool | None = None) -> list[pb.AlertInfo]:
        """Retained alert events at or after ``since_ms`` (newest ``limit``; 0: up to 1000), oldest
        first, each with its delivery state per webhook target of the answering node's config."""
        _check_count(limit, "limit")
        reply: pb.ListAlertsReply = self._call(
            "ListAlerts", pb.ListAlertsRequest(since_ms=since_ms, limit=limit), stale=stale
        )
        return list(reply.alerts)

    def ack_alert(self, alert_id: str) -> pb.AlertRecord:
        """Acknowledge an alert event (kept with the time of the first acknowledgement)."""
        request = pb.AckAlertRequest(id=alert_id, idempotency_key=_key())
        reply: pb.AckAlertReply = self._call("AckAlert", request, write=True)
        return reply.alert

    def lineage(
        self, workflow: str, task: str, version: int = 0, *, stale: bool | None = None
    ) -> tuple[list[tuple[str, int]], list[tuple[str, int]]]:
        """``(upstream, downstream)`` of ``task``: every ancestor and descendant with its shortest
        distance (1 = direct), nearest first, in the given version of the workflow (0 = current)."""
        _check_count(version, "version")
        request = pb.LineageRequest(
            workflow=validate_name(workflow, "workflow"), task=validate_name(task, "task"), version=version
        )
        reply: pb.LineageReply = self._call("Lineage", request, stale=stale)
        return (
            [(e.task, e.depth) for e in reply.upstream],
            [(e.task, e.depth) for e in reply.downstream],
        )

    def cross_lineage(
        self, workflow: str, task: str, depth: int = LINEAGE_MAX_DEPTH, *, stale: bool | None = None
    ) -> tuple[list[CrossNode], list[CrossNode], bool]:
        """``(upstream, downstream, truncated)`` of ``workflow``'s ``task`` across workflows,
        transitively: the other workflows' tasks (or whole runs) it depends on, then theirs, and the
        tasks that depend on it, then on those, up to ``depth`` cross-workflow hops (at most
        ``LINEAGE_MAX_DEPTH``, 10; at most ``LINEAGE_MAX_NODES``, 500, per direction: then
        ``truncated``). Cycle-safe; over the current versions of the workflows this token may read."""
        _check_count(depth, "depth")
        validate_name(task, "task")
        specs = {w.spec.name: w.spec for w in self.list_workflows(stale=stale)}
        if workflow not in specs:
            specs[workflow] = self.get_workflow(workflow, stale=stale).spec  # NotFound if unknown
        if all(t.name != task for t in specs[workflow].tasks):
            raise NotFound(f"no task {task!r} in workflow {workflow!r}")
        ups, cut_up = cross_workflow_lineage(workflow, task, specs, "up", depth)
        downs, cut_down = cross_workflow_lineage(workflow, task, specs, "down", depth)
        return ups, downs, cut_up or cut_down

    def workflow_waits(
        self, upstream: str | None = None, *, stale: bool | None = None
    ) -> list[dict[str, object]]:
        """What waits on what across workflows (``raftsched workflow waits``): every cross-workflow
        edge still waiting in an active run, one dict each (``upstream``, ``upstream_task``,
        ``upstream_logical_ms``, ``condition``, ``downstream_run``, ``downstream_task``,
        ``since_ms``, ``note``: why it still waits), ordered by upstream, logical time, then run;
        ``upstream`` keeps the edges waiting on that workflow. Reads every active run: an operator
        view, not a hot path."""
        if upstream is not None:
            validate_name(upstream, "upstream")
        records = self.list_workflows(stale=stale)
        runs = [
            run
            for record in records
            for run in self.list_workflow_runs(record.spec.name, limit=100_000, active_only=True, stale=stale)
        ]
        specs: dict[tuple[str, int], pb.WorkflowSpec] = {}
        for run in runs:
            if any(t.external for t in run.tasks) and (run.workflow, run.version) not in specs:
                record = self.get_workflow(run.workflow, run.version, stale=stale)
                specs[(run.workflow, run.version)] = record.spec
        by_name = {r.spec.name: r for r in records}
        names = sorted({d.workflow for s in specs.values() for t in s.tasks for d in t.depends_on})
        names = [n for n in names if n]
        up_records: dict[str, pb.WorkflowRecord | None] = {n: by_name.get(n) for n in names}
        up_runs = {n: self._upstream_runs(n, stale) for n in names if by_name.get(n) is not None}
        return wait_rows(runs, specs, upstream or "", up_records, up_runs)

    def explain_workflow_task(
        self, run_id: str, task: str, *, stale: bool | None = None
    ) -> WorkflowTaskExplanation:
        """Why task ``task`` of workflow run ``run_id`` is not running (or how it ended): its unmet
        local dependencies, the cross-workflow edges it waits for (upstream workflow, task,
        logical time, condition, since, timeout and warn deadlines, and why: upstream not started,
        pruned, task gone from its current version, killed...), an earliest-start gate
        (not_before, jitter) not reached yet by the leader's clock, and what its task run's
        attempts wait for (pool, lock, quota). Raises NotFound for an unknown run or task."""
        request = pb.ExplainWorkflowTaskRequest(run_id=_run_id(run_id), task=validate_name(task, "task"))
        reply: pb.ExplainWorkflowTaskReply = self._call("ExplainWorkflowTask", request, stale=stale)
        return WorkflowTaskExplanation.from_reply(reply)

    def _upstream_runs(self, workflow: str, stale: bool | None) -> list[pb.WorkflowRun]:
        """The stored runs of an upstream workflow (newest first, the newest thousand)."""
        return self.list_workflow_runs(workflow, limit=1000, stale=stale)

    # -- tokens and the audit log (admin tokens only) ----------------------------------------------

    def create_token(
        self,
        role: str,
        namespaces: Sequence[str] = (),
        *,
        ttl_ms: int = 0,
        description: str = "",
    ) -> tuple[str, pb.TokenInfo]:
        """Create a token; returns ``(token, info)``. The token (``rst_<id>_<secret>``) is drawn
        here and exists nowhere else once this returns: the cluster keeps only a salted hash.
        Show or store it now. ``ttl_ms`` 0 means it never expires; ``namespaces`` defaults to
        ``["default"]`` (admin tokens cover every namespace)."""
        if isinstance(ttl_ms, bool) or not isinstance(ttl_ms, int) or not 0 <= ttl_ms <= MAX_TIME_MS:
            raise InvalidSpec("ttl", f"{ttl_ms!r} is not a whole number of milliseconds >= 0")
        if len(description) > 256:
            raise InvalidSpec("description", "at most 256 characters")
        token = new_token()
        request = pb.CreateTokenRequest(
            token=token,
            role=role,
            namespaces=list(namespaces),
            ttl_ms=ttl_ms,
            description=description,
            idempotency_key=_key(),
        )
        reply: pb.TokenReply = self._call("CreateToken", request, write=True)
        return token, reply.token

    def list_tokens(self, *, stale: bool | None = None) -> list[pb.TokenInfo]:
        """Every token (revoked ones too), by id; never a secret. ``last_used_ms`` is as the
        answering node saw it."""
        reply: pb.ListTokensReply = self._call("ListTokens", pb.ListTokensRequest(), stale=stale)
        return list(reply.tokens)

    def revoke_token(self, token: str) -> pb.TokenInfo:
        """Revoke a token, named by its id or given whole; every node refuses it once it applies
        the revocation (within a second on a healthy cluster). Revoking twice is not an error."""
        tid = token_id(token) if token.startswith("rst_") else token
        request = pb.RevokeTokenRequest(id=tid, idempotency_key=_key())
        reply: pb.TokenReply = self._call("RevokeToken", request, write=True)
        return reply.token

    def audit(
        self, since_ms: int = 0, principal: str = "", limit: int = 0, *, stale: bool | None = None
    ) -> list[pb.AuditRecord]:
        """Audit records (accepted writes), newest first, at or after ``since_ms``, of
        ``principal`` (exact id: ``token:<id>`` or ``cert:<subject>``) if given."""
        _check_count(limit, "limit")
        request = pb.ListAuditRequest(since_ms=since_ms, principal=principal, limit=limit)
        reply: pb.ListAuditReply = self._call("ListAudit", request, stale=stale)
        return list(reply.records)

    # -- the retry loop ----------------------------------------------------------------------------

    def cancel_run(self, run_id: str, reason: str = "", *, shard: int | None = None) -> pb.Run:
        """Cancel an unfinished run (or only its ``shard``): it ends ``cancelled`` with ``reason``
        and who asked in its timeline; a running attempt gets SIGTERM, the executor's grace, then
        SIGKILL (a handler is cancelled or sees ``ctx.cancel_requested()``). Cancelling a
        cancelled run again returns it unchanged. NotFound for an unknown run; Conflict for a run
        that finished otherwise or a workflow's task run (kill the workflow run instead)."""
        request = pb.CancelRunRequest(run_id=_run_id(run_id), reason=reason, idempotency_key=_key())
        if shard is not None:
            request.shard = shard
        reply: pb.RunReply = self._call("CancelRun", request, write=True)
        return reply.run

    def cancel_runs(
        self,
        *,
        task: str = "",
        namespace: str = "",
        owner: str = "",
        state: str = "",
        dry_run: bool = False,
        reason: str = "",
    ) -> list[str]:
        """Cancel every unfinished run of one ``task``, ``namespace`` or ``owner`` (exactly one),
        optionally only those ``pending`` or ``running`` (``state``). Returns the run ids
        cancelled, or with ``dry_run`` the ones that would be (nothing changes). Workflow task
        runs are not included; runs in namespaces the caller may not use are left out."""
        request = pb.CancelRunsRequest(
            task=task,
            namespace=namespace,
            owner=owner,
            state=state,
            dry_run=dry_run,
            reason=reason,
            idempotency_key=_key(),
        )
        reply: pb.CancelRunsReply = self._call("CancelRuns", request, write=True)
        return list(reply.run_ids)

    def _call(self, method: str, request: Message, *, write: bool = False, stale: bool | None = None) -> Any:
        """Run one RPC with redirects, rotation and backoff (see the module docstring).

        ``request`` is sent unchanged on every attempt, so a write's idempotency key is reused.
        A read (not ``write``) accepts a stale answer if ``stale``, or if it is None and the
        client was made with ``stale_reads``.
        """
        allow = not write and (self._stale_reads if stale is None else stale)
        metadata = _STALE_METADATA if allow else None
        with self._lock:
            target = self._targets[self._preferred]
        tried: list[str] = []
        delay = _BACKOFF_INITIAL_S
        attempts = 0
        while True:
            attempts += 1
            if target not in tried:
                tried.append(target)
            try:
                reply, call = getattr(self._stub(target), method).with_call(
                    request, timeout=self._timeout, metadata=metadata
                )
            except grpc.RpcError as err:
                outcome = self._outcome(target, err)
                if not isinstance(outcome, _Retry):
                    raise outcome from None
            else:
                self._prefer(target)
                if not write:
                    self._local.read = ReadInfo.from_metadata(call.trailing_metadata())
                return reply
            last = f"{target}: {outcome}"
            if attempts > self._retries:
                unknown = " The write may or may not have been applied." if write else ""
                raise Unavailable(
                    f"{method} failed after {attempts} attempt(s); tried {', '.join(tried)}; "
                    f"last error: {last}.{unknown}"
                )
            hint = _parse_hint(outcome.leader)
            if hint is not None and hint not in tried:
                target = self._learn(hint)  # a fresh redirect: no reason to wait
                continue
            # Backing off also covers hints pointing back at tried nodes (a stale view mid-election).
            _sleep(delay)
            delay = min(delay * 2, _BACKOFF_MAX_S)
            target = self._learn(hint) if hint is not None and hint != target else self._next_after(target)

    def _stub(self, target: str) -> Any:
        with self._lock:
            if self._closed:
                raise RaftschedError("the client is closed")
            stub = self._stubs.get(target)
            if stub is not None:
                return stub
            channel = self._channels.get(target)
            if channel is None:
                # Nodes restart during failovers: keep reconnect backoff short (gRPC's default
                # grows to two minutes) so a returning node is usable again quickly.
                channel = sync_channel(target, self._tls, _CHANNEL_OPTIONS, self._credentials)
                if self._token:
                    channel = grpc.intercept_channel(channel, BearerInterceptor(self._token))
                self._channels[target] = channel
            # One stub per channel: building one makes a callable for every Admin method (over a
            # hundred), which a console page paid on each of its calls.
            stub = self._stubs[target] = _GENERATED.AdminStub(channel)
        return stub

    def _outcome(self, target: str, err: grpc.RpcError) -> RaftschedError | _Retry:
        problem = self._tls_problem(target, err)
        return TlsError(problem) if problem else _classify(err)

    def _tls_problem(self, target: str, err: grpc.RpcError) -> str | None:
        """A TLS misconfiguration behind an UNAVAILABLE, described; None for anything else."""
        if err.code() != grpc.StatusCode.UNAVAILABLE:
            return None
        return diagnose_handshake(err.details() or "", target, self._tls, self._probe)

    def _probe(self, target: str) -> bool | None:
        # A node going down closes connections too: probe it at most once per interval, so a
        # partition or a restart loop costs no more than one short TLS probe now and then.
        now = _monotonic()
        with self._lock:
            if now - self._probed.get(target, -_PROBE_INTERVAL_S) < _PROBE_INTERVAL_S:
                return None
            self._probed[target] = now
        return speaks_tls(target)

    def _prefer(self, target: str) -> None:
        with self._lock:
            if target in self._targets:
                self._preferred = self._targets.index(target)

    def _learn(self, target: str) -> str:
        with self._lock:
            if target not in self._targets:
                self._targets.append(target)
        return target

    def _next_after(self, target: str) -> str:
        with self._lock:
            index = self._targets.index(target) if target in self._targets else -1
            return self._targets[(index + 1) % len(self._targets)]


_CHANNEL_OPTIONS = [
    ("grpc.initial_reconnect_backoff_ms", 200),
    ("grpc.max_reconnect_backoff_ms", 2000),
]


WORKFLOW_FINISHED: Final = frozenset({pb.WORKFLOW_SUCCESS, pb.WORKFLOW_FAILED, pb.WORKFLOW_KILLED})
"""Workflow run states that never change again (unless a task is rerun)."""

_DAY_MS: Final = 86_400_000


def to_epoch_ms(value: int | dt.date | dt.datetime, field: str, *, end_of_day: bool = False) -> int:
    """A time given as epoch ms, a zone-aware ``datetime`` or a ``date`` (UTC midnight; with
    ``end_of_day``, the last millisecond of that day) as UTC epoch ms. Raises InvalidSpec."""
    if isinstance(value, bool):
        raise InvalidSpec(field, "expected epoch ms, a date or a datetime, got a bool")
    if isinstance(value, int):
        ms = value
    elif isinstance(value, dt.datetime):  # before date: a datetime is a date
        if value.tzinfo is None or value.utcoffset() is None:
            raise InvalidSpec(field, f"{value.isoformat()} has no time zone; give a zone-aware datetime")
        ms = (value - _EPOCH) // dt.timedelta(milliseconds=1)
    elif isinstance(value, dt.date):
        midnight = dt.datetime(value.year, value.month, value.day, tzinfo=dt.UTC)
        ms = (midnight - _EPOCH) // dt.timedelta(milliseconds=1) + (_DAY_MS - 1 if end_of_day else 0)
    else:
        raise InvalidSpec(field, f"expected epoch ms, a date or a datetime, got {type(value).__name__}")
    _check_time(ms, field)
    return ms


def params_to_json(params: Mapping[str, Any] | str | None) -> str:
    """Run params as the JSON object text the cluster stores ('' for none). Raises InvalidSpec."""
    if params is None:
        return ""
    if isinstance(params, str):
        text = params
    elif isinstance(params, Mapping):
        try:
            text = json.dumps(dict(params), sort_keys=True, separators=(",", ":"), ensure_ascii=False)
        except (TypeError, ValueError) as exc:
            raise InvalidSpec("params", f"not JSON-serialisable ({exc})") from None
    else:
        raise InvalidSpec("params", f"expected a mapping or a JSON object, got {type(params).__name__}")
    validate_params(text)
    return text


_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def _check_time(ms: int, field: str) -> None:
    if isinstance(ms, bool) or not isinstance(ms, int) or not 0 <= ms <= MAX_TIME_MS:
        raise InvalidSpec(field, f"{ms!r} is not a time between 1970-01-01 and 9999-12-31 (epoch ms)")


_WORKFLOW_HEAD = re.compile(r"invalid workflow\b.*: \d+ problems?")


def _as_invalid_workflow(exc: InvalidSpec, workflow: str) -> InvalidSpec:
    """The leader's InvalidWorkflow crosses gRPC as text (a headline, then one problem per line);
    rebuild it so callers get ``problems`` as if validation had run here."""
    head, *rest = str(exc).split("\n")
    if not _WORKFLOW_HEAD.fullmatch(head.strip()):
        return exc
    problems = []
    for line in rest:
        location, sep, message = line.strip().partition(": ")
        problems.append((location, message) if sep else ("", location))
    return InvalidWorkflow(problems, workflow)


def _check_count(value: int, field: str) -> None:
    if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= 2**32 - 1:
        raise InvalidSpec(field, f"{value!r} is not a whole number between 0 and 4294967295")


def _run_id(run_id: str) -> str:
    if not isinstance(run_id, str) or "@" not in run_id or len(run_id) > 512:
        raise InvalidSpec("run_id", f"{run_id!r} is not a workflow run id (<workflow>@<logical_ms>...)")
    return run_id


def _key() -> str:
    """A fresh idempotency key: drawn once per write call, reused by every retry of that call."""
    return uuid.uuid4().hex


def _classify(err: grpc.RpcError) -> RaftschedError | _Retry:
    """Map a failed attempt to the exception to raise, or to a :class:`_Retry`."""
    status = err.code()
    details = err.details() or (status.name if status is not None else "unknown error")
    metadata = {key: value for key, value in (err.trailing_metadata() or ()) if isinstance(value, str)}
    code = metadata.get(CODE_KEY, "")
    if code in _RETRY_CODES:
        return _Retry(f"{code}: {details}", metadata.get(LEADER_KEY) or None)
    if code:
        return error_for_code(code, details)
    if status in _RETRY_STATUS:
        return _Retry(_describe(err))
    make = _STATUS_ERRORS.get(status)
    if make is not None:
        return make(details)
    return RaftschedError(_describe(err))


def _describe(err: grpc.RpcError) -> str:
    status = err.code()
    return f"{status.name if status is not None else 'UNKNOWN'}: {err.details() or 'no details'}"


def _parse_targets(targets: str | Sequence[str]) -> list[str]:
    items = targets.split(",") if isinstance(targets, str) else list(targets)
    out: list[str] = []
    for item in items:
        if not isinstance(item, str):
            raise InvalidSpec("targets", f"expected host:port strings, got {type(item).__name__}")
        if not item.strip():
            continue
        target = _parse_target(item)
        if target not in out:
            out.append(target)
    if not out:
        raise InvalidSpec("targets", "no cluster address given (expected host:port[,host:port...])")
    return out


def _parse_target(text: str) -> str:
    """Canonical ``host:port``, so a leader hint and a configured target compare equal."""
    host, port = parse_address(text.strip(), "targets")
    return f"[{host}]:{port}" if ":" in host else f"{host}:{port}"


def _parse_hint(hint: str | None) -> str | None:
    if not hint:
        return None
    try:
        return _parse_target(hint)
    except InvalidSpec:
        return None  # a malformed hint is no worse than none: rotate instead


def _summarise(views: tuple[NodeView, ...]) -> ClusterView:
    replies = [v.status for v in views if v.status is not None]
    if not replies:
        return ClusterView("", "", 0, 0, views)
    term = max(r.term for r in replies)
    current = [r for r in replies if r.term == term]
    leader = next((r for r in current if r.role == "leader"), None)
    if leader is not None:
        return ClusterView(leader.node_id, leader.grpc, term, leader.commit_index, views)
    named = next((r for r in current if r.leader_id), None)
    return ClusterView(
        named.leader_id if named else "",
        named.leader_grpc if named else "",
        term,
        max(r.commit_index for r in replies),
        views,
    )
