"""Output: tables and JSON, and the workflow views (single values are spelled by
:mod:`raftsched.display`, which the web console shares).

Pure except the ``print_*`` functions, which write to stdout.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping
from typing import Any

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from raftsched.display import duration_text, enum_name, iso, schedule_text, task_state, wf_state
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.layout import graph_layers

__all__ = [
    "can_print",
    "deps_text",
    "graph_dict",
    "offset_of",
    "one_line",
    "print_fields",
    "print_json",
    "print_table",
    "progress_bar",
    "render_graph",
    "render_status",
    "resource_text",
    "run_kind",
    "table_lines",
    "tasks_done_text",
    "to_dict",
]


def offset_of(local_iso: str) -> str:
    """The UTC offset an ISO 8601 time ends with (``Z`` if none)."""
    return local_iso[-6:] if local_iso[-6:-5] in "+-" else "Z"


def resource_text(cpu: float, memory_mb: int) -> str:
    """``cpu 1.5, memory 1024 MiB`` (or ``-`` when nothing is declared)."""
    parts = ([f"cpu {cpu:g}"] if cpu else []) + ([f"memory {memory_mb} MiB"] if memory_mb else [])
    return ", ".join(parts) or "-"


def to_dict(message: Message) -> dict[str, Any]:
    """A message as ``--json`` prints it: proto field names, every field, int64 as numbers, and
    enum values spelled as in the tables (:func:`enum_name`)."""
    out = MessageToDict(
        message,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
        unquote_int64_if_possible=True,
    )
    _respell_enums(message, out)
    return out


def _respell_enums(message: Message, out: dict[str, Any]) -> None:
    """Replace MessageToDict's enum names in ``out`` (built from ``message``) by :func:`enum_name`."""
    for field in message.DESCRIPTOR.fields:
        if field.name not in out:
            continue
        value = getattr(message, field.name)
        repeated = field.is_repeated
        if field.enum_type is not None:
            if repeated:
                out[field.name] = [enum_name(field.enum_type, v) for v in value]
            else:
                out[field.name] = enum_name(field.enum_type, value)
        elif field.message_type is not None:
            if field.message_type.GetOptions().map_entry:
                entry_value = field.message_type.fields_by_name["value"]
                if entry_value.enum_type is not None:
                    out[field.name] = {str(k): enum_name(entry_value.enum_type, v) for k, v in value.items()}
                elif entry_value.message_type is not None:
                    for key, item in value.items():
                        _respell_enums(item, out[field.name][str(key)])
            elif repeated:
                for item, item_out in zip(value, out[field.name], strict=True):
                    _respell_enums(item, item_out)
            elif isinstance(out[field.name], dict):
                _respell_enums(value, out[field.name])


def print_json(value: object) -> int:
    """Print ``value`` as indented JSON; returns exit status 0."""
    print(json.dumps(value, indent=2, ensure_ascii=False))
    return 0


def one_line(text: str) -> str:
    """A table cell's text on one line: a multi-line value (a shell script as a command) shows its
    first non-empty line and how many lines follow, ``set -e [+2 lines]``; tabs become spaces."""
    if "\n" not in text and "\r" not in text and "\t" not in text:
        return text
    lines = [line.replace("\t", " ") for line in text.splitlines()]
    while lines and not lines[-1].strip():
        lines.pop()
    while lines and not lines[0].strip():
        lines.pop(0)
    if len(lines) <= 1:
        return lines[0] if lines else ""
    more = len(lines) - 1
    return f"{lines[0]} [+{more} line{'' if more == 1 else 's'}]"


def table_lines(headers: list[str], rows: list[list[str]]) -> list[str]:
    """Left-aligned columns under ``headers``, every cell on one line (:func:`one_line`)."""
    cells = [[one_line(cell) for cell in row] for row in rows]
    widths = [max(len(h), *(len(r[i]) for r in cells)) if cells else len(h) for i, h in enumerate(headers)]
    return [
        "  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip()
        for row in [headers, *cells]
    ]


