"""The ledger of pysyncobj's private members that raftsched overrides or reads.

pysyncobj (pinned: :data:`PINNED_VERSION`) has no hooks for what raftsched needs, and four of its
Raft bugs break safety or liveness; the adapter therefore overrides name-mangled methods
(``_SyncObj__onMessageReceived``...) and reads private attributes. Each such use is one
:class:`Patch` below: where it is (our class and method), the pysyncobj members it relies on,
why (the bug or the missing hook, with the finding that showed it), and the tests that show it
working (tests/unit/test_raft_patches.py checks that every listed member exists in the
installed pysyncobj, that every override is the method pysyncobj dispatches to, and that every
listed test exists: an upgrade of pysyncobj that renames or drops a member fails there, loudly,
instead of silently un-patching a safety fix).

The pure parts of the patches live here too (:func:`cap_unverified_commit`,
:func:`release_covered`), so that they can be tested without a SyncObj.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

PINNED_VERSION = "0.3.17"
"""The pysyncobj version every patch below was checked against (read from its source)."""


@dataclass(frozen=True, slots=True)
class Patch:
    """One override or read of pysyncobj internals.

    ``members`` are ``"Class.attribute"`` names as pysyncobj defines them (``SyncObj.__x`` for a
    name-mangled one; ``instance:`` for an attribute set in ``__init__`` rather than on the
    class). ``overrides`` are the ``"module:Class.method"`` of ours that replace a pysyncobj
    method (empty for a read). ``tests`` are pytest node ids."""

    name: str
    kind: str  # "safety", "liveness", "hardening", "hook" or "read"
    overrides: tuple[str, ...]
    members: tuple[str, ...]
    reason: str
    reference: str
    tests: tuple[str, ...]


PATCHES: tuple[Patch, ...] = (
    Patch(
        name="unverified-commit",
        kind="safety",
        overrides=("node:_Raft._SyncObj__onMessageReceived",),
        members=("SyncObj.__onMessageReceived", "SyncObj.raftCommitIndex"),
        reason=(
            "An append_entries without prevLogIdx (a snapshot chunk, or the empty message sent "
            "while the leader's snapshot is not ready) still raises a follower's commit index to "
            "min(leader's commit, own log end), although nothing checked that its log matches "
            "the leader's: a deposed leader then commits and applies its own uncommitted "
            "entries. Capped at the follower's own commit index (cap_unverified_commit)."
        ),
        reference=(
            "chaos suite 5-node soak: a FireBatch of epoch 92 applied on the old leader only, "
            "the cluster fired the same second in epoch 93 (replicas diverged); pysyncobj 0.3.17 "
            "syncobj.py SyncObj.__onMessageReceived, append_entries branch"
        ),
        tests=(
            "tests/chaos/test_findings.py::"
            "test_a_deposed_leader_never_commits_its_own_uncommitted_entries_on_a_snapshot_chunk",
            "tests/unit/test_raft_patches.py::test_an_unverified_append_never_raises_the_commit_index",
        ),
    ),
    Patch(
        name="new-term-transmissions",
        kind="safety",
        overrides=("node:_Raft._SyncObj__onBecomeLeader",),
        members=(
            "SyncObj.__onBecomeLeader",
            "instance:SyncObj.__serializer",
            "instance:SyncObj.__otherNodes",
            "instance:SyncObj.__readonlyNodes",
            "Serializer.cancelTransmisstion",
        ),
        reason=(
            "A snapshot transmission to a follower (an open file and an offset) survives the "
            "leader's loss of leadership; a later term of the same node resumes it mid-file while "
            "the follower has begun another leader's transmission meanwhile, and loads a garbage "
            "snapshot. A new term starts every transmission afresh."
        ),
        reference=(
            "CI chaos run: a joined node's install failed 'not a raftsched LMDB store' after "
            "leadership went n3 -> n1 -> n3 during its catch-up"
        ),
        tests=(
            "tests/unit/test_raft_membership.py::test_a_new_term_starts_every_snapshot_transmission_afresh",
        ),
    ),
    Patch(
        name="snapshot-install-callbacks",
        kind="liveness",
        overrides=("node:_Raft.take_covered_callbacks", "node:PySyncObjNode._deserialize"),
        members=("instance:SyncObj.__commandsWaitingCommit",),
        reason=(
            "pysyncobj keeps a proposal's callback until it applies that log index itself; a "
            "snapshot install skips the applying, so the callback never fires. A leader deposed "
            "with fire batches in flight that caught up by a snapshot kept them in flight for "
            "good, and when it led again its full pipeline never proposed another fire. The "
            "covered callbacks are answered 'outcome unknown' (release_covered)."
        ),
        reference=(
            "the stalled-leader bug of wave 2 (chaos soak: a new leader elected, heartbeats fine, "
            "nothing fired for 60 s)"
        ),
        tests=(
            "tests/unit/test_raft_status.py::"
            "test_proposals_covered_by_an_installed_snapshot_are_taken_out_to_be_answered",
            "tests/unit/test_raft_patches.py::test_a_snapshot_install_answers_the_proposals_it_covers",
            "tests/unit/test_consensus_contract.py::test_pysyncobj_answers_the_proposals_a_snapshot_install_covers",
            "tests/sim/test_consensus_faults_sim.py::test_lost_callbacks_and_skipped_applies_lose_or_double_nothing",
        ),
    ),
    Patch(
        name="rebuilt-node-votes",
        kind="safety",
        overrides=("node:_Raft._SyncObj__onMessageReceived",),
        members=("SyncObj.__onMessageReceived", "SyncObj.raftLastApplied"),
        reason=(
            "A node rebuilt from nothing (its journal moved aside) has forgotten the entries it "
            "acknowledged and the vote it cast: its vote could elect a candidate lacking "
            "committed entries, or vote twice in a term. It drops request_vote until it has "
            "applied the commit index of the first leader it hears from."
        ),
        reference="raftsched-node --rebuild (docs/architecture.md section 5, store damage)",
        tests=(
            "tests/unit/test_store_damage.py::"
            "test_a_rebuilt_node_grants_no_vote_until_it_applied_the_first_leaders_commit_index",
        ),
    ),
    Patch(
        name="campaign-hold",
        kind="liveness",
        overrides=("node:_Raft._SyncObj__connectedToAnyone",),
        members=("SyncObj.__connectedToAnyone", "SyncObj._getLeader", "instance:SyncObj.__raftLeader"),
        reason=(
            "pysyncobj has no pre-vote: a node that joins, is being stopped, was removed or whose "
            "clock is off must not campaign, or its higher term deposes the leader. pysyncobj "
            "campaigns only while __connectedToAnyone is true, so the hold answers false."
        ),
        reference="CI chaos run: a replacement node never campaigned after the leader was SIGKILLed",
        tests=(
            "tests/unit/test_raft_membership.py::test_held_campaigns_never_start_an_election",
            "tests/unit/test_raft_membership.py::"
            "test_a_joining_node_campaigns_once_it_has_heard_a_leader_even_if_a_vote_request_forgot_it",
            "tests/unit/test_raft_membership.py::test_a_joining_node_that_hears_no_leader_stays_held",
            "tests/unit/test_raft_membership.py::"
            "test_a_node_whose_clock_the_leader_found_off_does_not_campaign_until_it_agrees",
        ),
    ),
    Patch(
        name="membership-dial-address",
        kind="hook",
        overrides=("node:_Raft._SyncObj__parseChangeClusterRequest",),
        members=("SyncObj.__parseChangeClusterRequest",),
        reason=(
            "A membership entry names a node by its own Raft address; this node may dial that "
            "peer elsewhere (raft_via proxies), and pysyncobj knows the peer by the dialled address."
        ),
        reference="raft_via (chaos harness proxies every Raft link)",
        tests=(
            "tests/unit/test_raft_membership.py::"
            "test_a_membership_entry_names_the_peer_by_the_address_this_node_dials",
            "tests/unit/test_raft_membership.py::test_other_entries_are_not_membership_changes",
        ),
    ),
    Patch(
        name="message-hooks",
        kind="hook",
        overrides=("node:_Raft._SyncObj__onMessageReceived", "transport:GuardedTransport.send"),
        members=("SyncObj.__onMessageReceived", "TCPTransport.send"),
        reason=(
            "Clock stamps ride on the leader's append_entries and the follower's reply "
            "(raftsched.clockwatch), and the moment a leader is heard ends a joining node's hold; "
            "pysyncobj has no message hook."
        ),
        reference="issue 35 section 5 (docs/architecture.md, Clocks)",
        tests=(
            "tests/unit/test_raft_membership.py::test_clock_stamps_ride_on_appends_and_their_replies",
            "tests/unit/test_raft_membership.py::"
            "test_a_joining_node_campaigns_once_it_has_heard_a_leader_even_if_a_vote_request_forgot_it",
        ),
    ),
    Patch(
        name="raft-view-reads",
        kind="read",
        overrides=(),
        members=(
            "instance:SyncObj.__otherNodes",
            "instance:SyncObj.__selfNode",
            "instance:SyncObj.__lastResponseTime",
            "SyncObj._isLeader",
            "SyncObj._getLeader",
        ),
        reason=(
            "The voters as this node dials them (member_addresses) and how recently a majority "
            "answered the leader (contact_age, a report only, never a decision) have no public API. "
            "__lastResponseTime is on pysyncobj's own clock (syncobj.monotonicTime: "
            "CLOCK_MONOTONIC_RAW on Linux, drifting from time.monotonic), so its age is too."
        ),
        reference="LIBRARY-NOTES.md 1.5; pysyncobj 0.3.17 monotonic.py",
        tests=(
            "tests/unit/test_raft_patches.py::test_the_raft_view_reads_a_real_syncobj",
            "tests/unit/test_raft_patches.py::test_a_leader_s_contact_age_is_timed_by_pysyncobj_s_clock",
        ),
    ),
    Patch(
        name="frame-guard",
        kind="hardening",
        overrides=(
            "transport:GuardedConnection._TcpConnection__processRead",
            "transport:GuardedConnection._TcpConnection__processParseMessage",
        ),
        members=(
            "TcpConnection.__processRead",
            "TcpConnection.__processParseMessage",
            "instance:TcpConnection.__readBuffer",
            "instance:TcpConnection.__socket",
            "instance:TcpConnection.__recvBufferSize",
            "instance:TcpConnection.recvLastTimestamp",
            "instance:TcpConnection.recvRandKey",
            "instance:TcpConnection.encryptor",
        ),
        reason=(
            "pysyncobj buffers whatever length a frame claims (a 2 GiB claim on the tick thread; a "
            "16 MiB body stalled it 3 s and forced elections) with quadratic bytes +=, and drops "
            "bad frames silently. The guard checks the length before the body, keeps a bytearray "
            "and reports every refusal."
        ),
        reference="LIBRARY-NOTES.md 1.10-1.11; tests/integration/test_raft_port.py",
        tests=(
            "tests/integration/test_raft_port.py::test_hostile_connections_are_dropped_logged_and_force_no_election",
            "tests/unit/test_raft_patches.py::test_an_oversized_frame_is_refused_before_its_body_is_read",
        ),
    ),
    Patch(
        name="listener-rebind",
        kind="hardening",
        overrides=("transport:GuardedServer._TcpServer__onNewConnection", "transport:GuardedServer.unbind"),
        members=(
            "TcpServer.__onNewConnection",
            "TcpServer.unbind",
            "TcpServer.bind",
            "instance:TcpServer.__state",
            "instance:TcpServer.__socket",
        ),
        reason=(
            "pysyncobj closes the listening socket for good on any accept() error but EAGAIN "
            "(EMFILE...) or a poll error, and binds only until first ready: every peer that dials "
            "the node is refused until it restarts. The transport binds it again from its tick."
        ),
        reference="tests/integration/test_raft_port.py::test_the_raft_port_listens_again_after_descriptors_ran_out",
        tests=(
            "tests/unit/test_raft_port_guard.py::test_a_listening_socket_closed_by_a_failed_accept_binds_again",
            "tests/unit/test_raft_port_guard.py::test_a_listener_that_keeps_closing_is_logged_once_per_period",
        ),
    ),
    Patch(
        name="idle-link-keepalive",
        kind="liveness",
        overrides=("transport:GuardedTransport._onTick", "transport:GuardedTransport.send"),
        members=(
            "TCPTransport._onTick",
            "instance:TCPTransport._connections",
            "instance:TCPTransport._nodes",
            "instance:TCPTransport._syncObj",
            "instance:TcpConnection.state",
        ),
        reason=(
            "pysyncobj closes a connection on which nothing was read for connection_timeout when "
            "the next message arrives, before reading it. Two followers send each other nothing "
            "while a leader lives, so the first request_vote between them after the leader died "
            "was dropped on both sides: a split vote, and a second election timeout (new leader "
            "1.1-1.7 s after a SIGSTOP instead of 0.4-1.4 s). The transport sends a message "
            "pysyncobj ignores on every link idle for a quarter of the timeout."
        ),
        reference="tests/integration/test_stall_overlap.py (the election figures in its timeline)",
        tests=(
            "tests/unit/test_raft_port_guard.py::test_idle_links_carry_a_keepalive_and_busy_ones_do_not",
            "tests/integration/test_election_links.py::test_the_election_after_a_leader_dies_takes_one_term",
        ),
    ),
    Patch(
        name="leader-tick-pacing",
        kind="hook",
        overrides=("node:_Raft._onTick",),
        members=(
            "SyncObj._onTick",
            "SyncObj._checkCommandsToApply",
            "SyncObj._isLeader",
            "instance:SyncObj.__newAppendEntriesTime",
            "instance:SyncObj.__conf",
        ),
        reason=(
            "In batch mode a leader sends its appends on the first tick past the append "
            "deadline and drains the proposal queue after sending, so a proposal waited for the "
            "next tick and the append after it: the tick was 5 ms, and every node woke 200 "
            "times a second (the tick thread's fixed cost: 7-11.5 us per fire on the leader at "
            "4,000 fires/s). A leader's tick drains the queue first and waits at most until its "
            "next append is due (leader_wait), so appends leave on time with every proposal "
            "made before them, and raft.auto_tick_period can be longer. The deadline is on "
            "pysyncobj's own clock (syncobj.monotonicTime: CLOCK_MONOTONIC_RAW on Linux), and "
            "is read against it, never time.monotonic (they drift apart with uptime)."
        ),
        reference=(
            "docs/dev/performance-history.md, stage 4: the Raft thread and the leader's apply; "
            "pysyncobj 0.3.17 syncobj.py SyncObj._onTick and _autoTickThread"
        ),
        tests=(
            "tests/unit/test_raft_patches.py::test_a_leader_waits_no_longer_than_its_next_append",
            "tests/unit/test_raft_tick_pacing.py::test_an_append_carries_the_proposals_made_before_its_tick",
            "tests/unit/test_raft_tick_pacing.py::test_a_leader_sends_its_appends_on_time_with_a_long_tick",
            "tests/unit/test_raft_tick_pacing.py::test_a_leader_waits_until_its_next_append_by_pysyncobj_s_own_clock",
        ),
    ),
    Patch(
        name="transport-guard",
        kind="hardening",
        overrides=(
            "transport:GuardedTransport._createServer",
            "transport:GuardedTransport._onNewIncomingConnection",
            "transport:GuardedTransport._onIncomingMessageReceived",
            "transport:GuardedTransport._onOutgoingConnected",
            "transport:GuardedTransport._onOutgoingMessageReceived",
            "transport:GuardedTransport._onDisconnected",
            "transport:GuardedTransport._onTick",
            "transport:GuardedTransport.send",
            "transport:GuardedTransport.addNode",
            "transport:GuardedTransport.destroy",
        ),
        members=(
            "TCPTransport._createServer",
            "TCPTransport._onNewIncomingConnection",
            "TCPTransport._onIncomingMessageReceived",
            "TCPTransport._onOutgoingConnected",
            "TCPTransport._onOutgoingMessageReceived",
            "TCPTransport._onDisconnected",
            "TCPTransport._onTick",
            "TCPTransport.addNode",
            "TCPTransport.destroy",
            "TCPTransport._connToNode",
            "instance:TCPTransport._connections",
            "instance:TCPTransport._unknownConnections",
            "instance:TCPTransport._server",
            "instance:TCPTransport._ready",
            "instance:TCPTransport._syncObj",
            "instance:TCPTransport._nodes",
            "instance:TcpConnection.sendRandKey",
        ),
        reason=(
            "Unauthenticated connections were kept forever; a dialled connection whose peer never "
            "answers the handshake kept a link dead; a request_vote sent before the peer's "
            "session key arrived went out unwrapped and the peer dropped the connection. The "
            "transport closes both after AUTH_TIMEOUT_S and holds messages until the key is in."
        ),
        reference="tests/integration/test_raft_port.py (hostile connections, wrong secret)",
        tests=(
            "tests/unit/test_raft_port_guard.py::"
            "test_nothing_is_sent_on_a_dialled_connection_before_the_peer_sent_its_session_key",
            "tests/unit/test_raft_port_guard.py::test_a_dialled_connection_whose_peer_never_answers_the_handshake_is_closed",
            "tests/integration/test_raft_port.py::test_a_wrong_secret_node_shows_as_refused_in_status",
        ),
    ),
)


def cap_unverified_commit(message: Any, own_commit: int) -> Any:
    """Patch ``unverified-commit``: ``message`` as pysyncobj may act on it. An ``append_entries``
    without ``prevLogIdx`` verified nothing about this node's log, so it may not raise the
    commit index past ``own_commit``; a verified one (with ``prevLogIdx``) raises it a heartbeat
    later. Every other message is returned as is."""
    if (
        isinstance(message, dict)
        and message.get("type") == "append_entries"
        and "prevLogIdx" not in message
        and "commit_index" in message
        and message["commit_index"] > own_commit
    ):
        return {**message, "commit_index": own_commit}
    return message


def release_covered(waiting: dict[int, list[tuple[int, Any]]], last_index: int) -> list[Any]:
    """Patch ``snapshot-install-callbacks``: take the callbacks of entries at or below
    ``last_index`` out of pysyncobj's ``commandsWaitingCommit`` (log index -> [(term, callback),
    ...]); the caller calls them."""
    covered = sorted(index for index in waiting if index <= last_index)
    return [callback for index in covered for _term, callback in waiting.pop(index)]


def leader_wait(time_to_wait: float, due_in: float, period: float) -> float:
    """How long a leader's tick may wait for socket events (patches.py: leader-tick-pacing).

    ``time_to_wait``: the tick's bound (``autoTickPeriod``); ``due_in``: seconds until the next
    append is due (pysyncobj's ``__newAppendEntriesTime`` minus now; <= 0 when this tick sends
    it, and then the next one is due a ``period`` later). The wait ends no later than that."""
    return min(time_to_wait, due_in if due_in > 0 else period)
