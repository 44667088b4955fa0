"""The state machine's executor side: membership, assignment (commit before dispatch), fencing of
results by attempt and executor, retries with leader-chosen backoff, alerts, lost attempts."""

from __future__ import annotations

import pytest

from raftsched import codec
from raftsched.fsm import keys
from raftsched.fsm.effects import AttemptReady, DispatchAttempt, ExecutorChanged
from raftsched.model import Overlap, TaskSpec
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import (
    EVERY_SECOND,
    T0,
    S,
    apply,
    assign,
    command,
    create,
    domain,
    fresh,
    join,
    leave,
    one_run,
    result,
    run_of,
    tick,
)


def test_join_validates_and_is_replicated_membership() -> None:
    state = fresh()
    applied = state.apply(join("ex1", 8))
    assert applied.result.ok and applied.effects == (ExecutorChanged("ex1", True),)
    assert state.live_executors() == {"ex1": 8}
    before = domain(state)
    for bad, field in ((join("bad name!", 4), "executor.name"), (join("ex3", 0), "executor.slots")):
        res = apply(state, bad)
        assert not res.ok and res.code == "invalid_argument" and field in res.message
    assert domain(state) == before


def test_assignment_commits_before_dispatch_and_fences_by_attempt_and_liveness() -> None:
    state, run_id = one_run()
    # Wrong attempt, unknown executor: refused, nothing dispatched.
    assert apply(state, assign(T0 + S, (run_id, 0, 2, "ex1"))).refused == 1
    assert apply(state, assign(T0 + S, (run_id, 0, 1, "nope"))).refused == 1
    applied = state.apply(assign(T0 + S + 5, (run_id, 0, 1, "ex1")))
    assert applied.result.accounted == 1
    assert applied.effects == (DispatchAttempt(run_id, "t", T0 + S, 0, 1, "ex1", 1),)
    run = run_of(state, run_id)
    assert (run.state, run.shards[0].state, run.shards[0].executor) == (pb.RUNNING, pb.RUNNING, "ex1")
    # A second assignment of the same attempt is refused: one executor per attempt.
    assert apply(state, assign(T0 + S + 6, (run_id, 0, 1, "ex2"))).refused == 1


def test_results_from_another_executor_or_a_stale_attempt_are_refused() -> None:
    state, run_id = one_run()
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
    before = (run_of(state, run_id), dict(state.active))
    assert apply(state, result(T0 + 2 * S, run_id, 1, "ex2", True)).refused == 1
    assert apply(state, result(T0 + 2 * S, run_id, 2, "ex1", True)).refused == 1
    assert (run_of(state, run_id), dict(state.active)) == before  # refused: nothing changed
    res = apply(state, result(T0 + 2 * S, run_id, 1, "ex1", True, exit_code=0, stdout_tail="ok"))
    assert res.accounted == 1
    run = run_of(state, run_id)
    assert (run.state, run.shards[0].stdout_tail) == (pb.SUCCEEDED, "ok")
    assert run_id not in state.active


def test_failure_with_retries_left_requeues_after_the_leaders_backoff() -> None:
    state, run_id = one_run(retries=1)
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
    retry_at = T0 + 61 * S
    applied = state.apply(result(T0 + 2 * S, run_id, 1, "ex1", False, exit_code=3, retry_at_ms=retry_at))
    assert applied.effects == (AttemptReady(run_id, "t", T0 + S, 0, 2, 1, retry_at),)
    shard = run_of(state, run_id).shards[0]
    assert (shard.attempt, shard.state, shard.executor, shard.exit_code) == (2, pb.PENDING, "", 3)
    # Never before the backoff ends.
    assert apply(state, assign(retry_at - 1, (run_id, 0, 2, "ex2"))).refused == 1
    assert apply(state, assign(retry_at, (run_id, 0, 2, "ex2"))).accounted == 1
    # The late result of attempt 1 is fenced off.
    assert apply(state, result(retry_at + 1, run_id, 1, "ex1", True)).refused == 1
    assert apply(state, result(retry_at + 2, run_id, 2, "ex2", True)).accounted == 1
    assert run_of(state, run_id).state == pb.SUCCEEDED


def test_last_failure_fails_the_run_and_records_an_alert() -> None:
    state, run_id = one_run(retries=0)
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
    apply(state, result(T0 + 2 * S, run_id, 1, "ex1", False, error="exit 1"))
    assert run_of(state, run_id).state == pb.FAILED
    [(_, raw)] = list(state.store.scan(keys.ALERT, keys.ALERT + keys.END))
    alert = pb.AlertRecord.FromString(raw)
    assert (alert.task, alert.owner, alert.execution_id, alert.error) == (
        "t",
        "ops",
        f"{run_id}/0/1",
        "exit 1",
    )
    assert state.get_task("t").active_runs == 0  # type: ignore[union-attr]


