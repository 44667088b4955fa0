"""Calendars: named sets of local days (dates and weekdays) in a time zone, and their maths.

A task or workflow that ``exclude``\\ s a calendar does not run a fire whose nominal time falls,
*in the calendar's zone*, on one of the calendar's days; the fire is accounted
``skipped_calendar`` with the calendar's name.

Determinism: the state machine decides exclusions, and it may not consult a tz database (hosts
may carry different tzdata). So the leader expands the zone once, when the calendar is set, into
its UTC-offset transitions (:func:`zone_offsets`); the replicated :class:`Calendar` carries them,
and :meth:`Calendar.local_day` is arithmetic on them. Every replica computes the same local date
for the same nominal time, and changing tzdata on a host changes nothing until the calendar is set
again. Transitions are expanded from 1900 to 2200; after 2200 the last offset holds.

A day is the local calendar day: from local midnight to the next local midnight, whatever its
length (23 or 25 hours on DST change days). Pure, except :func:`zone_offsets`, which reads the
tz database (zoneinfo) and is called on the leader and by offline CLI previews only.
"""

from __future__ import annotations

import bisect
import datetime as _dt
import itertools
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from raftsched.errors import InvalidSpec

__all__ = [
    "FIRST_DAY",
    "LAST_DAY",
    "MAX_DATES",
    "WEEKDAYS",
    "Calendar",
    "date_of",
    "day_number",
    "parse_dates_text",
    "parse_weekdays",
    "weekday_of",
    "weekdays_text",
    "zone_offsets",
]

WEEKDAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
ALL_WEEKDAYS = 0b111_1111
MAX_DATES = 20_000
DAY_MS = 86_400_000
_EPOCH = _dt.date(1970, 1, 1)
_FIRST_DAY = (_dt.date(1, 1, 1) - _EPOCH).days
_LAST_DAY = (_dt.date(9999, 12, 31) - _EPOCH).days
FIRST_DAY, LAST_DAY = _FIRST_DAY, _LAST_DAY  # the range of a date (days since 1970-01-01)
# The span over which a zone's offsets are expanded (and the sampling step that finds changes:
# no zone changes its offset twice within 12 hours).
_EXPAND_FROM_S = int(_dt.datetime(1900, 1, 1, tzinfo=_dt.UTC).timestamp())
_EXPAND_TO_S = int(_dt.datetime(2200, 1, 1, tzinfo=_dt.UTC).timestamp())
_STEP_S = 12 * 3600
_DATE = re.compile(r"(\d{4})-(\d{2})-(\d{2})")


def day_number(date: _dt.date) -> int:
    """Days since 1970-01-01 (negative before it)."""
    return (date - _EPOCH).days


def date_of(day: int) -> _dt.date:
    """The date of day number ``day`` (see :func:`day_number`)."""
    return _EPOCH + _dt.timedelta(days=day)


def weekday_of(day: int) -> int:
    """Monday = 0 ... Sunday = 6 of day number ``day`` (1970-01-01 was a Thursday)."""
    return (day + 3) % 7


def parse_weekdays(text: str, field: str = "weekdays") -> int:
    """``mon-fri``, ``sat,sun``, ``mon-wed,fri``, ``fri-mon`` (wraps) → a bit mask (bit 0 = Monday).

    Names are the first three letters, any case; full names are accepted too. Raises InvalidSpec.
    """
    mask = 0
    parts = [p.strip() for p in text.split(",")]
    if not text.strip() or any(not p for p in parts):
        raise InvalidSpec(field, f"{text!r}: give weekdays like mon-fri or sat,sun")
    for part in parts:
        lo_text, dash, hi_text = part.partition("-")
        lo = _weekday(lo_text, field)
        hi = _weekday(hi_text, field) if dash else lo
        day = lo
        while True:
            mask |= 1 << day
            if day == hi:
                break
            day = (day + 1) % 7
    return mask


def _weekday(text: str, field: str) -> int:
    word = text.strip().lower()
    for i, name in enumerate(WEEKDAYS):
        full = _dt.date(2024, 1, 1 + i).strftime("%A").lower()  # 2024-01-01 was a Monday
        if word in (name, full):
            return i
    raise InvalidSpec(field, f"{text.strip()!r} is not a weekday (mon, tue, wed, thu, fri, sat, sun)")


def weekdays_text(mask: int) -> str:
    """The mask as ranges (``mon-fri``, ``sat,sun``); ``""`` for none."""
    days = [i for i in range(7) if mask >> i & 1]
    runs: list[list[int]] = []
    for day in days:
        if runs and runs[-1][-1] == day - 1:
            runs[-1].append(day)
        else:
            runs.append([day])
    return ",".join(
        WEEKDAYS[r[0]]
        if len(r) == 1
        else f"{WEEKDAYS[r[0]]}-{WEEKDAYS[r[-1]]}"
        if len(r) > 2
        else f"{WEEKDAYS[r[0]]},{WEEKDAYS[r[1]]}"
        for r in runs
    )


def parse_dates_text(text: str, source: str = "dates") -> list[int]:
    """A holidays file → sorted unique day numbers.

    One date per line, ``YYYY-MM-DD``, or a range ``YYYY-MM-DD..YYYY-MM-DD`` (both ends included);
    anything after ``#`` is a comment, blank lines are skipped, and a name after the date
    (``2026-12-25 Christmas``) is allowed. Raises InvalidSpec naming ``source:line``.
    """
    days: set[int] = set()
    for number, raw in enumerate(text.splitlines(), start=1):
        line = raw.split("#", 1)[0].strip()
        if not line:
            continue
        where = f"{source}:{number}"
        first, *rest = line.split(None, 1)
        del rest  # a label: free text
        lo_text, dots, hi_text = first.partition("..")
        lo = _parse_date(lo_text, where)
        hi = _parse_date(hi_text, where) if dots else lo
        if hi < lo:
            raise InvalidSpec(where, f"range {first} ends before it starts")
        if hi - lo >= MAX_DATES or len(days) + (hi - lo) >= MAX_DATES:
            raise InvalidSpec(where, f"more than {MAX_DATES:,} dates in one calendar")
        days.update(range(lo, hi + 1))
    return sorted(days)


