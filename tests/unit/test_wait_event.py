"""raftsched.executor.aio.wait_event: a cancellation is never lost, whatever else happens.

The executor's report and heartbeat loops wait for a wake-up event with a timeout. With
``asyncio.wait_for`` under ``suppress(TimeoutError)``, an event set as the loop was cancelled
(attempts finishing at the executor's stop) made ``wait_for`` return normally: the cancellation
was lost, the loop waited on, and the executor never exited on SIGTERM.
"""

from __future__ import annotations

import asyncio
import contextlib
import sys
from collections.abc import Awaitable, Callable

import pytest

from raftsched.executor.aio import wait_event


async def _loop(wait: Callable[[asyncio.Event], Awaitable[None]], wake: asyncio.Event) -> None:
    while True:  # the shape of Executor._reports
        await wait(wake)
        wake.clear()


async def _old_wait(wake: asyncio.Event) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(wake.wait(), 1.0)


async def _new_wait(wake: asyncio.Event) -> None:
    await wait_event(wake, 1.0)


async def _cancelled_as_woken(wait: Callable[[asyncio.Event], Awaitable[None]]) -> bool:
    """Whether the loop ends when it is cancelled in the same instant its event is set."""
    wake = asyncio.Event()
    task = asyncio.ensure_future(_loop(wait, wake))
    await asyncio.sleep(0.01)
    wake.set()
    task.cancel()
    done, _ = await asyncio.wait([task], timeout=0.5)
    while not task.done():  # clean up the reproduction
        task.cancel()
        await asyncio.sleep(0)
    return bool(done)


def test_a_cancel_that_coincides_with_the_wake_up_ends_the_loop() -> None:
    assert asyncio.run(_cancelled_as_woken(_new_wait))


@pytest.mark.skipif(sys.version_info >= (3, 12), reason="3.12's wait_for keeps the cancellation")
def test_the_wait_for_pattern_it_replaces_loses_that_cancel() -> None:
    """The reproduction (Python 3.11's wait_for; 3.12 rewrote it on asyncio.timeout)."""
    assert not asyncio.run(_cancelled_as_woken(_old_wait))


@pytest.mark.parametrize("set_it", [True, False])
def test_it_returns_on_the_event_or_at_the_timeout(set_it: bool) -> None:
    async def go() -> float:
        loop = asyncio.get_running_loop()
        event = asyncio.Event()
        if set_it:
            loop.call_later(0.01, event.set)
        start = loop.time()
        await wait_event(event, 0.2)
        return loop.time() - start

    took = asyncio.run(go())
    assert (took < 0.15) if set_it else (took >= 0.19)
