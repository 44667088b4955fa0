"""The ledger of pysyncobj patches (raftsched/consensus/pysyncobj/patches.py) holds: every private
member a patch relies on exists in the installed pysyncobj, every override is the method pysyncobj
reaches, every listed test exists; and the patches' own tests that need no cluster."""

from __future__ import annotations

import importlib
import inspect
import socket
import struct
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pysyncobj
import pytest
from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, syncobj
from pysyncobj.poller import createPoller
from pysyncobj.serializer import Serializer
from pysyncobj.tcp_connection import CONNECTION_STATE, TcpConnection
from pysyncobj.tcp_server import TcpServer
from pysyncobj.transport import TCPTransport

from raftsched.consensus.pysyncobj.node import PySyncObjNode, _Raft
from raftsched.consensus.pysyncobj.patches import PATCHES, PINNED_VERSION, cap_unverified_commit, leader_wait
from raftsched.consensus.pysyncobj.transport import MAX_PREAUTH_FRAME, GuardedConnection, RaftPortGuard
from raftsched.testing.cluster import free_ports

ROOT = Path(__file__).resolve().parents[2]
CLASSES: dict[str, type] = {
    "SyncObj": SyncObj,
    "TCPTransport": TCPTransport,
    "TcpConnection": TcpConnection,
    "TcpServer": TcpServer,
    "Serializer": Serializer,
}
KINDS = {"safety", "liveness", "hardening", "hook", "read"}


def _attribute(member: str) -> tuple[str, str, bool]:
    """``"instance:SyncObj.__x"`` -> ("SyncObj", "_SyncObj__x", True)."""
    instance = member.startswith("instance:")
    owner, name = member.removeprefix("instance:").split(".", 1)
    return owner, (f"_{owner}{name}" if name.startswith("__") else name), instance


@pytest.fixture(scope="module")
def raft() -> Iterator[_Raft]:
    """A real SyncObj subclass (no tick thread, bound on a loopback port, two silent peers)."""
    ports = free_ports(3)
    raft = _Raft(
        lambda _index, _data: None,
        f"127.0.0.1:{ports[0]}",
        [f"127.0.0.1:{p}" for p in ports[1:]],
        SyncObjConf(autoTick=False),
    )
    yield raft
    raft.destroy()


def _guarded_connection() -> tuple[GuardedConnection, socket.socket]:
    """A pysyncobj connection over a socket pair, guarded as the transport guards one; and the
    other end."""
    ours, theirs = socket.socketpair()
    ours.setblocking(False)
    conn = TcpConnection(createPoller("auto"), socket=ours)
    conn.__class__ = GuardedConnection
    conn._raftsched_guard = RaftPortGuard("n1")
    conn._raftsched_address = "127.0.0.1:1"
    return conn, theirs


@pytest.fixture
def connection() -> Iterator[GuardedConnection]:
    conn, theirs = _guarded_connection()
    yield conn
    conn.disconnect()
    theirs.close()


def _instances(raft: _Raft, connection: TcpConnection) -> dict[str, object]:
    transport = raft._SyncObj__transport
    return {
        "SyncObj": raft,
        "TCPTransport": transport,
        "TcpServer": transport._server,
        "TcpConnection": connection,
        "Serializer": raft._SyncObj__serializer,
    }


def test_the_patches_were_checked_against_the_installed_pysyncobj() -> None:
    """A new pysyncobj fails here first: read every patch below against its source, then pin it."""
    from pysyncobj.version import VERSION

    assert VERSION == PINNED_VERSION, (
        f"pysyncobj {VERSION} installed, the patches in raftsched/consensus/pysyncobj/patches.py "
        f"were checked against {PINNED_VERSION}: re-check each one, then update PINNED_VERSION"
    )
    assert Path(pysyncobj.__file__).parent.name == "pysyncobj"


@pytest.mark.parametrize("patch", PATCHES, ids=[p.name for p in PATCHES])
def test_every_member_a_patch_relies_on_exists(patch: Any, raft: _Raft, connection: TcpConnection) -> None:
    instances = _instances(raft, connection)
    missing = []
    for member in patch.members:
        owner, name, on_instance = _attribute(member)
        where: object = instances[owner] if on_instance else CLASSES[owner]
        if not hasattr(where, name):
            missing.append(member)
    assert not missing, f"patch {patch.name}: the installed pysyncobj has no {missing}"


@pytest.mark.parametrize(
    "patch", [p for p in PATCHES if p.overrides], ids=[p.name for p in PATCHES if p.overrides]
)
def test_every_override_replaces_what_pysyncobj_calls(patch: Any) -> None:
    for override in patch.overrides:
        module_name, qualified = override.split(":")
        class_name, name = qualified.split(".", 1)
        module = importlib.import_module(f"raftsched.consensus.pysyncobj.{module_name}")
        ours = getattr(module, class_name)
        assert name in vars(ours), f"{override}: not defined by {class_name}"
        bases = [b for b in ours.__mro__[1:] if b.__module__.startswith("pysyncobj")]
        base = next((b for b in bases if name in vars(b)), None)
        if name.startswith("_") and "__" in name:  # a name-mangled method: pysyncobj's must exist
            assert base is not None, f"{override}: pysyncobj has no {name} to override"
        if base is None:
            continue  # a method of ours that the patch adds (the ledger names it for the reader)
        assert vars(ours)[name] is not vars(base)[name]
        mangled = name.split("__", 1)
        if len(mangled) == 2 and mangled[0] == f"_{base.__name__}":
            # pysyncobj must reach the method through ``self`` for the override to take effect.
            source = inspect.getsource(base)
            assert f"self.__{mangled[1]}" in source, (
                f"{override}: pysyncobj no longer calls self.__{mangled[1]}"
            )


