"""Backfill for plain tasks (issue 29 §6) in the state machine and the leader's write: which
nominal times get a run (the schedule's, cron DST included; not one that has a run; not one the
scheduler has not reached), the backfill share on the attempts, progress and its alert, the
overlap policy left to regular work, restore, and the errors."""

from __future__ import annotations

import datetime as dt
import random
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from raftsched import codec
from raftsched.errors import InvalidSpec, NotFound
from raftsched.fsm import keys
from raftsched.fsm.effects import AttemptReady
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.model import CronTrigger, IntervalTrigger, ManualTrigger, Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.timing.schedule import fires_in
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import (
    T0,
    S,
    apply,
    batch,
    create,
    domain,
    entry,
    fire,
    fresh,
    join,
    result,
    runs_of,
)

MIN = 60 * S
STAMP: dict[str, Any] = {"now_ms": T0, "epoch": 1, "origin": "n1", "key": ""}


def _ms(text: str) -> int:
    return int(dt.datetime.fromisoformat(text).timestamp() * 1000)


def test_cron_nominal_times_follow_the_dst_policy_of_the_fires() -> None:
    berlin = CronTrigger("30 2 * * *", "Europe/Berlin")
    # Fall back (2025-10-26): 02:30 exists twice and fires once, at its first occurrence.
    autumn = fires_in(berlin, _ms("2025-10-25T00:00:00+00:00"), _ms("2025-10-27T23:00:00+00:00"), 10)
    local = [dt.datetime.fromtimestamp(t / 1000, ZoneInfo("Europe/Berlin")).isoformat() for t in autumn]
    assert local == ["2025-10-25T02:30:00+02:00", "2025-10-26T02:30:00+02:00", "2025-10-27T02:30:00+01:00"]
    # Spring forward (2025-03-30): 02:30 does not exist; the fixed-time job runs at the transition.
    spring = fires_in(berlin, _ms("2025-03-30T00:00:00+00:00"), _ms("2025-03-30T12:00:00+00:00"), 10)
    assert [dt.datetime.fromtimestamp(t / 1000, ZoneInfo("Europe/Berlin")).isoformat() for t in spring] == [
        "2025-03-30T03:00:00+02:00"
    ]
    # Both ends inclusive; the limit stops the walk.
    assert fires_in(CronTrigger("* * * * *"), T0, T0 + 2 * MIN, 10) == [T0, T0 + MIN, T0 + 2 * MIN]
    assert fires_in(CronTrigger("* * * * *"), T0, T0 + 9 * MIN, 3) == [T0, T0 + MIN, T0 + 2 * MIN]


def test_interval_nominal_times_are_its_steps_from_its_start() -> None:
    every = IntervalTrigger(10 * S, T0)
    assert fires_in(every, T0 - 60 * S, T0 + 25 * S, 10) == [T0, T0 + 10 * S, T0 + 20 * S]
    assert fires_in(every, T0 + 1, T0 + 30 * S, 10) == [T0 + 10 * S, T0 + 20 * S, T0 + 30 * S]
    assert fires_in(ManualTrigger(), T0, T0 + MIN, 10) == []
    assert fires_in(every, T0 + MIN, T0, 10) == []


def _state(fired: bool = True) -> SchedulerState:
    state = fresh()
    spec = TaskSpec("t", CronTrigger("* * * * *"), command="x", overlap=Overlap.SKIP)
    assert create(state, spec, now=T0 - 30 * MIN).ok
    assert apply(state, join("ex1", 10)).ok
    # The scheduler fired T0 - 2 min (unless not ``fired``) and skipped T0 - 1 min (misfire),
    # accounted through T0.
    fires = [
        fire(T0 - 2 * MIN, pb.FIRED if fired else pb.SKIPPED_MISFIRE),
        fire(T0 - MIN, pb.SKIPPED_MISFIRE),
    ]
    res = apply(state, batch(T0, entry("t", 1, fires, watermark=T0, next_fire=T0 + MIN)))
    assert res.fired == (1 if fired else 0) and not res.refused
    return state


def _backfill(
    state: SchedulerState, start: int, end: int, now: int = T0 + S
) -> tuple[pb.CommandResult, list[AttemptReady]]:
    data = writes.start_task_backfill(state, "t", start, end, "", **{**STAMP, "now_ms": now})
    applied = state.apply(data)
    return applied.result, [e for e in applied.effects if isinstance(e, AttemptReady)]


