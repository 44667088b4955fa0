"""Fleet health and clock skew on a manual clock (issue 36 §3, §4): an executor whose disk fills
while attempts run drains itself (nothing is lost, an alert names it) and takes work again once
below its resume line; work due with no executor to take it, an attempt waiting too long, an
executor that stops heartbeating and a skewed node or executor are each alerted, naming it."""

from __future__ import annotations

from raftsched.alerts.config import HealthSettings
from raftsched.fsm import alerts as outbox
from raftsched.model import (
    CLOCK_SKEW,
    EXECUTOR_UNHEALTHY,
    HEARTBEAT_MISSING,
    NO_EXECUTOR,
    WAITING_TOO_LONG,
    CronTrigger,
    IntervalTrigger,
    Overlap,
    TaskSpec,
)
from raftsched.testing import SimHarness
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb

HEALTH = HealthSettings(max_waiting_ms=30_000, heartbeat_missing_ms=1_500, max_skew_ms=500)


def alerts(sim: SimHarness, kind: str, node: str | None = None) -> list[logpb.AlertRecord]:
    with sim.nodes[node or sim.leader or "n1"].store.reader() as r:
        return [a for a in outbox.list_alerts(r, 0, 0) if a.kind == kind]


def fleet(duration_ms: int = 2_500) -> SimHarness:
    sim = SimHarness(["n1", "n2", "n3"], seed=11, health=HEALTH)
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=duration_ms)
    sim.add_executor("ex2", slots=4, duration_ms=duration_ms)
    sim.add_task(
        TaskSpec(
            "t", CronTrigger("* * * * * *"), command="work", shards=4, overlap=Overlap.ALLOW, max_retries=0
        )
    )
    return sim


def running_on(sim: SimHarness, name: str) -> int:
    return sum(1 for r in sim.runs("t") for s in r.shards if s.state == pb.RUNNING and s.executor == name)


def test_an_executor_whose_disk_fills_drains_itself_loses_nothing_and_resumes_below_the_line() -> None:
    sim = fleet()
    sim.run_for(3_000)
    assert running_on(sim, "ex1") > 0, "ex1 runs attempts when its disk fills"
    ex1 = sim.executors["ex1"]
    ex1.disk_used = 0.95
    filled_at = sim.now("n1")
    sim.run_for(3_000)  # a heartbeat interval or two: it notices and drains itself
    for node in sim.nodes.values():
        rec = node.state.executors["ex1"]
        assert rec.alive and rec.draining and rec.health_drain, rec
        assert "disk 95% used" in rec.draining_reason and "90%" in rec.draining_reason
    drained = sim.nodes["n1"].state.executors["ex1"].draining_ms
    assert filled_at <= drained <= filled_at + 3_000
    unhealthy = alerts(sim, EXECUTOR_UNHEALTHY)
    assert len(unhealthy) == 1 and unhealthy[0].executor == "ex1", unhealthy
    assert "ex1" in unhealthy[0].error and "disk 95%" in unhealthy[0].error
    starts = len(ex1.executions)
    sim.run_for(5_000)
    # Nothing new started on it after its drain committed; what it ran finished there and was
    # reported: no attempt lost, every one of its runs succeeded.
    assert len(ex1.executions) == starts
    assert all(at <= drained for _, at in ex1.executions)
    assert running_on(sim, "ex1") == 0
    on_ex1 = [s for r in sim.runs("t") for s in r.shards if s.executor == "ex1"]
    assert on_ex1 and all(s.state == pb.SUCCEEDED and not s.lost for s in on_ex1)
    assert not [s for r in sim.runs("t") for s in r.shards if s.lost]
    # The leader's view for `raftsched executors`: the fractions it reported.
    assert sim.nodes["n1"].dispatcher.executor_health["ex1"].disk_used == 0.95
    # Between the lines (hysteresis): still drained.
    ex1.disk_used = 0.85
    sim.run_for(3_000)
    assert sim.nodes["n1"].state.executors["ex1"].draining
    assert len(ex1.executions) == starts
    # Below the resume line: it undoes its own drain and takes work again.
    ex1.disk_used = 0.5
    sim.run_for(4_000)
    rec = sim.nodes["n1"].state.executors["ex1"]
    assert not rec.draining and not rec.health_drain
    assert len(ex1.executions) > starts, "new work is placed on it again"
    assert len(alerts(sim, EXECUTOR_UNHEALTHY)) == 1
    assert len(set(sim.digests().values())) == 1
    sim.close()


