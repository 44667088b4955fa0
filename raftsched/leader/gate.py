"""The leader gate: whether this node may stamp leader commands now, and the stamp itself.

Every command a leader proposes carries ``now_ms`` (leader time) and ``epoch`` (its Raft term);
the state machine refuses an epoch older than the newest it applied, and never lets leader time
go back. This module is the one place that computes both for the node's edge (client writes,
executor RPCs) and the one rule for leader time that the leader driver shares.

A node may stamp client writes when it is *leading and ready*: Raft says it leads, its leader
driver leads the same term, and the driver's barrier for that term is applied (every older
leader's entry is applied, so reads of the state are current and the epoch fences the rest).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeGuard

from raftsched.abc import Clock, ConsensusNode
from raftsched.errors import NotLeader, Unavailable
from raftsched.fsm.effects import BarrierCommitted, Effect


def leader_time(clock_ms: int, committed_ms: int) -> int:
    """Leader time: the clock, but never earlier than leader time already committed.

    ``committed_ms`` is the newest ``now_ms`` the state machine applied; a new leader whose clock
    runs behind the old one's therefore stamps no earlier than what the cluster has seen.
    """
    return clock_ms if clock_ms > committed_ms else committed_ms


def epoch_verdict(
    consensus: ConsensusNode | None, leading: bool, epoch: int
) -> Literal["ok", "changing", "no"]:
    """Whether a component that follows leadership on its own (the dispatcher) may serve now.

    ``"no"`` when it does not lead; ``"changing"`` when it still leads ``epoch`` but Raft has
    moved on (no consensus yet, another leader, a newer term: the change is on its way to it);
    ``"ok"`` when it leads the epoch Raft is in. The executor service and the simulation's stand-in
    for it both decide with this.
    """
    if not leading:
        return "no"
    if consensus is None or not consensus.is_leader() or consensus.epoch() != epoch:
        return "changing"
    return "ok"


@dataclass(frozen=True, slots=True)
class Stamp:
    """What a leader writes into a command it proposes."""

    now_ms: int
    epoch: int
    origin: str  # the proposing node's id

    def as_kwargs(self) -> dict[str, Any]:
        """The stamp as the keyword arguments of :mod:`raftsched.leader.writes` builders."""
        return {"now_ms": self.now_ms, "epoch": self.epoch, "origin": self.origin}


class CommittedTime(Protocol):
    """The state machine's view of leader time (``SchedulerState``)."""

    @property
    def max_now_ms(self) -> int: ...


class DriverRole(Protocol):
    """The leader driver's view of its own leadership (``LeaderDriver``)."""

    @property
    def leading(self) -> bool: ...

    @property
    def ready(self) -> bool: ...

    @property
    def epoch(self) -> int: ...


