"""Workflow files (YAML or TOML) → :class:`WorkflowSpec`, every problem reported with ``file:line``.

The only module of :mod:`raftsched.workflow` that does IO (it reads the file). The result is
checked with :func:`raftsched.workflow.validate.validate_workflow`'s rules, so a file that loads
is a spec the cluster accepts (the leader validates again).

File format (the same keys in YAML and TOML)
============================================

Workflow keys:

=======================  ============================================================  =========
key                      meaning                                                       default
=======================  ============================================================  =========
``name``                 workflow name (required; letters, digits, ``_ . : -``)
``description``          free text
``owner``                free text (at most 128 characters)
``schedule``             cron expression (5 fields, or 6 with seconds last); omit for   none
                         a workflow that runs only on demand and by backfill
``timezone``             IANA zone of ``schedule``                                     ``UTC``
``misfire``              ``latest`` | ``all`` | ``skip`` (missed scheduled runs)        ``latest``
``overlap``              ``skip`` | ``allow`` (a scheduled run while one is active)     ``skip``
``max_parallel``         tasks running at once across all runs (0 = unlimited)          0
``max_parallel_per_run`` tasks running at once in one run (0 = unlimited)               0
``backfill_share``       percent of executor slots backfill may use (int, or ``"30%"``)  30
``params``               mapping: defaults for ``{{ params.NAME }}``
``exclude``              list of calendar names: scheduled runs on their days are       none
                         skipped (accounted ``skipped_calendar``); needs a schedule
``tasks``                list of tasks (required, at least one)
=======================  ============================================================  =========

Task keys:

=================  ====================================================================  =========
key                meaning                                                               default
=================  ====================================================================  =========
``name``           task name, unique in the workflow (required)
``command``        shell command (templated); exactly one of ``command`` / ``handler``
``handler``        name of a Python handler registered on executors
``depends_on``     list; each item is a task name (condition ``success``) or a mapping
                   ``{task: NAME, condition: success | failure | done}``                 none
``trigger_rule``   ``all`` (every dependency's condition met) | ``any`` (at least one)    ``all``
``retries``        retries after a failure (0-100)                                       0
``timeout``        seconds (a number) or a duration: ``"500ms"``, ``"90s"``, ``"1.5h"``, none
                   ``"1d"``, ``"1w"`` (:mod:`raftsched.timing.durations`)
``shards``         parallel shards (1-1024)                                              1
``priority``       0-9 (9 most urgent)                                                   5
``locks``          list of resource locks, each a name (exclusive), ``NAME:shared``, or    none
                   ``{name: NAME, mode: exclusive | shared}``; an attempt starts only when
                   it holds all of them
``params``         mapping: task params (override the workflow's)
``env``            mapping of environment variable names to (templated) string values
``selector``       mapping of executor labels the task needs (``{gpu: "true"}``)          none
``description``    free text
``runner``         ``shell`` (``/bin/sh -c``) | ``python`` (the executor's Python runs it:   ``shell``
                   a leading ``python`` word is replaced by it, else the command is a
                   script and its arguments)
``resource``       mapping ``{cpu: 1.0, memory: 1024}``: CPU share and MiB, each > 0       none
=================  ====================================================================  =========

Seed-format aliases: files written for the seeds' format apply unchanged. ``dag_name`` is
``name``, ``retry`` is ``retries``, ``worker_type`` is ``runner``; ``timeout`` in seconds and
``depends_on: []`` are already this format's. Giving a key and its alias together is an error.

Templates (``{{ ds }}``, ``{{ ts }}``, ``{{ nominal_time }}``, ``{{ params.NAME }}``, ...) are
described in :mod:`raftsched.workflow.template`. ``depends_on`` is always a list: a mapping like
``depends_on: {validate: failure}`` is refused with a hint (one form, one meaning). Unknown keys
are errors (with a did-you-mean), and so are wrong types: string fields need strings (quote
``"123"`` or ``"true"``), numeric fields integers.

YAML
====

YAML files are read with PyYAML's safe loader by :mod:`raftsched.workflow.yaml_reader`, which
keeps each value's line and refuses, with their line: anchors, aliases, tags, directives, several
documents, duplicate keys, folded ``>`` scalars, plain or quoted scalars over several lines, flow
collections (``[a, b]``, ``{task: a}``) over several lines, and plain scalars whose value differs
between YAML 1.1 and 1.2 (``010``, ``0x1F``, ``1_000``, ``12:30``, ``1e3``, ``2024-01-01``,
``.inf``; quote them). Plain ``yes``/``no``/``on``/``off`` are strings, only ``true``/``false``
are booleans. Literal blocks ``|`` (``|-`` strips, ``|+`` keeps the final newlines) suit long
commands. Indent with spaces, never tabs.

TOML is read with :mod:`tomllib`, which reports no positions for values; positions come from a
best-effort scan of the text (``[[tasks]]`` headers and ``key =`` lines).
"""

from __future__ import annotations

import difflib
import json
import re
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from raftsched.errors import InvalidSpec, InvalidWorkflow
from raftsched.model import LOCK_MODES, LockMode, parse_lock
from raftsched.timing.durations import parse_duration_ms
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.located import Node, SyntaxProblem
from raftsched.workflow.validate import collect_problems, locate
from raftsched.workflow.yaml_reader import read_yaml

__all__ = ["load_workflow_file", "parse_workflow_text"]

WORKFLOW_KEYS = (
    "name",
    "description",
    "owner",
    "schedule",
    "timezone",
    "misfire",
    "overlap",
    "max_parallel",
    "max_parallel_per_run",
    "backfill_share",
    "params",
    "exclude",
    "tasks",
)
TASK_KEYS = (
    "name",
    "command",
    "handler",
    "depends_on",
    "trigger_rule",
    "retries",
    "timeout",
    "shards",
    "priority",
    "locks",
    "params",
    "env",
    "description",
    "runner",
    "resource",
    "selector",
)
LOCK_KEYS = ("name", "mode")
DEFAULT_PRIORITY = 5
RESOURCE_KEYS = ("cpu", "memory")
DEPENDENCY_KEYS = ("task", "condition")
# Names people bring from other schedulers (or from the protobuf) → our key.
_ALIASES = {
    "cron": "schedule",
    "tz": "timezone",
    "max_retries": "retries",
    "timeout_ms": "timeout",
    "timeout_seconds": "timeout",
    "deps": "depends_on",
    "depends": "depends_on",
    "upstream": "depends_on",
    "rule": "trigger_rule",
    "backfill_share_pct": "backfill_share",
    "params_json": "params",
    "parallelism": "max_parallel",
    "resource_lock": "locks",
    "resource_locks": "locks",
    "concurrency": "max_parallel",
    "misfire_policy": "misfire",
    "overlap_policy": "overlap",
}
# The seeds' workflow format (adwawd's YAML) spells some keys its own way; files written for it
# apply unchanged. These are accepted as documented aliases, not only suggested.
ACCEPTED_ALIASES = {
    "dag_name": "name",
    "retry": "retries",
    "worker_type": "runner",
}
_RUNNER = {"shell": "", "python": "python"}
_MISFIRE = {"latest": pb.MISFIRE_LATEST, "all": pb.MISFIRE_ALL, "skip": pb.MISFIRE_SKIP}
_OVERLAP = {"skip": pb.OVERLAP_SKIP, "allow": pb.OVERLAP_ALLOW}
_RULE = {"all": pb.RULE_ALL, "any": pb.RULE_ANY}
_CONDITION = {"success": pb.ON_SUCCESS, "failure": pb.ON_FAILURE, "done": pb.ON_DONE}
_UINT32 = 2**32 - 1


# ---------------------------------------------------------------------------------------------
# TOML: tomllib for the values, a best-effort scan for their lines.

_TOML_HEADER = re.compile(r"\[\[?\s*([^\]]+?)\s*\]\]?")
_TOML_KEY = re.compile(
    r"""((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)


def _toml_parts(dotted: str) -> list[str]:
    return [p.strip().strip("\"'") for p in re.findall(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""", dotted)]


def scan_toml_lines(text: str) -> dict[tuple[str | int, ...], int]:
    lines: dict[tuple[str | int, ...], int] = {}
    counters: dict[tuple[str | int, ...], int] = {}
    context: tuple[str | int, ...] = ()
    in_multiline = ""
    for number, raw in enumerate(text.split("\n"), start=1):
        stripped = raw.strip()
        if in_multiline:
            if stripped.count(in_multiline) % 2 == 1:
                in_multiline = ""
            continue
        if not stripped or stripped.startswith("#"):
            continue
        header = _TOML_HEADER.fullmatch(stripped.split("#")[0].strip()) if stripped.startswith("[") else None
        if header is not None:
            array = stripped.startswith("[[")
            parts = _toml_parts(header.group(1))
            resolved: tuple[str | int, ...] = ()
            for n, part in enumerate(parts):
                resolved = (*resolved, part)
                count = counters.get((*resolved, "#n"), 0)
                if array and n == len(parts) - 1:
                    counters[(*resolved, "#n")] = count + 1
                    resolved = (*resolved, count)
                elif count:
                    resolved = (*resolved, count - 1)  # a table inside the newest array element
            context = resolved
            lines.setdefault(context, number)
            continue
        key = _TOML_KEY.match(stripped)
        if key is not None:
            path = (*context, *_toml_parts(key.group(1)))
            lines.setdefault(path, number)
            rest = stripped[key.end() :]
            for quote in ('"""', "'''"):
                if rest.count(quote) % 2 == 1:
                    in_multiline = quote
    return lines


def toml_node(value: object, path: tuple[str | int, ...], lines: Mapping[tuple[str | int, ...], int]) -> Node:
    line = None
    probe = path
    while probe and line is None:
        line = lines.get(probe)
        probe = probe[:-1]
    if isinstance(value, dict):
        entries = [
            (str(k), lines.get((*path, k), line), toml_node(v, (*path, k), lines)) for k, v in value.items()
        ]
        return Node(line, entries=entries)
    if isinstance(value, list):
        return Node(line, items=[toml_node(v, (*path, i), lines) for i, v in enumerate(value)])
    if value is None or isinstance(value, str | int | float | bool):
        return Node(line, value=value)
    # dates and times: no workflow field takes one; report the type by name
    return Node(line, value=f"\0{type(value).__name__}")


# ---------------------------------------------------------------------------------------------
# Located values → WorkflowSpec


@dataclass
class Converter:
    source: str
    problems: list[tuple[int | None, str, str]] = field(default_factory=list)  # (line, path, message)
    locations: dict[str, str] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # paths whose value could not be used
    spelled: dict[tuple[str, str], str] = field(default_factory=dict)  # (at, key) -> alias written
    aliases: Mapping[str, str] = field(default_factory=lambda: ACCEPTED_ALIASES)  # accepted spellings

    def where(self, line: int | None) -> str:
        return f"{self.source}:{line}" if line else self.source

    def add(self, line: int | None, path: str, message: str) -> None:
        self.problems.append((line, path, message))
        if path:
            self.failed.append(path)

    def mark(self, path: str, line: int | None) -> None:
        if line:
            self.locations[path] = self.where(line)

    def keys(
        self, node: Node, allowed: tuple[str, ...], at: str, what: str
    ) -> dict[str, tuple[int | None, Node]]:
        out: dict[str, tuple[int | None, Node]] = {}
        spelled: dict[str, str] = {}
        for key, line, value in node.entries or []:
            canonical = self.aliases.get(key, key)
            if canonical in allowed:
                if canonical in out:
                    self.add(
                        line,
                        "",
                        f'{at + ": " if at else ""}"{key}" and "{spelled[canonical]}" are the same key; '
                        "give one of them",
                    )
                    continue
                out[canonical] = (line, value)
                spelled[canonical] = key
                self.spelled[(at, canonical)] = key
                continue
            hint = _ALIASES.get(key)
            if hint not in allowed:
                close = difflib.get_close_matches(key, allowed, n=1)
                hint = close[0] if close else None
            suffix = f' (did you mean "{hint}"?)' if hint else ""
            self.add(line, "", f'{at + ": " if at else ""}unknown {what} key "{key}"{suffix}')
            if hint in ("command", "handler") and at:
                self.failed.append(f"{at}.{hint}")  # the task has one, misspelt
        return out

    def string(self, node: Node, path: str, label: str) -> str | None:
        if isinstance(node.value, str) and node.kind == "string" and not node.value.startswith("\0"):
            return node.value
        self.add(node.line, path, f"{label}: must be a string, got {describe(node)}")
        return None

    def integer(self, node: Node, path: str, label: str, high: int = _UINT32) -> int | None:
        value = node.value
        if node.kind != "integer" or not isinstance(value, int):
            self.add(node.line, path, f"{label}: must be an integer, got {describe(node)}")
            return None
        if not 0 <= value <= high:
            self.add(node.line, path, f"{label}: {value} out of range (0-{high})")
            return None
        return value

    def choice(self, node: Node, path: str, label: str, options: Mapping[str, int]) -> int | None:
        text = self.string(node, path, label)
        if text is None:
            return None
        if text in options:
            return options[text]
        close = difflib.get_close_matches(text, list(options), n=1)
        hint = f' (did you mean "{close[0]}"?)' if close else ""
        self.add(node.line, path, f'{label}: "{text}" is not one of {", ".join(options)}{hint}')
        return None

    def names(self, node: Node, path: str, label: str) -> list[str] | None:
        """A list of names (a single string is a list of one)."""
        items = node.items if node.kind == "list" else [node] if node.kind == "string" else None
        if items is None:
            self.add(node.line, path, f"{label}: must be a list of calendar names, got {describe(node)}")
            return None
        out = []
        for k, item in enumerate(items):
            text = self.string(item, f"{path}[{k}]", f"{label}[{k}]")
            if text is not None:
                out.append(text)
        return out

    def number(self, node: Node, path: str, label: str) -> float | None:
        if node.kind in ("integer", "float") and isinstance(node.value, int | float):
            return float(node.value)
        self.add(node.line, path, f"{label}: must be a number, got {describe(node)}")
        return None

    def mapping(self, node: Node, path: str, label: str) -> bool:
        if node.kind == "mapping":
            return True
        self.add(node.line, path, f"{label}: must be a mapping, got {describe(node)}")
        return False

    def params(self, node: Node, path: str, label: str) -> str | None:
        if not self.mapping(node, path, label):
            return None
        value = node.plain()
        if _has_date(value):
            self.add(node.line, path, f"{label}: dates and times are not supported in params; use strings")
            return None
        try:
            return json.dumps(value, ensure_ascii=False, separators=(",", ":"), allow_nan=False)
        except ValueError:
            self.add(node.line, path, f"{label}: NaN and infinity cannot be params (not JSON)")
            return None


def _has_date(value: object) -> bool:
    if isinstance(value, dict):
        return any(_has_date(v) for v in value.values())
    if isinstance(value, list):
        return any(_has_date(v) for v in value)
    return isinstance(value, str) and value.startswith("\0")


def describe(node: Node) -> str:
    if node.kind in ("mapping", "list"):
        return f"a {node.kind}"
    if isinstance(node.value, str) and node.value.startswith("\0"):
        return f"a TOML {node.value[1:]}"
    if node.value is None:
        return "nothing (null)"
    hint = " (quote it to make it a string)" if node.kind in ("integer", "float", "boolean") else ""
    return f"{node.kind} {json.dumps(node.value)}{hint}"


