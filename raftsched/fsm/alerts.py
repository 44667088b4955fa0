"""The alert outbox inside the replicated state machine: events, delivery cursors, acknowledgements.

An alert event is created in ``apply`` (a run failed for good, an attempt timed out or was lost,
a fire was skipped or coalesced, a workflow run or backfill failed) or proposed by the leader for
what only time reveals (zombie attempts, start delay, SLA and freshness misses), in which case
apply stamps it. Either way its sequence number comes from the replicated counter, so every
replica gives it the same id (``alert-<seq>``) and stores it under ``x/<seq:016x>``: the outbox
is in delivery order.

Each webhook target has a replicated cursor (``xd/<target>``): every event with ``seq`` at or
below it was delivered to that target (or skipped by the target's filters). The leader's delivery
loop reads from the cursor and proposes :class:`AlertsDelivered` after each successful POST, so a
new leader resumes where the old one stopped; an event may reach a target twice (the old leader
posted it and died before its cursor committed), always with the same id.

Retention: events older than the history age or beyond :data:`MAX_ALERTS_KEPT` are pruned
(bounded work per event); an event pruned before a target took it is not delivered to it.

Contract as for the whole state machine: deterministic, no clock, no IO but the store; called on
the apply thread only (reads through :func:`list_alerts` take a store reader).
"""

from __future__ import annotations

from typing import Protocol

from raftsched.abc import StateStore, StoreReader
from raftsched.fsm import keys
from raftsched.fsm.records import Retention
from raftsched.fsm.rules import Reject
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
    TIMEOUT,
    UNPLACEABLE,
    UPSTREAM_LATE,
    WAITING_TOO_LONG,
    WORKFLOW_RUN_FAILED,
    ZOMBIE,
)
from raftsched.v1 import log_pb2 as pb

# The kinds are vocabulary (raftsched.model: a webhook's filter names them without loading the
# state machine); the books that raise them name them through this module.
__all__ = [
    "BACKFILL_FAILED",
    "CLOCK_FAULT",
    "CLOCK_SKEW",
    "DELAY_P99",
    "EXECUTOR_UNHEALTHY",
    "FIRE_COALESCED",
    "FIRE_SKIPPED",
    "FRESHNESS",
    "HEALTH_KINDS",
    "HEARTBEAT_MISSING",
    "LEADER_KINDS",
    "LEADER_RESOLVES",
    "LOST",
    "MAX_ALERTS_KEPT",
    "MAX_RAISED_PER_COMMAND",
    "MAX_TEXT",
    "NO_EXECUTOR",
    "OUTPUT_TAIL_CHARS",
    "RUN_CANCELLED",
    "RUN_FAILED",
    "SLA_MISSED",
    "START_DELAY",
    "TIMEOUT",
    "UNPLACEABLE",
    "UPSTREAM_LATE",
    "WAITING_TOO_LONG",
    "WORKFLOW_RUN_FAILED",
    "ZOMBIE",
    "AlertBook",
    "Sequencer",
    "alert_id",
    "alerts_after",
    "cursors",
    "list_alerts",
    "output_tail",
    "seq_of",
]

HEALTH_KINDS = frozenset({NO_EXECUTOR, WAITING_TOO_LONG, HEARTBEAT_MISSING, CLOCK_SKEW})
"""Leader-raised fleet-health kinds (issue 36 §3, §4): a RaiseAlerts carrying one is command
format :data:`raftsched.codec.HEALTH_FORMAT` (an older node would refuse it and diverge)."""
LEADER_KINDS = frozenset({ZOMBIE, DELAY_P99, START_DELAY, SLA_MISSED, FRESHNESS}) | HEALTH_KINDS
"""Kinds the leader raises (:class:`RaiseAlerts`); apply raises the others itself (and
``sla_missed`` too, when a run starts or finishes late: the same dedupe key keeps it to one)."""
LEADER_RESOLVES = frozenset({RUN_FAILED})
"""Kinds apply raises whose end the leader reports: a record with ``resolved`` set (a failure
streak's recovery, :mod:`raftsched.alerts.routing`; command format ``codec.ROUTING_FORMAT``)."""

MAX_ALERTS_KEPT = 10_000
MAX_RAISED_PER_COMMAND = 1000
OUTPUT_TAIL_CHARS = 2000
MAX_TEXT = 4096


def alert_id(seq: int) -> str:
    """The stable id of the event with outbox sequence ``seq``."""
    return f"alert-{seq}"


def seq_of(alert_id_text: str) -> int:
    """Inverse of :func:`alert_id` (0 if ``alert_id_text`` is not an alert id)."""
    prefix, _, digits = alert_id_text.partition("-")
    return int(digits) if prefix == "alert" and digits.isdigit() else 0


def output_tail(stdout_tail: str, stderr_tail: str) -> str:
    """The last lines of an attempt's output for an alert: stderr if it wrote any, else stdout."""
    text = stderr_tail or stdout_tail
    return text[-OUTPUT_TAIL_CHARS:]


class Sequencer(Protocol):
    """Where the outbox draws its sequence numbers (the state machine's replicated meta)."""

    def next_alert_seq(self) -> int: ...


