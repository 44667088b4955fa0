"""The executor-facing gRPC service: it decodes, checks the caller, calls the leader's dispatch
(:class:`raftsched.leader.dispatch.hub.ExecutorHub`, on the node's event loop) and encodes.

Only the leader accepts executors; followers answer ``FAILED_PRECONDITION`` with the leader's
address (trailing metadata ``raftsched-leader``).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import AsyncIterator, Sequence

import grpc

from raftsched import bounds, codec
from raftsched.errors import InvalidSpec, NotFound, PermissionDenied, RaftschedError, quote
from raftsched.leader import writes
from raftsched.leader.dispatch.hub import CLOSE, ExecutorHub
from raftsched.leader.dispatch.liveness import executor_health
from raftsched.leader.dispatch.session import (
    SESSION_VERSION,
    SessionSink,
    check_execution_id,
    encode_work,
    report_rows,
)
from raftsched.leader.dispatch.work import Work, work_items
from raftsched.logfields import attempt_fields
from raftsched.model import validate_name
from raftsched.rpc.plumbing import abort, caller, propose_and_wait, rpc
from raftsched.security import authz
from raftsched.sharding.placement import validate_capacity
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

log = logging.getLogger(__name__)

MAX_BATCH = 1000  # work items per DispatchBatch message
# A Session's reader stops reading (the executor's gRPC window fills) while this many of its
# reports wait to commit, or this many heartbeat answers wait to be written: an agent has one
# report and one heartbeat in flight, so only a peer that ignores that is held back.
MAX_SESSION_REPORTS = 4
MAX_SESSION_UNANSWERED = 4
# Output tails and errors are capped here, whatever an executor sends: the agent keeps 8 KiB of
# each stream; a forged 3 MiB tail would otherwise be replicated and stored.
MAX_TAIL_CHARS = 16 * 1024


class ExecutorServicer(pb_grpc.ExecutorServiceServicer):  # type: ignore[misc]
    def __init__(self, hub: ExecutorHub) -> None:
        self.hub = hub

    def _require_bound(self, name: str) -> None:
        """With auth on, refuse a call about executor ``name`` from a principal other than the one
        it is registered under (raises :class:`raftsched.errors.PermissionDenied`). An unknown
        name passes: the call itself reports it as not registered."""
        if not authz.auth_on():
            return
        with self.hub.node.state.view() as v:
            rec = v.executor(name)
            principal = rec.principal if rec is not None else None
        who = caller().principal
        if principal is not None and principal != who.id:
            raise PermissionDenied(
                f"executor {quote(name)} is registered by another principal; {who.id} may not act for it"
            )

    @rpc
    async def Register(
        self, request: pb.RegisterRequest, context: grpc.aio.ServicerContext
    ) -> pb.RegisterReply:
        validate_name(request.name, "executor.name")
        if not 1 <= request.slots <= 10_000:
            raise InvalidSpec("executor.slots", f"{request.slots} out of range (1-10000)")
        validate_capacity(request.cpu, request.memory_mb)
        cmd = self.hub.leader_command()
        if authz.auth_on():
            # The name is bound to the registering principal (refused by apply if another
            # principal holds it), and the executor receives work of its namespaces only.
            who = caller()
            writes.set_executor_join(
                cmd,
                request.name,
                request.slots,
                request.labels,
                principal=who.principal.id,
                namespaces=sorted(who.principal.namespaces),
                cpu=request.cpu,
                memory_mb=request.memory_mb,
            )
            cmd.audit.principal = who.principal.id
            cmd.audit.rpc = who.method
            cmd.audit.target = request.name
        else:
            writes.set_executor_join(
                cmd, request.name, request.slots, request.labels, cpu=request.cpu, memory_mb=request.memory_mb
            )
        await propose_and_wait(self.hub.node, codec.encode_command(cmd))
        d = self.hub.dispatcher
        s = d.settings
        return pb.RegisterReply(
            epoch=d.epoch,
            lease_ms=s.lease_ms,
            heartbeat_ms=s.heartbeat_ms,
            leader_now_ms=self.hub.node.gate.clock_ms(),
            health_drained=d.health_drained(request.name),
            partial_heartbeats=True,
            session_version=SESSION_VERSION,
        )

    async def Dispatch(
        self, request: pb.DispatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WorkItem]:
        async for items in self._stream(request, context):
            for item in items:
                yield item

    async def DispatchBatch(
        self, request: pb.DispatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.WorkBatch]:
        async for items in self._stream(request, context):
            yield pb.WorkBatch(items=items)

    async def _stream(
        self, request: pb.DispatchRequest, context: grpc.aio.ServicerContext
    ) -> AsyncIterator[list[pb.WorkItem]]:
        """The executor's work items, as they come: everything queued when the stream is ready for
        the next message goes out together (at most MAX_BATCH items). The hub's rows become
        their work items here (:func:`~raftsched.leader.dispatch.work.work_items`): such an
        executor has no session to read them as rows."""
        hub = self.hub
        try:
            self._require_bound(request.name)
        except RaftschedError as exc:
            await abort(context, exc)
        try:
            hub.require_leader()
            if request.name not in hub.dispatcher.members:
                raise NotFound(f"executor {quote(request.name)} is not registered; call Register first")
        except RaftschedError as exc:
            # A stream refuses with one of two statuses only, as executors have always seen it.
            not_leader = exc.code == "not_leader"
            status = grpc.StatusCode.FAILED_PRECONDITION if not_leader else grpc.StatusCode.NOT_FOUND
            await abort(context, exc, status)
        queue: asyncio.Queue[list[Work]] = asyncio.Queue()
        old = hub.streams.get(request.name)
        if old is not None:
            old.put_nowait(CLOSE)  # a newer stream of the same executor replaces the old one
        hub.streams[request.name] = queue
        hub.peers[request.name] = context.peer()
        if request.log_channel:
            hub.log_channels.add(request.name)
        else:
            hub.log_channels.discard(request.name)
        hub.dispatcher.stream_opened(request.name)
        try:
            resent = hub.dispatcher.resend_to(request.name, hub.now_ms())
            for start in range(0, len(resent), MAX_BATCH):
                yield resent[start : start + MAX_BATCH]
            while True:
                items = await queue.get()
                if items is CLOSE:
                    return
                batch = items  # the hub's own list, one per flush: extended in place
                closed = False
                while len(batch) < MAX_BATCH and not queue.empty():
                    more = queue.get_nowait()
                    if more is CLOSE:
                        closed = True
                        break
                    batch.extend(more)
                for start in range(0, len(batch), MAX_BATCH):
                    yield work_items(batch[start : start + MAX_BATCH] if len(batch) > MAX_BATCH else batch)
                if closed:
                    return
        finally:
            if hub.streams.get(request.name) is queue:
                del hub.streams[request.name]
                hub.peers.pop(request.name, None)
                hub.log_channels.discard(request.name)
                # Not replaced by a newer stream: the executor hung up or its connection broke
                # (a killed process closes it at once). A signal, not proof: the dispatcher
                # gives it a short grace to reconnect before declaring it dead.
                hub.dispatcher.stream_closed(request.name, hub.now_ms())

    async def Session(
        self, requests: AsyncIterator[pb.SessionUp], context: grpc.aio.ServicerContext
    ) -> AsyncIterator[pb.SessionDown]:
        """An executor's Session stream (issue 31 P2; :mod:`raftsched.leader.dispatch.session`):
        work down as columns, results and heartbeats up, on one bidirectional stream. Opened
        and refused as a ``DispatchBatch`` stream is (the same statuses); the dispatcher sees
        the same stream events (opened, re-sent to, closed), heartbeats and results."""
        hub = self.hub
        ups = aiter(requests)
        try:
            first = await anext(ups, None)  # (one that does not parse: InvalidSpec, DecodeGuard)
            if first is None or first.WhichOneof("body") != "open":
                raise InvalidSpec("SessionUp", "the first message of a session must be open (SessionOpen)")
            bounds.check(first)
            opened = first.open
            validate_name(opened.name, "open.name")
            if opened.session_version < 1:
                raise InvalidSpec("open.session_version", f"{opened.session_version} (versions start at 1)")
            self._require_bound(opened.name)
        except RaftschedError as exc:
            await abort(context, exc)
        name = opened.name
        try:
            hub.require_leader()
            if name not in hub.dispatcher.members:
                raise NotFound(f"executor {quote(name)} is not registered; call Register first")
        except RaftschedError as exc:
            not_leader = exc.code == "not_leader"
            status = grpc.StatusCode.FAILED_PRECONDITION if not_leader else grpc.StatusCode.NOT_FOUND
            await abort(context, exc, status)
        d = hub.dispatcher
        epoch = d.epoch
        sink = SessionSink()
        old = hub.streams.get(name)
        if old is not None:
            old.put_nowait(CLOSE)  # a newer stream of the same executor replaces the old one
        hub.streams[name] = sink
        hub.peers[name] = context.peer()
        if opened.log_channel:
            hub.log_channels.add(name)
        else:
            hub.log_channels.discard(name)
        d.stream_opened(name)
        replies: list[pb.HeartbeatReply] = []
        failed: list[RaftschedError] = []
        reader = asyncio.ensure_future(self._session_read(name, ups, sink, replies, failed))
        try:
            yield pb.SessionDown(
                accept=pb.SessionAccept(
                    session_version=min(SESSION_VERSION, opened.session_version), epoch=epoch
                )
            )
            resent = d.resend_to(name, hub.now_ms())
            for start in range(0, len(resent), MAX_BATCH):
                yield pb.SessionDown(work=encode_work(resent[start : start + MAX_BATCH], sink.defs, epoch))
            while True:
                items = await sink.get()
                closed = items is CLOSE
                batch = [] if closed else items
                while not closed and len(batch) < MAX_BATCH and not sink.empty():
                    more = sink.get_nowait()
                    if more is CLOSE:
                        closed = True
                        break
                    batch.extend(more)
                for start in range(0, max(1, len(batch)), MAX_BATCH):
                    work = encode_work(batch[start : start + MAX_BATCH], sink.defs, epoch)
                    if sink.acked_through != sink.ack_sent:
                        work.acked_through = sink.ack_sent = sink.acked_through
                    if replies:
                        work.heartbeat.CopyFrom(replies.pop(0))
                    if work.task_ref or work.cold or work.acked_through or work.HasField("heartbeat"):
                        yield pb.SessionDown(work=work)
                while replies:  # (one heartbeat is in flight at a time: rarely more than one)
                    yield pb.SessionDown(work=pb.SessionWork(epoch=epoch, heartbeat=replies.pop(0)))
                sink.replied.set()  # the reader may read on (see MAX_SESSION_UNANSWERED)
                if closed:
                    break
            if failed:
                await abort(context, failed[0])
        finally:
            reader.cancel()
            await asyncio.gather(reader, return_exceptions=True)
            if hub.streams.get(name) is sink:
                del hub.streams[name]
                hub.peers.pop(name, None)
                hub.log_channels.discard(name)
                hub.dispatcher.stream_closed(name, hub.now_ms())

    async def _session_read(
        self,
        name: str,
        ups: AsyncIterator[pb.SessionUp],
        sink: SessionSink,
        replies: list[pb.HeartbeatReply],
        failed: list[RaftschedError],
    ) -> None:
        """Read a session's messages until it ends; a bad message (or a report that cannot be
        committed) ends the session with that error (the executor opens another and reports
        again what was not acknowledged)."""
        previous: asyncio.Future[None] | None = None
        reports: set[asyncio.Future[None]] = set()
        try:
            async for up in ups:
                try:
                    bounds.check(up)  # every integer in its range, as the unary calls' requests
                    kind = up.WhichOneof("body")
                    if kind == "report":
                        previous = asyncio.ensure_future(
                            self._session_report(name, up.report, sink, previous, failed)
                        )
                        reports.add(previous)
                        previous.add_done_callback(reports.discard)
                    elif kind == "heartbeat":
                        hb = up.heartbeat
                        if hb.name != name:
                            raise InvalidSpec(
                                "heartbeat.name", f"{quote(hb.name)} on the session of {quote(name)}"
                            )
                        replies.append(self._heartbeat(hb))
                        sink.put_nowait([])  # wake the writer: the reply goes at once
                    else:
                        raise InvalidSpec(
                            "SessionUp", f"unexpected {kind or 'empty'} message on an open session"
                        )
                except RaftschedError:
                    raise
                except Exception as exc:  # a bug: end the session now (INTERNAL), not silently
                    log.exception(
                        "%s: a session message of %s could not be taken", self.hub.node.node_id, name
                    )
                    raise RaftschedError(
                        f"the message could not be taken: {type(exc).__name__}: {exc}"
                    ) from None
                # Backpressure: read no further while the peer has too much waiting here (its
                # messages then wait in its gRPC window, and its sends block).
                while len(reports) >= MAX_SESSION_REPORTS:
                    await asyncio.wait(set(reports), return_when=asyncio.FIRST_COMPLETED)
                while len(replies) >= MAX_SESSION_UNANSWERED:
                    sink.replied.clear()
                    await sink.replied.wait()
        except RaftschedError as exc:
            failed.append(exc)
        except asyncio.CancelledError:
            raise
        except Exception:  # the call broke (the executor went away): the writer ends with it
            pass  # (what the reader itself raises is a RaftschedError above)
        if reports:
            await asyncio.gather(*reports, return_exceptions=True)
        sink.put_nowait(CLOSE)

    async def _session_report(
        self,
        name: str,
        report: pb.SessionReport,
        sink: SessionSink,
        previous: asyncio.Future[None] | None,
        failed: list[RaftschedError],
    ) -> None:
        """Commit one SessionReport (as :meth:`Report` commits a ReportRequest), then acknowledge
        it once every earlier report of the session is acknowledged (in report-id order)."""
        hub = self.hub
        try:
            rows = report_rows(report)
            cold_ids: list[tuple[str, int, int]] = []
            for i, r in enumerate(report.cold):
                cold_ids.append(_check_execution_id(i, r.execution_id))
                _cap(r)
            if hub.on_results is not None and report.cold:
                hub.on_results(report.cold)
            if hub.on_lateness is not None and rows:
                hub.on_lateness(report.start_lateness_ms)
            _log_results(name, report.cold)
            d = hub.dispatcher
            now = hub.now_ms()
            exec_ids = report.execution_id
            proposals = d.results_columns(
                name, rows, exec_ids, report.duration_ms, report.start_lateness_ms, report.cold, cold_ids, now
            )
            if proposals:
                outcomes = await asyncio.gather(*(propose_and_wait(hub.node, p.encode()) for p in proposals))
                refused = 0
                for proposal, outcome in zip(proposals, outcomes, strict=True):
                    refused += outcome.refused
                    if proposal.rows and outcome.refused:
                        again = d.refused_hot(
                            proposal, outcome.refused, name, _row_results(report), now, rows
                        )
                        if again is not None:
                            retried = await propose_and_wait(hub.node, again.encode())
                            refused += retried.refused - outcome.refused
                if refused:
                    log.info(
                        "%s: %d of %d results from %s refused as stale (attempt superseded, run finished, "
                        "or not assigned to it)",
                        hub.node.node_id,
                        refused,
                        len(rows) + len(report.cold),
                        name,
                    )
            if previous is not None:
                await previous
            if failed:
                return
            sink.acked_through = max(sink.acked_through, report.report_id)
            sink.put_nowait([])  # wake the writer: the acknowledgement goes at once
        except RaftschedError as exc:
            failed.append(exc)
            sink.put_nowait(CLOSE)
        except Exception as exc:  # a bug: end the session now (INTERNAL), not at the executor's deadline
            log.exception("%s: a session report of %s could not be taken", hub.node.node_id, name)
            failed.append(RaftschedError(f"the report could not be taken: {type(exc).__name__}: {exc}"))
            sink.put_nowait(CLOSE)

    def _heartbeat(self, request: pb.HeartbeatRequest) -> pb.HeartbeatReply:
        """The body of :meth:`Heartbeat` (the caller checked who sends it)."""
        self.hub.require_leader()
        d = self.hub.dispatcher
        started = request.started if request.reports_started else None
        ok = d.heartbeat(
            request.name,
            request.running,
            self.hub.now_ms(),
            started,
            request.finished,
            partial=request.partial,
        )
        if ok:
            d.executor_report(request.name, executor_health(request))
        return pb.HeartbeatReply(epoch=d.epoch, registered=ok, leader_now_ms=self.hub.node.gate.clock_ms())

    @rpc
    async def Heartbeat(
        self, request: pb.HeartbeatRequest, context: grpc.aio.ServicerContext
    ) -> pb.HeartbeatReply:
        self._require_bound(request.name)
        return self._heartbeat(request)

    @rpc
    async def Report(self, request: pb.ReportRequest, context: grpc.aio.ServicerContext) -> pb.ReportReply:
        self._require_bound(request.name)
        self.hub.require_leader()
        ids: list[tuple[str, int, int]] = []
        for i, r in enumerate(request.results):
            ids.append(_check_execution_id(i, r.execution_id))
            _cap(r)
        if self.hub.on_results is not None:
            self.hub.on_results(request.results)
        _log_results(request.name, request.results)
        # One command, or two: the successes of hot runs as ResultColumns and the rest as
        # ReportResults (raftsched.leader.columns), proposed together.
        d = self.hub.dispatcher
        now = self.hub.now_ms()
        proposals = d.report(request.name, request.results, now, ids)
        if proposals:
            outcomes = await asyncio.gather(*(propose_and_wait(self.hub.node, p.encode()) for p in proposals))
            refused = sum(outcome.refused for outcome in outcomes)
            for proposal, outcome in zip(proposals, outcomes, strict=True):
                # Hot runs promoted to the cold path meanwhile: their successes again, by run id.
                again = d.refused_hot(proposal, outcome.refused, request.name, request.results, now, ids)
                if again is not None:
                    retried = await propose_and_wait(self.hub.node, again.encode())
                    refused += retried.refused - outcome.refused
            if refused:
                log.info(
                    "%s: %d of %d results from %s refused as stale (attempt superseded, run finished, "
                    "or not assigned to it)",
                    self.hub.node.node_id,
                    refused,
                    len(request.results),
                    request.name,
                )
        # Committed (applied or refused as stale): either way the executor may forget them.
        return pb.ReportReply(acknowledged=[r.execution_id for r in request.results])

    @rpc
    async def Leave(self, request: pb.LeaveRequest, context: grpc.aio.ServicerContext) -> pb.LeaveReply:
        self._require_bound(request.name)
        cmd = self.hub.leader_command()
        cmd.executor_leave.name = request.name
        cmd.executor_leave.reason = "left"
        cmd.executor_leave.retry_at_ms = self.hub.now_ms()
        cmd.executor_leave.unstarted.extend(self.hub.dispatcher.unstarted_of(request.name))
        await propose_and_wait(self.hub.node, codec.encode_command(cmd))
        return pb.LeaveReply()

    @rpc
    async def Drain(self, request: pb.DrainRequest, context: grpc.aio.ServicerContext) -> pb.DrainReply:
        """The executor stops taking new work (it is shutting down): replicated like
        ``raftsched executor drain``; it calls Leave once its running attempts ended."""
        self._require_bound(request.name)
        cmd = self.hub.leader_command()
        cmd.drain_executor.name = request.name
        cmd.drain_executor.reason = request.reason[:500] or "executor shutting down"
        # Its own drain for a nearly full disk or execution log, or the undoing of it (issue 36 §3).
        cmd.drain_executor.health = request.health
        cmd.drain_executor.resume = request.resume
        await propose_and_wait(self.hub.node, codec.encode_command(cmd))
        return pb.DrainReply()

    async def SendLogs(
        self, requests: AsyncIterator[pb.LogUpload], context: grpc.aio.ServicerContext
    ) -> pb.SendLogsReply:
        """An executor's answer to a log request (:mod:`raftsched.leader.dispatch.logrelay`):
        a header naming the request, then the parts, handed to the waiting reader one by one.
        Answered at once (and the executor stops) when no reader waits for it any more."""
        try:
            first = await anext(aiter(requests), None)
            if first is None or not first.HasField("header"):
                raise InvalidSpec("LogUpload", "the first message must be the header")
            header = first.header
            self._require_bound(header.executor)
        except RaftschedError as exc:
            await abort(context, exc)
        pending = self.hub.logs.attach(header.request_id, header.executor)
        if pending is None:
            return pb.SendLogsReply()  # the reader went away (or never asked this executor)
        # A reader that goes away ends the upload at once, even while the executor waits for
        # more output of a followed attempt (its call then ends: it stops reading its file).
        gone = asyncio.ensure_future(pending.gone.wait())
        parts = aiter(requests)
        try:
            if not await pending.put(first):
                return pb.SendLogsReply()
            while True:
                step = asyncio.ensure_future(anext(parts, None))
                await asyncio.wait((step, gone), return_when=asyncio.FIRST_COMPLETED)
                if not step.done():
                    step.cancel()
                    return pb.SendLogsReply()
                try:
                    part = step.result()
                except RaftschedError as exc:  # a part that does not parse (DecodeGuard)
                    await pending.put(None)  # the reader sees the upload broken off
                    await abort(context, exc)
                if part is None:
                    await pending.put(None)  # ended without an end: the executor broke off
                    return pb.SendLogsReply()
                if not await pending.put(part) or part.HasField("end"):
                    return pb.SendLogsReply()
        finally:
            gone.cancel()


def _cap(r: pb.ExecResult) -> None:
    """Cap ``r``'s tails and error (see :data:`MAX_TAIL_CHARS`)."""
    if len(r.stdout_tail) > MAX_TAIL_CHARS:
        r.stdout_tail = r.stdout_tail[-MAX_TAIL_CHARS:]
    if len(r.stderr_tail) > MAX_TAIL_CHARS:
        r.stderr_tail = r.stderr_tail[-MAX_TAIL_CHARS:]
    if len(r.error) > MAX_TAIL_CHARS:
        r.error = r.error[:MAX_TAIL_CHARS]


