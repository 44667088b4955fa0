"""Unit tests for the hierarchical timing wheel: one behaviour per test, small hand-checked cases."""

from __future__ import annotations

import pytest

from raftsched.timing.wheel import TimingWheel

HOUR_MS = 3_600_000
YEAR_MS = 365 * 24 * HOUR_MS


def small_wheel(start_ms: int = 0) -> TimingWheel[str]:
    """1 ms ticks, 4 slots, 2 levels: the wheel spans only 16 ms, so overflow is easy to reach."""
    return TimingWheel[str](tick_ms=1, wheel_size=4, levels=2, start_ms=start_ms)


def checked_advance(wheel: TimingWheel[str], now_ms: int) -> list[tuple[str, int]]:
    fired = wheel.advance(now_ms)
    wheel._check_invariants()
    return fired


# --------------------------------------------------------------------------- construction


def test_defaults_start_empty_at_start_ms() -> None:
    wheel = TimingWheel[str](start_ms=1_000)
    assert wheel.now_ms == 1_000
    assert len(wheel) == 0
    assert wheel.next_due_ms() is None
    assert wheel.advance(5_000) == []
    assert wheel.now_ms == 5_000


def test_invalid_parameters_are_all_reported_at_once() -> None:
    with pytest.raises(ValueError) as info:
        TimingWheel[str](tick_ms=0, wheel_size=1, levels=0, start_ms=1.5)  # type: ignore[arg-type]
    message = str(info.value)
    for name in ("tick_ms", "wheel_size", "levels", "start_ms"):
        assert name in message


def test_bool_is_not_accepted_as_an_int() -> None:
    with pytest.raises(ValueError, match="tick_ms"):
        TimingWheel[str](tick_ms=True)


# --------------------------------------------------------------------------- insert / cancel


def test_insert_cancel_contains_len_due_of() -> None:
    wheel = TimingWheel[str]()
    wheel.insert("a", 100)
    wheel.insert("b", 200)
    assert len(wheel) == 2
    assert "a" in wheel and "b" in wheel and "c" not in wheel
    assert wheel.due_of("a") == 100
    assert wheel.due_of("c") is None

    assert wheel.cancel("a") is True
    assert wheel.cancel("a") is False
    assert wheel.cancel("never") is False
    assert "a" not in wheel
    assert len(wheel) == 1
    wheel._check_invariants()
    assert wheel.advance(1_000) == [("b", 200)]
    assert len(wheel) == 0


def test_cancelled_key_never_fires() -> None:
    wheel = TimingWheel[str]()
    wheel.insert("a", 50)
    wheel.cancel("a")
    assert wheel.advance(10_000) == []


def test_reinsert_replaces_due_time_later() -> None:
    wheel = TimingWheel[str]()
    wheel.insert("a", 100)
    wheel.insert("a", 300)
    assert len(wheel) == 1
    assert wheel.due_of("a") == 300
    assert wheel.advance(299) == []
    assert wheel.advance(300) == [("a", 300)]


def test_reinsert_replaces_due_time_earlier() -> None:
    wheel = TimingWheel[str]()
    wheel.insert("a", 5_000)
    wheel.insert("a", 20)
    assert wheel.next_due_ms() == 20
    assert wheel.advance(20) == [("a", 20)]
    assert wheel.advance(10_000) == []


def test_fired_key_is_gone_and_can_be_rearmed() -> None:
    wheel = TimingWheel[str]()
    wheel.insert("a", 10)
    assert wheel.advance(10) == [("a", 10)]
    assert "a" not in wheel
    assert wheel.cancel("a") is False
    wheel.insert("a", 25)
    assert wheel.advance(30) == [("a", 25)]


# --------------------------------------------------------------------------- exactness and order


def test_exact_ms_within_a_tick_never_fires_early() -> None:
    wheel = TimingWheel[str](tick_ms=10)
    wheel.insert("a", 15)
    wheel.insert("b", 19)
    assert checked_advance(wheel, 14) == []
    assert checked_advance(wheel, 15) == [("a", 15)]
    assert checked_advance(wheel, 18) == []
    assert wheel.next_due_ms() == 19
    assert checked_advance(wheel, 19) == [("b", 19)]


def test_key_in_current_tick_due_later_stays() -> None:
    wheel = TimingWheel[str](tick_ms=100, start_ms=1_000)
    wheel.insert("later", 1_050)
    assert checked_advance(wheel, 1_049) == []
    assert "later" in wheel
    assert checked_advance(wheel, 1_050) == [("later", 1_050)]


