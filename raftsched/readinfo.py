"""What every read reply says about its own freshness, on the wire and in the SDK.

Every Admin read answers with trailing metadata ``raftsched-read``:

* ``linearizable node=n1 index=1234``: the leader confirmed, by a read barrier committed at log
  index 1234 after the read arrived, that its answer covers every write acknowledged before the
  read (see :mod:`raftsched.leader.reads`);
* ``stale node=n2 applied=1230 commit=1234 contact_ms=40``: the caller accepted a stale read and
  node n2 answered from its own state as of log index 1230 (``applied``), when the newest commit
  index it had heard of was 1234 (``commit``), ``contact_ms`` milliseconds after it last heard from
  the leader (a follower) or from a majority (a leader; -1: never). It may lag by more than
  ``commit - applied``: a follower cut off from the leader does not hear of newer commits, which
  ``contact_ms`` shows.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

READ_KEY = "raftsched-read"


@dataclass(frozen=True, slots=True)
class ReadInfo:
    """How fresh one read's answer is (see the module docstring)."""

    linearizable: bool
    node_id: str
    index: int  # linearizable: the confirmed read index; stale: the applied index
    commit_index: int = 0  # stale only: the newest commit index the node had heard of
    contact_ms: int = -1  # stale only: ms since the node last heard from the leader / a majority

    @property
    def behind(self) -> int:
        """Committed entries the answering node had heard of but not applied (0 if linearizable)."""
        return 0 if self.linearizable else max(0, self.commit_index - self.index)

    def header(self) -> str:
        if self.linearizable:
            return f"linearizable node={self.node_id} index={self.index}"
        return (
            f"stale node={self.node_id} applied={self.index} commit={self.commit_index} "
            f"contact_ms={self.contact_ms}"
        )

    def describe(self) -> str:
        """One line for people (the CLI's ``--stale`` note, the console)."""
        if self.linearizable:
            return f"linearizable read from {self.node_id} at log index {self.index}"
        contact = "never" if self.contact_ms < 0 else f"{self.contact_ms} ms ago"
        return (
            f"stale read from {self.node_id}: applied index {self.index} of commit index "
            f"{self.commit_index} it had heard of ({self.behind} behind); its Raft view was last "
            f"confirmed {contact}"
        )

    @staticmethod
    def parse(value: str) -> ReadInfo | None:
        """The info a header value carries; None if it is not one this module writes."""
        kind, _, rest = value.partition(" ")
        if kind not in ("linearizable", "stale"):
            return None
        fields: dict[str, str] = {}
        for part in rest.split():
            k, sep, v = part.partition("=")
            if sep:
                fields[k] = v
        try:
            if kind == "linearizable":
                return ReadInfo(True, fields["node"], int(fields["index"]))
            return ReadInfo(
                False,
                fields["node"],
                int(fields["applied"]),
                int(fields["commit"]),
                int(fields["contact_ms"]),
            )
        except (KeyError, ValueError):
            return None

    @staticmethod
    def from_metadata(metadata: Iterable[tuple[str, str | bytes]] | None) -> ReadInfo | None:
        for key, value in metadata or ():
            if key == READ_KEY:
                text = value.decode("ascii", "replace") if isinstance(value, bytes) else value
                return ReadInfo.parse(text)
        return None
