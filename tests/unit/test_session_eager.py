"""Eager rows of a Session message (issue 31 P2, :mod:`raftsched.executor.batched`), driven
straight through the agent's ``attempts.session_work`` inside a reader task, with an in-memory
execution log (no network): what a handler started in the batch may and may not touch."""

from __future__ import annotations

import asyncio
import contextvars
from collections.abc import AsyncIterator
from pathlib import Path

import pytest

from raftsched.abc import TransportError
from raftsched.executor import session as session_module
from raftsched.executor.agent import Executor
from raftsched.executor.dedupe import DedupeLog
from raftsched.executor.runners import AttemptContext, AttemptResult
from raftsched.storage.memory import MemoryExecutionLog
from raftsched.v1 import raftsched_pb2 as pb
from tests.support.wait import until

VAR: contextvars.ContextVar[str] = contextvars.ContextVar("VAR", default="unset")


def executor(tmp_path: Path, store: MemoryExecutionLog | None = None) -> Executor:
    ex = Executor(
        ["127.0.0.1:1"],
        "eager",
        transport=object(),  # type: ignore[arg-type]  # never called: no session is opened
        execution_log=store if store is not None else MemoryExecutionLog(),
        data_dir=tmp_path,
    )
    return ex


def ready(ex: Executor) -> None:
    """What ``Executor.run`` sets up before it serves (the parts ``session_work`` uses)."""
    assert ex._store is not None
    ex.attempts.open(DedupeLog(ex._store, batched=True))


def rows(ex: Executor, handlers: list[str]) -> pb.SessionWork:
    """One message: a row per handler, each of its own task, all due."""
    now = ex.clock.now_ms()
    work = pb.SessionWork(epoch=1)
    for ref, handler in enumerate(handlers, 1):
        work.defs.add(ref=ref, task=f"t{ref}", version=1, shards=1, handler=handler)
        work.task_ref.append(ref)
        work.nominal_ms.append(now - 5)
        work.shard.append(0)
        work.attempt.append(1)
    return work


async def in_reader(ex: Executor, work: pb.SessionWork) -> str:
    """``session_work`` as the agent's session reader runs it (in a task of its own); the
    reader's value of VAR afterwards."""

    async def reader() -> str:
        ex.attempts.session_work(work)
        return VAR.get()

    return await asyncio.ensure_future(reader())


def test_a_context_variable_an_eager_handler_sets_stays_its_own(tmp_path: Path) -> None:
    """Before the fix the handler's code before its first await ran in the reader task's context:
    the next handler of the batch and the agent's reader saw what it set."""
    seen: dict[str, str] = {}
    resumed: dict[str, str] = {}

    async def main() -> str:
        ex = executor(tmp_path)

        @ex.handler("setter", eager=True)
        async def setter(ctx: AttemptContext) -> None:
            VAR.set(f"set by {ctx.task}")

        @ex.handler("reader", eager=True)
        async def reader(ctx: AttemptContext) -> None:
            seen[ctx.task] = VAR.get()

        @ex.handler("suspends", eager=True)
        async def suspends(ctx: AttemptContext) -> None:
            VAR.set(f"set by {ctx.task}")
            await asyncio.sleep(0)  # the rest runs in a Task: still its own context
            resumed[ctx.task] = VAR.get()

        ready(ex)
        after = await in_reader(ex, rows(ex, ["setter", "reader", "suspends", "reader"]))
        await until(lambda: "t3" in resumed, 5, "the suspended handler resumes")
        assert ex.eager_rows == 4 and ex.suspended_rows == 1
        return after

    after = asyncio.run(main())
    assert after == "unset"  # the agent's reader task
    assert seen == {"t2": "unset", "t4": "unset"}  # the other handlers of the batch
    assert resumed == {"t3": "set by t3"}  # the handler itself, across its first await


class Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text for this exception")