def print_table(headers: list[str], rows: list[list[str]]) -> None:
    """Left-aligned columns under ``headers`` (see :func:`table_lines`); ``(none)`` for no rows."""
    if not rows:
        print("(none)")
        return
    for line in table_lines(headers, rows):
        print(line)


def print_fields(fields: list[tuple[str, str]]) -> None:
    """One ``key  value`` line per field, the values aligned; the further lines of a multi-line
    value are indented to its column."""
    width = max(len(k) for k, _ in fields)
    for key, value in fields:
        first, *rest = value.splitlines() or [""]
        print(f"{key.ljust(width)}  {first}".rstrip())
        for line in rest:
            print(f"{'':{width}}  {line}".rstrip())


def can_print(text: str) -> bool:
    """Whether stdout's encoding can show ``text`` (else the caller falls back to ASCII)."""
    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


# -- workflows ------------------------------------------------------------------------------------


def progress_bar(done: int, total: int, width: int = 30) -> str:
    """``[#####.....] 12/30 runs``: ``width`` cells, filled in proportion (never full before done)."""
    done = max(0, min(done, total))
    filled = width if total and done >= total else (width * done // total if total else 0)
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} runs"


_STATE_MARK: dict[int, tuple[str, str]] = {
    pb.TASK_SUCCESS: ("✓", "ok"),
    pb.TASK_FAILED: ("✗", "x"),
    pb.TASK_TIMEOUT: ("✗", "x"),
    pb.TASK_SKIPPED: ("⊘", "-"),
    pb.TASK_KILLED: ("■", "k"),
    pb.TASK_RUNNING: ("▶", ">"),
    pb.TASK_READY: ("…", "."),
    pb.TASK_WAITING: ("…", "."),
}
_CONDITION_TEXT: dict[int, str] = {pb.ON_FAILURE: "on failure", pb.ON_DONE: "on done"}
_WAIT_TEXT: dict[int, str] = {
    pb.EXTERNAL_PENDING: "WAITING",
    pb.EXTERNAL_MET: "MET",
    pb.EXTERNAL_UNMET: "NOT MET",
    pb.EXTERNAL_TIMED_OUT: "TIMED OUT",
}


def render_graph(
    spec: pb.WorkflowSpec, version: int, run: pb.WorkflowRun | None = None, *, ascii_only: bool = False
) -> list[str]:
    """The DAG as text, one block per topological layer, one line per task with its dependencies::

        layer 2
          load      [skipped]  ← extract ✓, validate ✗

    With a run, each task shows its state and each dependency a mark of its state; an edge that
    waits for something other than success says so (``(on failure)``, ``(on done)``), as does a
    task that needs only one of its dependencies (``any of:``).
    """
    arrow = "<-" if ascii_only else "←"
    states: dict[str, int] = {t.name: t.state for t in run.tasks} if run is not None else {}
    index = {t.name: t for t in spec.tasks}
    if run is not None:
        head = f"workflow {spec.name} v{version}, run {run.run_id}: {wf_state(run.state)}"
    else:
        head = f"workflow {spec.name} v{version}: {len(spec.tasks)} task(s), {schedule_text(spec)}"
    lines = [head]
    layers = graph_layers(spec)
    width = max((len(t.name) for t in spec.tasks), default=0)
    state_width = max((len(task_state(s)) + 2 for s in states.values()), default=0)
    for n, layer in enumerate(layers):
        lines.append(f"layer {n}")
        for i in layer:
            task = spec.tasks[i]
            cells = [task.name.ljust(width)]
            if run is not None:
                cells.append(f"[{task_state(states.get(task.name, 0))}]".ljust(state_width))
            deps = []
            for dep in task.depends_on:
                text = f"{dep.workflow}:{dep.task or '*'}" if dep.workflow else dep.task
                if run is not None and not dep.workflow and dep.task in index:
                    text += " " + _STATE_MARK.get(states.get(dep.task, 0), ("?", "?"))[ascii_only]
                condition = _CONDITION_TEXT.get(dep.condition)
                if condition:
                    text += f" ({condition})"
                deps.append(text)
            if deps:
                rule = "any of: " if task.trigger_rule == pb.RULE_ANY and len(deps) > 1 else ""
                cells.append(f"{arrow} {rule}{', '.join(deps)}")
            lines.append(("  " + "  ".join(cells)).rstrip())
    if run is not None:
        marks = [
            (pb.TASK_SUCCESS, "success"),
            (pb.TASK_FAILED, "failed/timeout"),
            (pb.TASK_SKIPPED, "skipped"),
        ]
        marks += [(pb.TASK_KILLED, "killed"), (pb.TASK_RUNNING, "running"), (pb.TASK_WAITING, "waiting")]
        lines.append("  ".join(f"{_STATE_MARK[s][ascii_only]} {text}" for s, text in marks))
    return lines


