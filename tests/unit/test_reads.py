"""Linearizable reads: the read index's batching and bound, the barrier contract of both consensus
nodes (the in-memory twin and the applier under pysyncobj), and the freshness a reply carries."""

from __future__ import annotations

import asyncio
import threading

import pytest

from raftsched import codec
from raftsched.abc import BarrierCallback, ProposeError
from raftsched.consensus.applier import Applier
from raftsched.consensus.memory import SimCluster
from raftsched.errors import NotLeader, Unavailable
from raftsched.leader.gate import Stamp
from raftsched.leader.reads import NOT_SURE, ReadIndex, barrier_command
from raftsched.readinfo import ReadInfo
from tests.support.wait import until


class _Barriers:
    """A consensus stand-in that records barrier proposals and answers them when told."""

    def __init__(self) -> None:
        self.proposed: list[tuple[bytes, BarrierCallback]] = []

    def propose(self, data: bytes, callback: BarrierCallback) -> None:
        self.proposed.append((data, callback))

    def commit(self, n: int, index: int) -> None:
        self.proposed[n][1](index, None)


def _stamp() -> Stamp:
    return Stamp(now_ms=1_000, epoch=3, origin="n1")


def test_reads_arriving_while_a_barrier_is_in_flight_share_the_next_one() -> None:
    async def run() -> None:
        net = _Barriers()
        reads = ReadIndex(_stamp, net.propose, timeout_s=5)
        first = asyncio.ensure_future(reads.confirm())
        await until(lambda: len(net.proposed) == 1, 2.0, "barrier 1 proposed")
        # Arrived while the first barrier is in flight: it does not cover them; one more does.
        later = [asyncio.ensure_future(reads.confirm()) for _ in range(20)]
        await asyncio.sleep(0.01)
        assert len(net.proposed) == 1
        net.commit(0, 41)
        assert await first == 41
        await until(lambda: len(net.proposed) == 2, 2.0, "barrier 2 proposed")
        assert not any(f.done() for f in later)
        net.commit(1, 44)
        assert await asyncio.gather(*later) == [44] * 20
        assert reads.barriers == 2 and reads.last_index == 44 and len(net.proposed) == 2

    asyncio.run(run())


def test_a_read_whose_barrier_does_not_commit_in_time_is_refused_as_not_sure() -> None:
    async def run() -> None:
        net = _Barriers()
        reads = ReadIndex(_stamp, net.propose, timeout_s=0.05)
        with pytest.raises(Unavailable, match=NOT_SURE):
            await reads.confirm()
        assert reads.refused == 1
        # The stuck barrier does not hold every later read hostage: a new one is proposed.
        task = asyncio.ensure_future(reads.confirm())
        await until(lambda: len(net.proposed) == 2, 2.0, "barrier 2 proposed")
        net.commit(1, 7)
        assert await task == 7

    asyncio.run(run())


def test_a_failed_barrier_refuses_its_reads_and_a_non_leader_redirects() -> None:
    async def run() -> None:
        net = _Barriers()
        reads = ReadIndex(_stamp, net.propose, timeout_s=5)
        task = asyncio.ensure_future(reads.confirm())
        await until(lambda: len(net.proposed) == 1, 2.0, "barrier 1 proposed")
        net.proposed[0][1](0, ProposeError("not_leader", "raft: not leader"))
        with pytest.raises(Unavailable, match=NOT_SURE):
            await task

        def not_leading() -> Stamp:
            raise NotLeader("n1 is not the leader; the leader is at x:1", "x:1")

        with pytest.raises(NotLeader):
            await ReadIndex(not_leading, net.propose).confirm()

    asyncio.run(run())


def test_the_barrier_command_is_no_takeover_barrier() -> None:
    cmd = codec.decode_command(barrier_command(_stamp()))
    assert cmd.WhichOneof("body") == "barrier"
    assert cmd.barrier.node_id == ""  # no node takes it for its own takeover barrier
    assert cmd.barrier.read_by == "n1" and cmd.epoch == 3


