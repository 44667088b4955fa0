"""PROTOTYPE (issue 31, gate 2): the batched executor's hot path. A spike, not wired into
``raftsched.executor``; ``docs/dev/batched-executor.md`` says what it measured and how the real
one is to be built.

What it does, per batch of work (a :class:`raftsched.v1.execbatch_pb2.WorkColumns`, packed
columns decoded by protobuf's C codec):

* epoch fencing per batch; task definitions arrive once per stream (``defs``) and their params
  are parsed once per (task, version);
* dedupe: an attempt is keyed by ``(seq, shard, attempt)``; a key seen before (running, finished
  and unacknowledged, or acknowledged) is not run again; a finished unacknowledged one has its
  result reported again;
* ONE execution-log record for the batch's begin (the new attempts' key columns), committed
  before any attempt of the batch starts;
* async handlers run eagerly (``fn(ctx)`` then ``coro.send(None)``); one that suspends is handed
  to an asyncio Task and keeps its timeout; a plain function runs in the loop's thread pool;
* ONE execution-log record per batch (or per event-loop pass, for stragglers) for the results:
  a state byte per row plus duration columns, binary (protobuf), no JSON; committed before any
  of its results is reported;
* results go out as columns in a :class:`~raftsched.v1.execbatch_pb2.ReportBatch`; an
  acknowledgement (the report's id) settles the records once every row they hold is committed
  upstream;
* :meth:`BatchedExecutor.recover` after a restart: attempts begun and never finished are
  finished as failed with today's "executor restarted while the attempt ran", as
  :meth:`raftsched.executor.dedupe.DedupeLog.recover` does.

The log is the real :class:`raftsched.storage.lmdb_execlog.LmdbExecutionLog`: a record is one of
its keys (``b/<seq>.<shard>.<attempt>`` for a begin, ``f/...`` for a finish, named after the
record's first row, which is unique because that attempt begins and finishes once).
"""

from __future__ import annotations

import asyncio
import functools
import json
import time
import traceback
import types
from collections.abc import Callable, Coroutine, Generator, Mapping
from typing import Any

from raftsched.executor.dedupe import INTERRUPTED_ERROR
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.v1 import execbatch_pb2 as eb

RECORD_FORMAT = 1
OK, FAILED, TIMED_OUT, LOST = 1, 2, 3, 4  # ExecBatchRecord.state / ReportBatch.status bytes

Key = tuple[int, int, int]  # (seq, shard, attempt)
Handler = Callable[["BatchContext"], Any]


class BatchRefused(ValueError):
    """A batch that cannot be run as sent (bad columns, an unknown task): nothing of it ran."""


class BatchContext:
    """What one attempt knows about itself (today's AttemptContext, slotted: no checks per
    attempt, since the leader's columns are checked once per batch; strings built lazily)."""

    __slots__ = ("attempt", "nominal_ms", "params", "seq", "shard", "shards", "task", "timeout_ms")

    def __init__(
        self,
        seq: int,
        shard: int,
        attempt: int,
        nominal_ms: int,
        task: str,
        shards: int,
        params: Mapping[str, Any],
        timeout_ms: int,
    ) -> None:
        self.seq = seq
        self.shard = shard
        self.attempt = attempt
        self.nominal_ms = nominal_ms
        self.task = task
        self.shards = shards
        self.params = params
        self.timeout_ms = timeout_ms

    @property
    def run_id(self) -> str:
        return f"{self.task}@{self.nominal_ms}"

    @property
    def execution_id(self) -> str:
        return f"{self.task}@{self.nominal_ms}/{self.shard}/{self.attempt}"


class _Def:
    """A task definition as this stream sent it, with what is derived from it once."""

    __slots__ = ("fn", "is_async", "params", "shards", "task", "timeout_ms", "unknown")

    def __init__(self, d: eb.BatchTaskDef, fn: Handler | None, params: Mapping[str, Any]) -> None:
        self.task = d.task
        self.fn = fn
        self.is_async = fn is not None and asyncio.iscoroutinefunction(fn)
        self.params = params
        self.shards = max(1, d.shards)
        self.timeout_ms = d.timeout_ms
        self.unknown = f"unknown handler {d.handler!r}" if fn is None else ""


