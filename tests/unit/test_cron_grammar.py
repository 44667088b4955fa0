"""The cron grammar and crontab's day rule (``raftsched.timing.cronparse``, evaluated by ``timing.cron``).

Every case the grammar names, the one-value ranges croniter misreads, the day-of-month/day-of-week
rule, field-named errors, the same grammar on every surface (task add, workflow files, cron
preview), and the flag on stored tasks whose expression changed meaning.
"""

from __future__ import annotations

import calendar
import datetime as dt
import logging
from collections.abc import Callable

import pytest

from raftsched import cli, codec
from raftsched.errors import InvalidSpec
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.leader.driver import LeaderDriver, _warn_changed_cron_meanings
from raftsched.model import CronTrigger, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.timing.cron import (
    CronSchedule,
    changed_meaning_warning,
    day_rule_note,
    meaning_change,
    preview,
)
from raftsched.timing.schedule import prepare_spec
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.validate import collect_problems


def utc(iso: str) -> int:
    return int(dt.datetime.fromisoformat(iso).replace(tzinfo=dt.UTC).timestamp()) * 1000


def iso(ms: int) -> str:
    return dt.datetime.fromtimestamp(ms // 1000, dt.UTC).replace(tzinfo=None).isoformat()


def fires(expr: str, start: str, count: int, tz: str = "UTC") -> list[str]:
    schedule = CronSchedule.parse(expr, tz)
    return [iso(f) for f in schedule.fires_between(utc(start), utc("9999-01-01T00:00:00"), count)]


def days(expr: str, start: str, count: int) -> list[str]:
    return [f[:10] for f in fires(expr, start, count)]


# --------------------------------------------------------------------------- one-value ranges


def test_one_value_hour_range_fires_once_a_day() -> None:
    assert fires("0 18-18 * * *", "2025-01-01T00:00:00", 3) == [
        "2025-01-01T18:00:00",
        "2025-01-02T18:00:00",
        "2025-01-03T18:00:00",
    ]


def test_one_value_minute_range_in_a_list() -> None:
    assert fires("57-57,4 * * * *", "2025-01-01T00:00:00", 4) == [
        "2025-01-01T00:04:00",
        "2025-01-01T00:57:00",
        "2025-01-01T01:04:00",
        "2025-01-01T01:57:00",
    ]


def test_one_value_weekday_range_is_that_weekday() -> None:
    assert days("0 0 * * 6-6", "2025-01-01T00:00:00", 3) == ["2025-01-04", "2025-01-11", "2025-01-18"]


@pytest.mark.parametrize(
    ("expr", "first"),
    [
        ("0 0 1-1 * *", "2025-02-01T00:00:00"),
        ("0 0 1 mar-mar *", "2025-03-01T00:00:00"),
        ("30 9 * * * 15-15", "2025-01-01T09:30:15"),
        ("0 0 * * sun-sun", "2025-01-05T00:00:00"),
    ],
)
def test_one_value_ranges_in_every_field(expr: str, first: str) -> None:
    got = fires(expr, "2025-01-01T00:00:00", 2)
    assert got[0] == first
    assert utc(got[1]) - utc(got[0]) >= 7 * 86_400_000 or expr.endswith("15-15")


# --------------------------------------------------------------------------- the day rule


def test_day_of_month_starting_with_star_means_and() -> None:
    # Days 1, 8, 15, 22, 29 that are a Tuesday or a Wednesday (crontab), at :43 of every hour.
    got = days("43 * */7 * 2,3", "2025-01-01T00:00:00", 24 * 6)
    dates = sorted(set(got))
    assert dates[:4] == ["2025-01-01", "2025-01-08", "2025-01-15", "2025-01-22"]
    for d in dates:
        day = dt.date.fromisoformat(d)
        assert day.day in (1, 8, 15, 22, 29) and day.isoweekday() in (2, 3)


def test_day_of_week_starting_with_star_means_and() -> None:
    # */2 in day-of-week is Sun, Tue, Thu, Sat; with day 13: only 13ths on those days.
    for d in days("0 0 13 * */2", "2025-01-01T00:00:00", 5):
        assert dt.date.fromisoformat(d).isoweekday() % 7 in (0, 2, 4, 6)
        assert d.endswith("-13")


def test_both_restricted_means_or() -> None:
    assert days("0 12 13 * fri", "2025-06-01T00:00:00", 3) == ["2025-06-06", "2025-06-13", "2025-06-20"]


def test_a_full_but_unstarred_field_still_ors() -> None:
    # '1-31' does not start with '*': OR with Monday is every day (crontab).
    assert len(set(days("0 0 1-31 * 1", "2025-01-01T00:00:00", 10))) == 10
    # '*/1' starts with '*': AND, so only Mondays.
    assert days("0 0 */1 * 1", "2025-01-01T00:00:00", 2) == ["2025-01-06", "2025-01-13"]


def test_question_mark_is_unrestricted() -> None:
    assert days("0 0 ? * mon", "2025-01-01T00:00:00", 2) == ["2025-01-06", "2025-01-13"]
    assert days("0 0 15 * ?", "2025-01-01T00:00:00", 2) == ["2025-01-15", "2025-02-15"]


@pytest.mark.parametrize(
    ("expr", "note"),
    [
        ("0 12 13 * fri", "day rule: OR"),
        ("43 * */7 * 2,3", "day rule: AND - day-of-month '*/7' starts with '*'"),
        ("0 0 13 * */2", "day rule: AND - day-of-week '*/2' starts with '*'"),
        ("0 0 * * fri", None),
        ("0 0 13 * *", None),
        ("0 0 ? * fri", None),
    ],
)
def test_day_rule_note(expr: str, note: str | None) -> None:
    got = day_rule_note(expr)
    assert got == note if note is None else got is not None and got.startswith(note)


# --------------------------------------------------------------------------- the rest of the grammar


def test_names_lists_steps_and_sunday_as_7() -> None:
    assert days("0 0 * * SUN", "2025-01-01T00:00:00", 1) == days("0 0 * * 7", "2025-01-01T00:00:00", 1)
    assert days("0 0 1 JAN,jul *", "2025-01-01T00:00:00", 2) == ["2025-07-01", "2026-01-01"]
    assert fires("10/20 * * * *", "2025-01-01T00:00:00", 3) == [
        "2025-01-01T00:10:00",
        "2025-01-01T00:30:00",
        "2025-01-01T00:50:00",
    ]
    assert fires("0 1-10/4 * * *", "2025-01-01T00:00:00", 3) == [
        "2025-01-01T01:00:00",
        "2025-01-01T05:00:00",
        "2025-01-01T09:00:00",
    ]
    # A range that ends below its start wraps around (kept from before; crontab refuses it).
    assert days("0 0 * * fri-mon", "2025-01-01T00:00:00", 4) == [
        "2025-01-03",
        "2025-01-04",
        "2025-01-05",
        "2025-01-06",
    ]
    assert days("0 0 * * 1-7/2", "2025-01-01T00:00:00", 4) == [
        "2025-01-03",
        "2025-01-05",
        "2025-01-06",
        "2025-01-08",
    ]


def test_last_day_and_ranges_to_it() -> None:
    assert days("0 0 L * *", "2024-01-15T00:00:00", 3) == ["2024-01-31", "2024-02-29", "2024-03-31"]
    assert days("0 0 1,L * *", "2025-01-15T00:00:00", 3) == ["2025-01-31", "2025-02-01", "2025-02-28"]
    assert days("0 0 29-L 2 *", "2023-01-01T00:00:00", 1) == ["2024-02-29"]


def test_nearest_weekday() -> None:
    # 2025-02-15 is a Saturday: Friday the 14th. 2025-03-01 is a Saturday: Monday the 3rd (same month).
    assert days("0 0 15W * *", "2025-02-01T00:00:00", 1) == ["2025-02-14"]
    assert days("0 0 1W * *", "2025-02-15T00:00:00", 1) == ["2025-03-03"]
    # 2025-06-15 is a Sunday: Monday the 16th.
    assert days("0 0 W15 6 *", "2025-01-01T00:00:00", 1) == ["2025-06-16"]


def test_nth_and_last_weekday() -> None:
    assert days("0 0 * * fri#2", "2025-01-01T00:00:00", 2) == ["2025-01-10", "2025-02-14"]
    assert days("0 0 * * mon-tue#1", "2025-01-01T00:00:00", 2) == ["2025-01-06", "2025-01-07"]
    assert days("0 0 * * 5L", "2025-01-01T00:00:00", 2) == ["2025-01-31", "2025-02-28"]
    assert days("0 0 * * L5", "2025-01-01T00:00:00", 2) == ["2025-01-31", "2025-02-28"]
    # '#' with a restricted day-of-month under OR: the 1st, or the second Friday (croniter alone fails).
    assert days("0 0 1 * 5#2", "2025-01-02T00:00:00", 3) == ["2025-01-10", "2025-02-01", "2025-02-14"]


def _day_oracle(
    dom: Callable[[dt.date], bool], dow: Callable[[dt.date], bool], both: bool
) -> Callable[[dt.date], bool]:
    return lambda d: (dom(d) and dow(d)) if both else (dom(d) or dow(d))


def _last(d: dt.date) -> int:
    return calendar.monthrange(d.year, d.month)[1]


def _nearest_weekday(d: dt.date, n: int) -> bool:
    if n > _last(d):
        return False
    target = d.replace(day=n)
    if target.isoweekday() == 6:
        target = target - dt.timedelta(days=1) if n > 1 else target + dt.timedelta(days=2)
    elif target.isoweekday() == 7:
        target = target + dt.timedelta(days=1) if n < _last(d) else target - dt.timedelta(days=2)
    return d == target


COMBINATIONS: list[tuple[str, Callable[[dt.date], bool]]] = [
    # AND (a field starts with '*') with '#', 'L' and 'W' on either side: croniter cannot combine these.
    (
        "0 0 */10,L * 5L",
        _day_oracle(
            lambda d: d.day in (1, 11, 21, 31) or d.day == _last(d),
            lambda d: d.weekday() == 4 and d.day + 7 > _last(d),
            True,
        ),
    ),
    (
        "0 0 */2 * fri#2",
        _day_oracle(lambda d: d.day % 2 == 1, lambda d: d.weekday() == 4 and 8 <= d.day <= 14, True),
    ),
    (
        "0 0 15W * */5",
        _day_oracle(lambda d: _nearest_weekday(d, 15), lambda d: d.isoweekday() % 7 in (0, 5), True),
    ),
    (
        "0 0 L * */3",
        _day_oracle(lambda d: d.day == _last(d), lambda d: d.isoweekday() % 7 in (0, 3, 6), True),
    ),
    (
        "0 0 *,L * 1#1",
        _day_oracle(lambda d: True, lambda d: d.weekday() == 0 and d.day <= 7, True),
    ),
    # OR with the same.
    (
        "0 0 L * 1#1",
        _day_oracle(lambda d: d.day == _last(d), lambda d: d.weekday() == 0 and d.day <= 7, False),
    ),
    (
        "0 0 15W * 0L",
        _day_oracle(
            lambda d: _nearest_weekday(d, 15), lambda d: d.isoweekday() == 7 and d.day + 7 > _last(d), False
        ),
    ),
    (
        "0 0 10-12 * wed#3,fri#1",
        _day_oracle(
            lambda d: 10 <= d.day <= 12,
            lambda d: (d.weekday() == 2 and 15 <= d.day <= 21) or (d.weekday() == 4 and d.day <= 7),
            False,
        ),
    ),
]


@pytest.mark.parametrize(("expr", "oracle"), COMBINATIONS, ids=[c[0] for c in COMBINATIONS])
def test_day_combinations_match_a_brute_force_oracle(expr: str, oracle: Callable[[dt.date], bool]) -> None:
    start, end = dt.date(2024, 1, 1), dt.date(2027, 1, 1)
    expected = [
        (start + dt.timedelta(days=i)).isoformat()
        for i in range((end - start).days)
        if oracle(start + dt.timedelta(days=i))
    ]
    got = days(expr, "2023-12-31T12:00:00", len(expected) + 1)
    assert [d for d in got if d < end.isoformat()] == expected


# --------------------------------------------------------------------------- errors


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("61 * * * *", "minute: 61 out of range 0-59"),
        ("0 24 * * *", "hour: 24 out of range 0-23"),
        ("0 0 0 * *", "day-of-month: 0 out of range 1-31"),
        ("0 0 * 0 *", "month: 0 out of range 1-12"),
        ("0 0 * * 8", "day-of-week: 8 out of range 0-7"),
        ("* * * * * 61", "second: 61 out of range 0-59"),
        ("0 0 * foo *", "month: 'foo' is not a month"),
        ("0 0 * * 1,", "day-of-week: empty list element"),
        ("0 */x * * *", "hour: step 'x' is not a number"),
        ("0 0 * * 5#0", "day-of-week: '#' takes a week 1-5"),
        ("0 0 1,15W * *", "day-of-month: 'W' must stand alone"),
        ("0 0 LW * *", "day-of-month: 'LW' is not supported"),
        ("0 0 L-2 * *", "day-of-month: 'L' stands alone or ends a range"),
        ("0 0 * * 1,5#2", "day-of-week: plain weekdays cannot be mixed"),
        ("? 0 * * *", "minute: '?' must appear only in day-of-month or day-of-week"),
        ("0 0 ?,1 * *", "day-of-month: '?' must stand alone"),
        ("0 H * * *", "hour: 'H' (hash) is not supported"),
        ("0 0 * * R", "day-of-week: 'R' (random) is not allowed"),
        ("0 0 30 2 *", "never matches"),
        ("0 0 */31 * 5L", "never matches"),  # day 1 AND the last Friday (22nd or later)
    ],
)
def test_errors_name_the_field(expr: str, reason: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        CronSchedule.parse(expr)
    assert info.value.field == "trigger.cron"
    assert info.value.reason.startswith(reason) or reason in info.value.reason


BAD = ["61 * * * *", "0 0 * * 6-6-6", "0 0 32 * *", "0 0 * * 5#9", "@often"]
GOOD = ["0 18-18 * * *", "43 * */7 * 2,3", "0 0 L * 5L", "0 0 15W * *", "0 0 ? * fri#2", "@weekly"]


@pytest.mark.parametrize("expr", BAD + GOOD)
def test_task_add_workflow_files_and_preview_accept_the_same_grammar(
    expr: str, capsys: pytest.CaptureFixture[str]
) -> None:
    # The cron module itself.
    try:
        CronSchedule.parse(expr)
        expected: str | None = None
    except InvalidSpec as exc:
        expected = exc.reason
    # task add: the leader validates a spec with prepare_spec.
    try:
        prepare_spec(TaskSpec("t", CronTrigger(expr, "UTC"), command="true"), utc("2025-01-01T00:00:00"))
        task_reason: str | None = None
    except InvalidSpec as exc:
        task_reason = exc.reason
    # workflow files: the schedule check.
    spec = pb.WorkflowSpec(name="w")
    spec.schedule.expr = expr
    spec.tasks.add(name="a", command="true")
    workflow_reasons = [reason for field, reason in collect_problems(spec) if field == "schedule.expr"]
    # cron preview.
    status = cli.main(["cron", "preview", expr, "--count", "1", "--from", "2025-01-01T00:00:00Z"])
    err = capsys.readouterr().err
    assert task_reason == expected
    assert workflow_reasons == ([] if expected is None else [expected])
    if expected is None:
        assert status == 0
    else:
        assert status != 0 and expected in err
    assert (expr in BAD) == (expected is not None)


def test_preview_prints_the_day_rule(capsys: pytest.CaptureFixture[str]) -> None:
    assert (
        cli.main(["cron", "preview", "43 * */7 * 2,3", "--count", "2", "--from", "2025-01-01T00:00:00Z"]) == 0
    )
    out = capsys.readouterr().out
    assert "day rule: AND" in out
    assert "2025-01-01T00:43:00Z" in out and "2025-01-01T01:43:00Z" in out
    assert preview("43 * */7 * 2,3", "UTC", utc("2025-01-01T00:00:00"), 1)[0][0] == utc("2025-01-01T00:43:00")


# --------------------------------------------------------------------------- stored tasks


@pytest.mark.parametrize(
    ("expr", "fragment"),
    [
        ("0 18-18 * * *", "hour '18-18' was read as every value (*), now 18"),
        ("57-57,4 * * * *", "minute '57-57,4' was read as every value (*), now 4,57"),
        ("0 0 * * 6-6", "day-of-week '6-6' was read as every weekday (*), now 6"),
        ("43 * */7 * 2,3", "now, a day must match both day fields"),
        ("0 0 */1 * 2", "before, every day fires; now, day-of-week alone decides"),
        ("0 0 */14,31 * sun#2", "no date satisfies it now"),  # days 1,15,29,31 AND the second Sunday
    ],
)
def test_meaning_change_is_described(expr: str, fragment: str) -> None:
    change = meaning_change(expr)
    assert change is not None and fragment in change
    warning = changed_meaning_warning(expr)
    assert warning is not None and fragment in warning and expr in warning


@pytest.mark.parametrize(
    "expr",
    [
        "*/5 * * * *",
        "0 12 13 * fri",
        "0 0 L * *",
        "0 0 * * 5#2",
        "0 0 1 * 1-5",
        "@daily",
        "0 0 * * 0-7",
        "bad",
    ],
)
def test_unchanged_expressions_are_not_flagged(expr: str) -> None:
    assert meaning_change(expr) is None
    assert changed_meaning_warning(expr) is None


def test_the_leader_flags_stored_tasks_whose_meaning_changed(caplog: pytest.LogCaptureFixture) -> None:
    state = SchedulerState.load(MemoryStore())
    specs = [
        TaskSpec("daily", CronTrigger("0 18-18 * * *", "UTC"), command="true"),
        TaskSpec("fine", CronTrigger("0 18 * * *", "UTC"), command="true"),
        TaskSpec("off", CronTrigger("0 18-18 * * *", "UTC"), command="true"),
    ]
    commands, refused = writes.create_tasks(
        [(s, s.name == "off") for s in specs],
        now_ms=utc("2027-01-15T08:00:00"),
        epoch=1,
        origin="n1",
        key="k",
    )
    assert not refused
    for data in commands:
        assert state.apply(data).result.ok
    with caplog.at_level(logging.WARNING, logger="raftsched.leader.driver"):
        flagged = _warn_changed_cron_meanings(state)
    assert flagged == ["daily"]  # disabled tasks are not planned, so not flagged ('task show' does)
    assert "task daily: cron '0 18-18 * * *' changed meaning" in caplog.text
    assert "fine" not in caplog.text


def test_a_stored_task_is_re_armed_by_the_new_meaning_on_the_leaders_first_planning() -> None:
    t0 = utc("2027-01-15T08:00:00")
    state = SchedulerState.load(MemoryStore())
    # Stored by an earlier version: '18-18' read as '*', so its next fire was armed at 09:00.
    data = writes.create_task(
        TaskSpec("daily", CronTrigger("0 18-18 * * *", "UTC"), command="true"),
        disabled=False,
        now_ms=t0,
        epoch=1,
        origin="n1",
        key="k",
    )
    cmd = codec.decode_command(data)
    cmd.create_task.next_fire_ms = utc("2027-01-15T09:00:00")
    assert state.apply(codec.encode_command(cmd)).result.ok
    ok = writes.create_task(
        TaskSpec("fine", CronTrigger("0 18 * * *", "UTC"), command="true"),
        disabled=False,
        now_ms=t0,
        epoch=1,
        origin="n1",
        key="k2",
    )
    assert state.apply(ok).result.ok

    driver = LeaderDriver(state, "n1")
    driver.on_effects(state.apply(driver.become_leader(2, t0 + 1000).data).effects)
    assert driver.cron_warnings == ["daily"]
    assert "daily" not in driver.wheel  # the 09:00 armed by the old reading is never planned
    proposals = driver.poll(t0 + 2000)
    assert len(proposals) == 1 and proposals[0].tasks == ("daily",) and proposals[0].fired == ()
    applied = state.apply(proposals[0].data)
    assert applied.result.ok and applied.result.fired == 0
    driver.on_effects(applied.effects)
    planning = state.task_for_planning("daily")
    assert planning is not None and planning[3] == utc("2027-01-15T18:00:00")
    assert driver.wheel.advance(utc("2027-01-15T17:59:59")) == []
    assert sorted(name for name, _ in driver.wheel.advance(utc("2027-01-15T18:00:00"))) == ["daily", "fine"]
