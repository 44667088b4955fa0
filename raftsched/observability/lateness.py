"""Node-local measurements behind ``raftsched status`` (never replicated): fire lateness, memory."""

from __future__ import annotations

import resource
import threading
from collections import deque

from raftsched.v1 import raftsched_pb2 as pb


class LatenessLog:
    """A bounded log of ``(nominal_ms, lateness_ms)`` samples, summarised on demand."""

    def __init__(self, maxlen: int = 1_000_000) -> None:
        self._samples: deque[tuple[int, int]] = deque(maxlen=maxlen)
        self._lock = threading.Lock()
        self.total = 0

    def record(self, nominal_ms: int, lateness_ms: int) -> None:
        with self._lock:
            self._samples.append((nominal_ms, lateness_ms))
            self.total += 1

    def record_many(self, samples: list[tuple[int, int]]) -> None:
        with self._lock:
            self._samples.extend(samples)
            self.total += len(samples)

    def summary(self, since_ms: int = 0) -> pb.LatencySummary:
        with self._lock:
            values = sorted(late for nominal, late in self._samples if nominal >= since_ms)
        if not values:
            return pb.LatencySummary()
        n = len(values)
        return pb.LatencySummary(
            count=n,
            p50_ms=float(values[n // 2]),
            p99_ms=float(values[min(n - 1, (n * 99) // 100)]),
            max_ms=float(values[-1]),
            mean_ms=sum(values) / n,
        )


def rss_bytes() -> int:
    """Current resident set size (Linux /proc), falling back to the peak from getrusage."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * resource.getpagesize()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
