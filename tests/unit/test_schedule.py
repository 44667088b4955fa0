"""Unit tests for leader-side fire planning (raftsched.timing.schedule): next fires, spec
preparation and the misfire policies, including catch-up of a backlog over several plans.

All times are explicit milliseconds; T0 is a whole minute (2023-11-14T22:14:00Z).
"""

from __future__ import annotations

import datetime as dt
from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftsched.errors import InvalidSpec
from raftsched.model import (
    CronTrigger,
    IntervalTrigger,
    ManualTrigger,
    Misfire,
    OnceTrigger,
    TaskSpec,
    Trigger,
)
from raftsched.timing import schedule
from raftsched.timing.schedule import (
    MAX_FIRES_PER_PLAN,
    MisfireSettings,
    next_fire_after,
    plan_fires,
    prepare_spec,
)
from raftsched.v1 import log_pb2 as pb

T0 = 1_700_000_040_000
S = 1000
MINUTE = 60 * S
DAY = 24 * 3600 * S
SETTINGS = MisfireSettings(grace_ms=5 * S, all_cap=100, all_window_ms=3600 * S)
EVERY_SECOND = CronTrigger("* * * * * *")
EVERY_MINUTE = CronTrigger("* * * * *")


def task(trigger: Trigger, misfire: Misfire = Misfire.LATEST, cap: int = 0, window_ms: int = 0) -> TaskSpec:
    return TaskSpec(
        "t", trigger, misfire=misfire, misfire_all_cap=cap, misfire_all_window_ms=window_ms, command="true"
    )


def plan(spec: TaskSpec, next_fire: int, now: int, misfire: MisfireSettings = SETTINGS) -> pb.TaskFires:
    tf = plan_fires(spec, 3, next_fire, now, misfire)
    assert tf is not None
    assert (tf.task, tf.version) == ("t", 3)
    return tf


def rows(tf: pb.TaskFires) -> list[tuple[int, str, int, int]]:
    """(nominal offset s, outcome, through offset s or 0, count) — compact and readable."""
    return [
        (
            (f.nominal_ms - T0) // S,
            pb.FireOutcome.Name(f.outcome),
            (f.through_ms - T0) // S if f.through_ms else 0,
            f.count,
        )
        for f in tf.fires
    ]


def expand(tf: pb.TaskFires, trigger: Trigger) -> list[int]:
    """Every nominal fire the plan accounts; a range record must cover exactly ``count`` fires."""
    out: list[int] = []
    for f in tf.fires:
        if f.through_ms:
            nominals = [f.nominal_ms]
            while nominals[-1] < f.through_ms:
                nominals.append(next_fire_after(trigger, nominals[-1]))
            assert nominals[-1] == f.through_ms, "a range must end on a fire"
            assert len(nominals) == f.count
            out += nominals
        else:
            assert f.count == 1
            out.append(f.nominal_ms)
    return out


def utc_ms(year: int, month: int, day: int, hour: int, minute: int) -> int:
    return int(dt.datetime(year, month, day, hour, minute, tzinfo=dt.UTC).timestamp() * 1000)


# --------------------------------------------------------------------------- next_fire_after


def test_next_fire_after_cron_is_strictly_after() -> None:
    assert next_fire_after(EVERY_SECOND, T0) == T0 + S
    assert next_fire_after(EVERY_SECOND, T0 - 1) == T0
    assert next_fire_after(EVERY_SECOND, T0 + 999) == T0 + S
    assert next_fire_after(EVERY_MINUTE, T0) == T0 + MINUTE
    assert next_fire_after(EVERY_MINUTE, T0 + 1) == T0 + MINUTE


def test_next_fire_after_cron_uses_the_tasks_time_zone() -> None:
    nine_berlin = CronTrigger("0 9 * * *", "Europe/Berlin")
    # T0 is 2023-11-14 23:14 in Berlin (UTC+1): the next 09:00 there is 08:00 UTC on the 15th
    assert next_fire_after(nine_berlin, T0) == utc_ms(2023, 11, 15, 8, 0)
    assert next_fire_after(CronTrigger("0 9 * * *"), T0) == utc_ms(2023, 11, 15, 9, 0)


