"""Hypothesis strategies for hostile API input: TaskSpec and WorkflowSpec protobufs.

The building block of the fuzz tests: the in-process property test
(``tests/property/test_input_fuzz.py``) drives these through model validation and ``apply``;
a cluster-level fuzz over the admin and executor RPCs can draw the same values.

Field values mix plausible and hostile ones: huge strings (3 MiB, or just past a limit), NUL and
control characters, template syntax, deeply nested JSON, NaN/Infinity, JSON escapes of NUL and
of lone surrogates, integers at and past every range (proto3 ``uint32`` and ``int64`` extremes),
and enum numbers no enum defines (proto3 enums are open: any ``int32`` is representable).

Not representable, so not drawn: invalid UTF-8 and lone surrogates in a proto ``string`` field.
The Python protobuf runtime refuses them on assignment (``UnicodeEncodeError``), so they can only
reach the server as raw bytes on the wire, where parsing fails (``DecodeError``) before any
model code runs; that belongs to the RPC layer's tests. Lone surrogates *are* drawn inside JSON
text as ``\\ud800`` escapes, which decode to them.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from hypothesis import strategies as st

from raftsched import bounds
from raftsched.fsm import keys
from raftsched.fsm.state import SchedulerState
from raftsched.v1 import log_pb2 as pb

UINT32_MAX = 2**32 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1

HUGE = "a" * 3 * 1024 * 1024
DEEP_ARRAY = "[" * 990 + "]" * 990
DEEP_OBJECT = '{"a":' * 2000 + "1" + "}" * 2000

# Strings built once: Hypothesis then only picks them, which keeps examples cheap.
_HOSTILE_TEXT = [
    "",
    " ",
    "x",
    "true",
    "echo hi",
    "h" * 129,  # one past a name or label limit
    "é" * 9000,  # 18 KB of UTF-8: past 16 KiB in bytes, not in characters
    HUGE,
    "a\x00b",
    "\x00",
    "\n\t\r\x1b[2J",
    "\u202eevil",
    "{{ nope }}",
    "{{ params.missing }}",
    "{{",
    "}} {{ ds | upper }}",
    "../../etc/passwd",
    "RAFTSCHED_TASK",
    "1BAD",
    "bad name!",
    "a#b",
    "* * * * * *",
    "Mars/Olympus",
    "%s%n%x",
]

_HOSTILE_JSON = [
    "",
    "{}",
    '{"k": 1}',
    '{"target": "wh", "batch": 5}',
    DEEP_ARRAY,
    DEEP_OBJECT,
    '{"a":' + "[" * 64 + "]" * 64 + "}",  # one level past the limit
    '{"a": NaN}',
    '{"a": Infinity}',
    '{"a": -Infinity}',
    '{"a": 1e400}',
    '{"a": "\\u0000"}',
    '{"\\u0000": 1}',
    '{"a": "\\ud800"}',
    '{"a": 1' + "0" * 5000 + "}",
    '{"a": "' + "x" * 20_000 + '"}',
    "[1, 2]",
    '"s"',
    "null",
    "{",
    "{oops",
    "\x00",
]

_json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False, allow_infinity=False) | st.text(),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4),
    max_leaves=12,
)


def texts() -> st.SearchStrategy[str]:
    """A string for any proto string field: hostile picks or arbitrary text (NUL included)."""
    return st.one_of(st.sampled_from(_HOSTILE_TEXT), st.text(max_size=40))


def names() -> st.SearchStrategy[str]:
    """Mostly valid names (so that later checks are reached), sometimes hostile text."""
    return st.one_of(st.sampled_from(["t", "a", "b", "etl", "load"]), texts())


def params_json() -> st.SearchStrategy[str]:
    """Params text: hostile picks, or random JSON objects encoded with arbitrary values."""
    objects = st.dictionaries(st.text(max_size=8), _json_values, max_size=5).map(json.dumps)
    return st.one_of(st.sampled_from(_HOSTILE_JSON), objects)


def uint32s() -> st.SearchStrategy[int]:
    return st.one_of(
        st.sampled_from([0, 1, 2, 9, 10, 100, 101, 1024, 1025, 10_000, 10_001, UINT32_MAX]),
        st.integers(0, UINT32_MAX),
    )


def int64s() -> st.SearchStrategy[int]:
    return st.one_of(
        st.sampled_from([0, 1, -1, 999, 1000, 1500, 7 * 24 * 3600 * 1000 + 1, 253_402_300_800_000]),
        st.sampled_from([INT64_MIN, INT64_MAX]),
        st.integers(INT64_MIN, INT64_MAX),
    )


_TYPE_RANGES = {
    FieldDescriptor.CPPTYPE_INT32: (INT32_MIN, INT32_MAX),
    FieldDescriptor.CPPTYPE_UINT32: (0, UINT32_MAX),
    FieldDescriptor.CPPTYPE_INT64: (INT64_MIN, INT64_MAX),
    FieldDescriptor.CPPTYPE_UINT64: (0, 2**64 - 1),
}


def boundary_ints(fd: FieldDescriptor) -> list[int]:
    """The values an integer field must be tried with: 0, 1, -1, its type's minimum and maximum,
    and its documented range's limits and their neighbours (:data:`raftsched.bounds.FIELDS`),
    each once, ascending, all representable in the field's type."""
    low, high = _TYPE_RANGES[fd.cpp_type]
    values = {0, 1, -1, low, high}
    rng = bounds.FIELDS.get(fd.full_name)
    if rng is not None:
        values |= {rng.low - 1, rng.low, rng.low + 1, rng.high - 1, rng.high, rng.high + 1}
    return sorted(v for v in values if low <= v <= high)