def test_a_backfill_creates_exactly_the_missing_nominal_times_within_the_share() -> None:
    state = _state()
    res, ready = _backfill(state, T0 - 5 * MIN, T0 + 3 * MIN)
    assert res.ok, res.message
    b = res.backfill
    # T0-5..T0 are six minutes; T0-2 has a run; T0+1..T0+3 are the scheduler's (after its watermark).
    created = [T0 - 5 * MIN, T0 - 4 * MIN, T0 - 3 * MIN, T0 - MIN, T0]
    assert (b.task, b.workflow, b.runs_total, b.runs_skipped, b.share_pct) == ("t", "", 5, 4, 30)
    assert b.backfill_id.startswith("t~t")
    runs = {r.nominal_ms: r for r in runs_of(state, "t")}
    assert sorted(n for n, r in runs.items() if r.backfill) == created
    assert all(runs[n].backfill_id == b.backfill_id and runs[n].run_id == f"t@{n}" for n in created)
    assert not runs[T0 - 2 * MIN].backfill  # the scheduled run stays as it was
    assert sorted(r.nominal_ms for r in ready) == created and {r.backfill_share for r in ready} == {30}
    # The same range again: every time has a run now.
    again, ready = _backfill(state, T0 - 5 * MIN, T0, now=T0 + 2 * S)
    assert (again.backfill.runs_total, again.backfill.runs_skipped, ready) == (0, 6, [])
    assert again.backfill.finished_ms == T0 + 2 * S
    assert (
        codec.command_format(
            pb.Command.FromString(writes.start_task_backfill(state, "t", T0, T0, "", **STAMP))
        )
        == codec.TASK_BACKFILL_FORMAT
    )


def test_progress_counts_finished_runs_and_failures_raise_one_alert() -> None:
    state = _state()
    res, _ = _backfill(state, T0 - 2 * MIN - 1, T0 - MIN)  # T0-2 exists: one run, T0-1
    assert res.backfill.runs_total == 1
    res, _ = _backfill(state, T0 - 4 * MIN, T0 - 3 * MIN, now=T0 + 2 * S)
    bid = res.backfill.backfill_id
    assert res.backfill.runs_total == 2
    a, b = f"t@{T0 - 4 * MIN}", f"t@{T0 - 3 * MIN}"
    assign = pb.Command(epoch=1, now_ms=T0 + 3 * S, origin="n1")
    for run_id in (a, b):
        assign.assign_attempts.assignments.add(run_id=run_id, shard=0, attempt=1, executor="ex1")
    assert apply(state, codec.encode_command(assign)).accounted == 2
    assert apply(state, result(T0 + 4 * S, a, 1, "ex1", True)).ok
    rec = state.get_backfill(bid)
    assert rec is not None and (rec.runs_finished, rec.runs_failed, rec.finished_ms) == (1, 0, 0)
    assert apply(state, result(T0 + 5 * S, b, 1, "ex1", False)).ok
    rec = state.get_backfill(bid)
    assert rec is not None and (rec.runs_finished, rec.runs_failed, rec.finished_ms) == (2, 1, T0 + 5 * S)
    alerts = [
        alert
        for _, v in state.store.scan(keys.ALERT, keys.ALERT + keys.END)
        if (alert := pb.AlertRecord.FromString(v)).kind == "backfill_failed"
    ]
    assert [(x.task, x.run_id) for x in alerts] == [("t", bid)]
    # A forced retry of the failed run un-counts it until it finishes again.
    assert apply(state, writes.retry_run(b, **{**STAMP, "now_ms": T0 + 6 * S})).ok
    rec = state.get_backfill(bid)
    assert rec is not None and (rec.runs_finished, rec.runs_failed, rec.finished_ms) == (1, 0, 0)


def test_backfill_runs_leave_the_overlap_policy_to_regular_work_and_survive_a_restore() -> None:
    state = _state(fired=False)
    res, _ = _backfill(state, T0 - 5 * MIN, T0 - 4 * MIN)
    assert res.backfill.runs_total == 2 and state.get_task("t").active_runs == 2  # type: ignore[union-attr]
    # The next scheduled fire is not skipped (overlap=skip) because of the backfill runs.
    res = apply(
        state, batch(T0 + MIN, entry("t", 1, [fire(T0 + MIN)], watermark=T0 + MIN, next_fire=T0 + 2 * MIN))
    )
    assert res.fired == 1
    # With a regular run unfinished, the next fire is skipped as before.
    res = apply(
        state,
        batch(
            T0 + 2 * MIN, entry("t", 1, [fire(T0 + 2 * MIN)], watermark=T0 + 2 * MIN, next_fire=T0 + 3 * MIN)
        ),
    )
    assert res.fired == 0
    copy = SchedulerState.load(MemoryStore())
    copy.restore(state.snapshot(), 1)
    assert domain(copy) == domain(state)
    assert copy.runs.backfill_per_task == state.runs.backfill_per_task == {"t": 2}


