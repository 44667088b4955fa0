"""Asyncio waits that keep a cancellation (the executor's loops and its in-memory transport)."""

from __future__ import annotations

import asyncio


async def wait_event(event: asyncio.Event, timeout_s: float) -> None:
    """Wait until ``event`` is set or ``timeout_s`` has passed, whichever is first.

    Not ``asyncio.wait_for`` under ``suppress(TimeoutError)``: on Python 3.11, when the event is
    set as the waiting task is cancelled, ``wait_for`` returns the event's result and the
    cancellation is lost. At an executor's stop, finishing attempts set the report wake-up just
    as the report loop was cancelled; the loop went on waiting, ``run`` waited for it, and the
    process ignored SIGTERM (every other run of bench/executors.py lost an executor's samples
    to the SIGKILL after 30 s). ``asyncio.timeout`` tells its own expiry from a cancellation."""
    try:
        async with asyncio.timeout(timeout_s):
            await event.wait()
    except TimeoutError:
        pass
