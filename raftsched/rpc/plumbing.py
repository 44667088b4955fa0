"""What every gRPC servicer shares: the node services it may use, error mapping, propose-and-wait.

Error contract: a failed call ends with a gRPC status and trailing metadata ``raftsched-code``
(one of the codes in raftsched/errors.py); a ``not_leader`` answer adds ``raftsched-leader:
host:port`` when the leader is known, and the SDK follows it. Handlers raise
:class:`raftsched.errors.RaftschedError` subclasses; :func:`rpc` turns them into that answer.
"""

from __future__ import annotations

import asyncio
import functools
from collections.abc import AsyncIterator, Awaitable, Callable, Coroutine
from typing import Any, NoReturn, Protocol, TypeVar

import grpc
from google.protobuf.message import Message

from raftsched import bounds
from raftsched.abc import CommitHook, ProposeCallback, StateStore
from raftsched.config.types import ClusterConfig
from raftsched.errors import InvalidSpec, NotLeader, RaftschedError, clip
from raftsched.fsm.state import SchedulerState
from raftsched.leader.gate import LeaderGate
from raftsched.leader.reads import ReadIndex
from raftsched.readinfo import ReadInfo
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

STATUS_MESSAGE_BYTES = 4_096
"""The most a status message may take on the wire. gRPC sends it percent-encoded in the trailers
(3 bytes for each byte outside printable ASCII) and clients refuse trailers over 8 KiB, so an
error quoting non-ASCII input would otherwise turn into a client-side RESOURCE_EXHAUSTED."""


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

    @property
    def reads(self) -> ReadIndex:
        """Confirms linearizable reads (a read barrier per batch: raftsched.leader.reads)."""
        ...

    def stale_read_info(self) -> ReadInfo:
        """How fresh this node's own state is, for a stale read's reply."""
        ...

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


def _wire_size(ch: str) -> int:
    if " " <= ch <= "~" and ch != "%":
        return 1
    return 3 * len(ch.encode("utf-8", "surrogatepass"))


def status_message(text: str, limit: int = STATUS_MESSAGE_BYTES) -> str:
    """``text`` cut so that its percent-encoded form fits in ``limit`` bytes (see
    :data:`STATUS_MESSAGE_BYTES`); a cut message ends with "… (message cut)"."""
    if len(text) * 12 <= limit or sum(map(_wire_size, text)) <= limit:
        return text
    suffix = "\u2026 (message cut)"
    budget = limit - sum(map(_wire_size, suffix))
    used = 0
    for i, ch in enumerate(text):
        used += _wire_size(ch)
        if used > budget:
            return text[:i] + suffix
    return text


async def abort(
    context: grpc.aio.ServicerContext, exc: RaftschedError, status: grpc.StatusCode | None = None
) -> NoReturn:
    """End the call with ``exc``: its code's status (or ``status``) and the error metadata. The
    message is bounded on the wire whatever it quotes (:func:`status_message`)."""
    context.set_trailing_metadata(error_metadata(exc))
    note = getattr(context, "note_error", None)
    if note is not None:  # an in-process call (raftsched.rpc.http_api) keeps the error's field path
        note(exc)
    await context.abort(status or STATUS.get(exc.code, grpc.StatusCode.UNKNOWN), status_message(str(exc)))
    raise AssertionError("unreachable")  # context.abort raises


class Undecodable:
    """What :class:`DecodeGuard` hands on instead of a request whose bytes do not parse."""

    __slots__ = ("problem",)

    def __init__(self, problem: InvalidSpec) -> None:
        self.problem = problem


def _varint(data: bytes, i: int) -> tuple[int, int]:
    value = shift = 0
    while True:
        byte = data[i]
        i += 1
        value |= (byte & 0x7F) << shift
        if byte < 0x80:
            return value, i
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def bad_utf8_field(descriptor: Any, data: bytes, depth: int = 0) -> str | None:
    """The path (``spec.name``) of the first string field in the encoded ``descriptor`` message
    ``data`` whose bytes are not UTF-8; None if there is none or the bytes do not parse."""
    i = 0
    try:
        while i < len(data):
            tag, i = _varint(data, i)
            number, wire = tag >> 3, tag & 7
            if wire == 0:
                _, i = _varint(data, i)
            elif wire == 1:
                i += 8
            elif wire == 5:
                i += 4
            elif wire == 2:
                length, i = _varint(data, i)
                chunk, i = data[i : i + length], i + length
                fd = descriptor.fields_by_number.get(number)
                if fd is None:
                    continue
                if fd.type == fd.TYPE_STRING:
                    try:
                        chunk.decode("utf-8")
                    except UnicodeDecodeError:
                        return str(fd.name)
                elif fd.type == fd.TYPE_MESSAGE and depth < 32:
                    inner = bad_utf8_field(fd.message_type, chunk, depth + 1)
                    if inner is not None:
                        return f"{fd.name}.{inner}"
            else:
                return None
    except (IndexError, ValueError):
        return None
    return None


