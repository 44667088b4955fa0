"""Severity and routing (issue 36 §5): the severity table, failure streaks (one alert, then a count
at most once per interval, then a resolved notice at the next success), the payload formats
(JSON, Slack, Alertmanager, email) and the targets' severity filter, on the real state machine."""

from __future__ import annotations

import asyncio
import json
import random
from email.message import EmailMessage
from pathlib import Path

import pytest

from raftsched import codec
from raftsched.abc import CommitHook, ProposeCallback, ProposeError
from raftsched.alerts import delivery, formats, routing
from raftsched.alerts.config import AlertsConfig, EmailTarget, Webhook, parse_alerts
from raftsched.alerts.routing import Notice, StreakBook
from raftsched.fsm import alerts as outbox
from raftsched.fsm.queries import list_runs
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import T0, S, apply, assign, create, fresh, join, result, trigger
from tests.support.wait import until
from tests.unit.test_alerts import FakeNode, FakePost, fast_backoff

MIN = 60 * S


def failure(
    seq: int,
    at: int,
    task: str = "t",
    owner: str = "",
    namespace: str = "",
    error: str = "",
    output_tail: str = "",
) -> pb.AlertRecord:
    return pb.AlertRecord(
        seq=seq,
        id=f"alert-{seq}",
        kind="run_failed",
        task=task,
        at_ms=at,
        run_id=f"{task}@{seq}",
        owner=owner,
        namespace=namespace,
        error=error,
        output_tail=output_tail,
    )


# -- severity ---------------------------------------------------------------------------------------


def test_every_kind_has_a_severity_overridable_per_kind_and_an_unlisted_kind_is_warning(
    tmp_path: Path,
) -> None:
    problems: list[str] = []
    cfg = parse_alerts({"severity": {"timeout": "critical", "run_failed": "info"}}, tmp_path, problems)
    assert problems == []
    assert cfg.severity("timeout") == "critical" and cfg.severity("run_failed") == "info"
    assert cfg.severity("lost") == "warning" and cfg.severity("fire_skipped") == "info"
    assert cfg.severity("zombie") == routing.DEFAULT_SEVERITIES["zombie"]
    assert cfg.severity("a_kind_added_later") == routing.DEFAULT_SEVERITY == "warning"
    assert routing.at_least("critical", "warning") and not routing.at_least("info", "warning")


def test_a_target_filters_by_minimum_severity_kind_owner_and_namespace() -> None:
    hook = Webhook(url="http://h", name="h", min_severity="warning", owners=frozenset({"ops"}))
    assert hook.takes("run_failed", "ops", "etl", "critical") and hook.takes("lost", "ops", "", "warning")
    assert not hook.takes("fire_skipped", "ops", "", "info")
    assert not hook.takes("run_failed", "dev", "", "critical")


# -- streaks ----------------------------------------------------------------------------------------


def test_a_failure_streak_sends_one_alert_then_a_count_at_most_once_per_interval_then_resolved() -> None:
    book = StreakBook(interval_ms=60 * MIN)
    decisions = [book.observe(failure(i + 1, T0 + i * 10 * MIN)) for i in range(13)]  # every 10 min
    assert [d.send for d in decisions] == [True] + [False] * 5 + [True] + [False] * 5 + [True]
    assert [d.streak for d in decisions] == list(range(1, 14))
    count = decisions[6]
    assert count.text.startswith("failing: 7 runs in a row since 2023-11-14T22:14:00.000Z")
    [open_streak] = book.open_streaks()
    assert (open_streak.first_seq, open_streak.last_seq, open_streak.count) == (1, 13, 13)

    run = pb.Run(run_id="t@99", task="t", state=pb.SUCCEEDED, finished_ms=T0 + 200 * MIN)
    assert routing.recovery_run(open_streak, [run]) is run
    record = routing.recovered(open_streak, run)
    assert record.resolved and record.resolves_seq == 13 and record.dedupe == "run_failed/t/resolved/13"
    record.seq, record.at_ms = 14, T0 + 200 * MIN
    done = book.observe(record)
    assert done.send and done.streak == 13 and done.text.startswith("resolved: run t@99 succeeded")
    assert book.open_streaks() == []
    again = book.observe(failure(15, T0 + 201 * MIN))
    assert again.send and again.streak == 1  # a new streak starts with an alert of its own


