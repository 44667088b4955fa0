"""The executor's end of one open Session stream (issue 31 P2): heartbeats and reports over it.

A :class:`SessionLink` is made once the leader accepted the session and lives as long as it:
:meth:`SessionLink.read` takes what the leader sends (heartbeat answers, ``acked_through``, work),
:meth:`SessionLink.heartbeat` sends a heartbeat and waits for its answer (answered in order, as
the unary Heartbeat RPC), and :meth:`SessionLink.report` reports finished results, several
reports in flight, each forgotten in the execution log only once acknowledged.
"""

from __future__ import annotations

import asyncio
import collections
from collections.abc import AsyncIterator, Callable

from raftsched.abc import SessionStream, TransportError
from raftsched.executor.aio import wait_event
from raftsched.executor.batched import report as batched_report
from raftsched.executor.dedupe import DedupeLog
from raftsched.v1 import raftsched_pb2 as pb

SESSION_VERSION = 1  # the Session stream version this agent speaks
# A session report's deadline, from the start of its send to its acknowledgement (the unary
# Report call's timeout).
SESSION_REPORT_TIMEOUT_S = 15.0
# Session reports in flight at once: the leader's limit (raftsched.rpc.executor_service.
# MAX_SESSION_REPORTS, which this program does not import: it loads no leader module). More would
# only wait in the stream's window; one at a time left every result finished during a commit
# round waiting for the next (the slot stays taken on the leader until the report arrives).
MAX_SESSION_REPORTS = 4
# While reports are in flight, the next one goes at least this long after the previous send
# (unless REPORT_BATCH results wait: a full report goes at once): a result finished meanwhile
# waits at most this, not a commit round, and a burst of results shares one report (each is a
# Raft entry on the leader). With none in flight a result is reported at once.
REPORT_GAP_S = 0.01
REPORT_BATCH = 500  # results in one report at most


