"""A follower whose data dir is wiped catches up from the leader's snapshot (the log is compacted,
so replaying it from index 1 is impossible) and ends with the same state (docs/architecture.md
§3, invariant 5)."""

from __future__ import annotations

import signal

import pytest

from raftsched.client import Client
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.testing.cluster import LocalCluster, wait_until
from tests.integration.checks import node_client, read_node, require, view_problems
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import EVERY_SECOND, NODES, chains_agree_after, wait_caught_up

pytestmark = pytest.mark.integration

COMPACT_AFTER = 50
TASKS = 100
PER_SECOND = [f"job-{i:03d}" for i in range(0, TASKS, 20)]  # 5 of them fire every second


def _spec(i: int) -> TaskSpec:
    name = f"job-{i:03d}"
    if name in PER_SECOND:
        return TaskSpec(name, CronTrigger(EVERY_SECOND), command=f"echo {i}", overlap=Overlap.ALLOW)
    return TaskSpec(name, CronTrigger(f"{i % 60} 3 * * *"), command=f"echo {i}")


def test_wiped_node_catches_up_from_snapshot(make_cluster: ClusterFactory) -> None:
    cluster = make_cluster(extra_config=f"[raft]\nlog_compaction_min_entries = {COMPACT_AFTER}\n")
    assert cluster.config.raft.log_compaction_min_entries == COMPACT_AFTER
    leader = cluster.wait_for_leader()
    with Client(cluster.targets()) as client:
        for i in range(TASKS):
            client.add_task(_spec(i))
        # The leader compacted its log: a wiped follower cannot be sent entries from index 1.
        wait_until(lambda: _compacted(cluster, leader), 30, 0.1, f"{leader} to compact its Raft log")
        follower = next(n for n in NODES if n != leader)
        cluster.kill(follower, signal.SIGTERM)
        cluster.wipe(follower)
        assert not cluster.config.node(follower).data_dir.exists()
        cluster.start(follower)

        wait_caught_up(cluster, follower, cluster.status(leader).applied_index)
        assert cluster.status(follower).tasks == TASKS
        chains_agree_after(cluster, cluster.status(leader).applied_index)
        for name in PER_SECOND:
            client.disable_task(name)
    cluster.wait_converged()

    log = (cluster.log_dir / f"{follower}.log").read_text(errors="replace")
    assert "installed snapshot" in log, f"{follower} caught up without installing a snapshot"
    with node_client(cluster, leader) as c:
        expected = c.list_tasks()
    with node_client(cluster, follower) as c:
        assert c.list_tasks() == expected
    assert len(expected) == TASKS and [t.spec.name for t in expected] == [
        f"job-{i:03d}" for i in range(TASKS)
    ]
    for name in PER_SECOND:
        views = [read_node(cluster, nid, name) for nid in (leader, follower)]
        assert views[0].fires == views[1].fires and views[0].runs == views[1].runs
        require(view_problems(views[1]), views[1].summary())


def _compacted(cluster: LocalCluster, node_id: str) -> bool:
    status = cluster.status(node_id)
    return status.log_len < status.commit_index - COMPACT_AFTER // 2
