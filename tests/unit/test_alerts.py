"""Alerts: events created deterministically in apply, the replicated delivery cursors and acks,
leader-raised events (dedupe), retention, config validation, signatures, and the delivery loop
against a fake node and a fake POST (order, filters, retries with backoff, leader change)."""

from __future__ import annotations

import asyncio
import contextlib
import json
import random
from collections.abc import Iterator, Mapping
from pathlib import Path

import pytest

from raftsched import codec
from raftsched.abc import CommitHook, ProposeCallback
from raftsched.alerts import delivery
from raftsched.alerts.config import AlertsConfig, Webhook, parse_alerts
from raftsched.alerts.monitor import AlertMonitor
from raftsched.errors import NotLeader
from raftsched.fsm import alerts as outbox
from raftsched.fsm import keys
from raftsched.fsm.records import Retention
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.leader.gate import Stamp
from raftsched.model import Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import (
    EVERY_SECOND,
    T0,
    S,
    apply,
    assign,
    create,
    fresh,
    join,
    leave,
    one_run,
    result,
    tick,
)
from tests.support.wait import until


def events(state: SchedulerState) -> list[pb.AlertRecord]:
    with state.store.reader() as r:
        return outbox.list_alerts(r, 0, 0)


def cursors(state: SchedulerState) -> dict[str, int]:
    with state.store.reader() as r:
        return outbox.cursors(r)


def stamp(now: int = T0 + 10 * S, epoch: int = 1) -> dict[str, object]:
    return {"now_ms": now, "epoch": epoch, "origin": "n1"}


# -- events created in apply ------------------------------------------------------------------------


def test_a_run_failing_after_its_last_retry_raises_one_run_failed_event_with_owner_and_execution() -> None:
    state, run_id = one_run(retries=1)
    assert apply(state, assign(T0 + S, (run_id, 0, 1, "ex1"))).accounted == 1
    apply(state, result(T0 + 2 * S, run_id, 1, "ex1", False, error="exit 3", stderr_tail="boom\n"))
    assert events(state) == []  # a retry follows: no event yet
    assert apply(state, assign(T0 + 4 * S, (run_id, 0, 2, "ex1"))).accounted == 1
    apply(state, result(T0 + 5 * S, run_id, 2, "ex1", False, error="exit 3", stderr_tail="boom again\n"))
    [ev] = events(state)
    assert (ev.id, ev.seq, ev.kind) == ("alert-1", 1, "run_failed")
    assert (ev.task, ev.owner, ev.namespace, ev.run_id) == ("t", "ops", "default", run_id)
    assert ev.execution_id == f"{run_id}/0/2" and ev.error == "exit 3"
    assert ev.output_tail == "boom again\n" and ev.at_ms == T0 + 5 * S


def test_timeouts_and_lost_attempts_raise_one_event_per_attempt() -> None:
    state, run_id = one_run(retries=3)
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
    apply(state, result(T0 + 2 * S, run_id, 1, "ex1", False, error="timed out after 1s", timed_out=True))
    apply(state, assign(T0 + 3 * S, (run_id, 0, 2, "ex2")))
    apply(state, leave("ex2", T0 + 4 * S))
    kinds = [(e.kind, e.execution_id) for e in events(state)]
    assert kinds == [("timeout", f"{run_id}/0/1"), ("lost", f"{run_id}/0/2")]


def test_a_fire_skipped_by_overlap_raises_an_event_and_a_fired_one_does_not() -> None:
    state = fresh()
    assert create(state, TaskSpec("t", EVERY_SECOND, command="true", owner="ops")).ok
    apply(state, tick("t", 1, T0 + S))
    assert events(state) == []
    apply(state, tick("t", 1, T0 + 2 * S))  # the first run is unfinished: overlap=skip
    [ev] = events(state)
    assert ev.kind == "fire_skipped" and ev.task == "t" and "skipped_overlap" in ev.error


