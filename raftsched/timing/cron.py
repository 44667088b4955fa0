"""Cron expressions and raftsched's daylight-saving policy (the only module that imports croniter).

Pure: time enters and leaves as integer UTC epoch milliseconds; nothing here reads a clock, does IO or
draws random numbers. Fire times still depend on the tz database in use (the system zoneinfo or the
``tzdata`` package), so replicas must not recompute them during ``apply``: the leader computes a fire
time once and replicates the resulting epoch value.

Expressions
    The grammar is :mod:`raftsched.timing.cronparse`'s: five fields (``minute hour day-of-month
    month day-of-week``, minute granularity) or six fields with the SECONDS FIELD LAST (croniter's
    convention: ``"* * * * * */2"`` fires every two seconds, while ``"*/2 * * * * *"`` fires every
    second of every even minute), or an ``@`` macro. Day-of-month and day-of-week follow crontab's
    rule: AND when either starts with ``*``, else OR. croniter is handed only explicit value lists
    (it reads a one-value range such as ``18-18`` as ``*``), one day rule at a time. An expression
    that can never match (``0 0 30 2 *``) is rejected.

DST policy
    An expression names local *wall-clock* times in the schedule's zone. Each matching wall time
    becomes at most one fire:

    * A wall time that exists once fires at that instant.
    * A wall time that exists twice (the repeated period when clocks go back) fires ONCE, at its
      FIRST occurrence. The second pass through the repeated period fires nothing: across
      Europe/Berlin's fall-back on 2025-10-26, ``30 2 * * *`` fires once at 02:30+02:00, and
      ``*/30 * * * *`` fires 02:00+02:00, 02:30+02:00, then 03:00+01:00 - one hour of elapsed time
      with no fires. (croniter alone would fire 02:30 twice; Vixie cron also runs fixed-time jobs
      once.)
    * A wall time that does not exist (skipped when clocks go forward):
        - if the hour field is restricted (anything but ``*``), the job runs ONCE at the first instant
          after the gap, i.e. at the transition itself: ``30 2 * * *`` in Berlin on 2025-03-30 runs at
          03:00+02:00; several matches inside one gap (``*/15 2 * * *``) collapse into that one fire.
        - if the hour field is ``*`` (hourly and finer jobs), the nonexistent wall times are simply
          skipped: ``30 * * * *`` goes from 01:30+01:00 to 03:30+02:00. Such jobs fire on every wall
          time that exists.

    This equals croniter's own zone-aware output with the second occurrences dropped, except that a
    six-field job whose time falls in a gap runs at the end of the gap (03:00:00) where croniter keeps
    the seconds (03:00:15). Mechanically, croniter enumerates matching wall times with no zone
    attached and this module maps each one to an instant with zoneinfo.

    The policy is stateless: ``next_after(t)`` is the earliest fire of the set above that is strictly
    later than ``t``, whatever was asked before, and ``fires_between`` is the same set restricted to a
    range. Fires are whole seconds, so the results are multiples of 1000.

Limits
    When no fire exists after the given instant (the search passes year 9999, the end of Python's
    ``datetime``), ``next_after`` raises :class:`~raftsched.errors.InvalidSpec` with the reason
    ``"no fire after <ms>"``; ``fires_between`` and ``preview`` simply return the fires that exist.
"""

from __future__ import annotations

import calendar
import copy
import datetime as _dt
import functools
import re
import zoneinfo
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from croniter import croniter  # the only croniter import in raftsched

from raftsched.errors import InvalidSpec
from raftsched.timing.cronparse import CronFields, CronSyntaxError, parse_fields

__all__ = [
    "MAX_CRON_LEN",
    "MAX_PREVIEW",
    "MAX_TZ_LEN",
    "CronSchedule",
    "changed_meaning_warning",
    "day_rule_note",
    "meaning_change",
    "preview",
    "validate_timezone",
]