def test_next_fire_after_interval_keeps_its_phase() -> None:
    every10 = IntervalTrigger(10 * S, T0 + 10 * S)
    assert next_fire_after(every10, T0) == T0 + 10 * S  # before the start: the start
    assert next_fire_after(every10, T0 + 10 * S) == T0 + 20 * S  # strictly after
    assert next_fire_after(every10, T0 + 10 * S + 1) == T0 + 20 * S
    assert next_fire_after(every10, T0 + 95 * S) == T0 + 100 * S


def test_next_fire_after_once_and_manual() -> None:
    once = OnceTrigger(T0 + 5 * S)
    assert next_fire_after(once, T0) == T0 + 5 * S
    assert next_fire_after(once, T0 + 5 * S) == 0
    assert next_fire_after(once, T0 + 6 * S) == 0
    assert next_fire_after(ManualTrigger(), T0) == 0


# --------------------------------------------------------------------------- prepare_spec


def test_prepare_spec_anchors_an_interval_one_period_after_now() -> None:
    spec, first = prepare_spec(TaskSpec("t", IntervalTrigger(30 * S), command="true"), T0)
    assert spec.trigger == IntervalTrigger(30 * S, T0 + 30 * S)
    assert first == T0 + 30 * S
    # an explicit start is kept, and its phase decides the first fire even if it is in the past
    spec, first = prepare_spec(TaskSpec("t", IntervalTrigger(30 * S, T0 - 100 * S), command="true"), T0)
    assert spec.trigger == IntervalTrigger(30 * S, T0 - 100 * S)
    assert first == T0 + 20 * S


def test_prepare_spec_refuses_a_one_shot_not_in_the_future() -> None:
    for at in (T0 - S, T0):
        with pytest.raises(InvalidSpec) as info:
            prepare_spec(TaskSpec("t", OnceTrigger(at), command="true"), T0)
        assert info.value.field == "trigger.at"
    assert prepare_spec(TaskSpec("t", OnceTrigger(T0 + 1), command="true"), T0)[1] == T0 + 1


def test_prepare_spec_validates_cron_and_zone() -> None:
    with pytest.raises(InvalidSpec) as info:
        prepare_spec(TaskSpec("t", CronTrigger("61 * * * *"), command="true"), T0)
    assert info.value.field == "trigger.cron"
    with pytest.raises(InvalidSpec) as info:
        prepare_spec(TaskSpec("t", CronTrigger("* * * * *", "Mars/Olympus"), command="true"), T0)
    assert info.value.field == "trigger.timezone"
    assert prepare_spec(TaskSpec("t", EVERY_MINUTE, command="true"), T0)[1] == T0 + MINUTE
    assert prepare_spec(TaskSpec("t", ManualTrigger(), command="true"), T0)[1] == 0


# --------------------------------------------------------------------------- nothing due / on time


def test_nothing_due_is_none() -> None:
    spec = task(EVERY_SECOND)
    assert plan_fires(spec, 1, T0 + S, T0 + 999, SETTINGS) is None
    assert plan_fires(spec, 1, 0, T0 + DAY, SETTINGS) is None  # no further fire


def test_on_time_fires_all_fire() -> None:
    tf = plan(task(EVERY_SECOND), T0 + S, T0 + 3500)
    assert rows(tf) == [(1, "FIRED", 0, 1), (2, "FIRED", 0, 1), (3, "FIRED", 0, 1)]
    assert [f.reason for f in tf.fires] == ["", "", ""]
    assert (tf.watermark_ms, tf.next_fire_ms) == (T0 + 3500, T0 + 4 * S)


@pytest.mark.parametrize("misfire", list(Misfire))
def test_grace_boundary(misfire: Misfire) -> None:
    spec = task(EVERY_MINUTE, misfire)
    # exactly the grace late: still on time, for every policy
    assert rows(plan(spec, T0 + MINUTE, T0 + MINUTE + 5 * S)) == [(60, "FIRED", 0, 1)]
    # one millisecond more: missed, and the policy decides
    late = plan(spec, T0 + MINUTE, T0 + MINUTE + 5 * S + 1)
    expected = {
        Misfire.LATEST: [(60, "FIRED", 0, 1)],
        Misfire.ALL: [(60, "FIRED", 0, 1)],
        Misfire.SKIP: [(60, "SKIPPED_MISFIRE", 0, 1)],
    }[misfire]
    assert rows(late) == expected
    assert "grace" in late.fires[0].reason


