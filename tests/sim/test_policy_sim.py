"""Priority, quotas and resource locks through a whole simulated cluster: the real Executor agent
over the in-memory transport, on a manual clock (commands take the executor's ``duration_ms``)."""

from __future__ import annotations

from collections import Counter

from raftsched.leader import writes
from raftsched.leader.gate import leader_time
from raftsched.model import IntervalTrigger, Lock, LockMode, ManualTrigger, OnceTrigger, Overlap, TaskSpec
from raftsched.testing import SimHarness
from raftsched.v1 import raftsched_pb2 as pb

T0 = 1_700_000_000_000


def _starts(sim: SimHarness) -> list[tuple[int, str]]:
    """``(start ms, execution id)`` of every command any executor started, in time order."""
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


def _bulk_add(sim: SimHarness, specs: list[TaskSpec]) -> None:
    leader = sim.leader
    assert leader is not None
    node = sim.nodes[leader]
    now_ms = leader_time(sim.now(leader), node.state.max_now_ms)
    commands, refused = writes.create_tasks(
        [(s, False) for s in specs],
        now_ms=now_ms,
        epoch=node.driver.epoch,
        origin=leader,
        key=f"bulk-{specs[0].name}",
    )
    assert not refused
    for data in commands:
        sim.cluster.nodes[leader].propose(data, lambda r, e: None)
    sim.settle()


def test_higher_priority_starts_first_then_older_nominal_time() -> None:
    sim = SimHarness(["n1"])
    sim.elect("n1")
    sim.add_executor("ex", slots=1, duration_ms=1000)
    for name, prio in (("blocker", 5), ("low-a", 1), ("low-b", 1), ("mid", 5), ("urgent", 9)):
        sim.add_task(TaskSpec(name, ManualTrigger(), command="x", priority=prio))
    sim.write("trigger_now", "blocker", "")
    sim.run_for(200)  # the only slot is busy from here on
    for name in ("low-a", "low-b", "mid", "urgent"):
        sim.write("trigger_now", name, "")
        sim.run_for(100)  # a later nominal time for each
    sim.run_for(6_000)
    order = [_task_of(e) for _, e in _starts(sim)]
    assert order == ["blocker", "urgent", "mid", "low-a", "low-b"]
    sim.close()


def test_a_flood_of_urgent_work_from_one_owner_leaves_the_other_owner_within_its_quota() -> None:
    """Owner A: 1,000 priority-9 tasks due at once. Owner B: ten priority-5 tasks every second.
    With quotas A cannot take the fleet; B's fires start within a bounded lateness, and all of A's
    work still runs (it waits, it is never dropped)."""
    sim = SimHarness(["n1", "n2", "n3"])
    sim.elect("n1")
    # More slots per executor than A's max_running: the quota then keeps A from filling any one
    # executor. With 16 (as before) A's 20 filled one executor's slots, and B's tasks owned by it
    # never started in the window: the count below held only because the ring happened to give
    # that executor 3 of B's 10 tasks (77 starts >= 70); the walk placement gives it 6 (44).
    for name in ("ex1", "ex2"):
        sim.add_executor(name, slots=24, duration_ms=300)
    sim.write(
        "set_quota", pb.QuotaRecord(kind="owner", name="A", rate_milli=50_000, burst=100, max_running=20)
    )
    sim.write(
        "set_quota", pb.QuotaRecord(kind="owner", name="B", rate_milli=20_000, burst=20, max_running=12)
    )
    due = T0 + 2_000
    _bulk_add(
        sim, [TaskSpec(f"a{i:04}", OnceTrigger(due), command="x", priority=9, owner="A") for i in range(1000)]
    )
    _bulk_add(
        sim,
        [
            TaskSpec(
                f"b{i}", IntervalTrigger(1000, start_ms=due), command="x", owner="B", overlap=Overlap.ALLOW
            )
            for i in range(10)
        ],
    )
    sim.run_for(12_000)
    starts = _starts(sim)
    b_late = [t - int(e.split("@")[1].split("/")[0]) for t, e in starts if e.startswith("b")]
    assert len(b_late) >= 100  # ten tasks, every second, from 2 s to 12 s
    assert {e.split("@")[0] for _, e in starts if e.startswith("b")} == {f"b{i}" for i in range(10)}
    assert max(b_late) <= 500, f"owner B waited up to {max(b_late)} ms behind owner A's flood"
    a_starts = [t for t, e in starts if e.startswith("a")]
    # A's bucket: 100 at once, then 50 per second; never more than 20 of A's attempts at once.
    for t in a_starts:
        assert sum(1 for u in a_starts if t - 1000 < u <= t) <= 100 + 50
    assert _max_overlap([(t, t + 300) for t in a_starts]) <= 20
    sim.run_for(20_000)
    a_done = {e.split("@")[0] for _, e in _starts(sim) if e.startswith("a")}
    assert len(a_done) == 1000, "work over quota waits; none of it is dropped"
    leader = sim.nodes[sim.leader or "n1"].state
    quota = {(q.kind, q.name): q for q in leader.quotas()}
    assert quota[("owner", "A")].running == 0 and quota[("owner", "A")].waited > 0
    assert len(set(sim.digests().values())) == 1
    sim.close()


def test_work_over_quota_says_why_it_waits() -> None:
    sim = SimHarness(["n1"])
    sim.elect("n1")
    sim.add_executor("ex", slots=8, duration_ms=2000)
    sim.write("set_quota", pb.QuotaRecord(kind="owner", name="A", max_running=1))
    for i in range(2):
        sim.add_task(TaskSpec(f"t{i}", ManualTrigger(), command="x", owner="A"))
        sim.write("trigger_now", f"t{i}", "")
    sim.run_for(500)
    waiting = [s.waiting for r in sim.runs("t0") + sim.runs("t1") for s in r.shards if s.state == pb.PENDING]
    assert waiting == ["quota owner=A: max-running 1"]
    sim.run_for(5_000)
    assert all(r.state == pb.SUCCEEDED for r in sim.runs("t0") + sim.runs("t1"))
    sim.close()


