"""Run timelines in the state machine, on a manual clock: every transition of a run and its
attempts is appended in apply with the command's leader time, bounded per run."""

from __future__ import annotations

from raftsched.fsm.timeline import TIMELINE_CAP, describe
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import T0, S, apply, assign, leave, one_run, result, run_of


def events(run: pb.Run) -> list[tuple[str, int, int, str]]:
    return [(e.event, e.at_ms, e.attempt, e.executor) for e in run.timeline]


def test_create_assign_start_and_finish_with_exit_code_and_duration() -> None:
    state, run_id = one_run()
    assert events(run_of(state, run_id)) == [("created", T0 + S, 0, "")]
    assert run_of(state, run_id).timeline[0].reason == "fire"
    apply(state, assign(T0 + S + 5, (run_id, 0, 1, "ex1")))
    res = result(T0 + 3 * S, run_id, 1, "ex1", True, exit_code=0, duration_ms=1500, start_lateness_ms=40)
    assert apply(state, res).accounted == 1
    run = run_of(state, run_id)
    assert events(run) == [
        ("created", T0 + S, 0, ""),
        ("assigned", T0 + S + 5, 1, "ex1"),
        ("started", T0 + S + 40, 1, "ex1"),  # nominal + the executor's measured lateness
        ("succeeded", T0 + 3 * S, 1, "ex1"),
    ]
    done = run.timeline[-1]
    assert (done.exit_code, done.duration_ms) == (0, 1500)
    assert describe(done) == "succeeded shard 0 attempt 1 on ex1 exit 0 in 1500 ms"


def test_failure_schedules_a_retry_for_when_and_a_signal_is_told_apart() -> None:
    state, run_id = one_run(retries=1)
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
    retry_at = T0 + 61 * S
    apply(
        state, result(T0 + 2 * S, run_id, 1, "ex1", False, exit_code=-9, error="killed", retry_at_ms=retry_at)
    )
    run = run_of(state, run_id)
    failed, retry = run.timeline[-2], run.timeline[-1]
    assert (failed.event, failed.exit_code, failed.reason) == ("failed", -9, "killed")
    assert "signal 9" in describe(failed)
    assert (retry.event, retry.at_ms, retry.attempt, retry.retry_at_ms) == (
        "retry_scheduled",
        T0 + 2 * S,
        2,
        retry_at,
    )
    apply(state, assign(retry_at, (run_id, 0, 2, "ex2")))
    apply(state, result(retry_at + S, run_id, 2, "ex2", False, timed_out=True, error="timeout"))
    run = run_of(state, run_id)
    assert [e.event for e in run.timeline] == [
        "created",
        "assigned",
        "failed",
        "retry_scheduled",
        "assigned",
        "timed_out",
    ]
    assert run.state == pb.FAILED


def test_lease_expired_and_executor_lost_are_recorded_before_the_retry() -> None:
    state, run_id = one_run(retries=2)
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
    lost = result(
        T0 + 5 * S, run_id, 1, "", False, lost=True, error="lease expired: ex1 silent", retry_at_ms=T0 + 6 * S
    )
    assert apply(state, lost).accounted == 1
    apply(state, assign(T0 + 6 * S, (run_id, 0, 2, "ex2")))
    assert apply(state, leave("ex2", T0 + 7 * S, retry_at=T0 + 8 * S)).ok
    run = run_of(state, run_id)
    assert events(run)[2:] == [
        ("lease_expired", T0 + 5 * S, 1, "ex1"),
        ("retry_scheduled", T0 + 5 * S, 2, ""),
        ("assigned", T0 + 6 * S, 2, "ex2"),
        ("executor_lost", T0 + 7 * S, 2, "ex2"),
        ("retry_scheduled", T0 + 7 * S, 3, ""),
    ]
    assert run.timeline[2].reason == "lease expired: ex1 silent"
    assert run.timeline[-1].retry_at_ms == T0 + 8 * S


def test_timeline_is_bounded_keeping_created_and_counting_the_dropped() -> None:
    state, run_id = one_run(retries=100)
    now = T0 + S
    for attempt in range(1, 40):  # three entries per attempt: assigned, failed, retry_scheduled
        apply(state, assign(now, (run_id, 0, attempt, "ex1")))
        apply(state, result(now + 1, run_id, attempt, "ex1", False, exit_code=1, retry_at_ms=now + 2))
        now += 2
    run = run_of(state, run_id)
    assert len(run.timeline) == TIMELINE_CAP
    assert run.timeline[0].event == "created"
    assert run.timeline_dropped == 1 + 3 * 39 - TIMELINE_CAP
    assert (run.timeline[-1].event, run.timeline[-1].attempt) == ("retry_scheduled", 40)


def test_the_same_commands_give_every_replica_the_same_timeline() -> None:
    a, run_id = one_run(retries=1)
    b, _ = one_run(retries=1)
    for state in (a, b):
        apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
        apply(state, result(T0 + 2 * S, run_id, 1, "ex1", False, exit_code=2, retry_at_ms=T0 + 3 * S))
    assert run_of(a, run_id).SerializeToString(deterministic=True) == run_of(b, run_id).SerializeToString(
        deterministic=True
    )
