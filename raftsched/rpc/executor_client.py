"""The gRPC :class:`raftsched.abc.ExecutorTransport`: how an executor calls the scheduler nodes.

One ``grpc.aio`` channel per target, opened on first use and reconnecting on its own. Every
gRPC failure becomes a :class:`raftsched.abc.TransportError` carrying the status (lower case)
and the leader's address from the ``raftsched-leader`` trailing metadata, so the agent never
sees grpc. Work comes over ``DispatchBatch`` (many items per message); a node too old to have it
answers ``UNIMPLEMENTED`` once, and from then on this transport uses ``Dispatch`` (one item per
message).

With a :class:`raftsched.security.tls.TlsConfig` the channels speak TLS (credentials built once).
A call that fails because of TLS (plaintext against a TLS node or the reverse, an untrusted
certificate, a client certificate missing or refused) becomes a ``TransportError`` with code
:data:`TLS_CODE` and the diagnosis as its details; the diagnosis runs only after a failure.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Sequence
from typing import Any, Final

import grpc

from raftsched.abc import TransportError
from raftsched.errors import TlsError
from raftsched.security.tls import TlsConfig, aio_channel, diagnose_handshake
from raftsched.security.tokens import aio_interceptors, resolve_token
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

_CHANNEL_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 200), ("grpc.max_reconnect_backoff_ms", 2000)]


TLS_CODE: Final = TlsError.code
"""``TransportError.code`` of a call refused by a TLS misconfiguration (details say what to fix)."""


def _error(exc: grpc.aio.AioRpcError) -> TransportError:
    leader = ""
    for key, value in exc.trailing_metadata() or ():
        if key == "raftsched-leader" and value:
            leader = str(value)
    return TransportError(exc.code().name.lower(), exc.details() or "", leader)


class GrpcExecutorTransport:
    """Executor RPCs over gRPC channels (TLS with ``tls``, else plaintext); one instance serves
    one executor's event loop. ``token`` (else ``RAFTSCHED_TOKEN``, if set) is sent as a bearer
    token on every call: an executor token for a cluster with auth on. Raises InvalidSpec for a
    TLS file that cannot be used or a malformed token."""

    def __init__(self, tls: TlsConfig | None = None, token: str | None = None) -> None:
        self._token = resolve_token(token)
        self._channels: dict[str, grpc.aio.Channel] = {}
        self._tls = tls
        self._credentials = tls.channel_credentials() if tls is not None else None
        self.batched = True  # DispatchBatch until a node says it does not have it

    def _stub(self, target: str) -> Any:
        ch = self._channels.get(target)
        if ch is None:
            ch = self._channels[target] = aio_channel(
                target, self._tls, _CHANNEL_OPTIONS, self._credentials, aio_interceptors(self._token)
            )
        return pb_grpc.ExecutorServiceStub(ch)

    async def _failure(self, target: str, exc: grpc.aio.AioRpcError) -> TransportError:
        if exc.code() == grpc.StatusCode.UNAVAILABLE:
            # The diagnosis may probe the node (a blocking connect): off the event loop.
            problem = await asyncio.to_thread(diagnose_handshake, exc.details() or "", target, self._tls)
            if problem:
                return TransportError(TLS_CODE, problem)
        return _error(exc)

    async def register(
        self, target: str, request: pb.RegisterRequest, *, timeout_s: float
    ) -> pb.RegisterReply:
        try:
            reply: pb.RegisterReply = await self._stub(target).Register(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise await self._failure(target, exc) from None
        return reply

    def dispatch(self, target: str, request: pb.DispatchRequest) -> _GrpcDispatch:
        stub = self._stub(target)
        batched = self.batched
        call = stub.DispatchBatch(request) if batched else stub.Dispatch(request)
        return _GrpcDispatch(self, call, batched)

    async def heartbeat(
        self, target: str, request: pb.HeartbeatRequest, *, timeout_s: float
    ) -> pb.HeartbeatReply:
        try:
            reply: pb.HeartbeatReply = await self._stub(target).Heartbeat(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise await self._failure(target, exc) from None
        return reply

    async def report(self, target: str, request: pb.ReportRequest, *, timeout_s: float) -> pb.ReportReply:
        try:
            reply: pb.ReportReply = await self._stub(target).Report(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise await self._failure(target, exc) from None
        return reply

    async def drain(self, target: str, request: pb.DrainRequest, *, timeout_s: float) -> pb.DrainReply:
        try:
            reply: pb.DrainReply = await self._stub(target).Drain(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise await self._failure(target, exc) from None
        return reply

    async def leave(self, target: str, request: pb.LeaveRequest, *, timeout_s: float) -> pb.LeaveReply:
        try:
            reply: pb.LeaveReply = await self._stub(target).Leave(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise await self._failure(target, exc) from None
        return reply

    async def send_logs(self, target: str, parts: AsyncIterator[pb.LogUpload]) -> None:
        """Stream one log answer (client-streaming ``SendLogs``); gRPC flow control paces it to
        the reader. Returns when the node answered (all taken, or the reader went away)."""
        try:
            await self._stub(target).SendLogs(parts)
        except grpc.aio.AioRpcError as exc:
            raise _error(exc) from None

    def session(self, target: str) -> _GrpcSession:
        """Open a ``Session`` stream at ``target`` (issue 31 P2): the caller sends SessionOpen first."""
        return _GrpcSession(self._stub(target).Session())

    async def close(self) -> None:
        channels, self._channels = self._channels, {}
        for ch in channels.values():
            await ch.close()


class _GrpcDispatch:
    """One open dispatch call, yielding each message's work items."""

    def __init__(self, transport: GrpcExecutorTransport, call: Any, batched: bool) -> None:
        self._transport = transport
        self._call = call
        self._batched = batched

    def cancel(self) -> None:
        self._call.cancel()

    async def __aiter__(self) -> AsyncIterator[Sequence[pb.WorkItem]]:
        try:
            if self._batched:
                async for batch in self._call:
                    yield batch.items
            else:
                async for item in self._call:
                    yield (item,)
        except grpc.aio.AioRpcError as exc:
            if self._batched and exc.code() == grpc.StatusCode.UNIMPLEMENTED:
                self._transport.batched = False  # a node older than DispatchBatch
            raise _error(exc) from None


class _GrpcSession:
    """One open Session call: ``send`` writes up, iterating reads down.

    ``send`` may be called from several tasks at once (the agent's heartbeat loop and its
    report loop share the session); they write one after the other, in the order they called.
    A gRPC call takes ONE write at a time: a second ``write`` while the first waits for the
    peer's flow-control window is refused by gRPC core (``GRPC_CALL_ERROR_TOO_MANY_OPERATIONS``),
    and grpc.aio then ends the whole call as ``INTERNAL: Internal error from Core``."""

    def __init__(self, call: Any) -> None:
        self._call = call
        self._writing = asyncio.Lock()  # FIFO: writes keep their callers' order

    def cancel(self) -> None:
        self._call.cancel()

    async def send(self, message: pb.SessionUp) -> None:
        try:
            async with self._writing:
                await self._call.write(message)
        except grpc.aio.AioRpcError as exc:
            raise _error(exc) from None
        except asyncio.InvalidStateError:  # written after the call ended: its status says why
            code = await self._call.code()
            details = await self._call.details()
            raise TransportError(code.name.lower(), details or "the session ended") from None

    async def __aiter__(self) -> AsyncIterator[pb.SessionDown]:
        try:
            while True:
                message = await self._call.read()
                if message is grpc.aio.EOF:
                    return
                yield message
        except grpc.aio.AioRpcError as exc:
            raise _error(exc) from None
