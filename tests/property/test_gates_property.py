"""Wall-clock not_before gates against a zoneinfo oracle: the leader-expanded offsets give the
instant the tz database gives, with the cron DST policy (a repeated time: its first occurrence; a
skipped one: the end of the gap)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from hypothesis import given, settings
from hypothesis import strategies as st

from raftsched.timing.calendar import zone_offsets
from raftsched.timing.gates import Zone, gate_ms

ZONES = ("Europe/Berlin", "America/New_York", "Australia/Lord_Howe", "Asia/Kolkata", "UTC")
_BUILT = {name: Zone.build(name, *zone_offsets(name)) for name in ZONES}


def oracle(zone: str, logical_ms: int, hour: int, minute: int) -> int:
    tz = ZoneInfo(zone)
    date = datetime.fromtimestamp(logical_ms / 1000, tz).date()
    naive = datetime(date.year, date.month, date.day, hour, minute)
    first = naive.replace(tzinfo=tz, fold=0)
    second = naive.replace(tzinfo=tz, fold=1)
    candidates = [
        t for t in (first, second) if t.astimezone(UTC).astimezone(tz).replace(tzinfo=None) == naive
    ]
    if candidates:
        return min(int(t.astimezone(UTC).timestamp() * 1000) for t in candidates)
    # In a gap: the first instant whose local time is past the wall time (the transition).
    lo = int(first.astimezone(UTC).timestamp()) - 3 * 3600
    at = datetime.fromtimestamp(lo, UTC)
    while at.astimezone(tz).replace(tzinfo=None) < naive:
        at += timedelta(minutes=1)
    return int(at.timestamp() * 1000)


@settings(max_examples=300, deadline=None)
@given(
    zone=st.sampled_from(ZONES),
    logical_ms=st.integers(946_684_800_000, 4_102_444_800_000),  # 2000 .. 2100
    hour=st.integers(0, 23),
    minute=st.sampled_from((0, 15, 30, 45, 59)),
)
def test_a_wall_gate_is_the_tz_databases_instant_with_the_dst_policy(
    zone: str, logical_ms: int, hour: int, minute: int
) -> None:
    got = gate_ms(f"{hour:02d}:{minute:02d}", logical_ms, _BUILT[zone])
    assert got == oracle(zone, logical_ms, hour, minute)


_TRANSITIONS = [
    (name, t)
    for name, z in _BUILT.items()
    for t in z.transitions_ms
    if 946_684_800_000 <= t <= 4_102_444_800_000
]


@settings(max_examples=300, deadline=None)
@given(
    at=st.sampled_from(_TRANSITIONS),
    before_h=st.integers(-30, 30),
    hour=st.integers(0, 23),
    minute=st.sampled_from((0, 1, 15, 30, 45, 59)),
)
def test_days_with_a_transition_follow_the_policy(
    at: tuple[str, int], before_h: int, hour: int, minute: int
) -> None:
    zone, transition = at
    logical_ms = transition + before_h * 3_600_000  # the transition's day, the day before or after
    got = gate_ms(f"{hour:02d}:{minute:02d}", logical_ms, _BUILT[zone])
    assert got == oracle(zone, logical_ms, hour, minute)
