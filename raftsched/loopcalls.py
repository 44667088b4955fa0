"""Calls handed to an asyncio loop from other threads, one wake-up per burst (issue 31).

``loop.call_soon_threadsafe`` writes to the loop's self-pipe on every call: a system call and,
from the applier's thread, a hand-off of the GIL to the loop each. The applier hands the leader's
loop several things per applied entry: the entry's effects (the executor hub), the outcome of a
proposal an RPC handler waits for (:func:`raftsched.rpc.plumbing.propose_and_wait`, one per
executor report) and the release of a dispatcher's assignment. :func:`call_soon_batched` puts
them in one queue per loop, in the order they were handed over, and wakes the loop only when no
wake-up is pending already: a burst of entries costs one self-pipe write.

A call is never run later than it would have been (the pending wake-up is ahead of where its own
would have been in the loop's ready queue), and the calls run in the order the threads queued
them. A call that raises is logged (as the loop logs a callback that raised); the rest still run.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import weakref
from collections import deque
from collections.abc import Callable
from typing import Any

log = logging.getLogger(__name__)


class LoopCalls:
    """The queue of one loop (see the module docstring)."""

    __slots__ = ("__weakref__", "_loop", "_pending", "_queue")

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self._loop = loop
        self._queue: deque[tuple[Callable[..., Any], tuple[Any, ...]]] = deque()
        self._pending = False

    def call(self, fn: Callable[..., Any], *args: Any) -> None:
        """Run ``fn(*args)`` on the loop soon (from any thread). Raises as
        ``call_soon_threadsafe`` does if the loop is closed and no wake-up is pending."""
        self._queue.append((fn, args))  # (deque: append and popleft are atomic)
        if self._pending:
            return  # the scheduled run takes it
        self._pending = True
        try:
            self._loop.call_soon_threadsafe(self._run)
        except BaseException:
            self._pending = False
            raise

    def _run(self) -> None:
        # Cleared before running: a call queued from now on schedules a run of its own, so this
        # run takes only what was queued before it began (a thread that keeps queuing never
        # holds the loop in one callback, and no run is scheduled for nothing).
        self._pending = False
        queue = self._queue
        for _ in range(len(queue)):
            fn, args = queue.popleft()
            try:
                fn(*args)
            except Exception:
                log.exception("a call handed to the event loop failed: %r", fn)


_by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, LoopCalls] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def loop_calls(loop: asyncio.AbstractEventLoop) -> LoopCalls:
    """The queue of ``loop`` (made the first time)."""
    calls = _by_loop.get(loop)
    if calls is None:
        with _lock:
            calls = _by_loop.get(loop)
            if calls is None:
                calls = _by_loop[loop] = LoopCalls(loop)
    return calls


def call_soon_batched(loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> None:
    """``loop.call_soon_threadsafe(fn, *args)``, sharing one wake-up with every other call queued
    for ``loop`` before it ran (see the module docstring)."""
    loop_calls(loop).call(fn, *args)
