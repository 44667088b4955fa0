"""The columnar hot path through leader changes and executor crashes, in the deterministic
simulation (SimHarness(columns=True): every node is of this build, so leaders build the columns):
nothing runs twice or early, every fired run succeeds, the replicas agree, and the log carried
the columnar bodies."""

from __future__ import annotations

import os
import random

import pytest

from raftsched.fsm import keys
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.testing import SimHarness
from tests.sim.test_executor_sim import check, drain


def hot_fleet(seed: int) -> SimHarness:
    sim = SimHarness(["n1", "n2", "n3"], seed=seed, columns=True)
    sim.elect("n1")
    sim.add_executor("ex1", slots=4)
    sim.add_executor("ex2", slots=4)
    # Hot: one shard, overlap allowed, nothing held besides a slot (retries are allowed: a failure
    # or a lost attempt promotes the run to the cold path, which retries it).
    sim.add_task(
        TaskSpec("t", CronTrigger("* * * * * *"), command="work", overlap=Overlap.ALLOW, max_retries=5)
    )
    return sim


def hot_records(sim: SimHarness) -> list[int]:
    """The first node's records of FireColumns, AssignColumns and ResultColumns entries (until a
    checkpoint folds them)."""
    state = next(iter(sim.nodes.values())).state
    with state.store.reader() as r:
        return [
            sum(1 for _ in r.scan(prefix, prefix + keys.END))
            for prefix in (keys.HOT_FIRES, keys.HOT_ASSIGNS, keys.HOT_RESULTS)
        ]


@pytest.mark.parametrize("seed", range(int(os.environ.get("RAFTSCHED_SIM_SEEDS", "6"))))
def test_hot_runs_through_leader_and_executor_faults(seed: int) -> None:
    rng = random.Random(seed)
    sim = hot_fleet(seed)
    sim.run_for(3_000)
    assert all(hot_records(sim)), f"the leader built no columns of a kind: {hot_records(sim)}"
    for _ in range(5):
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
