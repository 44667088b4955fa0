"""Review of the r13 merges, through a simulated cluster: pools (r13-pools) and backfills."""

from __future__ import annotations

from raftsched.model import CronTrigger, ManualTrigger, Overlap, TaskSpec
from raftsched.testing import SimHarness
from raftsched.v1 import raftsched_pb2 as pb

MIN = 60_000


def test_a_throttled_backfill_does_not_take_the_pool_turns_of_regular_work() -> None:
    """Regular work first, backfill only in the slots it leaves (the placement's rule). A pool's
    turns go by priority then age, and a backfill's attempts are the oldest: once the backfill
    share is full, its waiting attempts must not keep the pool's free slot from a regular run."""
    sim = SimHarness(["n1"])
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=5 * MIN)  # share 30 % of 4 slots: 1 backfill attempt
    sim.write("set_pool", pb.PoolRecord(name="wh", slots=2))
    sim.add_task(TaskSpec("old", CronTrigger("* * * * *"), command="x", overlap=Overlap.ALLOW, pool="wh"))
    sim.add_task(TaskSpec("reg", ManualTrigger(), command="y", pool="wh"))
    sim.run_for(2 * MIN)  # "old" fired: the scheduler has accounted those minutes
    sim.write("set_enabled", "old", False)  # no more regular runs of it: only the backfill's
    sim.run_for(6 * MIN)  # its regular runs ended: the pool is free
    assert all(r.state == pb.SUCCEEDED for r in sim.runs("old"))
    now = sim.now("n1")
    sim.write("start_task_backfill", "old", now - 60 * MIN, now - 30 * MIN, "")
    sim.run_for(10 * MIN)
    sim.write("trigger_now", "reg", "")
    sim.run_for(2_000)
    [run] = sim.runs("reg")
    holding = [r.run_id for r in sim.runs("old") if r.shards[0].state == pb.RUNNING]
    assert len(holding) == 1  # the backfill's share: one attempt; the pool has a free slot
    assert run.shards[0].state == pb.RUNNING or run.state == pb.SUCCEEDED, run.shards[0].waiting
    sim.close()
