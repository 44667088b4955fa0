"""Prefetching executors in a simulated cluster (the real agent over the in-memory transport, a
manual clock): at most ``slots`` commands run at once on each, every fire runs exactly once through
executor crashes and a leader crash, attempts that waited for a slot on a crashed executor are
placed again without consuming a retry, and the replicas agree."""

from __future__ import annotations

from collections import Counter

import pytest

from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.testing import SimExecutorProcess, SimHarness
from raftsched.v1 import raftsched_pb2 as pb

SLOTS, PREFETCH, DURATION_MS = 1, 3, 400


def _peak(proc: SimExecutorProcess) -> int:
    """Most commands running at once on ``proc`` (each runs DURATION_MS from its start)."""
    events = [(t, 1) for _, t in proc.executions] + [(t + DURATION_MS, -1) for _, t in proc.executions]
    level = peak = 0
    for _, step in sorted(events):  # an end at t frees the slot for a start at t
        level += step
        peak = max(peak, level)
    return peak


def _drain(sim: SimHarness, task: str) -> list[pb.Run]:
    sim.write("set_enabled", task, False)
    for _ in range(1200):
        sim.run_for(100)
        runs = sim.runs(task)
        if runs and all(r.state in (pb.SUCCEEDED, pb.FAILED) for r in runs):
            return runs
    raise AssertionError("runs never finished")


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_prefetching_executors_run_their_slots_and_every_fire_once_through_crashes(seed: int) -> None:
    sim = SimHarness(["n1", "n2", "n3"], seed=seed)
    sim.elect("n1")
    assert sim.leader == "n1"
    for name in ("ex1", "ex2"):
        sim.add_executor(name, slots=SLOTS, duration_ms=DURATION_MS, prefetch=PREFETCH)
    # 4 shards a second, two on each executor at once, 0.4 s each on its one slot: the slot
    # keeps up, and the second of each pair waits for it on the executor.
    sim.add_task(
        TaskSpec(
            "t", CronTrigger("* * * * * *"), command="work", shards=4, overlap=Overlap.ALLOW, max_retries=2
        )
    )
    waited = 0
    for _ in range(40):
        sim.run_for(100)
        leader = sim.nodes[sim.leader or "n1"]
        waited += sum(len(leader.dispatcher.unstarted_of(n)) for n in ("ex1", "ex2"))
    assert waited, "nothing waited for a slot"
    sim.crash_executor("ex1")
    sim.run_for(3_000)
    sim.restart_executor("ex1")
    sim.run_for(2_000)
    sim.crash("n1")  # the leader, with attempts waiting on both executors
    sim.elect("n2")
    sim.run_for(4_000)
    sim.crash_executor("ex2")
    sim.run_for(2_000)
    sim.restart_executor("ex2")
    runs = _drain(sim, "t")
    digests = set(sim.digests().values())
    sim.close()

    assert all(r.state == pb.SUCCEEDED for r in runs), [r.run_id for r in runs if r.state != pb.SUCCEEDED]
    executed = Counter(e for ex in sim.executors.values() for e, _ in ex.executions)
    assert not [e for e, n in executed.items() if n > 1], "an execution id ran twice"
    for proc in sim.executors.values():
        assert _peak(proc) <= SLOTS, (proc.name, _peak(proc))
    moved_free = [s for r in runs for s in r.shards if s.unstarted]
    assert moved_free, "no waiting attempt was placed again after a crash"
    assert all(s.lost <= s.retry_base for s in moved_free)
    nominals = sorted({r.nominal_ms for r in runs})
    assert nominals == list(range(nominals[0], nominals[-1] + 1, 1000)), "a fire has no run"
    assert len(digests) == 1