def test_a_dead_executor_loses_its_attempts_which_are_retried_elsewhere() -> None:
    state, run_id = one_run(retries=2)
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
    applied = state.apply(leave("ex1", T0 + 5 * S, retry_at=T0 + 6 * S))
    assert ExecutorChanged("ex1", False) in applied.effects
    assert AttemptReady(run_id, "t", T0 + S, 0, 2, 1, T0 + 6 * S) in applied.effects
    shard = run_of(state, run_id).shards[0]
    assert (shard.attempt, shard.state, shard.lost) == (2, pb.PENDING, 1)
    assert state.live_executors() == {"ex2": 4}
    # The dead executor can no longer be assigned; its late report for attempt 1 is ignored.
    assert apply(state, assign(T0 + 6 * S, (run_id, 0, 2, "ex1"))).refused == 1
    assert apply(state, result(T0 + 6 * S, run_id, 1, "ex1", True)).refused == 1
    assert apply(state, assign(T0 + 6 * S, (run_id, 0, 2, "ex2"))).accounted == 1


def test_a_dead_executor_loses_exactly_its_running_attempts_among_a_backlog_also_after_a_reload() -> None:
    """A leave among a backlog of pending runs: ex1's attempts are lost in run id order, ex2's
    and the pending ones untouched; the same on a replica restored from a snapshot."""
    state = fresh()
    spec = TaskSpec("t", EVERY_SECOND, max_retries=2, overlap=Overlap.ALLOW, command="true")
    assert create(state, spec).ok
    assert apply(state, join("ex1")).ok and apply(state, join("ex2")).ok
    runs = []
    for i in range(1, 7):
        assert apply(state, tick("t", 1, T0 + i * S)).fired == 1
        runs.append(f"t@{T0 + i * S}")
    apply(state, assign(T0 + 7 * S, (runs[4], 0, 1, "ex1"), (runs[1], 0, 1, "ex2"), (runs[0], 0, 1, "ex1")))
    reloaded = fresh()
    reloaded.restore(state.snapshot(), 1)
    pending, lost = (pb.PENDING, 0), (pb.PENDING, 1)
    for st in (state, reloaded):
        applied = st.apply(leave("ex1", T0 + 8 * S, retry_at=T0 + 9 * S))
        ready = [e for e in applied.effects if isinstance(e, AttemptReady)]
        assert [(e.run_id, e.attempt) for e in ready] == [(runs[0], 2), (runs[4], 2)]
        shards = [run_of(st, r).shards[0] for r in runs]
        running = (pb.RUNNING, 0)
        assert [(sh.state, sh.lost) for sh in shards] == [lost, running, pending, pending, lost, pending]
    assert reloaded.digest() == state.digest()


def test_pending_attempts_lists_waiting_and_assigned_attempts_for_a_new_leader() -> None:
    state, run_id = one_run()
    assert state.pending_attempts() == [AttemptReady(run_id, "t", T0 + S, 0, 1, 1, 0)]
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex2")))
    assert state.pending_attempts() == [DispatchAttempt(run_id, "t", T0 + S, 0, 1, "ex2", 1)]


def test_executor_state_survives_snapshot_and_reload() -> None:
    state, run_id = one_run()
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
    other = fresh()
    other.restore(state.snapshot(), 1)
    assert other.live_executors() == state.live_executors()
    assert other.pending_attempts() == state.pending_attempts()
    assert other.digest() == state.digest()


def retry_run(run_id: str, now: int) -> bytes:
    cmd = command(now)
    cmd.retry_run.run_id = run_id
    return codec.encode_command(cmd)


def test_forced_retry_reruns_failed_shards_with_a_fresh_retry_count() -> None:
    state, run_id = one_run(retries=1)
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
    apply(state, result(T0 + 2 * S, run_id, 1, "ex1", False, retry_at_ms=T0 + 2 * S))
    apply(state, assign(T0 + 3 * S, (run_id, 0, 2, "ex1")))
    apply(state, result(T0 + 4 * S, run_id, 2, "ex1", False))
    assert run_of(state, run_id).state == pb.FAILED
    # Refused while not failed / for unknown runs, without changing anything.
    assert apply(state, retry_run("t@1", T0 + 5 * S)).code == "not_found"
    applied = state.apply(retry_run(run_id, T0 + 5 * S))
    assert applied.result.ok
    assert applied.effects == (AttemptReady(run_id, "t", T0 + S, 0, 3, 1, T0 + 5 * S),)
    assert apply(state, retry_run(run_id, T0 + 5 * S)).code == "conflict"  # running again now
    # The retry count starts over: one more failure is retried (max_retries=1) before failing.
    apply(state, assign(T0 + 5 * S, (run_id, 0, 3, "ex2")))
    apply(state, result(T0 + 6 * S, run_id, 3, "ex2", False, retry_at_ms=T0 + 6 * S))
    shard = run_of(state, run_id).shards[0]
    assert (shard.attempt, shard.state) == (4, pb.PENDING)
    assert state.get_task("t").active_runs == 1  # type: ignore[union-attr]


