"""The leader's dispatch hot loop (issue 31, P3): what it stops recomputing per attempt, and that
each shortcut is forgotten when what it stands for changes.

* the ring's owner of a (task, shard), once per ring: a new ring (an executor joined) recomputes it;
* a task's parsed spec, once per version: a new version, or the task created again, is parsed anew;
* no copy of the run for a plain task's dispatch (the assignment's effect carries its facts);
* ``release`` gives back what the proposal reserved without reading its command again;
* a success's ``retry_at_ms`` is not drawn (0), and apply treats it as before;
* the servicer splits an execution id once;
* commit and apply lateness kept run-length encoded, with the same figures as fire by fire.
"""

from __future__ import annotations

import asyncio
import random
from collections import Counter
from collections.abc import Callable
from types import SimpleNamespace
from typing import Any

import pytest

from raftsched.fsm.effects import DispatchAttempt
from raftsched.fsm.state import SchedulerState
from raftsched.fsm.view import StateView
from raftsched.leader.dispatch import leases as leases_module
from raftsched.leader.dispatch.dispatcher import Dispatcher, DispatchProposal
from raftsched.leader.dispatch.hub import CLOSE, ExecutorHub
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.leader.dispatch.work import Work
from raftsched.leader.gate import LeaderGate
from raftsched.model import Overlap, TaskSpec
from raftsched.observability.lateness import LatenessLog
from raftsched.observability.metrics import Histogram
from raftsched.rpc.executor_service import MAX_BATCH, ExecutorServicer, _check_execution_id
from raftsched.sharding.placement import NO_NEED
from raftsched.sharding.ring import ShardRing
from raftsched.timing.clock import ManualClock
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb
from tests.support.fsm import (
    EVERY_SECOND,
    T0,
    S,
    batch,
    create,
    delete,
    domain,
    entry,
    fire,
    fresh,
    join,
    leave,
    runs_of,
    tick,
    update,
)

SETTINGS = DispatchSettings(lease_ms=3000, retry_base_ms=1000, retry_cap_ms=8000, retry_jitter=0.2)


def spec(name: str = "t", command: str = "echo v1", retries: int = 0) -> TaskSpec:
    return TaskSpec(
        name, EVERY_SECOND, overlap=Overlap.ALLOW, max_retries=retries, timeout_ms=0, command=command
    )


def setup(name: str = "t", executors: int = 2, retries: int = 0) -> tuple[SchedulerState, Dispatcher]:
    state = fresh()
    assert create(state, spec(name, retries=retries)).ok
    for i in range(executors):
        assert state.apply(join(f"ex{i + 1}", 4)).result.ok
    d = Dispatcher(state, SETTINGS, random.Random(7))
    d.become_leader(1, T0)
    return state, d


def step(state: SchedulerState, d: Dispatcher, data: bytes | DispatchProposal, now: int) -> None:
    applied = state.apply(data.encode() if isinstance(data, DispatchProposal) else data)
    assert applied.result.ok, applied.result
    d.on_effects(applied.effects, now)


def dispatch(state: SchedulerState, d: Dispatcher, task: str, version: int, at: int) -> pb.WorkItem:
    """Fire ``task`` at ``at``, assign and dispatch its attempt; its work item."""
    step(state, d, tick(task, version, at), at)
    for proposal in d.poll(at):
        step(state, d, proposal, at)
    [(_, item)] = d.take_outbox()
    return item


def counting(monkeypatch: pytest.MonkeyPatch, cls: type, name: str) -> list[Any]:
    """Replace ``cls.name`` by a wrapper that records each call's arguments."""
    calls: list[Any] = []
    real: Callable[..., Any] = getattr(cls, name)

    def wrapper(self: object, *args: object) -> Any:
        calls.append(args)
        return real(self, *args)

    monkeypatch.setattr(cls, name, wrapper)
    return calls


