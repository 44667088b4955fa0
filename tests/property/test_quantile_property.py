"""The windowed quantile against a dumb oracle: every sample in a list, filtered by slot and
sorted on every query (nearest rank). Random interleavings of samples (some late, some in a
later slot than the query) and queries with time moving forward in small and large steps."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from raftsched.timing.quantile import WindowedQuantile

WINDOWS = st.sampled_from([1, 7, 100, 1_000, 300_000])
SLOTS = st.sampled_from([1, 2, 3, 30])
QS = st.integers(min_value=1, max_value=1_000_000)
VALUES = st.integers(min_value=-(10**6), max_value=10**9)
# ("add", time offset from now, value) or ("query", forward step, q)
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(min_value=-400_000, max_value=2_000), VALUES),
        st.tuples(st.just("query"), st.integers(min_value=0, max_value=200_000), QS),
    ),
    max_size=80,
)


class Oracle:
    """The same window rules, written as plainly as possible."""

    def __init__(self, window_ms: int, slots: int) -> None:
        self.slots = slots
        self.slot_ms = -(-window_ms // slots)
        self.samples: list[tuple[int, int]] = []  # (slot, value)

    def add(self, at_ms: int, value: int) -> None:
        slot = at_ms // self.slot_ms
        if self.samples and slot <= max(s for s, _ in self.samples) - self.slots:
            return
        self.samples.append((slot, value))

    def quantile(self, q_ppm: int, now_ms: int) -> tuple[int, int | None]:
        now_slot = now_ms // self.slot_ms
        self.samples = [(s, v) for s, v in self.samples if s > now_slot - self.slots]
        values = sorted(v for s, v in self.samples if s <= now_slot)
        if not values:
            return 0, None
        rank = max(1, -(-q_ppm * len(values) // 1_000_000))  # ceil(q * n), at least the first
        return len(values), values[rank - 1]


@settings(max_examples=300, deadline=None)
@given(window=WINDOWS, slots=SLOTS, start=st.integers(min_value=0, max_value=10**12), ops=OPS)
def test_windowed_quantile_matches_a_sorted_list(
    window: int, slots: int, start: int, ops: list[tuple[str, int, int]]
) -> None:
    got, want = WindowedQuantile(window, slots), Oracle(window, slots)
    now = start
    for op, a, b in ops:
        if op == "add":
            got.add(now + a, b)
            want.add(now + a, b)
        else:
            now += a
            assert got.quantile(b, now) == want.quantile(b, now)
            assert got.count(now) == want.quantile(1, now)[0]
