"""raftsched's cron evaluation against an independent implementation (cronsim, used only here).

Random expressions from the shared grammar - numbers, names, ``*``, ranges (one-value ranges
included), steps, lists, ``L``, ``d#k``, ``dL``, seconds - in UTC and in a fixed-offset zone, several
hundred fires each. cronsim follows Debian cron's day rule (OR when both day fields are restricted,
a field starting with ``*`` is unrestricted), which is the rule raftsched declares. Zones without
DST keep the comparison free of the DST policy, where the two differ by design.
"""

from __future__ import annotations

import datetime as dt
import zoneinfo

from croniter import croniter
from cronsim import CronSim
from cronsim.cronsim import CronSimError
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from raftsched.errors import InvalidSpec
from raftsched.timing.cron import CronSchedule, meaning_change

FIRES = 300
# cronsim gives up 50 years after its start; stay inside that.
HORIZON = dt.timedelta(days=40 * 365)
ZONES = ("UTC", "Etc/GMT+5")  # Etc/GMT+5 is UTC-05:00 all year
MONTHS = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
DAYS = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")


def _value(draw: st.DrawFn, low: int, high: int, names: tuple[str, ...], base: int) -> tuple[int, str]:
    v = draw(st.integers(low, high))
    if names and v - base < len(names) and draw(st.booleans()):
        return v, names[v - base]
    return v, str(v)


@st.composite
def element(draw: st.DrawFn, low: int, high: int, names: tuple[str, ...] = (), base: int = 0) -> str:
    kind = draw(st.sampled_from(["value", "value", "range", "one-value range", "star step", "range step"]))
    if kind == "value":
        return _value(draw, low, high, names, base)[1]
    if kind == "star step":
        return f"*/{draw(st.integers(1, high - low + 1))}"
    a, a_text = _value(draw, low, high, names, base)
    if kind == "one-value range":
        return f"{a_text}-{a_text}"
    if kind == "range step" and a < high:
        # cronsim reads a one-value range with a step ('0-0/1') as 'a/step', so the end is above 'a'.
        _, b_text = _value(draw, a + 1, high, names, base)
        return f"{a_text}-{b_text}/{draw(st.integers(1, high - low + 1))}"
    _, b_text = _value(draw, a, high, names, base)
    return f"{a_text}-{b_text}"


@st.composite
def plain_field(draw: st.DrawFn, low: int, high: int, names: tuple[str, ...] = (), base: int = 0) -> str:
    if draw(st.integers(0, 3)) == 0:
        return "*"
    items = draw(st.lists(element(low, high, names, base), min_size=1, max_size=3))
    return ",".join(items)


@st.composite
def dom_field(draw: st.DrawFn) -> str:
    text = draw(plain_field(1, 31))
    if text != "*" and draw(st.integers(0, 4)) == 0:
        text += ",L"
    elif draw(st.integers(0, 9)) == 0:
        text = "L"
    return text


@st.composite
def dow_field(draw: st.DrawFn) -> str:
    special = draw(st.integers(0, 5))
    if special == 0:
        return f"{draw(st.sampled_from(DAYS))}#{draw(st.integers(1, 5))}"
    if special == 1:
        return f"{draw(st.integers(0, 6))}L"
    # 7 is Sunday as well
    return draw(plain_field(0, 7, DAYS, 0))


@st.composite
def expressions(draw: st.DrawFn) -> str:
    fields = [
        draw(plain_field(0, 59)),
        draw(plain_field(0, 23)),
        draw(dom_field()),
        draw(plain_field(1, 12, MONTHS, 1)),
        draw(dow_field()),
    ]
    if draw(st.integers(0, 4)) == 0:
        fields.append(draw(plain_field(0, 59)))  # raftsched: seconds last
    return " ".join(fields)


def cronsim_fires(expr: str, zone: str, start: dt.datetime) -> list[int] | None:
    """Up to FIRES fires after ``start`` by cronsim (seconds first there), or None if it refuses."""
    fields = expr.split()
    if len(fields) == 6:
        fields.insert(0, fields.pop())
    local = start.astimezone(zoneinfo.ZoneInfo(zone))
    try:
        sim = CronSim(" ".join(fields), local)
    except CronSimError:  # cronsim refuses an impossible day: nothing to compare
        return None
    out: list[int] = []
    end = start + HORIZON
    for fire in sim:
        if fire > end or len(out) == FIRES:
            break
        out.append(int(fire.timestamp()) * 1000)
    return out


@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    expressions(),
    st.datetimes(dt.datetime(2000, 1, 1), dt.datetime(2040, 1, 1)).map(
        lambda d: d.replace(microsecond=0, tzinfo=dt.UTC)
    ),
)
# Found by this test: croniter read the list '2,...,31,l' (31 entries) as '*', so every 1st fired.
@example("* * 2-31,L * sun#1 *", dt.datetime(2000, 12, 31, 23, 58, tzinfo=dt.UTC))
@example("0 0 2-31,L * * 0", dt.datetime(2001, 1, 1, tzinfo=dt.UTC))
def test_fires_agree_with_cronsim(expr: str, start: dt.datetime) -> None:
    after_ms = int(start.timestamp()) * 1000
    for zone in ZONES:
        expected = cronsim_fires(expr, zone, start)
        if expected is None:
            continue
        try:
            schedule = CronSchedule.parse(expr, zone)
        except InvalidSpec as refused:  # refused up front where cronsim just never fires
            assert "never matches" in refused.reason and expected == [], (expr, zone)
            continue
        until_ms = int((start + HORIZON).timestamp()) * 1000
        got = schedule.fires_between(after_ms, until_ms, FIRES)
        assert got == expected, (expr, zone)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expressions())
# Found by this test: a day-of-month list covering every day with '#' in day-of-week, which the
# field comparison did not model; the fire comparison backstop flags it.
@example("* * 1,*/1 * sun#1 *")
def test_stored_expressions_stay_valid_and_unflagged_ones_keep_their_fires(expr: str) -> None:
    """Anything the old croniter reading accepted is still accepted - unless crontab's day rule
    leaves no date, which is flagged - and an expression ``meaning_change`` does not flag fires as
    it did before."""
    try:
        old = croniter(expr, 946_684_800.0)  # how earlier versions read the expression
        old_fires = [int(old.get_next(float)) * 1000 for _ in range(50)]
    except (ValueError, TypeError):
        return
    try:
        schedule = CronSchedule.parse(expr, "UTC")
    except InvalidSpec as refused:
        # Only a day combination that crontab's rule makes unsatisfiable, and it is flagged.
        assert "never matches" in refused.reason
        change = meaning_change(expr)
        assert change is not None and "no date satisfies it now" in change
        return
    if meaning_change(expr) is None:
        assert schedule.fires_between(946_684_800_000, old_fires[-1], 50) == old_fires
