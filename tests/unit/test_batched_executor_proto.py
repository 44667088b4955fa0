"""The prototype batched executor (bench/batched_executor.py, issue 31 gate 2) keeps today's dedupe
rules: a batch's begin record is durable before any attempt of it starts, a result is durable
before it is reported, a re-delivered attempt is not run again, an attempt interrupted by a
restart is reported failed as DedupeLog.recover() does, and a handler that suspends still finishes
(and still times out)."""

from __future__ import annotations

import asyncio
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from bench import executor_hotpath, session_grpc
from bench.batched_executor import (
    FAILED,
    LOST,
    OK,
    TIMED_OUT,
    BatchContext,
    BatchedExecutor,
    BatchRefused,
    Handler,
)
from raftsched.executor.dedupe import INTERRUPTED_ERROR
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.v1 import execbatch_pb2 as eb

DEADLINE_S = 10.0


async def until(cond: Callable[[], bool], what: str) -> None:
    loop = asyncio.get_running_loop()
    end = loop.time() + DEADLINE_S
    while not cond():
        if loop.time() > end:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.005)


def batch(
    seqs: list[int], *, handler: str = "h", timeout_ms: int = 0, epoch: int = 1, define: bool = True
) -> bytes:
    msg = eb.WorkColumns(
        epoch=epoch,
        base_ms=1000,
        seq=seqs,
        task_ref=[0] * len(seqs),
        nominal_delta=[0] * len(seqs),
        shard=[0] * len(seqs),
        attempt=[1] * len(seqs),
    )
    if define:
        msg.defs.add(ref=0, task="t", version=1, handler=handler, timeout_ms=timeout_ms, shards=1)
    return msg.SerializeToString()


class Harness:
    """A BatchedExecutor over a real LMDB execution log, its reports kept (acknowledged only
    when the test says so)."""

    def __init__(self, path: Path, handlers: dict[str, Handler]) -> None:
        self.path = path
        self.log = LmdbExecutionLog(path, sync=False)
        self.reports: list[eb.ReportBatch] = []
        self.durable_when_reported: list[bool] = []
        self.ex = BatchedExecutor(self.log, handlers, self._on_report, report_every_s=0.001)

    def _on_report(self, report_id: int, data: bytes) -> None:
        rb = eb.ReportBatch.FromString(data)
        assert rb.report_id == report_id
        self.reports.append(rb)
        finished = {
            (s, sh, a)
            for key, raw in self.log.unsettled()
            if key.startswith("f/")
            for rec in [eb.ExecBatchRecord.FromString(raw)]
            for s, sh, a in zip(rec.seq, rec.shard, rec.attempt, strict=True)
        }
        rows = zip(rb.seq, rb.shard, rb.attempt, strict=True)
        self.durable_when_reported.append(all(row in finished for row in rows))

    def rows(self) -> list[tuple[int, int]]:
        """(seq, status) of every reported row, in report order."""
        return [(s, st) for rb in self.reports for s, st in zip(rb.seq, rb.status, strict=True)]

    def errors(self) -> dict[int, str]:
        return {rb.seq[c.index]: c.error for rb in self.reports for c in rb.cold}

    def ack_all(self) -> None:
        for rb in self.reports:
            self.ex.on_ack(rb.report_id)

    def close(self) -> None:
        self.log.close()


@pytest.fixture
def calls() -> Iterator[Counter[int]]:
    yield Counter()


def test_every_attempt_runs_once_and_is_durable_before_it_is_reported(
    tmp_path: Path, calls: Counter[int]
) -> None:
    async def scenario() -> None:
        async def h(ctx: BatchContext) -> None:
            calls[ctx.seq] += 1

        hx = Harness(tmp_path, {"h": h})
        try:
            hx.ex.recover()
            hx.ex.on_work(batch(list(range(1, 21))))
            hx.ex.on_work(batch(list(range(21, 41)), define=False))
            await until(lambda: len(hx.rows()) == 40, "40 results")
            assert sorted(hx.rows()) == [(s, OK) for s in range(1, 41)]
            assert all(hx.durable_when_reported)
            assert calls == Counter(range(1, 41))
            hx.ack_all()
            assert hx.ex.open_attempts() == 0
            assert hx.log.unsettled() == []  # every record settled once acknowledged
        finally:
            hx.close()

    asyncio.run(scenario())


