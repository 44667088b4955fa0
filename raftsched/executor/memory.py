"""The in-process :class:`raftsched.abc.ExecutorTransport`, for simulation and for users' own tests.

A :class:`MemoryTransport` hands each executor call to an :class:`ExecutorEndpoint`, the
scheduler side, which answers at once on the executor's event loop: the simulated cluster of
:mod:`raftsched.testing` is one, :class:`LoopbackEndpoint` (a stand-in leader that accepts every
executor and acknowledges every result) another. Work reaches the executor through the
:class:`MemoryStream` the endpoint was given when the executor opened its dispatch stream.
Timeouts are not modelled: an endpoint that wants a call to fail raises
:class:`raftsched.abc.TransportError`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable, Iterable, Sequence
from typing import TYPE_CHECKING, Protocol

from raftsched.abc import TransportError
from raftsched.executor.aio import wait_event
from raftsched.v1 import raftsched_pb2 as pb

if TYPE_CHECKING:
    from raftsched.executor.agent import Executor

_END = None  # queued by close(): the stream ends


class MemoryStream:
    """One executor's open dispatch stream. The endpoint pushes batches; the executor iterates.

    ``push`` and ``close`` may be called while the executor's loop is not running (a simulation
    steps the loop between rounds); what they queue is consumed when it runs again. After
    ``close``, ``fail`` or the executor's ``cancel``, pushes are dropped.
    """

    def __init__(self, target: str, name: str) -> None:
        self.target = target
        self.name = name
        self._queue: asyncio.Queue[list[pb.WorkItem] | TransportError | None] = asyncio.Queue()
        self._open = True
        # Called when the executor hangs up (what the server sees as the stream closing).
        self.on_cancel: Callable[[], None] | None = None

    @property
    def open(self) -> bool:
        return self._open

    def push(self, items: Iterable[pb.WorkItem]) -> None:
        batch = list(items)
        if self._open and batch:
            self._queue.put_nowait(batch)

    def close(self) -> None:
        """End the stream (the node stopped leading): the executor looks for the leader again."""
        if self._open:
            self._open = False
            self._queue.put_nowait(_END)

    def fail(self, error: TransportError) -> None:
        """Break the stream with ``error`` (the connection failed)."""
        if self._open:
            self._open = False
            self._queue.put_nowait(error)

    def cancel(self) -> None:
        was_open = self._open
        self.close()
        if was_open and self.on_cancel is not None:
            self.on_cancel()

    async def __aiter__(self) -> AsyncIterator[Sequence[pb.WorkItem]]:
        while True:
            message = await self._queue.get()
            if message is None:
                return
            if isinstance(message, TransportError):
                raise message
            yield message


class ExecutorEndpoint(Protocol):
    """The scheduler side of a :class:`MemoryTransport`; each method answers one executor call.

    Called on the executor's event loop, synchronously; raise :class:`TransportError` to fail the
    call (with ``leader`` set to redirect the executor). ``open_stream`` receives the new stream
    to push work into (and may push at once, or fail it).
    """

    def register(self, target: str, request: pb.RegisterRequest) -> pb.RegisterReply: ...

    def open_stream(self, stream: MemoryStream) -> None: ...

    def heartbeat(self, target: str, request: pb.HeartbeatRequest) -> pb.HeartbeatReply: ...

    def report(self, target: str, request: pb.ReportRequest) -> pb.ReportReply: ...

    def drain(self, target: str, request: pb.DrainRequest) -> pb.DrainReply: ...

    def leave(self, target: str, request: pb.LeaveRequest) -> pb.LeaveReply: ...


class MemoryTransport:
    """An :class:`raftsched.abc.ExecutorTransport` that calls ``endpoint`` in process.

    Every call first yields to the event loop once, as a network round trip would, so an
    executor loop that keeps calling cannot starve the others.
    """

    def __init__(self, endpoint: ExecutorEndpoint, silent: Callable[[str], bool] | None = None) -> None:
        self.endpoint = endpoint
        # ``silent(target)``: the node answers nothing (a paused process): a call to it waits for
        # its whole timeout and fails with ``deadline_exceeded``, as over a real network.
        self.silent = silent

    async def _reach(self, target: str, timeout_s: float) -> None:
        await asyncio.sleep(0)
        if self.silent is not None and self.silent(target):
            await asyncio.sleep(timeout_s)
            raise TransportError("deadline_exceeded", f"{target} did not answer in {timeout_s:g} s")

    async def register(
        self, target: str, request: pb.RegisterRequest, *, timeout_s: float
    ) -> pb.RegisterReply:
        await self._reach(target, timeout_s)
        return self.endpoint.register(target, request)

    def dispatch(self, target: str, request: pb.DispatchRequest) -> MemoryStream:
        stream = MemoryStream(target, request.name)
        try:
            self.endpoint.open_stream(stream)
        except TransportError as exc:
            stream.fail(exc)
        return stream

    async def heartbeat(
        self, target: str, request: pb.HeartbeatRequest, *, timeout_s: float
    ) -> pb.HeartbeatReply:
        await self._reach(target, timeout_s)
        return self.endpoint.heartbeat(target, request)

    async def report(self, target: str, request: pb.ReportRequest, *, timeout_s: float) -> pb.ReportReply:
        await self._reach(target, timeout_s)
        return self.endpoint.report(target, request)

    async def drain(self, target: str, request: pb.DrainRequest, *, timeout_s: float) -> pb.DrainReply:
        await self._reach(target, timeout_s)
        return self.endpoint.drain(target, request)

    async def leave(self, target: str, request: pb.LeaveRequest, *, timeout_s: float) -> pb.LeaveReply:
        await self._reach(target, timeout_s)
        return self.endpoint.leave(target, request)

    async def close(self) -> None:
        return None


class LoopbackEndpoint:
    """A stand-in leader for tests: accepts every executor at ``epoch``, records what it is told.

    ``push(name, items)`` sends work to the executor's open stream; ``reports`` collects every
    result reported (each is acknowledged); ``heartbeats`` every heartbeat; ``drained`` and
    ``left`` every drain and leave. :meth:`until` wakes
    after every call, so a test waits for a condition instead of sleeping. Typical use::

        endpoint = LoopbackEndpoint()
        ex = Executor("loopback:1", "ex1", transport=MemoryTransport(endpoint),
                      execution_log=MemoryExecutionLog())
        async with endpoint.serving(ex):
            endpoint.push("ex1", [work_item])
            await endpoint.until(lambda: len(endpoint.reports) == 1)
    """

    def __init__(
        self,
        *,
        epoch: int = 1,
        lease_ms: int = 2000,
        heartbeat_ms: int = 100,
        partial_heartbeats: bool = False,
    ) -> None:
        self.epoch = epoch
        self.lease_ms = lease_ms
        self.heartbeat_ms = heartbeat_ms
        self.partial_heartbeats = partial_heartbeats  # answer as a leader that takes partial ones
        self.registered: list[pb.RegisterRequest] = []
        self.heartbeats: list[pb.HeartbeatRequest] = []
        self.reports: list[pb.ExecResult] = []
        self.drained: list[pb.DrainRequest] = []
        self.left: list[pb.LeaveRequest] = []
        self.streams: dict[str, MemoryStream] = {}
        self._changed: asyncio.Event | None = None

    def _touch(self) -> None:
        if self._changed is not None:
            self._changed.set()

    def register(self, target: str, request: pb.RegisterRequest) -> pb.RegisterReply:
        self.registered.append(request)
        self._touch()
        return pb.RegisterReply(
            epoch=self.epoch,
            lease_ms=self.lease_ms,
            heartbeat_ms=self.heartbeat_ms,
            partial_heartbeats=self.partial_heartbeats,
        )

    def open_stream(self, stream: MemoryStream) -> None:
        self.streams[stream.name] = stream
        self._touch()

    def heartbeat(self, target: str, request: pb.HeartbeatRequest) -> pb.HeartbeatReply:
        self.heartbeats.append(request)
        self._touch()
        return pb.HeartbeatReply(epoch=self.epoch, registered=True)

    def report(self, target: str, request: pb.ReportRequest) -> pb.ReportReply:
        self.reports.extend(request.results)
        self._touch()
        return pb.ReportReply(acknowledged=[r.execution_id for r in request.results])

    def drain(self, target: str, request: pb.DrainRequest) -> pb.DrainReply:
        self.drained.append(request)
        self._touch()
        return pb.DrainReply()

    def leave(self, target: str, request: pb.LeaveRequest) -> pb.LeaveReply:
        self.left.append(request)
        self._touch()
        return pb.LeaveReply()

    def push(self, name: str, items: Iterable[pb.WorkItem]) -> None:
        """Send ``items`` (one message) to executor ``name``; raises ``KeyError`` if it has no stream."""
        self.streams[name].push(items)

    async def until(self, predicate: Callable[[], bool], timeout_s: float = 10.0) -> None:
        """Wait until ``predicate()`` holds, re-checking after every executor call and every
        50 ms; raises :class:`TimeoutError` after ``timeout_s``."""
        loop = asyncio.get_running_loop()
        deadline = loop.time() + timeout_s
        if self._changed is None:
            self._changed = asyncio.Event()
        while not predicate():
            left = deadline - loop.time()
            if left <= 0:
                raise TimeoutError("condition not reached in time")
            self._changed.clear()
            await wait_event(self._changed, min(left, 0.05))

    @contextlib.asynccontextmanager
    async def serving(self, executor: Executor, timeout_s: float = 10.0) -> AsyncIterator[None]:
        """Run ``executor`` (over a :class:`MemoryTransport` to this endpoint) until the block
        ends; the block starts once its dispatch stream is open. The executor's own failure,
        if any, is raised when the block ends."""
        stop = asyncio.Event()
        task = asyncio.ensure_future(executor.run(stop))
        try:
            await self.until(lambda: task.done() or executor.name in self.streams, timeout_s)
            if task.done():
                task.result()  # it failed to start: say why
            yield
        finally:
            stop.set()
            await asyncio.wait_for(task, timeout_s)
