"""What only time reveals, detected by the leader: zombie attempts, start delay, SLA and freshness misses.

Pure: the caller passes leader time and what it read from the state; the monitor returns the
alert events to propose (:func:`raftsched.leader.writes.raise_alerts`). Apply gives each its id
and drops one whose dedupe key was raised before, so a new leader that detects the same zombie
again adds nothing; within one leadership the monitor remembers what it proposed and does not
propose it again.
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Iterable
from dataclasses import dataclass

from raftsched.alerts.config import AlertsConfig, StartDelayConfig, StartDelayLevels
from raftsched.fsm.workflow_model import is_internal, split_internal
from raftsched.model import FRESHNESS, SLA_MISSED, START_DELAY, ZOMBIE, execution_id
from raftsched.timing import sla
from raftsched.timing.quantile import WindowedQuantile, ppm
from raftsched.v1 import log_pb2 as pb

MIN_CHECK_MS = 1_000
MAX_CHECK_MS = 30_000


MAX_REMEMBERED = 50_000
"""Dedupe keys a leader's monitor remembers before it forgets them all (apply dedupes anyway)."""


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
        if len(self._proposed) > MAX_REMEMBERED:
            # Bounded: forgetting only means proposing an event again, which apply drops (its
            # dedupe key is kept); without it a long leadership keeps every run's SLA keys.
            self._proposed.clear()
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

    def start_delay(self, measured: Iterable[StartDelay], now_ms: int) -> list[pb.AlertRecord]:
        """An event per namespace whose start-delay quantile is above its warning or critical
        level (the higher level only), at most one per level and namespace per window: the
        dedupe key names the window (``start_delay/<ns>/<level>/<now // window>``)."""
        out: list[pb.AlertRecord] = []
        for m in measured:
            levels = m.levels
            severity = levels.level(m.delay_ms)
            if not severity:
                continue
            dedupe = f"start_delay/{m.namespace}/{severity}/{now_ms // levels.window_ms}"
            if dedupe in self._proposed:
                continue
            self._proposed.add(dedupe)
            threshold = levels.critical_ms if severity == "critical" else levels.warning_ms
            out.append(
                pb.AlertRecord(
                    kind=START_DELAY,
                    dedupe=dedupe,
                    namespace=m.namespace,
                    severity=severity,
                    error=f"start delay p{levels.quantile * 100:g} {sla.late_text(m.delay_ms)} over the "
                    f"last {sla.late_text(levels.window_ms)} ({m.count} attempt starts) in namespace "
                    f"{m.namespace!r} is above the {severity} level {sla.late_text(threshold)}",
                )
            )
        return out

    def _once(self, dedupe: str) -> bool:
        """Whether ``dedupe`` is new to this leadership (apply drops one raised before anyway)."""
        if dedupe in self._proposed:
            return False
        self._proposed.add(dedupe)
        return True

    def sla_misses(
        self, tasks: Iterable[SlaTask], runs: Iterable[pb.Run], now_ms: int
    ) -> list[pb.AlertRecord]:
        """An event per unfinished run past its ``start_within`` or ``finish_within`` deadline
        and per task past its freshness at ``now_ms`` (keys: :mod:`raftsched.timing.sla`). ``tasks``
        are the tasks with an SLA or freshness; ``runs`` the unfinished runs of those tasks."""
        by_name = {t.name: t for t in tasks}
        out: list[pb.AlertRecord] = []
        for run in runs:
            t = by_name.get(run.task)
            if t is None:
                continue
            for within, key, what in (
                (t.start_within_ms, sla.start_key(run.run_id), "started"),
                (t.finish_within_ms, sla.finish_key(run.run_id), "succeeded"),
            ):
                if not within or now_ms <= run.nominal_ms + within:
                    continue
                state = (sla.start_state if what == "started" else sla.finish_state)(run, within, now_ms)
                if state in (sla.MET, sla.PENDING) or not self._once(key):
                    continue
                kind = "start_within" if what == "started" else "finish_within"
                alert = pb.AlertRecord(
                    kind=SLA_MISSED,
                    dedupe=key,
                    owner=t.owner,
                    namespace=t.namespace,
                    error=f"run has not {what} {sla.late_text(now_ms - run.nominal_ms)} after its "
                    f"{'logical' if t.workflow else 'nominal'} time: sla.{kind} {sla.late_text(within)} "
                    f"{state}",
                )
                out.append(_subject(alert, t, run.run_id))
        for t in by_name.values():
            if not t.freshness_ms:
                continue
            base = sla.freshness_base(t.created_ms, t.last_success_ms)
            late = now_ms - (base + t.freshness_ms)
            key = sla.freshness_key(t.name, base)
            if late <= 0 or not self._once(key):
                continue
            since = (
                f"since its last success ({t.last_success_run})"
                if t.last_success_ms
                else "since it was created"
            )
            alert = pb.AlertRecord(
                kind=FRESHNESS,
                dedupe=key,
                owner=t.owner,
                namespace=t.namespace,
                error=f"no run succeeded for {sla.late_text(now_ms - base)} {since}: "
                f"freshness {sla.late_text(t.freshness_ms)} missed by {sla.late_text(late)}"
                + (
                    ""
                    if t.enabled
                    else f" (the {'workflow is paused' if t.workflow else 'task is disabled'})"
                ),
            )
            out.append(_subject(alert, t, t.last_success_run))
        return out


