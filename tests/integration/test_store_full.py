"""A leader whose store fills stops leading, a healthy peer takes over and keeps firing, and after a
restart with a larger ``storage.map_size`` the node catches up with nothing lost."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

import pytest

from raftsched.cli.node import STORE_FAILED_EXIT
from raftsched.client import Client
from raftsched.model import CronTrigger, ManualTrigger, TaskSpec
from raftsched.testing.cluster import NODE_COMMAND, LocalCluster, wait_until

pytestmark = pytest.mark.integration

_PROBLEM = re.compile(r" (ERROR|CRITICAL) |^Traceback ")
_EXPECTED = re.compile(r"CRITICAL raftsched\.node: node n\d stopped: its state store cannot take writes")


def _start_with(cluster: LocalCluster, node_id: str, config: Path) -> None:
    """Start one node from its own copy of the config (one node's file may differ, as in a
    rolling change of limits)."""
    log = open(cluster.log_dir / f"{node_id}.log", "ab")  # noqa: SIM115 - owned by the child
    cluster.procs[node_id] = subprocess.Popen(
        [*NODE_COMMAND, "--config", str(config), "--node-id", node_id],
        stdout=log,
        stderr=subprocess.STDOUT,
        env=cluster.env or None,
    )
    log.close()


def _fires(cluster: LocalCluster, node_id: str) -> int:
    return cluster.status(node_id, timeout=5).fires_committed


def test_a_leader_with_a_full_store_steps_down_and_catches_up_after_a_restart(tmp_path: Path) -> None:
    cluster = LocalCluster.create(tmp_path / "c", 3)
    tiny = cluster.config_path.with_name("tiny.toml")
    tiny.write_text(cluster.config_path.read_text() + '\n[storage]\nmap_size = "256KiB"\n')
    try:
        cluster.start()
        leader = cluster.wait_for_leader()
        # Give the leader the tiny map: restart it from the tiny config, then move the
        # leadership until it is back on that node (restarting whoever leads instead).
        cluster.kill(leader, 15)
        _start_with(cluster, leader, tiny)
        small = leader
        for _ in range(20):
            now = cluster.wait_for_leader(among=cluster.alive())
            if now == small:
                break
            cluster.kill(now, 15)
            cluster.start(now)
        assert cluster.wait_for_leader() == small
        with Client(cluster.targets(), timeout=5.0) as client:
            client.add_task(TaskSpec(name="tick", trigger=CronTrigger("* * * * * *"), command="true"))
            wait_until(lambda: _fires(cluster, small) > 0, 30, what="the leader fires")
            big = "echo " + "x" * 12_000
            added = 0
            for i in range(200):
                if cluster.procs[small].poll() is not None:
                    break
                try:
                    client.add_task(TaskSpec(name=f"big{i}", trigger=ManualTrigger(), command=big))
                    added += 1
                except Exception:  # "outcome unknown" while the leader leaves
                    continue
            assert cluster.procs[small].wait(timeout=60) == STORE_FAILED_EXIT
            log = (cluster.log_dir / f"{small}.log").read_text(errors="replace")
            assert len(re.findall(_EXPECTED, log)) == 1, log[-3000:]
            others = [n.id for n in cluster.config.nodes if n.id != small]
            new = cluster.wait_for_leader(among=others)
            assert new != small
            before = _fires(cluster, new)
            wait_until(lambda: _fires(cluster, new) > before + 2, 30, what="the new leader fires")
            # Writes go on without the failed node.
            client.add_task(TaskSpec(name="after", trigger=ManualTrigger(), command="true"))

            # The operator raises the limit: restart with the shared config (64 GiB default).
            cluster.start(small)
            wait_until(
                lambda: (
                    cluster.status(small, timeout=2).applied_index
                    >= cluster.status(new, timeout=2).applied_index - 5
                ),
                60,
                what="the restarted node to catch up",
            )
            client.disable_task("tick")  # quiet, so every replica stops at one index
            digest = cluster.wait_converged(60)
            assert digest
            names = {t.spec.name for t in client.list_tasks()}
            assert {"tick", "after"} <= names
            assert sum(1 for n in names if n.startswith("big")) >= added
    finally:
        cluster.stop()
    problems = [
        f"{p.name}: {line}"
        for p in sorted(cluster.log_dir.glob("*.log"))
        for line in p.read_text(errors="replace").splitlines()
        if _PROBLEM.search(line) and not _EXPECTED.search(line)
    ]
    assert not problems, "\n".join(problems[:20])
