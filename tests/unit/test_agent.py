"""The executor agent's dispatch handling: epoch fencing and execution-id dedupe (no network)."""

from __future__ import annotations

import asyncio
from pathlib import Path

from raftsched.executor.agent import Executor
from raftsched.executor.dedupe import ExecutionLog
from raftsched.executor.runners import AttemptContext
from raftsched.v1 import raftsched_pb2 as pb


def item(exec_id: str, epoch: int) -> pb.WorkItem:
    run_id, shard, attempt = exec_id.split("/")
    return pb.WorkItem(
        execution_id=exec_id,
        run_id=run_id,
        task=run_id.split("@")[0],
        nominal_ms=int(run_id.split("@")[1]),
        shard=int(shard),
        shards=2,
        attempt=int(attempt),
        epoch=epoch,
        handler="count",
    )


def test_stale_epochs_are_refused_and_an_execution_id_runs_once(tmp_path: Path) -> None:
    ex = Executor("127.0.0.1:1", "ex1", slots=2, data_dir=tmp_path)
    calls: list[str] = []

    @ex.handler("count")
    def count(ctx: AttemptContext) -> None:
        calls.append(ctx.execution_id)

    async def scenario() -> None:
        ex._log = ExecutionLog(tmp_path)
        ex._report_wake = asyncio.Event()
        try:
            ex._accept(item("t@1000/0/1", epoch=3))
            ex._accept(item("t@1000/0/1", epoch=3))  # re-delivered while running or done
            ex._accept(item("t@1000/1/1", epoch=2))  # a deposed leader's dispatch
            await asyncio.gather(*list(ex._running.values()))
            ex._accept(item("t@1000/0/1", epoch=4))  # re-sent by a new leader after it finished
            await asyncio.sleep(0)
            assert not ex._running
            pending = ex._log.pending_reports()
            assert [r.execution_id for r in pending] == ["t@1000/0/1"] and pending[0].success
        finally:
            ex._log.close()

    asyncio.run(scenario())
    assert calls == ["t@1000/0/1"]
    assert ex.refused_stale == 1


def test_an_unknown_handler_fails_the_attempt_with_a_clear_error(tmp_path: Path) -> None:
    ex = Executor("127.0.0.1:1", "ex1", slots=1, data_dir=tmp_path)

    async def scenario() -> None:
        ex._log = ExecutionLog(tmp_path)
        ex._report_wake = asyncio.Event()
        try:
            ex._accept(item("t@1000/0/1", epoch=1))
            await asyncio.gather(*list(ex._running.values()))
            [result] = ex._log.pending_reports()
            assert not result.success and "unknown handler 'count'" in result.error
        finally:
            ex._log.close()

    asyncio.run(scenario())
