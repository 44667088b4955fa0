"""Workflow YAML → located values: the only module that imports PyYAML.

PyYAML's safe loader parses and composes the document (:func:`yaml.compose` semantics, node marks
for lines); this module never constructs Python objects with PyYAML's resolvers. It refuses what
a workflow file does not need and what would make a value depend on the reader, each with its
line:

* anchors (``&a``), aliases (``*a``), tags (``!!str``, ``!x``), directives (``%YAML``) and more
  than one document;
* duplicate keys (PyYAML would keep the last one silently) and keys that are not scalars;
* folded scalars (``>``), and plain or quoted scalars that run over several lines (YAML folds
  their line breaks into spaces, so a mis-indented line silently joins the value above);
* flow collections (``[a, b]``, ``{task: a}``) that do not close on the line they open on;
* nesting deeper than 32 levels.

Scalar typing (the rule)
========================

YAML 1.1 (what PyYAML resolves) and YAML 1.2 read some plain scalars differently, so the same
file would mean different things to different tools. Here a value never silently changes from
what is written:

* Quoted (``'...'``, ``"..."``) and literal-block (``|``) scalars are strings, always. Mapping
  keys are strings, exactly as written (``on:``, ``1:`` and ``010:`` are the keys "on", "1", "010").
* A plain scalar is typed only when every YAML version agrees: ``~``/``null``/``Null``/``NULL`` or
  nothing → null; ``true``/``false`` (also ``True``/``TRUE``, ...) → boolean; a decimal integer
  without leading zeros (``42``, ``-7``, ``+3``) → integer; a decimal with a dot and, optionally,
  a signed exponent (``1.5``, ``-0.25``, ``1.0e+3``) → float.
* ``yes``/``no``/``on``/``off`` (and ``y``/``n``) are strings: YAML 1.1 booleans, but YAML 1.2
  strings, and strings in these files since their first version. No workflow key takes a boolean.
* Refused with their line, because YAML versions disagree on their value: integers with a leading
  zero (``010``: 8 or 10), ``0x``/``0o``/``0b`` numbers, numbers with ``_`` (``1_000``),
  base-60 numbers (``12:30``: 750 in YAML 1.1), exponents without a dot or sign (``1e3``: a
  float or a string), dates and timestamps (``2024-01-01``), and ``.inf``/``.nan`` (no field or
  param can hold them). Quote the value for a string, or write the plain decimal number.
"""

from __future__ import annotations

import re

import yaml

from raftsched.workflow.located import Node, Scalar, SyntaxProblem

__all__ = ["MAX_DEPTH", "read_yaml"]

MAX_DEPTH = 32
"""Deepest nesting of lists and mappings accepted (PyYAML's composer recurses per level)."""

_NULL = frozenset({"", "~", "null", "Null", "NULL"})
_TRUE = frozenset({"true", "True", "TRUE"})
_FALSE = frozenset({"false", "False", "FALSE"})
_INT = re.compile(r"[-+]?(?:0|[1-9][0-9]*)")
_FLOAT = re.compile(r"[-+]?(?:[0-9]+\.[0-9]*|\.[0-9]+)(?:[eE][-+][0-9]+)?")
# Forms that YAML 1.1 and YAML 1.2 resolve to different values (or to a value JSON cannot hold).
_TRAPS: tuple[tuple[re.Pattern[str], str, str], ...] = (  # (form, what it is, how to write a number)
    (
        re.compile(r"[-+]?0[0-9]+"),
        "an integer with a leading zero (octal in YAML 1.1, decimal in YAML 1.2)",
        "drop the leading zeros",
    ),
    (
        re.compile(r"[-+]?0[xXoObB][0-9a-fA-F_]+"),
        "a hexadecimal, octal or binary number (read differently by YAML 1.1 and 1.2)",
        "write it in decimal",
    ),
    (
        re.compile(
            r"[-+]?[0-9][0-9_]*_[0-9_]*(?:\.[0-9_]*)?(?:[eE][-+]?[0-9]+)?|[-+]?[0-9]*\.[0-9_]*_[0-9_]*"
        ),
        "a number with '_' (a number in YAML 1.1, a string in YAML 1.2)",
        "drop the '_'",
    ),
    (
        re.compile(r"[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?"),
        "a base-60 number in YAML 1.1 (12:30 is 750) but a string in YAML 1.2",
        "write it in decimal",
    ),
    (
        re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)[eE][-+]?[0-9]+"),
        "an exponent without a dot or a sign (a float in YAML 1.2, a string in YAML 1.1)",
        "write it like 1.0e+3",
    ),
    (
        re.compile(
            r"[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
            r"(?:(?:[Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(?:\.[0-9]*)?"
            r"(?:[ \t]*(?:Z|[-+][0-9]{1,2}(?::[0-9]{2})?))?)?"
        ),
        "a date or timestamp in YAML 1.1 but a string in YAML 1.2",
        "",
    ),
    (
        re.compile(r"[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN)"),
        "infinity or NaN, which no workflow field or param can hold",
        "",
    ),
)


