"""Linearizable reads: a read index confirmed by a barrier through the log.

A leader cut off from its followers still believes it leads until pysyncobj's
``leaderFallbackTimeout``; answering reads from its state then returns data older than writes the
new leader has acknowledged. So before a linearizable read is answered, the leader proposes a
*read barrier* (a command that changes nothing) and waits until it is committed, applied here and
the store committed through it. The barrier was appended to the log after the read arrived, so its
index is above every entry committed before the read arrived - above every write acknowledged
before it - and this node's state at that index or later contains them all. A node that cannot
commit (it was deposed, or has no majority) never confirms, and after ``timeout_s`` the read is
refused as ``unavailable`` ("not sure I still lead; retry"): the SDK retries another node.

This needs no clock assumption (a lease read would need bounded clock drift between nodes) and
no pysyncobj internals: it goes through the one replicated entry point like any command.

Batching: one barrier serves every read that arrived before it was proposed. While a barrier is
in flight, arriving reads join the *next* one (they arrived after the in-flight barrier was
proposed, so it does not cover them), which is proposed as soon as the in-flight one is done. A
burst of reads therefore costs at most two barriers, and sustained read load one barrier per
commit round trip, whatever the number of readers.

Threading: :meth:`ReadIndex.confirm` runs on one asyncio event loop (the node's gRPC loop); the
barrier's callback arrives on a consensus thread and is handed to that loop.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Callable
from dataclasses import dataclass

from raftsched import codec
from raftsched.abc import BarrierCallback, ProposeError
from raftsched.errors import Unavailable
from raftsched.leader.gate import Stamp
from raftsched.v1 import log_pb2 as logpb

READ_TIMEOUT_S = 2.0
"""How long a linearizable read waits for its barrier before it is refused. Long enough for a
commit round trip under load; short enough that a caller of a deposed leader moves on quickly."""

NOT_SURE = "not sure I still lead; retry"

ProposeBarrier = Callable[[bytes, BarrierCallback], None]


def barrier_command(stamp: Stamp) -> bytes:
    """A read barrier: a ``Barrier`` naming no taking-over node (so no node takes it for its own
    takeover barrier), with ``read_by`` for the log's readers. It changes nothing but the applied
    index (and the apply chain); a deposed leader's is refused as stale, which is no matter:
    committed at all, it still proves the index."""
    cmd = logpb.Command(epoch=stamp.epoch, now_ms=stamp.now_ms, origin=stamp.origin)
    cmd.barrier.read_by = stamp.origin
    return codec.encode_command(cmd)


@dataclass
class _Round:
    future: asyncio.Future[int]
    started: float = 0.0  # monotonic, when its barrier was proposed (0: not yet)


class ReadIndex:
    """Confirms, for linearizable reads, a log index at least as new as each read's arrival.

    ``stamp()`` stamps the barrier (raises :class:`raftsched.errors.NotLeader` or
    :class:`raftsched.errors.Unavailable` if this node may not lead now); ``propose_barrier`` is the
    consensus node's. Counters: ``barriers`` committed, ``refused`` reads.
    """

    def __init__(
        self,
        stamp: Callable[[], Stamp],
        propose_barrier: ProposeBarrier,
        timeout_s: float = READ_TIMEOUT_S,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._stamp = stamp
        self._propose = propose_barrier
        self.timeout_s = timeout_s
        self._monotonic = monotonic
        self._next: _Round | None = None  # the round reads join now (not proposed yet)
        self._running: _Round | None = None  # the round whose barrier is in flight
        self.barriers = 0
        self.refused = 0
        self.last_index = 0

    async def confirm(self) -> int:
        """Wait until this node's state and store cover every write acknowledged before the call;
        return the barrier's log index. Raises :class:`Unavailable` ("not sure I still lead;
        retry") if that is not confirmed within ``timeout_s``, and whatever ``stamp()`` raises if
        this node does not lead."""
        loop = asyncio.get_running_loop()
        if self._next is None:
            self._next = _Round(loop.create_future())
        joined = self._next
        running = self._running
        if running is None or self._monotonic() - running.started > self.timeout_s:
            # Nothing in flight (or it is stuck: a new round must not wait behind it forever).
            self._start(loop)
        try:
            return await asyncio.wait_for(asyncio.shield(joined.future), self.timeout_s)
        except TimeoutError:
            self.refused += 1
            raise Unavailable(NOT_SURE) from None
        except ProposeError as exc:
            self.refused += 1
            raise Unavailable(f"{NOT_SURE} ({exc})") from None

    def _start(self, loop: asyncio.AbstractEventLoop) -> None:
        current = self._next
        if current is None:
            return
        self._next = None
        try:
            data = barrier_command(self._stamp())
        except Exception as exc:  # not leading (NotLeader / Unavailable): every joined read gets it
            _settle(current.future, None, exc)
            return
        current.started = self._monotonic()
        self._running = current

        def done(index: int, error: ProposeError | None) -> None:  # a consensus thread
            loop.call_soon_threadsafe(self._finished, loop, current, index, error)

        self._propose(data, done)

    def _finished(
        self, loop: asyncio.AbstractEventLoop, current: _Round, index: int, error: ProposeError | None
    ) -> None:
        if error is None:
            self.barriers += 1
            self.last_index = max(self.last_index, index)
        _settle(current.future, index, error)
        if self._running is current:
            self._running = None
            if self._next is not None:
                self._start(loop)  # the reads that arrived while this one was in flight


def _settle(future: asyncio.Future[int], index: int | None, error: BaseException | None) -> None:
    if future.done():
        return
    if error is not None:
        future.set_exception(error)
        # Retrieved here so that a round nobody waits for any more (all timed out) logs nothing.
        future.exception()
    else:
        future.set_result(index or 0)
