"""A new leader's hold on overlap decisions (issue 15): which inherited attempts it waits for and
what ends the wait, step by step on a real state machine.

The hold exists because a run RUNNING in the log at a takeover may have finished long ago, its
result still on the way; a fire decided against it would be a false ``skipped_overlap``. Each
gap closed here let one through in the failover integration test.
"""

from __future__ import annotations

import random

from raftsched import codec
from raftsched.fsm.effects import AttemptReady, DispatchAttempt
from raftsched.fsm.state import SchedulerState
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb
from tests.support.fsm import T0, S, barrier, tick
from tests.unit.test_dispatcher import SETTINGS, setup, step, term

LEASE = SETTINGS.lease_ms
TAKEOVER = T0 + 10 * S


def inherited() -> tuple[SchedulerState, Dispatcher, str, str]:
    """A run RUNNING on its executor when its leader (epoch 1) stopped; a new dispatcher has
    taken over (epoch 2). Returns the state, the new dispatcher, the executor and execution id."""
    state, old = setup()
    step(state, old, tick("t", 1, T0 + S), T0 + S)
    for data in old.poll(T0 + S):
        step(state, old, data, T0 + S)
    [(executor, item)] = old.take_outbox()
    state.apply(barrier(TAKEOVER, 2))
    d = Dispatcher(state, SETTINGS, random.Random(1))
    d.become_leader(2, TAKEOVER)
    d.take_outbox()
    assert d.overlap_unknown("t", 2)
    return state, d, executor, item.execution_id


def _result(d: Dispatcher, executor: str, exec_id: str, now: int) -> bytes:
    proposal = d.results(executor, [pb.ExecResult(execution_id=exec_id, success=True)], now)
    assert proposal is not None
    return proposal.encode()


def test_the_hold_is_in_place_before_the_dispatcher_says_it_leads() -> None:
    """The driver asks from its own thread while the dispatcher takes over: it must never see the
    new epoch led with the inherited attempts not counted yet. (The dispatcher said it led first,
    then counted them: a fire decided in between was skipped against a finished run.)"""
    state, old = setup()
    step(state, old, tick("t", 1, T0 + S), T0 + S)
    for data in old.poll(T0 + S):
        step(state, old, data, T0 + S)
    d = Dispatcher(state, SETTINGS, random.Random(1))
    seen: list[bool] = []
    real = state.pending_attempts

    def pending_attempts() -> list[AttemptReady | DispatchAttempt]:
        seen.append(d.overlap_unknown("t", 2))  # the driver's thread, mid-takeover
        out = real()
        seen.append(d.overlap_unknown("t", 2))
        return out

    state.pending_attempts = pending_attempts  # type: ignore[method-assign]
    d.become_leader(2, TAKEOVER)
    assert seen == [True, True]
    assert d.overlap_unknown("t", 2)  # and after it: the inherited attempt is unconfirmed
    assert not d.overlap_unknown("other", 2)


def test_a_heartbeat_listing_the_attempt_as_running_ends_the_wait() -> None:
    _, d, executor, exec_id = inherited()
    assert d.heartbeat(executor, [exec_id], TAKEOVER + 100, started=[exec_id])
    assert not d.overlap_unknown("t", 2)  # it still runs: an overlap with it is real


def test_a_heartbeat_listing_it_as_finished_keeps_the_wait_until_its_result_is_applied() -> None:
    """The executor lists finished attempts whose report is not acknowledged among ``running``
    (to keep their leases). The first heartbeat to a new leader goes out with the report; taking
    it as "still runs" released the hold before the result committed."""
    state, d, executor, exec_id = inherited()
    assert d.heartbeat(executor, [exec_id], TAKEOVER + 100, started=[exec_id], finished=[exec_id])
    assert d.overlap_unknown("t", 2)
    assert d.leases[exec_id].expires_ms == TAKEOVER + 100 + LEASE  # its lease is renewed all the same
    data = _result(d, executor, exec_id, TAKEOVER + 150)
    # Proposed, not applied: a fire planned now would enter the log ahead of the result.
    assert d.overlap_unknown("t", 2)
    d.poll(TAKEOVER + 160)
    assert d.overlap_unknown("t", 2)
    step(state, d, data, TAKEOVER + 200)
    assert not d.overlap_unknown("t", 2)
    assert "t" not in state.active_per_task