def read_yaml(text: str) -> Node:
    """Parse a workflow file's YAML text into located values.

    Raises :class:`~raftsched.workflow.located.SyntaxProblem` with the 1-based line for a syntax
    error and for everything the module docstring refuses; the first problem stops reading.
    """
    try:
        loader = _StrictLoader(text)
    except yaml.reader.ReaderError as exc:
        raise _unreadable(exc, text) from None
    try:
        try:
            loader.skip_event()  # the stream start
            if loader.check_event(yaml.StreamEndEvent):
                raise SyntaxProblem(1, "the file is empty (a workflow is a mapping: name, tasks, ...)")
            start = loader.next_event()
            if isinstance(start, yaml.DocumentStartEvent) and (start.version or start.tags):
                raise SyntaxProblem(_line(start.start_mark), "directives (%YAML, %TAG) are not supported")
            root = loader.compose_document()
            if not loader.check_event(yaml.StreamEndEvent):
                raise SyntaxProblem(
                    _line(loader.next_event().start_mark), "only one YAML document per file (a second '---')"
                )
        except yaml.MarkedYAMLError as exc:
            raise _translate(exc, text) from None
        except yaml.reader.ReaderError as exc:
            raise _unreadable(exc, text) from None
    finally:
        loader.dispose()
    if root is None:
        raise SyntaxProblem(1, "the file is empty (a workflow is a mapping: name, tasks, ...)")
    return _located(root)


class _StrictLoader(yaml.SafeLoader):
    """PyYAML's safe loader, composing only: refuses anchors, aliases and tags as they arrive."""

    def __init__(self, text: str) -> None:
        super().__init__(text)
        self.depth = 0

    # types-PyYAML leaves the parser's event accessors untyped; these two give them a type.
    def next_event(self) -> yaml.Event:
        """The next event, not consumed."""
        event: yaml.Event = self.peek_event()  # type: ignore[no-untyped-call]
        return event

    def skip_event(self) -> None:
        """Consume the next event."""
        self.get_event()  # type: ignore[no-untyped-call]

    def compose_node(self, parent: yaml.Node | None, index: int) -> yaml.Node | None:
        event = self.next_event()
        line = _line(event.start_mark)
        refused = "anchors, aliases and tags are not supported"
        if isinstance(event, yaml.AliasEvent):
            raise SyntaxProblem(line, f"{refused}: alias '*{event.anchor}'; write the value out")
        if isinstance(event, yaml.NodeEvent) and event.anchor is not None:
            raise SyntaxProblem(line, f"{refused}: anchor '&{event.anchor}'; remove it")
        if isinstance(event, yaml.ScalarEvent | yaml.CollectionStartEvent) and event.tag is not None:
            raise SyntaxProblem(line, f"{refused}: tag {event.tag!r}; remove it (quote a string)")
        if isinstance(event, yaml.CollectionStartEvent):
            self.depth += 1
            if self.depth > MAX_DEPTH:
                raise SyntaxProblem(line, f"nested deeper than {MAX_DEPTH} levels")
            try:
                return super().compose_node(parent, index)
            finally:
                self.depth -= 1
        return super().compose_node(parent, index)


def _unreadable(exc: yaml.reader.ReaderError, text: str) -> SyntaxProblem:
    character = exc.character if isinstance(exc.character, int) else ord(str(exc.character)[:1] or "?")
    line = text.count("\n", 0, exc.position) + 1
    return SyntaxProblem(
        line, f'character U+{character:04X} is not allowed in YAML (use an escape in a "..." string)'
    )


def _line(mark: object) -> int | None:
    line = getattr(mark, "line", None)
    return line + 1 if isinstance(line, int) else None


def _located(node: yaml.Node) -> Node:
    """The located value of a composed node (refusing what the module docstring lists)."""
    line = _line(node.start_mark)
    if isinstance(node, yaml.MappingNode | yaml.SequenceNode):
        _one_line_flow(node, line)
    if isinstance(node, yaml.MappingNode):
        entries: list[tuple[str, int | None, Node]] = []
        seen: dict[str, int | None] = {}
        for key_node, value_node in node.value:
            key_at = _line(key_node.start_mark)
            if not isinstance(key_node, yaml.ScalarNode):
                raise SyntaxProblem(key_at, "mapping keys must be plain strings, not lists or mappings")
            _single_line(key_node, key_at)
            key = _text(key_node.value, key_at)
            if not key and key_node.style is None:
                raise SyntaxProblem(key_at, "empty key")
            if key in seen:
                raise SyntaxProblem(key_at, f"duplicate key {key!r} (first on line {seen[key]})")
            seen[key] = key_at
            entries.append((key, key_at, _located(value_node)))
        return Node(line, entries=entries)
    if isinstance(node, yaml.SequenceNode):
        return Node(line, items=[_located(item) for item in node.value])
    assert isinstance(node, yaml.ScalarNode)  # the composer makes only these three kinds
    return Node(line, value=_scalar(node, line))


