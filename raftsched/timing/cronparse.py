"""The cron grammar: an expression parsed into explicit value sets, with the field named in every error.

Pure: no clock, no IO, no third-party import. :mod:`raftsched.timing.cron` turns the sets into
expressions croniter evaluates correctly and applies the DST policy; this module only decides what an
expression *means*.

Grammar (case-insensitive)
    Five fields ``minute hour day-of-month month day-of-week``, or six with the seconds field LAST,
    or one macro ``@hourly @daily @midnight @weekly @monthly @yearly @annually``. A field is a
    comma list of elements:

    ==============  ==========================================================================
    ``*``           every value of the field
    ``n``           one value; months also ``jan``..``dec``, weekdays ``sun``..``sat`` (0 or 7 is
                    Sunday)
    ``a-b``         every value from a to b; ``18-18`` is just 18. A range whose end is below its
                    start wraps around (``fri-mon`` is Fri, Sat, Sun, Mon) - an extension, crontab
                    refuses it
    ``*/s``         every s-th value from the field's first; ``a-b/s`` and ``a/s`` (``a`` to the
                    field's last value) likewise
    ``?``           day-of-month or day-of-week only, alone: the same as ``*``
    ``L``           day-of-month: the month's last day (also in lists, and as a range end ``15-L``)
    ``nW``          day-of-month, alone: the weekday (Mon-Fri) nearest to day n, within the month
    ``d#k``         day-of-week: the k-th (1-5) weekday d of the month; ``mon-wed#2`` is each of them
    ``dL``, ``Ld``  day-of-week: the last weekday d of the month
    ==============  ==========================================================================

    ``H`` (hash) and ``R`` (random) are refused (``R`` differs per evaluation, so replicas would
    disagree), as is a seventh (year) field. Plain weekdays cannot be mixed with ``#``/``L`` in one
    field, and ``W`` cannot be combined with other elements, as before.

Day rule (crontab's: Vixie cron, cronie, Debian cron)
    A day fires when its month matches and: if day-of-month or day-of-week starts with ``*`` (or is
    ``?``), BOTH day fields must match (so a plain ``*`` simply leaves the other field in charge, and
    ``*/7`` counts as unrestricted for the rule); otherwise EITHER may match. ``0 12 13 * fri`` fires
    on every 13th and every Friday; ``43 * */7 * 2,3`` on days 1, 8, 15, 22 and 29 that are a Tuesday
    or a Wednesday.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

__all__ = [
    "ALIASES",
    "FIELD_NAMES",
    "CronFields",
    "CronSyntaxError",
    "parse_fields",
]

ALIASES: dict[str, str] = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}

# Field order as written: seconds, when present, come last.
FIELD_NAMES = ("minute", "hour", "day-of-month", "month", "day-of-week", "second")
_BOUNDS = ((0, 59), (0, 23), (1, 31), (1, 12), (0, 7), (0, 59))
_MINUTE, _HOUR, _DOM, _MONTH, _DOW, _SECOND = range(6)
_MONTH_NAMES = ("jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec")
_DAY_NAMES = ("sun", "mon", "tue", "wed", "thu", "fri", "sat")

DayRule = Literal["or", "and"]


class CronSyntaxError(ValueError):
    """An expression outside the grammar; ``reason`` names the field (``minute: 61 out of range 0-59``)."""

    def __init__(self, reason: str) -> None:
        super().__init__(reason)
        self.reason = reason


@dataclass(frozen=True, slots=True)
class CronFields:
    """What an expression means, as explicit sets (weekdays 0-6, Sunday 0).

    ``days``/``last_day``/``nearest_weekday`` together are the day-of-month field; ``weekdays``,
    ``nth_weekdays`` (weekday, k) and ``last_weekdays`` the day-of-week field. A field written ``*``
    or ``?`` holds every value and nothing else. ``dom_text``/``dow_text`` are the fields as written.
    """

    seconds: frozenset[int]
    minutes: frozenset[int]
    hours: frozenset[int]
    days: frozenset[int]
    last_day: bool
    nearest_weekday: frozenset[int]
    months: frozenset[int]
    weekdays: frozenset[int]
    nth_weekdays: frozenset[tuple[int, int]]
    last_weekdays: frozenset[int]
    has_seconds: bool
    dom_text: str
    dow_text: str

    @property
    def dom_restricted(self) -> bool:
        """False when day-of-month admits every day (``*``, ``?``, ``1-31``, ``*/1``)."""
        return self.days != _ALL_DAYS or bool(self.nearest_weekday)

    @property
    def dow_restricted(self) -> bool:
        """False when day-of-week admits every day (``*``, ``?``, ``0-6``, ``*/1``)."""
        return self.weekdays != _ALL_WEEKDAYS or bool(self.nth_weekdays or self.last_weekdays)

    @property
    def day_rule(self) -> DayRule:
        """``and`` when either day field starts with ``*`` or is ``?``, else ``or`` (crontab's rule)."""
        starred = self.dom_text[0] in "*?" or self.dow_text[0] in "*?"
        return "and" if starred else "or"

    @property
    def both_day_fields_set(self) -> bool:
        """Neither day field is written as a bare ``*`` or ``?``: the day rule decides the days."""
        return self.dom_text not in ("*", "?") and self.dow_text not in ("*", "?")


_ALL_DAYS = frozenset(range(1, 32))
_ALL_WEEKDAYS = frozenset(range(7))


def split_fields(expr: str) -> list[str]:
    """The expression's fields, a macro replaced by its five fields (lower-cased).

    Raises :class:`CronSyntaxError` for an unknown macro or a wrong number of fields.
    """
    fields = expr.split()
    if len(fields) == 1 and fields[0].startswith("@"):
        alias = ALIASES.get(fields[0].lower())
        if alias is None:
            raise CronSyntaxError(f"unknown alias {fields[0]!r}; use one of {', '.join(sorted(ALIASES))}")
        return alias.split()
    if len(fields) not in (5, 6):
        raise CronSyntaxError(
            f"expected 5 fields (minute hour day month weekday) or 6 (… second), got {len(fields)}"
        )
    return [f.lower() for f in fields]


def parse_fields(expr: str) -> CronFields:
    """Parse ``expr`` (already checked for length and characters) into :class:`CronFields`.

    Raises :class:`CronSyntaxError` naming the field for anything outside the grammar. Does not
    decide whether the expression ever matches (that needs a calendar).
    """
    fields = split_fields(expr)
    has_seconds = len(fields) == 6
    for index, text in enumerate(fields):
        _refuse_hash_and_random(FIELD_NAMES[index], text)
    minutes = _plain_field(_MINUTE, fields[_MINUTE])
    hours = _plain_field(_HOUR, fields[_HOUR])
    months = _plain_field(_MONTH, fields[_MONTH])
    seconds = _plain_field(_SECOND, fields[_SECOND]) if has_seconds else frozenset({0})
    days, last_day, nearest = _dom_field(fields[_DOM])
    weekdays, nth, last_weekdays = _dow_field(fields[_DOW])
    return CronFields(
        seconds=seconds,
        minutes=minutes,
        hours=hours,
        days=days,
        last_day=last_day,
        nearest_weekday=nearest,
        months=months,
        weekdays=weekdays,
        nth_weekdays=nth,
        last_weekdays=last_weekdays,
        has_seconds=has_seconds,
        dom_text=fields[_DOM],
        dow_text=fields[_DOW],
    )


# -- fields -------------------------------------------------------------------------------------


def _refuse_hash_and_random(name: str, text: str) -> None:
    # An element (between ',', '-', '/') starting with h/r is croniter's hash/random syntax; no month
    # or weekday name starts with either letter.
    for piece in text.replace("-", ",").replace("/", ",").split(","):
        if piece.startswith("r"):
            raise CronSyntaxError(f"{name}: 'R' (random) is not allowed, replicas would disagree: {text!r}")
        if piece.startswith("h"):
            raise CronSyntaxError(f"{name}: 'H' (hash) is not supported: {text!r}")


def _plain_field(index: int, text: str) -> frozenset[int]:
    values: set[int] = set()
    for element in _elements(index, text):
        values.update(_expand(index, element))
    return frozenset(values)


def _dom_field(text: str) -> tuple[frozenset[int], bool, frozenset[int]]:
    name = FIELD_NAMES[_DOM]
    if text == "?":
        return _ALL_DAYS, False, frozenset()
    elements = _elements(_DOM, text)
    days: set[int] = set()
    last = False
    nearest: set[int] = set()
    for element in elements:
        if element == "l":
            last = True
        elif element.endswith("w") or (element.startswith("w") and element[1:].isdigit()):
            digits = element[:-1] if element.endswith("w") else element[1:]
            if len(elements) > 1:
                raise CronSyntaxError(f"{name}: 'W' must stand alone in the field: {text!r}")
            if digits == "l":
                raise CronSyntaxError(f"{name}: 'LW' is not supported: {text!r}")
            nearest.add(_number(_DOM, digits))
        elif "l" in element:
            head, sep, tail = element.partition("-")
            if sep and tail == "l" and "l" not in head:
                days.update(range(_number(_DOM, head), 32))  # '15-L': to the month's last day
            else:
                raise CronSyntaxError(f"{name}: 'L' stands alone or ends a range ('15-L'): {element!r}")
        else:
            days.update(_expand(_DOM, element))
    return frozenset(days), last, frozenset(nearest)


def _dow_field(text: str) -> tuple[frozenset[int], frozenset[tuple[int, int]], frozenset[int]]:
    name = FIELD_NAMES[_DOW]
    if text == "?":
        return _ALL_WEEKDAYS, frozenset(), frozenset()
    plain: set[int] = set()
    nth: set[tuple[int, int]] = set()
    last: set[int] = set()
    for element in _elements(_DOW, text):
        if "#" in element:
            days, _, k = element.partition("#")
            if not k.isdigit() or not 1 <= int(k) <= 5:
                raise CronSyntaxError(f"{name}: '#' takes a week 1-5, got {element!r}")
            if "/" in days or not days:
                raise CronSyntaxError(f"{name}: '#' follows a weekday or a range of them: {element!r}")
            nth.update((d, int(k)) for d in _expand(_DOW, days))
        elif element.endswith("l") and len(element) > 1:
            last.add(_weekday(_value(_DOW, element[:-1])))
        elif element.startswith("l") and len(element) > 1 and element[1:].isdigit():
            last.add(_weekday(_value(_DOW, element[1:])))
        else:
            plain.update(_weekday(v) for v in _expand(_DOW, element))
    if plain and (nth or last) and plain != _ALL_WEEKDAYS:
        raise CronSyntaxError(f"{name}: plain weekdays cannot be mixed with '#' or 'L': {text!r}")
    if nth or last:
        plain -= _ALL_WEEKDAYS  # '*,5#2' : the '*' adds nothing the other elements need
    return frozenset(plain), frozenset(nth), frozenset(last)


def _elements(index: int, text: str) -> list[str]:
    elements = text.split(",")
    if any(not e for e in elements):
        raise CronSyntaxError(f"{FIELD_NAMES[index]}: empty list element in {text!r}")
    if "?" in text:
        where = "stand alone" if index in (_DOM, _DOW) else "appear only in day-of-month or day-of-week"
        raise CronSyntaxError(f"{FIELD_NAMES[index]}: '?' must {where}: {text!r}")
    return elements


def _expand(index: int, element: str) -> list[int]:
    """``*``, ``n``, ``a-b``, each optionally ``/step``; ``n/step`` runs to the field's last value."""
    name = FIELD_NAMES[index]
    low, high = _BOUNDS[index]
    body, slash, step_text = element.partition("/")
    step = 1
    if slash:
        if not step_text.isdigit():
            raise CronSyntaxError(f"{name}: step {step_text!r} is not a number")
        step = int(step_text)
        if step == 0:
            raise CronSyntaxError(f"{name}: step must be at least 1, got 0")
    if body == "*":
        first, last = low, (6 if index == _DOW else high)
    else:
        a, dash, b = body.partition("-")
        first = _value(index, a)
        last = _value(index, b) if dash else (high if slash else first)
    if first <= last:
        return list(range(first, last + 1, step))
    # A wrapped range ('fri-mon', '50-10/5'): on to the field's end, then from its start, stepping
    # through the joined sequence.
    top = 6 if index == _DOW else high
    return [*range(first, top + 1), *range(low, last + 1)][::step]


def _value(index: int, text: str) -> int:
    if index == _MONTH and text in _MONTH_NAMES:
        return _MONTH_NAMES.index(text) + 1
    if index == _DOW and text in _DAY_NAMES:
        return _DAY_NAMES.index(text)
    return _number(index, text)


def _number(index: int, text: str) -> int:
    name = FIELD_NAMES[index]
    low, high = _BOUNDS[index]
    if not text.isdigit() or not text.isascii():
        kind = {_MONTH: "a month", _DOW: "a weekday"}.get(index, "a number")
        raise CronSyntaxError(f"{name}: {text!r} is not {kind}")
    value = int(text)
    if not low <= value <= high:
        raise CronSyntaxError(f"{name}: {value} out of range {low}-{high}")
    return value


def _weekday(value: int) -> int:
    return value % 7  # 7 is Sunday too
