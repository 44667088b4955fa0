"""Calendars: the day maths (dates, weekday rules, zones, DST day boundaries) and the state machine's
``skipped_calendar`` decision, refusals, deletion rule and determinism."""

from __future__ import annotations

import datetime as dt
import zoneinfo
from collections.abc import Sequence

import pytest

from raftsched.errors import InvalidSpec
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.timing import calendar as cal
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import apply, batch, create, entry, fire, fires_of, fresh, runs_of

T0 = 1_767_225_600_000  # 2026-01-01T00:00:00Z, a Thursday


def ms(text: str, zone: str = "UTC") -> int:
    """Epoch ms of a local wall time ``YYYY-MM-DDTHH:MM`` in ``zone``."""
    local = dt.datetime.fromisoformat(text).replace(tzinfo=zoneinfo.ZoneInfo(zone))
    return int(local.timestamp() * 1000)


def build(dates: Sequence[str] = (), weekdays: str = "", zone: str = "UTC", name: str = "c") -> cal.Calendar:
    transitions, offsets = cal.zone_offsets(zone)
    days = sorted({cal.day_number(dt.date.fromisoformat(d)) for d in dates})
    return cal.Calendar.build(
        name, days, cal.parse_weekdays(weekdays) if weekdays else 0, zone, transitions, offsets
    )


# ------------------------------------------------------------------------------------- maths


def test_weekday_rules_parse_ranges_lists_wraps_and_full_names() -> None:
    assert cal.parse_weekdays("mon-fri") == 0b0011111
    assert cal.parse_weekdays("sat,sun") == 0b1100000
    assert cal.parse_weekdays("fri-mon") == 0b1110001
    assert cal.parse_weekdays("Monday, wed") == 0b0000101
    assert cal.weekdays_text(0b0011111) == "mon-fri"
    assert cal.weekdays_text(0b1100000) == "sat,sun"
    assert cal.weekdays_text(0b1010101) == "mon,wed,fri,sun"
    for bad in ("", "mon-", "funday", "mon,,tue"):
        with pytest.raises(InvalidSpec):
            cal.parse_weekdays(bad)


def test_dates_file_accepts_comments_labels_and_ranges_and_names_the_bad_line() -> None:
    text = "# holidays 2026\n2026-12-25 Christmas\n\n2026-12-24..2026-12-26  # the days around\n2026-01-01\n"
    days = cal.parse_dates_text(text, "h.txt")
    assert [cal.date_of(d).isoformat() for d in days] == [
        "2026-01-01",
        "2026-12-24",
        "2026-12-25",
        "2026-12-26",
    ]
    with pytest.raises(InvalidSpec, match=r"h.txt:2.*not a date"):
        cal.parse_dates_text("2026-01-01\n2026-02-30\n", "h.txt")
    with pytest.raises(InvalidSpec, match=r"h.txt:1.*not a date"):
        cal.parse_dates_text("12/25/2026\n", "h.txt")
    with pytest.raises(InvalidSpec, match=r"ends before it starts"):
        cal.parse_dates_text("2026-12-26..2026-12-24\n", "h.txt")


def test_day_numbers_and_weekdays() -> None:
    assert cal.day_number(dt.date(1970, 1, 1)) == 0
    assert cal.weekday_of(0) == 3  # a Thursday
    assert cal.date_of(cal.day_number(dt.date(2026, 12, 25))) == dt.date(2026, 12, 25)
    assert cal.weekday_of(cal.day_number(dt.date(2026, 12, 25))) == 4  # a Friday


def test_a_date_is_its_local_day_in_the_calendars_zone_not_utc() -> None:
    tokyo = build(["2026-12-25"], zone="Asia/Tokyo")
    # 2026-12-24T15:00Z is midnight of the 25th in Tokyo (UTC+9): excluded; a second earlier is not.
    assert tokyo.excludes(ms("2026-12-24T15:00"))
    assert not tokyo.excludes(ms("2026-12-24T15:00") - 1)
    assert tokyo.excludes(ms("2026-12-25T14:59"))
    assert not tokyo.excludes(ms("2026-12-25T15:00"))
    utc = build(["2026-12-25"])
    assert not utc.excludes(ms("2026-12-24T15:00"))


