"""Apply committed entries on a thread of their own, off the Raft tick thread.

pysyncobj runs replicated methods, heartbeats and all socket IO on one tick thread. Applying a
burst of fires (thousands per second) there delayed heartbeats past the election timeout and
cost the cluster its leader under load (measured: tick stalls of 200-400 ms, an election every
few seconds at 10,000 fires/s). So the replicated method only *enqueues* ``(index, data)`` and
returns; this applier applies entries strictly in index order on its own thread, commits the
store when its queue runs dry (one transaction per burst), and hands each proposer its result.

Ordering and durability are unchanged: entries are applied in log order, exactly once per node
(the replica's applied-index guard), and the applied index is committed with the data it covers.

A store that cannot take writes (``StoreFailed`` from ``apply_fn``, or any error from
``commit_fn``), or an entry this build cannot apply (``FormatTooNew``), stops the applier for
good: nothing more is applied or committed, ``on_fatal`` is called once with the error, and
waiting proposers get "outcome unknown". Applying past a failed write would leave the in-memory
state ahead of the store; stopping keeps every entry in the Raft log, and a restart replays them.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable

from raftsched.abc import ApplyHalted

log = logging.getLogger(__name__)

ResultCallback = Callable[[bytes | None], None]

COMMIT_EVERY = 64


def yield_to_readers() -> None:
    """Let a thread waiting for the state lock take it between two entries of a backlog.

    Each entry's apply holds the state's lock (``SchedulerState.apply``); taking it again at once
    for the next entry (the applier holds the GIL, the woken waiter does not) starved every
    reader while a backlog drained: py-spy showed the leader's event loop (gRPC, the
    dispatcher) and the fire planner all waiting in ``StateView`` for seconds at 10,000
    fires/s, so the next batches were planned late and a status call missed its deadline.
    ``time.sleep(0)`` releases the GIL for a moment, and the woken waiter gets the lock
    (``python -m bench.lock_handoff``, one 20 ms holder in a loop: a reader's wait max 72.9 and
    252.8 ms without, 39.3 and 72.2 ms with, in two runs; docs/dev/performance-history.md,
    "Commit lateness at 10,000 fires/s"). Applies keep their order; only who reads between them
    changes."""
    time.sleep(0)


class Applier:
    """Single-threaded, in-order application of committed entries.

    ``apply_fn(index, data)`` applies one entry and returns its result (or None for a replayed
    entry); ``commit_fn()`` makes everything applied so far durable. Both run on the applier
    thread only.
    """

    def __init__(
        self,
        apply_fn: Callable[[int, bytes], bytes | None],
        commit_fn: Callable[[], None],
        keep_results: int = 50_000,
        on_fatal: Callable[[BaseException], None] | None = None,
    ) -> None:
        self._apply_fn = apply_fn
        self._commit_fn = commit_fn
        self._on_fatal = on_fatal
        self._failed: BaseException | None = None
        self._queue: deque[tuple[int, bytes]] = deque()
        self._cond = threading.Condition()
        self._results: OrderedDict[int, bytes | None] = OrderedDict()
        self._waiters: dict[int, list[ResultCallback]] = {}
        self._keep = keep_results
        self._applied = 0  # highest index applied (and committed once _idle)
        self._committed = 0  # highest index applied and committed to the store
        # (index, seq, callback) waiting for the store to be committed through index
        self._durable: list[tuple[int, int, Callable[[bool], None]]] = []
        self._seq = itertools.count()
        self._idle = True  # queue empty and everything applied is committed
        self._paused = False  # an asynchronous snapshot is copying the store: apply nothing
        self._stop = False
        self._thread = threading.Thread(target=self._run, name="raftsched-apply", daemon=True)

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Apply what is queued, commit, and end the thread."""
        with self._cond:
            self._stop = True
            self._cond.notify_all()
        self._thread.join(timeout=30)

    # -- the Raft side ---------------------------------------------------------------------------

    def enqueue(self, index: int, data: bytes) -> None:
        with self._cond:
            if self._failed is not None:
                return  # nothing is applied any more; the entry stays in the Raft log
            self._queue.append((index, data))
            self._idle = False
            self._cond.notify_all()

    def on_result(self, index: int, callback: ResultCallback) -> None:
        """Call ``callback(result)`` once entry ``index`` is applied here (now, if it already is)."""
        with self._cond:
            if index in self._results:
                result = self._results[index]
            elif self._failed is not None:
                result = None  # never applied here: outcome unknown
            elif index <= self._applied and index not in self._waiters:
                result = None  # applied so long ago its result was dropped: outcome unknown
            else:
                self._waiters.setdefault(index, []).append(callback)
                return
        callback(result)

    def on_durable(self, index: int, callback: Callable[[bool], None]) -> None:
        """Call ``callback(True)`` once entry ``index`` is applied here and the store is committed
        through it (now, if it is); ``callback(False)`` if that will not happen (the applier
        stopped, or a snapshot install replaced the store: the caller asks again).

        A proposer's result (:meth:`on_result`) comes right after the apply, before the store
        commit; a reader of the store (which sees committed data only) needs this instead."""
        with self._cond:
            if self._failed is not None:
                ok: bool | None = False
            elif index <= self._committed:
                ok = True
            else:
                heapq.heappush(self._durable, (index, next(self._seq), callback))
                return
        callback(bool(ok))

    def _release_durable(self, committed: int, ok: bool = True) -> None:
        """Answer the durable waiters at or below ``committed`` with ``ok`` (``ok`` False and
        ``committed`` < 0: every waiter)."""
        with self._cond:
            if ok:
                self._committed = max(self._committed, committed)
            ready = []
            while self._durable and (committed < 0 or self._durable[0][0] <= committed):
                ready.append(heapq.heappop(self._durable)[2])
        for callback in ready:
            try:
                callback(ok)
            except Exception:
                log.exception("durable callback failed")

    def quiesce(self, timeout: float = 60.0) -> bool:
        """Block until everything queued is applied and committed (False on timeout).

        Used by the snapshot hooks, which run on the Raft tick thread, the only thread that
        enqueues: while they run nothing new arrives, so the applier stays quiet until they return.
        """
        with self._cond:
            return self._cond.wait_for(lambda: self._idle or self._failed is not None, timeout) and (
                self._failed is None
            )

    def pause(self) -> None:
        """Apply nothing until :meth:`resume` (entries keep queueing). Call it when quiescent:
        the store then stays exactly at the applied index while a snapshot copies it."""
        with self._cond:
            self._paused = True

    def resume(self) -> None:
        with self._cond:
            self._paused = False
            self._cond.notify_all()

    def reset(self, applied_index: int) -> None:
        """After a snapshot install: drop queued entries the snapshot already covers.

        Whoever waits for the result of a covered entry gets None (outcome unknown) now: those
        entries are never applied here, so their waiters would wait forever. (A deposed leader
        that catches up by a snapshot had its own proposals among them; the chaos soak found a
        leader whose fire pipeline stayed full of such proposals and never fired again.)"""
        with self._cond:
            while self._queue and self._queue[0][0] <= applied_index:
                self._queue.popleft()
            self._applied = max(self._applied, applied_index)
            covered = sorted(index for index in self._waiters if index <= applied_index)
            callbacks = [cb for index in covered for cb in self._waiters.pop(index)]
        for callback in callbacks:
            try:
                callback(None)
            except Exception:
                log.exception("result callback failed")
        # The installed store holds the snapshot's index, committed; waiters for an entry it
        # covers were never applied here: refused (their readers ask again), never answered "ok".
        self._release_durable(applied_index, ok=False)
        with self._cond:
            self._committed = max(self._committed, applied_index)

    @property
    def backlog(self) -> int:
        return len(self._queue)

    @property
    def failed(self) -> BaseException | None:
        """The store failure that stopped the applier, or None while it runs."""
        return self._failed

    def halt(self, exc: ApplyHalted) -> None:
        """Stop applying for good, as a store failure does (any thread): queued entries are
        dropped, waiting proposers get "outcome unknown" and ``on_fatal(exc)`` is called once."""
        with self._cond:
            if self._failed is not None:
                return
        self._fail(exc)

    # -- the applier thread ----------------------------------------------------------------------

    def _run(self) -> None:
        since_commit = 0
        while True:
            with self._cond:
                while (self._paused or (not self._queue and self._idle)) and not self._stop:
                    self._cond.wait()
                if not self._queue and self._idle:
                    return  # stopped, and everything is applied and committed
                item = self._queue.popleft() if self._queue else None
            # Commit when the queue runs dry (one transaction per burst), or every
            # COMMIT_EVERY entries while a long backlog drains.
            try:
                if item is not None and since_commit < COMMIT_EVERY:
                    self._apply_one(*item)
                    since_commit += 1
                    yield_to_readers()
                    continue
                with self._cond:
                    applied = self._applied
                self._commit_fn()
                self._release_durable(applied)
                since_commit = 0
                if item is not None:
                    self._apply_one(*item)
                    since_commit = 1
                    yield_to_readers()
                    continue
            except Exception as exc:  # the store cannot take writes: stop (module docstring)
                self._fail(exc)
                return
            with self._cond:
                if not self._queue:
                    self._idle = True
                    self._cond.notify_all()

    def _fail(self, exc: BaseException) -> None:
        with self._cond:
            self._failed = exc
            self._queue.clear()
            waiters, self._waiters = self._waiters, {}
            self._cond.notify_all()
        for callbacks in waiters.values():
            for callback in callbacks:
                try:
                    callback(None)  # outcome unknown: the entry is committed but not applied here
                except Exception:
                    log.exception("result callback failed")
        self._release_durable(-1, ok=False)
        if self._on_fatal is not None:
            try:
                self._on_fatal(exc)
            except Exception:
                log.exception("store-failure hook failed")

    def _apply_one(self, index: int, data: bytes) -> None:
        try:
            result = self._apply_fn(index, data)
        except ApplyHalted:
            raise
        except Exception:  # the replica raises only ApplyHalted; never let this thread die
            log.critical("apply of entry %d raised", index, exc_info=True)
            result = None
        with self._cond:
            self._applied = max(self._applied, index)
            waiters = self._waiters.pop(index, None)
            if waiters is None:
                self._results[index] = result
                if len(self._results) > self._keep:
                    self._results.popitem(last=False)
        for callback in waiters or ():
            try:
                callback(result)
            except Exception:
                log.exception("result callback failed for entry %d", index)
