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
``timeout``        seconds (int) or a string ``"90s"``, ``"5m"``, ``"2h"``, ``"1d"``      none
``shards``         parallel shards (1-1024)                                              1
``priority``       0-9
``params``         mapping: task params (override the workflow's)
``env``            mapping of environment variable names to (templated) string values
``description``    free text
=================  ====================================================================  =========

Templates (``{{ ds }}``, ``{{ ts }}``, ``{{ nominal_time }}``, ``{{ params.NAME }}``, ...) are
described in :mod:`raftsched.workflow.template`. ``depends_on`` is always a list: a mapping like
``depends_on: {validate: failure}`` is refused with a hint (one form, one meaning). Unknown keys
are errors (with a did-you-mean), and so are wrong types: string fields need strings (quote
``"123"`` or ``"true"``), numeric fields integers.

The YAML subset
===============

PyYAML is not a dependency, so YAML files are read by a small strict parser that keeps line
numbers: block mappings and block sequences (of scalars or mappings), flow sequences
``[a, b]`` and flow mappings ``{task: a, condition: failure}`` on one line, plain, single- and
double-quoted scalars, ``#`` comments, integers, booleans (``true``/``false``), ``null``/``~``,
floats (in params), and literal blocks ``|`` (``|-`` strips, ``|+`` keeps the final newlines)
for long commands. Plain ``yes``/``no``/``on``/``off`` are strings (YAML 1.2). Anchors, aliases,
tags, folded ``>`` blocks, multi-line flow collections, multi-line plain scalars, complex keys
and several documents are refused with their line. Indent with spaces, never tabs.

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

from raftsched.errors import InvalidWorkflow
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.validate import collect_problems, locate

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
    "params",
    "env",
    "description",
)
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
    "concurrency": "max_parallel",
    "misfire_policy": "misfire",
    "overlap_policy": "overlap",
}
_MISFIRE = {"latest": pb.MISFIRE_LATEST, "all": pb.MISFIRE_ALL, "skip": pb.MISFIRE_SKIP}
_OVERLAP = {"skip": pb.OVERLAP_SKIP, "allow": pb.OVERLAP_ALLOW}
_RULE = {"all": pb.RULE_ALL, "any": pb.RULE_ANY}
_CONDITION = {"success": pb.ON_SUCCESS, "failure": pb.ON_FAILURE, "done": pb.ON_DONE}
_DURATION = re.compile(r"(\d+)\s*(s|m|h|d)?")
_UNIT_MS = {"s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000}
_UINT32 = 2**32 - 1
_MAX_DEPTH = 32


# ---------------------------------------------------------------------------------------------
# Located values: what both parsers produce and the converter reads.

Scalar = str | int | float | bool | None


@dataclass(slots=True)
class Node:
    """A parsed value with the line it starts on (None: unknown)."""

    line: int | None
    value: Scalar = None
    items: list[Node] | None = None  # a sequence
    entries: list[tuple[str, int | None, Node]] | None = None  # a mapping: (key, key line, value)

    @property
    def kind(self) -> str:
        if self.entries is not None:
            return "mapping"
        if self.items is not None:
            return "list"
        return _type_name(self.value)

    def plain(self) -> object:
        """The plain Python value (for params)."""
        if self.entries is not None:
            return {k: v.plain() for k, _, v in self.entries}
        if self.items is not None:
            return [v.plain() for v in self.items]
        return self.value


def _type_name(value: object) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    return "string"


class _SyntaxProblem(Exception):
    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message


# ---------------------------------------------------------------------------------------------
# The strict YAML subset.

_KEY = re.compile(
    r"""(?P<key>"(?:[^"\\]|\\.)*"|'(?:[^']|'')*'|[^\s#'"{}\[\],&*!|>%@`-][^:#]*?|-[^\s:#][^:#]*?)\s*:(?:\s+|$)"""
)
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+]?[0-9]+)?|[-+]?[0-9]+[eE][-+]?[0-9]+")
_ESCAPES = {"n": "\n", "t": "\t", "r": "\r", '"': '"', "\\": "\\", "/": "/", "0": "\0", " ": " "}


