"""Deterministic simulation of a whole cluster with executors: leases, fencing, retries and ring
assignment through leader changes and executor crashes, on a manual clock, from a seed. The
executors are the real agent over the in-memory transport; only their commands are simulated."""

from __future__ import annotations

import os
import random
from collections import Counter

import pytest

from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.testing import SimHarness
from raftsched.v1 import raftsched_pb2 as pb


def fleet(seed: int = 0) -> SimHarness:
    sim = SimHarness(["n1", "n2", "n3"], seed=seed)
    sim.elect("n1")
    sim.add_executor("ex1", slots=4)
    sim.add_executor("ex2", slots=4)
    sim.add_task(
        TaskSpec(
            "t", CronTrigger("* * * * * *"), command="work", shards=3, overlap=Overlap.ALLOW, max_retries=5
        )
    )
    return sim


def drain(sim: SimHarness) -> list[pb.Run]:
    """Stop firing and let every fired run finish; return all runs."""
    sim.write("set_enabled", "t", False)
    for _ in range(600):
        sim.run_for(100)
        runs = sim.runs("t")
        if all(r.state in (pb.SUCCEEDED, pb.FAILED) for r in runs):
            return runs
    raise AssertionError("runs never finished: " + str([r.run_id for r in sim.runs("t") if r.state < 3]))


def check(sim: SimHarness, runs: list[pb.Run]) -> None:
    executed = Counter(exec_id for ex in sim.executors.values() for exec_id, _ in ex.executions)
    twice = [e for e, n in executed.items() if n > 1]
    assert not twice, f"execution ids run twice: {twice}"
    assert runs, "nothing fired"
    for run in runs:
        assert run.state == pb.SUCCEEDED, run
        for shard in run.shards:
            assert f"{run.run_id}/{shard.shard}/{shard.attempt}" in executed
    for ex in sim.executors.values():
        for exec_id, started in ex.executions:
            nominal = int(exec_id.split("/")[0].split("@")[1])
            assert started >= nominal, f"{exec_id} started early"
    assert len(set(sim.digests().values())) == 1
    sim.close()


def test_leader_crash_with_attempts_in_flight_resends_without_running_anything_twice() -> None:
    sim = fleet()
    sim.run_for(5_000)
    sim.crash("n1")
    sim.run_for(1_000)
    sim.elect("n2")  # the executors find the new leader, which re-sends what they hold
    sim.run_for(8_000)
    check(sim, drain(sim))


def test_an_executor_crash_moves_its_shards_after_the_lease_and_they_succeed() -> None:
    sim = fleet()
    sim.run_for(3_000)
    sim.crash_executor("ex1")
    sim.run_for(8_000)
    runs = drain(sim)
    check(sim, runs)
    moved = [s for r in runs for s in r.shards if s.lost]
    assert moved and all(s.executor == "ex2" for s in moved)
    assert "ex1" not in sim.nodes[sim.leader or "n1"].state.live_executors()


def test_a_restarted_executor_rejoins_and_its_old_results_are_fenced() -> None:
    sim = fleet()
    sim.run_for(3_000)
    sim.crash_executor("ex2")
    sim.run_for(4_000)  # past the lease: ex2 declared dead, its attempts retried on ex1
    sim.restart_executor("ex2")
    sim.run_for(5_000)
    check(sim, drain(sim))
    assert "ex2" in sim.nodes[sim.leader or "n1"].state.live_executors()


# More seeds for a longer search: RAFTSCHED_SIM_SEEDS=500 python -m pytest tests/sim
@pytest.mark.parametrize("seed", range(int(os.environ.get("RAFTSCHED_SIM_SEEDS", "6"))))
def test_random_leader_and_executor_faults(seed: int) -> None:
    rng = random.Random(seed)
    sim = fleet(seed)
    for _ in range(6):
        sim.run_for(rng.randint(500, 3_000))
        fault = rng.choice(["leader", "executor", "both"])
        if fault in ("leader", "both") and sim.leader is not None:
            old = sim.leader
            sim.crash(old)
            sim.run_for(rng.randint(200, 1_500))
            sim.elect(rng.choice([n for n in sim.nodes if n != old]))
            sim.restart(old)
        if fault in ("executor", "both"):
            victim = rng.choice(sorted(sim.executors))
            sim.crash_executor(victim)
            sim.run_for(rng.randint(500, 4_000))
            sim.restart_executor(victim)
    sim.run_for(3_000)
    check(sim, drain(sim))


