"""The executor's per-attempt cost in one process, without a cluster or gRPC.

    python -m bench.executor_hotpath [--attempts 20000] [--burst 20] [--kind sync|async] [--metrics]
                                     [--profile FILE]
    python -m bench.executor_hotpath --batched [--attempts 20000] [--burst 20] [--kind sync|async]

An embedded :class:`raftsched.Executor` (execution log in LMDB without fsync, as the agent opens
it) takes ``--attempts`` work items over the in-memory transport, ``--burst`` per dispatch
message and event-loop pass (as they come off a dispatch stream), runs a no-op handler for each
(``sync``: a plain function, run in a worker thread; ``async``: a coroutine on the loop) and
records every result (its early heartbeats, woken by starts, go to a leader that takes partial
ones, as this release's do). Prints CPU time per attempt until every result is recorded: accept, the
execution log's writes, the handler hop and the bookkeeping - what an executor spends besides
gRPC. Reports are held back until then (a slow network), so reporting is not in the figure.
``--metrics`` runs the executor with its HTTP listener and metrics on (``http=127.0.0.1:0``).
The figure to compare is ``cpu_us_per_attempt``; ``python -m bench.ab`` runs this against two
checkouts, alternating (``--attempts 20000 --kind async``). ``--profile FILE`` writes a cProfile
of the measured window only, timed in process CPU time (``python -m pstats FILE``; the profiler's
own cost inflates the figure about fourfold, so compare shares, not the figure; not with
``--batched``).

``--batched`` runs the same no-op attempts through the PROTOTYPE batched executor
(:mod:`bench.batched_executor`, issue 31 gate 2): ``--burst`` attempts per WorkColumns message
(packed columns, the task definition in the first one), one execution-log record per batch for
the begin and one for the results, results as ReportBatch columns, each report acknowledged at
once (its records settled). Its ``cpu_us_per_attempt`` runs until every result is acknowledged
and settled, so it includes reporting (serialised, not sent) and settling, which the default
figure leaves out.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import tempfile
import time
from pathlib import Path

from bench.batched_executor import BatchContext, BatchedExecutor, Handler
from bench.common import Provenance
from raftsched.executor.agent import Executor
from raftsched.executor.memory import LoopbackEndpoint, MemoryTransport
from raftsched.executor.runners import AttemptContext
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.v1 import execbatch_pb2 as eb
from raftsched.v1 import raftsched_pb2 as pb


class _CountingLog(LmdbExecutionLog):
    """Sets ``all_done`` once ``expected`` results are recorded (finishes, not acknowledgements)."""

    def __init__(self, path: Path, expected: int) -> None:
        super().__init__(path, sync=False)
        self.expected = expected
        self.finished = 0
        self.all_done = asyncio.Event()

    def update(self, items: list[tuple[str, bytes, bool]], at_ms: int = 0) -> None:
        super().update(items, at_ms)
        self._count(sum(1 for _, _, settled in items if not settled))

    def insert_many(self, items: list[tuple[str, bytes]]) -> list[tuple[bytes, bool] | None]:
        found = super().insert_many(items)
        # The agent's finish records (one per batch of results): count their rows.
        self._count(sum(_finish_rows(key, value) for key, value in items))
        return found

    def _count(self, finished: int) -> None:
        self.finished += finished
        if self.finished >= self.expected:
            self.all_done.set()


def _finish_rows(key: str, value: bytes) -> int:
    """The rows of a finish record (0 for any other entry)."""
    if not key.startswith("\x01f"):
        return 0
    return int.from_bytes(value[2:6], "little")


class _HeldReports(MemoryTransport):
    """The in-memory transport, with every report waiting until ``release`` is set."""

    def __init__(self, endpoint: LoopbackEndpoint) -> None:
        super().__init__(endpoint)
        self.release = asyncio.Event()

    async def report(self, target: str, request: pb.ReportRequest, *, timeout_s: float) -> pb.ReportReply:
        await self.release.wait()
        return await super().report(target, request, timeout_s=timeout_s)


def run(
    attempts: int, burst: int, kind: str, data_dir: Path, metrics: bool = False, profile: Path | None = None
) -> dict[str, object]:
    profiler = cProfile.Profile(time.process_time) if profile is not None else None

    async def scenario() -> float:
        # No periodic heartbeat inside the measurement; the early ones (woken by starts) go to a
        # leader of this release, which takes partial heartbeats.
        endpoint = LoopbackEndpoint(heartbeat_ms=600_000, partial_heartbeats=True)
        transport = _HeldReports(endpoint)
        log = _CountingLog(data_dir, attempts)
        ex = Executor(
            "loopback:1",
            "bench",
            slots=10_000,
            transport=transport,
            execution_log=log,
            http="127.0.0.1:0" if metrics else None,
        )
        if kind == "sync":

            @ex.handler("noop")
            def noop(ctx: AttemptContext) -> None:
                pass

        else:

            @ex.handler("noop")
            async def noop_async(ctx: AttemptContext) -> None:
                pass

        items = [
            pb.WorkItem(
                execution_id=f"t@{i}/0/1",
                run_id=f"t@{i}",
                task="t",
                handler="noop",
                attempt=1,
                epoch=1,
                nominal_ms=1000,
            )
            for i in range(attempts)
        ]
        try:
            async with endpoint.serving(ex):
                c0 = time.process_time()
                if profiler is not None:
                    profiler.enable()
                for k in range(0, attempts, burst):
                    endpoint.push("bench", items[k : k + burst])
                    await asyncio.sleep(0)
                await log.all_done.wait()
                if profiler is not None:
                    profiler.disable()
                c1 = time.process_time()
                transport.release.set()
                await endpoint.until(lambda: len(endpoint.reports) == attempts, timeout_s=120)
            if not all(r.success for r in endpoint.reports):
                raise RuntimeError("an attempt failed")
            return c1 - c0
        finally:
            log.close()

    cpu = asyncio.run(scenario())
    if profiler is not None and profile is not None:
        profiler.dump_stats(profile)
    return {
        "attempts": attempts,
        "burst": burst,
        "handler": kind,
        "metrics": metrics,
        "cpu_us_per_attempt": round(cpu / attempts * 1e6, 1),
    }


def work_messages(attempts: int, burst: int, epoch: int = 1) -> list[bytes]:
    """``attempts`` no-op attempts of one task as WorkColumns messages of ``burst`` rows (seq 1
    upwards, shard 0, attempt 1, all due at 1000 ms), the task defined in the first message."""
    out: list[bytes] = []
    for k in range(0, attempts, burst):
        rows = min(burst, attempts - k)
        msg = eb.WorkColumns(
            epoch=epoch,
            base_ms=1000,
            seq=range(k + 1, k + 1 + rows),
            task_ref=[0] * rows,
            nominal_delta=[0] * rows,
            shard=[0] * rows,
            attempt=[1] * rows,
        )
        if not k:
            msg.defs.add(ref=0, task="t", version=1, handler="noop", shards=1)
        out.append(msg.SerializeToString())
    return out


def check_reports(reports: list[bytes], attempts: int) -> None:
    """Every attempt reported exactly once, and succeeded."""
    seqs: list[int] = []
    for data in reports:
        rb = eb.ReportBatch.FromString(data)
        if any(s != 1 for s in rb.status):
            raise RuntimeError(f"report {rb.report_id}: an attempt failed")
        seqs.extend(rb.seq)
    if sorted(seqs) != list(range(1, attempts + 1)):
        raise RuntimeError(f"{len(seqs)} results for {attempts} attempts, or some reported twice")


def run_batched(attempts: int, burst: int, kind: str, data_dir: Path) -> dict[str, object]:
    async def scenario() -> tuple[float, int]:
        loop = asyncio.get_running_loop()
        reports: list[bytes] = []
        all_acked = asyncio.Event()

        def ack(report_id: int) -> None:
            ex.on_ack(report_id)
            if ex.acknowledged >= attempts:
                all_acked.set()

        def on_report(report_id: int, data: bytes) -> None:
            reports.append(data)
            loop.call_soon(ack, report_id)  # the leader's acknowledgement, as soon as it can be

        handler: Handler
        if kind == "sync":

            def noop(ctx: BatchContext) -> None:
                pass

            handler = noop
        else:

            async def noop_async(ctx: BatchContext) -> None:
                pass

            handler = noop_async
        log = LmdbExecutionLog(data_dir, sync=False)
        try:
            ex = BatchedExecutor(log, {"noop": handler}, on_report)
            ex.recover()
            messages = work_messages(attempts, burst)
            c0 = time.process_time()
            for data in messages:
                ex.on_work(data)
                await asyncio.sleep(0)
            await asyncio.wait_for(all_acked.wait(), timeout=120)
            c1 = time.process_time()
            check_reports(reports, attempts)
            return c1 - c0, len(reports)
        finally:
            log.close()

    cpu, report_count = asyncio.run(scenario())
    return {
        "attempts": attempts,
        "burst": burst,
        "handler": kind,
        "batched": True,
        "reports": report_count,
        "cpu_us_per_attempt": round(cpu / attempts * 1e6, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attempts", type=int, default=20_000)
    ap.add_argument("--burst", type=int, default=20)
    ap.add_argument("--kind", choices=["sync", "async"], default="sync")
    ap.add_argument("--metrics", action="store_true", help="with the executor's metrics and listener on")
    ap.add_argument("--batched", action="store_true", help="through the prototype batched executor")
    ap.add_argument("--json", type=Path, help="also write the result here")
    ap.add_argument("--profile", type=Path, help="write a cProfile (CPU time) of the measured window here")
    args = ap.parse_args()
    if args.batched and (args.metrics or args.profile):
        ap.error("--metrics and --profile are not available with --batched (the prototype)")
    provenance = Provenance.start()
    with tempfile.TemporaryDirectory(prefix="raftsched-exec-hotpath-") as tmp:
        if args.batched:
            result = run_batched(args.attempts, args.burst, args.kind, Path(tmp))
        else:
            result = run(args.attempts, args.burst, args.kind, Path(tmp), args.metrics, args.profile)
    provenance.emit(result, args.json, indent=None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
