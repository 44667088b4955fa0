"""The only module in raftsched that reads the wall clock or the monotonic clock.

Everything else receives a :class:`raftsched.abc.Clock`. ``SystemClock(offset_ms=...)`` exists for
the chaos suite's clock-skew faults: a node can be told its clock is off by a fixed amount; with
``offset_file`` the offset can be changed while the process runs (a clock *step*, as after an
NTP step or a VM resume): the file holds an integer number of milliseconds, and it is read at
most every :data:`OFFSET_FILE_CHECK_S`.
"""

from __future__ import annotations

import logging
import threading
import time
from pathlib import Path

log = logging.getLogger(__name__)

OFFSET_FILE_CHECK_S = 0.05


class SystemClock:
    """Wall-clock UTC milliseconds (plus an optional skew) and a monotonic clock.

    ``offset_file`` (test-only): a file whose content, an integer number of milliseconds, is the
    skew from then on (missing or empty: the ``offset_ms`` given). The monotonic clock is never
    skewed, as a real wall-clock step does not move it.
    """

    def __init__(self, offset_ms: int = 0, offset_file: Path | None = None) -> None:
        self.offset_ms = offset_ms
        self._base_offset = offset_ms
        self._offset_file = offset_file
        self._next_check = 0.0
        self._file_text: str | None = None

    def now_ms(self) -> int:
        if self._offset_file is not None:
            self._check_offset_file(self._offset_file)
        return time.time_ns() // 1_000_000 + self.offset_ms

    def monotonic(self) -> float:
        return time.monotonic()

    def _check_offset_file(self, path: Path) -> None:
        mono = time.monotonic()
        if mono < self._next_check:
            return
        self._next_check = mono + OFFSET_FILE_CHECK_S
        try:
            text = path.read_text().strip()
        except OSError:
            text = ""
        if text == self._file_text:
            return
        self._file_text = text
        try:
            offset = int(text) if text else self._base_offset
        except ValueError:
            log.error("clock offset file %s: %r is not an integer number of milliseconds", path, text)
            return
        if offset != self.offset_ms:
            log.warning("TEST SETTING: this clock's skew steps from %+d ms to %+d ms", self.offset_ms, offset)
            self.offset_ms = offset


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
