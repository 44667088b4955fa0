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
from collections.abc import AsyncIterator, Callable, Sequence

import grpc

from raftsched import bounds, codec
from raftsched.errors import InvalidSpec, NotFound, PermissionDenied, RaftschedError, quote
from raftsched.fsm.effects import AttemptReady, BarrierCommitted, DispatchAttempt, Effect, RunCancelled
from raftsched.leader import writes
from raftsched.leader.dispatch.dispatcher import Dispatcher, DispatchSettings
from raftsched.logfields import attempt_fields, leadership_fields, run_fields
from raftsched.model import validate_name
from raftsched.rpc.plumbing import NodeServices, abort, caller, propose_and_wait, rpc
from raftsched.security import authz
from raftsched.sharding.placement import validate_capacity
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

TICK_S = 0.05
MAX_BATCH = 1000  # work items per DispatchBatch message
# Output tails and errors are capped here, whatever an executor sends: the agent keeps 8 KiB of
# each stream; a forged 3 MiB tail would otherwise be replicated and stored.
MAX_TAIL_CHARS = 16 * 1024
_CLOSE = pb.WorkItem()  # sentinel: end the stream (leadership lost)


class ExecutorHub:
    """Owns the dispatcher and the open dispatch streams; proposes what the dispatcher decides."""

    def __init__(self, node: NodeServices, settings: DispatchSettings | None = None) -> None:
        self.node = node
        # Jitter randomness enters here, at the edge; what it decides is written into the log.
        self.dispatcher = Dispatcher(node.state, settings or DispatchSettings(), random.Random())
        self.streams: dict[str, asyncio.Queue[pb.WorkItem]] = {}
        self.peers: dict[str, str] = {}  # executor -> peer address of its open dispatch stream
        self.loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self.dispatched = 0
        self._kicked = False
        # (leader time of the takeover, inherited attempts, tasks) while a new leader's overlap
        # decisions wait for inherited attempts (Dispatcher.overlap_unknown); None otherwise.
        self._holding: tuple[int, int, int] | None = None
        # Called on the loop with every batch of results an executor reports (the node's metrics).
        self.on_results: Callable[[Sequence[pb.ExecResult]], None] | None = None

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

    def now_ms(self) -> int:
        """Leader time, as every command the hub proposes is stamped."""
        return self.node.gate.now_ms()

    def _on_effects(self, effects: tuple[Effect, ...]) -> None:
        d = self.dispatcher
        for eff in effects:
            if (
                isinstance(eff, BarrierCommitted)
                and eff.node_id == self.node.node_id
                and self.node.gate.driver_leads(eff.epoch)
            ):
                # Our barrier of the term we lead now (not one replayed from an old term at
                # restart: a follower once started dispatching from its own old barrier).
                # Our barrier applied: every older leader's entry is applied too. Take over.
                now = self.now_ms()
                d.become_leader(eff.epoch, now)
                log.info(
                    "dispatcher on %s leads epoch %d: %d waiting, %d leased",
                    self.node.node_id,
                    eff.epoch,
                    len(d.waiting),
                    len(d.leases),
                    extra=leadership_fields(eff.epoch, node=self.node.node_id),
                )
                self._holding = (now, len(d.inherited), len(d.unknown_tasks)) if d.inherited else None
            elif isinstance(eff, RunCancelled) and d.leading:
                for shard, attempt, executor in eff.attempts:
                    log.info(
                        "attempt %s/%d/%d cancelled: its workflow run was killed%s",
                        eff.run_id,
                        shard,
                        attempt,
                        f" (stopping it on {executor})" if executor else "",
                        extra=run_fields(eff.run_id, shard, attempt, executor=executor or None),
                    )
        if d.leading and log.isEnabledFor(logging.DEBUG):
            for eff in effects:
                if isinstance(eff, DispatchAttempt):
                    log.debug(
                        "attempt %s/%d/%d assigned to %s (epoch %d)",
                        eff.run_id,
                        eff.shard,
                        eff.attempt,
                        eff.executor,
                        eff.epoch,
                        extra=run_fields(eff.run_id, eff.shard, eff.attempt, eff.task, executor=eff.executor),
                    )
        d.on_effects(effects, self.now_ms())
        self._flush_outbox()
        self._hold_done()
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

    def _hold_done(self) -> None:
        """Log, once, when a takeover's overlap hold on inherited attempts has ended."""
        held, d = self._holding, self.dispatcher
        if held is None or d.inherited or not d.leading:
            return
        self._holding = None
        since, attempts, tasks = held
        ends = ", ".join(f"{n} {why}" for why, n in sorted(d.hold_ends.items()))
        log.info(
            "overlap decisions of %d task(s) held %d ms after the takeover, until %d inherited "
            "attempt(s) were known (%s; %d never delivered, sent again)",
            tasks,
            self.now_ms() - since,
            attempts,
            ends,
            d.resent_unheld,
            extra=leadership_fields(d.epoch, node=self.node.node_id),
        )

    def _lost_leadership(self) -> None:
        self._holding = None
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
        if not d.leading or self.node.gate.clock_faulty() or self.node.gate.damaged():
            return  # a faulty clock would expire every lease at once (+10 min), or none
        for data in d.poll(self.now_ms()):
            self._propose(data)
        self._flush_outbox()
        self._hold_done()

    def _propose(self, data: bytes) -> None:
        cmd = codec.decode_command(data)
        is_assign = cmd.WhichOneof("body") == "assign_attempts"
        loop = self.loop
        assert loop is not None

        if cmd.WhichOneof("body") == "report_results":
            for r in cmd.report_results.results:
                if r.lost:
                    log.warning(
                        "attempt %s/%d/%d lost: %s; retry at %d ms if it has retries left",
                        r.run_id,
                        r.shard,
                        r.attempt,
                        r.error,
                        r.retry_at_ms,
                        extra=run_fields(r.run_id, r.shard, r.attempt),
                    )

        def done(result: bytes | None, error: Exception | None) -> None:
            if error is not None:
                log.warning("dispatcher command %s failed: %s", cmd.WhichOneof("body"), error)
            if is_assign:
                # Effects of the entry are applied before this callback: whatever it did not
                # turn into a lease can be placed again.
                loop.call_soon_threadsafe(self.dispatcher.release, data)

        self.node.propose(data, done)

    def _flush_outbox(self) -> None:
        for executor, item in self.dispatcher.take_outbox():
            q = self.streams.get(executor)
            if q is not None:
                q.put_nowait(item)
                self.dispatched += 1
            # else: not connected; it is re-sent when the executor opens its stream, or its
            # lease expires and the attempt is retried elsewhere.

    def live_view(self) -> dict[str, tuple[int, str]] | None:
        """``executor -> (last heartbeat ms, dispatch stream's peer address)`` as this leader sees
        it (0 for a heartbeat still owed since it took over); None when it does not lead."""
        d = self.dispatcher
        if not d.leading:
            return None
        now = self.now_ms()
        names = set(d.last_seen) | set(self.peers)
        return {
            name: (seen if (seen := d.last_seen.get(name, 0)) <= now else 0, self.peers.get(name, ""))
            for name in sorted(names)
        }

    def require_leader(self) -> None:
        """Serve an executor only while the dispatcher leads the epoch Raft is in.

        Raises :class:`raftsched.errors.Unavailable` while a leadership change is on its way to
        the loop (rather than serve an executor in an epoch that is over), and
        :class:`raftsched.errors.NotLeader` with the leader's address on a follower.
        """
        self.node.gate.require_epoch(self.dispatcher.leading, self.dispatcher.epoch)

    def require_bound(self, name: str) -> None:
        """With auth on, refuse a call about executor ``name`` from a principal other than the one
        it is registered under (raises :class:`raftsched.errors.PermissionDenied`). An unknown
        name passes: the call itself reports it as not registered."""
        if not authz.auth_on():
            return
        with self.node.state.view() as v:
            rec = v.executor(name)
            principal = rec.principal if rec is not None else None
        who = caller().principal
        if principal is not None and principal != who.id:
            raise PermissionDenied(
                f"executor {quote(name)} is registered by another principal; {who.id} may not act for it"
            )

    def leader_command(self) -> logpb.Command:
        """An empty command stamped as this leader's dispatcher stamps (its epoch, leader time).
        Raises as :meth:`require_leader`."""
        self.require_leader()
        return logpb.Command(epoch=self.dispatcher.epoch, now_ms=self.now_ms(), origin=self.node.node_id)


