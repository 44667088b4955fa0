"""Apply committed entries on a thread of their own, off the Raft tick thread.

pysyncobj runs replicated methods, heartbeats and all socket IO on one tick thread. Applying a
burst of fires (thousands per second) there delayed heartbeats past the election timeout and
cost the cluster its leader under load (measured: tick stalls of 200-400 ms, an election every
few seconds at 10,000 fires/s). So the replicated method only *enqueues* ``(index, data)`` and
returns; this applier applies entries strictly in index order on its own thread, commits the
store when its queue runs dry (one transaction per burst), and hands each proposer its result.

Ordering and durability are unchanged: entries are applied in log order, exactly once per node
(the replica's applied-index guard), and the applied index is committed with the data it covers.
"""

from __future__ import annotations

import logging
import threading
from collections import OrderedDict, deque
from collections.abc import Callable

log = logging.getLogger(__name__)

ResultCallback = Callable[[bytes | None], None]

COMMIT_EVERY = 64


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
    ) -> None:
        self._apply_fn = apply_fn
        self._commit_fn = commit_fn
        self._queue: deque[tuple[int, bytes]] = deque()
        self._cond = threading.Condition()
        self._results: OrderedDict[int, bytes | None] = OrderedDict()
        self._waiters: dict[int, list[ResultCallback]] = {}
        self._keep = keep_results
        self._applied = 0  # highest index applied (and committed once _idle)
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
            self._queue.append((index, data))
            self._idle = False
            self._cond.notify_all()

    def on_result(self, index: int, callback: ResultCallback) -> None:
        """Call ``callback(result)`` once entry ``index`` is applied here (now, if it already is)."""
        with self._cond:
            if index in self._results:
                result = self._results[index]
            elif index <= self._applied and index not in self._waiters:
                result = None  # applied so long ago its result was dropped: outcome unknown
            else:
                self._waiters.setdefault(index, []).append(callback)
                return
        callback(result)

    def quiesce(self, timeout: float = 60.0) -> bool:
        """Block until everything queued is applied and committed (False on timeout).

        Used by the snapshot hooks, which run on the Raft tick thread, the only thread that
        enqueues: while they run nothing new arrives, so the applier stays quiet until they return.
        """
        with self._cond:
            return self._cond.wait_for(lambda: self._idle, timeout)

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
        """After a snapshot install: drop queued entries the snapshot already covers."""
        with self._cond:
            while self._queue and self._queue[0][0] <= applied_index:
                self._queue.popleft()
            self._applied = max(self._applied, applied_index)

    @property
    def backlog(self) -> int:
        return len(self._queue)

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
            if item is not None and since_commit < COMMIT_EVERY:
                self._apply_one(*item)
                since_commit += 1
                continue
            try:
                self._commit_fn()
            except Exception:
                log.exception("committing applied entries failed")
            since_commit = 0
            if item is not None:
                self._apply_one(*item)
                since_commit = 1
                continue
            with self._cond:
                if not self._queue:
                    self._idle = True
                    self._cond.notify_all()

    def _apply_one(self, index: int, data: bytes) -> None:
        try:
            result = self._apply_fn(index, data)
        except Exception:  # the replica never raises; never let this thread die
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
