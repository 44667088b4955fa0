"""Runs inside the state machine: the unfinished runs, their attempts' outcomes and retries, and
their history.

The :class:`RunBook` keeps every unfinished run in memory (serialized: ``active``), what the
running attempts hold on their executors (``usage``), and writes every run record through one
function (:meth:`RunBook.save`; new runs through the same private writer). It settles attempt
results (retry by policy, finish the run, release a run held behind it), forced retries, and
prunes a task's finished runs by count and age. Like the rest of the FSM it is deterministic and
reaches the task side, quotas and workflows only through the :class:`RunHost` protocol.
"""

from __future__ import annotations

from collections.abc import Callable, Collection
from typing import Final, Protocol

from raftsched import bounds, codec
from raftsched.fsm import alerts as alerts_mod
from raftsched.fsm import keys, taskbackfill, wire
from raftsched.fsm.alerts import BACKFILL_FAILED
from raftsched.fsm.effects import AttemptReady, Effect, RunCancelled
from raftsched.fsm.hot_slots import SlotTable
from raftsched.fsm.policy import PolicyBook
from raftsched.fsm.records import (
    AGE_PRUNE_EVERY,
    FINISHED,
    PRUNE_BATCH,
    BookHost,
    Retention,
    TaskState,
    count_excess,
    keeps,
    pending_shards,
    prune_phase,
)
from raftsched.fsm.rules import Reject
from raftsched.fsm.run_alerts import alert_subject, attempt_alert, run_failed_alert, sla_finished, start_sla
from raftsched.fsm.tally import ApplyTally
from raftsched.fsm.timeline import canonical, expand, hot_outcome, materialise, note
from raftsched.fsm.workflows import WorkflowBook
from raftsched.model import MAX_RETRIES, execution_id, run_id_for
from raftsched.sharding.placement import NO_NEED, ExecutorUsage, Need, need_of
from raftsched.timing import jitter
from raftsched.timing import retry as retry_timing
from raftsched.v1 import log_pb2 as pb

# Re-placements of a shard's attempts that its executors never started, granted without
# consuming a retry. Past this they count as tries: "unstarted" is the leader's belief from the
# last heartbeat, and an executor that dies while starting the same attempt every time must not
# have it re-placed forever.
MAX_FREE_REPLACEMENTS: Final = 3

# Runs one CancelRuns command may name (the leader splits a bulk cancel into commands this size;
# a run id is at most 256 characters, so a command stays well below the log-entry limit).
MAX_CANCEL_PER_COMMAND: Final = 200
UNFLUSHED_MAX: Final = 1 << 17
"""The most run records :attr:`RunBook.unflushed` keeps (the applier commits every 64 entries of
a backlog at most, each entry of up to a batch's fires)."""

# ``timeline_derived = true`` encoded: a new run's bytes end with it (wire.run_fields).
_DERIVED_MARK: Final = pb.Run(timeline_derived=True).SerializeToString()

_RUN_STATE_NAMES: dict[int, str] = {pb.SUCCEEDED: "succeeded", pb.FAILED: "failed", pb.CANCELLED: "cancelled"}

Handled = tuple[pb.CommandResult, tuple[Effect, ...]]


StartSink = Callable[[int, str, int], None]
"""``(leader time of the report, namespace, start lateness ms)`` of a reported attempt start: the
start-delay alert's samples (:class:`raftsched.alerts.monitor.StartDelays`). Node-local."""


class RunHost(BookHost, Protocol):
    """What the run book needs from the rest of the state machine (``SchedulerState``).

    Called on the apply thread only, while a command applies."""

    @property
    def retention(self) -> Retention: ...

    @property
    def wf(self) -> WorkflowBook: ...
    @property
    def policy(self) -> PolicyBook: ...
    @property
    def tally(self) -> ApplyTally | None: ...

    @property
    def on_start(self) -> StartSink | None:
        """Node-local: told of every reported attempt start (never read by apply)."""
        ...

    def raise_event(self, alert: pb.AlertRecord, now: int) -> None: ...

    @property
    def unplaceable(self) -> Collection[str]:
        """The tasks flagged unplaceable."""
        ...

    def spec_for(self, task: str, version: int) -> pb.TaskSpec | None: ...
    def check_placeable(self, st: TaskState, need: Need, now: int) -> None: ...
    def emit_for_run(
        self, st: TaskState, run: pb.Run, now: int, epoch: int, effects: list[Effect]
    ) -> None: ...
    def promote_hot(self, run_id: str) -> pb.Run | None:
        """Move the live hot run ``run_id`` to the cold path, if there is one (raftsched.fsm.hot)."""
        ...

    def peek_hot(self, run_id: str) -> pb.Run | None:
        """The live hot run ``run_id`` as the cold path would hold it (nothing changes), or None."""
        ...