MAX_CRON_LEN = 256
MAX_TZ_LEN = 64
MAX_PREVIEW = 1000

_TZ_KEY_RE = re.compile(r"[A-Za-z0-9_+\-]+(?:/[A-Za-z0-9_+\-]+)*")
# Zone keys whose meaning depends on the host rather than on the tz database.
_HOST_DEPENDENT_ZONES = frozenset({"localtime", "posixrules"})
_CRON_CHARS_RE = re.compile(r"[\x21-\x7e \t]*")
# Naive wall-clock times are handled as "wall seconds": seconds since 1970-01-01T00:00 on the local
# clock, computed as if the zone were UTC. croniter evaluates a float start as UTC, so it enumerates
# matching wall times with no zone at all; the DST policy is then applied here, with zoneinfo.
_NAIVE_EPOCH = _dt.datetime(1970, 1, 1)
_ONE_SECOND = _dt.timedelta(seconds=1)
# A fixed naive reference for the "can this expression ever match" check (a replica-independent input).
_VALIDATION_REFERENCE = 946_684_800.0  # 2000-01-01T00:00
# What croniter and datetime raise when a search runs off the supported calendar (year 9999) or
# finds nothing within its bounded search window (CroniterBadDateError is a ValueError).
# OSError: fromtimestamp() beyond the platform's time_t.
_EXHAUSTED = (ValueError, OverflowError, OSError)


def validate_timezone(tz: str, field: str = "trigger.timezone") -> zoneinfo.ZoneInfo:
    """Return the IANA zone named ``tz``.

    Raises :class:`InvalidSpec` naming ``field`` for an empty, overlong, malformed or unknown key, and
    for host-dependent keys (``localtime``, ``posixrules``) that would mean different zones on
    different nodes.
    """
    if not tz:
        raise InvalidSpec(field, "time zone is empty")
    if len(tz) > MAX_TZ_LEN:
        raise InvalidSpec(field, f"time zone is longer than {MAX_TZ_LEN} characters")
    if _TZ_KEY_RE.fullmatch(tz) is None:
        raise InvalidSpec(field, f"{tz!r} is not a valid IANA time zone name")
    if tz in _HOST_DEPENDENT_ZONES:
        raise InvalidSpec(field, f"{tz!r} depends on the host; name an IANA zone such as 'Europe/Berlin'")
    try:
        return zoneinfo.ZoneInfo(tz)
    except (zoneinfo.ZoneInfoNotFoundError, ValueError, OSError):
        # OSError: the key names a directory ("Europe") or an unreadable file.
        raise InvalidSpec(field, f"unknown time zone {tz!r}") from None


