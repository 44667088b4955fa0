"""Task files (YAML or TOML) → plain task specs, every problem reported with ``file:line``; and the
field-level diff ``raftsched apply`` prints.

A task file declares many ordinary tasks (not a workflow) so that they can live in git and go
through review; ``raftsched apply FILE...`` makes the cluster match it. The same readers as
workflow files (:mod:`raftsched.workflow.files`): the same YAML rules, the same TOML line scan,
unknown keys refused with a did-you-mean. Pure apart from reading the file.

File format
===========

File keys: ``namespace`` (the default namespace of its tasks, else ``default``), ``owner`` (the
default owner) and ``tasks`` (a list, required). The task keys, their aliases, kinds and defaults
are declared in :data:`raftsched.taskfields.TASK_FIELDS` (the fields with ``task_file``); the
docs' task field table is generated from it. One of ``cron`` (with ``timezone``), ``every``
(with ``start``) or ``at``; none means manual. Times are ISO 8601 with a zone, durations seconds
(a number) or a duration string (``"90s"``, ``"1h"``).

A task file says everything about its tasks: a key left out means its default, not "keep what
the cluster has" (so applying the same file twice changes nothing, and a deleted line is a
change). The one exception is an ``every`` without ``start``: its phase, fixed when the task was
created, is kept.
"""

from __future__ import annotations

import dataclasses
import datetime as _dt
import json
import re
import tomllib
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from raftsched.errors import InvalidSpec, InvalidWorkflow
from raftsched.model import (
    CronTrigger,
    IntervalTrigger,
    ManualTrigger,
    Misfire,
    OnceTrigger,
    Overlap,
    RetryBackoff,
    Runner,
    TaskSpec,
    Trigger,
    unchecked,
)
from raftsched.taskfields import TASK_FIELDS, Kind, accepted_aliases, error_keys, file_keys
from raftsched.timing.cron import CronSchedule
from raftsched.timing.durations import format_duration
from raftsched.workflow.files import (
    Converter,
    describe,
    read_labels,
    read_resource,
    read_sla,
    read_value,
    scan_toml_lines,
    toml_node,
)
from raftsched.workflow.located import Node, SyntaxProblem
from raftsched.workflow.yaml_reader import read_yaml

__all__ = [
    "FILE_KEYS",
    "TASK_KEYS",
    "FieldChange",
    "InvalidTaskFile",
    "TaskFile",
    "diff_specs",
    "load_task_file",
    "normalize_for",
    "parse_task_text",
]

FILE_KEYS = ("namespace", "owner", "tasks")
_FIELDS = tuple(f for f in TASK_FIELDS if f.task_file)
TASK_KEYS = file_keys(_FIELDS)
_BY_KEY = {f.file_key: f for f in _FIELDS}
_ALIASES = accepted_aliases(_FIELDS, task_file=True)
_TRIGGER_KEYS = ("cron", "every", "at")


class InvalidTaskFile(InvalidWorkflow):
    """A task file is invalid; nothing was applied. ``problems``: every ``(file:line, message)``."""

    def __init__(self, problems: list[tuple[str, str]], source: str = "") -> None:
        super().__init__(problems)
        count = len(self.problems)
        head = f"invalid task file {source}: {count} problem{'' if count == 1 else 's'}"
        lines = [f"{loc}: {msg}" if loc else msg for loc, msg in self.problems]
        InvalidSpec.__init__(self, "", "\n  ".join([head, *lines]))


@dataclass(frozen=True, slots=True)
class TaskFile:
    """What one file declares: its tasks (in file order, each with its ``file:line``) and the
    namespaces it governs (``--prune`` deletes tasks of these namespaces that no file lists)."""

    source: str
    tasks: tuple[tuple[TaskSpec, str], ...]
    namespaces: frozenset[str]


