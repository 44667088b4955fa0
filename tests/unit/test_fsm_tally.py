"""The applier's tally (node-local counts for /metrics): what apply counts, and that counting
changes nothing replicated."""

from __future__ import annotations

from raftsched.fsm.tally import ApplyTally
from raftsched.model import TaskSpec
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import (
    EVERY_SECOND,
    T0,
    S,
    apply,
    batch,
    create,
    domain,
    entry,
    fire,
    fresh,
    report,
    tick,
)


def scenario(tally: ApplyTally | None) -> str:
    state = fresh()
    state.tally = tally
    spec = TaskSpec("t", EVERY_SECOND, command="true", owner="alice", namespace="etl", max_retries=1)
    assert create(state, spec).ok
    apply(state, tick("t", 1, T0 + S))  # fired
    coalesced = entry(
        "t",
        1,
        [fire(T0 + 2 * S, pb.COALESCED, through=T0 + 4 * S, count=3), fire(T0 + 5 * S)],
        watermark=T0 + 5 * S,
        next_fire=T0 + 6 * S,
    )
    apply(state, batch(T0 + 5 * S, coalesced))  # 3 coalesced; the 4th skipped (overlap=skip)
    apply(state, report(T0 + 5 * S + 100, (f"t@{T0 + S}", 0, 1, False)))  # failed, retried
    apply(state, report(T0 + 5 * S + 200, (f"t@{T0 + S}", 0, 2, True)))  # succeeded: run finished
    return domain(state)


def test_apply_counts_fires_attempts_and_finished_runs_by_owner_and_namespace() -> None:
    tally = ApplyTally()
    scenario(tally)
    counts = tally.snapshot()
    assert counts.fires == {
        ("fired", "alice", "etl"): 1,
        ("coalesced", "alice", "etl"): 3,
        ("skipped_overlap", "alice", "etl"): 1,  # the first run was still unfinished
    }
    assert counts.attempts == {
        ("failed", "alice", "etl"): 1,
        ("retried", "alice", "etl"): 1,
        ("succeeded", "alice", "etl"): 1,
    }
    assert counts.runs_finished == {("succeeded", "alice", "etl"): 1}


def test_a_per_task_label_is_opt_in() -> None:
    tally = ApplyTally(per_task=True)
    scenario(tally)
    assert tally.snapshot().runs_finished == {("succeeded", "alice", "etl", "t"): 1}


def test_counting_changes_nothing_replicated() -> None:
    assert scenario(ApplyTally()) == scenario(None)