def enums(values: list[int]) -> st.SearchStrategy[int]:
    """A defined enum number, or any ``int32`` (proto3 keeps unknown numbers)."""
    return st.one_of(st.sampled_from(values), st.integers(INT32_MIN, INT32_MAX))


@st.composite
def triggers(draw: st.DrawFn) -> pb.Trigger:
    out = pb.Trigger()
    kind = draw(st.sampled_from(["cron", "interval", "once", "manual", "none"]))
    if kind == "cron":
        expr = st.one_of(st.sampled_from(["* * * * *", "* * * * * *", "61 * * * *", "R * * * *"]), texts())
        out.cron.expr = draw(expr)
        out.cron.timezone = draw(st.one_of(st.sampled_from(["", "UTC", "Europe/Berlin"]), texts()))
    elif kind == "interval":
        out.interval.every_ms = draw(int64s())
        out.interval.start_ms = draw(int64s())
    elif kind == "once":
        out.once.at_ms = draw(int64s())
    elif kind == "manual":
        out.manual.SetInParent()
    return out


_MODES = ["valid", "one", "one", "any"]


def _fields(
    draw: st.DrawFn, fields: dict[str, tuple[st.SearchStrategy[Any], st.SearchStrategy[Any]]]
) -> dict[str, Any]:
    """Draw each field from its (valid, hostile) pair: all valid, exactly one hostile, or any mix.

    Mostly-valid specs reach the later checks and the accepting path; a single hostile field
    shows which check refuses it; the free mix finds interactions.
    """
    mode = draw(st.sampled_from(_MODES))
    bad = draw(st.sampled_from(sorted(fields))) if mode == "one" else ""
    out = {}
    for name in sorted(fields):
        valid, hostile = fields[name]
        if mode == "any":
            out[name] = draw(st.one_of(valid, hostile))
        else:
            out[name] = draw(hostile if name == bad else valid)
    return out


@st.composite
def task_specs(draw: st.DrawFn) -> pb.TaskSpec:
    """A TaskSpec with every field drawn: valid, with one hostile field, or hostile anywhere."""
    values = _fields(
        draw,
        {
            "name": (st.sampled_from(["t", "u", "job.1"]), texts()),
            "command": (st.sampled_from(["true", "echo hi"]), st.one_of(st.just(""), texts())),
            "handler": (st.just(""), texts()),
            "shards": (st.integers(0, 3), uint32s()),
            "misfire": (
                st.sampled_from(list(pb.MisfirePolicy.values())),
                enums(list(pb.MisfirePolicy.values())),
            ),
            "misfire_all_cap": (st.integers(0, 3), uint32s()),
            "misfire_all_window_ms": (st.sampled_from([0, 60_000]), int64s()),
            "overlap": (
                st.sampled_from(list(pb.OverlapPolicy.values())),
                enums(list(pb.OverlapPolicy.values())),
            ),
            "max_retries": (st.integers(0, 3), uint32s()),
            "timeout_ms": (st.sampled_from([0, 1000]), int64s()),
            "priority": (st.integers(0, 9), uint32s()),
            "owner": (st.sampled_from(["", "ops"]), texts()),
            "namespace": (st.sampled_from(["", "default", "prod"]), texts()),
            "params_json": (st.sampled_from(["", '{"k": 1}']), params_json()),
            "description": (st.sampled_from(["", "nightly"]), texts()),
            "trigger": (_valid_triggers(), triggers()),
        },
    )
    trigger = values.pop("trigger")
    spec = pb.TaskSpec(**values)
    spec.trigger.CopyFrom(trigger)
    return spec


