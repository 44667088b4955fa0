"""Workflow completion handling cost against out-degree, and a 10,000-task run to completion.

    python -m bench.workflow_completion [--fanout 1 10 100 1000 10000] [--repeat 7] [--tasks 10000]

Pure state machine only (raftsched.workflow.run on protobuf messages): no cluster, no IO.

* fan-out k: a root with k children. ``finish(root)`` walks k edges and makes k children READY
  (success) or SKIPPED (failure, each skip propagating with out-degree 0). Reported: µs per
  finish() and µs per edge (median of --repeat fresh runs). Then the children are finished one
  by one: µs per leaf finish(), which must not grow with the size of the run (no scan of all
  tasks per completion).
* a layered DAG of --tasks tasks (100 tasks per layer, each depending on 3 tasks of the layer
  before): start, then mark_running + finish every READY task until the run is finished — once
  all succeeding, once with 5 % of the tasks failing (skips propagate). Reported: total ms and µs
  per task.
* for comparison, one full ``derive_state`` scan of the largest fan-out run: what each completion
  would cost if the run state were re-derived by scanning every task.
"""

from __future__ import annotations

import argparse
import random
import statistics
import time

from bench.common import Provenance
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow import run as wr
from raftsched.workflow.dag import Dag, compile_dag


def fanout_dag(k: int) -> Dag:
    spec = pb.WorkflowSpec(name="fan")
    spec.tasks.add(name="root", command="true")
    for i in range(k):
        spec.tasks.add(name=f"c{i}", command="true").depends_on.add(task="root")
    return compile_dag(spec)


def layered_dag(n: int, width: int = 100, fan_in: int = 3, seed: int = 1) -> Dag:
    rng = random.Random(seed)
    spec = pb.WorkflowSpec(name="layers")
    for i in range(n):
        task = spec.tasks.add(name=f"t{i}", command="true")
        layer = i // width
        if layer:
            lo = (layer - 1) * width
            for j in rng.sample(range(lo, lo + width), fan_in):
                task.depends_on.add(task=f"t{j}")
    return compile_dag(spec)


def bench_fanout(k: int, repeat: int) -> tuple[float, float, float]:
    """(µs per finish(root) success, µs per finish(root) failure, µs per leaf finish)."""
    dag = fanout_dag(k)
    ok: list[float] = []
    bad: list[float] = []
    leaf: list[float] = []
    for r in range(repeat):
        for outcome, out in ((pb.TASK_SUCCESS, ok), (pb.TASK_FAILED, bad)):
            run = pb.WorkflowRun(run_id=f"fan@{r}")
            wr.start(dag, run, 0)
            wr.mark_running(run, 0, "r0", 1)
            t0 = time.perf_counter()
            ready = wr.finish(dag, run, 0, outcome, 2)
            out.append((time.perf_counter() - t0) * 1e6)
            if outcome == pb.TASK_SUCCESS:
                assert len(ready) == k
                for i in ready:
                    wr.mark_running(run, i, f"r{i}", 3)
                order = list(ready)
                random.Random(r).shuffle(order)
                t0 = time.perf_counter()
                for i in order:
                    wr.finish(dag, run, i, pb.TASK_SUCCESS, 4)
                leaf.append((time.perf_counter() - t0) * 1e6 / k)
                assert run.state == pb.WORKFLOW_SUCCESS
            else:
                assert run.state == pb.WORKFLOW_FAILED
    return statistics.median(ok), statistics.median(bad), statistics.median(leaf)


def run_to_completion(dag: Dag, fail_pct: float, seed: int = 7) -> tuple[float, int, int]:
    """(total seconds, tasks finished by finish(), tasks skipped)."""
    rng = random.Random(seed)
    run = pb.WorkflowRun(run_id="layers@0")
    t0 = time.perf_counter()
    ready = wr.start(dag, run, 0)
    now = 0
    finished = 0
    while ready:
        now += 1
        for i in ready:
            wr.mark_running(run, i, f"r{i}", now)
        nxt: list[int] = []
        for i in ready:
            outcome = pb.TASK_FAILED if rng.random() < fail_pct else pb.TASK_SUCCESS
            nxt += wr.finish(dag, run, i, outcome, now)
            finished += 1
        ready = nxt
    elapsed = time.perf_counter() - t0
    assert run.state != pb.WORKFLOW_RUNNING
    skipped = sum(1 for t in run.tasks if t.state == pb.TASK_SKIPPED)
    assert finished + skipped == len(dag.names)
    return elapsed, finished, skipped


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--fanout", type=int, nargs="+", default=[1, 10, 100, 1_000, 10_000])
    ap.add_argument("--repeat", type=int, default=7)
    ap.add_argument("--tasks", type=int, default=10_000)
    args = ap.parse_args()
    provenance = Provenance.start()
    print(provenance.header(), flush=True)

    print(f"completion cost against out-degree (median of {args.repeat} runs)")
    print(
        f"{'out-degree':>10} | {'finish ok µs':>12} | {'µs/edge':>8} | {'finish fail µs':>14} | "
        f"{'µs/skip':>8} | {'leaf finish µs':>14}"
    )
    print("-" * 84)
    for k in args.fanout:
        ok, bad, leaf = bench_fanout(k, args.repeat)
        print(f"{k:>10,} | {ok:>12.1f} | {ok / k:>8.2f} | {bad:>14.1f} | {bad / k:>8.2f} | {leaf:>14.2f}")

    big = fanout_dag(max(args.fanout))
    probe = pb.WorkflowRun(run_id="probe@0")
    wr.start(big, probe, 0)
    for task in probe.tasks[:-1]:
        task.state = pb.TASK_SUCCESS
    t0 = time.perf_counter()
    for _ in range(args.repeat):
        wr.derive_state(probe)
    scan = (time.perf_counter() - t0) * 1e6 / args.repeat
    print(
        f"for comparison: one full derive_state scan of {len(big.names):,} tasks = {scan:.0f} µs "
        "(what a completion would cost if it re-derived the run state by scanning)"
    )

    print()
    print(f"layered DAG of {args.tasks:,} tasks (100 per layer, 3 dependencies each), run to completion")
    t0 = time.perf_counter()
    dag = layered_dag(args.tasks)
    compile_s = time.perf_counter() - t0
    print(f"compile_dag: {compile_s * 1e3:.0f} ms")
    print(f"{'failing':>8} | {'total ms':>9} | {'µs/task':>8} | {'finished':>8} | {'skipped':>8}")
    print("-" * 53)
    for pct in (0.0, 0.05):
        elapsed, finished, skipped = run_to_completion(dag, pct)
        print(
            f"{pct:>8.0%} | {elapsed * 1e3:>9.0f} | {elapsed * 1e6 / args.tasks:>8.1f} | "
            f"{finished:>8,} | {skipped:>8,}"
        )
    print(provenance.footer())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
