"""The consensus adapter's membership hooks into pysyncobj: membership entries are mapped to the
address this node dials, and campaigns can be held (joining, stopping)."""

from __future__ import annotations

import pickle

from pysyncobj.node import TCPNode
from pysyncobj.syncobj import _COMMAND_TYPE

from raftsched.consensus.pysyncobj_node import _Raft


def bare_raft() -> _Raft:
    """A _Raft whose hooks run without a started SyncObj (no sockets, no threads)."""
    raft: _Raft = _Raft.__new__(_Raft)
    raft._raftsched_dial = lambda addr: {"127.0.0.2:7001": "127.0.0.1:9001"}.get(addr, addr)
    raft._raftsched_hold = lambda: False
    return raft


def membership_entry(kind: str, addr: str) -> bytes:
    return bytes([_COMMAND_TYPE.MEMBERSHIP]) + pickle.dumps([kind, addr, TCPNode(addr)])


def test_a_membership_entry_names_the_peer_by_the_address_this_node_dials() -> None:
    raft = bare_raft()
    kind, node_id, node = raft._SyncObj__parseChangeClusterRequest(membership_entry("add", "127.0.0.2:7001"))
    assert (kind, node_id, node.address) == ("add", "127.0.0.1:9001", "127.0.0.1:9001")
    kind, node_id, node = raft._SyncObj__parseChangeClusterRequest(membership_entry("rem", "127.0.0.5:7005"))
    assert (kind, node_id, node.address) == ("rem", "127.0.0.5:7005", "127.0.0.5:7005")  # no proxy: as is


def test_other_entries_are_not_membership_changes() -> None:
    raft = bare_raft()
    regular = bytes([_COMMAND_TYPE.REGULAR]) + pickle.dumps(("f", (b"x",)))
    assert raft._SyncObj__parseChangeClusterRequest(regular) is None


def test_held_campaigns_never_start_an_election() -> None:
    raft = bare_raft()
    raft._SyncObj__connectedNodes = {TCPNode("127.0.0.1:9001")}
    raft._SyncObj__otherNodes = {TCPNode("127.0.0.1:9001")}
    assert raft._SyncObj__connectedToAnyone()  # pysyncobj's own rule: connected to a peer
    raft._raftsched_hold = lambda: True
    assert not raft._SyncObj__connectedToAnyone()
