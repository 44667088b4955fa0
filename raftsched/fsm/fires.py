"""Fires inside the state machine: the leader's fire batches, checked, decided and accounted.

The leader computes which fires are due (cron, misfire policy) and proposes them as values in a
``FireBatch``; the :class:`FireBook` checks each task's fires (never early, never twice, for the
task's current version), decides what only replicated state can decide — a disabled task, a
calendar exclusion, an unfinished run and the task's overlap policy — creates the runs, and keeps
one fire record per fire (pruned by count and age). Like the rest of the FSM it is deterministic
and reaches the rest of the state only through the :class:`FireHost` protocol.

Hot path: one call of :meth:`FireBook.fire_batch` per batch, a few attribute reads per fire.
"""

from __future__ import annotations

import enum
import logging
from typing import Protocol

from raftsched import bounds, codec
from raftsched.fsm import alerts as alerts_mod
from raftsched.fsm import keys, wire
from raftsched.fsm.calendars import CalendarBook
from raftsched.fsm.effects import Effect
from raftsched.fsm.records import (
    PRUNE_BATCH,
    BookHost,
    Retention,
    TaskState,
    armed,
    count_excess,
    keeps,
    prune_phase,
)
from raftsched.fsm.runs import RunBook
from raftsched.fsm.tally import ApplyTally
from raftsched.fsm.workflow_model import is_internal, is_trigger, split_internal
from raftsched.fsm.workflows import WorkflowBook
from raftsched.model import Overlap
from raftsched.v1 import log_pb2 as pb

log = logging.getLogger(__name__)

# Fire outcomes that raise an alert (a disabled task's skipped fires are what its owner asked for).
_ALERTED_FIRES = frozenset({pb.COALESCED, pb.SKIPPED_OVERLAP, pb.SKIPPED_MISFIRE})
_LEADER_OUTCOMES = frozenset({pb.FIRED, pb.COALESCED, pb.SKIPPED_MISFIRE})  # what a leader may decide
# Label values of the applier's tally (see raftsched.fsm.tally).
_OUTCOME_NAMES: dict[int, str] = {
    pb.FIRED: "fired",
    pb.COALESCED: "coalesced",
    pb.SKIPPED_OVERLAP: "skipped_overlap",
    pb.SKIPPED_MISFIRE: "skipped_misfire",
    pb.SKIPPED_DISABLED: "skipped_disabled",
    pb.SKIPPED_CALENDAR: "skipped_calendar",
}

Handled = tuple[pb.CommandResult, tuple[Effect, ...]]


class Admit(enum.Enum):
    """What a fire does while its task has an unfinished run (by the task's overlap policy)."""

    RUN = "run"  # a run starts now (overlap=replace: after cancelling the unfinished ones)
    HOLD = "hold"  # overlap=buffer_one: the run is created held behind the running one
    SKIP = "skip"  # the fire is skipped (SKIPPED_OVERLAP)


class FireHost(BookHost, Protocol):
    """What the fire book needs from the rest of the state machine (``SchedulerState``).

    Called on the apply thread only, while a command applies."""

    @property
    def retention(self) -> Retention: ...

    @property
    def calendars(self) -> CalendarBook: ...
    @property
    def wf(self) -> WorkflowBook: ...
    @property
    def runs(self) -> RunBook: ...
    @property
    def tally(self) -> ApplyTally | None: ...