class AlertBook:
    """The outbox's writes (apply thread only)."""

    def __init__(self, store: StateStore, retention: Retention, sequencer: Sequencer) -> None:
        self.store = store
        self.retention = retention
        self.sequencer = sequencer

    def raise_(self, alert: pb.AlertRecord, now: int) -> pb.AlertRecord | None:
        """Store ``alert`` as a new event at leader time ``now`` (its id and sequence are set
        here). Returns it, or None if its ``dedupe`` key was already raised (nothing stored)."""
        dedupe_key = keys.alert_dedupe_key(alert.dedupe) if alert.dedupe else b""
        if dedupe_key and self.store.get(dedupe_key) is not None:
            return None
        seq = self.sequencer.next_alert_seq()
        alert.seq = seq
        alert.id = alert_id(seq)
        alert.at_ms = now
        alert.acked_ms = 0
        self.store.put(keys.alert_key(seq), alert.SerializeToString(deterministic=True))
        if dedupe_key:
            self.store.put(dedupe_key, b"")
        self._prune(seq, now)
        return alert

    def _prune(self, newest: int, now: int) -> None:
        horizon = now - self.retention.keep_ms
        for k, v in self.store.scan(keys.ALERT, keys.ALERT + keys.END, limit=self.retention.prune_step):
            old = pb.AlertRecord.FromString(v)
            if newest - old.seq < MAX_ALERTS_KEPT and old.at_ms >= horizon:
                break
            self.store.delete(k)
            if old.dedupe:
                self.store.delete(keys.alert_dedupe_key(old.dedupe))

    def raise_leader_alerts(self, body: pb.RaiseAlerts, now: int) -> int:
        """Validate then store the leader-detected events of one command; returns how many were new.

        Raises :class:`Reject` (nothing stored) for a kind apply raises itself (unless the record
        reports the end of a :data:`LEADER_RESOLVES` kind), a missing dedupe key, or an oversized
        batch.
        """
        if len(body.alerts) > MAX_RAISED_PER_COMMAND:
            raise Reject("invalid_argument", f"{len(body.alerts)} alerts in one command, at most 1000")
        for a in body.alerts:
            if a.kind not in LEADER_KINDS and not (a.resolved and a.kind in LEADER_RESOLVES):
                raise Reject("invalid_argument", f"alert kind {a.kind!r} is not raised by the leader")
            if not a.dedupe:
                raise Reject("invalid_argument", "a leader-raised alert needs a dedupe key")
            texts = (a.error, a.dedupe, a.task, a.run_id, a.output_tail, a.executor, a.node)
            if any(len(t) > MAX_TEXT for t in texts):
                raise Reject("invalid_argument", f"alert text longer than {MAX_TEXT} characters")
        raised = 0
        for a in body.alerts:
            if (
                self.raise_(pb.AlertRecord.FromString(a.SerializeToString(deterministic=True)), now)
                is not None
            ):
                raised += 1
        return raised

    def delivered(self, body: pb.AlertsDelivered, now: int, newest_seq: int) -> None:
        """Advance ``body.target``'s cursor (never backwards, never past the newest event)."""
        if not body.target or len(body.target) > 256:
            raise Reject("invalid_argument", "alert target name must be 1-256 characters")
        if body.through_seq > newest_seq:
            raise Reject("invalid_argument", f"no alert {body.through_seq} yet (newest is {newest_seq})")
        key = keys.alert_cursor_key(body.target)
        raw = self.store.get(key)
        cursor = pb.AlertCursor.FromString(raw) if raw is not None else pb.AlertCursor(target=body.target)
        if body.through_seq <= cursor.through_seq:
            return  # a late or repeated report (an old leader's): the cursor already covers it
        cursor.through_seq = body.through_seq
        cursor.at_ms = now
        self.store.put(key, cursor.SerializeToString(deterministic=True))

    def ack(self, body: pb.AckAlert, now: int) -> pb.AlertRecord:
        """Mark an event acknowledged (the first acknowledgement's time is kept)."""
        seq = seq_of(body.id)
        raw = self.store.get(keys.alert_key(seq)) if seq else None
        if raw is None:
            raise Reject("not_found", f"alert {body.id!r} does not exist (or was pruned)")
        alert = pb.AlertRecord.FromString(raw)
        if not alert.acked_ms:
            alert.acked_ms = now
            self.store.put(keys.alert_key(seq), alert.SerializeToString(deterministic=True))
        return alert


# -- reads (any thread, through a reader of committed data) ----------------------------------------


def alerts_after(reader: StoreReader, after_seq: int, limit: int) -> list[pb.AlertRecord]:
    """Up to ``limit`` events with ``seq > after_seq``, in sequence order."""
    lo = keys.alert_key(after_seq + 1)
    return [pb.AlertRecord.FromString(v) for _, v in reader.scan(lo, keys.ALERT + keys.END, limit=limit)]


def list_alerts(reader: StoreReader, since_ms: int, limit: int) -> list[pb.AlertRecord]:
    """The newest ``limit`` retained events at or after ``since_ms``, oldest first."""
    out = [
        a
        for a in (pb.AlertRecord.FromString(v) for _, v in reader.scan(keys.ALERT, keys.ALERT + keys.END))
        if a.at_ms >= since_ms
    ]
    return out[-limit:] if limit else out


def cursors(reader: StoreReader) -> dict[str, int]:
    """``target -> through_seq`` of every webhook target's delivery cursor."""
    end = keys.ALERT_CURSOR + keys.END
    return {
        c.target: c.through_seq
        for c in (pb.AlertCursor.FromString(v) for _, v in reader.scan(keys.ALERT_CURSOR, end))
    }
