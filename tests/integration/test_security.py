"""The cluster secret: a node with another secret cannot join (the Raft port is authenticated,
docs/architecture.md §10), and a node without one refuses to start (the cluster secret is mandatory)."""

from __future__ import annotations

import re
import subprocess
import sys
import time
from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.model import CronTrigger, TaskSpec
from raftsched.testing.cluster import LocalCluster, wait_until
from tests.integration.conftest import ClusterFactory

pytestmark = pytest.mark.integration

SECRET_LINE = re.compile(r'^secret = ".*"$', re.MULTILINE)
# Long enough for the odd node out to retry its connections several times (connection_retry_time
# = 1 s) and for its election timeout (0.4-1.4 s) to expire more than once.
OBSERVE_S = 3.0


def _config_variant(source: Path, name: str, secret_line: str) -> Path:
    """A copy of ``source`` next to it (so relative data dirs resolve the same) with another
    ``cluster.secret`` line (or none, if ``secret_line`` is empty)."""
    text, replaced = SECRET_LINE.subn(secret_line, source.read_text())
    assert replaced == 1, f"no secret line in {source}"
    path = source.with_name(name)
    path.write_text(text)
    return path


def test_node_with_another_secret_cannot_join(make_cluster: ClusterFactory) -> None:
    cluster = make_cluster(start=False)
    wrong = _config_variant(
        cluster.config_path, "wrong-secret.toml", 'secret = "not-the-cluster-secret-9876543210"'
    )
    # Same command, same node id and data dir as LocalCluster would use; only the secret differs.
    intruder = LocalCluster(wrong, cluster.log_dir)
    try:
        cluster.start("n1")
        cluster.start("n2")
        intruder.start("n3")
        # Every node is up and serving (a status error here would be a startup race, not n3).
        wait_until(lambda: cluster.leader(["n1", "n2"]), 30, 0.05, "a leader among n1, n2")
        wait_until(
            lambda: (
                [cluster.status("n1").node_id, cluster.status("n2").node_id, intruder.status("n3").node_id]
                == ["n1", "n2", "n3"]
            ),
            30,
            0.05,
            "every node to serve gRPC",
        )
        # For a while, n1 and n2 keep accepting writes; n3 (up, answering gRPC) applies none of
        # them, knows no leader and never leads.
        roles: set[str] = set()
        written = 0
        with Client([cluster.grpc_of("n1"), cluster.grpc_of("n2")]) as client:
            deadline = time.monotonic() + OBSERVE_S
            while time.monotonic() < deadline:
                client.add_task(TaskSpec(f"t{written}", CronTrigger("0 3 * * *"), command="true"))
                written += 1
                st = intruder.status("n3")
                roles.add(st.role)
                assert st.applied_index == 0 and st.tasks == 0, f"n3 applied entries: {st}"
                assert st.role != "leader" and st.leader_id == "", f"n3 joined: {st}"
                assert "n3" not in {cluster.status(n).leader_id for n in ("n1", "n2")}
        assert written >= 5
        wait_until(
            lambda: all(cluster.status(n).tasks == written for n in ("n1", "n2")),
            10,
            0.05,
            f"n1 and n2 to apply {written} tasks",
        )
        assert intruder.status("n3").applied_index == 0
        print(f"{written} writes; n3 roles seen: {sorted(roles)}")
    finally:
        intruder.stop()


def test_node_without_secret_refuses_to_start(tmp_path: Path) -> None:
    cluster = LocalCluster.create(tmp_path / "cluster", 1)  # only writes the config; starts nothing
    config = _config_variant(cluster.config_path, "no-secret.toml", "")
    started = time.monotonic()
    proc = subprocess.run(
        [sys.executable, "-m", "raftsched.cli.node", "--config", str(config), "--node-id", "n1"],
        capture_output=True,
        text=True,
        timeout=60,
    )
    elapsed = time.monotonic() - started
    assert proc.returncode != 0
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, f"expected one line on stderr, got:\n{proc.stderr}"
    assert "cluster.secret" in lines[0] and "Traceback" not in proc.stderr
    assert elapsed < 15, f"took {elapsed:.1f}s to refuse"
    assert not cluster.config.node("n1").data_dir.exists(), "created a data dir before refusing"
