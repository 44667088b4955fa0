"""Prefetch (``raftsched-executor --prefetch``, :mod:`raftsched.executor.rungate`): an executor
registers ``slots + prefetch``, runs at most ``slots`` attempts at once and the rest of what it was
assigned waits, unstarted, in arrival order; the leader's timeout backstop counts from the start it
learns of. Driven through the in-memory transport and straight through ``session_work`` (no
network), and on the dispatcher with a real state machine."""

from __future__ import annotations

import asyncio
import functools
import random
from pathlib import Path

import pytest

from raftsched.errors import InvalidSpec
from raftsched.executor.agent import Executor
from raftsched.executor.execlog_records import BeginOutcome
from raftsched.executor.memory import LoopbackEndpoint, MemoryTransport
from raftsched.executor.rungate import RunGate
from raftsched.executor.runners import AttemptContext
from raftsched.fsm.state import SchedulerState
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.model import TaskSpec
from raftsched.storage.memory import MemoryExecutionLog
from raftsched.v1 import raftsched_pb2 as pb
from tests.support.fsm import EVERY_SECOND, T0, S, create, fresh, join, tick
from tests.support.wait import until
from tests.unit.test_agent import item
from tests.unit.test_session_eager import ready, rows

# -- the gate --------------------------------------------------------------------------------


def test_the_gate_hands_places_in_arrival_order_and_a_newcomer_never_passes_a_waiter() -> None:
    async def main() -> list[str]:
        gate = RunGate(2)
        order: list[str] = []
        assert gate.ticket() is None and gate.ticket() is None  # both places taken at once
        tickets = {name: gate.ticket() for name in ("a", "b", "c")}
        for name, t in tickets.items():
            assert t is not None
            t.add_done_callback(functools.partial(lambda n, _: order.append(n), name))
        assert (gate.running, gate.waiting) == (2, 3)
        gate.give()
        assert not gate.try_take()  # b and c wait: a newcomer queues behind them
        gate.give()
        gate.give()
        await asyncio.sleep(0)
        assert (gate.running, gate.waiting, gate.free) == (2, 0, 0)  # each handed on, none freed
        gate.give()
        gate.give()
        assert (gate.running, gate.free) == (0, 2)
        with pytest.raises(RuntimeError, match="more places than it has"):
            gate.give()
        return order

    assert asyncio.run(main()) == ["a", "b", "c"]


def test_a_dropped_ticket_loses_its_turn_and_a_place_handed_to_it_goes_on() -> None:
    async def main() -> None:
        gate = RunGate(1)
        assert gate.ticket() is None
        a, b, c = gate.ticket(), gate.ticket(), gate.ticket()
        assert a is not None and b is not None and c is not None
        gate.drop(b)  # b gives up before its turn: skipped
        gate.give()  # to a
        assert a.done() and b.cancelled()
        gate.drop(a)  # a was handed the place and never took it up: it goes to c
        assert c.done() and not c.cancelled()
        gate.give()  # c's place back: nobody waits
        assert (gate.free, gate.waiting) == (1, 0)
        assert gate.try_take()

    asyncio.run(main())


def test_a_ticket_cancelled_behind_another_does_not_block_a_free_place() -> None:
    async def main() -> None:
        gate = RunGate(1)
        assert gate.ticket() is None
        a, b = gate.ticket(), gate.ticket()
        assert a is not None and b is not None
        gate.drop(b)
        gate.drop(a)
        gate.give()  # nobody left waiting: the place is free again
        assert gate.try_take()

    asyncio.run(main())


def test_a_closed_gate_hands_out_no_place_and_keeps_given_back_ones_free() -> None:
    async def main() -> None:
        gate = RunGate(1)
        assert gate.ticket() is None
        waiting = gate.ticket()
        assert waiting is not None
        gate.close()
        gate.give()  # the running one ends: its place is not handed to the waiter
        assert not waiting.done() and gate.free == 1 and gate.waiting == 1
        assert not gate.try_take() and gate.ticket() is not None
        gate.drop(waiting)

    asyncio.run(main())


# -- the agent (the DispatchBatch stream's path) ----------------------------------------------


