"""The unstarted-attempt rule in the state machine: a loss the leader reports as ``unstarted``
re-places the attempt under the next number without consuming a retry, at most
MAX_FREE_REPLACEMENTS times per shard; the old attempt's late result is refused."""

from __future__ import annotations

from raftsched import codec
from raftsched.fsm.runs import MAX_FREE_REPLACEMENTS
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import T0, S, apply, assign, command, one_run, result, run_of


def lost(now: int, run_id: str, attempt: int, unstarted: bool) -> bytes:
    cmd = command(now)
    cmd.report_results.results.add(
        run_id=run_id, shard=0, attempt=attempt, lost=True, unstarted=unstarted, retry_at_ms=now
    )
    return codec.encode_command(cmd)


def test_an_unstarted_loss_is_not_a_try_and_fences_the_old_attempt() -> None:
    state, run_id = one_run(retries=0)
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
    assert apply(state, lost(T0 + 2 * S, run_id, 1, unstarted=True)).accounted == 1
    shard = run_of(state, run_id).shards[0]
    assert (shard.attempt, shard.state, shard.unstarted, shard.lost) == (2, pb.PENDING, 1, 0)
    assert shard.not_before_ms == T0 + 2 * S  # at once: no backoff
    # The dead executor's late result for attempt 1 changes nothing.
    assert apply(state, result(T0 + 3 * S, run_id, 1, "ex1", True)).refused == 1
    apply(state, assign(T0 + 3 * S, (run_id, 0, 2, "ex2")))
    assert apply(state, result(T0 + 4 * S, run_id, 2, "ex2", True)).accounted == 1
    assert run_of(state, run_id).state == pb.SUCCEEDED


def test_free_re_placements_are_capped_then_losses_count_as_tries() -> None:
    state, run_id = one_run(retries=0)
    now = T0 + S
    for attempt in range(1, MAX_FREE_REPLACEMENTS + 1):
        apply(state, assign(now, (run_id, 0, attempt, "ex1")))
        now += S
        apply(state, lost(now, run_id, attempt, unstarted=True))
        assert run_of(state, run_id).shards[0].state == pb.PENDING
    attempt = MAX_FREE_REPLACEMENTS + 1
    apply(state, assign(now, (run_id, 0, attempt, "ex1")))
    apply(state, lost(now + S, run_id, attempt, unstarted=True))
    shard = run_of(state, run_id).shards[0]
    assert (shard.state, shard.unstarted, shard.lost) == (pb.FAILED, MAX_FREE_REPLACEMENTS, 1)


def test_a_started_loss_consumes_the_retry() -> None:
    state, run_id = one_run(retries=0)
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
    apply(state, lost(T0 + 2 * S, run_id, 1, unstarted=False))
    assert run_of(state, run_id).shards[0].state == pb.FAILED


def test_a_dead_executors_unstarted_attempts_are_named_in_its_leave() -> None:
    state, run_id = one_run(retries=0)
    apply(state, assign(T0 + S, (run_id, 0, 1, "ex1")))
    cmd = command(T0 + 2 * S)
    cmd.executor_leave.name = "ex1"
    cmd.executor_leave.dead = True
    cmd.executor_leave.retry_at_ms = T0 + 2 * S
    cmd.executor_leave.unstarted.append(f"{run_id}/0/1")
    assert apply(state, codec.encode_command(cmd)).ok
    shard = run_of(state, run_id).shards[0]
    assert (shard.attempt, shard.state, shard.unstarted, shard.lost) == (2, pb.PENDING, 1, 0)
