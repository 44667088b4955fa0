"""The one grammar for durations and times: CLI options, workflow files and the config file.

Pure: reads no clock (``now`` is passed in, and called only when the text needs it), does no IO.

Durations
=========

A duration is a non-negative number, an integer or a decimal (``90``, ``1.5``), directly followed
by an optional unit: ``ms``, ``s``, ``m``, ``h``, ``d`` or ``w`` (``500ms``, ``90s``, ``10m``,
``2h``, ``1d``, ``1w``, ``1.5h``). Surrounding whitespace is ignored; a space between the number
and the unit, a sign, an exponent or a leading dot are not accepted. A number without a unit is
in the unit of the place that reads it (seconds on the command line and for a workflow task's
``timeout``; a config key says its unit in its name, ``lease_ms`` or ``history_keep_seconds``).
The result is a whole number of milliseconds: ``1.5ms`` and ``0.0001s`` are refused, never
rounded. The arithmetic is exact (``0.1s`` is 100 ms, not a float's nearest).

Times
=====

:func:`parse_time` reads an absolute or relative time as UTC epoch milliseconds: ISO 8601 with a
zone (``2026-11-30T10:00:00Z``, ``2026-11-30T10:00:00+01:00``), a date (``2026-11-30``, midnight
UTC), ``now``, a signed duration relative to now that must carry a unit (``-10m``, ``+2h``,
``-1.5d``), or epoch milliseconds (``1796032800000``).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Callable, Mapping
from typing import Final, Literal

from raftsched.errors import InvalidSpec
from raftsched.model import MAX_TIME_MS

__all__ = [
    "DURATION_FORMS",
    "TIME_FORMS",
    "UNIT_MS",
    "Unit",
    "format_duration",
    "is_relative_time",
    "parse_duration_ms",
    "parse_time",
]

Unit = Literal["ms", "s", "m", "h", "d", "w"]

UNIT_MS: Final[Mapping[str, int]] = {
    "ms": 1,
    "s": 1000,
    "m": 60_000,
    "h": 3_600_000,
    "d": 86_400_000,
    "w": 604_800_000,
}
"""Milliseconds per unit."""

DURATION_FORMS: Final = "a number with a unit: 500ms, 90s, 10m, 2h, 1d, 1w (decimals such as 1.5h too)"
TIME_FORMS: Final = (
    "ISO 8601 with a zone (2026-11-30T10:00:00Z), a date (2026-11-30), now, "
    "a relative time (-10m, +2h) or epoch milliseconds"
)

# Digit caps keep int() cheap on hostile input; anything longer is beyond MAX_TIME_MS anyway.
_NUMBER = r"(?P<whole>[0-9]{1,16})(?:\.(?P<fraction>[0-9]{1,9}))?"
_UNIT = r"(?P<unit>ms|s|m|h|d|w)"
_DURATION_RE: Final = re.compile(rf"{_NUMBER}{_UNIT}?")
_RELATIVE_RE: Final = re.compile(rf"(?P<sign>[+-]){_NUMBER}{_UNIT}")
_SPACED_RE: Final = re.compile(rf"{_NUMBER}\s+{_UNIT}")
_DATE_RE: Final = re.compile(r"[0-9]{4}-[0-9]{2}-[0-9]{2}")
_EPOCH: Final = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def parse_duration_ms(text: str, where: str, *, bare_unit: Unit | None = "s") -> int:
    """A duration (see the module docstring) as whole milliseconds, at most ``MAX_TIME_MS``.

    ``bare_unit`` is the unit of a number written without one (None: a unit is required).
    Raises :class:`~raftsched.errors.InvalidSpec` whose ``field`` is ``where`` (the option or key
    the text came from) and whose reason quotes the text and the accepted forms.
    """
    value = text.strip()
    match = _DURATION_RE.fullmatch(value)
    if match is None:
        hint = ""
        if _SPACED_RE.fullmatch(value):
            hint = " (no space between the number and the unit)"
        elif value.startswith("-"):
            hint = " (a duration cannot be negative)"
        raise InvalidSpec(where, f"{text!r} is not a duration{hint}; use {_accepted(bare_unit)}")
    unit = match.group("unit") or bare_unit
    if unit is None:
        raise InvalidSpec(where, f"{text!r} has no unit; use {_accepted(None)}")
    return _to_ms(match, unit, text, where)


def format_duration(ms: int) -> str:
    """``ms`` in the largest unit that divides it exactly (``90s``, ``10m``, ``1500ms``, ``0s``).

    :func:`parse_duration_ms` reads the result back to ``ms``. Raises ValueError if ``ms`` is
    negative.
    """
    if ms < 0:
        raise ValueError(f"a duration cannot be negative, got {ms} ms")
    if ms == 0:
        return "0s"
    for unit in ("w", "d", "h", "m", "s", "ms"):
        if ms % UNIT_MS[unit] == 0:
            return f"{ms // UNIT_MS[unit]}{unit}"
    raise AssertionError("unreachable: every integer is a whole number of ms")


def is_relative_time(text: str) -> bool:
    """Whether ``text`` is a relative time (``-10m``, ``+1.5h``): a sign, a number and a unit.

    For a command line, where ``-10m`` after a time option would otherwise look like a flag.
    """
    return _RELATIVE_RE.fullmatch(text.strip()) is not None


def parse_time(text: str, now: Callable[[], int], field: str = "time") -> int:
    """A time (see the module docstring) as UTC epoch milliseconds in ``0 .. MAX_TIME_MS``.

    ``now`` returns the current epoch ms; it is called only for ``now`` and relative times.
    Raises :class:`~raftsched.errors.InvalidSpec` naming ``field``.
    """
    value = text.strip()
    if value.lower() == "now":
        return _in_range(now(), text, field)
    if value.isdigit():
        return _in_range(int(value) if len(value) <= 16 else MAX_TIME_MS + 1, text, field)
    relative = _RELATIVE_RE.fullmatch(value)
    if relative is not None:
        offset = _to_ms(relative, relative.group("unit"), text, field, limit=False)
        sign = 1 if relative.group("sign") == "+" else -1
        return _in_range(now() + sign * offset, text, field)
    if _DATE_RE.fullmatch(value):
        value += "T00:00:00Z"
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise InvalidSpec(field, f"{text!r} is not a time; use {TIME_FORMS}") from None
    if parsed.tzinfo is None:
        raise InvalidSpec(field, f"{text!r} has no UTC offset; add Z or one such as +01:00")
    return _in_range(int((parsed - _EPOCH) // dt.timedelta(milliseconds=1)), text, field)


def _to_ms(match: re.Match[str], unit: str, text: str, where: str, *, limit: bool = True) -> int:
    fraction = match.group("fraction") or ""
    # Exact: the number scaled by 10**len(fraction), so "0.1s" is 100 ms and "1.5ms" is refused.
    scaled = int(match.group("whole") + fraction) * UNIT_MS[unit]
    scale: int = 10 ** len(fraction)
    ms, rest = divmod(scaled, scale)
    if rest:
        raise InvalidSpec(where, f"{text!r} is not a whole number of milliseconds")
    if limit and ms > MAX_TIME_MS:
        raise InvalidSpec(where, f"{text!r} is longer than any duration raftsched keeps (about 8000 years)")
    return ms


def _in_range(ms: int, text: str, field: str) -> int:
    if not 0 <= ms <= MAX_TIME_MS:
        raise InvalidSpec(field, f"{text!r} is outside 1970-01-01 .. 9999-12-31")
    return ms


def _accepted(bare_unit: Unit | None) -> str:
    if bare_unit is None:
        return DURATION_FORMS
    return f"{DURATION_FORMS}; a number alone is in {_UNIT_NAMES[bare_unit]}"


_UNIT_NAMES: Final[Mapping[str, str]] = {
    "ms": "milliseconds",
    "s": "seconds",
    "m": "minutes",
    "h": "hours",
    "d": "days",
    "w": "weeks",
}