def counting_function(monkeypatch: pytest.MonkeyPatch, module: object, name: str) -> list[Any]:
    """Replace the function ``module.name`` by a wrapper that records each call's arguments."""
    calls: list[Any] = []
    real: Callable[..., Any] = getattr(module, name)

    def wrapper(*args: object) -> Any:
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(module, name, wrapper)
    return calls


def task_whose_owner_moves(old: ShardRing, new: ShardRing) -> str:
    """A task name whose shard 0 the two rings place on different executors."""
    name = next(f"t{i}" for i in range(1000) if old.owner(f"t{i}", 0) != new.owner(f"t{i}", 0))
    return name


# -- the ring's owner ------------------------------------------------------------------------------


def test_the_rings_owner_is_computed_once_per_task_and_shard(monkeypatch: pytest.MonkeyPatch) -> None:
    state, d = setup()
    calls = counting(monkeypatch, ShardRing, "owner")
    for second in range(1, 4):
        step(state, d, tick("t", 1, T0 + second * S), T0 + second * S)
    assert len(d.waiting) == 3  # three attempts of (t, 0) wait: one owner lookup
    assert calls == [("t", 0)]


def test_a_new_ring_recomputes_the_owner_of_waiting_and_new_attempts() -> None:
    two, three = ShardRing(["ex1", "ex2"]), ShardRing(["ex1", "ex2", "ex3"])
    name = task_whose_owner_moves(two, three)
    state, d = setup(name)
    step(state, d, tick(name, 1, T0 + S), T0 + S)
    [first] = d.waiting.values()
    assert first.owner == two.owner(name, 0)
    step(state, d, join("ex3", 4, now=T0 + S), T0 + S)  # the ring is rebuilt
    assert first.owner == three.owner(name, 0) != two.owner(name, 0)
    step(state, d, tick(name, 1, T0 + 2 * S), T0 + 2 * S)
    assert {w.owner for w in d.waiting.values()} == {three.owner(name, 0)}


# -- the task's spec -------------------------------------------------------------------------------


