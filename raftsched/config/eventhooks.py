"""The ``[events.<name>]`` tables: per-event webhook settings for ``POST /api/v1/events/{name}``
(issue 30 §5).

```toml
[events.orders-ready]
secret_file = "secrets/orders-ready.hmac"   # shared with the sender: HMAC-SHA256 of the body
namespace = "team-a"                        # the event's namespace (default: default)
key_header = "X-Partition"                  # the dedupe key from this header ...
key_pointer = "/partition/date"             # ... else from this JSON pointer into the body
```

A request signed with the secret (``X-Signature-256: sha256=<hex>``, GitHub's format) needs no
raftsched token; one without a signature is an ordinary API call (a bearer token with
``events.emit``, when auth is on).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from raftsched.model import validate_name

__all__ = ["MIN_HOOK_SECRET", "EventHook", "parse_event_hooks"]

MIN_HOOK_SECRET = 16
"""Shortest accepted shared secret, in bytes."""

_KEYS = ("secret_file", "namespace", "key_header", "key_pointer")


@dataclass(frozen=True, slots=True)
class EventHook:
    """One event's webhook settings (its secret is left out of ``repr``)."""

    name: str
    secret: bytes = field(repr=False)
    namespace: str = "default"
    key_header: str = ""
    key_pointer: str = ""


def parse_event_hooks(
    table: Mapping[str, object] | None, base: Path, problems: list[str]
) -> tuple[EventHook, ...]:
    """The hooks of the ``[events]`` table, by name; each problem appended with its key path."""
    if table is None:
        return ()
    out: list[EventHook] = []
    for name, sub in table.items():
        where = f"events.{name}"
        try:
            validate_name(name, where)
        except Exception as exc:
            problems.append(str(exc))
            continue
        if not isinstance(sub, Mapping):
            problems.append(f"{where}: expected a table ([{where}] with secret_file = ...)")
            continue
        bad = sorted(set(sub) - set(_KEYS))
        for key in bad:
            problems.append(f"{where}.{key}: unknown key (expected one of: {', '.join(_KEYS)})")
        texts: dict[str, str] = {}
        for key in _KEYS:
            value = sub.get(key, "")
            if not isinstance(value, str):
                problems.append(f"{where}.{key}: expected a string, got {type(value).__name__}")
                value = ""
            texts[key] = value
        if not texts["secret_file"]:
            problems.append(f"{where}.secret_file: required (a file holding the shared HMAC secret)")
            continue
        path = Path(texts["secret_file"])
        path = path if path.is_absolute() else base / path
        try:
            secret = path.read_bytes().strip()
        except OSError as exc:
            problems.append(f"{where}.secret_file: cannot read {path}: {exc.strerror or exc}")
            continue
        if len(secret) < MIN_HOOK_SECRET:
            problems.append(
                f"{where}.secret_file: the secret is {len(secret)} bytes, at least {MIN_HOOK_SECRET}"
            )
            continue
        pointer = texts["key_pointer"]
        if pointer and not pointer.startswith("/"):
            problems.append(f"{where}.key_pointer: a JSON pointer starts with '/', got {pointer!r}")
            continue
        out.append(
            EventHook(
                name=name,
                secret=secret,
                namespace=texts["namespace"] or "default",
                key_header=texts["key_header"],
                key_pointer=pointer,
            )
        )
    return tuple(out)
