"""Severity and routing with real components (issue 36 §5): a real cluster whose task fails sends
its alert to a real Alertmanager (``POST /api/v2/alerts``, read back from its API with its labels
and severity) and a real SMTP server (aiosmtpd, STARTTLS and AUTH); a second failure within the
streak interval is suppressed; the next success raises the resolved notice, which ends the
Alertmanager alert and sends a RESOLVED mail. The test prints the latency from the command's
exit to Alertmanager receiving the alert (``ROUTING_TEST_NODES=3``: on a 3-node cluster; default 1)."""

from __future__ import annotations

import dataclasses
import datetime as dt
import os
import re
import time
from pathlib import Path

import pytest

from raftsched.alerts import smtp
from raftsched.alerts.config import EmailTarget
from raftsched.client import Client
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.testing.cluster import wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests import alertmanager
from tests.integration.conftest import ClusterFactory
from tests.support import smtpd

pytestmark = pytest.mark.integration


def _ms(rfc3339: str) -> float:
    """Alertmanager's RFC 3339 time (nanoseconds) as Unix milliseconds."""
    m = re.fullmatch(r"(.*T\d\d:\d\d:\d\d)(?:\.(\d+))?(Z|[+-]\d\d:\d\d)", rfc3339)
    assert m, rfc3339
    whole = dt.datetime.fromisoformat(m[1] + ("+00:00" if m[3] == "Z" else m[3]))
    return whole.timestamp() * 1000 + float("0." + (m[2] or "0")) * 1000


