"""Overload on real processes ([scheduler] max_dispatch_backlog): every-second tasks with no
executor to run them. The leader holds fire planning once the limit of attempts waits, says so
in its log, commits no more fires while held, and a disable sent meanwhile is accepted (the SDK
retries the first refusal, whose FiresWanted has the leader plan that task at once)."""

from __future__ import annotations

from raftsched.client import Client
from raftsched.testing.cluster import wait_until
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import now_ms, per_second_task

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
