"""The executor agent's dispatch handling: epoch fencing and execution-id dedupe (no network)."""

from __future__ import annotations

import asyncio
import contextlib
import gc
from pathlib import Path

import pytest

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


def test_a_disconnect_that_fails_several_loops_at_once_leaves_no_unretrieved_task_error(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Chaos run: a node restart reset the connection under the heartbeat and the report loops at
    the same moment; ``_serve`` re-raised one failure and dropped the other task, which asyncio
    then logged at ERROR ("Task exception was never retrieved")."""
    ex = Executor("127.0.0.1:1", "ex1", slots=2, data_dir=tmp_path)
    unhandled: list[dict[str, object]] = []

    class _Stream:
        def cancel(self) -> None:
            pass

    class _Stub:
        def DispatchBatch(self, _request: object) -> _Stream:
            return _Stream()

    async def fails() -> None:
        raise ConnectionResetError("reset by peer")

    async def fails_while_cancelled() -> None:
        # A gRPC call that already failed raises its RpcError, not CancelledError, when the task
        # awaiting it is cancelled: the task ends with an exception nobody asked for.
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            raise ConnectionResetError("reset by peer") from None

    async def scenario() -> None:
        asyncio.get_running_loop().set_exception_handler(lambda _loop, ctx: unhandled.append(ctx))
        monkeypatch.setattr(ex, "_stub", lambda _target: _Stub())
        monkeypatch.setattr(ex, "_consume", lambda _stream: asyncio.Event().wait())
        monkeypatch.setattr(ex, "_heartbeats", lambda _stub: fails())
        monkeypatch.setattr(ex, "_reports", lambda _stub: fails_while_cancelled())
        with contextlib.suppress(ConnectionResetError):
            await ex._serve("127.0.0.1:1", asyncio.Event())
        await asyncio.sleep(0)  # let the cancelled tasks finish
        gc.collect()  # an unretrieved task exception is reported when the task is collected

    asyncio.run(scenario())
    assert not [c for c in unhandled if "never retrieved" in str(c.get("message"))], unhandled
