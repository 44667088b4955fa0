"""Stock gRPC tooling against a real 3-node cluster: server reflection lists the raftsched
services on every node, and the standard health client sees ``raftsched.v1.Leader`` SERVING on
exactly the leader, before and after the leader is SIGKILLed."""

from __future__ import annotations

import functools
import signal
from collections.abc import Iterator
from pathlib import Path

import grpc
import pytest
from google.protobuf import descriptor_pool
from grpc_health.v1 import health_pb2, health_pb2_grpc
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import ProtoReflectionDescriptorDatabase

from raftsched.testing.cluster import LocalCluster, wait_until

pytestmark = pytest.mark.integration

SERVING = health_pb2.HealthCheckResponse.SERVING
NOT_SERVING = health_pb2.HealthCheckResponse.NOT_SERVING
LEADER = "raftsched.v1.Leader"


def _started(c: LocalCluster) -> str | None:
    """``ok`` once every node answers on its gRPC port as itself, ``lost`` if a node exited (its
    port was someone else's), None while they start."""
    nodes = [n.id for n in c.config.nodes]
    if c.alive() != nodes:
        return "lost"
    return "ok" if all(c.status(n).node_id == n for n in nodes) else None


@pytest.fixture
def cluster(tmp_path: Path) -> Iterator[LocalCluster]:
    # OS-assigned ports are free when chosen, but another process on this machine may take one
    # before the node binds it (the node then exits: "address is already in use"). Such a run
    # says nothing about reflection or health: start a fresh cluster on new ports instead.
    for attempt in range(3):
        c = LocalCluster.create(tmp_path / f"try{attempt}", 3)
        try:
            c.start()
            if wait_until(functools.partial(_started, c), 60, 0.2, "the nodes to start") == "ok":
                c.wait_for_leader(60)
                yield c
                return
        finally:
            c.stop()
    pytest.fail("three tries to start a 3-node cluster lost a port to another process")


def health(target: str, service: str) -> int | None:
    """The health status of ``service`` at ``target`` as the stock client reads it; None when
    the node does not answer."""
    with grpc.insecure_channel(target) as channel:
        try:
            reply = health_pb2_grpc.HealthStub(channel).Check(
                health_pb2.HealthCheckRequest(service=service), timeout=3
            )
        except grpc.RpcError:
            return None
        return int(reply.status)


def serving_leader(cluster: LocalCluster, nodes: list[str]) -> list[str]:
    """The nodes among ``nodes`` that report the leader service SERVING. Every other node must
    answer NOT_SERVING: one that does not answer raises (and the caller's poll tries again)."""
    statuses = {n: health(cluster.grpc_of(n), LEADER) for n in nodes}
    assert all(s in (SERVING, NOT_SERVING) for s in statuses.values()), statuses
    return [n for n, s in statuses.items() if s == SERVING]


def settled_leader(cluster: LocalCluster, nodes: list[str], timeout: float = 30.0) -> str:
    """Wait until exactly one of ``nodes`` serves the leader service and Raft names that same
    node the leader; return it."""

    def one() -> str | None:
        serving = serving_leader(cluster, nodes)
        if len(serving) != 1:
            return None
        return serving[0] if cluster.leader(among=nodes) == serving[0] else None

    return wait_until(one, timeout, 0.2, "exactly one node serving raftsched.v1.Leader")


def test_reflection_lists_the_raftsched_services_on_every_node(cluster: LocalCluster) -> None:
    for node in cluster.alive():
        with grpc.insecure_channel(cluster.grpc_of(node)) as channel:
            db = ProtoReflectionDescriptorDatabase(channel)
            services = set(db.get_services())
            assert {"raftsched.v1.Admin", "raftsched.v1.ExecutorService", "grpc.health.v1.Health"} <= services
            assert "grpc.reflection.v1alpha.ServerReflection" in services
            # The schema comes with them: a client can resolve a method and its message types.
            pool = descriptor_pool.DescriptorPool(db)
            admin = pool.FindServiceByName("raftsched.v1.Admin")
            status = admin.FindMethodByName("NodeStatus")
            assert status.input_type.full_name == "raftsched.v1.NodeStatusRequest"
            assert "leader_id" in status.output_type.fields_by_name


def test_the_stock_health_client_sees_the_leader_service_serving_only_on_the_leader(
    cluster: LocalCluster,
) -> None:
    nodes = cluster.alive()
    leader = settled_leader(cluster, nodes)
    for node in nodes:  # the node and its Admin service serve everywhere
        assert health(cluster.grpc_of(node), "") == SERVING
        assert health(cluster.grpc_of(node), "raftsched.v1.Admin") == SERVING

    cluster.kill(leader, signal.SIGKILL)
    survivors = [n for n in nodes if n != leader]
    new_leader = settled_leader(cluster, survivors, timeout=60)
    assert new_leader != leader
    [follower] = [n for n in survivors if n != new_leader]
    assert health(cluster.grpc_of(follower), LEADER) == NOT_SERVING
    assert health(cluster.grpc_of(new_leader), LEADER) == SERVING
