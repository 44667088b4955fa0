"""Membership changes on a running node: the replicated record and Raft's own membership, kept
in step by the leader.

A change is three log entries: our ``BeginMemberChange`` (refused while another is in
progress, so one change at a time holds across leaders), pysyncobj's own membership entry (the
Raft quorum changes when it is appended), and our ``EndMemberChange``. A leader that finds a
change in progress - its predecessor died between the entries - finishes it: if Raft's
membership already shows the change it only records the end, otherwise it appends the Raft
entry first. The first leader of a new cluster seeds the record from its config file.

Everything here runs on the node's event loop; the leader-only steps check leadership through
the node's gate (a follower answers ``not_leader`` and the SDK follows the leader).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import uuid
from collections.abc import Callable
from typing import Protocol

from raftsched import codec
from raftsched.abc import CommitHook, ProposeCallback, ProposeError, RaftStatus
from raftsched.config.types import ClusterConfig, NodeConfig
from raftsched.config.values import parse_address
from raftsched.errors import Conflict, InvalidSpec, RaftschedError, Unavailable
from raftsched.fsm.membership import ADD, REMOVE
from raftsched.fsm.state import SchedulerState
from raftsched.leader.gate import Stamp
from raftsched.rpc.plumbing import Refused, propose_and_wait
from raftsched.v1 import log_pb2 as logpb

__all__ = ["MembershipOps", "RaftMembership", "config_members", "describe_mismatch"]

log = logging.getLogger("raftsched.membership")

RECONCILE_EVERY_S = 0.5
RAFT_CHANGE_TIMEOUT_S = 10.0
DENIED_RETRIES = 20  # pysyncobj refuses while the leader's first entry of the term is uncommitted


class RaftMembership(Protocol):
    """What membership needs of the consensus adapter (PySyncObjNode)."""

    def member_addresses(self) -> list[str]: ...

    def change_membership(
        self, kind: str, raft_addr: str, callback: Callable[[ProposeError | None], None]
    ) -> None: ...

    def is_leader(self) -> bool: ...

    def status(self) -> RaftStatus: ...

    def step_down(self, timeout_s: float) -> str | None: ...


class _Gate(Protocol):
    def stamp(self) -> Stamp:
        """The leader's stamp; raises NotLeader on a follower."""
        ...


class _Node(Protocol):
    """The node services membership uses."""

    @property
    def node_id(self) -> str: ...

    @property
    def config(self) -> ClusterConfig: ...

    @property
    def state(self) -> SchedulerState: ...

    @property
    def gate(self) -> _Gate: ...

    def propose(
        self, data: bytes, callback: ProposeCallback, on_commit: CommitHook | None = None
    ) -> None: ...

    def dial_address(self, raft: str) -> str: ...


def config_members(nodes: tuple[NodeConfig, ...]) -> list[logpb.Member]:
    """The config file's nodes as members (what the first leader seeds)."""
    return [logpb.Member(id=n.id, raft=n.raft, grpc=n.grpc, http=n.http or "") for n in nodes]


def describe_mismatch(config: ClusterConfig, record: logpb.MembershipRecord) -> str:
    """How ``config``'s nodes differ from the replicated membership ("" if they agree, or if no
    membership is recorded yet). Compares ids and raft/grpc addresses."""
    if not record.members:
        return ""
    members = {m.id: m for m in record.members}
    if record.HasField("pending") and record.pending.kind == ADD:
        members.setdefault(record.pending.member.id, record.pending.member)
    listed = {n.id: n for n in config.nodes}
    out = []
    for nid in sorted(set(listed) - set(members)):
        out.append(f"{nid} is in the config file but not a member")
    for nid in sorted(set(members) - set(listed)):
        out.append(f"member {nid} is not in the config file")
    for nid in sorted(set(listed) & set(members)):
        n, m = listed[nid], members[nid]
        for field, mine, theirs in (("raft", n.raft, m.raft), ("grpc", n.grpc, m.grpc)):
            if mine != theirs:
                out.append(f"{nid}.{field} is {mine} in the config file but {theirs} in the membership")
    return "; ".join(out)