def _strip_comment(text: str) -> str:
    """Drop a ``#`` comment (``#`` at the start or after whitespace, outside quotes)."""
    quote = ""
    i = 0
    while i < len(text):
        ch = text[i]
        if quote:
            if quote == '"' and ch == "\\":
                i += 2
                continue
            if ch == quote:
                quote = ""
        elif ch in "\"'" and (i == 0 or text[i - 1] in " \t[{,:-"):
            quote = ch
        elif ch == "#" and (i == 0 or text[i - 1] in " \t"):
            return text[:i].rstrip()
        i += 1
    return text.rstrip()


class _Yaml:
    def __init__(self, text: str) -> None:
        self.raw = text.split("\n")
        self.pos = 0

    # lines ------------------------------------------------------------------------------------
    def _next_content(self) -> tuple[int, int, str] | None:
        """The next non-blank, non-comment line as (index, indent, content) without consuming."""
        while self.pos < len(self.raw):
            raw = self.raw[self.pos]
            content = _strip_comment(raw)
            stripped = content.lstrip(" ")
            if not stripped:
                self.pos += 1
                continue
            indent = len(content) - len(stripped)
            if stripped.startswith("\t") or "\t" in raw[:indent]:
                raise _SyntaxProblem(self.pos + 1, "tab in indentation (indent with spaces)")
            return self.pos, indent, stripped
        return None

    def document(self) -> Node:
        first = self._next_content()
        if first is not None and first[2] == "---":
            self.pos += 1
        top = self._next_content()
        if top is None:
            raise _SyntaxProblem(1, "the file is empty (a workflow is a mapping: name, tasks, ...)")
        node = self._block(top[1], 0)
        rest = self._next_content()
        if rest is not None:
            index, _indent, content = rest
            if content in ("---", "..."):
                raise _SyntaxProblem(index + 1, "only one YAML document per file")
            raise _SyntaxProblem(index + 1, f"unexpected content at this indentation: {content[:40]!r}")
        return node

    def _block(self, indent: int, depth: int) -> Node:
        if depth > _MAX_DEPTH:
            raise _SyntaxProblem(self.pos + 1, f"nested deeper than {_MAX_DEPTH} levels")
        nxt = self._next_content()
        assert nxt is not None
        _index, _indent, content = nxt
        if content == "-" or content.startswith("- "):
            return self._sequence(indent, depth)
        return self._mapping(indent, depth)

    def _mapping(self, indent: int, depth: int) -> Node:
        entries: list[tuple[str, int | None, Node]] = []
        seen: dict[str, int] = {}
        start = self.pos + 1
        while True:
            nxt = self._next_content()
            if nxt is None:
                break
            index, ind, content = nxt
            if ind < indent or (ind == 0 and content in ("---", "...")):
                break
            line = index + 1
            if ind > indent:
                raise _SyntaxProblem(line, "unexpected indentation")
            if content == "-" or content.startswith("- "):
                if entries:
                    raise _SyntaxProblem(line, "a list item where a key was expected")
                raise _SyntaxProblem(line, "a list item where a mapping was expected")
            match = _KEY.match(content)
            if match is None:
                if content.startswith(("?", "&", "*", "!")):
                    raise _SyntaxProblem(line, "complex keys, anchors, aliases and tags are not supported")
                raise _SyntaxProblem(line, f"expected 'key: value', got {content[:60]!r}")
            key = self._key(match.group("key"), line)
            if key in seen:
                raise _SyntaxProblem(line, f"duplicate key {key!r} (first on line {seen[key]})")
            seen[key] = line
            rest = content[match.end() :]
            self.pos = index + 1
            entries.append(
                (key, line, self._value_after(rest, indent, line, depth, allow_same_indent_list=True))
            )
        return Node(start, entries=entries)

    def _sequence(self, indent: int, depth: int) -> Node:
        items: list[Node] = []
        start = self.pos + 1
        while True:
            nxt = self._next_content()
            if nxt is None:
                break
            index, ind, content = nxt
            if ind < indent:
                break
            line = index + 1
            if ind > indent:
                raise _SyntaxProblem(line, "unexpected indentation")
            if not (content == "-" or content.startswith("- ")):
                break  # e.g. the next key of a mapping whose list sat at the key's indentation
            rest = content[1:].lstrip(" ")
            column = ind + (len(content) - len(rest))
            if (rest and _KEY.match(rest) and not rest.startswith(("{", "[", '"', "'"))) or rest.startswith(
                "- "
            ):
                # "- key: value": a mapping (or "- - x": a list) starting on the item's own line.
                self.raw[index] = " " * column + rest
                self.pos = index
                items.append(self._block(column, depth + 1))
            else:
                self.pos = index + 1
                items.append(self._value_after(rest, indent, line, depth, allow_same_indent_list=False))
        return Node(start, items=items)

    def _value_after(
        self, rest: str, indent: int, line: int, depth: int, *, allow_same_indent_list: bool
    ) -> Node:
        """The value after ``key:`` or ``-``: inline, a literal block, or a nested block below."""
        if rest:
            if rest[0] in "|>":
                return self._literal(rest, indent, line)
            return _inline(rest, line)
        nxt = self._next_content()
        if nxt is not None:
            _index, ind, content = nxt
            is_item = content == "-" or content.startswith("- ")
            if ind > indent or (allow_same_indent_list and ind == indent and is_item):
                return self._block(ind, depth + 1)
        return Node(line, value=None)

    def _literal(self, header: str, indent: int, line: int) -> Node:
        if header[0] == ">":
            raise _SyntaxProblem(line, "folded scalars ('>') are not supported; use a literal block ('|')")
        chomp = header[1:].strip()
        if chomp not in ("", "-", "+"):
            raise _SyntaxProblem(line, f"unsupported block scalar header {header!r} (use |, |- or |+)")
        lines: list[str] = []
        block_indent: int | None = None
        index = line  # raw index of the first line after the header
        while index < len(self.raw):
            raw = self.raw[index]
            stripped = raw.lstrip(" ")
            if not stripped.strip():
                lines.append("")
                index += 1
                continue
            ind = len(raw) - len(stripped)
            if ind <= indent or (block_indent is not None and ind < block_indent):
                break
            if block_indent is None:
                block_indent = ind
            lines.append(raw[block_indent:])
            index += 1
        trailing = 0
        while lines and not lines[-1]:
            lines.pop()
            trailing += 1
        self.pos = index
        body = "\n".join(lines)
        if not body or chomp == "-":
            return Node(line, value=body)
        if chomp == "+":
            return Node(line, value=body + "\n" * (1 + trailing))
        return Node(line, value=body + "\n")

    @staticmethod
    def _key(text: str, line: int) -> str:
        if text.startswith(('"', "'")):
            value = _quoted(text, line)
            return value
        return text.strip()


