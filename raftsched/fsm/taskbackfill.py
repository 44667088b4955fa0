"""Backfill for plain tasks (issue 29 §6): one run per nominal time of a task's schedule in a
range, each a backfill run (dispatched only in the slots regular work leaves, within the backfill
share), with its progress on a :class:`BackfillRecord` as workflow backfills have.

The leader computes the nominal times (it evaluates cron: :func:`raftsched.timing.schedule.fires_in`)
and apply decides which of them get a run: not one that has a run already (the run key
``task@nominal``, a manual run at that instant, or a fire record that fired it) and not one the
scheduler has not accounted yet (after the task's watermark: the scheduler fires those itself, so
a backfill never takes a run id a future fire needs). Deterministic: values only, from the store.

A backfill run does not count for the task's overlap policy (a scheduled fire is neither skipped,
buffered nor replacing because of it), and a finished backfill run does not release a buffered
one; it does count in ``active_runs`` like any unfinished run (delete, retention).
"""

from __future__ import annotations

from typing import Protocol

from raftsched.abc import StateStore
from raftsched.errors import InvalidSpec
from raftsched.fsm import keys
from raftsched.fsm.effects import Effect
from raftsched.fsm.records import TaskState
from raftsched.fsm.workflow_model import DEFAULT_BACKFILL_SHARE, MAX_BACKFILL_RUNS
from raftsched.model import validate_params
from raftsched.v1 import log_pb2 as pb

__all__ = ["BACKFILL_ID_MARK", "TaskBackfillHost", "progress", "start"]

BACKFILL_ID_MARK = "~t"
"""A task backfill's id is ``<task>~t<seq>`` (a workflow's ``<workflow>~b<seq>``): the two never
share a key prefix, so listing one kind never shows the other."""


class TaskBackfillHost(Protocol):
    """What a task backfill needs from the state machine (``SchedulerState``), apply thread only."""

    def user_task(self, name: str) -> TaskState: ...

    def next_sequence(self) -> int: ...

    def new_backfill_run(
        self, st: TaskState, nominal: int, now: int, epoch: int, backfill_id: str, params_json: str
    ) -> tuple[Effect, ...]: ...

    def has_run_at(self, task: str, nominal: int) -> bool: ...

    def put_backfill(self, rec: pb.BackfillRecord) -> None: ...

    def put_task(self, st: TaskState) -> None: ...


def start(host: TaskBackfillHost, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
    """Apply StartTaskBackfill: create the missing runs and the backfill's record."""
    body = cmd.start_task_backfill
    st = host.user_task(body.task)
    times = sorted(set(body.nominal_ms))
    if not times:
        raise InvalidSpec("backfill", "the range holds no nominal time of the task's schedule")
    if len(times) > MAX_BACKFILL_RUNS:
        raise InvalidSpec("backfill", f"{len(times)} runs, at most {MAX_BACKFILL_RUNS} per backfill")
    if body.params_json:
        validate_params(body.params_json, "params")
    missing = [t for t in times if t <= st.watermark_ms and not host.has_run_at(st.spec.name, t)]
    seq = host.next_sequence()
    rec = pb.BackfillRecord(
        backfill_id=f"{st.spec.name}{BACKFILL_ID_MARK}{seq}",
        task=st.spec.name,
        from_ms=body.from_ms or times[0],
        to_ms=body.to_ms or times[-1],
        runs_total=len(missing),
        runs_skipped=len(times) - len(missing),
        created_ms=now,
        finished_ms=0 if missing else now,
        share_pct=DEFAULT_BACKFILL_SHARE,
    )
    host.put_backfill(rec)
    effects: list[Effect] = []
    for nominal in missing:
        effects.extend(host.new_backfill_run(st, nominal, now, cmd.epoch, rec.backfill_id, body.params_json))
    if missing:
        host.put_task(st)  # its run counters
    return pb.CommandResult(ok=True, backfill=rec), tuple(effects)


def progress(store: StateStore, run: pb.Run, now: int, undo: bool = False) -> pb.BackfillRecord | None:
    """Count ``run`` (a task backfill run that just finished) on its backfill; ``undo``: it was
    counted and runs again (a forced retry). Returns the record when this finished the backfill
    with failed runs (the caller alerts), else None."""
    key = keys.backfill_key(run.backfill_id)
    raw = store.get(key)
    if raw is None:
        return None
    rec = pb.BackfillRecord.FromString(raw)
    done = None
    if undo:
        rec.runs_finished = max(0, rec.runs_finished - 1)
        if run.state != pb.SUCCEEDED:
            rec.runs_failed = max(0, rec.runs_failed - 1)
        rec.finished_ms = 0
    else:
        rec.runs_finished += 1
        if run.state != pb.SUCCEEDED:
            rec.runs_failed += 1
        if rec.runs_finished >= rec.runs_total:
            rec.finished_ms = now
            if rec.runs_failed:
                done = rec
    store.put(key, rec.SerializeToString(deterministic=True))
    return done
