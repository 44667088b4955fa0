"""Followers do not build the effects only a leader consumes (``apply(leader_effects=...)``,
decided by the replica from the log: on from the node's own barrier).

Effects are not replicated state: applying the same log with them on and off must give the
same results, the same apply chain and the same digest; a follower's apply yields no effect but
a barrier; and a node that led nothing while the log grew (so it saw no effect of the runs,
attempts and armed tasks it applied) must, once elected, fire, place and dispatch from the state
alone.
"""

from __future__ import annotations

from raftsched.fsm.effects import BarrierCommitted
from raftsched.fsm.state import SchedulerState
from raftsched.model import CronTrigger, Misfire, Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.testing import SimHarness
from raftsched.v1 import log_pb2 as pb


def _busy_log() -> tuple[SimHarness, list[bytes]]:
    """A cluster that ran fires, assignments, results, retries and a leader change."""
    sim = SimHarness(["n1", "n2", "n3"], seed=3)
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=200)
    sim.add_executor("ex2", slots=4, duration_ms=200)
    sim.add_task(TaskSpec("every", CronTrigger("* * * * * *"), command="echo", shards=2))
    sim.add_task(TaskSpec("slow", CronTrigger("*/3 * * * * *"), command="sleep", misfire=Misfire.ALL))
    sim.run_for(4_000)
    sim.crash_executor("ex2")  # its attempts are lost and placed again
    sim.run_for(3_000)
    sim.crash("n1")
    sim.elect("n2")
    sim.run_for(4_000)
    return sim, [data for _, data in sim.cluster.log]


def test_the_same_log_applies_to_the_same_state_with_and_without_leader_effects() -> None:
    sim, log = _busy_log()
    sim.close()
    leader, follower = SchedulerState.load(MemoryStore()), SchedulerState.load(MemoryStore())
    built = 0
    for data in log:
        a, b = leader.apply(data), follower.apply(data, leader_effects=False)
        assert a.encode() == b.encode()  # the proposer's result (and the chain's input)
        assert all(isinstance(e, BarrierCommitted) for e in b.effects), b.effects
        built += len(a.effects)
        assert leader.chain == follower.chain
    assert built > 30, "the log should have produced leader effects"
    assert leader.digest() == follower.digest()


def test_a_node_that_only_followed_fires_places_and_dispatches_once_elected() -> None:
    sim = SimHarness(["n1", "n2", "n3"], seed=5)
    try:
        sim.elect("n1")
        sim.add_executor("ex1", slots=1, duration_ms=1_500)  # one slot: attempts queue up
        sim.add_task(TaskSpec("t", CronTrigger("* * * * * *"), command="echo", overlap=Overlap.ALLOW))
        sim.run_for(3_000)
        assert not sim.nodes["n3"].replica.leads  # it never led
        assert sim.nodes["n1"].replica.leads
        sim.crash("n1")
        sim.elect("n3")
        assert sim.nodes["n3"].replica.leads
        assert not sim.nodes["n2"].replica.leads
        before = {e for e, _ in sim.executors["ex1"].executions}
        sim.run_for(6_000)
        after = {e for e, _ in sim.executors["ex1"].executions}
        new_fires = [f for f in sim.fires("t") if f.epoch == max(f.epoch for f in sim.fires("t"))]
        assert new_fires and all(f.outcome == pb.FIRED for f in new_fires)
        assert len(after - before) >= 3, "the new leader dispatched the waiting attempts and new ones"
        assert len(set(sim.digests().values())) == 1
    finally:
        sim.close()