def test_a_result_is_known_at_the_next_poll_when_its_entry_has_no_effects() -> None:
    state, d, executor, exec_id = inherited()
    data = _result(d, executor, exec_id, TAKEOVER + 150)
    state.apply(data)  # applied; the dispatcher is not shown its (empty) effects
    assert d.overlap_unknown("t", 2)
    d.poll(TAKEOVER + 200)
    assert not d.overlap_unknown("t", 2)


def test_a_lost_lease_ends_the_wait_once_the_loss_is_applied() -> None:
    state, d, _, exec_id = inherited()
    expiry = d.leases[exec_id].expires_ms
    assert expiry == TAKEOVER + 2 * LEASE  # the takeover grace plus one lease
    commands = d.poll(expiry)
    lost = [c for c in commands if c.command.WhichOneof("body") == "report_results"]
    assert lost and lost[0].command.report_results.results[0].lost
    assert d.overlap_unknown("t", 2)  # proposed, not applied
    for c in commands:
        step(state, d, c, expiry)
    assert not d.overlap_unknown("t", 2)


def test_the_wait_is_bounded_by_the_takeover_grace_plus_one_lease() -> None:
    """An executor that keeps its finished attempt's lease alive but whose report never commits
    holds the task's fires for no longer than the first lease would have lasted."""
    _, d, executor, exec_id = inherited()
    bound = TAKEOVER + 2 * LEASE
    for now in range(TAKEOVER + 300, bound, 300):
        d.heartbeat(executor, [exec_id], now, started=[exec_id], finished=[exec_id])
        d.heartbeat("ex1" if executor == "ex2" else "ex2", [], now)
        d.poll(now)
        assert d.overlap_unknown("t", 2), now
    d.heartbeat(executor, [exec_id], bound, started=[exec_id], finished=[exec_id])
    d.poll(bound)
    assert not d.overlap_unknown("t", 2)
    assert exec_id in d.leases  # the lease itself lives on: only the wait ended


def test_a_result_proposed_at_the_bound_still_gets_a_lease_to_apply() -> None:
    state, d, executor, exec_id = inherited()
    bound = TAKEOVER + 2 * LEASE
    data = _result(d, executor, exec_id, bound - 10)
    d.poll(bound)
    assert d.overlap_unknown("t", 2)
    step(state, d, data, bound + 50)
    assert not d.overlap_unknown("t", 2)


def test_a_dead_executor_ends_the_wait_for_its_attempts() -> None:
    state, d, executor, _ = inherited()
    cmd = logpb.Command(epoch=2, now_ms=TAKEOVER + 100)
    cmd.executor_leave.name = executor
    cmd.executor_leave.dead = True
    cmd.executor_leave.reason = "test"
    cmd.executor_leave.retry_at_ms = TAKEOVER + 100
    step(state, d, codec.encode_command(cmd), TAKEOVER + 100)
    assert not d.overlap_unknown("t", 2)


def test_an_old_executor_without_the_finished_list_is_taken_at_its_word() -> None:
    """An executor that predates ``finished`` says nothing of it: as before, listed = running."""
    _, d, executor, exec_id = inherited()
    d.heartbeat(executor, [exec_id], TAKEOVER + 100, started=[exec_id])
    assert not d.overlap_unknown("t", 2)


def test_stepping_down_forgets_the_wait() -> None:
    _, d, _, _ = inherited()
    assert term(d).takeover.unknown_tasks == {"t": 1}
    d.step_down()
    assert d.term is None  # the takeover's state went with the term
    assert d.overlap_unknown("t", 2)  # not leading epoch 2 any more: the driver must not decide


