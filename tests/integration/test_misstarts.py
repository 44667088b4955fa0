"""Misstarts, each against the real program: a second node on a data dir in use, a gRPC or Raft
port in use, a second executor on an execution log in use. Each is refused with one line on
stderr and exit status 2, before it serves anything."""

from __future__ import annotations

import re
import socket
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftsched.cli.process import LOCK_FILE
from raftsched.client import Client
from raftsched.testing.cluster import NODE_COMMAND, LocalCluster, free_ports, wait_until
from tests.integration.conftest import ClusterFactory
from tests.support.procs import executor_argv


def run_refused(argv: list[str], timeout: float = 60.0) -> str:
    """Run a program that must refuse to start; returns its one stderr line."""
    done = subprocess.run(argv, capture_output=True, text=True, timeout=timeout, check=False)
    assert done.returncode == 2, (done.returncode, done.stderr)
    lines = done.stderr.splitlines()
    assert len(lines) == 1, done.stderr
    assert done.stdout == ""
    return lines[0]


def node_argv(cluster: LocalCluster, config: Path | None = None, node_id: str = "n1") -> list[str]:
    return [*NODE_COMMAND, "--config", str(config or cluster.config_path), "--node-id", node_id]


@pytest.fixture
def single(make_cluster: ClusterFactory) -> LocalCluster:
    cluster = make_cluster(nodes=1)
    cluster.wait_for_leader(60)
    return cluster


@pytest.fixture
def listening() -> Iterator[socket.socket]:
    """A loopback port some other program listens on."""
    with socket.socket() as other:
        other.bind(("127.0.0.1", 0))
        other.listen()
        yield other


def with_node(cluster: LocalCluster, path: Path, **changes: str) -> Path:
    """A copy of the cluster's config with n1's keys changed (raft, grpc, data_dir)."""
    text = cluster.config_path.read_text()
    for key, value in changes.items():
        text, count = re.subn(rf'^{key} = ".*"$', f'{key} = "{value}"', text, count=1, flags=re.M)
        assert count == 1, key
    path.write_text(text)
    return path


def test_a_second_node_on_a_data_dir_in_use_is_refused(single: LocalCluster) -> None:
    data_dir = single.config.node("n1").data_dir
    pid = single.procs["n1"].pid
    line = run_refused(node_argv(single))
    assert line == (
        f"raftsched-node: error: data dir {data_dir} is in use by another process (pid {pid}): "
        "stop it, or give node n1 a data dir of its own"
    )
    assert (data_dir / LOCK_FILE).read_text() == f"{pid}\n"
    # The first node still serves, and once it is gone the lock is free again (even after SIGKILL).
    with Client(single.targets()) as client:
        assert client.node_status().node_id == "n1"
    single.kill("n1")
    single.start("n1")
    single.wait_for_leader(60)


def test_a_grpc_port_in_use_is_one_line_naming_it(
    single: LocalCluster, listening: socket.socket, tmp_path: Path
) -> None:
    host, port = listening.getsockname()
    raft = free_ports(1)[0]
    config = with_node(
        single, tmp_path / "grpc.toml", raft=f"127.0.0.1:{raft}", grpc=f"{host}:{port}", data_dir="other"
    )
    line = run_refused(node_argv(single, config))
    assert line == f"raftsched-node: error: gRPC address {host}:{port} is already in use"
    # The port of a running node is refused the same way (a node's gRPC server does not share
    # its port).
    grpc_of_n1 = single.config.node("n1").grpc
    config = with_node(single, tmp_path / "n1.toml", raft=f"127.0.0.1:{raft}", data_dir="other2")
    line = run_refused(node_argv(single, config))
    assert line == f"raftsched-node: error: gRPC address {grpc_of_n1} is already in use"


def test_a_raft_port_in_use_is_one_line_and_exit_2(
    single: LocalCluster, listening: socket.socket, tmp_path: Path
) -> None:
    host, port = listening.getsockname()
    grpc = free_ports(1)[0]
    config = with_node(
        single, tmp_path / "raft.toml", raft=f"{host}:{port}", grpc=f"127.0.0.1:{grpc}", data_dir="other"
    )
    line = run_refused(node_argv(single, config))
    assert line == (
        f"raftsched-node: error: cannot listen on the Raft address {host}:{port}: "
        "the port is in use (or the address is not on this host)"
    )
    # Nothing listens on the gRPC port it would have served.
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", grpc))


def test_a_second_executor_on_an_execution_log_in_use_is_refused(
    single: LocalCluster, tmp_path: Path
) -> None:
    data_dir = tmp_path / "ex-data"
    first = single.start_executor("ex1", data_dir=data_dir)
    try:
        lock = data_dir / LOCK_FILE

        def locked() -> bool:  # the pid is written once the lock is held
            return lock.is_file() and lock.read_text() == f"{first.pid}\n"

        wait_until(locked, 60, what="the first executor's lock")
        line = run_refused(executor_argv(single.targets(), "ex2", data_dir))
        assert line == (
            f"raftsched-executor: error: data dir {data_dir} is in use by another process "
            f"(pid {first.pid}): stop it, or give executor ex2 a data dir of its own"
        )
        assert first.poll() is None
    finally:
        first.terminate()
        first.wait(timeout=30)