class SessionLink:
    """One open session: ``stream``, over which ``name`` reports the results ``log_`` holds
    pending. ``wake`` is set when results finish (by the agent) and when an acknowledgement
    arrives (by :meth:`read`). An acknowledged result's start lateness leaves ``start_late``;
    ``on_work`` takes every message with work in it; ``on_acknowledged`` hears how many results
    each acknowledgement forgot. :meth:`close` when the session ends: a heartbeat waiting for
    its answer then fails."""

    def __init__(
        self,
        stream: SessionStream,
        log_: DedupeLog,
        now_ms: Callable[[], int],
        wake: asyncio.Event,
        *,
        name: str,
        start_late: dict[str, int],
        on_work: Callable[[pb.SessionWork], None],
        on_acknowledged: Callable[[int], None] | None = None,
    ) -> None:
        self.stream = stream
        self.log = log_
        self.now_ms = now_ms  # the wall clock, ms: when the log records an acknowledgement
        self.wake = wake
        self.name = name
        self.start_late = start_late
        self.on_work = on_work
        self.on_acknowledged = on_acknowledged
        self.acked_through = 0  # the leader's cumulative acknowledgement of reports, by report id
        self.closed = False
        self._hb_waiters: list[asyncio.Future[pb.HeartbeatReply]] = []

    def close(self) -> None:
        self.closed = True
        for waiter in self._hb_waiters:
            waiter.cancel()
        self._hb_waiters = []

    async def read(self, downs: AsyncIterator[pb.SessionDown]) -> None:
        """Take what the leader sends until the stream ends."""
        async for down in downs:
            work = down.work
            if work.HasField("heartbeat") and self._hb_waiters:
                waiter = self._hb_waiters.pop(0)
                if not waiter.done():
                    waiter.set_result(work.heartbeat)
            if work.acked_through > self.acked_through:
                self.acked_through = work.acked_through
                self.wake.set()  # the report loop forgets what is acknowledged
            if work.task_ref or work.cold or work.defs:
                self.on_work(work)

    async def heartbeat(
        self, target: str, request: pb.HeartbeatRequest, *, timeout_s: float
    ) -> pb.HeartbeatReply:
        """A heartbeat over the session, answered in order (as the Heartbeat RPC); ``target``
        is the leader's address, for the signature the agent's heartbeat loop calls."""
        if self.closed:
            raise TransportError("cancelled", "the session ended")
        waiter: asyncio.Future[pb.HeartbeatReply] = asyncio.get_running_loop().create_future()
        self._hb_waiters.append(waiter)
        try:
            # The deadline covers the send too, as the unary call's did: a send stuck behind a
            # full window is a leader that does not answer (and the session then ends with it).
            async with asyncio.timeout(timeout_s):
                await self.stream.send(pb.SessionUp(heartbeat=request))
                return await waiter
        except TimeoutError:
            raise TransportError(
                "deadline_exceeded", f"no heartbeat answer within {timeout_s:.1f} s"
            ) from None

    async def report(self) -> None:
        """Report finished results over the session, up to :data:`MAX_SESSION_REPORTS` reports in
        flight (the leader commits them concurrently and acknowledges them cumulatively, in
        report-id order, with ``acked_through``). Each report carries only results in no other
        unacknowledged report of this session, and a report's results are acknowledged in the
        execution log (forgotten) only once ``acked_through`` covers it: the cluster committed
        them. While reports are in flight the next waits :data:`REPORT_GAP_S` after the previous
        send (a burst of results shares one report). A report not acknowledged within
        :data:`SESSION_REPORT_TIMEOUT_S` of the start of its send ends the session
        (:class:`TransportError`); whatever was in flight is still pending then, and the next
        session reports it again (the leader refuses what it had already committed as stale, and
        acknowledges it all the same)."""
        log_, wake = self.log, self.wake
        loop = asyncio.get_running_loop()
        in_flight: collections.deque[tuple[int, float, list[str]]] = collections.deque()  # id, deadline, ids
        sent: set[str] = set()  # the results of the reports in flight
        report_id = 0
        last_sent = 0.0
        while True:
            wake.clear()  # (before looking: whatever happens from now on wakes the wait below)
            acked = self.acked_through
            if in_flight and in_flight[0][0] <= acked:
                done: list[str] = []
                while in_flight and in_flight[0][0] <= acked:
                    done.extend(in_flight.popleft()[2])
                sent.difference_update(done)
                log_.acknowledge(done, self.now_ms())
                for execution_id in done:
                    self.start_late.pop(execution_id, None)
                if self.on_acknowledged is not None:
                    self.on_acknowledged(len(done))
            if in_flight and in_flight[0][1] <= loop.time():
                raise report_overdue()
            if len(in_flight) < MAX_SESSION_REPORTS:
                if in_flight and log_.pending_count() - len(sent) < REPORT_BATCH:
                    hold = last_sent + REPORT_GAP_S - loop.time()
                    if hold > 0:
                        await asyncio.sleep(hold)
                        continue
                pending = log_.pending_reports(REPORT_BATCH, sent)
                if pending:
                    report_id += 1
                    message = pb.SessionUp(
                        report=batched_report(self.name, report_id, pending, self.start_late)
                    )
                    last_sent = loop.time()
                    deadline = last_sent + SESSION_REPORT_TIMEOUT_S
                    ids = [r.execution_id for r in pending]
                    in_flight.append((report_id, deadline, ids))
                    sent.update(ids)
                    try:
                        async with asyncio.timeout_at(deadline):  # the send included
                            await self.stream.send(message)
                    except TimeoutError:
                        raise report_overdue() from None
                    continue
            # An acknowledgement, new results (with room for a report), or the oldest report's
            # deadline; at least once a second (results a wake-up missed are picked up then).
            until = 1.0 if not in_flight else min(1.0, in_flight[0][1] - loop.time())
            await wait_event(wake, max(0.0, until))


def report_overdue() -> TransportError:
    return TransportError(
        "deadline_exceeded",
        f"a session report was not acknowledged within {SESSION_REPORT_TIMEOUT_S:g} s",
    )
