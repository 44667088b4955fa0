"""Leader failover and whole-cluster restart with a per-second task: no fire lost, none twice,
none early (docs/architecture.md §3, invariants 1-3 and 5)."""

from __future__ import annotations

import signal

import pytest

from raftsched.client import Client
from raftsched.model import CronTrigger, TaskSpec
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.checks import (
    FIRED_OR_COALESCED,
    SECOND_MS,
    NodeView,
    describe,
    node_client,
    read_node,
    require,
    view_problems,
)
from tests.integration.conftest import ClusterFactory
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
GRACE_MS = 2_000  # scheduler.misfire_grace_seconds of the whole-cluster restart's cluster
SHORT_GRACE = f"[scheduler]\nmisfire_grace_seconds = {GRACE_MS // 1000}\n"


def _same_views(views: dict[str, NodeView]) -> None:
    first_id, first = next(iter(views.items()))
    for nid, view in views.items():
        assert view.task == first.task, f"task record of {nid} differs from {first_id}"
        assert view.fires == first.fires, (
            f"fire accounting of {nid} differs from {first_id}:\n{view.summary()}\n{first.summary()}"
        )
        assert view.runs == first.runs, f"runs of {nid} differ from {first_id}"


def test_per_second_task_survives_leader_sigkill(cluster: LocalCluster, client: Client) -> None:
    cluster.wait_for_leader()
    client.add_task(per_second_task(TASK))
    wait_until(lambda: client.get_task(TASK).fires_total >= 4, 20, 0.1, "4 fires accounted")
    # Asked only now: on a loaded machine a tick stall can move leadership at any time.
    old_leader = cluster.wait_for_leader()
    old_epoch = cluster.status(old_leader).term

    kill_ms = now_ms()
    cluster.kill(old_leader, signal.SIGKILL)
    survivors = [n for n in NODES if n != old_leader]
    new_leader = cluster.wait_for_leader(timeout=20, among=survivors)
    new_epoch = cluster.status(new_leader).term
    assert new_epoch > old_epoch
    wait_accounted_through(cluster, survivors, TASK, kill_ms + 4 * SECOND_MS)

    for nid in survivors:
        view = read_node(cluster, nid, TASK)
        require(view_problems(view), view.summary())
        # (>=: on a loaded machine a second election may follow the first.)
        assert any(f.epoch >= new_epoch for f in view.fires), (
            f"{nid}: no record of the new leader's epoch {new_epoch}\n{view.summary()}"
        )
        assert any(f.epoch == old_epoch for f in view.fires), view.summary()

    # The killed node comes back from its data dir and converges with the others.
    cluster.start(old_leader)
    restart_index = cluster.status(new_leader).applied_index
    wait_caught_up(cluster, old_leader, restart_index)
    chains_agree_after(cluster, restart_index)
    disabled_ms = now_ms()
    client.disable_task(TASK)  # quiet cluster: full digests become comparable
    cluster.wait_converged()
    final = {nid: read_node(cluster, nid, TASK) for nid in NODES}
    for view in final.values():
        # A fire due as the disable is applied is accounted as skipped (disabled), not fired:
        # that outcome, and only for fires the leader decided after the disable was asked for.
        require(view_problems(view, outcomes={*FIRED_OR_COALESCED, pb.SKIPPED_DISABLED}), view.summary())
        skipped = [f for f in view.fires if f.outcome == pb.SKIPPED_DISABLED]
        early = [f for f in skipped if f.decided_ms < disabled_ms]
        assert not early, f"skipped as disabled before the disable ({disabled_ms})\n{view.summary()}"
    _same_views(final)


def test_whole_cluster_restart_keeps_state_and_accounts_the_gap(make_cluster: ClusterFactory) -> None:
    # A 2 s misfire grace (the default is 5 s): a shorter downtime still holds both missed and late fires.
    cluster = make_cluster(extra_config=SHORT_GRACE)
    with Client(cluster.targets()) as client:
        _restart_whole_cluster(cluster, client)