@pytest.mark.parametrize(
    ("zone", "day", "hours"),
    [
        ("Europe/Berlin", "2026-03-29", 23),  # spring forward: a 23-hour day
        ("Europe/Berlin", "2026-10-25", 25),  # fall back: a 25-hour day
        ("America/New_York", "2026-03-08", 23),
        ("America/New_York", "2026-11-01", 25),
        ("Australia/Lord_Howe", "2026-04-05", 24.5),  # a half-hour DST shift
    ],
)
def test_dst_change_days_span_local_midnight_to_local_midnight(zone: str, day: str, hours: float) -> None:
    c = build([day], zone=zone)
    start = ms(f"{day}T00:00", zone)
    following = dt.date.fromisoformat(day) + dt.timedelta(days=1)
    end = ms(f"{following.isoformat()}T00:00", zone)
    assert (end - start) == hours * 3600 * 1000
    assert c.excludes(start) and c.excludes(end - 1)
    assert not c.excludes(start - 1) and not c.excludes(end)
    # Every hour of the long or short day is excluded, in UTC terms too.
    assert all(c.excludes(t) for t in range(start, end, 15 * 60 * 1000))


def test_offsets_agree_with_zoneinfo_across_two_centuries() -> None:
    zone = "America/Sao_Paulo"  # DST rules changed many times, then were abolished
    transitions, offsets = cal.zone_offsets(zone)
    c = cal.Calendar.build("x", [], 1, zone, transitions, offsets)
    tz = zoneinfo.ZoneInfo(zone)
    for year in range(1910, 2100, 7):
        for month in (1, 4, 7, 10):
            at = int(dt.datetime(year, month, 15, 12, tzinfo=dt.UTC).timestamp() * 1000)
            delta = dt.datetime.fromtimestamp(at / 1000, tz).utcoffset()
            assert delta is not None
            assert c.offset_at(at) == delta.total_seconds(), (year, month)


def test_utc_has_no_transitions_and_an_unknown_zone_is_refused() -> None:
    assert cal.zone_offsets("UTC") == ([], [0])
    with pytest.raises(InvalidSpec, match="zone"):
        cal.zone_offsets("Mars/Olympus")


def test_weekday_rules_use_the_local_weekday() -> None:
    weekend = build(weekdays="sat,sun", zone="Pacific/Auckland")
    # Friday 2026-01-02 23:30 UTC is already Saturday in Auckland (UTC+13 in January).
    assert weekend.excludes(ms("2026-01-02T23:30"))
    assert not weekend.excludes(ms("2026-01-02T10:00"))
    assert "sat" in weekend.why(ms("2026-01-02T23:30"))


def test_build_refuses_bad_structure() -> None:
    with pytest.raises(InvalidSpec, match="dates or weekdays"):
        cal.Calendar.build("x", [], 0, "UTC", [], [0])
    with pytest.raises(InvalidSpec, match="one more offset"):
        cal.Calendar.build("x", [1], 0, "UTC", [5], [0])
    with pytest.raises(InvalidSpec, match="ascending"):
        cal.Calendar.build("x", [1], 0, "UTC", [5, 5], [0, 1, 2])
    with pytest.raises(InvalidSpec, match="mask"):
        cal.Calendar.build("x", [1], 200, "UTC", [], [0])


# ------------------------------------------------------------------------------ state machine


def set_calendar(
    state: SchedulerState,
    name: str,
    dates: Sequence[str] = (),
    weekdays: str = "",
    zone: str = "UTC",
    now: int = T0,
) -> pb.CommandResult:
    spec = pb.CalendarSpec(
        name=name,
        dates=sorted({cal.day_number(dt.date.fromisoformat(d)) for d in dates}),
        weekdays=cal.parse_weekdays(weekdays) if weekdays else 0,
        zone=zone,
    )
    return apply(state, writes.set_calendar(spec, now_ms=now, epoch=1, origin="n1", key=""))


def delete_calendar(state: SchedulerState, name: str, now: int = T0) -> pb.CommandResult:
    return apply(state, writes.delete_calendar(state, name, now_ms=now, epoch=1, origin="n1", key=""))


DAILY_9 = CronTrigger("0 9 * * *", "Europe/Berlin")


