"""Leases, and what an attempt holds on its executor while it is reserved or leased.

An attempt takes a slot on its executor when an assignment naming it is proposed (a
*reservation*: :meth:`Holdings.reserve`) and keeps it while leased; with a declared need it also
holds cpu and memory, a backfill attempt holds a place of its workflow's share, and quotas and
locks are reserved until the assignment applies. All of that is given back in one place,
:meth:`Holdings.release`, whichever way the reservation or the lease ends (the proposal failed,
the attempt was assigned, finished, lost, cancelled).

Leases are leader-local: heartbeats are not replicated. A lease knows whether its attempt has
started (:attr:`Lease.started`): only a loss while known unstarted is "unstarted" (re-placed
without consuming a retry).
"""

from __future__ import annotations

from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from raftsched.fsm.policy import Need as PolicyNeed
from raftsched.fsm.policy import Reservations
from raftsched.sharding.placement import NO_NEED, ExecutorUsage, Need

Key = tuple[str, int]  # (run id, shard): the attempt's place, whatever its attempt number

_NEVER = 2**63  # later than any time


@dataclass(slots=True)
class Lease:
    execution_id: str
    run_id: str
    task: str
    shard: int
    attempt: int
    executor: str
    expires_ms: int
    deadline_ms: int  # timeout backstop (0 = none): lost even if heartbeats continue
    backfill: bool = False
    assigned_ms: int = 0  # when the attempt was assigned (replicated; survives leader changes)
    # Whether the executor has started it: False from this leader's first dispatch until a
    # heartbeat lists it as started; None when unknown (re-sent after a takeover). Only False
    # makes a loss "unstarted" (not a try); True never goes back.
    started: bool | None = None
    # A hot run's seq (raftsched.fsm.hot) when the dispatch came from its AssignColumns row; 0
    # otherwise. Its report then need not find the seq from the run id again.
    seq: int = 0
    # The timeout backstop's length (deadline_ms - the dispatch's time; 0 = none). While its
    # executor's heartbeats say it holds the attempt unstarted, and from the first that says it
    # started, the backstop counts from that heartbeat (an executor that prefetches starts it only
    # when a slot of its own frees: raftsched.executor.rungate).
    budget_ms: int = 0