def test_a_begin_record_is_durable_before_the_first_attempt_starts(tmp_path: Path) -> None:
    seen: list[bool] = []

    async def scenario() -> None:
        async def h(ctx: BatchContext) -> None:
            found = hx.log.get("b/1.0.1")
            seen.append(found is not None and not found[1])  # present, unsettled

        hx = Harness(tmp_path, {"h": h})
        try:
            hx.ex.recover()
            hx.ex.on_work(batch(list(range(1, 11))))
            await until(lambda: len(hx.rows()) == 10, "10 results")
        finally:
            hx.close()

    asyncio.run(scenario())
    assert seen == [True] * 10


def test_a_redelivered_batch_is_not_run_again(tmp_path: Path, calls: Counter[int]) -> None:
    async def scenario() -> None:
        async def h(ctx: BatchContext) -> None:
            calls[ctx.seq] += 1

        hx = Harness(tmp_path, {"h": h})
        try:
            hx.ex.recover()
            work = batch([1, 2, 3])
            hx.ex.on_work(work)
            await until(lambda: len(hx.rows()) == 3, "3 results")
            # Re-delivered before the acknowledgement: not run, reported again.
            hx.ex.on_work(work)
            await until(lambda: len(hx.rows()) == 6, "the 3 results reported again")
            assert sorted(hx.rows()) == sorted([(1, OK), (2, OK), (3, OK)] * 2)
            hx.ack_all()
            # After it: neither run nor reported. A batch mixing old and new runs the new only.
            hx.ex.on_work(work)
            hx.ex.on_work(batch([3, 4, 4], define=False))
            await until(lambda: len(hx.rows()) == 7, "the new attempt's result")
            await asyncio.sleep(0.02)  # a re-report would have gone out by now (reports every 1 ms)
            assert hx.rows()[6:] == [(4, OK)]
            assert calls == Counter({1: 1, 2: 1, 3: 1, 4: 1})
            assert hx.ex.duplicates == 3 + 3 + 1
        finally:
            hx.close()

    asyncio.run(scenario())


def test_an_attempt_interrupted_by_a_restart_is_reported_lost_and_not_run_again(
    tmp_path: Path, calls: Counter[int]
) -> None:
    async def first_life() -> None:
        async def h(ctx: BatchContext) -> None:
            calls[ctx.seq] += 1
            if ctx.seq == 2:
                await asyncio.Event().wait()  # still running when the process "dies"

        hx = Harness(tmp_path, {"h": h})
        hx.ex.recover()
        hx.ex.on_work(batch([1, 2, 3]))
        await until(lambda: len(hx.rows()) == 2, "the two quick results")
        hx.close()  # the crash: nothing more reaches the log; the suspended handler dies with it
        for task in asyncio.all_tasks() - {asyncio.current_task()}:
            task.cancel()

    async def second_life() -> None:
        async def h(ctx: BatchContext) -> None:
            calls[ctx.seq] += 1

        hx = Harness(tmp_path, {"h": h})
        try:
            assert hx.ex.recover() == 1
            # The two unacknowledged results are reported again, the interrupted one as lost.
            await until(lambda: len(hx.rows()) == 3, "3 results after the restart")
            assert sorted(hx.rows()) == [(1, OK), (2, LOST), (3, OK)]
            assert hx.errors() == {2: INTERRUPTED_ERROR}
            assert all(hx.durable_when_reported)
            hx.ex.on_work(batch([1, 2, 3]))  # the leader sends them again: none runs
            await asyncio.sleep(0.02)
            assert calls == Counter({1: 1, 2: 1, 3: 1})
            hx.ack_all()
            assert hx.log.unsettled() == []
        finally:
            hx.close()

    asyncio.run(first_life())
    asyncio.run(second_life())