def _restart_whole_cluster(cluster: LocalCluster, client: Client) -> None:
    cluster.wait_for_leader()
    client.add_task(per_second_task(TASK))
    client.add_task(TaskSpec("paused", CronTrigger("*/5 * * * *"), command="echo paused"), disabled=True)
    nightly = TaskSpec("nightly", CronTrigger("0 2 * * *", "Europe/Berlin"), command="echo v1")
    client.add_task(nightly)
    client.update_task(TaskSpec("nightly", nightly.trigger, command="echo v2"), expected_version=1)
    wait_until(lambda: client.get_task(TASK).fires_total >= 3, 20, 0.1, "3 fires accounted")
    leader = cluster.wait_for_leader()
    old_epoch = cluster.status(leader).term
    with node_client(cluster, leader) as c:
        before = {t.spec.name: t for t in c.list_tasks()}

    cluster.stop()  # SIGTERM to every node
    stopped_ms = now_ms()
    # Down for longer than the misfire grace, so the gap holds both missed and late fires.
    wait_time_passed(stopped_ms + GRACE_MS + 2 * SECOND_MS)
    cluster.start()
    leader = cluster.wait_for_leader()
    restarted_ms = now_ms()
    new_epoch = cluster.status(leader).term
    assert new_epoch > old_epoch, "the Raft term must survive a restart (it is the fencing epoch)"
    wait_accounted_through(cluster, NODES, TASK, restarted_ms + 3 * SECOND_MS)

    for nid in NODES:
        with node_client(cluster, nid) as c:
            after = {t.spec.name: t for t in c.list_tasks()}
        assert sorted(after) == ["nightly", "paused", TASK]
        assert after["nightly"].version == 2 and after["nightly"].spec.command == "echo v2"
        assert after["nightly"].spec.trigger.cron.timezone == "Europe/Berlin"
        assert after["paused"].enabled is False and after[TASK].enabled is True
        for name in ("nightly", "paused"):
            assert after[name] == before[name], f"{nid}: {name} changed across the restart"

        view = read_node(cluster, nid, TASK)
        require(view_problems(view), view.summary())
        _check_gap(view.fires, old_epoch, new_epoch, stopped_ms)


def _check_gap(fires: tuple[pb.FireRecord, ...], old_epoch: int, new_epoch: int, stopped_ms: int) -> None:
    """The first batch after the restart accounts the whole downtime: seconds older than the grace
    are coalesced in one range record; the newer ones fire late, within the grace."""
    context = describe(fires)
    assert max(f.decided_ms for f in fires if f.epoch <= old_epoch) <= stopped_ms, context
    first = min((f for f in fires if f.epoch >= new_epoch), key=lambda f: f.nominal_ms)
    batch = [f for f in fires if f.epoch == first.epoch and f.decided_ms == first.decided_ms]
    decided = first.decided_ms
    coalesced = [f for f in batch if f.outcome == pb.COALESCED]
    fired = [f for f in batch if f.outcome == pb.FIRED]
    assert len(coalesced) == 1, f"expected one range record for the missed seconds\n{context}"
    missed = coalesced[0]
    assert missed.count >= 2 and missed.through_ms == missed.nominal_ms + (missed.count - 1) * SECOND_MS, (
        context
    )
    assert decided - missed.through_ms > GRACE_MS, f"coalesced a fire still within the grace\n{context}"
    assert "misfire=latest" in missed.reason, context
    assert fired, f"the seconds within the grace must fire (late)\n{context}"
    assert all(f.nominal_ms > missed.through_ms for f in fired), context
    assert all(0 <= decided - f.nominal_ms <= GRACE_MS for f in fired), context
    # The downtime itself (stop to first new-epoch decision) is inside this one batch.
    assert missed.nominal_ms <= stopped_ms + SECOND_MS, context