def test_a_failing_task_reaches_alertmanager_and_email_once_per_streak_and_recovery_resolves_it(
    make_cluster: ClusterFactory, tmp_path: Path
) -> None:
    work = tmp_path / "work"
    work.mkdir()
    password = tmp_path / "smtp.password"
    password.write_text(smtpd.PASSWORD + "\n")
    with alertmanager.running(tmp_path / "am") as am, smtpd.smtp_server(tmp_path / "smtp") as box:
        cluster = make_cluster(
            nodes=int(os.environ.get("ROUTING_TEST_NODES", "1")),
            extra_config=f"""
[alerts]
console_url = "http://console.test:9101"
streak_interval = "1h"

[[alerts.webhook]]
name = "am"
url = "{am.url}"
format = "alertmanager"
timeout = "2s"

[[alerts.email]]
name = "oncall"
host = "{box.host}"
port = {box.port}
user = "{smtpd.USER}"
password_file = "{password}"
from = "raftsched@test.invalid"
to = ["oncall@test.invalid"]
ca_file = "{box.ca_file}"
min_severity = "critical"
timeout = "5s"
""",
        )
        cluster.wait_for_leader()
        executor = cluster.start_executor("ex1")
        try:
            with Client(cluster.targets()) as client:
                # Fails (and notes when it exited) until the file "ok" exists.
                command = (
                    f"cd {work} && if [ -f ok ]; then exit 0; fi; "
                    "echo 'disk full' >&2; date +%s%N > failed_at; exit 3"
                )
                client.add_task(
                    TaskSpec(
                        "nightly-sync", ManualTrigger(), command=command, owner="data-team", namespace="etl"
                    )
                )
                # Registered before the first trigger: work due with no executor is an alert of
                # its own (no_executor), which this test is not about.
                wait_until(
                    lambda: any(e.name == "ex1" for e in client.list_executors().executors),
                    60,
                    0.1,
                    "ex1 registered",
                )
                first = client.trigger("nightly-sync")
                [alert] = wait_until(
                    lambda: am.alerts(alertname="RaftschedRunFailed", task="nightly-sync"),
                    60,
                    0.05,
                    "the alert in Alertmanager",
                )
                failed_ms = int((work / "failed_at").read_text()) / 1e6
                latency_ms = _ms(alert["updatedAt"]) - failed_ms
                labels = alert["labels"]
                assert labels == {
                    "alertname": "RaftschedRunFailed",
                    "severity": "critical",
                    "kind": "run_failed",
                    "cluster": "local",
                    "task": "nightly-sync",
                    "namespace": "etl",
                    "owner": "data-team",
                }
                assert alert["status"]["state"] == "active"
                assert alert["annotations"]["reason"] == "exit code 3"
                assert "disk full" in alert["annotations"]["output_tail"]
                assert alert["generatorURL"] == f"http://console.test:9101/runs/{first.run_id}"
                wait_until(lambda: len(box.received()) == 1, 30, 0.05, "the first mail")

                # A second failure within the streak interval: suppressed on both targets.
                second = client.trigger("nightly-sync")

                def second_failed() -> pb.AlertInfo | None:
                    found = [i for i in client.alerts() if i.alert.run_id == second.run_id]
                    return (
                        found[0] if found and all(d.state != "pending" for d in found[0].deliveries) else None
                    )

                info = wait_until(second_failed, 60, 0.1, "the second failure routed")
                assert [(d.target, d.state) for d in info.deliveries] == [
                    ("am", "suppressed"),
                    ("oncall", "suppressed"),
                ]
                assert len(am.alerts(task="nightly-sync")) == 1 and len(box.received()) == 1

                # Recovery: the next success ends the streak; Alertmanager's alert ends with it.
                (work / "ok").write_text("")
                client.trigger("nightly-sync")
                wait_until(
                    lambda: not am.alerts(task="nightly-sync"), 60, 0.1, "the alert resolved in Alertmanager"
                )
                resolved = [i for i in client.alerts() if i.alert.resolved]
                assert len(resolved) == 1 and resolved[0].alert.kind == "run_failed"
                assert "after 2 failed run(s)" in resolved[0].alert.error
                wait_until(lambda: len(box.received()) == 2, 30, 0.05, "the resolved mail")
        finally:
            executor.terminate()
            executor.wait(10)
        firing, ended = box.received()
        assert firing["Subject"] == "[local] CRITICAL run_failed nightly-sync: exit code 3"
        assert (
            firing["To"] == "oncall@test.invalid"
            and firing["X-Raftsched-Alert-Id"] == alert["annotations"]["alert_id"]
        )
        text = firing.get_content()
        assert "owner      data-team" in text and "disk full" in text
        assert ended["Subject"].startswith(
            "[local] RESOLVED run_failed nightly-sync: resolved: run nightly-sync@"
        )
        assert box.refused_logins == 0
        print(f"alert latency, command exit -> Alertmanager received: {latency_ms:.0f} ms")
        assert latency_ms < 60_000  # the seed's target: within one minute


def test_the_smtp_adapter_verifies_the_server_and_a_wrong_password_is_a_send_failure(tmp_path: Path) -> None:
    with smtpd.smtp_server(tmp_path) as box:
        target = EmailTarget(
            name="m",
            host=box.host,
            port=box.port,
            sender="raftsched@test.invalid",
            to=("a@test.invalid",),
            user=smtpd.USER,
            password=smtpd.PASSWORD,
            ca_file=str(box.ca_file),
            timeout_ms=5000,
        )
        msg = smtp.message(target, "subject line", "body\n", "alert-1", int(time.time() * 1000))
        assert smtp.send_blocking(target, msg) == []
        [got] = box.received()
        assert got["Subject"] == "subject line" and got["X-Raftsched-Alert-Id"] == "alert-1"

        wrong = dataclasses.replace(target, password="wrong")
        with pytest.raises(smtp.SendFailed, match="SMTPAuthenticationError"):
            smtp.send_blocking(wrong, smtp.message(wrong, "s", "b\n", "alert-2", 0))
        untrusted = dataclasses.replace(target, ca_file="")  # the system CAs do not know it
        with pytest.raises(smtp.SendFailed, match="CERTIFICATE_VERIFY_FAILED"):
            smtp.send_blocking(untrusted, smtp.message(untrusted, "s", "b\n", "alert-3", 0))
        assert len(box.received()) == 1 and box.refused_logins >= 1  # smtplib tries PLAIN, then LOGIN