def work(exec_id: str, epoch: int = 1, **fields: object) -> pb.WorkItem:
    return item(exec_id, epoch, shards=4, handler="hold", **fields)


class Holding:
    """A handler that runs until the test releases its attempt, recording what ran at once."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self.running: set[str] = set()
        self.most = 0
        self.release: dict[str, asyncio.Event] = {}

    def event(self, exec_id: str) -> asyncio.Event:
        return self.release.setdefault(exec_id, asyncio.Event())

    async def __call__(self, ctx: AttemptContext) -> None:
        self.started.append(ctx.execution_id)
        self.running.add(ctx.execution_id)
        self.most = max(self.most, len(self.running))
        try:
            await self.event(ctx.execution_id).wait()
        finally:
            self.running.discard(ctx.execution_id)


def prefetching(slots: int, prefetch: int) -> tuple[Executor, LoopbackEndpoint, Holding]:
    endpoint = LoopbackEndpoint(epoch=1, heartbeat_ms=50)
    ex = Executor(
        "loopback:1",
        "ex1",
        slots=slots,
        prefetch=prefetch,
        transport=MemoryTransport(endpoint),
        execution_log=MemoryExecutionLog(),
    )
    hold = Holding()
    ex.handler("hold")(hold)
    return ex, endpoint, hold


def test_an_executor_registers_slots_plus_prefetch_and_runs_at_most_its_slots_in_arrival_order() -> None:
    ex, endpoint, hold = prefetching(slots=2, prefetch=3)
    ids = [f"t@1000/{shard}/1" for shard in range(4)] + ["u@1000/0/1"]

    async def scenario() -> None:
        async with endpoint.serving(ex):
            assert endpoint.registered[-1].slots == 5
            endpoint.push("ex1", [work(e) for e in ids])
            await endpoint.until(lambda: len(hold.started) == 2)
            # Every attempt is held (its lease renewed), only the running ones started.
            await endpoint.until(
                lambda: any(
                    sorted(h.running) == sorted(ids) and sorted(h.started) == sorted(ids[:2])
                    for h in endpoint.heartbeats
                    if not h.partial
                )
            )
            assert hold.started == ids[:2] and not endpoint.reports
            sample = ex._observed()  # what /metrics shows
            assert (sample.slots, sample.running, sample.prefetched) == (2, 2, 3)
            for done in range(1, len(ids) + 1):
                hold.event(ids[done - 1]).set()
                reported, started = done, min(len(ids), done + 2)
                await endpoint.until(lambda: len(endpoint.reports) == reported)  # noqa: B023
                await endpoint.until(lambda: len(hold.started) == started)  # noqa: B023
        assert hold.started == ids  # in the order they arrived
        assert hold.most == 2
        assert [r.execution_id for r in endpoint.reports] == ids
        assert all(r.success for r in endpoint.reports)

    asyncio.run(scenario())
    assert all_given_back(ex, 2)


def test_a_cancel_ends_a_waiting_attempt_unstarted_and_its_place_goes_to_the_next() -> None:
    ex, endpoint, hold = prefetching(slots=1, prefetch=2)
    a, b, c = "t@1000/0/1", "t@1000/1/1", "t@1000/2/1"

    async def scenario() -> None:
        async with endpoint.serving(ex):
            endpoint.push("ex1", [work(a), work(b), work(c)])
            await endpoint.until(lambda: hold.started == [a])
            endpoint.push("ex1", [work(b, cancel=True, cancel_reason="its run was cancelled")])
            await endpoint.until(lambda: len(endpoint.reports) == 1)
            [cancelled] = endpoint.reports
            assert cancelled.execution_id == b and not cancelled.success
            assert "cancelled" in cancelled.error
            hold.event(a).set()
            await endpoint.until(lambda: hold.started == [a, c])
            hold.event(c).set()
            await endpoint.until(lambda: len(endpoint.reports) == 3)

    asyncio.run(scenario())
    assert b not in hold.started and hold.most == 1
    assert all_given_back(ex, 1)


def test_an_executor_stopped_with_attempts_waiting_leaves_nothing_started() -> None:
    ex, endpoint, hold = prefetching(slots=1, prefetch=2)

    async def scenario() -> None:
        async with endpoint.serving(ex):
            endpoint.push("ex1", [work("t@1000/0/1"), work("t@1000/1/1"), work("t@1000/2/1")])
            await endpoint.until(lambda: hold.started == ["t@1000/0/1"])
        # The stop cancelled the running attempt and the two waiting ones: none started.

    asyncio.run(scenario())
    assert hold.started == ["t@1000/0/1"]
    assert not ex.attempts.running and not ex.attempts.tickets


def test_a_cancel_after_a_slot_was_handed_over_but_before_the_attempt_resumed_passes_it_on() -> None:
    ex, endpoint, hold = prefetching(slots=1, prefetch=2)
    a, b, c = "t@1000/0/1", "t@1000/1/1", "t@1000/2/1"

    async def scenario() -> None:
        async with endpoint.serving(ex):
            await endpoint.until(lambda: ex.attempts.connected)
            for e in (a, b, c):
                ex.attempts.accept(work(e))
            # b's cancel arrives right after a's slot is handed to b, before b's task resumes.
            ex.attempts.tickets[b].add_done_callback(lambda _: ex.attempts.accept(work(b, cancel=True)))
            await endpoint.until(lambda: hold.started == [a])
            hold.event(a).set()
            await endpoint.until(lambda: hold.started == [a, c])
            hold.event(c).set()
            await endpoint.until(lambda: len(endpoint.reports) == 3)
            [rb] = [r for r in endpoint.reports if r.execution_id == b]
            assert not rb.success and "cancelled" in rb.error

    asyncio.run(scenario())
    assert b not in hold.started and hold.most == 1
    assert all_given_back(ex, 1)


def test_a_drain_lets_the_running_attempts_finish_and_starts_none_of_those_waiting_for_a_slot() -> None:
    """The waiting ones go back unstarted with the Leave (placed again elsewhere, no try): started
    during the drain, they would be killed as tries at the end of its grace."""
    endpoint = LoopbackEndpoint(epoch=1, heartbeat_ms=50)
    ex = Executor(
        "loopback:1",
        "ex1",
        slots=1,
        prefetch=2,
        drain_grace_s=30.0,
        transport=MemoryTransport(endpoint),
        execution_log=MemoryExecutionLog(),
    )
    hold = Holding()
    ex.handler("hold")(hold)
    a, b, c = "t@1000/0/1", "t@1000/1/1", "t@1000/2/1"

    async def scenario() -> None:
        stop = asyncio.Event()
        drain = asyncio.Event()
        runner = asyncio.ensure_future(ex.run(stop, drain=drain))
        await endpoint.until(lambda: "ex1" in endpoint.streams)
        endpoint.push("ex1", [work(a), work(b), work(c)])
        await endpoint.until(lambda: hold.started == [a])
        drain.set()
        await endpoint.until(lambda: bool(endpoint.drained))
        hold.event(a).set()
        # It leaves once a is reported: not after the 30 s grace, waiting for b and c.
        await endpoint.until(lambda: bool(endpoint.left), timeout_s=10)
        await asyncio.wait_for(runner, 10)

    asyncio.run(scenario())
    assert hold.started == ["t@1000/0/1"]
    assert [r.execution_id for r in endpoint.reports] == [a]
    assert not ex.attempts.running and not ex.attempts.tickets


def test_an_attempt_early_by_the_executors_clock_holds_no_slot_until_it_is_due() -> None:
    ex, endpoint, hold = prefetching(slots=1, prefetch=1)

    async def scenario() -> None:
        async with endpoint.serving(ex):
            due_at = ex.clock.now_ms() + 400  # a leader whose clock runs ahead sent it early
            early, now = f"t@{due_at}/0/1", "t@1000/1/1"
            endpoint.push("ex1", [work(early), work(now)])
            # The due one takes the slot at once; the early one waits for its time, then queues.
            await endpoint.until(lambda: hold.started == [now])
            assert (
                ex.attempts.gate is not None
                and early not in ex.attempts.placed
                and early not in ex.attempts.tickets
            )
            await endpoint.until(lambda: early in ex.attempts.tickets)  # due: queued behind the slot
            assert ex.clock.now_ms() >= due_at and hold.started == [now]
            hold.event(now).set()
            await endpoint.until(lambda: hold.started == [now, early])
            hold.event(early).set()
            await endpoint.until(lambda: len(endpoint.reports) == 2)

    asyncio.run(scenario())
    assert hold.most == 1
    assert all_given_back(ex, 1)


def test_a_cancel_of_an_attempt_waiting_for_its_time_ends_it_unstarted_holding_nothing() -> None:
    ex, endpoint, hold = prefetching(slots=1, prefetch=1)

    async def scenario() -> None:
        async with endpoint.serving(ex):
            early = f"t@{ex.clock.now_ms() + 5_000}/0/1"
            endpoint.push("ex1", [work(early)])
            await endpoint.until(lambda: early in ex.attempts.running)
            endpoint.push("ex1", [work(early, cancel=True)])
            await endpoint.until(lambda: len(endpoint.reports) == 1)
            [r] = endpoint.reports
            assert r.execution_id == early and not r.success and "cancelled" in r.error

    asyncio.run(scenario())
    assert hold.started == []
    assert all_given_back(ex, 1)


def test_an_executor_run_again_after_a_drain_starts_work_again() -> None:
    """The drain closed the run gate; the next ``run`` starts with every slot free and open."""
    ex, endpoint, hold = prefetching(slots=1, prefetch=1)
    a, b = "t@1000/0/1", "t@1000/1/1"

    async def scenario() -> None:
        drain = asyncio.Event()
        first = asyncio.ensure_future(ex.run(asyncio.Event(), drain=drain))
        await endpoint.until(lambda: "ex1" in endpoint.streams)
        endpoint.push("ex1", [work(a)])
        await endpoint.until(lambda: hold.started == [a])
        drain.set()
        hold.event(a).set()
        await asyncio.wait_for(first, 10)
        endpoint.streams.clear()
        async with endpoint.serving(ex):
            endpoint.push("ex1", [work(b)])
            await endpoint.until(lambda: hold.started == [a, b])
            hold.event(b).set()
            await endpoint.until(lambda: len(endpoint.reports) == 2)

    asyncio.run(scenario())
    assert ex.attempts.gate is not None and not ex.attempts.gate.closed and ex.attempts.gate.free == 1


def test_an_agent_stopped_before_its_waiting_attempts_took_a_step_gives_back_their_tickets(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        ex, _ = eager_ready(tmp_path, slots=1, prefetch=3)
        ex.attempts.session_work(rows(ex, ["hold", "hold", "hold"]))
        tasks = list(ex.attempts.running.values())
        for t in tasks:  # as the agent stopping does: the waiting ones have not taken a step yet
            t.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        await asyncio.sleep(0)
        assert not ex.attempts.running and not ex.attempts.placed and not ex.attempts.tickets
        assert ex.attempts.gate is not None and ex.attempts.gate.free == 1 and ex.attempts.gate.try_take()

    asyncio.run(main())


@pytest.mark.parametrize(
    ("slots", "prefetch", "why"),
    [(4, -1, "-1 out of range"), (4, True, "True out of range"), (4, 9_997, "9997 out of range (0-9996")],
)
def test_a_bad_prefetch_is_refused_naming_it(slots: int, prefetch: int, why: str) -> None:
    with pytest.raises(InvalidSpec, match=r"executor\.prefetch") as err:
        Executor("loopback:1", "ex1", slots=slots, prefetch=prefetch, execution_log=MemoryExecutionLog())
    assert why in str(err.value)


# -- eager rows of a Session message ------------------------------------------------------------


def eager_ready(tmp_path: Path, slots: int, prefetch: int) -> tuple[Executor, Holding]:
    """An executor ready for ``session_work`` as on an open stream (a queued row may start when
    its turn comes), with eager handlers ``hold`` (runs until released) and ``quick`` (ends at
    once), both recording their starts in the returned :class:`Holding`."""
    ex = Executor(
        ["127.0.0.1:1"],
        "eager",
        slots=slots,
        prefetch=prefetch,
        transport=object(),  # type: ignore[arg-type]  # never called: no session is opened
        execution_log=MemoryExecutionLog(),
        data_dir=tmp_path,
    )
    hold = Holding()
    ex.handler("hold", eager=True)(hold)

    @ex.handler("quick", eager=True)
    async def quick(ctx: AttemptContext) -> None:
        hold.started.append(ctx.execution_id)

    ready(ex)
    ex.attempts.connected = True
    return ex, hold


def row_ids(message: pb.SessionWork) -> list[str]:
    """The execution ids of :func:`rows`' message, in its order."""
    pairs = zip(message.task_ref, message.nominal_ms, strict=True)
    return [f"t{ref}@{nominal}/0/1" for ref, nominal in pairs]


