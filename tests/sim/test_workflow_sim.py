"""Deterministic simulation of workflows through leader failover and executor crashes: no workflow
task runs twice (beyond what an executor crash forces), none is skipped wrongly, every task starts
only after its upstream finished, and the replicas agree."""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest

from raftsched.testing import SimHarness
from raftsched.v1 import raftsched_pb2 as pb

W = "etl"


def etl() -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(
        name=W, schedule=pb.CronTrigger(expr="* * * * * */2"), overlap=pb.OVERLAP_ALLOW, max_parallel=6
    )
    spec.tasks.add(name="extract", command="extract {{ ds }}")
    spec.tasks.add(name="validate", command="validate", depends_on=[pb.Dependency(task="extract")])
    spec.tasks.add(
        name="load",
        command="load",
        depends_on=[pb.Dependency(task="extract"), pb.Dependency(task="validate")],
    )
    spec.tasks.add(
        name="alert",
        command="alert",
        depends_on=[pb.Dependency(task="load", condition=pb.ON_FAILURE)],
    )
    spec.tasks.add(
        name="cleanup", command="cleanup", depends_on=[pb.Dependency(task="load", condition=pb.ON_DONE)]
    )
    for task in spec.tasks:
        task.max_retries = 5  # an executor crash loses attempts: retried, not failed
    return spec


def cluster(seed: int) -> SimHarness:
    sim = SimHarness(["n1", "n2", "n3"], seed=seed)
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=250)
    sim.add_executor("ex2", slots=4, duration_ms=250)
    assert sim.write("apply_workflow", etl()).ok
    return sim


def finish(sim: SimHarness) -> list[pb.WorkflowRun]:
    """Stop the schedule (a version without one) and let every run finish."""
    unscheduled = etl()
    unscheduled.ClearField("schedule")
    sim.write("apply_workflow", unscheduled)
    for _ in range(600):
        sim.run_for(100)
        runs = sim.workflow_runs(W)
        if runs and all(r.state != pb.WORKFLOW_RUNNING for r in runs):
            return runs
    raise AssertionError("workflow runs never finished")


def check(sim: SimHarness, runs: list[pb.WorkflowRun], executor_faults: bool) -> None:
    assert len(runs) >= 3, "the schedule hardly ran"
    # Every nominal fire of the schedule is accounted once, and each fired one is a run.
    fires = sim.fires("etl#")
    assert len({f.nominal_ms for f in fires}) == len(fires)
    assert {f.run_id for f in fires if f.outcome == pb.FIRED} == {r.run_id for r in runs}
    executed = Counter(exec_id for ex in sim.executors.values() for exec_id, _ in ex.executions)
    assert not [e for e, n in executed.items() if n > 1], "an execution id ran twice"
    started: dict[str, int] = {}
    for ex in sim.executors.values():
        for exec_id, at in ex.executions:
            run_id = exec_id.split("/")[0]
            started[run_id] = min(at, started.get(run_id, at))
    for wr in runs:
        states = {t.name: t.state for t in wr.tasks}
        # All upstream tasks succeed: nothing may be skipped except the on-failure alert.
        assert wr.state == pb.WORKFLOW_SUCCESS, (wr.run_id, states)
        assert states["alert"] == pb.TASK_SKIPPED
        assert all(s == pb.TASK_SUCCESS for n, s in states.items() if n != "alert"), states
        for t in wr.tasks:
            if t.name == "alert":
                continue
            assert t.tries == 1, f"{wr.run_id}/{t.name} was started {t.tries} times"
            per_task = [e for e in executed if e.startswith(t.run_id + "/")]
            if not executor_faults:
                assert len(per_task) == 1, (t.run_id, per_task)
        # Topological order: a task's first execution starts after each upstream finished.
        by_name = {t.name: t for t in wr.tasks}
        for downstream, upstreams in (("validate", ["extract"]), ("load", ["extract", "validate"])):
            first = started[by_name[downstream].run_id]
            for up in upstreams:
                done = max(e.at_ms for e in by_name[up].timeline if e.state == pb.TASK_SUCCESS)
                assert first >= done, f"{wr.run_id}: {downstream} started before {up} finished"
    assert len(set(sim.digests().values())) == 1
    sim.close()


def test_leader_failover_mid_workflow_runs_nothing_twice() -> None:
    sim = cluster(0)
    sim.run_for(3_100)
    old = sim.leader
    assert old is not None
    sim.crash(old)
    sim.run_for(700)
    sim.elect("n2")
    sim.restart(old)
    sim.run_for(4_000)
    check(sim, finish(sim), executor_faults=False)


@pytest.mark.parametrize("seed", range(int(os.environ.get("RAFTSCHED_SIM_SEEDS", "4"))))
def test_random_faults_during_workflows(seed: int) -> None:
    rng = random.Random(seed)
    sim = cluster(seed)
    executor_faults = False
    for _ in range(4):
        sim.run_for(rng.randint(500, 2_500))
        if rng.random() < 0.6 and sim.leader is not None:
            old = sim.leader
            sim.crash(old)
            sim.run_for(rng.randint(200, 1_500))
            sim.elect(rng.choice([n for n in sim.nodes if n != old]))
            sim.restart(old)
        else:
            executor_faults = True
            victim = rng.choice(sorted(sim.executors))
            sim.crash_executor(victim)
            sim.run_for(rng.randint(500, 3_000))
            sim.restart_executor(victim)
    sim.run_for(2_000)
    check(sim, finish(sim), executor_faults)
