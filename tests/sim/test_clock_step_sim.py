"""A leader's clock step of ten minutes, on a manual clock (issue 35 §5).

Measured on main with real processes: a leader whose clock stepped +10 min planned every fire of
the next ten minutes at once, and after it died its successor kept the cluster's leader time ten
minutes ahead ("a new leader never uses a time below the newest committed leader time"), so
nothing fired on time for ten minutes. Here:

* a leader whose clock steps plans nothing with the stepped time and hands leadership to a
  follower whose clock agrees with the majority; firing is on time again within a second;
* a leader time committed ten minutes ahead (a node elected with a wrong clock before it heard
  any other clock) is a clock fault for the next leader, not a floor: it plans from its own clock
  again, with a clock_fault alert, and never fires anything at or below a task's watermark;
* nothing starts before its nominal time (by the true clock) in any of it.
"""

from __future__ import annotations

import pytest

from raftsched.fsm import alerts as alerts_mod
from raftsched.model import CLOCK_FAULT, CronTrigger, TaskSpec
from raftsched.testing import SimHarness
from raftsched.v1 import raftsched_pb2 as rpb

STEP_MS = 600_000  # ten minutes


def _cluster() -> SimHarness:
    sim = SimHarness(["n1", "n2", "n3"], seed=0)
    sim.elect("n1")
    sim.add_executor("ex1", slots=4, duration_ms=50)
    sim.add_task(TaskSpec("t", CronTrigger("* * * * * *"), command="echo"))
    sim.run_for(5_000)
    return sim


def _starts(sim: SimHarness) -> list[tuple[int, int]]:
    """``(nominal ms, first start ms by the true clock)`` of every run of ``t`` that started."""
    nominal = {r.run_id: r.nominal_ms for r in sim.runs("t")}
    first: dict[str, int] = {}
    for ex in sim.executors.values():
        for exec_id, started in ex.executions:
            run_id = exec_id.split("/")[0]
            first[run_id] = min(first.get(run_id, started), started)
    return sorted((nominal[r], at) for r, at in first.items() if r in nominal)


def _early(sim: SimHarness) -> list[tuple[int, int]]:
    return [(n, at) for n, at in _starts(sim) if at < n]


def _first_on_time_after(sim: SimHarness, t0: int) -> int | None:
    """The nominal time of the first run after ``t0`` that started within 1 s of it."""
    for nominal, at in _starts(sim):
        if nominal > t0 and at - nominal <= 1000:
            return nominal
    return None


def _fires_decided_ahead(sim: SimHarness) -> list[rpb.FireRecord]:
    """Fire records of a nominal time later than the true clock when they were decided: a
    leader that fired with a stepped clock (they are accounted, never fired twice)."""
    now = sim.clock.now_ms()
    return [f for f in sim.fires("t") if f.nominal_ms > now or f.decided_ms > now]


@pytest.mark.parametrize("step_ms", [STEP_MS, -STEP_MS])
def test_a_leader_whose_clock_steps_hands_over_and_firing_stays_on_time(step_ms: int) -> None:
    sim = _cluster()
    try:
        # Measured before the step: followers from the leader's appends, executors from its replies.
        n2 = sim.nodes["n2"].watch
        assert n2 is not None and n2.view(leading=False).offset_ms == 0
        assert sim.executors["ex1"].agent is not None and sim.executors["ex1"].agent.clock_offset_ms == 0
        stepped = sim.clock.now_ms()
        sim.skew("n1", step_ms)
        sim.run_for(3_000)
        assert sim.leader != "n1", "the leader with the stepped clock still leads"
        back = _first_on_time_after(sim, stepped)
        assert back is not None and back - stepped <= 1_000, (
            f"no on-time fire within a second of the step: {_starts(sim)[-5:]}"
        )
        assert not _early(sim), f"runs started before their nominal time: {_early(sim)}"
        assert not _fires_decided_ahead(sim)
        for node in sim.nodes.values():  # no ten-minute floor left anywhere
            assert node.state.max_now_ms <= sim.clock.now_ms() + 1_000
        assert len(set(sim.digests().values())) == 1
    finally:
        sim.close()


def test_a_leader_time_committed_ahead_is_a_clock_fault_for_the_next_leader() -> None:
    sim = _cluster()
    try:
        # n1 restarts with its clock ten minutes ahead and is elected before it has heard any
        # other clock: its barrier commits a leader time ten minutes ahead.
        sim.crash("n1")
        sim.elect("n2")
        sim.run_for(1_000)
        sim.restart("n1")
        sim.skew("n1", STEP_MS)
        sim.elect("n1")
        assert sim.nodes["n2"].state.max_now_ms >= sim.clock.now_ms() + STEP_MS - 1_000
        sim.run_for(500)
        sim.crash("n1")  # it dies, whether or not it handed over first
        died = sim.clock.now_ms()
        sim.elect("n2")
        sim.run_for(3_000)
        back = _first_on_time_after(sim, died)
        assert back is not None and back - died <= 1_500, (
            f"no on-time fire after the faulty leader died: {_starts(sim)[-5:]}"
        )
        assert not _early(sim), f"runs started before their nominal time: {_early(sim)}"
        assert not _fires_decided_ahead(sim)
        state = sim.nodes["n2"].state
        assert state.max_now_ms <= sim.clock.now_ms() + 1_000
        with sim.nodes["n2"].store.reader() as r:
            faults = [a for a in alerts_mod.list_alerts(r, 0, 0) if a.kind == CLOCK_FAULT]
        assert len(faults) == 1, faults
        assert "ahead of the clock of the new leader n2" in faults[0].error
        assert len({d for n, d in sim.digests().items() if n != "n1"}) == 1
    finally:
        sim.close()
