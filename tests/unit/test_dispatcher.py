"""The leader's dispatcher on a real state machine: placement by ring and free slots (never
overcommitted), commit before dispatch, leases and heartbeats, dead executors, retries."""

from __future__ import annotations

import random

import pytest

from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.leader.dispatch.dispatcher import Dispatcher, DispatchProposal, Term
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.model import Lock, LockMode, ManualTrigger, TaskSpec
from raftsched.sharding.ring import ShardRing
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb
from tests.support.fsm import EVERY_SECOND, T0, S, create, fresh, join, tick

SETTINGS = DispatchSettings(lease_ms=3000, retry_base_ms=1000, retry_cap_ms=8000, retry_jitter=0.2)


def setup(
    shards: int = 1, retries: int = 0, slots: int = 2, executors: int = 2
) -> tuple[SchedulerState, Dispatcher]:
    state = fresh()
    assert create(
        state, TaskSpec("t", EVERY_SECOND, shards=shards, max_retries=retries, timeout_ms=0, command="true")
    ).ok
    for i in range(executors):
        assert state.apply(join(f"ex{i + 1}", slots)).result.ok
    d = Dispatcher(state, SETTINGS, random.Random(7))
    d.become_leader(1, T0)
    return state, d


def step(
    state: SchedulerState, d: Dispatcher, data: bytes | DispatchProposal, now: int
) -> logpb.CommandResult:
    """Apply a command as the log would, and feed its effects to the dispatcher."""
    applied = state.apply(data.encode() if isinstance(data, DispatchProposal) else data)
    d.on_effects(applied.effects, now)
    return applied.result


def term(d: Dispatcher) -> Term:
    """The dispatcher's current leadership state (it must lead)."""
    assert d.term is not None, "the dispatcher does not lead"
    return d.term


def test_nothing_is_sent_before_its_assignment_commits() -> None:
    state, d = setup()
    step(state, d, tick("t", 1, T0 + S), T0 + S)
    assert d.take_outbox() == []  # fired and committed, but not yet assigned
    [assign] = d.poll(T0 + S)
    assert d.take_outbox() == []  # proposed, not committed
    step(state, d, assign, T0 + S)
    [(executor, item)] = d.take_outbox()
    assert executor == ShardRing(["ex1", "ex2"]).owner("t", 0)
    assert (item.execution_id, item.epoch, item.shards) == (f"t@{T0 + S}/0/1", 1, 1)


def test_slots_are_never_overcommitted_and_the_rest_wait_their_turn() -> None:
    state, d = setup(shards=10, slots=2)
    step(state, d, tick("t", 1, T0 + S), T0 + S)
    sent = []
    for now in range(T0 + S, T0 + 4 * S, 100):
        for name in ("ex1", "ex2"):
            d.heartbeat(name, [e for e, lease in d.leases.items() if lease.executor == name], now)
        for data in d.poll(now):
            step(state, d, data, now)
        sent += d.take_outbox()
        per_executor: dict[str, int] = {}
        for lease in d.leases.values():
            per_executor[lease.executor] = per_executor.get(lease.executor, 0) + 1
        assert all(n <= 2 for n in per_executor.values())
    assert len(sent) <= 4  # two executors x two slots, nothing finished
    assert d.backlog == 10 - len(sent)
    # A result frees a slot: the next waiting shard of that executor goes out.
    executor, item = sent[0]
    res = d.results(executor, [pb.ExecResult(execution_id=item.execution_id, success=True)], T0 + 5 * S)
    assert res is not None
    step(state, d, res, T0 + 5 * S)
    for name in ("ex1", "ex2"):
        d.heartbeat(name, [e for e, lease in d.leases.items() if lease.executor == name], T0 + 5 * S)
    for data in d.poll(T0 + 5 * S):
        step(state, d, data, T0 + 5 * S)
    assert len(d.take_outbox()) >= 1


def test_heartbeats_keep_leases_and_silence_expires_them_into_a_retry() -> None:
    state, d = setup(retries=1)
    step(state, d, tick("t", 1, T0 + S), T0 + S)
    for data in d.poll(T0 + S):
        step(state, d, data, T0 + S)
    [(executor, item)] = d.take_outbox()
    other = "ex1" if executor == "ex2" else "ex2"
    assert d.heartbeat(executor, [item.execution_id], T0 + 3 * S)
    assert d.heartbeat(other, [], T0 + 3 * S)
    assert not [c for c in d.poll(T0 + 5 * S) if c.command.WhichOneof("body") == "report_results"]
    commands = d.poll(T0 + 7 * S)  # no heartbeat for its attempt since T0+3s: lease lost
    bodies = [c.command for c in commands]
    lost = [c for c in bodies if c.WhichOneof("body") == "report_results"]
    assert lost and lost[0].report_results.results[0].lost
    retry_at = lost[0].report_results.results[0].retry_at_ms
    assert T0 + 8 * S <= retry_at <= T0 + 8 * S + 200  # base 1 s backoff + up to 20 % jitter
    for c in commands:
        step(state, d, c, T0 + 7 * S)
    run = state.active_run(f"t@{T0 + S}")
    assert run is not None and (run.shards[0].attempt, run.shards[0].lost) == (2, 1)


