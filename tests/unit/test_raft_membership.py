"""The consensus adapter's membership hooks into pysyncobj: membership entries are mapped to the
address this node dials, and campaigns can be held (joining, stopping)."""

from __future__ import annotations

import pickle

import pytest
from pysyncobj.node import TCPNode
from pysyncobj.syncobj import _COMMAND_TYPE, SyncObj

from raftsched.clockwatch import ClockWatch
from raftsched.consensus.pysyncobj.node import PySyncObjNode, _Raft


def bare_raft() -> _Raft:
    """A _Raft whose hooks run without a started SyncObj (no sockets, no threads)."""
    raft: _Raft = _Raft.__new__(_Raft)
    raft._raftsched_dial = lambda addr: {"127.0.0.2:7001": "127.0.0.1:9001"}.get(addr, addr)
    raft._raftsched_hold = lambda: False
    raft._raftsched_leader_heard = lambda: None
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


def _fake_on_message(self: SyncObj, node: TCPNode, message: dict[str, object]) -> None:
    """pysyncobj's leader bookkeeping, as far as the hold depends on it: an append_entries names
    its sender the leader; a request_vote of a higher term forgets the leader."""
    if message["type"] == "append_entries":
        self._SyncObj__raftLeader = node
    elif message["type"] == "request_vote":
        self._SyncObj__raftLeader = None


def _held_joining_node() -> tuple[PySyncObjNode, _Raft]:
    """Node n4 and its bare ``_Raft``, joining with campaigns held until it hears a leader, one
    peer connected and no leader known."""
    node: PySyncObjNode = PySyncObjNode.__new__(PySyncObjNode)
    node.node_id = "n4"
    node._holding = False
    node.clock_watch = None
    node._clock_held_logged = False
    node.hold_elections(True, until_leader=True)
    raft = bare_raft()
    raft._SyncObj__raftLeader = None
    raft._raftsched_hold = node._campaigns_held
    node._raft = raft
    raft._SyncObj__connectedNodes = {TCPNode("127.0.0.1:9001")}
    raft._SyncObj__otherNodes = {TCPNode("127.0.0.1:9001")}
    return node, raft


def test_a_joining_node_campaigns_once_it_has_heard_a_leader_even_if_a_vote_request_forgot_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The CI chaos run's liveness failure: the replacement node (joined, so campaigns held until
    it hears a leader) followed the leader; the leader was SIGKILLed; the other follower, just
    restarted and one entry behind, timed out first and asked for a vote of a higher term, which
    made pysyncobj forget the leader. Checked only when the election timer fired, the hold then
    never ended: the joined node refused the shorter log its vote and never campaigned itself."""
    monkeypatch.setattr(SyncObj, "_SyncObj__onMessageReceived", _fake_on_message)
    node, raft = _held_joining_node()
    raft._raftsched_leader_heard = node._leader_heard
    raft._SyncObj__raftCommitIndex = 0
    assert not raft._SyncObj__connectedToAnyone()  # held: no leader heard yet

    leader, other = TCPNode("127.0.0.1:9001"), TCPNode("127.0.0.1:9002")
    raft._SyncObj__onMessageReceived(leader, {"type": "append_entries", "term": 7, "commit_index": 0})
    raft._SyncObj__onMessageReceived(other, {"type": "request_vote", "term": 8})
    assert raft._getLeader() is None  # pysyncobj forgot the leader...
    assert raft._SyncObj__connectedToAnyone()  # ...and this node campaigns all the same


def test_a_joining_node_that_hears_no_leader_stays_held() -> None:
    _, raft = _held_joining_node()
    assert not raft._SyncObj__connectedToAnyone()
    raft._SyncObj__raftLeader = TCPNode("127.0.0.1:9001")  # known when the timer fires: released too
    assert raft._SyncObj__connectedToAnyone()


def test_a_new_term_starts_every_snapshot_transmission_afresh(monkeypatch: pytest.MonkeyPatch) -> None:
    """pysyncobj resumed a transmission begun in an earlier term of the same node mid-file, on
    top of the file another leader had begun meanwhile: the follower loaded a garbage snapshot."""
    cancelled: list[str] = []
    became: list[bool] = []
    monkeypatch.setattr(SyncObj, "_SyncObj__onBecomeLeader", lambda self: became.append(True))
    raft = bare_raft()
    raft._SyncObj__serializer = type("S", (), {"cancelTransmisstion": lambda self, n: cancelled.append(n)})()
    raft._SyncObj__otherNodes = {"n2", "n3"}
    raft._SyncObj__readonlyNodes = set()
    raft._SyncObj__onBecomeLeader()
    assert sorted(cancelled) == ["n2", "n3"] and became == [True]


def test_a_node_whose_clock_the_leader_found_off_does_not_campaign_until_it_agrees() -> None:
    node, raft = _held_joining_node()
    node.hold_elections(False)
    mono = [100.0]
    watch = ClockWatch(lambda: 1_800_000_000_000, lambda: mono[0], 10_000, members=lambda: 3)
    node.clock_watch = watch
    assert raft._SyncObj__connectedToAnyone()  # nothing known about its clock: it may campaign
    watch.told(600_000, 600_000)  # the leader: your clock is 10 min ahead of the majority's
    assert not raft._SyncObj__connectedToAnyone()
    watch.told(20, 5)
    assert raft._SyncObj__connectedToAnyone()
    watch.told(-600_000, -600_000)
    mono[0] += 60  # the word ages out: an old verdict neither holds it nor lets it lead wrongly
    assert raft._SyncObj__connectedToAnyone()


def test_clock_stamps_ride_on_appends_and_their_replies() -> None:
    """The leader's append carries its clock and what it measured of the follower; the reply
    echoes the leader's stamp with the follower's clock: the round trip is halved."""
    mono = [100.0]

    def three() -> int:
        return 3

    leader = PySyncObjNode.__new__(PySyncObjNode)
    follower = PySyncObjNode.__new__(PySyncObjNode)
    leader.clock_watch = ClockWatch(
        lambda: 1_000_000 + round(mono[0] * 1000), lambda: mono[0], members=lambda: 3
    )
    follower.clock_watch = ClockWatch(
        lambda: 1_000_250 + round(mono[0] * 1000), lambda: mono[0], members=lambda: 3
    )
    append = leader._clock_stamp("f:1", "append_entries")
    assert append is not None and append[0] == "a" and append[3:] == (None, None)  # not measured yet
    follower._clock_heard("l:1", "append_entries", append)
    assert follower._clock_stamp("l:9", "next_node_idx") is None  # only the leader's stamp is echoed
    mono[0] += 0.010  # the reply leaves 10 ms later, arrives 10 ms after that
    reply = follower._clock_stamp("l:1", "next_node_idx")
    assert reply is not None and reply[0] == "r"
    mono[0] += 0.010
    leader._clock_heard("f:1", "next_node_idx", reply)
    assert leader.clock_watch.view(leading=True).peers == {"f:1": 250}  # exact: symmetric delays
    offset, skew = leader.clock_watch.advice_for("f:1")
    # Two of three clocks measured is a majority, but they tie: neither is blamed.
    assert offset == 250 and skew == 0
    follower._clock_heard("l:1", "append_entries", leader._clock_stamp("f:1", "append_entries"))
    assert follower.clock_watch.view(leading=False).offset_ms == 250
    for junk in [(), ("a", 1), ("r", "x", 2), "not a tuple", ("a", 1, 2, "x", None)]:
        follower._clock_heard("l:1", "append_entries", junk)  # ignored, never raises
        leader._clock_heard("f:1", "next_node_idx", junk)