@dataclass(frozen=True)
class CronSchedule:
    """A validated cron expression in a time zone, with raftsched's DST policy.

    Instances are immutable and shared (``parse`` caches them), so they are safe to use from any
    thread. Equality is by ``(expr, tz)``.
    """

    expr: str
    tz: str
    has_seconds: bool
    _zone: zoneinfo.ZoneInfo = field(repr=False, compare=False)
    # True when the hour field is ``*``: nonexistent wall times are skipped rather than moved.
    _every_hour: bool = field(repr=False, compare=False)
    # The croniter expressions the schedule is the union of, never advanced themselves: each query
    # works on copies (~1.5 us each), because croniter keeps its position in the instance.
    _template: _Matcher = field(repr=False, compare=False)
    # What the expression means, as explicit sets.
    _fields: CronFields = field(repr=False, compare=False)

    @classmethod
    def parse(
        cls, expr: str, tz: str = "UTC", field: str = "trigger.cron", tz_field: str = "trigger.timezone"
    ) -> CronSchedule:
        """Validate ``expr`` in zone ``tz`` and return the (cached, shared) schedule.

        Raises :class:`InvalidSpec` naming ``field`` for a bad expression, or ``tz_field`` for a bad
        zone. Nothing is cached for invalid input. The same ``(expr, tz)`` returns the same object.
        """
        try:
            return _parse_cached(expr, tz)
        except _BadTimezone as bad:
            raise InvalidSpec(tz_field, bad.spec.reason) from None
        except _BadExpression as bad:
            raise InvalidSpec(field, bad.reason) from None

    def next_after(self, after_ms: int) -> int:
        """Return the first fire strictly after ``after_ms`` (UTC epoch ms) as UTC epoch ms.

        Stateless and deterministic for a given tz database. The result is a whole second. Raises
        :class:`InvalidSpec` (``trigger.cron``, ``"no fire after <ms>"``) when no fire exists before
        the end of year 9999 or ``after_ms`` is outside the representable range.
        """
        try:
            return self._next_after_s(_floor_seconds(after_ms), copy.copy(self._template)) * 1000
        except _EXHAUSTED:
            raise InvalidSpec("trigger.cron", f"no fire after {after_ms}") from None

    def fires_between(self, after_ms: int, until_ms: int, limit: int) -> list[int]:
        """Return the fires ``f`` with ``after_ms < f <= until_ms``, ascending, at most ``limit`` of them.

        Exactly the values that repeated ``next_after`` produces. Fires beyond the supported calendar
        do not exist, so the list just ends there.
        """
        fires: list[int] = []
        if limit <= 0 or until_ms <= after_ms:
            return fires
        cron = copy.copy(self._template)
        until_s = until_ms // 1000  # fires are whole seconds: f <= until_ms  <=>  f_s <= floor(until_ms/1000)
        try:
            t = _floor_seconds(after_ms)
            while len(fires) < limit:
                t = self._next_after_s(t, cron)
                if t > until_s:
                    break
                fires.append(t * 1000)
        except _EXHAUSTED:
            pass
        return fires

    def local_iso(self, at_ms: int) -> str:
        """Render ``at_ms`` (whole seconds) on this schedule's wall clock, with its UTC offset."""
        return _dt.datetime.fromtimestamp(_floor_seconds(at_ms), self._zone).isoformat()

    # -- internals ------------------------------------------------------------------------------

    def _next_after_s(self, after_s: int, cron: Any) -> int:
        """Earliest fire (epoch seconds) strictly after ``after_s``; ``cron`` is a private croniter."""
        start = self._search_start(after_s)
        while True:
            wall = int(cron.get_next(float, start_time=float(start)))  # next matching wall time > start
            naive = _naive(wall)
            off0 = _offset_s(naive.replace(tzinfo=self._zone, fold=0))
            off1 = _offset_s(naive.replace(tzinfo=self._zone, fold=1))
            if off0 >= off1:
                # Exists once (equal offsets), or twice (off0 > off1): fold=0 is the FIRST occurrence
                # and the policy's only fire; the second occurrence is never produced.
                fire = wall - off0
            else:
                # In a gap: fold=1 uses the offset after the transition, fold=0 the one before, so the
                # transition instant lies in (wall - off1, wall - off0].
                transition = _first_instant_with_offset(self._zone, wall - off1, wall - off0, off1)
                if self._every_hour:
                    start = transition + off1 - 1  # skip the rest of the gap: resume at its end
                    continue
                fire = transition
            if fire > after_s:
                return fire
            # Only reachable in zones with transitions closer together than our assumptions; moving
            # on keeps the "strictly after" contract.
            start = wall

    def _search_start(self, after_s: int) -> int:
        """The wall time to enumerate matches from: every match at or before it fires at or before
        ``after_s``, and the next match after it is the next fire (or in a gap, handled by the caller).
        """
        local = _dt.datetime.fromtimestamp(after_s, self._zone)
        wall = after_s + _offset_s(local)
        if local.fold == 1:
            first = local.replace(fold=0)
            first_off = _offset_s(first)
            if first_off != _offset_s(local):
                # ``after_s`` is in the second pass through a repeated period: all of that period's
                # wall times fired (or would have) during the first pass, so resume at its end, which
                # is the transition instant read on the earlier (larger) offset.
                transition = _first_instant_with_offset(
                    self._zone, after_s - (first_off - _offset_s(local)), after_s, _offset_s(local)
                )
                wall = max(wall, transition + first_off - 1)
        return wall


