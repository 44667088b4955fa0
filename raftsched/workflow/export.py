"""Definitions back to file text: a task as a one-task task file, a workflow as a workflow file.

The console's edit pages start from this text, and what the user posts back is read by the same
parsers ``raftsched apply`` and ``raftsched workflow apply`` use, so the console and the CLI give
the same messages. Output is YAML: block mappings whose leaves are JSON (a subset of YAML's flow
syntax), so every value round-trips exactly (``parse(export(spec)) == spec``, tested).

A definition that a file cannot express is refused with :class:`NotExportable` naming what
(a plain task's ``locks``, which only the CLI and SDK set; a cross-workflow dependency).
"""

from __future__ import annotations

import datetime as _dt
import json
import re
from typing import Any

from raftsched.errors import InvalidSpec
from raftsched.model import CronTrigger, IntervalTrigger, OnceTrigger, Runner, TaskSpec
from raftsched.timing.durations import format_duration
from raftsched.v1 import raftsched_pb2 as pb

__all__ = ["NotExportable", "task_file_text", "workflow_file_text"]


class NotExportable(InvalidSpec):
    """The definition holds something its file format cannot express; edit it with the CLI."""

    def __init__(self, what: str) -> None:
        super().__init__("definition", f"{what}: a file cannot express it; change it with the CLI or SDK")


def _iso(ms: int) -> str:
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).isoformat().replace("+00:00", "Z")


# What YAML does not allow in a stream even inside a quoted string (DEL, the C1 controls,
# U+FFFE/U+FFFF, lone surrogates) or reads as a line break there (NEL, U+2028, U+2029: folded
# into a space): JSON leaves them raw with ensure_ascii off, so they are written as \uXXXX
# escapes, which YAML reads back as the character.
_NOT_YAML_PRINTABLE = re.compile("[\x7f-\x9f\u2028\u2029\ud800-\udfff\ufffe\uffff]")


def _leaf(value: object) -> str:
    return _NOT_YAML_PRINTABLE.sub(
        lambda m: f"\\u{ord(m.group()):04x}", json.dumps(value, ensure_ascii=False)
    )


def _block(mapping: dict[str, Any], indent: str = "") -> list[str]:
    lines: list[str] = []
    for key, value in mapping.items():
        if isinstance(value, list) and value and all(isinstance(v, dict) for v in value):
            lines.append(f"{indent}{key}:")
            for item in value:
                inner = _block(item, indent + "    ")
                lines.append(indent + "  - " + inner[0].lstrip())
                lines.extend(inner[1:])
        else:
            lines.append(f"{indent}{key}: {_leaf(value)}")
    return lines


def _task_fields(spec: TaskSpec) -> dict[str, Any]:
    out: dict[str, Any] = {"name": spec.name}
    trigger = spec.trigger
    if isinstance(trigger, CronTrigger):
        out["cron"] = trigger.expr
        if trigger.timezone != "UTC":
            out["timezone"] = trigger.timezone
    elif isinstance(trigger, IntervalTrigger):
        out["every"] = format_duration(trigger.every_ms)
        if trigger.start_ms:
            out["start"] = _iso(trigger.start_ms)
    elif isinstance(trigger, OnceTrigger):
        out["at"] = _iso(trigger.at_ms)
    if spec.command:
        out["command"] = spec.command
    if spec.handler:
        out["handler"] = spec.handler
    if spec.runner is not Runner.SHELL:
        out["runner"] = spec.runner.value
    if spec.params_json:
        out["params"] = json.loads(spec.params_json)
    if spec.shards != 1:
        out["shards"] = spec.shards
    if spec.max_retries:
        out["retries"] = spec.max_retries
    if spec.timeout_ms:
        out["timeout"] = format_duration(spec.timeout_ms)
    out["priority"] = spec.priority
    out["misfire"] = spec.misfire.value
    if spec.misfire_all_cap:
        out["misfire_cap"] = spec.misfire_all_cap
    if spec.misfire_all_window_ms:
        out["misfire_window"] = format_duration(spec.misfire_all_window_ms)
    out["overlap"] = spec.overlap.value
    if spec.jitter_ms:
        out["jitter"] = format_duration(spec.jitter_ms)
    if spec.exclude:
        out["exclude"] = list(spec.exclude)
    if spec.on_event:
        out["on_event"] = spec.on_event
    if spec.emits:
        out["emits"] = list(spec.emits)
    # Issue 29 §3-§5 and issue 36 §2 (merged after the console's editing): a field left out here
    # would be dropped by every console edit of the task.
    _retry_fields(out, spec.retry_delays_ms, spec.retry_backoff, spec.retry_elsewhere)
    _keep_fields(out, spec.keep_runs, spec.keep_for_ms)
    if spec.pool:
        out["pool"] = spec.pool
    _sla_fields(out, spec.sla_start_within_ms, spec.sla_finish_within_ms, spec.freshness_ms)
    resource: dict[str, Any] = {}
    if spec.resource_cpu:
        resource["cpu"] = spec.resource_cpu
    if spec.resource_memory_mb:
        resource["memory"] = spec.resource_memory_mb
    if resource:
        out["resource"] = resource
    if spec.selector:
        out["selector"] = dict(spec.selector)
    if spec.description:
        out["description"] = spec.description
    if spec.owner:
        out["owner"] = spec.owner
    return out


def task_file_text(spec: TaskSpec) -> str:
    """``spec`` as a task file (YAML) declaring it alone, in its namespace."""
    if spec.locks:
        raise NotExportable(f"task {spec.name!r} holds locks")
    return "\n".join(_block({"namespace": spec.namespace, "tasks": [_task_fields(spec)]})) + "\n"


