"""How values read to people, one spelling each, shared by the CLI (:mod:`raftsched.cli.render`),
the web console and the demo: times, durations, protobuf enum values, schedules and states.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from raftsched.v1 import raftsched_pb2 as pb

__all__ = ["duration_text", "enum_name", "iso", "schedule_text", "task_state", "wf_state"]

_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)


def iso(ms: int) -> str:
    """UTC ISO 8601 with a Z (milliseconds only when there are any); ``-`` for 0 (unset)."""
    if not ms:
        return "-"
    try:
        moment = _EPOCH + dt.timedelta(milliseconds=ms)
    except OverflowError:
        return str(ms)
    text = moment.isoformat(timespec="milliseconds" if ms % 1000 else "seconds")
    return text.removesuffix("+00:00") + "Z"


def duration_text(ms: int) -> str:
    """``90s``, ``10m``, ``2h``, ``1d``: the largest unit that divides ``ms`` (else ``ms``)."""
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


# One spelling per enum value, in tables and in JSON alike: lower case, without the prefix its
# enum's value names share (TASK_SUCCESS -> "success", SKIPPED_OVERLAP -> "skipped_overlap"), and
# "unspecified" for the zero value.
_ENUM_PREFIXES: dict[str, str] = {
    "raftsched.v1.WorkflowTaskState": "TASK_",
    "raftsched.v1.WorkflowRunState": "WORKFLOW_",
    "raftsched.v1.MisfirePolicy": "MISFIRE_",
    "raftsched.v1.OverlapPolicy": "OVERLAP_",
    "raftsched.v1.TriggerRule": "RULE_",
    "raftsched.v1.ExecutorState": "EXECUTOR_",
}


def enum_name(enum: Any, value: int, prefix: str | None = None) -> str:
    """A protobuf enum value as the CLI spells it everywhere (tables and ``--json``): lower case,
    without the enum's prefix, ``unspecified`` for an ``*_UNSPECIFIED`` value, the number if
    unknown. ``enum`` is a generated enum wrapper (``pb.RunState``) or its descriptor;
    ``prefix`` overrides the enum's own prefix."""
    descriptor = getattr(enum, "DESCRIPTOR", enum)
    by_number = descriptor.values_by_number
    if value not in by_number:
        return str(value)
    name: str = by_number[value].name
    if name.endswith("UNSPECIFIED"):
        return "unspecified"
    if prefix is None:
        prefix = _ENUM_PREFIXES.get(descriptor.full_name, "")
    return name.removeprefix(prefix).lower()


def schedule_text(spec: pb.WorkflowSpec) -> str:
    """A workflow's schedule: ``cron '<expr>' <zone>`` or ``no schedule``."""
    if not spec.schedule.expr:
        return "no schedule"
    return f"cron '{spec.schedule.expr}' {spec.schedule.timezone or 'UTC'}"


def task_state(state: int) -> str:
    """A workflow task's state, e.g. ``success``."""
    return enum_name(pb.WorkflowTaskState, state)


def wf_state(state: int) -> str:
    """A workflow run's state, e.g. ``running``."""
    return enum_name(pb.WorkflowRunState, state)
