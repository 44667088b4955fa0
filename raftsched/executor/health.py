"""An executor's own health (issue 36 §3): how full its disk and its execution log are, with
hysteresis.

At or over ``full_at`` of the data directory's filesystem or of the execution log's map the
executor is unhealthy (the agent drains itself, :meth:`raftsched.executor.agent.Executor.run`);
it stays so until both are below ``resume_at``. The reading is at the edge (a statvfs and a read
transaction) unless a probe replaces it (a simulation's).
"""

from __future__ import annotations

import logging
import shutil
from collections.abc import Callable
from pathlib import Path

from raftsched.errors import InvalidSpec
from raftsched.executor.dedupe import DedupeLog

# The agent's own logger, as batched.py: an executor's lines keep one name (log filters, and
# the tests that read an executor's log, match it).
log = logging.getLogger("raftsched.executor.agent")

DEFAULT_FULL_AT = 0.9
DEFAULT_RESUME_AT = 0.8

Probe = Callable[[], tuple[float, float]]
"""``() -> (disk used, execution log used)``, fractions: replaces the reading."""


class DiskHealth:
    """The verdict of one executor (``reason``: why it is unhealthy, "" while healthy) and the
    fractions it was drawn from. Raises :class:`InvalidSpec` for thresholds out of range."""

    __slots__ = (
        "data_dir",
        "disk_used",
        "full_at",
        "log_used",
        "map_size",
        "name",
        "probe",
        "reason",
        "resume_at",
    )

    def __init__(
        self,
        name: str,
        data_dir: Path,
        map_size: int,
        *,
        full_at: float = DEFAULT_FULL_AT,
        resume_at: float = DEFAULT_RESUME_AT,
        probe: Probe | None = None,
    ) -> None:
        if not (isinstance(full_at, (int, float)) and 0.0 < full_at <= 1.0):
            raise InvalidSpec("executor.full_at", f"{full_at!r} out of range (a fraction, 0 < full_at <= 1)")
        if not (isinstance(resume_at, (int, float)) and 0.0 < resume_at <= full_at):
            raise InvalidSpec(
                "executor.resume_at",
                f"{resume_at!r} out of range (a fraction, 0 < resume_at <= full_at {full_at})",
            )
        self.name = name
        self.data_dir = data_dir
        self.map_size = map_size
        self.full_at = float(full_at)
        self.resume_at = float(resume_at)
        self.probe = probe
        self.disk_used = 0.0
        self.log_used = 0.0
        self.reason = ""

    def read(self, execution_log: DedupeLog | None) -> tuple[float, float]:
        """``(disk used, execution log used)``: fractions of the data directory's filesystem
        and of the execution log's map, read at the edge (a statvfs and a read transaction)."""
        if self.probe is not None:
            return self.probe()
        disk = 0.0
        try:
            usage = shutil.disk_usage(self.data_dir)
            disk = usage.used / usage.total if usage.total else 0.0
        except OSError:
            pass  # a directory we cannot stat (a log passed in, no data_dir): nothing to say
        logged = 0.0
        if execution_log is not None:
            logged = execution_log.sizes()[1] / self.map_size
        return disk, logged

    def check(self, execution_log: DedupeLog | None) -> str:
        """Read the disk and execution-log fractions and decide, with hysteresis, whether this
        executor is unhealthy: at or over ``full_at`` it is; it stays so until both are below
        ``resume_at``. Returns the reason ("" while healthy)."""
        disk, logged = self.read(execution_log)
        self.disk_used, self.log_used = disk, logged
        over = []
        if disk >= self.full_at:
            over.append(f"disk {disk:.0%} used ({self.data_dir})")
        if logged >= self.full_at:
            over.append(f"execution log map {logged:.0%} used (--map-size {self.map_size} bytes)")
        if over:
            if not self.reason:
                self.reason = f"{' and '.join(over)}, at or over {self.full_at:.0%}"
                log.warning("%s: %s: draining itself", self.name, self.reason)
        elif self.reason and disk < self.resume_at and logged < self.resume_at:
            log.info(
                "%s: disk %.0f%%, execution log %.0f%%, below %.0f%%: taking work again",
                self.name,
                disk * 100,
                logged * 100,
                self.resume_at * 100,
            )
            self.reason = ""
        return self.reason
