"""A slot freed by a reported result is placed again at once (issue 31 stage 4, the slot cycle):
one dispatcher tick on the next pass of the leader's loop, not at the timer's next tick (up to
``TICK_S`` later), and one tick however many reports free slots in that pass. Driven in
process on a real hub and dispatcher with a manual clock and no timer running (the hub's
``_run`` is never started): an assignment proposed here came from the refill."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import pytest

from raftsched import codec
from raftsched.leader.dispatch import hub as hub_module
from raftsched.leader.dispatch.hub import ExecutorHub
from raftsched.rpc.executor_service import ExecutorServicer
from raftsched.v1 import raftsched_pb2 as pb
from tests.support.fsm import T0, S, batch, create, entry, fire
from tests.support.wait import until
from tests.unit.test_dispatch_hot_loop import counting, leading_hub, spec, step
from tests.unit.test_session_leader import Context

TASKS = 10  # every-second tasks, for 2 executors x 4 slots: two attempts wait


def busy_hub() -> tuple[ExecutorHub, dict[str, list[str]], list[bytes]]:
    """A leading hub whose executors' slots are all leased, two attempts waiting; the execution
    ids leased to each executor, and the list that collects what the hub proposes from now on."""
    state, hub = leading_hub()
    d = hub.dispatcher
    now = T0 + S
    for i in range(TASKS):
        assert create(state, spec(f"u{i}")).ok
    entries = [entry(f"u{i}", 1, [fire(now)], watermark=now, next_fire=0) for i in range(TASKS)]
    step(state, d, batch(now, *entries), now)
    for proposal in d.poll(now):
        step(state, d, proposal, now)
        d.release(proposal)
    leased: dict[str, list[str]] = {}
    for executor, item in d.take_outbox():
        leased.setdefault(executor, []).append(item.execution_id)
    assert sorted(len(ids) for ids in leased.values()) == [4, 4]
    assert len(d.waiting) == TASKS - 8
    proposed: list[bytes] = []

    def propose(data: bytes, done: Callable[[bytes | None, Exception | None], None], *_: Any) -> None:
        proposed.append(data)  # never committed: the reports' results stay uncommitted

    node: Any = hub.node
    node.propose = propose
    return hub, leased, proposed


def assignments(proposed: list[bytes]) -> int:
    """How many attempts the proposed commands assign."""
    n = 0
    for data in proposed:
        cmd = codec.decode_command(data)
        n += len(cmd.assign_attempts.assignments) + len(cmd.assign_columns.seq)
    return n


def report(name: str, ids: list[str]) -> pb.ReportRequest:
    return pb.ReportRequest(name=name, results=[pb.ExecResult(execution_id=e, success=True) for e in ids])


def session_report(ids: list[str]) -> pb.SessionUp:
    return pb.SessionUp(
        report=pb.SessionReport(
            report_id=1, execution_id=ids, duration_ms=[5] * len(ids), start_lateness_ms=[3] * len(ids)
        )
    )


def test_a_reported_result_frees_its_slot_for_a_waiting_attempt_without_a_timer_tick(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Two reports in one pass of the loop free three slots: one tick places both waiting
    attempts (before, they waited for the timer's next tick)."""

    async def main() -> tuple[int, int]:
        hub, leased, proposed = busy_hub()
        hub.loop = asyncio.get_running_loop()  # (no hub.start(): no timer)
        polls = counting(monkeypatch, type(hub.dispatcher), "poll")
        servicer = ExecutorServicer(hub)
        calls = [
            asyncio.ensure_future(servicer.Report(report("ex1", leased["ex1"][:2]), Context())),
            asyncio.ensure_future(servicer.Report(report("ex2", leased["ex2"][:1]), Context())),
        ]
        await until(lambda: assignments(proposed) >= 2, 5, "the waiting attempts assigned")
        for _ in range(10):
            await asyncio.sleep(0)
        for call in calls:
            call.cancel()
        await asyncio.gather(*calls, return_exceptions=True)
        return assignments(proposed), len(polls)

    assigned, ticks = asyncio.run(main())
    assert assigned == TASKS - 8
    assert ticks == 1  # one tick for both reports


def test_a_session_report_frees_its_slot_for_a_waiting_attempt_without_a_timer_tick() -> None:
    async def main() -> int:
        hub, leased, proposed = busy_hub()
        hub.loop = asyncio.get_running_loop()
        servicer = ExecutorServicer(hub)

        async def ups() -> Any:
            yield pb.SessionUp(open=pb.SessionOpen(name="ex1", session_version=1))
            yield session_report(leased["ex1"][:2])
            await asyncio.Event().wait()  # the executor keeps its session open

        call: Any = servicer.Session(ups(), Context())
        reader = asyncio.ensure_future(call.__anext__())
        await until(lambda: assignments(proposed) >= 2, 5, "the waiting attempts assigned")
        reader.cancel()
        await asyncio.gather(reader, return_exceptions=True)
        await call.aclose()
        return assignments(proposed)

    assert asyncio.run(main()) == TASKS - 8


def test_a_report_with_nothing_waiting_asks_for_no_tick(monkeypatch: pytest.MonkeyPatch) -> None:
    """Free slots and nothing to place: no tick (no state view, no CPU)."""

    async def main() -> int:
        hub, _leased, _proposed = busy_hub()
        hub.loop = asyncio.get_running_loop()
        d = hub.dispatcher
        for key in list(d.waiting):
            d.term.placement.unwait(key)  # type: ignore[union-attr]
        polls = counting(monkeypatch, type(d), "poll")
        hub.slots_freed()
        for _ in range(10):
            await asyncio.sleep(0)
        return len(polls)

    assert asyncio.run(main()) == 0


def test_refills_are_at_least_the_refill_gap_apart(monkeypatch: pytest.MonkeyPatch) -> None:
    """Slots freed just after a tick: the refill waits until ``REFILL_GAP_S`` after that tick
    (each tick may propose an assignment entry), then places the waiting attempts."""
    monkeypatch.setattr(hub_module, "REFILL_GAP_S", 0.2)

    async def main() -> tuple[float, int]:
        hub, leased, proposed = busy_hub()
        loop = asyncio.get_running_loop()
        hub.loop = loop
        hub._tick()  # a tick (nothing to place: every slot is taken)
        ticked = loop.time()
        polls = counting(monkeypatch, type(hub.dispatcher), "poll")
        servicer = ExecutorServicer(hub)
        call = asyncio.ensure_future(servicer.Report(report("ex1", leased["ex1"][:2]), Context()))
        await settled()
        assert assignments(proposed) == 0 and not polls  # not yet: within the gap
        await until(lambda: assignments(proposed) >= 2, 5, "the waiting attempts assigned")
        waited = loop.time() - ticked
        call.cancel()
        await asyncio.gather(call, return_exceptions=True)
        return waited, len(polls)

    waited, ticks = asyncio.run(main())
    assert waited >= 0.15
    assert ticks == 1


async def settled() -> None:
    for _ in range(20):
        await asyncio.sleep(0)
