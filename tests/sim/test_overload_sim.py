"""An overloaded cluster in simulation ([scheduler] max_dispatch_backlog): more every-second fires
than its executors can start. With the limit, the leader holds fire planning while that many
attempts wait for a slot, so the waiting attempts stay bounded through a leader change; once
capacity comes back every nominal fire is accounted exactly once (fired, or coalesced by the
task's misfire policy), no execution ran twice and the replicas agree. Without it (the control)
the waiting attempts grow with every second of overload."""

from __future__ import annotations

from collections import Counter

import pytest

from raftsched.errors import Unavailable
from raftsched.fsm.workflow_model import is_internal, split_internal, trigger_name
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.testing import SimHarness
from raftsched.v1 import log_pb2 as lpb
from raftsched.v1 import raftsched_pb2 as pb

TASKS = [f"t{i}" for i in range(4)]
LIMIT = 12
GRACE_S = 5  # MisfireSettings' default grace


def _overloaded(seed: int, limit: int) -> SimHarness:
    sim = SimHarness(["n1", "n2", "n3"], seed=seed, columns=True, max_dispatch_backlog=limit)
    sim.elect("n1")
    # One slot, 0.9 s an attempt: about one start a second against four fires a second.
    sim.add_executor("ex1", slots=1, duration_ms=900)
    for name in TASKS:
        sim.add_task(
            TaskSpec(name, CronTrigger("* * * * * *"), command="work", overlap=Overlap.ALLOW, max_retries=1)
        )
    return sim