class FireBook:
    """The fire batches and the fire records (see module doc)."""

    def __init__(self, host: FireHost) -> None:
        self.host = host
        self.store = host.store  # the state's store, never replaced (a restore refills it)

    def fire_batch(self, cmd: pb.Command, now: int) -> Handled:
        # Never early is checked per fire against the stamping leader's clock (cmd.now_ms), not the
        # max committed time: one leader pipelines commands stamped by several threads, so they
        # may commit slightly out of stamp order. A *new* leader never stamps below the committed
        # max (the driver starts from it after its barrier), which is what invariant 3 asks.
        now = cmd.now_ms
        host = self.host
        runs, tasks = host.runs, host.tasks
        effects: list[Effect] = []
        lead = host.leader_effects
        fired = accounted = refused = 0
        for tf in cmd.fire_batch.tasks:
            st = tasks.get(tf.task)
            problem = check_task_fires(st, tf, now)
            if problem or st is None:
                refused += 1
                log.debug("fire batch entry for %s refused: %s", tf.task, problem)
                continue
            exclude = st.spec.exclude
            for fire in tf.fires:
                outcome: int = fire.outcome
                reason, run_id, calendar = fire.reason, "", ""
                hold = False  # a bool, not an Admit: an enum member read costs ~80 ns (per fire)
                if not st.enabled:
                    outcome, reason = pb.SKIPPED_DISABLED, "task disabled when the fire was committed"
                elif (
                    outcome == pb.FIRED
                    and exclude
                    and (cal := host.calendars.excluding(exclude, fire.nominal_ms)) is not None
                ):
                    # Decided here from the nominal time and the replicated calendar (its zone's
                    # offsets travel with it), so every replica skips the same fires.
                    outcome, reason, calendar = pb.SKIPPED_CALENDAR, cal.why(fire.nominal_ms), cal.name
                elif (
                    outcome == pb.FIRED
                    and st.active_runs > 0
                    and st.spec.overlap != Overlap.ALLOW
                    and st.active_runs > runs.backfill_per_task.get(st.spec.name, 0)
                ):
                    admit, reason = self._overlap(st, now, cmd.epoch, cmd.format, effects)
                    hold = admit is Admit.HOLD
                    if admit is Admit.SKIP:
                        outcome = pb.SKIPPED_OVERLAP
                if outcome == pb.FIRED:
                    if is_trigger(st.spec):
                        run_id = host.wf.start_scheduled(st, fire.nominal_ms, now, cmd.epoch, effects)
                    else:
                        run_id, _, run_effects = runs.new(st, fire.nominal_ms, now, cmd.epoch, hold=hold)
                        if lead:
                            effects.extend(run_effects)
                        if hold:
                            reason = f"buffered behind the running run (overlap=buffer_one): {run_id} waits"
                    fired += 1
                self._account(st, fire, outcome, reason, run_id, now, cmd.epoch, calendar)
                accounted += 1
            st.watermark_ms = max(st.watermark_ms, tf.watermark_ms)
            st.next_fire_ms = tf.next_fire_ms
            host.touch_task(st)  # counters only: a held run or a flag changed stored the record
            if lead:
                effects.append(armed(st))
        return pb.CommandResult(ok=True, fired=fired, accounted=accounted, refused=refused), tuple(effects)

    def _overlap(
        self, st: TaskState, now: int, epoch: int, cmd_format: int, effects: list[Effect]
    ) -> tuple[Admit, str]:
        """What a fire does while ``st`` has an unfinished run, by its overlap policy (``allow``
        never gets here), and the reason recorded with it."""
        policy = st.spec.overlap
        # A workflow's trigger task never buffers or replaces: its runs are workflow runs.
        ordinary = not is_trigger(st.spec)
        if policy == Overlap.BUFFER_ONE and ordinary:
            if st.held_run:
                return Admit.SKIP, f"run {st.held_run} already waits for the running one (overlap=buffer_one)"
            return Admit.HOLD, ""
        if policy == Overlap.REPLACE and ordinary:
            # Format 4: the cancelled attempts give back their quota places and locks (older
            # formats kept them: a cluster mid-upgrade applies the command as its oldest node).
            release = cmd_format >= codec.REPLACE_RELEASES_FORMAT
            self.host.runs.cancel_task_runs(st, now, epoch, effects, release)
            return Admit.RUN, "replaced the unfinished run (overlap=replace)"
        return Admit.SKIP, f"an earlier run was still unfinished (overlap={policy})"

    def _account(
        self,
        st: TaskState,
        fire: pb.Fire,
        outcome: int,
        reason: str,
        run_id: str,
        now: int,
        epoch: int,
        calendar: str = "",
    ) -> None:
        host = self.host
        name = st.spec.name
        count = fire.count or 1
        # Like runs, the per-version fields are serialized once and concatenated (hot path).
        template = st.fire_template
        if template is None:
            template = st.fire_template = pb.FireRecord(task=name, task_version=st.version).SerializeToString(
                deterministic=True
            )
        rec = wire.fire_fields(
            fire.nominal_ms, outcome, reason, now, epoch, run_id, fire.through_ms, count, calendar
        )
        self.store.put(keys.time_key(keys.FIRE, name, fire.nominal_ms), template + rec)
        st.fires_total += count
        if host.tally is not None:
            spec = st.spec
            host.tally.fire(_OUTCOME_NAMES.get(outcome, "unknown"), spec.owner, spec.namespace, name, count)
        st.kept_fires += 1
        self._prune(st, now)
        if outcome in _ALERTED_FIRES:
            self._alert(st, fire, outcome, reason, now)

    def _alert(self, st: TaskState, fire: pb.Fire, outcome: int, reason: str, now: int) -> None:
        kind = alerts_mod.FIRE_COALESCED if outcome == pb.COALESCED else alerts_mod.FIRE_SKIPPED
        name = st.spec.name
        workflow = split_internal(name)[0] if is_internal(name) else ""
        what = pb.FireOutcome.Name(outcome).lower()
        count = fire.count or 1
        span = f"{count} fires from {fire.nominal_ms}" if count > 1 else f"fire at {fire.nominal_ms}"
        self.host.raise_alert(
            kind,
            f"{span} {what}: {reason}" if reason else f"{span} {what}",
            now,
            task=name,
            workflow=workflow,
            owner=st.spec.owner,
            namespace=st.spec.namespace,
        )

    def _prune(self, st: TaskState, now: int) -> None:
        if self.host.batched_prune:
            self._prune_batched(st, now)
            return
        # A command of a format before BATCHED_PRUNE_FORMAT prunes as the builds before did.
        # Over the count limit: prune now. Age is checked every 64th record only (it needs a
        # read of the oldest record); both conditions are deterministic, so replicas agree.
        retention = self.host.retention
        keep_count, keep_ms = keeps(retention, st.spec.keep_runs, st.spec.keep_for_ms)
        age_check = st.fires_total % 64 == 0
        if st.kept_fires <= keep_count and not age_check:
            return
        name = st.spec.name
        horizon = now - keep_ms
        lo, hi = keys.per_task_prefix(keys.FIRE, name), keys.per_task_end(keys.FIRE, name)
        # An age check must be able to drop every record that aged out since the previous one
        # (up to 64), or age retention falls further behind on every check.
        limit = retention.prune_step + (64 if age_check else 0)
        store = self.store
        for k, v in store.scan(lo, hi, limit=limit):
            if st.kept_fires <= keep_count:
                rec = pb.FireRecord()
                rec.ParseFromString(v)
                if rec.decided_ms >= horizon:
                    break
            store.delete(k)
            st.kept_fires -= 1

    def _prune_batched(self, st: TaskState, now: int) -> None:
        """The count rule in batches (:func:`count_excess`): the oldest records' keys in one pass,
        no record read. The age rule every 64th fire: the oldest record is read (and the next
        only while they have aged out, up to PRUNE_BATCH of them). Both decide from replicated
        counters and records, so replicas agree."""
        keep_count, keep_ms = keeps(self.host.retention, st.spec.keep_runs, st.spec.keep_for_ms)
        excess = count_excess(st.kept_fires, keep_count, prune_phase(st.spec.name))
        age_check = st.fires_total % 64 == 0
        if not excess and not age_check:
            return
        name = st.spec.name
        lo, hi = keys.per_task_prefix(keys.FIRE, name), keys.per_task_end(keys.FIRE, name)
        store = self.store
        if excess:
            oldest = store.scan_keys(lo, hi, limit=excess)
            for k in oldest:
                store.delete(k)
            st.kept_fires -= len(oldest)
            return
        horizon = now - keep_ms
        for k in store.scan_keys(lo, hi, limit=PRUNE_BATCH):
            rec = pb.FireRecord()
            rec.ParseFromString(store.get(k) or b"")
            if rec.decided_ms >= horizon:
                break
            store.delete(k)
            st.kept_fires -= 1


