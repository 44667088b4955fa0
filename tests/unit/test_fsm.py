"""Unit tests for the replicated state machine (SchedulerState over a MemoryStore).

Client commands are built with :mod:`raftsched.leader.writes` (as the leader's servicer builds
them) with explicit ``now``/``epoch``; leader fire batches are hand-built ``pb.Command``s. No
clock, no sleeps: every time is an explicit millisecond value.

"State unchanged" is judged on the canonical image *minus* the apply-chain fingerprint kept in
``Meta`` (a running hash of every command applied, rejected ones included, by design).
"""

from __future__ import annotations

import pytest

from raftsched import codec
from raftsched.errors import SnapshotFormatError
from raftsched.fsm import keys
from raftsched.fsm.effects import AttemptReady, TaskArmed
from raftsched.fsm.records import PRUNE_BATCH, Retention, count_excess, prune_phase
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import IntervalTrigger, ManualTrigger, Overlap, TaskSpec
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import (
    EVERY_SECOND,
    T0,
    S,
    apply,
    barrier,
    batch,
    create,
    delete,
    domain,
    entry,
    fire,
    fires_of,
    fresh,
    raw_create,
    record,
    report,
    runs_of,
    set_enabled,
    tick,
    trigger,
    update,
    with_task,
)

# --------------------------------------------------------------------------- create / get / list


def test_create_stores_version_1_enabled_with_watermark_at_now() -> None:
    state = fresh()
    applied = state.apply(
        writes.create_task(
            TaskSpec("t", EVERY_SECOND, command="true"),
            disabled=False,
            now_ms=T0,
            epoch=1,
            origin="n1",
            key="",
        )
    )
    rec = applied.result.task
    assert applied.result.ok
    assert (rec.version, rec.enabled) == (1, True)
    assert rec.created_ms == rec.updated_ms == rec.watermark_ms == T0
    assert rec.next_fire_ms == T0 + S
    assert (rec.fires_total, rec.runs_total, rec.active_runs) == (0, 0, 0)
    assert applied.effects == (TaskArmed("t", 1, T0 + S),)
    assert state.get_task("t") == rec
    assert codec.spec_from_pb(rec.spec) == TaskSpec("t", EVERY_SECOND, command="true")


def test_create_anchors_an_interval_one_period_after_creation() -> None:
    state = fresh()
    rec = create(state, TaskSpec("i", IntervalTrigger(10 * S), command="true")).task
    assert rec.spec.trigger.interval.start_ms == T0 + 10 * S
    assert rec.next_fire_ms == T0 + 10 * S


def test_create_disabled_arms_nothing() -> None:
    state = fresh()
    applied = state.apply(
        writes.create_task(
            TaskSpec("t", EVERY_SECOND, command="true"),
            disabled=True,
            now_ms=T0,
            epoch=1,
            origin="n1",
            key="",
        )
    )
    assert applied.result.task.enabled is False
    assert applied.effects == (TaskArmed("t", 1, 0),)
    assert state.armed_tasks() == []
    assert state.task_for_planning("t") is None


def test_get_and_list_tasks() -> None:
    state = fresh()
    for name in ("beta", "alpha", "alpine", "gamma"):
        assert create(state, TaskSpec(name, EVERY_SECOND, command="true")).ok
    assert state.get_task("nope") is None
    assert [t.spec.name for t in state.list_tasks()] == ["alpha", "alpine", "beta", "gamma"]
    assert [t.spec.name for t in state.list_tasks(prefix="alp")] == ["alpha", "alpine"]
    assert [t.spec.name for t in state.list_tasks(limit=2)] == ["alpha", "alpine"]
    assert sorted(name for name, _ in state.armed_tasks()) == ["alpha", "alpine", "beta", "gamma"]


def test_duplicate_name_is_already_exists_and_changes_nothing() -> None:
    state = with_task()
    before = domain(state)
    res = create(state, TaskSpec("t", IntervalTrigger(5 * S), command="true"), now=T0 + 100)
    assert (res.ok, res.code) == (False, "already_exists")
    assert "'t'" in res.message
    assert domain(state) == before


@pytest.mark.parametrize("verb", ["delete", "trigger"])
def test_unknown_task_is_not_found(verb: str) -> None:
    state = with_task()
    before = domain(state)
    res = delete(state, "ghost", now=T0) if verb == "delete" else trigger(state, "ghost", now=T0)
    assert (res.ok, res.code) == (False, "not_found")
    assert "'ghost'" in res.message
    assert domain(state) == before


@pytest.mark.parametrize("body", ["update_task", "set_enabled"])
def test_unknown_task_injected_directly_is_not_found(body: str) -> None:
    # (writes.update_task / set_enabled refuse an unknown name before proposing; apply must too)
    state = with_task()
    before = domain(state)
    cmd = pb.Command(epoch=1, now_ms=T0)
    if body == "update_task":
        cmd.update_task.spec.CopyFrom(codec.spec_to_pb(TaskSpec("ghost", EVERY_SECOND, command="true")))
    else:
        cmd.set_enabled.name = "ghost"
    res = apply(state, codec.encode_command(cmd))
    assert (res.ok, res.code) == (False, "not_found")
    assert domain(state) == before


# --------------------------------------------------------------------------- invalid specs


def _valid_spec_pb() -> pb.TaskSpec:
    return codec.spec_to_pb(TaskSpec("t", EVERY_SECOND, command="echo hi"))


def _mutate(field: str, value: object) -> pb.TaskSpec:
    spec = _valid_spec_pb()
    if field == "trigger.interval":
        spec.trigger.interval.every_ms = value  # type: ignore[assignment]
    elif field == "trigger.at":
        spec.trigger.once.at_ms = value  # type: ignore[assignment]
    elif field == "trigger.cron":
        spec.trigger.cron.expr = value  # type: ignore[assignment]
    elif field == "handler":
        spec.handler = value  # type: ignore[assignment]
    else:
        setattr(spec, field if field != "params" else "params_json", value)
    return spec


