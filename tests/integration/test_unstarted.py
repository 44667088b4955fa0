"""Executor death before start, with real processes: an executor SIGKILLed while it holds
attempts it has not started. Those attempts run on another executor without consuming a retry
(the task allows none), well before the 10 s lease would have expired: the leader sees the
dispatch stream close. The killed executor runs its clock 8 s behind (a test setting), so every
attempt it receives waits for its nominal time by that clock and is held unstarted."""

from __future__ import annotations

import signal
import subprocess
import time
from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.testing.cluster import TEST_CLOCK_OFFSET_ENV, LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.conftest import ClusterFactory

pytestmark = pytest.mark.integration

LEASE_MS = 10_000
CONFIG = f"[scheduler]\nlease_ms = {LEASE_MS}\nheartbeat_ms = 500\nretry_backoff_ms = 200\n"


@pytest.fixture
def cluster(make_cluster: ClusterFactory) -> LocalCluster:
    c = make_cluster(extra_config=CONFIG)
    c.wait_for_leader(60)
    return c


def _registered(base: Path, names: list[str]) -> bool:
    return all(
        (base / f"{n}.log").exists() and "registered with" in (base / f"{n}.log").read_text() for n in names
    )


def test_sigkilled_executors_unstarted_attempts_run_elsewhere_without_a_retry(
    cluster: LocalCluster, tmp_path: Path
) -> None:
    marker = tmp_path / "marker.log"
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        procs["slow"] = cluster.start_executor(
            "slow", 8, tmp_path / "slow", tmp_path / "slow.log", env={TEST_CLOCK_OFFSET_ENV: "-8000"}
        )
        wait_until(lambda: _registered(tmp_path, ["slow"]), 30, what="slow executor registered")
        with Client(cluster.targets()) as client:
            client.add_task(
                TaskSpec(
                    "tick",
                    CronTrigger("* * * * * *"),
                    command=f'echo "$RAFTSCHED_EXECUTION_ID $RAFTSCHED_EXECUTOR" >> {marker}',
                    shards=2,
                    overlap=Overlap.ALLOW,
                    max_retries=0,
                )
            )

            def held() -> list[tuple[str, int, int]]:
                return [
                    (r.run_id, s.shard, s.attempt)
                    for r in client.runs("tick")
                    for s in r.shards
                    if s.state == pb.RUNNING and s.executor == "slow"
                ]

            wait_until(lambda: len(held()) >= 4, 30, 0.2, "attempts held by the slow executor")
            procs["fast"] = cluster.start_executor("fast", 8, tmp_path / "fast", tmp_path / "fast.log")
            wait_until(lambda: _registered(tmp_path, ["fast"]), 30, what="fast executor registered")
            victims = held()
            procs["slow"].send_signal(signal.SIGKILL)
            procs["slow"].wait(timeout=10)
            killed = time.monotonic()

            def moved() -> bool:
                runs = {r.run_id: r for r in client.runs("tick")}
                return all(runs[run_id].shards[shard].attempt > attempt for run_id, shard, attempt in victims)

            wait_until(moved, 30, 0.1, "the held attempts re-placed")
            took = time.monotonic() - killed
            client.disable_task("tick")

            def done() -> bool:
                runs = {r.run_id: r for r in client.runs("tick")}
                return all(runs[run_id].state in (pb.SUCCEEDED, pb.FAILED) for run_id, _, _ in victims)

            wait_until(done, 60, 0.2, "the re-placed attempts finished")
            runs = {r.run_id: r for r in client.runs("tick")}
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=10)
    assert took < LEASE_MS / 1000 / 2, f"re-placed {took:.1f} s after the kill: the lease, not the stream"
    lines = [line.split() for line in marker.read_text().splitlines() if line.strip()]
    ran = {exec_id: who for exec_id, who in lines}
    for run_id, shard, attempt in victims:
        s = runs[run_id].shards[shard]
        # No retry was allowed, yet it succeeded: the lost attempt was not a try.
        assert s.state == pb.SUCCEEDED and s.executor == "fast", (run_id, s)
        assert s.unstarted >= 1 and s.lost == 0, s
        assert f"{run_id}/{shard}/{attempt}" not in ran  # the dead executor never started it
        assert ran[f"{run_id}/{shard}/{s.attempt}"] == "fast"
    assert len(lines) == len(ran), "an execution id ran twice"