def _quoted(text: str, line: int) -> str:
    """A complete quoted scalar (the text is exactly the quoted token)."""
    value, end = _scan_quoted(text, 0, line)
    if text[end:].strip():
        raise _SyntaxProblem(line, f"unexpected text after a quoted string: {text[end:].strip()[:40]!r}")
    return value


def _scan_quoted(text: str, pos: int, line: int) -> tuple[str, int]:
    quote = text[pos]
    out: list[str] = []
    i = pos + 1
    while i < len(text):
        ch = text[i]
        if quote == "'" and ch == "'":
            if text[i + 1 : i + 2] == "'":
                out.append("'")
                i += 2
                continue
            return "".join(out), i + 1
        if quote == '"' and ch == '"':
            return "".join(out), i + 1
        if quote == '"' and ch == "\\":
            esc = text[i + 1 : i + 2]
            if esc == "u" and re.fullmatch(r"[0-9A-Fa-f]{4}", text[i + 2 : i + 6]):
                out.append(chr(int(text[i + 2 : i + 6], 16)))
                i += 6
                continue
            if esc not in _ESCAPES:
                raise _SyntaxProblem(line, f"unknown escape '\\{esc}' in a double-quoted string")
            out.append(_ESCAPES[esc])
            i += 2
            continue
        out.append(ch)
        i += 1
    raise _SyntaxProblem(line, "unclosed quoted string (quoted strings must end on the same line)")


