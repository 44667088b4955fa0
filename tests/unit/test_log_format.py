"""The replicated log and storage format is pinned: an edit to the public API can never change it.

What is written to Raft journals, snapshots and the state store is defined by
``protos/raftsched/v1/log.proto`` and the records it shares with the API,
``protos/raftsched/v1/records.proto``. The public gRPC API (``raftsched.proto``) imports the
records but nothing in the log format imports the API.

Two checked-in fixtures pin that format:

* ``tests/fixtures/log_format.golden``: every message and enum reachable from the log roots
  (the ``Command`` envelope, its ``CommandResult``, the ``Snapshot`` and every record stored under
  a key of :mod:`raftsched.fsm.keys`), with each field's number, name, type and label;
* ``tests/fixtures/log_samples.golden``: one sample of every such message with every field set,
  encoded as the state machine encodes it (deterministic serialisation), in hex.

A failure here means journals and snapshots already written would be read differently. Either
revert the ``.proto`` edit, or bump the format version (``COMMAND_FORMAT`` / ``SNAPSHOT_FORMAT``
in :mod:`raftsched.codec`) and add a migration. Only then, deliberately, rewrite the fixtures and
commit them with the change::

    PYTHONPATH=$PWD python tests/unit/test_log_format.py --rewrite
"""

from __future__ import annotations

import difflib
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any, cast

import pytest
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from google.protobuf.message_factory import GetMessageClass

from raftsched.fsm import keys
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb

# types-protobuf types descriptors as unions of the python and upb classes with optional links
# between them; this test only walks descriptors protoc generated, so it reads them untyped.
MessageDesc = Any
EnumDesc = Any
FieldDesc = Any

FIXTURES = Path(__file__).resolve().parents[1] / "fixtures"
GOLDEN = FIXTURES / "log_format.golden"
SAMPLES = FIXTURES / "log_samples.golden"
REWRITE = "PYTHONPATH=$PWD python tests/unit/test_log_format.py --rewrite"

LOG_FILES = {"raftsched/v1/log.proto", "raftsched/v1/records.proto"}

# What the state machine stores under each key prefix of raftsched.fsm.keys (None: empty value).
# The value under IDEM is an 8-byte stamp followed by the CommandResult.
STORED: dict[bytes, str | None] = {
    keys.META: "Meta",
    keys.TASK: "TaskRecord",
    keys.RUN: "Run",
    keys.FIRE: "FireRecord",
    keys.IDEM: "CommandResult",
    keys.IDEM_EXPIRY: None,
    keys.EXECUTOR: "ExecutorRecord",
    keys.VERSION: "TaskRecord",
    keys.ALERT: "AlertRecord",
    keys.ALERT_CURSOR: "AlertCursor",
    keys.ALERT_DEDUPE: None,
    keys.WORKFLOW: "WorkflowRecord",
    keys.WORKFLOW_VERSION: "WorkflowSpec",
    keys.WORKFLOW_RUN: "WorkflowRun",
    keys.BACKFILL: "BackfillRecord",
    keys.TOKEN: "TokenRecord",
    keys.AUDIT: "AuditRecord",
    keys.QUOTA: "QuotaRecord",
    keys.STAGE: "WorkflowStage",
    keys.STAGE_CHUNK: "WorkflowSpec",
    keys.CALENDAR: "CalendarRecord",
    keys.MEMBERSHIP: "MembershipRecord",
    keys.WORKFLOW_ZONE: "WorkflowZone",
    keys.EVENT: "EventRecord",
    keys.POOL: "PoolRecord",
    keys.TASK_COUNTERS: "TaskCounters",
    keys.HOT_FIRES: "HotFires",
    keys.HOT_ASSIGNS: "HotAssigns",
    keys.HOT_RESULTS: "HotResults",
    keys.HOT_PROMOTED: "HotPromoted",
    keys.HOT_CHECKPOINT: "HotCheckpoint",
    keys.EVENT_EXPIRY: None,
}

# Raft log entries are Commands; the apply chain hashes each command's CommandResult; a snapshot
# is a Snapshot whose entries hold the stored records above.
ROOTS = ["Command", "CommandResult", "Snapshot", *sorted({m for m in STORED.values() if m})]

_TYPE_NAMES = {
    getattr(FieldDescriptor, n): n.removeprefix("TYPE_").lower()
    for n in dir(FieldDescriptor)
    if n.startswith("TYPE_")
}
_MAX_DEPTH = 6


def _root_descriptors() -> list[MessageDesc]:
    """The roots as the log module exports them (its own messages and the records it re-exports)."""
    return [cast(type[Message], getattr(logpb, name)).DESCRIPTOR for name in ROOTS]


def _is_map(field: FieldDesc) -> bool:
    return field.message_type is not None and field.message_type.GetOptions().map_entry