def test_events_are_the_same_on_every_replica() -> None:
    state, run_id = one_run()
    logs = [assign(T0 + S, (run_id, 0, 1, "ex1")), result(T0 + 2 * S, run_id, 1, "ex1", False)]
    for data in logs:
        apply(state, data)
    other, _ = one_run()
    for data in logs:
        apply(other, data)
    assert events(state) == events(other) and state.digest() == other.digest()


# -- cursors, acks, leader-raised events ----------------------------------------------------------


def _failed_state() -> SchedulerState:
    state, run_id = one_run()
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
    apply(state, result(T0 + 2 * S, run_id, 1, "ex1", False, error="bad"))
    assert len(events(state)) == 1
    return state


def test_the_delivered_cursor_advances_only_forward_and_never_past_the_newest_event() -> None:
    state = _failed_state()
    assert apply(state, writes.alerts_delivered("hook", 1, **stamp())).ok  # type: ignore[arg-type]
    assert apply(state, writes.alerts_delivered("hook", 0, **stamp())).ok  # type: ignore[arg-type]
    with state.store.reader() as r:
        assert outbox.cursors(r) == {"hook": 1}
    refused = apply(state, writes.alerts_delivered("hook", 2, **stamp()))  # type: ignore[arg-type]
    assert not refused.ok and refused.code == "invalid_argument"


def test_ack_marks_an_event_once_and_an_unknown_id_is_not_found() -> None:
    state = _failed_state()
    first = apply(state, writes.ack_alert("alert-1", key="k1", **stamp(T0 + 20 * S)))  # type: ignore[arg-type]
    assert first.ok and first.alert.acked_ms == T0 + 20 * S
    again = apply(state, writes.ack_alert("alert-1", key="k2", **stamp(T0 + 30 * S)))  # type: ignore[arg-type]
    assert again.alert.acked_ms == T0 + 20 * S
    missing = apply(state, writes.ack_alert("alert-9", key="k3", **stamp()))  # type: ignore[arg-type]
    assert not missing.ok and missing.code == "not_found"


def test_leader_raised_events_are_deduplicated_and_only_leader_kinds_are_accepted() -> None:
    state = fresh()
    zombie = pb.AlertRecord(kind="zombie", dedupe="zombie/t@1/0/1", task="t", error="running for ages")
    assert apply(state, writes.raise_alerts([zombie], **stamp())).accounted == 1  # type: ignore[arg-type]
    assert apply(state, writes.raise_alerts([zombie], **stamp())).accounted == 0  # type: ignore[arg-type]
    [ev] = events(state)
    assert ev.id == "alert-1" and ev.at_ms == T0 + 10 * S
    forged = pb.AlertRecord(kind="run_failed", dedupe="x")
    res = apply(state, writes.raise_alerts([forged], **stamp()))  # type: ignore[arg-type]
    assert not res.ok and "not raised by the leader" in res.message
    assert len(events(state)) == 1