class _Begin:
    """One begin record: its key, its rows, how many of them are not acknowledged yet, and the
    finish records holding its results (settled together once all its rows are acknowledged,
    so an unsettled begin record always finds its results at recovery)."""

    __slots__ = ("finishes", "key", "keys", "open")

    def __init__(self, key: str, keys: list[Key]) -> None:
        self.key = key
        self.keys = keys
        self.open = len(keys)
        self.finishes: list[_Finish] = []


class _Finish:
    """One finish record (results as columns) and the begin records its rows came from."""

    __slots__ = (
        "attempts",
        "begins",
        "cold",
        "durations",
        "key",
        "keys",
        "lateness",
        "open_begins",
        "seqs",
        "shards",
        "status",
    )

    def __init__(
        self,
        keys: list[Key],
        status: bytes,
        durations: list[int],
        lateness: list[int],
        cold: list[eb.ColdResult],
        begins: dict[_Begin, int],
    ) -> None:
        first = keys[0]
        self.key = f"f/{first[0]}.{first[1]}.{first[2]}"
        self.keys = keys
        self.seqs = [k[0] for k in keys]
        self.shards = [k[1] for k in keys]
        self.attempts = [k[2] for k in keys]
        self.status = status
        self.durations = durations
        self.lateness = lateness
        self.cold = cold
        self.begins = begins
        self.open_begins = len(begins)

    def record(self) -> bytes:
        return eb.ExecBatchRecord(
            format=RECORD_FORMAT,
            finish=True,
            seq=self.seqs,
            shard=self.shards,
            attempt=self.attempts,
            state=self.status,
            duration_ms=self.durations,
            cold=self.cold,
        ).SerializeToString()


class _Later:
    """Results that come after their batch's pass (suspended handlers, threads, early starts):
    gathered per event-loop pass into one finish record."""

    __slots__ = ("begins", "cold", "durations", "keys", "lateness", "status")

    def __init__(self) -> None:
        self.keys: list[Key] = []
        self.status = bytearray()
        self.durations: list[int] = []
        self.lateness: list[int] = []
        self.cold: list[eb.ColdResult] = []
        self.begins: dict[_Begin, int] = {}


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], yielded: Any) -> Generator[Any, Any, Any]:
    """The rest of a coroutine that already ran up to its first suspension (it yielded
    ``yielded``): awaited inside a Task, the Task waits on what it yielded, then it goes on.
    Cancellation (a timeout) is thrown into the coroutine, as a Task would."""
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            yielded = coro.send(sent)
        except StopIteration as stop:
            return stop.value


async def _rest(coro: Coroutine[Any, Any, Any], yielded: Any, timeout_s: float | None) -> Any:
    if timeout_s is None:
        return await _resume(coro, yielded)
    async with asyncio.timeout(timeout_s):
        return await _resume(coro, yielded)


def _cold_failure(index: int, exc: BaseException) -> eb.ColdResult:
    trace = "".join(traceback.format_exception(exc))
    return eb.ColdResult(index=index, error=f"{type(exc).__name__}: {exc}"[:4096], stderr_tail=trace[-8192:])


