"""Calendar exclusion against a dumb oracle: a fire is accounted ``skipped_calendar`` iff its local
date, in the calendar's zone as the tz database (zoneinfo) gives it, is one of the calendar's days.

The state machine decides from the offsets the leader expanded into the calendar; the oracle
converts each nominal time with zoneinfo directly. Zones with DST, half-hour offsets, a day
skipped (Samoa, 2011-12-30) and none at all; nominal times around local midnights included.
"""

from __future__ import annotations

import datetime as dt
import functools
import zoneinfo

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftsched import codec
from raftsched.fsm import keys
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import ManualTrigger, Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.timing import calendar as cal
from raftsched.v1 import log_pb2 as pb

ZONES = ["UTC", "Europe/Berlin", "America/New_York", "Asia/Kolkata", "Australia/Lord_Howe", "Pacific/Apia"]
T0 = int(dt.datetime(2011, 1, 1, tzinfo=dt.UTC).timestamp() * 1000)
SPAN_DAYS = 6000  # about 16 years from T0
DAY = 86_400_000


@functools.cache
def offsets(zone: str) -> tuple[list[int], list[int]]:
    return cal.zone_offsets(zone)


def local_day(at_ms: int, zone: str) -> int:
    return cal.day_number(dt.datetime.fromtimestamp(at_ms / 1000, zoneinfo.ZoneInfo(zone)).date())


@st.composite
def scenario(draw: st.DrawFn) -> tuple[str, list[int], int, list[int]]:
    zone = draw(st.sampled_from(ZONES))
    base = cal.day_number(dt.date(2011, 1, 1))
    days = draw(st.lists(st.integers(base, base + SPAN_DAYS), min_size=0, max_size=30, unique=True))
    weekdays = draw(st.integers(0, 127))
    if not days and not weekdays:
        weekdays = 1
    # Nominal times: anywhere, or within a minute of a listed day's local midnight.
    anywhere = st.integers(T0 + 1, T0 + SPAN_DAYS * DAY)
    near_edges = (
        st.tuples(st.sampled_from(days), st.integers(-60_000, 60_000), st.booleans()).map(
            lambda t: _local_midnight(t[0] + (1 if t[2] else 0), zone) + t[1]
        )
        if days
        else anywhere
    )
    times = draw(st.lists(st.one_of(anywhere, near_edges), min_size=1, max_size=25, unique=True))
    return zone, sorted(days), weekdays, sorted(t for t in times if t > T0)


def _local_midnight(day: int, zone: str) -> int:
    date = cal.date_of(day)
    local = dt.datetime(date.year, date.month, date.day, tzinfo=zoneinfo.ZoneInfo(zone))
    return int(local.timestamp() * 1000)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario())
def test_a_fire_is_skipped_iff_its_local_date_is_a_day_of_the_calendar(
    case: tuple[str, list[int], int, list[int]],
) -> None:
    zone, days, weekdays, times = case
    if not times:
        return
    state = SchedulerState.load(MemoryStore())
    transitions, offs = offsets(zone)
    cmd = pb.Command(epoch=1, now_ms=T0, origin="n1")
    cmd.set_calendar.spec.CopyFrom(pb.CalendarSpec(name="cal", dates=days, weekdays=weekdays, zone=zone))
    cmd.set_calendar.transition_ms.extend(transitions)
    cmd.set_calendar.offset_s.extend(offs)
    assert state.apply(codec.encode_command(cmd)).result.ok
    spec = TaskSpec("t", ManualTrigger(), command="true", overlap=Overlap.ALLOW, exclude=("cal",))
    assert state.apply(
        writes.create_task(spec, disabled=False, now_ms=T0, epoch=1, origin="n1", key="")
    ).result.ok
    now = times[-1]
    fire_batch = pb.Command(epoch=1, now_ms=now, origin="n1")
    fire_batch.fire_batch.tasks.add(
        task="t", version=1, fires=[pb.Fire(nominal_ms=t, outcome=pb.FIRED) for t in times], watermark_ms=now
    )
    assert state.apply(codec.encode_command(fire_batch)).result.ok
    lo, hi = keys.per_task_prefix(keys.FIRE, "t"), keys.per_task_end(keys.FIRE, "t")
    records = {r.nominal_ms: r for r in (pb.FireRecord.FromString(v) for _, v in state.store.scan(lo, hi))}
    day_set = set(days)
    for t in times:
        day = local_day(t, zone)
        expected = day in day_set or bool(weekdays >> cal.weekday_of(day) & 1)
        outcome = records[t].outcome
        assert (outcome == pb.SKIPPED_CALENDAR) == expected, (zone, t, cal.date_of(day), outcome)
        if expected:
            assert records[t].calendar == "cal"
