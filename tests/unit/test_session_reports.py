"""The executor's session reports (issue 31 stage 4, the slot cycle): several reports in flight
on one session, each with results in no other unacknowledged report, and a result forgotten
(acknowledged in the execution log) only once the leader's cumulative ``acked_through`` covers
its report. Driven straight through a :class:`SessionLink`'s ``report`` and ``read`` over the
agent's execution log, with a stream that records what is sent (no network)."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from raftsched.abc import TransportError
from raftsched.executor import session as session_module
from raftsched.executor.agent import Executor
from raftsched.executor.runners import AttemptResult
from raftsched.executor.session import MAX_SESSION_REPORTS
from raftsched.rpc import executor_service
from raftsched.v1 import raftsched_pb2 as pb
from tests.support.wait import until
from tests.unit.test_session_eager import executor, ready


class Recording:
    """A session stream that takes every message at once and keeps the reports."""

    def __init__(self) -> None:
        self.reports: list[pb.SessionReport] = []

    async def send(self, message: pb.SessionUp) -> None:
        self.reports.append(message.report)

    def __aiter__(self) -> AsyncIterator[pb.SessionDown]:
        raise NotImplementedError

    def cancel(self) -> None:
        pass


class Open:
    """One open session of ``ex``: its report loop and its reader (fed by :meth:`ack`), as
    ``_serve_session`` runs them; :meth:`close` breaks it as a lost connection does."""

    def __init__(self, ex: Executor) -> None:
        assert ex.attempts.dedupe is not None and ex.attempts.report_wake is not None
        self.ex = ex
        self.stream = Recording()
        self.downs: asyncio.Queue[pb.SessionDown | None] = asyncio.Queue()
        self.link = ex.attempts.session_link(self.stream)
        self.tasks = [
            asyncio.ensure_future(self.link.read(self._downs())),
            asyncio.ensure_future(self.link.report()),
        ]

    async def _downs(self) -> AsyncIterator[pb.SessionDown]:
        while (down := await self.downs.get()) is not None:
            yield down

    def ack(self, through: int) -> None:
        self.downs.put_nowait(pb.SessionDown(work=pb.SessionWork(epoch=1, acked_through=through)))

    def ids(self, *report_ids: int) -> list[str]:
        """The execution ids of these reports (all of them if none given), in order."""
        return [
            e
            for r in self.stream.reports
            if not report_ids or r.report_id in report_ids
            for e in [*r.execution_id, *(c.execution_id for c in r.cold)]
        ]

    async def close(self) -> None:
        self.link.close()
        for task in self.tasks:
            task.cancel()
        await asyncio.gather(*self.tasks, return_exceptions=True)


def finish(ex: Executor, first: int, n: int) -> list[str]:
    """``n`` results finished (successes, and every seventh a failure: a cold result), woken."""
    assert ex.attempts.dedupe is not None and ex.attempts.report_wake is not None
    ids = [f"t{i:05d}@1/0/1" for i in range(first, first + n)]
    for i, execution_id in enumerate(ids):
        ex.attempts.dedupe.begin(execution_id)
        ex.attempts.dedupe.finish(execution_id, AttemptResult(execution_id, (first + i) % 7 != 0))
    ex.attempts.report_wake.set()
    return ids


def pending(ex: Executor) -> set[str]:
    assert ex.attempts.dedupe is not None
    return set(ex.attempts.dedupe.pending_ids())


async def settled() -> None:
    """Let every task that can run, run (no timer: a few passes of the loop)."""
    for _ in range(20):
        await asyncio.sleep(0)


def test_the_executor_keeps_as_many_reports_in_flight_as_the_leader_takes() -> None:
    assert MAX_SESSION_REPORTS == executor_service.MAX_SESSION_REPORTS


def test_reports_go_out_without_waiting_for_acknowledgements_up_to_the_limit(tmp_path: Path) -> None:
    """2,300 results: five reports of at most 500; four go at once, the fifth once the first
    is acknowledged. Each acknowledgement forgets exactly the results of the reports it covers.
    (Before: one report, then nothing until its acknowledgement.)"""

    async def main() -> None:
        ex = executor(tmp_path)
        ready(ex)
        everything = finish(ex, 0, 2300)
        s = Open(ex)
        await until(lambda: len(s.stream.reports) >= MAX_SESSION_REPORTS, 5, "reports in flight")
        await settled()
        assert [r.report_id for r in s.stream.reports] == [1, 2, 3, 4]  # not the fifth yet
        assert all(len(r.execution_id) + len(r.cold) <= 500 for r in s.stream.reports)
        assert len(s.ids()) == len(set(s.ids())) == 2000  # disjoint
        assert pending(ex) == set(everything)  # nothing forgotten before an acknowledgement

        s.ack(1)
        await until(lambda: len(s.stream.reports) == 5, 5, "the fifth report")
        assert pending(ex) == set(everything) - set(s.ids(1))
        assert sorted(s.ids()) == sorted(everything)  # every result once

        s.ack(3)  # cumulative: reports 2 and 3 at once
        await until(lambda: pending(ex) == set(s.ids(4, 5)), 5, "reports 2 and 3 acknowledged")
        s.ack(5)
        await until(lambda: not pending(ex), 5, "everything acknowledged")
        await settled()
        assert len(s.stream.reports) == 5  # nothing reported twice
        await s.close()

    asyncio.run(main())


def test_results_finished_while_a_report_waits_for_its_commit_go_in_the_next_report(tmp_path: Path) -> None:
    """The slot cycle: a result that finishes while earlier reports wait to be committed is
    reported at once, in a report of its own (before, it waited for their acknowledgement)."""

    async def main() -> None:
        ex = executor(tmp_path)
        ready(ex)
        first = finish(ex, 0, 10)
        s = Open(ex)
        await until(lambda: len(s.stream.reports) == 1, 5, "the first report")
        second = finish(ex, 10, 10)
        await until(lambda: len(s.stream.reports) == 2, 5, "the second report, unacknowledged first")
        third = finish(ex, 20, 5)
        await until(lambda: len(s.stream.reports) == 3, 5, "the third report")
        assert (s.ids(1), s.ids(2), s.ids(3)) == (first, second, third)
        s.ack(2)
        await until(lambda: pending(ex) == set(third), 5, "the first two acknowledged")
        s.ack(3)
        await until(lambda: not pending(ex), 5, "all acknowledged")
        await s.close()

    asyncio.run(main())


def test_a_session_broken_with_reports_in_flight_loses_nothing_and_doubles_nothing(tmp_path: Path) -> None:
    """Three reports in flight, the first acknowledged, then the session breaks: the next
    session reports exactly the results of the other two (and what finished meanwhile), each
    once; nothing acknowledged is reported again, nothing unacknowledged is forgotten."""

    async def main() -> None:
        ex = executor(tmp_path)
        ready(ex)
        finish(ex, 0, 1200)  # three reports: 500, 500, 200
        s = Open(ex)
        await until(lambda: len(s.stream.reports) == 3, 5, "three reports in flight")
        s.ack(1)
        await until(lambda: pending(ex) == set(s.ids(2, 3)), 5, "the first acknowledged")
        unacknowledged = s.ids(2, 3)
        await s.close()  # the connection is lost: reports 2 and 3 may or may not have committed
        assert pending(ex) == set(unacknowledged)
        later = finish(ex, 1200, 30)

        again = Open(ex)
        await until(lambda: len(again.ids()) >= len(unacknowledged) + 30, 5, "reported again")
        await settled()
        assert sorted(again.ids()) == sorted(unacknowledged + later)  # each once, nothing else
        assert again.stream.reports[0].report_id == 1  # the new session counts anew
        again.ack(len(again.stream.reports))
        await until(lambda: not pending(ex), 5, "all acknowledged on the new session")
        await again.close()

    asyncio.run(main())


def test_a_report_never_acknowledged_ends_the_session_by_its_deadline_and_keeps_its_results(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reports in flight do not push a deadline back: the oldest one's passing ends the session
    (deadline_exceeded) though later reports were sent since; nothing is forgotten."""
    monkeypatch.setattr(session_module, "SESSION_REPORT_TIMEOUT_S", 0.3)

    async def main() -> BaseException:
        ex = executor(tmp_path)
        ready(ex)
        everything = finish(ex, 0, 10)
        s = Open(ex)
        await until(lambda: len(s.stream.reports) == 1, 5, "the first report")
        everything += finish(ex, 10, 10)
        loop = s.tasks[1]
        try:
            await asyncio.wait_for(loop, 5)
        except BaseException as exc:  # what the report loop ended with
            error: BaseException = exc
        else:
            raise AssertionError("the report loop went on without acknowledgements")
        assert len(s.stream.reports) == 2
        assert pending(ex) == set(everything)
        await s.close()
        return error

    error = asyncio.run(main())
    assert isinstance(error, TransportError) and error.code == "deadline_exceeded", error