def test_a_silent_executor_is_declared_dead_once() -> None:
    _, d = setup()
    # A new leader gives executors one extra lease (3 s here) to find it before judging them.
    d.heartbeat("ex1", [], T0 + 5 * S)
    assert not [c for c in d.poll(T0 + 5 * S) if c.command.WhichOneof("body") == "executor_leave"]
    first = [c.command for c in d.poll(T0 + 7 * S)]
    assert [c.executor_leave.name for c in first if c.WhichOneof("body") == "executor_leave"] == ["ex2"]
    again = [c.command for c in d.poll(T0 + 7 * S + 100)]
    assert not [c for c in again if c.WhichOneof("body") == "executor_leave"]


def test_a_new_leader_resends_assigned_attempts_to_the_same_executor_with_fresh_leases() -> None:
    state, d = setup()
    step(state, d, tick("t", 1, T0 + S), T0 + S)
    for data in d.poll(T0 + S):
        step(state, d, data, T0 + S)
    [(executor, item)] = d.take_outbox()
    successor = Dispatcher(state, SETTINGS, random.Random(1))
    successor.become_leader(2, T0 + 10 * S)
    [(again_to, again)] = successor.take_outbox()
    assert (again_to, again.execution_id, again.epoch) == (executor, item.execution_id, 2)
    # A fresh lease, plus the takeover grace of one more lease.
    assert successor.leases[item.execution_id].expires_ms == T0 + 10 * S + 2 * SETTINGS.lease_ms


def test_a_new_leadership_starts_from_a_fresh_term() -> None:
    """Nothing a leadership learned outlives it: stepping down drops its term, and taking over
    again builds a new one from the replicated state alone."""
    state, d = setup()
    step(state, d, tick("t", 1, T0 + S), T0 + S)
    d.heartbeat("ex1", [], T0 + 5 * S)
    proposals = d.poll(T0 + 7 * S)  # ex2 silent: declared dead (not applied); t's attempt placed
    assert {p.kind for p in proposals} == {"dead", "assign"}
    first = term(d)
    assert first.liveness.declared_dead == {"ex2"} and first.holdings.used
    d.step_down()
    assert d.term is None and not d.leading and d.poll(T0 + 7 * S) == [] and d.take_outbox() == []
    d.become_leader(2, T0 + 8 * S)
    again = term(d)
    assert again is not first and again.epoch == 2
    assert not again.liveness.declared_dead and not again.holdings.used  # the reservation was not applied
    assert list(d.waiting) == [(f"t@{T0 + S}", 0)]  # from the state: the attempt still waits


def test_a_refused_assignment_is_released_for_another_try() -> None:
    state, d = setup()
    step(state, d, tick("t", 1, T0 + S), T0 + S)
    [assign] = d.poll(T0 + S)
    d.release(assign)  # the proposal failed
    assert all(not w.reserved_for for w in d.waiting.values())
    assert d.poll(T0 + S)  # placed again


def test_a_late_release_from_an_earlier_term_leaves_the_new_terms_reservation() -> None:
    """A proposal of a previous leadership completing after this node took over again must not
    free what the new term reserved: the attempt would be placed twice."""
    state, d = setup()
    step(state, d, tick("t", 1, T0 + S), T0 + S)
    [old] = d.poll(T0 + S)
    d.step_down()
    d.become_leader(2, T0 + S)
    [new] = d.poll(T0 + S)
    assert new.kind == "assign" and new.command.epoch == 2
    d.release(old)  # the first term's proposal completes late
    assert all(w.reserved_for for w in d.waiting.values())
    assert d.poll(T0 + S) == []  # not placed again while the new term's proposal is in flight
    d.release(new)
    assert all(not w.reserved_for for w in d.waiting.values())


