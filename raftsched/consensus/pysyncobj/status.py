"""pysyncobj's status and failure codes, decoded into raftsched's types; pysyncobj's raw keys and
numbers never leave this package."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pysyncobj import FAIL_REASON

from raftsched.abc import ROLES, PeerStatus, ProposeError, RaftStatus

_FAIL_CODES = {
    FAIL_REASON.QUEUE_FULL: "unavailable",
    FAIL_REASON.MISSING_LEADER: "unavailable",
    FAIL_REASON.DISCARDED: "unavailable",
    FAIL_REASON.NOT_LEADER: "not_leader",
    FAIL_REASON.LEADER_CHANGED: "unavailable",
    FAIL_REASON.REQUEST_DENIED: "unavailable",
    FAIL_REASON.UNKNOWN_OUTCOME: "unavailable",
}

RAFT_STATES = dict(enumerate(ROLES))  # pysyncobj's _RAFT_STATE values
LEADER = 2  # pysyncobj's _RAFT_STATE.LEADER
_CONNECTED = 2  # getStatus()'s partner_node_status_server_<addr> value for a live connection


def decode_status(
    raw: Mapping[str, Any], peers: Sequence[str], refusal: Callable[[str], str] | None = None
) -> RaftStatus:
    """Decode a pysyncobj ``getStatus()`` dict for a node configured with ``peers`` (addresses).

    pysyncobj names a peer by its address in keys ``partner_node_status_server_<addr>`` (2 when
    connected) and, on the leader only, ``match_idx_server_<addr>``; a missing key reads as
    disconnected and match index -1. An unknown role number reads as follower. ``refusal(addr)``
    says why a peer was refused lately ("" if it was not); it is shown for disconnected peers.
    """
    return RaftStatus(
        role=RAFT_STATES.get(int(raw.get("state", 0)), "follower"),
        term=int(raw.get("raft_term", 0)),
        commit_index=int(raw.get("commit_idx", 0)),
        log_len=int(raw.get("log_len", 0)),
        peers=tuple(_peer_status(raw, addr, refusal) for addr in peers),
    )


def _peer_status(raw: Mapping[str, Any], addr: str, refusal: Callable[[str], str] | None) -> PeerStatus:
    connected = raw.get(f"partner_node_status_server_{addr}", 0) == _CONNECTED
    return PeerStatus(
        address=addr,
        connected=connected,
        match_index=int(raw.get(f"match_idx_server_{addr}", -1)),
        refused="" if connected or refusal is None else refusal(addr),
    )


FAIL_REASON_NAMES = {getattr(FAIL_REASON, n): n.lower() for n in dir(FAIL_REASON) if n.isupper()}


def propose_error(err: int) -> ProposeError:
    """The :class:`ProposeError` for a pysyncobj ``FAIL_REASON`` other than SUCCESS."""
    return ProposeError(_FAIL_CODES.get(err, "unavailable"), f"raft: {FAIL_REASON_NAMES.get(err, err)}")
