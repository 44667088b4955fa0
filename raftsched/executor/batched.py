"""The executor's side of a ``Session`` stream (issue 31 P2; docs/dev/batched-executor.md):
work in as packed columns, eager async handlers, results out as columns.

:class:`BatchRunner` takes each ``SessionWork`` message of the agent's open session:

* definitions (``SessionTaskDef``) are kept for the stream, by ref; each names a task version's
  command or handler, params, timeout, runner and shards, as the work items of today's stream
  carry them per attempt;
* cold ``WorkItem`` values (cancels, log requests, workflow tasks, manual runs) go to
  :meth:`~raftsched.executor.attempts.Attempts.accept`, unchanged;
* a row whose handler was registered ``eager=True`` (:meth:`CallableRunner.register`), due now
  by the executor's own clock, and whose params hold no secret reference, runs here, in the
  batch that delivered it: every such row of the message is begun in ONE execution-log record
  (committed before any of them starts, as :meth:`DedupeLog.begin_many` does for the agent),
  then each handler is started eagerly (``coro.send(None)``, no Task); those that return at
  once are finished in ONE record and reported. One that suspends continues in a Task of its
  own, under the runner's timeout and cancel rules, as the agent's other attempts do;
* every other row becomes the work item it stands for and goes to ``accept`` (a row due later,
  a command, a plain or non-eager handler): today's path, with its never-early wait, its
  stream-generation rule and its thread-pool hop for plain functions.

Dedupe is as on the agent's path: an id running here is not started again (it counts as sent on
the open stream), an id the execution log knows is not run again (a finished one is reported
again). The agent's bookkeeping of starts (the early heartbeat's started list, the full one's
held list) is the same for eager rows, so lease timing and the "started" semantics the leader
relies on do not change.

Eager starts and ``asyncio.current_task()`` (Python 3.11): the handler's code before its first
``await`` runs with the current task swapped out (``asyncio.current_task()`` is None there, not
the agent's reader task), so an ``asyncio.timeout`` or ``TaskGroup`` opened there fails that
attempt (RuntimeError, reported) instead of cancelling the agent. That is why eager is opt-in per
handler. Python 3.12's ``eager_task_factory`` would remove the restriction.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import logging
from asyncio import tasks as _tasks
from typing import TYPE_CHECKING, Any

from raftsched.executor.execlog_records import BeginStatus
from raftsched.executor.handlers import handler_failure, handler_success, resume_started
from raftsched.executor.runners import AttemptResult, Cancellation, attempt_context, describe
from raftsched.v1 import raftsched_pb2 as pb

if TYPE_CHECKING:
    from raftsched.abc import Clock
    from raftsched.executor.dedupe import DedupeLog
    from raftsched.executor.handlers import CallableRunner
    from raftsched.executor.rungate import RunGate
    from raftsched.executor.runners import ParamsCache
    from raftsched.executor.secrets import Masker
    from raftsched.observability.executor_http import ExecutorObservability

log = logging.getLogger("raftsched.executor.agent")

_Row = tuple[pb.SessionTaskDef, str, str, int, int, int]
"""An eager row: its definition, execution id, run id, nominal time, shard and attempt."""

_enter_task: Any = getattr(_tasks, "_enter_task")  # noqa: B009 - private, as 3.12's eager tasks use it
_leave_task: Any = getattr(_tasks, "_leave_task")  # noqa: B009


class BatchRunner:
    """The runner of session rows (see the module docstring): a base class of
    :class:`~raftsched.executor.attempts.Attempts`, which provides what is declared here."""

    # Provided by the attempts (its subclass).
    name: str
    clock: Clock
    callables: CallableRunner
    observability: ExecutorObservability | None
    started: int
    refused_stale: int
    max_epoch: int
    dedupe: DedupeLog | None
    report_wake: asyncio.Event | None
    hb_wake: asyncio.Event | None
    running: dict[str, asyncio.Task[None]]
    item_gen: dict[str, int]
    stream_gen: int
    started_ids: set[str]
    started_since: list[str]
    start_late: dict[str, int]
    stops: dict[str, Cancellation]
    cancelled: set[str]
    masker: Masker
    params: ParamsCache
    gate: RunGate | None
    placed: set[str]

    def accept(self, item: pb.WorkItem) -> None:
        raise NotImplementedError

    def mask(self, result: AttemptResult) -> AttemptResult:
        raise NotImplementedError

    def forget(self, execution_id: str, task: asyncio.Task[None]) -> None:
        raise NotImplementedError

    def leave(self, execution_id: str) -> None:
        raise NotImplementedError

    def release(self, execution_id: str) -> None:
        raise NotImplementedError

    def finish_soon(self, result: AttemptResult) -> asyncio.Future[None]:
        raise NotImplementedError

    def _batch_init(self) -> None:
        self._session_defs: dict[int, pb.SessionTaskDef] = {}
        self.eager_rows = 0  # rows started eagerly (a test and bench figure)
        self.suspended_rows = 0  # of those, rows that suspended and went on in a Task

    def session_opened(self) -> None:
        self._session_defs = {}

    def session_work(self, work: pb.SessionWork) -> None:
        """Take one message's work (on the agent's loop, inside its session reader)."""
        if work.epoch < self.max_epoch:
            n = len(work.task_ref) + len(work.cold)
            self.refused_stale += n
            if self.observability is not None:
                self.observability.on_refused_stale(n)
            log.warning(
                "%s: refused %d attempt(s) from stale epoch %d (newest seen %d)",
                self.name,
                n,
                work.epoch,
                self.max_epoch,
            )
            return
        self.max_epoch = work.epoch
        for d in work.defs:
            self._session_defs[d.ref] = d
        for item in work.cold:
            self.accept(item)
        refs = work.task_ref
        if not refs:
            return
        nominals, shards, attempts = work.nominal_ms, work.shard, work.attempt
        if not (len(nominals) == len(shards) == len(attempts) == len(refs)):
            log.error("%s: a session message with columns of unequal length was ignored", self.name)
            return
        now = self.clock.now_ms()
        defs = self._session_defs
        callables = self.callables
        eager: list[_Row] = []
        for ref, nominal, shard, attempt in zip(refs, nominals, shards, attempts, strict=True):
            found = defs.get(ref)
            if found is None:
                log.error("%s: a session row names task ref %d, never defined; ignored", self.name, ref)
                continue
            d = found
            run_id = f"{d.task}@{nominal}"
            exec_id = f"{run_id}/{shard}/{attempt}"
            if (
                nominal <= now
                and d.handler
                and "{{" not in d.params_json
                and callables.eager(d.handler) is not None
                and 0 <= shard < max(1, d.shards)
            ):
                eager.append((d, exec_id, run_id, nominal, shard, attempt))
            else:
                if eager and self.gate is not None:  # prefetch: the rows before it go first
                    self._run_eager(eager, work.epoch)
                    eager = []
                self.accept(_item(d, exec_id, run_id, nominal, shard, attempt, work.epoch))
        if eager:
            self._run_eager(eager, work.epoch)

    def _run_eager(self, rows: list[_Row], epoch: int) -> None:
        dedupe = self.dedupe
        assert dedupe is not None and self.report_wake is not None
        running = self.running
        obs = self.observability
        fresh: list[_Row] = []
        for row in rows:
            exec_id = row[1]
            if exec_id in running:
                self.item_gen[exec_id] = self.stream_gen  # sent again: still ours
                if obs is not None:
                    obs.on_duplicate()
                continue
            seen = dedupe.known(exec_id)
            if seen is not None:
                if obs is not None:
                    obs.on_duplicate()
                if seen.status is BeginStatus.DONE:
                    self.report_wake.set()
                continue
            fresh.append(row)
        gate = self.gate
        if gate is None:
            if fresh:
                self._run_eager_rows(fresh, epoch)
            return
        # Prefetch: a row runs here only with a run slot free and nobody waiting for one, as many
        # at a time as slots are free (one execution-log record each time); a row that ends in
        # its batch gives its slot back at once. The rest wait in order, as work items (the
        # agent's path, which queues them).
        i = 0
        while i < len(fresh):
            k = 0
            while i + k < len(fresh) and gate.try_take():
                k += 1
            if not k:
                break
            self._run_eager_rows(fresh[i : i + k], epoch)
            i += k
        for d, exec_id, run_id, nominal, shard, attempt in fresh[i:]:
            self.accept(_item(d, exec_id, run_id, nominal, shard, attempt, epoch))

    def _run_eager_rows(self, fresh: list[_Row], epoch: int) -> None:
        """Begin ``fresh`` (new rows) in one execution-log record, then start each eagerly. With
        prefetch, each holds a run slot taken by the caller: given back here unless it goes on
        in a Task (then when that ends)."""
        dedupe = self.dedupe
        assert dedupe is not None and self.report_wake is not None
        running = self.running
        obs = self.observability
        gate = self.gate
        try:
            outcomes = dedupe.begin_many([row[1] for row in fresh])  # ONE record, before any start
        except Exception:  # e.g. an id too long for a key: each through the agent's own path
            if gate is not None:
                for _ in fresh:
                    gate.give()  # (each accept below takes its own place or queues)
            for d, exec_id, run_id, nominal, shard, attempt in fresh:
                self.accept(_item(d, exec_id, run_id, nominal, shard, attempt, epoch))
            return
        if obs is not None:
            obs.on_log_write("begin", len(fresh))
        callables = self.callables
        tail = callables.tail_bytes
        mono = callables.monotonic
        now_ms = self.clock.now_ms()
        secrets = self.masker.values
        params_cache = self.params
        loop = asyncio.get_running_loop()
        current = asyncio.current_task(loop)
        done: list[AttemptResult] = []
        started_since = self.started_since
        for (d, exec_id, run_id, nominal, shard, attempt), outcome in zip(fresh, outcomes, strict=True):
            if outcome.status is not BeginStatus.NEW:  # (only when the same id came twice in one message)
                continue
            self.started += 1
            started_since.append(exec_id)
            self.start_late[exec_id] = max(0, now_ms - nominal)
            cancellation = Cancellation()
            try:
                ctx = attempt_context(
                    exec_id,
                    run_id,
                    d.task,
                    nominal,
                    shard,
                    max(1, d.shards),
                    attempt,
                    params_cache.get(d.task, d.version, d.params_json),
                    d.timeout_ms,
                    {},
                    secrets,
                    cancellation,
                )
            except Exception as exc:
                done.append(_failed(exec_id, f"bad dispatch: {exc}"))
                continue
            fn: Any = callables.eager(d.handler)
            # Its own copy of the context, as a Task of its own would have: a context variable
            # the handler sets is not seen by the agent's reader or by the next handler.
            context = contextvars.copy_context()
            t0 = mono()
            if current is not None:
                _leave_task(loop, current)
            try:
                coro = fn(ctx)
                yielded = context.run(coro.send, None)
            except StopIteration as stop:
                try:
                    done.append(handler_success(stop.value, tail, _ms(mono() - t0), exec_id))
                except Exception as exc:  # e.g. a return value whose str() raises
                    done.append(_failed(exec_id, f"runner error: {describe(exc)}"))
                continue
            except KeyboardInterrupt:
                raise
            except BaseException as exc:  # SystemExit, CancelledError, a library's own: this row only
                done.append(handler_failure(exc, tail, _ms(mono() - t0), exec_id))
                continue
            finally:
                if current is not None:
                    _enter_task(loop, current)
            # Suspended: the rest in a Task, as the agent's other attempts run.
            self.suspended_rows += 1
            call: asyncio.Future[object] = loop.create_task(resume_started(coro, yielded), context=context)
            self.started_ids.add(exec_id)
            self.item_gen[exec_id] = self.stream_gen
            self.stops[exec_id] = cancellation
            task = running[exec_id] = asyncio.ensure_future(self._eager_rest(d.handler, ctx, call, t0))
            task.add_done_callback(functools.partial(self.forget, exec_id))
        self.eager_rows += len(fresh)
        if gate is not None:  # the rows that ended here (all but those going on in a Task)
            placed_ids = self.placed
            for row in fresh:
                if row[1] in running and row[1] not in placed_ids:
                    placed_ids.add(row[1])  # suspended: it holds its slot until _eager_rest ends
                else:
                    gate.give()
        if self.hb_wake is not None:
            self.hb_wake.set()  # tell the leader they started (the early heartbeat)
        if done:
            self._finish_eager(done)

    def _finish_eager(self, results: list[AttemptResult]) -> None:
        """Record ``results`` in ONE execution-log record, then let them be reported."""
        dedupe = self.dedupe
        assert dedupe is not None and self.report_wake is not None
        results = [self.mask(r) for r in results]
        obs = self.observability
        if obs is not None:
            obs.on_finished(results)
        try:
            dedupe.finish_many(results)
        except Exception:
            for r in results:
                try:
                    dedupe.finish(r.execution_id, r)
                except Exception:
                    log.exception("%s: cannot record the result of %s", self.name, r.execution_id)
        else:
            if obs is not None:
                obs.on_log_write("finish", len(results))
        for r in results:
            if not r.success:
                log.info("%s: %s failed in %d ms: %s", self.name, r.execution_id, r.duration_ms, r.error)
        self.report_wake.set()

    async def _eager_rest(self, handler: str, ctx: Any, call: asyncio.Future[object], started: float) -> None:
        """An eager row that suspended: its outcome under the runner's rules, then recorded."""
        exec_id = ctx.execution_id
        try:
            try:
                result = await self.callables.run(handler, ctx, call, started)
            except asyncio.CancelledError:
                if exec_id not in self.cancelled:
                    raise  # the agent is stopping
                result = _failed(exec_id, "cancelled: its run was cancelled or killed")
            except Exception as exc:  # a runner bug must not leave the attempt begun and never finished
                log.exception("%s: attempt %s crashed the runner", self.name, exec_id)
                result = _failed(exec_id, f"runner error: {describe(exc)}")
            result = self.mask(result)
            finished = self.finish_soon(result)
            try:
                await finished
            except asyncio.CancelledError:
                if exec_id not in self.cancelled:
                    raise
        finally:
            if not call.done():
                call.cancel()
        self.cancelled.discard(exec_id)
        self.leave(exec_id)
        self.release(exec_id)
        assert self.report_wake is not None
        self.report_wake.set()


