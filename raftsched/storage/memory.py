"""An in-memory :class:`raftsched.abc.StateStore`, for simulation and for users' own tests.

Unlike the LMDB store, readers see writes as soon as they are made (there is no separate
committed view); ``commit`` only records the applied index. Thread safety: one lock guards all
access, so readers on other threads never see a structure mid-update.
"""

from __future__ import annotations

import bisect
import threading
from collections.abc import Iterator


class MemoryStore:
    def __init__(self) -> None:
        self._data: dict[bytes, bytes] = {}
        self._keys: list[bytes] = []
        self._applied = 0
        self._lock = threading.RLock()

    def get(self, key: bytes) -> bytes | None:
        with self._lock:
            return self._data.get(key)

    def put(self, key: bytes, value: bytes) -> None:
        with self._lock:
            if key not in self._data:
                bisect.insort(self._keys, key)
            self._data[key] = value

    def delete(self, key: bytes) -> None:
        with self._lock:
            if self._data.pop(key, None) is not None:
                i = bisect.bisect_left(self._keys, key)
                del self._keys[i]

    def scan(
        self, start: bytes, end: bytes, *, reverse: bool = False, limit: int = 0
    ) -> Iterator[tuple[bytes, bytes]]:
        with self._lock:
            lo = bisect.bisect_left(self._keys, start)
            hi = bisect.bisect_left(self._keys, end)
            keys = self._keys[lo:hi]
            if reverse:
                keys.reverse()
            if limit:
                keys = keys[:limit]
            pairs = [(k, self._data[k]) for k in keys]
        return iter(pairs)

    def commit(self, applied_index: int) -> None:
        with self._lock:
            self._applied = max(self._applied, applied_index)

    def applied_index(self) -> int:
        return self._applied

    def reader(self) -> MemoryStore:
        return self

    def __enter__(self) -> MemoryStore:
        return self

    def __exit__(self, *exc: object) -> None:
        return None

    def replace_all(self, entries: Iterator[tuple[bytes, bytes]], applied_index: int) -> None:
        with self._lock:
            self._data = dict(entries)
            self._keys = sorted(self._data)
            self._applied = applied_index
