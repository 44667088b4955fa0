"""/metrics, /healthz and /readyz of a real 3-node cluster and a real executor, scraped while
tasks run: the counters move as the work does, replicated counters agree across nodes, and
``promtool check metrics`` accepts every scrape."""

from __future__ import annotations

import functools
import socket
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from prometheus_client.parser import text_string_to_metric_families

from raftsched.client import Client
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.testing.cluster import LocalCluster, free_ports, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.promtool import check_metrics

pytestmark = pytest.mark.integration

SECRET = "metrics-test-secret-0123456789"
NODES = ("n1", "n2", "n3")


@dataclass
class Scrape:
    text: bytes
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float]

    def value(self, name: str, **labels: str) -> float:
        """The sum over every series of ``name`` whose labels include ``labels`` (0 if none)."""
        want = set(labels.items())
        return sum(v for (n, ls), v in self.samples.items() if n == name and want <= ls)


def get(url: str) -> tuple[int, bytes]:
    try:
        with urllib.request.urlopen(url, timeout=5) as r:
            return r.status, r.read()
    except urllib.error.HTTPError as e:
        return e.code, e.read()


def scrape(address: str) -> Scrape:
    status, text = get(f"http://{address}/metrics")
    assert status == 200, text
    samples: dict[tuple[str, frozenset[tuple[str, str]]], float] = {}
    for family in text_string_to_metric_families(text.decode()):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = s.value
    return Scrape(text, samples)


class Fleet:
    def __init__(self, base: Path) -> None:
        ports = free_ports(len(NODES) * 3 + 1)
        lines = ["[cluster]", f'secret = "{SECRET}"', "", "[scheduler]", "retry_backoff_ms = 100", ""]
        self.http: dict[str, str] = {}
        for i, nid in enumerate(NODES):
            raft, grpc_port, http = ports[3 * i : 3 * i + 3]
            self.http[nid] = f"127.0.0.1:{http}"
            lines += [
                "[[nodes]]",
                f'id = "{nid}"',
                f'raft = "127.0.0.1:{raft}"',
                f'grpc = "127.0.0.1:{grpc_port}"',
                f'data_dir = "data/{nid}"',
                f'http = "{self.http[nid]}"',
                "",
            ]
        base.mkdir(parents=True, exist_ok=True)
        (base / "cluster.toml").write_text("\n".join(lines))
        self.cluster = LocalCluster(base / "cluster.toml", base / "logs")
        self.executor_http = f"127.0.0.1:{ports[-1]}"
        self.base = base
        self.executor: subprocess.Popen[bytes] | None = None

    def start_executor(self) -> None:
        self.executor = self.cluster.start_executor(
            "ex1", 4, self.base / "ex1", self.base / "ex1.log", extra=["--http", self.executor_http]
        )

    def stop(self) -> None:
        if self.executor is not None and self.executor.poll() is None:
            self.executor.terminate()
            try:
                self.executor.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.executor.kill()
        self.cluster.stop()


@pytest.fixture
def fleet(tmp_path: Path) -> Iterator[Fleet]:
    f = Fleet(tmp_path)
    try:
        f.cluster.start()
        f.cluster.wait_for_leader(60)
        yield f
    finally:
        f.stop()


def ready(address: str) -> bool:
    return get(f"http://{address}/readyz")[0] == 200