def _choice(enum: Any, value: int, prefix: str) -> str:
    return str(enum.Name(value)).removeprefix(prefix).lower()


def _workflow_task(task: pb.WorkflowTaskSpec, workflow: str) -> dict[str, Any]:
    out: dict[str, Any] = {"name": task.name}
    if task.command:
        out["command"] = task.command
    if task.handler:
        out["handler"] = task.handler
    if task.runner and task.runner != "shell":
        out["runner"] = task.runner
    deps: list[Any] = []
    for dep in task.depends_on:
        if dep.workflow or dep.logical_offset_ms or dep.timeout_ms or dep.warn_after_ms or dep.on_timeout:
            raise NotExportable(f"workflow {workflow!r} task {task.name!r} has a cross-workflow dependency")
        if dep.condition == pb.CONDITION_UNSPECIFIED:
            deps.append(dep.task)
        else:
            deps.append({"task": dep.task, "condition": _choice(pb.EdgeCondition, dep.condition, "ON_")})
    if deps:
        out["depends_on"] = deps
    if task.trigger_rule:  # all (the default) too when the definition says it
        out["trigger_rule"] = _choice(pb.TriggerRule, task.trigger_rule, "RULE_")
    if task.not_before:
        out["not_before"] = task.not_before
    if task.max_retries:
        out["retries"] = task.max_retries
    if task.timeout_ms:
        out["timeout"] = format_duration(task.timeout_ms)
    if task.shards > 1:
        out["shards"] = task.shards
    out["priority"] = task.priority  # always: 0 is the lowest, and a file without one means 5
    if task.locks:
        out["locks"] = [
            {"name": lock.name, "mode": "shared" if lock.shared else "exclusive"} for lock in task.locks
        ]
    if task.params_json:
        out["params"] = json.loads(task.params_json)
    if task.env:
        out["env"] = dict(sorted(task.env.items()))
    resource: dict[str, Any] = {}
    if task.resource_cpu:
        resource["cpu"] = task.resource_cpu
    if task.resource_memory_mb:
        resource["memory"] = task.resource_memory_mb
    if resource:
        out["resource"] = resource
    if task.selector:
        out["selector"] = dict(sorted(task.selector.items()))
    if task.emits:
        out["emits"] = list(task.emits)
    _retry_fields(
        out,
        tuple(task.retry_delays_ms),
        task.retry_backoff if task.HasField("retry_backoff") else None,
        not task.retry_same_executor,
    )
    if task.pool:
        out["pool"] = task.pool
    if task.description:
        out["description"] = task.description
    return out


def _retry_fields(out: dict[str, Any], delays: Any, backoff: Any, elsewhere: bool) -> None:
    if delays:
        out["retry_delays"] = [format_duration(ms) if ms else "0s" for ms in delays]
    if backoff is not None:
        b: dict[str, Any] = {"base": format_duration(backoff.base_ms)}
        if backoff.cap_ms:
            b["cap"] = format_duration(backoff.cap_ms)
        if backoff.jitter_pct:
            b["jitter"] = f"{backoff.jitter_pct}%"
        out["retry_backoff"] = b
    if not elsewhere:
        out["retry_elsewhere"] = False


def _keep_fields(out: dict[str, Any], keep_runs: int, keep_for_ms: int) -> None:
    if keep_runs:
        out["keep_runs"] = keep_runs
    if keep_for_ms:
        out["keep_for"] = format_duration(keep_for_ms)


def _sla_fields(out: dict[str, Any], start_within_ms: int, finish_within_ms: int, freshness_ms: int) -> None:
    sla: dict[str, Any] = {}
    if start_within_ms:
        sla["start_within"] = format_duration(start_within_ms)
    if finish_within_ms:
        sla["finish_within"] = format_duration(finish_within_ms)
    if sla:
        out["sla"] = sla
    if freshness_ms:
        out["freshness"] = format_duration(freshness_ms)


def workflow_file_text(spec: pb.WorkflowSpec) -> str:
    """``spec`` as a workflow file (YAML)."""
    out: dict[str, Any] = {"name": spec.name}
    if spec.description:
        out["description"] = spec.description
    if spec.owner:
        out["owner"] = spec.owner
    if spec.namespace:
        out["namespace"] = spec.namespace
    if spec.schedule.expr:
        out["schedule"] = spec.schedule.expr
        if spec.schedule.timezone and spec.schedule.timezone != "UTC":
            out["timezone"] = spec.schedule.timezone
    if spec.misfire:
        out["misfire"] = _choice(pb.MisfirePolicy, spec.misfire, "MISFIRE_")
    if spec.overlap:
        out["overlap"] = _choice(pb.OverlapPolicy, spec.overlap, "OVERLAP_")
    if spec.max_parallel:
        out["max_parallel"] = spec.max_parallel
    if spec.max_parallel_per_run:
        out["max_parallel_per_run"] = spec.max_parallel_per_run
    if spec.backfill_share_pct:
        out["backfill_share"] = spec.backfill_share_pct
    if spec.params_json:
        out["params"] = json.loads(spec.params_json)
    if spec.jitter_ms:
        out["jitter"] = format_duration(spec.jitter_ms)
    if spec.exclude:
        out["exclude"] = list(spec.exclude)
    if spec.warn_after_ms:
        out["warn_after"] = format_duration(spec.warn_after_ms)
    if spec.on_event:
        out["on_event"] = spec.on_event
    if spec.emits:
        out["emits"] = list(spec.emits)
    _keep_fields(out, spec.keep_runs, spec.keep_for_ms)
    _sla_fields(out, spec.sla_start_within_ms, spec.sla_finish_within_ms, spec.freshness_ms)
    out["tasks"] = [_workflow_task(task, spec.name) for task in spec.tasks]
    return "\n".join(_block(out)) + "\n"
