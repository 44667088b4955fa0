"""Raft status decoded inside the consensus adapters: pysyncobj's raw keys never leave it."""

from __future__ import annotations

from pysyncobj import SyncObj, SyncObjConf

from raftsched.abc import ConsensusNode, PeerStatus, RaftStatus
from raftsched.consensus.memory import SimCluster
from raftsched.consensus.pysyncobj.node import PySyncObjNode
from raftsched.consensus.pysyncobj.patches import release_covered
from raftsched.consensus.pysyncobj.status import decode_status
from raftsched.testing.cluster import free_ports

PEERS = ["10.0.0.2:4321", "peer-b:4321"]


def test_a_leaders_status_names_role_term_indexes_and_every_peer_in_configured_order() -> None:
    raw = {
        "state": 2,
        "raft_term": 7,
        "commit_idx": 120,
        "log_len": 33,
        "last_applied": 119,
        f"partner_node_status_server_{PEERS[1]}": 2,
        f"partner_node_status_server_{PEERS[0]}": 0,
        f"match_idx_server_{PEERS[0]}": 88,
        f"match_idx_server_{PEERS[1]}": 120,
    }
    status = decode_status(raw, PEERS)
    assert status == RaftStatus(
        role="leader",
        term=7,
        commit_index=120,
        log_len=33,
        peers=(PeerStatus(PEERS[0], False, 88), PeerStatus(PEERS[1], True, 120)),
    )
    assert status.peer(PEERS[1]).connected


def test_a_followers_status_has_no_match_index_and_missing_keys_read_as_nothing_known() -> None:
    status = decode_status({"state": 1}, PEERS)
    assert (status.role, status.term, status.commit_index, status.log_len) == ("candidate", 0, 0, 0)
    assert status.peers == (PeerStatus(PEERS[0], False, -1), PeerStatus(PEERS[1], False, -1))
    assert decode_status({"state": 9}, []).role == "follower"


def test_an_unknown_peer_reads_as_disconnected() -> None:
    assert RaftStatus().peer("nobody:1") == PeerStatus("nobody:1", False, -1)
    assert RaftStatus() == RaftStatus("follower", 0, 0, 0, ())


def test_the_decoder_reads_the_keys_the_installed_pysyncobj_writes() -> None:
    own, peer = (f"127.0.0.1:{p}" for p in free_ports(2))
    raft = SyncObj(own, [peer], SyncObjConf(autoTick=False, password="x" * 16))
    try:
        raft.doTick(0.0)
        raw = raft.getStatus()
        assert f"partner_node_status_server_{peer}" in raw
        status = decode_status(raw, [peer])
    finally:
        raft.destroy()
    assert status.role == "follower"
    assert status.term == int(raw["raft_term"]) and status.commit_index == int(raw["commit_idx"])
    assert status.log_len == int(raw["log_len"]) >= 1
    assert status.peers == (PeerStatus(peer, False, -1),)


def test_the_simulated_node_reports_the_same_shape() -> None:
    cluster = SimCluster(["a", "b", "c"])
    node: ConsensusNode = cluster.nodes["a"]
    term = cluster.elect("a")
    cluster.nodes["a"].propose(b"x", lambda r, e: None)
    cluster.deliver()
    status = node.status()
    assert (status.role, status.term, status.commit_index, status.log_len) == ("leader", term, 1, 1)
    assert [p.address for p in status.peers] == ["b", "c"]
    assert all(p.connected and p.match_index == 0 for p in status.peers)  # they have no apply fn
    cluster.partition("c")
    assert not node.status().peer("c").connected
    assert cluster.nodes["b"].status().role == "follower"


def test_both_adapters_are_consensus_nodes() -> None:
    # Checked by mypy: a ConsensusNode-typed name accepts either implementation.
    nodes: list[type[ConsensusNode]] = [PySyncObjNode]
    sim: ConsensusNode = SimCluster(["a"]).nodes["a"]
    assert nodes and sim.node_id == "a"


def test_proposals_covered_by_an_installed_snapshot_are_taken_out_to_be_answered() -> None:
    """pysyncobj keeps a proposal's callback until it applies that index itself; an installed
    snapshot skips the applying. ``release_covered`` takes out exactly the covered ones."""
    waiting: dict[int, list[tuple[int, object]]] = {
        5: [(3, "a")],
        7: [(3, "b"), (4, "c")],
        8: [(4, "d")],
    }
    assert release_covered(waiting, 7) == ["a", "b", "c"]
    assert waiting == {8: [(4, "d")]}
    assert release_covered(waiting, 7) == []