def _real_oneof(field: FieldDesc) -> str | None:
    """The name of the (non-synthetic) oneof the field belongs to, if any."""
    oneof = field.containing_oneof
    if oneof is None or (len(oneof.fields) == 1 and oneof.name == "_" + field.name):
        return None
    return str(oneof.name)


def reachable() -> tuple[dict[str, MessageDesc], dict[str, EnumDesc]]:
    """Every message and enum reachable from the log roots, by full name (map entries excluded)."""
    messages: dict[str, MessageDesc] = {}
    enums: dict[str, EnumDesc] = {}
    todo = _root_descriptors()
    while todo:
        desc = todo.pop()
        if desc.full_name in messages:
            continue
        messages[desc.full_name] = desc
        for field in desc.fields:
            if _is_map(field):
                for inner in field.message_type.fields:
                    if inner.message_type is not None:
                        todo.append(inner.message_type)
                    if inner.enum_type is not None:
                        enums[inner.enum_type.full_name] = inner.enum_type
            elif field.message_type is not None:
                todo.append(field.message_type)
            elif field.enum_type is not None:
                enums[field.enum_type.full_name] = field.enum_type
    return messages, enums


def _type_name(field: FieldDesc) -> str:
    if _is_map(field):
        key, value = field.message_type.fields_by_name["key"], field.message_type.fields_by_name["value"]
        return f"map<{_type_name(key)}, {_type_name(value)}>"
    if field.message_type is not None:
        return str(field.message_type.full_name)
    if field.enum_type is not None:
        return f"enum {field.enum_type.full_name}"
    return _TYPE_NAMES[field.type]


def render_format() -> str:
    """The golden text: every reachable message and enum, sorted, with what decides its wire form."""
    messages, enums = reachable()
    lines = [
        "# The replicated log and storage format (Command, CommandResult, Snapshot, stored records).",
        f"# Pinned by tests/unit/test_log_format.py; rewrite only with a format bump: {REWRITE}",
        "# field: number name type label [oneof NAME] [packed] [explicit-presence]",
    ]
    for name in sorted(messages):
        lines.append(f"message {name}")
        for field in sorted(messages[name].fields, key=lambda f: f.number):
            label = "repeated" if field.is_repeated and not _is_map(field) else "optional"
            if _is_map(field):
                label = "map"
            parts = [str(field.number), field.name, _type_name(field), label]
            oneof = _real_oneof(field)
            if oneof is not None:
                parts.append(f"oneof {oneof}")
            if field.is_repeated and field.is_packed:
                parts.append("packed")
            if not field.is_repeated and field.message_type is None and oneof is None and field.has_presence:
                parts.append("explicit-presence")
            lines.append("  " + " ".join(parts))
    for name in sorted(enums):
        lines.append(f"enum {name}")
        for value in sorted(enums[name].values, key=lambda v: (v.number, v.name)):
            lines.append(f"  {value.number} {value.name}")
    return "\n".join(lines) + "\n"


# ------------------------------------------------------------------------------- samples


def _scalar(field: FieldDesc, i: int) -> object:
    t = field.type
    n = field.number * 1000 + i + 1
    if t == FieldDescriptor.TYPE_BOOL:
        return True
    if t == FieldDescriptor.TYPE_STRING:
        return f"{field.name}-{i}-é"
    if t == FieldDescriptor.TYPE_BYTES:
        return field.name.encode() + bytes([i, 0, 255])
    if t in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return field.number + 0.25
    if t == FieldDescriptor.TYPE_ENUM:
        return max(v.number for v in field.enum_type.values)
    if t in (
        FieldDescriptor.TYPE_INT32,
        FieldDescriptor.TYPE_INT64,
        FieldDescriptor.TYPE_SINT32,
        FieldDescriptor.TYPE_SINT64,
        FieldDescriptor.TYPE_SFIXED32,
        FieldDescriptor.TYPE_SFIXED64,
    ):
        return -n if i % 2 else n
    return n


def _fill(msg: Message, choice: dict[str, str], depth: int) -> None:
    """Set every field of ``msg`` (one member per oneof: ``choice`` or the first)."""
    desc: MessageDesc = msg.DESCRIPTOR
    for field in desc.fields:
        oneof = _real_oneof(field)
        if oneof is not None and field.name != choice.get(oneof, desc.oneofs_by_name[oneof].fields[0].name):
            continue
        if _is_map(field):
            target = getattr(msg, field.name)
            key_f, value_f = (
                field.message_type.fields_by_name["key"],
                field.message_type.fields_by_name["value"],
            )
            for i in range(2):
                if value_f.message_type is not None:
                    _fill(target[_scalar(key_f, i)], {}, depth + 1)
                else:
                    target[_scalar(key_f, i)] = _scalar(value_f, i)
        elif field.message_type is not None:
            if depth >= _MAX_DEPTH:
                continue
            if field.is_repeated:
                for _ in range(2):
                    _fill(getattr(msg, field.name).add(), {}, depth + 1)
            else:
                _fill(getattr(msg, field.name), {}, depth + 1)
                getattr(msg, field.name).SetInParent()
        elif field.is_repeated:
            getattr(msg, field.name).extend(_scalar(field, i) for i in range(2))
        else:
            setattr(msg, field.name, _scalar(field, 0))


