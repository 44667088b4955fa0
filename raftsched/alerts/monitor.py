"""What only time reveals, detected by the leader: zombie attempts and a slow schedule.

Pure: the caller passes leader time and what it read from the state; the monitor returns the
alert events to propose (:func:`raftsched.leader.writes.raise_alerts`). Apply gives each its id
and drops one whose dedupe key was raised before, so a new leader that detects the same zombie
again adds nothing; within one leadership the monitor remembers what it proposed and does not
propose it again.
"""

from __future__ import annotations

from collections.abc import Iterable

from raftsched.alerts.config import AlertsConfig
from raftsched.fsm.workflows import is_internal, split_internal
from raftsched.model import DELAY_P99, ZOMBIE, execution_id
from raftsched.v1 import log_pb2 as pb

MIN_CHECK_MS = 1_000
MAX_CHECK_MS = 30_000


class AlertMonitor:
    """One leader's detector. Not thread-safe: one caller (the leader's alert loop)."""

    def __init__(self, config: AlertsConfig) -> None:
        self.config = config
        self.check_every_ms = max(MIN_CHECK_MS, min(MAX_CHECK_MS, config.zombie_after_ms // 4))
        self._next_check_ms = 0
        self._proposed: set[str] = set()

    def reset(self) -> None:
        """Leadership changed: forget what this leader proposed (apply still dedupes)."""
        self._next_check_ms = 0
        self._proposed.clear()

    def due(self, now_ms: int) -> bool:
        """Whether a check is due at ``now_ms`` (checks run every :attr:`check_every_ms`)."""
        if now_ms < self._next_check_ms:
            return False
        self._next_check_ms = now_ms + self.check_every_ms
        return True

    def zombies(
        self, active_runs: Iterable[pb.Run], owners: dict[str, tuple[str, str]], now_ms: int
    ) -> list[pb.AlertRecord]:
        """An event for each attempt RUNNING (assigned) longer than ``zombie_after`` at ``now_ms``.

        ``owners`` maps a task to its ``(owner, namespace)``.
        """
        limit = self.config.zombie_after_ms
        out: list[pb.AlertRecord] = []
        for run in active_runs:
            for shard in run.shards:
                if shard.state != pb.RUNNING or not shard.assigned_ms or now_ms - shard.assigned_ms <= limit:
                    continue
                execution = execution_id(run.run_id, shard.shard, shard.attempt)
                dedupe = f"zombie/{execution}"
                if dedupe in self._proposed:
                    continue
                self._proposed.add(dedupe)
                owner, namespace = owners.get(run.task, ("", ""))
                minutes = (now_ms - shard.assigned_ms) // 60_000
                out.append(
                    pb.AlertRecord(
                        kind=ZOMBIE,
                        dedupe=dedupe,
                        task=run.task,
                        workflow=split_internal(run.task)[0] if is_internal(run.task) else "",
                        workflow_run=run.workflow_run,
                        run_id=run.run_id,
                        execution_id=execution,
                        owner=owner,
                        namespace=namespace,
                        error=f"attempt RUNNING on {shard.executor or 'an executor'} for {minutes} min "
                        f"(zombie_after {limit // 1000} s)",
                    )
                )
        return out

    def slow_schedule(self, count: int, p99_ms: float, now_ms: int) -> list[pb.AlertRecord]:
        """An event if the schedule-delay p99 over the last window is above the threshold (at most
        one per window). ``count`` and ``p99_ms`` summarise the fires of the last window."""
        threshold, window = self.config.delay_p99_threshold_ms, self.config.window_ms
        if count == 0 or p99_ms <= threshold:
            return []
        dedupe = f"delay_p99/{now_ms // window}"
        if dedupe in self._proposed:
            return []
        self._proposed.add(dedupe)
        return [
            pb.AlertRecord(
                kind=DELAY_P99,
                dedupe=dedupe,
                error=f"schedule delay p99 {p99_ms / 1000:.2f} s over the last {window // 1000} s "
                f"({count} fires) is above {threshold / 1000:g} s",
            )
        ]
