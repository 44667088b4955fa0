"""Draining executors in the deterministic simulation: a drained executor gets no new attempts,
the ones it runs finish there, and an agent asked to drain (SIGTERM in ``raftsched-executor``)
leaves once its work is done; across a leader change the drain holds."""

from __future__ import annotations

from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.testing import SimHarness
from raftsched.v1 import raftsched_pb2 as pb


def fleet(duration_ms: int = 300) -> SimHarness:
    sim = SimHarness(["n1", "n2", "n3"], seed=7)
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=duration_ms)
    sim.add_executor("ex2", slots=4, duration_ms=duration_ms)
    sim.add_task(
        TaskSpec(
            "t", CronTrigger("* * * * * *"), command="work", shards=4, overlap=Overlap.ALLOW, max_retries=3
        )
    )
    return sim


def started_on(sim: SimHarness, name: str) -> list[tuple[str, int]]:
    return list(sim.executors[name].executions)


def running_on(sim: SimHarness, name: str) -> int:
    leader = sim.leader or "n1"
    return sum(
        1 for r in sim.runs("t", leader) for s in r.shards if s.state == pb.RUNNING and s.executor == name
    )


def test_a_drained_executor_gets_no_new_attempts_and_its_running_ones_finish_there() -> None:
    sim = fleet(duration_ms=2_500)  # attempts outlive a fire interval: some run when it drains
    sim.run_for(3_000)
    assert started_on(sim, "ex1") and started_on(sim, "ex2"), "the ring uses both"
    held = running_on(sim, "ex1")
    assert held > 0, "ex1 runs attempts when it is drained"
    drained_at = sim.now("n1")
    sim.write("drain_executor", "ex1", "maintenance")
    before = len(started_on(sim, "ex1"))
    sim.run_for(6_000)
    # Nothing new started on ex1 after the drain committed (what it held was already dispatched).
    assert len(started_on(sim, "ex1")) == before
    assert all(at <= drained_at for _, at in started_on(sim, "ex1"))
    assert running_on(sim, "ex1") == 0, "its running attempts finished"
    runs = sim.runs("t")
    later = [r for r in runs if r.nominal_ms > drained_at]
    assert later and all(s.executor == "ex2" for r in later for s in r.shards if s.executor)
    ex1_runs = [s for r in runs for s in r.shards if s.executor == "ex1"]
    assert ex1_runs and all(s.state == pb.SUCCEEDED and not s.lost for s in ex1_runs)
    # Still a member (it heartbeats), but draining: the record says so on every replica.
    for node in sim.nodes.values():
        rec = node.state.executors["ex1"]
        assert rec.alive and rec.draining and rec.draining_reason == "maintenance"
        assert "ex1" not in node.state.placeable_executors()
    assert len(set(sim.digests().values())) == 1
    sim.close()


def test_the_drain_survives_a_leader_change_and_a_re_registration() -> None:
    sim = fleet()
    sim.run_for(2_000)
    sim.write("drain_executor", "ex1", "")
    sim.crash("n1")
    sim.run_for(500)
    sim.elect("n2")  # ex1 registers again with the new leader: the drain is kept
    before = len(started_on(sim, "ex1"))
    sim.run_for(6_000)
    assert len(started_on(sim, "ex1")) == before
    assert sim.nodes["n2"].state.executors["ex1"].draining
    assert all(
        s.executor == "ex2"
        for r in sim.runs("t", "n2")
        if r.nominal_ms > sim.now("n2") - 4_000
        for s in r.shards
    )
    sim.close()


def test_an_agent_asked_to_drain_finishes_its_work_then_leaves() -> None:
    sim = fleet(duration_ms=2_500)
    sim.run_for(3_000)
    proc = sim.executors["ex1"]
    assert proc.agent is not None and proc.loop is not None and proc.task is not None
    assert running_on(sim, "ex1") > 0
    agent = proc.agent
    agent.request_drain()  # what SIGTERM does in raftsched-executor
    before = len(started_on(sim, "ex1"))
    for _ in range(100):
        sim.run_for(100)
        if proc.task.done():
            break
    assert proc.task.done() and proc.task.exception() is None, "run() returned after the drain"
    assert agent.draining and agent.left
    assert len(started_on(sim, "ex1")) == before, "nothing new started while it drained"
    rec = sim.nodes["n1"].state.executors["ex1"]
    assert not rec.alive and rec.left_reason == "left"
    ex1 = [s for r in sim.runs("t") for s in r.shards if s.executor == "ex1"]
    assert ex1 and all(s.state == pb.SUCCEEDED and not s.lost for s in ex1), "none was lost"
    sim.run_for(3_000)
    assert sim.runs("t")[-1].state in (pb.RUNNING, pb.SUCCEEDED, pb.PENDING)
    assert all(s.executor in ("", "ex2") for s in sim.runs("t")[-1].shards)
    assert len(set(sim.digests().values())) == 1
    sim.close()


def test_after_the_grace_what_still_runs_is_lost_and_retried_elsewhere() -> None:
    sim = fleet(duration_ms=20_000)  # far longer than the grace
    sim.run_for(2_500)
    proc = sim.executors["ex1"]
    assert proc.agent is not None and proc.task is not None
    held = running_on(sim, "ex1")
    assert held > 0
    proc.agent.drain_grace_s = 1.0
    proc.agent.request_drain()
    for _ in range(60):
        sim.run_for(100)
        if proc.task.done():
            break
    assert proc.task.done() and proc.agent.left
    lost = [s for r in sim.runs("t") for s in r.shards if s.lost]
    assert lost, "the killed attempts were declared lost when it left"
    sim.run_for(2_000)
    assert "ex1" not in sim.nodes["n1"].state.live_executors()
    sim.close()
