"""Severity and failure streaks: what each alert event means to a person, decided per event.

**Severity.** Every alert kind has a level, ``info`` < ``warning`` < ``critical``:
:data:`DEFAULT_SEVERITIES` is the one table of defaults, ``[alerts.severity]`` overrides it per
kind, and a kind the table does not list (a kind added later) is :data:`DEFAULT_SEVERITY`. A
target's ``min_severity`` takes the events at or above its level.

**Streaks.** A task that fails every run must not page once per run. Consecutive ``run_failed``
events of one task form a *streak*: its first event is sent; the later ones are sent only as a
count ("failing: 12 runs in a row since ..."), at most once per ``alerts.streak_interval``
(measured between the leader times of the events); the others are *suppressed* (the target's
cursor passes them; ``raftsched alerts`` shows them as ``suppressed``).

**Resolved notices.** A condition that ends is reported by an alert record of the same kind and
subject (task, or workflow) with ``resolved = true`` — the record a target pairs with the earlier
events: the same Alertmanager labels, ``"resolved": true`` in JSON. This is the one way to end an
alert, whoever raises it:

* a streak ends at the task's next successful run: the leader raises a ``run_failed`` record with
  ``resolved = true``, ``resolves_seq`` = the newest failure event it ends, and the dedupe key
  ``run_failed/<task>/resolved/<resolves_seq>`` (:func:`recovered`). If the outbox holds a
  failure newer than ``resolves_seq`` (the task failed again before the record committed), the
  streak goes on and the notice is suppressed;
* ``upstream_late`` is resolved by apply when the upstream run finishes;
* a condition detected by the leader (an SLA missed, then met again) is resolved by proposing a
  record of its kind with ``resolved = true`` and the dedupe key ``<the firing event's dedupe>/resolved``.

Determinism: :class:`StreakBook` is a pure function of the outbox read in sequence order, so
every leader that replays the same retained events makes the same decisions (the same events
sent, the same counts, byte-identical bodies). Events pruned by retention are not replayed: a
streak whose first events were pruned starts at the oldest retained one.
"""

from __future__ import annotations

import dataclasses
import datetime
from collections.abc import Mapping
from dataclasses import dataclass

from raftsched.model import (
    BACKFILL_FAILED,
    CLOCK_FAULT,
    CLOCK_SKEW,
    DELAY_P99,
    EXECUTOR_UNHEALTHY,
    FIRE_COALESCED,
    FIRE_SKIPPED,
    FRESHNESS,
    HEARTBEAT_MISSING,
    LOST,
    NO_EXECUTOR,
    RUN_CANCELLED,
    RUN_FAILED,
    SLA_MISSED,
    START_DELAY,
    STORE_DAMAGED,
    TIMEOUT,
    UNPLACEABLE,
    UPSTREAM_LATE,
    WAITING_TOO_LONG,
    WORKFLOW_RUN_FAILED,
    ZOMBIE,
)
from raftsched.v1 import log_pb2 as pb

INFO, WARNING, CRITICAL = "info", "warning", "critical"
SEVERITIES = (INFO, WARNING, CRITICAL)
"""The levels, lowest first."""
DEFAULT_SEVERITY = WARNING
"""The level of a kind :data:`DEFAULT_SEVERITIES` does not list."""
DEFAULT_SEVERITIES: Mapping[str, str] = {
    RUN_FAILED: CRITICAL,
    TIMEOUT: WARNING,
    LOST: WARNING,
    ZOMBIE: WARNING,
    FIRE_SKIPPED: INFO,
    FIRE_COALESCED: INFO,
    DELAY_P99: WARNING,
    BACKFILL_FAILED: CRITICAL,
    WORKFLOW_RUN_FAILED: CRITICAL,
    UNPLACEABLE: CRITICAL,
    CLOCK_FAULT: CRITICAL,
    STORE_DAMAGED: CRITICAL,
    UPSTREAM_LATE: WARNING,
    NO_EXECUTOR: CRITICAL,
    WAITING_TOO_LONG: WARNING,
    EXECUTOR_UNHEALTHY: CRITICAL,
    HEARTBEAT_MISSING: WARNING,
    CLOCK_SKEW: WARNING,
    START_DELAY: WARNING,  # its record carries its level: warning or critical by the thresholds
    SLA_MISSED: CRITICAL,
    FRESHNESS: CRITICAL,
    RUN_CANCELLED: INFO,  # someone asked for it: worth a note, not a page
}
"""Each kind's default level (``[alerts.severity]`` overrides it)."""

STREAK_KINDS = frozenset({RUN_FAILED})
"""Kinds whose consecutive events of one task form a streak."""

DEFAULT_STREAK_INTERVAL_MS = 4 * 3_600_000  # as Alertmanager's repeat_interval


def severity_of(kind: str, configured: Mapping[str, str]) -> str:
    """``kind``'s level: the configured one, else the default table's, else :data:`DEFAULT_SEVERITY`."""
    return configured.get(kind) or DEFAULT_SEVERITIES.get(kind, DEFAULT_SEVERITY)


def at_least(severity: str, minimum: str) -> bool:
    """Whether ``severity`` is ``minimum`` or above (an unknown level counts as the lowest)."""
    rank = {s: i for i, s in enumerate(SEVERITIES)}
    return rank.get(severity, 0) >= rank.get(minimum, 0)


