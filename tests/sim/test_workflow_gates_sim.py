"""Earliest-start gates of workflow tasks in the simulated cluster: ``not_before: "+30s"`` holds a
task until its run's logical time plus 30 s (and after its upstream), a workflow's jitter holds a
scheduled run's tasks until a stable offset after the logical time; neither starts early by the
leader's clock, across a leader change, and the replicas agree."""

from __future__ import annotations

from collections import Counter
from datetime import datetime, timedelta
from zoneinfo import ZoneInfo

from raftsched.fsm.workflow_model import task_name
from raftsched.testing import SimHarness
from raftsched.timing import jitter
from raftsched.v1 import raftsched_pb2 as pb

W = "recon"


def gated() -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name=W)
    spec.tasks.add(name="extract", command="extract")
    spec.tasks.add(
        name="reconcile", command="reconcile", not_before="+30s", depends_on=[pb.Dependency(task="extract")]
    )
    spec.tasks.add(name="report", command="report", depends_on=[pb.Dependency(task="reconcile")])
    return spec


def started_at(sim: SimHarness, task: str) -> list[int]:
    prefix = task_name(W, task) + "@"
    return [
        at for ex in sim.executors.values() for exec_id, at in ex.executions if exec_id.startswith(prefix)
    ]


def test_a_not_before_task_waits_for_its_time_and_its_upstream_across_a_failover() -> None:
    sim = SimHarness(["n1", "n2", "n3"], seed=5)
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=200)
    assert sim.write("apply_workflow", gated()).ok
    logical = sim.clock.now_ms()
    res = sim.write("start_workflow_run", W, logical, "")
    assert res.ok, res
    run_id = res.workflow_run.run_id
    sim.run_for(5_000)
    [extract] = started_at(sim, "extract")
    assert not started_at(sim, "reconcile"), "reconcile started before its not_before"
    wr = next(r for r in sim.workflow_runs(W) if r.run_id == run_id)
    rec = wr.tasks[1]
    assert rec.state == pb.TASK_RUNNING and rec.not_before_ms == logical + 30_000
    assert "not before" in rec.reason
    sim.crash("n1")
    sim.run_for(1_000)
    sim.elect("n2")
    sim.run_for(40_000)
    [reconcile] = started_at(sim, "reconcile")
    [report] = started_at(sim, "report")
    assert reconcile >= logical + 30_000, f"reconcile {logical + 30_000 - reconcile} ms early"
    assert extract < reconcile < report
    wr = next(r for r in sim.workflow_runs(W, "n2") if r.run_id == run_id)
    assert wr.state == pb.WORKFLOW_SUCCESS
    executed = Counter(e for ex in sim.executors.values() for e, _ in ex.executions)
    assert max(executed.values()) == 1
    assert len(set(sim.digests().values())) == 1
    sim.close()


def test_a_gate_already_past_holds_nothing() -> None:
    sim = SimHarness(["n1", "n2", "n3"], seed=6)
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=200)
    assert sim.write("apply_workflow", gated()).ok
    res = sim.write("start_workflow_run", W, sim.clock.now_ms() - 3_600_000, "")  # an hour ago
    assert res.ok
    sim.run_for(5_000)
    assert started_at(sim, "reconcile") and started_at(sim, "report")
    wr = sim.workflow_runs(W)[0]
    assert wr.tasks[1].not_before_ms == 0
    sim.close()


