"""The CLI's input grammars: times, durations, run params and argparse value types.

Pure except :func:`lazy_now`, the one place the CLI reads the wall clock (through
:class:`raftsched.timing.clock.SystemClock`); everything else takes the clock as ``now``.
"""

from __future__ import annotations

import argparse
import json
import re
from collections.abc import Callable, Sequence
from typing import Any

from raftsched.errors import InvalidSpec
from raftsched.model import validate_params
from raftsched.timing.clock import SystemClock
from raftsched.timing.durations import is_relative_time, parse_duration_ms, parse_time

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

_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_DAY_MS = 86_400_000
# Options whose value may be a negative relative time ("-10m"), which argparse would take for a flag.
_TIME_OPTIONS = frozenset({"--since", "--until", "--from", "--to", "--at", "--start", "--logical"})

TIME_HELP = """\
times (T): ISO 8601 with a zone (2026-11-30T10:00:00Z, 2026-11-30T10:00:00+01:00), a date
  (2026-11-30 = midnight UTC), 'now', relative to now (-10m, -2h, -1.5d, +30s; units ms s m h d w),
  or epoch milliseconds (1796032800000).
durations: seconds (90, 1.5) or with a unit (500ms, 90s, 10m, 2h, 1.5h, 1d, 1w)."""


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
        if (
            token in _TIME_OPTIONS
            and i + 1 < len(argv)
            and argv[i + 1].startswith("-")
            and is_relative_time(argv[i + 1])
        ):
            out.append(f"{token}={argv[i + 1]}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


# -- argparse value types: each raises ArgumentTypeError, which argparse reports as a usage error --


def duration_arg(text: str) -> int:
    """A duration option's value, as ms (see :func:`raftsched.timing.durations.parse_duration_ms`)."""
    try:
        return parse_duration_ms(text, "DURATION")
    except InvalidSpec as exc:
        raise argparse.ArgumentTypeError(exc.reason) from None


def durations_arg(text: str) -> tuple[int, ...]:
    """A comma-separated list of durations (``2m,5m,15m``), as ms; ``''`` is the empty list."""
    return tuple(duration_arg(part.strip()) for part in text.split(",") if part.strip())


def backoff_arg(text: str) -> tuple[int, int, int] | tuple[()]:
    """``BASE[,CAP[,JITTER%]]`` (``10s,15m,20%``) as ``(base_ms, cap_ms, jitter_pct)``; ``''``
    is ``()`` (no backoff)."""
    parts = [part.strip() for part in text.split(",")] if text.strip() else []
    if not parts:
        return ()
    if len(parts) > 3:
        raise argparse.ArgumentTypeError(f"{text!r}: give BASE[,CAP[,JITTER%]], e.g. 10s,15m,20%")
    base = duration_arg(parts[0])
    cap = duration_arg(parts[1]) if len(parts) > 1 and parts[1] else 0
    jitter = 0
    if len(parts) > 2:
        got = re.fullmatch(r"(\d{1,3})%?", parts[2])
        if got is None:
            raise argparse.ArgumentTypeError(f"{parts[2]!r}: the jitter is a percent, e.g. 20%")
        jitter = int(got.group(1))
    return base, cap, jitter


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