INVALID_SPECS = [
    ("name", "bad name!"),
    ("name", ""),
    ("name", "x" * 129),
    ("shards", 5000),
    ("priority", 10),
    ("misfire", 9),
    ("overlap", 9),
    ("max_retries", 1000),
    ("timeout_ms", 8 * 24 * 3600 * S),
    ("trigger.interval", 1500),
    ("trigger.interval", 500),
    ("trigger.at", 0),
    ("trigger.cron", "   "),
    ("params", "[1, 2]"),
    ("params", "{not json"),
    ("handler", "h"),  # a command and a handler both
    ("description", "d" * 5000),
]


def _field_name(field: str) -> str:
    return {"timeout_ms": "timeout"}.get(field, field)


@pytest.mark.parametrize(
    ("field", "value"), INVALID_SPECS, ids=[f"{f}={str(v)[:12]}" for f, v in INVALID_SPECS]
)
def test_invalid_spec_in_create_is_refused_with_its_field(field: str, value: object) -> None:
    state = with_task(TaskSpec("other", EVERY_SECOND, command="true"))
    before = domain(state)
    res = apply(state, raw_create(_mutate(field, value), next_fire=T0 + S))
    assert (res.ok, res.code) == (False, "invalid_argument")
    assert res.message.startswith(f"{_field_name(field)}: "), res.message
    assert domain(state) == before
    assert [t.spec.name for t in state.list_tasks()] == ["other"]


@pytest.mark.parametrize(
    ("field", "value"), INVALID_SPECS[3:], ids=[f"{f}={str(v)[:12]}" for f, v in INVALID_SPECS[3:]]
)
def test_invalid_spec_in_update_is_refused_and_the_task_is_untouched(field: str, value: object) -> None:
    state = with_task()
    before, rec = domain(state), record(state, "t")
    cmd = pb.Command(epoch=1, now_ms=T0 + 500)
    cmd.update_task.spec.CopyFrom(_mutate(field, value))
    cmd.update_task.next_fire_ms = T0 + S
    res = apply(state, codec.encode_command(cmd))
    assert (res.ok, res.code) == (False, "invalid_argument")
    assert res.message.startswith(f"{_field_name(field)}: "), res.message
    assert domain(state) == before
    assert record(state, "t") == rec


def test_proto3_zero_shards_means_unset_and_becomes_one() -> None:
    # proto3 cannot tell 0 from "not given": a zero shard count is the default of 1, not an error.
    spec = _valid_spec_pb()
    spec.shards = 0
    state = fresh()
    assert apply(state, raw_create(spec, next_fire=T0 + S)).task.spec.shards == 1


def test_negative_next_fire_is_invalid() -> None:
    state = fresh()
    res = apply(state, raw_create(_valid_spec_pb(), next_fire=-5))
    assert (res.ok, res.code) == (False, "invalid_argument")
    assert state.get_task("t") is None


def test_next_fire_not_after_the_watermark_is_refused_not_absorbed() -> None:
    # The task could never fire: every batch for it would be refused as "not after the watermark".
    state = with_task(TaskSpec("a", EVERY_SECOND, command="true"))
    assert apply(state, tick("a", 1, T0 + 5 * S)).ok  # committed leader time is now T0+5s
    before = domain(state)
    # a create stamped by a clock 3 s behind: first fire T0+3s, watermark would be T0+5s
    res = create(state, TaskSpec("late", EVERY_SECOND, command="true"), now=T0 + 2 * S)
    assert (res.ok, res.code) == (False, "unavailable")
    assert "not after the task's watermark" in res.message
    assert domain(state) == before


# --------------------------------------------------------------------------- update, versions


def test_update_bumps_version_replaces_spec_and_moves_the_watermark() -> None:
    state = with_task()
    spec2 = TaskSpec("t", IntervalTrigger(10 * S, T0 + 20 * S), command="echo v2")
    applied = state.apply(
        writes.update_task(state, spec2, expected_version=0, now_ms=T0 + 500, epoch=1, origin="n1", key="")
    )
    rec = applied.result.task
    assert (rec.version, rec.updated_ms, rec.watermark_ms, rec.next_fire_ms) == (
        2,
        T0 + 500,
        T0 + 500,
        T0 + 20 * S,
    )
    assert rec.created_ms == T0
    assert codec.spec_from_pb(rec.spec) == spec2
    assert applied.effects == (TaskArmed("t", 2, T0 + 20 * S),)


def test_runs_and_fire_records_carry_the_task_version_they_ran() -> None:
    state = with_task(TaskSpec("t", EVERY_SECOND, overlap=Overlap.ALLOW, command="true"))
    assert apply(state, tick("t", 1, T0 + S)).fired == 1
    assert update(state, TaskSpec("t", EVERY_SECOND, command="v2", overlap=Overlap.ALLOW), now=T0 + 1500).ok
    assert apply(state, tick("t", 2, T0 + 2 * S)).fired == 1
    assert [(r.nominal_ms, r.task_version) for r in runs_of(state, "t")] == [(T0 + S, 1), (T0 + 2 * S, 2)]
    assert [f.task_version for f in fires_of(state, "t")] == [1, 2]


def test_expected_version_mismatch_is_a_conflict() -> None:
    state = with_task()
    assert update(state, TaskSpec("t", EVERY_SECOND, command="v2"), now=T0 + 100, expected_version=1).ok
    before = domain(state)
    res = update(state, TaskSpec("t", EVERY_SECOND, command="v3"), now=T0 + 200, expected_version=1)
    assert (res.ok, res.code) == (False, "conflict")
    assert "version 2, not 1" in res.message
    assert domain(state) == before
    assert update(state, TaskSpec("t", EVERY_SECOND, command="v3"), now=T0 + 300, expected_version=2).ok


def test_update_with_fires_due_but_unaccounted_is_refused_until_the_leader_accounts_them() -> None:
    # Moving the watermark to "now" would silently drop +1s and +2s (invariant 1).
    state = with_task()
    before = domain(state)
    res = update(state, TaskSpec("t", EVERY_SECOND, command="v2"), now=T0 + 2500)
    assert (res.ok, res.code) == (False, "unavailable")
    assert domain(state) == before
    two = entry("t", 1, [fire(T0 + S), fire(T0 + 2 * S)], watermark=T0 + 2500, next_fire=T0 + 3 * S)
    assert apply(state, batch(T0 + 2500, two)).accounted == 2
    assert update(state, TaskSpec("t", EVERY_SECOND, command="v2"), now=T0 + 2500).ok