def _plain(text: str, line: int) -> Scalar:
    text = text.strip()
    if not text or text in ("~", "null", "Null", "NULL"):
        return None
    if text[0] in "&*!%@`":
        raise _SyntaxProblem(line, f"anchors, aliases, tags and directives are not supported: {text[:40]!r}")
    if ": " in text or text.endswith(":"):
        raise _SyntaxProblem(line, f"a ': ' inside a plain value is ambiguous; quote it: {text[:60]!r}")
    if text in ("true", "True", "TRUE"):
        return True
    if text in ("false", "False", "FALSE"):
        return False
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    return text


def _inline(text: str, line: int) -> Node:
    """A value on one line: flow collection, quoted or plain scalar."""
    if text[0] in "[{":
        node, end = _flow(text, 0, line, 0)
        if text[end:].strip():
            raise _SyntaxProblem(
                line, f"unexpected text after a flow collection: {text[end:].strip()[:40]!r}"
            )
        return node
    if text[0] in "\"'":
        return Node(line, value=_quoted(text, line))
    if text[0] in "]}":
        raise _SyntaxProblem(line, f"unexpected {text[0]!r}")
    return Node(line, value=_plain(text, line))


def _skip_spaces(text: str, pos: int) -> int:
    while pos < len(text) and text[pos] in " \t":
        pos += 1
    return pos


def _flow(text: str, pos: int, line: int, depth: int) -> tuple[Node, int]:
    """Parse a flow sequence or mapping starting at ``text[pos]`` (``[`` or ``{``) on one line."""
    if depth > _MAX_DEPTH:
        raise _SyntaxProblem(line, f"nested deeper than {_MAX_DEPTH} levels")
    opener = text[pos]
    closer = "]" if opener == "[" else "}"
    items: list[Node] = []
    entries: list[tuple[str, int | None, Node]] = []
    pos = _skip_spaces(text, pos + 1)
    while True:
        if pos >= len(text):
            raise _SyntaxProblem(line, f"unclosed {opener!r} (flow collections must close on the same line)")
        if text[pos] == closer:
            pos += 1
            break
        if opener == "{":
            key, pos = _flow_scalar(text, pos, line, stops=":,}")
            pos = _skip_spaces(text, pos)
            if pos >= len(text) or text[pos] != ":":
                raise _SyntaxProblem(line, f"expected ':' after key {key.value!r} in a flow mapping")
            if not isinstance(key.value, str):
                raise _SyntaxProblem(line, f"flow mapping keys must be strings, got {key.value!r}")
            if any(k == key.value for k, _, _ in entries):
                raise _SyntaxProblem(line, f"duplicate key {key.value!r}")
            pos = _skip_spaces(text, pos + 1)
            value, pos = _flow_value(text, pos, line, depth, stops=",}")
            entries.append((key.value, line, value))
        else:
            value, pos = _flow_value(text, pos, line, depth, stops=",]")
            items.append(value)
        pos = _skip_spaces(text, pos)
        if pos < len(text) and text[pos] == ",":
            pos = _skip_spaces(text, pos + 1)
        elif pos < len(text) and text[pos] != closer:
            raise _SyntaxProblem(line, f"expected ',' or {closer!r}, got {text[pos]!r}")
    if opener == "{":
        return Node(line, entries=entries), pos
    return Node(line, items=items), pos