def test_fires_sorted_by_due_then_insertion_sequence() -> None:
    wheel = TimingWheel[str]()
    wheel.insert("c", 30)
    wheel.insert("a", 10)
    wheel.insert("b2", 20)
    wheel.insert("b1", 20)
    wheel.insert("z", 7_000_000)  # another level; it must still sort by due time
    assert wheel.advance(10_000_000) == [("a", 10), ("b2", 20), ("b1", 20), ("c", 30), ("z", 7_000_000)]


def test_replace_moves_key_behind_equal_due_times() -> None:
    wheel = TimingWheel[str]()
    wheel.insert("a", 50)
    wheel.insert("b", 50)
    wheel.insert("a", 50)  # cancel + insert: a new sequence number
    assert wheel.advance(50) == [("b", 50), ("a", 50)]


def test_non_string_keys() -> None:
    wheel = TimingWheel[tuple[str, int]]()
    wheel.insert(("task", 1), 40)
    wheel.insert(("task", 2), 40)
    assert wheel.advance(40) == [(("task", 1), 40), (("task", 2), 40)]


# --------------------------------------------------------------------------- time and jumps


def test_due_in_the_past_fires_on_next_advance() -> None:
    wheel = small_wheel(start_ms=100)
    wheel.insert("past", 50)
    wheel.insert("now", 100)
    assert wheel.next_due_ms() == 50
    assert checked_advance(wheel, 100) == [("past", 50), ("now", 100)]


def test_due_in_the_past_fires_even_if_advance_goes_backwards() -> None:
    wheel = small_wheel(start_ms=100)
    wheel.insert("past", 99)
    assert checked_advance(wheel, 0) == [("past", 99)]
    assert wheel.now_ms == 100


def test_time_never_goes_backwards() -> None:
    wheel = TimingWheel[str]()
    wheel.advance(1_000)
    wheel.insert("a", 1_005)
    assert wheel.advance(500) == []
    assert wheel.now_ms == 1_000
    wheel.insert("b", 900)  # before the wheel's current time, not before the stale 500
    assert wheel.advance(500) == [("b", 900)]
    assert wheel.advance(1_005) == [("a", 1_005)]


def test_negative_times() -> None:
    wheel = TimingWheel[str](tick_ms=7, wheel_size=3, levels=2, start_ms=-1_000)
    wheel.insert("a", -990)
    wheel.insert("b", -1)
    wheel.insert("c", 0)
    wheel.insert("d", 500)
    assert checked_advance(wheel, -991) == []
    assert checked_advance(wheel, -2) == [("a", -990)]
    assert wheel.next_due_ms() == -1
    assert checked_advance(wheel, 0) == [("b", -1), ("c", 0)]
    assert checked_advance(wheel, 499) == []
    assert checked_advance(wheel, 500) == [("d", 500)]


def test_cascades_through_every_level() -> None:
    # 2 ms ticks, 3 slots, 3 levels: spans 54 ms; keys land on every level and cascade down.
    wheel = TimingWheel[str](tick_ms=2, wheel_size=3, levels=3)
    dues = {f"k{due}": due for due in range(1, 54)}
    for key, due in dues.items():
        wheel.insert(key, due)
    wheel._check_invariants()
    fired: list[tuple[str, int]] = []
    for now in range(0, 60):
        step = checked_advance(wheel, now)
        assert all(due == now for _, due in step)  # each fires exactly at its ms, not a tick late
        fired.extend(step)
    assert fired == sorted(dues.items(), key=lambda item: item[1])


def test_huge_jump_fires_everything_in_order() -> None:
    wheel = TimingWheel[str]()
    dues = [5, 999, 86_400_000, 3 * YEAR_MS, 2_000 * YEAR_MS, 5, 17]
    for number, due in enumerate(dues):
        wheel.insert(f"k{number}", due)
    fired = checked_advance(wheel, 10_000 * YEAR_MS)
    assert [due for _, due in fired] == sorted(dues)
    assert fired[0:2] == [("k0", 5), ("k5", 5)]
    assert len(wheel) == 0


@pytest.mark.timeout(10)
def test_huge_jump_does_not_iterate_ticks() -> None:
    # 1 ms ticks and a jump of ~10**18 ticks: any per-tick loop would never finish.
    wheel = TimingWheel[str](tick_ms=1, wheel_size=8, levels=3)
    wheel.insert("near", 3)
    wheel.insert("far", 10**18)
    wheel.insert("farther", 10**18 + 1)
    assert checked_advance(wheel, 10**18) == [("near", 3), ("far", 10**18)]
    assert wheel.next_due_ms() == 10**18 + 1
    assert checked_advance(wheel, 10**18 + 1) == [("farther", 10**18 + 1)]


