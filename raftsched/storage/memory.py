"""In-memory stores for simulation and for users' own tests: a :class:`raftsched.abc.StateStore`
and a :class:`raftsched.abc.ExecutionLog`.

Unlike the LMDB store, :class:`MemoryStore`'s readers see writes as soon as they are made (there
is no separate committed view); ``commit`` only records the applied index. Thread safety: in
both classes one lock guards all access, so readers on other threads never see a structure
mid-update. "Durable" here means: for as long as the object lives, so a simulated restart
reuses the same object.
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

    def scan_keys(self, start: bytes, end: bytes, *, limit: int) -> list[bytes]:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        with self._lock:
            lo = bisect.bisect_left(self._keys, start)
            hi = min(bisect.bisect_left(self._keys, end), lo + limit)
            return self._keys[lo:hi] if lo < hi else []

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

    def failure(self) -> BaseException | None:
        """Never set: memory does not fill (see :meth:`raftsched.abc.StateStore.failure`)."""
        return None

    def replace_all(self, entries: Iterator[tuple[bytes, bytes]], applied_index: int) -> None:
        with self._lock:
            self._data = dict(entries)
            self._keys = sorted(self._data)
            self._applied = applied_index


_MAX_EXECUTION_KEY = 511  # as the LMDB log: the contract is the same for both


class MemoryExecutionLog:
    """The :class:`raftsched.abc.ExecutionLog` contract kept in a dict, in insertion order.

    ``flush`` does nothing (there is no disk). After ``close`` every other call raises
    :class:`RuntimeError`, as the LMDB log does; a simulated executor restart reuses the open log.
    """

    def __init__(self) -> None:
        # key -> (value, settled). A dict keeps insertion order, and overwriting a key keeps its
        # place, which is exactly the insertion sequence the contract asks for.
        self._entries: dict[str, tuple[bytes, bool]] = {}
        self._settled_at: dict[str, int] = {}  # settled key -> when it was settled (ms)
        self._lock = threading.Lock()
        self._closed = False

    def _live(self) -> None:
        if self._closed:
            raise RuntimeError("execution log is closed")

    @staticmethod
    def _check(key: str) -> None:
        if not 0 < len(key.encode("utf-8")) <= _MAX_EXECUTION_KEY:
            raise ValueError(
                f"execution log keys must be 1 to {_MAX_EXECUTION_KEY} UTF-8 bytes, got {len(key.encode())}"
            )

    def get(self, key: str) -> tuple[bytes, bool] | None:
        self._check(key)
        with self._lock:
            self._live()
            found = self._entries.get(key)
            return found

    def insert(self, key: str, value: bytes) -> tuple[bytes, bool] | None:
        return self.insert_many([(key, value)])[0]

    def insert_many(self, items: list[tuple[str, bytes]]) -> list[tuple[bytes, bool] | None]:
        for key, _ in items:
            self._check(key)
        out: list[tuple[bytes, bool] | None] = []
        with self._lock:
            self._live()
            for key, value in items:
                found = self._entries.get(key)
                if found is not None:
                    out.append(found)
                    continue
                self._entries[key] = (value, False)
                out.append(None)
        return out

    def update(self, items: list[tuple[str, bytes, bool]], at_ms: int = 0) -> None:
        with self._lock:
            self._live()
            for key, _, _ in items:
                if key not in self._entries:
                    raise KeyError(key)
            for key, value, settled in items:
                self._entries[key] = (value, settled)
                if settled:
                    self._settled_at.setdefault(key, at_ms)
                else:
                    self._settled_at.pop(key, None)

    def settle(self, keys: list[str], at_ms: int = 0) -> None:
        with self._lock:
            self._live()
            for key in keys:
                if key not in self._entries:
                    raise KeyError(key)
            for key in keys:
                self._entries[key] = (self._entries[key][0], True)
                self._settled_at.setdefault(key, at_ms)

    def unsettled(self) -> list[tuple[str, bytes]]:
        with self._lock:
            self._live()
            return [(key, value) for key, (value, settled) in self._entries.items() if not settled]

    def items(self) -> list[tuple[str, bytes, bool]]:
        with self._lock:
            self._live()
            return [(key, value, settled) for key, (value, settled) in self._entries.items()]

    def prune_settled_before(self, cutoff_ms: int, limit: int) -> list[str]:
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        with self._lock:
            self._live()
            order = {key: i for i, key in enumerate(self._entries)}
            due = sorted((at, order[key], key) for key, at in self._settled_at.items() if at <= cutoff_ms)[
                :limit
            ]
            for _, _, key in due:
                del self._entries[key]
                del self._settled_at[key]
            return [key for _, _, key in due]

    def sizes(self) -> tuple[int, int]:
        with self._lock:
            self._live()
            return len(self._entries), sum(len(k.encode()) + len(v) for k, (v, _) in self._entries.items())

    def __len__(self) -> int:
        with self._lock:
            self._live()
            return len(self._entries)

    def flush(self) -> None:
        return None

    def close(self) -> None:
        with self._lock:
            self._closed = True