def _guarded(deserialize: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserialize is None:
        return None
    parse = deserialize
    descriptor = getattr(getattr(deserialize, "__self__", None), "DESCRIPTOR", None)

    def guarded(data: bytes) -> Any:
        try:
            return parse(data)
        except Exception as exc:  # DecodeError mostly: any failure to parse wire bytes is bad input
            where = bad_utf8_field(descriptor, data) if descriptor is not None else None
            return Undecodable(InvalidSpec(where or "request", f"cannot be decoded: {clip(str(exc), 300)}"))

    return guarded


class DecodeGuard(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc has no types
    """Answer a request that does not parse (invalid UTF-8 in a string field, a truncated or
    malformed message) with INVALID_ARGUMENT and the parser's reason, before any handler runs.

    gRPC parses requests before the handler runs and answers a parse failure with UNKNOWN plus an
    ERROR traceback in the node log; this interceptor swaps each method's deserializer for one
    that cannot raise. Place it outside the authorization interceptor, so no later interceptor
    ever sees an unparsed request.
    """

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return None
        deserialize = _guarded(handler.request_deserializer)
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                if isinstance(request, Undecodable):
                    await abort(context, request.problem)
                return await inner(request, context)

            return grpc.unary_unary_rpc_method_handler(
                unary, request_deserializer=deserialize, response_serializer=handler.response_serializer
            )
        if handler.unary_stream is not None:
            inner_stream = handler.unary_stream

            async def stream(request: Any, context: grpc.aio.ServicerContext) -> Any:
                if isinstance(request, Undecodable):
                    await abort(context, request.problem)
                async for item in inner_stream(request, context):
                    yield item

            return grpc.unary_stream_rpc_method_handler(
                stream, request_deserializer=deserialize, response_serializer=handler.response_serializer
            )
        if handler.stream_stream is not None:  # ExecutorService.Session
            inner_bidi = handler.stream_stream

            async def bidi(requests: Any, context: grpc.aio.ServicerContext) -> Any:
                async for item in inner_bidi(_decoded(requests), context):
                    yield item

            return grpc.stream_stream_rpc_method_handler(
                bidi, request_deserializer=deserialize, response_serializer=handler.response_serializer
            )
        if handler.stream_unary is not None:  # ExecutorService.SendLogs
            inner_client = handler.stream_unary

            async def client_stream(requests: Any, context: grpc.aio.ServicerContext) -> Any:
                return await inner_client(_decoded(requests), context)

            return grpc.stream_unary_rpc_method_handler(
                client_stream,
                request_deserializer=deserialize,
                response_serializer=handler.response_serializer,
            )
        return handler


async def _decoded(requests: AsyncIterator[Any]) -> AsyncIterator[Any]:
    """A stream's requests; one that does not parse raises its :class:`InvalidSpec` to the
    handler reading them (which ends the call with it)."""
    async for request in requests:
        if isinstance(request, Undecodable):
            raise request.problem
        yield request


S = TypeVar("S")
Req = TypeVar("Req")
Rep = TypeVar("Rep")


def rpc(
    handler: Callable[[S, Req, grpc.aio.ServicerContext], Awaitable[Rep]],
) -> Callable[[S, Req, grpc.aio.ServicerContext], Coroutine[Any, Any, Rep]]:
    """Decorate a unary servicer method: a :class:`RaftschedError` it raises becomes the answer
    (see the module docstring). Any other exception is a bug and reaches gRPC as UNKNOWN.

    Before the handler runs, every integer field of the request is checked against its range
    (:mod:`raftsched.bounds`): one outside is INVALID_ARGUMENT naming the field and the range."""

    @functools.wraps(handler)
    async def call(self: S, request: Req, context: grpc.aio.ServicerContext) -> Rep:
        try:
            if isinstance(request, Message):
                bounds.check(request)
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


# Calls a node with a damaged store still answers: how it is, so status shows the damage.
_ANSWERED_WHEN_DAMAGED = frozenset(
    {"/raftsched.v1.Admin/NodeStatus", "/raftsched.v1.Admin/ClusterStatus", "/grpc.health.v1.Health/Check"}
)


class DamagedGuard(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc has no types
    """Refuse every call but status and health with UNAVAILABLE while ``damaged()`` says why the
    node's stored state is damaged: its reads would serve that state, and its executor streams
    would place work from it. Clients and executors go to another node."""

    def __init__(self, damaged: Callable[[], str]) -> None:
        self._damaged = damaged

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        why = self._damaged()
        if handler is None or not why or details.method in _ANSWERED_WHEN_DAMAGED:
            return handler
        message = f"this node's stored state is damaged; ask another node ({why})"

        async def refuse(_request: Any, context: grpc.aio.ServicerContext) -> Any:
            await context.abort(grpc.StatusCode.UNAVAILABLE, clip(message, 1000))

        async def refuse_stream(_request: Any, context: grpc.aio.ServicerContext) -> Any:
            await context.abort(grpc.StatusCode.UNAVAILABLE, clip(message, 1000))
            yield None  # pragma: no cover - abort raises

        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                refuse,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                refuse_stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_stream is not None:  # ExecutorService.Session
            return grpc.stream_stream_rpc_method_handler(
                refuse_stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_unary is not None:  # ExecutorService.SendLogs
            return grpc.stream_unary_rpc_method_handler(
                refuse,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler
