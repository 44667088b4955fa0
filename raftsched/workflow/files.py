"""Workflow files (YAML or TOML) → :class:`WorkflowSpec`, every problem reported with ``file:line``.

The only module of :mod:`raftsched.workflow` that does IO (it reads the file). The result is
checked with :func:`raftsched.workflow.validate.validate_workflow`'s rules, so a file that loads
is a spec the cluster accepts (the leader validates again).

File format (the same keys in YAML and TOML)
============================================

The keys are declared in :mod:`raftsched.taskfields`: the workflow's own in
:data:`~raftsched.taskfields.WORKFLOW_FIELDS` (``name``, ``schedule``, ``timezone``, ``misfire``,
``overlap``, ``max_parallel``, ``max_parallel_per_run``, ``backfill_share``, ``params``,
``exclude``, ``tasks``), a task's in :data:`~raftsched.taskfields.TASK_FIELDS` (those with
``workflow_task``: ``name``, ``command`` or ``handler``, ``depends_on``, ``trigger_rule``,
``retries``, ``timeout``, ``shards``, ``priority``, ``locks``, ``params``, ``env``,
``description``, ``runner``, ``resource``, ``selector``), each with its kind, default and help.
``depends_on`` items are a task name (condition ``success``) or ``{task: NAME, condition:
success | failure | done}``; ``locks`` items a name (exclusive), ``NAME:shared`` or ``{name: NAME,
mode: exclusive | shared}``; ``resource`` is ``{cpu: 1.0, memory: 1024}`` (MiB), each > 0;
``timeout`` seconds (a number) or a duration (``"500ms"``, ``"90s"``, ``"1.5h"``, ``"1d"``).

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

import datetime as _dt
import difflib
import json
import re
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

from raftsched.errors import InvalidSpec, InvalidWorkflow
from raftsched.model import LOCK_MODES, LockMode, parse_lock
from raftsched.taskfields import (
    TASK_FIELDS,
    WORKFLOW_FIELDS,
    Field,
    Kind,
    accepted_aliases,
    file_keys,
    hints,
)
from raftsched.timing.durations import parse_duration_ms
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.located import Node, SyntaxProblem
from raftsched.workflow.validate import collect_problems, locate
from raftsched.workflow.yaml_reader import read_yaml

__all__ = ["load_workflow_file", "parse_workflow_text"]

WORKFLOW_KEYS = file_keys(WORKFLOW_FIELDS)
TASK_KEYS = file_keys(f for f in TASK_FIELDS if f.workflow_task)
_TASK_FIELDS = {f.file_key: f for f in TASK_FIELDS if f.workflow_task}
LOCK_KEYS = ("name", "mode")
DEFAULT_PRIORITY = 5
RESOURCE_KEYS = tuple(f.key.partition(".")[2] for f in TASK_FIELDS if f.file_key == "resource")
DEPENDENCY_KEYS = ("task", "condition", "workflow", "logical", "timeout", "on_timeout", "warn_after")
# Names people bring from other schedulers (or from the protobuf) → our key.
_ALIASES = hints((*WORKFLOW_FIELDS, *TASK_FIELDS))
# The seeds' workflow format (adwawd's YAML) spells some keys its own way; files written for it
# apply unchanged. These are accepted as documented aliases, not only suggested.
ACCEPTED_ALIASES = accepted_aliases((*WORKFLOW_FIELDS, *(f for f in TASK_FIELDS if f.workflow_task)))
_CONDITION = {"success": pb.ON_SUCCESS, "failure": pb.ON_FAILURE, "done": pb.ON_DONE}
_ON_TIMEOUT = {"fail": pb.UPSTREAM_TIMEOUT_FAIL, "skip": pb.UPSTREAM_TIMEOUT_SKIP}
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


def read_duration_ms(conv: Converter, node: Node, path: str, label: str) -> int | None:
    """A duration: seconds as a number (``90``, ``1.5``) or a duration string (``"90s"``, ``"2h"``)."""
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


def read_time_ms(conv: Converter, node: Node, path: str, label: str) -> int | None:
    """A time: ISO 8601 with a zone (``2027-01-01T00:00:00Z``), as epoch ms."""
    text = conv.string(node, path, label)
    if text is None:
        return None
    try:
        when = _dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        conv.add(node.line, path, f"{label}: {text!r} is not an ISO 8601 time (2027-01-01T00:00:00Z)")
        return None
    if when.tzinfo is None:
        conv.add(node.line, path, f"{label}: {text!r} has no zone; add Z or an offset like +02:00")
        return None
    return int(when.timestamp() * 1000)


def read_value(conv: Converter, field: Field, node: Node, path: str, label: str) -> object | None:
    """The value of ``field`` (a kind with one value) as the file gives it: a string, an int, a
    float, ms (durations, times), a choice's name, params as JSON text, a list of names; or None
    when it cannot be used (the problem is added, naming ``label``)."""
    kind = field.kind
    if kind == Kind.TEXT:
        return conv.string(node, path, label)
    if kind == Kind.INT:
        return conv.integer(node, path, label)
    if kind == Kind.DURATION:
        return read_duration_ms(conv, node, path, label)
    if kind == Kind.TIME:
        return read_time_ms(conv, node, path, label)
    if kind == Kind.PERCENT:
        if isinstance(node.value, str) and re.fullmatch(r"\d{1,3}\s*%", node.value.strip()):
            return int(node.value.strip().rstrip("%"))
        return conv.integer(node, path, label)
    if kind == Kind.CHOICE:
        index = conv.choice(node, path, label, {name: i for i, name in enumerate(field.choices)})
        return None if index is None else field.choices[index]
    if kind == Kind.PARAMS:
        return conv.params(node, path, label)
    if kind == Kind.NAMES:
        return conv.names(node, path, label)
    if kind == Kind.DURATIONS:
        return read_durations_ms(conv, node, path, label)
    if kind == Kind.BOOL:
        if node.kind == "boolean" or isinstance(node.value, bool):
            return bool(node.value)
        conv.add(node.line, path, f"{label}: must be true or false, got {describe(node)}")
        return None
    if kind == Kind.BACKOFF:
        return read_backoff(conv, node, path, label)
    raise AssertionError(f"{field.key}: a {kind} value has its own reader")


def read_durations_ms(conv: Converter, node: Node, path: str, label: str) -> tuple[int, ...] | None:
    """A list of durations (``[2m, 5m, 15m]``; one duration is a list of one), as ms."""
    items = node.items if node.kind == "list" else [node]
    head, sep, name = label.partition(" (")  # 'tasks[0].retry_delays ("a")': the index goes first
    out = []
    for k, item in enumerate(items or []):
        ms = read_duration_ms(conv, item, f"{path}[{k}]", f"{head}[{k}]{sep}{name}")
        if ms is None:
            return None
        out.append(ms)
    return tuple(out)


BACKOFF_KEYS = ("base", "cap", "jitter")


def read_jitter_pct(text: object) -> int | None:
    """A jitter share: ``"20%"``, or a fraction 0..1 (``0.2``), as a whole percent (None: neither)."""
    if isinstance(text, str):
        got = re.fullmatch(r"\s*(\d{1,3})\s*%\s*", text)
        return int(got.group(1)) if got else None
    if isinstance(text, int | float) and not isinstance(text, bool) and 0 <= text <= 1:
        return round(text * 100)
    return None


def read_backoff(conv: Converter, node: Node, path: str, label: str) -> tuple[int, int, int] | None:
    """``{base: 10s, cap: 15m, jitter: 20%}`` as ``(base_ms, cap_ms, jitter_pct)`` (base required)."""
    if not conv.mapping(node, path, label):
        return None
    keys = conv.keys(node, BACKOFF_KEYS, label, "retry_backoff")
    if "base" not in keys:
        conv.add(node.line, f"{path}.base", f"{label}: base required (the first retry's delay, e.g. 10s)")
        return None
    got = [0, 0, 0]
    for i, key in enumerate(BACKOFF_KEYS):
        if key not in keys:
            continue
        line, value = keys[key]
        conv.mark(f"{path}.{key}", line)
        if key == "jitter":
            pct = read_jitter_pct(value.value)
            if pct is None:
                conv.add(
                    line,
                    f"{path}.jitter",
                    f'{label}.jitter: must be a percent ("20%") or a fraction 0..1, got {describe(value)}',
                )
                return None
            got[i] = pct
            continue
        ms = read_duration_ms(conv, value, f"{path}.{key}", f"{label}.{key}")
        if ms is None:
            return None
        got[i] = ms
    return got[0], got[1], got[2]


def _proto_choice(field: Field, name: object) -> int | str:
    """A choice as its protobuf value: an enum value, or (runner) the name, "" for the default."""
    if field.enum_prefix:
        value: int = getattr(pb, field.enum_prefix + str(name).upper())
        return value
    return "" if name == field.choices[0] else str(name)


def _set(message: object, dotted: str, value: object) -> None:
    """``message.a.b = value`` for ``dotted`` ``a.b``."""
    *parents, attr = dotted.split(".")
    for name in parents:
        message = getattr(message, name)
    setattr(message, attr, value)


def _convert(root: Node, conv: Converter) -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec()
    conv.locations[""] = conv.source
    if root.kind != "mapping":
        conv.add(root.line, "", f"a workflow file holds a mapping (name, tasks, ...), got {describe(root)}")
        return spec
    keys = conv.keys(root, WORKFLOW_KEYS, "", "workflow")
    if "sla" in keys:
        line, node = keys["sla"]
        conv.mark("sla", line)
        for attr, ms in read_sla(conv, node, "sla", "sla").items():
            setattr(spec, attr, ms)
    for f in WORKFLOW_FIELDS:
        if f.key not in keys or f.kind == Kind.TASKS:
            continue
        line, node = keys[f.key]
        path, label = f.proto, f.key
        conv.mark(path, line)
        if node.value is None and node.kind == "null":
            conv.add(line, path, f"{label}: no value given")
            continue
        value = read_value(conv, f, node, path, label)
        if value is None:
            continue
        if f.kind == Kind.NAMES:
            getattr(spec, f.proto).extend(value)
        else:
            _set(spec, path, _proto_choice(f, value) if f.kind == Kind.CHOICE else value)
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
        f = _TASK_FIELDS[key]
        target = f.proto if f.key == key else key
        path = f"{at}.{target}"
        conv.mark(path, line)
        label = f"{at}.{conv.spelled.get((at, key), key)}{suffix}"
        if value.kind == "null":
            conv.add(line, path, f"{label}: no value given")
            continue
        if key == "resource":
            cpu, memory = read_resource(conv, value, path, f"{at}.resource{suffix}")
            if cpu is not None:
                task.resource_cpu = cpu
            if memory is not None:
                task.resource_memory_mb = memory
        elif f.kind == Kind.LABELS:
            labels = read_labels(conv, value, path, f"{at}.{key}", suffix)
            if labels is not None:
                getattr(task, target).update(labels)
        elif f.kind == Kind.LOCKS:
            _convert_locks(value, path, suffix, task, conv)
        elif f.kind == Kind.DEPENDS:
            _convert_depends_on(value, path, suffix, task, conv)
        elif f.kind == Kind.NAMES:
            names = read_value(conv, f, value, path, label)
            if names is not None:
                getattr(task, target).extend(names)
        elif f.kind in (Kind.DURATIONS, Kind.BACKOFF, Kind.BOOL):
            got = read_value(conv, f, value, path, label)
            if isinstance(got, tuple) and f.kind == Kind.DURATIONS:
                task.retry_delays_ms.extend(got)
            elif isinstance(got, tuple):
                task.retry_backoff.base_ms, task.retry_backoff.cap_ms, task.retry_backoff.jitter_pct = got
            elif isinstance(got, bool):
                task.retry_same_executor = not got  # stored inverted: false (unset) is the default
        else:
            got = read_value(conv, f, value, path, label)
            if got is not None:
                setattr(task, target, _proto_choice(f, got) if f.kind == Kind.CHOICE else got)


def read_labels(conv: Converter, node: Node, path: str, at: str, suffix: str) -> dict[str, str] | None:
    """A mapping of string to string (``selector``, ``env``): each bad value reported at its key."""
    if not conv.mapping(node, path, f"{at}{suffix}"):
        return None
    out = {}
    for name, name_line, item in node.entries or []:
        item_path = f"{path}.{name}"
        conv.mark(item_path, name_line)
        text = conv.string(item, item_path, f"{at}.{name}{suffix}")
        if text is not None:
            out[name] = text
    return out


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


SLA_KEYS = tuple(f.key.partition(".")[2] for f in TASK_FIELDS if f.file_key == "sla")


def read_sla(conv: Converter, node: Node, path: str, label: str) -> dict[str, int]:
    """``sla: {start_within: 5m, finish_within: 30m}``: the TaskSpec fields it sets (ms)."""
    out: dict[str, int] = {}
    if not conv.mapping(node, path, label):
        return out
    keys = conv.keys(node, SLA_KEYS, label, "sla")
    for key in SLA_KEYS:
        if key in keys:
            line, value = keys[key]
            conv.mark(f"{path}.{key}", line)
            ms = read_duration_ms(conv, value, f"{path}.{key}", f"{label}.{key}")
            if ms is not None:
                out[f"sla_{key}_ms"] = ms
    return out


def read_resource(conv: Converter, node: Node, path: str, label: str) -> tuple[float | None, int | None]:
    """``resource: {cpu: 1.0, memory: 1024}``: a CPU share and MiB of memory (both > 0 if given)."""
    cpu = memory = None
    if not conv.mapping(node, path, label):
        return cpu, memory
    keys = conv.keys(node, RESOURCE_KEYS, label, "resource")
    if "cpu" in keys:
        line, value = keys["cpu"]
        conv.mark(f"{path}.cpu", line)
        cpu = conv.number(value, f"{path}.cpu", f"{label}.cpu")
        if cpu is not None and cpu <= 0:
            conv.add(line, f"{path}.cpu", f"{label}.cpu: {value.value} must be > 0")
            cpu = None
    if "memory" in keys:
        line, value = keys["memory"]
        conv.mark(f"{path}.memory", line)
        memory = conv.integer(value, f"{path}.memory", f"{label}.memory (MiB)", high=2**53)
        if memory is not None and memory <= 0:
            conv.add(line, f"{path}.memory", f"{label}.memory: {memory} must be > 0 (MiB)")
            memory = None
    return cpu, memory


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
        if "workflow" in keys:
            got = conv.string(keys["workflow"][1], f"{dep_path}.workflow", f"{dep_path}.workflow{suffix}")
            if got is not None:
                dep.workflow = got
                conv.mark(f"{dep_path}.workflow", keys["workflow"][0])
        if "logical" in keys:
            line, value = keys["logical"]
            conv.mark(f"{dep_path}.logical", line)
            text = conv.string(value, f"{dep_path}.logical", f"{dep_path}.logical{suffix}")
            if text is not None:
                try:
                    dep.logical_offset_ms = parse_logical_offset(text)
                except ValueError as exc:
                    conv.add(line, f"{dep_path}.logical", f"{dep_path}.logical{suffix}: {exc}")
        for key, attr in (("timeout", "timeout_ms"), ("warn_after", "warn_after_ms")):
            if key in keys:
                conv.mark(f"{dep_path}.{key}", keys[key][0])
                ms = read_duration_ms(conv, keys[key][1], f"{dep_path}.{key}", f"{dep_path}.{key}{suffix}")
                if ms is not None:
                    setattr(dep, attr, ms)
        if "on_timeout" in keys:
            conv.mark(f"{dep_path}.on_timeout", keys["on_timeout"][0])
            action = conv.choice(
                keys["on_timeout"][1], f"{dep_path}.on_timeout", f"{dep_path}.on_timeout{suffix}", _ON_TIMEOUT
            )
            if action is not None:
                dep.on_timeout = action  # type: ignore[assignment]
        if "task" not in keys:
            if "workflow" not in keys:
                conv.add(item.line, dep_path, f"{dep_path}{suffix}: task or workflow required")
        else:
            name = conv.string(keys["task"][1], dep_path, f"{dep_path}.task{suffix}")
            if name is not None:
                dep.task = name
        if "condition" in keys:
            cond = conv.choice(keys["condition"][1], dep_path, f"{dep_path}.condition{suffix}", _CONDITION)
            if cond is not None:
                dep.condition = cond  # type: ignore[assignment]


def parse_logical_offset(text: str) -> int:
    """A cross-workflow dependency's ``logical``: ``same`` (0) or a signed duration (``-1d``,
    ``-1h``, ``+30m``) in ms: the upstream run's logical time is the downstream run's plus it."""
    raw = text.strip()
    if raw in ("same", "0", ""):
        return 0
    sign = -1 if raw.startswith("-") else 1
    body = raw[1:] if raw[:1] in "+-" else raw
    try:
        return sign * parse_duration_ms(body, "logical", bare_unit=None)
    except InvalidSpec:
        raise ValueError(f"{text!r} is not same or an offset such as -1d, -1h, +30m") from None


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


# A spec field path → the file's key: the workflow's own fields at the start of the path, a task's
# fields at its end (only one-to-one fields: ``resource.cpu`` is already spelled as in the file).
_FILE_NAMES = (
    *((re.compile("^" + re.escape(f.proto)), f.key) for f in WORKFLOW_FIELDS if f.proto != f.key),
    *(
        (re.compile(re.escape("." + f.proto) + "$"), "." + f.key)
        for f in TASK_FIELDS
        if f.workflow_task and f.proto != f.key and f.key == f.file_key
    ),
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
