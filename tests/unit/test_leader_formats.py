"""The columnar bodies' gate (raftsched.leader.formats): the leader builds them only while every
voting member reports a command format that applies them; a member it has not heard from, or
one of an older build, keeps it on today's bodies. The members' status is faked only where it
enters: the peers' ``NodeStatus`` replies (PeerCheck's status call)."""

from __future__ import annotations

import asyncio
import random
from collections.abc import Sequence

import pytest

from raftsched import codec
from raftsched.fsm.state import SchedulerState
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.leader.formats import COLUMNS_FORMAT, MemberFormats
from raftsched.rpc.peercheck import PeerCheck
from raftsched.server.core import Core
from raftsched.storage.memory import MemoryStore
from raftsched.timing.clock import ManualClock
from raftsched.timing.schedule import MisfireSettings
from raftsched.v1 import raftsched_pb2 as rpb

T0 = 1_800_000_000_000


def test_columns_format_is_the_state_machines() -> None:
    assert getattr(codec, "COLUMNS_FORMAT", COLUMNS_FORMAT) == COLUMNS_FORMAT
    assert COLUMNS_FORMAT > 17  # a newer format than the last one without columns


def test_every_voter_must_report_the_format() -> None:
    voters = ["n2", "n3"]
    formats = MemberFormats(lambda: voters, own_format=lambda: COLUMNS_FORMAT)
    assert not formats.all_apply()  # nothing heard yet: both count as old
    formats.update({"n2": COLUMNS_FORMAT})
    assert not formats.all_apply()
    assert formats.unknown_or_older(COLUMNS_FORMAT) == ["n3"]
    formats.update({"n3": COLUMNS_FORMAT - 1})  # an older build
    assert not formats.all_apply()
    formats.update({"n3": COLUMNS_FORMAT + 1})  # newer still applies it
    assert formats.all_apply()
    voters.append("n4")  # a node being added counts at once
    assert not formats.all_apply()
    formats.update({"n4": COLUMNS_FORMAT})
    assert formats.all_apply()
    formats.update({"n4": COLUMNS_FORMAT - 1})  # restarted on an older build: back to old bodies
    assert not formats.all_apply()
    formats.update({"n4": COLUMNS_FORMAT})
    formats.forget()  # stepped down: the next leadership asks again
    assert not formats.all_apply()


def test_a_peer_that_does_not_answer_keeps_its_last_answer_within_a_leadership() -> None:
    formats = MemberFormats(lambda: ["n2", "n3"], own_format=lambda: COLUMNS_FORMAT)
    formats.update({"n2": COLUMNS_FORMAT, "n3": COLUMNS_FORMAT})
    formats.update({"n2": COLUMNS_FORMAT})  # n3's status call timed out this time
    assert formats.all_apply()


def test_this_builds_own_format_must_apply_it() -> None:
    old = MemberFormats(lambda: [], own_format=lambda: COLUMNS_FORMAT - 1)
    assert not old.all_apply()  # even alone
    alone = MemberFormats(lambda: [], own_format=lambda: COLUMNS_FORMAT)
    assert alone.all_apply()


class _Replies(PeerCheck):
    """A PeerCheck whose status calls return given replies: the fake is the RPC, nothing else."""

    def __init__(self, peers: Sequence[tuple[str, str]], replies: list[rpb.NodeStatusReply]) -> None:
        super().__init__("n1", lambda: peers, lambda: 0, lambda _i: "", None)
        self._replies = replies

    async def _ask(self, peers: Sequence[tuple[str, str]], index: int) -> list[rpb.NodeStatusReply]:
        return list(self._replies)


def test_formats_come_from_the_peers_node_status() -> None:
    peers = [("n2", "127.0.0.1:1"), ("n3", "127.0.0.1:2")]
    check = _Replies(
        peers,
        [
            rpb.NodeStatusReply(node_id="n2", command_format=COLUMNS_FORMAT),
            rpb.NodeStatusReply(node_id="n9", command_format=COLUMNS_FORMAT),  # not whom we dialled
        ],
    )
    heard = asyncio.run(check.formats())
    assert heard == {"n2": COLUMNS_FORMAT}
    formats = MemberFormats(lambda: [n for n, _ in peers], own_format=lambda: COLUMNS_FORMAT)
    formats.update(heard)
    assert not formats.all_apply()  # n3 did not answer: old
    check._replies.append(rpb.NodeStatusReply(node_id="n3", command_format=COLUMNS_FORMAT))
    formats.update(asyncio.run(check.formats()))
    assert formats.all_apply()


def _core(member_formats: MemberFormats | None) -> Core:
    store = MemoryStore()
    return Core(
        "n1",
        store,
        SchedulerState.load(store),
        clock=ManualClock(T0),
        consensus=lambda: None,
        dispatch=DispatchSettings(),
        rng=random.Random(0),
        misfire=MisfireSettings(),
        max_skew_ms=10_000,
        members=lambda: 3,
        member_formats=member_formats,
    )


@pytest.mark.parametrize("heard", [{}, {"n2": COLUMNS_FORMAT}, {"n2": COLUMNS_FORMAT, "n3": 17}])
def test_the_driver_and_the_dispatcher_ask_the_gate(heard: dict[str, int]) -> None:
    formats = MemberFormats(lambda: ["n2", "n3"], own_format=lambda: COLUMNS_FORMAT)
    core = _core(formats)
    formats.update(heard)
    assert core.driver.columns_allowed is not None
    assert not core.driver.columns_allowed()
    assert not core.dispatcher.columns_allowed()
    formats.update({"n2": COLUMNS_FORMAT, "n3": COLUMNS_FORMAT})
    assert core.driver.columns_allowed()
    assert core.dispatcher.columns_allowed()


def test_without_a_poller_the_leader_never_builds_columns() -> None:
    core = _core(None)
    assert core.driver.columns_allowed is not None
    assert not core.driver.columns_allowed()
    assert not core.dispatcher.columns_allowed()
