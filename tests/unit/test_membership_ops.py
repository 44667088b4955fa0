"""The leader's membership operations (raftsched.server.membership) over an in-memory node and a fake
Raft membership: seeding, a change carried through Raft's entry, a change a dead leader left in
progress finished by the next one, and a change Raft keeps refusing abandoned."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from raftsched.abc import CommitHook, PeerStatus, ProposeCallback, ProposeError, RaftStatus
from raftsched.config.types import ClusterConfig, NodeConfig
from raftsched.errors import Conflict, RaftschedError
from raftsched.fsm.state import SchedulerState
from raftsched.leader.gate import Stamp
from raftsched.server.membership import MembershipOps
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb

SECRET = "a-secret-of-some-length"
NOW = 1_700_000_000_000


@dataclass
class FakeRaft:
    """Raft's own membership: the voters' addresses; ``deny`` refusals before it accepts."""

    members: list[str]
    deny: int = 0
    leading: bool = True
    calls: list[tuple[str, str]] = field(default_factory=list)
    connected: bool = True

    def member_addresses(self) -> list[str]:
        return sorted(self.members)

    def change_membership(
        self, kind: str, raft_addr: str, callback: Callable[[ProposeError | None], None]
    ) -> None:
        self.calls.append((kind, raft_addr))
        if self.deny > 0:
            self.deny -= 1
            callback(ProposeError("unavailable", "raft: request_denied"))
            return
        if kind == "add":
            self.members.append(raft_addr)
        else:
            self.members.remove(raft_addr)
        callback(None)

    def is_leader(self) -> bool:
        return self.leading

    def status(self) -> RaftStatus:
        peers = tuple(PeerStatus(a, self.connected, 0) for a in self.members if a != "127.0.0.1:7000")
        return RaftStatus(role="leader", peers=peers)

    def step_down(self, timeout_s: float) -> str | None:
        self.leading = False
        return "127.0.0.1:7002"


class FakeGate:
    def stamp(self) -> Stamp:
        return Stamp(NOW, 1, "n1")


class FakeNode:
    """An in-memory node: proposals apply at once to its state."""

    def __init__(self) -> None:
        nodes = tuple(
            NodeConfig(
                f"n{i + 1}", f"127.0.0.1:{7000 + 2 * i}", f"127.0.0.1:{7001 + 2 * i}", Path(f"/tmp/n{i}")
            )
            for i in range(3)
        )
        self.config = ClusterConfig(name="t", secret=SECRET, nodes=nodes)
        self.node_id = "n1"
        self.state = SchedulerState.load(MemoryStore())
        self.gate = FakeGate()

    def propose(self, data: bytes, callback: ProposeCallback, on_commit: CommitHook | None = None) -> None:
        callback(self.state.apply(data).encode(), None)

    def dial_address(self, raft: str) -> str:
        return raft


def ops(raft: FakeRaft) -> tuple[FakeNode, MembershipOps]:
    node = FakeNode()
    return node, MembershipOps(node, lambda: raft)


def three() -> list[str]:
    return ["127.0.0.1:7000", "127.0.0.1:7002", "127.0.0.1:7004"]


def test_the_leader_seeds_the_membership_from_its_config() -> None:
    raft = FakeRaft(three())
    node, m = ops(raft)
    asyncio.run(m.reconcile())
    assert [x.id for x in node.state.membership.members()] == ["n1", "n2", "n3"]
    raft.leading = False
    node2, m2 = ops(raft)
    asyncio.run(m2.reconcile())  # a follower seeds nothing
    assert not node2.state.membership.seeded


def test_add_and_remove_go_through_raft_and_end_in_the_record() -> None:
    raft = FakeRaft(three())
    node, m = ops(raft)

    async def scenario() -> None:
        await m.reconcile()
        record, note = await m.add(pb.Member(id="n4", raft="127.0.0.1:7006", grpc="127.0.0.1:7007"))
        assert note == "" and [x.id for x in record.members] == ["n1", "n2", "n3", "n4"]
        record, _ = await m.remove("n2")
        assert [x.id for x in record.members] == ["n1", "n3", "n4"]

    asyncio.run(scenario())
    assert raft.calls == [("add", "127.0.0.1:7006"), ("remove", "127.0.0.1:7002")]
    assert sorted(raft.members) == ["127.0.0.1:7000", "127.0.0.1:7004", "127.0.0.1:7006"]
    assert not node.state.membership.record.HasField("pending")


def test_adding_is_refused_while_a_member_is_disconnected() -> None:
    raft = FakeRaft(three(), connected=False)
    node, m = ops(raft)

    async def scenario() -> None:
        await m.reconcile()
        with pytest.raises(Conflict, match="not connected"):
            await m.add(pb.Member(id="n4", raft="127.0.0.1:7006", grpc="127.0.0.1:7007"))

    asyncio.run(scenario())
    assert raft.calls == [] and node.state.membership.pending() is None


def begin_add(node: FakeNode, member: pb.Member) -> None:
    cmd = pb.Command(now_ms=NOW, epoch=1, origin="n1")
    cmd.begin_member_change.change.kind = "add"
    cmd.begin_member_change.change.member.CopyFrom(member)
    assert node.state.apply(cmd.SerializeToString()).result.ok


@pytest.mark.parametrize("raft_has_it", [False, True])
def test_a_change_left_in_progress_is_finished_by_the_next_leader(raft_has_it: bool) -> None:
    raft = FakeRaft(three())
    node, m = ops(raft)
    asyncio.run(m.reconcile())  # seeded
    new = pb.Member(id="n4", raft="127.0.0.1:7006", grpc="127.0.0.1:7007")
    begin_add(node, new)  # the old leader died here: before (or after) Raft's own entry
    if raft_has_it:
        raft.members.append(new.raft)
    asyncio.run(m.reconcile())
    assert [x.id for x in node.state.membership.members()] == ["n1", "n2", "n3", "n4"]
    assert node.state.membership.pending() is None
    assert raft.calls == ([] if raft_has_it else [("add", "127.0.0.1:7006")])


def test_a_change_raft_keeps_refusing_is_abandoned(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("raftsched.server.membership.DENIED_RETRIES", 3)
    monkeypatch.setattr("raftsched.server.membership.asyncio.sleep", _no_sleep)
    raft = FakeRaft(three(), deny=10)
    node, m = ops(raft)

    async def scenario() -> None:
        await m.reconcile()
        with pytest.raises(RaftschedError, match="abandoned"):
            await m.add(pb.Member(id="n4", raft="127.0.0.1:7006", grpc="127.0.0.1:7007"))

    asyncio.run(scenario())
    assert len(raft.calls) == 3
    assert [x.id for x in node.state.membership.members()] == ["n1", "n2", "n3"]
    assert node.state.membership.pending() is None  # the next change may begin


def test_removing_the_leader_hands_leadership_over() -> None:
    raft = FakeRaft(three())
    _, m = ops(raft)

    async def scenario() -> tuple[pb.MembershipRecord, str]:
        await m.reconcile()
        return await m.remove("n1")

    record, note = asyncio.run(scenario())
    assert "handed leadership" in note and not raft.leading
    assert record.pending.member.id == "n1"  # the next leader finishes it
    assert raft.calls == []


async def _no_sleep(_s: float) -> None:
    return None