def _run_sampling(sim: SimHarness, ms: int) -> int:
    """Run ``ms`` and return the most attempts the leader's dispatcher had waiting (checking its
    count per task each time)."""
    peak = 0
    for _ in range(ms // 100):
        sim.run_for(100)
        leader = sim.leader
        if leader is not None:
            d = sim.nodes[leader].dispatcher
            peak = max(peak, d.backlog)
            # The per-task counts the hold reads agree with what waits (a workflow step's under
            # its workflow's trigger task too).
            tasks = [w.ready.task for w in d.waiting.values()]
            triggers = [trigger_name(split_internal(t)[0]) for t in tasks if is_internal(t)]
            assert d.waiting_tasks() == Counter(tasks + triggers)
    return peak


def _write_retrying(sim: SimHarness, task: str) -> None:
    """Disable ``task`` as the SDK does: an "unavailable" refusal is retried after a moment."""
    for _ in range(3):
        try:
            sim.write("set_enabled", task, False)
            return
        except Unavailable:
            sim.run_for(100)
    raise AssertionError(f"disabling {task} was refused three times")


def _accounted(sim: SimHarness, task: str) -> Counter[int]:
    """Nominal time → how many times it is accounted: by a run, or by a record of a fire that made
    none (coalesced, skipped). A fire of the hot path has its run and no record of its own."""
    out: Counter[int] = Counter(r.nominal_ms for r in sim.runs(task) if not r.manual)
    for rec in sim.fires(task):
        if rec.outcome == lpb.FIRED:
            continue  # its run is counted
        if rec.through_ms:
            out.update(range(rec.nominal_ms, rec.through_ms + 1, 1000))
            assert (rec.through_ms - rec.nominal_ms) // 1000 + 1 == rec.count, rec
        else:
            out[rec.nominal_ms] += 1
    return out


@pytest.mark.parametrize("seed", [1, 2])
def test_held_planning_bounds_the_backlog_and_accounts_every_fire(seed: int) -> None:
    sim = _overloaded(seed, LIMIT)
    peak = _run_sampling(sim, 30_000)
    held = sim.nodes["n1"].driver.holds
    sim.crash("n1")  # the leader, while its planning is held
    sim.elect("n2")
    peak = max(peak, _run_sampling(sim, 15_000))
    held += sim.nodes["n2"].driver.holds
    # A write to a task whose fires are held is refused at first ("unavailable", as the SDK
    # retries), and the refusal has the leader plan them at once: the retry is accepted while
    # planning stays held for the others.
    # (The executor gone, so the hold lasts.)
    sim.crash_executor("ex1")
    peak = max(peak, _run_sampling(sim, 3_000))
    driver = sim.nodes["n2"].driver
    held_since = driver.held_since_ms
    assert held_since, "not held when the write came"
    _write_retrying(sim, "t0")
    assert driver.held_since_ms == held_since, "the hold ended meanwhile"
    peak = max(peak, _run_sampling(sim, 5_000))
    sim.restart_executor("ex1")
    peak = max(peak, _run_sampling(sim, 10_000))
    for name in TASKS[1:]:
        _write_retrying(sim, name)
    for _ in range(600):  # what waits drains at about one a second
        sim.run_for(100)
        if all(r.state in (pb.SUCCEEDED, pb.FAILED) for n in TASKS for r in sim.runs(n)):
            break
    else:
        raise AssertionError("the waiting attempts never drained")
    digests = set(sim.digests().values())
    sim.close()

    assert held >= 2, "planning was never held (both leaders)"
    # The limit, plus what a task with no attempt waiting adds when it is planned while held (its
    # fires of the misfire grace, and one more), the attempt that ran on the crashed executor
    # (back to waiting, as a retry) and the fire the write wanted.
    assert peak <= LIMIT + len(TASKS) * (GRACE_S + 1) + 1 + 1, peak
    coalesced = 0
    for name in TASKS:
        record = sim.nodes["n2"].state.get_task(name)
        assert record is not None
        counts = _accounted(sim, name)
        first = min(counts)
        owed = range(first, record.watermark_ms + 1, 1000)
        assert [n for n in owed if counts[n] != 1] == [], f"{name}: a fire not accounted exactly once"
        assert set(counts) <= set(owed)
        records = sim.fires(name)
        coalesced += sum(r.count or 1 for r in records if r.outcome == lpb.COALESCED)
        runs = sim.runs(name)
        assert {r.run_id for r in records if r.outcome == lpb.FIRED} <= {r.run_id for r in runs}
        assert all(r.state == pb.SUCCEEDED for r in runs), [
            (r.run_id, pb.RunState.Name(r.state)) for r in runs if r.state != pb.SUCCEEDED
        ]
    assert coalesced, "no late fire went by its misfire policy"
    executed = Counter(e for ex in sim.executors.values() for e, _ in ex.executions)
    assert not [e for e, n in executed.items() if n > 1], "an execution id ran twice"
    assert len(digests) == 1


def test_without_a_limit_the_waiting_attempts_grow() -> None:
    """The control: the same load with no limit commits every fire, and the attempts waiting for
    the one slot grow by about three a second (with the limit they stay at it: 60 s below)."""
    sim = _overloaded(1, 0)
    peak = _run_sampling(sim, 30_000)
    holds = sim.nodes["n1"].driver.holds
    sim.close()
    assert holds == 0
    assert peak > 2 * (LIMIT + len(TASKS) * (GRACE_S + 1)), peak
    limited = _overloaded(1, LIMIT)
    first, second = _run_sampling(limited, 30_000), _run_sampling(limited, 30_000)
    limited.close()
    assert second <= first <= LIMIT + len(TASKS) * (GRACE_S + 1), (first, second)


def test_a_task_whose_attempts_never_start_holds_only_itself() -> None:
    """One task's attempts wait for an executor that does not exist (a selector none matches):
    they fill the backlog, and the leader holds that task, not the others: they fire on time."""
    sim = SimHarness(["n1", "n2", "n3"], seed=4, columns=True, max_dispatch_backlog=LIMIT)
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=100)
    sim.add_task(
        TaskSpec(
            "stuck",
            CronTrigger("* * * * * *"),
            command="work",
            overlap=Overlap.ALLOW,
            selector=(("gpu", "yes"),),
        )
    )
    sim.add_task(TaskSpec("fine", CronTrigger("* * * * * *"), command="work"))
    peak = _run_sampling(sim, 40_000)
    driver = sim.nodes["n1"].driver
    held, now = driver.held_since_ms, driver.last_now_ms
    stuck = sim.nodes["n1"].state.get_task("stuck")
    fine = sim.runs("fine")
    fine_records = sim.fires("fine")
    sim.close()

    assert held, "never held"
    assert peak <= LIMIT + GRACE_S + 1, peak
    assert stuck is not None and stuck.next_fire_ms < now - 20_000, "the stuck task was not held"
    assert not [r for r in fine_records if r.outcome != lpb.FIRED], "a fire of the other task was not run"
    nominals = [r.nominal_ms for r in fine]
    assert nominals == list(range(nominals[0], nominals[0] + 1000 * len(nominals), 1000))
    assert nominals[-1] >= now - 1000, "the other task fell behind"
    assert all(r.state == pb.SUCCEEDED for r in fine[:-1])


def test_a_workflow_whose_steps_wait_is_held() -> None:
    """A workflow's schedule (its trigger task) has no attempts of its own; its steps' attempts
    count under it, so with overlap allow its runs stop being started while they wait."""
    sim = SimHarness(["n1", "n2", "n3"], seed=1, columns=True, max_dispatch_backlog=LIMIT)
    sim.elect("n1")
    sim.add_executor("ex1", slots=1, duration_ms=900)
    spec = pb.WorkflowSpec(name="wf", schedule=pb.CronTrigger(expr="* * * * * *"), overlap=pb.OVERLAP_ALLOW)
    spec.tasks.add(name="a", command="work")
    spec.tasks.add(name="b", command="work")
    assert sim.write("apply_workflow", spec).ok
    first, second = _run_sampling(sim, 45_000), _run_sampling(sim, 45_000)
    holds = sim.nodes["n1"].driver.holds
    sim.close()
    assert holds >= 1
    # the limit plus one grace of fires of the trigger (each run: two steps, one waiting at once)
    assert second <= first <= LIMIT + 2 * (GRACE_S + 1), (first, second)