def test_scraped_counters_move_as_the_work_does(fleet: Fleet) -> None:
    # Every node becomes ready (knows the leader, applied what is committed) and is alive.
    for nid in NODES:
        wait_until(functools.partial(ready, fleet.http[nid]), 30, what=f"{nid} ready")
        assert get(f"http://{fleet.http[nid]}/healthz")[0] == 200
    fleet.start_executor()
    wait_until(functools.partial(ready, fleet.executor_http), 30, what="executor ready")

    client = Client(fleet.cluster.targets())
    try:
        every = CronTrigger("* * * * * *")
        client.add_task(TaskSpec("ok", every, command="true", owner="alice", namespace="etl"))
        client.add_task(
            TaskSpec("broken", every, command="exit 3", owner="bob", max_retries=1, overlap=Overlap.ALLOW)
        )
        leader = fleet.cluster.wait_for_leader(30)

        def work_seen() -> Scrape | None:
            s = scrape(fleet.http[leader])
            ok = s.value("raftsched_runs_finished_total", state="succeeded", owner="alice", namespace="etl")
            failed = s.value("raftsched_runs_finished_total", state="failed", owner="bob")
            return s if ok >= 3 and failed >= 2 else None

        during = wait_until(work_seen, 60, interval=0.2, what="runs finishing in the leader's metrics")
        assert during.value("raftsched_fires_total", outcome="fired", owner="alice") >= 3
        assert during.value("raftsched_attempts_total", result="failed", owner="bob") >= 2
        assert during.value("raftsched_attempts_total", result="retried", owner="bob") >= 2
        assert during.value("raftsched_is_leader") == 1
        assert during.value("raftsched_executors", state="alive") == 1
        assert during.value("raftsched_executor_slots", state="total") == 4
        assert during.value("raftsched_fire_commit_lateness_seconds_count") >= 3
        assert during.value("raftsched_start_lateness_seconds_count") >= 3
        assert during.value("raftsched_grpc_requests_total", method="Register", code="OK") >= 1
        check_metrics(during.text)

        # Stop the work, let it drain, then compare the counters with what the cluster recorded.
        client.disable_task("ok")
        client.disable_task("broken")
        wait_until(lambda: fleet.cluster.status(leader).active_runs == 0, 60, what="runs drained")
        index = fleet.cluster.status(leader).commit_index

        def caught_up(address: str) -> Scrape | None:
            s = scrape(address)
            return s if s.value("raftsched_raft_applied_index") >= index else None

        after = {
            nid: wait_until(functools.partial(caught_up, fleet.http[nid]), 30, what=f"{nid} applied")
            for nid in NODES
        }
        runs = {task: client.runs(task) for task in ("ok", "broken")}
        succeeded = sum(1 for r in runs["ok"] if r.state == pb.SUCCEEDED)
        failed = sum(1 for r in runs["broken"] if r.state == pb.FAILED)
        for nid, s in after.items():
            # Replicated counters: the same on every node, and equal to the recorded runs.
            assert s.value("raftsched_fires_total", outcome="fired", owner="alice") == len(runs["ok"]), nid
            ok = s.value("raftsched_runs_finished_total", state="succeeded", owner="alice")
            assert ok == succeeded, nid
            assert s.value("raftsched_runs_finished_total", state="failed", owner="bob") == failed, nid
            # Each failed run of "broken" had two attempts (one retry), both failed.
            assert s.value("raftsched_attempts_total", result="failed", owner="bob") == 2 * failed, nid
            assert s.value("raftsched_attempts_total", result="retried", owner="bob") == failed, nid
            assert s.value("raftsched_apply_lag_entries") >= 0
            # Drained: no hot run is live, so the table holds at most the finished slots not
            # trimmed yet (trimmed every 4,096).
            assert any(name == "raftsched_hot_slots" for name, _ in s.samples), nid
            assert 0 <= s.value("raftsched_hot_slots") < 4096, nid
            assert all("task" not in dict(labels) for _, labels in s.samples), "no per-task label by default"
            check_metrics(s.text)
        followers = [nid for nid in NODES if nid != leader]
        assert all(after[nid].value("raftsched_is_leader") == 0 for nid in followers)

        ex = scrape(fleet.executor_http)
        assert ex.value("raftsched_executor_attempts_total", result="succeeded") == succeeded
        assert ex.value("raftsched_executor_attempts_total", result="failed") == 2 * failed
        assert ex.value("raftsched_executor_attempt_seconds_count") == succeeded + 2 * failed
        assert ex.value("raftsched_executor_connected") == 1
        assert ex.value("raftsched_executor_local_slots", state="total") == 4
        assert ex.value("raftsched_executor_log_writes_total", op="begin") >= 1
        # Every attempt is still within the default keep (10 minutes): the log holds them all.
        assert ex.value("raftsched_executor_log_entries") >= succeeded + failed
        assert ex.value("raftsched_executor_log_bytes") > 0
        check_metrics(ex.text)
    finally:
        client.close()


def test_a_node_whose_http_port_is_taken_exits_with_one_line(tmp_path: Path) -> None:
    raft, grpc_port = free_ports(2)
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        http = f"127.0.0.1:{taken.getsockname()[1]}"
        config = tmp_path / "cluster.toml"
        config.write_text(
            f'[cluster]\nsecret = "{SECRET}"\n\n[[nodes]]\nid = "n1"\nraft = "127.0.0.1:{raft}"\n'
            f'grpc = "127.0.0.1:{grpc_port}"\ndata_dir = "data"\nhttp = "{http}"\n'
        )
        done = subprocess.run(
            [sys.executable, "-m", "raftsched.cli.node", "--config", str(config), "--node-id", "n1"],
            capture_output=True,
            timeout=60,
            check=False,
        )
    assert done.returncode == 1
    expected = f"raftsched-node: error: http: cannot listen on {http}: address already in use\n"
    assert done.stderr.decode() == expected