# --------------------------------------------------------------------------- delete


def test_delete_removes_the_task_its_history_and_keeps_active_runs() -> None:
    state = with_task(TaskSpec("t", EVERY_SECOND, overlap=Overlap.ALLOW, command="true"))
    for i in (1, 2):
        apply(state, tick("t", 1, T0 + i * S))
    assert apply(state, report(T0 + 2500, (f"t@{T0 + S}", 0, 1, True))).accounted == 1
    applied = state.apply(writes.delete_task("t", now_ms=T0 + 3 * S, epoch=1, origin="n1", key=""))
    assert applied.result.ok
    assert applied.effects == (TaskArmed("t", 1, 0),)
    assert state.get_task("t") is None
    assert fires_of(state, "t") == []
    assert [r.run_id for r in runs_of(state, "t")] == [f"t@{T0 + 2 * S}"]  # still running
    # its result is still accepted; nothing is created any more
    assert apply(state, report(T0 + 4 * S, (f"t@{T0 + 2 * S}", 0, 1, True))).accounted == 1
    assert apply(state, tick("t", 1, T0 + 5 * S)).refused == 1


def test_recreated_task_counts_the_old_incarnations_active_runs() -> None:
    # Regression: finishing a run of a deleted task drove the new task's active_runs below zero
    # (an internal error, and a half-applied command).
    state = with_task(TaskSpec("t", ManualTrigger(), command="true"))
    run_id = trigger(state, "t", now=T0 + S).run.run_id
    assert delete(state, "t", now=T0 + 2 * S).ok
    assert create(state, TaskSpec("t", ManualTrigger(), command="true"), now=T0 + 3 * S).task.active_runs == 1
    res = apply(state, report(T0 + 4 * S, (run_id, 0, 1, True)))
    assert (res.ok, res.accounted) == (True, 1)
    assert record(state, "t").active_runs == 0
    assert state.pending_attempts() == []


# --------------------------------------------------------------------------- enable / disable


def test_disabled_task_accounts_fires_as_skipped_disabled() -> None:
    state = with_task()
    assert set_enabled(state, "t", False, now=T0 + 500).task.enabled is False
    # a batch the leader planned just before the disable committed
    res = apply(state, tick("t", 1, T0 + S))
    assert (res.fired, res.accounted) == (0, 1)
    [rec] = fires_of(state, "t")
    assert rec.outcome == pb.SKIPPED_DISABLED
    assert "disabled" in rec.reason
    assert runs_of(state, "t") == []
    assert record(state, "t").watermark_ms == T0 + S


def test_enable_starts_accounting_from_now() -> None:
    state = with_task()
    assert set_enabled(state, "t", False, now=T0 + 500).ok
    applied = state.apply(
        writes.set_enabled(state, "t", True, now_ms=T0 + 10_500, epoch=1, origin="n1", key="")
    )
    rec = applied.result.task
    assert (rec.enabled, rec.watermark_ms, rec.next_fire_ms) == (True, T0 + 10_500, T0 + 11 * S)
    assert applied.effects == (TaskArmed("t", 1, T0 + 11 * S),)


def test_disable_with_fires_due_but_unaccounted_is_refused() -> None:
    state = with_task()
    before = domain(state)
    res = set_enabled(state, "t", False, now=T0 + 3 * S)
    assert (res.ok, res.code) == (False, "unavailable")
    assert "not accounted" in res.message
    assert domain(state) == before
    # a disabled task owes nothing, so disabling twice is fine
    apply(
        state,
        batch(
            T0 + 3 * S,
            entry(
                "t",
                1,
                [fire(T0 + S, pb.COALESCED, through=T0 + 3 * S, count=3)],
                watermark=T0 + 3 * S,
                next_fire=T0 + 4 * S,
            ),
        ),
    )
    assert set_enabled(state, "t", False, now=T0 + 3 * S).ok
    assert set_enabled(state, "t", False, now=T0 + 9 * S).ok


# --------------------------------------------------------------------------- epochs


def test_stale_epoch_command_is_refused_and_changes_nothing() -> None:
    state = with_task()
    assert apply(state, barrier(T0 + 500, epoch=3)).ok
    before = domain(state)
    res = create(state, TaskSpec("u", EVERY_SECOND, command="true"), now=T0 + 9 * S, epoch=2, key="client-1")
    assert (res.ok, res.code) == (False, "stale_epoch")
    assert domain(state) == before
    assert (state.max_epoch, state.max_now_ms) == (3, T0 + 500)  # its clock did not move time
    # the key was not remembered: the client's retry through the new leader applies
    assert create(
        state, TaskSpec("u", EVERY_SECOND, command="true"), now=T0 + 9 * S, epoch=3, key="client-1"
    ).ok


def test_stale_epoch_fire_batch_creates_no_run() -> None:
    state = with_task()
    assert apply(state, barrier(T0 + 500, epoch=2)).ok
    before = domain(state)
    res = apply(state, tick("t", 1, T0 + S, epoch=1))
    assert (res.ok, res.code, res.fired) == (False, "stale_epoch", 0)
    assert domain(state) == before
    assert runs_of(state, "t") == []
    assert apply(state, tick("t", 1, T0 + S, epoch=2)).fired == 1


def test_newer_epoch_fences_older_and_equal_epoch_is_accepted() -> None:
    state = with_task(TaskSpec("t", EVERY_SECOND, overlap=Overlap.ALLOW, command="true"))
    assert apply(state, tick("t", 1, T0 + S, epoch=4)).ok
    assert state.max_epoch == 4
    assert apply(state, tick("t", 1, T0 + 2 * S, epoch=4)).fired == 1
    assert apply(state, tick("t", 1, T0 + 3 * S, epoch=3)).code == "stale_epoch"


# --------------------------------------------------------------------------- idempotency