def iso(ms: int) -> str:
    """``ms`` (Unix milliseconds) as RFC 3339 UTC with milliseconds (``2026-12-05T00:31:27.042Z``)."""
    moment = datetime.datetime.fromtimestamp(ms / 1000, tz=datetime.UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.") + f"{ms % 1000:03d}Z"


def subject(alert: pb.AlertRecord) -> str:
    """What the event is about, for people: the task, else the workflow, else the cluster."""
    return alert.task or alert.workflow or "cluster"


@dataclass(frozen=True, slots=True)
class Notice:
    """The routing decision for one event (the same on every target: filters apply after).

    ``streak`` counts the failures of the streak up to this event (0: not a streak event; for a
    resolved notice, the failures it ends, 0 if the book did not see them); ``since_ms`` is the
    first failure's leader time (the event's own time outside a streak)."""

    alert: pb.AlertRecord
    send: bool
    streak: int = 0
    since_ms: int = 0

    @property
    def text(self) -> str:
        """One line: what happened, with the streak's count when there is one."""
        a = self.alert
        if a.resolved:
            if self.streak > 1:
                return f"resolved: {a.error} (failing since {iso(self.since_ms)})"
            return f"resolved: {a.error}"
        if self.streak > 1:
            return f"failing: {self.streak} runs in a row since {iso(self.since_ms)} (last: {a.error})"
        return a.error


@dataclass(slots=True)
class Streak:
    """An open streak (what :meth:`StreakBook.open_streaks` returns, copied)."""

    task: str
    owner: str
    namespace: str
    workflow: str
    first_seq: int
    since_ms: int
    count: int
    last_seq: int
    last_at_ms: int
    last_run_id: str
    last_sent_ms: int


class StreakBook:
    """Routing decisions over the outbox, fed in sequence order. Pure; one caller."""

    def __init__(self, interval_ms: int = DEFAULT_STREAK_INTERVAL_MS) -> None:
        self.interval_ms = interval_ms
        self._open: dict[str, Streak] = {}
        self.through = 0  # the newest seq observed

    def observe(self, alert: pb.AlertRecord) -> Notice:
        """The decision for ``alert``, the next event in sequence order."""
        self.through = max(self.through, alert.seq)
        if alert.kind not in STREAK_KINDS or not alert.task:
            return Notice(alert, send=True, since_ms=alert.at_ms)
        streak = self._open.get(alert.task)
        if alert.resolved:
            if streak is None:
                return Notice(alert, send=True, since_ms=alert.at_ms)
            if alert.resolves_seq and streak.last_seq > alert.resolves_seq:
                return Notice(alert, send=False, streak=streak.count, since_ms=streak.since_ms)
            del self._open[alert.task]
            return Notice(alert, send=True, streak=streak.count, since_ms=streak.since_ms)
        if streak is None:
            self._open[alert.task] = Streak(
                task=alert.task,
                owner=alert.owner,
                namespace=alert.namespace,
                workflow=alert.workflow,
                first_seq=alert.seq,
                since_ms=alert.at_ms,
                count=1,
                last_seq=alert.seq,
                last_at_ms=alert.at_ms,
                last_run_id=alert.run_id,
                last_sent_ms=alert.at_ms,
            )
            return Notice(alert, send=True, streak=1, since_ms=alert.at_ms)
        streak.count += 1
        streak.last_seq, streak.last_at_ms, streak.last_run_id = alert.seq, alert.at_ms, alert.run_id
        send = alert.at_ms - streak.last_sent_ms >= self.interval_ms
        if send:
            streak.last_sent_ms = alert.at_ms
        return Notice(alert, send=send, streak=streak.count, since_ms=streak.since_ms)

    def open_streaks(self) -> list[Streak]:
        """The streaks not yet resolved, oldest first (copies)."""
        return [dataclasses.replace(s) for s in sorted(self._open.values(), key=lambda s: s.first_seq)]


def recovered(streak: Streak, run: pb.Run) -> pb.AlertRecord:
    """The resolved record that ends ``streak`` because ``run`` (of its task) succeeded after its
    newest failure; for the leader to propose (apply stamps its time and id)."""
    return pb.AlertRecord(
        kind=RUN_FAILED,
        resolved=True,
        resolves_seq=streak.last_seq,
        dedupe=f"{RUN_FAILED}/{streak.task}/resolved/{streak.last_seq}",
        task=streak.task,
        owner=streak.owner,
        namespace=streak.namespace,
        workflow=streak.workflow,
        workflow_run=run.workflow_run,
        run_id=run.run_id,
        error=f"run {run.run_id} succeeded after {streak.count} failed run(s) in a row",
    )


def recovery_run(streak: Streak, runs: list[pb.Run]) -> pb.Run | None:
    """The run among ``runs`` (of the streak's task) that ends ``streak``: one that succeeded
    after the streak's newest failure was recorded, or None."""
    for run in runs:
        if (
            run.state == pb.SUCCEEDED
            and run.finished_ms > streak.last_at_ms
            and run.run_id != streak.last_run_id
        ):
            return run
    return None