# --------------------------------------------------------------------------- misfire policies


def test_latest_runs_the_newest_missed_fire_and_coalesces_the_rest_in_one_record() -> None:
    tf = plan(task(EVERY_MINUTE), T0 + MINUTE, T0 + 310 * S)  # +60s .. +300s, all > 5 s late
    assert rows(tf) == [(60, "COALESCED", 240, 4), (300, "FIRED", 0, 1)]
    assert "newest missed fire runs" in tf.fires[1].reason
    assert "coalesced into the newest" in tf.fires[0].reason
    assert (tf.watermark_ms, tf.next_fire_ms) == (T0 + 310 * S, T0 + 360 * S)


def test_latest_with_on_time_fires_coalesces_every_missed_one() -> None:
    tf = plan(task(EVERY_SECOND), T0 + S, T0 + 20 * S)  # grace boundary at +15s
    assert rows(tf) == [(1, "COALESCED", 14, 14)] + [(s, "FIRED", 0, 1) for s in range(15, 21)]


def test_skip_skips_every_missed_fire() -> None:
    tf = plan(task(EVERY_SECOND, Misfire.SKIP), T0 + S, T0 + 20 * S)
    assert rows(tf) == [(1, "SKIPPED_MISFIRE", 14, 14)] + [(s, "FIRED", 0, 1) for s in range(15, 21)]
    assert "misfire=skip" in tf.fires[0].reason
    # with no on-time fire at all, nothing runs
    assert rows(plan(task(EVERY_MINUTE, Misfire.SKIP), T0 + MINUTE, T0 + 310 * S)) == [
        (60, "SKIPPED_MISFIRE", 300, 5)
    ]


def test_all_runs_the_newest_missed_fires_within_window_and_cap() -> None:
    spec = task(EVERY_SECOND, Misfire.ALL, cap=10, window_ms=50 * S)
    tf = plan(spec, T0 + S, T0 + 100 * S)  # missed: +1s..+94s; window starts at +50s
    assert rows(tf) == (
        [(1, "SKIPPED_MISFIRE", 49, 49), (50, "SKIPPED_MISFIRE", 84, 35)]
        + [(s, "FIRED", 0, 1) for s in range(85, 101)]
    )
    assert "window" in tf.fires[0].reason
    assert "cap of 10" in tf.fires[1].reason
    assert "misfire=all" in tf.fires[2].reason


def test_all_falls_back_to_the_cluster_defaults() -> None:
    spec = task(EVERY_SECOND, Misfire.ALL)
    tf = plan(spec, T0 + S, T0 + 30 * S, MisfireSettings(grace_ms=5 * S, all_cap=3, all_window_ms=20 * S))
    assert rows(tf) == (
        [(1, "SKIPPED_MISFIRE", 9, 9), (10, "SKIPPED_MISFIRE", 21, 12)]
        + [(s, "FIRED", 0, 1) for s in range(22, 31)]
    )


def test_a_one_shot_fires_once_even_late() -> None:
    once = OnceTrigger(T0 + 5 * S)
    tf = plan(task(once), T0 + 5 * S, T0 + 5 * S)
    assert rows(tf) == [(5, "FIRED", 0, 1)]
    assert tf.next_fire_ms == 0
    assert rows(plan(task(once), T0 + 5 * S, T0 + DAY)) == [(5, "FIRED", 0, 1)]  # latest: newest missed
    assert rows(plan(task(once, Misfire.SKIP), T0 + 5 * S, T0 + DAY)) == [(5, "SKIPPED_MISFIRE", 0, 1)]


def test_an_interval_plan_follows_its_anchor() -> None:
    spec, first = prepare_spec(TaskSpec("t", IntervalTrigger(10 * S), command="true"), T0)
    tf = plan(spec, first, T0 + 35 * S)  # +10s, +20s missed; +30s on time
    assert rows(tf) == [(10, "COALESCED", 20, 2), (30, "FIRED", 0, 1)]
    assert tf.next_fire_ms == T0 + 40 * S


# --------------------------------------------------------------------------- catching up a backlog