def test_same_idempotency_key_applies_once_and_returns_the_same_bytes() -> None:
    state = with_task(TaskSpec("m", ManualTrigger(), command="true"))
    data = writes.trigger_now("m", "", now_ms=T0 + S, epoch=1, origin="n1", key="k1")
    first, second = state.apply(data), state.apply(data)
    assert first.result.ok
    assert first.encode() == second.encode()
    assert second.effects == ()  # nothing to dispatch twice
    assert len(runs_of(state, "m")) == 1
    assert record(state, "m").runs_total == 1


def test_a_repeated_key_returns_the_first_outcome_even_for_another_body() -> None:
    state = fresh()
    first = create(state, TaskSpec("a", EVERY_SECOND, command="true"), key="k")
    again = create(state, TaskSpec("b", EVERY_SECOND, command="true"), now=T0 + 1, key="k")
    assert again.SerializeToString(deterministic=True) == first.SerializeToString(deterministic=True)
    assert state.get_task("b") is None


def test_rejected_commands_do_not_remember_their_key() -> None:
    state = with_task()
    assert create(state, TaskSpec("t", EVERY_SECOND, command="true"), key="k").code == "already_exists"
    assert create(state, TaskSpec("u", EVERY_SECOND, command="true"), key="k").ok


def test_idempotency_keys_expire_after_the_retention() -> None:
    state = with_task(
        TaskSpec("m", ManualTrigger(), command="true"), retention=Retention(idempotency_keep_ms=10 * S)
    )
    data = writes.trigger_now("m", "", now_ms=T0 + S, epoch=1, origin="n1", key="k1")
    assert state.apply(data).result.ok
    assert state.store.get(keys.idem_key("k1")) is not None
    apply(state, barrier(T0 + 20 * S, epoch=1))  # time moves on; pruning is part of apply
    assert state.store.get(keys.idem_key("k1")) is None
    assert state.apply(data).result.run.run_id.endswith("~m2")  # applies again


# --------------------------------------------------------------------------- fire batches


def test_fire_batch_creates_runs_accounts_fires_and_dispatches_every_shard() -> None:
    state = with_task(TaskSpec("t", EVERY_SECOND, shards=2, overlap=Overlap.ALLOW, command="true"))
    e = entry("t", 1, [fire(T0 + S), fire(T0 + 2 * S)], watermark=T0 + 2 * S, next_fire=T0 + 3 * S)
    applied = state.apply(batch(T0 + 2 * S, e, epoch=1))
    assert (applied.result.fired, applied.result.accounted, applied.result.refused) == (2, 2, 0)
    run_ids = [f"t@{T0 + S}", f"t@{T0 + 2 * S}"]
    assert [d for d in applied.effects if isinstance(d, AttemptReady)] == [
        AttemptReady(run_ids[0], "t", T0 + S, 0, 1, 1),
        AttemptReady(run_ids[0], "t", T0 + S, 1, 1, 1),
        AttemptReady(run_ids[1], "t", T0 + 2 * S, 0, 1, 1),
        AttemptReady(run_ids[1], "t", T0 + 2 * S, 1, 1, 1),
    ]
    assert applied.effects[-1] == TaskArmed("t", 1, T0 + 3 * S)
    runs = runs_of(state, "t")
    assert [(r.run_id, r.state, r.created_ms, r.epoch, r.manual) for r in runs] == [
        (rid, pb.PENDING, T0 + 2 * S, 1, False) for rid in run_ids
    ]
    assert [len(r.shards) for r in runs] == [2, 2]
    recs = fires_of(state, "t")
    assert [(f.nominal_ms, f.outcome, f.run_id, f.decided_ms, f.count) for f in recs] == [
        (T0 + S, pb.FIRED, run_ids[0], T0 + 2 * S, 1),
        (T0 + 2 * S, pb.FIRED, run_ids[1], T0 + 2 * S, 1),
    ]
    rec = record(state, "t")
    assert (rec.watermark_ms, rec.next_fire_ms, rec.fires_total, rec.runs_total, rec.active_runs) == (
        T0 + 2 * S,
        T0 + 3 * S,
        2,
        2,
        2,
    )
    assert len(state.pending_attempts()) == 4


def test_a_range_record_accounts_many_fires_at_once() -> None:
    state = with_task()
    e = entry(
        "t",
        1,
        [fire(T0 + S, pb.COALESCED, through=T0 + 8 * S, count=8, reason="late"), fire(T0 + 9 * S)],
        watermark=T0 + 9 * S,
        next_fire=T0 + 10 * S,
    )
    res = apply(state, batch(T0 + 9 * S, e))
    assert (res.fired, res.accounted) == (1, 2)
    assert record(state, "t").fires_total == 9
    first = fires_of(state, "t")[0]
    assert (first.outcome, first.through_ms, first.count, first.reason) == (
        pb.COALESCED,
        T0 + 8 * S,
        8,
        "late",
    )


def test_a_fire_already_accounted_is_refused_so_no_fire_gets_a_second_run() -> None:
    state = with_task()
    data = tick("t", 1, T0 + S)
    assert apply(state, data).fired == 1
    rec_before = record(state, "t")
    again = apply(state, data)  # the same batch re-proposed after an unknown outcome
    assert (again.ok, again.fired, again.refused) == (True, 0, 1)
    # and an entry that mixes an old fire with a new one is refused whole
    mixed = entry("t", 1, [fire(T0 + S), fire(T0 + 2 * S)], watermark=T0 + 2 * S, next_fire=T0 + 3 * S)
    assert apply(state, batch(T0 + 2 * S, mixed)).refused == 1
    assert record(state, "t") == rec_before
    assert [r.run_id for r in runs_of(state, "t")] == [f"t@{T0 + S}"]


def _refused(state: SchedulerState, now: int, e: pb.TaskFires) -> None:
    rec, fires, runs = record(state, e.task), fires_of(state, e.task), runs_of(state, e.task)
    res = apply(state, batch(now, e))
    assert (res.ok, res.fired, res.accounted, res.refused) == (True, 0, 0, 1)
    assert (record(state, e.task), fires_of(state, e.task), runs_of(state, e.task)) == (rec, fires, runs)


