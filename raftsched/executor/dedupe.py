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
import threading
from collections import OrderedDict
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from pathlib import Path
from types import TracebackType
from typing import Any

from raftsched.abc import ExecutionLog
from raftsched.errors import StoreDamaged
from raftsched.executor.runners import AttemptResult
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.timing.clock import SystemClock

FORMAT_VERSION = 1
INTERRUPTED_ERROR = "executor restarted while the attempt ran"


class BeginStatus(StrEnum):
    """What :meth:`DedupeLog.begin` found."""

    NEW = "new"  # recorded as running now: run the attempt, then finish() it
    RUNNING = "running"  # already running (here, or interrupted until recover()): do not run again
    DONE = "done"  # already finished: do not run again; report the stored result again


class ExecutionState(StrEnum):
    RUNNING = "running"
    DONE = "done"


@dataclass(frozen=True)
class BeginOutcome:
    """``status``, and for ``DONE`` the stored ``result`` (None otherwise)."""

    status: BeginStatus
    result: AttemptResult | None = None


@dataclass(frozen=True)
class ExecutionRecord:
    """One entry of the log. ``result`` is set when ``state`` is DONE; ``acknowledged`` means the
    cluster has committed the report (only a DONE entry can be acknowledged)."""

    execution_id: str
    state: ExecutionState
    result: AttemptResult | None = None
    acknowledged: bool = False


def _encode(record: ExecutionRecord) -> bytes:
    data: dict[str, Any] = {"v": FORMAT_VERSION, "state": record.state.value}
    if record.result is not None:
        data["result"] = record.result.to_json_dict()
    return json.dumps(data, separators=(",", ":"), ensure_ascii=False).encode("utf-8")


class NewerFormat(ValueError):
    """An entry written by a newer release: not damage (an upgrade reads it)."""


def _decode(execution_id: str, raw: bytes, settled: bool) -> ExecutionRecord:
    where = f"execution log entry {execution_id!r}"
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{where} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("v"), int):
        raise ValueError(f"{where} has no format version")
    if data["v"] > FORMAT_VERSION:
        raise NewerFormat(
            f"{where} has format version {data['v']}, newer than this raftsched reads"
            f" ({FORMAT_VERSION}): it was written by a newer release; upgrade, or use a new data dir"
        )
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
        return BeginOutcome(BeginStatus.RUNNING)
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
        # Every unacknowledged id (running, or done and pending) → its state, in insertion order.
        self._open: dict[str, ExecutionState] = {}
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
                self._open[execution_id] = record.state
                self._remember(record)
        except BaseException:
            self._store.close()
            raise
        # Running when the previous process stopped: nobody runs them now.
        self._interrupted = [e for e, state in self._open.items() if state is ExecutionState.RUNNING]

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
                running = _encode(ExecutionRecord("", ExecutionState.RUNNING))  # the id is the key
                found = self._store.insert_many([(execution_ids[i], running) for i in fresh])
                for i, existing in zip(fresh, found, strict=True):
                    execution_id = execution_ids[i]
                    if existing is None:
                        self._open[execution_id] = ExecutionState.RUNNING
                        self._remember(ExecutionRecord(execution_id, ExecutionState.RUNNING))
                        out[i] = BeginOutcome(BeginStatus.NEW)
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
            self._open[record.execution_id] = ExecutionState.DONE  # keeps its insertion position
            self._remember(record)

    def get(self, execution_id: str) -> ExecutionRecord | None:
        """The entry for ``execution_id``, or None if it was never begun (or was pruned)."""
        with self._lock:
            return self._lookup(execution_id)

    def running(self) -> list[str]:
        """Ids recorded as running. Right after opening (before :meth:`recover`), these are the
        attempts that were running when the previous process stopped."""
        with self._lock:
            return [e for e, state in self._open.items() if state is ExecutionState.RUNNING]

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
                if self._open.get(execution_id) is ExecutionState.RUNNING
            ]
            self._interrupted = []
            if records:
                self._finish_locked(records)
            return [r.result for r in records if r.result is not None]

    # -- reporting -------------------------------------------------------------------------------

    def pending_reports(self) -> list[AttemptResult]:
        """Results finished but not yet acknowledged by the cluster, to report (again)."""
        with self._lock:
            out: list[AttemptResult] = []
            for execution_id, state in self._open.items():
                if state is not ExecutionState.DONE:
                    continue
                record = self._lookup(execution_id)
                if record is not None and record.result is not None:
                    out.append(record.result)
            return out

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
                if self._open.get(execution_id) is ExecutionState.DONE
                and (record := self._lookup(execution_id)) is not None
            ]
            if not acked:
                return 0
            when = SystemClock().now_ms() if at_ms is None else at_ms
            self._store.settle([r.execution_id for r in acked], when)  # the result stays as written
            for record in acked:
                del self._open[record.execution_id]
                self._remember(
                    ExecutionRecord(record.execution_id, record.state, record.result, acknowledged=True)
                )
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
