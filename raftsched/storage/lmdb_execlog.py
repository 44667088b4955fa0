"""The LMDB :class:`raftsched.abc.ExecutionLog`: an executor's durable record of execution ids.

:class:`raftsched.executor.dedupe.DedupeLog` builds the "run each execution id once" rules on
top; this module only stores bytes, one LMDB transaction per call.
"""

from __future__ import annotations

import logging
import os
import struct
from pathlib import Path
from types import TracebackType
from typing import Any

from raftsched.errors import StoreDamaged
from raftsched.storage import lmdb_env
from raftsched.storage.lmdb_env import INDEX, MAX_KEY, StoreUsage, valid_key
from raftsched.timing.clock import SystemClock

log = logging.getLogger(__name__)


class LmdbExecutionLog:
    """The executor's durable log of execution ids: string key → opaque value, plus two facts per key.

    Every key has an *insertion sequence* (fixed when it is first inserted) and a *settled* flag
    (False when inserted): the :class:`raftsched.abc.ExecutionLog` contract.

    Layout: an environment directory ``<path>/executions`` with five named databases:
    ``entries`` (key → 8-byte sequence + value), ``order`` (sequence → key, every key),
    ``unsettled`` (sequence → key, unsettled keys only), ``settled_at`` (sequence → 8-byte
    settle time in ms, settled keys only) and ``settled`` (settle time + sequence → key, settled
    keys only), so reopening reads only the unsettled keys and :meth:`prune_settled_before` walks
    the longest-settled keys first. A log written before
    the two settle-time databases existed gets its settled keys indexed as settled at the first
    open (so they age from then). Each method is one LMDB transaction, committed
    before it returns; with ``sync=True`` (the default) it is fsynced, so it survives a host
    crash, not only a process crash.

    One process owns a log: opening it takes an exclusive ``flock`` on ``executions/owner.lock``
    and a second open (from any process, or the same one) raises :class:`RuntimeError` at once.
    Methods may be called from any thread; each blocks for its disk write. Keys are non-empty and
    at most 511 UTF-8 bytes (``ValueError`` otherwise).
    """

    def __init__(self, path: Path, map_size: int = 64 << 30, sync: bool = True) -> None:
        import fcntl  # POSIX only, like the rest of the executor

        self._dir = Path(path) / "executions"
        self._dir.mkdir(mode=0o700, parents=True, exist_ok=True)
        self._lock_fd = os.open(self._dir / "owner.lock", os.O_RDWR | os.O_CREAT, 0o600)
        try:
            fcntl.flock(self._lock_fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            os.close(self._lock_fd)
            raise RuntimeError(f"execution log {self._dir} is open in another process (or twice)") from None
        env: Any = None
        try:
            env = lmdb_env.open_env(self._dir, map_size=map_size, max_dbs=5, sync=sync)
            self._entries = env.open_db(b"entries")
            self._order = env.open_db(b"order")
            self._unsettled = env.open_db(b"unsettled")
            self._settled_at = env.open_db(b"settled_at")
            self._settled = env.open_db(b"settled")
            with env.begin(write=False) as txn:
                # Read every page once: damage shows here, as one clear error, not mid-attempt.
                for db in (self._entries, self._order, self._unsettled, self._settled_at, self._settled):
                    for _pair in txn.cursor(db).iternext():
                        pass
                with txn.cursor(self._order) as cur:
                    self._next_seq: int = INDEX.unpack(cur.key())[0] + 1 if cur.last() else 1
            self._index_unindexed(env, SystemClock().now_ms())
        except BaseException as exc:
            if env is not None:
                env.close()
            os.close(self._lock_fd)
            if isinstance(exc, lmdb_env.Error | struct.error):
                raise StoreDamaged(str(self._dir / "data.mdb"), f"execution log: LMDB: {exc}") from None
            raise
        self._env = env
        self._closed = False
        self._alarm = lmdb_env.UsageAlarm(
            f"execution log {self._dir}", "the executor's --map-size (map_size=)", log
        )

    def _index_unindexed(self, env: Any, now_ms: int) -> None:
        """Give every settled key without a settle time ``now_ms`` (a log from before they were
        recorded). One pass at open; nothing to do on a log written by this version."""
        with env.begin(write=True) as txn:
            settled = txn.stat(self._order)["entries"] - txn.stat(self._unsettled)["entries"]
            if settled <= txn.stat(self._settled_at)["entries"]:
                return
            at = INDEX.pack(now_ms)
            for seq, raw in txn.cursor(self._order):
                if txn.get(seq, db=self._unsettled) is None and txn.get(seq, db=self._settled_at) is None:
                    txn.put(seq, at, db=self._settled_at)
                    txn.put(at + seq, raw, db=self._settled)

    @property
    def path(self) -> Path:
        """The LMDB data file, as errors name it."""
        return self._dir / "data.mdb"

    @staticmethod
    def _key(key: str) -> bytes:
        raw = key.encode("utf-8")
        if not valid_key(raw):
            raise ValueError(f"execution log keys must be 1 to {MAX_KEY} UTF-8 bytes, got {len(raw)}")
        return raw

    def _live(self) -> Any:
        if self._closed:
            raise RuntimeError("execution log is closed")
        return self._env

    def get(self, key: str) -> tuple[bytes, bool] | None:
        """``(value, settled)`` for ``key``, or None if absent."""
        raw = self._key(key)
        with self._live().begin(write=False, buffers=False) as txn:
            stored: bytes | None = txn.get(raw, db=self._entries)
            if stored is None:
                return None
            return stored[INDEX.size :], txn.get(stored[: INDEX.size], db=self._unsettled) is None

    def insert(self, key: str, value: bytes) -> tuple[bytes, bool] | None:
        """Insert ``key`` (unsettled) if absent and return None; if present, change nothing and
        return its ``(value, settled)``. Atomic: of two racing inserts exactly one returns None."""
        return self.insert_many([(key, value)])[0]

    def insert_many(self, items: list[tuple[str, bytes]]) -> list[tuple[bytes, bool] | None]:
        """:meth:`insert` for each item, in order, in one write transaction (one commit for a
        burst of dispatches instead of one each). A key repeated in ``items`` is inserted by its
        first occurrence; later ones see it. A bad key raises ``ValueError`` and changes nothing."""
        raws = [self._key(key) for key, _ in items]
        out: list[tuple[bytes, bool] | None] = []
        with self._live().begin(write=True, buffers=False) as txn:
            for raw, (_, value) in zip(raws, items, strict=True):
                stored: bytes | None = txn.get(raw, db=self._entries)
                if stored is not None:
                    settled = txn.get(stored[: INDEX.size], db=self._unsettled) is None
                    out.append((stored[INDEX.size :], settled))
                    continue
                # LMDB runs one write transaction at a time, so this counter needs no lock of its own.
                seq = INDEX.pack(self._next_seq)
                self._next_seq += 1
                txn.put(raw, seq + value, db=self._entries)
                txn.put(seq, raw, db=self._order)
                txn.put(seq, raw, db=self._unsettled)
                out.append(None)
        return out

    def update(self, items: list[tuple[str, bytes, bool]], at_ms: int = 0) -> None:
        """Overwrite the value and settled flag of existing keys, all in one transaction.

        The insertion sequence is kept; a key that becomes settled is settled at ``at_ms``. A
        missing key raises ``KeyError`` and changes nothing.
        """
        with self._live().begin(write=True, buffers=False) as txn:
            for key, value, settled in items:
                raw = self._key(key)
                stored: bytes | None = txn.get(raw, db=self._entries)
                if stored is None:
                    raise KeyError(key)  # the context manager aborts the transaction
                seq = stored[: INDEX.size]
                txn.put(raw, seq + value, db=self._entries)
                if settled:
                    self._settle_seq(txn, seq, raw, at_ms)
                elif txn.put(seq, raw, db=self._unsettled, overwrite=False):
                    # It was settled (the rare case: an entry un-settled again); the common one, a
                    # finish of an unsettled entry, costs this one lookup and no write.
                    self._unindex(txn, seq)

    def _settle_seq(self, txn: Any, seq: bytes, raw: bytes, at_ms: int) -> None:
        if txn.pop(seq, db=self._unsettled) is None:  # one lookup for "is it unsettled" and the delete
            return  # settled already: it keeps its first settle time
        at = INDEX.pack(at_ms)
        txn.put(seq, at, db=self._settled_at)
        txn.put(at + seq, raw, db=self._settled)

    def _unindex(self, txn: Any, seq: bytes) -> None:
        at: bytes | None = txn.get(seq, db=self._settled_at)
        if at is not None:
            txn.delete(seq, db=self._settled_at)
            txn.delete(at + seq, db=self._settled)

    def settle(self, keys: list[str], at_ms: int = 0) -> None:
        """Mark existing keys settled at ``at_ms`` (their values stay as written; a key settled
        already keeps its settle time), in one transaction. A missing key raises ``KeyError`` and
        changes nothing."""
        with self._live().begin(write=True, buffers=False) as txn:
            for key in keys:
                raw = self._key(key)
                stored: bytes | None = txn.get(raw, db=self._entries)
                if stored is None:
                    raise KeyError(key)  # the context manager aborts the transaction
                self._settle_seq(txn, stored[: INDEX.size], raw, at_ms)

    def unsettled(self) -> list[tuple[str, bytes]]:
        """Every unsettled ``(key, value)``, in insertion order."""
        out: list[tuple[str, bytes]] = []
        with self._live().begin(write=False, buffers=False) as txn:
            for _seq, raw in txn.cursor(self._unsettled):
                stored: bytes = txn.get(raw, db=self._entries)
                out.append((raw.decode("utf-8"), stored[INDEX.size :]))
        return out

    def items(self) -> list[tuple[str, bytes, bool]]:
        """Every ``(key, value, settled)``, in insertion order, in one read transaction."""
        out: list[tuple[str, bytes, bool]] = []
        with self._live().begin(write=False, buffers=False) as txn:
            unsettled = {seq for seq, _ in txn.cursor(self._unsettled)}
            for seq, raw in txn.cursor(self._order):
                stored: bytes = txn.get(raw, db=self._entries)
                out.append((raw.decode("utf-8"), stored[INDEX.size :], seq not in unsettled))
        return out

    def prune_settled_before(self, cutoff_ms: int, limit: int) -> list[str]:
        """Delete up to ``limit`` keys settled at or before ``cutoff_ms``, longest-settled first;
        return them. Unsettled keys are never deleted. One transaction, so ``limit`` bounds how
        long it holds LMDB's single writer lock."""
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        removed: list[str] = []
        if cutoff_ms < 0:
            return removed  # settle times are ms since the epoch: none is that old
        end = INDEX.pack(min(cutoff_ms + 1, (1 << 64) - 1))
        with self._live().begin(write=True, buffers=False) as txn, txn.cursor(self._settled) as cur:
            ok = cur.first()
            while ok and len(removed) < limit:
                at_seq, raw = cur.key(), cur.value()
                if at_seq[: INDEX.size] >= end:
                    break
                seq = at_seq[INDEX.size :]
                txn.delete(raw, db=self._entries)
                txn.delete(seq, db=self._order)
                txn.delete(seq, db=self._settled_at)
                cur.delete()
                ok = bool(cur.key())
                removed.append(raw.decode("utf-8"))
        return removed

    def sizes(self) -> tuple[int, int]:
        """``(entries, bytes)``: how many keys the log holds, and the bytes of the pages its
        databases occupy now. Pages freed by pruning are not counted: LMDB keeps them in its
        file (which never shrinks) and reuses them for later writes."""
        env = self._live()
        with env.begin(write=False) as txn:
            entries: int = txn.stat(self._entries)["entries"]
            stats = [env.stat()] + [
                txn.stat(db)
                for db in (self._entries, self._order, self._unsettled, self._settled_at, self._settled)
            ]
        pages = sum(st["branch_pages"] + st["leaf_pages"] + st["overflow_pages"] for st in stats)
        return entries, pages * stats[0]["psize"]

    def __len__(self) -> int:
        with self._live().begin(write=False) as txn:
            count: int = txn.stat(self._entries)["entries"]
            return count

    def flush(self) -> None:
        """fsync everything committed so far (for ``sync=False``: call it periodically). Also
        warns (at most once a minute) when the map is more than 80 % full."""
        if not self._closed:
            self._env.sync(True)
            self._alarm.check(self.usage())

    def usage(self) -> StoreUsage:
        """Bytes used and the map size (for metrics)."""
        return lmdb_env.usage(self._live())

    def close(self) -> None:
        """Close the environment and release the owner lock. Idempotent."""
        if self._closed:
            return
        self._closed = True
        self._env.close()
        os.close(self._lock_fd)

    def __enter__(self) -> LmdbExecutionLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
