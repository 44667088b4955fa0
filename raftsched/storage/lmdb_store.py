"""The LMDB :class:`raftsched.abc.StateStore`: the durable image of the replicated state.

Layout: an environment directory ``<path>/state`` with two named databases. ``state`` holds the
replicated keys; ``local`` holds the node-local applied index, so a scan of ``state`` never sees
it. The index and the writes it covers are committed in one LMDB transaction, so after a
``kill -9`` at any point the store reopens at the last commit, data and index together.

Threads:

* The *apply thread* (pysyncobj's tick thread) owns the write path: ``put``/``delete``/``get``/
  ``scan``/``commit``/``replace_all``/``load_snapshot_copy``. The first write opens one write
  transaction that stays open until ``commit``; ``get``/``scan`` read through it, so they see the
  uncommitted batch. LMDB write transactions are bound to the thread that began them: calling a
  write-path method from another thread while a batch is open raises :class:`RuntimeError`.
  (With no batch open, ``get``/``scan`` read committed data through a short read transaction.)
* Any thread may use :meth:`LmdbStore.reader` (a short read-only transaction over committed
  data), :meth:`LmdbStore.applied_index` and :meth:`LmdbStore.stats`.
* Readers and the environment swap of :meth:`LmdbStore.load_snapshot_copy` (and ``close``) are
  ordered by a shared/exclusive guard: readers share it, the swap waits for open readers to
  finish and holds new ones back until the new environment is open.

Failure: if an LMDB call fails inside the write transaction (``MapFullError``, disk full...),
LMDB can only abort it. If that loses writes made by earlier calls, then rather than let a later
``commit`` record an index covering writes that never happened, the store refuses every further
write-path call with :class:`RuntimeError`: close and reopen it (the node restarts and replays
from its last committed index). Readers keep working. A failure in a transaction the failing
call began itself loses nothing else and only raises.

Every write-path failure of LMDB or the disk (the map full, ``ENOSPC``, ``EIO``) is also kept
as :meth:`LmdbStore.failure`: a node that applied an entry whose writes did not all land cannot
go on applying (its in-memory state is ahead of its store), so it checks this after each apply.

Capacity: :meth:`LmdbStore.usage` reports the bytes used against the map size; ``commit`` checks
it every few seconds and logs a warning (at most once a minute) once it passes 80 %.

Keys are 1 to 511 bytes (LMDB's limit): ``put`` raises :class:`ValueError` for any other key,
while ``get`` and ``delete`` treat such a key as absent.

Integrity: LMDB checks no data. The store keeps a checksum of its content, the sum (mod 2**128)
of a 128-bit BLAKE2b hash of every ``(key, value)`` of ``state`` below ``replicated_below``
(node-local keys are left out, so replicas at the same index have the same sum). Every write
updates it (the old value comes back from the same LMDB call), and each commit stores it in
``local`` with the applied index. :meth:`LmdbStore.verify` reads the whole committed store in one
read transaction and compares; a byte changed behind the store's back (a disk, a copy, another
process writing through lmdb) shows as a mismatch, damaged LMDB pages as an LMDB error: both are
:class:`raftsched.errors.StoreDamaged`. So is a store that cannot be opened or read at start.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import hashlib
import logging
import os
import shutil
import struct
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from types import TracebackType
from typing import Any, BinaryIO, ClassVar

from raftsched.errors import StoreDamaged
from raftsched.storage import lmdb_env
from raftsched.storage.lmdb_env import INDEX as _INDEX
from raftsched.storage.lmdb_env import MAX_KEY as _MAX_KEY
from raftsched.storage.lmdb_env import StoreUsage
from raftsched.storage.lmdb_env import valid_key as _valid_key

CopyCheck = Callable[[Callable[[bytes], bytes | None]], None]
"""Checks a snapshot copy before it replaces the store; called with ``get(key)`` on the copy."""

__all__ = ["LmdbReader", "LmdbStore", "StoreUsage", "Verified", "content_hash"]

log = logging.getLogger(__name__)

_get_ident = threading.get_ident

_USAGE_CHECK_S = 5.0  # how often commit looks at the map's fill level

# fault(operation) is called before LMDB commits ("commit", "replace_all"); it raises to
# simulate a disk failure through the real failure path (tests).
Fault = Callable[[str], None]


_STATE_DB = b"state"
_LOCAL_DB = b"local"
_APPLIED_KEY = b"applied_index"
_SUM_KEY = b"content_sum"  # in `local`: the checksum of `state` committed with the applied index
_SUM_BITS = 128
_SUM_MASK = (1 << _SUM_BITS) - 1
_blake2b = hashlib.blake2b
_from_bytes = int.from_bytes
_LMDB_MAGIC = 0xBEEFC0DE
_COPY_BUF = 1 << 20

# fetch(start, end, reverse, n, after) -> up to n pairs; see _read_range.
_Fetch = Callable[[bytes, bytes, bool, int, bytes | None], list[tuple[bytes, bytes]]]


class _SwapGuard:
    """Many holders in shared mode (readers) or one in exclusive mode (env swap, close).

    A waiting exclusive holder stops new shared holders, so a stream of readers cannot starve a
    snapshot install. A thread that already holds the guard in shared mode may take it again
    (nested readers) without waiting; taking it exclusively while holding it shared would wait
    for itself, so that raises :class:`RuntimeError`. Acquire and release on the same thread.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition(threading.Lock())
        self._shared = 0
        self._exclusive = False
        self._exclusive_waiting = 0
        self._mine = threading.local()

    def _held_here(self) -> int:
        n: int = getattr(self._mine, "n", 0)
        return n

    @contextmanager
    def shared(self) -> Iterator[None]:
        nested = self._held_here() > 0
        with self._cond:
            while not nested and (self._exclusive or self._exclusive_waiting):
                self._cond.wait()
            self._shared += 1
        self._mine.n = self._held_here() + 1
        try:
            yield
        finally:
            self._mine.n -= 1
            with self._cond:
                self._shared -= 1
                if not self._shared:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        if self._held_here():
            raise RuntimeError("this thread holds an open reader; close it before swapping or closing")
        with self._cond:
            self._exclusive_waiting += 1
            try:
                while self._exclusive or self._shared:
                    self._cond.wait()
            finally:
                self._exclusive_waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()

    def exclusive_waiting(self) -> int:
        """How many threads wait for exclusive mode (for tests)."""
        with self._cond:
            return self._exclusive_waiting


