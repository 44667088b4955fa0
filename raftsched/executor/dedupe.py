"""Executor-side dedupe: a durable log of the execution ids this executor has started.

The leader may deliver one attempt more than once (a new leader re-dispatches committed but
unacknowledged attempts; a report may be lost). The execution id (``run_id/shard/attempt``)
names the attempt, and this log makes an executor run each id at most once, across restarts:

* :meth:`DedupeLog.begin` atomically records an id as running before the attempt starts, or
  says it is already running or done (with the stored result, to report again).
* :meth:`DedupeLog.finish` records the result; it stays *pending* until the cluster has
  committed the report and the agent calls :meth:`DedupeLog.acknowledge`.
* After a crash, ids that were running are *interrupted*: nothing is running them any more, and
  running them again could repeat side effects, so :meth:`DedupeLog.recover` finishes them as
  failed and the leader's retry policy decides (a retry is a new attempt, so a new id).

Storage is any :class:`raftsched.abc.ExecutionLog`: on disk the LMDB one
(:class:`raftsched.storage.lmdb_execlog.LmdbExecutionLog`, one LMDB write per ``begin`` and per
``finish`` batch), in simulation :class:`raftsched.storage.memory.MemoryExecutionLog`. Entries
are versioned JSON; an entry is *settled* in the store once acknowledged, with the time it was
acknowledged. A bounded in-process cache keeps hot entries decoded.

Entry encoding (format 2, binary, written since the executor hot-path work of issue 31): a
version byte 2, a state byte (``R`` running, ``D`` done), and for a done entry a fixed
little-endian header (flags: success, timed out, has an exit code; exit code; duration; the
UTF-8 lengths of error, stdout tail and stderr tail) followed by those three texts. The key is
the execution id, so the entry does not repeat it. Format 1 entries (JSON objects with ``"v": 1``,
written by earlier releases) are still read, so an upgraded executor opens its old log and
recovers it; entries are never rewritten in place, they age out by the retention. An older
release cannot read format 2 entries: it refuses the log as damaged (downgrade needs a new data
dir once the executor has run on this release).

Retention: :meth:`DedupeLog.prune_older_than` drops entries acknowledged before a cutoff, a bounded
number per transaction (the agent calls it from a worker thread; see
``Executor(execution_log_keep=...)``). Only acknowledged entries are ever dropped, and a dropped id
is forgotten: were it dispatched again it would run again. That is safe once no leader can send the
id again, which is what acknowledgement gives (``docs/architecture.md``, "The execution log's
retention"): the cluster acknowledges a result only after the command carrying it is committed and
applied, and from then on the replicated state holds that attempt as finished (or superseded), so
no leader dispatches it again. What remains is a dispatch already in flight when the result was
applied, which the age covers.
"""

from __future__ import annotations

import json
import struct
import threading
from collections import OrderedDict
from collections.abc import Iterable
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import NamedTuple

from raftsched.abc import ExecutionLog
from raftsched.errors import StoreDamaged
from raftsched.executor.runners import AttemptResult
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.timing.clock import SystemClock

FORMAT_VERSION = 2  # the binary encoding (module docstring); 1 is the JSON one, still read
_JSON_VERSION = 1
INTERRUPTED_ERROR = "executor restarted while the attempt ran"


class BeginStatus(StrEnum):
    """What :meth:`DedupeLog.begin` found."""

    NEW = "new"  # recorded as running now: run the attempt, then finish() it
    RUNNING = "running"  # already running (here, or interrupted until recover()): do not run again
    DONE = "done"  # already finished: do not run again; report the stored result again


class ExecutionState(StrEnum):
    RUNNING = "running"
    DONE = "done"


class BeginOutcome(NamedTuple):
    """``status``, and for ``DONE`` the stored ``result`` (None otherwise)."""

    status: BeginStatus
    result: AttemptResult | None = None


class ExecutionRecord(NamedTuple):
    """One entry of the log. ``result`` is set when ``state`` is DONE; ``acknowledged`` means the
    cluster has committed the report (only a DONE entry can be acknowledged)."""

    execution_id: str
    state: ExecutionState
    result: AttemptResult | None = None
    acknowledged: bool = False