class _BadExpression(Exception):
    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


class _BadTimezone(Exception):
    def __init__(self, spec: InvalidSpec) -> None:
        super().__init__(spec.reason)
        self.spec = spec


@functools.lru_cache(maxsize=4096)
def _parse_cached(expr: str, tz: str) -> CronSchedule:
    """Build a schedule; raises (and so caches nothing) for invalid input."""
    try:
        zone = validate_timezone(tz)
    except InvalidSpec as spec:
        raise _BadTimezone(spec) from None
    _check_text(expr)
    try:
        fields = parse_fields(expr)
    except CronSyntaxError as bad:
        raise _BadExpression(bad.reason) from None
    sides = tuple(side for side in _sides(fields) if side.ever_matches())
    if not sides:
        raise _BadExpression(f"{expr!r} never matches (no date satisfies it)")
    return CronSchedule(
        expr=expr,
        tz=tz,
        has_seconds=fields.has_seconds,
        _zone=zone,
        _every_hour=fields.hours == _ALL_HOURS,
        _template=_Matcher(sides),
        _fields=fields,
    )


def _check_text(expr: str) -> None:
    """The checks on the text as a whole (the grammar is :mod:`raftsched.timing.cronparse`'s)."""
    if not expr.strip():
        raise _BadExpression("cron expression is empty")
    if len(expr) > MAX_CRON_LEN:
        raise _BadExpression(f"cron expression is longer than {MAX_CRON_LEN} characters")
    if _CRON_CHARS_RE.fullmatch(expr) is None:
        raise _BadExpression("cron expression may contain only printable ASCII, spaces and tabs")


# -- evaluation: the parsed sets as expressions croniter gets right ------------------------------
#
# croniter misreads some of what it accepts: a one-value range ('18-18') is taken for the whole
# field, day-of-month and day-of-week combine by its own rule, and '#'/'L'/'W' combined with the
# other day field come out wrong or unsatisfiable. So croniter is only ever handed explicit value
# lists, one day rule at a time: the expression's days are a union of "sides", each a croniter
# expression with at most one restricted day field or both combined with AND (day_or=False), plus,
# where even that is beyond croniter ('5L' with a restricted day-of-month), a date filter.

_ALL_HOURS = frozenset(range(24))
_DAY_S = 86_400


def _values(values: frozenset[int], full: int) -> str:
    return "*" if len(values) == full else ",".join(str(v) for v in sorted(values))


