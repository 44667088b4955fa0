"""Located values: what the YAML and TOML readers of workflow files produce, with line numbers.

Pure: no IO. A :class:`Node` is a scalar, a list or a mapping, each carrying the line it starts
on, so every problem found later (wrong type, unknown key, a validation rule) can name
``file:line``. Mapping keys are always strings and keep their own line.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["Node", "Scalar", "SyntaxProblem", "type_name"]

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
        """``mapping``, ``list``, or the scalar's type name (see :func:`type_name`)."""
        if self.entries is not None:
            return "mapping"
        if self.items is not None:
            return "list"
        return type_name(self.value)

    def plain(self) -> object:
        """The plain Python value (for params)."""
        if self.entries is not None:
            return {k: v.plain() for k, _, v in self.entries}
        if self.items is not None:
            return [v.plain() for v in self.items]
        return self.value


def type_name(value: object) -> str:
    """The name a message uses for a scalar's type: null, boolean, integer, float or string."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "float"
    return "string"


class SyntaxProblem(Exception):
    """The text is not a readable file of its format; ``line`` is 1-based (None: unknown)."""

    def __init__(self, line: int | None, message: str) -> None:
        super().__init__(message)
        self.line = line
        self.message = message
