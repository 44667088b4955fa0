"""The Raft port against raw sockets and a wrong-secret peer: it binds only the configured address,
drops oversized, garbage and silent connections quickly with a log line naming the address, forces
no election doing so, ``raftsched status`` shows a wrong-secret node as refused, and the port
listens again after running out of file descriptors closed it."""

from __future__ import annotations

import contextlib
import itertools
import os
import re
import resource
import socket
import struct
import subprocess
import sys
import time
from pathlib import Path

import pytest

from raftsched.testing.cluster import LocalCluster, wait_until
from tests.integration.conftest import ClusterFactory

pytestmark = pytest.mark.integration

SECRET_LINE = re.compile(r'^secret = ".*"$', re.MULTILINE)
STABLE_S = 2.0  # how long the terms must stay unchanged after an attack


def _raft_addr(cluster: LocalCluster, node_id: str) -> tuple[str, int]:
    host, port = cluster.config.node(node_id).raft.rsplit(":", 1)
    return host, int(port)


def _terms(cluster: LocalCluster) -> dict[str, int]:
    return {n: cluster.status(n, timeout=5).term for n in cluster.alive()}


def _log(cluster: LocalCluster, node_id: str) -> str:
    return (cluster.log_dir / f"{node_id}.log").read_text(errors="replace")


def _wait_closed(sock: socket.socket, timeout: float) -> float:
    """Seconds until the server closed ``sock`` (EOF or reset); fails after ``timeout``."""
    started = time.monotonic()
    sock.settimeout(timeout)
    try:
        while sock.recv(65536):
            pass
    except ConnectionResetError:
        pass
    except TimeoutError:
        pytest.fail(f"the raft port kept the connection open for {timeout} s")
    return time.monotonic() - started


def _terms_stay(cluster: LocalCluster, before: dict[str, int]) -> None:
    deadline = time.monotonic() + STABLE_S
    while time.monotonic() < deadline:
        assert _terms(cluster) == before, "an election was forced"
        wait_until(lambda: True, 1.0, what="next poll")


def _refusal_logged(cluster: LocalCluster, node_id: str, local_port: int, why: str) -> None:
    pattern = re.compile(rf"WARNING .*raft port refused 127\.0\.0\.1:{local_port}\b.*{why}")
    wait_until(lambda: pattern.search(_log(cluster, node_id)), 10, what=f"a log line: {why}")


def test_the_raft_port_binds_only_the_configured_address(cluster: LocalCluster) -> None:
    cluster.wait_for_leader()
    _, port = _raft_addr(cluster, "n1")
    with socket.create_connection(("127.0.0.1", port), timeout=5):
        pass
    with pytest.raises(OSError), socket.create_connection(("127.0.0.2", port), timeout=5):
        pass  # reachable on every interface (0.0.0.0) would accept this


def test_hostile_connections_are_dropped_logged_and_force_no_election(cluster: LocalCluster) -> None:
    leader = cluster.wait_for_leader()
    addr = _raft_addr(cluster, leader)

    def one_term() -> dict[str, int] | None:
        terms = _terms(cluster)
        return terms if len(set(terms.values())) == 1 else None

    before = wait_until(one_term, 30, what="one term on every node")
    log_start = len(_log(cluster, leader))  # start-up stalls (imports, first elections) are not ours

    # A 2 GiB length prefix, then 16 MiB: refused on the prefix, before any body is buffered.
    with socket.create_connection(addr, timeout=5) as s:
        port = s.getsockname()[1]
        s.sendall(struct.pack("i", 2**31 - 1))
        with contextlib.suppress(OSError):  # the server closed it mid-send: what we want
            s.sendall(os.urandom(1 << 20) * 16)
        assert _wait_closed(s, 5) < 5
    _refusal_logged(cluster, leader, port, r"frame length 2147483647 outside")

    # A plausible frame of garbage: it does not decrypt.
    with socket.create_connection(addr, timeout=5) as s:
        port = s.getsockname()[1]
        body = os.urandom(200)
        s.sendall(struct.pack("i", len(body)) + body)
        assert _wait_closed(s, 5) < 5
    _refusal_logged(cluster, leader, port, r"does not decrypt")

    # Nothing at all: closed once the handshake deadline passes.
    with socket.create_connection(addr, timeout=5) as s:
        port = s.getsockname()[1]
        waited = _wait_closed(s, 15)
        assert 2.0 < waited < 10
    _refusal_logged(cluster, leader, port, r"did not authenticate within 3 s")

    _terms_stay(cluster, before)
    assert cluster.leader() == leader
    assert "tick thread stalled" not in _log(cluster, leader)[log_start:]