def graph_dict(spec: pb.WorkflowSpec, version: int, run: pb.WorkflowRun | None) -> dict[str, Any]:
    """``workflow graph --json``: the layers, each task with its dependencies (and states)."""
    states = {t.name: t for t in run.tasks} if run is not None else {}

    def task_dict(i: int) -> dict[str, Any]:
        task = spec.tasks[i]
        out: dict[str, Any] = {
            "task": task.name,
            "rule": "any" if task.trigger_rule == pb.RULE_ANY else "all",
            "depends_on": [
                {
                    "task": d.task,
                    "condition": _CONDITION_TEXT.get(d.condition, "on success").replace(" ", "_"),
                    **(
                        {"workflow": d.workflow, "logical_offset_ms": d.logical_offset_ms}
                        if d.workflow
                        else {}
                    ),
                }
                for d in task.depends_on
            ],
        }
        if run is not None:
            out["state"] = task_state(states[task.name].state) if task.name in states else None
        return out

    return {
        "workflow": spec.name,
        "version": version,
        "run_id": run.run_id if run is not None else None,
        "state": wf_state(run.state) if run is not None else None,
        "layers": [[task_dict(i) for i in layer] for layer in graph_layers(spec)],
    }


def render_status(run: pb.WorkflowRun, now_ms: int = 0, gates: Mapping[str, str] | None = None) -> list[str]:
    """``workflow status``: the run, a table of its tasks, then every task's timeline.

    A task held by its earliest start (``not_before``, workflow jitter) shows WAITING with the
    time it may start and how far off that is from ``now_ms``, until that time (with the task's
    ``not_before`` as written, from ``gates``, when given)."""
    kind = run_kind(run)
    lines = [
        f"run {run.run_id}: {wf_state(run.state)}",
        f"workflow {run.workflow} v{run.version}, {kind}, logical {iso(run.logical_ms)}, "
        f"created {iso(run.created_ms)}, finished {iso(run.finished_ms)}",
    ]
    if run.params_json:
        lines.append(f"params {run.params_json}")
    headers = ["TASK", "STATE", "TRIES", "TASK RUN", "REASON"]
    rows = [_task_row(t, now_ms, (gates or {}).get(t.name, "")) for t in run.tasks]
    lines.append("")
    lines += table_lines(headers, rows)
    waits = [(t, w) for t in run.tasks for w in t.external]
    if waits:
        lines += ["", "cross-workflow dependencies"]
        rows = [
            [
                t.name,
                iso(w.logical_ms),
                _WAIT_TEXT.get(w.state, str(w.state)),
                w.upstream_run or "-",
                iso(w.since_ms),
            ]
            for t, w in waits
        ]
        lines += table_lines(["TASK", "UPSTREAM LOGICAL (UTC)", "EDGE", "DECIDED BY", "WAITING SINCE"], rows)
    lines += ["", "timeline (UTC)"]
    for t in run.tasks:
        lines.append(f"  {t.name}")
        for entry in t.timeline:
            reason = one_line(entry.reason)
            lines.append(f"    {iso(entry.at_ms)}  {task_state(entry.state).ljust(9)}{reason}".rstrip())
    return lines


