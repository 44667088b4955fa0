"""Issue 33's reproduction: a leader whose Raft links are cut (clients still reach it) must never
answer a read older than a write the new leader acknowledged. Each read through the old leader's
address is either fresh or refused; none is stale."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc

from raftsched.client import Client
from raftsched.errors import RaftschedError
from raftsched.model import IntervalTrigger, TaskSpec
from raftsched.testing.chaos.harness import _proxied_cluster
from raftsched.testing.chaos.netproxy import ProxyNet
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.timing.clock import SystemClock

pytestmark = pytest.mark.integration

_CLOCK = SystemClock()


@dataclass
class Tally:
    fresh: int = 0
    refused: int = 0
    while_deposed: int = 0  # reads asked of the old leader while it still said it led
    stale: list[str] = field(default_factory=list)
    # rounds in which the old leader's Leader health said NOT_SERVING while Raft there still
    # said it led (a load balancer stops sending it work before it steps down)
    health_off_while_claiming: int = 0


def _leader_health(address: str) -> int:
    with grpc.insecure_channel(address) as channel:
        reply = health_pb2_grpc.HealthStub(channel).Check(
            health_pb2.HealthCheckRequest(service="raftsched.v1.Leader"), timeout=5
        )
    return int(reply.status)


@pytest.fixture
def proxied(tmp_path: Path) -> Iterator[tuple[LocalCluster, ProxyNet]]:
    net = ProxyNet()
    try:
        # A deposed leader believes it leads for leader_fallback_timeout: 5 s (default 2 s) makes
        # the window the issue measured (stale answers up to 1.4 s after the newer write) wide
        # enough to hit every round.
        cluster = _proxied_cluster(tmp_path / "cluster", 3, net, "[raft]\nleader_fallback_timeout = 5.0\n")
        try:
            cluster.start()
            cluster.wait_for_leader(60)
            yield cluster, net
        finally:
            cluster.stop()
    finally:
        net.close()


def _spec(version_note: int) -> TaskSpec:
    return TaskSpec("reg", IntervalTrigger(3600_000), command=f"echo {version_note}")


def _raft_links(net: ProxyNet, node: str) -> list[str]:
    return [n for n in net.names() if n.startswith("raft:") and node in n[5:].split("->")]


def _round(cluster: LocalCluster, net: ProxyNet, tally: Tally, note: int) -> None:
    old = cluster.wait_for_leader(60)
    old_term = cluster.status(old).term
    with Client([cluster.grpc_of(old)], timeout=5, retries=40) as reader:
        before = reader.get_task("reg").version  # retried while the leader takes over
    links = _raft_links(net, old)
    net.cut(links)
    try:
        others = [n for n in cluster.alive() if n != old]
        new = wait_until(
            lambda: next(
                (n for n in others if (st := cluster.status(n)).role == "leader" and st.term > old_term),
                None,
            ),
            60,
            0.05,
            "the majority to elect a new leader",
        )
        # While the old leader still believes it leads, its Leader health already says it does
        # not (it has not heard from a majority for over a second).
        if cluster.status(old).role == "leader":
            wait_until(
                lambda: _leader_health(cluster.grpc_of(old)) == health_pb2.HealthCheckResponse.NOT_SERVING,
                10,
                0.05,
                f"{old}'s Leader health to say NOT_SERVING",
            )
            tally.health_off_while_claiming += cluster.status(old).role == "leader"
        with Client([cluster.grpc_of(new)], timeout=10, retries=20) as writer:
            acked = writer.update_task(_spec(note)).version
        assert acked > before
        acked_at = _CLOCK.monotonic()
        # Read through the old leader's address until it has stepped down (its reads are
        # redirected then) and at least its fallback timeout has passed.
        with Client([cluster.grpc_of(old)], timeout=5, retries=0) as reader:
            while True:
                claims = cluster.status(old).role == "leader"
                try:
                    got = reader.get_task("reg").version
                except RaftschedError:
                    tally.refused += 1
                else:
                    if got < acked:
                        tally.stale.append(
                            f"round {note}: {old} answered version {got} < {acked}, "
                            f"{_CLOCK.monotonic() - acked_at:.2f} s after the write was acknowledged"
                        )
                    else:
                        tally.fresh += 1
                tally.while_deposed += claims
                st = cluster.status(old)
                if (st.role != "leader" or st.term > old_term) and _CLOCK.monotonic() - acked_at > 2.5:
                    break
                assert _CLOCK.monotonic() - acked_at < 60, f"{old} never stepped down"
    finally:
        net.heal(links)
    wait_until(
        lambda: (
            cluster.status(old).applied_index >= cluster.status(new).applied_index - 5
            and cluster.status(old).role == "follower"
        ),
        60,
        0.1,
        f"{old} to rejoin as a follower",
    )


def _run(cluster: LocalCluster, net: ProxyNet, rounds: int) -> Tally:
    with Client(cluster.targets(), timeout=10) as client:
        client.add_task(_spec(0))
    tally = Tally()
    for note in range(1, rounds + 1):
        _round(cluster, net, tally, note)
    print(  # shown with -s: the figures the docs quote
        f"{rounds} rounds: {tally.fresh} fresh, {tally.refused} refused, {len(tally.stale)} stale; "
        f"{tally.while_deposed} asked while the old leader still said it led"
    )
    return tally


def test_a_leader_cut_off_from_raft_never_answers_a_stale_read(
    proxied: tuple[LocalCluster, ProxyNet],
) -> None:
    tally = _run(*proxied, rounds=2)
    assert not tally.stale, f"{len(tally.stale)} stale reads, first: {tally.stale[:3]}"
    assert tally.while_deposed > 0 and tally.refused > 0  # asked while it still believed it led
    assert tally.health_off_while_claiming > 0  # its Leader health said so before it stepped down


@pytest.mark.soak
def test_a_leader_cut_off_from_raft_never_answers_a_stale_read_in_ten_rounds(
    proxied: tuple[LocalCluster, ProxyNet],
) -> None:
    tally = _run(*proxied, rounds=10)
    assert not tally.stale, f"{len(tally.stale)} stale reads, first: {tally.stale[:3]}"
    assert tally.while_deposed > 0 and tally.refused > 0


def test_every_read_says_how_fresh_it_is(
    cluster: LocalCluster, client: Client, capsys: pytest.CaptureFixture[str]
) -> None:
    leader = cluster.wait_for_leader(60)
    follower = next(n for n in cluster.alive() if n != leader)
    written = client.add_task(_spec(1))
    got = client.get_task("reg")
    info = client.last_read
    assert got.version == written.version
    assert info is not None and info.linearizable and info.node_id == leader and info.index > 0
    with Client([cluster.grpc_of(follower)], stale_reads=True, timeout=5) as stale:
        wait_until(lambda: stale.get_task("reg").version == written.version, 30, 0.05, "the follower")
        info = stale.last_read
        assert info is not None and not info.linearizable and info.node_id == follower
        assert info.index <= info.commit_index and 0 <= info.contact_ms < 5000
    status = cluster.status(leader)
    assert status.read_barriers > 0 and status.HasField("contact_age_ms") and status.contact_age_ms < 5000
    # The CLI's --stale says which node answered and how far behind it may have been.
    from raftsched.cli import main

    assert main(["--cluster", cluster.grpc_of(follower), "--stale", "task", "show", "reg"]) == 0
    err = capsys.readouterr().err
    assert f"note: stale read from {follower}: applied index" in err
