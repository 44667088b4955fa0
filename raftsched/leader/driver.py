"""The leader driver: turns the clock and the timing wheel into committed FireBatch commands.

:class:`LeaderDriver` is the pure core — no thread, no clock read. It is driven by:

* :meth:`become_leader` → a Barrier command to propose; nothing fires until it has committed
  (so every entry of older leaders is applied and the new epoch fences them);
* :meth:`on_effects` ← effects of applied commands (tasks re-armed, barrier seen);
* :meth:`poll(now)` → FireBatch commands for everything due, split to keep each entry small;
* :meth:`next_wakeup_ms` → when to poll next (the next non-empty wheel slot; no fixed polling).

:class:`DriverThread` is the thin threaded shell used by a real node; the simulation drives the
core directly on a manual clock. The loop reads like a page: read clock → advance wheel →
propose batch → (on commit, the FSM's effects re-arm the wheel and feed the dispatcher).
"""

from __future__ import annotations

import dataclasses
import itertools
import logging
import threading
from collections import Counter, deque
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from itertools import repeat
from operator import itemgetter, sub

from raftsched import codec
from raftsched.abc import Clock, CommitHook, ProposeCallback, ProposeError
from raftsched.clockwatch import DEFAULT_MAX_SKEW_MS
from raftsched.errors import InvalidSpec
from raftsched.fsm.effects import BarrierCommitted, Effect, FiresWanted, ReadyColumns, TaskArmed
from raftsched.fsm.state import SchedulerState
from raftsched.fsm.view import PlanningInput
from raftsched.leader import columns, writes
from raftsched.leader.gate import leader_time
from raftsched.leader.window import FiringWindow
from raftsched.logfields import leadership_fields
from raftsched.model import CronTrigger, Overlap
from raftsched.timing.cron import changed_meaning_warning
from raftsched.timing.schedule import (
    MisfireSettings,
    next_fire_after,
    on_time_catch_up,
    plan_fires,
    plan_missed,
    single_on_time_fire,
)
from raftsched.timing.wheel import TimingWheel
from raftsched.v1 import log_pb2 as pb

log = logging.getLogger(__name__)

# pysyncobj chunks entries above 64 KB, and chunked transmission has a known bug: stay below.
MAX_ENTRY_BYTES = 60_000
WAITS_RETRY_MS = 1000  # a WorkflowWaitsDue whose deadline is still there is proposed again after this
HOLD_RECHECK_MS = 100  # a held fire (see LeaderDriver.hold_fires) is looked at again this often
# While planning is held for the dispatch backlog (LeaderDriver.max_dispatch_backlog), the
# backlog is looked at again this often; planning resumes once it is down to RESUME_FRACTION of
# the limit, so a resumed poll plans at least a quarter of the limit (never a trickle of tiny
# batches, which cost more per fire).
BACKLOG_RECHECK_MS = 100
RESUME_FRACTION = 0.75
# Due tasks whose planning inputs are read in one state view (the lock once per chunk, never once
# per task; planning itself, croniter included, runs off the lock).
PLAN_READ_CHUNK = 1000
# A NumberEntities proposed whose numbering has not applied after this is proposed again.
NUMBERING_RETRY_MS = 5000
# A PromoteHotRuns proposed whose promotions have not applied after this is proposed again
# (longer than a commit round under load: an early duplicate is harmless, and wasted).
PROMOTE_RETRY_MS = 5000
# Fire batches proposed and not yet committed, at most: a second's 10,000 fires (10 batches) go
# out in 3 commit rounds instead of 5. Measured with 2 and 4 alternating (bench.ab --only fires,
# 10,000 tasks, 3 rounds): commit p99 177 / 715 / 1,325 ms with 2 against 127 / 446 / 459 ms with
# 4, the leader's CPU per fire unchanged (13 us). 16 starved the state lock's readers before the
# applier yielded between entries (docs/dev/performance-history.md, "Commit lateness at 10,000 fires/s").
MAX_IN_FLIGHT = 4
# An upper bound of one FireColumns row's encoded size (four varints of at most 5, 10, 10 and 10
# bytes, and the packed fields' tags and lengths amortised): rows per entry stay within
# MAX_ENTRY_BYTES with room to spare.
HOT_ROW_BYTES = 36
# A FireColumns row being built: (task name, task number, version, nominal ms, next fire ms).
HotRow = tuple[str, int, int, int, int]
_ROW_TASK = itemgetter(0)


def _hand_over(batches: BatchBuilder, in_flight: set[str], rows: list[HotRow]) -> None:
    """The hot rows a poll has planned so far go into ``batches`` (and their tasks in flight):
    before any cold fire is added, so every entry leaves in the order its fires were planned
    (the rows were added one by one, each as it was planned, before they were held back)."""
    batches.add_hot_many(rows)
    in_flight.update(map(_ROW_TASK, rows))


def _warn_changed_cron_meanings(state: SchedulerState) -> list[str]:
    """Log a warning for every armed task whose cron expression changed meaning; return their names.

    Stored tasks fire by the expression's current (crontab) meaning (and are re-armed by it, see
    :func:`_rearm_by_new_meaning`); this makes the change visible once per leadership instead of
    re-interpreting them silently. The check is cached per expression.
    """
    with state.view() as v:  # one pass over the tasks (a million at ~0.3 us each), as armed_tasks does
        # peek: a spec not decoded yet (a task loaded at start, never read since) stays bytes.
        armed_now = [(name, st) for name, st in v.tasks.items() if st.enabled and st.next_fire_ms]
        triggers = [(name, st.peek().trigger) for name, st in armed_now]
    armed = [(name, t.expr) for name, t in triggers if isinstance(t, CronTrigger)]
    warnings: dict[str, str | None] = {}  # many tasks share an expression
    flagged: list[str] = []
    for name, expr in armed:
        if expr not in warnings:
            warnings[expr] = changed_meaning_warning(expr)
        warning = warnings[expr]
        if warning is not None:
            flagged.append(name)
            log.warning("task %s: %s", name, warning)
    return flagged