def test_a_second_barrier_of_the_same_leadership_keeps_the_term() -> None:
    """The driver proposes another barrier in the same epoch when the first's outcome was
    unknown; its BarrierCommitted must not start a new term, which would forget the reservation
    of a proposal in flight and place the same attempt again."""
    state, d = setup()
    step(state, d, tick("t", 1, T0 + S), T0 + S)
    first = term(d)
    [assign] = d.poll(T0 + S)
    d.become_leader(1, T0 + S)  # the second barrier of epoch 1
    assert term(d) is first
    assert d.poll(T0 + S) == []  # still reserved: not placed twice
    d.release(assign)
    assert all(not w.reserved_for for w in d.waiting.values())


# -- workflows: backfill share and killed runs ------------------------------------------------------


def workflow_setup(runs: int, share: int, slots: int = 5) -> tuple[SchedulerState, Dispatcher]:
    from raftsched import codec

    state = fresh()
    assert state.apply(join("ex1", slots)).result.ok
    spec = pb.WorkflowSpec(name="wf", backfill_share_pct=share)
    spec.tasks.add(name="only", command="true")
    cmd = logpb.Command(epoch=1, now_ms=T0)
    cmd.apply_workflow.spec.CopyFrom(spec)
    assert state.apply(codec.encode_command(cmd)).result.ok
    d = Dispatcher(state, SETTINGS, random.Random(7))
    d.become_leader(1, T0)
    cmd = logpb.Command(epoch=1, now_ms=T0)
    cmd.start_backfill.workflow = "wf"
    cmd.start_backfill.logical_ms.extend(T0 - (i + 1) * 86_400_000 for i in range(runs))
    assert step(state, d, codec.encode_command(cmd), T0).ok
    return state, d


def test_backfill_takes_at_most_its_share_of_the_slots() -> None:
    state, d = workflow_setup(runs=10, share=40, slots=5)  # 40 % of 5 slots: 2
    for data in d.poll(T0):
        step(state, d, data, T0)
    assert len(d.take_outbox()) == 2
    assert d.poll(T0 + 100) == []  # the share is used up although three slots are free
    assert d.backlog == 8


def test_regular_work_goes_first_and_backfill_only_fills_what_it_leaves() -> None:
    state, d = workflow_setup(runs=10, share=100, slots=3)
    assert create(state, TaskSpec("t", EVERY_SECOND, shards=2, command="true")).ok
    d.on_effects(state.apply(tick("t", 1, T0 + S)).effects, T0 + S)
    [assign] = d.poll(T0 + S)
    step(state, d, assign, T0 + S)
    sent = [item.task for _, item in d.take_outbox()]
    assert sorted(sent) == ["t", "t", "wf#only"]


def test_killing_a_workflow_run_cancels_its_running_attempt_on_the_executor() -> None:
    from raftsched import codec

    state, d = workflow_setup(runs=1, share=100)
    for data in d.poll(T0):
        step(state, d, data, T0)
    [(executor, item)] = d.take_outbox()
    assert d.leases
    cmd = logpb.Command(epoch=1, now_ms=T0 + S)
    cmd.workflow_run_op.op = pb.WorkflowRunOp.KILL
    cmd.workflow_run_op.run_id = state.list_workflow_runs("wf")[0].run_id
    assert step(state, d, codec.encode_command(cmd), T0 + S).ok
    [(to, cancel)] = d.take_outbox()
    assert (to, cancel.execution_id, cancel.cancel) == (executor, item.execution_id, True)
    assert not d.leases and not term(d).holdings.backfill_busy


# -- admission: one check for every placement path ---------------------------------------------------


@pytest.mark.parametrize("cpu", [0.0, 1.0], ids=["ring-owner", "sized"])
def test_every_placement_path_records_lock_waits_and_lets_no_shared_holder_starve_a_waiter(
    cpu: float,
) -> None:
    """An attempt held back by a lock is named in the command with its reason, and a later attempt
    that wants a lock an earlier waiter waits for waits too (else a stream of shared holders
    starves an exclusive waiter). Attempts that declare cpu (``sized``) walk the ring by another
    path; it used to skip both (issue 27)."""
    from tests.unit.test_placement import join as join_sized

    state = fresh()
    assert state.apply(join_sized("ex1", slots=4, cpu=8)).result.ok
    for name, mode in (("hold", LockMode.SHARED), ("x", LockMode.EXCLUSIVE), ("s", LockMode.SHARED)):
        spec = TaskSpec(name, ManualTrigger(), command="x", resource_cpu=cpu, locks=(Lock("db", mode),))
        assert create(state, spec).ok
    d = Dispatcher(state, SETTINGS, random.Random(7))
    d.become_leader(1, T0)
    step(state, d, writes.trigger_now("hold", "", now_ms=T0 + 1, epoch=1, origin="n1", key=""), T0 + 1)
    [assign] = d.poll(T0 + 1)
    step(state, d, assign, T0 + 1)
    assert [v.name for v in state.locks()] == ["db"]  # hold runs, sharing db
    for i, name in enumerate(("x", "s"), start=2):
        step(state, d, writes.trigger_now(name, "", now_ms=T0 + i, epoch=1, origin="n1", key=""), T0 + i)
    [cmd] = [c.command for c in d.poll(T0 + 10)]
    waits = {w.run_id.partition("@")[0]: w.reason for w in cmd.assign_attempts.waits}
    assert waits == {"x": "lock db: held", "s": "lock db: held"}
    assert not cmd.assign_attempts.assignments  # s may share db with hold, but x waits first
    step(state, d, cmd.SerializeToString(), T0 + 10)
    assert d.poll(T0 + 11) == []  # the reasons are recorded once, not on every tick