# -- issue 35 §1: committed, never delivered ------------------------------------------------------


def test_an_attempt_its_executor_does_not_list_is_sent_again_at_once_and_holds_until_it_starts() -> None:
    """The old leader committed the assignment and stopped before the dispatch went out. The
    executor's first heartbeat to the new leader does not list it: it is sent again right away
    (not when its lease expires), and the task's fires wait until it has started."""
    _, d, executor, exec_id = inherited()
    assert d.heartbeat(executor, [], TAKEOVER + 100, started=[])
    [(to, item)] = d.take_outbox()
    assert (to, item.execution_id) == (executor, exec_id)
    assert term(d).takeover.resent_unheld == 1
    assert d.overlap_unknown("t", 2)  # not running: a fire skipped now would be false
    # Held but not started yet (waiting for the re-send on its new stream): still unknown.
    assert d.heartbeat(executor, [exec_id], TAKEOVER + 150, started=[])
    assert d.overlap_unknown("t", 2)
    assert d.take_outbox() == []  # only the first heartbeat re-sends
    assert d.heartbeat(executor, [exec_id], TAKEOVER + 200, started=[exec_id])
    assert not d.overlap_unknown("t", 2)  # started: an overlap with it is real


def test_an_attempt_the_old_leader_fired_but_never_assigned_holds_the_fires_until_it_starts() -> None:
    """The old leader committed the run and stopped before its assignment: at the takeover the
    attempt is READY. It was inherited by nobody, so the new leader decided on-time fires at once
    as skipped_overlap against a run that had not started (5-6 per stall, measured)."""
    state, _ = setup()
    step(state, Dispatcher(state, SETTINGS, random.Random(1)), tick("t", 1, T0 + S), T0 + S)
    state.apply(barrier(TAKEOVER, 2))
    d = Dispatcher(state, SETTINGS, random.Random(1))
    d.become_leader(2, TAKEOVER)
    assert d.overlap_unknown("t", 2)
    [assign] = d.poll(TAKEOVER + 10)
    step(state, d, assign, TAKEOVER + 10)
    [(executor, item)] = d.take_outbox()
    assert d.overlap_unknown("t", 2)  # assigned, not started
    d.heartbeat(executor, [item.execution_id], TAKEOVER + 300, started=[item.execution_id])
    assert not d.overlap_unknown("t", 2)


def test_a_run_fired_before_an_executor_found_the_new_leader_holds_until_it_starts() -> None:
    """A new run of the new leader, for an executor still waiting on the old one: a fire
    decided against it would be skipped against a run that has not started."""
    state, d, executor, exec_id = inherited()
    d.heartbeat(executor, [exec_id], TAKEOVER + 100, started=[exec_id])
    assert not d.overlap_unknown("t", 2)
    other = "ex1" if executor == "ex2" else "ex2"
    assert other in term(d).liveness.unconfirmed  # it has not heartbeated this leader yet
    step(state, d, _result(d, executor, exec_id, TAKEOVER + 200), TAKEOVER + 200)
    step(state, d, tick("t", 1, TAKEOVER + 1000, epoch=2), TAKEOVER + 1000)
    assert d.overlap_unknown("t", 2)  # its attempt may wait for `other`
    for data in d.poll(TAKEOVER + 1000):
        step(state, d, data, TAKEOVER + 1000)
    [(to, item)] = d.take_outbox()
    d.heartbeat(to, [item.execution_id], TAKEOVER + 1100, started=[item.execution_id])
    assert not d.overlap_unknown("t", 2)
    d.heartbeat(other, [], TAKEOVER + 1200)
    assert not term(d).liveness.unconfirmed  # every executor reached the new leader: nothing new is held
    step(state, d, _result(d, to, item.execution_id, TAKEOVER + 1300), TAKEOVER + 1300)
    step(state, d, tick("t", 1, TAKEOVER + 2000, epoch=2), TAKEOVER + 2000)
    assert not d.overlap_unknown("t", 2)