class ExecutorServicer(pb_grpc.ExecutorServiceServicer):  # type: ignore[misc]
    def __init__(self, hub: ExecutorHub) -> None:
        self.hub = hub

    @rpc
    async def Register(
        self, request: pb.RegisterRequest, context: grpc.aio.ServicerContext
    ) -> pb.RegisterReply:
        validate_name(request.name, "executor.name")
        if not 1 <= request.slots <= 10_000:
            raise InvalidSpec("executor.slots", f"{request.slots} out of range (1-10000)")
        validate_capacity(request.cpu, request.memory_mb)
        cmd = self.hub.leader_command()
        if authz.auth_on():
            # The name is bound to the registering principal (refused by apply if another
            # principal holds it), and the executor receives work of its namespaces only.
            who = caller()
            writes.set_executor_join(
                cmd,
                request.name,
                request.slots,
                request.labels,
                principal=who.principal.id,
                namespaces=sorted(who.principal.namespaces),
                cpu=request.cpu,
                memory_mb=request.memory_mb,
            )
            cmd.audit.principal = who.principal.id
            cmd.audit.rpc = who.method
            cmd.audit.target = request.name
        else:
            writes.set_executor_join(
                cmd, request.name, request.slots, request.labels, cpu=request.cpu, memory_mb=request.memory_mb
            )
        await propose_and_wait(self.hub.node, codec.encode_command(cmd))
        d = self.hub.dispatcher
        s = d.settings
        return pb.RegisterReply(
            epoch=d.epoch,
            lease_ms=s.lease_ms,
            heartbeat_ms=s.heartbeat_ms,
            leader_now_ms=self.hub.node.gate.clock_ms(),
        )

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
            hub.require_bound(request.name)
        except RaftschedError as exc:
            await abort(context, exc)
        try:
            hub.require_leader()
            if request.name not in hub.dispatcher.members:
                raise NotFound(f"executor {quote(request.name)} is not registered; call Register first")
        except RaftschedError as exc:
            # A stream refuses with one of two statuses only, as executors have always seen it.
            not_leader = exc.code == "not_leader"
            status = grpc.StatusCode.FAILED_PRECONDITION if not_leader else grpc.StatusCode.NOT_FOUND
            await abort(context, exc, status)
        queue: asyncio.Queue[pb.WorkItem] = asyncio.Queue()
        old = hub.streams.get(request.name)
        if old is not None:
            old.put_nowait(_CLOSE)  # a newer stream of the same executor replaces the old one
        hub.streams[request.name] = queue
        hub.peers[request.name] = context.peer()
        hub.dispatcher.stream_opened(request.name)
        try:
            resent = hub.dispatcher.resend_to(request.name, hub.now_ms())
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
                hub.peers.pop(request.name, None)
                # Not replaced by a newer stream: the executor hung up or its connection broke
                # (a killed process closes it at once). A signal, not proof: the dispatcher
                # gives it a short grace to reconnect before declaring it dead.
                hub.dispatcher.stream_closed(request.name, hub.now_ms())

    @rpc
    async def Heartbeat(
        self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> pb.HeartbeatReply:
        self.hub.require_bound(request.name)
        self.hub.require_leader()
        d = self.hub.dispatcher
        started = request.started if request.reports_started else None
        ok = d.heartbeat(request.name, request.running, self.hub.now_ms(), started, request.finished)
        return pb.HeartbeatReply(epoch=d.epoch, registered=ok, leader_now_ms=self.hub.node.gate.clock_ms())

    @rpc
    async def Report(self, request: pb.ReportRequest, context: grpc.aio.ServicerContext) -> pb.ReportReply:
        self.hub.require_bound(request.name)
        self.hub.require_leader()
        for i, r in enumerate(request.results):
            _check_execution_id(i, r.execution_id)
            if len(r.stdout_tail) > MAX_TAIL_CHARS:
                r.stdout_tail = r.stdout_tail[-MAX_TAIL_CHARS:]
            if len(r.stderr_tail) > MAX_TAIL_CHARS:
                r.stderr_tail = r.stderr_tail[-MAX_TAIL_CHARS:]
            if len(r.error) > MAX_TAIL_CHARS:
                r.error = r.error[:MAX_TAIL_CHARS]
        if self.hub.on_results is not None:
            self.hub.on_results(request.results)
        _log_results(request.name, request.results)
        data = self.hub.dispatcher.results(request.name, request.results, self.hub.now_ms())
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

    @rpc
    async def Leave(self, request: pb.LeaveRequest, context: grpc.aio.ServicerContext) -> pb.LeaveReply:
        self.hub.require_bound(request.name)
        cmd = self.hub.leader_command()
        cmd.executor_leave.name = request.name
        cmd.executor_leave.reason = "left"
        cmd.executor_leave.retry_at_ms = self.hub.now_ms()
        cmd.executor_leave.unstarted.extend(self.hub.dispatcher.unstarted_of(request.name))
        await propose_and_wait(self.hub.node, codec.encode_command(cmd))
        return pb.LeaveReply()

    @rpc
    async def Drain(self, request: pb.DrainRequest, context: grpc.aio.ServicerContext) -> pb.DrainReply:
        """The executor stops taking new work (it is shutting down): replicated like
        ``raftsched executor drain``; it calls Leave once its running attempts ended."""
        self.hub.require_bound(request.name)
        cmd = self.hub.leader_command()
        cmd.drain_executor.name = request.name
        cmd.drain_executor.reason = request.reason[:500] or "executor shutting down"
        await propose_and_wait(self.hub.node, codec.encode_command(cmd))
        return pb.DrainReply()


def _check_execution_id(position: int, exec_id: str) -> None:
    """Refuse a reported id that is not ``run_id/shard/attempt`` with shard and attempt in their
    ranges (:mod:`raftsched.bounds`; an out-of-range shard used to escape as a ValueError)."""
    run_id, _, rest = exec_id.partition("/")
    shard, _, attempt = rest.partition("/")
    numeric = all(part.isascii() and part.isdigit() and len(part) <= 20 for part in (shard, attempt))
    if run_id and numeric and int(shard) <= bounds.SHARD.high and int(attempt) <= bounds.ATTEMPT.high:
        return
    raise InvalidSpec(
        f"results[{position}].execution_id",
        f"{quote(exec_id)} is not run_id/shard/attempt "
        f"(shard {bounds.SHARD.text()}, attempt {bounds.ATTEMPT.text()})",
    )


def _log_results(executor: str, results: Sequence[pb.ExecResult]) -> None:
    """One record per reported result: a failure at info, a success at debug (a busy leader sees
    thousands a second; a disabled level costs one check per result)."""
    debug = log.isEnabledFor(logging.DEBUG)
    for r in results:
        if r.success:
            if debug:
                log.debug(
                    "attempt %s succeeded on %s",
                    r.execution_id,
                    executor,
                    extra=attempt_fields(r.execution_id, executor=executor),
                )
        else:
            log.info(
                "attempt %s failed on %s: %s",
                r.execution_id,
                executor,
                r.error or f"exit code {r.exit_code}",
                extra=attempt_fields(r.execution_id, executor=executor),
            )