def _parse_date(text: str, where: str) -> int:
    match = _DATE.fullmatch(text)
    if match is None:
        raise InvalidSpec(where, f"{text!r} is not a date (write YYYY-MM-DD, or YYYY-MM-DD..YYYY-MM-DD)")
    try:
        date = _dt.date(int(match[1]), int(match[2]), int(match[3]))
    except ValueError as exc:
        raise InvalidSpec(where, f"{text!r} is not a date ({exc})") from None
    return day_number(date)


def zone_offsets(zone: str, field: str = "zone") -> tuple[list[int], list[int]]:
    """The UTC offsets of ``zone``: ``(transitions_ms, offsets_s)``, one more offset than transitions.

    ``offsets_s[0]`` holds before the first transition and ``offsets_s[i + 1]`` from
    ``transitions_ms[i]`` on; expanded from 1900 to 2200 (see the module docstring). Reads the tz
    database: call it on the leader (or offline in the CLI), never in apply. Raises InvalidSpec for
    an unknown zone.
    """
    from raftsched.timing.cron import validate_timezone  # the zone validation the cron triggers use

    tz = validate_timezone(zone or "UTC", field)

    def offset(at_s: int) -> int:
        delta = _dt.datetime.fromtimestamp(at_s, tz).utcoffset()
        return int(delta.total_seconds()) if delta is not None else 0

    transitions: list[int] = []
    offsets = [offset(_EXPAND_FROM_S)]
    at = _EXPAND_FROM_S
    while at < _EXPAND_TO_S:
        nxt = at + _STEP_S
        if offset(nxt) != offsets[-1]:
            lo, hi = at, nxt  # offset(lo) is the current one, offset(hi) the next: bisect to the second
            while hi - lo > 1:
                mid = (lo + hi) // 2
                if offset(mid) == offsets[-1]:
                    lo = mid
                else:
                    hi = mid
            transitions.append(hi * 1000)
            offsets.append(offset(hi))
        at = nxt
    return transitions, offsets


@dataclass(frozen=True, slots=True)
class Calendar:
    """A calendar as the state machine uses it: its days and its zone's expanded offsets."""

    name: str
    dates: frozenset[int]
    weekdays: int
    zone: str
    transitions_ms: tuple[int, ...]
    offsets_s: tuple[int, ...]

    @classmethod
    def build(
        cls,
        name: str,
        dates: Iterable[int],
        weekdays: int,
        zone: str,
        transitions_ms: Sequence[int],
        offsets_s: Sequence[int],
    ) -> Calendar:
        """Check the structure (apply calls this on replicated values) and build. Raises InvalidSpec."""
        day_list = list(dates)
        if len(day_list) > MAX_DATES:
            raise InvalidSpec("calendar.dates", f"{len(day_list):,} dates, at most {MAX_DATES:,}")
        if any(not _FIRST_DAY <= d <= _LAST_DAY for d in day_list):
            raise InvalidSpec("calendar.dates", "a date outside the years 1-9999")
        if not 0 <= weekdays <= ALL_WEEKDAYS:
            raise InvalidSpec("calendar.weekdays", f"mask {weekdays} out of range (0-{ALL_WEEKDAYS})")
        if not day_list and not weekdays:
            raise InvalidSpec("calendar", "a calendar needs dates or weekdays (it would exclude nothing)")
        if len(offsets_s) != len(transitions_ms) + 1:
            raise InvalidSpec("calendar.zone", "zone offsets: one more offset than transitions expected")
        if any(b <= a for a, b in itertools.pairwise(transitions_ms)):
            raise InvalidSpec("calendar.zone", "zone transitions are not ascending")
        if any(abs(o) > 26 * 3600 for o in offsets_s):
            raise InvalidSpec("calendar.zone", "a zone offset beyond 26 hours")
        return cls(name, frozenset(day_list), weekdays, zone, tuple(transitions_ms), tuple(offsets_s))

    def offset_at(self, at_ms: int) -> int:
        """The zone's UTC offset in seconds at ``at_ms``."""
        return self.offsets_s[bisect.bisect_right(self.transitions_ms, at_ms)]

    def local_day(self, at_ms: int) -> int:
        """The day number of ``at_ms``'s local date in the calendar's zone."""
        return (at_ms + self.offset_at(at_ms) * 1000) // DAY_MS

    def holds_day(self, day: int) -> bool:
        """Whether local day ``day`` is one of the calendar's days (a date, or a weekday of it)."""
        return day in self.dates or bool(self.weekdays >> weekday_of(day) & 1)

    def excludes(self, at_ms: int) -> bool:
        """Whether a fire at ``at_ms`` falls on one of the calendar's days (in its zone)."""
        return self.holds_day(self.local_day(at_ms))

    def why(self, at_ms: int) -> str:
        """Why ``at_ms`` is excluded, for a fire's reason: the local date, weekday and zone."""
        day = self.local_day(at_ms)
        date = date_of(day)
        weekday = WEEKDAYS[weekday_of(day)]
        what = "a listed date" if day in self.dates else f"weekdays {weekdays_text(self.weekdays)}"
        zone = self.zone or "UTC"
        return f"{date.isoformat()} ({weekday}, {what}) is a day of calendar {self.name!r} in {zone}"
