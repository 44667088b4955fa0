"""The executor-facing gRPC service and the asyncio shell around the leader's dispatcher.

Everything here runs on the node's event loop: effects and leadership changes arrive from other
threads through ``call_soon_threadsafe``, so the pure :class:`Dispatcher` is only ever touched by
one thread. Only the leader accepts executors; followers answer ``FAILED_PRECONDITION`` with the
leader's address (trailing metadata ``raftsched-leader``).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import random
from collections.abc import AsyncIterator
from typing import TYPE_CHECKING

import grpc

from raftsched import codec
from raftsched.errors import InvalidSpec
from raftsched.fsm.effects import AttemptReady, BarrierCommitted, Effect
from raftsched.leader.dispatcher import Dispatcher, DispatchSettings
from raftsched.model import validate_name
from raftsched.rpc.admin import _Abort, _guard, propose_and_wait
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

if TYPE_CHECKING:
    from raftsched.node import Node

log = logging.getLogger(__name__)

TICK_S = 0.05
MAX_BATCH = 1000  # work items per DispatchBatch message
_CLOSE = pb.WorkItem()  # sentinel: end the stream (leadership lost)


class ExecutorHub:
    """Owns the dispatcher and the open dispatch streams; proposes what the dispatcher decides."""

    def __init__(self, node: Node, settings: DispatchSettings | None = None) -> None:
        self.node = node
        # Jitter randomness enters here, at the edge; what it decides is written into the log.
        self.dispatcher = Dispatcher(node.state, settings or DispatchSettings(), random.Random())
        self.streams: dict[str, asyncio.Queue[pb.WorkItem]] = {}
        self.loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self.dispatched = 0
        self._kicked = False

    def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._task = self.loop.create_task(self._run())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    # -- from other threads ----------------------------------------------------------------------

    def effects_threadsafe(self, effects: tuple[Effect, ...]) -> None:
        if self.loop is not None and not self.loop.is_closed():
            with contextlib.suppress(RuntimeError):  # the loop closed under us (shutting down)
                self.loop.call_soon_threadsafe(self._on_effects, effects)

    def leadership_threadsafe(self, is_leader: bool) -> None:
        if self.loop is not None and not is_leader and not self.loop.is_closed():
            with contextlib.suppress(RuntimeError):
                self.loop.call_soon_threadsafe(self._lost_leadership)

    # -- on the loop -----------------------------------------------------------------------------

    def _now(self) -> int:
        return max(self.node.clock.now_ms(), self.node.state.max_now_ms)

    def _on_effects(self, effects: tuple[Effect, ...]) -> None:
        d = self.dispatcher
        for eff in effects:
            driver = self.node.driver
            if (
                isinstance(eff, BarrierCommitted)
                and eff.node_id == self.node.node_id
                and driver.leading
                and driver.epoch == eff.epoch
            ):
                # Our barrier of the term we lead now (not one replayed from an old term at
                # restart: a follower once started dispatching from its own old barrier).
                # Our barrier applied: every older leader's entry is applied too. Take over.
                d.become_leader(eff.epoch, self._now())
                log.info(
                    "dispatcher on %s leads epoch %d: %d waiting, %d leased",
                    self.node.node_id,
                    eff.epoch,
                    len(d.waiting),
                    len(d.leases),
                )
        d.on_effects(effects, self._now())
        self._flush_outbox()
        if not self._kicked and any(isinstance(e, AttemptReady) for e in effects):
            # Place new attempts now rather than at the next timer tick (up to TICK_S later).
            self._kicked = True
            assert self.loop is not None
            self.loop.call_soon(self._kick)

    def _kick(self) -> None:
        self._kicked = False
        try:
            self._tick()
        except Exception:
            log.exception("dispatcher tick failed")

    def _lost_leadership(self) -> None:
        self.dispatcher.step_down()
        for q in self.streams.values():
            q.put_nowait(_CLOSE)

    async def _run(self) -> None:
        while True:
            await asyncio.sleep(TICK_S)
            try:
                self._tick()
            except Exception:
                log.exception("dispatcher tick failed")

    def _tick(self) -> None:
        d = self.dispatcher
        if not d.leading:
            return
        for data in d.poll(self._now()):
            self._propose(data)
        self._flush_outbox()

    def _propose(self, data: bytes) -> None:
        assert self.node.consensus is not None
        cmd = codec.decode_command(data)
        is_assign = cmd.WhichOneof("body") == "assign_attempts"
        loop = self.loop
        assert loop is not None

        def done(result: bytes | None, error: Exception | None) -> None:
            if error is not None:
                log.warning("dispatcher command %s failed: %s", cmd.WhichOneof("body"), error)
            if is_assign:
                # Effects of the entry are applied before this callback: whatever it did not
                # turn into a lease can be placed again.
                loop.call_soon_threadsafe(self.dispatcher.release, data)

        self.node.consensus.propose(data, done)

    def _flush_outbox(self) -> None:
        for executor, item in self.dispatcher.take_outbox():
            q = self.streams.get(executor)
            if q is not None:
                q.put_nowait(item)
                self.dispatched += 1
            # else: not connected; it is re-sent when the executor opens its stream, or its
            # lease expires and the attempt is retried elsewhere.

    def require_leader(self) -> None:
        consensus = getattr(self.node, "consensus", None)
        if (
            self.dispatcher.leading
            and consensus is not None
            and (not consensus.is_leader() or consensus.epoch() != self.dispatcher.epoch)
        ):
            # Raft already moved on; the loop has not processed the change yet. Say so, rather
            # than serve an executor in an epoch that is over.
            raise _Abort("unavailable", f"{self.node.node_id} is changing leadership; retry shortly")
        if not self.dispatcher.leading:
            leader = self.node.leader_grpc() or ""
            raise _Abort(
                "not_leader",
                f"{self.node.node_id} is not the leader" + (f"; the leader is at {leader}" if leader else ""),
                leader,
            )


class ExecutorServicer(pb_grpc.ExecutorServiceServicer):  # type: ignore[misc]
    def __init__(self, hub: ExecutorHub) -> None:
        self.hub = hub

    async def Register(
        self, request: pb.RegisterRequest, context: grpc.aio.ServicerContext
    ) -> pb.RegisterReply:
        async def body() -> pb.RegisterReply:
            validate_name(request.name, "executor.name")
            if not 1 <= request.slots <= 10_000:
                raise InvalidSpec("executor.slots", f"{request.slots} out of range (1-10000)")
            self.hub.require_leader()
            d = self.hub.dispatcher
            cmd = pb.Command(epoch=d.epoch, now_ms=self.hub._now(), origin=self.hub.node.node_id)
            cmd.executor_join.name = request.name
            cmd.executor_join.slots = request.slots
            cmd.executor_join.labels.update(request.labels)
            await propose_and_wait(self.hub.node, codec.encode_command(cmd))
            s = d.settings
            return pb.RegisterReply(epoch=d.epoch, lease_ms=s.lease_ms, heartbeat_ms=s.heartbeat_ms)

        return await _guard(context, body)

    async def Dispatch(
        self, request: pb.DispatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WorkItem]:
        async for items in self._stream(request, context):
            for item in items:
                yield item

    async def DispatchBatch(
        self, request: pb.DispatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WorkBatch]:
        async for items in self._stream(request, context):
            yield pb.WorkBatch(items=items)

    async def _stream(
        self, request: pb.DispatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[list[pb.WorkItem]]:
        """The executor's work items, as they come: everything queued when the stream is ready for
        the next message goes out together (at most MAX_BATCH items)."""
        hub = self.hub
        try:
            hub.require_leader()
            if request.name not in hub.dispatcher.ring:
                raise _Abort("not_found", f"executor {request.name!r} is not registered; call Register first")
        except _Abort as exc:
            context.set_trailing_metadata((("raftsched-code", exc.code), ("raftsched-leader", exc.leader)))
            await context.abort(
                grpc.StatusCode.FAILED_PRECONDITION
                if exc.code == "not_leader"
                else grpc.StatusCode.NOT_FOUND,
                exc.message,
            )
            return
        queue: asyncio.Queue[pb.WorkItem] = asyncio.Queue()
        old = hub.streams.get(request.name)
        if old is not None:
            old.put_nowait(_CLOSE)  # a newer stream of the same executor replaces the old one
        hub.streams[request.name] = queue
        try:
            resent = hub.dispatcher.resend_to(request.name, hub._now())
            for start in range(0, len(resent), MAX_BATCH):
                yield resent[start : start + MAX_BATCH]
            while True:
                item = await queue.get()
                if item is _CLOSE:
                    return
                batch = [item]
                while len(batch) < MAX_BATCH and not queue.empty():
                    item = queue.get_nowait()
                    if item is _CLOSE:
                        yield batch
                        return
                    batch.append(item)
                yield batch
        finally:
            if hub.streams.get(request.name) is queue:
                del hub.streams[request.name]

    async def Heartbeat(
        self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> pb.HeartbeatReply:
        async def body() -> pb.HeartbeatReply:
            self.hub.require_leader()
            d = self.hub.dispatcher
            ok = d.heartbeat(request.name, request.running, self.hub._now())
            return pb.HeartbeatReply(epoch=d.epoch, registered=ok)

        return await _guard(context, body)

    async def Report(self, request: pb.ReportRequest, context: grpc.aio.ServicerContext) -> pb.ReportReply:
        async def body() -> pb.ReportReply:
            self.hub.require_leader()
            data = self.hub.dispatcher.results(request.name, request.results, self.hub._now())
            if data is not None:
                outcome = await propose_and_wait(self.hub.node, data)
                if outcome.refused:
                    log.info(
                        "%s: %d of %d results from %s refused as stale (attempt superseded, run finished, "
                        "or not assigned to it)",
                        self.hub.node.node_id,
                        outcome.refused,
                        len(request.results),
                        request.name,
                    )
            # Committed (applied or refused as stale): either way the executor may forget them.
            return pb.ReportReply(acknowledged=[r.execution_id for r in request.results])

        return await _guard(context, body)

    async def Leave(self, request: pb.LeaveRequest, context: grpc.aio.ServicerContext) -> pb.LeaveReply:
        async def body() -> pb.LeaveReply:
            self.hub.require_leader()
            d = self.hub.dispatcher
            cmd = pb.Command(epoch=d.epoch, now_ms=self.hub._now(), origin=self.hub.node.node_id)
            cmd.executor_leave.name = request.name
            cmd.executor_leave.reason = "left"
            cmd.executor_leave.retry_at_ms = self.hub._now()
            await propose_and_wait(self.hub.node, codec.encode_command(cmd))
            return pb.LeaveReply()

        return await _guard(context, body)