def test_an_eager_handler_raising_an_exception_whose_str_raises_fails_alone(tmp_path: Path) -> None:
    """Before, formatting its error raised out of the batch: the session reader died, and every
    row of the message stayed begun and never finished (the one that had succeeded too)."""

    async def main() -> Executor:
        ex = executor(tmp_path)

        @ex.handler("ok", eager=True)
        async def ok(ctx: AttemptContext) -> None:
            pass

        @ex.handler("unprintable", eager=True)
        async def unprintable(ctx: AttemptContext) -> None:
            raise Unprintable()

        ready(ex)
        await in_reader(ex, rows(ex, ["ok", "unprintable", "ok"]))
        return ex

    ex = asyncio.run(main())
    assert ex.attempts.dedupe is not None
    results = {r.execution_id.split("@")[0]: r for r in ex.attempts.dedupe.pending_reports(10)}
    assert sorted(results) == ["t1", "t2", "t3"]
    assert results["t1"].success and results["t3"].success
    assert not results["t2"].success and results["t2"].error.startswith("Unprintable: <str() failed"), results


class Outcome(BaseException):
    """Not an Exception (as pytest's own outcomes, trio's Cancelled, gevent's GreenletExit)."""


def test_an_eager_handler_raising_a_base_exception_fails_alone(tmp_path: Path) -> None:
    """Before, it escaped the batch as above: the reader died and the message's rows stayed
    begun, never finished."""

    async def main() -> Executor:
        ex = executor(tmp_path)

        @ex.handler("ok", eager=True)
        async def ok(ctx: AttemptContext) -> None:
            pass

        @ex.handler("outcome", eager=True)
        async def outcome(ctx: AttemptContext) -> None:
            raise Outcome("stop")

        ready(ex)
        await in_reader(ex, rows(ex, ["outcome", "ok"]))
        return ex

    ex = asyncio.run(main())
    assert ex.attempts.dedupe is not None
    results = {r.execution_id.split("@")[0]: r for r in ex.attempts.dedupe.pending_reports(10)}
    assert sorted(results) == ["t1", "t2"] and results["t2"].success
    assert not results["t1"].success and results["t1"].error == "Outcome: stop", results


def test_a_cancel_stops_a_suspended_eager_handler_itself(tmp_path: Path) -> None:
    """tests/integration/test_session.py checks the run ends CANCELLED, which the leader decides
    whatever the executor does; this checks the handler's own coroutine is cancelled, its
    result recorded as such and nothing of it left in the agent's maps."""
    seen: list[str] = []

    async def main() -> Executor:
        ex = executor(tmp_path)

        @ex.handler("long", eager=True)
        async def long(ctx: AttemptContext) -> None:
            try:
                await asyncio.sleep(60)
            except asyncio.CancelledError:
                seen.append(ctx.execution_id)
                raise

        ready(ex)
        await in_reader(ex, rows(ex, ["long"]))
        [exec_id] = ex.attempts.running
        cancel = pb.SessionWork(epoch=1)
        cancel.cold.add(execution_id=exec_id, epoch=1, cancel=True, cancel_reason="test")
        await in_reader(ex, cancel)
        assert ex.attempts.dedupe is not None
        await until(
            lambda: ex.attempts.dedupe is not None and ex.attempts.dedupe.pending_reports(10), 5, "the result"
        )
        return ex

    ex = asyncio.run(main())
    assert ex.attempts.dedupe is not None
    [result] = ex.attempts.dedupe.pending_reports(10)
    assert seen == [result.execution_id]
    assert not result.success and result.error == "cancelled (test): handler 'long' cancelled"
    assert not (
        ex.attempts.running
        or ex.attempts.stops
        or ex.attempts.cancelled
        or ex.attempts.started_ids
        or ex.attempts.item_gen
    )