# -- holdings: what a reservation or a lease takes is given back in one place ------------------------


def test_holdings_give_back_everything_a_reservation_or_a_lease_took() -> None:
    from raftsched.fsm.policy import Need as PolicyNeed
    from raftsched.leader.dispatch.leases import Holdings, Lease
    from raftsched.sharding.placement import Need

    def empty(h: Holdings) -> bool:
        return (
            not any(h.used.values())
            and h.held.used("ex1") == (0, 0.0, 0)
            and not h.backfill_busy
            and not h.reserved.by_key
        )

    h = Holdings()
    key, need, policy = ("r", 0), Need(cpu=2.0, memory_mb=512), PolicyNeed((), (Lock("db"),))
    h.reserve(key, "ex1", need, policy, backfill=True)  # proposed, not applied
    assert (h.used["ex1"], h.held.used("ex1"), h.reserved.exclusive) == (1, (1, 2.0, 512), {"db": 1})
    h.release(key, "ex1")  # the proposal failed
    assert empty(h)
    h.take(key, "ex1", need)  # assigned and leased
    h.leases["r/0/1"] = Lease("r/0/1", "r", "t", 0, 1, "ex1", expires_ms=1, deadline_ms=0)
    h.backfill_busy.add(key)
    assert h.drop("r/0/1") is not None and empty(h)
    assert h.drop("r/0/1") is None and empty(h)  # twice is harmless
    h.take(key, "ex1", need)
    h.leases["r/0/1"] = Lease("r/0/1", "r", "t", 0, 1, "ex1", expires_ms=1, deadline_ms=0)
    assert h.void("ex1") == ["r/0/1"] and empty(h) and not h.leases  # its executor died


def test_holdings_give_back_a_plain_attempt_without_touching_what_others_hold() -> None:
    """A plain attempt (no declared need, not backfill, no quota or lock) is handed over and
    dropped by the fast paths (nothing of those kinds checked for it while nothing is held, and
    only its own key while something is): another attempt's cpu, memory, backfill place and
    locks stay held until its own release."""
    from raftsched.fsm.policy import Need as PolicyNeed
    from raftsched.leader.dispatch.leases import Holdings, Lease
    from raftsched.sharding.placement import NO_NEED, Need

    h = Holdings()
    plain, sized = ("p", 0), ("s", 0)
    h.reserve(plain, "ex1", NO_NEED, None, backfill=False)
    h.hand_over(plain)  # nothing else held: the fast path
    assert h.used == {"ex1": 1} and not h.held.running and not h.reserved.by_key
    h.reserve(sized, "ex1", Need(cpu=1.0, memory_mb=64), PolicyNeed((), (Lock("db"),)), backfill=True)
    h.leases["p/0/1"] = Lease("p/0/1", "p", "t", 0, 1, "ex1", expires_ms=5, deadline_ms=3)
    h.check_at = 10
    h.lease(h.leases["p/0/1"])
    assert h.check_at == 3  # its deadline comes before its expiry
    assert h.drop("p/0/1") is not None
    assert h.used == {"ex1": 1} and h.held.used("ex1") == (1, 1.0, 64)
    assert h.backfill_busy == {sized} and h.reserved.exclusive == {"db": 1}
    h.hand_over(plain)  # again, while another holds: harmless
    assert h.backfill_busy == {sized} and sized in h.reserved.by_key and sized in h.held.running
    h.release(sized, "ex1")
    assert not any(h.used.values()) and not h.held.running and not h.backfill_busy and not h.reserved.by_key
