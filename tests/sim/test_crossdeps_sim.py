"""Deterministic simulation of cross-workflow dependencies (issue 28 §1) through leader failovers:
no downstream task starts before its upstream run of the same logical time succeeded, none is
lost, none runs twice, timeouts fire from leader time across failovers, and the replicas agree."""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest

from raftsched.testing import SimHarness
from raftsched.v1 import raftsched_pb2 as pb

UP, DOWN = "orders-sync", "reconcile"
HOUR = 3_600_000


def upstream(scheduled: bool = True) -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name=UP, namespace="a", owner="A", overlap=pb.OVERLAP_ALLOW)
    if scheduled:
        spec.schedule.expr = "* * * * * */2"
    spec.tasks.add(name="extract", command="extract {{ ds }}", max_retries=5)
    spec.tasks.add(name="load", command="load", depends_on=[pb.Dependency(task="extract")], max_retries=5)
    return spec


def downstream(scheduled: bool = True) -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name=DOWN, namespace="b", owner="B", overlap=pb.OVERLAP_ALLOW)
    if scheduled:
        spec.schedule.expr = "* * * * * */2"
    spec.tasks.add(name="prep", command="prep", max_retries=5)
    spec.tasks.add(
        name="reconcile",
        command="reconcile {{ ds }}",
        depends_on=[pb.Dependency(task="prep"), pb.Dependency(workflow=UP, task="load")],
        max_retries=5,
    )
    # Waits for a run that never comes (an hour before the cluster started): skipped by its
    # timeout, which only the leader's WorkflowWaitsDue can act on.
    spec.tasks.add(
        name="audit",
        command="audit",
        depends_on=[
            pb.Dependency(
                workflow=UP, logical_offset_ms=-HOUR, timeout_ms=3_000, on_timeout=pb.UPSTREAM_TIMEOUT_SKIP
            )
        ],
        max_retries=5,
    )
    return spec


def cluster(seed: int) -> SimHarness:
    sim = SimHarness(["n1", "n2", "n3"], seed=seed)
    sim.elect("n1")
    sim.add_executor("ex1", slots=6, duration_ms=250)
    sim.add_executor("ex2", slots=6, duration_ms=250)
    assert sim.write("apply_workflow", upstream()).ok
    assert sim.write("apply_workflow", downstream()).ok
    return sim


def finish(sim: SimHarness) -> tuple[list[pb.WorkflowRun], list[pb.WorkflowRun]]:
    sim.write("apply_workflow", downstream(scheduled=False))
    sim.run_for(500)
    sim.write("apply_workflow", upstream(scheduled=False))
    # A downstream run whose upstream never ran (scheduled just before the schedules stopped):
    # its upstream is started by hand, late - it must still release it.
    down = {r.logical_ms for r in sim.workflow_runs(DOWN)}
    up = {r.logical_ms for r in sim.workflow_runs(UP)}
    for logical in sorted(down - up):
        sim.write("start_workflow_run", UP, logical, "")
    for _ in range(800):
        sim.run_for(100)
        runs = sim.workflow_runs(UP) + sim.workflow_runs(DOWN)
        if runs and all(r.state != pb.WORKFLOW_RUNNING for r in runs):
            return sim.workflow_runs(UP), sim.workflow_runs(DOWN)
    raise AssertionError("workflow runs never finished")


def check(sim: SimHarness, ups: list[pb.WorkflowRun], downs: list[pb.WorkflowRun]) -> None:
    assert len(downs) >= 3, "the schedule hardly ran"
    executed = Counter(exec_id for ex in sim.executors.values() for exec_id, _ in ex.executions)
    assert not [e for e, n in executed.items() if n > 1], "an execution id ran twice"
    started: dict[str, int] = {}
    for ex in sim.executors.values():
        for exec_id, at in ex.executions:
            run_id = exec_id.split("/")[0]
            started[run_id] = min(at, started.get(run_id, at))
    load_done: dict[int, int] = {}
    for wr in ups:
        assert wr.state == pb.WORKFLOW_SUCCESS, wr.run_id
        load = next(t for t in wr.tasks if t.name == "load")
        done = max(e.at_ms for e in load.timeline if e.state == pb.TASK_SUCCESS)
        load_done[wr.logical_ms] = min(done, load_done.get(wr.logical_ms, done))
    for wr in downs:
        tasks = {t.name: t for t in wr.tasks}
        assert wr.state == pb.WORKFLOW_SUCCESS, (wr.run_id, {n: t.state for n, t in tasks.items()})
        reconcile, audit = tasks["reconcile"], tasks["audit"]
        assert reconcile.state == pb.TASK_SUCCESS and reconcile.tries == 1, wr.run_id
        assert audit.state == pb.TASK_SKIPPED and "did not finish within 3s" in audit.reason, audit.reason
        skipped_at = audit.timeline[-1].at_ms
        assert skipped_at >= wr.created_ms + 3_000, "timed out early"
        # No downstream task starts before its upstream succeeded (leader time of the commit).
        assert wr.logical_ms in load_done, f"{wr.run_id}: no upstream run"
        assert started[reconcile.run_id] >= load_done[wr.logical_ms], f"{wr.run_id} started early"
        met = reconcile.external[0]
        assert met.state == pb.EXTERNAL_MET and met.upstream_run.startswith(f"{UP}@{wr.logical_ms}")
    assert len(set(sim.digests().values())) == 1
    sim.close()


def _load_succeeded(sim: SimHarness, logical: int) -> bool:
    for wr in sim.workflow_runs(UP):
        if wr.logical_ms == logical and any(
            t.name == "load" and t.state == pb.TASK_SUCCESS for t in wr.tasks
        ):
            return True
    return False


def test_failover_between_upstream_success_and_downstream_start() -> None:
    """The leader dies right after committing the upstream's success (which made the downstream
    task READY and created its task run) and before any executor started it: the next leader
    starts it, once."""
    sim = cluster(0)
    start = sim.clock.now_ms()
    crashed = 0
    for k in range(1, 4):
        logical = start - start % 2000 + 2000 * k
        for _ in range(400):
            if _load_succeeded(sim, logical):
                break
            sim.run_for(10, step_ms=10)
        else:
            raise AssertionError(f"upstream run {logical} never succeeded")
        down = next(r for r in sim.workflow_runs(DOWN) if r.logical_ms == logical)
        reconcile = next(t for t in down.tasks if t.name == "reconcile")
        assert reconcile.state == pb.TASK_RUNNING  # its task run is committed...
        assert not any(
            e.startswith(reconcile.run_id + "/") for x in sim.executors.values() for e, _ in x.executions
        )
        old = sim.leader  # ... and not started anywhere: the leader dies now
        assert old is not None
        sim.crash(old)
        crashed += 1
        sim.run_for(600)
        sim.elect(next(n for n in sorted(sim.nodes) if n != old))
        sim.restart(old)
    assert crashed == 3
    check(sim, *finish(sim))


@pytest.mark.parametrize("seed", range(int(os.environ.get("RAFTSCHED_SIM_SEEDS", "3"))))
def test_random_failovers_with_cross_workflow_dependencies(seed: int) -> None:
    rng = random.Random(seed)
    sim = cluster(seed)
    for _ in range(4):
        sim.run_for(rng.randint(300, 2_500))
        old = sim.leader
        if old is None:
            continue
        sim.crash(old)
        sim.run_for(rng.randint(200, 1_500))
        sim.elect(rng.choice([n for n in sim.nodes if n != old]))
        sim.restart(old)
    sim.run_for(2_000)
    check(sim, *finish(sim))