def test_sim_a_deposed_leader_cut_off_never_confirms_a_connected_one_does() -> None:
    cluster = SimCluster(["n1", "n2", "n3"])
    for node in cluster.nodes.values():
        node.apply_fn = lambda index, data: b""
    cluster.elect("n1")
    got: dict[str, tuple[int, ProposeError | None]] = {}

    def cb(name: str) -> BarrierCallback:
        return lambda index, error: got.__setitem__(name, (index, error))

    cluster.nodes["n1"].propose_barrier(b"x", cb("before"))
    cluster.deliver()
    assert got["before"] == (1, None)
    cluster.partition("n1")
    cluster.elect("n2")
    assert cluster.nodes["n1"].is_leader()  # still believes it leads
    cluster.nodes["n1"].propose_barrier(b"x", cb("deposed"))
    cluster.nodes["n2"].propose_barrier(b"x", cb("new"))
    cluster.deliver()
    assert got["new"] == (2, None)
    assert "deposed" not in got  # never confirmed: the read index refuses its reads in time
    cluster.heal()
    cluster.deliver()
    assert got["deposed"] == (3, None)  # committed after it was proposed: a valid index again


def test_sim_a_barrier_is_answered_after_the_store_commit() -> None:
    cluster = SimCluster(["n1", "n2", "n3"])
    order: list[str] = []
    for node in cluster.nodes.values():
        node.apply_fn = lambda index, data: b""
    n1 = cluster.nodes["n1"]
    n1.end_of_tick = lambda: order.append("commit")
    cluster.elect("n1")
    n1.propose_barrier(b"x", lambda index, error: order.append(f"barrier {index}"))
    cluster.deliver()
    assert order == ["commit", "barrier 1"]


def test_applier_answers_a_durable_waiter_only_after_the_store_commit() -> None:
    committed: list[int] = []
    gate = threading.Event()
    applied: list[int] = []

    def apply(index: int, data: bytes) -> bytes:
        applied.append(index)
        return b""

    def commit() -> None:
        gate.wait(5)
        committed.append(applied[-1] if applied else 0)

    applier = Applier(apply, commit)
    applier.start()
    try:
        answers: list[bool] = []
        done = threading.Event()

        def durable(ok: bool) -> None:
            answers.append(ok)
            done.set()

        applier.enqueue(1, b"a")
        applier.on_durable(1, durable)
        assert not done.wait(0.1)  # applied, but the commit is held back (a bounded absence check)
        gate.set()
        assert done.wait(5) and answers == [True] and committed
        again: list[bool] = []
        applier.on_durable(1, again.append)  # already durable: answered at once
        assert again == [True]
    finally:
        gate.set()
        applier.stop()


def test_applier_reset_refuses_waiters_the_snapshot_covers() -> None:
    applier = Applier(lambda i, d: b"", lambda: None)
    answers: list[bool] = []
    applier.on_durable(5, answers.append)
    applier.on_durable(9, answers.append)
    applier.reset(6)
    assert answers == [False]  # 5 covered, never applied here; 9 still waits
    applier.on_durable(4, answers.append)
    assert answers == [False, True]


def test_read_info_round_trips_and_rejects_garbage() -> None:
    fresh = ReadInfo(True, "n1", 120)
    stale = ReadInfo(False, "n2", 118, 125, 40)
    assert ReadInfo.parse(fresh.header()) == fresh
    assert ReadInfo.parse(stale.header()) == stale
    assert stale.behind == 7 and "7 behind" in stale.describe()
    assert ReadInfo.parse("stale node=n2 applied=x") is None
    assert ReadInfo.parse("whatever") is None
    assert ReadInfo.from_metadata([("raftsched-read", stale.header().encode())]) == stale


def test_status_shows_a_leader_without_a_recent_majority_as_unconfirmed() -> None:
    from raftsched.cli.cluster import role_text

    assert role_text("leader", 30) == "leader"
    assert role_text("leader", 2500) == "leader? (no majority for 2.5 s)"
    assert role_text("follower", 2500) == "follower"


def test_metrics_report_read_barriers_refusals_and_contact_age() -> None:
    from raftsched.fsm.tally import ApplyTally
    from raftsched.observability.node_metrics import NodeMetrics, NodeSample

    sample = NodeSample(read_barriers=12, reads_refused=3, contact_age_seconds=0.25)
    text = NodeMetrics("n1", lambda: sample, ApplyTally()).exposition()[0].decode()
    assert 'raftsched_read_barriers_total{node="n1"} 12' in text
    assert 'raftsched_reads_refused_total{node="n1"} 3' in text
    assert 'raftsched_raft_contact_age_seconds{node="n1"} 0.25' in text