def test_a_resolved_notice_older_than_the_newest_failure_is_suppressed_and_the_streak_goes_on() -> None:
    book = StreakBook(interval_ms=60 * MIN)
    book.observe(failure(1, T0))
    book.observe(failure(2, T0 + MIN))
    stale = pb.AlertRecord(
        seq=3, kind="run_failed", task="t", resolved=True, resolves_seq=1, at_ms=T0 + 2 * MIN
    )
    assert not book.observe(stale).send
    assert book.observe(failure(4, T0 + 3 * MIN)).streak == 3


def test_other_kinds_and_streaks_of_other_tasks_are_independent() -> None:
    book = StreakBook(interval_ms=60 * MIN)
    assert book.observe(failure(1, T0, task="a")).send
    assert book.observe(failure(2, T0, task="b")).send
    zombie = pb.AlertRecord(seq=3, kind="zombie", task="a", at_ms=T0)
    assert book.observe(zombie) == Notice(zombie, send=True, since_ms=T0)
    assert not book.observe(failure(4, T0 + S, task="a")).send


# -- formats ----------------------------------------------------------------------------------------


def test_the_alertmanager_body_has_the_labels_annotations_and_ends_a_resolved_alert() -> None:
    alert = failure(7, T0, owner="data", namespace="etl", error="exit 3", output_tail="disk full\n")
    firing = formats.alertmanager_body(Notice(alert, True, 1, T0), "critical", "prod", "http://c/runs/t@7")
    assert firing == [
        {
            "labels": {
                "alertname": "RaftschedRunFailed",
                "severity": "critical",
                "kind": "run_failed",
                "cluster": "prod",
                "task": "t",
                "namespace": "etl",
                "owner": "data",
            },
            "annotations": {
                "summary": "[prod] CRITICAL run_failed t: exit 3",
                "description": "exit 3",
                "reason": "exit 3",
                "alert_id": "alert-7",
                "run_id": "t@7",
                "output_tail": "disk full\n",
                "streak": "1",
                "link": "http://c/runs/t@7",
            },
            "startsAt": "2023-11-14T22:14:00.000Z",
            "generatorURL": "http://c/runs/t@7",
        }
    ]
    ended = pb.AlertRecord(
        kind="run_failed", task="t", owner="data", namespace="etl", resolved=True, at_ms=T0 + MIN
    )
    [body] = formats.alertmanager_body(Notice(ended, True, 3, T0), "critical", "prod", "")
    assert body["labels"] == firing[0]["labels"]  # the same alert to Alertmanager
    assert body["endsAt"] == "2023-11-14T22:15:00.000Z" and "generatorURL" not in body
    assert formats.alertmanager_url("http://am:9093") == "http://am:9093/api/v2/alerts"
    assert formats.alertmanager_url("http://am:9093/api/v2/alerts") == "http://am:9093/api/v2/alerts"


def test_slack_json_and_email_bodies() -> None:
    alert = failure(7, T0 + 90 * MIN, owner="data", error="exit 3")
    notice = Notice(alert, True, 12, T0)
    slack = formats.slack_body(notice, "critical", "prod", "")
    since = "2023-11-14T22:14:00.000Z"
    assert (
        slack["text"]
        == f"[prod] CRITICAL run_failed t: failing: 12 runs in a row since {since} (last: exit 3)"
    )
    assert isinstance(slack["blocks"], list) and slack["blocks"][0]["type"] == "section"
    body = formats.json_body(notice, "critical", "prod", "")
    assert (body["severity"], body["streak"], body["streak_since_ms"]) == ("critical", 12, T0)
    subject, text = formats.email_text(notice, "critical", "prod", "")
    assert subject == slack["text"] and "owner     data" in text and "severity  critical" in text


