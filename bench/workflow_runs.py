"""1,000 concurrent workflow runs through the real replicated state machine.

Drives SchedulerState (the code every replica runs) directly with the commands a leader would
commit: N runs of a 5-task diamond workflow are started, then every task run is assigned and
reported, in waves, until all runs have finished. Prints the apply cost per command kind, the
cost per workflow task completion (the whole chain: task run settles, the run's state machine
walks the reverse adjacency list, the next tasks start), and the memory held per active run.

    python bench/workflow_runs.py [--runs 1000] [--max-parallel 0]
"""

from __future__ import annotations

import argparse
import gc
import resource
import time

from raftsched import codec
from raftsched.fsm.state import AttemptReady, SchedulerState
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import raftsched_pb2 as pb

T0 = 1_795_996_800_000


def command(now: int) -> pb.Command:
    return pb.Command(epoch=1, now_ms=now, origin="bench")


def spec(max_parallel: int) -> pb.WorkflowSpec:
    s = pb.WorkflowSpec(name="diamond", max_parallel=max_parallel)
    s.tasks.add(name="extract", command="extract {{ ds }}")
    s.tasks.add(name="left", command="left", depends_on=[pb.Dependency(task="extract")])
    s.tasks.add(name="right", command="right", depends_on=[pb.Dependency(task="extract")])
    s.tasks.add(
        name="load", command="load", depends_on=[pb.Dependency(task="left"), pb.Dependency(task="right")]
    )
    s.tasks.add(
        name="alert", command="alert", depends_on=[pb.Dependency(task="load", condition=pb.ON_FAILURE)]
    )
    return s


def rss_kb() -> int:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--runs", type=int, default=1000)
    parser.add_argument("--max-parallel", type=int, default=0)
    args = parser.parse_args()

    state = SchedulerState.load(MemoryStore())
    join = command(T0)
    join.executor_join.name = "ex1"
    join.executor_join.slots = 10_000
    state.apply(codec.encode_command(join))
    apply = command(T0)
    apply.apply_workflow.spec.CopyFrom(spec(args.max_parallel))
    assert state.apply(codec.encode_command(apply)).result.ok

    gc.collect()
    before_kb = rss_kb()
    pending: list[AttemptReady] = []
    t = time.perf_counter()
    for i in range(args.runs):
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
    finished = state.list_workflow_runs("diamond", limit=args.runs)
    ok = sum(1 for r in finished if r.state == pb.WORKFLOW_SUCCESS)

    print(f"workflow runs: {args.runs} of a 5-task diamond (max_parallel={args.max_parallel or 'unlimited'})")
    print(f"  concurrently active after start : {active}")
    print(f"  start (per run)                 : {start_s / args.runs * 1e6:8.0f} µs")
    per_run = held_kb * 1024 / max(1, active)
    print(f"  RSS held by the active runs     : {held_kb / 1024:8.1f} MiB ({per_run:,.0f} B/run)")
    print(f"  task completions                : {completions}")
    print(f"  assign (per task run)           : {assign_s / max(1, completions) * 1e6:8.0f} µs")
    print(f"  completion (per task run)       : {settle_s / max(1, completions) * 1e6:8.0f} µs")
    print(f"  runs finished SUCCESS           : {ok}/{args.runs}")


if __name__ == "__main__":
    main()