def test_retention_drops_the_oldest_events_beyond_the_cap(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(outbox, "MAX_ALERTS_KEPT", 3)
    state = SchedulerState.load(MemoryStore(), Retention())
    for i in range(5):
        ev = pb.AlertRecord(kind="zombie", dedupe=f"zombie/{i}")
        apply(state, writes.raise_alerts([ev], **stamp(T0 + i)))  # type: ignore[arg-type]
    assert [e.id for e in events(state)] == ["alert-3", "alert-4", "alert-5"]
    assert state.store.get(keys.alert_dedupe_key("zombie/0")) is None  # pruned with its event


def test_the_monitor_finds_attempts_running_past_zombie_after_once_per_leadership() -> None:
    state, run_id = one_run()
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
    monitor = AlertMonitor(AlertsConfig(zombie_after_ms=60_000))
    assert delivery.detect_zombies(monitor, state, T0 + 30 * S) == []
    [z] = delivery.detect_zombies(monitor, state, T0 + 62 * S)
    assert (z.kind, z.execution_id, z.owner, z.dedupe) == (
        "zombie",
        f"{run_id}/0/1",
        "ops",
        f"zombie/{run_id}/0/1",
    )
    assert delivery.detect_zombies(monitor, state, T0 + 70 * S) == []
    monitor.reset()
    assert len(delivery.detect_zombies(monitor, state, T0 + 70 * S)) == 1  # apply dedupes this one


def test_the_zombie_check_reads_only_runs_with_a_running_attempt(monkeypatch: pytest.MonkeyPatch) -> None:
    """A backlog of pending runs is not parsed (it held the state lock and the event loop for
    seconds with 200,000 of them); the running one is still found."""
    state, run_id = one_run()
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
    backlog = TaskSpec("backlog", EVERY_SECOND, overlap=Overlap.ALLOW, command="true")
    assert create(state, backlog, now=T0 + S).ok
    for i in range(2, 6):
        assert apply(state, tick("backlog", 1, T0 + i * S)).fired == 1
    assert len(state.active) > 1
    parsed: list[str] = []
    real = pb.Run.FromString

    def counting(data: bytes) -> pb.Run:
        run = real(data)
        parsed.append(run.run_id)
        return run

    monkeypatch.setattr(pb.Run, "FromString", counting)
    [z] = delivery.detect_zombies(AlertMonitor(AlertsConfig(zombie_after_ms=60_000)), state, T0 + 62 * S)
    assert z.run_id == run_id and parsed == [run_id]


# -- config ----------------------------------------------------------------------------------------


def test_alerts_config_parses_durations_filters_and_secret_files(tmp_path: Path) -> None:
    (tmp_path / "hook.secret").write_text("s3cret\n")
    problems: list[str] = []
    cfg = parse_alerts(
        {
            "zombie_after": "30m",
            "delay_p99_threshold": 2,
            "window": "5m",
            "console_url": "http://console:8080/",
            "webhook": [
                {"url": "https://chat.example/hook", "secret_file": "hook.secret", "kinds": ["run_failed"]},
                {"url": "http://127.0.0.1:9/x", "name": "ops", "owners": ["ops"], "timeout": "2s"},
            ],
        },
        tmp_path,
        problems,
    )
    assert problems == []
    assert cfg.zombie_after_ms == 1_800_000
    # The deprecated key keeps working: the start-delay check at p99 with it as the level.
    levels = cfg.start_delay.default
    assert (levels.quantile, levels.window_ms, levels.critical_ms) == (0.99, 300_000, 2000)
    assert len(cfg.deprecated) == 1 and "delay_p99_threshold is deprecated" in cfg.deprecated[0]
    assert cfg.console_url == "http://console:8080"
    first, second = cfg.webhooks
    assert first.name == "https://chat.example/hook" and first.secret == "s3cret"
    assert first.takes("run_failed", "x", "y") and not first.takes("timeout", "x", "y")
    assert (
        second.timeout_ms == 2000
        and second.takes("lost", "ops", "any")
        and not second.takes("lost", "dev", "")
    )


def test_alerts_config_reports_every_problem_with_its_key_path(tmp_path: Path) -> None:
    problems: list[str] = []
    parse_alerts(
        {
            "zombie_after": "soon",
            "colour": "red",
            "webhook": [
                {"url": "ftp://x"},
                {"url": "http://a/", "secret": "a", "secret_file": "b", "kinds": ["nope"], "bogus": 1},
            ],
        },
        tmp_path,
        problems,
    )
    text = "\n".join(problems)
    for expected in (
        "alerts.colour: unknown key",
        "alerts.zombie_after:",
        "alerts.webhook[0].url: 'ftp://x' is not an http:// or https:// URL",
        "alerts.webhook[1].bogus: unknown key",
        "alerts.webhook[1].secret_file: set at most one",
        "alerts.webhook[1].kinds: unknown kind nope",
    ):
        assert expected in text, text


def test_the_signature_is_an_hmac_of_the_raw_body() -> None:
    body = delivery.encode({"id": "alert-1", "kind": "run_failed"})
    header = delivery.sign("k", body)
    assert header.startswith("sha256=") and delivery.verify("k", body, header)
    assert not delivery.verify("other", body, header) and not delivery.verify("k", body + b" ", header)


# -- the delivery loop -----------------------------------------------------------------------------


class FakeGate:
    def __init__(self) -> None:
        self.leading = True
        self.epoch = 1
        self.now = T0 + 100 * S

    def leading_and_ready(self) -> bool:
        return self.leading

    def stamp(self) -> Stamp:
        if not self.leading:
            raise NotLeader("not the leader", None)
        return Stamp(self.now, self.epoch, "n1")


class FakeNode:
    """A node whose proposals apply at once to one state machine."""

    def __init__(self, state: SchedulerState) -> None:
        self.state = state
        self.store = state.store
        self.gate = FakeGate()
        self.proposed: list[str] = []

    def propose(self, data: bytes, callback: ProposeCallback, on_commit: CommitHook | None = None) -> None:
        self.proposed.append(codec.decode_command(data).WhichOneof("body") or "")
        callback(self.state.apply(data).encode(), None)


class FakePost:
    def __init__(self) -> None:
        self.received: list[tuple[str, bytes, dict[str, str]]] = []
        self.fail_next = 0

    async def __call__(self, hook: Webhook, body: bytes, headers: Mapping[str, str]) -> None:
        if self.fail_next:
            self.fail_next -= 1
            raise delivery.DeliveryFailed("HTTP 503")
        self.received.append((hook.name, body, dict(headers)))


def _three_events() -> SchedulerState:
    state = fresh()
    for i, owner in enumerate(("ops", "dev", "ops")):
        ev = pb.AlertRecord(kind="zombie", dedupe=f"zombie/{i}", owner=owner, run_id=f"t@{i}")
        apply(state, writes.raise_alerts([ev], **stamp(T0 + i)))  # type: ignore[arg-type]
    return state


@contextlib.contextmanager
def fast_backoff(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    monkeypatch.setattr(delivery, "POLL_S", 0.001)
    monkeypatch.setattr(delivery, "BACKOFF_BASE_S", 0.001)
    yield


def test_delivery_posts_in_order_signs_filters_and_commits_the_cursor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = _three_events()
    node = FakeNode(state)
    post = FakePost()
    hooks = (
        Webhook(url="http://h/a", name="all", secret="k"),
        Webhook(url="http://h/o", name="ops", owners=frozenset({"ops"})),
    )
    cfg = AlertsConfig(console_url="http://console", webhooks=hooks)

    async def scenario() -> None:
        loop = delivery.AlertLoop(node, cfg, "prod", post=post, rng=random.Random(0))
        loop.start()
        try:
            await until(lambda: cursors(state) == {"all": 3, "ops": 3}, what="both cursors at 3")
        finally:
            await loop.stop()

    with fast_backoff(monkeypatch):
        asyncio.run(scenario())
    by_target = {t: [delivery_id(h) for tt, _, h in post.received if tt == t] for t in ("all", "ops")}
    assert by_target == {"all": ["alert-1", "alert-2", "alert-3"], "ops": ["alert-1", "alert-3"]}
    body, headers = next((b, h) for t, b, h in post.received if t == "all")
    assert delivery.verify("k", body, headers[delivery.SIGNATURE_HEADER])
    assert all(delivery.SIGNATURE_HEADER not in h for t, _, h in post.received if t == "ops")
    sent = json.loads(body)
    assert sent["cluster"] == "prod" and sent["link"] == f"http://console/runs/{sent['run_id']}"


def delivery_id(headers: Mapping[str, str]) -> str:
    return headers[delivery.ID_HEADER]


def test_a_failed_post_is_retried_and_later_events_wait_behind_it(monkeypatch: pytest.MonkeyPatch) -> None:
    state = _three_events()
    node = FakeNode(state)
    post = FakePost()
    post.fail_next = 3
    cfg = AlertsConfig(webhooks=(Webhook(url="http://h/a", name="all"),))

    async def scenario() -> None:
        loop = delivery.AlertLoop(node, cfg, "prod", post=post, rng=random.Random(0))
        loop.start()
        try:
            await until(lambda: len(post.received) == 3, what="3 posts")
        finally:
            await loop.stop()

    with fast_backoff(monkeypatch):
        asyncio.run(scenario())
    assert [delivery_id(h) for _, _, h in post.received] == ["alert-1", "alert-2", "alert-3"]


def test_a_follower_delivers_nothing_and_a_new_leader_resumes_from_the_committed_cursor(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = _three_events()
    apply(state, writes.alerts_delivered("all", 2, **stamp()))  # type: ignore[arg-type]
    node = FakeNode(state)
    node.gate.leading = False
    post = FakePost()
    cfg = AlertsConfig(webhooks=(Webhook(url="http://h/a", name="all"),))

    async def scenario() -> None:
        loop = delivery.AlertLoop(node, cfg, "prod", post=post, rng=random.Random(0))
        loop.start()
        try:
            await asyncio.sleep(0.05)
            assert post.received == []
            node.gate.leading = True
            node.gate.epoch = 2
            await until(lambda: len(post.received) == 1, what="1 post")
        finally:
            await loop.stop()

    with fast_backoff(monkeypatch):
        asyncio.run(scenario())
    assert delivery_id(post.received[0][2]) == "alert-3"


def test_backoff_is_capped_and_jittered() -> None:
    rng = random.Random(1)
    waits = [delivery.backoff_s(n, rng) for n in (1, 2, 3, 30)]
    assert 0.4 <= waits[0] <= 0.6 and 0.8 <= waits[1] <= 1.2 and 1.6 <= waits[2] <= 2.4
    assert waits[3] <= delivery.BACKOFF_CAP_S * 1.2


def test_the_alert_loop_raises_and_delivers_a_start_delay_from_the_starts_apply_reported(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """As a node wires it: apply feeds the reported starts (SchedulerState.on_start), the loop
    drains them, measures the namespace's p95 and proposes a start_delay event with its severity;
    the webhook receives it with "severity"."""
    from raftsched.alerts.monitor import StartDelays

    state = fresh()
    starts = StartDelays(AlertsConfig().start_delay)
    state.on_start = starts.record
    assert create(state, TaskSpec("t", EVERY_SECOND, command="x", namespace="etl")).ok
    assert apply(state, tick("t", 1, T0 + S)).fired == 1
    run_id = f"t@{T0 + S}"
    assert apply(state, join("ex1")).ok
    assert apply(state, assign(T0 + 2 * S, (run_id, 0, 1, "ex1"))).ok
    assert apply(state, result(T0 + 400 * S, run_id, 1, "ex1", True, start_lateness_ms=390_000)).ok
    node = FakeNode(state)
    node.gate.now = T0 + 401 * S
    post = FakePost()
    cfg = AlertsConfig(webhooks=(Webhook(url="http://h/a", name="all"),))

    async def scenario() -> None:
        loop = delivery.AlertLoop(node, cfg, "prod", post=post, rng=random.Random(0), start_delays=starts)
        loop.start()
        try:
            await until(lambda: bool(post.received), what="the start_delay event delivered")
        finally:
            await loop.stop()

    with fast_backoff(monkeypatch):
        asyncio.run(scenario())
    body = json.loads(post.received[0][1])
    assert (body["kind"], body["severity"], body["namespace"]) == ("start_delay", "critical", "etl")
    assert "start delay p95 6m 30s" in body["reason"]
