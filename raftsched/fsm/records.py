"""Stored-record helpers shared by the task and workflow halves of the state machine.

:class:`TaskState` is the in-memory form of a task's ``TaskRecord`` (the only mutable state in
the domain); :class:`Retention` says how much history apply keeps. Both halves of the FSM
(:mod:`raftsched.fsm.state` and :mod:`raftsched.fsm.workflows`) use these names, so they live
here rather than in either of them.
"""

from __future__ import annotations

import zlib
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final, Protocol

from raftsched import codec
from raftsched.abc import StateStore
from raftsched.fsm.effects import TaskArmed
from raftsched.model import MAX_KEEP_RUNS, MAX_TIME_MS, TaskSpec
from raftsched.v1 import log_pb2 as pb

FINISHED = (pb.SUCCEEDED, pb.FAILED, pb.CANCELLED)
"""Final states of a run and of a shard attempt."""

# Pruning finished runs by age scans past the unfinished ones (a backfill holds hundreds of a
# task's runs active at once); below the count limit it runs on every 16th finished run only.
AGE_PRUNE_EVERY = 16

PRUNE_BATCH: Final = 64
"""History past a keep count is deleted in batches (commands of format
:data:`raftsched.codec.BATCHED_PRUNE_FORMAT` and later): a task keeps between ``keep_count`` and
``keep_count + PRUNE_BATCH - prune_phase(task)`` finished runs and fire records, and when one more
would pass that, the oldest go down to ``keep_count`` in one keys-only cursor pass. One pass of a
few dozen deletions costs far less than one scan, parse and delete per finished run (issue 31,
P4)."""
PRUNE_MAX: Final = 2 * PRUNE_BATCH
"""Most records one count-rule pass deletes, so a keep count lowered by far (or a task's own
``keep_runs``) is reached over several applies and one apply never stalls on the backlog."""


