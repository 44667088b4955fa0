"""The executor's per-attempt cost in one process, without a cluster or gRPC.

    python -m bench.executor_hotpath [--attempts 20000] [--burst 20] [--kind sync|async] [--metrics]
                                     [--profile FILE]

An embedded :class:`raftsched.Executor` (execution log in LMDB without fsync, as the agent opens
it) takes ``--attempts`` work items over the in-memory transport, ``--burst`` per dispatch
message and event-loop pass (as they come off a dispatch stream), runs a no-op handler for each
(``sync``: a plain function, run in a worker thread; ``async``: a coroutine on the loop) and
records every result. Prints CPU time per attempt until every result is recorded: accept, the
execution log's writes, the handler hop and the bookkeeping - what an executor spends besides
gRPC. Reports are held back until then (a slow network), so reporting is not in the figure.
``--metrics`` runs the executor with its HTTP listener and metrics on (``http=127.0.0.1:0``).
The figure to compare is ``cpu_us_per_attempt``; ``python -m bench.ab`` runs this against two
checkouts, alternating (``--attempts 20000 --kind async``). ``--profile FILE`` writes a cProfile
of the measured window only, timed in process CPU time (``python -m pstats FILE``; the profiler's
own cost inflates the figure about fourfold, so compare shares, not the figure).
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import tempfile
import time
from pathlib import Path

from bench.common import Provenance
from raftsched.executor.agent import Executor
from raftsched.executor.memory import LoopbackEndpoint, MemoryTransport
from raftsched.executor.runners import AttemptContext
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
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
        self.finished += sum(1 for _, _, settled in items if not settled)
        if self.finished >= self.expected:
            self.all_done.set()


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
        endpoint = LoopbackEndpoint(heartbeat_ms=600_000)  # no heartbeat inside the measurement
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


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attempts", type=int, default=20_000)
    ap.add_argument("--burst", type=int, default=20)
    ap.add_argument("--kind", choices=["sync", "async"], default="sync")
    ap.add_argument("--metrics", action="store_true", help="with the executor's metrics and listener on")
    ap.add_argument("--json", type=Path, help="also write the result here")
    ap.add_argument("--profile", type=Path, help="write a cProfile (CPU time) of the measured window here")
    args = ap.parse_args()
    provenance = Provenance.start()
    with tempfile.TemporaryDirectory(prefix="raftsched-exec-hotpath-") as tmp:
        result = run(args.attempts, args.burst, args.kind, Path(tmp), args.metrics, args.profile)
    provenance.emit(result, args.json, indent=None)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