# -- config -----------------------------------------------------------------------------------------


def test_email_targets_formats_and_min_severity_parse_and_every_problem_is_reported(tmp_path: Path) -> None:
    (tmp_path / "pw").write_text("hunter2\n")
    problems: list[str] = []
    cfg = parse_alerts(
        {
            "streak_interval": "30m",
            "webhook": [{"url": "http://am:9093", "format": "alertmanager", "min_severity": "warning"}],
            "email": [
                {
                    "host": "smtp.example",
                    "user": "alerts",
                    "password_file": "pw",
                    "from": "sched@example.com",
                    "to": ["oncall@example.com"],
                    "kinds": ["run_failed"],
                }
            ],
        },
        tmp_path,
        problems,
    )
    assert problems == []
    assert cfg.streak_interval_ms == 30 * MIN
    [hook] = cfg.webhooks
    assert hook.url == "http://am:9093/api/v2/alerts" and hook.min_severity == "warning"
    [mail] = cfg.emails
    assert (mail.name, mail.port, mail.password, mail.starttls) == (
        "email:oncall@example.com",
        587,
        "hunter2",
        True,
    )
    assert [t.name for t in cfg.targets] == ["http://am:9093", "email:oncall@example.com"]

    problems = []
    parse_alerts(
        {
            "severity": {"nope": "critical", "timeout": "loud"},
            "webhook": [{"url": "http://x", "format": "xml", "min_severity": "high"}],
            "email": [{"host": "", "from": "x", "to": [], "user": "u", "starttls": False, "port": 0}],
        },
        tmp_path,
        problems,
    )
    assert sorted(problems) == sorted(
        [
            "alerts.webhook[0].format: 'xml' is not one of json, slack, alertmanager",
            "alerts.webhook[0].min_severity: 'high' is not one of info, warning, critical",
            "alerts.email[0].host: required (the SMTP server's host name)",
            "alerts.email[0].port: expected a port number 1-65535, got 0",
            "alerts.email[0].from: required (the sender's address)",
            "alerts.email[0].to: expected a non-empty list of addresses",
            "alerts.email[0].password_file: required with user (a file holding the password)",
            "alerts.email[0].starttls: a password is never sent in clear text: set starttls = true",
            "alerts.severity.nope: unknown kind (known: " + ", ".join(sorted_kinds()) + ")",
            "alerts.severity.timeout: 'loud' is not one of info, warning, critical",
        ]
    )


def sorted_kinds() -> list[str]:
    from raftsched.model import ALERT_KINDS

    return list(ALERT_KINDS)


# -- the leader may resolve run_failed, in format 8 ------------------------------------------------


def test_the_leader_may_raise_a_resolved_run_failed_only_and_it_needs_the_routing_format() -> None:
    state = fresh()
    stamp = {"now_ms": T0, "epoch": 1, "origin": "n1"}
    ok = pb.AlertRecord(
        kind="run_failed", resolved=True, resolves_seq=1, dedupe="run_failed/t/resolved/1", task="t"
    )
    data = writes.raise_alerts([ok], **stamp)  # type: ignore[arg-type]
    assert codec.decode_command(data).format == codec.ROUTING_FORMAT
    assert apply(state, data).accounted == 1
    assert apply(state, data).accounted == 0  # deduplicated
    firing = pb.AlertRecord(kind="run_failed", dedupe="x", task="t")
    assert not apply(state, writes.raise_alerts([firing], **stamp)).ok  # type: ignore[arg-type]
    zombie = pb.AlertRecord(kind="zombie", dedupe="zombie/x")
    assert codec.decode_command(writes.raise_alerts([zombie], **stamp)).format == 1  # type: ignore[arg-type]


