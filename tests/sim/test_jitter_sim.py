"""Jitter in the simulated cluster: forty tasks due at one instant start spread over their window,
none before its nominal time plus its offset by the leader's clock, across a leader change."""

from __future__ import annotations

from collections import Counter

from raftsched.model import OnceTrigger, TaskSpec
from raftsched.testing import SimHarness
from raftsched.timing import jitter
from raftsched.v1 import raftsched_pb2 as pb

WINDOW_MS = 20_000


def test_a_burst_of_jittered_fires_starts_spread_and_never_early_across_a_failover() -> None:
    sim = SimHarness(["n1", "n2", "n3"], seed=3)
    sim.elect("n1")
    sim.add_executor("ex1", slots=64)
    due = sim.clock.now_ms() + 2_000
    names = [f"burst-{i}" for i in range(40)]
    for name in names:
        sim.add_task(TaskSpec(name, OnceTrigger(due), command="work", jitter_ms=WINDOW_MS))
    sim.run_for(8_000)
    sim.crash("n1")  # mid-window: the new leader holds the rest to the same offsets
    sim.run_for(1_000)
    sim.elect("n2")
    sim.run_for(WINDOW_MS + 15_000)
    started = {exec_id.split("@")[0]: at for exec_id, at in sim.executors["ex1"].executions}
    assert sorted(started) == sorted(names), "every fire ran once"
    executed = Counter(exec_id for exec_id, _ in sim.executors["ex1"].executions)
    assert max(executed.values()) == 1
    for name in names:
        runs = sim.runs(name, "n2")
        assert [r.nominal_ms for r in runs] == [due], "the fire keeps its nominal time"
        assert runs[0].state == pb.SUCCEEDED
        earliest = jitter.start_ms(name, due, WINDOW_MS)
        assert all(s.not_before_ms == earliest for s in runs[0].shards)
        assert started[name] >= earliest, f"{name} started {earliest - started[name]} ms early"
    spread = {(at - due) * 4 // WINDOW_MS for at in started.values()}
    assert len(spread) >= 3, f"starts not spread over the window: {sorted(started.values())}"
    assert len(set(sim.digests().values())) == 1
    sim.close()