def _task_row(t: pb.WorkflowTaskRun, now_ms: int, written: str) -> list[str]:
    if t.state in (pb.TASK_RUNNING, pb.TASK_READY) and t.not_before_ms > now_ms > 0:
        when = f"{written} ({iso(t.not_before_ms)}, in" if written else f"{iso(t.not_before_ms)} (in"
        reason = f"not before {when} {duration_text(t.not_before_ms - now_ms)})"
        return [t.name, task_state(pb.TASK_WAITING), str(t.tries), t.run_id or "-", reason]
    return [t.name, task_state(t.state), str(t.tries), t.run_id or "-", t.reason]


def deps_text(task: pb.WorkflowTaskSpec) -> str:
    """A task's dependencies, each with its condition unless it is ``on success``; ``-`` for none."""
    parts = []
    for d in task.depends_on:
        condition = _CONDITION_TEXT.get(d.condition)
        name = d.task
        if d.workflow:  # another workflow's run (or task), at the same or an earlier logical time
            name = f"{d.workflow}:{d.task}" if d.task else f"{d.workflow}:*"
            if d.logical_offset_ms:
                condition = ", ".join(
                    c for c in (condition, f"logical {duration_text(d.logical_offset_ms)}") if c
                )
        parts.append(f"{name} ({condition})" if condition else name)
    return ", ".join(parts) or "-"


def run_kind(run: pb.WorkflowRun) -> str:
    """``scheduled``, ``manual`` or ``backfill <id>``."""
    if run.backfill_id:
        return f"backfill {run.backfill_id}"
    return "manual" if run.manual else "scheduled"


def tasks_done_text(run: pb.WorkflowRun) -> str:
    """``<succeeded>/<tasks>`` of a run."""
    ok = sum(1 for t in run.tasks if t.state == pb.TASK_SUCCESS)
    return f"{ok}/{len(run.tasks)}"


_NEEDS_TEXT: dict[int, str] = {pb.ON_SUCCESS: "success", pb.ON_FAILURE: "failure", pb.ON_DONE: "done"}


def wait_lines(rows: list[dict[str, object]]) -> list[str]:
    """The table ``workflow waits`` prints."""
    table = [
        [
            f"{r['upstream']}:{r['upstream_task'] or '*'}",
            iso(int(r["upstream_logical_ms"])),  # type: ignore[call-overload]
            str(r["condition"]),
            str(r["downstream_run"]),
            str(r["downstream_task"]),
            iso(int(r["since_ms"])),  # type: ignore[call-overload]
        ]
        for r in rows
    ]
    headers = ["UPSTREAM", "LOGICAL (UTC)", "NEEDS", "DOWNSTREAM RUN", "TASK", "WAITING SINCE"]
    if any(r.get("note") for r in rows):  # why each waits (upstream not started, task gone...)
        headers.append("WHY")
        for line, r in zip(table, rows, strict=True):
            line.append(str(r.get("note", "")))
    return table_lines(headers, table)


def cross_lineage(
    workflow: str,
    task: str,
    spec: pb.WorkflowSpec,
    upstream: list[str],
    downstream: list[str],
    others: list[pb.WorkflowSpec],
) -> tuple[list[str], list[str]]:
    """``workflow lineage`` across workflows, one hop: the other workflows' runs or tasks that
    ``task`` (or a task upstream of it in ``spec``) depends on, and the tasks of ``others`` that
    depend on ``task``, on a task downstream of it, or on ``workflow``'s whole run. Each as
    ``workflow:task`` (``workflow:*`` for a whole run), with ``(logical -1d)`` for an offset."""
    mine = {task, *upstream}
    ups = []
    for t in spec.tasks:
        if t.name in mine:
            for d in t.depends_on:
                if d.workflow:
                    shift = f" (logical {duration_text(d.logical_offset_ms)})" if d.logical_offset_ms else ""
                    ups.append(f"{d.workflow}:{d.task or '*'}{shift}")
    after = {task, *downstream}
    downs = []
    for other in others:
        for t in other.tasks:
            for d in t.depends_on:
                if d.workflow == workflow and (not d.task or d.task in after):
                    shift = f" (logical {duration_text(d.logical_offset_ms)})" if d.logical_offset_ms else ""
                    downs.append(f"{other.name}:{t.name}{shift}")
    return sorted(set(ups)), sorted(set(downs))
