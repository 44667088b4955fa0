"""Earliest-start gates of workflow tasks (``not_before``).

``not_before: "+30m"`` holds a workflow task until 30 minutes after its run's logical time (and
its dependencies are met). The gate is an offset from the logical time, so every replica computes
the same instant from replicated values with no tz database involved.

A wall-clock form (``"02:00"`` on the logical date in the workflow's zone) is refused for now with
a clear error: mapping a wall time to an instant inside ``apply`` would consult each replica's tz
database, which may differ between hosts (see docs/architecture.md, Time).

Pure: no clock, no IO.
"""

from __future__ import annotations

import re
from typing import Final

from raftsched.errors import InvalidSpec
from raftsched.timing.durations import parse_duration_ms

__all__ = ["MAX_NOT_BEFORE_MS", "gate_ms", "parse_not_before"]

MAX_NOT_BEFORE_MS: Final = 7 * 24 * 3600 * 1000  # at most a week after the logical time
_WALL_RE = re.compile(r"\d{1,2}:\d{2}(:\d{2})?")


def parse_not_before(text: str, where: str = "not_before") -> int:
    """The offset in ms after the logical time that ``text`` (``"+30m"``, ``"+2h"``) names.

    Raises :class:`InvalidSpec` naming ``where`` for anything else, saying which forms work."""
    value = text.strip()
    if _WALL_RE.fullmatch(value):
        raise InvalidSpec(
            where,
            f"{value!r}: a wall-clock time is not supported yet; give an offset after the logical "
            'time such as "+2h" (for a daily run at midnight, "+2h" is 02:00 on the logical date in UTC)',
        )
    if not value.startswith("+"):
        raise InvalidSpec(where, f'{value!r} is not an offset after the logical time such as "+30m" or "+2h"')
    offset = parse_duration_ms(value[1:], where, bare_unit=None)
    if offset > MAX_NOT_BEFORE_MS:
        raise InvalidSpec(where, f"{value!r} is more than 7 days after the logical time")
    return offset


def gate_ms(not_before: str, logical_ms: int) -> int:
    """The instant a task with ``not_before`` may start in a run of ``logical_ms`` (0: no gate).

    For a stored spec (validated when it was applied); a text that no longer parses gives no gate
    rather than an exception inside apply."""
    if not not_before:
        return 0
    try:
        return logical_ms + parse_not_before(not_before)
    except InvalidSpec:
        return 0
