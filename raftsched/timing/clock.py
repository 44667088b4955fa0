"""The only module in raftsched that reads the wall clock or the monotonic clock.

Everything else receives a :class:`raftsched.abc.Clock`. ``SystemClock(offset_ms=...)`` exists for
the chaos suite's clock-skew faults: a node can be told its clock is off by a fixed amount.
"""

from __future__ import annotations

import threading
import time


class SystemClock:
    """Wall-clock UTC milliseconds (plus an optional fixed skew) and a monotonic clock."""

    def __init__(self, offset_ms: int = 0) -> None:
        self.offset_ms = offset_ms

    def now_ms(self) -> int:
        return time.time_ns() // 1_000_000 + self.offset_ms

    def monotonic(self) -> float:
        return time.monotonic()


class ManualClock:
    """A clock that moves only when told to: for simulation and for users' own tests."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms
        self._lock = threading.Lock()

    def now_ms(self) -> int:
        with self._lock:
            return self._now

    def monotonic(self) -> float:
        with self._lock:
            return self._now / 1000.0

    def advance(self, ms: int) -> int:
        if ms < 0:
            raise ValueError("a manual clock only moves forward; use set() to model a skewed clock")
        with self._lock:
            self._now += ms
            return self._now

    def set(self, now_ms: int) -> None:
        with self._lock:
            self._now = now_ms
