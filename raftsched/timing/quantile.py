"""An exact quantile over a sliding time window, with time as a value (pure: no clock, no IO).

:class:`WindowedQuantile` keeps ``(at_ms, value)`` samples in ``slots`` time slots of
``slot_ms = ceil(window_ms / slots)`` each. The window at ``now_ms`` is the current slot
(``now_ms // slot_ms``) and the ``slots - 1`` before it: it covers between
``window_ms - slot_ms`` and ``window_ms`` of history, so with 30 slots a 5-minute window is
5 minutes to within 10 seconds. Samples of a later slot than ``now_ms``'s are kept for later and
not counted; samples older than the window are dropped.

The quantile is the nearest rank: of ``n`` samples sorted, the ``ceil(q * n)``-th (at least the
first), ``q`` in parts per million so the rank is integer arithmetic. It is exact (it is always
one of the samples): each closed slot is sorted once, and a query finds the value by binary
search over the value range, counting with ``bisect`` in each slot, so a query costs
``O(slots * log(samples) * log(value range))`` plus sorting the slots that changed since the last
one. Memory: 8 bytes per sample in the window (``array('q')``).

Not thread-safe: one writer and reader at a time (the caller locks).
"""

from __future__ import annotations

from array import array
from bisect import bisect_right

__all__ = ["PPM", "WindowedQuantile", "nearest_rank", "ppm"]

PPM = 1_000_000


def ppm(q: float) -> int:
    """A quantile ``q`` in ``(0, 1]`` as parts per million."""
    return max(1, min(PPM, round(q * PPM)))


def nearest_rank(q_ppm: int, n: int) -> int:
    """The 1-based rank of the ``q_ppm`` quantile among ``n`` sorted samples (``n >= 1``)."""
    return max(1, (q_ppm * n + PPM - 1) // PPM)


class WindowedQuantile:
    """Samples of the last ``window_ms`` (to a slot), and their exact nearest-rank quantile."""

    __slots__ = ("_dirty", "_last", "_last_index", "_newest", "_slots", "slot_ms", "slots", "window_ms")

    def __init__(self, window_ms: int, slots: int = 30) -> None:
        if window_ms <= 0 or slots <= 0:
            raise ValueError(f"window_ms and slots must be positive, got {window_ms}, {slots}")
        self.window_ms = window_ms
        self.slots = slots
        self.slot_ms = -(-window_ms // slots)
        self._slots: dict[int, array[int]] = {}
        self._dirty: set[int] = set()  # slots appended to since they were last sorted
        self._newest: int | None = None  # the newest slot index kept
        # The slot the last sample went to (it is dirty): the next sample of the same slot is
        # one append. Reset when that slot is sorted (replaced) or dropped.
        self._last_index: int | None = None
        self._last: array[int] = array("q")

    def _evict(self, now_slot: int) -> None:
        oldest = now_slot - self.slots + 1
        for index in [i for i in self._slots if i < oldest]:
            del self._slots[index]
            self._dirty.discard(index)
            if index == self._last_index:
                self._last_index = None
        if not self._slots:
            self._newest = None

    def add(self, at_ms: int, value: int) -> None:
        """Record ``value`` at time ``at_ms`` (dropped if already older than the window of the
        newest slot seen)."""
        index = at_ms // self.slot_ms
        if index == self._last_index:
            self._last.append(value)
            return
        newest = self._newest
        if newest is not None and index <= newest - self.slots:
            return
        if newest is None or index > newest:
            self._newest = index
        slot = self._slots.get(index)
        if slot is None:
            slot = self._slots[index] = array("q")
        slot.append(value)
        self._dirty.add(index)
        self._last_index, self._last = index, slot

    def _window(self, now_ms: int) -> list[array[int]]:
        now_slot = now_ms // self.slot_ms
        self._evict(now_slot)
        out = []
        for index in sorted(self._slots):
            if index > now_slot:
                break
            if index in self._dirty:
                self._slots[index] = array("q", sorted(self._slots[index]))
                self._dirty.discard(index)
                if index == self._last_index:
                    self._last_index = None
            out.append(self._slots[index])
        return out

    def count(self, now_ms: int) -> int:
        """How many samples the window at ``now_ms`` holds."""
        return sum(len(s) for s in self._window(now_ms))

    def quantile(self, q_ppm: int, now_ms: int) -> tuple[int, int | None]:
        """``(n, value)``: the window's sample count at ``now_ms`` and its ``q_ppm`` quantile
        (None when the window is empty)."""
        window = [s for s in self._window(now_ms) if s]
        n = sum(len(s) for s in window)
        if n == 0:
            return 0, None
        rank = nearest_rank(q_ppm, n)
        lo, hi = min(s[0] for s in window), max(s[-1] for s in window)
        while lo < hi:  # the smallest value with at least `rank` samples at or below it
            mid = (lo + hi) // 2
            if sum(bisect_right(s, mid) for s in window) >= rank:
                hi = mid
            else:
                lo = mid + 1
        return n, lo