# Format 2 (module docstring): version, state, flags, exit code, duration, three text lengths.
_BINARY = FORMAT_VERSION
_RUNNING_RAW = bytes((_BINARY, ord("R")))
_DONE = struct.Struct("<BBBqqIII")
_DONE_STATE = ord("D")
_SUCCESS, _TIMED_OUT, _HAS_EXIT = 1, 2, 4
_JSON_START = ord("{")
_NEW = BeginOutcome(BeginStatus.NEW)
_RUNNING = BeginOutcome(BeginStatus.RUNNING)


def _text(value: str) -> bytes:
    return value.encode("utf-8", "surrogatepass") if value else b""


def _encode_done(result: AttemptResult) -> bytes:
    """A done entry, format 2; ``ValueError`` naming the id for a result it cannot hold."""
    try:
        error, out, err = _text(result.error), _text(result.stdout_tail), _text(result.stderr_tail)
        exit_code = result.exit_code
        flags = (
            (_SUCCESS if result.success else 0)
            | (_TIMED_OUT if result.timed_out else 0)
            | (0 if exit_code is None else _HAS_EXIT)
        )
        head = _DONE.pack(
            _BINARY, _DONE_STATE, flags, exit_code or 0, result.duration_ms, len(error), len(out), len(err)
        )
    except (struct.error, TypeError, AttributeError, UnicodeError) as exc:
        raise ValueError(f"result of {result.execution_id!r} cannot be recorded: {exc}") from None
    return b"".join((head, error, out, err)) if error or out or err else head


def _encode(record: ExecutionRecord) -> bytes:
    if record.result is None:
        return _RUNNING_RAW
    return _encode_done(record.result)


class NewerFormat(ValueError):
    """An entry written by a newer release: not damage (an upgrade reads it)."""


def _newer(where: str, version: int) -> NewerFormat:
    return NewerFormat(
        f"{where} has format version {version}, newer than this raftsched reads"
        f" ({FORMAT_VERSION}): it was written by a newer release; upgrade, or use a new data dir"
    )


def _decode(execution_id: str, raw: bytes, settled: bool) -> ExecutionRecord:
    if not raw:
        raise ValueError(f"execution log entry {execution_id!r} is empty")
    version = raw[0]
    if version == _JSON_START:
        return _decode_v1(execution_id, raw, settled)
    if version != _BINARY:
        where = f"execution log entry {execution_id!r}"
        if _BINARY < version < _JSON_START:
            raise _newer(where, version)
        raise ValueError(f"{where} has an unknown encoding (first byte {version})")
    if raw == _RUNNING_RAW:
        return ExecutionRecord(execution_id, ExecutionState.RUNNING, None, settled)
    where = f"execution log entry {execution_id!r}"
    if len(raw) < _DONE.size or raw[1] != _DONE_STATE:
        raise ValueError(f"{where} is truncated or has an unknown state")
    _, _, flags, exit_code, duration_ms, n_error, n_out, n_err = _DONE.unpack_from(raw)
    end_error = _DONE.size + n_error
    end_out = end_error + n_out
    if end_out + n_err != len(raw) or flags > 7:
        raise ValueError(f"{where} is malformed (its lengths do not add up)")
    try:
        result = AttemptResult(
            execution_id,
            bool(flags & _SUCCESS),
            exit_code if flags & _HAS_EXIT else None,
            raw[_DONE.size : end_error].decode("utf-8", "surrogatepass") if n_error else "",
            raw[end_error:end_out].decode("utf-8", "surrogatepass") if n_out else "",
            raw[end_out:].decode("utf-8", "surrogatepass") if n_err else "",
            duration_ms,
            bool(flags & _TIMED_OUT),
        )
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where} holds text that is not UTF-8: {exc}") from None
    return ExecutionRecord(execution_id, ExecutionState.DONE, result, settled)


def _decode_v1(execution_id: str, raw: bytes, settled: bool) -> ExecutionRecord:
    where = f"execution log entry {execution_id!r}"
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{where} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("v"), int):
        raise ValueError(f"{where} has no format version")
    if data["v"] > _JSON_VERSION:
        raise _newer(where, data["v"])
    try:
        state = ExecutionState(str(data.get("state")))
    except ValueError:
        raise ValueError(f"{where} has unknown state {data.get('state')!r}") from None
    result = None
    if state is ExecutionState.DONE:
        if not isinstance(data.get("result"), dict):
            raise ValueError(f"{where} is done but holds no result")
        result = AttemptResult.from_json_dict(data["result"])
    return ExecutionRecord(execution_id, state, result, acknowledged=settled)