def test_a_fire_on_an_excluded_day_is_accounted_skipped_calendar_with_the_name() -> None:
    state = fresh()
    assert set_calendar(state, "holidays", ["2026-01-02"], zone="Europe/Berlin").ok
    res = create(
        state,
        TaskSpec("report", DAILY_9, command="true", exclude=("holidays",), overlap=Overlap.ALLOW),
        now=T0,
    )
    assert res.ok, res.message
    day1, day2, day3 = (
        ms("2026-01-01T09:00", "Europe/Berlin"),
        ms("2026-01-02T09:00", "Europe/Berlin"),
        ms("2026-01-03T09:00", "Europe/Berlin"),
    )
    out = apply(
        state,
        batch(
            day3,
            entry(
                "report", 1, [fire(day1), fire(day2), fire(day3)], watermark=day3, next_fire=day3 + 86_400_000
            ),
        ),
    )
    assert out.ok and out.fired == 2 and out.accounted == 3
    recs = fires_of(state, "report")
    assert [r.outcome for r in recs] == [pb.FIRED, pb.SKIPPED_CALENDAR, pb.FIRED]
    assert recs[1].calendar == "holidays"
    assert "2026-01-02" in recs[1].reason and "holidays" in recs[1].reason
    assert len(runs_of(state, "report")) == 2


def test_a_task_excluding_an_unknown_calendar_is_refused() -> None:
    state = fresh()
    res = create(state, TaskSpec("t", DAILY_9, command="true", exclude=("nope",)), now=T0)
    assert not res.ok and res.code == "invalid_argument" and "'nope'" in res.message
    assert state.get_task("t") is None


def test_deleting_a_calendar_in_use_is_refused_listing_its_users() -> None:
    state = fresh()
    set_calendar(state, "weekend", weekdays="sat,sun")
    create(state, TaskSpec("a", DAILY_9, command="true", exclude=("weekend",)), now=T0)
    create(state, TaskSpec("b", DAILY_9, command="true", exclude=("weekend",)), now=T0)
    res = delete_calendar(state, "weekend")
    assert not res.ok and res.code == "conflict"
    assert "task a" in res.message and "task b" in res.message
    assert state.get_calendar("weekend") is not None
    assert state.calendar_users("weekend") == ["task a", "task b"]
    apply(state, writes.delete_task("a", now_ms=T0, epoch=1, origin="n1", key=""))
    apply(state, writes.delete_task("b", now_ms=T0, epoch=1, origin="n1", key=""))
    assert delete_calendar(state, "weekend").ok
    assert state.get_calendar("weekend") is None


def test_set_replaces_the_calendar_with_a_new_version_and_replicas_agree() -> None:
    a, b = fresh(), fresh()
    for state in (a, b):
        assert set_calendar(state, "h", ["2026-01-01"]).calendar.version == 1
        rec = set_calendar(state, "h", ["2026-01-02"], weekdays="sun", now=T0 + 5).calendar
        assert rec.version == 2 and rec.created_ms == T0 and rec.updated_ms == T0 + 5
    assert a.digest() == b.digest()
    restored = fresh()
    restored.restore(a.snapshot(), 0)
    assert restored.calendar_for("h") == a.calendar_for("h")


def test_set_calendar_refuses_bad_input_and_changes_nothing() -> None:
    state = fresh()
    with pytest.raises(InvalidSpec):
        writes.set_calendar(
            pb.CalendarSpec(name="x", zone="Nowhere/Zone", weekdays=1), now_ms=T0, epoch=1, origin="n", key=""
        )
    with pytest.raises(InvalidSpec):
        writes.set_calendar(pb.CalendarSpec(name="x"), now_ms=T0, epoch=1, origin="n", key="")
    # A hand-built command with inconsistent offsets is a rejection value in apply, not an exception.
    cmd = pb.Command(epoch=1, now_ms=T0, origin="n1")
    cmd.set_calendar.spec.CopyFrom(pb.CalendarSpec(name="x", weekdays=1))
    cmd.set_calendar.offset_s.extend([0, 3600])
    res = state.apply(cmd.SerializeToString()).result
    assert not res.ok and "offset" in res.message
    assert state.list_calendars() == []
