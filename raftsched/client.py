"""The typed, synchronous gRPC SDK: :class:`Client` talks to a raftsched cluster's Admin service.

Contract
    * Every write (add, update, delete, enable, disable, trigger) carries an idempotency key drawn
      once per call and reused on every retry of that call. A retry after a timeout, a leader change
      or an unknown outcome therefore applies at most once (for as long as the cluster remembers
      keys, ``scheduler.idempotency_keep_seconds``).
    * A node that is not the leader answers a write with ``not_leader`` and, when it knows one, the
      leader's address; the client follows that hint at once (adding the address to its targets if
      it is new). Reads are answered by any node from its local state (a follower may lag the leader
      by a few milliseconds); a read refused with ``not_leader`` is redirected the same way.
    * UNAVAILABLE, a deadline, ``not_leader`` without a hint, ``unavailable`` and ``stale_epoch`` (a
      deposed leader stamped the write) move the call to the next target after a short backoff
      (50 ms doubling to 1 s). A call makes at most ``1 + retries`` attempts, then raises
      :class:`~raftsched.errors.Unavailable` naming every target tried and the last error.
    * Every other error is raised at once as its :mod:`raftsched.errors` exception
      (:class:`~raftsched.errors.NotFound`, :class:`~raftsched.errors.InvalidSpec`, ...).
    * Input the model can check (names, params) is validated locally, before any RPC.

Threading: a client may be shared between threads; each call is independent. One gRPC channel per
target is opened lazily and kept until :meth:`Client.close`.
"""

from __future__ import annotations

import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from types import TracebackType
from typing import Any, Final

import grpc
from google.protobuf.message import Message

from raftsched import codec
from raftsched.config import parse_address
from raftsched.errors import (
    AlreadyExists,
    Conflict,
    InvalidSpec,
    NotFound,
    NotLeader,
    RaftschedError,
    StaleEpoch,
    Unavailable,
    error_for_code,
)
from raftsched.model import RunState, TaskSpec, validate_name, validate_params
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

__all__ = ["Client", "ClusterView", "NodeView"]

CODE_KEY: Final = "raftsched-code"
LEADER_KEY: Final = "raftsched-leader"

_BACKOFF_INITIAL_S: Final = 0.05
_BACKOFF_MAX_S: Final = 1.0
# The generated gRPC module is untyped (or Any when mypy does not analyse it); one Any-typed handle
# keeps calls into it type-clean either way.
_GENERATED: Any = pb_grpc
# The one place the client waits; a module attribute so tests can record backoffs instead of waiting.
_sleep: Callable[[float], None] = time.sleep

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
    attempts after the first. Raises :class:`InvalidSpec` for a malformed target list.
    """

    def __init__(self, targets: str | Sequence[str], *, timeout: float = 10.0, retries: int = 8) -> None:
        if timeout <= 0:
            raise InvalidSpec("timeout", f"must be > 0 seconds, got {timeout!r}")
        if retries < 0:
            raise InvalidSpec("retries", f"must be >= 0, got {retries!r}")
        self._targets = _parse_targets(targets)
        self._timeout = timeout
        self._retries = retries
        self._preferred = 0  # index into _targets of the node that last answered
        self._channels: dict[str, Any] = {}
        self._lock = threading.Lock()
        self._closed = False

    @property
    def targets(self) -> tuple[str, ...]:
        """The known targets: the ones given, then any leader addresses learned from hints."""
        with self._lock:
            return tuple(self._targets)

    def close(self) -> None:
        """Close every channel. The client cannot be used afterwards."""
        with self._lock:
            channels, self._channels = list(self._channels.values()), {}
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
            request = pb.AddTasksRequest(
                tasks=[pb.AddTaskRequest(spec=codec.spec_to_pb(s), disabled=disabled) for s in chunk],
                idempotency_key=_key(),
            )
            reply: pb.AddTasksReply = self._call("AddTasks", request, write=True)
            results.extend(reply.results)
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

    def get_task(self, name: str) -> pb.TaskRecord:
        reply: pb.TaskReply = self._call("GetTask", pb.GetTaskRequest(name=validate_name(name)))
        return reply.task

    def list_tasks(self, prefix: str = "", limit: int = 0) -> list[pb.TaskRecord]:
        """Tasks in name order whose names start with ``prefix``; ``limit`` 0 means all."""
        reply: pb.ListTasksReply = self._call("ListTasks", pb.ListTasksRequest(prefix=prefix, limit=limit))
        return list(reply.tasks)

    def runs(
        self,
        task: str = "",
        *,
        since_ms: int = 0,
        until_ms: int = 0,
        state: RunState | None = None,
        limit: int = 0,
    ) -> list[pb.Run]:
        """Runs (of ``task``, or all) whose nominal time is in [since, until]; 0 means unbounded."""
        if task:
            validate_name(task, "task")
        request = pb.ListRunsRequest(
            task=task,
            since_ms=since_ms,
            until_ms=until_ms,
            state=codec.RUN_STATE_TO_PB[state] if state is not None else pb.RUN_STATE_UNSPECIFIED,
            limit=limit,
        )
        reply: pb.ListRunsReply = self._call("ListRuns", request)
        return list(reply.runs)

    def fire_accounting(
        self, task: str, *, since_ms: int = 0, until_ms: int = 0, limit: int = 0
    ) -> list[pb.FireRecord]:
        """How each nominal fire of ``task`` in [since, until] was accounted (fired, coalesced, ...)."""
        request = pb.FireAccountingRequest(
            task=validate_name(task, "task"), since_ms=since_ms, until_ms=until_ms, limit=limit
        )
        reply: pb.FireAccountingReply = self._call("FireAccounting", request)
        return list(reply.fires)

    def explain(self, task: str, at_ms: int) -> pb.ExplainReply:
        """Why ``task`` did (or did not) fire at ``at_ms``."""
        reply: pb.ExplainReply = self._call(
            "Explain", pb.ExplainRequest(task=validate_name(task, "task"), at_ms=at_ms)
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
            outcome = _classify(err)
            if isinstance(outcome, _Retry):
                raise Unavailable(f"{address}: {outcome}") from None
            raise outcome from None
        return answer

    def cluster_status(self) -> ClusterView:
        """Ask every known target for its NodeStatus, concurrently; unreachable ones are reported too."""
        targets = self.targets
        futures = [
            (t, self._stub(t).NodeStatus.future(pb.NodeStatusRequest(), timeout=self._timeout))
            for t in targets
        ]
        views: list[NodeView] = []
        for target, future in futures:
            try:
                views.append(NodeView(target, future.result()))
            except grpc.RpcError as err:
                views.append(NodeView(target, None, _describe(err)))
        return _summarise(tuple(views))

    # -- the retry loop ----------------------------------------------------------------------------

    def _call(self, method: str, request: Message, *, write: bool = False) -> Any:
        """Run one RPC with redirects, rotation and backoff (see the module docstring).

        ``request`` is sent unchanged on every attempt, so a write's idempotency key is reused.
        """
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
                reply = getattr(self._stub(target), method)(request, timeout=self._timeout)
            except grpc.RpcError as err:
                outcome = _classify(err)
                if not isinstance(outcome, _Retry):
                    raise outcome from None
            else:
                self._prefer(target)
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
            channel = self._channels.get(target)
            if channel is None:
                # Nodes restart during failovers: keep reconnect backoff short (gRPC's default
                # grows to two minutes) so a returning node is usable again quickly.
                channel = self._channels[target] = grpc.insecure_channel(target, options=_CHANNEL_OPTIONS)
        return _GENERATED.AdminStub(channel)

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
