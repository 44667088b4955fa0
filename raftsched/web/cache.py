"""A short-lived cache for the console's cluster-wide reads (the cluster page's ``ClusterStatus``
fan-out and ``ListExecutors``), so several open tabs, or a refresh loop, do not each make the
leader answer them.

Contracts:

* An entry is served for at most ``ttl_ms`` after it was read (by the clock given, a value in:
  no clock of its own); a clock that went back makes every entry stale.
* Entries are keyed by the caller's credential (the session's bearer token, ``None`` with auth
  off) and the read: one principal never sees what another's call returned, and the RPC's own
  authorization decided, for that credential, at most ``ttl_ms`` ago. The console checks the
  session's token on every request before any view runs, so a revoked or expired token gets
  nothing from here.
* A read that raises is not cached (the next request asks again).
* At most ``max_entries`` entries; the oldest go first. Thread-safe.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Any, Final, TypeVar

__all__ = ["TTL_MS", "ReadCache"]

TTL_MS: Final = 1000
"""How long a cluster-wide figure may be served from the cache (the live pages poll every 3 s)."""

T = TypeVar("T")


class ReadCache:
    def __init__(self, now_ms: Callable[[], int], ttl_ms: int = TTL_MS, max_entries: int = 256) -> None:
        self._now_ms = now_ms
        self.ttl_ms = ttl_ms
        self._max = max_entries
        self._entries: OrderedDict[Hashable, tuple[int, Any]] = OrderedDict()
        self._lock = threading.Lock()

    def get(self, credential: str | None, what: Hashable, read: Callable[[], T]) -> T:
        """``read()``'s result for ``(credential, what)``, from the cache if it was read less than
        ``ttl_ms`` ago. ``read`` runs outside the lock (two callers may both read; both are fine)."""
        key = (credential, what)
        now = self._now_ms()
        with self._lock:
            found = self._entries.get(key)
            if found is not None and 0 <= now - found[0] < self.ttl_ms:
                value: T = found[1]
                return value
        value = read()
        with self._lock:
            self._entries.pop(key, None)
            self._entries[key] = (now, value)
            while self._entries:  # entries are in the order they were read: drop the stale head
                at, _ = next(iter(self._entries.values()))
                if 0 <= now - at < self.ttl_ms:
                    break
                self._entries.popitem(last=False)
            while len(self._entries) > self._max:
                self._entries.popitem(last=False)
        return value

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
