"""Earliest-start gates of workflow tasks (``not_before``).

Two forms:

* ``"+30m"``: an offset after the run's logical time (a unit is required; at most 7 days).
* ``"02:00"`` (or ``"02:00:30"``): that wall-clock time on the logical time's local date, in the
  workflow's zone. Its DST policy is the cron code's (:mod:`raftsched.timing.cron`): a wall time
  that exists twice is its FIRST occurrence; one that does not exist (spring forward) is the first
  instant after the gap, the transition itself.

The gate is computed inside ``apply``, which may not consult the tz database (hosts may differ):
the wall form uses the zone's UTC offsets the leader expanded into the command
(:func:`raftsched.timing.calendar.zone_offsets`, as calendars do), held in a :class:`Zone`.

Pure: no clock, no IO.
"""

from __future__ import annotations

import bisect
import itertools
import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Final

from raftsched.errors import InvalidSpec
from raftsched.timing.durations import parse_duration_ms

__all__ = ["MAX_NOT_BEFORE_MS", "NotBefore", "Zone", "gate_ms", "is_wall_clock", "parse_not_before"]

MAX_NOT_BEFORE_MS: Final = 7 * 24 * 3600 * 1000  # an offset: at most a week after the logical time
DAY_MS: Final = 86_400_000
_MAX_OFFSET_S: Final = 26 * 3600
_WALL_RE = re.compile(r"(\d{1,2}):(\d{2})(?::(\d{2}))?")


@dataclass(frozen=True, slots=True)
class NotBefore:
    """A parsed ``not_before``: an offset after the logical time, or a wall time of day."""

    offset_ms: int = 0
    wall_s: int | None = None  # seconds after local midnight


@dataclass(frozen=True, slots=True)
class Zone:
    """A zone's UTC offsets: ``offsets_s[0]`` before the first transition, ``offsets_s[i + 1]``
    from ``transitions_ms[i]`` on."""

    name: str
    transitions_ms: tuple[int, ...]
    offsets_s: tuple[int, ...]

    @classmethod
    def build(cls, name: str, transitions_ms: Sequence[int], offsets_s: Sequence[int]) -> Zone:
        """Check the structure (apply calls this on replicated values). Raises InvalidSpec."""
        if len(offsets_s) != len(transitions_ms) + 1:
            raise InvalidSpec("timezone", "zone offsets: one more offset than transitions expected")
        if any(b <= a for a, b in itertools.pairwise(transitions_ms)):
            raise InvalidSpec("timezone", "zone transitions are not ascending")
        if any(abs(o) > _MAX_OFFSET_S for o in offsets_s):
            raise InvalidSpec("timezone", "a zone offset beyond 26 hours")
        return cls(name, tuple(transitions_ms), tuple(offsets_s))

    def offset_at(self, at_ms: int) -> int:
        """The UTC offset in seconds at ``at_ms``."""
        return self.offsets_s[bisect.bisect_right(self.transitions_ms, at_ms)]

    def instant(self, wall_ms: int) -> int:
        """The instant of local wall time ``wall_ms`` (ms since 1970-01-01T00:00 on the local
        clock) under the DST policy: the first occurrence; in a gap, the end of the gap."""
        candidates = sorted({wall_ms - self.offset_at(wall_ms + d) * 1000 for d in (-DAY_MS, 0, DAY_MS)})
        valid = [t for t in candidates if t + self.offset_at(t) * 1000 == wall_ms]
        if valid:
            return valid[0]
        # In a gap: the transition that skipped it lies after the earliest candidate.
        i = bisect.bisect_right(self.transitions_ms, candidates[0])
        return self.transitions_ms[i] if i < len(self.transitions_ms) else candidates[-1]


def is_wall_clock(text: str) -> bool:
    """Whether ``text`` is the wall-clock form (its gate needs the workflow's zone)."""
    return _WALL_RE.fullmatch(text.strip()) is not None


def parse_not_before(text: str, where: str = "not_before") -> NotBefore:
    """``"+30m"`` or ``"02:00"`` (see the module doc). Raises :class:`InvalidSpec` naming ``where``
    for anything else, saying which forms work."""
    value = text.strip()
    wall = _WALL_RE.fullmatch(value)
    if wall is not None:
        hours, minutes, seconds = int(wall[1]), int(wall[2]), int(wall[3] or 0)
        if hours > 23 or minutes > 59 or seconds > 59:
            raise InvalidSpec(where, f"{value!r} is not a time of day (00:00 to 23:59:59)")
        return NotBefore(wall_s=hours * 3600 + minutes * 60 + seconds)
    if not value.startswith("+"):
        raise InvalidSpec(
            where,
            f'{value!r} is neither a time of day such as "02:00" nor an offset after the logical '
            'time such as "+30m"',
        )
    offset = parse_duration_ms(value[1:], where, bare_unit=None)
    if offset > MAX_NOT_BEFORE_MS:
        raise InvalidSpec(where, f"{value!r} is more than 7 days after the logical time")
    return NotBefore(offset_ms=offset)


def gate_ms(not_before: str, logical_ms: int, zone: Zone | None = None) -> int:
    """The instant a task with ``not_before`` may start in a run of ``logical_ms`` (0: no gate).

    The wall form takes the local date of ``logical_ms`` in ``zone`` (UTC when None). For a stored
    spec (validated when it was applied): a text that no longer parses gives no gate rather than
    an exception inside apply."""
    if not not_before:
        return 0
    try:
        parsed = parse_not_before(not_before)
    except InvalidSpec:
        return 0
    if parsed.wall_s is None:
        return logical_ms + parsed.offset_ms
    zone = zone or _UTC
    day = (logical_ms + zone.offset_at(logical_ms) * 1000) // DAY_MS
    return zone.instant(day * DAY_MS + parsed.wall_s * 1000)


_UTC: Final = Zone("UTC", (), (0,))