def all_given_back(ex: Executor, slots: int) -> bool:
    """Every run slot free again and nothing left holding or waiting for one."""
    return (
        ex.attempts.gate is not None
        and ex.attempts.gate.free == slots
        and not ex.attempts.placed
        and not ex.attempts.tickets
    )


def test_eager_rows_beyond_the_free_slots_wait_in_order_and_run_as_slots_free(tmp_path: Path) -> None:
    async def main() -> tuple[Executor, Holding]:
        ex, hold = eager_ready(tmp_path, slots=1, prefetch=3)
        message = rows(ex, ["hold", "quick", "hold", "quick"])
        ids = row_ids(message)
        ex.attempts.session_work(message)
        # The first suspends holding the only slot; the rest wait (none ran eagerly).
        assert hold.started == ids[:1] and ex.eager_rows == 1 and ex.suspended_rows == 1
        assert ex.attempts.gate is not None and ex.attempts.gate.waiting == 3
        assert sorted(ex.attempts.running) == sorted(ids)
        hold.event(ids[0]).set()
        await until(lambda: len(hold.started) == 3, 5, "the quick one and the next hold start")
        assert hold.started == ids[:3]
        hold.event(ids[2]).set()
        await until(lambda: len(hold.started) == 4 and not ex.attempts.running, 5, "all four end")
        assert hold.started == ids and hold.most == 1
        assert all_given_back(ex, 1)
        return ex, hold

    ex, _ = asyncio.run(main())
    assert ex.attempts.dedupe is not None
    assert len([r for r in ex.attempts.dedupe.pending_reports(10) if r.success]) == 4