def test_a_suspending_handler_completes_and_its_timeout_applies(tmp_path: Path) -> None:
    cancelled: list[int] = []

    async def scenario() -> None:
        async def slow(ctx: BatchContext) -> None:
            await asyncio.sleep(0.01)

        async def stuck(ctx: BatchContext) -> None:
            try:
                await asyncio.Event().wait()
            finally:
                cancelled.append(ctx.seq)

        async def fails(ctx: BatchContext) -> None:
            await asyncio.sleep(0)
            raise RuntimeError("boom")

        hx = Harness(tmp_path, {"slow": slow, "stuck": stuck, "fails": fails})
        try:
            hx.ex.recover()
            hx.ex.on_work(batch([1, 2], handler="slow", timeout_ms=5_000))
            hx.ex.new_stream()
            hx.ex.on_work(batch([3], handler="stuck", timeout_ms=50))
            hx.ex.new_stream()
            hx.ex.on_work(batch([4], handler="fails"))
            await until(lambda: len(hx.rows()) == 4, "4 results")
            assert sorted(hx.rows()) == [(1, OK), (2, OK), (3, TIMED_OUT), (4, FAILED)]
            assert hx.errors()[3] == "timed out after 50 ms: handler cancelled"
            assert hx.errors()[4] == "RuntimeError: boom"
            assert cancelled == [3]
            assert all(hx.durable_when_reported)
        finally:
            hx.close()

    asyncio.run(scenario())


def test_a_plain_function_runs_in_a_thread(tmp_path: Path, calls: Counter[int]) -> None:
    async def scenario() -> None:
        def h(ctx: BatchContext) -> None:
            calls[ctx.seq] += 1

        hx = Harness(tmp_path, {"h": h})
        try:
            hx.ex.recover()
            hx.ex.on_work(batch([1, 2, 3]))
            await until(lambda: len(hx.rows()) == 3, "3 results")
            assert sorted(hx.rows()) == [(1, OK), (2, OK), (3, OK)]
            assert calls == Counter({1: 1, 2: 1, 3: 1})
        finally:
            hx.close()

    asyncio.run(scenario())


def test_bad_columns_and_stale_epochs_are_refused_and_nothing_is_recorded(tmp_path: Path) -> None:
    async def scenario() -> None:
        async def h(ctx: BatchContext) -> None:
            pass

        hx = Harness(tmp_path, {"h": h})
        try:
            hx.ex.recover()
            bad = eb.WorkColumns.FromString(batch([1, 2]))
            del bad.attempt[1]
            with pytest.raises(BatchRefused, match=r"seq 2, .* attempt 1"):
                hx.ex.on_work(bad.SerializeToString())
            with pytest.raises(BatchRefused, match=r"task_ref \[0\] not defined"):
                hx.ex.on_work(batch([1], define=False))
            hx.ex.on_work(batch([5], epoch=3))
            await until(lambda: len(hx.rows()) == 1, "the epoch-3 result")
            hx.ex.on_work(batch([6], epoch=2))
            assert hx.ex.refused_stale == 1
            assert [key for key, _ in hx.log.unsettled()] == ["b/5.0.1", "f/5.0.1"]
        finally:
            hx.close()

    asyncio.run(scenario())


def test_the_batched_bench_stays_runnable(tmp_path: Path) -> None:
    result = executor_hotpath.run_batched(200, 20, "async", tmp_path)
    assert result["attempts"] == 200
    cpu = result["cpu_us_per_attempt"]
    assert isinstance(cpu, float) and cpu > 0


@pytest.mark.parametrize("shape", ["session", "unary"])
def test_the_grpc_session_bench_stays_runnable(tmp_path: Path, shape: str) -> None:
    result = session_grpc.run(100, 20, shape, tmp_path)  # a leader stub subprocess on loopback
    for side in ("executor_cpu_us_per_attempt", "leader_cpu_us_per_attempt"):
        value = result[side]
        assert isinstance(value, float) and value > 0