def test_an_operator_drain_over_a_health_drain_is_not_undone_by_the_executor() -> None:
    sim = fleet(duration_ms=300)
    sim.run_for(1_000)
    sim.executors["ex1"].log_used = 0.97  # its execution-log map fills
    sim.run_for(3_000)
    rec = sim.nodes["n1"].state.executors["ex1"]
    assert rec.draining and rec.health_drain and "execution log map 97% used" in rec.draining_reason
    sim.write("drain_executor", "ex1", "maintenance")
    sim.executors["ex1"].log_used = 0.1
    sim.run_for(4_000)
    rec = sim.nodes["n1"].state.executors["ex1"]
    assert rec.draining and not rec.health_drain and rec.draining_reason == "maintenance"
    sim.close()


def test_work_due_with_no_executor_and_waiting_too_long_are_alerted_naming_the_task() -> None:
    sim = SimHarness(["n1", "n2", "n3"], seed=3, health=HEALTH)
    sim.elect("n1")
    sim.add_task(TaskSpec("lonely", IntervalTrigger(10_000), command="work", owner="ops"))
    sim.run_for(12_000)
    none = alerts(sim, NO_EXECUTOR)
    assert none and all(a.task == "lonely" and a.owner == "ops" for a in none), none
    assert "no live executor" in none[0].error
    assert not alerts(sim, WAITING_TOO_LONG)  # not for max_waiting yet
    sim.run_for(30_000)
    waiting = alerts(sim, WAITING_TOO_LONG)
    assert waiting and waiting[0].task == "lonely" and "waited" in waiting[0].error
    # An executor arrives: the backlog drains, nothing more is raised for it.
    sim.add_executor("ex1", slots=8, duration_ms=100)
    sim.run_for(2_000)
    counts = (len(alerts(sim, NO_EXECUTOR)), len(alerts(sim, WAITING_TOO_LONG)))
    sim.run_for(5_000)
    assert (len(alerts(sim, NO_EXECUTOR)), len(alerts(sim, WAITING_TOO_LONG))) == counts
    sim.close()


def test_an_executor_that_stops_heartbeating_is_alerted_naming_it() -> None:
    sim = fleet(duration_ms=300)
    sim.run_for(2_000)
    sim.crash_executor("ex2")
    sim.run_for(2_000)  # its stream closed: declared dead within the stream grace (0.6 s)
    missing = alerts(sim, HEARTBEAT_MISSING)
    assert [a.executor for a in missing] == ["ex2"], missing
    assert "ex2 was declared dead (dispatch stream closed" in missing[0].error
    sim.close()


def test_a_skewed_node_and_a_skewed_executor_are_alerted_and_measured() -> None:
    sim = fleet(duration_ms=300)
    sim.run_for(2_000)
    assert not alerts(sim, CLOCK_SKEW)
    sim.skew("n3", 2_000)  # n3's clock runs 2 s ahead (below max_clock_skew: it still follows)
    sim.run_for(2_000)
    skewed = alerts(sim, CLOCK_SKEW)
    assert [a.node for a in skewed] == ["n3"], skewed
    assert "+2.000 s" in skewed[0].error
    # Measured: the leader's view of n3's clock; n3's own (told by the leader) offset.
    assert sim.nodes["n1"].watch is not None and sim.nodes["n1"].watch.view(True).peers["n3"] == 2_000
    n3 = sim.nodes["n3"].watch
    assert n3 is not None and n3.view(leading=False).offset_ms == 2_000
    sim.run_for(3_000)
    assert len(alerts(sim, CLOCK_SKEW)) == 1, "one event per episode"
    # An executor's clock: it reports its offset on every heartbeat.
    agent = sim.executors["ex1"].agent
    assert agent is not None
    assert sim.nodes["n1"].dispatcher.executor_health["ex1"].clock_offset_ms == 0
    sim.close()