def _rearm_by_new_meaning(state: SchedulerState, names: list[str]) -> list[pb.TaskFires]:
    """For tasks whose cron expression changed meaning: their next fire after the watermark by the
    new meaning, as fire-less entries, where it differs from the armed one (computed by the old
    reading). Nothing is fired or skipped; the watermark stays, so no due fire is lost."""
    out: list[pb.TaskFires] = []
    for name in names:
        planning = state.task_for_planning(name)
        if planning is None:
            continue
        spec, version, watermark, armed = planning
        try:
            following = next_fire_after(spec.trigger, watermark)
        except InvalidSpec:
            continue  # no fire left: planning reports it as for any such task
        if following != armed:
            out.append(
                pb.TaskFires(task=name, version=version, watermark_ms=watermark, next_fire_ms=following)
            )
    return out


@dataclass(frozen=True, slots=True)
class Proposal:
    """One command to propose, and the tasks it covers (re-armed from state if it fails)."""

    data: bytes
    tasks: tuple[str, ...]
    barrier: bool = False
    # The fires it runs, for lateness figures: ``(nominal_ms, count)`` per distinct nominal time
    # (run-length encoded: a batch of every-second tasks is one or two entries, not a thousand).
    fired: tuple[tuple[int, int], ...] = ()


class LeaderDriver:
    def __init__(
        self,
        state: SchedulerState,
        node_id: str,
        misfire: MisfireSettings | None = None,
        max_fires_per_batch: int = 1000,
        tick_ms: int = 10,
        max_skew_ms: int = DEFAULT_MAX_SKEW_MS,
        max_dispatch_backlog: int = 0,
    ) -> None:
        self.state = state
        self.node_id = node_id
        self.misfire = misfire or MisfireSettings()
        self.max_fires_per_batch = max_fires_per_batch
        self.tick_ms = tick_ms
        self.epoch = 0
        self.leading = False
        self.ready = False  # barrier committed, wheel rebuilt
        self.wheel: TimingWheel[str] = TimingWheel(tick_ms=tick_ms)
        self.in_flight: set[str] = set()
        self._due: deque[str] = deque()  # fell due, not planned yet (poll with max_fires)
        self.last_now_ms = 0
        self.cron_warnings: list[str] = []  # tasks whose stored cron expression changed meaning
        self._rearm: list[pb.TaskFires] = []  # their next fire by the new meaning, to propose
        # ``hold_fires(task, epoch)``: True while the dispatcher of this leader (``epoch``) does
        # not yet know whether the task's unfinished runs still run (a takeover: their results
        # may be on the way). A fire of such a task with an overlap policy waits instead of being
        # decided on stale state (it would be skipped as overlapping a run that had finished).
        self.hold_fires: Callable[[str, int], bool] | None = None
        # Clocks (issue 35): committed leader time further ahead of this leader's clock than
        # ``max_skew_ms`` is a clock fault, not a floor (see become_leader). ``clock_faulty()``:
        # this node's clock is off the majority's by more than that (raftsched.clockwatch);
        # such a leader plans nothing (its node hands leadership over).
        self.max_skew_ms = max_skew_ms
        self.clock_faulty: Callable[[], bool] | None = None
        # ``damaged()``: this node's stored state is damaged; it plans nothing (it must not lead).
        self.damaged: Callable[[], bool] | None = None
        # ``columns_allowed()``: every voting member applies the columnar bodies
        # (raftsched.leader.formats); asked once per poll. None: never (today's bodies only).
        self.columns_allowed: Callable[[], bool] | None = None
        # ``promote_allowed()``: every voting member applies PromoteHotRuns (command format 19).
        # None: never proposed (a long attempt then keeps the later slots in the hot table).
        self.promote_allowed: Callable[[], bool] | None = None
        # Overload (``[scheduler] max_dispatch_backlog``, 0: no limit): once ``dispatch_backlog()``
        # (attempts committed and waiting for an executor slot) reaches the limit, a due task
        # that has attempts waiting is not planned; it waits here, once, in due order, until
        # they have started or the backlog is down to RESUME_FRACTION of the limit (late fires
        # then go by their misfire policy, as after an outage). Without it an overloaded cluster
        # commits every fire and the waiting attempts grow on every node without bound.
        self.max_dispatch_backlog = max_dispatch_backlog
        self.dispatch_backlog: Callable[[], int] | None = None
        # ``dispatch_waiting()``: tasks with attempts waiting for a slot (Dispatcher.waiting_tasks,
        # read a key at a time): while held, those wait and the others are planned, so one task
        # whose attempts can never be placed (a selector no executor matches) holds only itself.
        self.dispatch_waiting: Callable[[], Mapping[str, int]] | None = None
        self.held_since_ms = 0  # leader time planning was held for the backlog; 0: not held
        self.holds = 0  # times planning was held for the backlog (this node, any leadership)
        # Tasks a refused write needs accounted (FiresWanted): planned even while held.
        self.wanted: set[str] = set()
        # Tasks whose missed fires were planned alone (plan_missed), and the leader time of that
        # plan: their fires then on time stay on time in their next plan (one commit round
        # later), and they are not split twice in a row (a round trip longer than the grace
        # would otherwise coalesce every fire of theirs, for ever).
        self._split_at: dict[str, int] = {}
        self._held_scan_ms = 0  # leader time of the last scan of the due queue while held
        self._numbering_sent_ms = 0  # leader time a NumberEntities was proposed (this leadership)
        self._promote_sent: tuple[int, int] = (0, 0)  # (before_seq, leader time) of the last PromoteHotRuns
        self._paused_for_clock = False
        # (deadline, WorkflowWaitsDue applied so far, leader time) when one was last proposed
        self._waits_proposed: tuple[int, int, int] = (0, 0, 0)
        self._waits_deadline = 0  # the state's earliest cross-workflow deadline, as last read

    # -- leadership ----------------------------------------------------------------------------

    def become_leader(self, epoch: int, now_ms: int) -> Proposal:
        # Every entry applied after this barrier carries its effects (raftsched.replica).
        self.epoch = epoch
        self.leading = True
        self.ready = False
        self.in_flight.clear()
        self._due.clear()
        self._paused_for_clock = False
        self.held_since_ms = 0
        self.wanted.clear()
        self._split_at.clear()
        self._numbering_sent_ms = 0
        self._promote_sent = (0, 0)
        # Leader time is monotonic within a leadership; across leaderships the committed time
        # carries it (our barrier applies after every older entry). A time this node stamped
        # when it led before (perhaps with a clock that was wrong then) is not a floor.
        self.last_now_ms = 0
        committed = self.state.max_now_ms
        fault = committed - now_ms > self.max_skew_ms and not self._clock_faulty()
        if fault:
            # An earlier leader's clock ran ahead (a step, a VM resumed): waiting for our clock
            # to reach that time would stop every fire until then. Plan from our clock again;
            # the decision travels in the barrier, so every replica records the same.
            log.warning(
                "leader %s (epoch %d): committed leader time is %.1f s ahead of this node's clock, "
                "more than max_clock_skew (%.1f s): a clock fault, not a floor; planning from this "
                "node's clock again",
                self.node_id,
                epoch,
                (committed - now_ms) / 1000,
                self.max_skew_ms / 1000,
                extra=leadership_fields(epoch, node=self.node_id),
            )
            self.last_now_ms = stamp = now_ms
        else:
            stamp = self._now(now_ms)
        self.wheel = TimingWheel(tick_ms=self.tick_ms, start_ms=stamp)
        cmd = pb.Command(epoch=epoch, now_ms=stamp, origin=self.node_id)
        cmd.barrier.node_id = self.node_id
        if fault:
            cmd.barrier.clock_fault_ms = committed
        return Proposal(codec.encode_command(cmd), (), barrier=True)

    def _clock_faulty(self) -> bool:
        check = self.clock_faulty
        return check is not None and check()

    def on_barrier_committed(self, epoch: int) -> None:
        """Our barrier applied: every older leader's entry is applied too. Rebuild the wheel."""
        if not self.leading or epoch != self.epoch:
            return
        self.ready = True
        for name, next_fire_ms in self.state.armed_tasks():
            self.wheel.insert(name, next_fire_ms)
        log.info(
            "leader %s (epoch %d) armed %d tasks",
            self.node_id,
            epoch,
            len(self.wheel),
            extra=leadership_fields(epoch, node=self.node_id),
        )
        self.cron_warnings = _warn_changed_cron_meanings(self.state)
        self._rearm = _rearm_by_new_meaning(self.state, self.cron_warnings)
        for tf in self._rearm:
            self.wheel.cancel(tf.task)  # its armed time came from the old reading: never plan it

    def step_down(self) -> None:
        self.leading = False
        self.ready = False
        self.in_flight.clear()
        self._due.clear()
        self.held_since_ms = 0
        self.wanted.clear()
        self._split_at.clear()
        self._rearm = []
        self.wheel = TimingWheel(tick_ms=self.tick_ms)

    # -- effects of applied commands -------------------------------------------------------------

    def on_effects(self, effects: Iterable[Effect]) -> None:
        for effect in effects:
            if isinstance(effect, BarrierCommitted):
                if effect.node_id == self.node_id:
                    self.on_barrier_committed(effect.epoch)
            elif not self.ready:
                continue  # the wheel is rebuilt from state when our barrier commits
            elif isinstance(effect, TaskArmed):
                self.in_flight.discard(effect.task)
                if effect.next_fire_ms:
                    self.wheel.insert(effect.task, effect.next_fire_ms)
                else:
                    self.wheel.cancel(effect.task)
            elif isinstance(effect, ReadyColumns):
                # Each accepted FireColumns row re-arms its task (a TaskArmed of the current version).
                with self.state.view() as v:
                    rows = columns.armed_rows(v, effect)
                in_flight, wheel = self.in_flight, self.wheel
                in_flight.difference_update(map(_ROW_TASK, rows))
                # Every row's task fires again (the common case; a row of a task deleted since
                # is not in ``rows``, and its 0 only sends them the one-by-one way below).
                if all(effect.next_fires):
                    wheel.insert_many(rows)
                    continue
                for name, next_fire in rows:
                    if next_fire:
                        wheel.insert(name, next_fire)
                    else:
                        wheel.cancel(name)
            elif isinstance(effect, FiresWanted):
                self.wanted.add(effect.task)

    def on_proposal_committed(self, proposal: Proposal) -> None:
        """A batch applied. Tasks it covered that were not re-armed by an effect (their entry was
        refused: version changed, task deleted...) are re-armed from the state as it is now."""
        if self.in_flight.isdisjoint(proposal.tasks):
            return  # the common case: every task was re-armed (one C call, not a loop per task)
        for name in proposal.tasks:
            if name in self.in_flight:
                self.on_proposal_failed(Proposal(b"", (name,)))

    def on_proposal_failed(self, proposal: Proposal) -> None:
        """Re-arm the tasks of a batch that did not commit (or whose outcome is unknown).

        If it did commit after all, the FSM refuses the repeated fires (not after the watermark),
        so re-arming can never produce a second run for a fire id.
        """
        for name in proposal.tasks:
            self.in_flight.discard(name)
            planning = self.state.task_for_planning(name)
            if planning is not None and planning[3] and self.ready:
                self.wheel.insert(name, planning[3])

    # -- the loop body ---------------------------------------------------------------------------

    def _now(self, clock_ms: int) -> int:
        """Leader time, and never earlier than a time this driver stamped before (not committed
        yet, so the state machine does not know it)."""
        self.last_now_ms = leader_time(max(self.last_now_ms, clock_ms), self.state.max_now_ms)
        return self.last_now_ms

    def poll(self, clock_ms: int, max_fires: int = 0) -> list[Proposal]:
        """Plan what is due at ``clock_ms`` into FireBatch proposals.

        With ``max_fires`` > 0 at most about that many fires are planned; the rest stay queued
        (in due order) for the next call, so a burst of thousands of due tasks leaves in a
        stream of batches instead of waiting for all of it to be planned first.

        Hot path (every fire of every task passes here): the common case - one fire due, on
        time - is written straight into the batch being built (``single_on_time_fire``), the
        same bytes :func:`plan_fires` would produce; everything else goes through ``plan_fires``.
        """
        if not (self.leading and self.ready):
            return []
        if self.damaged is not None and self.damaged():
            return []  # a damaged store: the node hands leadership over (Node._watch_clock)
        if self._clock_faulty():
            # Planning now would stamp a time the majority does not share (ten minutes ahead:
            # every fire of ten minutes at once). Nothing is decided until the clock agrees
            # again or another node leads.
            if not self._paused_for_clock:
                self._paused_for_clock = True
                log.warning(
                    "leader %s (epoch %d): this node's clock is off the majority's by more than "
                    "max_clock_skew (%.1f s); it plans no fires and hands leadership over",
                    self.node_id,
                    self.epoch,
                    self.max_skew_ms / 1000,
                    extra=leadership_fields(self.epoch, node=self.node_id),
                )
            return []
        if self._paused_for_clock:
            self._paused_for_clock = False
            log.warning("leader %s: its clock agrees with the majority again; planning resumes", self.node_id)
        now = self._now(clock_ms)
        waits = self._waits_due(now)
        hot, numbering = self._columns(now)
        due = self._due
        due.extend(self.wheel.advance_keys(now))
        batches = BatchBuilder(self, now)
        wheel, in_flight, state = self.wheel, self.in_flight, self.state
        if self._rearm:
            for rearm in self._rearm:  # tasks whose cron expression changed meaning (see barrier)
                batches.add(rearm)
                in_flight.add(rearm.task)
            self._rearm = []
        room = self._backlog_room(now)
        # Tasks a refused write waits for: planned now even while held, and whole (not split by
        # plan_missed), so the write's retry finds nothing due.
        wanted, self.wanted = self.wanted, set()
        if room == 0:
            # Held: a task with attempts waiting for a slot waits too (in due order, looked at
            # again every BACKLOG_RECHECK_MS, not on every applied entry); one whose attempts all
            # started is planned, and so is one a refused write is waiting for (FiresWanted).
            if not wanted and now - self._held_scan_ms < BACKLOG_RECHECK_MS:
                return numbering + waits + batches.finish()
            self._held_scan_ms = now
            due = self._eligible_while_held(wanted)
            if not due:
                return numbering + waits + batches.finish()
        else:
            if room > 0:
                max_fires = min(max_fires, room) if max_fires else room
        grace = self.misfire.grace_ms
        hold = self.hold_fires
        split_at = self._split_at
        fires = 0
        reads: dict[str, PlanningInput | None] = {}
        armed = wheel.armed()
        popleft = due.popleft
        # Single on-time fires of hot tasks, (name, number, version, nominal, following), handed
        # to ``batches`` in order (BatchBuilder.add_hot_many) before a catch-up and at the end.
        hot_rows: list[HotRow] = []
        # The last cron question single_on_time_fire answered in this poll: (expr, zone, next
        # fire) and its answer. The answer is pure in those and the poll's ``now`` and ``grace``,
        # and every-second tasks share their expression and next fire: one of a thousand asks.
        last_expr: str | None = None
        last_zone: str | None = None
        last_fire = 0
        last_following: int | None = None
        while due and (not max_fires or fires < max_fires):
            name = popleft()
            if name in armed:
                continue  # re-armed by a newer effect since it fell due: the wheel has it
            if name not in reads:  # read this task's and the next due tasks' inputs in one view
                chunk = min(PLAN_READ_CHUNK, max_fires - fires if max_fires else PLAN_READ_CHUNK)
                names = [name, *itertools.islice(due, chunk - 1)]
                with state.view() as v:
                    reads = v.planning_inputs(names, numbers=hot)
            read = reads.pop(name)
            if read is None:
                continue
            spec, version, next_fire, active, number = read
            split = split_at.pop(name, None) if split_at else None
            task_grace = grace
            if split is not None and now - split <= grace:
                task_grace = grace + (now - split)  # the fires on time at the split still are
            if (
                hold is not None
                and spec.overlap != Overlap.ALLOW
                # a workflow's trigger has no runs of its own: its workflow runs are unfinished
                and (active or spec.handler == "workflow")
                and hold(name, self.epoch)
            ):
                wheel.insert(name, now + HOLD_RECHECK_MS)
                continue
            try:
                trigger = spec.trigger
                if task_grace != grace:
                    following = single_on_time_fire(trigger, next_fire, now, task_grace)
                elif type(trigger) is not CronTrigger:
                    following = single_on_time_fire(trigger, next_fire, now, grace)
                elif next_fire == last_fire and trigger.expr == last_expr and trigger.timezone == last_zone:
                    following = last_following
                else:
                    following = single_on_time_fire(trigger, next_fire, now, grace)
                    last_expr, last_zone, last_fire = trigger.expr, trigger.timezone, next_fire
                    last_following = following
                if following is not None:
                    if number and following > now:
                        hot_rows.append((name, number, version, next_fire, following))
                        fires += 1
                        continue
                    if hot_rows:  # the hot rows planned before it first: entries keep plan order
                        _hand_over(batches, in_flight, hot_rows)
                        hot_rows = []
                    batches.add_single(name, version, next_fire, following)
                    if spec.overlap == Overlap.REPLACE:
                        batches.cmd.format = max(
                            codec.command_format(batches.cmd), codec.REPLACE_RELEASES_FORMAT
                        )
                    fires += 1
                    in_flight.add(name)
                    continue
                catch_up = on_time_catch_up(trigger, next_fire, now, task_grace) if number else None
                if catch_up is not None:
                    # A planner a few seconds behind (a long stall of this node): the fires due
                    # are all on time, as catch-up rows of one FireColumns entry. Through
                    # plan_fires they took the cold path, ~10x the apply cost on every node,
                    # exactly when the cluster was already behind (12,000 tasks: it never
                    # caught up, and lost its leader to the stalls).
                    nominals, following = catch_up
                    if hot_rows:  # the rows before it first, in order
                        _hand_over(batches, in_flight, hot_rows)
                        hot_rows = []
                    batches.add_hot_rows(name, number, version, nominals, following)
                    fires += len(nominals)
                    in_flight.add(name)
                    continue
                # Missed fires with on-time ones after them (a leader that was down or held for
                # the backlog longer than the grace): the missed ones first, alone (one range
                # record, no run); the task is re-armed at its first on-time fire, which the next
                # poll plans as above, on the hot path, not as runs of the general path.
                misfire = self.misfire
                if task_grace != grace:
                    misfire = dataclasses.replace(misfire, grace_ms=task_grace)
                splits = number and split is None and name not in wanted
                tf = plan_missed(spec, version, next_fire, now, misfire) if splits else None
                if tf is not None:
                    split_at[name] = now
                else:
                    tf = plan_fires(spec, version, next_fire, now, misfire)
            except InvalidSpec as exc:  # e.g. a cron schedule with no fire before year 9999
                log.error("cannot plan fires of task %s: %s", name, exc)
                continue
            if tf is None:
                if next_fire:
                    wheel.insert(name, next_fire)
                continue
            if hot_rows:
                _hand_over(batches, in_flight, hot_rows)
                hot_rows = []
            batches.add(tf)
            if spec.overlap == Overlap.REPLACE:
                batches.cmd.format = max(codec.command_format(batches.cmd), codec.REPLACE_RELEASES_FORMAT)
            fires += len(tf.fires)
            in_flight.add(name)
        if hot_rows:
            _hand_over(batches, in_flight, hot_rows)
        if due is not self._due and due:  # held: what this poll had no room for goes back first
            self._due.extendleft(reversed(due))
        return numbering + waits + batches.finish()

    def _eligible_while_held(self, wanted: set[str]) -> deque[str]:
        """The due tasks a held poll plans, taken out of the due queue in due order: those with no
        attempt waiting for a slot (:attr:`dispatch_waiting`) and those ``wanted`` (FiresWanted).
        The others stay due. Only names are looked at: no planning input is read for a held
        task."""
        waiting = self.dispatch_waiting() if self.dispatch_waiting is not None else {}
        due = self._due
        eligible = deque(name for name in due if name in wanted or name not in waiting)
        if eligible:
            if len(eligible) == len(due):
                due.clear()
            else:
                taken = set(eligible)
                rest = [name for name in due if name not in taken]
                due.clear()
                due.extend(rest)
        return eligible

    def _backlog_room(self, now: int) -> int:
        """How many fires this poll may plan for the dispatch backlog: -1 without a limit, 0 while
        planning is held (the backlog reached the limit and is not down to RESUME_FRACTION of
        it yet: tasks with attempts waiting are not planned). Says so in the log when a hold
        starts and when it ends."""
        limit, backlog_of = self.max_dispatch_backlog, self.dispatch_backlog
        if not limit or backlog_of is None:
            return -1
        backlog = backlog_of()
        if self.held_since_ms:
            if backlog > limit * RESUME_FRACTION:
                return 0
            log.warning(
                "leader %s: %d attempts wait for an executor slot (down from the limit, "
                "scheduler.max_dispatch_backlog = %d); fire planning resumes after %.1f s held, "
                "%d tasks due (fires late by more than misfire_grace go by their misfire policy)",
                self.node_id,
                backlog,
                limit,
                (now - self.held_since_ms) / 1000,
                len(self._due),
                extra=leadership_fields(self.epoch, node=self.node_id),
            )
            self.held_since_ms = 0
        elif backlog >= limit:
            self.held_since_ms = now
            self.holds += 1
            log.warning(
                "leader %s: %d attempts wait for an executor slot, the limit "
                "(scheduler.max_dispatch_backlog); no fire of a task with attempts waiting is "
                "planned until they are down to %d: the executors cannot start what is due "
                "(add slots or executors; the "
                "metrics raftsched_dispatch_backlog and raftsched_planning_held_seconds)",
                self.node_id,
                backlog,
                int(limit * RESUME_FRACTION),
                extra=leadership_fields(self.epoch, node=self.node_id),
            )
            return 0
        return max(1, limit - backlog)

    def _columns(self, now: int) -> tuple[bool, list[Proposal]]:
        """Whether this poll builds columns for hot tasks, and a ``NumberEntities`` to propose
        first (once per leadership, again after :data:`NUMBERING_RETRY_MS` if its numbering has
        not applied: the columns name tasks by number). Only while every voting member applies
        them (``columns_allowed``, :mod:`raftsched.leader.formats`)."""
        allowed = self.columns_allowed
        if allowed is None or not allowed():
            return False, []
        promote = self.promote_allowed
        with self.state.view() as v:
            on = v.numbering_on()
            bound = v.hot_promote_bound() if on and promote is not None and promote() else 0
            last = self._promote_sent[0]
            applied = v.hot_promotion_applied(last) if bound and last else True
        if on:
            return True, self._promote(now, bound, applied)
        if self._numbering_sent_ms and now - self._numbering_sent_ms < NUMBERING_RETRY_MS:
            return False, []
        self._numbering_sent_ms = now
        return False, [Proposal(columns.number_entities(now, self.epoch, self.node_id), ())]

    def _promote(self, now: int, bound: int, last_applied: bool) -> list[Proposal]:
        """A ``PromoteHotRuns`` up to ``bound`` (0: none due; :meth:`HotBook.promote_bound`): 1,
        the first one, turns the logging of promotions on; a larger one promotes the live hot
        runs so far behind that they pin the slot table. While the last one proposed has not
        applied (``last_applied``, read with the bound), none is proposed, except again after
        :data:`PROMOTE_RETRY_MS` (it was lost)."""
        if not bound:
            return []
        _, at = self._promote_sent
        if not last_applied and now - at < PROMOTE_RETRY_MS:
            return []  # proposed, not applied yet
        self._promote_sent = (bound, now)
        log.info(
            "leader %s: %s",
            self.node_id,
            "every voter applies command format 19: turning the record of hot promotions on"
            if bound == 1
            else f"moving the hot runs below seq {bound} to the cold path (they pin the slot table)",
            extra=leadership_fields(self.epoch, node=self.node_id),
        )
        return [Proposal(columns.promote_hot_runs(now, self.epoch, self.node_id, bound), ())]

    def _waits_due(self, now: int) -> list[Proposal]:
        """A ``WorkflowWaitsDue`` when a cross-workflow deadline (timeout, warn_after) has come.
        The state's hint is read without its lock (an int); apply decides what has come. Proposed
        once per deadline, again after :data:`WAITS_RETRY_MS` if it is still there (lost)."""
        with self.state.view() as v:
            deadline, applied = v.waits_due_ms()
        self._waits_deadline = deadline
        if not deadline or deadline > now:
            return []
        last_deadline, last_applied, last_at = self._waits_proposed
        if (last_deadline, last_applied) == (deadline, applied) and now - last_at < WAITS_RETRY_MS:
            return []  # proposed, not applied yet
        self._waits_proposed = (deadline, applied, now)
        data = writes.workflow_waits_due(now_ms=now, epoch=self.epoch, origin=self.node_id)
        return [Proposal(data, ())]

    @property
    def backlog(self) -> int:
        """Tasks due but not planned yet."""
        return len(self._due)

    def next_wakeup_ms(self, for_window: bool = False) -> int | None:
        """When to poll next. ``for_window``: when a batch may next be planned, for the firing
        window (:mod:`raftsched.leader.window`), which a hold's rechecks of the backlog leave
        out (they rarely plan anything, and each would hold the HTTP API back)."""
        if not (self.leading and self.ready) or self._paused_for_clock:
            return None  # paused for the clock: looked at again after the longest sleep
        if self.held_since_ms:
            # The due tasks wait for the backlog: looked at again at the next scan.
            wheel = self.wheel.next_due_ms()
            if not for_window:
                recheck = max(self.last_now_ms, self._held_scan_ms + BACKLOG_RECHECK_MS)
                wheel = recheck if wheel is None else min(recheck, wheel)
        elif self._due:
            return self.last_now_ms
        else:
            wheel = self.wheel.next_due_ms()
        deadline = self._waits_deadline  # read by poll (a run started since: the next poll sees it)
        if deadline and self._waits_proposed[0] == deadline:
            # Proposed: its commit wakes the loop (and the next poll proposes the rest at once);
            # if it was lost, propose again after the retry interval.
            deadline = self._waits_proposed[2] + WAITS_RETRY_MS
        if not deadline:
            return wheel
        return deadline if wheel is None else min(wheel, deadline)