def _lock_tasks(sim: SimHarness, mode: LockMode, n: int = 2) -> None:
    for i in range(n):
        sim.add_task(
            TaskSpec(
                f"l{i}",
                IntervalTrigger(1000, start_ms=T0 + 1000),
                command="x",
                overlap=Overlap.ALLOW,
                locks=(Lock("db", mode),),
            )
        )


def _intervals(sim: SimHarness, duration: int) -> list[tuple[int, int]]:
    return [(t, t + duration) for t, e in _starts(sim) if e.startswith("l")]


def test_tasks_sharing_an_exclusive_lock_never_overlap() -> None:
    sim = SimHarness(["n1", "n2", "n3"])
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=700)
    sim.add_executor("ex2", slots=4, duration_ms=700)
    _lock_tasks(sim, LockMode.EXCLUSIVE)
    sim.run_for(10_000)
    spans = _intervals(sim, 700)
    assert len(spans) >= 10 and _max_overlap(spans) == 1
    assert Counter(_task_of(e) for _, e in _starts(sim)).keys() == {"l0", "l1"}  # neither starves
    assert len(set(sim.digests().values())) == 1
    sim.close()


def test_shared_holders_overlap() -> None:
    sim = SimHarness(["n1"])
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=700)
    _lock_tasks(sim, LockMode.SHARED)
    sim.run_for(5_000)
    assert _max_overlap(_intervals(sim, 700)) == 2
    sim.close()


def _holders(sim: SimHarness) -> dict[str, list[str]]:
    state = sim.nodes[sim.leader or "n1"].state
    return {v.name: [h.execution_id for h in v.holders] for v in state.locks()}


def test_a_lock_is_released_when_its_holder_is_lost() -> None:
    sim = SimHarness(["n1"])
    sim.elect("n1")
    sim.add_executor("ex1", slots=2, duration_ms=60_000)
    lk = (Lock("db"),)
    sim.add_task(TaskSpec("hold", ManualTrigger(), command="x", locks=lk, max_retries=0))
    sim.write("trigger_now", "hold", "")
    sim.run_for(300)
    assert list(_holders(sim)) == ["db"]
    sim.crash_executor("ex1")
    sim.add_executor("ex2", slots=1, duration_ms=100)
    sim.add_task(TaskSpec("next", ManualTrigger(), command="x", locks=lk))
    sim.write("trigger_now", "next", "")
    sim.run_for(500)
    assert [s.waiting for r in sim.runs("next") for s in r.shards] == ["lock db: held"]
    sim.run_for(5_000)  # the lease expires: the attempt is lost, its lock given back
    assert sim.runs("hold")[0].shards[0].lost == 1
    assert sim.runs("next")[0].state == pb.SUCCEEDED
    assert _holders(sim) == {}
    sim.close()


def test_a_lock_is_released_when_its_holder_times_out() -> None:
    sim = SimHarness(["n1"])
    sim.elect("n1")
    sim.add_executor("ex1", slots=2, duration_ms=60_000)  # the simulated command ignores timeouts
    lk = (Lock("db"),)
    sim.add_task(TaskSpec("slow", ManualTrigger(), command="x", locks=lk, timeout_ms=500))
    sim.write("trigger_now", "slow", "")
    sim.run_for(1_000)
    assert list(_holders(sim)) == ["db"]
    sim.run_for(10_000)  # past the leader's timeout backstop (timeout + grace + lease)
    run = sim.runs("slow")[0]
    assert run.state == pb.FAILED and "timeout backstop" in run.shards[0].error
    assert _holders(sim) == {}
    sim.close()


def test_a_lock_is_released_when_its_workflow_run_is_killed() -> None:
    sim = SimHarness(["n1"])
    sim.elect("n1")
    sim.add_executor("ex1", slots=2, duration_ms=60_000)
    spec = pb.WorkflowSpec(name="wf")
    spec.tasks.add(name="step", command="x", priority=5, locks=[pb.LockRef(name="db", shared=True)])
    sim.write("apply_workflow", spec)
    wr = sim.write("start_workflow_run", "wf", 0, "").workflow_run
    sim.run_for(500)
    task_run = sim.workflow_runs("wf")[0].tasks[0].run_id
    assert _holders(sim) == {"db": [f"{task_run}/0/1"]}
    sim.write("workflow_run_op", pb.WorkflowRunOp.KILL, wr.run_id, "", "test")
    assert _holders(sim) == {}
    sim.close()


def test_quota_and_lock_state_survive_restore_and_replay() -> None:
    sim = SimHarness(["n1", "n2", "n3"])
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=5_000)
    sim.write("set_quota", pb.QuotaRecord(kind="namespace", name="default", rate_milli=500, burst=1))
    sim.add_task(TaskSpec("l", ManualTrigger(), command="x", locks=(Lock("db"),)))
    sim.write("trigger_now", "l", "")
    sim.run_for(500)
    sim.crash("n1")
    sim.elect("n2")
    sim.restart("n1")
    sim.run_for(500)
    for node in sim.nodes.values():
        node.state.reload()  # from the store alone: holders are rebuilt from the shards
        assert [v.name for v in node.state.locks()] == ["db"]
        assert node.state.quotas()[0].running == 1
    assert len(set(sim.digests().values())) == 1
    sim.close()