def test_a_fire_later_than_now_is_refused_never_early() -> None:
    state = with_task()
    _refused(state, T0 + 2 * S, entry("t", 1, [fire(T0 + 3 * S)], watermark=T0 + 2 * S, next_fire=T0 + 4 * S))
    late_range = fire(T0 + S, pb.COALESCED, through=T0 + 3 * S, count=3)
    _refused(state, T0 + 2 * S, entry("t", 1, [late_range], watermark=T0 + 2 * S, next_fire=T0 + 4 * S))


def test_fires_must_ascend_and_the_watermark_and_next_fire_must_be_consistent() -> None:
    state = with_task()
    now = T0 + 5 * S
    _refused(state, now, entry("t", 1, [fire(T0 + 2 * S), fire(T0 + S)], watermark=now, next_fire=now + S))
    _refused(state, now, entry("t", 1, [fire(T0 + 3 * S)], watermark=T0 + 2 * S, next_fire=now + S))
    _refused(state, now, entry("t", 1, [fire(T0 + 3 * S)], watermark=now + 1, next_fire=now + S))
    _refused(state, now, entry("t", 1, [fire(T0 + 3 * S)], watermark=now, next_fire=now))


def test_malformed_ranges_are_refused() -> None:
    state = with_task()
    now = T0 + 5 * S

    def one(f: pb.Fire) -> pb.TaskFires:
        return entry("t", 1, [f], watermark=now, next_fire=now + S)

    # a fired record stands for exactly one run: it cannot claim a range of fires
    _refused(state, now, one(fire(T0 + S, pb.FIRED, through=T0 + 3 * S, count=3)))
    _refused(state, now, one(fire(T0 + S, pb.FIRED, count=2)))
    # a range must end after it starts
    _refused(state, now, one(fire(T0 + 3 * S, pb.COALESCED, through=T0 + 2 * S, count=2)))
    _refused(state, now, one(fire(T0 + 3 * S, pb.COALESCED, through=T0 + 3 * S, count=1)))


@pytest.mark.parametrize("outcome", [pb.OUTCOME_UNSPECIFIED, pb.SKIPPED_OVERLAP, pb.SKIPPED_DISABLED, 42])
def test_outcomes_only_apply_may_decide_are_refused_from_the_leader(outcome: int) -> None:
    state = with_task()
    _refused(state, T0 + S, entry("t", 1, [fire(T0 + S, outcome)], watermark=T0 + S, next_fire=T0 + 2 * S))


def test_malformed_fire_entries_are_refused_whole() -> None:
    """What no leader proposes: an empty range, a fired record claiming a range or a count, an
    outcome only apply may decide. Each is refused and changes nothing."""
    state = with_task()
    w, nxt = T0 + 3 * S, T0 + 4 * S
    for bad in (
        fire(T0 + 2 * S, pb.COALESCED, through=T0 + S, count=2),  # the range ends before it starts
        fire(T0 + S, pb.FIRED, through=T0 + 2 * S),  # one run for two fires
        fire(T0 + S, pb.FIRED, count=2),
        fire(T0 + S, pb.SKIPPED_OVERLAP),  # apply decides overlap, not the leader
    ):
        _refused(state, T0 + 3 * S, entry("t", 1, [bad], watermark=w, next_fire=nxt))
    good = [fire(T0 + S, pb.COALESCED, through=T0 + 2 * S, count=2), fire(T0 + 3 * S)]
    res = apply(state, batch(T0 + 3 * S, entry("t", 1, good, watermark=w, next_fire=nxt)))
    assert (res.fired, res.accounted, res.refused) == (1, 2, 0)


def test_a_batch_for_a_stale_version_is_refused() -> None:
    state = with_task()
    assert update(state, TaskSpec("t", EVERY_SECOND, command="v2"), now=T0 + 500).ok
    _refused(state, T0 + S, entry("t", 1, [fire(T0 + S)], watermark=T0 + S, next_fire=T0 + 2 * S))


def test_refusal_is_per_task_entry() -> None:
    state = with_task()
    assert create(state, TaskSpec("u", EVERY_SECOND, command="true")).ok
    good = entry("t", 1, [fire(T0 + S)], watermark=T0 + S, next_fire=T0 + 2 * S)
    ghost = entry("ghost", 1, [fire(T0 + S)], watermark=T0 + S, next_fire=T0 + 2 * S)
    stale = entry("u", 7, [fire(T0 + S)], watermark=T0 + S, next_fire=T0 + 2 * S)
    res = apply(state, batch(T0 + S, ghost, good, stale))
    assert (res.ok, res.fired, res.accounted, res.refused) == (True, 1, 1, 2)
    assert runs_of(state, "u") == []
    # two entries for the same task in one batch: the second is not after the first's watermark
    dup = entry("u", 1, [fire(T0 + 2 * S)], watermark=T0 + 2 * S, next_fire=T0 + 3 * S)
    res = apply(state, batch(T0 + 2 * S, dup, dup))
    assert (res.fired, res.refused) == (1, 1)


def test_a_batch_stamped_below_the_committed_time_is_judged_by_its_own_stamp() -> None:
    # One leader pipelines commands stamped on several threads, so a batch may commit after a
    # client write stamped later. It may account only fires due by its own stamp (never early),
    # and it never moves the committed leader time backwards. (That a *new* leader never stamps
    # below the committed time is the driver's job, checked by the simulation's
    # `check monotonic-time`.)
    state = with_task()
    assert create(
        state, TaskSpec("other", ManualTrigger(), command="true"), now=T0 + 5 * S
    ).ok  # committed time T0+5s
    _refused(state, T0 + 3 * S, entry("t", 1, [fire(T0 + 4 * S)], watermark=T0 + 4 * S, next_fire=T0 + 5 * S))
    e = entry(
        "t",
        1,
        [fire(T0 + S, pb.COALESCED, through=T0 + 3 * S, count=3)],
        watermark=T0 + 3 * S,
        next_fire=T0 + 4 * S,
    )
    assert apply(state, batch(T0 + 3 * S, e)).accounted == 1
    [rec] = fires_of(state, "t")
    assert rec.decided_ms >= rec.through_ms
    assert state.max_now_ms == T0 + 5 * S


