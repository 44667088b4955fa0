"""The embedded example: three service processes, each a raftsched Node plus an Executor with a
Python handler, schedule and run a handler task among themselves."""

from __future__ import annotations

import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.model import IntervalTrigger, Overlap, TaskSpec
from raftsched.testing.cluster import wait_until, write_config

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "embedded_service.py"


def test_embedded_services_run_a_python_handler_once_per_fire(tmp_path: Path) -> None:
    config = write_config(tmp_path / "cluster.toml", 3)
    marker = tmp_path / "marker.log"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(EXAMPLE),
                "--config",
                str(tmp_path / "cluster.toml"),
                "--node-id",
                n.id,
                "--marker",
                str(marker),
            ],
            stdout=open(tmp_path / f"{n.id}.log", "wb"),  # noqa: SIM115 - owned by the child
            stderr=subprocess.STDOUT,
        )
        for n in config.nodes
    ]
    try:
        with Client(config.grpc_targets(), timeout=5, retries=20) as client:
            wait_until(
                lambda: len(client.cluster_status().nodes) == 3 and client.cluster_status().leader_id, 60
            )
            client.add_task(
                TaskSpec("report", IntervalTrigger(1000), handler="send-report", overlap=Overlap.ALLOW)
            )
            wait_until(
                lambda: marker.exists() and len(marker.read_text().splitlines()) >= 4,
                60,
                0.2,
                "handler executions",
            )
        lines = marker.read_text().splitlines()
        ids = Counter(line.split()[0] for line in lines)
        assert all(n == 1 for n in ids.values()), ids
        assert all(line.split()[-1] in {"n1", "n2", "n3"} for line in lines)
    finally:
        for p in procs:
            p.terminate()
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