def test_a_workflows_jitter_spreads_its_scheduled_runs_and_never_starts_one_early() -> None:
    sim = SimHarness(["n1", "n2", "n3"], seed=7)
    sim.elect("n1")
    sim.add_executor("ex1", slots=16, duration_ms=100)
    names = [f"wf{i}" for i in range(12)]
    for name in names:
        spec = pb.WorkflowSpec(name=name, schedule=pb.CronTrigger(expr="* * * * * 0"), jitter_ms=20_000)
        spec.tasks.add(name="a", command="a")
        assert sim.write("apply_workflow", spec).ok
    sim.run_for(65_000)
    sim.crash("n1")
    sim.run_for(1_000)
    sim.elect("n3")
    sim.run_for(60_000)
    offsets = set()
    for name in names:
        runs = [r for r in sim.workflow_runs(name, "n3") if r.state == pb.WORKFLOW_SUCCESS]
        assert runs, name
        for wr in runs:
            start = jitter.start_ms(name, wr.logical_ms, 20_000)
            prefix = f"{task_name(name, 'a')}@{wr.logical_ms}"
            at = [t for ex in sim.executors.values() for e, t in ex.executions if e.startswith(prefix)]
            assert at and all(t >= start for t in at), (name, wr.logical_ms, start, at)
            offsets.add((start - wr.logical_ms) * 4 // 20_000)
    assert len(offsets) >= 3, "the runs' starts are not spread over the window"
    assert len(set(sim.digests().values())) == 1
    sim.close()


def test_a_wall_clock_not_before_is_local_time_in_the_workflows_zone_across_a_failover() -> None:
    sim = SimHarness(["n1", "n2", "n3"], seed=8)
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=200)
    now = sim.clock.now_ms()
    logical = now - now % 60_000  # a whole minute, local 23:13 in Berlin (22:13 UTC) on the sim's date
    spec = pb.WorkflowSpec(name=W, schedule=pb.CronTrigger(expr="0 0 1 1 *", timezone="Europe/Berlin"))
    spec.tasks.add(name="extract", command="extract")
    local = datetime.fromtimestamp(logical / 1000, ZoneInfo("Europe/Berlin"))
    wall = (local + timedelta(minutes=2)).strftime("%H:%M")  # two minutes later on the local clock
    spec.tasks.add(name="reconcile", command="r", not_before=wall, depends_on=[pb.Dependency(task="extract")])
    assert sim.write("apply_workflow", spec).ok
    assert sim.write("start_workflow_run", W, logical, "").ok
    gate = logical + 120_000  # (in UTC this wall time would be an hour off)
    sim.run_for(gate - sim.clock.now_ms() - 10_000)
    assert started_at(sim, "extract") and not started_at(sim, "reconcile")
    assert sim.workflow_runs(W)[0].tasks[1].not_before_ms == gate
    sim.crash("n1")
    sim.run_for(1_000)
    sim.elect("n2")
    sim.run_for(30_000)
    [reconcile] = started_at(sim, "reconcile")
    assert reconcile >= gate
    assert sim.workflow_runs(W, "n2")[0].state == pb.WORKFLOW_SUCCESS
    assert len(set(sim.digests().values())) == 1
    sim.close()


def test_a_held_task_takes_no_max_parallel_place_and_starts_at_its_time_across_a_failover() -> None:
    spec = pb.WorkflowSpec(name=W, max_parallel=1)
    spec.tasks.add(name="late", command="late", not_before="+30s")
    spec.tasks.add(name="now", command="now")
    sim = SimHarness(["n1", "n2", "n3"], seed=7)
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=200)
    assert sim.write("apply_workflow", spec).ok
    logical = sim.clock.now_ms()
    res = sim.write("start_workflow_run", W, logical, "")
    assert res.ok, res
    sim.run_for(5_000)
    assert started_at(sim, "now"), "the ungated task waited for the held one's place"
    assert not started_at(sim, "late")
    sim.crash("n1")
    sim.run_for(1_000)
    sim.elect("n2")
    sim.run_for(40_000)
    [late] = started_at(sim, "late")
    assert late >= logical + 30_000, f"late {logical + 30_000 - late} ms early"
    wr = next(r for r in sim.workflow_runs(W, "n2") if r.run_id == res.workflow_run.run_id)
    assert wr.state == pb.WORKFLOW_SUCCESS
    assert len(set(sim.digests().values())) == 1
    sim.close()
