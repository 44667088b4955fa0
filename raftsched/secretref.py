"""Secret references: ``{{ secret.NAME }}`` in a task's params and a workflow task's env.

A reference is text; the value it names is looked up **on the executor** that runs the attempt
(see :mod:`raftsched.executor.secrets`), so the replicated log, snapshots, backups, the audit
trail and the console only ever hold the reference. This module is the syntax only: pure, no IO.

Syntax: ``{{ secret.NAME }}`` (whitespace inside the braces optional), NAME a letter or ``_``
followed by letters, digits, ``_`` or ``-`` (at most 128 characters). Anything else that opens
with ``{{ secret`` or ``{{ secrets`` is refused at submission with :func:`check_secret_refs`'s
message, so a typo never reaches an executor as literal text.
"""

from __future__ import annotations

import re
from collections.abc import Callable

__all__ = ["MAX_SECRET_NAME", "check_secret_refs", "substitute", "uses_secrets"]

MAX_SECRET_NAME = 128
_NAME = r"[A-Za-z_][A-Za-z0-9_-]{0,127}"
_REF = re.compile(r"\{\{\s*secret\.(" + _NAME + r")\s*\}\}")
# What looks like a reference (a well-formed one or a typo of one).
_LOOKS = re.compile(r"\{\{\s*secrets?(?![A-Za-z0-9_])")


def uses_secrets(text: str) -> bool:
    """Whether ``text`` holds anything that looks like a secret reference (good or bad)."""
    return "{{" in text and _LOOKS.search(text) is not None


def check_secret_refs(text: str) -> list[str]:
    """Every malformed secret reference in ``text``, as messages (empty: none, or all fine)."""
    if not uses_secrets(text):
        return []
    problems: list[str] = []
    for found in _LOOKS.finditer(text):
        start = found.start()
        end = text.find("}}", found.end())
        if end < 0:
            problems.append(f"unclosed secret reference at column {start + 1} (write {{{{ secret.NAME }}}})")
            continue
        placeholder = text[start : end + 2]
        if _REF.fullmatch(placeholder):
            continue
        inner = placeholder[2:-2].strip()
        shown = placeholder if len(placeholder) <= 80 else placeholder[:77] + "..."
        hint = ""
        if inner.startswith("secrets."):
            hint = f" (did you mean {{{{ secret.{inner[len('secrets.') :].strip()[:60]} }}}}?)"
        problems.append(
            f"bad secret reference {shown!r} at column {start + 1}: write {{{{ secret.NAME }}}}, "
            f"NAME a letter or _ then letters, digits, _ or - (at most {MAX_SECRET_NAME}){hint}"
        )
    return problems


def substitute(text: str, lookup: Callable[[str], str]) -> str:
    """``text`` with each ``{{ secret.NAME }}`` replaced by ``lookup(NAME)`` (which may raise)."""
    if "{{" not in text:
        return text
    return _REF.sub(lambda match: lookup(match.group(1)), text)
