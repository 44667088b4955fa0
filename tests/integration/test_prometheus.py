"""A real Prometheus server scrapes a running cluster (issue 36 §3, §4, §6): every expression of
the shipped rules file and of every dashboard panel returns data; an executor whose clock runs
2 s ahead shows in ``raftsched_clock_offset_seconds{executor=...}`` on the leader and raises a
``clock_skew`` alert naming it; an executor whose disk is over its ``--full-at`` drains itself
over gRPC, says why, and an ``executor_unhealthy`` alert names it.

One node and one executor (lean: the point is the metrics, not replication). Prometheus is
Debian's ``prometheus`` (tests/promtool.py: skipped without it, failed in CI)."""

from __future__ import annotations

import json
import re
import subprocess
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from raftsched.client import Client
from raftsched.model import CLOCK_SKEW, EXECUTOR_UNHEALTHY, CronTrigger, Overlap, TaskSpec
from raftsched.testing.cluster import TEST_CLOCK_OFFSET_ENV, LocalCluster, free_ports, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.promtool import prometheus

pytestmark = pytest.mark.integration

ROOT = Path(__file__).resolve().parents[2]
RULES = ROOT / "deploy" / "prometheus" / "rules.yml"
DASHBOARD = ROOT / "deploy" / "grafana" / "raftsched.json"
SKEW_MS = 2_000


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()
    except OSError as e:
        return 0, str(e).encode()


@dataclass
class Stack:
    cluster: LocalCluster
    node_http: str
    executor_http: str
    prometheus_url: str
    client: Client


