"""The asyncio shell around the leader's dispatcher: it owns the dispatcher and the executors'
open dispatch streams, ticks the dispatcher and proposes what it decides.

Everything here runs on the node's event loop: effects and leadership changes arrive from other
threads through ``call_soon_threadsafe``, so the pure :class:`Dispatcher` is only ever touched by
one thread. The gRPC servicer (:mod:`raftsched.rpc.executor_service`) serves executors through it.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections import deque
from collections.abc import Callable, Iterable, Sequence
from typing import Protocol

from raftsched.abc import CommitHook, ProposeCallback
from raftsched.fsm.effects import (
    AttemptReady,
    BarrierCommitted,
    DispatchAttempt,
    Effect,
    ReadyColumns,
    RunCancelled,
)
from raftsched.fsm.state import SchedulerState
from raftsched.leader.dispatch.dispatcher import Dispatcher, DispatchProposal
from raftsched.leader.dispatch.logrelay import LogRelay
from raftsched.leader.dispatch.work import Work
from raftsched.leader.gate import LeaderGate
from raftsched.logfields import leadership_fields, run_fields
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb

# The hub's records keep the logger they had before it moved out of rpc/executor_service.py:
# operators' log filters (and the integration tests) select "dispatcher on ... leads epoch" and
# the lost-attempt warnings by that name; the restructure of issue 27 changes no output.
log = logging.getLogger("raftsched.rpc.executor_service")

TICK_S = 0.05
# A stream's queue holds lists of work (work items and hot rows: raftsched.leader.dispatch.work;
# one list per flush, not one put per item); this list, by identity, is the sentinel that ends
# the stream (leadership lost, or a newer stream).
CLOSE: list[Work] = [pb.WorkItem()]
# In the hub's inbox: the leadership was lost (everything queued before it is handled first).
_LOST = object()


class HubNode(Protocol):
    """What the hub uses of its node."""

    @property
    def node_id(self) -> str: ...

    @property
    def state(self) -> SchedulerState: ...

    @property
    def gate(self) -> LeaderGate: ...

    def propose(
        self, data: bytes, callback: ProposeCallback, on_commit: CommitHook | None = None
    ) -> None: ...


class ExecutorHub:
    """Owns the dispatcher and the open dispatch streams; proposes what the dispatcher decides."""

    def __init__(self, node: HubNode, dispatcher: Dispatcher) -> None:
        self.node = node
        self.dispatcher = dispatcher  # built with the node's other parts (raftsched.server.core)
        # An executor's open stream: a DispatchBatch stream's queue, or a Session's sink (an
        # asyncio.Queue too: raftsched.leader.dispatch.session); one put per flush either way.
        self.streams: dict[str, asyncio.Queue[list[Work]]] = {}
        self.peers: dict[str, str] = {}  # executor -> peer address of its open dispatch stream
        self.log_channels: set[str] = set()  # executors whose open stream takes log requests
        self.logs = LogRelay(self)  # full logs: readers waiting for executors' answers
        self.loop: asyncio.AbstractEventLoop | None = None
        self._task: asyncio.Task[None] | None = None
        self._kicked = False
        # (leader time of the takeover, inherited attempts, tasks) while a new leader's overlap
        # decisions wait for inherited attempts (Dispatcher.overlap_unknown); None otherwise.
        self._holding: tuple[int, int, int] | None = None
        # Called on the loop with every batch of results an executor reports (the node's metrics).
        self.on_results: Callable[[Sequence[pb.ExecResult]], None] | None = None
        # ... and with the start lateness of every row of a session's report (its successes
        # that carry nothing else; issue 31 P2), in ms.
        self.on_lateness: Callable[[Iterable[int]], None] | None = None
        # What the applier's thread hands the loop, in order (see _to_loop).
        self._inbox: deque[tuple[Effect, ...] | object] = deque()
        self._wake_pending = False

    def start(self) -> None:
        self.loop = asyncio.get_running_loop()
        self._task = self.loop.create_task(self._run())
        self.loop.call_soon(self._catch_up)

    def _catch_up(self) -> None:
        """Take over the term the driver already leads with its barrier applied: the node's
        consensus starts (and may win an election) before the hub exists, and the barrier's
        effect found no hub then. Taking over twice in one epoch changes nothing."""
        epoch = self.node.gate.dispatch_epoch()
        if epoch:
            self._take_over(epoch)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    # -- from other threads ----------------------------------------------------------------------

    def effects_threadsafe(self, effects: tuple[Effect, ...]) -> None:
        self._to_loop(effects)

    def leadership_threadsafe(self, is_leader: bool) -> None:
        if not is_leader:
            self._to_loop(_LOST)

    def _to_loop(self, item: tuple[Effect, ...] | object) -> None:
        """Queue ``item`` (an entry's effects, or the leadership lost) for the loop, in order.

        One wake-up of the loop per batch, not per entry: an entry applied while a drain is
        already scheduled joins it (the applier wakes the loop per entry otherwise, a write to
        its self-pipe and a switch of the GIL each). Effects are never taken later than before,
        and everything the applier hands over stays in its order."""
        loop = self.loop
        if loop is None or loop.is_closed():
            return
        self._inbox.append(item)  # (deque: append and popleft are atomic)
        if self._wake_pending:
            return  # the scheduled drain takes it
        self._wake_pending = True
        with contextlib.suppress(RuntimeError):  # the loop closed under us (shutting down)
            loop.call_soon_threadsafe(self._drain)

    def _drain(self) -> None:
        # Cleared before draining: an item queued from now on schedules a drain of its own.
        self._wake_pending = False
        inbox = self._inbox
        while inbox:
            item = inbox.popleft()
            try:
                if item is _LOST:
                    self._lost_leadership()
                else:
                    assert isinstance(item, tuple)
                    self._on_effects(item)
            except Exception:
                # As the loop logged a callback that raised (one per entry before): the rest of
                # the inbox is still handled, now, not whenever the next entry wakes the loop.
                log.exception("handling applied effects failed")

    # -- on the loop -----------------------------------------------------------------------------

    def now_ms(self) -> int:
        """Leader time, as every command the hub proposes is stamped."""
        return self.node.gate.now_ms()

    def _on_effects(self, effects: tuple[Effect, ...]) -> None:
        d = self.dispatcher
        gate = self.node.gate
        ready = False
        debug = log.isEnabledFor(logging.DEBUG)
        # One walk for the hub's own business (the dispatcher walks them once more, in chunks):
        # by exact type, the commonest first (effects are final classes).
        for eff in effects:
            kind = type(eff)
            if kind is AttemptReady or kind is ReadyColumns:
                ready = True
            elif kind is DispatchAttempt:
                if debug and d.leading:
                    assert isinstance(eff, DispatchAttempt)
                    log.debug(
                        "attempt %s/%d/%d assigned to %s (epoch %d)",
                        eff.run_id,
                        eff.shard,
                        eff.attempt,
                        eff.executor,
                        eff.epoch,
                        extra=run_fields(eff.run_id, eff.shard, eff.attempt, eff.task, executor=eff.executor),
                    )
            elif kind is BarrierCommitted:
                if gate.takes_dispatch(eff):
                    # Our barrier of the term we lead now (not one replayed from an old term at
                    # restart: a follower once started dispatching from its own old barrier).
                    # Our barrier applied: every older leader's entry is applied too. Take over.
                    self._take_over(eff.epoch)
            elif kind is RunCancelled and d.leading:
                assert isinstance(eff, RunCancelled)
                for shard, attempt, executor in eff.attempts:
                    log.info(
                        "attempt %s/%d/%d cancelled: its run was cancelled or killed%s",
                        eff.run_id,
                        shard,
                        attempt,
                        f" (stopping it on {executor})" if executor else "",
                        extra=run_fields(eff.run_id, shard, attempt, executor=executor or None),
                    )
        d.on_effects(effects, self.now_ms())
        self._flush_outbox()
        self._hold_done()
        if ready and not self._kicked:
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
        held, t = self._holding, self.dispatcher.term
        if held is None or t is None or t.takeover.inherited:
            return
        self._holding = None
        since, attempts, tasks = held
        ends = ", ".join(f"{n} {why}" for why, n in sorted(t.takeover.hold_ends.items()))
        log.info(
            "overlap decisions of %d task(s) held %d ms after the takeover, until %d inherited "
            "attempt(s) were known (%s; %d never delivered, sent again)",
            tasks,
            self.now_ms() - since,
            attempts,
            ends,
            t.takeover.resent_unheld,
            extra=leadership_fields(t.epoch, node=self.node.node_id),
        )

    def _lost_leadership(self) -> None:
        self._holding = None
        self.dispatcher.step_down()
        for q in self.streams.values():
            q.put_nowait(CLOSE)

    def _take_over(self, epoch: int) -> None:
        d = self.dispatcher
        if d.term is not None and d.term.epoch == epoch:
            return  # a second barrier of this leadership, or the catch-up after the barrier's effect
        now = self.now_ms()
        d.become_leader(epoch, now)
        log.info(
            "dispatcher on %s leads epoch %d: %d waiting, %d leased",
            self.node.node_id,
            epoch,
            len(d.waiting),
            len(d.leases),
            extra=leadership_fields(epoch, node=self.node.node_id),
        )
        t = d.term
        held = t.takeover if t is not None and t.takeover.inherited else None
        self._holding = (now, len(held.inherited), len(held.unknown_tasks)) if held is not None else None

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
        for proposal in d.poll(self.now_ms()):
            self._propose(proposal)
        self._flush_outbox()
        self._hold_done()

    def _propose(self, proposal: DispatchProposal) -> None:
        loop = self.loop
        assert loop is not None
        cmd = proposal.command
        if proposal.kind == "lost":
            for r in cmd.report_results.results:
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
            if proposal.kind == "assign":
                # Effects of the entry are applied before this callback: whatever it did not
                # turn into a lease can be placed again.
                loop.call_soon_threadsafe(self.dispatcher.release, proposal)

        self.node.propose(proposal.encode(), done)

    def _flush_outbox(self) -> None:
        out = self.dispatcher.take_work()  # (rows stay rows: each stream encodes its own)
        if not out:
            return
        by_executor: dict[str, list[Work]] = {}
        for executor, item in out:
            items = by_executor.get(executor)
            if items is None:
                by_executor[executor] = [item]
            else:
                items.append(item)
        for executor, items in by_executor.items():
            q = self.streams.get(executor)
            if q is not None:
                q.put_nowait(items)  # one put per executor and flush
            # else: not connected; it is re-sent when the executor opens its stream, or its
            # lease expires and the attempt is retried elsewhere.

    def live_view(self) -> dict[str, tuple[int, str]] | None:
        """``executor -> (last heartbeat ms, dispatch stream's peer address)`` as this leader sees
        it (0 for a heartbeat still owed since it took over); None when it does not lead."""
        t = self.dispatcher.term
        if t is None:
            return None
        now = self.now_ms()
        last_seen = t.liveness.last_seen
        names = set(last_seen) | set(self.peers)
        return {
            name: (seen if (seen := last_seen.get(name, 0)) <= now else 0, self.peers.get(name, ""))
            for name in sorted(names)
        }

    def dispatch_epoch(self) -> int:
        """The epoch this hub's dispatcher leads (stamped on work items)."""
        return self.dispatcher.epoch

    def require_leader(self) -> None:
        """Serve an executor only while the dispatcher leads the epoch Raft is in.

        Raises :class:`raftsched.errors.Unavailable` while a leadership change is on its way to
        the loop (rather than serve an executor in an epoch that is over), and
        :class:`raftsched.errors.NotLeader` with the leader's address on a follower.
        """
        self.node.gate.require_epoch(self.dispatcher.leading, self.dispatcher.epoch)

    def leader_command(self) -> logpb.Command:
        """An empty command stamped as this leader's dispatcher stamps (its epoch, leader time).
        Raises as :meth:`require_leader`."""
        self.require_leader()
        return logpb.Command(epoch=self.dispatcher.epoch, now_ms=self.now_ms(), origin=self.node.node_id)
