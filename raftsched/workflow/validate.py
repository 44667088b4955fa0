"""Validation of a workflow definition at submission: every problem at once, each with its location.

Pure (no clock, no IO, no randomness) and deterministic: the same spec gives the same problems in
the same order. The schedule check (cron expression and time zone) consults the tz database, so
like every cron evaluation it belongs on the leader (or the client), not inside ``apply``.

Locations are field paths of :class:`raftsched.v1.raftsched_pb2.WorkflowSpec`:
``name``, ``schedule.expr``, ``schedule.timezone``, ``params_json``, ``tasks[2].name``,
``tasks[2].depends_on[0]``, ``tasks[2].env.HOME``, ... A task's path carries its name in
parentheses (``tasks[2].depends_on[0] ("load")``). When the spec came from a file, the
``locations`` map given to :func:`validate_workflow` turns a path into ``file:line``; a path
missing from the map falls back to its nearest parent (``tasks[2].command`` → ``tasks[2]``).

Limits (beyond those of ordinary tasks in :mod:`raftsched.model`)
    ==========================  ===================================================
    tasks                       1 - 10,000 (``MAX_WORKFLOW_TASKS``)
    max_parallel                0 (unlimited) - 10,000
    max_parallel_per_run        0 (unlimited) - 10,000, at most ``max_parallel``
    backfill_share_pct          0 (cluster default, 30) - 100
    env                         names ``[A-Za-z_][A-Za-z0-9_]*``, not ``RAFTSCHED_*``
    templates                   see :mod:`raftsched.workflow.template`; every
                                ``{{ params.X }}`` must have a workflow or task default
    ==========================  ===================================================
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Mapping, Sequence

from raftsched.errors import InvalidSpec, InvalidWorkflow, quote
from raftsched.model import (
    MAX_COMMAND_BYTES,
    MAX_DESCRIPTION_BYTES,
    MAX_JITTER_MS,
    MAX_KEEP_FOR_MS,
    MAX_KEEP_RUNS,
    MAX_LABEL,
    MAX_LOCKS,
    MAX_NAME,
    MAX_RETRIES,
    MAX_SHARDS,
    MAX_SLA_MS,
    MAX_TIMEOUT_MS,
    RetryBackoff,
    check_int,
    check_text,
    parse_params,
    validate_event_names,
    validate_exclude,
    validate_name,
    validate_resource,
    validate_retry_policy,
    validate_selector,
)
from raftsched.timing.cron import CronSchedule, validate_timezone
from raftsched.timing.gates import parse_not_before
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.dag import find_cycle
from raftsched.workflow.template import check_template, template_params, template_secrets

__all__ = [
    "MAX_PARALLEL",
    "MAX_WORKFLOW_TASKS",
    "collect_problems",
    "locate",
    "validate_workflow",
    "workflow_version_conflict",
]

MAX_WORKFLOW_TASKS = 10_000
MAX_PARALLEL = 10_000
MAX_ENV_VARS = 256
MAX_PRIORITY = 9
MAX_LOGICAL_OFFSET_MS = 366 * 24 * 3600 * 1000
"""A cross-workflow dependency's ``logical`` offset: at most a year either way."""
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
# Suggestions cost a fuzzy match against every task name; past this many unknown names a
# workflow is more likely generated wrongly than mistyped, and the list stays fast.
_MAX_SUGGESTIONS = 50
# A cycle through thousands of tasks is shown by its ends, so the message stays readable.
_MAX_CYCLE_SHOWN = 12

_CONDITIONS = frozenset(pb.EdgeCondition.values())
_ON_TIMEOUT = frozenset(pb.UpstreamTimeout.values())
_RULES = frozenset(pb.TriggerRule.values())
_MISFIRES = frozenset(pb.MisfirePolicy.values())
# Workflow runs take skip or allow: buffer_one and replace are task policies.
_OVERLAPS = frozenset({pb.OVERLAP_UNSPECIFIED, pb.OVERLAP_SKIP, pb.OVERLAP_ALLOW})