class Holdings:
    """The leases of one leadership, by execution id, and what reserved and leased attempts hold.

    Not thread-safe: the dispatcher's thread owns it."""

    __slots__ = ("backfill_busy", "check_at", "held", "leases", "reserved", "used")

    def __init__(self) -> None:
        self.leases: dict[str, Lease] = {}
        # No lease expires or passes its deadline before this (a lower bound: a renewal that
        # moves an expiry later leaves it as it is; anything that may move one earlier lowers
        # it): the dispatcher's timer looks at the leases only from then (see :meth:`lease`,
        # :meth:`renewed` and :meth:`due`).
        self.check_at = _NEVER
        self.used: dict[str, int] = {}  # slots per executor: leases + reservations
        # cpu and memory held per executor by leased and reserved attempts (slots are in `used`).
        self.held = ExecutorUsage()
        # Backfill attempts reserved or leased: capped at the workflow's share of all executor
        # slots, and placed only where regular work left a slot free.
        self.backfill_busy: set[Key] = set()
        # Quotas and locks taken by assignments proposed but not applied yet.
        self.reserved = Reservations()

    def lease(self, lease: Lease) -> None:
        """Hold ``lease`` (replacing any lease of its execution id)."""
        self.leases[lease.execution_id] = lease
        # _first_due, inline (one call per attempt on the leader's loop)
        due, deadline = lease.expires_ms, lease.deadline_ms
        if deadline and deadline < due:
            due = deadline
        if due < self.check_at:
            self.check_at = due

    def renewed(self, expires_ms: int) -> None:
        """Leases were renewed to expire at ``expires_ms`` (possibly earlier than before: a lease
        granted during a takeover grace expires after it)."""
        self.check_at = min(self.check_at, expires_ms)

    def due(self, now_ms: int) -> list[Lease]:
        """The leases that expired or passed their deadline by ``now_ms`` (still held; the caller
        drops them). Looks at every lease only once ``check_at`` has come, then moves it on."""
        if now_ms < self.check_at:
            return []
        due: list[Lease] = []
        first = _NEVER
        for lease in self.leases.values():
            when = _first_due(lease)
            if when <= now_ms:
                due.append(lease)
            elif when < first:
                first = when
        self.check_at = first
        return due

    def take(self, key: Key, executor: str, need: Need) -> None:
        """``key`` holds a slot on ``executor``, and the cpu and memory of ``need``."""
        used = self.used  # _use(executor, +1), inline: a count is never negative
        used[executor] = used.get(executor, 0) + 1
        if need is not NO_NEED:
            self.held.take(key, executor, need)

    def reserve(self, key: Key, executor: str, need: Need, policy: PolicyNeed | None, backfill: bool) -> None:
        """An assignment of ``key`` to ``executor`` is about to be proposed: hold what it takes
        until it applies or fails (:meth:`release`)."""
        if backfill:
            self.backfill_busy.add(key)
        if policy is not None:
            self.reserved.add(key, policy)
        used = self.used  # take, inline (once per attempt on the leader's loop)
        used[executor] = used.get(executor, 0) + 1
        if need is not NO_NEED:
            self.held.take(key, executor, need)

    def release(self, key: Key, executor: str) -> None:
        """Give back everything ``key`` held on ``executor`` (harmless for what it did not hold)."""
        self._use(executor, -1)
        self.hand_over(key)

    def hand_over(self, key: Key) -> None:
        """:meth:`release` but for the slot: ``key``'s reservation became its lease on the same
        executor, which keeps the slot the reservation took (rather than give it back and take
        it again: issue 31 stage 4). Its cpu and memory, backfill place, quotas and locks are
        given back as :meth:`release` gives them back (the lease takes none of them again: only
        an attempt with no declared need is handed over)."""
        # Each only when something of its kind is held at all: a plain attempt (the common case:
        # no declared need, not backfill, no quota or lock) holds none, and this runs twice per
        # attempt on the leader's loop (its assignment applied, its result reported).
        if self.held.running:
            self.held.release(key)
        if self.backfill_busy:
            self.backfill_busy.discard(key)
        if self.reserved.by_key:
            self.reserved.remove(key)

    def give_back_slot(self, executor: str) -> None:
        """One slot on ``executor`` a handed-over reservation kept and no lease took."""
        self._use(executor, -1)

    def drop(self, exec_id: str) -> Lease | None:
        """End the lease of ``exec_id`` (if any), giving back what it held."""
        lease = self.leases.pop(exec_id, None)
        if lease is not None:
            # release, inline (one call per attempt on the leader's loop)
            used, executor = self.used, lease.executor
            used[executor] = max(0, used.get(executor, 0) - 1)
            # hand_over, inline: a plain attempt holds none of these, and no key is built then
            if self.held.running:
                self.held.release((lease.run_id, lease.shard))
            if self.backfill_busy:
                self.backfill_busy.discard((lease.run_id, lease.shard))
            if self.reserved.by_key:
                self.reserved.remove((lease.run_id, lease.shard))
        return lease

    def void(self, executor: str) -> list[str]:
        """``executor`` is dead: end every lease it had (the state machine re-queued or failed their
        attempts). Returns the execution ids whose lease ended.

        Its slot count keeps the reservations still in flight on it (assignments proposed while
        it was a member): each is given back when its proposal completes (refused: it is gone),
        or becomes a lease that keeps its slot if the executor joined again before it applied
        (:meth:`hand_over`). Forgetting them left such leases uncounted."""
        ended = [exec_id for exec_id, lease in self.leases.items() if lease.executor == executor]
        for exec_id in ended:
            self.drop(exec_id)
        if not self.used.get(executor):
            self.used.pop(executor, None)
        return ended

    def unstarted_of(self, executor: str) -> list[str]:
        """Execution ids leased to ``executor`` that it is known not to have started, sorted."""
        return sorted(
            i for i, lease in self.leases.items() if lease.executor == executor and lease.started is False
        )

    def free_slots(self, placeable: dict[str, int], dead: AbstractSet[str]) -> dict[str, int]:
        """Slots per placeable executor not declared ``dead``, minus its leased and reserved
        attempts (never negative)."""
        return {
            name: max(0, slots - self.used.get(name, 0))
            for name, slots in placeable.items()
            if name not in dead
        }

    def _use(self, executor: str, delta: int) -> None:
        self.used[executor] = max(0, self.used.get(executor, 0) + delta)


def _first_due(lease: Lease) -> int:
    """When ``lease`` is lost unless renewed: its expiry, or its deadline if that comes first."""
    if lease.deadline_ms and lease.deadline_ms < lease.expires_ms:
        return lease.deadline_ms
    return lease.expires_ms