def test_a_wrong_secret_node_shows_as_refused_in_status(make_cluster: ClusterFactory) -> None:
    cluster = make_cluster(start=False)
    text, replaced = SECRET_LINE.subn(
        'secret = "not-the-cluster-secret-9876543210"', cluster.config_path.read_text()
    )
    assert replaced == 1
    wrong = cluster.config_path.with_name("wrong-secret.toml")
    wrong.write_text(text)
    intruder = LocalCluster(wrong, cluster.log_dir)
    try:
        cluster.start("n1")
        cluster.start("n2")
        intruder.start("n3")
        cluster.wait_for_leader(among=["n1", "n2"])

        def refused_row() -> dict[str, str] | None:
            rows = _status_rows(cluster.config_path)
            return rows if "raft refused" in rows.get("n3", "") else None

        rows = wait_until(refused_row, 30, 0.5, "status to show n3 as refused")
        print("\n".join(rows.values()))
        assert "raft refused" not in rows["n1"] and "raft refused" not in rows["n2"]
        logs = _log(cluster, "n1") + _log(cluster, "n2")
        assert re.search(r"WARNING .*raft port refused", logs)
    finally:
        intruder.stop()


def _status_rows(config: Path) -> dict[str, str]:
    """``raftsched status``'s table rows by node id."""
    out = subprocess.run(
        [sys.executable, "-m", "raftsched.cli", "--config", str(config), "status"],
        capture_output=True,
        text=True,
        timeout=30,
    )
    rows = {}
    for line in out.stdout.splitlines()[2:]:
        parts = line.split()
        if len(parts) > 1:
            rows[parts[1]] = line
    return rows


def _listening(addr: tuple[str, int]) -> bool:
    try:
        with socket.create_connection(addr, timeout=2):
            return True
    except OSError:
        return False


def _fail_one_accept(cluster: LocalCluster, node_id: str, pid: int) -> None:
    """Make the node's next ``accept()`` fail with EMFILE: lower ``pid``'s descriptor limit to its
    lowest free descriptor, connect, and put the limit back as soon as pysyncobj closed its
    listening socket (which resets the connection it could not accept). Retried while another
    descriptor was freed in between and the connection was accepted instead."""
    addr = _raft_addr(cluster, node_id)
    soft, hard = resource.prlimit(pid, resource.RLIMIT_NOFILE)
    for _ in range(40):
        used = {int(fd) for fd in os.listdir(f"/proc/{pid}/fd")}
        lowest_free = next(i for i in itertools.count() if i not in used)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (lowest_free, hard))
        try:
            with socket.create_connection(addr, timeout=2) as s:
                # pysyncobj's next poll (milliseconds) fails the accept; the wait is short, for
                # while the limit is low every file the node opens fails too (its journal's meta).
                s.settimeout(0.25)
                reset = s.recv(1) == b""
        except (ConnectionResetError, ConnectionRefusedError):
            reset = True  # the listening socket closed during the connect or after it
        except TimeoutError:
            reset = False  # accepted: it waits for our handshake
        finally:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, (soft, hard))
        if reset:
            return
    pytest.fail("the Raft port accepted every connection with its descriptor limit lowered")


def test_the_raft_port_listens_again_after_descriptors_ran_out(cluster: LocalCluster) -> None:
    """pysyncobj closes its listening socket for good when ``accept()`` fails (here EMFILE); the
    node must bind it again, or every peer that dials it is refused until it restarts."""
    cluster.wait_converged()
    # pysyncobj dials from the higher address to the lower: the lowest is dialled by every peer.
    target = min(cluster.config.nodes, key=lambda n: n.raft).id
    dialler = next(n.id for n in cluster.config.nodes if n.id != target)
    _fail_one_accept(cluster, target, cluster.procs[target].pid)
    addr = _raft_addr(cluster, target)
    wait_until(lambda: _listening(addr), 10, 0.2, what=f"{target}'s Raft port to listen again")
    log_text = _log(cluster, target)
    lost = r"WARNING .*the Raft port stopped listening \(its accept handler failed: \[Errno 24\]"
    assert re.search(lost, log_text)
    assert re.search(r"INFO .*the Raft port is listening again", log_text)

    # A peer that has to dial in again gets its link back.
    cluster.kill(dialler)
    cluster.start(dialler)

    def linked() -> bool:
        peers = {p.node_id: p.connected for p in cluster.status(target, timeout=5).raft_peers}
        return peers.get(dialler, False)

    wait_until(linked, 30, 0.2, what=f"{dialler} to connect to {target} again")
    cluster.wait_converged()