class _Problems:
    """Collects ``(path, message)``; ``check`` turns a raised InvalidSpec into one problem."""

    def __init__(self) -> None:
        self.items: list[tuple[str, str]] = []

    def add(self, path: str, message: str) -> None:
        self.items.append((path, message))

    def check_name(self, value: str, path: str) -> bool:
        try:
            validate_name(value, path)
        except InvalidSpec as exc:
            self.add(path, exc.reason)
            return False
        return True

    def check_int(self, value: int, path: str, low: int, high: int, unit: str = "") -> None:
        try:
            check_int(value, path, low, high, unit)
        except InvalidSpec as exc:
            self.add(path, exc.reason)

    def check_text(self, value: str, path: str, max_bytes: int) -> bool:
        try:
            check_text(value, path, max_bytes)
        except InvalidSpec as exc:
            self.add(path, exc.reason)
            return False
        return True

    def check_params(self, value: str, path: str) -> set[str]:
        """Check params with the task rules; return their top-level names (none if invalid)."""
        try:
            return set(parse_params(value, path))
        except InvalidSpec as exc:
            self.add(path, exc.reason)
            return set()


def _q(text: str) -> str:
    """A name as the messages quote it (JSON style), bounded however long the input is."""
    return quote(text, double=True)


def validate_workflow(spec: pb.WorkflowSpec, locations: Mapping[str, str] | None = None) -> None:
    """Check ``spec`` completely; raise :class:`InvalidWorkflow` listing every problem, or return.

    ``locations`` optionally maps field paths (``tasks[2].depends_on[0]``) to file positions
    (``etl.yaml:14``), which then prefix the problems. Cost is linear in the size of the spec
    (a 10,000-task DAG takes tens of milliseconds).
    """
    items = collect_problems(spec)
    if items:
        names = [task.name for task in spec.tasks]
        raise InvalidWorkflow(locate(items, names, locations), spec.name)


def collect_problems(spec: pb.WorkflowSpec) -> list[tuple[str, str]]:
    """Every problem of ``spec`` as ``(field path, message)``, in a deterministic order.

    The building block of :func:`validate_workflow`, for callers (the workflow file loader) that
    merge these with problems of their own before reporting.
    """
    problems = _Problems()
    workflow_params = _check_workflow_fields(spec, problems)
    names = [task.name for task in spec.tasks]
    if not spec.tasks:
        problems.add("tasks", "a workflow needs at least one task")
    elif len(spec.tasks) > MAX_WORKFLOW_TASKS:
        problems.add("tasks", f"{len(spec.tasks)} tasks, at most {MAX_WORKFLOW_TASKS} allowed")
    first_at: dict[str, int] = {}
    for i, name in enumerate(names):
        first_at.setdefault(name, i)
    suggestions = [0]
    for i, task in enumerate(spec.tasks):
        _check_task(spec, i, task, first_at, workflow_params, problems, suggestions)
    _check_cycle(spec, first_at, problems)
    return problems.items


def chunk_problems(
    header: pb.WorkflowSpec, names: Sequence[str], start: int, tasks: Sequence[pb.WorkflowTaskSpec]
) -> list[tuple[str, str]]:
    """The problems of ``tasks``, the workflow's tasks from position ``start`` on, as
    :func:`collect_problems` reports them for those tasks. ``header`` is the workflow without
    its tasks and ``names`` every task name in spec order (dependencies are checked against
    them). With :func:`graph_problems` over the assembled workflow this is every problem:
    a big workflow is checked chunk by chunk, never in one go."""
    problems = _Problems()
    workflow_params = _Problems().check_params(header.params_json, "params_json")
    # Apply builds each task's internal spec with the workflow's keeps as it stages the chunk.
    _check_keeps(header, problems)
    first_at: dict[str, int] = {}
    for i, name in enumerate(names):
        first_at.setdefault(name, i)
    suggestions = [0]
    for j, task in enumerate(tasks):
        i = start + j
        if i >= len(names) or names[i] != task.name:
            problems.add(f"tasks[{i}].name", "does not match the staged task names")
            continue
        _check_task(header, i, task, first_at, workflow_params, problems, suggestions)
    return problems.items