def _task(node: Node, i: int, defaults: dict[str, str], conv: Converter) -> tuple[TaskSpec, str] | None:
    at = f"tasks[{i}]"
    where = conv.where(node.line)
    if node.kind != "mapping":
        conv.add(
            node.line, at, f"{at}: a task must be a mapping (name, cron, command, ...), got {describe(node)}"
        )
        return None
    keys = conv.keys(node, TASK_KEYS, at, "task")
    name_node = keys.get("name", (None, Node(None)))[1]
    suffix = f" ({json.dumps(name_node.value)})" if isinstance(name_node.value, str) else ""
    fields: dict[str, Any] = {
        "owner": defaults.get("owner", ""),
        "namespace": defaults.get("namespace", "default"),
    }
    ok = True

    def label(key: str) -> str:
        return f"{at}.{conv.spelled.get((at, key), key)}{suffix}"

    if "name" not in keys:
        conv.add(node.line, f"{at}.name", f"{at}: name required")
        ok = False
    given = [k for k in _TRIGGER_KEYS if k in keys]
    if len(given) > 1:
        conv.add(
            keys[given[1]][0], at, f"{at}{suffix}: give one of cron, every, at (not {' and '.join(given)})"
        )
        ok = False
    schedule: dict[str, Any] = {}  # the trigger's keys (cron, timezone, every, start, at) given
    for key, (line, value) in keys.items():
        path = f"{at}.{key}"
        if value.kind == "null":
            conv.add(line, path, f"{label(key)}: no value given")
            ok = False
            continue
        before = len(conv.problems)
        f = _BY_KEY[key]
        got: Any = None
        if key == "resource":
            cpu, memory = read_resource(conv, value, path, label(key))
            fields.update((k, v) for k, v in (("resource_cpu", cpu), ("resource_memory_mb", memory)) if v)
        elif key == "sla":
            fields.update(read_sla(conv, value, path, label(key)))
        elif f.kind == Kind.LABELS:
            pairs = read_labels(conv, value, path, f"{at}.{key}", suffix)
            got = None if pairs is None else tuple(sorted(pairs.items()))
        else:
            got = read_value(conv, f, value, path, label(key))
            if got is not None and f.kind == Kind.CHOICE:
                assert f.enum is not None
                got = f.enum(got)
            elif f.kind == Kind.PARAMS:
                got = "" if got == "{}" else got
            elif got is not None and f.kind == Kind.NAMES:
                got = tuple(got)
            elif isinstance(got, tuple) and f.kind == Kind.BACKOFF:
                got = unchecked(RetryBackoff, base_ms=got[0], cap_ms=got[1], jitter_pct=got[2])
        if f.attr == "trigger":
            schedule[key] = got
        elif got is not None:
            fields[f.attr] = got
        ok = ok and len(conv.problems) == before
    cron_expr, tz = schedule.get("cron"), schedule.get("timezone")
    every, start, once = schedule.get("every"), schedule.get("start"), schedule.get("at")
    if tz is not None and cron_expr is None:
        conv.add(keys["timezone"][0], at, f"{label('timezone')}: a time zone applies to cron; give cron too")
        ok = False
    if start is not None and every is None:
        conv.add(keys["start"][0], at, f"{label('start')}: start applies to every; give every too")
        ok = False
    if not ok:
        return None
    trigger: Trigger = ManualTrigger()
    try:
        if cron_expr is not None:
            trigger = CronTrigger(cron_expr, tz or "UTC")
        elif every is not None:
            trigger = IntervalTrigger(every, start or 0)
        elif once is not None:
            trigger = OnceTrigger(once)
        spec = TaskSpec(trigger=trigger, **fields)
        if isinstance(trigger, CronTrigger):  # the leader checks again, against its tz database
            CronSchedule.parse(
                trigger.expr, trigger.timezone, field="trigger.cron", tz_field="trigger.timezone"
            )
    except InvalidSpec as bad:
        line = _line_of_field(bad.field, keys) or node.line
        key = _file_key(bad.field)
        conv.add(line, at, f"{at}.{key}{suffix}: {bad.reason}" if key else f"{at}{suffix}: {bad.reason}")
        return None
    return spec, where


_FIELD_KEYS = error_keys(_FIELDS)


def _file_key(field: str) -> str:
    """A model field path spelled with the file's keys (``max_retries`` → ``retries``)."""
    head, sep, rest = field.partition("[")
    return _FIELD_KEYS.get(head, head) + sep + rest


def _line_of_field(field: str, keys: dict[str, tuple[int | None, Node]]) -> int | None:
    key = re.split(r"[.\[]", _file_key(field), maxsplit=1)[0]
    entry = keys.get(key)
    return entry[0] if entry is not None else None


def parse_task_text(text: str, fmt: Literal["yaml", "toml"], source: str) -> TaskFile:
    """Parse a task file's text. Raises :class:`InvalidTaskFile` listing every problem, each at
    ``source:line`` (a syntax error stops reading and is reported alone)."""
    if fmt == "yaml":
        try:
            root = read_yaml(text)
        except SyntaxProblem as bad:
            raise InvalidTaskFile(
                [(f"{source}:{bad.line}" if bad.line else source, bad.message)], source
            ) from None
    else:
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            found = re.search(r"\(at line (\d+)", str(exc))
            raise InvalidTaskFile(
                [(f"{source}:{found.group(1)}" if found else source, f"TOML syntax: {exc}")], source
            ) from None
        root = toml_node(data, (), scan_toml_lines(text))
        root.line = 1
    conv = Converter(source, aliases=_ALIASES)
    if root.kind != "mapping":
        raise InvalidTaskFile(
            [
                (
                    f"{source}:{root.line or 1}",
                    f"a task file holds a mapping (namespace, tasks), got {describe(root)}",
                )
            ],
            source,
        )
    keys = conv.keys(root, FILE_KEYS, "", "file")
    defaults: dict[str, str] = {}
    for key in ("namespace", "owner"):
        if key in keys:
            line, node = keys[key]
            value = conv.string(node, key, key)
            if value is not None:
                defaults[key] = value
    tasks: list[tuple[TaskSpec, str]] = []
    if "tasks" not in keys:
        conv.add(root.line, "tasks", "tasks: required (a list of tasks)")
    else:
        line, node = keys["tasks"]
        if node.kind != "list":
            conv.add(line, "tasks", f"tasks: must be a list of tasks, got {describe(node)}")
        else:
            seen: dict[str, str] = {}
            for i, item in enumerate(node.items or []):
                got = _task(item, i, defaults, conv)
                if got is None:
                    continue
                spec, where = got
                if spec.name in seen:
                    conv.add(
                        item.line,
                        f"tasks[{i}]",
                        f"tasks[{i}]: task {spec.name!r} is declared twice (first at {seen[spec.name]})",
                    )
                    continue
                seen[spec.name] = where
                tasks.append(got)
    if conv.problems:
        ordered = sorted(enumerate(conv.problems), key=lambda p: (p[1][0] or 0, p[0]))
        raise InvalidTaskFile([(conv.where(line), message) for _, (line, _path, message) in ordered], source)
    namespaces = {spec.namespace for spec, _ in tasks} | {defaults.get("namespace", "default")}
    return TaskFile(source, tuple(tasks), frozenset(namespaces))


