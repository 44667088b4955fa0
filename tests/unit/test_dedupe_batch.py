"""Batched writes of the execution log: begin_many / finish_many, and the agent's use of them."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from pathlib import Path

import pytest

from raftsched.executor.agent import Executor
from raftsched.executor.dedupe import DedupeLog
from raftsched.executor.execlog_records import MARKER_KEY, BeginStatus, ExecutionState, record_head
from raftsched.executor.memory import LoopbackEndpoint, MemoryTransport
from raftsched.executor.runners import AttemptContext, AttemptResult
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.storage.memory import MemoryExecutionLog
from raftsched.v1 import raftsched_pb2 as pb

NEW, RUNNING, DONE = BeginStatus.NEW, BeginStatus.RUNNING, BeginStatus.DONE


def ok(execution_id: str) -> AttemptResult:
    return AttemptResult(execution_id, True, 0, duration_ms=1)


def work(execution_id: str, *, cancel: bool = False) -> pb.WorkItem:
    run_id = execution_id.split("/")[0]
    return pb.WorkItem(
        execution_id=execution_id,
        run_id=run_id,
        task="t",
        handler="noop",
        attempt=1,
        epoch=1,
        cancel=cancel,
    )


class CountingLog(MemoryExecutionLog):
    """Counts the store's writes: one ``insert_many`` per begin batch, one ``update`` per finish
    batch of per-id entries; the agent's batch records (one ``insert_many`` each) are counted by
    the rows they hold, in ``begin_records`` and ``finish_records``. ``on_insert`` runs inside
    the insert (while a begin is being recorded)."""

    def __init__(self) -> None:
        super().__init__()
        self.begins: list[int] = []
        self.finishes: list[int] = []
        self.begin_records: list[int] = []
        self.finish_records: list[int] = []
        self.on_insert: Callable[[], None] | None = None

    def insert_many(self, items: list[tuple[str, bytes]]) -> list[tuple[bytes, bool] | None]:
        records = [(key, value) for key, value in items if key.startswith("\x01") and key != MARKER_KEY]
        finishing = False
        for key, value in records:
            kind, rows, _ = record_head(key, value)
            finishing = finishing or chr(kind) == "F"
            (self.finish_records if chr(kind) == "F" else self.begin_records).append(rows)
        if not records:
            self.begins.append(len(items))
        if self.on_insert is not None and not finishing:
            self.on_insert()
        return super().insert_many(items)

    def update(self, items: list[tuple[str, bytes, bool]], at_ms: int = 0) -> None:
        self.finishes.append(len(items))  # acknowledgements go through settle()
        super().update(items, at_ms)


def loopback(slots: int, log: MemoryExecutionLog) -> tuple[Executor, LoopbackEndpoint]:
    endpoint = LoopbackEndpoint()
    ex = Executor("loopback:1", "ex1", slots=slots, transport=MemoryTransport(endpoint), execution_log=log)
    return ex, endpoint


@pytest.mark.parametrize("cache_size", [10_000, 0])
def test_begin_many_equals_begin_one_by_one(tmp_path: Path, cache_size: int) -> None:
    with DedupeLog.open(tmp_path / "a", cache_size=cache_size) as log:
        log.begin("done")
        log.finish("done", ok("done"))
        log.begin("running")
        got = log.begin_many(["x", "done", "running", "x", "y"])
        assert [o.status for o in got] == [NEW, DONE, RUNNING, RUNNING, NEW]
        assert got[1].result == ok("done")
        assert log.running() == ["running", "x", "y"]
    with DedupeLog.open(tmp_path / "a", cache_size=cache_size) as log:  # durable
        assert [o.status for o in log.begin_many(["x", "y", "z"])] == [RUNNING, RUNNING, NEW]


def test_begin_many_with_a_bad_id_records_nothing(tmp_path: Path) -> None:
    with DedupeLog.open(tmp_path) as log:
        with pytest.raises(ValueError):
            log.begin_many(["fine", "x" * 600])
        assert log.get("fine") is None
        assert log.begin("fine").status is NEW


def test_finish_many_is_all_or_nothing(tmp_path: Path) -> None:
    with DedupeLog.open(tmp_path) as log:
        log.begin_many(["a", "b"])
        with pytest.raises(ValueError, match="without begin"):
            log.finish_many([ok("a"), ok("never")])
        with pytest.raises(ValueError, match="finished already"):
            log.finish_many([ok("a"), ok("a")])
        assert log.running() == ["a", "b"]
        log.finish_many([ok("a"), ok("b")])
        assert [r.execution_id for r in log.pending_reports()] == ["a", "b"]
        record = log.get("b")
        assert record is not None and record.state is ExecutionState.DONE


def test_known_answers_from_memory_only(tmp_path: Path) -> None:
    with DedupeLog.open(tmp_path, cache_size=10) as log:
        assert log.known("a") is None
        log.begin("a")
        known = log.known("a")
        assert known is not None and known.status is RUNNING
        log.finish("a", ok("a"))
        known = log.known("a")
        assert known is not None and known.status is DONE and known.result == ok("a")


def test_insert_many_inserts_a_repeated_key_once(tmp_path: Path) -> None:
    store = LmdbExecutionLog(tmp_path)
    try:
        assert store.insert_many([("k", b"1"), ("k", b"2")]) == [None, (b"1", False)]
        assert store.unsettled() == [("k", b"1")]
    finally:
        store.close()


def test_a_burst_of_dispatches_is_begun_and_finished_in_one_write_each() -> None:
    log = CountingLog()
    ex, endpoint = loopback(50, log)
    ran: list[str] = []

    @ex.handler("noop")
    async def noop(ctx: AttemptContext) -> None:
        ran.append(ctx.execution_id)

    async def scenario() -> None:
        async with endpoint.serving(ex):
            endpoint.push("ex1", [work(f"t@{i}/0/1") for i in range(20)])  # one stream message
            await endpoint.until(lambda: len(endpoint.reports) == 20)
        # One record for the whole burst's begins...
        assert log.begins == [] and log.begin_records == [20]
        # ...and fewer than 20 for the results (one per event-loop pass that finished some).
        assert sum(log.finish_records) == 20 and len(log.finish_records) < 20 and log.finishes == []
        assert all(r.success for r in endpoint.reports)

    asyncio.run(scenario())
    assert sorted(ran) == sorted(f"t@{i}/0/1" for i in range(20))


def test_a_cancel_before_the_attempt_started_never_runs_it() -> None:
    log = CountingLog()
    ex, endpoint = loopback(5, log)
    ran: list[str] = []

    @ex.handler("noop")
    def noop(ctx: AttemptContext) -> None:
        ran.append(ctx.execution_id)

    async def scenario() -> None:
        async with endpoint.serving(ex):
            # Cancelled before its task started: never begun, never run, nothing to report.
            endpoint.push("ex1", [work("w@1/0/1"), work("w@1/0/1", cancel=True)])
            # Cancelled while its begin is being recorded: recorded, not run, reported failed.
            log.on_insert = lambda: endpoint.push("ex1", [work("w@2/0/1", cancel=True)])
            endpoint.push("ex1", [work("w@2/0/1")])
            await endpoint.until(lambda: len(endpoint.reports) == 1)
        [result] = endpoint.reports
        assert result.execution_id == "w@2/0/1" and not result.success and "cancelled" in result.error
        assert log.get("w@1/0/1") is None

    asyncio.run(scenario())
    assert ran == []
