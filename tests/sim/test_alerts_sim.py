"""Zombie detection in the deterministic simulation, on a manual clock: an attempt that keeps
RUNNING (its executor heartbeats, the command never ends) past ``alerts.zombie_after`` raises one
zombie event, and a new leader that detects it again adds none (apply dedupes on the key)."""

from __future__ import annotations

from raftsched.alerts.config import AlertsConfig
from raftsched.alerts.delivery import detect_zombies
from raftsched.alerts.monitor import AlertMonitor
from raftsched.fsm import alerts as outbox
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.testing import SimHarness
from raftsched.v1 import log_pb2 as pb

ZOMBIE_AFTER_MS = 60_000


def zombie_events(sim: SimHarness, node: str) -> list[pb.AlertRecord]:
    with sim.nodes[node].state.store.reader() as r:
        return [a for a in outbox.list_alerts(r, 0, 0) if a.kind == "zombie"]


def run_with_monitor(sim: SimHarness, monitor: AlertMonitor, ms: int) -> None:
    """Advance the manual clock second by second; the leader's monitor checks after each step and
    proposes what it found, as the node's alert loop does."""
    for _ in range(ms // 1000):
        sim.run_for(1000)
        leader = sim.leader
        assert leader is not None
        found = detect_zombies(monitor, sim.nodes[leader].state, sim.now(leader))
        if found:
            sim.write("raise_alerts", found)


def test_an_attempt_running_past_zombie_after_raises_one_zombie_event_across_a_leader_change() -> None:
    sim = SimHarness(["n1", "n2", "n3"])
    sim.elect("n1")
    sim.add_executor("ex1", slots=2, duration_ms=10 * 60_000)  # the command runs for 10 minutes
    sim.add_task(TaskSpec("stuck", ManualTrigger(), command="work", owner="ops"))
    run_id = sim.write("trigger_now", "stuck", "").run.run_id
    monitor = AlertMonitor(AlertsConfig(zombie_after_ms=ZOMBIE_AFTER_MS))

    run_with_monitor(sim, monitor, 50_000)
    assert zombie_events(sim, "n1") == []  # RUNNING, but not for long enough yet

    run_with_monitor(sim, monitor, 20_000)
    [event] = zombie_events(sim, "n1")
    assert event.execution_id == f"{run_id}/0/1" and event.owner == "ops" and event.id.startswith("alert-")
    assert "RUNNING on ex1" in event.error

    sim.crash("n1")
    sim.elect("n2")
    run_with_monitor(sim, AlertMonitor(AlertsConfig(zombie_after_ms=ZOMBIE_AFTER_MS)), 5_000)
    assert [e.id for e in zombie_events(sim, "n2")] == [event.id]  # detected again, not raised again
    digests = sim.digests()
    assert digests["n2"] == digests["n3"]  # the live replicas agree
    sim.close()
