"""Alerts delivered across failover: a failing task's alert reaches a local webhook (an HTTP server
started by the test) with owner and execution id, signed, exactly once per target and id as the
receiver sees it after deduplicating on the id, with the leader SIGKILLed between the failure
(the event is committed) and the delivery (the webhook refused every POST until then)."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest

from raftsched.alerts.delivery import ID_HEADER, SIGNATURE_HEADER, verify
from raftsched.cli.parser import main as cli_main
from raftsched.client import Client
from raftsched.model import ManualTrigger, OnceTrigger, TaskSpec
from raftsched.testing.cluster import wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.conftest import ClusterFactory

pytestmark = pytest.mark.integration

SECRET = "webhook-secret-for-the-test"


class Receiver:
    """A webhook on 127.0.0.1 (OS-assigned port) that answers 503 until :attr:`accept` is set."""

    def __init__(self) -> None:
        self.accept = threading.Event()
        self.refused = 0
        self.received: list[tuple[str, bytes, str]] = []  # (id header, body, signature header)
        self.lock = threading.Lock()
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                with receiver.lock:
                    if not receiver.accept.is_set():
                        receiver.refused += 1
                        self.send_response(503)
                    else:
                        receiver.received.append(
                            (self.headers.get(ID_HEADER, ""), body, self.headers.get(SIGNATURE_HEADER, ""))
                        )
                        self.send_response(200)
                self.end_headers()

            def log_message(self, format: str, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}/hook"

    def events(self) -> list[dict[str, object]]:
        with self.lock:
            return [json.loads(body) for _, body, _ in self.received]

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def receiver() -> Iterator[Receiver]:
    r = Receiver()
    try:
        yield r
    finally:
        r.close()


def test_a_failed_run_alert_survives_a_leader_sigkill_before_delivery(
    make_cluster: ClusterFactory, receiver: Receiver, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster = make_cluster(
        extra_config=f'[alerts]\n\n[[alerts.webhook]]\nname = "chat"\nurl = "{receiver.url}"\n'
        f'secret = "{SECRET}"\ntimeout = "2s"\n'
    )
    cluster.wait_for_leader()
    executor = cluster.start_executor("ex1")
    try:
        with Client(cluster.targets()) as client:
            spec = TaskSpec(
                "nightly-sync",
                ManualTrigger(),
                command="echo copying; echo 'disk full' >&2; exit 3",
                owner="data-team",
                namespace="etl",
                max_retries=0,
            )
            client.add_task(spec)
            run = client.trigger("nightly-sync")

            def pending_alert() -> pb.AlertInfo | None:
                infos = [i for i in client.alerts() if i.alert.kind == "run_failed"]
                return infos[0] if infos else None

            info = wait_until(pending_alert, 60, what="the run_failed alert committed")
            assert info.alert.run_id == run.run_id
            wait_until(lambda: receiver.refused >= 1, 30, what="the webhook refused a POST")
            assert [d.state for d in info.deliveries] == ["pending"]

            old = cluster.wait_for_leader()
            cluster.kill(old)
            new = cluster.wait_for_leader(among=[n for n in ("n1", "n2", "n3") if n != old])
            assert new != old
            receiver.accept.set()
            wait_until(lambda: receiver.events(), 60, what="the alert delivered by the new leader")

            def delivered() -> bool:
                infos = [i for i in client.alerts() if i.alert.id == info.alert.id]
                return bool(infos) and [d.state for d in infos[0].deliveries] == ["delivered"]

            wait_until(delivered, 30, what="the delivered cursor committed")

            # The CLI lists the event with its delivery state and acknowledges it.
            where = ["--cluster", ",".join(cluster.targets())]
            capsys.readouterr()
            assert cli_main([*where, "alerts", "--json"]) == 0
            listed = json.loads(capsys.readouterr().out)
            mine = [e for e in listed if e["alert"]["id"] == info.alert.id]
            assert mine and mine[0]["deliveries"] == [{"target": "chat", "state": "delivered"}]
            assert cli_main([*where, "alerts", "ack", info.alert.id]) == 0
            assert f"{info.alert.id} acknowledged" in capsys.readouterr().out
            # Reads come from whichever node answers, which may lag the leader by a few entries.
            wait_until(
                lambda: any(i.alert.acked_ms for i in client.alerts() if i.alert.id == info.alert.id),
                10,
                what="the acknowledgement visible",
            )
    finally:
        executor.terminate()
        executor.wait(10)

    failed = [(i, b, s) for i, b, s in receiver.received if json.loads(b)["kind"] == "run_failed"]
    ids = {i for i, _, _ in failed}
    assert ids == {info.alert.id}, f"one alert id for one failure, got {ids}"  # exactly once after dedupe
    assert len({b for _, b, _ in failed}) == 1  # a repeat (if any) is byte-identical
    _, body, signature = failed[0]
    assert verify(SECRET, body, signature)
    event = json.loads(body)
    assert event["owner"] == "data-team" and event["namespace"] == "etl"
    assert event["execution_id"] == f"{run.run_id}/0/1" and event["run_id"] == run.run_id
    assert "disk full" in event["output_tail"] and event["task"] == "nightly-sync"
    print(f"raw deliveries of {info.alert.id}: {len(failed)}, refused before the kill: {receiver.refused}")


def test_start_delay_and_freshness_alerts_from_a_real_cluster(make_cluster: ClusterFactory) -> None:
    """Issue 36 §1-2 end to end: a task whose run waits for an executor starts late (a
    ``start_delay`` warning for its namespace, measured from the executor's reported start), a
    task that never runs misses its freshness once, and ``explain`` shows the freshness state."""
    cluster = make_cluster(
        extra_config='[alerts]\nzombie_after = "4s"\n\n[alerts.start_delay]\nwindow = "1m"\n'
        'warning = "1s"\ncritical = "1m"\n'
    )
    cluster.wait_for_leader()
    with Client(cluster.targets()) as client:
        client.add_task(TaskSpec("stale", ManualTrigger(), command="true", owner="ops", freshness_ms=2000))
        now = int(time.time() * 1000)
        client.add_task(TaskSpec("late", OnceTrigger(now + 1000), command="true", namespace="etl"))

        def kind(k: str) -> list[pb.AlertRecord]:
            return [i.alert for i in client.alerts() if i.alert.kind == k]

        [stale] = wait_until(lambda: kind("freshness"), 60, what="the freshness alert")
        assert stale.task == "stale" and stale.owner == "ops" and "since it was created" in stale.error
        reply = client.explain("stale", now)
        assert any(d.startswith("freshness 2s: missed by") for d in reply.details), reply.details
        wait_until(lambda: client.runs("late"), 30, what="the late task's run")
        # The run waits for an executor: start one 2.5 s after its nominal time at the earliest.
        wait_until(lambda: time.time() * 1000 >= now + 3500, 30, what="2.5 s past the nominal time")
        executor = cluster.start_executor("ex1")
        try:
            [late] = wait_until(lambda: kind("start_delay"), 60, what="the start_delay alert")
        finally:
            executor.terminate()
            executor.wait(10)
        assert (late.namespace, late.severity) == ("etl", "warning")
        assert len(kind("freshness")) == 1  # checked every second since: one miss, one event
