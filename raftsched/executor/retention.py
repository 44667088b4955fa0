"""How long the executor's execution log keeps an id, and the pruning that forgets it.

:data:`DEFAULT_EXECUTION_LOG_KEEP` says why forgetting an acknowledged id is safe; a
:class:`LogPruner` drops the entries acknowledged more than the keep ago, :data:`PRUNE_STEP` per
transaction, with the cutoff of a :class:`PruneCutoff` (which never moves faster than real time).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Callable

from raftsched.errors import InvalidSpec
from raftsched.executor.dedupe import DedupeLog
from raftsched.timing.durations import parse_duration_ms

# The agent's logger: an operator filters one name for everything an executor says.
log = logging.getLogger("raftsched.executor.agent")

DEFAULT_EXECUTION_LOG_KEEP = "10m"
"""How long the execution log keeps an id after the cluster acknowledged its result.

Why forgetting an id then is safe (the full argument is in ``docs/architecture.md``, "The
execution log's retention"): the cluster acknowledges a result only once the command carrying it
is committed and applied on the leader (``ExecutorServicer.Report``; a command refused whole is
not acknowledged). From then on the replicated state holds that attempt finished, or superseded
by a later attempt or a finished run, and every way a leader sends an execution id reads that
state: a first dispatch comes from applying its assignment (once per id, before any result); a
re-send on a new stream, a takeover's re-send and a lease renewal only cover attempts the
applied state still has RUNNING on this executor with that attempt number; a new leader reads
the state after its barrier, so it has applied every acknowledged result (Raft's leader
completeness). A deposed leader whose state lags is fenced: this agent refuses items from an
epoch older than the newest it has seen, it registers (a committed join) before it opens a
stream, so after a restart it only streams from a leader that can commit, and it cancels the old
stream before it registers elsewhere. What is left is an item already queued on the current
stream when the result was applied: delivered within the stream's life, normally milliseconds.
Ten minutes (60 default leases) is far beyond that, and bounds the log: at 500 attempts a second
an executor holds ~300,000 entries, ~130 MB (``bench/execlog_growth.py``).
"""

PRUNE_STEP = 1000  # entries per prune transaction: bounds how long a begin on the loop waits


def keep_ms(keep: str | float | None) -> int | None:
    """``execution_log_keep`` as ms (None: keep everything), or InvalidSpec naming it."""
    where = "executor.execution_log_keep"
    if keep is None:
        return None
    if isinstance(keep, bool) or not isinstance(keep, str | int | float):
        raise InvalidSpec(where, f"must be a duration such as '10m', or seconds, got {keep!r}")
    ms = parse_duration_ms(keep, where) if isinstance(keep, str) else keep * 1000
    if not 1000 <= ms <= 366 * 86_400_000:
        raise InvalidSpec(where, f"{keep!r} out of range (1s to 366d; None keeps every entry)")
    return int(ms)


class PruneCutoff:
    """Where the execution log's pruning may cut: entries acknowledged before ``now - keep``.

    Acknowledgements are stamped with the wall clock, but the retention argument (no leader
    sends an id again ``keep`` after its result was acknowledged) is about time that really
    passed. So the cutoff never moves faster than the monotonic clock: a wall clock stepped
    forward (an NTP step, a VM resumed) does not prune every acknowledged id at once; entries are
    then kept longer by the step instead, which is safe."""

    def __init__(self, keep_ms: int) -> None:
        self.keep_ms = keep_ms
        self._last: tuple[int, float] | None = None  # (cutoff ms, monotonic s) of the last call

    def next(self, now_ms: int, monotonic_s: float) -> int:
        cutoff = now_ms - self.keep_ms
        if self._last is not None:
            last_cutoff, last_mono = self._last
            cutoff = min(cutoff, last_cutoff + max(0, round((monotonic_s - last_mono) * 1000)))
        self._last = (cutoff, monotonic_s)
        return cutoff


class LogPruner:
    """Drops the entries of ``log_`` acknowledged more than ``keep_ms`` ago, every so often, in
    steps of :data:`PRUNE_STEP` entries: each in a worker thread (off the event loop) when
    ``in_thread`` (the agent's own LMDB log), on the loop otherwise (a log passed in, a
    simulation's: it stays deterministic). ``on_removed`` hears how many each step removed.

    :meth:`run` is the loop; after cancelling it, await :meth:`settled` before closing the log: a
    step under way in its thread runs to its end."""

    def __init__(
        self,
        log_: DedupeLog,
        keep_ms: int,
        now_ms: Callable[[], int],
        monotonic: Callable[[], float],
        *,
        name: str,
        in_thread: bool,
        on_removed: Callable[[int], None] | None = None,
    ) -> None:
        self.log = log_
        self.keep_ms = keep_ms
        self.now_ms = now_ms  # the wall clock (ms) and the monotonic one (s), read at each round
        self.monotonic = monotonic
        self.name = name
        self.in_thread = in_thread
        self.on_removed = on_removed
        self.every_s = min(60.0, max(0.5, keep_ms / 4000))
        self._step: asyncio.Future[int] | None = None  # the step under way in its thread, if any

    async def run(self) -> None:
        cutoffs = PruneCutoff(self.keep_ms)
        while True:
            await asyncio.sleep(self.every_s)
            cutoff = cutoffs.next(self.now_ms(), self.monotonic())
            while True:
                try:
                    removed = await self._prune(cutoff)
                except Exception:
                    log.exception("%s: pruning the execution log failed; retrying later", self.name)
                    break
                if removed and self.on_removed is not None:
                    self.on_removed(removed)
                if removed < PRUNE_STEP:
                    break

    async def _prune(self, cutoff: int) -> int:
        if not self.in_thread:
            removed = self.log.prune_older_than(cutoff, PRUNE_STEP)
            await asyncio.sleep(0)
            return removed
        # Shielded: a cancel (the agent stopping) lets the step in its thread finish, and
        # settled() waits for it.
        self._step = asyncio.ensure_future(asyncio.to_thread(self.log.prune_older_than, cutoff, PRUNE_STEP))
        return await asyncio.shield(self._step)

    async def settled(self) -> None:
        """Wait for a step still running in its thread (after :meth:`run` was cancelled)."""
        if self._step is not None:
            await asyncio.gather(self._step, return_exceptions=True)
