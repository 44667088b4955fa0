"""An executor's run slots when it prefetches: at most ``slots`` attempts run at once, the rest of
what the cluster assigned it wait here in the order they arrived (``raftsched-executor
--prefetch``).

Why prefetch: a slot the cluster accounts for is taken from the moment the leader reserves it for
an attempt (before the assignment commits) until the executor's report of its result reaches the
leader, a cycle of a Raft commit round, the attempt itself and the report (≈ 85-130 ms on the
benchmarks' machines, docs/explanation/performance.md, "Prefetch"). For attempts that take a few
milliseconds that cycle, not the executor, bounds the attempts per second: ``slots / cycle``. An executor with
``prefetch = P`` registers ``slots + P`` with the cluster, so the leader keeps up to ``P`` more
attempts in flight to it, and runs at most ``slots`` of them at once; an attempt assigned while
every slot runs waits here until one ends.

What a waiting attempt is to the cluster: assigned to this executor (it holds the place, and the
cpu and memory a task declares), held (heartbeats renew its lease) and *not started* (the
heartbeats say so): if this executor dies, such an attempt is placed again without consuming a
retry. A cancel of a waiting attempt ends it at once, unstarted. It waits behind the attempts that
run: with long attempts prefetch delays work another executor could have started, which is why it
is off by default.

Not thread-safe: the agent's event loop owns it. Pure bookkeeping: no clock, no IO.
"""

from __future__ import annotations

import asyncio
import collections


class RunGate:
    """``slots`` run places, handed to waiters in arrival order (FIFO).

    :meth:`try_take` takes a place only when one is free and nobody waits (a newcomer never passes
    a waiter); :meth:`ticket` takes one or queues for one; :meth:`give` hands a place to the first
    waiter still waiting, else frees it."""

    __slots__ = ("_waiters", "closed", "free", "slots")

    def __init__(self, slots: int) -> None:
        if slots < 1:
            raise ValueError(f"a run gate needs at least one slot, not {slots}")
        self.slots = slots
        self.free = slots
        self.closed = False  # draining: no place is taken or handed over any more (see close)
        self._waiters: collections.deque[asyncio.Future[None]] = collections.deque()

    @property
    def running(self) -> int:
        """Places taken."""
        return self.slots - self.free

    @property
    def waiting(self) -> int:
        """Waiters not yet handed a place (a cancelled one may be counted until it is skipped)."""
        return sum(1 for w in self._waiters if not w.done())

    def try_take(self) -> bool:
        """Take a place now if one is free and nobody waits for one."""
        waiters = self._waiters
        while waiters and waiters[0].done():  # a dropped ticket (see drop)
            waiters.popleft()
        if self.free > 0 and not waiters and not self.closed:
            self.free -= 1
            return True
        return False

    def ticket(self) -> asyncio.Future[None] | None:
        """A place now (None: taken), or a future that completes when a place is handed to it, in
        arrival order. Taken synchronously, so arrivals queue in the order this is called. A
        ticket's owner either awaits it (and then holds a place) or calls :meth:`drop`."""
        if self.try_take():
            return None
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiters.append(waiter)
        return waiter

    def drop(self, ticket: asyncio.Future[None]) -> None:
        """Give up ``ticket``: a place handed to it (and never taken up) goes to the next waiter;
        one not handed yet is cancelled (skipped when its turn comes)."""
        if not ticket.done():
            ticket.cancel()
        elif not ticket.cancelled():
            self.give()

    def close(self) -> None:
        """Hand out no place any more (the executor drains before it leaves): what waits goes on
        waiting, unstarted, until its owner drops it; places given back stay free."""
        self.closed = True

    def give(self) -> None:
        """Give a place back: to the first waiter still waiting, else to the free places."""
        waiters = self._waiters
        while waiters and not self.closed:
            w = waiters.popleft()
            if not w.done():
                w.set_result(None)
                return
        if self.free >= self.slots:
            raise RuntimeError("a run gate was given back more places than it has")
        self.free += 1
