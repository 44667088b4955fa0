"""Replicated cluster membership: which scheduler nodes exist, and the one change in progress.

Pure like the rest of the state machine: time is the command's leader-stamped ``now``; nothing
here reads a clock or raises for bad input past the handlers (rejections are
:class:`raftsched.fsm.rules.Reject` values the state machine turns into a result).

The record (:class:`MembershipRecord` under ``c/members``) is the truth after bootstrap; the
config file only seeds it:

* ``SeedMembership`` records the first leader's config nodes; refused once a membership exists.
* ``BeginMemberChange`` starts adding or removing one node; refused while another change is in
  progress, for an id or address already in use (add), an unknown id (remove) or the last node.
* ``EndMemberChange`` finishes the change in progress: ``applied`` changes the member list,
  otherwise the change is abandoned. The Raft layer's own membership change happens between the
  two (see :mod:`raftsched.server.membership`); the pending change in the record is what lets a new
  leader finish a change its predecessor began.

While a node is being added it is listed as pending, not as a member; :meth:`MembershipBook.known`
includes it, so every node can already name it (its Raft address appears before the end).
"""

from __future__ import annotations

import re

from raftsched.abc import StateStore
from raftsched.fsm import keys
from raftsched.fsm.rules import Reject
from raftsched.v1 import log_pb2 as pb

__all__ = ["ADD", "KINDS", "REMOVE", "MembershipBook"]

ADD = "add"
REMOVE = "remove"
KINDS = (ADD, REMOVE)

_ID = re.compile(r"[A-Za-z0-9_-]{1,64}")
_ADDRESS = re.compile(r"(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]{1,253}):[0-9]{1,5}")


def _check_member(m: pb.Member, where: str) -> None:
    if not _ID.fullmatch(m.id):
        raise Reject("invalid_argument", f"{where}: node id {m.id!r} must be 1-64 of A-Z a-z 0-9 _ -")
    for field in ("raft", "grpc"):
        value = getattr(m, field)
        if not _ADDRESS.fullmatch(value):
            raise Reject("invalid_argument", f"{where}: {field} address {value!r} is not host:port")
    if m.http and not _ADDRESS.fullmatch(m.http):
        raise Reject("invalid_argument", f"{where}: http address {m.http!r} is not host:port")
    if m.raft == m.grpc:
        raise Reject("invalid_argument", f"{where}: raft and grpc are the same address {m.raft}")


class MembershipBook:
    """The membership record, in memory and in the store (apply thread writes; any thread reads
    :attr:`record`, which is replaced, never mutated in place)."""

    def __init__(self, store: StateStore) -> None:
        self.store = store
        self.record = pb.MembershipRecord()

    def load(self) -> None:
        raw = self.store.get(keys.MEMBERSHIP_KEY)
        rec = pb.MembershipRecord()
        if raw:
            rec.ParseFromString(raw)
        self.record = rec

    # -- reads (any thread) ----------------------------------------------------------------------

    @property
    def seeded(self) -> bool:
        return bool(self.record.members)

    def members(self) -> list[pb.Member]:
        return list(self.record.members)

    def pending(self) -> pb.MemberChange | None:
        rec = self.record
        return rec.pending if rec.HasField("pending") else None

    def known(self) -> list[pb.Member]:
        """The members and a node being added (every node another node may need to name)."""
        rec = self.record
        out = list(rec.members)
        if rec.HasField("pending") and rec.pending.kind == ADD:
            out.append(rec.pending.member)
        return out

    def get(self, node_id: str) -> pb.Member | None:
        for m in self.known():
            if m.id == node_id:
                return m
        return None

    # -- commands (apply thread) ------------------------------------------------------------------

    def seed(self, body: pb.SeedMembership) -> pb.CommandResult:
        if self.seeded:
            raise Reject("already_exists", "the membership is already recorded; change it with add/remove")
        if not body.members:
            raise Reject("invalid_argument", "seed: at least one member is required")
        seen: set[str] = set()
        for m in body.members:
            _check_member(m, "seed")
            for value in (m.id, m.raft, m.grpc):
                if value in seen:
                    raise Reject("invalid_argument", f"seed: {value} appears twice")
                seen.add(value)
        rec = pb.MembershipRecord()
        rec.members.extend(sorted(body.members, key=lambda m: m.id))
        return self._save(rec)

    def begin(self, body: pb.BeginMemberChange, now: int) -> pb.CommandResult:
        change = body.change
        rec = self.record
        if rec.HasField("pending"):
            p = rec.pending
            raise Reject(
                "conflict",
                f"a membership change is in progress ({p.kind} {p.member.id}); "
                "one change at a time: retry once it has finished",
            )
        if not self.seeded:
            raise Reject("unavailable", "the membership is not recorded yet (the first leader seeds it)")
        if change.kind == ADD:
            _check_member(change.member, "add")
            for m in rec.members:
                if m.id == change.member.id:
                    raise Reject("already_exists", f"node {m.id} is a member already")
                used = {m.raft, m.grpc} | ({m.http} if m.http else set())
                for field in ("raft", "grpc", "http"):
                    value = getattr(change.member, field)
                    if value and value in used:
                        raise Reject("already_exists", f"address {value} is used by node {m.id}")
        elif change.kind == REMOVE:
            found = [m for m in rec.members if m.id == change.member.id]
            if not found:
                raise Reject("not_found", f"node {change.member.id!r} is not a member")
            if len(rec.members) == 1:
                raise Reject("invalid_argument", "cannot remove the last member")
            change = pb.MemberChange(kind=REMOVE)
            change.member.CopyFrom(found[0])
        else:
            raise Reject("invalid_argument", f"membership change kind {change.kind!r} is not add or remove")
        new = pb.MembershipRecord()
        new.CopyFrom(rec)
        new.pending.CopyFrom(change)
        new.pending.started_ms = now
        return self._save(new)

    def end(self, body: pb.EndMemberChange) -> pb.CommandResult:
        rec = self.record
        if not rec.HasField("pending"):
            raise Reject("not_found", "no membership change is in progress")
        p = rec.pending
        if p.member.id != body.id or p.kind != body.kind:
            raise Reject(
                "conflict", f"the change in progress is {p.kind} {p.member.id}, not {body.kind} {body.id}"
            )
        new = pb.MembershipRecord(changes=rec.changes)
        members = [m for m in rec.members if m.id != p.member.id]
        if body.applied:
            if p.kind == ADD:
                members.append(p.member)
            new.changes = rec.changes + 1
        else:
            members = list(rec.members)
        new.members.extend(sorted(members, key=lambda m: m.id))
        return self._save(new)

    def _save(self, rec: pb.MembershipRecord) -> pb.CommandResult:
        self.store.put(keys.MEMBERSHIP_KEY, rec.SerializeToString(deterministic=True))
        self.record = rec
        res = pb.CommandResult(ok=True)
        res.membership.CopyFrom(rec)
        return res