def _config(base: Path) -> tuple[Path, str, str]:
    raft, grpc_port, http, executor_http, closed = free_ports(5)
    node_http = f"127.0.0.1:{http}"
    (base / "cluster.toml").write_text(
        "\n".join(
            [
                "[cluster]",
                'secret = "prometheus-test-secret-0123456789"',
                "",
                "[[nodes]]",
                'id = "n1"',
                f'raft = "127.0.0.1:{raft}"',
                f'grpc = "127.0.0.1:{grpc_port}"',
                'data_dir = "data/n1"',
                f'http = "{node_http}"',
                "",
                "[alerts]",
                'max_skew = "500ms"',
                "",
                "[[alerts.webhook]]",  # nobody listens: its events stay undelivered (a metric)
                'name = "nobody"',
                f'url = "http://127.0.0.1:{closed}/hook"',
                'timeout = "1s"',
                "",
            ]
        )
    )
    return base / "cluster.toml", node_http, f"127.0.0.1:{executor_http}"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    binary = prometheus()
    base = tmp_path_factory.mktemp("prometheus")
    config, node_http, executor_http = _config(base)
    cluster = LocalCluster(config, base / "logs")
    executor: subprocess.Popen[bytes] | None = None
    full: subprocess.Popen[bytes] | None = None
    server: subprocess.Popen[bytes] | None = None
    client: Client | None = None
    try:
        cluster.start()
        cluster.wait_for_leader(60)
        executor = cluster.start_executor(
            "ex1",
            4,
            base / "ex1",
            base / "logs" / "ex1.log",
            env={TEST_CLOCK_OFFSET_ENV: str(SKEW_MS)},  # its clock runs 2 s ahead
            extra=["--http", executor_http],
        )
        # Its disk is "full" at 0.1 %: any real filesystem is over that, so it drains itself.
        full = cluster.start_executor(
            "ex2",
            2,
            base / "ex2",
            base / "logs" / "ex2.log",
            extra=["--full-at", "0.001", "--resume-at", "0.001"],
        )
        client = Client(cluster.targets())
        every = CronTrigger("* * * * * *")
        client.add_task(TaskSpec("ok", every, command="true", owner="alice"))
        client.add_task(TaskSpec("broken", every, command="exit 3", owner="bob", overlap=Overlap.ALLOW))
        (prom_port,) = free_ports(1)
        prom_config = base / "prometheus.yml"
        prom_config.write_text(
            yaml.safe_dump(
                {
                    "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
                    "rule_files": [str(RULES)],
                    "scrape_configs": [
                        {
                            "job_name": "raftsched",
                            "static_configs": [{"targets": [node_http, executor_http]}],
                        }
                    ],
                }
            )
        )
        log = open(base / "logs" / "prometheus.log", "ab")  # noqa: SIM115 - owned by the child
        server = subprocess.Popen(
            [
                binary,
                f"--config.file={prom_config}",
                f"--web.listen-address=127.0.0.1:{prom_port}",
                f"--storage.tsdb.path={base / 'tsdb'}",
                "--log.level=warn",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()
        url = f"http://127.0.0.1:{prom_port}"
        wait_until(lambda: get(f"{url}/-/ready")[0] == 200, 60, what="prometheus ready")
        yield Stack(cluster, node_http, executor_http, url, client)
    finally:
        if client is not None:
            client.close()
        for proc in (server, executor, full):
            if proc is not None and proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(timeout=10)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
        cluster.stop()


def query(stack: Stack, expr: str) -> list[dict[str, object]]:
    status, body = get(f"{stack.prometheus_url}/api/v1/query?{urllib.parse.urlencode({'query': expr})}")
    answer = json.loads(body or b"{}")
    assert status == 200 and answer.get("status") == "success", (expr, status, body[:500])
    result = answer["data"]["result"]
    assert isinstance(result, list)
    return result


_COMPARISON = re.compile(r"(>=|<=|==|!=|>|<)(?!\s*bool)")


def as_data_query(expr: str) -> str:
    """An alerting rule's expression as a query that returns its series whether or not the alert
    would fire: each comparison outside label matchers and strings takes ``bool``."""
    out, depth, quoted = [], 0, False
    i = 0
    while i < len(expr):
        ch = expr[i]
        if ch == '"':
            quoted = not quoted
        elif not quoted and ch == "{":
            depth += 1
        elif not quoted and ch == "}":
            depth -= 1
        elif not quoted and depth == 0:
            m = _COMPARISON.match(expr, i)
            if m:
                out.append(f"{m.group(1)} bool")
                i = m.end()
                continue
        out.append(ch)
        i += 1
    return "".join(out)


def expressions() -> list[tuple[str, str]]:
    """``(where, PromQL)`` of every rule (alerting ones as :func:`as_data_query`) and every panel."""
    out = []
    for group in yaml.safe_load(RULES.read_text())["groups"]:
        for rule in group["rules"]:
            name = rule.get("record") or rule["alert"]
            expr = rule["expr"] if "record" in rule else as_data_query(rule["expr"])
            out.append((f"rules.yml {name}", expr))
    board = json.loads(DASHBOARD.read_text())
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            out.append((f"dashboard '{panel['title']}' {target['refId']}", target["expr"]))
    return out


def test_as_data_query_adds_bool_only_to_comparisons() -> None:
    assert (
        as_data_query('max(x{state="alive"}) == 0 and y > 60')
        == 'max(x{state="alive"}) == bool 0 and y > bool 60'
    )
    assert as_data_query('x{a!="b"} >= 0.9') == 'x{a!="b"} >= bool 0.9'


def test_a_skewed_executor_is_measured_on_the_leader_and_alerted_by_name(stack: Stack) -> None:
    def offset() -> float | None:
        status, text = get(f"http://{stack.node_http}/metrics")
        if status != 200:
            return None
        for family in text_string_to_metric_families(text.decode()):
            for s in family.samples:
                if s.name == "raftsched_clock_offset_seconds" and s.labels.get("executor") == "ex1":
                    return s.value
        return None

    seen = wait_until(offset, 60, interval=0.3, what="ex1's clock offset on the leader's /metrics")
    assert abs(seen - SKEW_MS / 1000) < 0.5, seen

    def skew_alert() -> list[str]:
        return [
            a.alert.error
            for a in stack.client.alerts()
            if a.alert.kind == CLOCK_SKEW and a.alert.executor == "ex1"
        ]

    found = wait_until(skew_alert, 30, interval=0.3, what="a clock_skew alert naming ex1")
    assert "executor ex1's clock is +" in found[0], found
    executors = stack.client.list_executors()
    ex1 = next(e for e in executors.executors if e.name == "ex1")
    assert ex1.HasField("clock_offset_ms") and abs(ex1.clock_offset_ms - SKEW_MS) < 500, ex1


def test_every_rule_and_dashboard_expression_returns_data(stack: Stack) -> None:
    # Work flows (runs succeed and fail, attempts start late by some ms) and Prometheus scrapes
    # every second and evaluates the rules every second.
    pending = dict(expressions())
    answered: dict[str, int] = {}

    def all_answered() -> bool:
        for where, expr in list(pending.items()):
            result = query(stack, expr)
            if result:
                answered[where] = len(result)
                del pending[where]
        return not pending

    try:
        wait_until(all_answered, 120, interval=1.0, what="every expression returning data")
    except Exception:
        raise AssertionError(
            f"no data for {len(pending)} expression(s): {json.dumps(pending, indent=1)}"
        ) from None
    assert len(answered) == len(expressions())


def test_an_executor_over_its_full_line_drains_itself_says_why_and_is_alerted(stack: Stack) -> None:
    def drained() -> pb.ExecutorInfo | None:
        for e in stack.client.list_executors().executors:
            if e.name == "ex2" and e.health_drain:
                return e
        return None

    ex2 = wait_until(drained, 60, interval=0.3, what="ex2 draining itself")
    assert ex2.draining_reason.startswith("disk ") and "at or over 0%" in ex2.draining_reason, ex2
    assert ex2.disk_used > 0.001

    def alerted() -> list[str]:
        return [
            a.alert.error
            for a in stack.client.alerts()
            if a.alert.kind == EXECUTOR_UNHEALTHY and a.alert.executor == "ex2"
        ]

    found = wait_until(alerted, 30, interval=0.3, what="an executor_unhealthy alert naming ex2")
    assert "executor ex2 drains itself: disk" in found[0], found