def graph_problems(spec: pb.WorkflowSpec, cycles: bool = True) -> list[tuple[str, str]]:
    """The problems of ``spec`` that are not of one task alone: its own fields, the task count
    and (if ``cycles``) cycles: the complement of :func:`chunk_problems`."""
    problems = _Problems()
    _check_workflow_fields(spec, problems)
    if not spec.tasks:
        problems.add("tasks", "a workflow needs at least one task")
    elif len(spec.tasks) > MAX_WORKFLOW_TASKS:
        problems.add("tasks", f"{len(spec.tasks)} tasks, at most {MAX_WORKFLOW_TASKS} allowed")
    if cycles:
        first_at: dict[str, int] = {}
        for i, task in enumerate(spec.tasks):
            first_at.setdefault(task.name, i)
        _check_cycle(spec, first_at, problems)
    return problems.items


def raise_problems(items: list[tuple[str, str]], spec: pb.WorkflowSpec, names: Sequence[str]) -> None:
    """Raise :class:`InvalidWorkflow` for ``items`` (if any) as :func:`validate_workflow` does."""
    if items:
        raise InvalidWorkflow(locate(items, list(names), None), spec.name)


def _check_workflow_fields(spec: pb.WorkflowSpec, problems: _Problems) -> set[str]:
    """Check the workflow-level fields; return the names of the workflow's params."""
    problems.check_name(spec.name, "name")
    problems.check_text(spec.owner, "owner", MAX_LABEL)
    problems.check_text(spec.namespace, "namespace", MAX_LABEL)
    problems.check_text(spec.description, "description", MAX_DESCRIPTION_BYTES)
    params = problems.check_params(spec.params_json, "params_json")
    expr, tz = spec.schedule.expr, spec.schedule.timezone
    if expr.strip():
        try:
            CronSchedule.parse(expr, tz or "UTC", field="schedule.expr", tz_field="schedule.timezone")
        except InvalidSpec as exc:
            problems.add(exc.field, exc.reason)
            if exc.field == "schedule.timezone":  # the expression was not looked at yet
                try:
                    CronSchedule.parse(expr, "UTC", field="schedule.expr")
                except InvalidSpec as bad_expr:
                    problems.add(bad_expr.field, bad_expr.reason)
    elif tz:
        try:
            validate_timezone(tz, "schedule.timezone")
        except InvalidSpec as exc:
            problems.add(exc.field, exc.reason)
        else:
            problems.add("schedule.timezone", "a time zone without a schedule (cron expression)")
    elif expr:
        problems.add("schedule.expr", "cron expression is blank")
    if spec.misfire not in _MISFIRES:
        problems.add("misfire", f"unknown misfire policy {spec.misfire} (use latest, all or skip)")
    if spec.overlap not in _OVERLAPS:
        problems.add("overlap", f"unknown overlap policy {spec.overlap} (use skip or allow)")
    problems.check_int(spec.max_parallel, "max_parallel", 0, MAX_PARALLEL)
    problems.check_int(spec.max_parallel_per_run, "max_parallel_per_run", 0, MAX_PARALLEL)
    if 0 < spec.max_parallel < spec.max_parallel_per_run <= MAX_PARALLEL:
        problems.add(
            "max_parallel_per_run",
            f"{spec.max_parallel_per_run} exceeds max_parallel {spec.max_parallel} "
            "(no run could ever use it; lower it or raise max_parallel)",
        )
    problems.check_int(spec.backfill_share_pct, "backfill_share_pct", 0, 100, " %")
    problems.check_int(spec.jitter_ms, "jitter_ms", 0, MAX_JITTER_MS, " ms")
    problems.check_int(spec.warn_after_ms, "warn_after_ms", 0, MAX_TIMEOUT_MS, " ms")
    _check_keeps(spec, problems)
    problems.check_int(spec.sla_start_within_ms, "sla_start_within_ms", 0, MAX_SLA_MS, " ms")
    problems.check_int(spec.sla_finish_within_ms, "sla_finish_within_ms", 0, MAX_SLA_MS, " ms")
    problems.check_int(spec.freshness_ms, "freshness_ms", 0, MAX_SLA_MS, " ms")
    try:
        validate_exclude(tuple(spec.exclude))
        if spec.on_event:
            validate_name(spec.on_event, "on_event")
        validate_event_names(tuple(spec.emits))
    except InvalidSpec as exc:
        problems.add(exc.field, exc.reason)
    return params