def _timeout_ms(conv: Converter, node: Node, path: str, label: str) -> int | None:
    """A task timeout: seconds as a number (``90``, ``1.5``) or a duration string (``"90s"``, ``"2h"``)."""
    if node.kind == "integer" and isinstance(node.value, int):
        seconds = conv.integer(node, path, label, high=2**53 // 1000)
        return None if seconds is None else seconds * 1000
    if node.kind == "float" and isinstance(node.value, float) and node.value >= 0:
        text = repr(node.value)
    elif node.kind == "string" and isinstance(node.value, str) and not node.value.startswith("\0"):
        text = node.value
    else:
        conv.add(
            node.line,
            path,
            f'{label}: must be seconds (a number) or a duration like "90s", "5m", "2h", got {describe(node)}',
        )
        return None
    try:
        return parse_duration_ms(text, label, bare_unit="s")
    except InvalidSpec as bad:
        conv.add(node.line, path, f"{label}: {bad.reason}")
        return None


def _convert(root: Node, conv: Converter) -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec()
    conv.locations[""] = conv.source
    if root.kind != "mapping":
        conv.add(root.line, "", f"a workflow file holds a mapping (name, tasks, ...), got {describe(root)}")
        return spec
    keys = conv.keys(root, WORKFLOW_KEYS, "", "workflow")

    def text_field(attr: str) -> Callable[[Node, str], None]:
        def put(node: Node, path: str) -> None:
            value = conv.string(node, path, path)
            if value is not None:
                setattr(spec, attr, value)

        return put

    def schedule(node: Node, path: str) -> None:
        value = conv.string(node, path, "schedule")
        if value is not None:
            spec.schedule.expr = value

    def timezone(node: Node, path: str) -> None:
        value = conv.string(node, path, "timezone")
        if value is not None:
            spec.schedule.timezone = value

    def enum_field(attr: str, label: str, options: Mapping[str, int]) -> Callable[[Node, str], None]:
        def put(node: Node, path: str) -> None:
            value = conv.choice(node, path, label, options)
            if value is not None:
                setattr(spec, attr, value)

        return put

    def int_field(attr: str, label: str) -> Callable[[Node, str], None]:
        def put(node: Node, path: str) -> None:
            value = conv.integer(node, path, label)
            if value is not None:
                setattr(spec, attr, value)

        return put

    def backfill(node: Node, path: str) -> None:
        if isinstance(node.value, str) and re.fullmatch(r"\d{1,3}\s*%", node.value.strip()):
            spec.backfill_share_pct = int(node.value.strip().rstrip("%"))
            return
        value = conv.integer(node, path, "backfill_share")
        if value is not None:
            spec.backfill_share_pct = value

    def params(node: Node, path: str) -> None:
        value = conv.params(node, path, "params")
        if value is not None:
            spec.params_json = value

    def exclude(node: Node, path: str) -> None:
        names = conv.names(node, path, "exclude")
        if names is not None:
            spec.exclude.extend(names)

    setters: dict[str, tuple[str, Callable[[Node, str], None]]] = {
        "name": ("name", text_field("name")),
        "description": ("description", text_field("description")),
        "owner": ("owner", text_field("owner")),
        "schedule": ("schedule.expr", schedule),
        "timezone": ("schedule.timezone", timezone),
        "misfire": ("misfire", enum_field("misfire", "misfire", _MISFIRE)),
        "overlap": ("overlap", enum_field("overlap", "overlap", _OVERLAP)),
        "max_parallel": ("max_parallel", int_field("max_parallel", "max_parallel")),
        "max_parallel_per_run": (
            "max_parallel_per_run",
            int_field("max_parallel_per_run", "max_parallel_per_run"),
        ),
        "backfill_share": ("backfill_share_pct", backfill),
        "params": ("params_json", params),
        "exclude": ("exclude", exclude),
    }
    for key in WORKFLOW_KEYS:
        if key not in keys or key == "tasks":
            continue
        line, node = keys[key]
        path, put = setters[key]
        conv.mark(path, line)
        if node.value is None and node.kind == "null":
            conv.add(line, path, f"{key}: no value given")
            continue
        put(node, path)
    if "exclude" in keys and "schedule" not in keys:
        conv.add(
            keys["exclude"][0], "", "exclude: calendars exclude days from a schedule; this workflow has none"
        )
    if "name" not in keys:
        conv.add(root.line, "name", "name: required (the workflow's name)")
    if "tasks" not in keys:
        conv.add(root.line, "tasks", "tasks: required (a list of tasks)")
    else:
        line, node = keys["tasks"]
        conv.mark("tasks", line)
        if node.kind != "list":
            conv.add(line, "tasks", f"tasks: must be a list of tasks, got {describe(node)}")
        else:
            for i, item in enumerate(node.items or []):
                _convert_task(item, i, spec.tasks.add(), conv)
    return spec


def _convert_task(node: Node, i: int, task: pb.WorkflowTaskSpec, conv: Converter) -> None:
    at = f"tasks[{i}]"
    conv.mark(at, node.line)
    if node.kind != "mapping":
        conv.add(node.line, at, f"{at}: a task must be a mapping (name, command, ...), got {describe(node)}")
        return
    keys = conv.keys(node, TASK_KEYS, at, "task")
    task.priority = DEFAULT_PRIORITY  # as for plain tasks (the protobuf's 0 is the lowest priority)
    name_node = keys.get("name", (None, Node(None)))[1]
    suffix = f" ({json.dumps(name_node.value)})" if isinstance(name_node.value, str) else ""
    if "name" not in keys:
        conv.add(node.line, f"{at}.name", f"{at}: name required")
    for key in TASK_KEYS:
        if key not in keys:
            continue
        line, value = keys[key]
        target = {
            "retries": "max_retries",
            "timeout": "timeout_ms",
            "params": "params_json",
        }.get(key, key)
        path = f"{at}.{target}"
        conv.mark(path, line)
        label = f"{at}.{conv.spelled.get((at, key), key)}{suffix}"
        if value.kind == "null":
            conv.add(line, path, f"{label}: no value given")
            continue
        if key in ("name", "command", "handler", "description"):
            text = conv.string(value, path, label)
            if text is not None:
                setattr(task, key, text)
        elif key in ("retries", "shards", "priority"):
            number = conv.integer(value, path, label)
            if number is not None:
                setattr(task, target, number)
        elif key == "timeout":
            ms = _timeout_ms(conv, value, path, label)
            if ms is not None:
                task.timeout_ms = ms
        elif key == "runner":
            runner = conv.string(value, path, label)
            if runner is not None:
                if runner in _RUNNER:
                    task.runner = _RUNNER[runner]
                else:
                    conv.add(line, path, f'{label}: "{runner}" is not one of shell, python')
        elif key == "resource":
            _convert_resource(value, path, f"{at}.resource{suffix}", task, conv)
        elif key == "trigger_rule":
            rule = conv.choice(value, path, label, _RULE)
            if rule is not None:
                task.trigger_rule = rule  # type: ignore[assignment]
        elif key == "params":
            params = conv.params(value, path, label)
            if params is not None:
                task.params_json = params
        elif key == "env":
            if conv.mapping(value, path, label):
                for name, name_line, env_value in value.entries or []:
                    env_path = f"{path}.{name}"
                    conv.mark(env_path, name_line)
                    text = conv.string(env_value, env_path, f"{at}.env.{name}{suffix}")
                    if text is not None:
                        task.env[name] = text
        elif key == "selector":
            if conv.mapping(value, path, label):
                for name, name_line, label_value in value.entries or []:
                    sel_path = f"{path}.{name}"
                    conv.mark(sel_path, name_line)
                    text = conv.string(label_value, sel_path, f"{at}.selector.{name}{suffix}")
                    if text is not None:
                        task.selector[name] = text
        elif key == "locks":
            _convert_locks(value, path, suffix, task, conv)
        else:  # depends_on
            _convert_depends_on(value, path, suffix, task, conv)


def _convert_locks(node: Node, path: str, suffix: str, task: pb.WorkflowTaskSpec, conv: Converter) -> None:
    """``locks``: a list (or one item) of ``NAME``, ``NAME:shared`` or ``{name, mode}``."""
    items = node.items or [] if node.kind == "list" else [node]
    for j, item in enumerate(items):
        at = f"{path}[{j}]"
        item_label = f"{at}{suffix}"
        conv.mark(at, item.line)
        if item.kind == "mapping":
            keys = conv.keys(item, LOCK_KEYS, at, "lock")
            if "name" not in keys:
                conv.add(item.line, at, f"{item_label}: name required")
                continue
            name = conv.string(keys["name"][1], f"{at}.name", f"{at}.name{suffix}")
            mode = "exclusive"
            if "mode" in keys:
                got = conv.string(keys["mode"][1], f"{at}.mode", f"{at}.mode{suffix}")
                if got is None:
                    continue
                if got.lower() not in LOCK_MODES:
                    conv.add(
                        keys["mode"][0],
                        f"{at}.mode",
                        f"{at}.mode{suffix}: {got!r} is not one of exclusive, shared",
                    )
                    continue
                mode = got.lower()
            if name is not None:
                task.locks.add(name=name, shared=LOCK_MODES[mode] == LockMode.SHARED)
        else:
            text = conv.string(item, at, item_label)
            if text is not None:
                try:
                    lock = parse_lock(text, at)
                except InvalidSpec as exc:
                    conv.add(item.line, at, f"{item_label}: {exc.reason}")
                    continue
                task.locks.add(name=lock.name, shared=lock.mode == LockMode.SHARED)


def _convert_resource(node: Node, path: str, label: str, task: pb.WorkflowTaskSpec, conv: Converter) -> None:
    """``resource: {cpu: 1.0, memory: 1024}``: a CPU share and MiB of memory (both > 0 if given)."""
    if not conv.mapping(node, path, label):
        return
    keys = conv.keys(node, RESOURCE_KEYS, label, "resource")
    if "cpu" in keys:
        line, value = keys["cpu"]
        conv.mark(f"{path}.cpu", line)
        cpu = conv.number(value, f"{path}.cpu", f"{label}.cpu")
        if cpu is not None:
            if cpu <= 0:
                conv.add(line, f"{path}.cpu", f"{label}.cpu: {value.value} must be > 0")
            else:
                task.resource_cpu = cpu
    if "memory" in keys:
        line, value = keys["memory"]
        conv.mark(f"{path}.memory", line)
        memory = conv.integer(value, f"{path}.memory", f"{label}.memory (MiB)", high=2**53)
        if memory is not None:
            if memory <= 0:
                conv.add(line, f"{path}.memory", f"{label}.memory: {memory} must be > 0 (MiB)")
            else:
                task.resource_memory_mb = memory


def _convert_depends_on(
    node: Node, path: str, suffix: str, task: pb.WorkflowTaskSpec, conv: Converter
) -> None:
    label = f"{path}{suffix}"
    if node.kind == "mapping":
        conv.add(
            node.line,
            path,
            f"{label}: must be a list; write each dependency as a name or as {{task: NAME, condition: "
            "success|failure|done}, e.g. [extract, {task: validate, condition: failure}]",
        )
        return
    items = node.items if node.kind == "list" else [node] if node.kind == "string" else None
    if items is None:
        conv.add(node.line, path, f"{label}: must be a list of task names, got {describe(node)}")
        return
    for k, item in enumerate(items):
        dep_path = f"{path}[{k}]"
        conv.mark(dep_path, item.line)
        dep = task.depends_on.add()
        if item.kind == "string" and isinstance(item.value, str):
            dep.task = item.value
            continue
        if item.kind != "mapping":
            conv.add(
                item.line,
                dep_path,
                f"{dep_path}{suffix}: a task name or {{task, condition}}, got {describe(item)}",
            )
            continue
        keys = conv.keys(item, DEPENDENCY_KEYS, f"{dep_path}{suffix}", "dependency")
        if "task" not in keys:
            conv.add(item.line, dep_path, f"{dep_path}{suffix}: task required")
        else:
            name = conv.string(keys["task"][1], dep_path, f"{dep_path}.task{suffix}")
            if name is not None:
                dep.task = name
        if "condition" in keys:
            cond = conv.choice(keys["condition"][1], dep_path, f"{dep_path}.condition{suffix}", _CONDITION)
            if cond is not None:
                dep.condition = cond  # type: ignore[assignment]


# ---------------------------------------------------------------------------------------------
# Entry points


def _shadowed(path: str, failed: str) -> bool:
    """Whether a validation problem at ``path`` only echoes a file problem at ``failed``.

    A value that could not be read leaves its field empty, so validation would complain about the
    field (or within it) again; a command or handler that could not be read would also make the
    task look as if it had neither.
    """
    if not path or not failed:
        return False
    if path == failed or path.startswith((failed + ".", failed + "[")):
        return True
    return failed.endswith((".command", ".handler")) and path == failed.rsplit(".", 1)[0]


def parse_workflow_text(text: str, fmt: Literal["yaml", "toml"], source: str) -> pb.WorkflowSpec:
    """Parse and validate a workflow file's text; ``source`` names it in messages (``etl.yaml``).

    Raises :class:`~raftsched.errors.InvalidWorkflow` listing every problem (syntax, unknown keys,
    wrong types, and everything :func:`~raftsched.workflow.validate.validate_workflow` finds), each
    with ``source:line``. A syntax error stops parsing, so it is reported alone.
    """
    if fmt == "yaml":
        try:
            root = read_yaml(text)
        except SyntaxProblem as bad:
            raise InvalidWorkflow([(f"{source}:{bad.line}" if bad.line else source, bad.message)]) from None
    elif fmt == "toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            found = re.search(r"\(at line (\d+)", str(exc))
            where = f"{source}:{found.group(1)}" if found else source
            raise InvalidWorkflow([(where, f"TOML syntax: {exc}")]) from None
        root = toml_node(data, (), scan_toml_lines(text))
        root.line = 1
    else:
        raise ValueError(f"unknown workflow file format {fmt!r} (yaml or toml)")
    if root.kind != "mapping":
        raise InvalidWorkflow(
            [
                (
                    f"{source}:{root.line or 1}",
                    f"a workflow file holds a mapping (name, tasks, ...), got {describe(root)}",
                )
            ]
        )
    conv = Converter(source)
    spec = _convert(root, conv)
    checked = [
        (path, message)
        for path, message in collect_problems(spec)
        if not any(_shadowed(path, bad) for bad in conv.failed)
    ]
    names = [task.name for task in spec.tasks]
    # One list in file order: each problem at its line (workflow-wide ones, without a line, first).
    merged: list[tuple[int, int, tuple[str, str]]] = []
    for order, (line, _path, message) in enumerate(conv.problems):
        merged.append((line or 0, order, (conv.where(line), message)))
    for order, (path, message) in enumerate(checked, start=len(merged)):
        where, _ = locate([(path, message)], names, conv.locations)[0]
        where = where.replace(path, _file_path(path), 1) if path else where
        merged.append((_line_of(where, conv.source), order, (where, message)))
    if merged:
        merged.sort(key=lambda item: (item[0], item[1]))
        raise InvalidWorkflow([shown for _, _, shown in merged], spec.name)
    return spec


_FILE_NAMES = (
    (re.compile(r"^schedule\.expr"), "schedule"),
    (re.compile(r"^schedule\.timezone"), "timezone"),
    (re.compile(r"^backfill_share_pct"), "backfill_share"),
    (re.compile(r"^params_json"), "params"),
    (re.compile(r"\.max_retries$"), ".retries"),
    (re.compile(r"\.timeout_ms$"), ".timeout"),
    (re.compile(r"\.params_json$"), ".params"),
)


def _file_path(path: str) -> str:
    """A spec field path spelled with the file's key names (``tasks[1].max_retries`` → ``.retries``)."""
    for pattern, name in _FILE_NAMES:
        path = pattern.sub(name, path)
    return path


def _line_of(location: str, source: str) -> int:
    if location.startswith(source + ":"):
        digits = re.match(r"\d+", location[len(source) + 1 :])
        if digits:
            return int(digits.group())
    return 0


def load_workflow_file(path: str | Path) -> pb.WorkflowSpec:
    """Read a workflow file (``.yaml``/``.yml`` or ``.toml``), parse and validate it.

    Raises :class:`~raftsched.errors.InvalidWorkflow` (every problem, with ``file:line``), also for
    an unreadable file or an unknown extension.
    """
    source = str(path)
    suffix = Path(path).suffix.lower()
    fmt: Literal["yaml", "toml"]
    if suffix in (".yaml", ".yml"):
        fmt = "yaml"
    elif suffix == ".toml":
        fmt = "toml"
    else:
        raise InvalidWorkflow(
            [(source, f"unknown workflow file type {suffix or '(none)'!r}: use .yaml, .yml or .toml")]
        )
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidWorkflow([(source, f"not UTF-8 text ({exc.reason} at byte {exc.start})")]) from None
    except OSError as exc:
        raise InvalidWorkflow([(source, f"cannot read the file: {exc.strerror or exc}")]) from None
    return parse_workflow_text(text, fmt, source)
