"""Events across a leader kill, on a manual clock (issue 28 §3): an event accepted just before
the leader dies starts exactly one run — not zero (the run is part of the EmitEvent's apply, so
the new leader inherits it), not two (a client retrying the emit through the new leader gets the
first acceptance back as a duplicate, and starts nothing)."""

from __future__ import annotations

import pytest

from raftsched.model import ManualTrigger, TaskSpec
from raftsched.testing import SimHarness
from raftsched.v1 import log_pb2 as pb


def _executions(sim: SimHarness, task: str) -> list[str]:
    return [
        exec_id
        for ex in sim.executors.values()
        for exec_id, _ in ex.executions
        if exec_id.startswith(task + "@")
    ]


@pytest.mark.parametrize("kill_after_ms", [0, 50, 100, 250, 1000])
def test_an_event_accepted_just_before_a_leader_kill_starts_exactly_one_run(kill_after_ms: int) -> None:
    sim = SimHarness(["n1", "n2", "n3"], seed=0)
    try:
        sim.elect("n1")
        sim.add_executor("ex1", slots=4, duration_ms=200)
        sim.add_executor("ex2", slots=4, duration_ms=200)
        sim.add_task(TaskSpec("load", ManualTrigger(), command="echo", on_event="orders-ready"))
        sim.run_for(1_000)
        first = sim.write("emit_event", "orders-ready", "2026-12-04", '{"rows": 3}', "default")
        assert first.ok and not first.duplicate
        if kill_after_ms:
            sim.run_for(kill_after_ms)
        sim.crash("n1")
        sim.run_for(3_000)
        sim.elect("n2")
        # The client did not see the answer and retries through the new leader.
        retry = sim.write("emit_event", "orders-ready", "2026-12-04", '{"rows": 3}', "default")
        assert retry.duplicate and retry.event == first.event
        sim.run_for(10_000)
        runs = sim.runs("load")
        assert len(runs) == 1, [r.run_id for r in runs]
        assert runs[0].env["RAFTSCHED_EVENT_KEY"] == "2026-12-04"
        assert runs[0].state == pb.SUCCEEDED, runs[0]
        # Executed once (an attempt the dead leader had sent may be re-sent, never run twice).
        assert len(_executions(sim, "load")) == 1, _executions(sim, "load")
        sim.restart("n1")
        sim.run_for(3_000)
        assert len(set(sim.digests().values())) == 1
    finally:
        sim.close()