# -- the loop, on the state machine -----------------------------------------------------------------


def failing_task_state() -> SchedulerState:
    state = fresh()
    assert create(state, TaskSpec("nightly", ManualTrigger(), command="x", owner="data", namespace="etl")).ok
    assert apply(state, join("ex1")).ok
    return state


def run_once(state: SchedulerState, at: int, ok: bool) -> str:
    run_id = trigger(state, "nightly", now=at).run.run_id
    assert apply(state, assign(at + 1, (run_id, 0, 1, "ex1"))).accounted == 1
    assert apply(state, result(at + 2, run_id, 1, "ex1", ok, error="" if ok else "exit 3")).ok
    return run_id


class FakeMail:
    def __init__(self) -> None:
        self.sent: list[EmailMessage] = []

    async def __call__(self, target: EmailTarget, msg: EmailMessage) -> list[str]:
        self.sent.append(msg)
        return []


def test_the_loop_sends_a_streak_once_then_a_count_then_resolved_at_the_next_success(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(delivery, "RECOVERY_POLL_S", 0.001)
    state = failing_task_state()
    for i in range(5):
        run_once(state, T0 + i * 20 * MIN, ok=False)  # five failures, 20 minutes apart
    node = FakeNode(state)
    node.gate.now = T0 + 200 * MIN
    post, mail = FakePost(), FakeMail()
    hooks = (
        Webhook(url="http://am/api/v2/alerts", name="am", format="alertmanager"),
        Webhook(url="http://h/chat", name="chat", min_severity="critical", format="slack"),
        Webhook(url="http://h/info", name="quiet", kinds=frozenset({"run_failed"}), min_severity="critical"),
    )
    mails = (EmailTarget(name="mail", host="smtp", sender="s@x", to=("o@x",)),)
    cfg = AlertsConfig(
        webhooks=hooks, emails=mails, streak_interval_ms=60 * MIN, severities=(("run_failed", "warning"),)
    )

    def received(target: str) -> list[object]:
        return [json.loads(b) for t, b, _ in post.received if t == target]

    async def scenario() -> None:
        loop = delivery.AlertLoop(node, cfg, "prod", post=post, rng=random.Random(0), mail=mail)
        loop.start()
        try:
            await until(lambda: len(received("am")) == 2 and len(mail.sent) == 2, what="alert and count")
            run_once(state, T0 + 120 * MIN, ok=True)
            await until(lambda: len(received("am")) == 3 and len(mail.sent) == 3, what="the resolved notice")
        finally:
            await loop.stop()

    with fast_backoff(monkeypatch):
        asyncio.run(scenario())
    first, count, resolved = (b[0] for b in received("am"))  # type: ignore[index]
    assert first["labels"]["severity"] == "warning" and first["labels"]["task"] == "nightly"
    assert count["annotations"]["description"].startswith(
        "failing: 4 runs in a row since"
    )  # failures 1..4, 60 min
    assert "endsAt" not in count and resolved["endsAt"] and resolved["labels"] == first["labels"]
    assert "succeeded after 5 failed run(s)" in resolved["annotations"]["reason"]
    assert received("chat") == [] and received("quiet") == []  # run_failed is only "warning" here
    subjects = [m["Subject"] for m in mail.sent]
    assert subjects[0] == "[prod] WARNING run_failed nightly: exit 3"
    assert subjects[2].startswith("[prod] RESOLVED run_failed nightly: resolved: run nightly@")
    view = delivery.delivery_view(state.store, cfg, 0, 0)
    states = [next(d.state for d in i.deliveries if d.target == "am") for i in view]
    assert states == ["delivered", "suppressed", "suppressed", "delivered", "suppressed", "delivered"]


def test_a_node_alert_goes_to_email_and_webhook_targets_in_their_formats() -> None:
    state = fresh()
    node = FakeNode(state)
    mail, post = FakeMail(), FakePost()
    cfg = AlertsConfig(
        webhooks=(
            Webhook(url="http://h/chat", name="chat", format="slack"),
            Webhook(url="http://h/x", name="info-only", kinds=frozenset({"fire_skipped"})),
        ),
        emails=(EmailTarget(name="mail", host="smtp", sender="s@x", to=("o@x",), min_severity="critical"),),
    )

    async def scenario() -> None:
        loop = delivery.AlertLoop(node, cfg, "prod", post=post, rng=random.Random(0), mail=mail)
        loop.raise_node_alert("store_damaged", "n2", "checksum mismatch", T0)
        await until(lambda: len(mail.sent) == 1 and len(post.received) == 1, what="the mail and the POST")
        await loop.stop()

    asyncio.run(scenario())
    assert mail.sent[0]["Subject"] == "[prod] CRITICAL store_damaged cluster: node n2: checksum mismatch"
    [(target, body, _)] = post.received
    assert target == "chat" and json.loads(body)["text"] == mail.sent[0]["Subject"]


def test_a_task_failing_every_hour_for_three_days_is_one_alert_and_a_count_every_four_hours() -> None:
    """The seeds' incident on the real state machine: 72 hourly failures with the default
    interval are 18 notices (the first, then a count every 4 h), not 72; the next success ends it."""
    state = failing_task_state()
    hour = 60 * MIN
    for i in range(72):
        run_once(state, T0 + i * hour, ok=False)
    cfg = AlertsConfig(webhooks=(Webhook(url="http://h", name="h"),))
    sent = [
        i for i in delivery.delivery_view(state.store, cfg, 0, 0) if i.deliveries[0].state != "suppressed"
    ]
    book = StreakBook()
    with state.store.reader() as r:
        notices = [book.observe(a) for a in outbox.list_alerts(r, 0, 0)]
    assert len(sent) == 18 and [n.streak for n in notices if n.send][:3] == [1, 5, 9]
    assert [n for n in notices if n.send][-1].text.startswith(
        "failing: 69 runs in a row since 2023-11-14T22:14:00.002Z"
    )
    [streak] = book.open_streaks()
    success = run_once(state, T0 + 72 * hour, ok=True)
    with state.store.reader() as r:
        run = routing.recovery_run(streak, list_runs(r, ["nightly"], 0, 0, 0, 5))
    assert run is not None and run.run_id == success


class FlakyNode(FakeNode):
    """The first proposal of resolved records does not commit (a lost leadership, a timeout)."""

    def __init__(self, state: SchedulerState) -> None:
        super().__init__(state)
        self.dropped = 0

    def propose(self, data: bytes, callback: ProposeCallback, on_commit: CommitHook | None = None) -> None:
        if codec.decode_command(data).WhichOneof("body") == "raise_alerts" and not self.dropped:
            self.dropped += 1
            callback(None, ProposeError("not_leader", "lost leadership"))
            return
        super().propose(data, callback, on_commit)


def test_a_resolved_record_that_did_not_commit_is_proposed_again(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(delivery, "RECOVERY_POLL_S", 0.001)
    state = failing_task_state()
    run_once(state, T0, ok=False)
    run_once(state, T0 + MIN, ok=True)
    node = FlakyNode(state)

    async def scenario() -> None:
        loop = delivery.AlertLoop(node, AlertsConfig(), "prod", post=FakePost(), rng=random.Random(0))
        loop.start()
        try:
            await until(lambda: any(a.resolved for a in outbox_events(state)), what="the resolved record")
        finally:
            await loop.stop()

    asyncio.run(scenario())
    assert node.dropped == 1
    assert [(a.kind, a.resolved, a.resolves_seq) for a in outbox_events(state)] == [
        ("run_failed", False, 0),
        ("run_failed", True, 1),
    ]


def outbox_events(state: SchedulerState) -> list[pb.AlertRecord]:
    with state.store.reader() as r:
        return outbox.list_alerts(r, 0, 0)