def test_eager_rows_run_in_their_batch_while_slots_are_free(tmp_path: Path) -> None:
    async def main() -> Executor:
        ex, _ = eager_ready(tmp_path, slots=2, prefetch=2)
        ex.attempts.session_work(rows(ex, ["quick"] * 4))  # each ends at once: its slot is free again
        assert ex.eager_rows == 4 and not ex.attempts.running
        assert ex.attempts.gate is not None and ex.attempts.gate.free == 2
        return ex

    asyncio.run(main())


def test_the_same_row_twice_in_one_message_holds_one_slot(tmp_path: Path) -> None:
    async def main() -> None:
        ex, hold = eager_ready(tmp_path, slots=2, prefetch=2)
        message = rows(ex, ["hold"])
        message.task_ref.append(1)
        message.nominal_ms.append(message.nominal_ms[0])
        message.shard.append(0)
        message.attempt.append(1)
        ex.attempts.session_work(message)
        assert ex.attempts.gate is not None and ex.attempts.gate.free == 1
        [only] = list(ex.attempts.running)
        hold.event(only).set()
        await until(lambda: not ex.attempts.running, 5, "it ends")
        assert ex.attempts.gate.free == 2 and not ex.attempts.placed and hold.started == [only]

    asyncio.run(main())


def test_eager_rows_whose_begin_record_fails_go_the_agents_way_in_order_holding_no_extra_slot(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        ex, hold = eager_ready(tmp_path, slots=2, prefetch=3)
        assert ex.attempts.dedupe is not None
        real = ex.attempts.dedupe.begin_many
        calls: list[int] = []

        def failing_once(ids: list[str]) -> list[BeginOutcome]:
            calls.append(len(ids))
            if len(calls) == 1:
                raise ValueError("an id too long for a key")
            return real(ids)

        ex.attempts.dedupe.begin_many = failing_once  # type: ignore[method-assign,assignment]
        message = rows(ex, ["hold", "hold", "hold", "hold"])
        ids = row_ids(message)
        ex.attempts.session_work(message)
        await until(lambda: len(hold.started) == 2, 5, "two start")
        for e in ids:
            hold.event(e).set()
        await until(lambda: not ex.attempts.running, 5, "all end")
        assert hold.started == ids and hold.most <= 2
        assert all_given_back(ex, 2)

    asyncio.run(main())


def test_a_cancelled_suspended_eager_row_gives_its_slot_to_the_next(tmp_path: Path) -> None:
    async def main() -> None:
        ex, hold = eager_ready(tmp_path, slots=1, prefetch=2)
        message = rows(ex, ["hold", "quick"])
        ids = row_ids(message)
        ex.attempts.session_work(message)
        assert hold.started == ids[:1]
        ex.attempts.accept(pb.WorkItem(execution_id=ids[0], epoch=1, cancel=True))
        await until(lambda: not ex.attempts.running, 5, "both end")
        assert hold.started == ids
        assert all_given_back(ex, 1)

    asyncio.run(main())


def test_a_plain_row_after_an_eager_one_in_a_message_waits_behind_it(tmp_path: Path) -> None:
    async def main() -> None:
        ex, hold = eager_ready(tmp_path, slots=1, prefetch=2)

        @ex.handler("plain")
        async def plain(ctx: AttemptContext) -> None:
            hold.started.append(ctx.execution_id)

        message = rows(ex, ["hold", "plain"])
        ids = row_ids(message)
        ex.attempts.session_work(message)
        for _ in range(5):
            await asyncio.sleep(0)  # the plain row's task gets its turns: it waits for the slot
        assert hold.started == ids[:1]
        hold.event(ids[0]).set()
        await until(lambda: not ex.attempts.running, 5, "both end")
        assert hold.started == ids

    asyncio.run(main())


# -- the leader's timeout backstop ----------------------------------------------------------------


def test_the_timeout_backstop_counts_from_the_start_the_leader_learns_of() -> None:
    settings = DispatchSettings(
        lease_ms=3000, retry_base_ms=1000, retry_cap_ms=8000, retry_jitter=0.0, grace_ms=500
    )
    state: SchedulerState = fresh()
    assert create(state, TaskSpec("t", EVERY_SECOND, timeout_ms=4000, command="true")).ok
    assert state.apply(join("ex1", 1)).result.ok
    d = Dispatcher(state, settings, random.Random(7))
    d.become_leader(1, T0)
    fired = state.apply(tick("t", 1, T0 + S))
    d.on_effects(fired.effects, T0 + S)
    for proposal in d.poll(T0 + S):
        d.on_effects(state.apply(proposal.encode()).effects, T0 + S)
    [(_, item)] = d.take_outbox()
    lease = d.leases[item.execution_id]
    budget = lease.deadline_ms - (T0 + S)
    assert lease.budget_ms == budget > 4000
    # Held, not started (it waits for a slot of its executor), for longer than the timeout.
    waited = T0 + S + budget + 2 * S
    for now in range(T0 + 2 * S, waited + 1, S):
        assert d.heartbeat("ex1", [item.execution_id], now, started=[])
        assert not [p for p in d.poll(now) if p.command.WhichOneof("body") == "report_results"]
    assert d.heartbeat("ex1", [item.execution_id], waited, started=[item.execution_id])
    assert lease.deadline_ms == waited + budget  # from the start learned
    assert d.heartbeat("ex1", [item.execution_id], waited + S, started=[item.execution_id])
    assert lease.deadline_ms == waited + budget  # only the first start moves it
    for now in range(waited + S, waited + budget, S):
        assert d.heartbeat("ex1", [item.execution_id], now, started=[item.execution_id])
        assert not [p for p in d.poll(now) if p.command.WhichOneof("body") == "report_results"]
    [lost] = [p for p in d.poll(waited + budget) if p.command.WhichOneof("body") == "report_results"]
    assert "timeout backstop" in lost.command.report_results.results[0].error
