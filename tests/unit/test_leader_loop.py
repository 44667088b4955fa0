"""The leader's loop on the columnar hot path (issue 31 stage 3): what it no longer recomputes per
attempt, and that each shortcut gives exactly what the longer way gave.

* a hot run's seq, learnt from its ReadyColumns row, goes with the waiting attempt: its
  assignment becomes an AssignColumns row during the placement walk, byte for byte the command
  :func:`columns.split_assignments` made out of the AssignAttempts (which read the run id again);
* a DispatchColumns row is leased and sent from the slot table (no HotRef, no DispatchAttempt per
  row): the same work items and leases as :func:`columns.dispatched_attempts` gave;
* the lease keeps the seq, so a report of its success needs no look-up of the run id: the same
  ResultColumns as without it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import random
from collections.abc import Callable, Iterator
from types import SimpleNamespace
from typing import Any

import pytest

from raftsched import codec
from raftsched.fsm.effects import BarrierCommitted, DispatchAttempt, DispatchColumns, Effect, ReadyColumns
from raftsched.fsm.hot import HotBook
from raftsched.fsm.hot_slots import hot_ref, run_id_of
from raftsched.fsm.state import SchedulerState
from raftsched.fsm.view import StateView
from raftsched.leader import columns
from raftsched.leader.dispatch.dispatcher import Dispatcher, DispatchProposal
from raftsched.leader.dispatch.hub import ExecutorHub
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.model import Overlap, TaskSpec
from raftsched.sharding.placement import NO_NEED
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb
from tests.support.fsm import EVERY_SECOND, T0, S, batch, create, entry, fire, fresh, join, update

SETTINGS = DispatchSettings(lease_ms=3000, retry_base_ms=1000, retry_cap_ms=8000, retry_jitter=0.2)
HOT = [f"h{i}" for i in range(12)]
COLD = ["c0", "c1"]  # two shards each: never hot


def hot_spec(name: str, shards: int = 1) -> TaskSpec:
    return TaskSpec(name, EVERY_SECOND, overlap=Overlap.ALLOW, timeout_ms=0, handler="noop", shards=shards)


def world() -> SchedulerState:
    state = fresh()
    for name in HOT:
        assert create(state, hot_spec(name)).ok
    for name in COLD:
        assert create(state, hot_spec(name, shards=2)).ok
    for i in range(3):
        assert state.apply(join(f"ex{i + 1}", 64)).result.ok
    numbering = logpb.Command(epoch=1, now_ms=T0, origin="n1")
    numbering.number_entities.SetInParent()
    assert state.apply(codec.encode_command(numbering)).result.ok
    with state.view() as v:
        assert all(v.tasks[name].hot for name in HOT) and not any(v.tasks[name].hot for name in COLD)
    return state


def leader(state: SchedulerState, columns_allowed: bool = True) -> Dispatcher:
    d = Dispatcher(state, SETTINGS, random.Random(7))
    d.columns_allowed = lambda: columns_allowed
    d.become_leader(1, T0)
    for i in range(3):
        d.heartbeat(f"ex{i + 1}", [], T0)
    return d


def fire_columns(state: SchedulerState, names: list[str], at: int) -> bytes:
    cmd = logpb.Command(epoch=1, now_ms=at, origin="n1")
    fc = cmd.fire_columns
    with state.view() as v:
        fc.task.extend(v.tasks[name].number for name in names)
        fc.version.extend(v.tasks[name].version for name in names)
    fc.nominal_delta.extend([0] * len(names))
    fc.next_delta.extend([S] * len(names))
    return codec.encode_command(cmd)


def cold_fires(names: list[str], at: int) -> bytes:
    return batch(at, *(entry(n, 1, [fire(at)], watermark=at, next_fire=at + S) for n in names))


def apply(state: SchedulerState, data: bytes, *dispatchers: Dispatcher, now: int) -> tuple[Effect, ...]:
    applied = state.apply(data)
    assert applied.result.ok, applied.result
    for d in dispatchers:
        d.on_effects(applied.effects, now)
    return applied.effects


def old_poll(d: Dispatcher, now: int) -> list[DispatchProposal]:
    """What the dispatcher proposed before stage 3: the whole AssignAttempts, then the hot runs'
    assignments split off it by run id (columns.split_assignments)."""
    [proposal] = [p for p in d.poll(now) if p.kind == "assign"]  # columns not allowed: one command
    cmd = logpb.Command()
    cmd.CopyFrom(proposal.command)
    with d.state.view() as v:
        hot = columns.split_assignments(v, cmd)
    out = []
    if hot is not None:
        kept = {(a.run_id, a.shard) for a in cmd.assign_attempts.assignments}
        out.append(DispatchProposal("assign", hot, tuple(p for p in proposal.assigned if p[0] not in kept)))
        rest = tuple(p for p in proposal.assigned if p[0] in kept)
        if rest or cmd.assign_attempts.waits:
            out.append(DispatchProposal("assign", cmd, rest))
    else:
        out.append(proposal)
    return out


def same(new: list[DispatchProposal], old: list[DispatchProposal]) -> None:
    assert [p.encode() for p in new] == [p.encode() for p in old]
    assert [p.assigned for p in new] == [p.assigned for p in old]


@pytest.fixture
def no_run_id_lookup(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[str]]:
    """Record every StateView.hot_seq call (the look-up of a run's seq by its id)."""
    calls: list[str] = []
    real = StateView.hot_seq

    def spy(self: StateView, run_id: str) -> int:
        calls.append(run_id)
        return real(self, run_id)

    monkeypatch.setattr(StateView, "hot_seq", spy)
    yield calls


def test_hot_assignments_are_built_during_the_walk_as_the_split_made_them(
    no_run_id_lookup: list[str],
) -> None:
    state = world()
    new, old = leader(state), leader(state, columns_allowed=False)
    at = T0 + S
    apply(state, fire_columns(state, HOT, at), new, old, now=at)
    apply(state, cold_fires(COLD, at), new, old, now=at)
    got = [p for p in new.poll(at) if p.kind == "assign"]
    assert [p.command.WhichOneof("body") for p in got] == ["assign_columns", "assign_attempts"]
    assert len(got[0].command.assign_columns.seq) == len(HOT)
    # Every hot run's seq came from its fire entry (only the cold runs' shard 0 is looked up).
    assert sorted(no_run_id_lookup) == [f"c0@{at}", f"c1@{at}"]
    same(got, old_poll(old, at))
    assert new.term is not None and sorted(new.term.hot_assigned.values()) == sorted(
        key[0] for key, _ in got[0].assigned
    )


def test_a_hot_run_promoted_while_it_waits_is_assigned_the_cold_way() -> None:
    state = world()
    new, old = leader(state), leader(state, columns_allowed=False)
    at = T0 + S
    apply(state, fire_columns(state, HOT, at), new, old, now=at)
    # h0 gets a second shard: no longer hot, its waiting run is promoted to the cold path.
    assert update(state, hot_spec("h0", shards=2), now=at + 1).ok
    with state.view() as v:
        assert not v.tasks["h0"].hot and v.hot_seq(f"h0@{at}") == 0
    got = [p for p in new.poll(at + 2) if p.kind == "assign"]
    same(got, old_poll(old, at + 2))
    cold = got[1].command.assign_attempts.assignments
    assert [a.run_id for a in cold] == [f"h0@{at}"]


def test_attempts_a_takeover_inherited_are_found_by_run_id_as_before() -> None:
    state = world()
    at = T0 + S
    apply(state, fire_columns(state, HOT, at), now=at)
    new, old = leader(state), leader(state, columns_allowed=False)  # waiting from the state: no seq
    same([p for p in new.poll(at) if p.kind == "assign"], old_poll(old, at))


def reference_dispatches(
    v: StateView, eff: DispatchColumns, epoch: int, proposed: dict[int, str]
) -> list[DispatchAttempt]:
    """dispatched_attempts as it was (a HotRef per row), for the rows still live and hot."""
    slots, numbering = v.hot_tables()
    out = []
    for seq, attempt, executor in zip(eff.seqs, eff.attempts, eff.executors, strict=True):
        ref = hot_ref(slots, numbering, seq)
        if ref is None:
            assert proposed.get(seq) is None  # (the promoted rows are checked apart)
            continue
        if ref.attempt != attempt or ref.executor_number != executor or not ref.executor:
            continue
        out.append(
            DispatchAttempt(
                ref.run_id, ref.task, ref.nominal_ms, 0, attempt, ref.executor, epoch, known=True,
                task_version=ref.version, backfill=False, assigned_ms=ref.assigned_ms,
            )
        )  # fmt: skip
    return out


def test_dispatch_rows_are_read_from_the_slot_table_as_the_hot_refs_were() -> None:
    state = world()
    d = leader(state)
    at = T0 + S
    apply(state, fire_columns(state, HOT, at), d, now=at)
    [hot] = [p for p in d.poll(at) if p.command.WhichOneof("body") == "assign_columns"]
    applied = state.apply(hot.encode())
    [eff] = [e for e in applied.effects if isinstance(e, DispatchColumns)]
    # A row on another attempt and one on another executor: not sent.
    wrong = DispatchColumns([eff.seqs[0], eff.seqs[1]], [2, eff.attempts[1]], [eff.executors[0], 99])
    with state.view() as v:
        for e in (eff, wrong):
            assert columns.dispatched_attempts(v, e, 1) == reference_dispatches(v, e, 1, {})
            got = columns.dispatched_attempts(v, e, 1)
            assert [(a.task_version, a.assigned_ms, a.known) for a in got] == [
                (r.task_version, r.assigned_ms, r.known) for r in reference_dispatches(v, e, 1, {})
            ]
        assert columns.dispatched_attempts(v, wrong, 1) == []
    d.on_effects(applied.effects, at)
    sent = d.take_outbox()
    assert len(sent) == len(HOT)
    leases = d.leases
    for executor, item in sent:
        lease = leases[item.execution_id]
        assert lease.executor == executor and lease.seq and lease.started is False
        assert item.handler == "noop" and item.task_version == 1 and item.epoch == 1
        with state.view() as v:
            assert v.hot_seq(item.run_id) == lease.seq
    assert d.waiting == {}


def test_a_success_is_reported_by_the_seq_its_lease_kept(no_run_id_lookup: list[str]) -> None:
    state = world()
    d = leader(state)
    at = T0 + S
    apply(state, fire_columns(state, HOT, at), d, now=at)
    for proposal in d.poll(at):
        apply(state, proposal.encode(), d, now=at)
    by_executor: dict[str, list[pb.ExecResult]] = {}
    for executor, item in d.take_outbox():
        by_executor.setdefault(executor, []).append(
            pb.ExecResult(execution_id=item.execution_id, success=True, duration_ms=3, start_lateness_ms=7)
        )
    no_run_id_lookup.clear()
    for executor, results in sorted(by_executor.items()):
        ids = [(r.execution_id.split("/")[0], 0, 1) for r in results]
        with state.view() as v:
            # Without the leases' seqs, what the report made before: the same command.
            before, rest_before = columns.split_results(v, executor, results, ids, at + 50, 1)
        looked_up = len(no_run_id_lookup)
        [proposal] = d.report(executor, results, at + 50, ids)
        assert len(no_run_id_lookup) == looked_up  # the report itself looked no run id up
        assert before is not None and rest_before == []
        assert proposal.encode() == DispatchProposal("results", before).encode()
        assert proposal.rows == tuple(range(len(results)))
        apply(state, proposal.encode(), d, now=at + 50)
    assert d.leases == {}
    with state.view() as v:
        assert v.active_count == 0


def _first_second_dispatched(tasks: int) -> tuple[SchedulerState, Dispatcher, int]:
    """A state and its leader whose first ``tasks`` hot tasks fired, were assigned and dispatched
    (their work still in the outbox), and the second they fired in."""
    state = world()
    at = T0 + S
    d = leader(state)
    apply(state, fire_columns(state, HOT[:tasks], at), d, now=at)
    for proposal in d.poll(at):
        apply(state, proposal.encode(), d, now=at)
    return state, d, at


def test_a_seq_no_longer_live_is_looked_up_by_run_id() -> None:
    state, d, at = _first_second_dispatched(2)
    sent = d.take_outbox()
    results = [
        pb.ExecResult(execution_id=item.execution_id, success=True, start_lateness_ms=1) for _, item in sent
    ]
    ids = [(r.execution_id.split("/")[0], 0, 1) for r in results]
    executor = sent[0][0]
    with state.view() as v:
        seqs = [v.hot_seq(i[0]) for i in ids]
        stale = [s + 10_000 for s in seqs]  # never live: the run id decides
        durations, lateness = [0] * len(ids), [1] * len(ids)
        for known in (seqs, stale, [0] * len(seqs), [seqs[0], stale[1]]):
            cmd, rest = columns.split_results(v, executor, results, ids, at, 1, known)
            ref, ref_rest = columns.split_results(v, executor, results, ids, at, 1)
            assert rest == ref_rest
            assert (cmd.SerializeToString() if cmd else b"") == (ref.SerializeToString() if ref else b"")
            # A session's report: the same rows, the same command.
            cmd, rest = columns.split_result_columns(v, executor, ids, durations, lateness, at, 1, known)
            assert rest == ref_rest
            assert (cmd.SerializeToString() if cmd else b"") == (ref.SerializeToString() if ref else b"")


@pytest.mark.parametrize("pick", [max, min], ids=["newest", "oldest"])
def test_a_known_seq_finished_since_is_looked_up_by_run_id(pick: Callable[..., int]) -> None:
    """The newest seq finished, or the oldest (its slot followed by live ones: a wrong offset
    into the slot table would read a live neighbour's state for it)."""
    state, d, at = _first_second_dispatched(3)
    sent = [item for _, item in d.take_outbox()]
    with state.view() as v:
        seqs = [v.hot_seq(item.run_id) for item in sent]
    last = pick(range(len(sent)), key=lambda i: seqs[i])  # finished, not trimmed: kept in the table
    lease = d.leases[sent[last].execution_id]
    result = pb.ExecResult(execution_id=lease.execution_id, success=True, start_lateness_ms=1)
    for proposal in d.report(lease.executor, [result], at + 10):
        apply(state, proposal.encode(), d, now=at + 10)
    ids = [(item.run_id, 0, 1) for item in sent]
    results = [pb.ExecResult(execution_id=i.execution_id, success=True, start_lateness_ms=1) for i in sent]
    with state.view() as v:
        assert not v.hot_live(seqs[last]) and v.hot_seq(sent[last].run_id) == 0
        assert v.hot_tables()[0].index(seqs[last]) >= 0
        number = v.executor_number(lease.executor)
        ref, ref_rest = columns.split_results(v, lease.executor, results, ids, at, 1)
        cmd, rest = columns.split_result_columns(v, lease.executor, ids, [0] * 3, [1] * 3, at, 1, seqs)
    assert rest == ref_rest and last in rest
    assert cmd is not None and ref is not None and cmd.SerializeToString() == ref.SerializeToString()
    assert number and seqs[last] not in cmd.result_columns.seq


def test_ready_rows_wait_as_each_would_have_waited() -> None:
    state = world()
    one, many = leader(state).term, leader(state).term
    assert one is not None and many is not None
    at = T0 + S
    applied = state.apply(fire_columns(state, HOT, at))
    [eff] = [e for e in applied.effects if isinstance(e, ReadyColumns)]
    # h1 declares memory since (no longer hot: its waiting run is promoted and waits as any other).
    h1 = TaskSpec("h1", EVERY_SECOND, overlap=Overlap.ALLOW, handler="noop", resource_memory_mb=64)
    assert update(state, h1, now=at).ok
    with state.view() as v:
        rows = columns.ready_rows(v, eff, 1)
        assert [seq for _, seq in rows] == list(range(eff.seq_base, eff.seq_base + len(HOT)))
        assert [ready.run_id for ready, _ in rows] == [run_id_of(r.task, r.nominal_ms) for r, _ in rows]
        for ready, seq in rows:
            one.placement.wait(v, ready, seq)
        many.placement.wait_rows(v, rows)
        many.placement.wait_rows(v, rows[:3])  # waiting already: replaced, as wait replaces
        for ready, seq in rows[:3]:
            one.placement.wait(v, ready, seq)
    assert len(many.placement.waiting) == len(HOT)
    assert many.placement.waiting == one.placement.waiting
    assert many.placement.sized == one.placement.sized
    assert {o: list(q) for o, q in many.placement.queues.items()} == {
        o: list(q) for o, q in one.placement.queues.items()
    }


def test_a_heartbeat_listing_runs_just_reported_builds_no_copy_of_them(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state = world()
    d = leader(state)
    at = T0 + S
    apply(state, fire_columns(state, HOT, at), d, now=at)
    for proposal in d.poll(at):
        apply(state, proposal.encode(), d, now=at)
    sent = d.take_outbox()
    executor = sent[0][0]
    mine = [item.execution_id for ex, item in sent if ex == executor]
    results = [pb.ExecResult(execution_id=e, success=True, start_lateness_ms=1) for e in mine]
    proposals = d.report(executor, results, at + 10)  # leases dropped; not applied yet
    assert proposals and all(e not in d.leases for e in mine)
    built: list[int] = []
    real = HotBook.synthesise

    def spy(self: HotBook, seq: int) -> logpb.Run | None:
        built.append(seq)
        return real(self, seq)

    monkeypatch.setattr(HotBook, "synthesise", spy)
    # The heartbeat was built while they ran: they are strays here, still live hot runs.
    assert d.heartbeat(executor, mine, at + 11, started=mine, partial=True)
    assert built == []
    assert d.take_outbox() == []  # nothing to stop: none is cancelled


def test_the_applier_wakes_the_loop_once_per_batch_of_entries_and_keeps_their_order() -> None:
    state = world()
    d = leader(state)
    gate = SimpleNamespace(now_ms=lambda: T0)
    hub = ExecutorHub(SimpleNamespace(node_id="n1", state=state, gate=gate), d)
    seen: list[object] = []
    entries = [(BarrierCommitted("n1", i),) for i in range(8)]

    def on_effects(effects: tuple[Effect, ...]) -> None:
        seen.append(effects)
        if effects is entries[1]:
            hub.effects_threadsafe(entries[7])  # queued while a drain runs: taken in its turn

    hub._on_effects = on_effects  # type: ignore[method-assign]
    hub._lost_leadership = lambda: seen.append("lost")  # type: ignore[method-assign]

    async def scenario() -> int:
        loop = asyncio.get_running_loop()
        hub.loop = loop
        wakes = 0
        real = loop.call_soon_threadsafe

        def counting(callback: Any, *args: Any) -> asyncio.Handle:
            nonlocal wakes
            wakes += 1
            return real(callback, *args)

        loop.call_soon_threadsafe = counting  # type: ignore[method-assign,assignment]
        for effects in entries[:5]:  # one apply burst: the loop is busy meanwhile
            hub.effects_threadsafe(effects)
        hub.leadership_threadsafe(True)  # (only a loss is handed over)
        hub.leadership_threadsafe(False)
        hub.effects_threadsafe(entries[5])
        deadline = loop.time() + 5
        while (len(seen) < 8 or hub._wake_pending) and loop.time() < deadline:
            await asyncio.sleep(0)
        hub.effects_threadsafe(entries[6])  # a later burst: a wake-up of its own
        while len(seen) < 9 and loop.time() < deadline:
            await asyncio.sleep(0)
        return wakes

    wakes = asyncio.run(scenario())
    assert seen == [*entries[:5], "lost", entries[5], entries[7], entries[6]]
    assert wakes == 3  # the first burst, the entry queued while it drained, the later burst


def test_a_session_report_finds_its_rows_by_the_seqs_the_leases_kept(no_run_id_lookup: list[str]) -> None:
    state = world()
    d, old = leader(state), leader(state)
    at = T0 + S
    apply(state, fire_columns(state, HOT, at), d, old, now=at)
    for proposal in d.poll(at):
        apply(state, proposal.encode(), d, now=at)
    sent = d.take_outbox()
    executor = sent[0][0]
    exec_ids = [item.execution_id for ex, item in sent if ex == executor]
    ids = [(e.split("/")[0], 0, 1) for e in exec_ids]
    durations, lateness = [3] * len(ids), [7] * len(ids)
    with state.view() as v:  # without the leases' seqs: what the session's report made before
        before, rest = columns.split_result_columns(v, executor, ids, durations, lateness, at + 50, 1)
    assert before is not None and rest == []
    no_run_id_lookup.clear()
    [proposal] = d.results_columns(executor, ids, exec_ids, durations, lateness, [], [], at + 50)
    assert no_run_id_lookup == []
    assert proposal.encode() == DispatchProposal("results", before).encode()
    assert proposal.rows == tuple(range(len(ids)))
    assert all(e not in d.leases for e in exec_ids)


def test_an_executor_registering_again_keeps_the_ring_and_its_owners() -> None:
    state = world()
    d = leader(state)
    at = T0 + S
    apply(state, fire_columns(state, HOT, at), d, now=at)
    t = d.term
    assert t is not None
    ring, owners = t.placement.ring, dict(t.placement._owners)
    queues = {o: list(q) for o, q in t.placement.queues.items()}
    assert len(owners) == len(HOT)
    apply(state, join("ex2", 64, now=at + 1), d, now=at + 1)  # registers again: same executors
    assert t.placement.ring is ring and t.placement._owners == owners
    assert {o: list(q) for o, q in t.placement.queues.items()} == queues
    apply(state, join("ex4", 64, now=at + 2), d, now=at + 2)  # a new one: a new ring, owners anew
    new = t.placement.ring
    assert new != ring and t.placement._owners == {key: new.owner(*key) for key in owners}
    assert sorted(t.placement.ring.members) == ["ex1", "ex2", "ex3", "ex4"]
    assert sum(len(q) for q in t.placement.queues.values()) == len(HOT)
    assert all(w.owner == t.placement.ring.owner(w.ready.task, 0) for w in t.placement.waiting.values())


def test_effects_that_fail_do_not_hold_up_the_ones_queued_behind_them(
    caplog: pytest.LogCaptureFixture,
) -> None:
    state = world()
    hub = ExecutorHub(SimpleNamespace(node_id="n1", state=state, gate=None), leader(state))
    seen: list[int] = []

    def on_effects(effects: tuple[Effect, ...]) -> None:
        [barrier] = effects
        assert isinstance(barrier, BarrierCommitted)
        if barrier.epoch == 1:
            raise RuntimeError("a bug")
        seen.append(barrier.epoch)

    hub._on_effects = on_effects  # type: ignore[method-assign]

    async def scenario() -> None:
        loop = asyncio.get_running_loop()
        hub.loop = loop
        for epoch in (1, 2, 3):
            hub.effects_threadsafe((BarrierCommitted("n1", epoch),))
        deadline = loop.time() + 5
        while len(seen) < 2 and loop.time() < deadline:
            await asyncio.sleep(0)

    asyncio.run(scenario())
    assert seen == [2, 3]
    assert "handling applied effects failed" in caplog.text


class Reference(Dispatcher):
    """The dispatcher as it was before its DispatchColumns loop leased and queued the common row
    itself: every live hot row through ``_send``."""

    def _dispatch_columns(self, t: Any, v: StateView, eff: DispatchColumns, now_ms: int) -> None:
        unwait = t.placement.unwait
        for row in columns.dispatched_rows(v, eff, t.epoch, t.hot_assigned):
            if isinstance(row, DispatchAttempt):
                unwait((row.run_id, row.shard))
                self._lease_and_send(t, v, row, now_ms)
                continue
            seq, run_id, task, nominal, attempt, executor, version, assigned_ms = row
            kept = unwait((run_id, 0), executor)
            self._send(
                t, v, run_id, task, nominal, 0, attempt, executor, version, False, assigned_ms, None,
                now_ms, False, NO_NEED, seq, kept,
            )  # fmt: skip
        for seq in eff.seqs:
            t.hot_assigned.pop(seq, None)


def _sent(work: list[tuple[str, Any]]) -> list[tuple[str, Any]]:
    """An outbox, comparable: a row with its definition's key and fields, an item as its bytes."""
    return [(ex, _work(w)) for ex, w in work]


def _work(w: Any) -> Any:
    if isinstance(w, tuple):
        return (w[:6], w[6].key, w[6].fields, w[6].timeout_ms)
    return w.SerializeToString()


def _holdings(d: Dispatcher) -> tuple[Any, ...]:
    t = d.term
    assert t is not None
    h = t.holdings
    return (
        [(i, dataclasses.astuple(lease)) for i, lease in h.leases.items()],  # every field, in order
        dict(h.used),
        h.check_at,
        h.held.running,
        set(h.backfill_busy),
        h.reserved.by_key,
        [(key, w.reserved_for) for key, w in t.placement.waiting.items()],
        {o: [w.ready.run_id for w in q] for o, q in t.placement.queues.items()},
        dict(t.hot_assigned),
        {task: (raw, wdef.key, wdef.timeout_ms) for task, (raw, _spec, wdef) in d._specs.items()},
    )


def test_dispatch_columns_leases_and_sends_its_common_rows_as_send_did(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The DispatchColumns loop's own lease-and-queue of a first dispatch gives what ``_send``
    gave, on varied input: rows hot and promoted, a cache miss then hits, a task with a timeout,
    a live run of an older version, re-sends over existing leases, slots kept and not kept, an
    executor heard from after the dispatch's time."""
    state = world()
    new = leader(state)
    ref = Reference(state, SETTINGS, random.Random(7))
    ref.columns_allowed = lambda: True
    ref.become_leader(1, T0)
    for d in (new, ref):
        d.heartbeat("ex1", [], T0)
        # Later than every dispatch below: their leases count from it (and expire after the
        # timeouts' deadlines).
        d.heartbeat("ex2", [], T0 + 60 * S)
        d.heartbeat("ex3", [], T0 + 60 * S)
    calls: list[str] = []
    real = Dispatcher._send

    def spy(self: Dispatcher, t: Any, v: StateView, run_id: str, *args: Any) -> None:
        if self is new:
            calls.append(run_id)
        real(self, t, v, run_id, *args)

    monkeypatch.setattr(Dispatcher, "_send", spy)

    def same_state() -> None:
        assert _holdings(new) == _holdings(ref)

    def feed(effects: tuple[Effect, ...], now: int) -> None:
        for d in (new, ref):
            d.on_effects(effects, now)
        assert _sent(new.take_work()) == _sent(ref.take_work())
        same_state()

    kept: list[tuple[Effect, ...]] = []
    kept_at: dict[int, list[tuple[Effect, ...]]] = {}
    for second in (1, 2, 3):
        at = T0 + second * S
        for d in (new, ref):  # in the last second too late for the timeouts' deadlines
            d.heartbeat("ex1", [], at if second < 3 else T0 + 60 * S)
        applied = state.apply(fire_columns(state, HOT, at))
        assert applied.result.ok
        feed(applied.effects, at)
        got, want = new.poll(at), ref.poll(at)
        same(got, want)
        for proposal, theirs in zip(got, want, strict=True):
            applied = state.apply(proposal.encode())
            assert applied.result.ok
            if second == 1 and proposal.command.WhichOneof("body") == "assign_columns":
                # Before the loop reads the entry's rows: h0 stops being hot (its run is promoted,
                # sent the cold way), h1-h3 get a timeout (a new version: their live runs keep the
                # old one).
                assert update(state, hot_spec("h0", shards=2), now=at + 1).ok
                for name in ("h1", "h2", "h3"):
                    spec = hot_spec(name)
                    assert update(state, dataclasses.replace(spec, timeout_ms=4000), now=at + 1).ok
            if second == 3:
                for d in (new, ref):  # as if no lease were due earlier: these leases decide it
                    assert d.term is not None
                    d.term.holdings.check_at = 2**63
            calls.clear()
            feed(applied.effects, at + 2)
            if proposal.command.WhichOneof("body") == "assign_columns":
                kept.append(applied.effects)
                kept_at.setdefault(second, []).append(applied.effects)
                if second == 3:  # the task versions parsed: every first dispatch took the loop's way
                    assert calls == []
            ref.release(theirs)
            new.release(proposal)
    timed = [lease for lease in new.leases.values() if lease.deadline_ms]  # h1-h3's timeout
    assert any(lease.deadline_ms < lease.expires_ms for lease in timed)
    assert any(lease.deadline_ms > lease.expires_ms for lease in timed)
    # Re-sends: the same rows again, over their leases (no reservation: no slot kept).
    calls.clear()
    feed(kept[-1], T0 + 4 * S)
    assert calls  # through _send
    # A lease ended (its result reported, not applied yet) while its run is still live: sent again
    # with a new lease taking a slot (none kept).
    last = [lease for lease in new.leases.values() if lease.run_id.endswith(f"@{T0 + 3 * S}")]
    sent = [lease.execution_id for lease in last[:3]]
    for d in (new, ref):
        for lease in last[:3]:
            result = pb.ExecResult(execution_id=lease.execution_id, success=True, start_lateness_ms=1)
            d.report(lease.executor, [result], T0 + 4 * S)
    assert not any(e in new.leases for e in sent)
    same_state()
    calls.clear()
    feed(kept[-1], T0 + 4 * S + 1)
    assert all(e in new.leases for e in sent)
    assert not {e.split("/")[0] for e in sent} & set(calls)  # the loop's way: no lease, no slot kept
    # The same for live runs of h1-h3's first version, now that their second version is the one
    # parsed and cached: their rows must not take the cached definition (the loop's version test).
    old_version = [
        lease
        for lease in new.leases.values()
        if lease.run_id.endswith(f"@{T0 + S}") and lease.task in ("h1", "h2", "h3")
    ]
    assert old_version
    for d in (new, ref):
        for lease in old_version:
            result = pb.ExecResult(execution_id=lease.execution_id, success=True, start_lateness_ms=1)
            d.report(lease.executor, [result], T0 + 4 * S + 2)
    same_state()
    calls.clear()
    for effects in kept_at[1]:
        feed(effects, T0 + 4 * S + 3)
    assert all(lease.execution_id in new.leases for lease in old_version)
    assert {lease.run_id for lease in old_version} <= set(calls)  # through _send: an older version
    # Rows on another attempt, on another executor, of a seq never made: nothing sent.
    [eff] = [e for e in kept[-1] if isinstance(e, DispatchColumns)]
    seqs, attempts, executors = eff.seqs, eff.attempts, eff.executors
    feed(
        (DispatchColumns([seqs[0], seqs[1], 10**6], [2, attempts[1], 1], [executors[0], 99, 1]),), T0 + 5 * S
    )