def test_partial_jump_keeps_keys_not_yet_due() -> None:
    wheel = TimingWheel[str]()
    wheel.insert("hour", HOUR_MS)
    wheel.insert("hour+1ms", HOUR_MS + 1)
    wheel.insert("day", 24 * HOUR_MS)
    assert checked_advance(wheel, HOUR_MS) == [("hour", HOUR_MS)]
    assert wheel.next_due_ms() == HOUR_MS + 1
    assert checked_advance(wheel, 23 * HOUR_MS) == [("hour+1ms", HOUR_MS + 1)]
    assert checked_advance(wheel, 24 * HOUR_MS - 1) == []
    assert checked_advance(wheel, 24 * HOUR_MS) == [("day", 24 * HOUR_MS)]


# --------------------------------------------------------------------------- overflow


def test_overflow_beyond_span_fires_exactly_on_time() -> None:
    wheel = small_wheel()  # span 16 ms
    wheel.insert("far", 1_000)
    wheel.insert("farther", 1_003)
    wheel.insert("near", 9)
    wheel._check_invariants()
    fired: list[tuple[str, int]] = []
    for now in range(0, 1_010):
        step = checked_advance(wheel, now)
        assert all(due == now for _, due in step)
        fired.extend(step)
    assert fired == [("near", 9), ("far", 1_000), ("farther", 1_003)]


def test_overflow_cancel_and_replace() -> None:
    wheel = small_wheel()
    wheel.insert("a", 500)
    wheel.insert("b", 600)
    wheel.insert("a", 700)  # replaced within overflow: the old heap item is dead
    assert wheel.cancel("b") is True
    assert wheel.next_due_ms() == 700
    assert checked_advance(wheel, 699) == []
    assert checked_advance(wheel, 10_000) == [("a", 700)]


def test_overflow_churn_keeps_heap_bounded() -> None:
    wheel = small_wheel()
    for round_ in range(1_000):
        wheel.insert("churn", 10_000 + round_)
        wheel.cancel("churn")
    wheel.insert("kept", 20_000)
    assert len(wheel._overflow) < 200
    wheel._check_invariants()
    assert wheel.advance(30_000) == [("kept", 20_000)]


def test_overflow_key_comes_back_into_wheel_after_partial_advance() -> None:
    wheel = small_wheel()
    wheel.insert("far", 100)
    assert checked_advance(wheel, 95) == []  # 100 is now within the span: cascaded into the wheel
    assert wheel.next_due_ms() == 100
    assert checked_advance(wheel, 100) == [("far", 100)]


# --------------------------------------------------------------------------- next_due_ms


def test_next_due_is_exact_on_every_level_and_overflow() -> None:
    wheel = small_wheel()
    for due in (1_000, 40, 12, 2):  # overflow, overflow, level 1, level 0
        wheel.insert(f"k{due}", due)
        assert wheel.next_due_ms() == due


def test_next_due_after_cancelling_the_earliest() -> None:
    wheel = TimingWheel[str]()
    wheel.insert("a", 100)
    wheel.insert("b", 105)  # same slot as a
    wheel.insert("c", 50_000)
    assert wheel.next_due_ms() == 100
    wheel.cancel("a")
    assert wheel.next_due_ms() == 105
    wheel.cancel("b")
    assert wheel.next_due_ms() == 50_000
    wheel.cancel("c")
    assert wheel.next_due_ms() is None


def test_next_due_reports_past_due_keys() -> None:
    wheel = TimingWheel[str](start_ms=1_000)
    wheel.insert("late", 10)
    wheel.insert("future", 2_000)
    assert wheel.next_due_ms() == 10


def test_sleeping_until_next_due_fires_every_key_on_time() -> None:
    # The driver loop: sleep until next_due_ms, advance, repeat. Each wake-up fires something
    # (next_due_ms is exact) and nothing is ever early or late.
    wheel = TimingWheel[str](tick_ms=10, wheel_size=8, levels=3)
    dues = [3, 3, 17, 80, 81, 640, 5_119, 5_120, 5_121, 99_999, 1_000_000]
    for number, due in enumerate(dues):
        wheel.insert(f"k{number}", due)
    fired: list[int] = []
    wakeups = 0
    while (next_due := wheel.next_due_ms()) is not None:
        wakeups += 1
        step = checked_advance(wheel, next_due)
        assert step and all(due == next_due for _, due in step)
        fired.extend(due for _, due in step)
    assert fired == dues
    assert wakeups == len(set(dues))


# --------------------------------------------------------------------------- memory and sequences


