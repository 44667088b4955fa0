"""What metrics cost per fire and per attempt: the instrumentation alone, and the hot paths A/B.

    python -m bench.metrics_cost [--repeat 5] [--tasks 10000] [--seconds 15] [--attempts 20000]

Two measurements, because a whole-path A/B on a shared, loaded machine is noisier than the
few percent it is meant to resolve:

1. **instrumentation alone** (deterministic): the exact calls a node and an executor with
   ``http`` set add on their hot paths, timed in a loop on real metric objects — per fire
   (the applier's tally, the commit-lateness histogram), per attempt on the leader (tally of the
   attempt and of the finished run, the start-lateness histogram, the gRPC interceptor's share
   of a 500-result Report call) and per attempt on the executor (the finish hook, the
   execution-log counters' share of a 20-item batch);
2. **the hot paths A/B**: ``bench/hotpath.py`` (plan + apply + commit per fire) and
   ``bench/executor_hotpath.py`` (an embedded executor per attempt), metrics off and on,
   alternated ``--repeat`` times, each run in a fresh process; the minimum of each is the least
   disturbed run, the median the typical one.

The instrumentation figure divided by the A/B baseline is the overhead to quote.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import timeit
from pathlib import Path

from bench.common import Provenance
from raftsched.executor.runners import AttemptResult
from raftsched.fsm.tally import ApplyTally
from raftsched.observability.executor_http import ExecutorObservability
from raftsched.observability.executor_metrics import ExecutorSample
from raftsched.observability.node_metrics import NodeMetrics, NodeSample
from raftsched.timing.clock import SystemClock
from raftsched.v1 import raftsched_pb2 as pb

N = 200_000
REPORT_BATCH = 500
LOG_BATCH = 20


def _us(stmt: object, number: int = N) -> float:
    return min(timeit.repeat(stmt, number=number, repeat=3)) / number * 1e6  # type: ignore[arg-type]


def instrumentation() -> dict[str, float]:
    tally = ApplyTally()
    metrics = NodeMetrics("n1", NodeSample, tally)
    # One committed batch of 1000 fires, each of its own nominal time (the worst case).
    batch = [(1000 * i, 12, 1) for i in range(1000)]
    results = [
        pb.ExecResult(execution_id=f"r{i}/0/1", success=True, start_lateness_ms=40)
        for i in range(REPORT_BATCH)
    ]
    per_fire = _us(lambda: tally.fire("fired", "alice", "etl", "t"))
    per_fire += _us(lambda: metrics.observe_commit_lateness(batch), 200) / len(batch)
    # The interceptor's own work per call: the monotonic clock twice, one counter, one histogram.
    clock = SystemClock().monotonic
    service, method = "raftsched.v1.ExecutorService", "Report"

    def intercepted_call() -> None:
        start = clock()
        metrics.grpc_requests.inc(service, method, "OK")
        metrics.grpc_seconds.observe(clock() - start, service, method)

    leader_per_attempt = (
        _us(lambda: tally.attempt("succeeded", "alice", "etl", "t"))
        + _us(lambda: tally.run_finished("succeeded", "alice", "etl", "t"))
        + _us(lambda: metrics.observe_start_lateness(r.start_lateness_ms for r in results), 200)
        / REPORT_BATCH
        + _us(intercepted_call) / REPORT_BATCH
    )
    obs = ExecutorObservability("ex1", "127.0.0.1:0", ExecutorSample)
    result = AttemptResult("t@1/0/1", True, 0, "", "", "", 5, False)
    log_writes = _us(lambda: obs.on_log_write("begin", LOG_BATCH))  # a begin and a finish per batch
    finished = [result] * LOG_BATCH  # one loop pass's batch
    executor_per_attempt = (_us(lambda: obs.on_finished(finished), 20_000) + 2 * log_writes) / LOG_BATCH
    obs.listener.close()
    return {
        "leader_us_per_fire": round(per_fire, 3),
        "leader_us_per_attempt": round(leader_per_attempt, 3),
        "executor_us_per_attempt": round(executor_per_attempt, 3),
    }


def _bench(module: str, *args: str) -> dict[str, object]:
    # A fresh process per run: in one process, runs disturb each other (heap, caches, GC).
    done = subprocess.run(
        [sys.executable, "-m", f"bench.{module}", *args], capture_output=True, text=True, check=True
    )
    out: dict[str, object] = json.loads(done.stdout)
    return out


def ab(repeat: int, tasks: int, seconds: int, attempts: int) -> dict[str, list[float]]:
    fires: dict[bool, list[float]] = {False: [], True: []}
    execs: dict[bool, list[float]] = {False: [], True: []}
    for _ in range(repeat):
        for on in (False, True):
            flag = ["--metrics"] if on else []
            r = _bench("hotpath", "--tasks", str(tasks), "--seconds", str(seconds), *flag)
            fires[on].append(float(str(r["leader_total_us_per_fire"])))
            e = _bench("executor_hotpath", "--attempts", str(attempts), "--kind", "async", *flag)
            execs[on].append(float(str(e["cpu_us_per_attempt"])))
    return {
        "hotpath_us_per_fire_off": sorted(fires[False]),
        "hotpath_us_per_fire_on": sorted(fires[True]),
        "executor_us_per_attempt_off": sorted(execs[False]),
        "executor_us_per_attempt_on": sorted(execs[True]),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--attempts", type=int, default=20_000)
    ap.add_argument("--json", type=Path, help="also write the result here")
    args = ap.parse_args()
    provenance = Provenance.start()
    out: dict[str, object] = {"instrumentation": instrumentation()}
    if args.repeat > 0:
        runs = ab(args.repeat, args.tasks, args.seconds, args.attempts)
        fire_off = min(runs["hotpath_us_per_fire_off"])
        exec_off = min(runs["executor_us_per_attempt_off"])
        inst = instrumentation()
        out["ab"] = runs
        fire_on = min(runs["hotpath_us_per_fire_on"])
        exec_on = min(runs["executor_us_per_attempt_on"])
        out["overhead_pct"] = {
            "instrumentation_per_fire": round(100 * inst["leader_us_per_fire"] / fire_off, 2),
            "instrumentation_per_attempt": round(100 * inst["executor_us_per_attempt"] / exec_off, 2),
            "ab_min_per_fire": round(100 * (fire_on - fire_off) / fire_off, 2),
            "ab_min_per_attempt": round(100 * (exec_on - exec_off) / exec_off, 2),
        }
    provenance.emit(out, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