# The execution log's retention (docs/architecture.md): once a result is acknowledged no leader
# sends its execution id again, so forgetting it cannot make anything run twice - even with a
# keep far shorter than a lease, through leader changes and executor crashes.
@pytest.mark.parametrize("seed", range(int(os.environ.get("RAFTSCHED_SIM_SEEDS", "6"))))
def test_a_short_execution_log_keep_runs_nothing_twice_through_faults(seed: int) -> None:
    rng = random.Random(seed)
    sim = SimHarness(["n1", "n2", "n3"], seed=seed)
    sim.elect("n1")
    for name in ("ex1", "ex2"):
        sim.add_executor(name, slots=4, execution_log_keep=1)  # 1 s: half a lease
    sim.add_task(
        TaskSpec(
            "t", CronTrigger("* * * * * *"), command="work", shards=3, overlap=Overlap.ALLOW, max_retries=5
        )
    )
    for _ in range(8):
        sim.run_for(rng.randint(500, 3_000))
        fault = rng.choice(["leader", "executor", "both", "none"])
        if fault in ("leader", "both") and sim.leader is not None:
            old = sim.leader
            sim.crash(old)
            sim.run_for(rng.randint(200, 1_500))
            sim.elect(rng.choice([n for n in sim.nodes if n != old]))
            sim.restart(old)
        if fault in ("executor", "both"):
            victim = rng.choice(sorted(sim.executors))
            sim.crash_executor(victim)
            sim.run_for(rng.randint(500, 4_000))
            sim.restart_executor(victim)
    sim.run_for(3_000)
    # Enough executions for the prune check below to mean something: a seed whose faults left
    # the executors down most of the time runs on (seed 481 of 500 had run 48).
    for _ in range(30):
        if sum(len(ex.executions) for ex in sim.executors.values()) > 50:
            break
        sim.run_for(1_000)
    runs = drain(sim)
    sim.run_for(3_000)  # past the keep and a prune round
    executed = sum(len(ex.executions) for ex in sim.executors.values())
    held = sum(len(ex.log) for ex in sim.executors.values())
    assert executed > 50 and held < executed / 4, (held, executed)  # pruned for real
    check(sim, runs)


def _connected_to(sim: SimHarness, node: str) -> set[str]:
    return {name for (n, name), stream in sim.endpoint.streams.items() if n == node and stream.open}


def test_executors_leave_a_paused_leader_as_soon_as_another_leads() -> None:
    """A paused (SIGSTOPped) leader answers nothing and closes nothing. While a heartbeat to it
    stays unanswered the executors ask the other nodes who leads, so they reach the new leader
    within a step or two of its election, not after the heartbeat's timeout (lease / 3) plus a
    register timeout spent on the paused node (issue 35 §1: the run the old leader committed
    and never delivered waited for exactly that)."""
    sim = fleet()
    try:
        sim.run_for(2_000, step_ms=50)
        sim.pause("n1")
        sim.run_for(200, step_ms=50)  # a heartbeat is in flight to n1 and unanswered
        sim.elect("n2")
        elected = sim.clock.now_ms()
        while _connected_to(sim, "n2") != {"ex1", "ex2"}:
            assert sim.clock.now_ms() - elected < 3_000, "executors never found the new leader"
            sim.run_for(50, step_ms=50)
        assert sim.clock.now_ms() - elected <= 300, sim.clock.now_ms() - elected
    finally:
        sim.close()
