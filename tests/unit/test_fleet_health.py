"""The leader's fleet-health and clock-skew detector (raftsched.alerts.health), its config keys,
and the command format of what it raises (issue 36 §3, §4)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from raftsched import codec
from raftsched.alerts.config import HealthSettings, parse_alerts
from raftsched.alerts.formats import alertmanager_labels, json_body
from raftsched.alerts.health import MAX_EVENTS_PER_CHECK, FleetView, HealthMonitor, WaitingAttempt
from raftsched.alerts.routing import Notice
from raftsched.errors import InvalidSpec
from raftsched.executor.agent import Executor
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import CLOCK_SKEW, HEARTBEAT_MISSING, NO_EXECUTOR, WAITING_TOO_LONG, ZOMBIE
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb

T0 = 1_700_000_000_000
SETTINGS = HealthSettings(max_waiting_ms=60_000, heartbeat_missing_ms=5_000, max_skew_ms=500)


def kinds(events: list[pb.AlertRecord]) -> list[tuple[str, str]]:
    return [(e.kind, e.task or e.executor or e.node) for e in events]


def test_waiting_work_with_no_executor_and_over_max_waiting_names_the_task_once() -> None:
    m = HealthMonitor(SETTINGS)
    w = WaitingAttempt("nightly", "nightly@1/0/1", "nightly@1", T0, "ops", "etl")
    # Not before it has waited heartbeat_missing (5 s here): executors that lost their stream, or
    # a new leader's, come back within it.
    assert m.check(FleetView(T0 + 4_999, (w,), placeable=0)) == []
    fleet = FleetView(T0 + 5_000, (w,), placeable=0)
    first = m.check(fleet)
    assert kinds(first) == [(NO_EXECUTOR, "nightly")]
    assert first[0].owner == "ops" and first[0].namespace == "etl" and first[0].dedupe
    assert m.check(fleet) == []  # once per task and episode, not per attempt:
    w2 = WaitingAttempt("nightly", "nightly@2/0/1", "nightly@2", T0 + 1_000, "ops", "etl")
    assert m.check(FleetView(T0 + 9_000, (w, w2), placeable=0)) == []
    # An executor came and went: a new episode is a new event.
    m.check(FleetView(T0 + 10_000, (w, w2), placeable=1))
    again = m.check(FleetView(T0 + 20_000, (w, w2), placeable=0))
    assert kinds(again) == [(NO_EXECUTOR, "nightly")] and again[0].dedupe != first[0].dedupe
    late = m.check(FleetView(T0 + 61_000, (w,), placeable=2))
    assert kinds(late) == [(WAITING_TOO_LONG, "nightly")] and "waited 61 s" in late[0].error
    # Not due yet (a retry's backoff): nothing.
    future = WaitingAttempt("later", "later@1/0/1", "later@1", T0 + 90_000)
    assert HealthMonitor(SETTINGS).check(FleetView(T0, (future,), placeable=0)) == []


def test_a_silent_executor_is_alerted_once_per_silence_and_a_dead_one_names_why() -> None:
    m = HealthMonitor(SETTINGS)
    assert m.check(FleetView(T0 + 4_000, last_seen={"ex1": T0})) == []
    events = m.check(FleetView(T0 + 6_000, last_seen={"ex1": T0}))
    assert kinds(events) == [(HEARTBEAT_MISSING, "ex1")] and "no heartbeat for 6.0 s" in events[0].error
    assert m.check(FleetView(T0 + 9_000, last_seen={"ex1": T0}, dead={"ex1": (T0, "x")})) == []
    # A new silence after it came back is a new event; a dead one says why.
    events = m.check(FleetView(T0 + 20_000, last_seen={"ex1": T0 + 19_000}, dead={"ex1": (T0, "gone")}))
    assert kinds(events) == [(HEARTBEAT_MISSING, "ex1")] and "declared dead (gone)" in events[0].error


def test_clock_skew_is_raised_once_per_episode_for_nodes_and_executors() -> None:
    m = HealthMonitor(SETTINGS)
    skewed = FleetView(T0, node_offsets={"n2": 10, "n3": -800}, executor_offsets={"ex1": 900})
    events = m.check(skewed)
    assert kinds(events) == [(CLOCK_SKEW, "n3"), (CLOCK_SKEW, "ex1")]
    assert events[0].node == "n3" and "-0.800 s" in events[0].error
    assert m.check(FleetView(T0 + 1_000, node_offsets={"n3": -700}, executor_offsets={"ex1": 900})) == []
    assert m.check(FleetView(T0 + 2_000, node_offsets={"n3": 0})) == []  # back within bounds
    again = m.check(FleetView(T0 + 3_000, node_offsets={"n3": 600}))
    assert kinds(again) == [(CLOCK_SKEW, "n3")]


def test_alerts_config_reads_the_health_keys_with_defaults_and_key_paths() -> None:
    problems: list[str] = []
    cfg = parse_alerts({"max_waiting": "5m", "max_skew": "250ms"}, Path("."), problems)
    assert problems == []
    assert cfg.health == HealthSettings(max_waiting_ms=300_000, max_skew_ms=250)
    assert HealthSettings().max_skew_ms == 500  # the documented default
    parse_alerts({"heartbeat_missing": "soon", "max_skew": -1}, Path("."), problems)
    assert any(p.startswith("alerts.heartbeat_missing:") for p in problems), problems
    assert any(p.startswith("alerts.max_skew:") for p in problems), problems


def stamp() -> dict[str, object]:
    return {"now_ms": T0, "epoch": 1, "origin": "n1", "key": ""}


def test_health_alerts_and_an_executors_own_drain_are_command_format_8() -> None:
    health = pb.Command.FromString(
        writes.raise_alerts([pb.AlertRecord(kind=CLOCK_SKEW, dedupe="d")], **stamp())  # type: ignore[arg-type]
    )
    zombie = pb.Command.FromString(
        writes.raise_alerts([pb.AlertRecord(kind=ZOMBIE, dedupe="z")], **stamp())  # type: ignore[arg-type]
    )
    assert (health.format, zombie.format) == (codec.HEALTH_FORMAT, 1)
    drain = pb.Command(epoch=1, now_ms=T0, origin="n1")
    drain.drain_executor.name = "ex1"
    assert codec.command_format(drain) == 2
    drain.drain_executor.health = True
    assert codec.command_format(drain) == codec.HEALTH_FORMAT


def test_apply_stores_leader_health_alerts_and_refuses_no_kind_it_knows() -> None:
    st = SchedulerState(MemoryStore())
    assert st.apply(writes.raise_alerts([], **stamp())).result.ok  # type: ignore[arg-type]
    events = [
        pb.AlertRecord(kind=k, dedupe=f"{k}/1", executor="ex1")
        for k in (NO_EXECUTOR, WAITING_TOO_LONG, HEARTBEAT_MISSING, CLOCK_SKEW)
    ]
    res = st.apply(writes.raise_alerts(events, **stamp())).result  # type: ignore[arg-type]
    assert res.ok and res.accounted == 4


def test_a_check_raises_at_most_its_budget_and_the_rest_later() -> None:
    m = HealthMonitor(SETTINGS)
    waiting = tuple(WaitingAttempt(f"t{i:04d}", f"t{i:04d}@1/0/1", f"t{i:04d}@1", T0) for i in range(250))
    fleet = FleetView(T0 + 5_000, waiting, placeable=0, node_offsets={"n2": 900})
    seen: list[str] = []
    for _ in range(5):
        events = m.check(fleet)
        assert len(events) <= MAX_EVENTS_PER_CHECK
        seen += [e.task or e.node for e in events]
    assert seen[0] == "n2"  # a node or an executor first: few, and each names one
    assert sorted(t for t in seen if t != "n2") == [f"t{i:04d}" for i in range(250)]  # each once


def test_an_executor_reads_its_disk_at_the_edge_and_decides_with_hysteresis(tmp_path: Path) -> None:
    real = Executor("127.0.0.1:1", "ex1", data_dir=tmp_path, full_at=0.001, resume_at=0.001)
    reason = real.check_health()  # statvfs of the data directory: surely more than 0.1 % used
    usage = shutil.disk_usage(tmp_path)
    assert abs(real.disk_used - usage.used / usage.total) < 0.01
    assert reason.startswith(f"disk {real.disk_used:.0%} used ({tmp_path})") and "at or over 0%" in reason
    reading = [(0.5, 0.1)]
    ex = Executor("127.0.0.1:1", "ex2", data_dir=tmp_path, health_probe=lambda: reading[0])
    assert ex.check_health() == ""
    reading[0] = (0.5, 0.92)
    assert "execution log map 92% used" in ex.check_health()
    reading[0] = (0.5, 0.85)  # between the lines: still unhealthy
    assert ex.check_health()
    reading[0] = (0.79, 0.5)
    assert ex.check_health() == ""


def test_bad_health_thresholds_are_refused_naming_the_option() -> None:
    with pytest.raises(InvalidSpec, match=r"executor\.full_at"):
        Executor("127.0.0.1:1", "ex1", full_at=1.5)
    with pytest.raises(InvalidSpec, match=r"executor\.resume_at"):
        Executor("127.0.0.1:1", "ex1", full_at=0.8, resume_at=0.9)


def test_the_webhook_payload_names_the_executor_or_node() -> None:
    notice = Notice(pb.AlertRecord(id="alert-1", kind=CLOCK_SKEW, executor="ex1"), send=True)
    body = json_body(notice, "warning", "prod", "")
    assert alertmanager_labels(notice, "warning", "prod")["executor"] == "ex1"
    assert body["executor"] == "ex1" and "node" not in body
    body = json_body(
        Notice(pb.AlertRecord(id="alert-2", kind=CLOCK_SKEW, node="n3"), send=True), "warning", "prod", ""
    )
    assert body["node"] == "n3" and "executor" not in body


def test_waiting_too_long_is_one_event_per_task_and_episode_not_per_attempt() -> None:
    m = HealthMonitor(SETTINGS)

    def oldest(n: int, due: int, now: int = T0 + 100_000) -> FleetView:
        w = WaitingAttempt("etl", f"etl@{n}/0/1", f"etl@{n}", due)
        return FleetView(now, (w,), placeable=3)

    assert kinds(m.check(oldest(1, T0))) == [(WAITING_TOO_LONG, "etl")]
    # The backlog drains slowly: the next oldest is over the limit too. Same episode: nothing.
    assert m.check(oldest(2, T0 + 10_000)) == []
    assert m.check(FleetView(T0 + 100_000, (), placeable=3)) == []  # caught up: episode over
    assert kinds(m.check(oldest(3, T0 + 20_000, T0 + 101_000))) == [(WAITING_TOO_LONG, "etl")]
