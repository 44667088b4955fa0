"""Node-local measurements behind ``raftsched status`` (never replicated): fire lateness, memory."""

from __future__ import annotations

import resource
import threading
from collections import deque

from raftsched.v1 import raftsched_pb2 as pb


class LatenessLog:
    """A bounded log of fire lateness, summarised on demand.

    Run-length encoded: an entry is ``(nominal_ms, lateness_ms, count)``, ``count`` fires of one
    nominal time that were equally late (a committed batch of every-second tasks is one entry,
    not a thousand). The bound is on entries."""

    def __init__(self, maxlen: int = 1_000_000) -> None:
        self._runs: deque[tuple[int, int, int]] = deque(maxlen=maxlen)
        self._lock = threading.Lock()
        self.total = 0  # fires recorded (the counts summed)

    def record(self, nominal_ms: int, lateness_ms: int) -> None:
        with self._lock:
            self._runs.append((nominal_ms, lateness_ms, 1))
            self.total += 1

    def record_runs(self, runs: list[tuple[int, int, int]]) -> None:
        """``(nominal_ms, lateness_ms, count)`` entries (counts >= 1), under one lock."""
        with self._lock:
            self._runs.extend(runs)
            self.total += sum(count for _, _, count in runs)

    def summary(self, since_ms: int = 0) -> pb.LatencySummary:
        """Count, p50, p99, max and mean of the fires whose nominal time is ``since_ms`` or later:
        the same figures as over the fires one by one (rank ``n // 2`` and ``n * 99 // 100`` of
        the sorted lateness values)."""
        with self._lock:
            chosen = sorted((late, count) for nominal, late, count in self._runs if nominal >= since_ms)
        if not chosen:
            return pb.LatencySummary()
        n = sum(count for _, count in chosen)
        ranks = {"p50": n // 2, "p99": min(n - 1, (n * 99) // 100)}
        found: dict[str, int] = {}
        seen = 0
        total = 0
        for late, count in chosen:
            total += late * count
            seen += count  # ranks below ``seen`` hold ``late`` or less
            for name, rank in ranks.items():
                if name not in found and rank < seen:
                    found[name] = late
        return pb.LatencySummary(
            count=n,
            p50_ms=float(found["p50"]),
            p99_ms=float(found["p99"]),
            max_ms=float(chosen[-1][0]),
            mean_ms=total / n,
        )


def rss_bytes() -> int:
    """Current resident set size (Linux /proc), falling back to the peak from getrusage."""
    try:
        with open("/proc/self/statm") as f:
            pages = int(f.read().split()[1])
        return pages * resource.getpagesize()
    except OSError:
        return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024
