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
are versioned (binary since format 2; the JSON of format 1 is still read); an entry is *settled*
in the store once acknowledged, with the time it was acknowledged. A bounded in-process cache
keeps hot entries decoded.

Batch records (format 3, written by the agent since issue 31 P2; ``DedupeLog(batched=True)``):
instead of one entry per id, each :meth:`DedupeLog.begin_many` writes ONE begin record naming
the ids it begins, and each :meth:`DedupeLog.finish_many` ONE finish record holding their
results as columns, so a batch of 20 attempts costs two store inserts instead of 20 inserts and
20 updates, and its acknowledgement settles two keys instead of 20. The rules do not change: a
begin record is committed before any attempt of its batch starts (``begin_many`` returns after
the write), a finish record before any of its results is reported, and a redelivered id is
answered from the in-memory index (every id the log holds → its begin record, rebuilt from the
store at open), never run again. At open, an id of an unsettled begin record without a row in
a finish record was running: interrupted, as above. A begin record is settled once every id in
it is acknowledged, a finish record once every begin record its rows come from is settled (so
an unsettled begin record always finds its results); acknowledgements of part of a batch are
kept in memory only, so after a restart those results are reported again (reports are
idempotent). The index costs memory for every id held (about 150 bytes each: 300,000 ids at
500 attempts/s and the default 10-minute keep are ~45 MB).

How entries and records are encoded (formats 1, 2 and 3, and the marker entry by which an older
release refuses a batched log): :mod:`raftsched.executor.execlog_records`.

