"""Bytes of the columnar hot path built from wire pieces instead of protobuf calls: a first-try
success's end-of-run ``pb.Run`` record, and the hot checkpoint (:mod:`raftsched.fsm.hot` writes
both). Each equals protobuf's deterministic serialisation byte for byte
(tests/unit/test_fsm_hot.py checks them against it).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final, NamedTuple

from raftsched.fsm import keys, wire
from raftsched.fsm.hot_slots import SUCCEEDED
from raftsched.v1 import log_pb2 as pb

# Rows per protobuf call when a checkpoint is encoded (:func:`checkpoint_bytes`).
CHECKPOINT_CHUNK: Final = 8192

# HotCheckpoint's repeated fields, in field-number order, as SlotTable.columns() gives them.
CHECKPOINT_FIELDS: Final = (
    "task",
    "version",
    "nominal_ms",
    "state",
    "executor",
    "attempt",
    "assigned_ms",
    "created_ms",
    "epoch",
)


def _packed_payload(name: str, column: list[int], start: int) -> bytes:
    """The packed varints of ``column[start:]`` as field ``name`` of a HotCheckpoint holds them,
    encoded :data:`CHECKPOINT_CHUNK` rows per protobuf call (varints need no framing, so the
    chunks' payloads concatenate to the whole field's)."""
    parts = []
    for i in range(start, len(column), CHECKPOINT_CHUNK):
        rec = pb.HotCheckpoint()
        getattr(rec, name).extend(column[i : i + CHECKPOINT_CHUNK])
        data = rec.SerializeToString()
        j = 1  # one tag byte (fields 2-10), then the length's varint
        while data[j] & 0x80:
            j += 1
        parts.append(data[j + 1 :])
    return b"".join(parts)


def checkpoint_bytes(seq_base: int, columns: tuple[list[int], ...], start: int) -> bytes:
    """``HotCheckpoint(seq_base=seq_base, task=columns[0][start:], ...).SerializeToString(
    deterministic=True)``, byte for byte, without one protobuf call over every live slot: that
    held the GIL ~0.7 s at 400,000 slots (a leader 30 s behind at 12,000 every-second tasks), on
    every node at once, and their Raft tick threads stalled past the election timeout."""
    out = [wire.varint(1 << 3) + wire.varint(seq_base)] if seq_base else []
    for number, (name, column) in enumerate(zip(CHECKPOINT_FIELDS, columns, strict=True), start=2):
        if len(column) > start:
            payload = _packed_payload(name, column, start)
            out.append(wire.varint(number << 3 | 2) + wire.varint(len(payload)) + payload)
    return b"".join(out)


# -- the end-of-run record, from wire pieces (records.proto's Run and ShardAttempt field numbers) --

_SUCCEEDED_STATE: Final = wire.varint(5 << 3) + wire.varint(SUCCEEDED)  # Run.state
_SHARD_HEAD: Final = wire.varint(2 << 3) + b"\x01" + wire.varint(3 << 3) + wire.varint(SUCCEEDED)
_STARTED_TAG: Final = wire.varint(1400 << 3)  # ShardAttempt.started_ms (optional: always written)
_DURATION_TAG: Final = wire.varint(1401 << 3)
_DERIVED: Final = wire.varint(1400 << 3) + b"\x01"  # Run.timeline_derived


def int_field(field: int, value: int) -> bytes:
    return wire.varint(field << 3) + wire.varint(value) if value else b""


def len_field(field: int, data: bytes) -> bytes:
    return wire.varint(field << 3 | 2) + wire.varint(len(data)) + data


@lru_cache(maxsize=64)
def cached_field(field: int, value: int) -> bytes:
    # Times shared by the rows of one entry (created, finished, assigned, nominal).
    return int_field(field, value)


# A hot run that succeeded on its first attempt is stored as its ``pb.Run`` serialised
# deterministically, built in HotBook.result_columns by concatenating, in field order: id_tag
# and the run id (1), FinishedHead's task (2), the nominal time (3), FinishedHead's version (4),
# finished_times's first part (state SUCCEEDED, created, finished, epoch: 5 to 8), shard_field
# (10: attempt 1, SUCCEEDED, finished, executor, assigned, started, duration), FinishedHead's
# params (11) and finished_times's tail (the "created" timeline entry, timeline_derived).
# tests/unit/test_fsm_hot.py checks the pieces and the stored records against protobuf.


class FinishedHead(NamedTuple):
    """The per-version pieces of a finished hot run's record."""

    task_field: bytes  # Run.task (2)
    version_field: bytes  # Run.task_version (4)
    params_field: bytes  # Run.params_json (11)
    key_prefix: bytes  # the run key's up to its time (keys.time_key(keys.RUN, task, ...))


def finished_head(task: str, version: int, params_json: str) -> FinishedHead:
    return FinishedHead(
        len_field(2, task.encode()),
        int_field(4, version),
        len_field(11, params_json.encode()) if params_json else b"",
        keys.per_task_prefix(keys.RUN, task),
    )


def finished_times(created_ms: int, finished_ms: int, epoch: int) -> tuple[bytes, bytes]:
    """Of a finished hot run's record (see FinishedHead): Run.state to Run.epoch (5 to 8), and
    its tail after params_json (the "created" timeline entry and timeline_derived)."""
    return (
        _SUCCEEDED_STATE
        + cached_field(6, created_ms)
        + cached_field(7, finished_ms)
        + cached_field(8, epoch),
        created_entry(created_ms) + _DERIVED,
    )


def id_tag(size: int) -> bytes:
    """Run.run_id's tag and length (of a finished hot run's record, see FinishedHead)."""
    return wire.varint(1 << 3 | 2) + wire.varint(size)


@lru_cache(maxsize=64)
def created_entry(created_ms: int) -> bytes:
    entry = int_field(2, created_ms) + len_field(3, b"fire") + len_field(4, b"created")
    return len_field(16, entry)


_SMALL: Final = tuple(bytes((i,)) for i in range(128))
ID_TAGS: Final = tuple(b"\x0a" + b for b in _SMALL)  # id_tag of a run id shorter than 128 bytes


@lru_cache(maxsize=1024)
def shard_field(
    finished_ms: int, executor: str, assigned_ms: int, started_ms: int, duration_ms: int
) -> bytes:
    """Run.shards[0] (field 10) of a finished hot run."""
    shard = (
        _SHARD_HEAD
        + int_field(5, finished_ms)
        + (len_field(6, executor.encode()) if executor else b"")
        + int_field(8, assigned_ms)
        + _STARTED_TAG
        + wire.varint(started_ms)
        + (_DURATION_TAG + wire.varint(duration_ms) if duration_ms else b"")
    )
    return len_field(10, shard)