def _read_range(
    txn: Any, db: Any, start: bytes, end: bytes, reverse: bool, n: int, after: bytes | None
) -> list[tuple[bytes, bytes]]:
    """Up to ``n`` pairs with ``start <= key < end`` (``n == 0``: all), in order or reversed.

    ``after`` continues an earlier chunk: only keys strictly after it in scan direction. LMDB
    cannot position at keys longer than 511 bytes, so such bounds are cut to 511 bytes; no stored
    key lies strictly between the cut bound and the real one, only possibly the cut bound itself.
    """
    out: list[tuple[bytes, bytes]] = []
    if start >= end:
        return out
    cur = txn.cursor(db)
    try:
        if reverse:
            hi, hi_incl = (after, False) if after is not None else (end, False)
            if len(hi) > _MAX_KEY:
                hi, hi_incl = hi[:_MAX_KEY], True
            if not cur.set_range(hi):
                ok = cur.last()  # every key is below hi
            elif hi_incl and cur.key() == hi:
                ok = True
            else:
                ok = cur.prev()
            if not ok:
                return out
            for k, v in cur.iterprev():
                if k < start:
                    break
                out.append((k, v))
                if len(out) == n:
                    break
        else:
            lo, lo_excl = (after, True) if after is not None else (start, False)
            if len(lo) > _MAX_KEY:
                lo, lo_excl = lo[:_MAX_KEY], True
            if not cur.set_range(lo):
                return out
            if lo_excl and cur.key() == lo and not cur.next():
                return out
            for k, v in cur.iternext():
                if k >= end:
                    break
                out.append((k, v))
                if len(out) == n:
                    break
    finally:
        cur.close()
    return out


def _read_keys(txn: Any, db: Any, start: bytes, end: bytes, n: int) -> list[bytes]:
    """Up to ``n`` keys with ``start <= key < end``, in order, read without their values."""
    out: list[bytes] = []
    if start >= end:
        return out
    lo, lo_excl = start, False
    if len(lo) > _MAX_KEY:
        lo, lo_excl = lo[:_MAX_KEY], True
    cur = txn.cursor(db)
    try:
        if not cur.set_range(lo):
            return out
        if lo_excl and cur.key() == lo and not cur.next():
            return out
        for k in cur.iternext(keys=True, values=False):
            if k >= end:
                break
            out.append(k)
            if len(out) == n:
                break
    finally:
        cur.close()
    return out


def _chunked_scan(
    fetch: _Fetch,
    start: bytes,
    end: bytes,
    reverse: bool,
    limit: int,
    chunk: int,
) -> Iterator[tuple[bytes, bytes]]:
    """Fetch the first chunk now; later chunks (if any) lazily, each after the last key yielded."""
    if limit < 0:
        raise ValueError(f"limit must be >= 0, got {limit}")
    want = min(limit, chunk) if limit else chunk
    first = fetch(start, end, reverse, want, None)
    if len(first) < want or len(first) == limit:
        return iter(first)
    return _more(fetch, first, start, end, reverse, limit, chunk)


def _more(
    fetch: _Fetch,
    batch: list[tuple[bytes, bytes]],
    start: bytes,
    end: bytes,
    reverse: bool,
    limit: int,
    chunk: int,
) -> Iterator[tuple[bytes, bytes]]:
    remaining = limit - len(batch) if limit else 0
    while True:
        yield from batch
        if limit and not remaining:
            return
        want = min(remaining, chunk) if limit else chunk
        batch = fetch(start, end, reverse, want, batch[-1][0])
        if not batch:
            return
        if limit:
            remaining -= len(batch)
        if len(batch) < want:
            yield from batch
            return


def _key_error(key: bytes) -> ValueError:
    return ValueError(f"LMDB keys must be 1 to {_MAX_KEY} bytes, got {len(key)}")


