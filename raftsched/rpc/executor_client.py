"""The gRPC :class:`raftsched.abc.ExecutorTransport`: how an executor calls the scheduler nodes.

One ``grpc.aio`` channel per target, opened on first use and reconnecting on its own. Every
gRPC failure becomes a :class:`raftsched.abc.TransportError` carrying the status (lower case)
and the leader's address from the ``raftsched-leader`` trailing metadata, so the agent never
sees grpc. Work comes over ``DispatchBatch`` (many items per message); a node too old to have it
answers ``UNIMPLEMENTED`` once, and from then on this transport uses ``Dispatch`` (one item per
message).
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Sequence
from typing import Any

import grpc

from raftsched.abc import TransportError
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

_CHANNEL_OPTIONS = [("grpc.initial_reconnect_backoff_ms", 200), ("grpc.max_reconnect_backoff_ms", 2000)]


def _error(exc: grpc.aio.AioRpcError) -> TransportError:
    leader = ""
    for key, value in exc.trailing_metadata() or ():
        if key == "raftsched-leader" and value:
            leader = str(value)
    return TransportError(exc.code().name.lower(), exc.details() or "", leader)


class GrpcExecutorTransport:
    """Executor RPCs over insecure gRPC channels; one instance serves one executor's event loop."""

    def __init__(self) -> None:
        self._channels: dict[str, grpc.aio.Channel] = {}
        self.batched = True  # DispatchBatch until a node says it does not have it

    def _stub(self, target: str) -> Any:
        ch = self._channels.get(target)
        if ch is None:
            ch = self._channels[target] = grpc.aio.insecure_channel(target, options=_CHANNEL_OPTIONS)
        return pb_grpc.ExecutorServiceStub(ch)

    async def register(
        self, target: str, request: pb.RegisterRequest, *, timeout_s: float
    ) -> pb.RegisterReply:
        try:
            reply: pb.RegisterReply = await self._stub(target).Register(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise _error(exc) from None
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
            raise _error(exc) from None
        return reply

    async def report(self, target: str, request: pb.ReportRequest, *, timeout_s: float) -> pb.ReportReply:
        try:
            reply: pb.ReportReply = await self._stub(target).Report(request, timeout=timeout_s)
        except grpc.aio.AioRpcError as exc:
            raise _error(exc) from None
        return reply

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