def test_overlap_skip_versus_allow() -> None:
    state = fresh()
    assert create(state, TaskSpec("skip", EVERY_SECOND, command="true")).ok  # overlap=skip is the default
    assert create(state, TaskSpec("allow", EVERY_SECOND, overlap=Overlap.ALLOW, command="true")).ok
    three = [fire(T0 + i * S) for i in (1, 2, 3)]
    res = apply(
        state,
        batch(
            T0 + 3 * S,
            entry("skip", 1, three, watermark=T0 + 3 * S, next_fire=T0 + 4 * S),
            entry("allow", 1, three, watermark=T0 + 3 * S, next_fire=T0 + 4 * S),
        ),
    )
    assert (res.fired, res.accounted) == (4, 6)
    assert [f.outcome for f in fires_of(state, "skip")] == [pb.FIRED, pb.SKIPPED_OVERLAP, pb.SKIPPED_OVERLAP]
    assert "overlap=skip" in fires_of(state, "skip")[1].reason
    assert [f.outcome for f in fires_of(state, "allow")] == [pb.FIRED] * 3
    assert (record(state, "skip").active_runs, record(state, "allow").active_runs) == (1, 3)
    # once the run finishes, the next fire runs again
    assert apply(state, report(T0 + 3500, (f"skip@{T0 + S}", 0, 1, True))).accounted == 1
    assert apply(state, tick("skip", 1, T0 + 4 * S)).fired == 1


# --------------------------------------------------------------------------- manual runs


def test_trigger_now_creates_a_manual_run() -> None:
    state = with_task()
    applied = state.apply(writes.trigger_now("t", '{"k": 1}', now_ms=T0 + 1500, epoch=1, origin="n1", key=""))
    run = applied.result.run
    assert (run.run_id, run.nominal_ms, run.manual, run.params_json, run.state) == (
        f"t@{T0 + 1500}~m1",
        T0 + 1500,
        True,
        '{"k": 1}',
        pb.PENDING,
    )
    assert applied.effects == (AttemptReady(run.run_id, "t", T0 + 1500, 0, 1, 1),)
    assert runs_of(state, "t") == [run]
    # a second trigger at the same instant is a different run; scheduled fires are unaffected
    assert trigger(state, "t", now=T0 + 1500).run.run_id == f"t@{T0 + 1500}~m2"
    assert record(state, "t").fires_total == 0


def test_trigger_now_with_invalid_params_is_refused() -> None:
    state = with_task()
    before = domain(state)
    cmd = pb.Command(epoch=1, now_ms=T0)
    cmd.trigger_now.name = "t"
    cmd.trigger_now.params_json = "[1]"
    res = apply(state, codec.encode_command(cmd))
    assert (res.ok, res.code) == (False, "invalid_argument")
    assert res.message.startswith("params: ")
    assert domain(state) == before
    assert state.manual_seq == 0


# --------------------------------------------------------------------------- results


def test_report_results_completes_a_run_shard_by_shard() -> None:
    state = with_task(TaskSpec("t", EVERY_SECOND, shards=2, command="true"))
    apply(state, tick("t", 1, T0 + S))
    run_id = f"t@{T0 + S}"
    assert apply(state, report(T0 + 1100, (run_id, 0, 1, True))).accounted == 1
    [run] = runs_of(state, "t")
    assert (run.state, run.shards[0].state, run.shards[1].state) == (pb.RUNNING, pb.SUCCEEDED, pb.PENDING)
    assert record(state, "t").active_runs == 1
    assert apply(state, report(T0 + 1200, (run_id, 1, 1, True))).accounted == 1
    [run] = runs_of(state, "t")
    assert (run.state, run.finished_ms) == (pb.SUCCEEDED, T0 + 1200)
    rec = record(state, "t")
    assert (rec.active_runs, rec.kept_runs) == (0, 1)
    assert state.pending_attempts() == []


def test_a_failed_shard_fails_the_run() -> None:
    state = with_task(TaskSpec("t", EVERY_SECOND, shards=2, command="true"))
    apply(state, tick("t", 1, T0 + S))
    run_id = f"t@{T0 + S}"
    apply(state, report(T0 + 1100, (run_id, 0, 1, False), (run_id, 1, 1, True)))
    [run] = runs_of(state, "t")
    assert run.state == pb.FAILED


def test_stale_unknown_and_repeated_results_are_refused() -> None:
    state = with_task()
    apply(state, tick("t", 1, T0 + S))
    run_id = f"t@{T0 + S}"
    before = runs_of(state, "t")
    res = apply(
        state,
        report(
            T0 + 1100, (run_id, 0, 2, True), (run_id, 0, 0, True), (run_id, 5, 1, True), ("t@1", 0, 1, True)
        ),
    )
    assert (res.ok, res.accounted, res.refused) == (True, 0, 4)
    assert runs_of(state, "t") == before
    assert apply(state, report(T0 + 1200, (run_id, 0, 1, True))).accounted == 1
    assert apply(state, report(T0 + 1300, (run_id, 0, 1, False))).refused == 1  # already finished
    assert runs_of(state, "t")[0].state == pb.SUCCEEDED


# --------------------------------------------------------------------------- retention


def _at_format(data: bytes, fmt: int) -> bytes:
    """``data`` re-stamped with command format ``fmt`` (as a leader of that build proposes it)."""
    cmd = codec.decode_command(data)
    cmd.format = fmt
    return codec.encode_command(cmd)


OLD_PRUNE = codec.BATCHED_PRUNE_FORMAT - 1  # the format before batched pruning


def _many_fires(state: SchedulerState, n: int, *, finish: bool, fmt: int = 0) -> None:
    stamp = (lambda d: _at_format(d, fmt)) if fmt else (lambda d: d)
    for i in range(1, n + 1):
        apply(state, stamp(tick("t", 1, T0 + i * S)))
        if finish:
            apply(state, stamp(report(T0 + i * S + 500, (f"t@{T0 + i * S}", 0, 1, True))))