def _flow_value(text: str, pos: int, line: int, depth: int, stops: str) -> tuple[Node, int]:
    if pos < len(text) and text[pos] in "[{":
        return _flow(text, pos, line, depth + 1)
    return _flow_scalar(text, pos, line, stops)


def _flow_scalar(text: str, pos: int, line: int, stops: str) -> tuple[Node, int]:
    if pos < len(text) and text[pos] in "\"'":
        value, end = _scan_quoted(text, pos, line)
        return Node(line, value=value), end
    end = pos
    while end < len(text) and text[end] not in stops:
        if text[end] in "[]{}" and text[end] not in stops:
            raise _SyntaxProblem(line, f"unexpected {text[end]!r} inside a flow collection")
        end += 1
    raw = text[pos:end].strip()
    if not raw:
        raise _SyntaxProblem(line, "empty entry in a flow collection")
    if ":" in stops:
        return Node(line, value=raw), end  # a key: never resolved to a number or boolean
    return Node(line, value=_plain(raw, line)), end


def parse_yaml_subset(text: str) -> Node:
    """Parse the YAML subset described in the module docstring; raises ``_SyntaxProblem``."""
    return _Yaml(text).document()


# ---------------------------------------------------------------------------------------------
# TOML: tomllib for the values, a best-effort scan for their lines.

_TOML_HEADER = re.compile(r"\[\[?\s*([^\]]+?)\s*\]\]?")
_TOML_KEY = re.compile(
    r"""((?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*')(?:\s*\.\s*(?:[A-Za-z0-9_-]+|"[^"]*"|'[^']*'))*)\s*="""
)


def _toml_parts(dotted: str) -> list[str]:
    return [p.strip().strip("\"'") for p in re.findall(r"""[A-Za-z0-9_-]+|"[^"]*"|'[^']*'""", dotted)]


def _scan_toml_lines(text: str) -> dict[tuple[str | int, ...], int]:
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


def _toml_node(
    value: object, path: tuple[str | int, ...], lines: Mapping[tuple[str | int, ...], int]
) -> Node:
    line = None
    probe = path
    while probe and line is None:
        line = lines.get(probe)
        probe = probe[:-1]
    if isinstance(value, dict):
        entries = [
            (str(k), lines.get((*path, k), line), _toml_node(v, (*path, k), lines)) for k, v in value.items()
        ]
        return Node(line, entries=entries)
    if isinstance(value, list):
        return Node(line, items=[_toml_node(v, (*path, i), lines) for i, v in enumerate(value)])
    if value is None or isinstance(value, str | int | float | bool):
        return Node(line, value=value)
    # dates and times: no workflow field takes one; report the type by name
    return Node(line, value=f"\0{type(value).__name__}")


# ---------------------------------------------------------------------------------------------
# Located values → WorkflowSpec


@dataclass
class _Converter:
    source: str
    problems: list[tuple[int | None, str, str]] = field(default_factory=list)  # (line, path, message)
    locations: dict[str, str] = field(default_factory=dict)
    failed: list[str] = field(default_factory=list)  # paths whose value could not be used

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
        for key, line, value in node.entries or []:
            if key in allowed:
                out[key] = (line, value)
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
        self.add(node.line, path, f"{label}: must be a string, got {_describe(node)}")
        return None

    def integer(self, node: Node, path: str, label: str, high: int = _UINT32) -> int | None:
        value = node.value
        if node.kind != "integer" or not isinstance(value, int):
            self.add(node.line, path, f"{label}: must be an integer, got {_describe(node)}")
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

    def mapping(self, node: Node, path: str, label: str) -> bool:
        if node.kind == "mapping":
            return True
        self.add(node.line, path, f"{label}: must be a mapping, got {_describe(node)}")
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