def _check_keeps(spec: pb.WorkflowSpec, problems: _Problems) -> None:
    problems.check_int(spec.keep_runs, "keep_runs", 0, MAX_KEEP_RUNS)
    problems.check_int(spec.keep_for_ms, "keep_for", 0, MAX_KEEP_FOR_MS, " ms")


def _check_task(
    spec: pb.WorkflowSpec,
    i: int,
    task: pb.WorkflowTaskSpec,
    first_at: Mapping[str, int],
    workflow_params: set[str],
    problems: _Problems,
    suggestions: list[int],
) -> None:
    at = f"tasks[{i}]"
    if problems.check_name(task.name, f"{at}.name") and first_at[task.name] != i:
        problems.add(
            f"{at}.name",
            f"duplicate task name {_q(task.name)} (first defined at tasks[{first_at[task.name]}])",
        )
    if task.command and task.handler:
        problems.add(f"{at}.handler", "give a command or a handler, not both")
    elif not task.command and not task.handler:
        problems.add(at, "give a command or a handler")
    command_ok = problems.check_text(task.command, f"{at}.command", MAX_COMMAND_BYTES)
    problems.check_text(task.handler, f"{at}.handler", MAX_LABEL)
    problems.check_int(task.shards, f"{at}.shards", 0, MAX_SHARDS)
    problems.check_int(task.max_retries, f"{at}.max_retries", 0, MAX_RETRIES)
    problems.check_int(task.timeout_ms, f"{at}.timeout_ms", 0, MAX_TIMEOUT_MS, " ms")
    problems.check_int(task.priority, f"{at}.priority", 0, MAX_PRIORITY)
    if task.not_before:
        try:
            parse_not_before(task.not_before, f"{at}.not_before")
        except InvalidSpec as exc:
            problems.add(exc.field, exc.reason)
    try:
        backoff = task.retry_backoff if task.HasField("retry_backoff") else None
        validate_retry_policy(
            tuple(task.retry_delays_ms),
            None if backoff is None else RetryBackoff(backoff.base_ms, backoff.cap_ms, backoff.jitter_pct),
            True,
            f"{at}.",
        )
    except InvalidSpec as exc:
        field = exc.field
        if field.startswith("retry_backoff."):  # RetryBackoff names its fields without the task
            field = f"{at}.{field}"
        problems.add(field, exc.reason)
    if len(task.locks) > MAX_LOCKS:
        problems.add(f"{at}.locks", f"{len(task.locks)} locks, at most {MAX_LOCKS} allowed")
    seen_locks: set[str] = set()
    for j, lock in enumerate(task.locks):
        if problems.check_name(lock.name, f"{at}.locks[{j}].name") and lock.name in seen_locks:
            problems.add(f"{at}.locks[{j}].name", f"lock {_q(lock.name)} is named twice")
        seen_locks.add(lock.name)
    if task.pool:
        problems.check_name(task.pool, f"{at}.pool")
    problems.check_text(task.description, f"{at}.description", MAX_DESCRIPTION_BYTES)
    task_params = problems.check_params(task.params_json, f"{at}.params_json")
    try:
        validate_resource(task.resource_cpu, task.resource_memory_mb, f"{at}.resource")
    except InvalidSpec as exc:
        problems.add(exc.field, exc.reason)
    if task.runner not in ("", "shell", "python"):
        problems.add(f"{at}.runner", f"{_q(task.runner)} is not one of shell, python")
    elif task.runner == "python" and task.handler:
        problems.add(f"{at}.runner", "runner python runs a command; a handler is already Python")
    if task.trigger_rule not in _RULES:
        problems.add(f"{at}.trigger_rule", f"unknown trigger rule {task.trigger_rule} (use all or any)")
    try:
        validate_selector(dict(task.selector), f"{at}.selector")
    except InvalidSpec as exc:
        problems.add(exc.field, exc.reason)
    try:
        validate_event_names(tuple(task.emits), f"{at}.emits")
    except InvalidSpec as exc:
        problems.add(exc.field, exc.reason)

    defined = workflow_params | task_params
    # Only text within its limits is parsed as a template: an oversized value is one problem,
    # not one per placeholder in it.
    templated = [(f"{at}.command", task.command)] if command_ok else []
    if len(task.env) > MAX_ENV_VARS:
        problems.add(f"{at}.env", f"{len(task.env)} variables, at most {MAX_ENV_VARS} allowed")
    for key in sorted(task.env):
        path = f"{at}.env.{key}"
        if not _ENV_NAME.fullmatch(key):
            problems.add(path, f"{_q(key)} is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)")
        elif key.startswith("RAFTSCHED_"):
            problems.add(path, f"{_q(key)}: RAFTSCHED_* variables are set by the executor")
        if problems.check_text(task.env[key], path, MAX_COMMAND_BYTES):
            templated.append((path, task.env[key]))
    for path, text in templated:
        if "{{" not in text:
            continue
        for message in check_template(text):
            problems.add(path, f"template: {message}")
        if path.endswith(".command") and template_secrets(text):
            problems.add(
                path,
                "{{ secret.NAME }} is not allowed in a command (a command line is visible to every "
                "user of the host): put it in env (PW: '{{ secret.NAME }}') and use $PW",
            )
        for name in sorted(template_params(text) - defined):
            problems.add(
                path,
                f"{{{{ params.{name} }}}}: no workflow or task param {_q(name)} "
                "(give it a default in params)",
            )

    seen: dict[str, int] = {}
    seen_external: dict[tuple[str, str, int], int] = {}
    for k, dep in enumerate(task.depends_on):
        path = f"{at}.depends_on[{k}]"
        if dep.condition not in _CONDITIONS:
            problems.add(path, f"unknown condition {dep.condition} (use success, failure or done)")
        if dep.workflow or dep.logical_offset_ms or dep.timeout_ms or dep.warn_after_ms or dep.on_timeout:
            _check_external(spec, dep, path, k, seen_external, problems)
            continue
        if not dep.task:
            problems.add(path, "names no task")
            continue
        if dep.task in seen:
            problems.add(path, f"depends on {_q(dep.task)} twice (also depends_on[{seen[dep.task]}])")
            continue
        seen[dep.task] = k
        if dep.task == task.name:
            problems.add(path, "a task cannot depend on itself")
        elif dep.task not in first_at:
            hint = ""
            # A name longer than any valid one is no typo, and fuzzy matching it would cost its
            # length times every task name's.
            if suggestions[0] < _MAX_SUGGESTIONS and len(dep.task) <= MAX_NAME:
                suggestions[0] += 1
                close = [c for c in difflib.get_close_matches(dep.task, first_at, n=2) if c != task.name]
                hint = f" (did you mean {_q(close[0])}?)" if close else ""
            problems.add(path, f"unknown task {_q(dep.task)}{hint}")