def _row_results(report: pb.SessionReport) -> list[pb.ExecResult]:
    """The rows of ``report`` as the ExecResults they stand for (only when a ResultColumns of
    them was refused in part: they are reported again by run id)."""
    return [
        pb.ExecResult(execution_id=e, success=True, duration_ms=d, start_lateness_ms=late)
        for e, d, late in zip(report.execution_id, report.duration_ms, report.start_lateness_ms, strict=True)
    ]


def _check_execution_id(position: int, exec_id: str) -> tuple[str, int, int]:
    """``(run id, shard, attempt)`` of the reported id at ``results[position]``, or InvalidSpec
    naming it (:func:`~raftsched.leader.dispatch.session.check_execution_id`)."""
    return check_execution_id(f"results[{position}].execution_id", exec_id)


def _log_results(executor: str, results: Sequence[pb.ExecResult]) -> None:
    """One record per reported result: a failure at info, a success at debug (a busy leader sees
    thousands a second; a disabled level costs one check per result)."""
    debug = log.isEnabledFor(logging.DEBUG)
    for r in results:
        if r.success:
            if debug:
                log.debug(
                    "attempt %s succeeded on %s",
                    r.execution_id,
                    executor,
                    extra=attempt_fields(r.execution_id, executor=executor),
                )
        else:
            log.info(
                "attempt %s failed on %s: %s",
                r.execution_id,
                executor,
                r.error or f"exit code {r.exit_code}",
                extra=attempt_fields(r.execution_id, executor=executor),
            )