def _describe(node: Node) -> str:
    if node.kind in ("mapping", "list"):
        return f"a {node.kind}"
    if isinstance(node.value, str) and node.value.startswith("\0"):
        return f"a TOML {node.value[1:]}"
    if node.value is None:
        return "nothing (null)"
    hint = " (quote it to make it a string)" if node.kind in ("integer", "float", "boolean") else ""
    return f"{node.kind} {json.dumps(node.value)}{hint}"


def _timeout_ms(conv: _Converter, node: Node, path: str, label: str) -> int | None:
    if node.kind == "integer" and isinstance(node.value, int):
        seconds = conv.integer(node, path, label, high=2**53 // 1000)
        return None if seconds is None else seconds * 1000
    if node.kind == "string" and isinstance(node.value, str):
        match = _DURATION.fullmatch(node.value.strip())
        if match is not None and len(match.group(1)) <= 12:
            return int(match.group(1)) * _UNIT_MS[match.group(2) or "s"]
    conv.add(
        node.line,
        path,
        f'{label}: must be seconds (an integer) or like "90s", "5m", "2h", got {_describe(node)}',
    )
    return None


def _convert(root: Node, conv: _Converter) -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec()
    conv.locations[""] = conv.source
    if root.kind != "mapping":
        conv.add(root.line, "", f"a workflow file holds a mapping (name, tasks, ...), got {_describe(root)}")
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
    if "name" not in keys:
        conv.add(root.line, "name", "name: required (the workflow's name)")
    if "tasks" not in keys:
        conv.add(root.line, "tasks", "tasks: required (a list of tasks)")
    else:
        line, node = keys["tasks"]
        conv.mark("tasks", line)
        if node.kind != "list":
            conv.add(line, "tasks", f"tasks: must be a list of tasks, got {_describe(node)}")
        else:
            for i, item in enumerate(node.items or []):
                _convert_task(item, i, spec.tasks.add(), conv)
    return spec


def _convert_task(node: Node, i: int, task: pb.WorkflowTaskSpec, conv: _Converter) -> None:
    at = f"tasks[{i}]"
    conv.mark(at, node.line)
    if node.kind != "mapping":
        conv.add(node.line, at, f"{at}: a task must be a mapping (name, command, ...), got {_describe(node)}")
        return
    keys = conv.keys(node, TASK_KEYS, at, "task")
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
        label = f"{at}.{key}{suffix}"
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
        else:  # depends_on
            _convert_depends_on(value, path, suffix, task, conv)


def _convert_depends_on(
    node: Node, path: str, suffix: str, task: pb.WorkflowTaskSpec, conv: _Converter
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
        conv.add(node.line, path, f"{label}: must be a list of task names, got {_describe(node)}")
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
                f"{dep_path}{suffix}: a task name or {{task, condition}}, got {_describe(item)}",
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
            root = parse_yaml_subset(text)
        except _SyntaxProblem as bad:
            raise InvalidWorkflow([(f"{source}:{bad.line}" if bad.line else source, bad.message)]) from None
    elif fmt == "toml":
        try:
            data = tomllib.loads(text)
        except tomllib.TOMLDecodeError as exc:
            found = re.search(r"\(at line (\d+)", str(exc))
            where = f"{source}:{found.group(1)}" if found else source
            raise InvalidWorkflow([(where, f"TOML syntax: {exc}")]) from None
        root = _toml_node(data, (), _scan_toml_lines(text))
        root.line = 1
    else:
        raise ValueError(f"unknown workflow file format {fmt!r} (yaml or toml)")
    if root.kind != "mapping":
        raise InvalidWorkflow(
            [
                (
                    f"{source}:{root.line or 1}",
                    f"a workflow file holds a mapping (name, tasks, ...), got {_describe(root)}",
                )
            ]
        )
    conv = _Converter(source)
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
