"""Overload and outages on real processes.

With ``[scheduler] max_dispatch_backlog`` and every-second tasks with no executor to run them, the
leader holds fire planning once the limit of attempts waits, says so in its log, commits no more
fires while held, and a disable sent meanwhile is accepted (the SDK retries the first refusal,
whose FiresWanted has the leader plan that task at once). A whole cluster stopped longer than the
grace accounts its missed fires alone, as one coalesced range, and fires the rest."""

from __future__ import annotations

from raftsched.client import Client
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.checks import read_node, require, view_problems
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import NODES, now_ms, per_second_task, wait_time_passed

LIMIT, TASKS = 20, 10


def test_the_leader_holds_planning_at_the_backlog_limit_and_a_disable_gets_through(
    make_cluster: ClusterFactory,
) -> None:
    cluster = make_cluster(extra_config=f"[scheduler]\nmax_dispatch_backlog = {LIMIT}\n")
    leader = cluster.wait_for_leader(30)
    log = cluster.log_dir / f"{leader}.log"
    with Client(cluster.targets(), timeout=30) as client:
        for i in range(TASKS):
            client.add_task(per_second_task(f"over-{i}"))
        # Ten fires a second and no executor: the limit is reached within a few seconds.
        wait_until(lambda: "is planned until they are down" in log.read_text(), 30, 0.2, "the leader's hold")
        committed = cluster.status(leader).fires_committed
        assert committed >= LIMIT
        # Held: the fires due now are not committed (an overloaded cluster's log stays bounded)...
        wait_until(lambda: client.get_task("over-0").next_fire_ms < now_ms() - 3000, 30)
        assert cluster.status(leader).fires_committed == committed
        # ...and a disable of one of the held tasks is accepted.
        record = client.disable_task("over-0")
        assert not record.enabled
        assert cluster.leader() == leader
        assert "fire planning resumes" not in log.read_text()
        # Its due fires were accounted first (nothing due is dropped), the others' are still held.
        assert cluster.status(leader).fires_committed > committed
        assert client.get_task("over-1").next_fire_ms < now_ms() - 3000


def test_a_cluster_stopped_longer_than_the_grace_coalesces_what_it_missed_and_fires_the_rest(
    cluster: LocalCluster,
) -> None:
    """All three nodes SIGSTOPped for 9 s (the grace is 5 s): on resume the leader plans the
    every-second task's missed fires alone, as one coalesced range (plan_missed), and its fires of
    the last 5 s next, as on-time fires; every nominal second is accounted exactly once, none
    early, on every node."""
    leader = cluster.wait_for_leader(30)
    with Client(cluster.targets(), timeout=30) as client:
        client.add_task(per_second_task("tick"))
        wait_until(lambda: client.get_task("tick").fires_total >= 3, 30, 0.2, "the first fires")
        for node in NODES:
            cluster.pause(node)
        stopped_ms = now_ms()
        wait_time_passed(stopped_ms + 9000)  # the outage: longer than the 5 s grace
        for node in NODES:
            cluster.resume(node)
        resumed_ms = now_ms()
        wait_until(lambda: client.get_task("tick").watermark_ms > resumed_ms + 3000, 60, 0.2, "catch-up")
    leader = cluster.wait_for_leader(30)
    for node in NODES:
        view = read_node(cluster, node, "tick")
        require(view_problems(view), view.summary())
    view = read_node(cluster, leader, "tick")
    coalesced = [r for r in view.fires if r.outcome == pb.COALESCED]
    assert coalesced, view.summary()
    # the missed seconds (more than the grace before the resume) are one range, within the outage
    assert all(stopped_ms - 2000 <= r.nominal_ms and r.through_ms < resumed_ms for r in coalesced), (
        view.summary()
    )
    assert sum(r.count for r in coalesced) >= 2, view.summary()
    # the seconds of the last grace before the resume fired
    on_time = [
        r for r in view.fires if r.outcome == pb.FIRED and resumed_ms - 4000 <= r.nominal_ms < resumed_ms
    ]
    assert len(on_time) >= 3, view.summary()
