"""What an upstream workflow finishing costs when many downstream runs wait on it (issue 28 §1).

    python -m bench.crossdeps [--runs 10000]

In process, on LMDB, the way every replica applies it: workflow ``orders-sync`` (one task) and
workflow ``reconcile`` whose task depends on orders-sync's run of the same logical time. ``--runs``
downstream runs are started at that logical time (each its own StartWorkflowRun entry: all wait),
then the upstream run is started and its task's result reported. Printed:

* the applies from the upstream's success to every downstream task READY (and handed out as a
  task run: no parallelism limit holds them): the ReportResults entry releases the first 1,000,
  then the ``WorkflowWaitsDue`` entries the leader proposes at once release 1,000 each - their
  count, total wall and CPU time (``time.process_time``) and the longest single apply (how long
  the state lock, and Raft's tick, is held);
* for comparison, the cost of an upstream finishing with nobody waiting (the same entry for the
  next logical time);
* the average apply of one downstream StartWorkflowRun (indexing its edge).
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench.common import Provenance
from raftsched import codec
from raftsched.fsm.state import SchedulerState
from raftsched.storage.lmdb_store import LmdbStore
from raftsched.v1 import log_pb2 as pb

T0 = 1_700_000_040_000
UP, DOWN = "orders-sync", "reconcile"


class Applier:
    def __init__(self, store: LmdbStore) -> None:
        self.store = store
        self.state = SchedulerState.load(store)
        self.index = 0

    def apply(self, cmd: pb.Command) -> tuple[pb.CommandResult, float, float]:
        data = codec.encode_command(cmd)
        wall, cpu = time.perf_counter(), time.process_time()
        applied = self.state.apply(data)
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        self.index += 1
        self.store.commit(self.index)
        assert applied.result.ok, applied.result.message
        return applied.result, wall, cpu


def command(now: int = T0) -> pb.Command:
    return pb.Command(epoch=1, now_ms=now, origin="n1")


def start(a: Applier, workflow: str, logical: int) -> tuple[str, float]:
    cmd = command()
    cmd.start_workflow_run.workflow = workflow
    cmd.start_workflow_run.logical_ms = logical
    res, wall, _ = a.apply(cmd)
    return res.workflow_run.run_id, wall


def finish_upstream(a: Applier, run_id: str) -> tuple[float, float]:
    wr = a.state.get_workflow_run(run_id)
    assert wr is not None
    task_run = wr.tasks[0].run_id
    cmd = command()
    cmd.assign_attempts.assignments.add(run_id=task_run, shard=0, attempt=1, executor="x1")
    a.apply(cmd)
    cmd = command()
    cmd.report_results.results.add(run_id=task_run, shard=0, attempt=1, executor="x1", success=True)
    _, wall, cpu = a.apply(cmd)
    return wall, cpu


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=10_000)
    args = parser.parse_args()
    provenance = Provenance.start()
    with tempfile.TemporaryDirectory() as tmp:
        store = LmdbStore(Path(tmp), sync=False)
        a = Applier(store)
        join = command()
        join.executor_join.name = "x1"
        join.executor_join.slots = 10_000
        a.apply(join)
        up = command()
        up.apply_workflow.spec.name = UP
        up.apply_workflow.spec.overlap = pb.OVERLAP_ALLOW
        up.apply_workflow.spec.tasks.add(name="load", command="load", priority=5)
        a.apply(up)
        down = command()
        down.apply_workflow.spec.name = DOWN
        down.apply_workflow.spec.overlap = pb.OVERLAP_ALLOW
        down.apply_workflow.spec.tasks.add(
            name="reconcile",
            command="reconcile {{ ds }}",
            priority=5,
            depends_on=[pb.Dependency(workflow=UP)],
        )
        a.apply(down)
        starts = [start(a, DOWN, T0)[1] for _ in range(args.runs)]
        assert sum(len(ws) for ws in a.state.wf.deps.waits[(UP, T0)].values()) == args.runs
        upstream, _ = start(a, UP, T0)
        wall, cpu = finish_upstream(a, upstream)
        longest, applies = wall, 1
        # The rest are released by the WorkflowWaitsDue commands the leader proposes at once.
        while a.state.wf.deps.next_due_ms:
            due = command()
            due.workflow_waits_due.SetInParent()
            _, w, c = a.apply(due)
            wall, cpu, longest, applies = wall + w, cpu + c, max(longest, w), applies + 1
        released = sum(
            1
            for wr in a.state.wf.runs.values()
            if wr.workflow == DOWN and wr.tasks[0].state == pb.TASK_RUNNING
        )
        assert released == args.runs, released
        alone, _ = start(a, UP, T0 + 1)
        wall_alone, cpu_alone = finish_upstream(a, alone)
        store.close()
    result = {
        "downstream_runs_waiting": args.runs,
        "release_applies": applies,
        "release_total_wall_s": round(wall, 3),
        "release_total_cpu_s": round(cpu, 3),
        "release_longest_apply_ms": round(longest * 1000, 1),
        "per_downstream_task_us": round(wall / args.runs * 1e6, 1),
        "upstream_finish_nobody_waiting_ms": round(wall_alone * 1000, 2),
        "upstream_finish_nobody_waiting_cpu_ms": round(cpu_alone * 1000, 2),
        "downstream_start_apply_mean_us": round(sum(starts) / len(starts) * 1e6, 1),
        "provenance": provenance.as_dict(),
    }
    print(json.dumps(result, indent=2))


if __name__ == "__main__":
    main()