class CorruptRecord(RuntimeError):
    """A record of the store's own (the applied index, the checksum) has an impossible size."""


def _decode_index(raw: bytes | None) -> int:
    if raw is None:
        return 0
    if len(raw) != _INDEX.size:
        raise CorruptRecord(f"corrupt applied index: {len(raw)} bytes, expected {_INDEX.size}")
    value: int = _INDEX.unpack(raw)[0]
    return value


def content_hash(key: bytes, value: bytes) -> int:
    """One pair's share of the store checksum (the key's length first, so pairs cannot blur): the
    128-bit BLAKE2b of ``len(key)`` (2 bytes, big-endian), ``key`` and ``value``, as an integer.
    Stored checksums hold these values: they never change."""
    # BLAKE2b hashes a stream: a copy of a hasher already fed the length prefix, fed key and value,
    # gives the digest of the concatenation for about 3/4 of the instructions (no new hasher's
    # parameter block, no concatenated copy; it is a tenth of a node's apply, issue 31).
    # LmdbStore.put inlines these steps; tests/unit/test_lmdb_content_hash.py checks both against
    # the one-shot form.
    n = len(key)
    if n > _MAX_KEY:  # not a key LMDB stores; the one-shot form (no cached prefix that long)
        return _from_bytes(_blake2b(n.to_bytes(2, "big") + key + value, digest_size=16).digest(), "big")
    h = (_PREFIXED[n] or _prefixed(n)).copy()
    h.update(key)
    h.update(value)
    return _from_bytes(h.digest(), "big")


# _PREFIXED[n]: a 128-bit BLAKE2b hasher fed only n as 2 bytes, big-endian (content_hash's prefix),
# made on first use and never fed again, only copied (copying reads it: any thread may).
_PREFIXED: list[Any] = [None] * (_MAX_KEY + 1)


def _prefixed(n: int) -> Any:
    h = _PREFIXED[n] = _blake2b(n.to_bytes(2, "big"), digest_size=16)
    return h


def _decode_sum(raw: bytes | None) -> int | None:
    if raw is None:
        return None
    if len(raw) != _SUM_BITS // 8:
        raise CorruptRecord(f"corrupt content checksum: {len(raw)} bytes, expected {_SUM_BITS // 8}")
    return _from_bytes(raw, "big")


