"""Polling a condition with a deadline, the one way tests wait (never a bare sleep).

A test on threads or processes polls with :func:`raftsched.testing.cluster.wait_until` (the harness's
own, shared with the local cluster and the demo). A coroutine cannot: a blocking poll would stop the
event loop that has to make the condition true, so it awaits :func:`until`, its event-loop twin.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


async def until(predicate: Callable[[], object], timeout: float = 5.0, what: str = "condition") -> None:
    """Yield to the event loop until ``predicate()`` is truthy; raise :class:`TimeoutError`
    naming ``what`` after ``timeout`` seconds of loop time."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while not predicate():
        if loop.time() > deadline:
            raise TimeoutError(f"timed out after {timeout}s waiting for {what}")
        await asyncio.sleep(0.001)
