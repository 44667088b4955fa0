"""Draining executors with real processes: SIGTERM an executor while it runs an attempt — the
attempt finishes there, new work goes elsewhere, the executor leaves and exits 0; and
``raftsched executor drain NAME`` from the CLI, shown by ``raftsched executors``."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.conftest import ClusterFactory

pytestmark = pytest.mark.integration

CONFIG = "[scheduler]\nlease_ms = 1500\nheartbeat_ms = 300\nretry_backoff_ms = 200\nkill_grace_ms = 1000\n"


def executor(cluster: LocalCluster, base: Path, name: str, *extra: str) -> subprocess.Popen[bytes]:
    return cluster.start_executor(name, 2, base / name, cluster.log_dir / f"{name}.log", extra=extra)


def info(client: Client, name: str) -> pb.ExecutorInfo | None:
    return next((e for e in client.list_executors(include_left=True).executors if e.name == name), None)


def wait_run(client: Client, run_id: str, timeout: float = 30) -> pb.Run:
    wait_until(
        lambda: client.get_run(run_id).state in (pb.SUCCEEDED, pb.FAILED), timeout, 0.1, f"{run_id} finished"
    )
    return client.get_run(run_id)


def cli(cluster: LocalCluster, *argv: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raftsched.cli", "--cluster", ",".join(cluster.targets()), *argv],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def test_sigterm_lets_the_running_attempt_finish_sends_new_work_elsewhere_and_exits_0(
    make_cluster: ClusterFactory, tmp_path: Path
) -> None:
    cluster = make_cluster(extra_config=CONFIG)
    cluster.wait_for_leader(60)
    marker = tmp_path / "marker.log"
    release = tmp_path / "release"
    # The slow attempt runs until the test releases it, so ex1 is draining for as long as the
    # test looks (a fixed 4 s sleep could end, on a loaded machine, before the draining state was
    # even seen); the grace outlasts any wait below.
    ex1 = executor(cluster, tmp_path, "ex1", "--grace", "120s")
    ex2: subprocess.Popen[bytes] | None = None
    try:
        with Client(cluster.targets()) as client:
            wait_until(lambda: info(client, "ex1") is not None, 30, 0.1, "ex1 registered")
            mark = f'echo "$RAFTSCHED_EXECUTOR {{}}" >> {marker}'
            hold = f"while [ ! -e {release} ]; do sleep 0.05; done"
            slow = f"{mark.format('start')}; {hold}; {mark.format('end')}"
            client.add_task(TaskSpec("slow", ManualTrigger(), command=slow))
            client.add_task(TaskSpec("quick", ManualTrigger(), command="true"))
            first = client.trigger("slow")
            wait_until(lambda: marker.exists() and "ex1 start" in marker.read_text(), 30, 0.1, "ex1 runs it")
            ex2 = executor(cluster, tmp_path, "ex2")
            wait_until(lambda: info(client, "ex2") is not None, 30, 0.1, "ex2 registered")

            ex1.send_signal(signal.SIGTERM)
            wait_until(
                lambda: (e := info(client, "ex1")) is not None and e.state == pb.EXECUTOR_DRAINING,
                10,
                0.1,
                "ex1 draining",
            )
            assert ex1.poll() is None, "it waits for its attempt"
            # New work while it drains goes to ex2 only.
            others = [client.trigger("quick") for _ in range(4)]
            for run in others:
                done = wait_run(client, run.run_id)
                assert done.state == pb.SUCCEEDED and done.shards[0].executor == "ex2", done
            assert ex1.poll() is None, "it still waits for its attempt"

            release.touch()
            assert ex1.wait(timeout=30) == 0
            assert marker.read_text().split("\n")[:2] == ["ex1 start", "ex1 end"]
            finished = wait_run(client, first.run_id)
            assert finished.state == pb.SUCCEEDED and finished.shards[0].executor == "ex1"
            assert finished.shards[0].attempt == 1 and not finished.shards[0].lost
            left = info(client, "ex1")
            assert left is not None and left.state == pb.EXECUTOR_LEFT and left.left_reason == "left"
            log = (cluster.log_dir / "ex1.log").read_text()
            assert "draining" in log and "drained and left the cluster" in log

            # The CLI drains ex2 (idle: drained at once) and `executors` shows it.
            out = cli(cluster, "executor", "drain", "ex2", "--reason", "kernel update")
            assert out.returncode == 0, out.stderr
            assert out.stdout.strip() == "executor ex2: drained (nothing running: it may leave)"
            table = cli(cluster, "executors")
            assert table.returncode == 0, table.stderr
            row = next(line for line in table.stdout.splitlines() if line.startswith("ex2 "))
            assert "drained" in row and "kernel update" in row
            missing = cli(cluster, "executor", "drain", "ex1")
            assert missing.returncode == 1 and "ex1" in missing.stderr and missing.stderr.count("\n") == 1
            # A drained cluster has nowhere to place work: the run waits (it is not lost).
            waiting = client.trigger("quick")
            wait_until(lambda: client.get_run(waiting.run_id).state == pb.PENDING, 5, 0.1, "the run waits")
    finally:
        for proc in (ex1, ex2):
            if proc is not None and proc.poll() is None:
                proc.kill()
                proc.wait(timeout=10)