class BatchBuilder:
    """FireBatch commands built in place, split to stay within ``MAX_ENTRY_BYTES`` and
    ``max_fires_per_batch`` (building inside the command saves constructing, sizing and copying
    one message per task, the bulk of the leader's planning cost)."""

    __slots__ = (
        "cmd",
        "driver",
        "fired",
        "fires",
        "hot",
        "hot_cap",
        "names",
        "now",
        "out",
        "size",
        "tasks",
    )

    def __init__(self, driver: LeaderDriver, now: int) -> None:
        self.driver = driver
        self.now = now
        self.out: list[Proposal] = []
        # FireColumns rows of hot tasks, in order; at most ``hot_cap`` in one entry (one
        # task's catch-up rows excepted: add_hot_rows): a new entry before a row when
        # ``len >= max_fires_per_batch`` or ``(len + 1) * HOT_ROW_BYTES > MAX_ENTRY_BYTES``,
        # i.e. from ``len >= MAX_ENTRY_BYTES // HOT_ROW_BYTES``; a row always fits an empty entry.
        self.hot_cap = max(1, min(driver.max_fires_per_batch, MAX_ENTRY_BYTES // HOT_ROW_BYTES))
        self._start()
        self.hot: list[HotRow] = []

    def add_hot_many(self, rows: list[HotRow]) -> None:
        """The single on-time fires of hot tasks, ``(name, number, version, nominal, following)``
        each, as FireColumns rows in order: the same fires :meth:`add_single` would put in the
        FireBatch (each ``following`` is after ``now``, and its ``nominal`` is not). The driver's
        poll hands its rows over at once (slices, not a call per row)."""
        cap = self.hot_cap
        hot = self.hot
        done, total = 0, len(rows)
        while done < total:
            if len(hot) >= cap:
                self._flush_hot()
                hot = self.hot = []
            take = cap - len(hot)
            hot.extend(rows[done : done + take])
            done += take

    def add_hot_rows(self, name: str, number: int, version: int, nominals: list[int], following: int) -> None:
        """The on-time catch-up of hot task ``name``: one FireColumns row per fire of
        ``nominals`` (in order, each row's next fire the one after it, the last's ``following``),
        all in one entry (a task's rows split over two entries would end the first with a next
        fire that is not after ``now``: the state machine refuses that)."""
        hot = self.hot
        k = len(nominals)
        if hot and (
            len(hot) + k > self.driver.max_fires_per_batch or (len(hot) + k) * HOT_ROW_BYTES > MAX_ENTRY_BYTES
        ):
            self._flush_hot()
            hot = self.hot = []
        hot.extend(
            (name, number, version, nominal, after)
            for nominal, after in zip(nominals, [*nominals[1:], following], strict=True)
        )

    def _flush_hot(self) -> None:
        rows = self.hot
        if not rows:
            return
        d, now = self.driver, self.now
        names, numbers, versions, nominals, nexts = zip(*rows, strict=True)
        cmd = pb.Command(epoch=d.epoch, now_ms=now, origin=d.node_id)
        cols = cmd.fire_columns
        cols.task.extend(numbers)
        cols.version.extend(versions)
        cols.nominal_delta.extend(map(sub, repeat(now), nominals))
        cols.next_delta.extend(map(sub, nexts, nominals))
        self.out.append(Proposal(codec.encode_command(cmd), names, fired=tuple(Counter(nominals).items())))

    def _start(self) -> None:
        d = self.driver
        self.cmd = pb.Command(epoch=d.epoch, now_ms=self.now, origin=d.node_id)
        self.tasks = self.cmd.fire_batch.tasks
        self.names: list[str] = []
        self.fired: list[int] = []
        self.size = self.fires = 0

    def _room(self, size: int, fires: int) -> None:
        if self.names and (
            self.size + size > MAX_ENTRY_BYTES or self.fires + fires > self.driver.max_fires_per_batch
        ):
            self._flush()
            self._start()

    def add_single(self, name: str, version: int, nominal: int, following: int) -> None:
        """The message ``single_fire(name, version, nominal, now, following)``, in place."""
        now = self.now
        # Its exact encoded size (names are ASCII by validation), plus the repeated field's tag
        # and length prefix: the same accounting as ``ByteSize() + 4`` for other entries. Inline
        # varint sizes ((bits + 6) // 7 for positive values): this runs once per fire.
        n = len(name)
        size = (
            (2 if n < 128 else 3) + n  # task: tag, length, name
            + ((version.bit_length() + 6) // 7 + 1 if version > 0 else 0)
            + 7 + (nominal.bit_length() + 6) // 7  # fires: tag, length; nominal, outcome, count
            + ((following.bit_length() + 6) // 7 + 1 if following > 0 else 0)
            + (now.bit_length() + 6) // 7 + 1  # watermark
            + 4
        )  # fmt: skip
        self._room(size, 1)
        tf = self.tasks.add(task=name, version=version, watermark_ms=now, next_fire_ms=following)
        tf.fires.add(nominal_ms=nominal, outcome=pb.FIRED, count=1)
        self.names.append(name)
        self.fired.append(nominal)
        self.size += size
        self.fires += 1

    def add(self, tf: pb.TaskFires) -> None:
        size = tf.ByteSize() + 4
        self._room(size, len(tf.fires))
        self.tasks.append(tf)
        self.names.append(tf.task)
        self.fired.extend(f.nominal_ms for f in tf.fires if f.outcome == pb.FIRED)
        self.size += size
        self.fires += len(tf.fires)

    def _flush(self) -> None:
        if self.names:
            self.out.append(
                Proposal(
                    codec.encode_command(self.cmd),
                    tuple(self.names),
                    fired=tuple(Counter(self.fired).items()),  # counted in C, in first-seen order
                )
            )

    def finish(self) -> list[Proposal]:
        """The cycle's proposals: its FireBatch commands, then its FireColumns commands."""
        self._flush()
        self._flush_hot()
        return self.out


# ConsensusNode.propose (see raftsched.abc), or a node's wrapper of it.
ProposeFn = Callable[[bytes, ProposeCallback, CommitHook | None], None]


class DriverThread:
    """Runs a :class:`LeaderDriver` on its own thread against a real clock and consensus node.

    Leadership changes and applied effects arrive from the consensus thread through
    :meth:`leadership_changed` and :meth:`effects_applied`; both only enqueue and wake the loop.
    """

    def __init__(
        self,
        driver: LeaderDriver,
        clock: Clock,
        propose: ProposeFn,
        max_sleep_s: float = 0.5,
        max_in_flight: int = MAX_IN_FLIGHT,
        window: FiringWindow | None = None,
    ) -> None:
        self.driver = driver
        self.max_in_flight = max_in_flight
        self.window = window
        """Told after every step when the driver next has work and what is in flight (the
        HTTP API gives way to the firing path in that window, :mod:`raftsched.leader.window`)."""
        self._queue: list[Proposal] = []
        self._in_flight = 0
        # Leaderships seen (each "leader" or "follower" event starts a new one): the pipeline
        # counts only its own generation's proposals, so a proposal whose callback never comes
        # (raftsched.consensus.pysyncobj.patches: an installed snapshot covering it, before that
        # was handled) can hold back at most the leadership it was made in, never a later one.
        self._generation = 0
        self.commit_seconds: list[float] = []
        # Called on the consensus thread at commit with [(nominal_ms, lateness_ms, count), ...],
        # one entry per nominal time of the batch.
        self.on_commit_lateness: Callable[[list[tuple[int, int, int]]], None] | None = None
        self._last_report = clock.monotonic()
        self.clock = clock
        self.propose = propose
        self.max_sleep_s = max_sleep_s
        self._cond = threading.Condition()
        self._events: list[tuple[str, object]] = []
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="raftsched-leader", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        with self._cond:
            self._stop = True
            self._cond.notify()
        self._thread.join(timeout=5)

    def leadership_changed(self, is_leader: bool, epoch: int) -> None:
        self._post("leader" if is_leader else "follower", epoch)

    def effects_applied(self, effects: tuple[Effect, ...]) -> None:
        if effects:
            self._post("effects", effects)

    def _post(self, kind: str, value: object) -> None:
        with self._cond:
            self._events.append((kind, value))
            self._cond.notify()

    def _run(self) -> None:
        while True:
            with self._cond:
                if not self._events and not self._stop:
                    self._cond.wait(self._sleep_s())
                if self._stop:
                    return
                events, self._events = self._events, []
            try:
                self._step(events)
            except Exception:  # keep the loop alive; a bug here must not silence the scheduler
                log.exception("leader loop step failed")
            if self.window is not None:
                self.window.publish(self.driver.next_wakeup_ms(for_window=True), self._in_flight)

    def _sleep_s(self) -> float:
        if self._in_flight >= self.max_in_flight:
            return self.max_sleep_s  # a commit (an event) wakes us
        wake = self.driver.next_wakeup_ms()
        if wake is None:
            return self.max_sleep_s
        return min(self.max_sleep_s, max(0.0, (wake - self.clock.now_ms()) / 1000.0))

    def _step(self, events: list[tuple[str, object]]) -> None:
        d = self.driver
        for kind, value in events:
            if kind in ("leader", "follower"):
                # Queued batches were planned under the previous role/epoch: drop them. Their
                # tasks are re-armed from state when this node next leads. Proposals still in
                # flight belong to the old generation: their settling no longer counts.
                self._queue.clear()
                self._generation += 1
                self._in_flight = 0
            if kind == "leader":
                assert isinstance(value, int)
                if not d.leading or d.epoch != value:
                    self._send(d.become_leader(value, self.clock.now_ms()))
            elif kind == "follower":
                if d.leading:
                    term = value if isinstance(value, int) else d.epoch
                    log.info(
                        "%s stepped down (led epoch %d, now term %d)",
                        d.node_id,
                        d.epoch,
                        term,
                        extra=leadership_fields(term, d.epoch, node=d.node_id),
                    )
                d.step_down()
            elif kind == "effects":
                d.on_effects(value)  # type: ignore[arg-type]
            elif kind == "barrier_failed":
                assert isinstance(value, int)
                if d.leading and d.epoch == value and not d.ready:
                    self._send(d.become_leader(value, self.clock.now_ms()))
            elif kind == "failed":
                assert isinstance(value, Proposal)
                d.on_proposal_failed(value)
            elif kind == "committed":
                assert isinstance(value, Proposal)
                d.on_proposal_committed(value)
            elif kind == "settled":
                assert isinstance(value, tuple)
                generation, seconds = value
                if generation == self._generation:
                    self._in_flight -= 1
                    self.commit_seconds.append(seconds)
        now_s = self.clock.monotonic()
        if self.commit_seconds and now_s - self._last_report > 10:
            lat = sorted(self.commit_seconds)
            log.info(
                "leader %s: %d batches committed in %.0fs, commit latency p50 %.0f ms max %.0f ms, %d queued",
                d.node_id,
                len(lat),
                now_s - self._last_report,
                lat[len(lat) // 2] * 1000,
                lat[-1] * 1000,
                len(self._queue),
            )
            self.commit_seconds.clear()
            self._last_report = now_s
        self._pump()

    def _pump(self) -> None:
        # Flow control: at most `max_in_flight` fire batches proposed but not yet applied. Every
        # node applies all newly committed entries in one Raft tick, and heartbeats wait for
        # that; an unpaced burst (10,000 fires due in the same second) stalled ticks past the
        # election timeout. The wheel is polled only when the pipeline has room and nothing is
        # queued, so under load due tasks accumulate there and leave in full batches (polling
        # on every commit produced many tiny batches and throughput collapsed).
        while self._in_flight < self.max_in_flight:
            if not self._queue:
                self._queue.extend(self.driver.poll(self.clock.now_ms(), self.driver.max_fires_per_batch))
                if not self._queue:
                    return
            self._send(self._queue.pop(0))

    def _send(self, proposal: Proposal) -> None:
        epoch = self.driver.epoch
        generation = self._generation
        sent = self.clock.monotonic()
        settled = False
        if not proposal.barrier:
            self._in_flight += 1

        def settle() -> None:
            # The pipeline slot frees up at commit (or failure), not at apply: applies run on
            # their own thread, and a task is re-armed only once its fire is applied anyway.
            nonlocal settled
            if not settled and not proposal.barrier:
                settled = True
                self._post("settled", (generation, self.clock.monotonic() - sent))

        def committed() -> None:
            if proposal.fired and self.on_commit_lateness is not None:
                now = self.clock.now_ms()
                self.on_commit_lateness([(n, now - n, count) for n, count in proposal.fired])
            settle()

        def done(result: bytes | None, error: ProposeError | None) -> None:
            settle()
            if error is not None:
                log.warning("proposal failed (%s): %s", error.code, error)
                self._post(
                    "barrier_failed" if proposal.barrier else "failed",
                    epoch if proposal.barrier else proposal,
                )
            elif proposal.tasks:
                self._post("committed", proposal)

        self.propose(proposal.data, done, committed)