def test_a_task_versions_spec_is_parsed_once_and_a_new_version_brings_its_own(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, d = setup()
    parsed = counting(monkeypatch, StateView, "spec_for")
    assert dispatch(state, d, "t", 1, T0 + S).command == "echo v1"
    assert dispatch(state, d, "t", 1, T0 + 2 * S).command == "echo v1"
    assert parsed == [("t", 1)]  # the second dispatch used the parsed spec
    assert update(state, spec(command="echo v2"), now=T0 + 2 * S).ok
    v2 = dispatch(state, d, "t", 2, T0 + 3 * S)
    assert v2.command == "echo v2"
    assert parsed[1:] == [("t", 2)]
    assert v2.task_version == 2  # the executor parses params once per task version


def test_a_task_created_again_under_its_name_is_not_served_its_old_spec() -> None:
    state, d = setup()
    assert dispatch(state, d, "t", 1, T0 + S).command == "echo v1"
    assert delete(state, "t", now=T0 + S).ok
    assert create(state, spec(command="echo again"), now=T0 + S).ok  # version 1 again
    assert dispatch(state, d, "t", 1, T0 + 2 * S).command == "echo again"


# -- the run ---------------------------------------------------------------------------------------


def test_a_plain_tasks_dispatch_reads_no_copy_of_its_run(monkeypatch: pytest.MonkeyPatch) -> None:
    state, d = setup()
    step(state, d, tick("t", 1, T0 + S), T0 + S)
    [assign] = d.poll(T0 + S)
    applied = state.apply(assign.encode())
    [eff] = applied.effects
    assert isinstance(eff, DispatchAttempt) and eff.known
    run = state.active_run(eff.run_id)
    assert run is not None
    assert (eff.task_version, eff.backfill, eff.assigned_ms) == (
        run.task_version,
        run.backfill,
        run.shards[0].assigned_ms,
    )
    copies = counting(monkeypatch, StateView, "active_run")
    d.on_effects(applied.effects, T0 + S)
    [(_, item)] = d.take_outbox()
    assert copies == []
    # The same work item and lease as when it is built from the run (a re-send after a takeover).
    lease = d.leases[item.execution_id]
    monkeypatch.undo()
    slow = DispatchAttempt(eff.run_id, eff.task, eff.nominal_ms, eff.shard, eff.attempt, eff.executor, 1)
    assert slow == eff and not slow.known
    other = Dispatcher(state, SETTINGS, random.Random(7))
    other.become_leader(1, T0)  # it re-sends the assigned attempt, reading the run
    [(_, again)] = other.take_outbox()
    assert again == item
    redo = other.leases[item.execution_id]
    assert (redo.assigned_ms, redo.backfill, redo.deadline_ms) == (
        lease.assigned_ms,
        lease.backfill,
        lease.deadline_ms,
    )


# -- the lease timer ----------------------------------------------------------------------------


def test_the_timer_looks_at_the_leases_only_once_one_may_be_due(monkeypatch: pytest.MonkeyPatch) -> None:
    state, d = setup()
    item = dispatch(state, d, "t", 1, T0 + S)
    looked = counting_function(monkeypatch, leases_module, "_first_due")
    executor = d.leases[item.execution_id].executor
    for now in range(T0 + S, T0 + 4 * S, 50):  # every 50 ms, as the hub's timer ticks
        d.heartbeat(executor, [item.execution_id], now)
        assert not [p for p in d.poll(now) if p.kind == "lost"]
    assert len(looked) <= 2  # not once per tick: the bound moves with the heartbeats
    lost = [p for p in d.poll(T0 + 4 * S + SETTINGS.lease_ms) if p.kind == "lost"]
    assert [r.run_id for p in lost for r in p.command.report_results.results] == [item.run_id]


def test_a_tick_with_nothing_waiting_takes_no_state_view(monkeypatch: pytest.MonkeyPatch) -> None:
    state, d = setup()
    item = dispatch(state, d, "t", 1, T0 + S)  # leased; nothing waits, nothing was inherited
    views = counting(monkeypatch, SchedulerState, "view")
    d.heartbeat(d.leases[item.execution_id].executor, [item.execution_id], T0 + S + 50)
    assert d.poll(T0 + S + 50) == []
    assert views == []
    step(state, d, tick("t", 1, T0 + 2 * S), T0 + 2 * S)  # something waits: the tick reads the state
    views.clear()
    assert [p.kind for p in d.poll(T0 + 2 * S)] == ["assign"]
    assert len(views) == 1


def test_a_renewal_that_moves_an_expiry_earlier_is_noticed_on_time() -> None:
    """A new leader's lease of an inherited attempt runs from the end of the takeover grace; the
    executor's first heartbeat renews it to a nearer expiry, which the timer must not miss."""
    state, d = setup()
    item = dispatch(state, d, "t", 1, T0 + S)
    executor = d.leases[item.execution_id].executor
    successor = Dispatcher(state, SETTINGS, random.Random(1))
    takeover = T0 + 10 * S
    successor.become_leader(2, takeover)
    assert successor.leases[item.execution_id].expires_ms == takeover + 2 * SETTINGS.lease_ms
    assert not successor.poll(takeover)  # looked at once: nothing is due before the grace ends
    successor.heartbeat(executor, [item.execution_id], takeover + 100)  # renewed: nearer
    successor.heartbeat(executor, [], takeover + 2000)  # alive, no longer holding it
    due = takeover + 100 + SETTINGS.lease_ms
    assert not [p for p in successor.poll(due - 1) if p.kind == "lost"]
    lost = [p for p in successor.poll(due) if p.kind == "lost"]
    assert [r.run_id for p in lost for r in p.command.report_results.results] == [item.run_id]


# -- releasing an assignment -----------------------------------------------------------------------


def test_release_gives_back_what_the_proposal_reserved_without_reading_its_command() -> None:
    state, d = setup()
    step(state, d, tick("t", 1, T0 + S), T0 + S)
    [assign] = d.poll(T0 + S)
    [(key, executor)] = assign.assigned
    assert d.used[executor] == 1
    # What it reserved is kept with the proposal: its command is not decoded again.
    d.release(DispatchProposal("assign", logpb.Command(epoch=assign.command.epoch), assign.assigned))
    assert d.used[executor] == 0
    assert d.waiting[key].reserved_for == ""


def test_releasing_a_proposal_that_applied_whole_takes_no_state_view(monkeypatch: pytest.MonkeyPatch) -> None:
    state, d = setup()
    step(state, d, tick("t", 1, T0 + S), T0 + S)
    [assign] = d.poll(T0 + S)
    step(state, d, assign, T0 + S)  # applied: its attempt is leased, nothing of it waits
    views = counting(monkeypatch, SchedulerState, "view")
    d.release(assign)
    assert views == []  # the applier holds the state's lock for whole entries: not asked for it
    assert sum(d.used.values()) == 1  # the lease keeps its slot


# -- retry times -----------------------------------------------------------------------------------


def test_a_success_gets_no_retry_time_and_draws_no_randomness() -> None:
    state, d = setup(retries=1)
    item = dispatch(state, d, "t", 1, T0 + S)
    executor = d.leases[item.execution_id].executor
    before = d.rng.getstate()
    ok = d.results(executor, [pb.ExecResult(execution_id=item.execution_id, success=True)], T0 + 2 * S)
    assert ok is not None
    assert ok.command.report_results.results[0].retry_at_ms == 0
    assert d.rng.getstate() == before
    item = dispatch(state, d, "t", 1, T0 + 3 * S)
    executor = d.leases[item.execution_id].executor
    failed = d.results(executor, [pb.ExecResult(execution_id=item.execution_id, error="boom")], T0 + 4 * S)
    assert failed is not None
    retry_at = failed.command.report_results.results[0].retry_at_ms
    assert T0 + 5 * S <= retry_at <= T0 + 5 * S + 200  # base 1 s backoff + up to 20 % jitter
    assert d.rng.getstate() != before


@pytest.mark.parametrize("retry_at", [T0 + 7 * S, T0 + 2 * S, 0])
def test_apply_reads_no_retry_time_of_a_success(retry_at: int) -> None:
    """Why leaving it out changes no replica: an older leader's entry (a drawn retry time) and a
    newer one's (none) leave the same state."""

    def with_retry_time(value: int) -> str:
        state, d = setup(retries=1)
        item = dispatch(state, d, "t", 1, T0 + S)
        cmd = logpb.Command(epoch=1, now_ms=T0 + 2 * S)
        cmd.report_results.results.add(
            run_id=item.run_id,
            shard=0,
            attempt=1,
            executor=d.leases[item.execution_id].executor,
            success=True,
            retry_at_ms=value,
            duration_ms=5,
        )
        step(state, d, DispatchProposal("results", cmd), T0 + 2 * S)
        [run] = [r for r in runs_of(state, "t") if r.run_id == item.run_id]
        assert run.state == pb.SUCCEEDED
        return domain(state)

    assert with_retry_time(retry_at) == with_retry_time(0)


# -- execution ids ---------------------------------------------------------------------------------


def test_the_servicer_splits_an_execution_id_once_and_hands_the_parts_on() -> None:
    assert _check_execution_id(0, f"t@{T0}/2/3") == (f"t@{T0}", 2, 3)
    state, d = setup()
    item = dispatch(state, d, "t", 1, T0 + S)
    executor = d.leases[item.execution_id].executor
    res = pb.ExecResult(execution_id=item.execution_id, success=True)
    proposal = d.results(executor, [res], T0 + 2 * S, [_check_execution_id(0, res.execution_id)])
    assert proposal is not None
    [r] = proposal.command.report_results.results
    assert (r.run_id, r.shard, r.attempt, r.executor) == (item.run_id, 0, 1, executor)


# -- lateness, run-length encoded ------------------------------------------------------------------


def _samples(seed: int, n: int) -> list[tuple[int, int]]:
    rng = random.Random(seed)
    return [(T0 + rng.randrange(6) * S, rng.choice((0, 5, 40, 41, 250, 999, 3000))) for _ in range(n)]


def _one_by_one(samples: list[tuple[int, int]], since: int) -> pb.LatencySummary:
    """The summary as it was computed fire by fire (the oracle)."""
    values = sorted(late for nominal, late in samples if nominal >= since)
    if not values:
        return pb.LatencySummary()
    n = len(values)
    return pb.LatencySummary(
        count=n,
        p50_ms=float(values[n // 2]),
        p99_ms=float(values[min(n - 1, (n * 99) // 100)]),
        max_ms=float(values[-1]),
        mean_ms=sum(values) / n,
    )


@pytest.mark.parametrize("seed,n", [(1, 1), (2, 2), (3, 99), (4, 100), (5, 101), (6, 2000)])
def test_run_length_lateness_summarises_as_fire_by_fire(seed: int, n: int) -> None:
    samples = _samples(seed, n)
    log = LatenessLog()
    runs = [(nominal, late, count) for (nominal, late), count in Counter(samples).items()]
    log.record_runs(runs[: len(runs) // 2])
    for nominal, late, count in runs[len(runs) // 2 :]:
        for _ in range(count):
            log.record(nominal, late)
    assert log.total == n
    assert len(runs) < n or n <= 2
    for since in (0, T0, T0 + 2 * S, T0 + 5 * S, T0 + 9 * S):
        assert log.summary(since) == _one_by_one(samples, since)


def test_run_length_histogram_counts_as_fire_by_fire() -> None:
    samples = _samples(7, 3000)
    by_fire = Histogram("raftsched_a_seconds", "fire by fire")
    by_run = Histogram("raftsched_b_seconds", "run-length encoded")
    by_fire.observe_many(late / 1000.0 for _, late in samples)
    by_run.observe_counted((late / 1000.0, count) for (_, late), count in Counter(samples).items())

    def points(h: Histogram, name: str) -> dict[tuple[str, str], float]:
        return {(s.name.removeprefix(name), s.labels.get("le", "")): s.value for s in h.collect().samples}

    fire, run = points(by_fire, "raftsched_a_seconds"), points(by_run, "raftsched_b_seconds")
    assert fire.keys() == run.keys()
    sums = [k for k in fire if k[0] == "_sum"]
    assert {k: v for k, v in fire.items() if k not in sums} == {k: v for k, v in run.items() if k not in sums}
    assert fire[("_count", "")] == 3000
    assert [run[k] for k in sums] == pytest.approx([fire[k] for k in sums])


# -- work items to the executors' streams ----------------------------------------------------------


def execution_id_of(work: Work) -> str:
    """The execution id of a work item or a hot row on a stream's queue."""
    return work[0] if isinstance(work, tuple) else work.execution_id


def leading_hub(executors: int = 2) -> tuple[SchedulerState, ExecutorHub]:
    state, d = setup(executors=executors)
    driver = SimpleNamespace(leading=True, ready=True, epoch=1)
    raft = SimpleNamespace(is_leader=lambda: True, epoch=lambda: 1)  # Raft agrees: it leads epoch 1
    gate = LeaderGate("n1", ManualClock(T0 + S), state, driver, lambda: raft, lambda: None)
    return state, ExecutorHub(SimpleNamespace(node_id="n1", state=state, gate=gate), d)


def test_a_flush_puts_one_list_per_executor_on_its_stream() -> None:
    state, hub = leading_hub()
    d = hub.dispatcher
    for i in range(6):
        assert create(state, spec(f"u{i}")).ok
    hub.streams = {"ex1": asyncio.Queue(), "ex2": asyncio.Queue()}
    step(
        state,
        d,
        batch(T0 + S, *[entry(f"u{i}", 1, [fire(T0 + S)], watermark=T0 + S, next_fire=0) for i in range(6)]),
        T0 + S,
    )
    [assign] = d.poll(T0 + S)
    hub._on_effects(state.apply(assign.encode()).effects)
    sent = {name: [q.get_nowait() for _ in range(q.qsize())] for name, q in hub.streams.items()}
    assert sorted(sum(len(items) for items in lists) for lists in sent.values()) != [0, 0]
    for name, lists in sent.items():
        assert len(lists) <= 1  # one put per executor for the whole flush
        for item in (item for items in lists for item in items):
            assert d.leases[execution_id_of(item)].executor == name
    assert sum(len(items) for lists in sent.values() for items in lists) == 6


def test_a_stream_sends_what_is_queued_together_in_messages_of_at_most_max_batch() -> None:
    _, hub = leading_hub()
    servicer = ExecutorServicer(hub)
    items: list[Work] = [pb.WorkItem(execution_id=f"r{i}/0/1") for i in range(MAX_BATCH + 500)]

    async def messages() -> list[list[str]]:
        context = SimpleNamespace(peer=lambda: "ipv4:127.0.0.1:1")
        stream = servicer._stream(pb.DispatchRequest(name="ex1"), context)
        out: list[list[str]] = []
        first = asyncio.ensure_future(anext(stream))
        await asyncio.sleep(0)  # the stream is open and waits on its queue
        queue = hub.streams["ex1"]
        queue.put_nowait(items[:2])
        queue.put_nowait(items[2:3])
        queue.put_nowait(items[3:])
        out.append([i.execution_id for i in await first])
        out.append([i.execution_id for i in await anext(stream)])
        queue.put_nowait(items[:1])
        queue.put_nowait(CLOSE)
        out.extend([[i.execution_id for i in batch] async for batch in stream])
        return out

    ids = [execution_id_of(i) for i in items]
    assert asyncio.run(messages()) == [ids[:MAX_BATCH], ids[MAX_BATCH:], ids[:1]]


# -- a hot attempt's reservation slot becomes its lease's ------------------------------------------


def test_a_hot_dispatch_keeps_its_reservation_slot_for_its_lease(monkeypatch: pytest.MonkeyPatch) -> None:
    """Stage 4: the slot a hot attempt's reservation took on its executor is the one its lease
    holds (no release and take again per attempt); what each executor holds is as before:
    one slot per reservation, then per lease, none once reported."""
    from tests.unit.test_fsm_hot import fire_cols
    from tests.unit.test_session_rows import SPECS, hot_leader

    state, d = hot_leader()
    calls: Counter[str] = Counter()
    for name in ("reserve", "take", "release", "hand_over"):
        original = getattr(leases_module.Holdings, name)

        def counted(*args: Any, _name: str = name, _original: Any = original) -> Any:
            calls[_name] += 1
            return _original(*args)

        monkeypatch.setattr(leases_module.Holdings, name, counted)
    at = T0 + S
    rows = [(state.tasks[s.name].number, 1, at, at + S) for s in SPECS]
    step(state, d, fire_cols(at, rows), at)
    [assign] = d.poll(at)
    reserved = dict(d.used)
    # The reservations: a plain attempt's (a slot, no need, policy or backfill) is taken inline
    # (Placement._reserve), and its hand-over gives back nothing, so neither is called for it.
    assert sum(reserved.values()) == len(SPECS) and calls["reserve"] == 0
    calls.clear()
    step(state, d, assign, at)
    d.release(assign)
    assert dict(d.used) == reserved == dict(Counter(lease.executor for lease in d.leases.values()))
    assert (calls["take"], calls["release"], calls["hand_over"]) == (0, 0, 0)
    for executor, work in d.take_work():
        assert isinstance(work, tuple)
        out = d.results_columns(executor, [(work[1], 0, 1)], [work[0]], [1], [1], [], [], at + 10)
        for proposal in out:
            step(state, d, proposal, at + 10)
    assert not d.leases and sum(d.used.values()) == 0


def test_a_kept_slot_is_given_back_when_the_attempt_already_holds_a_lease() -> None:
    from tests.unit.test_fsm_hot import fire_cols
    from tests.unit.test_session_rows import SPECS, hot_leader

    state, d = hot_leader()
    t = d.term
    assert t is not None
    at = T0 + S
    rows = [(state.tasks[s.name].number, 1, at, at + S) for s in SPECS]
    step(state, d, fire_cols(at, rows), at)
    [assign] = d.poll(at)
    (run_id, shard), executor = assign.assigned[0]
    exec_id = f"{run_id}/{shard}/1"
    # An attempt leased already (as a re-send's) and reserved: it holds one slot, not two.
    t.holdings.take((run_id, shard), executor, NO_NEED)
    t.holdings.lease(leases_module.Lease(exec_id, run_id, run_id.split("@")[0], 0, 1, executor, at + S, 0))
    step(state, d, assign, at)
    d.release(assign)
    assert dict(d.used) == dict(Counter(lease.executor for lease in d.leases.values()))
    assert sum(d.used.values()) == len(SPECS)


def test_an_executor_that_leaves_and_joins_again_keeps_the_slots_of_assignments_in_flight() -> None:
    """An executor's Leave and a new Register are in the log before an assignment the leader had
    already reserved on it (proposed while it was still a member): its death voids its leases
    but not those reservations, which become its leases when the assignment applies after the
    join (or are given back if it is refused). Forgetting their slots there left the executor's
    leases uncounted (one per reservation: a slot hand-over keeps the reservation's slot), so
    it was given more attempts than it has slots."""
    from tests.unit.test_fsm_hot import fire_cols
    from tests.unit.test_session_rows import SPECS, hot_leader

    state, d = hot_leader()
    at = T0 + S
    rows = [(state.tasks[s.name].number, 1, at, at + S) for s in SPECS]
    step(state, d, fire_cols(at, rows), at)
    [assign] = d.poll(at)
    on_ex2 = sum(1 for _, executor in assign.assigned if executor == "ex2")
    assert on_ex2 and d.used["ex2"] == on_ex2
    step(state, d, leave("ex2", at + 1), at + 1)  # its Leave, then its new Register
    step(state, d, join("ex2", 100, at + 2), at + 2)
    step(state, d, assign, at + 3)  # the assignment, proposed before them, applies after
    d.release(assign)
    leased = Counter(lease.executor for lease in d.leases.values())
    assert leased["ex2"] == on_ex2
    assert dict(d.used) == dict(leased)


def test_a_reservation_on_an_executor_that_left_is_given_back_when_its_assignment_is_refused() -> None:
    from tests.unit.test_fsm_hot import fire_cols
    from tests.unit.test_session_rows import SPECS, hot_leader

    state, d = hot_leader()
    at = T0 + S
    rows = [(state.tasks[s.name].number, 1, at, at + S) for s in SPECS]
    step(state, d, fire_cols(at, rows), at)
    [assign] = d.poll(at)
    step(state, d, leave("ex2", at + 1), at + 1)
    step(state, d, assign, at + 2)  # its rows on ex2 are refused: ex2 is gone
    d.release(assign)
    leased = Counter(lease.executor for lease in d.leases.values())
    assert "ex2" not in leased and d.used.get("ex2", 0) == 0
    assert {executor: n for executor, n in d.used.items() if n} == dict(leased)
