"""Which executors this leader still hears from: heartbeats, dispatch streams, and the verdict
that an executor is dead.

An executor is declared dead (once per leadership, until it joins again) when it has not
heartbeated for a lease, or when its dispatch stream closed and was not reopened within
``stream_grace_ms`` - well before the lease would tell (the lease stays the backstop for
executors that vanish without a close). A new leader first gives every member one extra lease
(the takeover grace) to find it, and counts as *unconfirmed* those that have not heartbeated it
yet.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from dataclasses import dataclass

from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.v1 import raftsched_pb2 as pb


@dataclass(frozen=True, slots=True)
class ExecutorHealth:
    """What an executor said of itself in its last heartbeat (issue 36 §3, §4): its clock minus
    the leader's (None: not measured yet), and the fractions in use of its data directory's
    filesystem and of its execution log's map."""

    clock_offset_ms: int | None = None
    disk_used: float = 0.0
    log_used: float = 0.0


def _fraction(value: float) -> float:
    return min(1.0, max(0.0, value)) if math.isfinite(value) else 0.0


def executor_health(request: pb.HeartbeatRequest) -> ExecutorHealth:
    """The health a heartbeat reports (fractions clamped to 0..1; the offset is range-checked by
    :mod:`raftsched.bounds` before this)."""
    return ExecutorHealth(
        request.clock_offset_ms if request.HasField("clock_offset_ms") else None,
        _fraction(request.disk_used),
        _fraction(request.log_used),
    )


class Liveness:
    """Not thread-safe: the dispatcher's thread owns it."""

    __slots__ = ("declared_dead", "health", "last_seen", "stream_gone", "unconfirmed")

    def __init__(self) -> None:
        self.last_seen: dict[str, int] = {}  # executor -> last heartbeat (or end of its grace)
        self.declared_dead: set[str] = set()
        # Executors whose dispatch stream closed: declared dead at this time unless they reopen one.
        self.stream_gone: dict[str, int] = {}
        # Members that have not heartbeated this leader since it took over.
        self.unconfirmed: set[str] = set()
        # executor -> what its last heartbeat said of its clock, disk and execution log
        self.health: dict[str, ExecutorHealth] = {}

    def take_over(self, members: Iterable[str], grace_until_ms: int) -> None:
        """A new leader gives every member until ``grace_until_ms`` before judging it."""
        names = sorted(members)
        for name in names:
            self.last_seen[name] = grace_until_ms
        self.unconfirmed = set(names)

    def joined(self, executor: str, now_ms: int) -> None:
        """``executor`` joined (or joined again): it is alive as of now."""
        self.last_seen[executor] = now_ms
        self.declared_dead.discard(executor)
        self.stream_gone.pop(executor, None)

    def stream_closed(self, executor: str, deadline_ms: int) -> None:
        self.stream_gone.setdefault(executor, deadline_ms)

    def dead(self, members: Iterable[str], now_ms: int, settings: DispatchSettings) -> list[tuple[str, str]]:
        """``(executor, reason)`` of every member to declare dead now, sorted; each is declared
        once (until it joins again)."""
        out: list[tuple[str, str]] = []
        for name in sorted(members):
            seen = self.last_seen.get(name, now_ms)
            gone = self.stream_gone.get(name)
            if name in self.declared_dead:
                continue
            if now_ms - seen > settings.lease_ms:
                reason = f"no heartbeat for {now_ms - seen} ms"
            elif gone is not None and gone <= now_ms:
                reason = f"dispatch stream closed and not reopened within {settings.stream_grace_ms} ms"
            else:
                continue
            self.declared_dead.add(name)
            self.stream_gone.pop(name, None)
            out.append((name, reason))
        return out