def samples() -> Iterator[tuple[str, bytes]]:
    """(label, encoding) of one fully set sample per message, and one per member of each oneof."""
    messages, _ = reachable()
    for name in sorted(messages):
        desc = messages[name]
        cls = GetMessageClass(desc)
        choices: list[tuple[str, dict[str, str]]] = [("", {})]
        if desc.oneofs:
            choices = [
                (f"[{f.name}]", {o.name: f.name})
                for o in desc.oneofs
                if _real_oneof(o.fields[0]) is not None
                for f in o.fields
            ] or choices
        for suffix, choice in choices:
            msg = cls()
            _fill(msg, choice, 0)
            yield name + suffix, msg.SerializeToString(deterministic=True)


def render_samples() -> str:
    lines = [
        "# One sample of every log-format message, every field set, deterministic encoding (hex).",
        f"# Pinned by tests/unit/test_log_format.py; rewrite only with a format bump: {REWRITE}",
    ]
    lines += [f"{label} {data.hex()}" for label, data in samples()]
    return "\n".join(lines) + "\n"


# --------------------------------------------------------------------------------- tests


def _assert_pinned(path: Path, actual: str, what: str) -> None:
    expected = path.read_text(encoding="utf-8") if path.exists() else ""
    if actual == expected:
        return
    diff = "".join(
        difflib.unified_diff(
            expected.splitlines(keepends=True),
            actual.splitlines(keepends=True),
            f"{path.name} (committed)",
            f"{path.name} (from the descriptors)",
            n=1,
        )
    )
    pytest.fail(
        f"the replicated log format changed ({what}): journals and snapshots already written hold the "
        "old format. Bump the format version (COMMAND_FORMAT / SNAPSHOT_FORMAT in raftsched/codec.py) "
        f"and add a migration, or revert the .proto edit. Once deliberate, rewrite with `{REWRITE}`.\n"
        + diff,
        pytrace=False,
    )


def test_log_format_matches_golden() -> None:
    _assert_pinned(GOLDEN, render_format(), "message, field or enum numbers, names, types or labels")


def test_log_encoding_matches_golden_samples() -> None:
    _assert_pinned(SAMPLES, render_samples(), "the bytes a sample message encodes to")


def test_every_store_prefix_has_a_pinned_record() -> None:
    prefixes = {
        value
        for name, value in vars(keys).items()
        if name.isupper() and isinstance(value, bytes) and value.endswith(b"/")
    }
    missing = sorted((prefixes | {keys.META}) - set(STORED))
    assert not missing, (
        f"key prefixes {missing} of raftsched.fsm.keys have no entry in STORED: say which record each "
        "holds, so the golden log format covers it"
    )


def test_no_api_message_is_reachable_from_the_log_format() -> None:
    messages, enums = reachable()
    outside = sorted(
        name for name, desc in [*messages.items(), *enums.items()] if desc.file.name not in LOG_FILES
    )
    assert not outside, f"log-format messages defined outside {sorted(LOG_FILES)}: {outside}"


def test_log_files_hold_only_the_log_format_and_never_import_the_api() -> None:
    messages, enums = reachable()
    for file in (logpb.DESCRIPTOR, *logpb.DESCRIPTOR.dependencies):
        assert file.name in LOG_FILES, f"the log format depends on {file.name}"
        assert not file.services_by_name, f"{file.name} declares a service: it belongs to the API"
        for name, desc in file.message_types_by_name.items():
            assert desc.full_name in messages, (
                f"{name} in {file.name} is not reachable from the log format: it belongs to the API"
            )
        for name, edesc in file.enum_types_by_name.items():
            assert edesc.full_name in enums, f"enum {name} in {file.name} is not part of the log format"


def test_the_api_module_reexports_the_shared_records() -> None:
    # Wire type names are identical across the split files (one proto package), and the API module
    # hands out the very classes the log format stores.
    assert pb.DESCRIPTOR.package == logpb.DESCRIPTOR.package == "raftsched.v1"
    assert pb.TaskRecord is logpb.TaskRecord
    assert pb.WorkflowRunOp.KILL == logpb.WorkflowRunOp.KILL
    assert "Command" not in pb.DESCRIPTOR.message_types_by_name
    assert not hasattr(pb, "Command")


if __name__ == "__main__":
    if sys.argv[1:] != ["--rewrite"]:
        raise SystemExit(f"usage: {REWRITE}")
    FIXTURES.mkdir(exist_ok=True)
    GOLDEN.write_text(render_format(), encoding="utf-8")
    SAMPLES.write_text(render_samples(), encoding="utf-8")
    print(f"rewrote {GOLDEN} and {SAMPLES}")