def test_retention_by_count_keeps_the_newest_records_and_runs() -> None:
    """Commands of the format before batched pruning keep exactly the keep count (as the builds
    before did: a replica still on one applies them alike)."""
    keep = Retention(keep_count=3)
    a = with_task(TaskSpec("t", EVERY_SECOND, overlap=Overlap.ALLOW, command="true"), retention=keep)
    b = with_task(TaskSpec("t", EVERY_SECOND, overlap=Overlap.ALLOW, command="true"), retention=keep)
    for state in (a, b):
        _many_fires(state, 10, finish=True, fmt=OLD_PRUNE)
    assert a.snapshot() == b.snapshot()
    assert [f.nominal_ms for f in fires_of(a, "t")] == [T0 + i * S for i in (8, 9, 10)]
    assert [r.nominal_ms for r in runs_of(a, "t")] == [T0 + i * S for i in (8, 9, 10)]
    rec = record(a, "t")
    assert (rec.kept_fires, rec.kept_runs, rec.fires_total, rec.runs_total) == (3, 3, 10, 10)


def test_retention_by_count_prunes_in_batches_down_to_the_keep_count() -> None:
    """From BATCHED_PRUNE_FORMAT: up to PRUNE_BATCH records (less the task's phase) past the keep
    count are kept; one more, and the oldest go down to the keep count at once."""
    keep = Retention(keep_count=3)
    a = with_task(TaskSpec("t", EVERY_SECOND, overlap=Overlap.ALLOW, command="true"), retention=keep)
    b = with_task(TaskSpec("t", EVERY_SECOND, overlap=Overlap.ALLOW, command="true"), retention=keep)
    full = 3 + PRUNE_BATCH - prune_phase("t")  # the most kept
    for state in (a, b):
        _many_fires(state, full, finish=True)
    assert a.snapshot() == b.snapshot()
    assert len(fires_of(a, "t")) == len(runs_of(a, "t")) == full  # not pruned yet
    for state in (a, b):
        _many_fires_from(state, full + 1, full + 3)
    assert a.snapshot() == b.snapshot()
    # At fire full+1 the oldest went, down to 3 (full-1 .. full+1); then two more.
    want = [T0 + i * S for i in range(full - 1, full + 4)]
    assert [f.nominal_ms for f in fires_of(a, "t")] == want
    assert [r.nominal_ms for r in runs_of(a, "t")] == want
    rec = record(a, "t")
    assert (rec.kept_fires, rec.kept_runs, rec.fires_total, rec.runs_total) == (5, 5, full + 3, full + 3)


def test_tasks_created_together_do_not_prune_together() -> None:
    """A bulk import of every-second tasks gains one record per task per second; without a
    per-task phase every task would pass keep_count + PRUNE_BATCH in the same second and delete
    its batch in the same apply (a burst every 65 s). Each task's batches come at its own period."""
    keep = 10
    names = [f"import-{i}" for i in range(1000)]
    kept = dict.fromkeys(names, 0)
    most_at_once = 0
    for _second in range(400):
        pruning = 0
        for name in names:
            kept[name] += 1
            excess = count_excess(kept[name], keep, prune_phase(name))
            if excess:
                pruning += 1
                kept[name] -= excess
                assert kept[name] == keep
            assert kept[name] <= keep + PRUNE_BATCH
        most_at_once = max(most_at_once, pruning)
    # Without the phase: all 1,000 at second 65, 130, ...; with it, at most about an eighth.
    assert most_at_once <= len(names) // 5, most_at_once
    assert len({prune_phase(n) for n in names}) == PRUNE_BATCH // 2


def _many_fires_from(state: SchedulerState, first: int, last: int) -> None:
    for i in range(first, last + 1):
        apply(state, tick("t", 1, T0 + i * S))
        apply(state, report(T0 + i * S + 500, (f"t@{T0 + i * S}", 0, 1, True)))


def test_retention_by_age_keeps_up_with_the_fires() -> None:
    # Age is checked lazily (every 64th record); each check must drop everything that aged out,
    # so at most ~64 records beyond the keep window are ever kept. (Regression: a check could
    # drop only prune_step records, so a per-second task kept 600 records after 640 fires.)
    keep = Retention(keep_count=1000, keep_ms=5 * S)
    a = with_task(retention=keep)
    b = with_task(retention=keep)
    most = 0
    for i in range(1, 401):
        for state in (a, b):
            apply(state, tick("t", 1, T0 + i * S))
        most = max(most, record(a, "t").kept_fires)
    assert a.digest() == b.digest()
    window = 5 + 1  # records decided in [now - keep_ms, now]
    assert window <= most <= window + 64 + keep.prune_step
    kept = fires_of(a, "t")
    assert len(kept) == record(a, "t").kept_fires
    assert kept[0].decided_ms >= T0 + 400 * S - keep.keep_ms - 64 * S
    assert record(a, "t").fires_total == 400


def test_unfinished_runs_are_never_pruned() -> None:
    state = with_task(
        TaskSpec("t", EVERY_SECOND, overlap=Overlap.ALLOW, command="true"), retention=Retention(keep_count=2)
    )
    _many_fires(state, 6, finish=False)
    assert len(runs_of(state, "t")) == 6
    assert record(state, "t").active_runs == 6


def test_stuck_runs_do_not_stop_finished_runs_from_being_pruned() -> None:
    # Regression: the prune scan looked at the first 8 runs only; when those never finish (their
    # executor died) no finished run behind them was ever pruned. The keys-only pass reads past
    # the unfinished runs (told from their keys) to the finished ones.
    keep = Retention(keep_count=3)
    state = with_task(TaskSpec("t", EVERY_SECOND, overlap=Overlap.ALLOW, command="true"), retention=keep)
    # The batch prune at finish 3 + PRUNE_BATCH - phase + 1, then 2 more.
    last = 10 + 3 + PRUNE_BATCH - prune_phase("t") + 1 + 2
    for i in range(1, last + 1):
        apply(state, tick("t", 1, T0 + i * S))
        if i > 10:  # runs +1s .. +10s never finish
            apply(state, report(T0 + i * S + 500, (f"t@{T0 + i * S}", 0, 1, True)))
    runs = runs_of(state, "t")
    want = [T0 + i * S for i in range(last - 4, last + 1)]
    assert [r.nominal_ms for r in runs if r.state == pb.SUCCEEDED] == want
    assert sum(1 for r in runs if r.state == pb.PENDING) == 10
    assert (record(state, "t").kept_runs, record(state, "t").active_runs) == (5, 10)


