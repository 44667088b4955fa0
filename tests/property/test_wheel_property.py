"""The timing wheel against a dumb oracle: a dict of key -> (due_ms, seq), sorted on demand.

Random interleavings of insert / replace / cancel / advance, with small, large and huge time
jumps (and backwards ones), over wheel shapes small enough that cascades and the overflow heap
are exercised constantly.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from raftsched.timing.wheel import TimingWheel

KEYS = st.integers(min_value=0, max_value=11)

# Offsets from the current time. The mix matters: tiny offsets hit the current tick and slot,
# medium ones the upper levels, huge ones the overflow heap and multi-level jumps.
OFFSETS = st.one_of(
    st.integers(min_value=-30, max_value=30),
    st.integers(min_value=0, max_value=2_000),
    st.integers(min_value=0, max_value=10**7),
    st.integers(min_value=10**9, max_value=10**15),
)
# Offsets shared by many keys of one insert_many (a batch of every-second tasks re-armed at the
# same next fire), in the ready set, on level 0, higher and in the overflow heap: a key due when
# the one before it was goes where that one went, unless a cancel came in between.
SHARED = st.sampled_from([-7, 0, 5, 900, 70_000, 10**13])
BATCH_OFFSETS = st.one_of(OFFSETS, SHARED, SHARED)
JUMPS = st.one_of(
    st.integers(min_value=-50, max_value=0),  # time never goes backwards: must act as 0
    st.integers(min_value=0, max_value=40),
    st.integers(min_value=0, max_value=5_000),
    st.integers(min_value=0, max_value=10**8),
    st.integers(min_value=10**12, max_value=10**16),
)
TICKS = st.sampled_from([1, 3, 10, 1_000])
SIZES = st.sampled_from([2, 3, 4, 8, 256])
LEVELS = st.integers(min_value=1, max_value=5)
STARTS = st.integers(min_value=-(10**6), max_value=10**6)


class WheelVersusOracle(RuleBasedStateMachine):
    wheel: TimingWheel[int]

    def __init__(self) -> None:
        super().__init__()
        self.oracle: dict[int, tuple[int, int]] = {}
        self.seq = 0
        self.now = 0

    @initialize(tick_ms=TICKS, wheel_size=SIZES, levels=LEVELS, start_ms=STARTS)
    def make_wheel(self, tick_ms: int, wheel_size: int, levels: int, start_ms: int) -> None:
        self.wheel = TimingWheel[int](
            tick_ms=tick_ms, wheel_size=wheel_size, levels=levels, start_ms=start_ms
        )
        self.now = start_ms

    @rule(key=KEYS, offset=OFFSETS)
    def insert(self, key: int, offset: int) -> None:
        due = self.now + offset
        self.wheel.insert(key, due)
        self.oracle[key] = (due, self.seq)  # replacing takes a fresh sequence, like the wheel
        self.seq += 1

    @rule(pairs=st.lists(st.tuples(KEYS, BATCH_OFFSETS), max_size=8))
    def insert_many(self, pairs: list[tuple[int, int]]) -> None:
        # The same as inserting each pair in order (a key twice: the last due time counts).
        self.wheel.insert_many([(key, self.now + offset) for key, offset in pairs])
        for key, offset in pairs:
            self.oracle[key] = (self.now + offset, self.seq)
            self.seq += 1

    @rule(key=KEYS)
    def cancel(self, key: int) -> None:
        assert self.wheel.cancel(key) == (key in self.oracle)
        self.oracle.pop(key, None)

    def _advance_and_compare(self, target: int, keys_only: bool = False) -> list[tuple[int, int]]:
        effective = max(self.now, target)
        due = sorted((due, seq, key) for key, (due, seq) in self.oracle.items() if due <= effective)
        for _, _, key in due:
            del self.oracle[key]
        expected = [(key, due_ms) for due_ms, _, key in due]
        if keys_only:
            assert self.wheel.advance_keys(target) == [key for key, _ in expected]
            fired = expected
        else:
            fired = self.wheel.advance(target)
            assert fired == expected
        self.now = effective
        return fired

    @rule(jump=JUMPS)
    def advance(self, jump: int) -> None:
        self._advance_and_compare(self.now + jump)

    @rule(jump=JUMPS)
    def advance_keys(self, jump: int) -> None:
        self._advance_and_compare(self.now + jump, keys_only=True)

    @precondition(lambda self: bool(self.oracle))
    @rule()
    def sleep_until_next_due(self) -> None:
        # What the driver does: sleep until next_due_ms, then advance. Something must fire.
        next_due = self.wheel.next_due_ms()
        assert next_due is not None
        assert self._advance_and_compare(next_due)

    @invariant()
    def agrees_with_oracle(self) -> None:
        wheel = self.wheel
        assert wheel.now_ms == self.now
        assert len(wheel) == len(self.oracle)
        for key in range(12):
            assert (key in wheel) == (key in self.oracle)
            entry = self.oracle.get(key)
            assert wheel.due_of(key) == (None if entry is None else entry[0])
        earliest = min((due for due, _ in self.oracle.values()), default=None)
        next_due = wheel.next_due_ms()
        if earliest is None:
            assert next_due is None
        else:
            assert next_due is not None
            assert next_due <= earliest  # the contract: never later than the true earliest
            assert next_due == earliest  # and this implementation is exact
        wheel._check_invariants()


WheelVersusOracle.TestCase.settings = settings(
    max_examples=250,
    stateful_step_count=40,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestWheelVersusOracle = WheelVersusOracle.TestCase


@settings(max_examples=150, deadline=None)
@given(
    tick_ms=TICKS,
    wheel_size=SIZES,
    levels=LEVELS,
    dues=st.lists(st.integers(min_value=-100, max_value=10**9), max_size=40),
    stops=st.lists(st.integers(min_value=0, max_value=10**9), max_size=15),
)
def test_batch_then_monotonic_advances(
    tick_ms: int, wheel_size: int, levels: int, dues: list[int], stops: list[int]
) -> None:
    """Whatever the stops, the concatenated output is every key once, in (due, insertion) order,
    and no key ever fires before its due time."""
    wheel = TimingWheel[int](tick_ms=tick_ms, wheel_size=wheel_size, levels=levels)
    for key, due in enumerate(dues):
        wheel.insert(key, due)
    fired: list[tuple[int, int]] = []
    for stop in [*sorted(stops), 10**9]:
        step = wheel.advance(stop)
        assert all(due <= max(stop, 0) for _, due in step)
        fired.extend(step)
    assert fired == sorted(enumerate(dues), key=lambda item: (item[1], item[0]))
    assert len(wheel) == 0


@settings(max_examples=150, deadline=None)
@given(
    tick_ms=TICKS,
    wheel_size=SIZES,
    levels=LEVELS,
    before=st.lists(st.tuples(KEYS, BATCH_OFFSETS), max_size=12),
    pairs=st.lists(st.tuples(KEYS, BATCH_OFFSETS), max_size=20),
    seq_left=st.sampled_from([None, 0, 1, 5]),
)
def test_insert_many_is_inserts_in_order(
    tick_ms: int,
    wheel_size: int,
    levels: int,
    before: list[tuple[int, int]],
    pairs: list[tuple[int, int]],
    seq_left: int | None,
) -> None:
    """``insert_many`` leaves the wheel exactly as the same ``insert`` calls (fire order, due
    times, next_due_ms), also when the sequences run out in the middle (a renumbering)."""
    one, many = (TimingWheel[int](tick_ms=tick_ms, wheel_size=wheel_size, levels=levels) for _ in range(2))
    for wheel in (one, many):
        for key, offset in before:
            wheel.insert(key, offset)
        if seq_left is not None:
            wheel._seq_limit = wheel._seq + seq_left  # renumber after seq_left more inserts
    for key, offset in pairs:
        one.insert(key, offset)
    many.insert_many(pairs)
    many._check_invariants()
    assert many.next_due_ms() == one.next_due_ms()
    assert [(k, many.due_of(k)) for k in range(12)] == [(k, one.due_of(k)) for k in range(12)]
    assert many.advance(10**16) == one.advance(10**16)
