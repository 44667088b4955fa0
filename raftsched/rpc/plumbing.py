"""What every gRPC servicer shares: the node services it may use, error mapping, propose-and-wait.

Error contract: a failed call ends with a gRPC status and trailing metadata ``raftsched-code``
(one of the codes in raftsched/errors.py); a ``not_leader`` answer adds ``raftsched-leader:
host:port`` when the leader is known, and the SDK follows it. Handlers raise
:class:`raftsched.errors.RaftschedError` subclasses; :func:`rpc` turns them into that answer.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, NoReturn, Protocol, TypeVar

import grpc

from raftsched.abc import CommitHook, ProposeCallback, StateStore
from raftsched.config import ClusterConfig
from raftsched.errors import NotLeader, RaftschedError
from raftsched.fsm.state import SchedulerState
from raftsched.leader.gate import LeaderGate
from raftsched.security import authz
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb

CODE_KEY = "raftsched-code"
LEADER_KEY = "raftsched-leader"

STATUS = {
    "invalid_argument": grpc.StatusCode.INVALID_ARGUMENT,
    "not_found": grpc.StatusCode.NOT_FOUND,
    "already_exists": grpc.StatusCode.ALREADY_EXISTS,
    "conflict": grpc.StatusCode.ABORTED,
    "stale_epoch": grpc.StatusCode.UNAVAILABLE,
    "unavailable": grpc.StatusCode.UNAVAILABLE,
    "not_leader": grpc.StatusCode.FAILED_PRECONDITION,
    "snapshot_format": grpc.StatusCode.FAILED_PRECONDITION,
    "internal": grpc.StatusCode.INTERNAL,
    "unauthenticated": grpc.StatusCode.UNAUTHENTICATED,
    "permission_denied": grpc.StatusCode.PERMISSION_DENIED,
}

PROPOSE_TIMEOUT_S = 10.0


class Proposer(Protocol):
    def propose(self, data: bytes, callback: ProposeCallback, on_commit: CommitHook | None = None) -> None:
        """Propose ``data`` to the replicated log (see :class:`raftsched.abc.ConsensusNode`)."""
        ...


class NodeServices(Proposer, Protocol):
    """What a servicer may use of its node: this is the whole surface, not the node itself.

    ``state`` and ``store`` are this node's applied state (read-only here: writes go through
    ``propose``); ``gate`` decides leadership and stamps leader commands.
    """

    @property
    def node_id(self) -> str: ...

    @property
    def state(self) -> SchedulerState: ...

    @property
    def store(self) -> StateStore: ...

    @property
    def gate(self) -> LeaderGate: ...

    @property
    def config(self) -> ClusterConfig: ...

    def node_status(
        self, lateness_since_ms: int = 0, include_digest: bool = False, chain_at_index: int = 0
    ) -> pb.NodeStatusReply: ...

    def cluster_status(self) -> pb.ClusterStatusReply: ...

    def token_last_used(self, token_id: str) -> int:
        """When this node last accepted ``token_id`` (leader-clock ms; 0: not since it started)."""
        ...


class Refused(RaftschedError):
    """A write that did not commit, or that the state machine rejected, with the code it got."""

    def __init__(self, code: str, message: str) -> None:
        self.code = code
        super().__init__(message)


def caller() -> authz.Caller:
    """Who is calling the RPC being handled (principal, method, peer, what it names), as the
    node's auth interceptor established it; with auth off, an anonymous admin. Servicers use it
    only to filter and check namespaces, bind executor names and stamp the audit log: whether
    the call is allowed at all was decided by the authorization table before the handler ran."""
    return authz.caller()


def error_metadata(exc: RaftschedError) -> tuple[tuple[str, str], ...]:
    """The trailing metadata that carries ``exc`` to the SDK."""
    leader = exc.leader if isinstance(exc, NotLeader) else None
    if leader:
        return ((CODE_KEY, exc.code), (LEADER_KEY, leader))
    return ((CODE_KEY, exc.code),)


async def abort(
    context: grpc.aio.ServicerContext, exc: RaftschedError, status: grpc.StatusCode | None = None
) -> NoReturn:
    """End the call with ``exc``: its code's status (or ``status``) and the error metadata."""
    context.set_trailing_metadata(error_metadata(exc))
    await context.abort(status or STATUS.get(exc.code, grpc.StatusCode.UNKNOWN), str(exc))
    raise AssertionError("unreachable")  # context.abort raises


S = TypeVar("S")
Req = TypeVar("Req")
Rep = TypeVar("Rep")


def rpc(
    handler: Callable[[S, Req, grpc.aio.ServicerContext], Awaitable[Rep]],
) -> Callable[[S, Req, grpc.aio.ServicerContext], Coroutine[Any, Any, Rep]]:
    """Decorate a unary servicer method: a :class:`RaftschedError` it raises becomes the answer
    (see the module docstring). Any other exception is a bug and reaches gRPC as UNKNOWN."""

    @functools.wraps(handler)
    async def call(self: S, request: Req, context: grpc.aio.ServicerContext) -> Rep:
        try:
            return await handler(self, request, context)
        except RaftschedError as exc:
            await abort(context, exc)

    return call


async def propose_and_wait(node: Proposer, data: bytes) -> logpb.CommandResult:
    """Propose one command and wait until it is applied on this node.

    Returns the state machine's result if it accepted the command. Raises :class:`Refused` with
    the rejection's code if it refused it, and with ``unavailable`` if the command did not commit
    or its outcome is unknown (it may still apply: retry with the same idempotency key).
    """
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

    node.propose(data, done)
    try:
        raw = await asyncio.wait_for(fut, PROPOSE_TIMEOUT_S)
    except TimeoutError:
        raise Refused(
            "unavailable",
            "the write was not confirmed in time; its outcome is unknown "
            "(retry with the same idempotency key)",
        ) from None
    except Exception as exc:  # ProposeError
        code = getattr(exc, "code", "unavailable")
        raise Refused(code if code in STATUS else "unavailable", f"write not committed: {exc}") from None
    result = logpb.CommandResult()
    result.ParseFromString(raw)
    if not raw:
        raise Refused("unavailable", "the write's outcome is unknown (retry with the same idempotency key)")
    if not result.ok:
        raise Refused(result.code or "internal", result.message)
    return result
