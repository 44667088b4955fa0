"""The executor's per-attempt cost in one process, without a cluster or gRPC.

    python bench/executor_hotpath.py [--attempts 20000] [--burst 20] [--kind sync|async]

An embedded :class:`raftsched.Executor` (execution log opened as the agent opens it, without
fsync) takes ``--attempts`` work items, ``--burst`` per event-loop pass (as they come off a
dispatch stream), runs a no-op handler for each (``sync``: a plain function, run in a worker
thread; ``async``: a coroutine on the loop) and records every result. Prints CPU time per
attempt: accept, the execution log's writes, the handler hop and the bookkeeping - what an
executor spends besides gRPC.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import tempfile
import time
from pathlib import Path

from raftsched.executor.agent import Executor
from raftsched.executor.dedupe import ExecutionLog
from raftsched.executor.runners import AttemptContext
from raftsched.v1 import raftsched_pb2 as pb


def run(attempts: int, burst: int, kind: str, data_dir: Path) -> dict[str, object]:
    ex = Executor("127.0.0.1:1", "bench", slots=10_000, data_dir=data_dir)
    if kind == "sync":

        @ex.handler("noop")
        def noop(ctx: AttemptContext) -> None:
            pass

    else:

        @ex.handler("noop")
        async def noop_async(ctx: AttemptContext) -> None:
            pass

    async def scenario() -> float:
        ex._log = ExecutionLog(data_dir, sync=False)
        ex._report_wake = asyncio.Event()
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
            c0 = time.process_time()
            for k in range(0, attempts, burst):
                for item in items[k : k + burst]:
                    ex._accept(item)
                await asyncio.sleep(0)
            while ex._running:
                await asyncio.gather(*list(ex._running.values()))
            c1 = time.process_time()
            if len(ex._log.pending_reports()) != attempts:
                raise RuntimeError("not every attempt recorded its result")
            return c1 - c0
        finally:
            ex._log.close()

    cpu = asyncio.run(scenario())
    return {
        "attempts": attempts,
        "burst": burst,
        "handler": kind,
        "cpu_us_per_attempt": round(cpu / attempts * 1e6, 1),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attempts", type=int, default=20_000)
    ap.add_argument("--burst", type=int, default=20)
    ap.add_argument("--kind", choices=["sync", "async"], default="sync")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="raftsched-exec-hotpath-") as tmp:
        print(json.dumps(run(args.attempts, args.burst, args.kind, Path(tmp))))
    return 0


if __name__ == "__main__":
    sys.exit(main())
