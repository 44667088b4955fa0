"""Issue 36 §1-2 on a manual clock: start delay with levels, SLAs and freshness.

The leader's alert monitor is driven as the node's alert loop drives it (after each step: detect
SLA and freshness misses over the state, measure the start delays, propose what it found), and
every replica's state machine feeds its start-delay samples (``SchedulerState.on_start``), as a
node wires them.
"""

from __future__ import annotations

from raftsched.alerts import routing
from raftsched.alerts.config import AlertsConfig, StartDelayConfig, StartDelayLevels
from raftsched.alerts.delivery import detect_sla
from raftsched.alerts.monitor import AlertMonitor, StartDelays
from raftsched.fsm import alerts as outbox
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.model import IntervalTrigger, OnceTrigger, TaskSpec
from raftsched.testing import SimHarness
from raftsched.v1 import log_pb2 as pb

S = 1000
M = 60 * S
H = 60 * M
# Executors heartbeat every 5 s with a 2-minute lease, so the clock may move in steps of tens of
# seconds (three simulated days in a few thousand rounds) without losing the attempts.
SLOW = DispatchSettings(lease_ms=2 * M, heartbeat_ms=5 * S, retry_base_ms=S, stream_grace_ms=M)


class Leader:
    """The leader's alert loop, reduced to its detection: one monitor per leadership."""

    def __init__(self, sim: SimHarness, config: AlertsConfig) -> None:
        self.sim = sim
        self.config = config
        self.delays = {n: StartDelays(config.start_delay) for n in sim.nodes}
        for n, node in sim.nodes.items():
            node.state.on_start = self.delays[n].record
        self.monitor = AlertMonitor(config)
        self.led_by = sim.leader

    def run_for(self, ms: int, step_ms: int) -> None:
        for _ in range(ms // step_ms):
            self.sim.run_for(step_ms, step_ms=step_ms)
            leader = self.sim.leader
            assert leader is not None
            if leader != self.led_by:  # a new leadership starts with a new monitor
                self.monitor, self.led_by = AlertMonitor(self.config), leader
            now = self.sim.now(leader)
            found = detect_sla(self.monitor, self.sim.nodes[leader].state, now)
            found += self.monitor.start_delay(self.delays[leader].measure(now), now)
            if found:
                self.sim.write("raise_alerts", found)


def alerts(sim: SimHarness, kind: str, node: str | None = None) -> list[pb.AlertRecord]:
    state = sim.nodes[node or sim.leader or "n1"].state
    with state.store.reader() as r:
        return [a for a in outbox.list_alerts(r, 0, 0) if a.kind == kind]


def test_a_job_failing_every_run_for_three_days_gives_one_freshness_alert_then_a_resolved_notice() -> None:
    sim = SimHarness(["n1", "n2", "n3"], dispatch=SLOW)
    sim.elect("n1")
    ex = sim.add_executor("ex1", slots=2, duration_ms=30 * S)
    ex.failing.add("load-orders")
    leader = Leader(sim, AlertsConfig())
    sim.add_task(
        TaskSpec("orders", IntervalTrigger(H), command="load-orders", owner="data", freshness_ms=25 * H)
    )
    leader.run_for(36 * H, 30 * S)
    [miss] = alerts(sim, "freshness")
    assert miss.task == "orders" and miss.owner == "data" and miss.namespace == "default"
    assert not miss.resolved and "freshness 1d 1h 0m missed by" in miss.error

    sim.crash("n1")  # a new leader detects the same stale stretch again: apply keeps one event
    sim.elect("n2")
    leader.run_for(36 * H, 30 * S)
    failed = [r for r in sim.runs("orders") if r.state == pb.FAILED]
    assert len(failed) >= 60  # about one failed run an hour for three days...
    assert [a.id for a in alerts(sim, "freshness")] == [miss.id]  # ...and one freshness alert

    ex.failing.clear()  # it recovers: the next run succeeds
    leader.run_for(H + 5 * M, 30 * S)
    miss_again, resolved = alerts(sim, "freshness")
    assert miss_again.id == miss.id
    assert resolved.resolved and resolved.dedupe == miss.dedupe + "/resolved"
    assert resolved.owner == "data" and "fresh again after 3d" in resolved.error
    succeeded = [r.run_id for r in sim.runs("orders") if r.state == pb.SUCCEEDED]
    assert succeeded[0] == resolved.run_id  # the first success resolves it (later ones add nothing)
    record = sim.nodes["n2"].state.get_task("orders")
    assert record is not None and record.last_success_run == succeeded[-1]

    # What a receiver gets of the failures (issue 36 §5 routing over the same replicated outbox):
    # the leader's recovery pass proposes the resolved run_failed once a run succeeded after the
    # streak's newest failure, and the routing book, fed the outbox in order as every leader
    # feeds it, sends the first failure, a count every streak_interval (4 h), and the resolved
    # notice - not one alert per failed run.
    book = routing.StreakBook()
    for alert in alerts(sim, "run_failed"):
        book.observe(alert)
    [streak] = book.open_streaks()
    run = routing.recovery_run(streak, sim.runs("orders"))
    assert run is not None and run.run_id == succeeded[0]
    sim.write("raise_alerts", [routing.recovered(streak, run)])
    book = routing.StreakBook()
    notices = [book.observe(a) for a in alerts(sim, "run_failed")]
    sent = [n for n in notices if n.send]
    failures = [n for n in notices if not n.alert.resolved]
    assert len(failures) == len(failed) and sent[0].streak == 1  # the first failure, at once
    counts = [n for n in sent if not n.alert.resolved][1:]
    assert counts and all(n.streak > 1 and "runs in a row" in n.text for n in counts)
    assert len(counts) <= 72 // 4 + 1  # one count per 4 hours of a 72-hour streak at most
    resolved_notice = sent[-1]
    assert resolved_notice.alert.resolved and resolved_notice.streak == len(failed)
    assert len(sent) < len(failed) // 3
    print(f"{len(failed)} failed runs -> {len(sent)} notices: 1 alert, {len(counts)} counts, 1 resolved")
    digests = sim.digests()
    assert digests["n2"] == digests["n3"]
    sim.close()


def test_freshness_catches_a_disabled_task_and_sla_misses_are_one_alert_per_run() -> None:
    sim = SimHarness(["n1", "n2", "n3"], dispatch=SLOW)
    sim.elect("n1")
    leader = Leader(sim, AlertsConfig())
    t0 = sim.now("n1")
    # Disabled: it never runs, so it is never fresh.
    sim.add_task(TaskSpec("off", IntervalTrigger(M), command="x", freshness_ms=10 * M), disabled=True)
    # No executor for 8 minutes: its run starts about 7 minutes late and ends after 9.
    sim.add_task(
        TaskSpec(
            "report",
            OnceTrigger(t0 + M),
            command="x",
            owner="bi",
            sla_start_within_ms=5 * M,
            sla_finish_within_ms=8 * M,
        )
    )
    leader.run_for(8 * M, 10 * S)
    [start_miss] = alerts(sim, "sla_missed")
    assert start_miss.run_id == f"report@{t0 + M}" and start_miss.owner == "bi"
    assert "sla.start_within 5m 0s missed by" in start_miss.error
    sim.add_executor("ex1", slots=2, duration_ms=2 * M)
    sim.crash("n1")
    sim.elect("n2")
    leader.run_for(6 * M, 10 * S)
    misses = alerts(sim, "sla_missed")
    # The late start (reported with the result) is the same miss: no second start alert.
    assert [m.dedupe for m in misses] == [start_miss.dedupe, f"sla/report@{t0 + M}/finish"]
    assert "sla.finish_within 8m 0s missed by" in misses[1].error
    [stale] = alerts(sim, "freshness")
    assert stale.task == "off" and "since it was created" in stale.error and "disabled" in stale.error
    sim.close()


def test_attempts_starting_3_minutes_late_warn_and_6_minutes_late_are_critical() -> None:
    sim = SimHarness(["n1", "n2", "n3"], dispatch=SLOW)
    sim.elect("n1")
    config = AlertsConfig(
        start_delay=StartDelayConfig(
            StartDelayLevels(),  # p95 over 5m: warning above 2m, critical above 5m
            (("batch", StartDelayLevels(critical_ms=10 * M)),),  # a looser namespace
        )
    )
    leader = Leader(sim, config)
    t0 = sim.now("n1")
    for i in range(5):
        sim.add_task(TaskSpec(f"a{i}", OnceTrigger(t0 + M), command="x", namespace="web"))
        sim.add_task(TaskSpec(f"b{i}", OnceTrigger(t0 + M), command="x", namespace="batch"))
        sim.add_task(
            TaskSpec(f"c{i}", OnceTrigger(t0 + M), command="x", namespace="etl", selector=(("pool", "c"),))
        )
    leader.run_for(4 * M, 10 * S)  # no executor yet
    sim.add_executor("ex1", slots=20, duration_ms=S)  # web and batch start ~3 minutes late
    leader.run_for(3 * M, 10 * S)
    sim.add_executor("ex2", slots=20, duration_ms=S, labels={"pool": "c"})  # etl ~6 minutes late
    leader.run_for(M, 10 * S)
    got = {(a.namespace, a.severity) for a in alerts(sim, "start_delay")}
    assert got == {("web", "warning"), ("batch", "warning"), ("etl", "critical")}
    web = [a for a in alerts(sim, "start_delay") if a.namespace == "web"]
    # At most one per level and window while it lasts (here the samples span two windows).
    assert len(web) <= 2 and len({a.dedupe.rsplit("/", 1)[1] for a in web}) == len(web)
    assert "start delay p95 3m" in web[0].error and "above the warning level 2m 0s" in web[0].error
    [etl] = [a for a in alerts(sim, "start_delay") if a.namespace == "etl"]
    assert "start delay p95 6m" in etl.error and "critical level 5m 0s" in etl.error
    sim.close()
