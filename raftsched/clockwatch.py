"""How far this node's clock is from the leader's and from the majority's (issue 35 §5).

A leader stamps its wall clock into every command, and the state machine never lets committed
leader time go back (:func:`raftsched.leader.gate.leader_time`). One leader whose clock stepped
ten minutes ahead therefore poisoned the cluster for ten minutes, even after it died. This module
measures clocks so that a node can tell whether its own clock is the odd one out:

* The leader stamps ``(wall ms, monotonic µs)`` on every Raft ``append_entries`` it sends (the
  pysyncobj adapter adds it to the message); each follower echoes the monotonic stamp with its own
  wall clock in its reply. The leader thus gets each follower's clock with the round trip halved
  (NTP's estimate; its error is at most half the round trip).
* The leader tells each follower, on its next append, that follower's offset from the leader and
  from the majority's clock (the median of all measured clocks, the leader's own included).
* Executors get the leader's time on every heartbeat and register reply (their own estimate,
  :class:`raftsched.executor.agent.Executor`).

Samples are kept against this node's *monotonic* clock, so a step of this node's own wall clock
is seen at the next read, not at the next sample: a leader whose clock steps stops stamping
before it commits a single command with the stepped time.

Thread-safety: samples arrive on pysyncobj's tick thread; the driver, the gate and the status
code read on theirs. Every method takes the lock.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from dataclasses import dataclass

DEFAULT_MAX_SKEW_MS = 10_000
FRESH_S = 10.0  # a sample older than this (monotonic seconds) no longer counts


@dataclass(frozen=True, slots=True)
class ClockView:
    """One reading of a :class:`ClockWatch` (all in ms; None while unknown).

    ``offset_ms``: this node's clock minus the leader's (0 on the leader). ``skew_ms``: this
    node's clock minus the majority's. ``faulty``: ``|skew_ms| > max_skew_ms``.
    """

    offset_ms: int | None
    skew_ms: int | None
    faulty: bool
    peers: dict[str, int]  # peer -> its clock minus this node's (fresh samples only)


class ClockWatch:
    """This node's view of the other nodes' clocks. ``wall_ms`` and ``mono_s`` are this node's
    clock (:class:`raftsched.abc.Clock` ``now_ms`` and ``monotonic``); ``members`` returns the
    number of voting members (the majority is counted on it)."""

    def __init__(
        self,
        wall_ms: Callable[[], int],
        mono_s: Callable[[], float],
        max_skew_ms: int = DEFAULT_MAX_SKEW_MS,
        members: Callable[[], int] = lambda: 1,
        fresh_s: float = FRESH_S,
    ) -> None:
        self.wall_ms = wall_ms
        self.mono_s = mono_s
        self.max_skew_ms = max_skew_ms
        self.members = members
        self.fresh_s = fresh_s
        self._lock = threading.Lock()
        # peer -> (its wall ms minus our monotonic ms at the same instant, our monotonic s then)
        self._peers: dict[str, tuple[float, float]] = {}
        # What the leader told us: (our offset from it, our skew from the majority or None,
        # our wall-minus-monotonic then, our monotonic s then)
        self._told: tuple[int, int | None, float, float] | None = None
        self._echo: dict[str, int] = {}  # peer (a leader) -> its last monotonic stamp, to echo

    # -- samples (tick thread) --------------------------------------------------------------------

    def peer_sample(self, peer: str, peer_wall_ms: int, at_mono_s: float) -> None:
        """``peer``'s clock read ``peer_wall_ms`` at our monotonic instant ``at_mono_s``."""
        with self._lock:
            self._peers[peer] = (peer_wall_ms - at_mono_s * 1000.0, at_mono_s)

    def round_trip(self, peer: str, peer_wall_ms: int, sent_mono_us: int) -> None:
        """A reply from ``peer`` that echoes our stamp ``sent_mono_us``: its clock is taken to have
        read ``peer_wall_ms`` half-way through the round trip."""
        now = self.mono_s()
        sent = sent_mono_us / 1_000_000
        if not 0 <= now - sent < self.fresh_s:
            return  # not our stamp (a restart), or too old to mean anything
        self.peer_sample(peer, peer_wall_ms, (sent + now) / 2)

    def told(self, offset_ms: int | None, skew_ms: int | None) -> None:
        """The leader's word on this node's clock (its offset from the leader, its skew from the
        majority; None when the leader does not know yet)."""
        if offset_ms is None:
            return
        wall, mono = self.wall_ms(), self.mono_s()
        with self._lock:
            self._told = (offset_ms, skew_ms, wall - mono * 1000.0, mono)

    def leader_stamp(self, leader: str, mono_us: int) -> None:
        with self._lock:
            self._echo[leader] = mono_us

    def echo_for(self, leader: str) -> int | None:
        with self._lock:
            return self._echo.get(leader)

    # -- readings (any thread) --------------------------------------------------------------------

    def view(self, leading: bool) -> ClockView:
        """This node's clock as it stands now: measured by itself when ``leading``, else as the
        leader last told it (moved by any step of this node's own clock since)."""
        wall, mono = self.wall_ms(), self.mono_s()
        with self._lock:
            peers = {
                p: round(base + mono * 1000.0 - wall)
                for p, (base, at) in self._peers.items()
                if mono - at < self.fresh_s
            }
            told = self._told
        if leading:
            skew = _skew(peers, self.members())
            return ClockView(0, skew, skew is not None and abs(skew) > self.max_skew_ms, peers)
        if told is None or mono - told[3] >= self.fresh_s:
            return ClockView(None, None, False, peers)
        drift = round((wall - mono * 1000.0) - told[2])  # our own step since we were told
        offset = told[0] + drift
        skew = None if told[1] is None else told[1] + drift
        return ClockView(offset, skew, skew is not None and abs(skew) > self.max_skew_ms, peers)

    def faulty(self) -> bool:
        """This node's clock is off the majority's by more than ``max_skew_ms``, by its own
        measurement (while it leads) or by what the leader last told it."""
        return self.view(leading=True).faulty or self.view(leading=False).faulty

    def advice_for(self, peer: str, leading: bool = True) -> tuple[int | None, int | None]:
        """What a leader tells ``peer``: its offset from the leader and its skew from the
        majority (None while unknown)."""
        v = self.view(leading)
        theirs = v.peers.get(peer)
        if theirs is None:
            return None, None
        # The median seen from ``peer``: a tie favours it as ours favours us (two nodes that
        # disagree cannot tell who is wrong, and neither is told it is).
        seen_from_peer = {q: o - theirs for q, o in v.peers.items() if q != peer}
        seen_from_peer[""] = -theirs  # this node
        return theirs, _skew(seen_from_peer, self.members())


def _skew(peers: dict[str, int], members: int) -> int | None:
    """Our clock minus the majority's: the median of every measured clock's offset from ours (ours
    is 0), known once a majority of ``members`` is measured. Between two middle values the one
    nearer ours is taken: with an even count neither side is a majority, and a node does not
    declare itself wrong on a tie."""
    offsets = sorted([0, *(-o for o in peers.values())])  # ours minus theirs
    if len(offsets) < members // 2 + 1:
        return None
    n = len(offsets)
    if n % 2:
        return offsets[n // 2]
    a, b = offsets[n // 2 - 1], offsets[n // 2]
    return a if abs(a) <= abs(b) else b
