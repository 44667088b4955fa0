"""A leader paused (SIGSTOP) past the election timeout is replaced; when it resumes it still
believes it leads for a moment, and nothing it stamps in that moment may commit: the epoch fences
it (docs/architecture.md §3, invariants 2 and 4)."""

from __future__ import annotations

import pytest

from raftsched.client import Client
from raftsched.testing.cluster import LocalCluster, wait_until
from tests.integration.checks import read_node, require, stale_epoch_problems, view_problems
from tests.integration.helpers import (
    NODES,
    chains_agree_after,
    now_ms,
    per_second_task,
    wait_accounted_through,
    wait_caught_up,
    wait_time_passed,
)

pytestmark = pytest.mark.integration

TASK = "tick"
PAUSE_MS = 4_000  # > leader_fallback_timeout (2 s) and the election timeouts (0.4-1.4 s)


def test_paused_leader_is_fenced(cluster: LocalCluster, client: Client) -> None:
    cluster.wait_for_leader()
    client.add_task(per_second_task(TASK))
    wait_until(lambda: client.get_task(TASK).fires_total >= 3, 20, 0.1, "3 fires accounted")
    # Asked only now: on a loaded machine a tick stall can move leadership at any time.
    old_leader = cluster.wait_for_leader()
    old_epoch = cluster.status(old_leader).term
    others = [n for n in NODES if n != old_leader]

    paused_ms = now_ms()
    cluster.pause(old_leader)
    try:
        new_leader = cluster.wait_for_leader(timeout=20, among=others)
        new_epoch = cluster.status(new_leader).term
        assert new_epoch > old_epoch
        wait_time_passed(paused_ms + PAUSE_MS)
    finally:
        cluster.resume(old_leader)
    resumed_ms = now_ms()

    wait_until(lambda: cluster.status(old_leader).role == "follower", 20, 0.05, f"{old_leader} to step down")
    wait_accounted_through(cluster, NODES, TASK, resumed_ms + 2_000)
    wait_caught_up(cluster, old_leader, cluster.status(new_leader).commit_index)

    for nid in NODES:
        view = read_node(cluster, nid, TASK)
        require(
            view_problems(view) + stale_epoch_problems(view.fires, old_epoch, new_epoch),
            view.summary(),
        )
        # (A later epoch is legitimate too: the resumed node may call an election of its own.)
        assert any(f.epoch >= new_epoch for f in view.fires), view.summary()
    chains_agree_after(cluster, cluster.status(new_leader).applied_index)
    assert cluster.status(old_leader).max_epoch >= new_epoch
