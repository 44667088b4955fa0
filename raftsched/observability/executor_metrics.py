"""The metric set of one executor (standalone or embedded).

State (connection, slots, running attempts) is read at scrape time from an
:class:`ExecutorSample`; the attempt path pushes what it already knows: how each attempt ended,
how long it ran, and the execution-log writes it made. How late attempts start is reported to
the leader with each result, and measured there (``raftsched_start_lateness_seconds``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from raftsched.observability.metrics import MetricSet

__all__ = ["EXECUTOR_RESULTS", "ExecutorMetrics", "ExecutorSample"]

EXECUTOR_RESULTS: Final = ("succeeded", "failed", "timeout", "cancelled", "duplicate", "refused_stale")
"""The ``result`` label of ``raftsched_executor_attempts_total``."""


@dataclass(frozen=True, slots=True)
class ExecutorSample:
    """What an executor reports about itself at one instant (a scrape)."""

    connected: bool = False
    registered: bool = False
    slots: int = 0
    running: int = 0
    pending_reports: int = 0
    clock_offset_ms: int | None = None  # our clock minus the leader's (None: not measured yet)
    log_entries: int = 0
    log_bytes: int = 0
    disk_used: float = 0.0  # fraction of the data directory's filesystem in use
    log_used: float = 0.0  # fraction of the execution log's map in use
    unhealthy: bool = False  # it drained itself: disk or execution log nearly full
    prefetched: int = 0  # assigned here, waiting for one of its slots (--prefetch)


class ExecutorMetrics:
    """The metrics of executor ``name``; ``sample`` is called once per scrape (on the event loop)."""

    def __init__(self, name: str, sample: Callable[[], ExecutorSample]) -> None:
        self._sample_fn = sample
        self._sample = ExecutorSample()
        m = self.set = MetricSet({"executor": name})
        m.before_scrape(self._refresh)
        s = self._get
        m.gauge(
            "raftsched_executor_connected",
            "1 while the executor holds a dispatch stream to the leader.",
            lambda: s().connected,
        )
        m.gauge(
            "raftsched_executor_registered",
            "1 once the current leader has accepted this executor's registration.",
            lambda: s().registered,
        )
        m.gauge(
            "raftsched_executor_running",
            "Attempts running on this executor now.",
            lambda: s().running,
        )
        m.gauge(
            "raftsched_executor_local_slots",
            "This executor's slots, by state (total, busy, free).",
            lambda: {
                ("total",): s().slots,
                ("busy",): min(s().slots, s().running),
                ("free",): max(0, s().slots - s().running),
            },
            ("state",),
        )
        m.gauge(
            "raftsched_executor_prefetched",
            "Attempts assigned to this executor that wait, unstarted, for one of its slots "
            "(--prefetch; 0 without).",
            lambda: s().prefetched,
        )
        m.gauge(
            "raftsched_executor_pending_reports",
            "Finished attempts whose result the cluster has not acknowledged yet.",
            lambda: s().pending_reports,
        )
        m.gauge(
            "raftsched_executor_clock_offset_seconds",
            "This executor's clock minus the leader's, from the leader's time on each heartbeat "
            "reply with the round trip halved (NaN until the first reply).",
            lambda: float("nan") if s().clock_offset_ms is None else (s().clock_offset_ms or 0) / 1000.0,
        )
        m.gauge(
            "raftsched_executor_log_entries",
            "Execution ids the execution log holds (running, pending and acknowledged ones kept "
            "for the --execution-log-keep window).",
            lambda: s().log_entries,
        )
        m.gauge(
            "raftsched_executor_log_bytes",
            "Bytes of the pages the execution log's entries occupy now (pages freed by pruning "
            "stay in the file, which never shrinks, and are reused).",
            lambda: s().log_bytes,
        )
        m.gauge(
            "raftsched_executor_disk_used_ratio",
            "Fraction (0-1) of the filesystem holding this executor's data directory in use.",
            lambda: s().disk_used,
        )
        m.gauge(
            "raftsched_executor_log_used_ratio",
            "Fraction (0-1) of the execution log's LMDB map (--map-size) its pages occupy.",
            lambda: s().log_used,
        )
        m.gauge(
            "raftsched_executor_unhealthy",
            "1 while this executor has drained itself because its disk or execution log is at or "
            "over --full-at (it takes new work again below --resume-at).",
            lambda: s().unhealthy,
        )
        self.attempts = m.counter(
            "raftsched_executor_attempts_total",
            "Work items this executor handled, by result: succeeded, failed, timeout, cancelled; "
            "duplicate (an execution id already run or running: not run again); refused_stale "
            "(sent by a deposed leader).",
            ("result",),
        )
        self.duration = m.histogram(
            "raftsched_executor_attempt_seconds",
            "How long attempts ran, start to finish.",
        )
        self.log_writes = m.counter(
            "raftsched_executor_log_writes_total",
            "Write transactions to the execution log (begin, finish, acknowledge, prune).",
            ("op",),
        )
        self.log_records = m.counter(
            "raftsched_executor_log_records_total",
            "Records written to the execution log, by operation (one transaction holds many).",
            ("op",),
        )

    def _refresh(self) -> None:
        self._sample = self._sample_fn()

    def _get(self) -> ExecutorSample:
        return self._sample

    def log_write(self, op: str, records: int) -> None:
        """One execution-log transaction of ``op`` covering ``records`` records."""
        self.log_writes.inc(op)
        self.log_records.inc(op, amount=records)

    def exposition(self) -> tuple[bytes, str]:
        return self.set.exposition()