def prune_phase(task: str) -> int:
    """How much earlier than ``keep_count + PRUNE_BATCH`` a task's batches start, in
    ``0 .. PRUNE_BATCH/2``: tasks created together (a bulk import of every-second tasks) would
    otherwise all pass the same bound in the same second and prune together, one burst of tens of
    thousands of deletions every 65 seconds. With a phase per task a task's batch comes every
    ``PRUNE_BATCH + 1 - phase`` records, so the batches of tasks created together are spread from
    the first one on. A function of the name alone (CRC-32), so every replica agrees."""
    return zlib.crc32(task.encode()) % (PRUNE_BATCH // 2)


def count_excess(kept: int, keep_count: int, phase: int = 0) -> int:
    """How many of the oldest records the count rule deletes now, with ``kept`` records kept:
    none while ``kept <= keep_count + PRUNE_BATCH - phase``, then down to ``keep_count`` (at most
    :data:`PRUNE_MAX`; ``phase`` from :func:`prune_phase`). Computed from replicated counters and
    the task's name only, so every replica deletes alike."""
    over = kept - keep_count
    return min(over, PRUNE_MAX) if over > PRUNE_BATCH - phase else 0


@dataclass(frozen=True, slots=True)
class Retention:
    """How much history apply keeps per task, and for how long. Part of the replicated contract:
    every node of a cluster must use the same values (they come from the shared config)."""

    keep_count: int = 1000
    keep_ms: int = 7 * 24 * 3600 * 1000
    idempotency_keep_ms: int = 3600 * 1000
    audit_keep_ms: int = 90 * 24 * 3600 * 1000
    # An event's (name, key) is accepted once within this window (raftsched.fsm.events).
    event_dedupe_ms: int = 7 * 24 * 3600 * 1000
    # Bound on deletions per insertion, so one apply never stalls on a huge backlog of expiries.
    prune_step: int = 4

    def fingerprint(self) -> str:
        """The settings as one string: equal on two nodes exactly when they prune alike."""
        return (
            f"keep_count={self.keep_count} keep_ms={self.keep_ms} "
            f"idempotency_keep_ms={self.idempotency_keep_ms} audit_keep_ms={self.audit_keep_ms} "
            f"prune_step={self.prune_step} event_dedupe_ms={self.event_dedupe_ms}"
        )


def keeps(retention: Retention, keep_runs: int, keep_for_ms: int) -> tuple[int, int]:
    """``(keep_count, keep_ms)`` of a task or workflow: the cluster's retention, unless it sets
    ``keep_runs`` or ``keep_for`` (issue 29 §5); then its own pair, an unset half unbounded
    (``keep_for: 7d`` alone keeps 7 days whatever their count, up to MAX_KEEP_RUNS)."""
    if not (keep_runs or keep_for_ms):
        return retention.keep_count, retention.keep_ms
    return keep_runs or MAX_KEEP_RUNS, keep_for_ms or MAX_TIME_MS


class TaskState:
    """Mutable per-task state owned by the FSM (the only mutable state in the domain).

    A task loaded from the store (:meth:`stored`) holds its spec as the stored bytes only, and
    decodes :attr:`spec` the first time something reads it: loading a million tasks then costs a
    record parse each, not a spec decode each, and a task nothing has read since (a daily task
    between its fires, on a follower) holds no decoded spec (issue 31: restart time and memory
    per task). Reading ``spec`` is a plain slot read once decoded."""

    __slots__ = (
        "active_runs",
        "created_ms",
        "enabled",
        "fire_template",
        "fires_total",
        "held_run",
        "hot",
        "hot_seqs",
        "kept_fires",
        "kept_runs",
        "last_success_ms",
        "last_success_run",
        "next_fire_ms",
        "number",
        "run_template",
        "runs_total",
        "spec",
        "spec_bytes",
        "unplaceable",
        "updated_ms",
        "version",
        "watermark_ms",
    )

    # Slots that are not fields of the stored TaskRecord (derived or cached).
    NOT_STORED = ("spec", "spec_bytes", "run_template", "fire_template", "hot", "hot_seqs")

    def __init__(self, spec: TaskSpec, spec_bytes: bytes) -> None:
        self.spec = spec
        self.spec_bytes = spec_bytes  # TaskRecord{spec} serialised once; see record_bytes
        self.run_template: bytes | None = None  # per-version part of a new Run (see the FSM's _new_run)
        self.fire_template: bytes | None = None  # per-version part of a FireRecord (see _account)
        self.version = 0
        self.enabled = True
        self.created_ms = 0
        self.updated_ms = 0
        self.watermark_ms = 0
        self.next_fire_ms = 0
        self.active_runs = 0
        self.fires_total = 0
        self.runs_total = 0
        self.kept_fires = 0
        self.kept_runs = 0
        self.unplaceable = ""  # why no registered executor could ever run it ("" = one could)
        self.held_run = ""  # overlap=buffer_one: the run waiting for the running one
        # Kept only for a task with an SLA or freshness (issue 36): others store them as 0/"",
        # so their records' bytes are as before.
        self.last_success_ms = 0
        self.last_success_run = ""
        # The columnar hot path (issue 31 P1, raftsched.fsm.hot): the task's dense number (0: not
        # numbered yet; TaskRecord.number), whether its fires may take the hot path (derived from
        # the spec and state: raftsched.fsm.hot_slots.is_hot), and the seqs of its unfinished hot runs.
        self.number = 0
        self.hot = False
        # () until the task has a live hot run (an empty list per task would cost 56 bytes each
        # at a million tasks); raftsched.fsm.hot adds and drops seqs through add_seq / drop_seq.
        self.hot_seqs: list[int] | tuple[()] = ()

    @classmethod
    def stored(cls, spec_bytes: bytes) -> TaskState:
        """A task loaded from its record: ``spec_bytes`` (``TaskRecord{spec}`` serialised, as
        :func:`spec_bytes` gives) is decoded into :attr:`spec` when first read. The caller sets
        every stored field (:data:`STORED_FIELDS`)."""
        st = cls.__new__(cls)
        st.spec_bytes = spec_bytes
        st.run_template = st.fire_template = None
        st.hot = False
        st.hot_seqs = ()
        return st

    if not TYPE_CHECKING:  # hidden from mypy: it would type every misspelt attribute as a TaskSpec

        def __getattr__(self, name: str) -> TaskSpec:
            # Called only when a slot is unset: ``spec`` of a task loaded by ``stored``.
            if name != "spec":
                raise AttributeError(f"{type(self).__name__!r} object has no attribute {name!r}")
            spec = decode_spec(self.spec_bytes)
            self.spec = spec
            return spec

    def peek(self) -> TaskSpec:
        """The task's spec, or one equal to it in every field but ``name``, without decoding and
        keeping this task's own spec when it is not decoded yet: for reading a field other than
        the name over every task (a new leader reads each armed task's trigger; pool and calendar
        deletes look for users), which must not decode and keep a million specs."""
        try:
            spec: TaskSpec = _SPEC_SLOT.__get__(self, TaskState)
        except AttributeError:
            return spec_shape(self.spec_bytes)
        return spec

    def record(self) -> pb.TaskRecord:
        """The task's record as a fresh message (the caller may keep and mutate it)."""
        rec = pb.TaskRecord()
        rec.ParseFromString(self.record_bytes())
        return rec

    def record_bytes(self) -> bytes:
        """The stored bytes of the record: equal to serialising it deterministically."""
        # Concatenating serialised messages merges them; with the spec (field 1) first this is
        # byte-identical to serialising the whole record deterministically, without re-encoding
        # the spec on every fire.
        tail = pb.TaskRecord(
            version=self.version,
            enabled=self.enabled,
            created_ms=self.created_ms,
            updated_ms=self.updated_ms,
            watermark_ms=self.watermark_ms,
            next_fire_ms=self.next_fire_ms,
            active_runs=self.active_runs,
            fires_total=self.fires_total,
            runs_total=self.runs_total,
            kept_fires=self.kept_fires,
            kept_runs=self.kept_runs,
            unplaceable=self.unplaceable,
            held_run=self.held_run,
        ).SerializeToString(deterministic=True)
        if self.last_success_ms:
            # Fields 900-901 come after every other: appending their encoding keeps the bytes
            # those of the whole record serialised deterministically (and costs nothing for a
            # task without an SLA or freshness, which never sets them).
            tail += pb.TaskRecord(
                last_success_ms=self.last_success_ms, last_success_run=self.last_success_run
            ).SerializeToString(deterministic=True)
        if self.number:
            # Field 1410 is the last: appended, as the fields above (0 before numbering: the
            # bytes of a record written before the hot path).
            tail += pb.TaskRecord(number=self.number).SerializeToString(deterministic=True)
        return self.spec_bytes + tail


_SPEC_SLOT = TaskState.__dict__["spec"]  # the slot itself: reading it never decodes

STORED_FIELDS: Final = tuple(name for name in TaskState.__slots__ if name not in TaskState.NOT_STORED)
"""The TaskState slots that are fields of the stored TaskRecord, in slot order."""


def spec_bytes(spec_pb: pb.TaskSpec) -> bytes:
    """``TaskRecord{spec}`` serialised: the prefix of every record and version of the task."""
    return pb.TaskRecord(spec=spec_pb).SerializeToString(deterministic=True)


def stored_spec_bytes(record: bytes) -> bytes | None:
    """The :func:`spec_bytes` prefix of a stored TaskRecord's bytes, sliced without a re-encoding,
    or None if the record does not start with its spec (field 1, length-delimited).

    Every TaskRecord is stored as ``spec_bytes + the other fields`` (:meth:`TaskState.record_bytes`;
    deterministic serialisation puts field 1 first), so the slice equals ``spec_bytes(rec.spec)``."""
    if record[:1] != b"\x0a":
        return None
    if len(record) > 2 and record[1] < 0x80:  # the common case: a spec under 128 bytes
        end = 2 + record[1]
        return record[:end] if end <= len(record) else None
    length, shift, i = 0, 0, 1
    while i < len(record):
        byte = record[i]
        i += 1
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            end = i + length
            return record[:end] if end <= len(record) else None
        shift += 7
    return None


def decode_spec(data: bytes) -> TaskSpec:
    """The spec in ``data`` (:func:`spec_bytes`), as stored: not validated again (see
    :func:`raftsched.codec.stored_spec_from_pb`)."""
    return codec.stored_spec_from_pb(pb.TaskRecord.FromString(data).spec)


def _name_end(data: bytes) -> int:
    """Where the name ends in ``data`` (:func:`spec_bytes`): the spec's first field is its name
    (field 1), so what follows is the same for two tasks that differ only in their names."""
    # 0x0a <record length varint> 0x0a <name length varint> name ...
    i = 1
    while data[i] & 0x80:
        i += 1
    i += 1
    if data[i : i + 1] != b"\x0a":
        return i  # no name: the whole rest
    i += 1
    length, shift = 0, 0
    while True:
        byte = data[i]
        i += 1
        length |= (byte & 0x7F) << shift
        if byte < 0x80:
            return i + length
        shift += 7


# Specs decoded from stored spec bytes, by the bytes after the name (see _name_end): tasks
# created in bulk share everything but their names. Memoisation of a pure function; bounded.
_SHAPES: dict[bytes, TaskSpec] = {}
_SHAPES_MAX: Final = 4096


def spec_shape(data: bytes) -> TaskSpec:
    """The spec in ``data`` (:func:`spec_bytes`) in every field but ``name``, which may be
    another task's: decoded once per distinct rest of spec (see :meth:`TaskState.peek`)."""
    rest = data[_name_end(data) :]
    found = _SHAPES.get(rest)
    if found is None:
        found = decode_spec(data)
        if len(_SHAPES) >= _SHAPES_MAX:
            _SHAPES.clear()
        _SHAPES[rest] = found
    return found


def pending_shards(count: int) -> list[pb.ShardAttempt]:
    """The shards of a new run: ``count`` first attempts, all pending."""
    return [pb.ShardAttempt(shard=i, attempt=1, state=pb.PENDING) for i in range(count)]


def armed(st: TaskState) -> TaskArmed:
    """The effect that (re-)arms ``st`` in the leader's timing wheel (0: nothing to fire)."""
    return TaskArmed(st.spec.name, st.version, st.next_fire_ms if st.enabled else 0)


class BookHost(Protocol):
    """What every book over the task side needs from the state machine (``SchedulerState``);
    each book's own host protocol adds what only it needs.

    Called on the apply thread only, while a command applies; every method is deterministic and
    writes through the same store batch as the book."""

    @property
    def store(self) -> StateStore:
        """The state store (the apply thread's open batch)."""
        ...

    @property
    def tasks(self) -> Mapping[str, TaskState]:
        """Every task's in-memory state by name (internal workflow tasks included)."""
        ...

    @property
    def leader_effects(self) -> bool:
        """Whether the command being applied builds the effects only a leader consumes."""
        ...

    @property
    def batched_prune(self) -> bool:
        """Whether the command being applied prunes history in batches (:data:`PRUNE_BATCH`): its
        format is at least :data:`raftsched.codec.BATCHED_PRUNE_FORMAT`. Older commands prune
        exactly as the builds before did, so a cluster mid-upgrade stays byte-identical."""
        ...

    def put_task(self, st: TaskState) -> None:
        """Store the task's record as it is now (a field other than its counters changed)."""
        ...

    def touch_task(self, st: TaskState) -> None:
        """Only the task's counters changed (``raftsched.fsm.tasks.COUNTERS``: watermark, next
        fire, active runs, fire and run totals, kept counts): stored at the end of the command."""
        ...

    def raise_alert(self, kind: str, reason: str, now: int, **fields: str) -> None:
        """Record an alert event of ``kind`` (one of :data:`raftsched.model.ALERT_KINDS`)."""
        ...