class RunBook:
    """The unfinished runs and the commands that settle them (see module doc)."""

    def __init__(self, host: RunHost) -> None:
        self.host = host
        # The state's store and task table, never replaced (a restore refills them in place).
        self.store = host.store
        self.tasks = host.tasks
        # run_id -> serialized Run, for runs not finished. Bytes, not messages: a message costs
        # several hundred bytes of RAM and a microsecond-scale build per fire.
        self.active: dict[str, bytes] = {}
        self.active_per_task: dict[str, int] = {}  # derived from `active`; kept for O(1) lookups
        # Of those, a plain task's backfill runs (raftsched.fsm.taskbackfill): the overlap policy
        # does not count them. Derived from `active` too.
        self.backfill_per_task: dict[str, int] = {}
        # Derived from the active runs (never stored): slots, cpu and memory each executor's
        # running attempts hold, so an assignment that would over-commit one is refused.
        self.usage = ExecutorUsage()
        # (task, version) -> need. A version's spec never changes, but a task deleted and created
        # again numbers its versions from 1 anew: :meth:`forget_needs` drops the old ones.
        self.needs: dict[tuple[str, int], Need] = {}
        # The unfinished runs of the columnar hot path (raftsched.fsm.hot), by seq: not in
        # `active` (derived from the hot records on load).
        self.slots = SlotTable()
        # run_id -> the record last written for it since the store's last commit (the applier's
        # open batch, which other threads' store readers do not see): a read between a run's
        # write and that commit finds it here (:meth:`SchedulerState.read_run`). Emptied by
        # :meth:`flushed` once the batch is committed (``Replica.end_of_tick``).
        self.unflushed: dict[str, bytes] = {}

    # -- loading ---------------------------------------------------------------------------------

    def clear(self) -> None:
        self.active.clear()
        self.unflushed = {}
        self.active_per_task.clear()
        self.backfill_per_task.clear()

    def load(self) -> None:
        """The unfinished runs from the store, with the quota places and locks they hold or wait
        for (the tasks are loaded already)."""
        host = self.host
        for _, value in self.store.scan(keys.RUN, keys.RUN + keys.END):
            run = pb.Run()
            run.ParseFromString(value)
            if run.state not in FINISHED:
                self.active[run.run_id] = value
                self.active_per_task[run.task] = self.active_per_task.get(run.task, 0) + 1
                if run.backfill_id:
                    self.backfill_per_task[run.task] = self.backfill_per_task.get(run.task, 0) + 1
                for shard in run.shards:
                    if shard.holds or shard.waiting:
                        task = self.tasks.get(run.task)
                        host.policy.load_shard(run, shard, task.spec.locks if task is not None else ())

    def load_usage(self) -> None:
        """What the running attempts hold on their executors (the workflows are loaded already)."""
        self.usage.clear()
        self.needs.clear()
        for run_id in sorted(self.active):
            run = pb.Run.FromString(self.active[run_id])
            for shard in run.shards:
                if shard.state == pb.RUNNING:
                    self.usage.take((run_id, shard.shard), shard.executor, self.need_for_run(run))

    def migrate_timelines(self) -> int:
        """A state of format 2 (every timeline entry stored): store each run in the form this build
        stores it (:func:`raftsched.fsm.timeline.canonical`); returns how many changed.

        The bytes are those this build would have written for the run: its whole message
        serialised deterministically, except a run never written again since its creation
        (created from concatenated parts, see :meth:`new`), which keeps its bytes and gains the
        ``timeline_derived`` field at the end, as :meth:`new` appends it now."""
        changed: list[tuple[bytes, bytes]] = []
        for key, raw in self.store.scan(keys.RUN, keys.RUN + keys.END):
            run = pb.Run.FromString(raw)
            whole = run.SerializeToString(deterministic=True) == raw
            if not canonical(run):
                continue
            if whole or len(run.timeline) != 1 or run.shards[0].HasField("started_ms"):
                changed.append((key, run.SerializeToString(deterministic=True)))
            else:
                changed.append((key, raw + _DERIVED_MARK))
        for key, data in changed:
            self.store.put(key, data)
        return len(changed)

    # -- the run record --------------------------------------------------------------------------

    def _write(self, run_id: str, data: bytes, key: bytes, unfinished: bool) -> None:
        """Every run record is written here: to the store, and (unfinished) kept in memory."""
        if unfinished:
            self.active[run_id] = data
        unflushed = self.unflushed
        if len(unflushed) >= UNFLUSHED_MAX:
            unflushed.clear()  # nobody commits (a bare state in a test or bench): a bound
        unflushed[run_id] = data
        self.store.put(key, data)

    # _write itself under a public name, for the hot path's end-of-run records (raftsched.fsm.hot,
    # one call a row, their key at hand): no wrapper's call in between, still one writer.
    write_keyed = _write

    def flushed(self) -> None:
        """The store committed every write so far: readers find the records there now."""
        self.unflushed = {}

    def write(self, run_id: str, data: bytes, unfinished: bool, key: bytes = b"") -> None:
        """Store the serialised run ``run_id`` under its key (``key``, if the caller has it: the
        hot path's end-of-run records and promoted runs, raftsched.fsm.hot); ``unfinished``:
        kept in ``active`` too."""
        self._write(run_id, data, key or keys.run_key_for_id(run_id), unfinished)

    def save(self, run: pb.Run) -> bytes:
        """Store ``run`` as it is now (serialized once, deterministically); returns the bytes."""
        data = run.SerializeToString(deterministic=True)
        self._write(run.run_id, data, keys.run_key_for_id(run.run_id), run.state not in FINISHED)
        return data

    def get(self, run_id: str) -> pb.Run | None:
        """A fresh copy of the unfinished run ``run_id``, or None (apply thread only). A live hot
        run is promoted to the cold path first: every cold event that names one goes through here."""
        data = self.active.get(run_id)
        if data is None:
            if not self.slots.state:
                return None
            return self.host.promote_hot(run_id)
        run = pb.Run()
        run.ParseFromString(data)
        return run

    def peek(self, run_id: str) -> pb.Run | None:
        """A fresh copy of the unfinished run ``run_id`` (a live hot run synthesised, nothing
        changed), or None: for readers (hold the lock)."""
        data = self.active.get(run_id)
        if data is None:
            return self.host.peek_hot(run_id) if self.slots.state else None
        return pb.Run.FromString(data)

    def _count(self, st: TaskState) -> None:
        name = st.spec.name
        self.active_per_task[name] = self.active_per_task.get(name, 0) + 1
        st.active_runs += 1
        st.runs_total += 1

    def add(self, st: TaskState, run_id: str, data: bytes) -> None:
        """A new unfinished run of ``st`` (``data``: the serialised run): counted and stored, with
        the task's record."""
        self._count(st)
        self.host.touch_task(st)
        self._write(run_id, data, keys.run_key_for_id(run_id), True)

    def new(
        self, st: TaskState, nominal: int, now: int, epoch: int, manual_seq: int = 0, hold: bool = False
    ) -> tuple[str, bytes, tuple[Effect, ...]]:
        """Create a run; returns ``(run_id, serialized run, dispatch effects)``.

        Hot path (one call per fire): the fields that are the same for every run of this task
        version are serialized once (``TaskState.run_template``) and concatenated with the
        per-fire fields; concatenated messages parse as one, and every replica produces the same
        bytes.
        """
        name = st.spec.name
        shards = st.spec.shards
        run_id = run_id_for(name, nominal, manual_seq)
        template = st.run_template
        if template is None:
            template = st.run_template = pb.Run(
                task=name,
                task_version=st.version,
                state=pb.PENDING,
                params_json=st.spec.params_json,
                shards=pending_shards(shards),
            ).SerializeToString(deterministic=True)
        start = nominal
        jitter_ms = st.spec.jitter_ms
        if jitter_ms and not manual_seq:
            # A fire (not a manual trigger) starts a stable offset after its nominal time; the
            # offset is replicated on the attempts (not_before), so a new leader keeps it.
            start = jitter.start_ms(name, nominal, jitter_ms)
            if start > nominal:
                jittered = pb.Run.FromString(template)
                for shard in jittered.shards:
                    shard.not_before_ms = start
                template = jittered.SerializeToString(deterministic=True)
        # One shard: its fields stand for the hot timeline entries (fsm.timeline).
        data = template + wire.run_fields(run_id, nominal, now, epoch, bool(manual_seq), hold, shards == 1)
        self.active_per_task[name] = self.active_per_task.get(name, 0) + 1  # _count, inline: per fire
        st.active_runs += 1
        st.runs_total += 1
        suffix = f"~m{manual_seq}" if manual_seq else ""
        self._write(run_id, data, keys.time_key(keys.RUN, name, nominal, suffix), True)
        host = self.host
        if host.unplaceable or st.spec.resource_cpu or st.spec.resource_memory_mb or st.spec.selector:
            need = self.needs.get((name, st.version))
            if need is None:
                s = st.spec
                need = self.needs[(name, st.version)] = need_of(
                    s.resource_cpu, s.resource_memory_mb, dict(s.selector)
                )
            if need.declared or st.unplaceable:
                host.check_placeable(st, need, now)
        if hold:
            st.held_run = run_id
            host.put_task(st)  # not a counter: the caller only touches the task
            return run_id, data, ()
        if not host.leader_effects:
            return run_id, data, ()
        if start > nominal:
            return (
                run_id,
                data,
                tuple(AttemptReady(run_id, name, nominal, i, 1, epoch, start) for i in range(shards)),
            )
        if shards == 1:
            return run_id, data, (AttemptReady(run_id, name, nominal, 0, 1, epoch),)
        return run_id, data, tuple(AttemptReady(run_id, name, nominal, i, 1, epoch) for i in range(shards))

    def new_backfill(
        self, st: TaskState, nominal: int, now: int, epoch: int, backfill_id: str, params_json: str
    ) -> tuple[Effect, ...]:
        """Create a backfill run of the plain task ``st`` at ``nominal`` (run id ``task@nominal``,
        which :meth:`has_run_at` found free); returns its dispatch effects (within the backfill
        share)."""
        name = st.spec.name
        run = pb.Run(
            run_id=run_id_for(name, nominal),
            task=name,
            nominal_ms=nominal,
            task_version=st.version,
            state=pb.PENDING,
            created_ms=now,
            epoch=epoch,
            params_json=params_json or st.spec.params_json,
            shards=pending_shards(st.spec.shards),
            backfill=True,
            backfill_id=backfill_id,
            timeline=[pb.TimelineEntry(event="created", at_ms=now, reason=f"backfill {backfill_id}")],
        )
        self._count(st)
        self.backfill_per_task[name] = self.backfill_per_task.get(name, 0) + 1
        self.save(run)
        if st.spec.resource_cpu or st.spec.resource_memory_mb or st.spec.selector or st.unplaceable:
            self.host.check_placeable(st, self.need_for_run(run), now)
        if not self.host.leader_effects:
            return ()
        return tuple(self.attempt_ready(run, shard, epoch) for shard in run.shards)

    def has_run_at(self, task: str, nominal: int) -> bool:
        """Whether ``task`` has (or had, as its fire record says) a run at nominal time ``nominal``:
        the fire's run, or a manual run at that instant."""
        lo = keys.time_key(keys.RUN, task, nominal)
        if any(True for _ in self.store.scan(lo, lo + keys.END, limit=1)):
            return True
        if self.slots.state and self.host.peek_hot(run_id_for(task, nominal)) is not None:
            return True  # a live hot run: no record under its key yet
        fire = self.store.get(keys.time_key(keys.FIRE, task, nominal))
        return fire is not None and pb.FireRecord.FromString(fire).outcome == pb.FIRED

    def forget_needs(self, task: str, versions: int) -> None:
        """Task ``task`` (at version ``versions``) is deleted: forget the needs of its versions,
        so a task created again under its name, from version 1, is not read the old ones (a
        restarted node has none: the cache must not make the two differ)."""
        needs = self.needs
        for version in range(1, versions + 1):
            needs.pop((task, version), None)

    def need_for_run(self, run: pb.Run) -> Need:
        """What each attempt of ``run`` holds on its executor besides its slot."""
        key = (run.task, run.task_version)
        need = self.needs.get(key)
        if need is None:
            if run.workflow_run:
                wspec = self.host.wf.task_spec(run)
                need = (
                    need_of(wspec.resource_cpu, wspec.resource_memory_mb, wspec.selector)
                    if wspec is not None
                    else NO_NEED
                )
            else:
                spec = self.host.spec_for(run.task, run.task_version)
                need = need_of(spec.resource_cpu, spec.resource_memory_mb, spec.selector) if spec else NO_NEED
            self.needs[key] = need
        return need

    def attempt_ready(self, run: pb.Run, shard: pb.ShardAttempt, epoch: int) -> AttemptReady:
        """The effect that makes ``shard``'s current attempt dispatchable from its ``not_before_ms``."""
        return AttemptReady(
            run.run_id,
            run.task,
            run.nominal_ms,
            shard.shard,
            shard.attempt,
            epoch,
            shard.not_before_ms,
            self.host.wf.backfill_share(run),
        )

    # -- overlap ---------------------------------------------------------------------------------

    def cancel(
        self, run: pb.Run, reason: str, now: int, epoch: int, effects: list[Effect], release: bool = True
    ) -> None:
        """Cancel the unfinished ``run``: its unfinished shards stop (their quota places and locks
        are given back unless ``release`` is false, as commands of format 3 and older had it; the
        leader stops the running attempts) and the run finishes."""
        attempts = [
            self._stop_shard(run, shard, reason, now, release)
            for shard in run.shards
            if shard.state not in FINISHED
        ]
        run.state = pb.CANCELLED
        run.finished_ms = now
        run.held = False
        self.finish(run, now)
        effects.append(RunCancelled(run.run_id, tuple(attempts), epoch, reason))

    def cancel_runs(self, cmd: pb.Command, now: int) -> Handled:
        """CancelRuns: the named unfinished runs (or one shard of one run) are cancelled, as
        ``overlap = replace`` and ``workflow kill`` cancel theirs (:meth:`cancel`: the leader stops
        the running attempts). Who asked (the audit principal; ``anonymous`` with auth off) and the
        reason go into each run's timeline, and a ``run_cancelled`` alert is raised instead of a
        failure alert.

        Every named run is checked before anything changes. An unknown run is ``not_found``; a
        run that finished otherwise, a workflow's task run (kill the workflow run instead) or a
        shard out of range is a rejection naming it, unless ``skip_finished`` (a bulk cancel:
        the leader chose the runs, and one may have finished since). A run (or shard) already
        cancelled is left as it is and the command succeeds: cancelling twice is harmless."""
        body = cmd.cancel_runs
        one_shard = body.HasField("shard")
        if len(body.run_ids) > MAX_CANCEL_PER_COMMAND:
            raise Reject(
                "invalid_argument",
                f"run_ids: {len(body.run_ids)} runs in one command, at most {MAX_CANCEL_PER_COMMAND}",
            )
        if one_shard and len(body.run_ids) != 1:
            raise Reject("invalid_argument", "shard: names a shard of one run; give exactly one run id")
        chosen: list[pb.Run] = []
        seen: set[str] = set()
        last: pb.Run | None = None
        for run_id in body.run_ids:
            if run_id in seen:
                continue
            seen.add(run_id)
            run = self.peek(run_id)  # nothing changes until every run is checked (not promoted)
            if run is None:
                raw = self.store.get(keys.run_key_for_id(run_id)) if "@" in run_id else None
                if body.skip_finished:
                    continue
                if raw is None:
                    raise Reject("not_found", f"run {run_id!r} does not exist (or its history was pruned)")
                done = pb.Run.FromString(raw)
                if done.state == pb.CANCELLED:
                    last = done
                    continue  # cancelled already: nothing to do
                raise Reject(
                    "conflict",
                    f"run {run_id!r} already finished ({_RUN_STATE_NAMES.get(done.state, 'unknown')}): "
                    "there is nothing to cancel",
                )
            if run.workflow_run:
                if body.skip_finished:
                    continue
                raise Reject(
                    "conflict",
                    f"run {run_id!r} is a task of workflow run {run.workflow_run!r}: kill the workflow "
                    "run instead (raftsched workflow kill)",
                )
            if one_shard:
                if body.shard >= len(run.shards):
                    raise Reject(
                        "invalid_argument",
                        f"shard: run {run_id!r} has shards 0..{len(run.shards) - 1}, not {body.shard}",
                    )
                target = run.shards[body.shard]
                if target.state in FINISHED:
                    if target.state == pb.CANCELLED:
                        last = run
                        continue
                    raise Reject(
                        "conflict",
                        f"shard {body.shard} of run {run_id!r} already finished "
                        f"({_RUN_STATE_NAMES.get(target.state, 'unknown')}): there is nothing to cancel",
                    )
            chosen.append(run)
        # Every run checked: a live hot run goes to the cold path now (get promotes it).
        chosen = [self.get(run.run_id) or run for run in chosen]
        who = cmd.audit.principal or "anonymous"
        reason = body.reason or "cancelled"
        effects: list[Effect] = []
        for run in chosen:
            note(run, "cancel_requested", now, reason=f"by {who}: {reason}")
            st = self.tasks.get(run.task)
            if one_shard:
                self._cancel_shard(run, run.shards[body.shard], reason, now, cmd.epoch, effects)
            else:
                first = next(s for s in run.shards if s.state not in FINISHED)
                self.cancel(run, reason, now, cmd.epoch, effects)
                self.host.raise_alert(
                    alerts_mod.RUN_CANCELLED,
                    f"by {who}: {reason}",
                    now,
                    **alert_subject(run, first, st),
                )
                self._after_cancel(run, st, now, effects)
            last = run
        result = pb.CommandResult(ok=True, runs_cancelled=len(chosen))
        result.cancelled_runs.extend(run.run_id for run in chosen)
        if len(body.run_ids) == 1 and last is not None:
            result.run.CopyFrom(expand(last))
        return result, tuple(effects)

    def _cancel_shard(
        self, run: pb.Run, shard: pb.ShardAttempt, reason: str, now: int, epoch: int, effects: list[Effect]
    ) -> None:
        """Cancel one unfinished shard of ``run``; the run finishes once every shard has (failed if
        any shard failed, else cancelled)."""
        self.usage.release((run.run_id, shard.shard))
        stopped = self._stop_shard(run, shard, reason, now, True)
        effects.append(RunCancelled(run.run_id, (stopped,), epoch, reason))
        st = self.tasks.get(run.task)
        if not all(s.state in FINISHED for s in run.shards):
            if run.state == pb.PENDING:
                run.state = pb.RUNNING
            self.save(run)
            return
        failed = [s for s in run.shards if s.state not in (pb.SUCCEEDED, pb.CANCELLED)]
        run.state = pb.FAILED if failed else pb.CANCELLED
        run.finished_ms = now
        run.held = False
        if failed:
            run_failed_alert(self.host, run, failed[0], st, now)
        else:
            self.host.raise_alert(alerts_mod.RUN_CANCELLED, reason, now, **alert_subject(run, shard, st))
        self.finish(run, now)
        self._after_cancel(run, st, now, effects)

    def _stop_shard(
        self, run: pb.Run, shard: pb.ShardAttempt, reason: str, now: int, release: bool
    ) -> tuple[int, int, str]:
        """``shard`` (unfinished) ends CANCELLED, giving back its quota places and locks unless
        ``release`` is false; returns ``(shard, attempt, executor)`` for :class:`RunCancelled`
        (executor ``""``: not running). Every cancel of a task run goes through here."""
        stopped = (shard.shard, shard.attempt, shard.executor if shard.state == pb.RUNNING else "")
        materialise(run)  # before the fields the derived entries come from change
        if release:
            self.release_holds(run, shard)
        shard.state = pb.CANCELLED
        shard.finished_ms = now
        shard.error = reason
        note(run, "cancelled", now, shard, reason=reason)
        return stopped

    def _after_cancel(self, run: pb.Run, st: TaskState | None, now: int, effects: list[Effect]) -> None:
        """A cancelled run counts as finished for overlap: a run buffered behind it (buffer_one)
        may start; a cancelled buffered run is no longer held. A backfill's run does not count for
        overlap (as in :meth:`settle`): its cancel releases nothing."""
        if st is None or run.backfill_id:
            return
        if st.held_run == run.run_id:
            st.held_run = ""
            self.host.put_task(st)
        elif st.held_run:
            self.release_held(run.task, now, effects)

    def cancel_task_runs(
        self, st: TaskState, now: int, epoch: int, effects: list[Effect], release: bool
    ) -> None:
        """overlap=replace: every unfinished run of ``st`` is cancelled. Scans the active runs:
        only replace tasks with a run pay for it."""
        name = st.spec.name
        for run_id in sorted(self.active):
            run = self.get(run_id)
            assert run is not None
            if run.task == name and not run.backfill_id:  # a backfill run is not replaced
                self.cancel(run, "replaced by a newer fire (overlap=replace)", now, epoch, effects, release)
        if st.held_run:
            st.held_run = ""
            self.host.put_task(st)  # not a counter: the fire batch only touches the task

    def release_held(self, task: str, now: int, effects: list[Effect]) -> None:
        """overlap=buffer_one: the task's running run finished; its buffered run may start."""
        st = self.tasks.get(task)
        if st is None or not st.held_run:
            return
        run = self.get(st.held_run)
        st.held_run = ""
        self.host.put_task(st)
        if run is None:
            return
        run.held = False
        note(run, "released", now, reason="the run it waited for finished (overlap=buffer_one)")
        self.save(run)
        effects.extend(self.attempt_ready(run, shard, run.epoch) for shard in run.shards)

    # -- results ---------------------------------------------------------------------------------

    def report_results(self, cmd: pb.Command, now: int) -> Handled:
        """Attempt outcomes, batched: from executors (``executor`` set) or the leader (``lost``).

        Fencing: a result for an attempt that is not the shard's current one, for a finished
        shard, or from an executor other than the one the attempt is assigned to, is refused and
        changes nothing. A failure with retries left re-queues the shard as attempt N+1, not before
        the leader's ``retry_at_ms`` (backoff with jitter chosen by the leader, so replicas agree).
        """
        accepted = refused = 0
        effects: list[Effect] = []
        for res in cmd.report_results.results:
            run = self.get(res.run_id)
            shard = run.shards[res.shard] if run is not None and res.shard < len(run.shards) else None
            if (
                run is None
                or shard is None
                or shard.attempt != res.attempt
                or shard.state in FINISHED
                or (not res.lost and shard.executor and res.executor != shard.executor)
                or not result_in_range(res)
            ):
                refused += 1  # stale attempt, unknown run, wrong executor, out of range: fenced off
                continue
            if res.lost:
                note(run, "lease_expired", now, shard, executor=shard.executor, reason=res.error)
            self.settle(run, shard, res, now, cmd.epoch, effects)
            accepted += 1
        return pb.CommandResult(ok=True, accounted=accepted, refused=refused), tuple(effects)

    def settle(
        self,
        run: pb.Run,
        shard: pb.ShardAttempt,
        res: pb.AttemptResult,
        now: int,
        epoch: int,
        effects: list[Effect],
    ) -> None:
        """Apply ``res`` to ``shard``'s current attempt: retry by policy, or finish the shard (and
        the run, once every shard has)."""
        host = self.host
        if res.lost:
            materialise(run)  # before the fields the derived entries come from change
        self.usage.release((run.run_id, shard.shard))
        self.release_holds(run, shard)
        st = self.tasks.get(run.task)
        max_retries = st.spec.max_retries if st is not None else 0
        delays, backoff = (st.spec.retry_delays_ms, st.spec.retry_backoff) if st is not None else ((), None)
        if run.workflow_run:
            wspec = host.wf.task_spec(run)  # the version the workflow run is pinned to
            max_retries = wspec.max_retries if wspec is not None else max_retries
            if wspec is not None:
                delays, backoff = tuple(wspec.retry_delays_ms), codec.retry_backoff_from_pb(wspec)
        shard.error = res.error
        shard.timed_out = res.timed_out
        shard.exit_code = res.exit_code
        shard.stdout_tail = res.stdout_tail
        shard.stderr_tail = res.stderr_tail
        free = res.lost and res.unstarted and shard.unstarted < MAX_FREE_REPLACEMENTS
        if free:
            # Its executor died before starting it: not a try. The next attempt number fences
            # the dead executor's late start or result; the retry budget is left as it was.
            shard.unstarted += 1
            shard.retry_base += 1
        elif res.lost:
            shard.lost += 1
        else:
            if st is not None and res.HasField("start_lateness_ms"):
                sink = host.on_start
                if sink is not None and not run.backfill_id:
                    # The start delay counts from when the attempt was due: a retry's backoff and
                    # a jittered start are not delay; a backfill's runs start late by design.
                    gated = max(0, shard.not_before_ms - run.nominal_ms)
                    sink(now, st.spec.namespace, max(0, res.start_lateness_ms - gated))
                if st.spec.sla_start_within_ms:
                    start_sla(self.host, run, shard, res.start_lateness_ms, st, now)
            # The hot shape (a derived timeline, no retry to follow) keeps the start and the
            # duration on the shard instead of two timeline entries.
            final = res.success or shard.attempt - shard.retry_base > max_retries
            if not hot_outcome(run, shard, res, final):
                _note_outcome(run, shard, res, now)
        if not free and (res.lost or res.timed_out) and not res.success:
            attempt_alert(self.host, run, shard, res, st, now)
        retry = not res.success and shard.attempt - shard.retry_base <= max_retries
        if host.tally is not None:
            _tally_attempt(host.tally, st, run.task, res, retry)
        if res.success:
            shard.state = pb.SUCCEEDED
            shard.finished_ms = now
        elif retry:
            retry_at = res.retry_at_ms  # the cluster's backoff, chosen by the leader
            if not free and retry_timing.has_policy(delays, backoff):
                # The task's own: the n-th try's failure waits the n-th delay, computed here
                # from the leader time and the attempt's id, so every replica agrees.
                key = execution_id(run.run_id, shard.shard, shard.attempt)
                n = shard.attempt - shard.retry_base
                retry_at = min(now + retry_timing.delay_ms(n, delays, backoff, key), bounds.MAX_TIME_MS)
            shard.attempt += 1
            shard.state = pb.PENDING
            shard.executor = ""
            shard.assigned_ms = 0
            shard.not_before_ms = max(retry_at, now)
            note(run, "retry_scheduled", now, shard, retry_at_ms=shard.not_before_ms)
            effects.append(self.attempt_ready(run, shard, epoch))
            if run.workflow_run:
                host.wf.task_run_retrying(run, shard, res.error, now)
        else:
            shard.state = pb.FAILED
            shard.finished_ms = now
        if all(s.state in FINISHED for s in run.shards):
            # A shard cancelled on its own (CancelRuns with a shard) is not a failure: the run
            # is cancelled if no shard failed and not every one succeeded.
            failed = [s for s in run.shards if s.state not in (pb.SUCCEEDED, pb.CANCELLED)]
            cancelled = not failed and any(s.state == pb.CANCELLED for s in run.shards)
            run.state = pb.FAILED if failed else pb.CANCELLED if cancelled else pb.SUCCEEDED
            run.finished_ms = now
            if failed:
                run_failed_alert(self.host, run, failed[0], st, now)
            self.finish(run, now)
            if st is not None and st.spec.emits and run.state == pb.SUCCEEDED:
                host.emit_for_run(st, run, now, epoch, effects)
            if run.workflow_run:
                host.wf.task_run_finished(run, now, epoch, effects)
            elif st is not None and st.held_run and st.held_run != run.run_id and not run.backfill_id:
                self.release_held(run.task, now, effects)
            return
        if run.state == pb.PENDING and any(s.state != pb.PENDING for s in run.shards):
            run.state = pb.RUNNING
        self.save(run)

    def release_holds(self, run: pb.Run, shard: pb.ShardAttempt) -> None:
        """``shard``'s attempt stops running (or waiting): give back its quota places and locks."""
        if shard.holds:
            self.host.policy.release(shard.holds, execution_id(run.run_id, shard.shard, shard.attempt))
            del shard.holds[:]
        if shard.waiting:
            shard.waiting = ""
            shard.waiting_since_ms = 0
            self.host.policy.forget_wait(run.run_id, shard.shard)

    def finish(self, run: pb.Run, now: int) -> None:
        """``run`` reached a final state: it leaves the active set, and its task's counters."""
        host = self.host
        if host.tally is not None:
            done = self.tasks.get(run.task)
            owner, namespace = (done.spec.owner, done.spec.namespace) if done is not None else ("", "")
            host.tally.run_finished(_RUN_STATE_NAMES.get(run.state, "unknown"), owner, namespace, run.task)
        del self.active[run.run_id]
        for shard in run.shards:
            self.usage.release((run.run_id, shard.shard))
        left = self.active_per_task[run.task] - 1
        if left:
            self.active_per_task[run.task] = left
        else:
            del self.active_per_task[run.task]
        st = self.tasks.get(run.task)
        if st is not None:
            st.active_runs -= 1
            st.kept_runs += 1
            spec = st.spec
            sla_task = bool(spec.sla_finish_within_ms or spec.freshness_ms or spec.sla_start_within_ms)
            if sla_task:
                sla_finished(self.host, self.store, st, run, now)  # may move last_success: not a counter
            self.prune(st, now, run.run_id)
            if sla_task:
                host.put_task(st)
            else:
                host.touch_task(st)
        self.save(run)
        if run.backfill_id:
            self._backfill_finished(run, now)

    def _backfill_finished(self, run: pb.Run, now: int) -> None:
        left = self.backfill_per_task.get(run.task, 0) - 1
        if left > 0:
            self.backfill_per_task[run.task] = left
        else:
            self.backfill_per_task.pop(run.task, None)
        failed = taskbackfill.progress(self.store, run, now)
        if failed is not None:
            st = self.tasks.get(run.task)
            self.host.raise_alert(
                BACKFILL_FAILED,
                f"backfill {failed.backfill_id}: {failed.runs_failed} of {failed.runs_total} runs failed",
                now,
                task=run.task,
                run_id=failed.backfill_id,
                owner=st.spec.owner if st is not None else "",
                namespace=st.spec.namespace if st is not None else "",
            )

    def retry_run(self, cmd: pb.Command, now: int) -> Handled:
        """Forced retry of a failed run: its failed shards get a new attempt, with a fresh retry count."""
        host = self.host
        run_id = cmd.retry_run.run_id
        raw = self.store.get(keys.run_key_for_id(run_id)) if "@" in run_id else None
        if raw is None:
            raise Reject("not_found", f"run {run_id!r} does not exist (or its history was pruned)")
        run = pb.Run.FromString(raw)
        if run.workflow_run:
            raise Reject(
                "conflict",
                f"run {run_id!r} is a task of workflow run {run.workflow_run!r}: rerun the task in the "
                "workflow run instead (its downstream tasks follow)",
            )
        if run.run_id in self.active or run.state != pb.FAILED:
            raise Reject("conflict", f"run {run_id!r} is {pb.RunState.Name(run.state).lower()}, not failed")
        st = self.tasks.get(run.task)
        if st is None:
            raise Reject("not_found", f"task {run.task!r} of run {run_id!r} no longer exists")
        # A forced retry gives a shard up to max_retries + free re-placements more attempts:
        # their numbers must stay in range (bounds.MAX_ATTEMPT), checked before anything changes.
        headroom = bounds.MAX_ATTEMPT - MAX_RETRIES - MAX_FREE_REPLACEMENTS - 1
        if any(s.state != pb.SUCCEEDED and s.attempt >= headroom for s in run.shards):
            raise Reject(
                "invalid_argument",
                f"run {run_id!r} has used its attempt numbers (at most {bounds.MAX_ATTEMPT} per shard)",
            )
        effects: list[Effect] = []
        materialise(run)  # before the fields the derived entries come from change
        for shard in run.shards:
            if shard.state != pb.SUCCEEDED:
                shard.attempt += 1
                shard.retry_base = shard.attempt - 1
                shard.state = pb.PENDING
                shard.executor = ""
                shard.not_before_ms = now
                shard.finished_ms = 0
                note(run, "retry_requested", now, shard)
                effects.append(self.attempt_ready(run, shard, cmd.epoch))
        if run.backfill_id:  # counted as finished: it runs again
            taskbackfill.progress(self.store, run, now, undo=True)
            self.backfill_per_task[run.task] = self.backfill_per_task.get(run.task, 0) + 1
        run.state = pb.RUNNING
        run.finished_ms = 0
        self.active_per_task[run.task] = self.active_per_task.get(run.task, 0) + 1
        st.active_runs += 1
        st.kept_runs = max(0, st.kept_runs - 1)
        host.put_task(st)
        self.save(run)
        return pb.CommandResult(ok=True, run=run), tuple(effects)

    def hold_for_quota(self, q: pb.QuotaRecord) -> None:
        """A new quota counts the attempts of its owner or namespace that are running already
        (they hold a place from now, given back when they end)."""
        hold = f"{'o' if q.kind == 'owner' else 'n'}:{q.name}"
        for run_id in sorted(self.active):
            run = self.get(run_id)
            assert run is not None
            st = self.tasks.get(run.task)
            if st is None or (st.spec.owner if q.kind == "owner" else st.spec.namespace) != q.name:
                continue
            changed = False
            for shard in run.shards:
                if shard.state == pb.RUNNING and hold not in shard.holds:
                    shard.holds.append(hold)
                    q.running += 1
                    changed = True
                elif shard.state == pb.RUNNING:
                    q.running += 1
            if changed:
                self.save(run)

    # -- retention -------------------------------------------------------------------------------

    def prune(self, st: TaskState, now: int, finishing: str = "") -> None:
        """Drop ``st``'s oldest finished runs past the retention's count and age (``finishing``:
        the id of the run finishing now, counted as kept but not stored as finished yet)."""
        if self.host.batched_prune:
            self._prune_batched(st, now, finishing)
            return
        # A command of a format before BATCHED_PRUNE_FORMAT prunes as the builds before did.
        retention = self.host.retention
        name = st.spec.name
        keep_count, keep_ms = keeps(retention, st.spec.keep_runs, st.spec.keep_for_ms)
        horizon = now - keep_ms
        lo, hi = keys.per_task_prefix(keys.RUN, name), keys.per_task_end(keys.RUN, name)
        # Unfinished runs are skipped, not pruned; widen the scan by their number (+1: the run
        # finishing now is stored after this) so runs stuck at the head of the range never stop
        # the finished ones behind them from being pruned.
        if st.kept_runs <= keep_count and st.kept_runs % AGE_PRUNE_EVERY:
            return  # within the count: the (slower) age check runs on every AGE_PRUNE_EVERY-th finish
        limit = retention.prune_step * 2 + st.active_runs + 1
        store = self.store
        for k, v in store.scan(lo, hi, limit=limit):
            if keys.run_id_from_key(keys.RUN, k) in self.active:
                continue  # unfinished (told from the key: parsing hundreds of active runs was slow)
            run = pb.Run()
            run.ParseFromString(v)
            if run.state not in FINISHED:
                continue
            if st.kept_runs <= keep_count and run.finished_ms >= horizon:
                break
            store.delete(k)
            st.kept_runs -= 1

    def _prune_batched(self, st: TaskState, now: int, finishing: str) -> None:
        """The count rule in batches (:func:`count_excess`), deciding by key alone: a run not in
        ``active`` (nor ``finishing``) is finished. The age rule on every AGE_PRUNE_EVERY-th
        finish, parsing the oldest finished run (and the next only while they have aged out)."""
        keep_count, keep_ms = keeps(self.host.retention, st.spec.keep_runs, st.spec.keep_for_ms)
        excess = count_excess(st.kept_runs, keep_count, prune_phase(st.spec.name))
        age_check = st.kept_runs % AGE_PRUNE_EVERY == 0
        if not excess and not age_check:
            return
        name = st.spec.name
        lo, hi = keys.per_task_prefix(keys.RUN, name), keys.per_task_end(keys.RUN, name)
        store, active = self.store, self.active
        finishing_key = keys.run_key_for_id(finishing) if finishing else b""
        # Unfinished runs (and the one finishing now) are skipped, not pruned: the pass reads up
        # to their number more keys, so runs stuck at the head never shield the finished ones.
        horizon = now - keep_ms
        if not excess:
            # The age rule stops at the oldest finished run that has not aged out, usually the
            # first: that one is found among the first keys (at most active_runs + 1 of them are
            # not finished runs) before the full pass reads the rest. The same first key as the
            # full pass's (the same filter over a prefix of the same keys), so the same decision.
            first = [
                k
                for k in store.scan_keys(lo, hi, limit=max(st.active_runs, 0) + 2)
                if k != finishing_key and keys.run_id_from_key(keys.RUN, k) not in active
            ]
            if first:
                run = pb.Run()
                run.ParseFromString(store.get(first[0]) or b"")
                if run.finished_ms >= horizon:
                    return
        want = excess or PRUNE_BATCH
        finished = [
            k
            for k in store.scan_keys(lo, hi, limit=want + st.active_runs + 1)
            if k != finishing_key and keys.run_id_from_key(keys.RUN, k) not in active
        ]
        if excess:
            for k in finished[:excess]:
                store.delete(k)
            st.kept_runs -= min(excess, len(finished))
            return
        for k in finished[:want]:
            run = pb.Run()
            run.ParseFromString(store.get(k) or b"")
            if run.finished_ms >= horizon:
                break
            store.delete(k)
            st.kept_runs -= 1


