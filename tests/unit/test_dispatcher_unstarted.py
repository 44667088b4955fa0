"""What the leader's dispatcher knows of started attempts, and the closed-stream signal."""

from __future__ import annotations

import dataclasses

from raftsched.fsm.state import SchedulerState
from raftsched.leader.dispatch.dispatcher import Dispatcher, DispatchProposal
from raftsched.v1 import log_pb2 as logpb
from tests.support.fsm import T0, S, tick
from tests.unit.test_dispatcher import SETTINGS, setup, step


def dispatched(state: SchedulerState, d: Dispatcher) -> tuple[str, str]:
    step(state, d, tick("t", 1, T0 + S), T0 + S)
    for data in d.poll(T0 + S):
        step(state, d, data, T0 + S)
    [(executor, item)] = d.take_outbox()
    return executor, item.execution_id


def bodies(commands: list[DispatchProposal], kind: str) -> list[logpb.Command]:
    cmds = [c.command for c in commands]
    return [c for c in cmds if c.WhichOneof("body") == kind]


def test_a_lease_lost_before_the_executor_said_it_started_is_reported_unstarted() -> None:
    state, d = setup(retries=0)
    executor, exec_id = dispatched(state, d)
    assert d.leases[exec_id].started is False  # nothing was sent before this leader's dispatch
    d.heartbeat(executor, [exec_id], T0 + 2 * S, started=[])  # holds it, has not started it
    assert d.unstarted_of(executor) == [exec_id]
    [lost] = bodies(d.poll(T0 + 6 * S), "report_results")
    res = lost.report_results.results[0]
    assert res.lost and res.unstarted and res.retry_at_ms == T0 + 6 * S  # at once, no backoff


def test_once_started_an_attempt_stays_started() -> None:
    state, d = setup(retries=0)
    executor, exec_id = dispatched(state, d)
    d.heartbeat(executor, [exec_id], T0 + 2 * S, started=[exec_id])
    d.heartbeat(executor, [exec_id], T0 + 3 * S, started=[])  # an older view: ignored
    assert d.leases[exec_id].started is True
    [lost] = bodies(d.poll(T0 + 7 * S), "report_results")
    assert not lost.report_results.results[0].unstarted


def test_an_executor_that_does_not_report_starts_counts_everything_as_started() -> None:
    state, d = setup(retries=0)
    executor, exec_id = dispatched(state, d)
    d.heartbeat(executor, [exec_id], T0 + 2 * S)
    assert d.leases[exec_id].started is True and d.unstarted_of(executor) == []


def test_after_a_takeover_nothing_is_known_unstarted_until_a_heartbeat_says_so() -> None:
    state, d = setup(retries=0)
    executor, exec_id = dispatched(state, d)
    d.become_leader(2, T0 + 2 * S)
    assert d.leases[exec_id].started is None and d.unstarted_of(executor) == []
    d.heartbeat(executor, [exec_id], T0 + 2 * S, started=[])
    assert d.unstarted_of(executor) == [exec_id]


def test_a_closed_stream_declares_its_executor_dead_after_the_grace_unless_it_reopens() -> None:
    state, d = setup(retries=0)
    d.settings = dataclasses.replace(SETTINGS, stream_grace_ms=1000)  # the lease is 3 s
    grace = d.settings.stream_grace_ms
    executor, exec_id = dispatched(state, d)
    other = "ex1" if executor == "ex2" else "ex2"
    now = T0 + 2 * S
    for name in (executor, other):
        d.heartbeat(name, [exec_id] if name == executor else [], now, started=[])
    # Reopened within the grace: nothing happens.
    d.stream_closed(other, now)
    d.stream_opened(other)
    d.stream_closed(executor, now)
    assert not bodies(d.poll(now + grace - 1), "executor_leave")
    [leave] = bodies(d.poll(now + grace), "executor_leave")
    assert leave.executor_leave.name == executor and leave.executor_leave.dead
    assert list(leave.executor_leave.unstarted) == [exec_id]
    assert "stream closed" in leave.executor_leave.reason
    applied = step(state, d, leave.SerializeToString(), now + grace)
    assert applied.ok
    run = state.active_run(exec_id.split("/")[0])
    assert run is not None and (run.shards[0].attempt, run.shards[0].unstarted) == (2, 1)