class BatchedExecutor:
    """The prototype. Call :meth:`recover` once after opening, then :meth:`on_work` with each
    WorkColumns message (bytes) on the event loop; reports leave through ``on_report`` (the
    serialised ReportBatch and its id) and are settled by :meth:`on_ack`."""

    def __init__(
        self,
        log: LmdbExecutionLog,
        handlers: Mapping[str, Handler],
        on_report: Callable[[int, bytes], None],
        *,
        now_ms: Callable[[], int] = lambda: time.time_ns() // 1_000_000,
        monotonic: Callable[[], float] = time.monotonic,
        report_every_s: float = 0.01,
        report_max: int = 500,
    ) -> None:
        self._log = log
        self._handlers = dict(handlers)
        self._on_report = on_report
        self._now_ms = now_ms
        self._mono = monotonic
        self._report_every_s = report_every_s
        self._report_max = report_max
        self._epoch = 0
        self._defs: dict[int, _Def] = {}  # this stream's task_ref -> definition
        self._params: dict[tuple[str, int], Mapping[str, Any]] = {}  # (task, version) -> params
        # Every key this executor knows: a _Begin (running), a _Finish (finished, not
        # acknowledged) or None (acknowledged; kept until a retention horizon, not in the spike).
        self._known: dict[Key, _Begin | _Finish | None] = {}
        self._later: _Later | None = None
        self._pending: list[_Finish] = []  # durable, not yet in a report
        self._resend: list[tuple[_Finish, int]] = []  # re-delivered finished rows: report again
        self._pending_rows = 0
        self._report_timer: asyncio.TimerHandle | None = None
        self._next_report = 1
        self._reports: dict[int, list[_Finish]] = {}  # sent, not acknowledged
        self._tasks: set[asyncio.Task[None]] = set()  # suspended handlers
        self.refused_stale = 0
        self.duplicates = 0
        self.acknowledged = 0  # results acknowledged (rows of acknowledged reports)
        self.accepted = 0  # attempts begun (recorded and started, or waiting for their time)

    # -- recovery ---------------------------------------------------------------------------------

    def recover(self) -> int:
        """Rebuild the index from the log's unsettled records; finish every attempt begun and
        never finished as interrupted (one finish record) and queue every unacknowledged result
        for reporting. Returns how many attempts were interrupted."""
        for key, raw in self._log.unsettled():
            rec = eb.ExecBatchRecord.FromString(raw)
            if rec.format > RECORD_FORMAT:
                raise ValueError(
                    f"execution log record {key!r} has format {rec.format}, newer than this reads"
                )
            keys = list(zip(rec.seq, rec.shard, rec.attempt, strict=True))
            if not rec.finish:
                begin = _Begin(key, keys)
                self._known.update(dict.fromkeys(keys, begin))
                continue
            begins: dict[_Begin, int] = {}
            for k in keys:
                b = self._known.get(k)
                if not isinstance(b, _Begin):
                    raise ValueError(f"execution log record {key!r} finishes {k} that no open begin holds")
                begins[b] = begins.get(b, 0) + 1
            fin = _Finish(keys, rec.state, list(rec.duration_ms), [0] * len(keys), list(rec.cold), begins)
            fin.key = key
            for b in begins:
                b.finishes.append(fin)
            self._known.update(dict.fromkeys(keys, fin))
            self._queue(fin)
        lost = [(k, b) for k, b in self._known.items() if isinstance(b, _Begin)]
        if lost:
            later = self._later = _Later()
            for k, b in lost:
                self._later_row(later, k, b, LOST, 0, 0, INTERRUPTED_ERROR)
            self._flush_later()
        elif self._pending:
            self._report_soon()
        return len(lost)

    # -- work -------------------------------------------------------------------------------------

    def new_stream(self) -> None:
        """A new stream: its task refs start afresh (params stay cached per (task, version))."""
        self._defs = {}

    def on_work(self, data: bytes) -> None:
        """Take one WorkColumns message: refuse it whole, or begin its new attempts (one durable
        record) and run them."""
        msg = eb.WorkColumns.FromString(data)
        if msg.epoch < self._epoch:
            self.refused_stale += len(msg.seq)
            return
        n = len(msg.seq)
        lengths = (len(msg.task_ref), len(msg.nominal_delta), len(msg.shard), len(msg.attempt))
        if any(x != n for x in lengths):
            raise BatchRefused(
                f"WorkColumns: columns of different lengths (seq {n}, task_ref {lengths[0]},"
                f" nominal_delta {lengths[1]}, shard {lengths[2]}, attempt {lengths[3]})"
            )
        defs = self._defs
        if msg.defs:  # checked whole before any is kept: a refused batch changes nothing
            defs = {**defs, **{d.ref: self._define(d) for d in msg.defs}}
        refs = msg.task_ref
        if not defs.keys() >= set(refs):
            missing = sorted(set(refs) - defs.keys())
            raise BatchRefused(f"WorkColumns: task_ref {missing[:5]} not defined on this stream")
        self._defs = defs
        self._epoch = msg.epoch
        if msg.acked_through:
            self.on_ack(msg.acked_through, through=True)
        if not n:
            return
        keys = list(zip(msg.seq, msg.shard, msg.attempt, strict=True))
        known = self._known
        rows: range | list[int]
        if known.keys().isdisjoint(keys) and len(set(keys)) == n:
            rows = range(n)  # the usual case: every attempt is new
            fresh = keys
        else:
            rows, fresh = self._sort_out(keys)
            if not fresh:
                return
        first = fresh[0]
        begin = _Begin(f"b/{first[0]}.{first[1]}.{first[2]}", fresh)
        rec = eb.ExecBatchRecord(format=RECORD_FORMAT)
        if len(fresh) == n:
            rec.seq.extend(msg.seq)
            rec.shard.extend(msg.shard)
            rec.attempt.extend(msg.attempt)
        else:
            rec.seq.extend(k[0] for k in fresh)
            rec.shard.extend(k[1] for k in fresh)
            rec.attempt.extend(k[2] for k in fresh)
        # Durable before any attempt of the batch starts.
        if self._log.insert_many([(begin.key, rec.SerializeToString())])[0] is not None:
            raise RuntimeError(f"execution log already holds {begin.key}")  # a first row begins once
        known.update(dict.fromkeys(fresh, begin))
        self._run(msg, rows, keys, begin)

    def _sort_out(self, keys: list[Key]) -> tuple[list[int], list[Key]]:
        """The rows to run (new keys, first occurrence), answering the others: a finished
        unacknowledged one is reported again; a running or acknowledged one is ignored."""
        known = self._known
        rows: list[int] = []
        fresh: list[Key] = []
        seen: set[Key] = set()
        for i, k in enumerate(keys):
            if k in seen:
                continue
            seen.add(k)
            if k in known:
                self.duplicates += 1
                state = known[k]
                if isinstance(state, _Finish):
                    self._resend.append((state, state.keys.index(k)))
                    self._report_soon()
                continue
            rows.append(i)
            fresh.append(k)
        return rows, fresh

    def _define(self, d: eb.BatchTaskDef) -> _Def:
        cache_key = (d.task, d.version)
        params = self._params.get(cache_key)
        if params is None:
            try:
                parsed = json.loads(d.params_json) if d.params_json else {}
            except ValueError as exc:
                raise BatchRefused(f"BatchTaskDef {d.task!r} v{d.version}: params_json: {exc}") from None
            if not isinstance(parsed, dict):
                raise BatchRefused(f"BatchTaskDef {d.task!r} v{d.version}: params_json is not an object")
            params = self._params[cache_key] = types.MappingProxyType(parsed)
        return _Def(d, self._handlers.get(d.handler), params)

    def _run(self, msg: eb.WorkColumns, rows: range | list[int], keys: list[Key], begin: _Begin) -> None:
        base = msg.base_ms
        deltas = msg.nominal_delta
        refs = msg.task_ref
        defs = self._defs
        now = self._now_ms()
        mono = self._mono
        late_base = now - base
        if base + max(deltas) > now:  # never early, by this executor's clock either
            for i in rows:
                self._start_row(keys[i], begin, defs[refs[i]], base + deltas[i])
            return
        fin_keys: list[Key] = []
        status = bytearray()
        durations: list[int] = []
        lateness: list[int] = []
        cold: list[eb.ColdResult] = []
        for i in rows:
            d = defs[refs[i]]
            key = keys[i]
            if not d.is_async:
                self._start_row(key, begin, d, base + deltas[i])
                continue
            fn = d.fn
            assert fn is not None
            seq, shard, attempt = key
            ctx = BatchContext(
                seq, shard, attempt, base + deltas[i], d.task, d.shards, d.params, d.timeout_ms
            )
            t0 = mono()
            coro = fn(ctx)
            try:
                yielded = coro.send(None)
            except StopIteration:
                state = OK
            except Exception as exc:
                cold.append(_cold_failure(len(status), exc))
                state = FAILED
            else:  # it suspended: a Task finishes it, with what is left of its timeout
                self._suspended(coro, d.timeout_ms, yielded, key, begin, t0, late_base - deltas[i])
                continue
            fin_keys.append(key)
            status.append(state)
            durations.append(round((mono() - t0) * 1000))
            lateness.append(late_base - deltas[i])
        self.accepted += len(rows)
        if fin_keys:
            self._finished(
                _Finish(fin_keys, bytes(status), durations, lateness, cold, {begin: len(fin_keys)})
            )

    def _suspended(
        self,
        coro: Coroutine[Any, Any, Any],
        timeout_ms: int,
        yielded: Any,
        key: Key,
        begin: _Begin,
        t0: float,
        late: int,
    ) -> None:
        """A handler that suspended on its first step: an asyncio Task runs the rest of it,
        within what is left of its timeout (measured from its start)."""
        left = max(0.0, timeout_ms / 1000 - (self._mono() - t0)) if timeout_ms > 0 else None
        task = asyncio.get_running_loop().create_task(
            self._finish_suspended(coro, yielded, left, timeout_ms, key, begin, t0, late)
        )
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _finish_suspended(
        self,
        coro: Coroutine[Any, Any, Any],
        yielded: Any,
        left: float | None,
        timeout_ms: int,
        key: Key,
        begin: _Begin,
        t0: float,
        late: int,
    ) -> None:
        try:
            await _rest(coro, yielded, left)
        except TimeoutError:
            error = f"timed out after {timeout_ms} ms: handler cancelled"
            self._later_row(self._later_pass(), key, begin, TIMED_OUT, self._ms_since(t0), late, error)
            return
        except Exception as exc:
            self._later_row(self._later_pass(), key, begin, FAILED, self._ms_since(t0), late, exc=exc)
            return
        self._later_row(self._later_pass(), key, begin, OK, self._ms_since(t0), late)

    def _start_row(self, key: Key, begin: _Begin, d: _Def, nominal_ms: int) -> None:
        """The general path of one attempt: early (waits for its nominal time), a plain function
        (thread pool), an unknown handler."""
        loop = asyncio.get_running_loop()
        early_s = (nominal_ms - self._now_ms()) / 1000
        if early_s > 0:
            loop.call_later(early_s, self._start_row, key, begin, d, nominal_ms)
            return
        late = self._now_ms() - nominal_ms
        seq, shard, attempt = key
        if d.fn is None:
            self._later_row(self._later_pass(), key, begin, FAILED, 0, late, d.unknown)
            return
        ctx = BatchContext(seq, shard, attempt, nominal_ms, d.task, d.shards, d.params, d.timeout_ms)
        t0 = self._mono()
        if d.is_async:
            coro = d.fn(ctx)
            try:
                yielded = coro.send(None)
            except StopIteration:
                self._later_row(self._later_pass(), key, begin, OK, self._ms_since(t0), late)
            except Exception as exc:
                self._later_row(self._later_pass(), key, begin, FAILED, self._ms_since(t0), late, exc=exc)
            else:
                self._suspended(coro, d.timeout_ms, yielded, key, begin, t0, late)
            return
        fut = loop.run_in_executor(None, d.fn, ctx)
        timer = (
            loop.call_later(
                d.timeout_ms / 1000, self._thread_timed_out, fut, key, begin, t0, late, d.timeout_ms
            )
            if d.timeout_ms > 0
            else None
        )
        fut.add_done_callback(functools.partial(self._thread_done, key, begin, t0, late, timer))

    def _thread_done(
        self,
        key: Key,
        begin: _Begin,
        t0: float,
        late: int,
        timer: asyncio.TimerHandle | None,
        fut: asyncio.Future[Any],
    ) -> None:
        if timer is not None:
            timer.cancel()
        if self._known.get(key) is not begin:
            return  # timed out already: its result stands
        exc = fut.exception()
        state = OK if exc is None else FAILED
        self._later_row(self._later_pass(), key, begin, state, self._ms_since(t0), late, exc=exc)

    def _thread_timed_out(
        self, fut: asyncio.Future[Any], key: Key, begin: _Begin, t0: float, late: int, timeout_ms: int
    ) -> None:
        del fut  # a thread cannot be stopped: it runs on, its outcome discarded (as today)
        error = f"timed out after {timeout_ms} ms: its thread cannot be stopped and runs on"
        self._later_row(self._later_pass(), key, begin, TIMED_OUT, self._ms_since(t0), late, error)

    def _ms_since(self, t0: float) -> int:
        return round((self._mono() - t0) * 1000)

    # -- results ----------------------------------------------------------------------------------

    def _later_pass(self) -> _Later:
        later = self._later
        if later is None:
            later = self._later = _Later()
            asyncio.get_running_loop().call_soon(self._flush_later)
        return later

    def _later_row(
        self,
        later: _Later,
        key: Key,
        begin: _Begin,
        state: int,
        duration_ms: int,
        late: int,
        error: str = "",
        exc: BaseException | None = None,
    ) -> None:
        if key in later.keys:
            return  # one result per attempt: the first stands (a timeout racing its thread)
        if exc is not None:
            later.cold.append(_cold_failure(len(later.status), exc))
        elif error:
            later.cold.append(eb.ColdResult(index=len(later.status), error=error))
        later.keys.append(key)
        later.status.append(state)
        later.durations.append(duration_ms)
        later.lateness.append(late)
        later.begins[begin] = later.begins.get(begin, 0) + 1

    def _flush_later(self) -> None:
        later, self._later = self._later, None
        if later is None or not later.keys:
            return
        self._finished(
            _Finish(
                later.keys, bytes(later.status), later.durations, later.lateness, later.cold, later.begins
            )
        )

    def _finished(self, fin: _Finish) -> None:
        # Durable before it is reported.
        if self._log.insert_many([(fin.key, fin.record())])[0] is not None:
            raise RuntimeError(f"execution log already holds {fin.key}")
        for b in fin.begins:
            b.finishes.append(fin)
        self._known.update(dict.fromkeys(fin.keys, fin))
        self._queue(fin)

    def _queue(self, fin: _Finish) -> None:
        self._pending.append(fin)
        self._pending_rows += len(fin.keys)
        self._report_soon()

    def _report_soon(self) -> None:
        if self._pending_rows >= self._report_max:
            self.report_now()
        elif self._report_timer is None:
            self._report_timer = asyncio.get_running_loop().call_later(self._report_every_s, self.report_now)

    def report_now(self) -> None:
        """Send every durable result not reported yet (and re-sends) as one ReportBatch."""
        if self._report_timer is not None:
            self._report_timer.cancel()
            self._report_timer = None
        pending, self._pending, self._pending_rows = self._pending, [], 0
        resend, self._resend = self._resend, []
        if not pending and not resend:
            return
        report_id = self._next_report
        self._next_report += 1
        rb = eb.ReportBatch(report_id=report_id)
        status = bytearray()
        for fin in pending:
            offset = len(rb.seq)
            rb.seq.extend(fin.seqs)
            rb.shard.extend(fin.shards)
            rb.attempt.extend(fin.attempts)
            rb.duration_ms.extend(fin.durations)
            rb.start_lateness_ms.extend(fin.lateness)
            status += fin.status
            for c in fin.cold:
                rb.cold.add(
                    index=c.index + offset,
                    error=c.error,
                    exit_code=c.exit_code,
                    stdout_tail=c.stdout_tail,
                    stderr_tail=c.stderr_tail,
                )
        for fin, i in resend:
            rb.seq.append(fin.seqs[i])
            rb.shard.append(fin.shards[i])
            rb.attempt.append(fin.attempts[i])
            rb.duration_ms.append(fin.durations[i])
            rb.start_lateness_ms.append(0)
            for c in fin.cold:
                if c.index == i:
                    rb.cold.add(index=len(status), error=c.error, stderr_tail=c.stderr_tail)
            status.append(fin.status[i])
        rb.status = bytes(status)
        self._reports[report_id] = pending
        self._on_report(report_id, rb.SerializeToString())

    def on_ack(self, report_id: int, *, through: bool = False) -> None:
        """The leader committed report ``report_id`` (and, with ``through``, every earlier one):
        settle the records whose rows are all acknowledged now, in one log transaction."""
        ids = [r for r in self._reports if r <= report_id] if through else [report_id]
        settle: list[str] = []
        known = self._known
        for rid in ids:
            for fin in self._reports.pop(rid, ()):
                self.acknowledged += len(fin.keys)
                for b, count in fin.begins.items():
                    b.open -= count
                    if b.open:
                        continue
                    settle.append(b.key)
                    known.update(dict.fromkeys(b.keys))  # acknowledged: None
                    for f2 in b.finishes:
                        f2.open_begins -= 1
                        if not f2.open_begins:
                            settle.append(f2.key)
        if settle:
            self._log.settle(settle, self._now_ms())

    # -- state, for the bench and tests --------------------------------------------------------

    def open_attempts(self) -> int:
        """Attempts running or finished and not acknowledged."""
        return sum(1 for v in self._known.values() if v is not None)

    async def drain_tasks(self) -> None:
        """Wait for every suspended handler's Task."""
        while self._tasks:
            await asyncio.gather(*list(self._tasks), return_exceptions=True)
