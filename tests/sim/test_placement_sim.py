"""Resource-aware placement through a whole simulated cluster on a manual clock: executors of
different sizes, tasks with needs and a selector, leader changes and an executor crash. Nothing
over-commits any executor at any time (checked from what the executors actually ran), an
unplaceable task is flagged until a fitting executor joins, and replicas agree."""

from __future__ import annotations

from collections import defaultdict

from raftsched.model import CronTrigger, ManualTrigger, Overlap, TaskSpec
from raftsched.testing import SimHarness
from raftsched.v1 import log_pb2 as pb

DURATION_MS = 700
CAPACITY = {"small": (1.0, 1024), "big": (4.0, 4096), "gpu": (2.0, 2048)}


def _cluster() -> SimHarness:
    sim = SimHarness(["n1", "n2", "n3"], seed=3)
    sim.elect("n1")
    sim.add_executor("small", 4, DURATION_MS, cpu=1.0, memory_mb=1024)
    sim.add_executor("big", 4, DURATION_MS, cpu=4.0, memory_mb=4096)
    sim.add_executor("gpu", 4, DURATION_MS, cpu=2.0, memory_mb=2048, labels={"gpu": "true"})
    every = CronTrigger("* * * * * *")
    sim.add_task(TaskSpec("cpu2", every, command="x", shards=2, overlap=Overlap.ALLOW, resource_cpu=2.0))
    sim.add_task(TaskSpec("mem", every, command="x", shards=3, overlap=Overlap.ALLOW, resource_memory_mb=900))
    sim.add_task(TaskSpec("train", every, command="x", overlap=Overlap.ALLOW, selector=(("gpu", "true"),)))
    sim.add_task(TaskSpec("plain", every, command="x", shards=2, overlap=Overlap.ALLOW))
    return sim


def _over_commits(sim: SimHarness) -> list[str]:
    """From the executions themselves: at every start, what each executor then ran concurrently."""
    needs = {"cpu2": (2.0, 0), "mem": (0.0, 900), "train": (0.0, 0), "plain": (0.0, 0), "huge": (8.0, 0)}
    bad = []
    for name, proc in sim.executors.items():
        spans = sorted(
            (start, start + DURATION_MS, exec_id.split("@")[0]) for exec_id, start in proc.executions
        )
        cap_cpu, cap_mem = CAPACITY.get(name, (0.0, 0))
        for start, _, _ in spans:
            live = [task for s, e, task in spans if s <= start < e]
            cpu = sum(needs[t][0] for t in live)
            mem = sum(needs[t][1] for t in live)
            if len(live) > proc.slots or (cap_cpu and cpu > cap_cpu) or (cap_mem and mem > cap_mem):
                bad.append(f"{name} at {start}: {live}")
    return bad


def test_nothing_over_commits_through_failovers_and_an_executor_crash() -> None:
    sim = _cluster()
    try:
        sim.run_for(5_000)
        sim.crash("n1")
        sim.run_for(1_000)
        sim.elect("n2")
        sim.run_for(4_000)
        sim.crash_executor("big")
        sim.run_for(4_000)
        sim.restart_executor("big")
        sim.run_for(4_000)
        assert not _over_commits(sim)
        placed: dict[str, set[str]] = defaultdict(set)
        for task in ("cpu2", "mem", "train"):
            for run in sim.runs(task):
                for shard in run.shards:
                    if shard.executor:
                        placed[task].add(shard.executor)
        assert placed["cpu2"] <= {"big", "gpu"} and placed["cpu2"]  # 2 cpus never fit small
        assert placed["train"] == {"gpu"}
        assert sum(1 for r in sim.runs("cpu2") if r.state == pb.SUCCEEDED) > 5
        assert len(set(sim.digests().values())) == 1
    finally:
        sim.close()


def test_an_unplaceable_task_waits_flagged_until_a_fitting_executor_joins() -> None:
    sim = _cluster()
    try:
        sim.add_task(TaskSpec("huge", ManualTrigger(), command="x", resource_cpu=8.0))
        sim.write("trigger_now", "huge", "")
        sim.run_for(3_000)
        leader = sim.nodes[sim.leader or "n1"].state
        rec = leader.get_task("huge")
        assert rec is not None and "cpu 8" in rec.unplaceable
        assert [r.state for r in sim.runs("huge")] == [pb.PENDING]
        sim.add_executor("xl", 2, DURATION_MS, cpu=16.0)
        sim.run_for(3_000)
        rec = leader.get_task("huge")
        assert rec is not None and rec.unplaceable == ""
        (run,) = sim.runs("huge")
        assert run.state == pb.SUCCEEDED and run.shards[0].executor == "xl"
        assert not _over_commits(sim)
    finally:
        sim.close()
