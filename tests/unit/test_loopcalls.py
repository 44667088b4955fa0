"""Calls handed to the event loop from the applier's thread share one wake-up per burst
(raftsched.loopcalls; issue 31): a proposal's outcome, an assignment's release and the hub's
effects each used to write to the loop's self-pipe on their own."""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import pytest

from raftsched.abc import CommitHook, ProposeCallback
from raftsched.loopcalls import call_soon_batched
from raftsched.rpc.plumbing import Refused, propose_and_wait
from raftsched.v1 import log_pb2 as logpb


class _Held:
    """A proposer that keeps every callback until the test completes them (from a thread, as
    the applier does)."""

    def __init__(self) -> None:
        self.callbacks: list[ProposeCallback] = []

    def propose(self, data: bytes, callback: ProposeCallback, on_commit: CommitHook | None = None) -> None:
        self.callbacks.append(callback)


def _count_wakeups(loop: asyncio.AbstractEventLoop, monkeypatch: pytest.MonkeyPatch) -> list[int]:
    count = [0]
    real = loop.call_soon_threadsafe

    def counting(*args: Any, **kwargs: Any) -> Any:
        count[0] += 1
        return real(*args, **kwargs)

    monkeypatch.setattr(loop, "call_soon_threadsafe", counting)
    return count


async def _until(cond: Any, timeout: float = 10.0) -> None:
    deadline = asyncio.get_running_loop().time() + timeout
    while not cond():
        assert asyncio.get_running_loop().time() < deadline, "condition not met in time"
        await asyncio.sleep(0.001)


def test_a_burst_of_proposal_outcomes_wakes_the_loop_once(monkeypatch: pytest.MonkeyPatch) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        node = _Held()
        waits = [asyncio.create_task(propose_and_wait(node, b"x")) for _ in range(5)]
        await _until(lambda: len(node.callbacks) == 5)
        wakeups = _count_wakeups(loop, monkeypatch)
        ok = logpb.CommandResult(ok=True).SerializeToString()
        refused = logpb.CommandResult(ok=False, code="not_found", message="no such task").SerializeToString()

        def applier() -> None:  # one burst, as the applier completes the proposals of a batch
            for i, cb in enumerate(node.callbacks):
                cb(refused if i == 3 else ok, None)

        t = threading.Thread(target=applier)
        t.start()
        t.join()
        results = await asyncio.gather(*waits, return_exceptions=True)
        assert wakeups[0] == 1  # before: one self-pipe write per proposal (5)
        assert [isinstance(r, logpb.CommandResult) and r.ok for r in results] == [
            True,
            True,
            True,
            False,
            True,
        ]
        assert isinstance(results[3], Refused) and results[3].code == "not_found"

    asyncio.run(main())


def test_calls_from_threads_run_in_order_and_one_that_raises_does_not_stop_the_rest(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        wakeups = _count_wakeups(loop, monkeypatch)
        seen: list[int] = []

        def boom() -> None:
            raise RuntimeError("a failing call")

        def hand_over() -> None:
            call_soon_batched(loop, seen.append, 1)
            call_soon_batched(loop, boom)
            call_soon_batched(loop, seen.append, 2)
            call_soon_batched(loop, seen.append, 3)

        t = threading.Thread(target=hand_over)
        t.start()
        t.join()
        await _until(lambda: len(seen) == 3)
        assert seen == [1, 2, 3]
        assert wakeups[0] == 1
        # Once run, the next call wakes the loop again (nothing is left waiting for a later burst).
        t = threading.Thread(target=lambda: call_soon_batched(loop, seen.append, 4))
        t.start()
        t.join()
        await _until(lambda: len(seen) == 4)
        assert wakeups[0] == 2

    asyncio.run(main())
