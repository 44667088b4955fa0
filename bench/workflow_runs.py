"""1,000 concurrent workflow runs through the real replicated state machine.

Drives SchedulerState (the code every replica runs) directly with the commands a leader would
commit: N runs of a 5-task diamond workflow are started, then every task run is assigned and
reported, in waves, until all runs have finished. Prints the apply cost per command kind, the
cost per workflow task completion (the whole chain: task run settles, the run's state machine
walks the reverse adjacency list, the next tasks start), and the memory held per active run.

    python -m bench.workflow_runs [--runs 1000] [--max-parallel 0]
    python -m bench.workflow_runs --cluster [--runs 1000]

``--cluster`` runs the same N workflow runs end to end instead: a real 3-node cluster on loopback
and two executor processes with a no-op handler (bench/noop_executor.py); all N runs are started
at once through the SDK and the script waits until every one has finished, then prints how long
that took, task runs completed per second, and run duration percentiles.
"""

from __future__ import annotations

import argparse
import gc
import resource
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from bench.common import Provenance, noop_cluster, percentile
from raftsched import codec
from raftsched.client import Client
from raftsched.fsm.effects import AttemptReady
from raftsched.fsm.state import SchedulerState
from raftsched.storage.memory import MemoryStore
from raftsched.testing.cluster import wait_until
from raftsched.v1 import log_pb2 as pb

T0 = 1_795_996_800_000


def command(now: int) -> pb.Command:
    return pb.Command(epoch=1, now_ms=now, origin="bench")


def spec(max_parallel: int, handler: str = "") -> pb.WorkflowSpec:
    """extract -> (left, right) -> load, and an alert on load's failure (skipped when it succeeds)."""

    def how(text: str) -> dict[str, str]:
        return {"handler": handler} if handler else {"command": text}

    s = pb.WorkflowSpec(name="diamond", max_parallel=max_parallel)
    s.tasks.add(name="extract", **how("extract {{ ds }}"))
    s.tasks.add(name="left", depends_on=[pb.Dependency(task="extract")], **how("left"))
    s.tasks.add(name="right", depends_on=[pb.Dependency(task="extract")], **how("right"))
    s.tasks.add(
        name="load", depends_on=[pb.Dependency(task="left"), pb.Dependency(task="right")], **how("load")
    )
    s.tasks.add(name="alert", depends_on=[pb.Dependency(task="load", condition=pb.ON_FAILURE)], **how("a"))
    return s


def big_dag(n: int) -> None:
    """One run of an n-task layered DAG (100 tasks a layer, each needing 3 of the layer above)
    through the state machine, results reported 200 per command as executors batch them."""
    state = state_with_executor()
    s = pb.WorkflowSpec(name="big")
    for i in range(n):
        layer, pos = divmod(i, 100)
        deps = [] if layer == 0 else [f"t{(layer - 1) * 100 + (pos + k) % 100}" for k in range(3)]
        s.tasks.add(name=f"t{i}", command="true", depends_on=[pb.Dependency(task=d) for d in deps])
    apply = command(T0)
    apply.apply_workflow.spec.CopyFrom(s)
    t = time.perf_counter()
    assert state.apply(codec.encode_command(apply)).result.ok
    apply_s = time.perf_counter() - t
    cmd = command(T0)
    cmd.start_workflow_run.workflow = "big"
    t = time.perf_counter()
    out = state.apply(codec.encode_command(cmd))
    start_s = time.perf_counter() - t
    pending = [e for e in out.effects if isinstance(e, AttemptReady)]
    done = 0
    t = time.perf_counter()
    now = T0
    while pending:
        now += 1000
        wave, pending = pending, []
        for i in range(0, len(wave), 200):
            assign = command(now)
            report = command(now)
            for e in wave[i : i + 200]:
                assign.assign_attempts.assignments.add(
                    run_id=e.run_id, shard=e.shard, attempt=e.attempt, executor="ex1"
                )
                report.report_results.results.add(
                    run_id=e.run_id, shard=e.shard, attempt=e.attempt, executor="ex1", success=True
                )
            state.apply(codec.encode_command(assign))
            res = state.apply(codec.encode_command(report))
            done += res.result.accounted
            pending += [e for e in res.effects if isinstance(e, AttemptReady)]
    run_s = time.perf_counter() - t
    [wr] = state.list_workflow_runs("big")
    print(f"one run of a {n:,}-task layered DAG ({len(s.tasks) // 100} layers of 100, 3 deps each):")
    print(f"  apply (validate + compile + store) : {apply_s * 1e3:8.0f} ms")
    print(f"  start (100 roots)                  : {start_s * 1e3:8.0f} ms")
    print(
        f"  assign + complete every task       : {run_s * 1e3:8.0f} ms "
        f"({run_s / max(1, done) * 1e6:.0f} µs/task)"
    )
    print(f"  run state                          : {pb.WorkflowRunState.Name(wr.state)}")