def catch_up(
    spec: TaskSpec, next_fire: int, now: int, misfire: MisfireSettings = SETTINGS
) -> tuple[list[pb.TaskFires], list[int]]:
    """Plan repeatedly, as the leader does after each batch commits, until the watermark is now."""
    plans: list[pb.TaskFires] = []
    accounted: list[int] = []
    watermark = next_fire - 1
    while True:
        tf = plan(spec, next_fire, now, misfire)
        nominals = expand(tf, spec.trigger)
        assert len(nominals) <= MAX_FIRES_PER_PLAN
        assert (
            nominals == sorted(nominals)
            and nominals[0] > watermark
            and nominals[-1] <= tf.watermark_ms <= now
        )
        assert tf.next_fire_ms > tf.watermark_ms or tf.next_fire_ms == 0
        plans.append(tf)
        accounted += nominals
        watermark, next_fire = tf.watermark_ms, tf.next_fire_ms
        if watermark == now:
            return plans, accounted


def test_a_per_second_task_three_days_behind_catches_up_over_several_plans() -> None:
    every_second = IntervalTrigger(S, T0 + S)
    now = T0 + 3 * DAY
    plans, accounted = catch_up(task(every_second), T0 + S, now)
    assert len(plans) == -(-3 * DAY // S // MAX_FIRES_PER_PLAN)  # 26
    # every nominal second covered exactly once across the plans
    assert len(accounted) == 3 * DAY // S
    assert accounted == list(range(T0 + S, now + 1, S))
    # misfire=latest: only the on-time fires of the last plan run; each plan is one range record
    fired = [f.nominal_ms for tf in plans for f in tf.fires if f.outcome == pb.FIRED]
    assert fired == list(range(now - 5 * S, now + 1, S))
    assert all(len(tf.fires) == 1 for tf in plans[:-1])


def test_a_cron_backlog_is_caught_up_the_same_way() -> None:
    now = T0 + 25_000 * S
    plans, accounted = catch_up(task(EVERY_SECOND, Misfire.SKIP), T0 + S, now)
    assert len(plans) == 3
    assert Counter(accounted) == Counter(range(T0 + S, now + 1, S))


def test_misfire_all_caps_the_whole_backlog_not_each_plan() -> None:
    # Regression: each 10,000-fire plan ran its own `cap` late fires (2,600 runs instead of 100).
    spec = task(IntervalTrigger(S, T0 + S), Misfire.ALL, cap=100, window_ms=30 * DAY)
    now = T0 + 3 * DAY
    plans, accounted = catch_up(spec, T0 + S, now)
    assert len(accounted) == 3 * DAY // S
    fired = [f.nominal_ms for tf in plans for f in tf.fires if f.outcome == pb.FIRED]
    on_time = list(range(now - 5 * S, now + 1, S))
    newest_missed = list(range(now - 105 * S, now - 5 * S, S))
    assert fired == newest_missed + on_time


@settings(max_examples=150, deadline=None)
@given(
    every_s=st.sampled_from([1, 2, 3, 7, 60]),
    gap_s=st.integers(min_value=0, max_value=600),
    policy=st.sampled_from(list(Misfire)),
    cap=st.integers(min_value=1, max_value=12),
    window_s=st.integers(min_value=1, max_value=400),
    grace_s=st.integers(min_value=0, max_value=20),
    chunk=st.integers(min_value=1, max_value=9),
)
def test_any_backlog_is_accounted_once_and_by_policy(
    every_s: int, gap_s: int, policy: Misfire, cap: int, window_s: int, grace_s: int, chunk: int
) -> None:
    """Small plans (MAX_FIRES_PER_PLAN patched down) so chunking is exercised on every example."""
    every = IntervalTrigger(every_s * S, T0 + every_s * S)
    spec = task(every, policy, cap=cap, window_ms=window_s * S)
    now = T0 + every_s * S + gap_s * S + 321  # not on a fire
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(schedule, "MAX_FIRES_PER_PLAN", chunk)
        plans, accounted = catch_up(spec, every.start_ms, now, MisfireSettings(grace_ms=grace_s * S))
        assert all(len(expand(tf, every)) <= chunk for tf in plans)
    due = list(range(every.start_ms, now + 1, every.every_ms))
    assert accounted == due
    fired = [f.nominal_ms for tf in plans for f in tf.fires if f.outcome == pb.FIRED]
    bound = now - grace_s * S
    missed = [f for f in due if f < bound]
    on_time = due[len(missed) :]
    if policy == Misfire.LATEST:
        expected = on_time if on_time else missed[-1:]
    elif policy == Misfire.SKIP:
        expected = on_time
    else:
        eligible = [f for f in missed if f >= now - window_s * S]
        expected = eligible[max(0, len(eligible) - cap) :] + on_time
    assert fired == expected


@settings(max_examples=300, deadline=None)
@given(
    trigger=st.sampled_from(
        [EVERY_SECOND, IntervalTrigger(2 * S), IntervalTrigger(3 * S), EVERY_MINUTE, OnceTrigger(T0)]
    ),
    late=st.integers(-2 * S, 70 * S),
    grace=st.sampled_from([0, S, 5 * S, 60 * S]),
    misfire=st.sampled_from(list(Misfire)),
)
def test_on_time_catch_up_is_what_plan_fires_decides(
    trigger: Trigger, late: int, grace: int, misfire: Misfire
) -> None:
    """``on_time_catch_up`` (the leader's columnar catch-up) is exactly plan_fires' answer when it
    answers: every due fire FIRED, watermark now, the next fire after now."""
    spec = task(trigger, misfire)
    first = next_fire_after(trigger, T0 - 1)
    now = first + late
    got = schedule.on_time_catch_up(trigger, first, now, grace)
    tf = plan_fires(spec, 1, first, now, MisfireSettings(grace_ms=grace, all_cap=100, all_window_ms=3600 * S))
    if got is None:
        # Not the case: nothing due, one fire (single_on_time_fire's), a missed one, or no next.
        assert (
            tf is None
            or len(tf.fires) == 1
            or any(f.outcome != pb.FIRED or f.reason for f in tf.fires)
            or not tf.next_fire_ms
            or len(tf.fires) > schedule.MAX_CATCH_UP_FIRES
        )
        return
    nominals, following = got
    assert tf is not None and len(nominals) >= 2
    assert [(f.nominal_ms, f.outcome, f.count, f.reason) for f in tf.fires] == [
        (n, pb.FIRED, 1, "") for n in nominals
    ]
    assert (tf.watermark_ms, tf.next_fire_ms) == (now, following)
    assert following > now >= nominals[-1]


# DST transitions of 2026 (UTC): Europe/London spring forward and fall back, America/New_York's.
_DST_EDGES = (
    int(dt.datetime(2026, 3, 29, 1, tzinfo=dt.UTC).timestamp() * 1000),
    int(dt.datetime(2026, 10, 25, 1, tzinfo=dt.UTC).timestamp() * 1000),
    int(dt.datetime(2026, 3, 8, 7, tzinfo=dt.UTC).timestamp() * 1000),
    int(dt.datetime(2026, 11, 1, 6, tzinfo=dt.UTC).timestamp() * 1000),
)


@settings(max_examples=300, deadline=None)
@given(
    trigger=st.sampled_from(
        [
            CronTrigger("*/15 * * * *", "Europe/London"),
            CronTrigger("30 1 * * *", "Europe/London"),
            CronTrigger("* * * * *", "America/New_York"),
            CronTrigger("0,30 1,2 * * *", "America/New_York"),
            CronTrigger("*/10 * * * * *", "Europe/London"),
        ]
    ),
    edge=st.sampled_from(_DST_EDGES),
    offset=st.integers(-4 * 3600 * S, 4 * 3600 * S),
    behind=st.integers(0, 12),
    jitter=st.sampled_from([-1, 0, 0, 1, 999]),
    grace=st.sampled_from([MINUTE, 10 * MINUTE, 3600 * S, 2 * 3600 * S]),
    misfire=st.sampled_from(list(Misfire)),
)
def test_on_time_catch_up_matches_plan_fires_across_dst(
    trigger: Trigger, edge: int, offset: int, behind: int, jitter: int, grace: int, misfire: Misfire
) -> None:
    """The leader's columnar catch-up around a DST change (a skipped and a repeated wall hour),
    with now on, just before or just after a fire: the same fires, next fire and watermark as
    plan_fires whenever it answers, and the next fire strictly after now (a repeated wall time
    still fires once)."""
    first = next_fire_after(trigger, edge + offset)
    now = first
    for _ in range(behind):
        now = next_fire_after(trigger, now)
    now += jitter
    got = schedule.on_time_catch_up(trigger, first, now, grace)
    if got is None:
        return
    nominals, following = got
    tf = plan_fires(task(trigger, misfire), 1, first, now, MisfireSettings(grace_ms=grace))
    assert tf is not None
    assert [(f.nominal_ms, f.outcome, f.count, f.reason) for f in tf.fires] == [
        (n, pb.FIRED, 1, "") for n in nominals
    ]
    assert (tf.watermark_ms, tf.next_fire_ms) == (now, following)
    assert nominals == sorted(set(nominals)) and following > now >= nominals[-1] >= now - grace


# --------------------------------------------------------------------------- plan_missed


def outcomes(tf: pb.TaskFires, trigger: Trigger) -> list[tuple[int, int, str]]:
    """(nominal, outcome, reason) of every nominal fire the plan accounts, ranges expanded."""
    out: list[tuple[int, int, str]] = []
    for f in tf.fires:
        out += [(x, f.outcome, f.reason) for x in expand(pb.TaskFires(fires=[f]), trigger)]
    return out


@given(
    trigger=st.sampled_from(
        [EVERY_SECOND, CronTrigger("*/5 * * * * *"), EVERY_MINUTE, IntervalTrigger(7 * S, T0)]
    ),
    misfire=st.sampled_from(list(Misfire)),
    late_s=st.integers(min_value=0, max_value=400),
    grace_s=st.integers(min_value=0, max_value=10),
    extra_ms=st.integers(min_value=0, max_value=999),
)
@settings(max_examples=300, deadline=None)
def test_plan_missed_then_the_on_time_fires_account_as_plan_fires_does(
    trigger: Trigger, misfire: Misfire, late_s: int, grace_s: int, extra_ms: int
) -> None:
    spec = task(trigger, misfire)
    settings_ = MisfireSettings(grace_ms=grace_s * S, all_cap=100, all_window_ms=3600 * S)
    now = T0 + late_s * S + extra_ms
    whole = plan_fires(spec, 3, T0, now, settings_)
    missed = schedule.plan_missed(spec, 3, T0, now, settings_)
    if missed is None:
        # Not its shape: another policy, nothing missed, or no on-time fire after the missed ones.
        on_time = whole is not None and any(f.outcome == pb.FIRED and not f.reason for f in whole.fires)
        missed_some = whole is not None and any(f.reason for f in whole.fires)
        assert misfire == Misfire.ALL or not (on_time and missed_some)
        return
    assert misfire in (Misfire.LATEST, Misfire.SKIP) and whole is not None
    assert len(missed.fires) == 1 and missed.fires[0].outcome != pb.FIRED
    assert missed.watermark_ms < missed.next_fire_ms <= now  # re-armed at its first on-time fire
    assert missed.next_fire_ms >= now - settings_.grace_ms
    rest = plan_fires(spec, 3, missed.next_fire_ms, now, settings_)
    assert rest is not None and all(f.outcome == pb.FIRED and not f.reason for f in rest.fires)
    assert outcomes(missed, trigger) + outcomes(rest, trigger) == outcomes(whole, trigger)
    assert (rest.watermark_ms, rest.next_fire_ms) == (whole.watermark_ms, whole.next_fire_ms)


def test_plan_missed_of_a_per_second_task_twenty_seconds_behind() -> None:
    spec = task(EVERY_SECOND)
    missed = schedule.plan_missed(spec, 3, T0, T0 + 20 * S, SETTINGS)
    assert missed is not None and rows(missed) == [(0, "COALESCED", 14, 15)]
    assert (missed.watermark_ms, missed.next_fire_ms) == (T0 + 14 * S, T0 + 15 * S)
    skip = schedule.plan_missed(task(EVERY_SECOND, Misfire.SKIP), 3, T0, T0 + 20 * S, SETTINGS)
    assert skip is not None and rows(skip) == [(0, "SKIPPED_MISFIRE", 14, 15)]
    # latest with no on-time fire (a minutely task 20 s late) runs the newest missed: not this shape
    assert schedule.plan_missed(task(EVERY_MINUTE), 3, T0, T0 + 20 * S, SETTINGS) is None
    assert schedule.plan_missed(task(EVERY_SECOND, Misfire.ALL), 3, T0, T0 + 20 * S, SETTINGS) is None
    assert schedule.plan_missed(spec, 3, T0, T0 + 4 * S, SETTINGS) is None  # nothing missed
