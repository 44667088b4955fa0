"""Which command formats the voting members apply: the leader's gate for the columnar bodies.

An older node halts on the first entry stamped with a format newer than its build applies
(``format_too_new``): safe, but a cluster upgraded node by node would lose that node until it is
upgraded. So the leader proposes the columnar hot-path bodies (``fire_columns``,
``assign_columns``, ``result_columns``; :data:`COLUMNS_FORMAT`) only while *every* voting member
reports, in its ``NodeStatus.command_format``, a build that applies them; otherwise it keeps
building today's ``FireBatch``, ``AssignAttempts`` and ``ReportResults``, which every member
applies. A member whose format the leader has not heard yet (a new leadership, a node just
added, a peer that does not answer the status call, e.g. one that refuses it for want of a
client certificate) counts as old.

Pure: :class:`MemberFormats` holds what the node's poller (``Node._format_loop``) last heard;
any thread may ask it. The poller replaces the whole mapping at once, so a reader sees one
poll's answers or the next's, never a mix.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping

from raftsched import codec

# The format of the columnar bodies (issue 31 stage 2). The state machine's own constant once it
# has one; a build without it never opens the gate.
COLUMNS_FORMAT: int = getattr(codec, "COLUMNS_FORMAT", 18)

# The format of PromoteHotRuns (the leader moves hot runs that pin the slot table to the cold
# path; raftsched.fsm.hot.MAX_HOT_SPAN): proposed only while every voting member applies it.
PROMOTE_FORMAT: int = codec.PROMOTE_FORMAT

__all__ = ["COLUMNS_FORMAT", "PROMOTE_FORMAT", "MemberFormats"]


class MemberFormats:
    """The command format each voting member last reported, and whether all of them apply one.

    ``own_format``: what this node's build applies (``codec.COMMAND_FORMAT``, read at each
    question, so a test that raises it sees the change). ``voters()``: ids of the *other* voting
    members now (the replicated membership: a node being added counts)."""

    def __init__(
        self,
        voters: Callable[[], Iterable[str]],
        own_format: Callable[[], int] = lambda: codec.COMMAND_FORMAT,
    ) -> None:
        self._voters = voters
        self._own_format = own_format
        self._reported: Mapping[str, int] = {}

    def update(self, reported: Mapping[str, int]) -> None:
        """One poll's answers: node id -> its reported command format. A member that did not
        answer keeps what it said before in this leadership (a status call that timed out once
        does not switch the bodies back and forth); one never heard from counts as old. A node
        restarted on an older build answers with its older format at the next poll (until then
        it halts on a newer entry: ``format_too_new``, never a divergence)."""
        merged = dict(self._reported)
        merged.update(reported)
        self._reported = merged

    def forget(self) -> None:
        """Forget every answer (this node stepped down: the next leadership asks again)."""
        self._reported = {}

    @property
    def reported(self) -> Mapping[str, int]:
        return self._reported

    def unknown_or_older(self, needed: int) -> list[str]:
        """Ids of the other voters that have not reported ``needed`` or newer, sorted."""
        reported = self._reported
        return sorted(v for v in self._voters() if reported.get(v, 0) < needed)

    def all_apply(self, needed: int = COLUMNS_FORMAT) -> bool:
        """Whether this build and every voting member apply commands of format ``needed``."""
        if self._own_format() < needed:
            return False
        reported = self._reported
        return all(reported.get(v, 0) >= needed for v in self._voters())