def _one_line_flow(node: yaml.CollectionNode, line: int | None) -> None:
    if node.flow_style and _line(node.end_mark) != line:
        opener = "{" if isinstance(node, yaml.MappingNode) else "["
        raise SyntaxProblem(
            line,
            f"a flow collection ('{opener}') must close on the same line; use a block list or mapping",
        )


def _single_line(node: yaml.ScalarNode, line: int | None) -> None:
    if node.style in (None, "'", '"') and _line(node.end_mark) != line:
        what = "a quoted string" if node.style else "a plain value"
        raise SyntaxProblem(
            line,
            f"{what} runs over several lines (to line {_line(node.end_mark)}); YAML would join them with "
            "spaces. Keep it on one line, use a literal block (|), or check the indentation",
        )


_SURROGATE = re.compile("[\ud800-\udfff]")
# A surrogate that is not half of a pair: a high one not followed by a low one, or a low one not
# preceded by a high one (the alternation matches a pair's high half first, so its low half is
# never looked at alone).
_LONE = re.compile("[\ud800-\udbff][\udc00-\udfff]|([\ud800-\udfff])")


def _text(value: object, line: int | None) -> str:
    """A scalar's text as Unicode: PyYAML reads each ``\\uXXXX`` escape as its own code point, so
    a pair a JSON writer escapes an emoji as (``"\\ud83d\\ude00"``) is joined as JSON joins it,
    and a lone surrogate (not Unicode text) is refused at its line."""
    text = str(value)
    if text.isascii() or _SURROGATE.search(text) is None:
        return text
    try:
        return text.encode("utf-16-le", "surrogatepass").decode("utf-16-le")
    except UnicodeDecodeError:
        bad = next(m.group(1) for m in _LONE.finditer(text) if m.group(1))
        raise SyntaxProblem(
            line,
            f"\\u{ord(bad):04x} is a lone surrogate (U+D800 to U+DFFF), not a character: "
            "write the character itself, or a \\U00XXXXXX escape",
        ) from None


def _scalar(node: yaml.ScalarNode, line: int | None) -> Scalar:
    if node.style == ">":
        raise SyntaxProblem(line, "folded scalars ('>') are not supported; use a literal block ('|')")
    _single_line(node, line)
    text = _text(node.value, line)
    if node.style is not None:
        return text
    if text in _NULL:
        return None
    if text in _TRUE:
        return True
    if text in _FALSE:
        return False
    if _INT.fullmatch(text):
        return int(text)
    if _FLOAT.fullmatch(text):
        return float(text)
    for pattern, what, as_number in _TRAPS:
        if pattern.fullmatch(text):
            fix = f"; for a number, {as_number}" if as_number else ""
            raise SyntaxProblem(line, f"{text!r} is {what}: quote it for a string{fix}")
    return text


def _translate(exc: yaml.MarkedYAMLError, text: str) -> SyntaxProblem:
    """PyYAML's error as one message at the line where the problem is (or where it began)."""
    problem = exc.problem or ""
    context = exc.context or ""
    line = _line(exc.problem_mark)
    context_line = _line(exc.context_mark)
    column = exc.problem_mark.column if exc.problem_mark is not None else 0
    source = text.split("\n")[line - 1] if line is not None and line <= text.count("\n") + 1 else ""
    before = source[:column].strip()
    if "'\\t'" in problem:
        return SyntaxProblem(line, "tab in indentation or before a comment (YAML indents with spaces only)")
    if "unknown escape character" in problem:
        escape = problem.rsplit(" ", 1)[-1].strip("'")
        return SyntaxProblem(line, f"unknown escape '\\{escape}' in a double-quoted string")
    if "quoted scalar" in context and "end of stream" in problem:
        return SyntaxProblem(context_line, "unclosed quoted string")
    if context.startswith("while parsing a flow"):
        opener = "{" if "mapping" in context else "["
        closer = "}" if opener == "{" else "]"
        return SyntaxProblem(
            context_line,
            f"unclosed {opener!r} or a malformed flow collection (expected ',' or {closer!r}); "
            "flow collections must close on the same line",
        )
    if problem == "mapping values are not allowed here":
        if ": " in before or before.endswith(":"):
            return SyntaxProblem(line, "a ': ' inside a plain value is ambiguous; quote it")
        return SyntaxProblem(line, "unexpected indentation (this key does not line up with the keys above)")
    if problem.startswith("expected <block end>"):
        found = problem.partition("but found ")[2].strip("'")
        if before[-1:] in ("'", '"'):
            return SyntaxProblem(line, "unexpected text after a quoted string")
        if found in ("]", "}", ",", "[", "{"):
            return SyntaxProblem(line, f"unexpected {found!r} (an unbalanced flow collection?)")
        return SyntaxProblem(line, "unexpected indentation")
    if problem.startswith("found character") and "cannot start any token" in problem:
        char = problem.split("'")[1] if "'" in problem else "?"
        return SyntaxProblem(line, f"{char!r} cannot start a plain value; quote it")
    if "could not find expected ':'" in problem:
        return SyntaxProblem(context_line or line, "expected 'key: value'")
    detail = f"{context}: {problem}" if context else problem
    return SyntaxProblem(line, f"YAML syntax: {detail}")