def drain_cmd(name: str, now: int, reason: str = "") -> bytes:
    cmd = command(now)
    cmd.drain_executor.name = name
    cmd.drain_executor.reason = reason
    return codec.encode_command(cmd)


def test_a_drained_executor_keeps_its_attempt_but_gets_no_new_one() -> None:
    state, run_id = one_run()
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
    applied = state.apply(drain_cmd("ex1", T0 + S + 10, "maintenance"))
    assert applied.result.ok and applied.effects == (ExecutorChanged("ex1", True),)
    rec = state.executors["ex1"]
    assert (rec.alive, rec.draining, rec.draining_ms, rec.draining_reason) == (
        True,
        True,
        T0 + S + 10,
        "maintenance",
    )
    assert state.live_executors() == {"ex1": 4, "ex2": 4}  # still a member: heartbeats, leases
    assert state.placeable_executors() == {"ex2": 4}
    # The attempt it runs finishes there.
    assert apply(state, result(T0 + 2 * S, run_id, 1, "ex1", True)).accounted == 1
    # A new attempt assigned to it (the leader chose before the drain committed) is refused.
    assert apply(state, tick("t", 1, T0 + 3 * S)).fired == 1
    second = f"t@{T0 + 3 * S}"
    assert apply(state, assign(T0 + 3 * S, (second, 0, 1, "ex1"))).refused == 1
    assert apply(state, assign(T0 + 3 * S, (second, 0, 1, "ex2"))).accounted == 1
    # Draining again is the same result and keeps the first drain's record; an unknown one is named.
    before = state.executors["ex1"].SerializeToString()
    assert apply(state, drain_cmd("ex1", T0 + 4 * S, "again")).ok
    assert state.executors["ex1"].SerializeToString() == before
    res = apply(state, drain_cmd("nope", T0 + 4 * S))
    assert (res.ok, res.code) == (False, "not_found") and "nope" in res.message


def test_a_re_registration_keeps_the_drain_and_a_leave_ends_it() -> None:
    state = fresh()
    apply(state, join("ex1"))
    apply(state, drain_cmd("ex1", T0 + S))
    apply(state, join("ex1"))  # reconnect after a leader change
    assert state.executors["ex1"].draining and state.placeable_executors() == {}
    apply(state, leave("ex1", T0 + 2 * S, dead=False))
    assert not state.executors["ex1"].draining and not state.executors["ex1"].alive
    res = apply(state, drain_cmd("ex1", T0 + 3 * S))
    assert (res.ok, res.code) == (False, "not_found")
    apply(state, join("ex1", now=T0 + 4 * S))  # a new process after it left takes work again
    assert state.placeable_executors() == {"ex1": 4}


def _replace_tick(at: int, fmt: int) -> bytes:
    cmd = pb.Command()
    cmd.ParseFromString(tick("t", 1, at))
    cmd.format = fmt  # the leader stamps a batch firing an overlap=replace task (leader/driver.py)
    return codec.encode_command(cmd)


@pytest.mark.parametrize("fmt", [codec.REPLACE_RELEASES_FORMAT, 3])
def test_a_run_replaced_by_overlap_gives_back_its_quota_place(fmt: int) -> None:
    """overlap=replace cancels the running run: its attempt's quota place is given back (as a
    workflow kill gives it back), so the new run may start on the same quota. A batch of format 3
    or older keeps the place, as nodes of that format did: a cluster mid-upgrade applies it as
    its oldest node would (replicas never disagree)."""
    state = fresh()
    apply(state, join("ex"))
    cmd = command(T0)
    cmd.set_quota.quota.CopyFrom(pb.QuotaRecord(kind="owner", name="alice", max_running=1))
    assert apply(state, codec.encode_command(cmd)).ok
    create(state, TaskSpec("t", EVERY_SECOND, command="x", overlap=Overlap.REPLACE, owner="alice"))
    first, second = T0 + S, T0 + 2 * S
    apply(state, _replace_tick(first, fmt))
    assert apply(state, assign(first, (f"t@{first}", 0, 1, "ex"))).accounted == 1
    apply(state, _replace_tick(second, fmt))  # replaces the running run
    released = fmt >= codec.REPLACE_RELEASES_FORMAT
    assert [q.running for q in state.quotas()] == [0 if released else 1]
    assert apply(state, assign(second, (f"t@{second}", 0, 1, "ex"))).accounted == int(released)
