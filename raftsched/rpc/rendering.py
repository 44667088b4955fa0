"""Protobuf messages as the HTTP/JSON API answers them, and a cache of that rendering.

Protobuf's JSON printer (``json_format.MessageToDict``) is pure Python, even with the C (upb)
backend: under many API clients it was about 40 % of the leader's interpreter time (py-spy,
docs/dev/history.md). Most of what clients read again and again is the same message: a task
between two fires, a finished run, a page of tasks. :class:`JsonCache` keeps the rendered text
keyed by the message's type and its serialized bytes (upb serializes in C, far faster than
printing), so a message read again costs one serialization and one lookup. Equal bytes are an
equal message, so an answer from the cache is byte for byte the answer printed afresh; a
message that changed has other bytes and is printed again.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any, Final

from google.protobuf import json_format
from google.protobuf.message import Message

__all__ = ["MAX_CACHED_BYTES", "MAX_ITEM_BYTES", "JsonCache", "message_to_json"]

MAX_CACHED_BYTES: Final = 8 << 20
"""What one cache holds at most (serialized and rendered sizes together); the least recently
used go first."""
MAX_ITEM_BYTES: Final = 64 << 10
"""A message serialized larger than this is printed every time, never kept (one would push out
hundreds of small ones)."""


def message_to_json(message: Message) -> dict[str, Any]:
    """``message`` in protobuf's JSON mapping as the API answers it: proto field names, every
    field (defaults included), int64 as JSON numbers, enum values by name."""
    out: dict[str, Any] = json_format.MessageToDict(
        message,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
        unquote_int64_if_possible=True,
    )
    return out


def render(message: Message) -> str:
    """The JSON text of :func:`message_to_json` (``json.dumps``, non-ASCII as is)."""
    return json.dumps(message_to_json(message), ensure_ascii=False)


def join(texts: Iterable[str]) -> str:
    """A JSON array of rendered items, spelled as ``json.dumps`` spells a list (``", "``)."""
    return "[" + ", ".join(texts) + "]"


class JsonCache:
    """The rendered JSON text of messages, least recently used out first.

    Not thread-safe: one owner (the event loop the API answers on) calls it.
    """

    def __init__(self, max_bytes: int = MAX_CACHED_BYTES, max_item: int = MAX_ITEM_BYTES) -> None:
        self.max_bytes = max_bytes
        self.max_item = max_item
        self._items: dict[tuple[str, bytes], str] = {}
        self.size = 0
        """Bytes held now (keys' serialized bytes and the texts' characters)."""

    def text(self, message: Message) -> str:
        """:func:`render` of ``message``, from the cache when an equal message was rendered."""
        if message.ByteSize() > self.max_item:
            return render(message)
        key = (message.DESCRIPTOR.full_name, message.SerializeToString(deterministic=True))
        items = self._items
        found = items.pop(key, None)
        if found is not None:
            items[key] = found  # the most recently used is last
            return found  # the very object rendered first (tests tell a hit by identity)
        text = render(message)
        items[key] = text
        self.size += len(key[1]) + len(text)
        while self.size > self.max_bytes and items:
            old_key = next(iter(items))
            self.size -= len(old_key[1]) + len(items.pop(old_key))
        return text

    def __len__(self) -> int:
        return len(self._items)