def result_in_range(res: pb.AttemptResult) -> bool:
    """The integers of a result that apply computes with (``not_before = max(retry_at, now)``,
    the timeline's ``nominal + start_lateness``, its duration) inside their ranges; shard and
    attempt are fenced (equal to the shard's current ones), the exit code may be any int32."""
    return (
        0 <= res.retry_at_ms <= bounds.MAX_TIME_MS
        and 0 <= res.duration_ms <= bounds.MAX_DURATION_MS
        and -bounds.MAX_DURATION_MS <= res.start_lateness_ms <= bounds.MAX_DURATION_MS
    )


def _note_outcome(run: pb.Run, shard: pb.ShardAttempt, res: pb.AttemptResult, now: int) -> None:
    """An executor's result: when it started (if it did) and how it ended."""
    if res.HasField("start_lateness_ms"):
        # The executor's clock: nominal + its measured lateness, as it reported it.
        note(run, "started", run.nominal_ms + res.start_lateness_ms, shard, executor=res.executor)
    event = "succeeded" if res.success else "timed_out" if res.timed_out else "failed"
    note(
        run,
        event,
        now,
        shard,
        executor=res.executor,
        reason=res.error,
        exit_code=res.exit_code,
        duration_ms=res.duration_ms,
    )


def _tally_attempt(
    tally: ApplyTally, st: TaskState | None, task: str, res: pb.AttemptResult, retry: bool
) -> None:
    owner, namespace = (st.spec.owner, st.spec.namespace) if st is not None else ("", "")
    result = "succeeded" if res.success else "lost" if res.lost else "timeout" if res.timed_out else "failed"
    tally.attempt(result, owner, namespace, task)
    if retry:
        tally.attempt("retried", owner, namespace, task)