def _outcome(record: ExecutionRecord) -> BeginOutcome:
    if record.state is ExecutionState.RUNNING:
        return _RUNNING
    return BeginOutcome(BeginStatus.DONE, record.result)


class DedupeLog:
    """The dedupe log of one executor, over an :class:`raftsched.abc.ExecutionLog` it owns.

    Contract:

    * ``begin`` is atomic: of concurrent ``begin`` calls for one id exactly one gets ``NEW``.
    * ``finish`` is called once per ``NEW`` and only then; a second ``finish`` (or one without
      ``begin``) raises ``ValueError`` and the first result stands.
    * Everything returned in lists is in insertion order (the order of ``begin``).
    * Durable on return, as the store is: :meth:`open` with ``sync=True`` fsyncs each write.
    * Thread-safe. Methods block on the store's writes (an fsync per ``begin``/``finish``/batch
      with ``sync=True``); from an event loop, call them through ``asyncio.to_thread`` if that
      latency matters.
    * One process owns the store; a second :meth:`open` of one directory raises
      :class:`RuntimeError`. :meth:`close` closes the store.

    Opening reads the store's unsettled entries. Call :meth:`recover` before taking dispatches:
    until then an attempt that was interrupted by the restart answers ``RUNNING`` to ``begin``.
    """

    def __init__(self, store: ExecutionLog, *, cache_size: int = 10_000) -> None:
        self._store = store
        self._lock = threading.RLock()
        self._cache: OrderedDict[str, ExecutionRecord] = OrderedDict()
        self._cache_size = cache_size
        # Every unacknowledged id, running or done and pending, kept incrementally (a report or a
        # heartbeat must not walk every open id): id → its open number (the order of begin, or of
        # the store's unsettled entries at open).
        self._running: dict[str, int] = {}  # in open-number order
        self._pending: dict[str, int] = {}  # in finish order; sorted by open number when read
        self._pending_sorted = True
        self._pending_last = -1  # the highest open number in _pending, while it is sorted
        self._opened = 0  # the next open number
        try:
            if cache_size < 0:
                raise ValueError(f"cache_size must be >= 0, got {cache_size}")
            for execution_id, raw in self._store.unsettled():
                try:
                    record = _decode(execution_id, raw, settled=False)
                except NewerFormat:
                    raise
                except (ValueError, KeyError, TypeError) as exc:  # damaged: it cannot say what ran
                    where = getattr(self._store, "path", "the execution log")
                    raise StoreDamaged(str(where), str(exc)) from None
                if record.state is ExecutionState.RUNNING:
                    self._running[execution_id] = self._opened
                else:
                    self._pending[execution_id] = self._pending_last = self._opened
                self._opened += 1
                self._remember(record)
        except BaseException:
            self._store.close()
            raise
        # Running when the previous process stopped: nobody runs them now.
        self._interrupted = list(self._running)

    @classmethod
    def open(
        cls, path: Path, *, cache_size: int = 10_000, sync: bool = True, map_size: int = 64 << 30
    ) -> DedupeLog:
        """The dedupe log kept on disk under ``path`` (in ``path/executions``), in LMDB.

        ``sync=False`` commits without fsync (a killed process loses nothing, a host crash may
        lose the last writes): then call :meth:`flush` periodically.
        """
        if cache_size < 0:  # before the store is opened (and locked)
            raise ValueError(f"cache_size must be >= 0, got {cache_size}")
        return cls(LmdbExecutionLog(Path(path), map_size=map_size, sync=sync), cache_size=cache_size)

    # -- cache -----------------------------------------------------------------------------------

    def _remember(self, record: ExecutionRecord) -> None:
        if not self._cache_size:
            return
        self._cache[record.execution_id] = record
        self._cache.move_to_end(record.execution_id)
        while len(self._cache) > self._cache_size:
            self._cache.popitem(last=False)

    def _lookup(self, execution_id: str) -> ExecutionRecord | None:
        record = self._cache.get(execution_id)
        if record is not None:
            self._cache.move_to_end(execution_id)
            return record
        found = self._store.get(execution_id)
        if found is None:
            return None
        record = _decode(execution_id, *found)
        self._remember(record)
        return record

    # -- the attempt lifecycle -------------------------------------------------------------------

    def begin(self, execution_id: str) -> BeginOutcome:
        """Record ``execution_id`` as running (``NEW``), or say it is ``RUNNING`` or ``DONE``.

        Only ``NEW`` means "run it". ``DONE`` carries the stored result for the caller to report
        again (reports are idempotent); nothing changes in the log. An id longer than 511 UTF-8
        bytes raises ``ValueError``.
        """
        return self.begin_many([execution_id])[0]

    def known(self, execution_id: str) -> BeginOutcome | None:
        """What :meth:`begin` would answer for an id this process has seen recently (it is in
        the in-memory cache): ``RUNNING`` or ``DONE``; None if the store must be asked. No IO."""
        with self._lock:
            record = self._cache.get(execution_id)
            return None if record is None else _outcome(record)

    def begin_many(self, execution_ids: list[str]) -> list[BeginOutcome]:
        """:meth:`begin` for each id, in order, with one durable write for all the new ones.

        An id given twice is ``NEW`` at most once (the later one finds it running). If any id is
        too long, ``ValueError`` is raised and nothing is recorded.
        """
        with self._lock:
            out: list[BeginOutcome | None] = []
            fresh: list[int] = []  # positions not in the cache: ask the store
            for execution_id in execution_ids:
                record = self._cache.get(execution_id)
                if record is None:
                    fresh.append(len(out))
                    out.append(None)
                else:
                    self._remember(record)
                    out.append(_outcome(record))
            if fresh:
                found = self._store.insert_many([(execution_ids[i], _RUNNING_RAW) for i in fresh])
                for i, existing in zip(fresh, found, strict=True):
                    execution_id = execution_ids[i]
                    if existing is None:
                        self._running[execution_id] = self._opened
                        self._opened += 1
                        self._remember(ExecutionRecord(execution_id, ExecutionState.RUNNING))
                        out[i] = _NEW
                    else:
                        record = _decode(execution_id, *existing)
                        self._remember(record)
                        out[i] = _outcome(record)
            return [o for o in out if o is not None]

    def finish(self, execution_id: str, result: AttemptResult) -> None:
        """Record the result of a running attempt; it is then pending until acknowledged.

        Raises ``ValueError`` if ``result`` is for another id, or the id is not running (never
        begun, or finished already: the first result stands).
        """
        if result.execution_id != execution_id:
            raise ValueError(f"result is for {result.execution_id!r}, not {execution_id!r}")
        self.finish_many([result])

    def finish_many(self, results: list[AttemptResult]) -> None:
        """:meth:`finish` for each result (by its ``execution_id``), in one durable write.

        Checked first, all or nothing: if any id is not running (or is given twice), raises
        ``ValueError`` and records none of them.
        """
        with self._lock:
            seen: set[str] = set()
            for result in results:
                execution_id = result.execution_id
                record = self._lookup(execution_id)
                if record is None:
                    raise ValueError(f"finish({execution_id!r}) without begin()")
                if record.state is not ExecutionState.RUNNING or execution_id in seen:
                    raise ValueError(f"{execution_id!r} is finished already; its first result stands")
                seen.add(execution_id)
            if results:
                self._finish_locked(
                    [ExecutionRecord(r.execution_id, ExecutionState.DONE, r) for r in results]
                )

    def _finish_locked(self, records: list[ExecutionRecord]) -> None:
        self._store.update([(r.execution_id, _encode(r), False) for r in records])
        for record in records:
            execution_id = record.execution_id
            number = self._running.pop(execution_id, None)
            if number is None:  # begun through another DedupeLog over the same store: number it now
                number = self._opened
                self._opened += 1
            self._pending[execution_id] = number
            if number > self._pending_last:
                self._pending_last = number
            else:
                self._pending_sorted = False
            self._remember(record)

    def get(self, execution_id: str) -> ExecutionRecord | None:
        """The entry for ``execution_id``, or None if it was never begun (or was pruned)."""
        with self._lock:
            return self._lookup(execution_id)

    def running(self) -> list[str]:
        """Ids recorded as running. Right after opening (before :meth:`recover`), these are the
        attempts that were running when the previous process stopped."""
        with self._lock:
            return list(self._running)

    def recover(self) -> list[AttemptResult]:
        """Finish every attempt interrupted by the restart as failed, and return those results.

        Each gets ``success=False``, ``error`` "executor restarted while the attempt ran", no
        exit code; they become pending reports. Attempts begun by this process are untouched, so
        calling this again (or late) is safe: it returns only what it finished now.
        """
        with self._lock:
            records = [
                ExecutionRecord(
                    execution_id,
                    ExecutionState.DONE,
                    AttemptResult(execution_id, success=False, error=INTERRUPTED_ERROR),
                )
                for execution_id in self._interrupted
                if execution_id in self._running
            ]
            self._interrupted = []
            if records:
                self._finish_locked(records)
            return [r.result for r in records if r.result is not None]

    # -- reporting -------------------------------------------------------------------------------

    def _pending_in_order(self) -> dict[str, int]:
        if not self._pending_sorted:  # finished out of begin order: put them back in it, once
            self._pending = dict(sorted(self._pending.items(), key=lambda item: item[1]))
            self._pending_sorted = True
            self._pending_last = next(reversed(self._pending.values()), -1)
        return self._pending

    def pending_reports(self, limit: int | None = None) -> list[AttemptResult]:
        """Results finished but not yet acknowledged by the cluster, to report (again), in begin
        order; the first ``limit`` of them if given. Costs what it returns, not what is open."""
        with self._lock:
            out: list[AttemptResult] = []
            for execution_id in self._pending_in_order():
                if limit is not None and len(out) >= limit:
                    break
                record = self._lookup(execution_id)
                if record is not None and record.result is not None:
                    out.append(record.result)
            return out

    def pending_ids(self) -> list[str]:
        """The ids of :meth:`pending_reports`, in the same order, without reading a result."""
        with self._lock:
            return list(self._pending_in_order())

    def pending_count(self) -> int:
        """How many results wait to be acknowledged (``len(pending_reports())``, for free)."""
        return len(self._pending)

    def acknowledge(self, execution_ids: Iterable[str], at_ms: int | None = None) -> int:
        """Mark these results as committed by the cluster, at ``at_ms`` (ms since the epoch; now
        by the system clock if None): their age for :meth:`prune_older_than` counts from then.
        Return how many changed.

        Idempotent: ids that are unknown, still running or acknowledged already are ignored.
        One durable write for the whole batch.
        """
        with self._lock:
            acked = [
                record
                for execution_id in dict.fromkeys(execution_ids)
                if execution_id in self._pending and (record := self._lookup(execution_id)) is not None
            ]
            if not acked:
                return 0
            when = SystemClock().now_ms() if at_ms is None else at_ms
            self._store.settle([r.execution_id for r in acked], when)  # the result stays as written
            for record in acked:
                del self._pending[record.execution_id]
                self._remember(record._replace(acknowledged=True))
            if not self._pending:
                self._pending_sorted, self._pending_last = True, -1
            return len(acked)

    def prune_older_than(self, cutoff_ms: int, limit: int = 1000) -> int:
        """Drop up to ``limit`` entries acknowledged at or before ``cutoff_ms``, longest
        acknowledged first, in one store transaction; return how many were dropped (fewer than
        ``limit``: none older is left). Running and pending entries are never dropped.

        Meant for a worker thread: the store write runs without this log's lock (the store is
        thread-safe, and a settled entry is in no list this log keeps), so ``begin`` on another
        thread waits at most for the store's single write transaction, which ``limit`` bounds.
        An id still in the in-process cache while being dropped answers ``DONE``: on the safe side.
        """
        removed = self._store.prune_settled_before(cutoff_ms, limit)
        if removed:
            with self._lock:
                for execution_id in removed:
                    self._cache.pop(execution_id, None)
        return len(removed)

    def sizes(self) -> tuple[int, int]:
        """``(entries, bytes)`` the log holds now (for a gauge; see ``ExecutionLog.sizes``)."""
        return self._store.sizes()

    def __len__(self) -> int:
        """How many entries the log holds."""
        with self._lock:
            return len(self._store)

    # -- lifecycle -------------------------------------------------------------------------------

    def flush(self) -> None:
        """fsync what is committed (with ``sync=False``, call this periodically)."""
        with self._lock:
            self._store.flush()

    def close(self) -> None:
        """Close the log (idempotent). Everything written is already durable."""
        with self._lock:
            self._store.close()

    def __enter__(self) -> DedupeLog:
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()