def _check_external(
    spec: pb.WorkflowSpec,
    dep: pb.Dependency,
    path: str,
    k: int,
    seen: dict[tuple[str, str, int], int],
    problems: _Problems,
) -> None:
    """A cross-workflow dependency: another workflow's run (or one of its tasks) at a logical time."""
    if not dep.workflow:
        problems.add(
            f"{path}.logical",
            "logical, timeout and warn_after need a workflow (they are about another workflow's run)",
        )
        return
    if not problems.check_name(dep.workflow, f"{path}.workflow"):
        return
    if dep.workflow == spec.name:
        problems.add(
            f"{path}.workflow",
            f"{_q(dep.workflow)} is this workflow; name the task alone to depend on a task of it",
        )
    if dep.task:
        problems.check_name(dep.task, f"{path}.task")
    if dep.logical_offset_ms > 0:
        problems.add(
            f"{path}.logical",
            "a later logical time cannot be waited for (use same or a negative offset such as -1d)",
        )
    elif dep.logical_offset_ms < -MAX_LOGICAL_OFFSET_MS:
        problems.add(f"{path}.logical", f"{dep.logical_offset_ms} ms, at most a year (-366d) back")
    problems.check_int(dep.timeout_ms, f"{path}.timeout_ms", 0, MAX_TIMEOUT_MS, " ms")
    problems.check_int(dep.warn_after_ms, f"{path}.warn_after_ms", 0, MAX_TIMEOUT_MS, " ms")
    if dep.on_timeout not in _ON_TIMEOUT:
        problems.add(f"{path}.on_timeout", f"unknown on_timeout {dep.on_timeout} (use fail or skip)")
    key = (dep.workflow, dep.task, dep.logical_offset_ms)
    if key in seen:
        problems.add(path, f"depends on the same upstream twice (also depends_on[{seen[key]}])")
    seen[key] = k


