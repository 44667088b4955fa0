"""A cancel committed just before the leader dies is carried out by the next leader (issue 29 §1),
on the simulated cluster: the old leader's cancel never reaches the executor (its dispatches are
held back, then it crashes); the executor stops the attempt once the new leader, hearing from it
that it still runs a cancelled attempt, sends the cancel again."""

from __future__ import annotations

from typing import Any

from raftsched.executor.dedupe import DedupeLog
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.testing import SimHarness
from raftsched.v1 import log_pb2 as pb

LONG_MS = 600_000  # the simulated command would run 10 minutes


def _entry(sim: SimHarness, exec_id: str) -> dict[str, Any]:
    """The executor's execution-log entry for ``exec_id`` (state, and result once done)."""
    # Read through a DedupeLog of its own over the store: entries are batch records (format 3).
    record = DedupeLog(sim.executors["ex1"].log).get(exec_id)
    assert record is not None
    entry: dict[str, Any] = {"state": record.state.value}
    if record.result is not None:
        entry["result"] = record.result.to_json_dict()
    return entry


def test_the_next_leader_stops_an_attempt_whose_cancel_died_with_the_old_leader() -> None:
    sim = SimHarness(["n1", "n2", "n3"], seed=0)
    try:
        sim.elect("n1")
        ex = sim.add_executor("ex1", slots=2, duration_ms=LONG_MS)
        sim.add_task(TaskSpec("long", ManualTrigger(), command="x"))
        run_id = sim.write("trigger_now", "long", "").run.run_id
        exec_id = f"{run_id}/0/1"
        for _ in range(50):
            if any(e == exec_id for e, _ in ex.executions):
                break
            sim.run_for(100)
        assert any(e == exec_id for e, _ in ex.executions), "the attempt started"

        sim.endpoint.undelivered.add("n1")  # what n1 sends from now on never arrives
        res = sim.write("cancel_run", run_id, "drill")
        assert res.ok and res.run.state == pb.CANCELLED
        sim.run_for(200)  # n1 "sends" its cancel: lost
        assert _entry(sim, exec_id)["state"] == "running"  # it runs on
        sim.crash("n1")
        sim.elect("n2")
        for _ in range(100):
            if _entry(sim, exec_id)["state"] == "done":
                break
            sim.run_for(100)
        entry = _entry(sim, exec_id)
        assert entry["state"] == "done" and entry["result"]["error"].startswith("cancelled"), entry
        assert sim.clock.now_ms() < ex.executions[0][1] + LONG_MS  # stopped, not finished
        [run] = [r for r in sim.runs("long", "n2") if r.run_id == run_id]
        assert run.state == pb.CANCELLED
        assert len(set(sim.digests().values())) == 1
    finally:
        sim.close()