def test_replace_cancels_the_regular_run_but_not_a_backfill_run() -> None:
    state = fresh()
    spec = TaskSpec("r", CronTrigger("* * * * *"), command="x", overlap=Overlap.REPLACE)
    assert create(state, spec, now=T0 - 30 * MIN).ok
    assert apply(state, batch(T0, entry("r", 1, [fire(T0)], watermark=T0, next_fire=T0 + MIN))).fired == 1
    data = writes.start_task_backfill(state, "r", T0 - 3 * MIN, T0 - 3 * MIN, "", **STAMP)
    assert apply(state, data).backfill.runs_total == 1
    nxt = batch(T0 + MIN, entry("r", 1, [fire(T0 + MIN)], watermark=T0 + MIN, next_fire=T0 + 2 * MIN))
    assert apply(state, nxt).fired == 1
    states = {r.nominal_ms: r.state for r in runs_of(state, "r")}
    assert states == {T0 - 3 * MIN: pb.PENDING, T0: pb.CANCELLED, T0 + MIN: pb.PENDING}


def test_errors_name_what_is_wrong() -> None:
    state = _state()
    assert create(state, TaskSpec("m", ManualTrigger(), command="x")).ok
    with pytest.raises(NotFound, match="task 'nope' does not exist"):
        writes.start_task_backfill(state, "nope", T0 - MIN, T0, "", **STAMP)
    with pytest.raises(InvalidSpec, match=r"to: the range ends \(.*\) before it starts"):
        writes.start_task_backfill(state, "t", T0, T0 - MIN, "", **STAMP)
    with pytest.raises(InvalidSpec, match="task 'm' has no schedule"):
        writes.start_task_backfill(state, "m", T0 - MIN, T0, "", **STAMP)
    with pytest.raises(InvalidSpec, match="the backfill would be empty"):
        writes.start_task_backfill(state, "t", T0 + 1, T0 + 2, "", **STAMP)
    with pytest.raises(InvalidSpec, match=r"holds more than 1,000 runs .* split it into several backfills"):
        writes.start_task_backfill(state, "t", T0 - 2000 * MIN, T0, "", **STAMP)
    # Apply refuses a hand-made entry naming an unknown task, as a value.
    cmd = pb.Command(epoch=1, now_ms=T0, origin="n1")
    cmd.start_task_backfill.task = "nope"
    cmd.start_task_backfill.nominal_ms.append(T0)
    res = apply(state, codec.encode_command(cmd))
    assert (res.ok, res.code) == (False, "not_found")


# -- the throttle: the dispatcher gives backfill runs only what regular work leaves ---------------


def _dispatching(slots: int) -> tuple[SchedulerState, Dispatcher]:
    state = _state(fired=False)
    assert create(state, TaskSpec("reg", ManualTrigger(), command="x", overlap=Overlap.ALLOW)).ok
    assert state.apply(join("ex1", slots)).result.ok
    d = Dispatcher(
        state, DispatchSettings(lease_ms=3000, retry_base_ms=1000, retry_cap_ms=8000), random.Random(7)
    )
    d.become_leader(1, T0)
    return state, d


def _step(state: SchedulerState, d: Dispatcher, data: bytes, now: int) -> pb.CommandResult:
    applied = state.apply(data)
    d.on_effects(applied.effects, now)
    return applied.result


def test_a_task_backfill_takes_at_most_the_backfill_share_and_regular_work_goes_first() -> None:
    state, d = _dispatching(slots=10)  # 30 % of 10 slots: 3
    data = writes.start_task_backfill(state, "t", T0 - 20 * MIN, T0 - 11 * MIN, "", **STAMP)
    assert _step(state, d, data, T0).backfill.runs_total == 10
    for proposal in d.poll(T0 + S):
        _step(state, d, proposal.encode(), T0 + S)
    assert len(d.take_outbox()) == 3
    assert d.poll(T0 + 2 * S) == []  # the share is used up although seven slots are free
    # Regular work takes the free slots at once, whatever the backfill waits for.
    for i in range(7):
        trig = writes.trigger_now("reg", "", **{**STAMP, "now_ms": T0 + 3 * S, "key": f"r{i}"})
        _step(state, d, trig, T0 + 3 * S)
    for proposal in d.poll(T0 + 3 * S):
        _step(state, d, proposal.encode(), T0 + 3 * S)
    assert sorted(item.task for _, item in d.take_outbox()) == ["reg"] * 7