def cluster_run(runs: int) -> None:
    with (
        tempfile.TemporaryDirectory(prefix="raftsched-wf-bench-") as tmp,
        noop_cluster(Path(tmp), 2, slots=16) as (cluster, _),
        Client(cluster.targets()) as client,
    ):
        client.apply_workflow(spec(0, handler="noop"))
        t0 = time.monotonic()
        # Submitted from 64 threads (one RPC per run): 1,000 runs in flight at once.
        with ThreadPoolExecutor(64) as pool:
            ids = list(
                pool.map(
                    lambda i: client.start_workflow_run("diamond", logical_ms=T0 - i * 86_400_000).run_id,
                    range(runs),
                )
            )
        submitted_s = time.monotonic() - t0

        def finished() -> list[pb.WorkflowRun] | None:
            got = client.list_workflow_runs("diamond", limit=runs)
            done = [r for r in got if r.state != pb.WORKFLOW_RUNNING]
            return done if len(done) == len(ids) else None

        done = wait_until(finished, 900, interval=1.0, what="every workflow run to finish")
        total_s = time.monotonic() - t0
    durations = sorted(r.finished_ms - r.created_ms for r in done)
    events = sorted([(r.created_ms, 1) for r in done] + [(r.finished_ms, -1) for r in done])
    peak = active = 0
    for _, delta in events:  # the most runs that were active at the same moment
        active += delta
        peak = max(peak, active)
    ok = sum(1 for r in done if r.state == pb.WORKFLOW_SUCCESS)
    print(
        f"workflow runs end to end: {runs} diamond runs (4 task runs each), 3 nodes + 2 executors x 16 slots"
    )
    print(
        f"  submitted in {submitted_s:.1f} s ({runs / submitted_s:,.0f} runs/s through the SDK, one RPC each)"
    )
    print(f"  all finished {total_s:.1f} s after the first submission: {ok}/{runs} SUCCESS")
    print(f"  most runs active at once: {peak}")
    print(f"  task runs completed: {4 * runs / total_s:,.0f}/s")
    print(
        f"  run duration (created -> finished): p50 {percentile(durations, 0.5):,.0f} ms, "
        f"p99 {percentile(durations, 0.99):,.0f} ms, "
        f"max {durations[-1]:,} ms"
    )


def state_with_executor() -> SchedulerState:
    """A fresh state machine with one executor of 10,000 slots joined."""
    state = SchedulerState.load(MemoryStore())
    join = command(T0)
    join.executor_join.name = "ex1"
    join.executor_join.slots = 10_000
    state.apply(codec.encode_command(join))
    return state


def rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def in_process(runs: int, max_parallel: int) -> None:
    """N runs of the diamond through one state machine: start, assign and settle costs, RSS."""
    state = state_with_executor()
    apply = command(T0)
    apply.apply_workflow.spec.CopyFrom(spec(max_parallel))
    assert state.apply(codec.encode_command(apply)).result.ok

    gc.collect()
    before_kb = rss_kb()
    pending: list[AttemptReady] = []
    t = time.perf_counter()
    for i in range(runs):
        cmd = command(T0)
        cmd.start_workflow_run.workflow = "diamond"
        cmd.start_workflow_run.logical_ms = T0 - i * 86_400_000
        out = state.apply(codec.encode_command(cmd))
        assert out.result.ok, out.result.message
        pending += [e for e in out.effects if isinstance(e, AttemptReady)]
    start_s = time.perf_counter() - t
    active = len(state.wf.runs)
    gc.collect()
    held_kb = rss_kb() - before_kb

    completions = 0
    settle_s = assign_s = 0.0
    now = T0
    while pending:
        now += 1000
        wave, pending = pending, []
        cmd = command(now)
        for e in wave:
            cmd.assign_attempts.assignments.add(
                run_id=e.run_id, shard=e.shard, attempt=e.attempt, executor="ex1"
            )
        t = time.perf_counter()
        state.apply(codec.encode_command(cmd))
        assign_s += time.perf_counter() - t
        for i in range(0, len(wave), 200):  # results arrive in batches, as executors report them
            cmd = command(now)
            for e in wave[i : i + 200]:
                cmd.report_results.results.add(
                    run_id=e.run_id, shard=e.shard, attempt=e.attempt, executor="ex1", success=True
                )
            t = time.perf_counter()
            out = state.apply(codec.encode_command(cmd))
            settle_s += time.perf_counter() - t
            completions += out.result.accounted
            pending += [e for e in out.effects if isinstance(e, AttemptReady)]
    finished = state.list_workflow_runs("diamond", limit=runs)
    ok = sum(1 for r in finished if r.state == pb.WORKFLOW_SUCCESS)

    print(f"workflow runs: {runs} of a 5-task diamond (max_parallel={max_parallel or 'unlimited'})")
    print(f"  concurrently active after start : {active}")
    print(f"  start (per run)                 : {start_s / runs * 1e6:8.0f} µs")
    per_run = held_kb * 1024 / max(1, active)
    print(f"  RSS held by the active runs     : {held_kb / 1024:8.1f} MiB ({per_run:,.0f} B/run)")
    print(f"  task completions                : {completions}")
    print(f"  assign (per task run)           : {assign_s / max(1, completions) * 1e6:8.0f} µs")
    print(f"  completion (per task run)       : {settle_s / max(1, completions) * 1e6:8.0f} µs")
    print(f"  runs finished SUCCESS           : {ok}/{runs}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--max-parallel", type=int, default=0)
    parser.add_argument("--cluster", action="store_true", help="end to end on a real cluster")
    parser.add_argument("--big-dag", type=int, default=0, help="one run of an N-task DAG instead")
    args = parser.parse_args()
    provenance = Provenance.start()
    print(provenance.header(), flush=True)
    if args.big_dag:
        big_dag(args.big_dag)
    elif args.cluster:
        cluster_run(args.runs)
    else:
        in_process(args.runs, args.max_parallel)
    print(provenance.footer())


if __name__ == "__main__":
    main()