def _check_cycle(spec: pb.WorkflowSpec, first_at: Mapping[str, int], problems: _Problems) -> None:
    """Report one cycle (self-dependencies are reported per edge) at the edge that closes it."""
    names = [task.name for task in spec.tasks]
    deps = {
        task.name: [d.task for d in task.depends_on if d.task != task.name and not d.workflow]
        for i, task in enumerate(spec.tasks)
        if first_at.get(task.name) == i
    }
    cycle = find_cycle(names, deps)
    if cycle is None:
        return
    # cycle = [a, b, ..., z, a]: the path starts at a, which depends on z (the closing edge).
    head = first_at[cycle[0]]
    k = next(k for k, d in enumerate(spec.tasks[head].depends_on) if d.task == cycle[-2] and not d.workflow)
    shown = cycle
    if len(cycle) > _MAX_CYCLE_SHOWN:
        shown = [*cycle[:8], f"… ({len(cycle) - 11:,} more)", *cycle[-3:]]
    problems.add(f"tasks[{head}].depends_on[{k}]", f"cycle: {' → '.join(shown)}")


_PARENT = re.compile(r"(?:\.[^.\[\]]+|\[\d+\])$")
_TASK = re.compile(r"tasks\[(\d+)\]")


def locate(
    items: list[tuple[str, str]], names: list[str], locations: Mapping[str, str] | None
) -> list[tuple[str, str]]:
    """Turn field paths into display locations: ``file:line: path ("task")``.

    A path missing from ``locations`` uses its nearest parent's position, else the ``""`` entry.
    """
    out = []
    for path, message in items:
        shown = path
        task = _TASK.match(path)
        if task is not None and int(task.group(1)) < len(names) and names[int(task.group(1))]:
            shown = f"{path} ({_q(names[int(task.group(1))])})"
        if locations:
            probe = path
            while probe and probe not in locations:
                probe = _PARENT.sub("", probe) if _PARENT.search(probe) else ""
            if probe:
                shown = f"{locations[probe]}: {shown}"
            elif "" in locations:
                shown = f"{locations['']}: {shown}"
        out.append((shown, message))
    return out


def workflow_version_conflict(name: str, at: int, expected: int) -> str:
    """The message of an apply conditional on version ``expected`` of a workflow at ``at``."""
    return f"workflow {name!r} is at version {at}, not {expected}"