def test_an_armed_key_costs_about_one_int_and_two_dict_entries() -> None:
    """The leader arms every task: at a million tasks each byte per key is a megabyte. An object
    per key (due, seq, level, slot) cost 137 B per armed key here (173 B at 200,000 keys); a
    packed int costs 78 (113)."""
    import random
    import tracemalloc

    n = 20_000
    names = [f"daily-{i:07d}" for i in range(n)]
    rnd = random.Random(7)
    dues = [1_796_000_000_000 + rnd.randrange(1, 86_400_000) for _ in range(n)]
    tracemalloc.start()
    try:
        wheel = TimingWheel[str](start_ms=1_796_000_000_000)
        before = tracemalloc.get_traced_memory()[0]
        for name, due in zip(names, dues, strict=True):
            wheel.insert(name, due)
        per_key = (tracemalloc.get_traced_memory()[0] - before) / n
    finally:
        tracemalloc.stop()
    assert per_key < 110, f"{per_key:.0f} B per armed key"  # 137 B with an object per key
    assert [k for k, _ in wheel.advance(1_796_000_000_000 + 86_400_000)] == [
        name for _, _, name in sorted(zip(dues, range(n), names, strict=True))
    ]


def test_sequences_are_renumbered_in_fire_order_when_they_run_out() -> None:
    wheel = small_wheel()
    wheel._seq_limit = 5
    for i, (key, due) in enumerate([("a", 9), ("b", 3), ("c", 9), ("d", 40), ("e", 3), ("f", 9), ("g", 3)]):
        wheel.insert(key, due)
        if i == 2:
            wheel.cancel("b")
        wheel._check_invariants()
    assert wheel._seq == 6  # renumbered before f (4 armed keys: f is 4) and before g (g is 5)
    assert checked_advance(wheel, 9) == [("e", 3), ("g", 3), ("a", 9), ("c", 9), ("f", 9)]
    assert checked_advance(wheel, 100) == [("d", 40)]


@pytest.mark.parametrize("seed", range(40))
def test_packed_keys_fire_as_a_plain_model_with_ties_and_renumbering(seed: int) -> None:
    """Random inserts (re-inserts, past and far dues, many ties), cancels and advances against a
    plain dict: fired keys in exact (due, insertion) order, never early, with sequences renumbered
    every few inserts (a tiny limit) and keys in the overflow heap (one or two levels)."""
    import random

    rnd = random.Random(seed)
    wheel: TimingWheel[int] = TimingWheel(
        tick_ms=rnd.choice([1, 10]), wheel_size=rnd.choice([2, 4, 8]), levels=rnd.choice([1, 2, 3])
    )
    wheel._seq_limit = rnd.choice([3, 5, 8])
    model: dict[int, tuple[int, int]] = {}  # key -> (due, insertion number)
    inserted = 0
    now = wheel.now_ms
    for _ in range(200):
        op = rnd.random()
        if op < 0.5:
            key, due = rnd.randint(0, 30), now + rnd.choice([-5, 0, 3, 3, 50, 5000])
            wheel.insert(key, due)
            model[key] = (due, inserted)
            inserted += 1
        elif op < 0.65:
            key = rnd.randint(0, 30)
            assert wheel.cancel(key) == (key in model)
            model.pop(key, None)
        else:
            now = max(now, now + rnd.choice([0, 1, 7, 50, 300, 10_000]))
            want = sorted((due, n, key) for key, (due, n) in model.items() if due <= now)
            assert wheel.advance(now) == [(key, due) for due, _n, key in want]
            for _due, _n, key in want:
                del model[key]
        wheel._check_invariants()
        assert wheel.next_due_ms() == min((due for due, _n in model.values()), default=None)


@pytest.mark.parametrize("due", [-5, 0, 700, 3_000, 40_000, 10**13])  # ready, level 0, 1, 2, overflow
@pytest.mark.parametrize(
    "pairs",
    [
        [("a", 0), ("a", 0)],  # re-armed twice at the same time: the cancel empties its slot
        [("a", 0), ("b", 0), ("a", 0), ("a", 0), ("c", 0)],
        [("a", 0), ("b", 0), ("b", 1), ("c", 0), ("a", 0)],
    ],
)
def test_insert_many_of_keys_sharing_a_due_time_is_inserts_in_order(
    due: int, pairs: list[tuple[str, int]]
) -> None:
    one = TimingWheel[str](tick_ms=10, wheel_size=4, levels=3)
    many = TimingWheel[str](tick_ms=10, wheel_size=4, levels=3)
    items = [(key, due + offset) for key, offset in pairs]
    for key, due_ms in items:
        one.insert(key, due_ms)
    many.insert_many(items)
    many._check_invariants()
    assert many.next_due_ms() == one.next_due_ms()
    assert many.advance(10**16) == one.advance(10**16)
