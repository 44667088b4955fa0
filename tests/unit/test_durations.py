"""The one duration and time grammar (CLI, workflow files, config) against exact arithmetic."""

from __future__ import annotations

from fractions import Fraction

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raftsched.errors import InvalidSpec
from raftsched.model import MAX_TIME_MS
from raftsched.timing.durations import (
    UNIT_MS,
    format_duration,
    is_relative_time,
    parse_duration_ms,
    parse_time,
)

MINUTE = 60_000
NOW = 1_796_032_800_000  # 2026-11-30T10:00:00Z


def fixed_now() -> int:
    return NOW


@pytest.mark.parametrize(
    ("text", "ms"),
    [
        ("90", 90_000),
        ("1.5", 1_500),
        ("0.001", 1),
        ("0", 0),
        ("500ms", 500),
        ("1.0ms", 1),
        ("90s", 90_000),
        ("0.1s", 100),
        ("10m", 600_000),
        ("0.5m", 30_000),
        ("2h", 7_200_000),
        ("1.5h", 5_400_000),
        ("1d", 86_400_000),
        ("1w", 604_800_000),
        (" 2h\n", 7_200_000),
        ("007s", 7_000),
    ],
)
def test_parse_duration(text: str, ms: int) -> None:
    assert parse_duration_ms(text, "--timeout") == ms


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("", "is not a duration"),
        ("x", "is not a duration"),
        ("-5", "cannot be negative"),
        ("-5m", "cannot be negative"),
        ("+5m", "is not a duration"),
        ("5 m", "no space between the number and the unit"),
        ("1e3", "is not a duration"),
        (".5s", "is not a duration"),
        ("5.s", "is not a duration"),
        ("5M", "is not a duration"),
        ("5min", "is not a duration"),
        ("1h30m", "is not a duration"),
        ("1.5ms", "not a whole number of milliseconds"),
        ("0.0001s", "not a whole number of milliseconds"),
        ("99999999999w", "longer than any duration"),
        ("12345678901234567", "is not a duration"),
    ],
)
def test_parse_duration_rejects_naming_the_field(text: str, reason: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        parse_duration_ms(text, "tasks[0].timeout")
    assert caught.value.field == "tasks[0].timeout"
    assert reason in caught.value.reason and repr(text) in caught.value.reason


def test_bare_unit_is_the_unit_of_a_number_alone() -> None:
    assert parse_duration_ms("250", "lease_ms", bare_unit="ms") == 250
    assert parse_duration_ms("250s", "lease_ms", bare_unit="ms") == 250_000
    assert parse_duration_ms("2", "window", bare_unit="h") == 7_200_000
    with pytest.raises(InvalidSpec, match="has no unit"):
        parse_duration_ms("250", "lease_ms", bare_unit=None)
    assert parse_duration_ms("250ms", "lease_ms", bare_unit=None) == 250


@pytest.mark.parametrize(
    ("ms", "text"),
    [
        (0, "0s"),
        (1, "1ms"),
        (1_500, "1500ms"),
        (90_000, "90s"),
        (600_000, "10m"),
        (5_400_000, "90m"),
        (7_200_000, "2h"),
        (86_400_000, "1d"),
        (1_209_600_000, "2w"),
    ],
)
def test_format_duration(ms: int, text: str) -> None:
    assert format_duration(ms) == text


def test_format_duration_refuses_negative() -> None:
    with pytest.raises(ValueError, match="negative"):
        format_duration(-1)


@given(st.integers(min_value=0, max_value=MAX_TIME_MS))
def test_format_then_parse_round_trips(ms: int) -> None:
    text = format_duration(ms)
    assert parse_duration_ms(text, "x") == ms
    assert parse_duration_ms(text, "x", bare_unit=None) == ms  # always written with a unit


@given(
    st.integers(min_value=0, max_value=10**9),
    st.text(alphabet="0123456789", min_size=0, max_size=9),
    st.sampled_from(["", *UNIT_MS]),
)
def test_parse_matches_exact_arithmetic(whole: int, fraction: str, unit: str) -> None:
    text = f"{whole}.{fraction}{unit}" if fraction else f"{whole}{unit}"
    exact = Fraction(f"{whole}.{fraction or 0}") * UNIT_MS[unit or "s"]
    if exact.denominator != 1:
        with pytest.raises(InvalidSpec, match="whole number of milliseconds"):
            parse_duration_ms(text, "x")
    elif exact > MAX_TIME_MS:
        with pytest.raises(InvalidSpec, match="longer than"):
            parse_duration_ms(text, "x")
    else:
        assert parse_duration_ms(text, "x") == exact.numerator


# -- times -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-11-30T10:00:00Z", NOW),
        ("2026-11-30T11:00:00+01:00", NOW),
        ("2026-11-30T10:00:00.250Z", NOW + 250),
        ("2026-11-30", NOW - 10 * 60 * MINUTE),
        ("now", NOW),
        (" NOW ", NOW),
        ("-10m", NOW - 10 * MINUTE),
        ("-2h", NOW - 120 * MINUTE),
        ("-1.5h", NOW - 90 * MINUTE),
        ("-1d", NOW - 24 * 60 * MINUTE),
        ("+30s", NOW + 30_000),
        ("+1w", NOW + 7 * 24 * 60 * MINUTE),
        ("-500ms", NOW - 500),
        ("1796032800000", NOW),
        ("0", 0),
    ],
)
def test_parse_time(text: str, expected: int) -> None:
    assert parse_time(text, fixed_now) == expected


@pytest.mark.parametrize(
    ("text", "reason"),
    [
        ("2026-11-30T10:00:00", "has no UTC offset"),
        ("yesterday", "is not a time"),
        ("10m", "is not a time"),
        ("-10 m", "is not a time"),
        ("-10", "is not a time"),
        ("", "is not a time"),
        ("2026-13-01", "is not a time"),
        ("99999999999999999999", "outside 1970-01-01 .. 9999-12-31"),
        ("1969-12-31", "outside"),
        ("-100000d", "outside"),
        ("-1.5ms", "not a whole number of milliseconds"),
    ],
)
def test_parse_time_rejects(text: str, reason: str) -> None:
    with pytest.raises(InvalidSpec) as caught:
        parse_time(text, fixed_now, "--since")
    assert caught.value.field == "--since"
    assert reason in caught.value.reason


def test_now_is_read_only_when_needed() -> None:
    def no_clock() -> int:
        raise AssertionError("the clock was read")

    assert parse_time("2026-11-30", no_clock) == NOW - 10 * 60 * MINUTE
    assert parse_time("1796032800000", no_clock) == NOW


@given(
    st.sampled_from(["+", "-"]),
    st.integers(min_value=0, max_value=10**6),
    st.sampled_from(list(UNIT_MS)),
)
def test_relative_time_is_now_plus_the_duration(sign: str, n: int, unit: str) -> None:
    text = f"{sign}{n}{unit}"
    assert is_relative_time(text)
    offset = n * UNIT_MS[unit]
    expected = NOW + offset if sign == "+" else NOW - offset
    if 0 <= expected <= MAX_TIME_MS:
        assert parse_time(text, fixed_now) == expected
    else:
        with pytest.raises(InvalidSpec, match="outside"):
            parse_time(text, fixed_now)


@pytest.mark.parametrize("text", ["-10m", "+2h", "-1.5d", " -500ms "])
def test_is_relative_time(text: str) -> None:
    assert is_relative_time(text)


@pytest.mark.parametrize("text", ["10m", "-10", "-10 m", "--since", "-x", "now"])
def test_is_not_relative_time(text: str) -> None:
    assert not is_relative_time(text)