@pytest.mark.parametrize("patch", PATCHES, ids=[p.name for p in PATCHES])
def test_every_patch_is_explained_and_has_a_test_that_exists(patch: Any) -> None:
    assert patch.kind in KINDS and patch.reason and patch.reference and patch.tests
    for test in patch.tests:
        path, name = test.split("::")
        source = (ROOT / path).read_text()
        assert f"def {name}(" in source, f"patch {patch.name}: {test} does not exist"


def test_the_real_syncobj_runs_our_transport_and_handlers(raft: _Raft) -> None:
    from raftsched.consensus.pysyncobj.transport import GuardedServer, GuardedTransport

    transport = raft._SyncObj__transport
    assert type(transport) is GuardedTransport and type(transport._server) is GuardedServer
    assert all(type(c) is GuardedConnection for c in transport._connections.values())


def test_a_leader_waits_no_longer_than_its_next_append() -> None:
    assert leader_wait(0.5, 0.012, 0.02) == 0.012  # due in 12 ms: wake then
    assert leader_wait(0.5, 0.0, 0.02) == 0.02  # sent in this tick: the next one is a period away
    assert leader_wait(0.5, -0.003, 0.02) == 0.02
    assert leader_wait(0.005, 0.012, 0.02) == 0.005  # never longer than the tick's own bound


def test_an_unverified_append_never_raises_the_commit_index() -> None:
    chunk = {"type": "append_entries", "term": 2, "commit_index": 10, "serialized": None}
    assert cap_unverified_commit(chunk, 2) == {**chunk, "commit_index": 2}
    verified = {"type": "append_entries", "term": 2, "commit_index": 10, "prevLogIdx": 2, "prevLogTerm": 1}
    assert cap_unverified_commit(verified, 2) is verified
    lower = {**chunk, "commit_index": 1}
    assert cap_unverified_commit(lower, 2) is lower
    vote = {"type": "request_vote", "term": 3}
    assert cap_unverified_commit(vote, 2) is vote


def test_a_snapshot_install_answers_the_proposals_it_covers(raft: _Raft) -> None:
    """The stalled-leader bug: pysyncobj keeps a proposal's callback in ``__commandsWaitingCommit``
    until it applies the index itself, which a snapshot install skips. The node answers every
    covered one "unknown outcome" (an "unavailable" ProposeError) and keeps the others."""
    node: PySyncObjNode = PySyncObjNode.__new__(PySyncObjNode)
    node.node_id = "n1"
    node._raft = raft
    answers: list[tuple[object, int]] = []
    waiting = raft._SyncObj__commandsWaitingCommit
    term = int(raft.raftCurrentTerm)
    for index in (5, 7, 9):  # pysyncobj's own shape: index -> [(term, callback), ...]
        waiting[index].append((term, lambda result, err, i=index: answers.append((i, err))))
    try:
        assert node._release_covered_proposals(7) == 2
        assert answers == [(5, FAIL_REASON.UNKNOWN_OUTCOME), (7, FAIL_REASON.UNKNOWN_OUTCOME)]
        assert list(waiting) == [9]
    finally:
        waiting.clear()


def test_an_oversized_frame_is_refused_before_its_body_is_read(connection: GuardedConnection) -> None:
    """pysyncobj buffers whatever a frame's length prefix claims; the guard refuses the claim."""
    refused: list[str] = []
    connection._raftsched_guard = type("G", (), {"refused": lambda _self, _a, why, _n: refused.append(why)})()
    claim = MAX_PREAUTH_FRAME + 1
    connection._TcpConnection__readBuffer = struct.pack("i", claim)
    assert connection._TcpConnection__processParseMessage() is None
    assert refused == [f"frame length {claim} outside 1..{MAX_PREAUTH_FRAME} bytes"]
    assert connection.state == CONNECTION_STATE.DISCONNECTED


def test_the_raft_view_reads_a_real_syncobj(raft: _Raft) -> None:
    self_addr = str(raft.selfNode.address)
    peers = sorted(str(n.address) for n in raft.otherNodes)
    assert raft.member_addresses() == sorted([self_addr, *peers])
    assert raft.contact_age(0.0, leading=False) is None  # no leader heard yet
    assert raft.contact_age(0.0, leading=True) is None  # no answer from a majority yet


def test_a_leader_s_contact_age_is_timed_by_pysyncobj_s_clock(
    raft: _Raft, monkeypatch: pytest.MonkeyPatch
) -> None:
    """pysyncobj stamps ``__lastResponseTime`` with its own clock (``pysyncobj.monotonic``,
    CLOCK_MONOTONIC_RAW on Linux), which drifts from ``time.monotonic`` with uptime (0.256 s
    after 18 h on the dev machine); the age must be taken on that clock. Here it is 1,000 s
    behind ``time.monotonic``: the age read against ``time.monotonic`` was 1,000.25 s."""
    raw = syncobj.monotonicTime
    monkeypatch.setattr(syncobj, "monotonicTime", lambda: raw() - 1000.0)
    answered = syncobj.monotonicTime() - 0.25
    monkeypatch.setattr(raft, "_SyncObj__lastResponseTime", dict.fromkeys(raft.otherNodes, answered))
    age = raft.contact_age(time.monotonic(), leading=True)  # as PySyncObjNode.status calls it
    assert age is not None and 0.25 <= age < 5.0, age
