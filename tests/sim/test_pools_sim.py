"""Pools (issue 29 §4) through a whole simulated cluster: the real Executor agent over the
in-memory transport, on a manual clock (commands take the executor's ``duration_ms``).

A pool of N slots is shared by tasks of any owner: at most N attempts hold it at once, the waiting
ones start by priority then age across every executor, each waits with the reason
``pool NAME: N slots``, and the holders survive a leader change (they are on the shards)."""

from __future__ import annotations

import pytest

from raftsched.errors import RaftschedError
from raftsched.model import IntervalTrigger, ManualTrigger, Overlap, TaskSpec
from raftsched.testing import SimHarness
from raftsched.v1 import raftsched_pb2 as pb

T0 = 1_700_000_000_000


def _starts(sim: SimHarness) -> list[tuple[int, str]]:
    return sorted((t, e) for ex in sim.executors.values() for e, t in ex.executions)


def _task_of(exec_id: str) -> str:
    return exec_id.split("@")[0]


def _max_overlap(intervals: list[tuple[int, int]]) -> int:
    events = sorted([(s, 1) for s, _ in intervals] + [(e, -1) for _, e in intervals])
    best = cur = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def _pending_reasons(sim: SimHarness, tasks: list[str]) -> list[str]:
    return [s.waiting for t in tasks for r in sim.runs(t) for s in r.shards if s.state == pb.PENDING]


def test_waiting_attempts_take_a_freed_slot_by_priority_then_age_across_executors() -> None:
    sim = SimHarness(["n1"])
    sim.elect("n1")
    # Two executors with room to spare: only the pool orders the starts. Each task's attempts
    # wait in the queue of the executor the ring picks for it, so the order spans both queues.
    sim.add_executor("ex1", slots=4, duration_ms=1000)
    sim.add_executor("ex2", slots=4, duration_ms=1000)
    sim.write("set_pool", pb.PoolRecord(name="warehouse", slots=1))
    names = (("blocker", 5), ("low-a", 1), ("low-b", 1), ("mid", 5), ("mid-b", 5), ("urgent", 9))
    for name, prio in names:
        sim.add_task(TaskSpec(name, ManualTrigger(), command="x", priority=prio, pool="warehouse"))
    sim.write("trigger_now", "blocker", "")
    sim.run_for(200)  # the only pool slot is taken from here on
    for name, _ in names[1:]:
        sim.write("trigger_now", name, "")
        sim.run_for(100)  # a later nominal time for each
    waiting = _pending_reasons(sim, [n for n, _ in names])
    assert waiting == ["pool warehouse: 1 slot"] * 5, waiting
    sim.run_for(8_000)
    order = [_task_of(e) for _, e in _starts(sim)]
    assert order == ["blocker", "urgent", "mid", "mid-b", "low-a", "low-b"]
    owners = {sim.runs(n)[0].shards[0].executor for n, _ in names}
    assert owners == {"ex1", "ex2"}, "the order is checked across both executors' queues"
    sim.close()


def _contending(sim: SimHarness, n: int = 20) -> None:
    sim.write("set_pool", pb.PoolRecord(name="warehouse", slots=2))
    for i in range(n):
        sim.add_task(
            TaskSpec(
                f"p{i:02}",
                IntervalTrigger(1000, start_ms=T0 + 1000),
                command="x",
                overlap=Overlap.ALLOW,
                owner=f"owner{i % 3}",  # any owner: the pool is shared
                priority=i % 10,
                pool="warehouse",
            )
        )


def test_a_pool_of_two_under_twenty_contending_tasks_never_runs_more_than_two() -> None:
    sim = SimHarness(["n1"])
    sim.elect("n1")
    for name in ("ex1", "ex2", "ex3"):
        sim.add_executor(name, slots=6, duration_ms=400)
    _contending(sim)
    sim.run_for(6_000)
    spans = [(t, t + 400) for t, _ in _starts(sim)]
    assert len(spans) >= 20, "the pool is kept busy"
    assert _max_overlap(spans) == 2
    view = sim.nodes["n1"].state.pools()
    assert [(v.pool.name, v.pool.slots) for v in view] == [("warehouse", 2)]
    assert len(view[0].holders) <= 2 and view[0].waiting > 0
    sim.close()


def test_the_pool_holds_across_a_leader_crash() -> None:
    sim = SimHarness(["n1", "n2", "n3"])
    sim.elect("n1")
    for name in ("ex1", "ex2"):
        sim.add_executor(name, slots=6, duration_ms=700)
    _contending(sim)
    sim.run_for(3_000)
    held_before = {h for v in sim.nodes["n2"].state.pools() for h in v.holders}
    assert len(held_before) == 2, "a follower sees the holders (replicated)"
    sim.crash("n1")
    sim.elect("n2")
    sim.run_for(6_000)
    spans = [(t, t + 700) for t, _ in _starts(sim)]
    assert _max_overlap(spans) == 2
    assert len([t for t, _ in _starts(sim) if t > T0 + 4_000]) >= 4, "the new leader keeps it busy"
    live = [n for n in ("n2", "n3")]
    assert len({sim.digests()[n] for n in live}) == 1
    sim.close()


def test_an_unset_pool_says_so_and_a_used_pool_cannot_be_deleted() -> None:
    sim = SimHarness(["n1"])
    sim.elect("n1")
    sim.add_executor("ex", slots=4, duration_ms=300)
    sim.add_task(TaskSpec("t", ManualTrigger(), command="x", pool="gpu"))
    sim.write("trigger_now", "t", "")
    sim.run_for(500)
    assert _pending_reasons(sim, ["t"]) == ["pool gpu: not set (raftsched pool set gpu --slots N)"]
    sim.write("set_pool", pb.PoolRecord(name="gpu", slots=1))
    sim.run_for(1_000)
    assert sim.runs("t")[0].state == pb.SUCCEEDED
    with pytest.raises(RaftschedError, match=r"pool 'gpu' is used by task t; give them another pool"):
        sim.write("delete_pool", "gpu")
    with pytest.raises(RaftschedError, match="pool 'nope' does not exist"):
        sim.write("delete_pool", "nope")
    sim.write("update_task", TaskSpec("t", ManualTrigger(), command="x"), expected_version=1)
    assert sim.write("delete_pool", "gpu").pool.name == "gpu"
    assert sim.nodes["n1"].state.pools() == []
    sim.close()