class LeaderGate:
    """Answers "leading and ready" and stamps ``now`` and ``epoch``, for one node.

    ``consensus`` returns the node's consensus layer (None until it is started);
    ``leader_address`` the leader's client address for a redirect hint (None while unknown).
    Thread-safe as far as its sources are: it only reads them.
    """

    def __init__(
        self,
        node_id: str,
        clock: Clock,
        committed: CommittedTime,
        driver: DriverRole,
        consensus: Callable[[], ConsensusNode | None],
        leader_address: Callable[[], str | None],
        clock_faulty: Callable[[], bool] | None = None,
        damaged: Callable[[], str] | None = None,
    ) -> None:
        self.node_id = node_id
        self._clock_faulty = clock_faulty
        self._damaged = damaged
        self._clock = clock
        self._committed = committed
        self._driver = driver
        self._consensus = consensus
        self._leader_address = leader_address

    def now_ms(self) -> int:
        """Leader time now (see :func:`leader_time`)."""
        return leader_time(self._clock.now_ms(), self._committed.max_now_ms)

    def clock_ms(self) -> int:
        """This node's own clock (not leader time): what executors measure their offset against."""
        return self._clock.now_ms()

    def damaged(self) -> bool:
        """This node's stored state was found damaged (``Node.store_damaged``): it must not lead,
        so nothing is stamped and nothing dispatched while it hands leadership over."""
        check = self._damaged
        return check is not None and bool(check())

    def clock_faulty(self) -> bool:
        """This node's clock is off the majority's by more than max_clock_skew
        (raftsched.clockwatch): nothing may be stamped with it; the node hands leadership over."""
        check = self._clock_faulty
        return check is not None and check()

    def leading_and_ready(self) -> bool:
        """Raft says this node leads, and its driver leads that same term with its barrier applied."""
        c = self._consensus()
        d = self._driver
        return c is not None and c.is_leader() and d.leading and d.ready and d.epoch == c.epoch()

    def require_leading(self) -> None:
        """Raise :class:`NotLeader` (with the leader's address when known) unless this node is
        leading and ready (:class:`Unavailable` while it is elected but not ready yet): a read
        that must not be stale is answered by the leader only."""
        if not self.leading_and_ready():
            raise self._not_leader()

    def driver_leads(self, epoch: int) -> bool:
        """The leader driver leads ``epoch`` (whether or not its barrier is applied yet)."""
        return self._driver.leading and self._driver.epoch == epoch

    def dispatch_epoch(self) -> int:
        """The epoch the dispatcher should lead now: the driver's, once it leads it with its
        barrier applied (ready); 0 otherwise."""
        d = self._driver
        return d.epoch if d.leading and d.ready else 0

    def takes_dispatch(self, effect: Effect) -> TypeGuard[BarrierCommitted]:
        """``effect`` is this node's barrier of the term its driver leads: the dispatcher takes
        over now. Not a barrier of its own replayed from an older term (a wiped node catching
        up): a follower once started dispatching from one. The node's executor service and the
        simulation both decide with this."""
        return (
            isinstance(effect, BarrierCommitted)
            and effect.node_id == self.node_id
            and self.driver_leads(effect.epoch)
        )

    def stamp(self) -> Stamp:
        """The stamp for a client write, if this node is leading and ready.

        Raises :class:`NotLeader` (with the leader's address when known) if Raft or the driver
        says another node leads, :class:`Unavailable` if this node is elected but its barrier is
        not applied yet, or if Raft moved to a new term the driver has not caught up with: a
        stamp now would carry a stale epoch. Either way nothing was proposed; the caller may retry.
        """
        c = self._consensus()
        d = self._driver
        if not (c is not None and c.is_leader() and d.leading and d.ready):
            raise self._not_leader()
        if d.epoch != c.epoch():
            raise self._changing()
        if self.clock_faulty():
            raise self._clock_off()
        if self.damaged():
            raise Unavailable(
                f"{self.node_id}'s stored state is damaged: it hands leadership over; retry shortly"
            )
        return Stamp(self.now_ms(), d.epoch, self.node_id)

    def require_epoch(self, leading: bool, epoch: int) -> None:
        """Check a component that follows leadership on its own (the dispatcher, which takes over
        when its barrier is applied on the event loop) against Raft.

        Raises :class:`Unavailable` if the component still leads ``epoch`` but Raft has moved on
        (the change is on its way to it), :class:`NotLeader` if the component does not lead.
        """
        verdict = epoch_verdict(self._consensus(), leading, epoch)
        if verdict == "changing":
            raise self._changing()
        if verdict == "no":
            raise self._not_leader()
        if self.clock_faulty():
            raise self._clock_off()
        if self.damaged():
            raise Unavailable(
                f"{self.node_id}'s stored state is damaged: it hands leadership over; retry shortly"
            )

    def _not_leader(self) -> NotLeader | Unavailable:
        c = self._consensus()
        if c is not None and c.is_leader():
            # Elected, but the driver has not applied its first entry (the barrier) yet: saying
            # "not the leader; the leader is at <this node>" would send the caller back here.
            return Unavailable(f"{self.node_id} is taking over as leader; retry shortly")
        leader = self._leader_address() or ""
        where = f"; the leader is at {leader}" if leader else "; no leader is elected yet, retry shortly"
        return NotLeader(f"{self.node_id} is not the leader{where}", leader or None)

    def _clock_off(self) -> Unavailable:
        return Unavailable(
            f"{self.node_id}'s clock is off the majority's by more than max_clock_skew: it hands "
            "leadership over; retry shortly"
        )

    def _changing(self) -> Unavailable:
        return Unavailable(f"{self.node_id} is changing leadership; retry shortly")