def test_eager_rows_begun_before_a_crash_are_not_started_again_after_it(tmp_path: Path) -> None:
    """Exactly-once start for eager rows across a kill (test_batch_execlog's SIGKILL runs a
    command of a manual run: cold items, never the eager batch): the batch's begin record is
    written before any handler starts, so a restarted agent on the same log recovers them as
    interrupted and starts none of them again when the leader sends them again."""
    store = MemoryExecutionLog()
    started: list[str] = []

    def agent() -> Executor:
        ex = executor(tmp_path, store)

        @ex.handler("hang", eager=True)
        async def hang(ctx: AttemptContext) -> None:
            started.append(ctx.execution_id)
            await asyncio.Event().wait()  # never returns: killed with its loop

        return ex

    async def main() -> Executor:
        first = agent()
        ready(first)
        work = rows(first, ["hang", "hang"])
        await in_reader(first, work)
        assert len(started) == 2
        # Killed here: the first agent is never touched again (its handlers hang, nothing of
        # them finishes); a second one opens the same execution log, as after a restart.
        ex = agent()
        ready(ex)
        assert ex.attempts.dedupe is not None
        recovered = ex.attempts.dedupe.recover()
        assert sorted(r.execution_id for r in recovered) == sorted(started)
        await in_reader(ex, work)  # the leader sends them again
        return ex

    again = asyncio.run(main())
    assert len(started) == 2  # none started again
    assert again.attempts.eager_rows == 0 and not again.attempts.running
    assert again.attempts.dedupe is not None
    assert {r.execution_id for r in again.attempts.dedupe.pending_reports(10)} == set(started)


class StuckStream:
    """A session whose sends never complete (the leader does not read: its window is full)."""

    async def send(self, message: pb.SessionUp) -> None:
        await asyncio.Event().wait()

    def __aiter__(self) -> AsyncIterator[pb.SessionDown]:
        raise NotImplementedError

    def cancel(self) -> None:
        pass


def test_a_heartbeat_or_report_whose_send_never_completes_fails_by_its_deadline(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The unary Heartbeat and Report calls had a deadline over the whole call; over the session
    it started only once the message was written, so a send stuck behind a full window hung
    the heartbeat loop (no lease renewed, nothing noticed) and the report loop for ever."""
    monkeypatch.setattr(session_module, "SESSION_REPORT_TIMEOUT_S", 0.2)

    async def main() -> list[BaseException]:
        ex = executor(tmp_path)
        ready(ex)
        assert ex.attempts.dedupe is not None
        ex.attempts.dedupe.begin("t@1/0/1")
        ex.attempts.dedupe.finish("t@1/0/1", AttemptResult("t@1/0/1", True))
        assert ex.attempts.report_wake is not None
        link = ex.attempts.session_link(StuckStream())
        calls = [
            link.heartbeat("leader", pb.HeartbeatRequest(name="eager"), timeout_s=0.2),
            link.report(),
        ]
        out: list[BaseException] = []
        for call in calls:
            try:
                await asyncio.wait_for(call, 5)
            except BaseException as exc:
                out.append(exc)
        return out

    errors = asyncio.run(main())
    assert [type(e).__name__ for e in errors] == ["TransportError", "TransportError"], errors
    assert all(isinstance(e, TransportError) and e.code == "deadline_exceeded" for e in errors), errors


class Counting:
    """The one ``ExecutorObservability`` hook a refused stale message calls."""

    def __init__(self) -> None:
        self.refused_stale = 0

    def on_refused_stale(self, n: int = 1) -> None:
        self.refused_stale += n


def test_a_message_from_a_stale_epoch_is_refused_and_counted_in_the_metric(tmp_path: Path) -> None:
    """Each refused row (and cold item) counts in ``raftsched_executor_attempts_total{result=
    "refused_stale"}`` as a stale DispatchBatch item does; before, a session's were counted only
    in the agent's own counter, so the metric undercounted over sessions."""
    ran: list[str] = []

    async def main() -> tuple[int, int]:
        ex = executor(tmp_path)
        counting = Counting()
        ex.observability = counting  # type: ignore[assignment]

        @ex.handler("h", eager=True)
        async def h(ctx: AttemptContext) -> None:
            ran.append(ctx.task)

        ready(ex)
        ex.attempts.max_epoch = 2
        work = rows(ex, ["h", "h"])  # epoch 1: older than the newest seen
        work.cold.add(execution_id="c@1/0/1", epoch=1)
        await in_reader(ex, work)
        return ex.refused_stale, counting.refused_stale

    assert asyncio.run(main()) == (3, 3)
    assert ran == []