@dataclass(frozen=True)
class _Side:
    """One croniter expression (never advanced itself) and an optional filter on the matched date."""

    template: Any
    accept: Callable[[_dt.date], bool] | None

    def ever_matches(self) -> bool:
        try:
            self.next_wall(copy.copy(self.template), int(_VALIDATION_REFERENCE))
        except _EXHAUSTED:
            return False
        return True

    def next_wall(self, cron: Any, start: int) -> int:
        """The first matching wall second after ``start``; raises an ``_EXHAUSTED`` error if none."""
        wall = int(cron.get_next(float, start_time=float(start)))
        if self.accept is None:
            return wall
        for _ in range(_MAX_FILTERED_DAYS):
            if self.accept(_naive(wall).date()):
                return wall
            # The whole date is refused: resume after its last second.
            wall = int(cron.get_next(float, start_time=float((wall // _DAY_S + 1) * _DAY_S - 1)))
        raise ValueError("no matching date within the search window")


# Dates a filtered side may refuse in a row before it counts as exhausted (~40 years of month ends,
# far more than any satisfiable combination needs; a refused date costs one croniter step).
_MAX_FILTERED_DAYS = 500


class _Matcher:
    """The sides of one schedule; :meth:`fresh` gives a query its own croniter positions."""

    __slots__ = ("sides",)

    def __init__(self, sides: tuple[_Side, ...]) -> None:
        self.sides = sides

    def __copy__(self) -> _Cursor:
        return _Cursor(self.sides)


class _Cursor:
    """Private croniter copies for one query (croniter keeps its position in the instance)."""

    __slots__ = ("crons", "sides")

    def __init__(self, sides: tuple[_Side, ...]) -> None:
        self.sides = sides
        self.crons = [copy.copy(side.template) for side in sides]

    def get_next(self, _ret: type[float], start_time: float) -> float:
        """The first wall second after ``start_time`` matched by any side (croniter's signature)."""
        start = int(start_time)
        if len(self.sides) == 1:
            return self.sides[0].next_wall(self.crons[0], start)
        best: int | None = None
        for side, cron in zip(self.sides, self.crons, strict=True):
            try:
                wall = side.next_wall(cron, start)
            except _EXHAUSTED:
                continue  # this side has no more dates; the others may
            if best is None or wall < best:
                best = wall
        if best is None:
            raise ValueError("no side matches after the start")
        return best


def _sides(f: CronFields) -> list[_Side]:
    """The union of croniter expressions (and filters) that ``f`` means."""
    times = (_values(f.minutes, 60), _values(f.hours, 24))
    month = _values(f.months, 12)
    second = [_values(f.seconds, 60)] if f.has_seconds else []

    def side(dom: str, dow: str, accept: Callable[[_dt.date], bool] | None = None) -> _Side:
        return _Side(
            croniter(" ".join([*times, dom, month, dow, *second]), _VALIDATION_REFERENCE, day_or=False),
            accept,
        )

    dom_parts = _dom_parts(f)
    dow_parts = _dow_parts(f)
    if f.day_rule == "or":
        if not (f.dom_restricted and f.dow_restricted):
            return [side("*", "*")]  # one field admits every day, and either field may match
        return [side(d, "*") for d in dom_parts] + [side(dom or "*", w, ok) for w, dom, ok in dow_parts]
    out: list[_Side] = []
    for d in dom_parts:
        for w, window, ok in dow_parts:
            if window is None and ok is None:
                out.append(side(d, w))
            elif window is not None and d != "*" and d.replace(",", "").isdigit():
                # k-th weekday with plain days: the days inside the k-th week, on that weekday.
                days = sorted(set(int(x) for x in d.split(",")) & set(_range_of(window)))
                if days:
                    out.append(side(",".join(map(str, days)), w))
            elif d == "*":
                out.append(side(window or "*", w, ok))
            else:
                out.append(side(d, "*", _dow_accept(f, w, window)))
    return out


def _dom_parts(f: CronFields) -> list[str]:
    if not f.dom_restricted:
        return ["*"]
    parts = [f"{w}w" for w in sorted(f.nearest_weekday)]
    if f.days:
        parts.append(",".join(str(d) for d in sorted(f.days)))
    if f.last_day:
        # 'l' is a side of its own: croniter reads a day list of 31 entries as '*', so '2-31,L'
        # handed over as one list fired on every 1st as well (found by the cronsim differential).
        parts.append("l")
    return parts


def _dow_parts(f: CronFields) -> list[tuple[str, str | None, Callable[[_dt.date], bool] | None]]:
    """(croniter day-of-week, croniter day-of-month window or None, date filter or None) per part."""
    if not f.dow_restricted:
        return [("*", None, None)]
    parts: list[tuple[str, str | None, Callable[[_dt.date], bool] | None]] = []
    if f.weekdays:
        parts.append((_values(f.weekdays, 7), None, None))
    for weekday, k in sorted(f.nth_weekdays):
        # The k-th weekday d is weekday d within days 7k-6..7k: plain lists croniter evaluates exactly.
        parts.append((_cron_weekday(weekday), f"{7 * k - 6}-{min(7 * k, 31)}", None))
    for weekday in sorted(f.last_weekdays):
        parts.append((f"l{weekday}", None, None))
    return parts


def _range_of(window: str) -> range:
    a, _, b = window.partition("-")
    return range(int(a), int(b) + 1)


def _cron_weekday(weekday: int) -> str:
    return str(weekday)


def _dow_accept(f: CronFields, dow: str, window: str | None) -> Callable[[_dt.date], bool]:
    """A filter for one day-of-week part, for days croniter enumerates from a day-of-month part."""
    if window is not None:
        weekday, days = int(dow), _range_of(window)
        return lambda d: (d.isoweekday() % 7) == weekday and d.day in days
    weekday = int(dow[1:])  # 'l<weekday>': the last one of the month
    return lambda d: (d.isoweekday() % 7) == weekday and d.day + 7 > calendar.monthrange(d.year, d.month)[1]


def day_rule_note(expr: str) -> str | None:
    """How the day fields of ``expr`` combine, when both are set (neither is a bare ``*``/``?``).

    For ``cron preview``; None when one day field is a bare ``*`` (the other alone decides). Raises
    :class:`InvalidSpec` (``trigger.cron``) for an expression outside the grammar.
    """
    f = _fields_of(expr)
    if not f.both_day_fields_set:
        return None
    dom, dow = f"day-of-month {f.dom_text!r}", f"day-of-week {f.dow_text!r}"
    if f.day_rule == "or":
        return f"day rule: OR - a day fires when {dom} or {dow} matches (both fields are restricted)"
    starred = dom if f.dom_text[0] in "*?" else dow
    return (
        f"day rule: AND - {starred} starts with '*', so it counts as unrestricted and a day fires "
        f"only when both {dom} and {dow} match"
    )


@functools.lru_cache(maxsize=4096)
def meaning_change(expr: str) -> str | None:
    """What ``expr`` meant before raftsched parsed cron itself, if that differs from what it means now.

    Before, croniter 7.0.0 read the expression directly: a one-value range (``18-18``) was the whole
    field, and day-of-month and day-of-week combined with OR whenever both were restricted (no
    crontab ``*`` rule). A task stored then fires by the new meaning now; this says how it differs
    (None: the same, or the expression was refused then or is refused now). Pure and cached.
    """
    try:
        _check_text(expr)
        new = parse_fields(expr)
    except (_BadExpression, CronSyntaxError):
        return None
    fields = expr.split()
    if len(fields) == 1:
        return None  # a macro: croniter expanded those correctly
    try:
        old = croniter(" ".join(fields), _VALIDATION_REFERENCE)
    except (ValueError, TypeError):
        return None  # refused then, so no stored task has it
    changes: list[str] = []
    written = expr.split()
    for index, name, full, new_values in (
        (0, "minute", 60, new.minutes),
        (1, "hour", 24, new.hours),
        (3, "month", 12, new.months),
        (5, "second", 60, new.seconds if new.has_seconds else None),
    ):
        if new_values is None:
            continue
        before = _old_values(old.expanded[index], full, 1 if index == 3 else 0)
        if before != new_values:
            changes.append(
                f"{name} {written[index]!r} was read as {_show(before, full)}, now {_show(new_values, full)}"
            )
    old_dom = (
        frozenset(_old_values([v for v in old.expanded[2] if v != "l"], 31, 1) - set(old.nearest_weekday)),
        "l" in old.expanded[2],
        frozenset(old.nearest_weekday),
    )
    nth = old.nth_weekday_of_month
    old_dow = (
        frozenset(_old_values(old.expanded[4], 7, 0) - set(nth)),
        frozenset((w, k) for w, ks in nth.items() for k in ks if k != "l"),
        frozenset(w for w, ks in nth.items() if "l" in ks),
    )
    new_dom = (new.days, new.last_day, new.nearest_weekday)
    new_dow = (new.weekdays, new.nth_weekdays, new.last_weekdays)
    # croniter combined the day fields with OR unless one of them expanded to '*'.
    old_rule = "or" if old.expanded[2][0] != "*" and old.expanded[4][0] != "*" else "and"
    old_days = _day_meaning(old_rule, old_dom, old_dow)
    new_days = _day_meaning(new.day_rule, new_dom, new_dow)
    if old_rule == "or" and (nth or old.nearest_weekday) and old_days[0] == "or":
        # croniter kept '#' and 'W' applied to both halves of its OR: not the union it looks like.
        changes.append(
            f"days: '#'/'W' restricted the other day field too before, now {_DAY_MODES[new_days[0]]}"
        )
    elif old_days[0] != new_days[0]:
        changes.append(f"days: before, {_DAY_MODES[old_days[0]]}; now, {_DAY_MODES[new_days[0]]}")
    if new_days[1] is not None and old_dom != new_dom:
        changes.append(
            f"day-of-month {written[2]!r} was read as {_show_dom(old_dom)}, now {_show_dom(new_dom)}"
        )
    if new_days[2] is not None and old_dow != new_dow:
        changes.append(
            f"day-of-week {written[4]!r} was read as {_show_dow(old_dow)}, now {_show_dow(new_dow)}"
        )
    if not changes:
        # Backstop for the combinations the field comparison above does not model (croniter's
        # own quirks with '#', 'W' and lists that cover a whole field): compare the fires.
        differs = _first_fire_difference(old, expr)
        if differs is not None:
            changes.append(differs)
    if changes:
        try:
            _parse_cached(expr, "UTC")
        except _BadExpression:
            changes.append(
                "no date satisfies it now, so the task does not fire until its expression is changed"
            )
    return "; ".join(changes) or None


_COMPARED_FIRES = 50


def _iso_utc(ms: int) -> str:
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _first_fire_difference(old: Any, expr: str) -> str | None:
    """Where the old reading's first fires (UTC, from the validation reference) part from the new."""
    try:
        before = [int(old.get_next(float)) * 1000 for _ in range(_COMPARED_FIRES)]
    except (ValueError, TypeError, ArithmeticError):
        return None
    try:
        now = _parse_cached(expr, "UTC").fires_between(
            int(_VALIDATION_REFERENCE) * 1000, before[-1], _COMPARED_FIRES
        )
    except _BadExpression:
        return "the fires differ"
    for was, is_now in zip(before, [*now, *([None] * (len(before) - len(now)))], strict=True):
        if was != is_now:
            return f"the fires differ from {_iso_utc(min(was, is_now) if is_now is not None else was)}"
    return None


def changed_meaning_warning(expr: str) -> str | None:
    """The warning for a stored task whose cron expression changed meaning (see :func:`meaning_change`).

    One sentence, the same in the leader's log and in ``task show``; None when nothing changed.
    """
    change = meaning_change(expr)
    if change is None:
        return None
    return (
        f"cron {expr!r} changed meaning when raftsched adopted crontab's reading ({change}); "
        "the task fires by the new meaning - check it, or rewrite the expression in a form both "
        "readings agree on to silence this warning"
    )


_DomKey = tuple[frozenset[int], bool, frozenset[int]]
_DowKey = tuple[frozenset[int], frozenset[tuple[int, int]], frozenset[int]]
_FULL_DOM: _DomKey = (frozenset(range(1, 32)), False, frozenset())
_FULL_DOW: _DowKey = (frozenset(range(7)), frozenset(), frozenset())
_DAY_MODES = {
    "all": "every day fires",
    "dom": "day-of-month alone decides",
    "dow": "day-of-week alone decides",
    "or": "a day matching either day field fires",
    "and": "a day must match both day fields (crontab: a field starting with '*' is unrestricted)",
}


def _day_meaning(rule: str, dom: _DomKey, dow: _DowKey) -> tuple[str, _DomKey | None, _DowKey | None]:
    """The day predicate, normalised: a mode and the fields it reads (None: not read)."""
    dom_all, dow_all = dom == _FULL_DOM, dow == _FULL_DOW
    if rule == "or":
        if dom_all or dow_all:
            return "all", None, None
        return "or", dom, dow
    if dom_all and dow_all:
        return "all", None, None
    if dom_all:
        return "dow", None, dow
    if dow_all:
        return "dom", dom, None
    return "and", dom, dow


def _show_dom(dom: _DomKey) -> str:
    if dom == _FULL_DOM:
        return "every day (*)"
    days, last, nearest = dom
    parts = [str(d) for d in sorted(days)] + (["L"] if last else []) + [f"{w}W" for w in sorted(nearest)]
    return ",".join(parts)


def _show_dow(dow: _DowKey) -> str:
    if dow == _FULL_DOW:
        return "every weekday (*)"
    plain, nth, last = dow
    parts = (
        [str(d) for d in sorted(plain)]
        + [f"{w}#{k}" for w, k in sorted(nth)]
        + [f"{w}L" for w in sorted(last)]
    )
    return ",".join(parts)


def _old_values(expanded: list[Any], full: int, low: int) -> set[int]:
    if expanded == ["*"]:
        return set(range(low, low + full))
    return {int(v) for v in expanded if isinstance(v, int) or str(v).isdigit()}


def _show(values: frozenset[int] | set[int], full: int) -> str:
    if len(values) == full:
        return "every value (*)"
    return ",".join(str(v) for v in sorted(values))


def _fields_of(expr: str) -> CronFields:
    try:
        _check_text(expr)
        return parse_fields(expr)
    except _BadExpression as bad:
        raise InvalidSpec("trigger.cron", bad.reason) from None
    except CronSyntaxError as bad:
        raise InvalidSpec("trigger.cron", bad.reason) from None


def preview(expr: str, tz: str, from_ms: int, count: int) -> list[tuple[int, str]]:
    """The next ``count`` fires after ``from_ms``: ``(utc_ms, local ISO-8601 with offset)`` pairs.

    For the ``cron preview`` command. ``count`` must be 1..MAX_PREVIEW; fewer pairs come back only if
    the calendar ends first. Raises :class:`InvalidSpec` for a bad expression, zone or count.
    """
    if not 1 <= count <= MAX_PREVIEW:
        raise InvalidSpec("count", f"must be between 1 and {MAX_PREVIEW}, got {count}")
    schedule = CronSchedule.parse(expr, tz)
    fires = schedule.fires_between(from_ms, _MAX_MS, count)
    return [(f, schedule.local_iso(f)) for f in fires]


# The last millisecond of year 9999 UTC; datetime cannot represent anything later.
_MAX_MS = 253_402_300_799_999


def _floor_seconds(ms: int) -> int:
    return ms // 1000


def _naive(wall_s: int) -> _dt.datetime:
    return _NAIVE_EPOCH + _dt.timedelta(seconds=wall_s)


def _offset_s(aware: _dt.datetime) -> int:
    off = aware.utcoffset()
    return 0 if off is None else off // _ONE_SECOND


def _first_instant_with_offset(zone: zoneinfo.ZoneInfo, lo: int, hi: int, offset: int) -> int:
    """The first epoch second in ``(lo, hi]`` whose UTC offset is ``offset`` (binary search).

    Precondition: ``lo`` has a different offset and ``hi`` has ``offset``; one transition between.
    """
    while hi - lo > 1:
        mid = (lo + hi) // 2
        if _offset_s(_dt.datetime.fromtimestamp(mid, zone)) == offset:
            hi = mid
        else:
            lo = mid
    return hi