def test_while_reports_are_in_flight_the_next_waits_the_report_gap_and_takes_what_finished_meanwhile(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Reports in flight: a burst of results finishing within ``REPORT_GAP_S`` of the last send
    goes in ONE report, not one each (every report is a Raft entry on the leader); with none in
    flight a result goes at once."""
    monkeypatch.setattr(session_module, "REPORT_GAP_S", 0.3)

    async def main() -> None:
        ex = executor(tmp_path)
        ready(ex)
        loop = asyncio.get_running_loop()
        first = finish(ex, 0, 5)
        s = Open(ex)
        await until(lambda: len(s.stream.reports) == 1, 5, "the first report, at once")
        sent = loop.time()
        burst = finish(ex, 5, 5)
        await settled()
        burst += finish(ex, 10, 5)
        await until(lambda: len(s.stream.reports) == 2, 5, "the second report")
        assert loop.time() - sent >= 0.25
        assert (s.ids(1), s.ids(2)) == (first, burst)
        s.ack(2)
        await until(lambda: not pending(ex), 5, "all acknowledged")
        late = finish(ex, 15, 1)
        await until(lambda: len(s.stream.reports) == 3, 0.2, "a report at once: none in flight")
        assert s.ids(3) == late
        await s.close()

    asyncio.run(main())