class MembershipOps:
    """The node's membership operations: the RPCs' add/remove and the leader's reconcile loop."""

    def __init__(self, node: _Node, raft: Callable[[], RaftMembership | None]) -> None:
        self.node = node
        self._raft = raft
        self._busy = asyncio.Lock()
        self._task: asyncio.Task[None] | None = None
        self._last_mismatch = ""

    # -- the loop --------------------------------------------------------------------------------

    def start(self) -> None:
        self._task = asyncio.get_running_loop().create_task(self._loop())

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
            self._task = None

    async def _loop(self) -> None:
        while True:
            await asyncio.sleep(RECONCILE_EVERY_S)
            self._report_mismatch()
            try:
                await self.reconcile()
            except RaftschedError as exc:
                log.debug("membership reconcile: %s", exc)
            except Exception:
                log.exception("membership reconcile failed")

    def _report_mismatch(self) -> None:
        text = describe_mismatch(self.node.config, self.node.state.membership.record)
        if text and text != self._last_mismatch:
            log.warning(
                "this node's config file disagrees with the replicated membership, which it follows "
                "(the config file only seeds a new cluster): %s",
                text,
            )
        self._last_mismatch = text

    async def reconcile(self) -> None:
        """As leader: seed the membership if none is recorded; finish a change in progress."""
        raft = self._raft()
        if raft is None or not raft.is_leader() or self._busy.locked():
            return
        book = self.node.state.membership
        if not book.seeded:
            cmd = self._command("seed")
            cmd.seed_membership.members.extend(config_members(self.node.config.nodes))
            await propose_and_wait(self.node, codec.encode_command(cmd))
            log.info(
                "membership seeded from the config file: %s", ", ".join(n.id for n in self.node.config.nodes)
            )
            return
        if book.pending() is not None:
            async with self._busy:
                await self._finish(raft)

    # -- the RPCs --------------------------------------------------------------------------------

    async def add(self, member: logpb.Member) -> tuple[logpb.MembershipRecord, str]:
        for field in ("raft", "grpc", *(("http",) if member.http else ())):
            try:
                parse_address(getattr(member, field), field)
            except InvalidSpec as exc:
                raise InvalidSpec(f"member.{field}", exc.reason) from None
        raft = self._leader_raft()
        # pysyncobj counts the new node toward the quorum as soon as the change is appended,
        # before it has caught up: the current members alone must then still make the quorum.
        down = [self._name(p.address) for p in raft.status().peers if not p.connected]
        if down:
            raise Conflict(
                f"{', '.join(down)} {'is' if len(down) == 1 else 'are'} not connected: adding a node now "
                "could leave the cluster without a quorum until the new node has caught up; restore "
                "or remove the disconnected members first"
            )
        change = logpb.MemberChange(kind=ADD)
        change.member.CopyFrom(member)
        return await self._change(raft, change)

    async def remove(self, node_id: str) -> tuple[logpb.MembershipRecord, str]:
        raft = self._leader_raft()
        member = next((m for m in self.node.state.membership.members() if m.id == node_id), None)
        if member is not None:
            members = self.node.state.membership.members()
            remaining = len(members) - 1
            status = raft.status()
            gone = self.node.dial_address(member.raft)
            connected = 1 + sum(1 for p in status.peers if p.connected and p.address != gone)
            if member.id != self.node.node_id and connected <= remaining // 2:
                raise Conflict(
                    f"only {connected} of the {remaining} remaining members are connected: removing "
                    f"{node_id} now would leave the cluster without a quorum"
                )
        change = logpb.MemberChange(kind=REMOVE)
        change.member.id = node_id
        return await self._change(raft, change)

    def _name(self, dialled: str) -> str:
        """``n3 (host:port)`` for a peer address as Raft knows it."""
        for m in self.node.state.membership.known():
            if self.node.dial_address(m.raft) == dialled:
                return f"{m.id} ({m.raft})"
        return dialled

    def _leader_raft(self) -> RaftMembership:
        self.node.gate.stamp()  # not_leader (with the leader's address) on a follower
        raft = self._raft()
        if raft is None:
            raise Unavailable("this node has not joined the cluster yet")
        if not self.node.state.membership.seeded:
            raise Unavailable("the membership is not recorded yet: retry in a moment")
        return raft

    async def _change(
        self, raft: RaftMembership, change: logpb.MemberChange
    ) -> tuple[logpb.MembershipRecord, str]:
        # Not under the lock: a second change proposed meanwhile reaches the state machine while
        # this one is in progress and is refused there (one change at a time, across leaders).
        cmd = self._command("begin")
        cmd.begin_member_change.change.CopyFrom(change)
        res = await propose_and_wait(self.node, codec.encode_command(cmd))
        p = res.membership.pending
        log.info("membership change begun: %s %s (raft %s)", p.kind, p.member.id, p.member.raft)
        async with self._busy:
            note = await self._finish(raft)
        return self.node.state.membership.record, note

    async def _finish(self, raft: RaftMembership) -> str:
        """Carry the change in progress through Raft's membership and record its end."""
        pending = self.node.state.membership.pending()
        if pending is None:
            return ""
        kind, member = pending.kind, pending.member
        if kind == REMOVE and member.id == self.node.node_id:
            # pysyncobj cannot remove its own leader: hand leadership over; the next leader
            # finds the change in progress and finishes it.
            new = await asyncio.to_thread(raft.step_down, 3.0)
            return (
                f"{member.id} led: it handed leadership to {new or 'another node'}, which finishes "
                "the removal; stop the process once the membership no longer lists it"
            )
        dial = self.node.dial_address(member.raft)
        want = kind == ADD
        denied = 0
        while (dial in raft.member_addresses()) != want:
            if not raft.is_leader():
                raise Refused("not_leader", "leadership moved; the new leader finishes the change")
            error = await self._raft_change(raft, kind, member.raft)
            if error is None:
                break
            denied += 1
            if denied >= DENIED_RETRIES:
                await self._end(kind, member.id, applied=False, reason=str(error))
                raise Unavailable(f"Raft refused to {kind} {member.id}: {error}; the change was abandoned")
            await asyncio.sleep(0.25)
        await self._end(kind, member.id, applied=True)
        return ""

    async def _raft_change(self, raft: RaftMembership, kind: str, raft_addr: str) -> ProposeError | None:
        loop = asyncio.get_running_loop()
        fut: asyncio.Future[ProposeError | None] = loop.create_future()

        def settle(err: ProposeError | None) -> None:
            if not fut.done():
                fut.set_result(err)

        def done(err: ProposeError | None) -> None:
            loop.call_soon_threadsafe(settle, err)

        raft.change_membership(kind, raft_addr, done)
        try:
            return await asyncio.wait_for(fut, RAFT_CHANGE_TIMEOUT_S)
        except TimeoutError:
            return ProposeError("unavailable", "the Raft membership entry was not confirmed in time")

    async def _end(self, kind: str, node_id: str, applied: bool, reason: str = "") -> None:
        cmd = self._command("end")
        cmd.end_member_change.id = node_id
        cmd.end_member_change.kind = kind
        cmd.end_member_change.applied = applied
        cmd.end_member_change.reason = reason
        await propose_and_wait(self.node, codec.encode_command(cmd))
        log.info("membership change %s %s %s", kind, node_id, "done" if applied else f"abandoned: {reason}")

    def _command(self, what: str) -> logpb.Command:
        stamp = self.node.gate.stamp()
        return logpb.Command(idempotency_key=f"membership-{what}-{uuid.uuid4().hex}", **stamp.as_kwargs())