# --------------------------------------------------------------------------- snapshot, restore, load


def _busy_state() -> SchedulerState:
    state = fresh(Retention(keep_count=4))
    assert create(
        state, TaskSpec("t", EVERY_SECOND, shards=2, overlap=Overlap.ALLOW, command="true"), key="c1"
    ).ok
    assert create(state, TaskSpec("m", ManualTrigger(), params_json='{"a": 1}', command="true")).ok
    assert create(state, TaskSpec("off", IntervalTrigger(60 * S), command="true"), disabled=True).ok
    _many_fires(state, 6, finish=False)
    apply(state, report(T0 + 7 * S, (f"t@{T0 + S}", 0, 1, True), (f"t@{T0 + S}", 1, 1, True)))
    apply(state, report(T0 + 7 * S, (f"t@{T0 + 2 * S}", 0, 1, False)))
    assert trigger(state, "m", now=T0 + 7 * S, key="c2").ok
    return state


def test_snapshot_restore_round_trip_is_identity() -> None:
    state = _busy_state()
    snap = state.snapshot()
    other = fresh(Retention(keep_count=4))
    assert create(other, TaskSpec("junk", EVERY_SECOND, command="true")).ok  # restore discards everything
    other.restore(snap, applied_index=42)
    assert other.snapshot() == snap
    assert other.digest() == state.digest()
    assert other.store.applied_index() == 42
    assert other.get_task("junk") is None
    assert other.pending_attempts() == state.pending_attempts()
    assert sorted(other.armed_tasks()) == sorted(state.armed_tasks())
    assert (other.max_epoch, other.max_now_ms, other.manual_seq) == (
        state.max_epoch,
        state.max_now_ms,
        state.manual_seq,
    )
    # and both behave the same from here on
    nxt = [
        report(T0 + 8 * S, (f"t@{T0 + 3 * S}", 0, 1, True), (f"t@{T0 + 3 * S}", 1, 1, True)),
        tick("t", 1, T0 + 8 * S),
        writes.trigger_now("m", "", now_ms=T0 + 8 * S, epoch=1, origin="n1", key="c2"),
    ]
    for data in nxt:
        assert state.apply(data).encode() == other.apply(data).encode()
    assert state.snapshot() == other.snapshot()


def test_load_from_an_existing_store_is_a_restart() -> None:
    state = _busy_state()
    again = SchedulerState.load(state.store, Retention(keep_count=4))
    assert again.digest() == state.digest()
    assert again.pending_attempts() == state.pending_attempts()
    data = tick("t", 1, T0 + 8 * S)
    assert state.apply(data).encode() == again.apply(data).encode()


def test_restoring_a_newer_snapshot_format_fails_clearly_and_changes_nothing() -> None:
    state = _busy_state()
    snap = pb.Snapshot.FromString(state.snapshot())
    snap.format = codec.SNAPSHOT_FORMAT + 1
    before = state.digest()
    with pytest.raises(SnapshotFormatError, match="newer"):
        state.restore(snap.SerializeToString(), applied_index=1)
    assert state.digest() == before


# --------------------------------------------------------------------------- garbage in


@pytest.mark.parametrize(
    "data", [b"\xff\xff\xff", b"\x0a\x05abc", b"\x80" * 12], ids=["ff", "truncated", "varint"]
)
def test_undecodable_bytes_are_rejected_never_raised(data: bytes) -> None:
    state = _busy_state()
    before = domain(state)
    res = apply(state, data)
    assert (res.ok, res.code) == (False, "invalid_argument")
    assert "undecodable" in res.message
    assert domain(state) == before


def test_a_newer_command_format_is_refused_without_touching_anything() -> None:
    state = _busy_state()
    before, chain, applied = state.digest(), state.chain, state.applied_commands
    cmd = pb.Command(format=codec.COMMAND_FORMAT + 1, epoch=1, now_ms=T0 + 9 * S)
    cmd.barrier.node_id = "n9"
    res = apply(state, cmd.SerializeToString())
    assert (res.ok, res.code) == (False, codec.FORMAT_TOO_NEW)
    assert "newer" in res.message
    # Not even the apply chain moves: an upgraded replica applies this entry, so this one must
    # stop before it rather than record a rejection (the replica raises FormatTooNew).
    assert (state.digest(), state.chain, state.applied_commands) == (before, chain, applied)


def test_a_command_without_a_body_is_rejected() -> None:
    state = _busy_state()
    before = domain(state)
    res = apply(state, codec.encode_command(pb.Command(epoch=1, now_ms=T0 + 9 * S)))
    assert (res.ok, res.code) == (False, "invalid_argument")
    assert domain(state) == before


def test_a_fires_reason_is_not_a_signal() -> None:
    """Only the overlap policy holds a run behind a running one: a leader's fire whose reason
    reads like the marker that once steered it ("buffered") is an ordinary fire."""
    state = fresh()
    create(state, TaskSpec("t", EVERY_SECOND, command="x", overlap=Overlap.BUFFER_ONE))
    at = T0 + S
    out = state.apply(batch(at, entry("t", 1, [fire(at, reason="buffered")], watermark=at, next_fire=at + S)))
    assert [e.run_id for e in out.effects if isinstance(e, AttemptReady)] == [f"t@{at}"]
    (data,) = state.active.values()
    assert not pb.Run.FromString(data).held and state.tasks["t"].held_run == ""


def test_a_user_task_whose_handler_is_named_workflow_keeps_its_overlap_policy() -> None:
    """Only a workflow's trigger task (its internal ``<workflow>#`` task) fires past the
    buffer_one/replace policies; a user task whose handler happens to be called "workflow" is
    an ordinary task, and its second fire waits behind the first run."""
    state = fresh()
    create(state, TaskSpec("t", EVERY_SECOND, handler="workflow", overlap=Overlap.BUFFER_ONE))
    apply(state, tick("t", 1, T0 + S))
    apply(state, tick("t", 1, T0 + 2 * S))
    assert [pb.FireOutcome.Name(f.outcome) for f in fires_of(state, "t")] == ["FIRED", "FIRED"]
    assert state.tasks["t"].held_run == f"t@{T0 + 2 * S}"
