"""Protobuf wire bytes for the two records every fire writes, without building messages.

Applying a fire stores a new :class:`~raftsched.v1.log_pb2.Run` and a
:class:`~raftsched.v1.log_pb2.FireRecord`. Both are a per-task-version template (serialized once,
see ``TaskState.run_template``) followed by the per-fire fields, which were built as a message and
serialized for every fire: two or three message constructions per fire, on every replica. Here the
per-fire fields are written as wire bytes directly, and the parts that are the same for every fire
of one command (its time and epoch, the "created" timeline entry) are encoded once per command.

The output is byte for byte what ``SerializeToString(deterministic=True)`` gives for the same
fields (proto3: a field at its default value is left out; fields in field-number order), so
stored records, snapshots and digests are unchanged. ``tests/unit/test_wire.py`` checks it
against protobuf itself, property-based.

Field numbers are those of ``protos/raftsched/v1/records.proto``; a change there must be made here too
(the property test fails otherwise).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Final

_U64: Final = (1 << 64) - 1


def varint(value: int) -> bytes:
    """The base-128 varint of ``value``; a negative int64 is encoded as its 64-bit two's complement
    (ten bytes), as protobuf does."""
    if value < 0:
        value &= _U64
    if value < 0x80:
        return bytes((value,))
    out = bytearray()
    while value >= 0x80:
        out.append((value & 0x7F) | 0x80)
        value >>= 7
    out.append(value)
    return bytes(out)


def _tag(field: int, wire_type: int) -> bytes:
    return varint(field << 3 | wire_type)


def _int(field: int, value: int) -> bytes:
    """A varint field (int64, uint64, bool, enum); nothing at the default 0."""
    return _tag(field, 0) + varint(value) if value else b""


def _str(field: int, value: str) -> bytes:
    """A string field; nothing when empty."""
    if not value:
        return b""
    data = value.encode()
    return _tag(field, 2) + varint(len(data)) + data


@lru_cache(maxsize=64)
def _cached_int(field: int, value: int) -> bytes:
    # Nominal times repeat across the tasks of one batch (every-second tasks share them).
    return _int(field, value)


# -- Run (records.proto): run_id 1, nominal_ms 3, created_ms 6, epoch 8, manual 9, timeline 16, held 340,
# timeline_derived 1400 (the last field number: its bytes end the record, see fsm.timeline.canonical).


@lru_cache(maxsize=16)
def _run_tail(created_ms: int, epoch: int, manual: bool, held: bool, derived: bool) -> bytes:
    """The fields after ``nominal_ms``, the same for every fire of one command: created_ms, epoch,
    manual, the "created" timeline entry (TimelineEntry: at_ms 2, reason 3, event 4), held and
    timeline_derived."""
    entry = _int(2, created_ms) + _str(3, "manual" if manual else "fire") + _str(4, "created")
    return (
        _int(6, created_ms)
        + _int(8, epoch)
        + _int(9, int(manual))
        + _tag(16, 2)
        + varint(len(entry))
        + entry
        + _int(340, int(held))
        + _int(1400, int(derived))
    )


def run_fields(
    run_id: str, nominal_ms: int, created_ms: int, epoch: int, manual: bool, held: bool, derived: bool = False
) -> bytes:
    """``pb.Run(run_id=..., nominal_ms=..., created_ms=..., epoch=..., manual=..., timeline=[the
    "created" entry], held=..., timeline_derived=...)`` serialized deterministically."""
    if run_id:
        data = run_id.encode()
        size = len(data)
        rid = (b"\x0a" + bytes((size,)) if size < 0x80 else b"\x0a" + varint(size)) + data  # field 1
    else:
        rid = b""
    return rid + _cached_int(3, nominal_ms) + _run_tail(created_ms, epoch, manual, held, derived)


# -- FireRecord (records.proto): nominal_ms 2, outcome 3, reason 4, decided_ms 5, epoch 6, run_id 7,
# through_ms 9, count 10, calendar 380 (task 1 and task_version 8 are in the template).


@lru_cache(maxsize=16)
def _decided(decided_ms: int, epoch: int) -> bytes:
    return _int(5, decided_ms) + _int(6, epoch)


@lru_cache(maxsize=64)
def _outcome(outcome: int, reason: str) -> bytes:
    # Reasons repeat (the misfire and overlap texts), and most fires have none.
    return _int(3, outcome) + _str(4, reason)


@lru_cache(maxsize=64)
def _rest(through_ms: int, count: int, calendar: str) -> bytes:
    return _int(9, through_ms) + _int(10, count) + _str(380, calendar)


def fire_fields(
    nominal_ms: int,
    outcome: int,
    reason: str,
    decided_ms: int,
    epoch: int,
    run_id: str,
    through_ms: int,
    count: int,
    calendar: str,
) -> bytes:
    """``pb.FireRecord`` with these fields (task and task_version left out) serialized
    deterministically."""
    if run_id:
        data = run_id.encode()
        size = len(data)
        rid = (b"\x3a" + bytes((size,)) if size < 0x80 else b"\x3a" + varint(size)) + data  # field 7
    else:
        rid = b""
    return (
        _cached_int(2, nominal_ms)
        + _outcome(outcome, reason)
        + _decided(decided_ms, epoch)
        + rid
        + _rest(through_ms, count, calendar)
    )