Retention: :meth:`DedupeLog.prune_older_than` drops entries acknowledged before a cutoff, a bounded
number per transaction (the agent calls it from a worker thread; see
``Executor(execution_log_keep=...)``). Only acknowledged entries are ever dropped (an id in a batch record
with its begin record, once the last id of that batch is acknowledged), and a dropped id
is forgotten: were it dispatched again it would run again. That is safe once no leader can send the
id again, which is what acknowledgement gives (``docs/architecture.md``, "The execution log's
retention"): the cluster acknowledges a result only after the command carrying it is committed and
applied, and from then on the replicated state holds that attempt as finished (or superseded), so
no leader dispatches it again. What remains is a dispatch already in flight when the result was
applied, which the age covers.
"""

from __future__ import annotations

import struct
import threading
from collections import OrderedDict
from collections.abc import Container, Iterable
from pathlib import Path
from types import TracebackType

from raftsched.abc import ExecutionLog
from raftsched.errors import StoreDamaged
from raftsched.executor.execlog_records import (
    BEGIN_KIND,
    MARKER,
    MARKER_KEY,
    RECORD_PREFIX,
    RUNNING_RAW,
    BeginOutcome,
    BeginStatus,
    ExecutionRecord,
    ExecutionState,
    NewerFormat,
    decode,
    decode_finish,
    encode,
    encode_begin,
    encode_finish,
    record_head,
)
from raftsched.executor.runners import AttemptResult
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.timing.clock import SystemClock

INTERRUPTED_ERROR = "executor restarted while the attempt ran"


_NEW = BeginOutcome(BeginStatus.NEW)
_RUNNING = BeginOutcome(BeginStatus.RUNNING)


def _outcome(record: ExecutionRecord) -> BeginOutcome:
    if record.state is ExecutionState.RUNNING:
        return _RUNNING
    return BeginOutcome(BeginStatus.DONE, record.result)


class _Begin:
    """A begin record in memory: its ids, how many are not acknowledged, its finish records."""

    __slots__ = ("finishes", "ids", "settled", "unacked")

    def __init__(self, ids: list[str], settled: bool) -> None:
        self.ids = ids
        self.unacked = 0 if settled else len(ids)
        self.settled = settled
        self.finishes: list[str] = []


class _Finish:
    """A finish record in memory: the begin records its rows come from."""

    __slots__ = ("begins", "settled")

    def __init__(self, begins: set[str], settled: bool) -> None:
        self.begins = begins
        self.settled = settled


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

    ``batched=True`` (the agent's choice) records each :meth:`begin_many` as one batch record
    and each :meth:`finish_many` as one (module docstring, "Batch records"); ``False`` writes one
    entry per id as releases before it did. Either reads both. In batched mode the dedupe index
    of every id the log holds is kept in memory (read from the store at open), so a second
    ``DedupeLog`` over the same live store does not see this one's batches.

    Opening reads the store. Call :meth:`recover` before taking dispatches: until then an
    attempt that was interrupted by the restart answers ``RUNNING`` to ``begin``.
    """

    def __init__(self, store: ExecutionLog, *, cache_size: int = 10_000, batched: bool = False) -> None:
        self._store = store
        self._batched = batched
        self._lock = threading.RLock()
        self._cache: OrderedDict[str, ExecutionRecord] = OrderedDict()
        self._cache_size = cache_size
        # Every unacknowledged id, running or done and pending, kept incrementally (a report or a
        # heartbeat must not walk every open id): id → its open number (the order of begin, or of
        # the store's entries at open).
        self._running: dict[str, int] = {}  # in open-number order
        self._pending: dict[str, int] = {}  # in finish order; sorted by open number when read
        self._pending_sorted = True
        self._pending_last = -1  # the highest open number in _pending, while it is sorted
        self._opened = 0  # the next open number
        # The dedupe index beside the store's own keys: every id begun in a batch record → that
        # record's key, and every settled per-id entry → "" (its own key in the store).
        self._begun_in: dict[str, str] = {}
        self._records: dict[str, _Begin | _Finish] = {}  # batch records in the store, by key
        self._batch_ids = 0  # ids held in begin records
        self._results: dict[str, AttemptResult] = {}  # pending rows of finish records
        self._marked = False  # the format marker is in the store
        self._next_record = 0
        try:
            if cache_size < 0:
                raise ValueError(f"cache_size must be >= 0, got {cache_size}")
            for key, raw, settled in self._store.items():
                try:
                    if key[:1] == RECORD_PREFIX:
                        self._load_record(key, raw, settled)
                        continue
                    if settled:  # an acknowledged per-id entry: indexed, read when asked
                        self._begun_in[key] = ""
                        continue
                    record = decode(key, raw, settled=False)
                except NewerFormat:
                    raise
                except (ValueError, KeyError, TypeError, struct.error) as exc:  # damaged: what ran?
                    where = getattr(self._store, "path", "the execution log")
                    raise StoreDamaged(str(where), str(exc)) from None
                if record.state is ExecutionState.RUNNING:
                    self._running[key] = self._opened
                else:
                    self._pending[key] = self._pending_last = self._opened
                self._opened += 1
                self._remember(record)
        except BaseException:
            self._store.close()
            raise
        # Running when the previous process stopped: nobody runs them now.
        self._interrupted = list(self._running)

    def _load_record(self, key: str, raw: bytes, settled: bool) -> None:
        kind, _, ids = record_head(key, raw)
        try:
            self._next_record = max(self._next_record, int(key[2:], 16) + 1)
        except ValueError:
            if key != MARKER_KEY:
                raise ValueError(f"execution log record {key!r} has a malformed key") from None
        if kind == ord("M"):
            self._marked = True
            return
        if kind == BEGIN_KIND:
            self._records[key] = _Begin(ids, settled)
            self._batch_ids += len(ids)
            for execution_id in ids:
                self._begun_in[execution_id] = key
                if not settled:
                    self._running[execution_id] = self._opened
                    self._opened += 1
            return
        begins = {self._begun_in.get(i, "") for i in ids}
        begins.discard("")  # a begin record pruned already: those rows were acknowledged
        self._records[key] = _Finish(begins, settled)
        for begin in begins:
            record = self._records[begin]
            assert isinstance(record, _Begin)
            record.finishes.append(key)
        if settled:
            return  # every row acknowledged: the results are read when asked
        for result in decode_finish(key, raw):
            execution_id = result.execution_id
            number = self._running.pop(execution_id, None)
            if number is None:  # its begin record is settled: acknowledged
                continue
            self._results[execution_id] = result
            self._pending[execution_id] = number
            if number > self._pending_last:
                self._pending_last = number
            else:
                self._pending_sorted = False

    @classmethod
    def open(
        cls,
        path: Path,
        *,
        cache_size: int = 10_000,
        sync: bool = True,
        map_size: int = 64 << 30,
        batched: bool = False,
    ) -> DedupeLog:
        """The dedupe log kept on disk under ``path`` (in ``path/executions``), in LMDB.

        ``sync=False`` commits without fsync (a killed process loses nothing, a host crash may
        lose the last writes): then call :meth:`flush` periodically.
        """
        if cache_size < 0:  # before the store is opened (and locked)
            raise ValueError(f"cache_size must be >= 0, got {cache_size}")
        store = LmdbExecutionLog(Path(path), map_size=map_size, sync=sync)
        return cls(store, cache_size=cache_size, batched=batched)

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
        if self._begun_in.get(execution_id):
            return self._batch_record(execution_id)
        found = self._store.get(execution_id)
        if found is None:
            return None
        record = decode(execution_id, *found)
        self._remember(record)
        return record

    def _batch_record(self, execution_id: str) -> ExecutionRecord:
        """The entry of an id begun in a batch record (no store read unless acknowledged)."""
        if execution_id in self._running:
            return ExecutionRecord(execution_id, ExecutionState.RUNNING)
        result = self._results.get(execution_id)
        if result is not None:
            return ExecutionRecord(execution_id, ExecutionState.DONE, result)
        begin = self._records[self._begun_in[execution_id]]
        assert isinstance(begin, _Begin)
        for key in begin.finishes:
            found = self._store.get(key)
            if found is None:
                continue
            for result in decode_finish(key, found[0]):
                if result.execution_id == execution_id:
                    record = ExecutionRecord(execution_id, ExecutionState.DONE, result, True)
                    self._remember(record)
                    return record
        # Its records are being pruned by another thread (the index goes next, under the lock):
        # done and acknowledged, on the safe side, with no result left to report again.
        return ExecutionRecord(execution_id, ExecutionState.DONE, None, True)

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
        the in-memory cache, or runs, or waits to be reported): ``RUNNING`` or ``DONE``; None
        if the store must be asked. No IO."""
        with self._lock:
            record = self._cache.get(execution_id)
            if record is not None:
                return _outcome(record)
            if execution_id in self._running:
                return _RUNNING
            result = self._results.get(execution_id)
            return None if result is None else BeginOutcome(BeginStatus.DONE, result)

    def begin_many(self, execution_ids: list[str]) -> list[BeginOutcome]:
        """:meth:`begin` for each id, in order, with one durable write for all the new ones
        (in batched mode, one batch record).

        An id given twice is ``NEW`` at most once (the later one finds it running). If any id is
        too long, ``ValueError`` is raised and nothing is recorded.
        """
        with self._lock:
            out: list[BeginOutcome | None] = []
            fresh: list[int] = []  # positions not known here: new (batched), or ask the store
            running, begun_in = self._running, self._begun_in
            for execution_id in execution_ids:
                if execution_id in running:
                    out.append(_RUNNING)
                elif execution_id in begun_in or execution_id in self._pending:
                    record = self._lookup(execution_id)
                    assert record is not None
                    out.append(_outcome(record))
                elif self._batched or (record := self._cache.get(execution_id)) is None:
                    fresh.append(len(out))
                    out.append(None)
                else:
                    self._remember(record)
                    out.append(_outcome(record))
            if fresh and self._batched:
                self._begin_batch_locked(execution_ids, fresh, out)
            elif fresh:
                found = self._store.insert_many([(execution_ids[i], RUNNING_RAW) for i in fresh])
                for i, existing in zip(fresh, found, strict=True):
                    execution_id = execution_ids[i]
                    if existing is None:
                        self._running[execution_id] = self._opened
                        self._opened += 1
                        self._remember(ExecutionRecord(execution_id, ExecutionState.RUNNING))
                        out[i] = _NEW
                    else:
                        record = decode(execution_id, *existing)
                        self._remember(record)
                        out[i] = _outcome(record)
            return [o for o in out if o is not None]

    def _begin_batch_locked(
        self, execution_ids: list[str], fresh: list[int], out: list[BeginOutcome | None]
    ) -> None:
        ids = list(dict.fromkeys(execution_ids[i] for i in fresh))  # a repeat finds it running
        value = encode_begin(ids)  # ValueError: nothing recorded
        key = f"{RECORD_PREFIX}b{self._next_record:x}"
        items = [(key, value)] if self._marked else [(MARKER_KEY, MARKER), (key, value)]
        if any(self._store.insert_many(items)):
            raise RuntimeError(f"execution log record {key!r} exists already: two logs over one store?")
        self._marked = True
        self._next_record += 1
        self._records[key] = _Begin(ids, False)
        self._batch_ids += len(ids)
        number = self._opened
        running, begun_in = self._running, self._begun_in
        for execution_id in ids:
            running[execution_id] = number
            begun_in[execution_id] = key
            number += 1
        self._opened = number
        seen: set[str] = set()
        for i in fresh:  # the first of a repeated id is new, the next ones find it running
            execution_id = execution_ids[i]
            out[i] = _RUNNING if execution_id in seen else _NEW
            seen.add(execution_id)

    def finish(self, execution_id: str, result: AttemptResult) -> None:
        """Record the result of a running attempt; it is then pending until acknowledged.

        Raises ``ValueError`` if ``result`` is for another id, or the id is not running (never
        begun, or finished already: the first result stands).
        """
        if result.execution_id != execution_id:
            raise ValueError(f"result is for {result.execution_id!r}, not {execution_id!r}")
        self.finish_many([result])

    def finish_many(self, results: list[AttemptResult]) -> None:
        """:meth:`finish` for each result (by its ``execution_id``), in one durable write for
        those begun in batch records (one finish record) and one for those begun one by one.

        Checked first, all or nothing: if any id is not running (or is given twice), or a result
        cannot be recorded, raises ``ValueError`` and records none of them.
        """
        with self._lock:
            seen: set[str] = set()
            batch: list[AttemptResult] = []
            single: list[ExecutionRecord] = []
            for result in results:
                execution_id = result.execution_id
                if self._begun_in.get(execution_id):
                    if execution_id not in self._running or execution_id in seen:
                        raise ValueError(f"{execution_id!r} is finished already; its first result stands")
                    batch.append(result)
                else:
                    record = self._lookup(execution_id)
                    if record is None:
                        raise ValueError(f"finish({execution_id!r}) without begin()")
                    if record.state is not ExecutionState.RUNNING or execution_id in seen:
                        raise ValueError(f"{execution_id!r} is finished already; its first result stands")
                    single.append(ExecutionRecord(execution_id, ExecutionState.DONE, result))
                seen.add(execution_id)
            value = encode_finish(batch) if batch else b""  # ValueError before anything is written
            if single:
                self._finish_locked(single)
            if batch:
                self._finish_batch_locked(batch, value)

    def _finish_batch_locked(self, results: list[AttemptResult], value: bytes) -> None:
        key = f"{RECORD_PREFIX}f{self._next_record:x}"
        if any(self._store.insert_many([(key, value)])):
            raise RuntimeError(f"execution log record {key!r} exists already: two logs over one store?")
        self._next_record += 1
        begins: set[str] = set()
        running, pending, stored = self._running, self._pending, self._results
        last, in_order = self._pending_last, self._pending_sorted
        for result in results:
            execution_id = result.execution_id
            begins.add(self._begun_in[execution_id])
            number = running.pop(execution_id)
            pending[execution_id] = number
            stored[execution_id] = result
            if number > last:
                last = number
            else:
                in_order = False
        self._pending_last, self._pending_sorted = last, in_order
        self._records[key] = _Finish(begins, False)
        for begin in begins:
            record = self._records[begin]
            assert isinstance(record, _Begin)
            record.finishes.append(key)

    def _finish_locked(self, records: list[ExecutionRecord]) -> None:
        self._store.update([(r.execution_id, encode(r), False) for r in records])
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
            results = [
                AttemptResult(execution_id, success=False, error=INTERRUPTED_ERROR)
                for execution_id in self._interrupted
                if execution_id in self._running
            ]
            self._interrupted = []
            batch = [r for r in results if self._begun_in.get(r.execution_id)]
            single = [
                ExecutionRecord(r.execution_id, ExecutionState.DONE, r)
                for r in results
                if not self._begun_in.get(r.execution_id)
            ]
            if single:
                self._finish_locked(single)
            if batch:
                self._finish_batch_locked(batch, encode_finish(batch))
            return results

    # -- reporting -------------------------------------------------------------------------------

    def _pending_in_order(self) -> dict[str, int]:
        if not self._pending_sorted:  # finished out of begin order: put them back in it, once
            self._pending = dict(sorted(self._pending.items(), key=lambda item: item[1]))
            self._pending_sorted = True
            self._pending_last = next(reversed(self._pending.values()), -1)
        return self._pending

    def pending_reports(self, limit: int | None = None, skip: Container[str] = ()) -> list[AttemptResult]:
        """Results finished but not yet acknowledged by the cluster, to report (again), in begin
        order; the first ``limit`` of them if given, passing over the ids in ``skip`` (reports in
        flight: they count neither in the result nor against ``limit``). Costs what it returns
        and what it passes over, not what is open."""
        with self._lock:
            out: list[AttemptResult] = []
            results = self._results
            for execution_id in self._pending_in_order():
                if limit is not None and len(out) >= limit:
                    break
                if execution_id in skip:
                    continue
                result = results.get(execution_id)
                if result is None:
                    record = self._lookup(execution_id)
                    result = None if record is None else record.result
                if result is not None:
                    out.append(result)
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
        One durable write for the whole batch. A batch record is settled when the last of its
        rows is acknowledged (a finish record once all the begin records it draws on are).
        """
        with self._lock:
            single: list[ExecutionRecord] = []
            batch: list[str] = []
            for execution_id in dict.fromkeys(execution_ids):
                if execution_id not in self._pending:
                    continue
                if self._begun_in.get(execution_id):
                    batch.append(execution_id)
                elif (record := self._lookup(execution_id)) is not None:
                    single.append(record)
            if not single and not batch:
                return 0
            keys = [r.execution_id for r in single]
            unacked: dict[str, int] = {}
            for execution_id in batch:
                key = self._begun_in[execution_id]
                begin = self._records[key]
                assert isinstance(begin, _Begin)
                unacked[key] = unacked.get(key, begin.unacked) - 1
            done_begins = {key for key, left in unacked.items() if left == 0}
            keys.extend(done_begins)
            done_finishes: list[str] = []
            for key in done_begins:
                begin = self._records[key]
                assert isinstance(begin, _Begin)
                for f in begin.finishes:
                    finish = self._records[f]
                    assert isinstance(finish, _Finish)
                    if (
                        not finish.settled
                        and f not in done_finishes
                        and all(
                            b in done_begins or (r := self._records.get(b)) is None or r.settled
                            for b in finish.begins
                        )
                    ):
                        done_finishes.append(f)
            keys.extend(done_finishes)
            when = SystemClock().now_ms() if at_ms is None else at_ms
            if keys:
                self._store.settle(keys, when)  # the values stay as written
            for key, left in unacked.items():
                begin = self._records[key]
                assert isinstance(begin, _Begin)
                begin.unacked = left
                begin.settled = left == 0
            for f in done_finishes:
                self._records[f].settled = True
            for execution_id in batch:
                del self._pending[execution_id]
                del self._results[execution_id]
            for record in single:
                del self._pending[record.execution_id]
                self._begun_in[record.execution_id] = ""
                self._remember(record._replace(acknowledged=True))
            if not self._pending:
                self._pending_sorted, self._pending_last = True, -1
            return len(single) + len(batch)

    def prune_older_than(self, cutoff_ms: int, limit: int = 1000) -> int:
        """Drop up to ``limit`` store entries (ids, or batch records) acknowledged at or before
        ``cutoff_ms``, longest acknowledged first, in one store transaction; return how many
        execution ids were dropped (0 when none older is left). Running and pending entries are
        never dropped; an id begun in a batch is dropped with its begin record, once the last
        of its batch was acknowledged long enough.

        Meant for a worker thread: the store write runs without this log's lock (the store is
        thread-safe, and a settled entry is in no list this log keeps), so ``begin`` on another
        thread waits at most for the store's single write transaction, which ``limit`` bounds.
        An id still indexed while being dropped answers ``DONE``: on the safe side.
        """
        removed = self._store.prune_settled_before(cutoff_ms, limit)
        dropped = 0
        if removed:
            with self._lock:
                for key in removed:
                    if key[:1] != RECORD_PREFIX:
                        self._cache.pop(key, None)
                        self._begun_in.pop(key, None)
                        dropped += 1
                        continue
                    record = self._records.pop(key, None)
                    if isinstance(record, _Begin):
                        self._batch_ids -= len(record.ids)
                        dropped += len(record.ids)
                        for execution_id in record.ids:
                            self._cache.pop(execution_id, None)
                            if self._begun_in.get(execution_id) == key:
                                del self._begun_in[execution_id]
        return dropped

    def sizes(self) -> tuple[int, int]:
        """``(execution ids, bytes)`` the log holds now (for a gauge; see ``ExecutionLog.sizes``)."""
        entries, size = self._store.sizes()
        with self._lock:
            return self._ids(entries), size

    def _ids(self, store_keys: int) -> int:
        return store_keys - len(self._records) - self._marked + self._batch_ids

    def __len__(self) -> int:
        """How many execution ids the log holds."""
        with self._lock:
            return self._ids(len(self._store))

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
