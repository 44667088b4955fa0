"""Cron parsing and raftsched's DST policy, checked in real zones (zoneinfo + the tzdata package).

The policy (see ``raftsched.timing.cron``): a wall time that exists twice fires once, at its first
occurrence; a wall time that does not exist fires once at the end of the gap when the hour field is
restricted, and is skipped when the hour field is ``*``.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import zoneinfo
from collections.abc import Iterator

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftsched.errors import InvalidSpec
from raftsched.timing.cron import MAX_CRON_LEN, CronSchedule, preview, validate_timezone

SECOND_MS = 1_000
MINUTE_MS = 60 * SECOND_MS
HOUR_MS = 60 * MINUTE_MS
DAY_MS = 24 * HOUR_MS


def at(zone: str, iso: str, fold: int = 0) -> int:
    """Epoch ms of a naive local ISO time in ``zone`` (``fold=1``: the second occurrence)."""
    naive = dt.datetime.fromisoformat(iso)
    return int(naive.replace(tzinfo=zoneinfo.ZoneInfo(zone), fold=fold).timestamp()) * 1000


def utc(iso: str) -> int:
    return at("UTC", iso)


def local(zone: str, ms: int) -> str:
    return dt.datetime.fromtimestamp(ms // 1000, zoneinfo.ZoneInfo(zone)).isoformat()


def wall(zone: str, ms: int) -> dt.datetime:
    """The naive local wall-clock time of ``ms``."""
    return dt.datetime.fromtimestamp(ms // 1000, zoneinfo.ZoneInfo(zone)).replace(tzinfo=None)


def fires(expr: str, zone: str, start_iso: str, end_iso: str, limit: int = 100_000) -> list[str]:
    schedule = CronSchedule.parse(expr, zone)
    return [local(zone, f) for f in schedule.fires_between(at(zone, start_iso), at(zone, end_iso), limit)]


def transitions(zone: str, start_ms: int, end_ms: int) -> list[tuple[int, int, int]]:
    """Every UTC-offset change in [start, end): (first second on the new offset, old, new offset in s)."""
    tz = zoneinfo.ZoneInfo(zone)

    def offset(s: int) -> int:
        off = dt.datetime.fromtimestamp(s, tz).utcoffset()
        assert off is not None
        return int(off.total_seconds())

    found = []
    step = 3 * 3600
    s = start_ms // 1000
    while s < end_ms // 1000:
        if offset(s) != offset(s + step):
            lo, hi = s, s + step
            while hi - lo > 1:
                mid = (lo + hi) // 2
                lo, hi = (lo, mid) if offset(mid) != offset(s) else (mid, hi)
            found.append((hi, offset(s), offset(hi)))
        s += step
    return found


# --------------------------------------------------------------------------- parsing


@pytest.mark.parametrize(
    ("expr", "reason"),
    [
        ("", "empty"),
        ("   ", "empty"),
        ("* * * *", "got 4"),
        ("0 0 * * * * 2030", "got 7"),
        ("61 * * * *", "minute: 61 out of range 0-59"),
        ("0 24 * * *", "hour: 24 out of range 0-23"),
        ("0 0 32 * *", "day-of-month: 32 out of range 1-31"),
        ("0 0 * 13 *", "month: 13 out of range 1-12"),
        ("* * * * * 60", "second: 60 out of range 0-59"),
        ("abc * * * *", "minute: 'abc' is not a number"),
        ("*/0 * * * *", "minute: step must be at least 1"),
        ("0 0 * * funday", "day-of-week: 'funday' is not a weekday"),
        ("R * * * *", "'R' (random)"),
        ("0 R * * *", "'R' (random)"),
        ("0 0 * * 1-R", "'R' (random)"),
        ("H * * * *", "'H' (hash)"),
        ("H/15 * * * *", "'H' (hash)"),
        ("0 H(0-3) * * *", "'H' (hash)"),
        ("0 0 30 2 *", "never matches"),
        ("0 0 31 4 *", "never matches"),
        ("@reboot", "unknown alias"),
        ("@every 5m", "got 2"),
        ("0 0 * * *\u00a0", "ASCII"),
        ("0 " * 200, "longer than"),
    ],
)
def test_invalid_expressions_are_rejected_with_field_and_reason(expr: str, reason: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        CronSchedule.parse(expr)
    assert info.value.field == "trigger.cron"
    assert reason in info.value.reason


def test_error_names_the_callers_field() -> None:
    with pytest.raises(InvalidSpec) as info:
        CronSchedule.parse("* * *", field="tasks[3].trigger.cron")
    assert str(info.value).startswith("tasks[3].trigger.cron: ")
    with pytest.raises(InvalidSpec) as tz_info:
        CronSchedule.parse("* * * * *", "Mars/Olympus", tz_field="tasks[3].trigger.timezone")
    assert tz_info.value.field == "tasks[3].trigger.timezone"


def test_max_length_is_inclusive() -> None:
    expr = "0 0 * * *".ljust(MAX_CRON_LEN)
    assert CronSchedule.parse(expr).next_after(utc("2025-01-01T12:00:00")) == utc("2025-01-02T00:00:00")
    with pytest.raises(InvalidSpec, match="longer than"):
        CronSchedule.parse(expr + " ")


@pytest.mark.parametrize(
    ("tz", "reason"),
    [
        ("", "empty"),
        ("Nowhere/Town", "unknown time zone"),
        ("Europe", "unknown time zone"),
        ("../etc/passwd", "not a valid IANA"),
        ("/etc/localtime", "not a valid IANA"),
        ("Europe/Berlin ", "not a valid IANA"),
        ("localtime", "depends on the host"),
        ("A" * 65, "longer than"),
    ],
)
def test_invalid_timezones_are_rejected(tz: str, reason: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        validate_timezone(tz)
    assert info.value.field == "trigger.timezone"
    assert reason in info.value.reason
    with pytest.raises(InvalidSpec) as parse_info:
        CronSchedule.parse("* * * * *", tz)
    assert parse_info.value.field == "trigger.timezone"


def test_valid_timezone_returns_zoneinfo() -> None:
    assert validate_timezone("Europe/Berlin") == zoneinfo.ZoneInfo("Europe/Berlin")
    assert validate_timezone("Etc/GMT+5", field="x").key == "Etc/GMT+5"


# --------------------------------------------------------------------------- plain schedules


def test_five_fields_fire_strictly_after_on_whole_minutes() -> None:
    s = CronSchedule.parse("*/15 * * * *")
    assert not s.has_seconds
    assert s.next_after(utc("2025-06-01T10:07:30")) == utc("2025-06-01T10:15:00")
    assert s.next_after(utc("2025-06-01T10:15:00")) == utc("2025-06-01T10:30:00")
    assert s.next_after(utc("2025-06-01T10:15:00") - 1) == utc("2025-06-01T10:15:00")
    assert s.next_after(utc("2025-06-01T10:15:00") + 1) == utc("2025-06-01T10:30:00")


def test_six_fields_put_seconds_last() -> None:
    every_two = CronSchedule.parse("* * * * * */2")
    assert every_two.has_seconds
    start = utc("2025-06-01T10:00:00")
    assert every_two.fires_between(start, start + 7 * SECOND_MS, 10) == [
        start + 2 * SECOND_MS,
        start + 4 * SECOND_MS,
        start + 6 * SECOND_MS,
    ]
    assert every_two.next_after(start + 1_999) == start + 2 * SECOND_MS
    at_15s = CronSchedule.parse("30 9 * * * 15")
    assert at_15s.next_after(start) == utc("2025-06-02T09:30:15")
    # Seconds are LAST: "*/2 * * * * *" is every second of every even minute, not every two seconds.
    even_minutes = CronSchedule.parse("*/2 * * * * *")
    assert even_minutes.fires_between(start + 59 * SECOND_MS, start + 2 * MINUTE_MS + 1, 100) == [
        start + 2 * MINUTE_MS
    ]
    assert even_minutes.next_after(start) == start + SECOND_MS


@pytest.mark.parametrize(
    ("alias", "after", "expected"),
    [
        ("@hourly", "2025-06-01T10:20:00", "2025-06-01T11:00:00+02:00"),
        ("@daily", "2025-06-01T10:20:00", "2025-06-02T00:00:00+02:00"),
        ("@midnight", "2025-06-01T10:20:00", "2025-06-02T00:00:00+02:00"),
        ("@weekly", "2025-06-01T10:20:00", "2025-06-08T00:00:00+02:00"),  # 2025-06-01 is a Sunday
        ("@monthly", "2025-06-01T10:20:00", "2025-07-01T00:00:00+02:00"),
        ("@yearly", "2025-06-01T10:20:00", "2026-01-01T00:00:00+01:00"),
        ("@annually", "2025-06-01T10:20:00", "2026-01-01T00:00:00+01:00"),
        ("@DAILY", "2025-06-01T10:20:00", "2025-06-02T00:00:00+02:00"),
    ],
)
def test_aliases_fire_on_the_local_clock(alias: str, after: str, expected: str) -> None:
    s = CronSchedule.parse(alias, "Europe/Berlin")
    assert not s.has_seconds
    assert local("Europe/Berlin", s.next_after(at("Europe/Berlin", after))) == expected


def test_day_of_month_or_day_of_week() -> None:
    # POSIX: both restricted means either matches. 2025-06-13 is a Friday.
    assert fires("0 12 13 * fri", "UTC", "2025-06-01T00:00:00", "2025-06-21T00:00:00") == [
        "2025-06-06T12:00:00+00:00",
        "2025-06-13T12:00:00+00:00",
        "2025-06-20T12:00:00+00:00",
    ]


def test_parse_is_cached_and_schedules_are_frozen() -> None:
    a = CronSchedule.parse("*/5 * * * *", "Europe/Berlin")
    assert CronSchedule.parse("*/5 * * * *", "Europe/Berlin") is a
    assert CronSchedule.parse("*/5 * * * *", "UTC") is not a
    assert a == CronSchedule.parse("*/5 * * * *", "Europe/Berlin")
    with pytest.raises(dataclasses.FrozenInstanceError):
        a.expr = "* * * * *"  # type: ignore[misc]
    # Sharing is safe: queries never move a shared position.
    x = utc("2025-06-01T10:07:00")
    a.fires_between(x, x + DAY_MS, 50)
    assert a.next_after(x) == utc("2025-06-01T10:10:00")


def test_fires_between_bounds_and_limit() -> None:
    s = CronSchedule.parse("0 * * * *")
    t0 = utc("2025-06-01T10:00:00")
    assert s.fires_between(t0, t0 + 3 * HOUR_MS, 100) == [t0 + HOUR_MS, t0 + 2 * HOUR_MS, t0 + 3 * HOUR_MS]
    assert s.fires_between(t0 - 1, t0 + HOUR_MS - 1, 100) == [t0]
    assert s.fires_between(t0, t0 + 10 * HOUR_MS, 2) == [t0 + HOUR_MS, t0 + 2 * HOUR_MS]
    assert s.fires_between(t0, t0 + 10 * HOUR_MS, 0) == []
    assert s.fires_between(t0, t0, 5) == []
    assert s.fires_between(t0, t0 + HOUR_MS - 1, 5) == []


def test_no_fire_after_the_end_of_the_calendar() -> None:
    s = CronSchedule.parse("0 0 1 1 *")
    last = s.next_after(utc("9999-06-01T00:00:00") - 400 * DAY_MS)
    assert last == utc("9999-01-01T00:00:00")
    with pytest.raises(InvalidSpec, match="no fire after"):
        s.next_after(last)
    assert s.fires_between(last - 1, last + 10 * DAY_MS, 10) == [last]


def test_preview_lists_utc_and_local_times() -> None:
    got = preview("30 2 * * *", "Europe/Berlin", utc("2025-03-28T12:00:00"), 3)
    assert got == [
        (utc("2025-03-29T01:30:00"), "2025-03-29T02:30:00+01:00"),
        (utc("2025-03-30T01:00:00"), "2025-03-30T03:00:00+02:00"),
        (utc("2025-03-31T00:30:00"), "2025-03-31T02:30:00+02:00"),
    ]
    with pytest.raises(InvalidSpec) as info:
        preview("30 2 * * *", "Europe/Berlin", 0, 0)
    assert info.value.field == "count"


# --------------------------------------------------------------------------- real zones


@dataclasses.dataclass(frozen=True)
class Zone:
    name: str
    # (the last second before, and the first second after, each 2025 transition), as local ISO strings
    transitions: tuple[tuple[str, str], ...]
    gap_job: str | None  # a fixed-hour daily job whose wall time falls in the spring-forward gap
    gap_date: str  # the local date of the gap
    gap_fire: str  # where that job runs on that date: the end of the gap
    repeat_job: str | None  # a fixed-hour daily job whose wall time occurs twice on fall-back
    repeat_first: str  # its first occurrence (the only fire)
    fall_back_window: tuple[str, str]  # a local window (first pass) around the repeated period


ZONES = [
    Zone(
        "Europe/Berlin",
        (
            ("2025-03-30T01:59:59+01:00", "2025-03-30T03:00:00+02:00"),
            ("2025-10-26T02:59:59+02:00", "2025-10-26T02:00:00+01:00"),
        ),
        "30 2 * * *",
        "2025-03-30",
        "2025-03-30T03:00:00+02:00",
        "30 2 * * *",
        "2025-10-26T02:30:00+02:00",
        ("2025-10-26T00:00:00", "2025-10-26T05:00:00"),
    ),
    Zone(
        "America/New_York",
        (
            ("2025-03-09T01:59:59-05:00", "2025-03-09T03:00:00-04:00"),
            ("2025-11-02T01:59:59-04:00", "2025-11-02T01:00:00-05:00"),
        ),
        "30 2 * * *",
        "2025-03-09",
        "2025-03-09T03:00:00-04:00",
        "30 1 * * *",
        "2025-11-02T01:30:00-04:00",
        ("2025-11-01T23:00:00", "2025-11-02T04:00:00"),
    ),
    Zone(
        # A 30-minute shift: back 02:00 -> 01:30 in April, forward 02:00 -> 02:30 in October.
        "Australia/Lord_Howe",
        (
            ("2025-04-06T01:59:59+11:00", "2025-04-06T01:30:00+10:30"),
            ("2025-10-05T01:59:59+10:30", "2025-10-05T02:30:00+11:00"),
        ),
        "15 2 * * *",
        "2025-10-05",
        "2025-10-05T02:30:00+11:00",
        "45 1 * * *",
        "2025-04-06T01:45:00+11:00",
        ("2025-04-05T23:00:00", "2025-04-06T04:00:00"),
    ),
    Zone(
        # Changes at local midnight: back 24:00 -> 23:00 (Apr 5), forward 24:00 -> 01:00 (Sep 7).
        "America/Santiago",
        (
            ("2025-04-05T23:59:59-03:00", "2025-04-05T23:00:00-04:00"),
            ("2025-09-06T23:59:59-04:00", "2025-09-07T01:00:00-03:00"),
        ),
        "0 0 * * *",
        "2025-09-07",
        "2025-09-07T01:00:00-03:00",
        "30 23 * * *",
        "2025-04-05T23:30:00-03:00",
        ("2025-04-05T20:00:00", "2025-04-06T03:00:00"),
    ),
    Zone("Asia/Shanghai", (), None, "", "", None, "", ("2025-10-26T00:00:00", "2025-10-26T05:00:00")),
]
DST_ZONES = [z for z in ZONES if z.transitions]
ZONE_IDS = [z.name for z in ZONES]
DST_IDS = [z.name for z in DST_ZONES]
YEAR_2025 = (utc("2025-01-01T00:00:00"), utc("2026-01-01T00:00:00"))


@pytest.mark.parametrize("zone", ZONES, ids=ZONE_IDS)
def test_the_assumed_2025_transitions_are_the_real_ones(zone: Zone) -> None:
    seen = [
        (local(zone.name, t * 1000 - SECOND_MS), local(zone.name, t * 1000))
        for t, _, _ in transitions(zone.name, *YEAR_2025)
    ]
    assert seen == list(zone.transitions)


@pytest.mark.parametrize("zone", DST_ZONES, ids=DST_IDS)
def test_fixed_hour_job_in_the_gap_runs_once_at_the_end_of_the_gap(zone: Zone) -> None:
    assert zone.gap_job is not None
    day = dt.date.fromisoformat(zone.gap_date)
    got = fires(zone.gap_job, zone.name, f"{day - dt.timedelta(days=2)}T12:00:00", f"{day}T23:59:59")
    on_the_day = [f for f in got if f.startswith(zone.gap_date)]
    assert on_the_day == [zone.gap_fire]
    assert len(got) == 2  # and once on the day before, as usual


@pytest.mark.parametrize("zone", DST_ZONES, ids=DST_IDS)
def test_fixed_hour_job_in_the_repeated_period_runs_once_at_the_first_occurrence(zone: Zone) -> None:
    assert zone.repeat_job is not None
    date = zone.repeat_first[:10]
    day = dt.date.fromisoformat(date)
    got = fires(
        zone.repeat_job,
        zone.name,
        f"{day - dt.timedelta(days=1)}T00:00:00",
        f"{day + dt.timedelta(days=1)}T23:59:59",
    )
    assert [f for f in got if f.startswith(date)] == [zone.repeat_first]
    assert len(got) == 3


@pytest.mark.parametrize("expr", ["*/30 * * * *", "* * * * *", "* * * * * */20", "30 * * * *"])
@pytest.mark.parametrize("zone", ZONES, ids=ZONE_IDS)
def test_frequent_jobs_across_fall_back_never_repeat_a_wall_time(zone: Zone, expr: str) -> None:
    start, end = (at(zone.name, iso) for iso in zone.fall_back_window)
    got = CronSchedule.parse(expr, zone.name).fires_between(start, end, 100_000)
    assert got == sorted(set(got))
    walls = [wall(zone.name, f) for f in got]
    assert len(walls) == len(set(walls))
    # Exactly the wall times that match, each once: no hole other than the repeated period's second pass.
    step = {"*/30 * * * *": 30 * MINUTE_MS, "* * * * *": MINUTE_MS, "* * * * * */20": 20 * SECOND_MS}
    if expr in step:
        w0, w1 = (dt.datetime.fromisoformat(iso) for iso in zone.fall_back_window)
        assert len(got) == (w1 - w0) // dt.timedelta(milliseconds=step[expr])


def test_berlin_fall_back_matches_the_declared_examples() -> None:
    z = "Europe/Berlin"
    assert fires("*/30 * * * *", z, "2025-10-26T01:45:00", "2025-10-26T03:30:00") == [
        "2025-10-26T02:00:00+02:00",
        "2025-10-26T02:30:00+02:00",
        "2025-10-26T03:00:00+01:00",
        "2025-10-26T03:30:00+01:00",
    ]
    assert fires("30 2 * * *", z, "2025-10-25T00:00:00", "2025-10-27T23:00:00") == [
        "2025-10-25T02:30:00+02:00",
        "2025-10-26T02:30:00+02:00",
        "2025-10-27T02:30:00+01:00",
    ]


def test_berlin_spring_forward_matches_the_declared_examples() -> None:
    z = "Europe/Berlin"
    assert fires("30 * * * *", z, "2025-03-30T01:00:00", "2025-03-30T04:00:00") == [
        "2025-03-30T01:30:00+01:00",
        "2025-03-30T03:30:00+02:00",
    ]
    # Several matches inside one gap collapse into one fire at its end; 03:00 itself is the same instant.
    assert fires("*/15 2,3 * * *", z, "2025-03-30T01:00:00", "2025-03-30T03:20:00") == [
        "2025-03-30T03:00:00+02:00",
        "2025-03-30T03:15:00+02:00",
    ]
    # A restricted hour field moves; `*` skips.
    assert fires("30 0-5 * * *", z, "2025-03-30T01:00:00", "2025-03-30T04:00:00") == [
        "2025-03-30T01:30:00+01:00",
        "2025-03-30T03:00:00+02:00",
        "2025-03-30T03:30:00+02:00",
    ]
    # With seconds the job runs at the end of the gap itself (croniter alone would say 03:00:15).
    assert fires("30 2 * * * 15", z, "2025-03-30T00:00:00", "2025-03-30T23:00:00") == [
        "2025-03-30T03:00:00+02:00"
    ]


def test_santiago_midnight_job_runs_once_on_both_transition_days() -> None:
    z = "America/Santiago"
    assert fires("0 0 * * *", z, "2025-09-05T12:00:00", "2025-09-08T12:00:00") == [
        "2025-09-06T00:00:00-04:00",
        "2025-09-07T01:00:00-03:00",  # 00:00 does not exist on Sep 7: the end of the gap
        "2025-09-08T00:00:00-03:00",
    ]
    assert fires("0 0 * * *", z, "2025-04-04T12:00:00", "2025-04-07T12:00:00") == [
        "2025-04-05T00:00:00-03:00",
        "2025-04-06T00:00:00-04:00",
        "2025-04-07T00:00:00-04:00",
    ]


def test_next_after_inside_the_repeated_period_is_stateless() -> None:
    z = "Europe/Berlin"
    every_30 = CronSchedule.parse("*/30 * * * *", z)
    # First pass through 02:00-03:00 (+02:00): the next half hour.
    assert local(z, every_30.next_after(at(z, "2025-10-26T02:10:00", fold=0))) == "2025-10-26T02:30:00+02:00"
    # Second pass (+01:00): 02:30 already ran during the first pass, so 03:00.
    assert local(z, every_30.next_after(at(z, "2025-10-26T02:10:00", fold=1))) == "2025-10-26T03:00:00+01:00"
    daily = CronSchedule.parse("30 2 * * *", z)
    assert local(z, daily.next_after(at(z, "2025-10-26T02:40:00", fold=0))) == "2025-10-27T02:30:00+01:00"
    assert local(z, daily.next_after(at(z, "2025-10-26T02:10:00", fold=1))) == "2025-10-27T02:30:00+01:00"
    seconds = CronSchedule.parse("* * * * * *", z)
    assert local(z, seconds.next_after(at(z, "2025-10-26T02:10:00", fold=1))) == "2025-10-26T03:00:00+01:00"


@pytest.mark.parametrize("expr", ["0 0 * * *", "30 2 * * *", "15 2 * * *", "45 1 * * *", "30 23 * * *"])
@pytest.mark.parametrize("zone", ZONES, ids=ZONE_IDS)
def test_daily_job_fires_once_per_local_date_for_a_year(zone: Zone, expr: str) -> None:
    got = CronSchedule.parse(expr, zone.name).fires_between(
        at(zone.name, "2024-12-31T23:59:59"), at(zone.name, "2025-12-31T23:59:59"), 1000
    )
    dates = [wall(zone.name, f).date() for f in got]
    assert dates == [dt.date(2025, 1, 1) + dt.timedelta(days=i) for i in range(365)]
    assert got == sorted(set(got))


def test_shanghai_is_plain() -> None:
    z = "Asia/Shanghai"
    assert fires("30 2 * * *", z, "2025-03-29T00:00:00", "2025-03-31T00:00:00") == [
        "2025-03-29T02:30:00+08:00",
        "2025-03-30T02:30:00+08:00",
    ]
    assert len(fires("*/30 * * * *", z, "2025-10-26T00:00:00", "2025-10-27T00:00:00")) == 48


# --------------------------------------------------------------------------- property


POOL = [
    "30 2 * * *",
    "0 0 * * *",
    "30 23 * * *",
    "45 1 * * *",
    "15 2 * * *",
    "*/30 * * * *",
    "30 * * * *",
    "* * * * *",
    "15,45 1-3 * * *",
    "0 */2 * * *",
    "*/15 2 * * *",
    "0 0-2,23 * * *",
    "*/7 0-3 * * *",
    "* * * * * */20",
    "30 1 * * * 10",
]
RANGE_2024_2027 = (utc("2024-01-01T00:00:00"), utc("2028-01-01T00:00:00"))
TRANSITIONS = {z.name: [t * 1000 for t, _, _ in transitions(z.name, *RANGE_2024_2027)] for z in ZONES}


def _field_values(text: str, low: int, high: int) -> set[int]:
    """A dumb cron field matcher for the pool: '*', '*/n', 'a', 'a-b', 'a-b/n' and comma lists."""
    out: set[int] = set()
    for part in text.split(","):
        rng, _, step = part.partition("/")
        a, b = (low, high) if rng == "*" else (int(rng.split("-")[0]), int(rng.split("-")[-1]))
        out.update(range(a, b + 1, int(step or 1)))
    return out


def oracle(expr: str, zone: str, after_ms: int, until_ms: int) -> list[int]:
    """The policy, by brute force over every second/minute instant (pool expressions only)."""
    fields = expr.split()
    minutes, hours = _field_values(fields[0], 0, 59), _field_values(fields[1], 0, 23)
    seconds = _field_values(fields[5], 0, 59) if len(fields) == 6 else {0}
    step = 1 if len(fields) == 6 else 60
    tz = zoneinfo.ZoneInfo(zone)

    def matches(w: dt.datetime) -> bool:
        return w.second in seconds and w.minute in minutes and w.hour in hours

    out: set[int] = set()
    for s in range(after_ms // 1000 // step * step, until_ms // 1000 + 1, step):
        aware = dt.datetime.fromtimestamp(s, tz)
        second_pass = aware.fold == 1 and aware.replace(fold=0).utcoffset() != aware.utcoffset()
        if matches(aware.replace(tzinfo=None)) and not second_pass:
            out.add(s * 1000)
    if fields[1] != "*":  # a match inside a gap runs at the end of the gap
        for t, old, new in transitions(zone, after_ms - DAY_MS, until_ms + DAY_MS):
            gap_start = dt.datetime.fromtimestamp(t, dt.UTC).replace(tzinfo=None) + dt.timedelta(seconds=old)
            gap = (gap_start + dt.timedelta(seconds=k) for k in range(0, max(new - old, 0), step))
            if any(matches(w) for w in gap):
                out.add(t * 1000)
    return sorted(f for f in out if after_ms < f <= until_ms)


@st.composite
def start_times(draw: st.DrawFn, zone: str) -> int:
    """Mostly shortly before a transition of the zone (so windows cross it), else anywhere in 2024-2027."""
    near = TRANSITIONS[zone]
    anywhere = draw(st.integers(0, 3)) == 0
    if near and not anywhere:
        return draw(st.sampled_from(near)) + draw(st.integers(-6 * HOUR_MS, HOUR_MS))
    return draw(st.integers(*RANGE_2024_2027))


@st.composite
def cases(draw: st.DrawFn) -> tuple[str, str, int]:
    zone = draw(st.sampled_from(ZONE_IDS))
    return zone, draw(st.sampled_from(POOL)), draw(start_times(zone))


def successive(schedule: CronSchedule, start: int, n: int) -> Iterator[int]:
    t = start
    for _ in range(n):
        t = schedule.next_after(t)
        yield t


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(cases(), st.integers(1, 60_000))
def test_next_after_is_consistent(case: tuple[str, str, int], nudge: int) -> None:
    zone, expr, start = case
    schedule = CronSchedule.parse(expr, zone)
    seq = list(successive(schedule, start, 40))
    assert all(a < b for a, b in zip([start, *seq], seq, strict=False))
    assert all(f % SECOND_MS == 0 for f in seq)
    assert schedule.fires_between(start, seq[-1], 1000) == seq
    walls = [wall(zone, f) for f in seq]
    assert len(set(walls)) == len(walls)
    # Stateless: from any instant between two fires, the next one.
    for prev, nxt in zip([start, *seq], seq, strict=False):
        probe = min(prev + nudge, nxt - 1)
        if probe > prev:
            assert schedule.next_after(probe) == nxt


@st.composite
def oracle_cases(draw: st.DrawFn) -> tuple[str, str, int, int]:
    """(zone, expr, after, until): a window that mostly contains one of the zone's transitions."""
    zone = draw(st.sampled_from(ZONE_IDS))
    expr = draw(st.sampled_from(POOL))
    span = 2 * HOUR_MS if len(expr.split()) == 6 else 2 * DAY_MS
    near = TRANSITIONS[zone]
    anywhere = draw(st.integers(0, 3)) == 0
    if near and not anywhere:
        start = draw(st.sampled_from(near)) - draw(st.integers(1, span))
    else:
        start = draw(st.integers(*RANGE_2024_2027))
    return zone, expr, start, start + span


@settings(max_examples=100, deadline=None)
@given(oracle_cases())
def test_fires_match_a_brute_force_oracle(case: tuple[str, str, int, int]) -> None:
    zone, expr, after, until = case
    assert CronSchedule.parse(expr, zone).fires_between(after, until, 100_000) == oracle(
        expr, zone, after, until
    )


@pytest.mark.parametrize("expr", POOL)
@pytest.mark.parametrize("zone", DST_ZONES, ids=DST_IDS)
def test_every_2025_transition_matches_the_oracle(zone: Zone, expr: str) -> None:
    schedule = CronSchedule.parse(expr, zone.name)
    half = HOUR_MS if schedule.has_seconds else DAY_MS
    for t, _, _ in transitions(zone.name, *YEAR_2025):
        after, until = t * 1000 - half, t * 1000 + half
        assert schedule.fires_between(after, until, 100_000) == oracle(expr, zone.name, after, until)