def check_task_fires(st: TaskState | None, tf: pb.TaskFires, now: int) -> str:
    """Why the leader's fires of one task are refused (``""``: they are not): the task is gone
    or at another version, a fire is early, already accounted, out of range or claims what a
    leader cannot decide. Also the per-entry range check of the batch (see ``_check_ranges``)."""
    if st is None:
        return "task no longer exists"
    if tf.version != st.version:
        return f"computed for version {tf.version}, task is at {st.version}"
    last = st.watermark_ms
    # Nominal, through and watermark times are in range by the checks below (after the
    # watermark, at most now); a count is bounded here, and so is the total it adds.
    counted = st.fires_total
    for fire in tf.fires:
        # Each field read once: a protobuf attribute read is the cost here (every fire).
        nominal, through, outcome, count = fire.nominal_ms, fire.through_ms, fire.outcome, fire.count
        if count > bounds.MAX_FIRE_COUNT:
            return f"count {count} out of range (0..{bounds.MAX_FIRE_COUNT})"
        counted += count or 1
        if nominal <= last:
            return f"fire at {nominal} is not after {last} (already accounted)"
        end = through if through > nominal else nominal
        if end > now:
            return f"fire at {end} is later than now {now} (never early)"
        if outcome not in _LEADER_OUTCOMES:
            return f"leader cannot decide outcome {outcome}"
        if through:
            if through <= nominal:
                return f"range {nominal}..{through} is empty"
            if outcome == pb.FIRED:
                # One run per fire id: a fired record that claimed a range would account
                # fires as run that never got a run.
                return f"a fired record covers one fire, not {nominal}..{through}"
        elif outcome == pb.FIRED and count > 1:
            return f"a fired record covers one fire, not {nominal}..{through}"
        last = end
    if tf.watermark_ms < last or tf.watermark_ms > now:
        return f"watermark {tf.watermark_ms} outside [{last}, {now}]"
    if tf.next_fire_ms and tf.next_fire_ms <= tf.watermark_ms:
        return f"next fire {tf.next_fire_ms} is not after the watermark {tf.watermark_ms}"
    if tf.next_fire_ms > bounds.MAX_TIME_MS:
        return f"next fire {tf.next_fire_ms} out of range ({bounds.TIME.text()})"
    if counted > bounds.MAX_COUNTER:
        return f"fires accounted would pass {bounds.MAX_COUNTER}"
    return ""