def _valid_triggers() -> st.SearchStrategy[pb.Trigger]:
    return st.sampled_from(
        [
            pb.Trigger(cron=pb.CronTrigger(expr="* * * * * *")),
            pb.Trigger(cron=pb.CronTrigger(expr="30 2 * * *", timezone="Europe/Berlin")),
            pb.Trigger(interval=pb.IntervalTrigger(every_ms=5000)),
            pb.Trigger(manual=pb.ManualTrigger()),
            pb.Trigger(),
        ]
    )


@st.composite
def workflow_task_specs(draw: st.DrawFn, task_names: list[str], index: int) -> pb.WorkflowTaskSpec:
    """Task ``index`` of a workflow; its valid dependencies are tasks before it (no cycle)."""
    earlier = task_names[:index] or ["nope"]
    values = _fields(
        draw,
        {
            "name": (st.just(task_names[index]), texts()),
            "command": (st.sampled_from(["echo {{ ds }}", "true"]), st.one_of(st.just(""), texts())),
            "handler": (st.just(""), texts()),
            "shards": (st.integers(0, 3), uint32s()),
            "max_retries": (st.integers(0, 3), uint32s()),
            "timeout_ms": (st.sampled_from([0, 1000]), int64s()),
            "params_json": (st.sampled_from(["", '{"k": 1}']), params_json()),
            "trigger_rule": (
                st.sampled_from(list(pb.TriggerRule.values())),
                enums(list(pb.TriggerRule.values())),
            ),
            "priority": (st.integers(0, 9), uint32s()),
            "description": (st.just(""), texts()),
            "env": (st.sampled_from([{}, {"DS": "{{ ds }}"}]), st.dictionaries(texts(), texts(), max_size=3)),
            "depends_on": (
                st.lists(st.sampled_from(earlier), max_size=2, unique=True) if index else st.just([]),
                st.lists(st.one_of(st.sampled_from(task_names), texts()), max_size=3),
            ),
        },
    )
    env = values.pop("env")
    deps = values.pop("depends_on")
    task = pb.WorkflowTaskSpec(**values)
    for key, value in env.items():
        task.env[key] = value
    for dep in deps:
        task.depends_on.add(task=dep, condition=draw(enums(list(pb.EdgeCondition.values()))))
    return task


@st.composite
def workflow_specs(draw: st.DrawFn) -> pb.WorkflowSpec:
    """A WorkflowSpec of 0-4 tasks whose names, dependencies and fields are drawn as above."""
    task_names = ["extract", "validate", "load", "cleanup"]
    values = _fields(
        draw,
        {
            "name": (st.sampled_from(["etl", "w2"]), texts()),
            "max_parallel_per_run": (st.integers(0, 2), uint32s()),
            "max_parallel": (st.sampled_from([0, 4]), uint32s()),
            "params_json": (st.sampled_from(["", '{"target": "wh"}']), params_json()),
            "owner": (st.just(""), texts()),
            "description": (st.just(""), texts()),
            "misfire": (
                st.sampled_from(list(pb.MisfirePolicy.values())),
                enums(list(pb.MisfirePolicy.values())),
            ),
            "overlap": (
                st.sampled_from(list(pb.OverlapPolicy.values())),
                enums(list(pb.OverlapPolicy.values())),
            ),
            "backfill_share_pct": (st.integers(0, 100), uint32s()),
            "schedule": (
                st.sampled_from([pb.CronTrigger(), pb.CronTrigger(expr="30 2 * * *")]),
                st.builds(pb.CronTrigger, expr=texts(), timezone=texts()),
            ),
        },
    )
    schedule = values.pop("schedule")
    spec = pb.WorkflowSpec(**values)
    spec.schedule.CopyFrom(schedule)
    count = 0 if draw(st.integers(0, 19)) == 19 else draw(st.integers(1, len(task_names)))
    for index in range(count):
        spec.tasks.append(draw(workflow_task_specs(task_names, index)))
    return spec


def domain(state: SchedulerState) -> str:
    """Digest of the replicated image, without the apply-chain fingerprint.

    Every applied command, rejected or not, moves the chain (replicas compare it to agree on what
    they applied); everything else must stay byte-identical when a command is rejected.
    """
    snapshot = pb.Snapshot.FromString(state.snapshot())
    h = hashlib.sha256()
    for entry in snapshot.entries:
        value = entry.value
        if entry.key == keys.META:
            meta = pb.Meta.FromString(value)
            meta.ClearField("chain")
            value = meta.SerializeToString(deterministic=True)
        h.update(len(entry.key).to_bytes(4, "big") + entry.key + len(value).to_bytes(4, "big") + value)
    return h.hexdigest()