def _encode_sum(value: int) -> bytes:
    return value.to_bytes(_SUM_BITS // 8, "big")


def _scan_sum(txn: Any, db: Any, below: bytes) -> tuple[int, int]:
    """``(checksum, pairs)`` of every pair of ``db`` with a key below ``below``, read in ``txn``."""
    total = 0
    pairs = 0
    for key, value in txn.cursor(db).iternext():
        if key >= below:
            break
        total += content_hash(key, value)
        pairs += 1
    return total & _SUM_MASK, pairs


class Verified:
    """What :meth:`LmdbStore.verify` found: the applied index and the checksum of the data read."""

    __slots__ = ("applied_index", "checksum", "pairs")

    def __init__(self, applied_index: int, checksum: int, pairs: int) -> None:
        self.applied_index = applied_index
        self.checksum = checksum
        self.pairs = pairs


def _fsync_dir(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


class LmdbReader:
    """A read-only view of committed data (one LMDB read transaction). Use as a context manager.

    The transaction begins in ``__enter__`` and is aborted in ``__exit__``; keep it short, since
    an open read transaction stops LMDB reusing freed pages. Any thread may use a reader, but one
    reader must not be used by two threads at once, and ``__exit__`` must run on the thread that
    ran ``__enter__``. ``scan`` follows :meth:`LmdbStore.scan`; within one reader every chunk
    comes from the same snapshot, so the result is consistent, but it must be consumed before
    the reader exits.
    """

    def __init__(self, begin: Callable[[], tuple[Any, Any, Any, Any]], chunk: int) -> None:
        # begin() -> (held guard, read txn, state db, local db), the guard entered in shared mode.
        self._begin = begin
        self._chunk = chunk
        self._txn: Any = None
        self._db: Any = None
        self._local: Any = None
        self._held: Any = None

    def __enter__(self) -> LmdbReader:
        if self._held is not None:
            raise RuntimeError("reader is already open")
        self._held, self._txn, self._db, self._local = self._begin()
        return self

    def applied_index(self) -> int:
        """The applied index committed with the data this reader sees."""
        return _decode_index(self._txn_or_raise().get(_APPLIED_KEY, db=self._local))

    def __exit__(self, *exc: object) -> None:
        held, self._held = self._held, None
        if held is None:
            return
        try:
            txn, self._txn = self._txn, None
            txn.abort()
        finally:
            held.__exit__(None, None, None)

    def _txn_or_raise(self) -> Any:
        if self._txn is None:
            raise RuntimeError("reader is not open; use it as a context manager")
        return self._txn

    def get(self, key: bytes) -> bytes | None:
        txn = self._txn_or_raise()
        if not _valid_key(key):
            return None
        value: bytes | None = txn.get(key, db=self._db)
        return value

    def scan(
        self, start: bytes, end: bytes, *, reverse: bool = False, limit: int = 0
    ) -> Iterator[tuple[bytes, bytes]]:
        def fetch(s: bytes, e: bytes, r: bool, n: int, after: bytes | None) -> list[tuple[bytes, bytes]]:
            return _read_range(self._txn_or_raise(), self._db, s, e, r, n, after)

        return _chunked_scan(fetch, start, end, reverse, limit, self._chunk)


_MADV_DONTNEED = 4  # Linux <sys/mman.h>
_libc: Any = None


def _drop_mapped_pages(path: str) -> int:
    """``madvise(MADV_DONTNEED)`` every mapping of file ``path`` in this process: its pages leave
    the process's resident set and stay in the page cache (the next read maps them again, a minor
    fault, from the same file). Returns the bytes of the ranges advised. Linux only (0 elsewhere).

    The caller must keep the mapping alive meanwhile (the environment open): advising a range
    that was unmapped and reused would drop whatever lives there now."""
    global _libc
    if not sys.platform.startswith("linux"):
        return 0
    try:
        maps = Path("/proc/self/maps").read_text()
    except OSError:
        return 0
    if _libc is None:
        _libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
        _libc.madvise.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
    total = 0
    for line in maps.splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5] == path:
            lo, hi = (int(x, 16) for x in fields[0].split("-"))
            if _libc.madvise(lo, hi - lo, _MADV_DONTNEED) == 0:
                total += hi - lo
    return total


class LmdbStore:
    """LMDB-backed :class:`raftsched.abc.StateStore`; see the module docstring for threads and failure.

    ``sync=True`` fsyncs every commit (durable against power loss); ``sync=False`` keeps
    atomicity and survives a process crash but may lose the last commits on a host crash, like
    pysyncobj's own journal. ``map_size`` is the most the database may grow to (address space
    only; 64 GiB costs nothing on 64-bit).
    """

    # Scans fetch at most this many pairs per LMDB cursor pass; see scan().
    _SCAN_CHUNK: ClassVar[int] = 1024

    def __init__(
        self,
        path: Path,
        map_size: int = 64 << 30,
        sync: bool = True,
        fault: Fault | None = None,
        replicated_below: bytes = b"\xff" * 8,
    ) -> None:
        self._root = Path(path)
        # Keys at or above this are node-local: left out of the checksum (see the module doc).
        self._hash_below = replicated_below
        self._sum = 0  # checksum of the data including the open batch
        self._committed_sum = 0
        self._dir = self._root / "state"
        self._restore_dir = self._root / "state.restore"
        self._old_dir = self._root / "state.old"
        self._map_size = map_size
        self._sync = sync
        self._guard = _SwapGuard()
        # Guards the open batch (_txn/_owner) and _env replacement; never held across user code.
        self._txn_lock = threading.Lock()
        self._txn: Any = None
        self._owner: threading.Thread | None = None
        # threading.get_ident() of _owner (0 = none): the write path's per-call ownership check
        # compares this integer instead of calling threading.current_thread() (hot: a few puts
        # per fire on every node).
        self._owner_ident = 0
        self._broken: BaseException | None = None
        self._failure: BaseException | None = None
        self._fault = fault
        self._next_usage_check = 0.0
        self._alarm = lmdb_env.UsageAlarm(
            f"LMDB store {self._dir}", "storage.map_size (a full store stops this node)", log
        )
        self._closed = False
        self._env: Any = None
        self._state_db: Any = None
        self._local_db: Any = None
        self._applied = 0
        self._root.mkdir(parents=True, exist_ok=True)
        self._recover_swap()
        try:
            self._open_env()
        except (lmdb_env.Error, CorruptRecord) as exc:
            raise self._damaged(exc) from None

    def _damaged(self, exc: BaseException) -> StoreDamaged:
        what = f"LMDB: {exc}" if isinstance(exc, lmdb_env.Error) else str(exc)
        return StoreDamaged(str(self._dir / "data.mdb"), what)

    # -- environment ---------------------------------------------------------------------------

    def _recover_swap(self) -> None:
        """Finish or undo a ``load_snapshot_copy`` that a crash interrupted."""
        if not self._dir.exists():
            # Crashed between the two renames: the restore copy was complete and fsynced
            # before the first rename, so it is the state to keep.
            if self._restore_dir.exists():
                self._restore_dir.rename(self._dir)
            elif self._old_dir.exists():
                self._old_dir.rename(self._dir)
            else:
                return
            _fsync_dir(self._root)
        # Otherwise `state` is authoritative: a leftover restore copy may be partial.
        for stale in (self._restore_dir, self._old_dir):
            if stale.exists():
                shutil.rmtree(stale)

    def _open_env(self) -> None:
        self._dir.mkdir(mode=0o700, exist_ok=True)
        env = lmdb_env.open_env(self._dir, map_size=self._map_size, max_dbs=2, sync=self._sync)
        try:
            self._state_db = env.open_db(_STATE_DB)
            self._local_db = env.open_db(_LOCAL_DB)
            with env.begin(write=False) as txn:
                self._applied = _decode_index(txn.get(_APPLIED_KEY, db=self._local_db))
                stored = _decode_sum(txn.get(_SUM_KEY, db=self._local_db))
                self._sum_unrecorded = stored is None
                if stored is None:
                    # A store of a build without checksums (or a new one): the checksum starts
                    # from what is there; verify() can only check from the next commit on.
                    stored = _scan_sum(txn, self._state_db, self._hash_below)[0]
        except BaseException:
            env.close()
            raise
        self._env = env
        self._sum = self._committed_sum = stored

    _sum_unrecorded = False  # the checksum is not stored yet (written by the next commit)

    def _live_env(self) -> Any:
        if self._closed:
            raise RuntimeError("store is closed")
        return self._env

    # -- the write path (apply thread) ---------------------------------------------------------

    def _check_batch_locked(self) -> Any:
        """The open write txn or None; raises if the store is broken or another thread owns it."""
        if self._broken is not None:
            raise RuntimeError(
                "an earlier write failed and its batch was lost; close and reopen the store"
            ) from self._broken
        if self._txn is not None and self._owner is not threading.current_thread():
            raise RuntimeError(
                f"write batch is owned by thread {self._owner!r}; write-path calls from"
                f" {threading.current_thread()!r} are not allowed while it is open"
            )
        return self._txn

    def _open_batch(self) -> Any:
        """The open write txn, or None (after the ownership checks)."""
        txn = self._txn
        if txn is not None and self._owner_ident == _get_ident():
            return txn  # the fast path of _batch()
        with self._txn_lock:
            return self._check_batch_locked()

    def _batch(self) -> tuple[Any, bool]:
        """The write txn, begun now if none is open; and whether it was (no earlier writes in it)."""
        txn = self._txn
        if txn is not None and self._owner_ident == _get_ident():
            # Fast path, no lock: only the owner can end its own batch (close() from another
            # thread refuses while the owner lives), and a broken store has no batch.
            return txn, False
        with self._txn_lock:
            txn = self._check_batch_locked()
            if txn is not None:
                return txn, False
            self._txn = self._live_env().begin(write=True, buffers=False)
            self._owner = threading.current_thread()
            self._owner_ident = _get_ident()
            return self._txn, True

    def _abort_batch(self, exc: BaseException, fresh: bool) -> None:
        """An operation in the write txn failed: abort it. If that lost earlier writes, go broken."""
        with self._txn_lock:
            txn, self._txn, self._owner = self._txn, None, None
            self._owner_ident = 0
            if not fresh:
                self._broken = exc
            if self._failure is None and isinstance(exc, lmdb_env.DAMAGE):
                self._failure = self._damaged(exc)  # a damaged file: no restart alone fixes it
            elif self._failure is None and isinstance(exc, lmdb_env.Error | OSError):
                self._failure = exc
            self._sum = self._committed_sum  # the aborted batch's writes are gone
        if txn is not None:
            with suppress(lmdb_env.Error):  # LMDB may have ended it already
                txn.abort()

    def _end_batch(self) -> Any:
        with self._txn_lock:
            txn, self._txn, self._owner = self._txn, None, None
            self._owner_ident = 0
        return txn

    def get(self, key: bytes) -> bytes | None:
        """The value of ``key``, seeing the open batch's writes, or None."""
        txn = self._open_batch()
        if not _valid_key(key):
            return None
        if txn is None:
            with self._guard.shared(), self._live_env().begin(write=False) as rtxn:
                value: bytes | None = rtxn.get(key, db=self._state_db)
                return value
        try:
            value = txn.get(key, db=self._state_db)
        except BaseException as exc:
            self._abort_batch(exc, fresh=False)
            raise
        return value

    def put(self, key: bytes, value: bytes) -> None:
        """Write ``key`` in the batch (begun if none is open). Raises ValueError for a bad key size."""
        n = len(key)
        if not 0 < n <= _MAX_KEY:
            raise _key_error(key)
        txn = self._txn
        if txn is not None and self._owner_ident == _get_ident():
            fresh = False  # inlined fast path of _batch(): the hottest write-path call
        else:
            txn, fresh = self._batch()
        try:
            old = txn.replace(key, value, self._state_db)  # db positional: no keyword parsing
        except BaseException as exc:
            self._abort_batch(exc, fresh)
            raise
        if key < self._hash_below:
            h = (_PREFIXED[n] or _prefixed(n)).copy()  # content_hash(key, value), inlined
            h.update(key)
            h.update(value)
            total = self._sum + _from_bytes(h.digest())  # big-endian, the default (no argument to parse)
            if old is not None:
                total -= content_hash(key, old)
            self._sum = total & _SUM_MASK

    def delete(self, key: bytes) -> None:
        """Delete ``key`` in the batch (begun if none is open); a missing key is not an error."""
        if not _valid_key(key):
            return
        txn, fresh = self._batch()
        try:
            old = txn.pop(key, self._state_db)
        except BaseException as exc:
            self._abort_batch(exc, fresh)
            raise
        if old is not None and key < self._hash_below:
            self._sum = (self._sum - content_hash(key, old)) & _SUM_MASK

    def scan(
        self, start: bytes, end: bytes, *, reverse: bool = False, limit: int = 0
    ) -> Iterator[tuple[bytes, bytes]]:
        """Pairs with ``start <= key < end`` in key order (reversed if asked), at most ``limit`` (0 = all).

        Sees the open batch. The caller may put and delete while iterating. The first
        ``_SCAN_CHUNK`` (1024) pairs are read before this returns, so a scan that fits (any
        ``limit <= 1024``) is a snapshot taken at the call, exactly as in ``MemoryStore``. Longer
        scans fetch further chunks lazily, each resuming strictly after the last key yielded:
        every key comes at most once and in order, and keys written or deleted ahead of the
        iterator after the call may or may not be seen. Later chunks obey the write-path thread
        rule like any other call.
        """
        return _chunked_scan(self._fetch, start, end, reverse, limit, self._SCAN_CHUNK)

    def scan_keys(self, start: bytes, end: bytes, *, limit: int) -> list[bytes]:
        """Up to ``limit`` (>= 1) keys with ``start <= key < end``, in order, without their values
        (one cursor pass that copies no value). Sees the open batch; the list is taken at the call."""
        if limit < 1:
            raise ValueError(f"limit must be >= 1, got {limit}")
        txn = self._open_batch()
        if txn is None:
            with self._guard.shared(), self._live_env().begin(write=False) as rtxn:
                return _read_keys(rtxn, self._state_db, start, end, limit)
        try:
            return _read_keys(txn, self._state_db, start, end, limit)
        except BaseException as exc:
            self._abort_batch(exc, fresh=False)
            raise

    def _fetch(
        self, start: bytes, end: bytes, reverse: bool, n: int, after: bytes | None
    ) -> list[tuple[bytes, bytes]]:
        txn = self._open_batch()
        if txn is None:
            with self._guard.shared(), self._live_env().begin(write=False) as rtxn:
                return _read_range(rtxn, self._state_db, start, end, reverse, n, after)
        try:
            return _read_range(txn, self._state_db, start, end, reverse, n, after)
        except BaseException as exc:
            self._abort_batch(exc, fresh=False)
            raise

    def commit(self, applied_index: int) -> None:
        """Durably commit the open batch together with ``max(applied_index(), applied_index)``.

        With no open batch and no change of index this does nothing; with no batch but a higher
        index it commits just the index. The index never moves backwards (as in ``MemoryStore``);
        only ``replace_all`` and ``load_snapshot_copy`` can lower it.
        """
        new = max(self._applied, applied_index)
        if new == self._applied and self._open_batch() is None:
            return
        self._commit_batch(None, new)

    def _commit_batch(
        self, write: Callable[[Any], None] | None, applied_index: int, fault_point: str = "commit"
    ) -> None:
        """Run ``write`` (if any) on the batch's transaction, record ``applied_index`` (the key is
        written only when it changes), commit, and end the batch; on any failure the batch is
        aborted (see :meth:`_abort_batch`) and the error raised."""
        txn, fresh = self._batch()
        try:
            if write is not None:
                write(txn)
            if applied_index != self._applied:
                txn.put(_APPLIED_KEY, _INDEX.pack(applied_index), db=self._local_db)
            if self._sum != self._committed_sum or self._sum_unrecorded:
                txn.put(_SUM_KEY, _encode_sum(self._sum), db=self._local_db)
            if self._fault is not None:
                self._fault(fault_point)
            txn.commit()
        except BaseException as exc:
            self._abort_batch(exc, fresh)
            raise
        self._end_batch()
        self._applied = applied_index
        self._committed_sum = self._sum
        self._sum_unrecorded = False
        now = time.monotonic()
        if now >= self._next_usage_check:
            self._next_usage_check = now + _USAGE_CHECK_S
            self._alarm.check(self.usage())

    def content_sum(self) -> int:
        """The checksum of the data as the write path sees it (the open batch included); equal on
        every replica at the same applied index. Apply thread (any thread reads a recent value)."""
        return self._sum

    def verify(self) -> Verified:
        """Read the whole committed store in one read transaction and check it against the
        checksum committed with it; returns what was read. Raises :class:`StoreDamaged` for a
        mismatch or for pages LMDB cannot read. Any thread; it costs a full read of the store
        (1-2 s per million entries) and holds a reader (and the GIL in slices) meanwhile."""
        try:
            with self._guard.shared():
                env = self._live_env()
                with env.begin(write=False, buffers=False) as txn:
                    applied = _decode_index(txn.get(_APPLIED_KEY, db=self._local_db))
                    stored = _decode_sum(txn.get(_SUM_KEY, db=self._local_db))
                    for _pair in txn.cursor(self._local_db).iternext():
                        pass  # every page of the store is read once
                    total, pairs = _scan_sum(txn, self._state_db, self._hash_below)
                    rest = txn.cursor(self._state_db)
                    if rest.set_range(self._hash_below):
                        for _pair in rest.iternext():
                            pass
        except (lmdb_env.Error, CorruptRecord) as exc:
            raise self._damaged(exc) from None
        if stored is not None and stored != total:
            raise StoreDamaged(
                str(self._dir / "data.mdb"),
                f"its content does not match the checksum committed with it at applied index "
                f"{applied} ({pairs} entries read)",
            )
        return Verified(applied, total, pairs)

    def failure(self) -> BaseException | None:
        """The first LMDB or disk error of the write path (map full, ``ENOSPC``, ``EIO``), or None.

        Sticky until the store is reopened. Any thread may call it."""
        return self._failure

    def usage(self) -> StoreUsage:
        """Bytes used (pages up to the highest one in use) and the map size. Any thread."""
        stats = self.stats()
        return StoreUsage(stats["map_used_bytes"], stats["map_size_bytes"])

    def applied_index(self) -> int:
        """The index of the last commit. Any thread may call it."""
        return self._applied

    def replace_all(self, entries: Iterator[tuple[bytes, bytes]], applied_index: int) -> None:
        """Discard every key, load ``entries`` and set the index, durably, in one transaction.

        An open batch becomes part of that transaction (its writes are discarded with everything
        else), so data is never committed without the index that covers it. If ``entries``
        raises, nothing changes on disk; an open batch is then lost, with the consequences given
        in the module docstring. Last value wins for a repeated key; keys must be 1 to 511 bytes.
        """

        def load(txn: Any) -> None:
            txn.drop(self._state_db, delete=False)
            cursor = txn.cursor(self._state_db)
            cursor.putmulti(_checked(entries), dupdata=False, overwrite=True)
            cursor.close()
            # Last value wins for a repeated key: sum what was stored, not what was given.
            self._sum = _scan_sum(txn, self._state_db, self._hash_below)[0]

        self._commit_batch(load, applied_index, fault_point="replace_all")

    # -- readers -------------------------------------------------------------------------------

    def reader(self) -> LmdbReader:
        """A view of committed data for any thread; the transaction opens on ``__enter__``."""
        return LmdbReader(self._begin_read, self._SCAN_CHUNK)

    def _begin_read(self) -> tuple[Any, Any, Any, Any]:
        held = self._guard.shared()
        held.__enter__()
        try:
            return held, self._live_env().begin(write=False, buffers=False), self._state_db, self._local_db
        except BaseException:
            held.__exit__(None, None, None)
            raise

    def swaps_waiting(self) -> int:
        """How many threads wait to swap the environment or close the store (for tests: while
        one waits, new readers are held back)."""
        return self._guard.exclusive_waiting()

    def stats(self) -> dict[str, int]:
        """Numbers for metrics: ``entries`` in ``state``, bytes used and available in the map."""
        with self._guard.shared():
            env = self._live_env()
            with env.begin(write=False) as txn:
                entries: int = txn.stat(self._state_db)["entries"]
            info = env.info()
            page: int = env.stat()["psize"]
            return {
                "entries": entries,
                "map_used_bytes": (info["last_pgno"] + 1) * page,  # pages are numbered from 0
                "map_size_bytes": info["map_size"],
                "reader_slots_used": info["num_readers"],  # high-water mark of the reader table
                "applied_index": self._applied,
            }

    def release_pages(self) -> int:
        """Drop the store's mapped file pages from this process's resident set (they stay in the
        page cache; a read maps them again). LMDB reads through a shared read-only map, so every
        page a scan, a verify, a snapshot copy or a B-tree walk has touched counts in the node's
        RSS: ~400 B per task at 1,000,000 tasks, more than the task book itself. Returns the
        bytes of the map advised (0 when closed, or not on Linux). Any thread."""
        with self._guard.shared():
            if self._closed:
                return 0
            return _drop_mapped_pages(str((self._dir / "data.mdb").resolve()))

    def flush(self) -> None:
        """Force committed data to disk (fsync). With ``sync=False`` a node calls this periodically
        from a background thread, so the apply thread never waits on the disk."""
        with self._guard.shared():
            if not self._closed:
                try:
                    self._live_env().sync(True)
                except (lmdb_env.Error, OSError) as exc:
                    if self._failure is None:
                        self._failure = exc  # the data since the last fsync may not be on disk
                    raise

    # -- snapshots -----------------------------------------------------------------------------

    def write_snapshot(self, fileobj: BinaryIO) -> int:
        """Append a compact LMDB copy of the committed state at the file's offset; return its index.

        The copy is taken from one read transaction, so it holds exactly the data covered by the
        returned index (which it also contains). Commit the batch first: calling this from the
        thread that owns an open batch raises :class:`RuntimeError`, since the copy would silently
        leave that batch out. (Another thread may snapshot while the apply thread writes.) The
        file is flushed and left positioned after the copy; fsyncing it is the caller's job.
        """
        with self._txn_lock:
            if self._txn is not None and self._owner is threading.current_thread():
                raise RuntimeError("commit the open write batch before write_snapshot")
        fileobj.flush()
        fd = fileobj.fileno()
        with self._guard.shared():
            env = self._live_env()
            with env.begin(write=False) as rtxn:
                index = _decode_index(rtxn.get(_APPLIED_KEY, db=self._local_db))
                env.copyfd(fd, compact=True, txn=rtxn)
        # copyfd wrote through the fd; resynchronise the file object's idea of its position.
        fileobj.seek(os.lseek(fd, 0, os.SEEK_CUR))
        self.release_pages()  # the copy read every page of the store
        return index

    def load_snapshot_copy(self, src: Path, offset: int, validate: CopyCheck | None = None) -> int:
        """Replace the whole store with the LMDB copy found in ``src`` at ``offset``; return its index.

        ``validate(get)``, if given, may read the copy's data (``get(key)``) before anything is
        replaced; whatever it raises leaves the store untouched and propagates.

        The copy (everything from ``offset`` to the end of ``src``, as ``write_snapshot`` wrote
        it) is first extracted to ``state.restore`` and validated, so a bad file leaves the store
        untouched. Then, with readers held back, the environment is closed, the directories are
        swapped (``state`` → ``state.old``, ``state.restore`` → ``state``) and reopened. A crash
        during the swap is repaired when the store is next opened. An open batch on this thread
        is discarded; one on another thread raises :class:`RuntimeError`.
        """
        self._open_batch()  # fail early on the thread and broken-store checks
        if self._restore_dir.exists():
            shutil.rmtree(self._restore_dir)
        self._restore_dir.mkdir(mode=0o700)
        data = self._restore_dir / "data.mdb"
        with open(src, "rb") as fin, open(data, "xb") as fout:
            fin.seek(offset)
            header = fin.read(4096)
            _check_lmdb_header(header, src, offset)
            fout.write(header)
            shutil.copyfileobj(fin, fout, _COPY_BUF)
            fout.flush()
            os.fsync(fout.fileno())
        os.chmod(data, 0o600)
        index = self._validate_copy(validate)
        _fsync_dir(self._restore_dir)
        with self._guard.exclusive(), self._txn_lock:
            txn = self._check_batch_locked()
            self._txn = self._owner = None
            self._owner_ident = 0
            if txn is not None:
                txn.abort()
            self._live_env().close()
            self._env = None
            if self._old_dir.exists():
                shutil.rmtree(self._old_dir)
            try:
                self._dir.rename(self._old_dir)
                self._restore_dir.rename(self._dir)
                _fsync_dir(self._root)
                shutil.rmtree(self._old_dir)
                self._open_env()
            except BaseException:
                self._closed = True  # reopening the store runs the crash repair
                raise
        return index

    def _validate_copy(self, validate: CopyCheck | None) -> int:
        try:
            env = lmdb_env.open_readonly(self._restore_dir, map_size=self._map_size, max_dbs=2)
        except lmdb_env.Error as exc:
            raise ValueError(f"snapshot payload is not a readable LMDB file: {exc}") from exc
        try:
            state = env.open_db(_STATE_DB, create=False)
            local = env.open_db(_LOCAL_DB, create=False)
            with env.begin(write=False) as txn:
                txn.stat(state)
                index = _decode_index(txn.get(_APPLIED_KEY, db=local))
                stored = _decode_sum(txn.get(_SUM_KEY, db=local))
                if stored is not None and stored != _scan_sum(txn, state, self._hash_below)[0]:
                    raise ValueError(
                        "snapshot payload does not match its content checksum (damaged in the "
                        "sender's store, its snapshot file or in transit)"
                    )
                if validate is not None:
                    validate(lambda key: txn.get(key, db=state))
                return index
        except (lmdb_env.Error, CorruptRecord) as exc:
            raise ValueError(f"snapshot payload is not a raftsched LMDB store: {exc}") from exc
        finally:
            env.close()

    # -- lifecycle -----------------------------------------------------------------------------

    def close(self) -> None:
        """Abort any open batch (nothing is committed) and close the environment. Idempotent.

        Waits for open readers. Raises :class:`RuntimeError` if another live thread owns an open
        batch (LMDB cannot abort it from here); if that thread has exited, the batch is dropped.
        """
        with self._guard.exclusive(), self._txn_lock:
            if self._closed:
                return
            txn, owner = self._txn, self._owner
            if txn is not None and owner is not threading.current_thread():
                if owner is not None and owner.is_alive():
                    raise RuntimeError(f"write batch is open on live thread {owner!r}; close from it")
                txn = None  # env.close() below releases it
            self._txn = self._owner = None
            self._owner_ident = 0
            if txn is not None:
                txn.abort()
            self._env.close()
            self._closed = True

    def __enter__(self) -> LmdbStore:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()


def _checked(entries: Iterator[tuple[bytes, bytes]]) -> Iterator[tuple[bytes, bytes]]:
    for key, value in entries:
        if not 0 < len(key) <= _MAX_KEY:
            raise _key_error(key)
        yield key, value


def _check_lmdb_header(header: bytes, src: Path, offset: int) -> None:
    # Page 0 is a meta page: a 16-byte page header, then MDB_meta starting with its magic.
    if len(header) < 20 or struct.unpack_from("=I", header, 16)[0] != _LMDB_MAGIC:
        raise ValueError(f"{src} holds no LMDB data file at offset {offset}")