def _subject(alert: pb.AlertRecord, t: SlaTask, run_id: str) -> pb.AlertRecord:
    """Name what the alert is about: a task and its run, or a workflow and its run."""
    if t.workflow:
        alert.workflow = t.name.removeprefix(sla.workflow_key(""))
        alert.run_id = alert.workflow_run = run_id.removeprefix(sla.workflow_key(""))
    else:
        alert.task, alert.run_id = t.name, run_id
    return alert


@dataclass(frozen=True, slots=True)
class StartDelay:
    """One namespace's measured start delay over its window."""

    namespace: str
    levels: StartDelayLevels
    count: int
    delay_ms: int


@dataclass(frozen=True, slots=True)
class SlaTask:
    """What the monitor reads of a task with an SLA or freshness."""

    name: str
    owner: str
    namespace: str
    enabled: bool
    created_ms: int
    last_success_ms: int
    last_success_run: str
    start_within_ms: int
    finish_within_ms: int
    freshness_ms: int
    workflow: bool = False  # a workflow: ``name`` is ``workflow:<name>`` (its keys' spelling)


class StartDelays:
    """Reported attempt starts per namespace over each namespace's window (node-local).

    :meth:`record` is the state machine's start sink (``SchedulerState.on_start``), called on the
    apply thread of every replica: one append to an inbox (a deque: thread-safe, about 0.2 µs),
    so applying a result stays cheap. :meth:`drain` moves the inbox into the windows; the node's
    alert loop calls it on every node every half second (so a new leader has the same recent
    samples as the old one, and the inbox stays small), and :meth:`measure` (the leader's check)
    drains first. Samples are timed by the leader time of the command that reported them.
    """

    MAX_INBOX = 1 << 20  # a node whose loop stalls drops the oldest samples, not its memory

    def __init__(self, config: StartDelayConfig, slots: int = 30) -> None:
        self.config = config
        self.slots = slots
        self._windows: dict[str, WindowedQuantile] = {}
        self._inbox: deque[tuple[int, str, int]] = deque(maxlen=self.MAX_INBOX)
        self._lock = threading.Lock()  # drain and measure (the inbox needs none)

    def record(self, at_ms: int, namespace: str, lateness_ms: int) -> None:
        self._inbox.append((at_ms, namespace, lateness_ms))

    def drain(self) -> int:
        """Move the recorded samples into their namespaces' windows; returns how many."""
        inbox, moved = self._inbox, 0
        with self._lock:
            windows = self._windows
            window: WindowedQuantile | None = None
            current = None
            while inbox:
                try:
                    at_ms, namespace, lateness_ms = inbox.popleft()
                except IndexError:  # pragma: no cover - only this thread pops
                    break
                if namespace != current:
                    current = namespace
                    window = windows.get(namespace)
                    if window is None:
                        levels = self.config.for_namespace(namespace)
                        window = windows[namespace] = WindowedQuantile(levels.window_ms, self.slots)
                assert window is not None
                window.add(at_ms, lateness_ms)
                moved += 1
        return moved

    def measure(self, now_ms: int) -> list[StartDelay]:
        """Each namespace's configured quantile over its window at ``now_ms`` (those with samples)."""
        self.drain()
        out = []
        with self._lock:
            for namespace in sorted(self._windows):
                levels = self.config.for_namespace(namespace)
                count, value = self._windows[namespace].quantile(ppm(levels.quantile), now_ms)
                if value is not None:
                    out.append(StartDelay(namespace, levels, count, value))
        return out