def report(
    name: str, report_id: int, pending: list[AttemptResult], start_late: dict[str, int]
) -> pb.SessionReport:
    """A ``SessionReport`` of ``pending`` (results committed in the log, not acknowledged):
    successes with nothing to say but their duration and start lateness as rows, the rest as
    ``ExecResult`` values (as the Report RPC sends them)."""
    out = pb.SessionReport(report_id=report_id)
    ids: list[str] = []
    durations: list[int] = []
    lateness: list[int] = []
    cold = out.cold
    for r in pending:
        late = start_late.get(r.execution_id)
        if (
            r.success
            and late is not None
            and not (r.exit_code or r.error or r.stdout_tail or r.stderr_tail or r.timed_out)
            and 0 <= r.duration_ms < 2**32
        ):
            ids.append(r.execution_id)
            durations.append(r.duration_ms)
            lateness.append(late)
            continue
        cold.append(exec_result(r, late))
    if ids:
        out.execution_id.extend(ids)
        out.duration_ms.extend(durations)
        out.start_lateness_ms.extend(lateness)
    return out


def _item(
    d: pb.SessionTaskDef, exec_id: str, run_id: str, nominal: int, shard: int, attempt: int, epoch: int
) -> pb.WorkItem:
    """The work item a row stands for (what the leader's DispatchBatch stream would have sent)."""
    return pb.WorkItem(
        execution_id=exec_id,
        run_id=run_id,
        task=d.task,
        nominal_ms=nominal,
        shard=shard,
        attempt=attempt,
        epoch=epoch,
        task_version=d.version,
        shards=d.shards,
        command=d.command,
        handler=d.handler,
        params_json=d.params_json,
        timeout_ms=d.timeout_ms,
        runner=d.runner,
    )


def _ms(seconds: float) -> int:
    return max(0, round(seconds * 1000))


def _failed(execution_id: str, error: str) -> AttemptResult:
    return AttemptResult(execution_id, False, error=error)


def exec_result(r: AttemptResult, start_lateness_ms: int | None) -> pb.ExecResult:
    """``r`` as the ``ExecResult`` a report carries (a session's cold results, ReportRequest's)."""
    return pb.ExecResult(
        execution_id=r.execution_id,
        success=r.success,
        exit_code=r.exit_code or 0,
        error=r.error,
        stdout_tail=r.stdout_tail,
        stderr_tail=r.stderr_tail,
        timed_out=r.timed_out,
        duration_ms=r.duration_ms,
        start_lateness_ms=start_lateness_ms,
    )