def load_task_file(path: str | Path) -> TaskFile:
    """Read and parse a task file (``.yaml``/``.yml`` or ``.toml``). Raises :class:`InvalidTaskFile`."""
    source = str(path)
    suffix = Path(path).suffix.lower()
    if suffix not in (".yaml", ".yml", ".toml"):
        raise InvalidTaskFile(
            [(source, f"unknown task file type {suffix or '(none)'!r}: use .yaml, .yml or .toml")], source
        )
    try:
        text = Path(path).read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise InvalidTaskFile(
            [(source, f"not UTF-8 text ({exc.reason} at byte {exc.start})")], source
        ) from None
    except OSError as exc:
        raise InvalidTaskFile([(source, f"cannot read the file: {exc.strerror or exc}")], source) from None
    return parse_task_text(text, "toml" if suffix == ".toml" else "yaml", source)


# ---------------------------------------------------------------------------------------------
# Diffing


@dataclass(frozen=True, slots=True)
class FieldChange:
    """One field that differs: its name and both values as the diff prints them."""

    field: str
    old: str
    new: str


def normalize_for(spec: TaskSpec, current: TaskSpec | None) -> TaskSpec:
    """``spec`` as it would be stored over ``current``: an ``every`` without ``start`` keeps the
    phase the task already has (the leader anchored it at creation)."""
    if (
        current is not None
        and isinstance(spec.trigger, IntervalTrigger)
        and spec.trigger.start_ms == 0
        and isinstance(current.trigger, IntervalTrigger)
        and current.trigger.every_ms == spec.trigger.every_ms
    ):
        return dataclasses.replace(spec, trigger=current.trigger)
    return spec


def _iso(ms: int) -> str:
    return _dt.datetime.fromtimestamp(ms / 1000, _dt.UTC).isoformat().replace("+00:00", "Z")


# Model field → the key a task file spells it with (the diff speaks the file's language).
_DIFF_NAMES = {"trigger": "schedule", **{f.attr: f.key for f in _FIELDS if f.attr != "trigger"}}
# Model fields the diff shows as durations ("1h", "none").
_DURATIONS = frozenset(f.attr for f in _FIELDS if f.kind == Kind.DURATION and f.attr != "trigger")
_DURATION_LISTS = frozenset(f.attr for f in _FIELDS if f.kind == Kind.DURATIONS)


def _shown(value: object, name: str = "") -> str:
    if name in _DURATIONS and isinstance(value, int):
        return format_duration(value) if value else "none"
    if name in _DURATION_LISTS and isinstance(value, tuple):
        return "[" + ", ".join(format_duration(v) if v else "0s" for v in value) + "]"
    if isinstance(value, RetryBackoff):
        cap = f", cap {format_duration(value.cap_ms)}" if value.cap_ms else ""
        return f"{{base {format_duration(value.base_ms)}{cap}, jitter {value.jitter_pct}%}}"
    if value is None:
        return "none"
    if isinstance(value, CronTrigger):
        return f"cron {value.expr!r} {value.timezone}"
    if isinstance(value, IntervalTrigger):
        every = format_duration(value.every_ms)
        return f"every {every}" + (f" from {_iso(value.start_ms)}" if value.start_ms else "")
    if isinstance(value, OnceTrigger):
        return f"once at {_iso(value.at_ms)}"
    if isinstance(value, ManualTrigger):
        return "manual"
    if isinstance(value, tuple):
        return "[" + ", ".join(str(v) for v in value) + "]"
    if isinstance(value, Misfire | Overlap | Runner):
        return str(value.value)
    return json.dumps(value, ensure_ascii=False)


def diff_specs(old: TaskSpec | None, new: TaskSpec) -> list[FieldChange]:
    """Fields of ``new`` that differ from ``old`` (every field that is not its default when
    ``old`` is None: a creation), in declaration order."""
    base = old if old is not None else TaskSpec(name=new.name, command="x")
    out = []
    for f in dataclasses.fields(TaskSpec):
        if f.name == "name":
            continue
        a, b = getattr(base, f.name), getattr(new, f.name)
        if old is None and f.name == "command":
            a = ""
        if a != b:
            out.append(FieldChange(_DIFF_NAMES.get(f.name, f.name), _shown(a, f.name), _shown(b, f.name)))
    return out
