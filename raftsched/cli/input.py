"""The CLI's input grammars: times, durations, run params and argparse value types.

Pure except :func:`lazy_now`, the one place the CLI reads the wall clock (through
:class:`raftsched.timing.clock.SystemClock`); everything else takes the clock as ``now``.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from raftsched.errors import InvalidSpec
from raftsched.model import MAX_TIME_MS, validate_params
from raftsched.timing.clock import SystemClock

__all__ = [
    "TIME_HELP",
    "Now",
    "attach_negative_times",
    "backfill_end",
    "duration_arg",
    "lazy_now",
    "non_negative_int",
    "optional_time",
    "params_from_args",
    "parse_duration_ms",
    "parse_time",
    "positive_seconds",
]

Now = Callable[[], int]
"""Returns the current UTC epoch ms; called only when a ``now``/relative time needs it."""

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_RELATIVE_RE = re.compile(r"([+-])(\d{1,12})(ms|s|m|h|d|w)")
_DURATION_RE = re.compile(r"(\d{1,12}(?:\.\d{1,3})?)(ms|s|m|h|d|w)?")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
_DAY_MS = 86_400_000
# Options whose value may be a negative relative time ("-10m"), which argparse would take for a flag.
_TIME_OPTIONS = frozenset({"--since", "--until", "--from", "--to", "--at", "--start", "--logical"})
_NEGATIVE_TIME_RE = re.compile(r"-\d+(?:ms|s|m|h|d|w)")

TIME_HELP = """\
times (T): ISO 8601 with a zone (2026-11-30T10:00:00Z, 2026-11-30T10:00:00+01:00), a date
  (2026-11-30 = midnight UTC), 'now', relative to now (-10m, -2h, -1d, +30s; units ms s m h d w),
  or epoch milliseconds (1796032800000).
durations: seconds (90, 1.5) or with a unit (500ms, 90s, 10m, 2h, 1d, 1w)."""


def parse_time(text: str, now: Now, field: str = "time") -> int:
    """A CLI time (see ``TIME_HELP``) as UTC epoch ms. Raises InvalidSpec naming ``field``."""
    value = text.strip()
    if value.lower() == "now":
        return _in_range(now(), text, field)
    if value.isdigit():
        return _in_range(int(value) if len(value) <= 16 else MAX_TIME_MS + 1, text, field)
    relative = _RELATIVE_RE.fullmatch(value)
    if relative is not None:
        sign = 1 if relative.group(1) == "+" else -1
        return _in_range(now() + sign * int(relative.group(2)) * _UNIT_MS[relative.group(3)], text, field)
    if _DATE_RE.fullmatch(value):
        value += "T00:00:00Z"
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise InvalidSpec(
            field,
            f"{text!r} is not a time; use ISO 8601 (2026-11-30T10:00:00Z), a date (2026-11-30), "
            "now, a relative time (-10m, +2h) or epoch milliseconds",
        ) from None
    if parsed.tzinfo is None:
        raise InvalidSpec(field, f"{text!r} has no UTC offset; add Z or one such as +01:00")
    return _in_range((parsed - _EPOCH) // dt.timedelta(milliseconds=1), text, field)


def _in_range(ms: int, text: str, field: str) -> int:
    if not 0 <= ms <= MAX_TIME_MS:
        raise InvalidSpec(field, f"{text!r} is outside 1970-01-01 .. 9999-12-31")
    return ms


def parse_duration_ms(text: str) -> int:
    """Seconds (``90``, ``1.5``) or a number with a unit (``500ms 90s 10m 2h 1d 1w``) as ms.

    Raises ValueError with a message for anything else.
    """
    match = _DURATION_RE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a duration; use seconds (90) or 500ms, 90s, 10m, 2h, 1d, 1w")
    number, unit = match.group(1), match.group(2) or "s"
    whole, _, fraction = number.partition(".")
    scale = _UNIT_MS[unit]
    # Integer arithmetic: "0.1" must be exactly 100 ms.
    ms_times_1000 = (int(whole) * 1000 + int(fraction.ljust(3, "0") or "0")) * scale
    if ms_times_1000 % 1000:
        raise ValueError(f"{text!r} is not a whole number of milliseconds")
    return ms_times_1000 // 1000


def backfill_end(text: str, now: Now) -> int:
    """``--to``: a time, or a bare date meaning the whole day (its last millisecond, UTC)."""
    end = parse_time(text, now, "--to")
    return end + _DAY_MS - 1 if _DATE_RE.fullmatch(text.strip()) else end


def optional_time(text: str | None, now: Now, field: str) -> int:
    """:func:`parse_time`, with 0 (unset) for an option not given."""
    return 0 if text is None else parse_time(text, now, field)


def lazy_now() -> Now:
    """A ``now`` that reads the system clock once, on first use (so --since and --until agree)."""
    cache: list[int] = []

    def now() -> int:
        if not cache:
            cache.append(SystemClock().now_ms())
        return cache[0]

    return now


def params_from_args(params: str, pairs: Sequence[str]) -> str:
    """``--params JSON`` with every ``--param KEY=VALUE`` (a string) applied over it, as JSON text.

    Raises InvalidSpec (``--params``/``--param``) for a bad object or pair."""
    if not pairs:
        if params:
            validate_params(params, "params")
        return params
    merged: dict[str, Any] = {}
    if params:
        validate_params(params, "params")
        merged = json.loads(params)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidSpec("param", f"{pair!r} is not KEY=VALUE")
        merged[key.strip()] = value
    text = json.dumps(merged, sort_keys=True, ensure_ascii=False)
    validate_params(text, "params")
    return text


def attach_negative_times(argv: list[str]) -> list[str]:
    """``--since -10m`` → ``--since=-10m``: argparse would take ``-10m`` for an option."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in _TIME_OPTIONS and i + 1 < len(argv) and _NEGATIVE_TIME_RE.fullmatch(argv[i + 1]):
            out.append(f"{token}={argv[i + 1]}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


# -- argparse value types: each raises ArgumentTypeError, which argparse reports as a usage error --


def duration_arg(text: str) -> int:
    """A duration option's value, as ms (see :func:`parse_duration_ms`)."""
    try:
        return parse_duration_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def positive_seconds(text: str) -> float:
    """A number of seconds in (0, 86400)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < 86_400:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0 and less than 86400 seconds")
    return value


def non_negative_int(text: str) -> int:
    """A whole number in 0 .. 2**32 - 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= 2**32 - 1:
        raise argparse.ArgumentTypeError(f"{text!r} out of range (0-4294967295)")
    return value
