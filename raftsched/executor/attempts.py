"""What one executor holds: each attempt from its arrival to its result in the execution log.

:class:`Attempts` is the agent's table of attempts (:class:`raftsched.executor.agent.Executor`
keeps the protocol: registration, the streams, heartbeats, reports, draining). It takes every
work item the leader sends (:meth:`Attempts.accept`: an epoch older than the newest seen is
refused, a cancel stops what runs, a re-sent id is never run twice), records each begin and
finish in the execution log in batches (one LMDB transaction per pass of the event loop), runs
the attempt no earlier than its nominal time by this executor's clock, through the run gate
when it prefetches (:mod:`raftsched.executor.rungate`), and with secrets resolved just before
the start and masked in everything reported or logged. A session's rows come in through its
base :class:`raftsched.executor.batched.BatchRunner`.

What it shares with the protocol is read here and written there: the newest epoch seen
(``max_epoch``, from registrations and heartbeats too), the stream generation and whether a
stream is open (an attempt whose stream broke starts only if the leader sends it again on the
new one, :meth:`Attempts.still_ours`), the lease (how long to wait for that), and the
wake-ups of the report loop (``report_wake``) and the heartbeat loop (``hb_wake``).
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
from collections.abc import Callable

from raftsched.abc import Clock, SessionStream
from raftsched.errors import InvalidSpec
from raftsched.executor.batched import BatchRunner
from raftsched.executor.commands import SubprocessRunner, python_command
from raftsched.executor.dedupe import DedupeLog
from raftsched.executor.execlog_records import BeginOutcome, BeginStatus
from raftsched.executor.handlers import CallableRunner
from raftsched.executor.rungate import RunGate
from raftsched.executor.runners import (
    AttemptResult,
    Cancellation,
    CommandRunner,
    ParamsCache,
    attempt_context,
    describe,
)
from raftsched.executor.secrets import Masker, MaskingFilter, MissingSecret, SecretStore, resolve_attempt
from raftsched.executor.session import SessionLink
from raftsched.logfields import attempt_fields
from raftsched.observability.executor_http import ExecutorObservability
from raftsched.v1 import raftsched_pb2 as pb

# The agent's logger: an operator filters one name for everything an executor says (and the
# tests that read an executor's log match it).
log = logging.getLogger("raftsched.executor.agent")

RESEND_POLL_S = 0.05  # how often an attempt whose stream broke checks whether it was re-sent


class Attempts(BatchRunner):
    """The attempts held by the executor ``name`` (see the module docstring). At most ``slots``
    run at once; with ``prefetch`` the rest of what the leader assigns waits here for a run slot,
    unstarted, in arrival order. ``secrets`` resolves and masks; ``callables`` and
    ``subprocess`` run handlers and commands; ``on_log_request`` answers a reader's request for
    an attempt's log (the agent's, through the leader). :meth:`open` gives it its execution log
    before anything is accepted."""

    def __init__(
        self,
        name: str,
        *,
        slots: int,
        prefetch: int,
        clock: Clock,
        secrets: SecretStore,
        callables: CallableRunner,
        subprocess: CommandRunner,
        observability: ExecutorObservability | None,
        on_log_request: Callable[[pb.LogRequest], None],
    ) -> None:
        self.name = name
        self.slots = slots
        self.prefetch = prefetch
        self.clock = clock
        self.secrets = secrets
        self.callables = callables
        self.subprocess = subprocess
        self.observability = observability
        self.on_log_request = on_log_request
        # Every value the secret store knows (and those an attempt used) is masked in results
        # and, through the filter on the root logger's handlers, in log lines.
        self.masking = MaskingFilter(secrets)
        self.masker = Masker(secrets.values())
        # The run gate (None without prefetch: the leader never sends more than the slots).
        self.gate = RunGate(slots) if prefetch else None
        self.placed: set[str] = set()  # attempts holding a place of the gate
        self.tickets: dict[str, asyncio.Future[None]] = {}  # attempts waiting for one
        self.dedupe: DedupeLog | None = None  # the execution log (open())
        self.running: dict[str, asyncio.Task[None]] = {}
        self._to_begin: list[tuple[str, asyncio.Future[BeginOutcome]]] = []
        self._to_finish: list[tuple[AttemptResult, asyncio.Future[None]]] = []
        self.cancelled: set[str] = set()
        # Stop requests of running attempts whose runner honours them (SIGTERM, grace, SIGKILL;
        # a handler's cancellation): a cancel of one that has started sets it.
        self.stops: dict[str, Cancellation] = {}
        self.max_epoch = 0
        self.report_wake: asyncio.Event | None = None  # open(): set when a result is to report
        self.hb_wake: asyncio.Event | None = None  # open(): set when an attempt starts
        self.started = 0
        self.refused_stale = 0
        self.started_ids: set[str] = set()  # running attempts that have started
        # Started since the last heartbeat, for a partial one (only to a leader that takes them).
        self.started_since: list[str] = []
        # Dispatch streams opened so far, and the one each running attempt was last sent on: an
        # attempt starts only while the stream it came on (or re-came on) is the open one.
        self.stream_gen = 0
        self.item_gen: dict[str, int] = {}
        self.connected = False  # a dispatch stream (or session) is open
        self.lease_s = 10.0  # the leader's lease, from its registration reply
        # execution id -> ms late at start, from its start until the cluster acknowledges its
        # result (then reported with it). Not in the execution log: after a restart a result is
        # re-reported without it, which only leaves it out of the leader's histogram.
        self.start_late: dict[str, int] = {}
        self.params = ParamsCache()  # each task version's params, parsed once
        self._batch_init()

    def open(self, dedupe: DedupeLog) -> None:
        """Start holding attempts (the agent's ``run``): ``dedupe`` is the execution log, its
        interrupted attempts already recovered; the wake-ups are made on the running loop; with
        prefetch, every slot is free again (none closed by an earlier run's drain)."""
        self.dedupe = dedupe
        self.report_wake = asyncio.Event()
        self.hb_wake = asyncio.Event()
        if self.prefetch:
            self.gate = RunGate(self.slots)
            self.placed.clear()
            self.tickets.clear()

    def session_link(
        self, stream: SessionStream, on_acknowledged: Callable[[int], None] | None = None
    ) -> SessionLink:
        """The link over an open session ``stream``: it reports the results this table's
        execution log holds and hands each message's work to :meth:`session_work`."""
        assert self.dedupe is not None and self.report_wake is not None
        return SessionLink(
            stream,
            self.dedupe,
            lambda: self.clock.now_ms(),  # the clock of the moment (a test may swap it)
            self.report_wake,  # set by finished results and by acknowledgements alike
            name=self.name,
            start_late=self.start_late,
            on_work=self.session_work,
            on_acknowledged=on_acknowledged,
        )

    def stream_opened(self) -> None:
        """A dispatch stream (or session) opened: attempts sent on it may start."""
        self.stream_gen += 1
        self.connected = True

    def accept(self, item: pb.WorkItem) -> None:
        assert self.dedupe is not None and self.report_wake is not None
        if item.epoch < self.max_epoch:
            self.refused_stale += 1
            if self.observability is not None:
                self.observability.on_refused_stale()
            log.warning(
                "%s: refused %s from stale epoch %d (newest seen %d)",
                self.name,
                item.execution_id,
                item.epoch,
                self.max_epoch,
                extra=_item_fields(item, self.name),
            )
            return
        self.max_epoch = item.epoch
        if item.HasField("log_request"):  # not work: a reader wants an attempt's log
            self.on_log_request(item.log_request)
            return
        if item.cancel:  # its run was cancelled: stop it if it runs here (else nothing to do)
            task = self.running.get(item.execution_id)
            if task is not None and item.execution_id not in self.cancelled:
                log.info(
                    "%s: cancelling %s: its run was cancelled",
                    self.name,
                    item.execution_id,
                    extra=_item_fields(item, self.name),
                )
                self.cancelled.add(item.execution_id)
                stop = self.stops.get(item.execution_id)
                if stop is not None and item.execution_id in self.started_ids:
                    stop.set(item.cancel_reason or "its run was cancelled")  # TERM, grace, KILL
                else:
                    task.cancel()  # not started yet (or a runner that cannot be asked): at once
            return
        if item.execution_id in self.running:
            self.item_gen[item.execution_id] = self.stream_gen  # sent again: still ours
            if self.observability is not None:
                self.observability.on_duplicate()
            return  # already running here: never twice
        seen = self.dedupe.known(item.execution_id)  # a re-sent attempt is answered at once
        if seen is not None:
            if self.observability is not None:
                self.observability.on_duplicate()
            if seen.status is BeginStatus.DONE:
                self.report_wake.set()  # its stored result is pending or re-reported
            return
        self.item_gen[item.execution_id] = self.stream_gen
        if item.handler or isinstance(self.subprocess, SubprocessRunner):
            self.stops[item.execution_id] = Cancellation()
        if self.gate is not None and item.nominal_ms <= self.clock.now_ms():
            # A run slot now, or a place in the queue for one, in arrival order. (One early by our
            # clock queues when it is due, in execute: it holds no slot it may not use yet.)
            ticket = self.gate.ticket()
            if ticket is None:
                self.placed.add(item.execution_id)
            else:
                self.tickets[item.execution_id] = ticket
        task = self.running[item.execution_id] = asyncio.ensure_future(self.execute(item))
        task.add_done_callback(functools.partial(self.forget, item.execution_id))

    def leave(self, execution_id: str) -> None:
        """``execution_id`` no longer runs here (finished, or never to start)."""
        self.running.pop(execution_id, None)
        self.started_ids.discard(execution_id)
        self.item_gen.pop(execution_id, None)
        self.stops.pop(execution_id, None)

    async def still_ours(self, execution_id: str) -> bool:
        """Whether the attempt may start now: it came (or came again) on the open stream. After
        a break it waits for the leader to send it again; False after two leases without."""
        polls = int(2 * self.lease_s / RESEND_POLL_S) + 1
        while not (self.connected and self.item_gen.get(execution_id) == self.stream_gen):
            polls -= 1
            if polls <= 0:
                return False
            await asyncio.sleep(RESEND_POLL_S)
        return True

    def busy(self) -> int:
        """Attempts held here less those waiting for a slot (prefetch): running, or on their way."""
        return len(self.running) - (self.gate.waiting if self.gate is not None else 0)

    def release(self, execution_id: str) -> None:
        """Give back ``execution_id``'s run slot, or its place in the queue for one (prefetch)."""
        gate = self.gate
        if gate is None:
            return
        if execution_id in self.placed:
            self.placed.discard(execution_id)
            gate.give()
            return
        ticket = self.tickets.pop(execution_id, None)
        if ticket is not None:
            gate.drop(ticket)

    def forget(self, execution_id: str, task: asyncio.Task[None]) -> None:
        # Normally execute removes itself; this covers a task cancelled before it started.
        if self.running.get(execution_id) is task:
            self.release(execution_id)
            del self.running[execution_id]
            self.cancelled.discard(execution_id)
            self.started_ids.discard(execution_id)
            self.item_gen.pop(execution_id, None)
            self.stops.pop(execution_id, None)

    # The execution log is written in batches: every attempt accepted (or finished) in one pass
    # of the event loop shares one LMDB transaction. One transaction per begin and per finish
    # was ~15 % of an executor's CPU at 500 attempts/s (bench/profile.py). Still recorded before
    # the attempt starts, and before its result is reported.

    def begin_soon(self, execution_id: str) -> asyncio.Future[BeginOutcome]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[BeginOutcome] = loop.create_future()
        if not self._to_begin:
            loop.call_soon(self._begin_batch)
        self._to_begin.append((execution_id, fut))
        return fut

    def _begin_batch(self) -> None:
        assert self.dedupe is not None
        batch, self._to_begin = self._to_begin, []
        try:
            outcomes: list[BeginOutcome | BaseException] = list(self.dedupe.begin_many([e for e, _ in batch]))
            if self.observability is not None:
                self.observability.on_log_write("begin", len(batch))
        except Exception:  # e.g. one id too long: then each on its own, so only that one fails
            outcomes = []
            for execution_id, _ in batch:
                try:
                    outcomes.append(self.dedupe.begin(execution_id))
                except Exception as exc:
                    outcomes.append(exc)
        for (_, fut), outcome in zip(batch, outcomes, strict=True):
            if fut.done():
                continue
            if isinstance(outcome, BaseException):
                fut.set_exception(outcome)
            else:
                fut.set_result(outcome)

    def finish_soon(self, result: AttemptResult) -> asyncio.Future[None]:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[None] = loop.create_future()
        if not self._to_finish:
            loop.call_soon(self._finish_batch)
        self._to_finish.append((result, fut))
        return fut

    def _finish_batch(self) -> None:
        assert self.dedupe is not None
        batch, self._to_finish = self._to_finish, []
        if self.observability is not None:
            self.observability.on_finished([r for r, _ in batch])
        try:
            self.dedupe.finish_many([r for r, _ in batch])
            if self.observability is not None:
                self.observability.on_log_write("finish", len(batch))
            errors: list[BaseException | None] = [None] * len(batch)
        except Exception:
            errors = []
            for result, _ in batch:
                try:
                    self.dedupe.finish(result.execution_id, result)
                    errors.append(None)
                except Exception as exc:
                    errors.append(exc)
        for (_, fut), error in zip(batch, errors, strict=True):
            if fut.done():
                continue
            if error is not None:
                fut.set_exception(error)
            else:
                fut.set_result(None)

    async def execute(self, item: pb.WorkItem) -> None:
        if self.gate is None:
            await self._execute_placed(item)
            return
        execution_id = item.execution_id
        try:
            if execution_id not in self.placed and execution_id not in self.tickets:
                await self._queue_when_due(item)
            ticket = self.tickets.get(execution_id)
            if ticket is not None:  # prefetched while every run slot was taken: wait for one
                try:
                    await ticket
                except asyncio.CancelledError:
                    if execution_id not in self.cancelled:
                        raise  # the agent is stopping
                    # Its run was cancelled while it waited: it never starts (recorded as such).
                else:
                    del self.tickets[execution_id]
                    self.placed.add(execution_id)
            await self._execute_placed(item)
        finally:
            self.release(execution_id)

    async def _queue_when_due(self, item: pb.WorkItem) -> None:
        """Wait until ``item`` is due by our clock, then take a run slot or a ticket for one. A
        cancel meanwhile takes neither: the attempt is recorded cancelled, never started."""
        early_ms = item.nominal_ms - self.clock.now_ms()
        try:
            if early_ms > 0:
                await asyncio.sleep(early_ms / 1000)
        except asyncio.CancelledError:
            if item.execution_id not in self.cancelled:
                raise  # the agent is stopping
            return
        assert self.gate is not None
        ticket = self.gate.ticket()
        if ticket is None:
            self.placed.add(item.execution_id)
        else:
            self.tickets[item.execution_id] = ticket

    async def _execute_placed(self, item: pb.WorkItem) -> None:
        assert self.dedupe is not None and self.report_wake is not None
        execution_id = item.execution_id
        try:
            outcome = await self.begin_soon(execution_id)
        except asyncio.CancelledError:
            if execution_id not in self.cancelled:
                raise  # the agent is stopping
            # Its workflow run was killed while the begin was being recorded. The batch records
            # it anyway (or already has): record it now if not, so the log holds it either way;
            # RUNNING here means our own batch recorded it.
            outcome = self.dedupe.begin(execution_id)
            if outcome.status is BeginStatus.RUNNING:
                outcome = BeginOutcome(BeginStatus.NEW)
        except Exception:
            log.exception(
                "%s: cannot record %s in the execution log",
                self.name,
                execution_id,
                extra=_item_fields(item, self.name),
            )
            self.leave(execution_id)
            return
        if outcome.status is not BeginStatus.NEW:
            # RUNNING: only after a restart, until recover(); DONE: its stored result is pending
            # or re-reported. Either way it does not run again.
            if self.observability is not None:
                self.observability.on_duplicate()
            self.cancelled.discard(execution_id)
            self.leave(execution_id)
            if outcome.status is BeginStatus.DONE:
                self.report_wake.set()
            return
        if execution_id in self.cancelled:  # killed while its begin was being recorded
            result = _failed(execution_id, "cancelled: its run was cancelled or killed")
        else:
            result = self.mask(await self._attempt(item))
        self._log_outcome(item, result)
        finished = self.finish_soon(result)
        try:
            await finished
        except asyncio.CancelledError:
            if execution_id not in self.cancelled:
                raise  # the agent is stopping
            # A cancel that came too late to stop it: the batch still records the result.
        self.cancelled.discard(execution_id)
        self.leave(execution_id)
        self.report_wake.set()

    async def _attempt(self, item: pb.WorkItem) -> AttemptResult:
        # Never early, by our own clock too: a leader whose clock runs ahead would otherwise start
        # attempts early in real time (the chaos suite's +2 s skew did, by ~2 s). Rather late.
        try:
            early_ms = item.nominal_ms - self.clock.now_ms()
            if early_ms > 0:
                await asyncio.sleep(early_ms / 1000)
            if not await self.still_ours(item.execution_id):
                log.info("%s: %s not started: the leader did not send it again", self.name, item.execution_id)
                return _failed(
                    item.execution_id,
                    "not started: its dispatch stream broke and the leader did not send it again",
                )
            self.started += 1
            self.started_ids.add(item.execution_id)
            self.started_since.append(item.execution_id)
            if self.hb_wake is not None:
                self.hb_wake.set()  # tell the leader now: a loss from here on is a try
            late = max(0, self.clock.now_ms() - item.nominal_ms)
            self.start_late[item.execution_id] = late
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "%s: starting %s (attempt %d, %d ms after its nominal time)",
                    self.name,
                    item.execution_id,
                    item.attempt,
                    late,
                    extra=_item_fields(item, self.name),
                )
            try:
                params_json, env, used = resolve_attempt(item.params_json, item.env, self.secrets)
            except MissingSecret as exc:
                return _failed(item.execution_id, f"{exc}: the attempt did not start")
            if used:
                self._know_secrets(used)
            ctx = attempt_context(
                item.execution_id,
                item.run_id,
                item.task,
                item.nominal_ms,
                item.shard,
                max(1, item.shards),
                item.attempt,
                self.params.get(item.task, item.task_version, params_json),
                item.timeout_ms,
                env,
                self.masker.values,
                self.stops.get(item.execution_id) or Cancellation(),
            )
            if item.handler:
                return await self.callables.run(item.handler, ctx)
            if item.command:
                command = python_command(item.command) if item.runner == "python" else item.command
                return await self.subprocess.run(command, ctx)
            return _failed(item.execution_id, "task has neither a command nor a handler")
        except InvalidSpec as exc:
            return _failed(item.execution_id, f"bad dispatch: {exc}")
        except asyncio.CancelledError:
            if item.execution_id not in self.cancelled:
                raise  # the agent is stopping
            self.cancelled.discard(item.execution_id)
            return _failed(item.execution_id, "cancelled: its run was cancelled or killed")
        except Exception as exc:  # a runner bug must not kill the agent or leave the attempt running
            log.exception(
                "%s: attempt %s crashed the runner",
                self.name,
                item.execution_id,
                extra=_item_fields(item, self.name),
            )
            return _failed(item.execution_id, f"runner error: {describe(exc)}")

    def _know_secrets(self, used: list[str]) -> None:
        """Mask ``used`` (and every value the store knows now) in results and log lines."""
        if any(value and value not in self.masker.values for value in used):
            self.masker = Masker([*self.secrets.values(), *used])
            self.masking.refresh(used)

    def mask(self, result: AttemptResult) -> AttemptResult:
        """``result`` with every secret value masked, before it is logged, stored or reported."""
        masker = self.masker
        if not masker:
            return result
        return dataclasses.replace(
            result,
            error=masker.mask(result.error),
            stdout_tail=masker.mask_tail(result.stdout_tail),
            stderr_tail=masker.mask_tail(result.stderr_tail),
        )

    def _log_outcome(self, item: pb.WorkItem, result: AttemptResult) -> None:
        """A failure at info, a success at debug: at a thousand attempts a second, a record per
        success would be most of the executor's own work when nobody reads them."""
        if result.success:
            if log.isEnabledFor(logging.DEBUG):
                log.debug(
                    "%s: %s succeeded in %d ms",
                    self.name,
                    item.execution_id,
                    result.duration_ms,
                    extra=_item_fields(item, self.name),
                )
        elif log.isEnabledFor(logging.INFO):
            log.info(
                "%s: %s failed in %d ms: %s",
                self.name,
                item.execution_id,
                result.duration_ms,
                result.error,
                extra=_item_fields(item, self.name),
            )

    def heartbeat_request(
        self, partial: bool, *, disk_used: float, log_used: float, clock_offset_ms: int | None
    ) -> pb.HeartbeatRequest:
        """A full heartbeat: every attempt held here. ``partial``: only those started since the
        previous heartbeat (a leader that takes them renews those and learns they started;
        the full one, every heartbeat interval, renews the rest): a start no longer costs a
        list of every open id on both sides. The rest is the agent's to say: its disk and
        execution-log use and its clock's offset from the leader's (None: not known yet)."""
        assert self.dedupe is not None
        if partial:
            since, self.started_since = self.started_since, []
            running = self.running
            request = pb.HeartbeatRequest(
                name=self.name,
                running=since,
                free_slots=max(0, self.slots + self.prefetch - len(running)),
                started=since,
                reports_started=True,
                finished=[e for e in since if e not in running],
                disk_used=disk_used,
                log_used=log_used,
                partial=True,
            )
            if clock_offset_ms is not None:
                request.clock_offset_ms = clock_offset_ms
            return request
        # Finished attempts whose report is not acknowledged yet keep their leases too, or a
        # slow report would turn a success into a lost attempt and a retry.
        done = self.dedupe.pending_ids()
        request = pb.HeartbeatRequest(
            name=self.name,
            running=[*self.running, *done],
            free_slots=max(0, self.slots + self.prefetch - len(self.running)),
            started=[*self.started_ids, *done],
            reports_started=True,
            finished=done,
            disk_used=disk_used,
            log_used=log_used,
        )
        if clock_offset_ms is not None:
            request.clock_offset_ms = clock_offset_ms
        return request


def _item_fields(item: pb.WorkItem, executor: str) -> dict[str, object]:
    return attempt_fields(item.execution_id, item.run_id, item.task, attempt=item.attempt, executor=executor)


def _failed(execution_id: str, error: str) -> AttemptResult:
    return AttemptResult(
        execution_id=execution_id,
        success=False,
        exit_code=None,
        error=error,
        stdout_tail="",
        stderr_tail="",
        duration_ms=0,
        timed_out=False,
    )
