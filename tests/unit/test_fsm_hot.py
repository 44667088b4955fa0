"""The columnar hot path of the state machine (issue 31 P1, raftsched.fsm.hot).

The strongest check here is differential: the same hot attempts applied as columns and as
today's FireBatch / AssignAttempts / ReportResults leave byte-identical run records, the same
task counters and, after any cold event promotes a hot run, the same cold state.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Sequence

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from raftsched import codec
from raftsched.fsm import hot, hot_slots, hot_wire, keys
from raftsched.fsm.effects import DispatchColumns, ReadyColumns
from raftsched.fsm.records import Retention
from raftsched.fsm.state import SchedulerState
from raftsched.model import Lock, Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import (
    EVERY_SECOND,
    T0,
    S,
    apply,
    assign,
    create,
    delete,
    domain,
    fresh,
    join,
    leave,
    report,
    result,
    run_of,
    tick,
    update,
)

# --------------------------------------------------------------------------- commands


def number_entities(now: int = T0) -> bytes:
    cmd = pb.Command(epoch=1, now_ms=now, origin="n1")
    cmd.number_entities.SetInParent()
    return codec.encode_command(cmd)


def fire_cols(now: int, rows: Sequence[tuple[int, int, int, int]], epoch: int = 1) -> bytes:
    """``rows``: ``(task number, version, nominal_ms, next_fire_ms)``."""
    cmd = pb.Command(epoch=epoch, now_ms=now, origin="n1")
    fc = cmd.fire_columns
    fc.SetInParent()
    fc.task.extend(r[0] for r in rows)
    fc.version.extend(r[1] for r in rows)
    fc.nominal_delta.extend(now - r[2] for r in rows)
    fc.next_delta.extend(r[3] - r[2] for r in rows)
    return codec.encode_command(cmd)


def assign_cols(now: int, rows: Sequence[tuple[int, int, int]], shard: int = 0, epoch: int = 1) -> bytes:
    """``rows``: ``(seq, attempt, executor number)``."""
    cmd = pb.Command(epoch=epoch, now_ms=now, origin="n1")
    ac = cmd.assign_columns
    ac.SetInParent()
    ac.seq.extend(r[0] for r in rows)
    ac.shard.extend([shard] * len(rows))
    ac.attempt.extend(r[1] for r in rows)
    ac.executor.extend(r[2] for r in rows)
    return codec.encode_command(cmd)


def result_cols(now: int, rows: Sequence[tuple[int, int, int, int, int]], epoch: int = 1) -> bytes:
    """``rows``: ``(seq, attempt, executor number, duration_ms, lateness_ms)``."""
    cmd = pb.Command(epoch=epoch, now_ms=now, origin="n1")
    rc = cmd.result_columns
    rc.SetInParent()
    rc.seq.extend(r[0] for r in rows)
    rc.attempt.extend(r[1] for r in rows)
    rc.executor.extend(r[2] for r in rows)
    rc.duration_ms.extend(r[3] for r in rows)
    rc.lateness_ms.extend(r[4] for r in rows)
    return codec.encode_command(cmd)


def _at_epoch(data: bytes, epoch: int) -> bytes:
    """The command ``data`` as the leader of ``epoch`` proposes it."""
    cmd = codec.decode_command(data)
    cmd.epoch = epoch
    return codec.encode_command(cmd)


def cold_success(now: int, run_id: str, executor: str, duration: int, lateness: int) -> bytes:
    return result(now, run_id, 1, executor, True, duration_ms=duration, start_lateness_ms=lateness)


# --------------------------------------------------------------------------- state images


def tables(state: SchedulerState) -> tuple[object, ...]:
    """The in-memory state the hot path derives (equal on replicas and after a reload). Checks on
    the way that the O(1) live count and the per-task live runs agree with the full scan."""
    slots = state.runs.slots
    every = state.hot.live_runs()
    assert state.hot.live_count() == len(every)
    assert state.hot.live_runs_of(list(state.tasks)) == every
    with state.view() as v:
        assert v.active_count == len(v.active)
    k = 0
    while k < len(slots.state) and slots.state[k] not in (hot_slots.PENDING, hot_slots.RUNNING):
        k += 1
    live = tuple(tuple(col[k:]) for col in slots.columns())
    counters = {
        name: (
            st.number,
            st.hot,
            tuple(st.hot_seqs),
            st.version,
            st.watermark_ms,
            st.next_fire_ms,
            st.active_runs,
            st.fires_total,
            st.runs_total,
            st.kept_fires,
            st.kept_runs,
        )
        for name, st in state.tasks.items()
    }
    numbering = state.numbering
    return (
        state.hot.next_seq,
        numbering.next_task_no,
        numbering.next_executor_no,
        {n: st.spec.name for n, st in enumerate(numbering.tasks) if st is not None},
        {n: name for n, name in enumerate(numbering.executors) if name is not None},
        slots.base + k if k < len(slots.state) else None,
        live,
        sorted(counters.items()),
        sorted(state.active.items()),
        sorted(state.active_per_task.items()),
        sorted(state.usage.hot.items()),
        sorted(state.usage.running),
    )


def reloaded(state: SchedulerState) -> SchedulerState:
    """A replica restarted from ``state``'s store (a snapshot restored into a new store), with
    the same retention (every node of a cluster has the same)."""
    other = SchedulerState.load(MemoryStore(), state.retention)
    other.restore(state.snapshot(), state.store.applied_index())
    return other


def numbered(*names: str, executors: Sequence[str] = ("ex1", "ex2"), slots: int = 4) -> SchedulerState:
    state = fresh()
    for name in names:
        assert create(state, TaskSpec(name, EVERY_SECOND, command="true")).ok
    for ex in executors:
        assert apply(state, join(ex, slots)).ok
    assert apply(state, number_entities()).ok
    return state


def stored_runs(state: SchedulerState) -> dict[bytes, bytes]:
    return dict(state.store.scan(keys.RUN, keys.RUN + keys.END))


# --------------------------------------------------------------------------- numbers and the hot bit


def test_number_entities_numbers_in_key_order_and_then_at_creation_and_join() -> None:
    state = fresh()
    for name in ("b", "a"):
        assert create(state, TaskSpec(name, EVERY_SECOND, command="true")).ok
    assert apply(state, join("ex2")).ok and apply(state, join("ex1")).ok
    assert not state.numbering.on and state.tasks["a"].number == 0
    res = apply(state, number_entities())
    assert res.ok and res.accounted == 4
    assert (state.tasks["a"].number, state.tasks["b"].number) == (1, 2)
    assert (state.executors["ex1"].number, state.executors["ex2"].number) == (1, 2)
    assert create(state, TaskSpec("c", EVERY_SECOND, command="true")).ok
    assert apply(state, join("ex3")).ok
    assert state.tasks["c"].number == 3 and state.executors["ex3"].number == 3
    # A second NumberEntities changes nothing; a rejoin keeps its number; numbers are stored.
    assert apply(state, number_entities()).accounted == 0
    assert apply(state, leave("ex1", T0 + S)).ok and apply(state, join("ex1", now=T0 + 2 * S)).ok
    assert state.executors["ex1"].number == 1
    assert state.get_task("c").number == 3  # type: ignore[union-attr]
    with state.view() as v:
        assert v.numbering_on()
        st = v.task_by_number(2)
        assert st is not None and st.spec.name == "b"
        # In bulk (the driver's re-arm of an entry's rows): the same, unknown numbers None.
        numbers = [2, 0, 1, 3, 4, -1, 2]
        assert v.tasks_by_numbers(numbers) == [v.task_by_number(k) for k in numbers]
        assert [t.spec.name if t else None for t in v.tasks_by_numbers(numbers)] == [
            "b", None, "a", "c", None, None, "b"
        ]  # fmt: skip
        assert (v.executor_name(3), v.executor_number("ex3"), v.executor_number("nope")) == ("ex3", 3, 0)
    assert tables(reloaded(state)) == tables(state)


def test_a_state_that_never_numbered_keeps_its_bytes() -> None:
    """Nothing proposes columns before NumberEntities: records and Meta are as before."""
    state = numbered("t")
    plain = fresh()
    assert create(plain, TaskSpec("t", EVERY_SECOND, command="true")).ok
    meta = pb.Meta.FromString(plain.store.get(keys.META) or b"")
    assert (meta.next_seq, meta.next_task_no, meta.next_executor_no) == (0, 0, 0)
    assert b"\xd0\x58" not in (plain.store.get(keys.task_key("t")) or b"")  # no field 1410
    assert pb.Meta.FromString(state.store.get(keys.META) or b"").next_task_no == 2


@pytest.mark.parametrize(
    ("spec", "hot_bit"),
    [
        (TaskSpec("t", EVERY_SECOND, command="true"), False),  # overlap skip (the default)
        (TaskSpec("t", EVERY_SECOND, command="true", overlap=Overlap.ALLOW), True),
        (TaskSpec("t", EVERY_SECOND, command="true", overlap=Overlap.ALLOW, shards=2), False),
        (TaskSpec("t", EVERY_SECOND, command="true", overlap=Overlap.ALLOW, jitter_ms=5), False),
        (TaskSpec("t", EVERY_SECOND, command="true", overlap=Overlap.ALLOW, locks=(Lock("db"),)), False),
        (TaskSpec("t", EVERY_SECOND, command="true", overlap=Overlap.ALLOW, emits=("done",)), False),
        (TaskSpec("t", EVERY_SECOND, command="true", overlap=Overlap.ALLOW, resource_cpu=1.0), False),
    ],
)
def test_the_hot_bit(spec: TaskSpec, hot_bit: bool) -> None:
    state = numbered()
    assert create(state, spec).ok
    assert state.tasks["t"].hot is hot_bit


def allow(name: str) -> TaskSpec:
    return TaskSpec(name, EVERY_SECOND, command="true", overlap=Overlap.ALLOW)


def hot_state(*names: str, slots: int = 4) -> SchedulerState:
    state = numbered(slots=slots)
    for name in names:
        assert create(state, allow(name)).ok
    return state


def test_disable_and_quota_clear_the_hot_bit_and_enable_sets_it() -> None:
    from tests.support.fsm import set_enabled

    state = hot_state("t")
    assert state.tasks["t"].hot
    assert set_enabled(state, "t", False, now=T0 + 1).ok
    assert not state.tasks["t"].hot
    assert set_enabled(state, "t", True, now=T0 + 2).ok
    assert state.tasks["t"].hot
    cmd = pb.Command(epoch=1, now_ms=T0 + 3, origin="n1")
    cmd.set_quota.quota.kind = "namespace"
    cmd.set_quota.quota.name = "default"
    cmd.set_quota.quota.max_running = 5
    assert apply(state, codec.encode_command(cmd)).ok
    assert not state.tasks["t"].hot


# --------------------------------------------------------------------------- the differential check


def twins(*names: str) -> tuple[SchedulerState, SchedulerState]:
    """Two identical numbered states with hot tasks ``names``: one gets columns, one today's bodies."""
    return hot_state(*names), hot_state(*names)


def test_hot_attempts_store_what_the_cold_path_stores() -> None:
    cols, cold = twins("a", "b")
    at = T0 + S
    # Fires.
    applied = cols.apply(fire_cols(at, [(1, 1, at, at + S), (2, 1, at, at + S)]))
    assert applied.result.ok and (applied.result.fired, applied.result.refused) == (2, 0)
    assert applied.effects == (ReadyColumns(1, [1, 2], [at, at], [at + S, at + S]),)
    assert apply(cold, tick("a", 1, at)).fired == 1 and apply(cold, tick("b", 1, at)).fired == 1
    with cols.view() as v:
        ref = v.hot_run(2)
        assert ref is not None and (ref.run_id, ref.state, ref.version) == (f"b@{at}", hot_slots.PENDING, 1)
        assert v.hot_seq(f"a@{at}") == 1 and v.hot_seq("a@1") == 0 and v.hot_seq("zzz") == 0
        # Readers see the hot run as the cold path holds it.
        assert v.active_run(f"a@{at}") == cold.runs.get(f"a@{at}")
    # Assignments.
    applied = cols.apply(assign_cols(at + 10, [(1, 1, 1), (2, 1, 2)]))
    assert applied.result.accounted == 2
    assert applied.effects == (DispatchColumns([1, 2], [1, 1], [1, 2]),)
    assert apply(cold, assign(at + 10, (f"a@{at}", 0, 1, "ex1"), (f"b@{at}", 0, 1, "ex2"))).accounted == 2
    with cols.view() as v:
        assert v.active_run(f"b@{at}") == cold.runs.get(f"b@{at}")
        assert v.usage_of("ex1") == (1, 0.0, 0)
        assert v.pending_attempts() == cold.pending_attempts()
    # Results.
    assert apply(cols, result_cols(at + 500, [(1, 1, 1, 300, 40), (2, 1, 2, 200, 30)])).accounted == 2
    assert apply(cold, cold_success(at + 500, f"a@{at}", "ex1", 300, 40)).accounted == 1
    assert apply(cold, cold_success(at + 500, f"b@{at}", "ex2", 200, 30)).accounted == 1
    assert stored_runs(cols) == stored_runs(cold)  # byte for byte
    for name in ("a", "b"):
        c, d = cols.get_task(name), cold.get_task(name)
        assert c is not None and d is not None
        d.kept_fires = 0  # a hot fire writes no fire record (fire queries synthesise them)
        assert c == d
    assert not cols.active and not cols.usage.hot and not cols.active_per_task
    assert tables(reloaded(cols)) == tables(cols)


@pytest.mark.parametrize("per_task", [False, True])
def test_hot_entries_tally_what_the_cold_path_tallies(per_task: bool) -> None:
    """The node-local counts (/metrics) of hot fires and results, counted per entry, are the
    cold path's per-row counts: tasks of two owners and namespaces, two sharing their labels."""
    from raftsched.fsm.tally import ApplyTally

    specs = [
        TaskSpec("a", EVERY_SECOND, command="true", overlap=Overlap.ALLOW, owner="alice", namespace="etl"),
        TaskSpec("b", EVERY_SECOND, command="true", overlap=Overlap.ALLOW, owner="bob", namespace="web"),
        TaskSpec("c", EVERY_SECOND, command="true", overlap=Overlap.ALLOW, owner="alice", namespace="etl"),
    ]
    cols, cold = numbered(slots=8), numbered(slots=8)
    for state in (cols, cold):
        for spec in specs:
            assert create(state, spec).ok
        assert apply(state, number_entities()).ok
        state.tally = ApplyTally(per_task=per_task)
    seq = 0
    for k in range(1, 4):
        at = T0 + k * S
        assert apply(cols, fire_cols(at, [(t, 1, at, at + S) for t in (1, 2, 3)])).fired == 3
        assert apply(cols, assign_cols(at, [(seq + t, 1, 1) for t in (1, 2, 3)])).accounted == 3
        assert apply(cols, result_cols(at + 1, [(seq + t, 1, 1, 1, 0) for t in (1, 2, 3)])).accounted == 3
        seq += 3
        for spec in specs:
            assert apply(cold, tick(spec.name, 1, at)).fired == 1
            assert apply(cold, assign(at, (f"{spec.name}@{at}", 0, 1, "ex1"))).accounted == 1
            assert apply(cold, cold_success(at + 1, f"{spec.name}@{at}", "ex1", 1, 0)).accounted == 1
    assert cols.tally is not None and cold.tally is not None
    counts, expected = cols.tally.snapshot(), cold.tally.snapshot()
    assert counts == expected
    assert list(counts.attempts) == list(expected.attempts)  # the same series, in the same order
    assert sum(counts.runs_finished.values()) == sum(counts.fires.values()) == 9


def test_failure_of_a_hot_run_promotes_it_and_goes_on_as_the_cold_path() -> None:
    cols, cold = twins("a")
    at = T0 + S
    assert apply(cols, fire_cols(at, [(1, 1, at, at + S)])).fired == 1
    assert apply(cold, tick("a", 1, at)).fired == 1
    assert apply(cols, assign_cols(at + 10, [(1, 1, 1)])).accounted == 1
    assert apply(cold, assign(at + 10, (f"a@{at}", 0, 1, "ex1"))).accounted == 1
    fail = result(at + 100, f"a@{at}", 1, "ex1", False, error="boom", exit_code=3)
    assert apply(cols, fail).accounted == 1 and apply(cold, fail).accounted == 1
    assert stored_runs(cols) == stored_runs(cold)
    assert cols.active == cold.active == {}
    assert cols.runs.slots.live(1) == -1
    assert tables(reloaded(cols)) == tables(cols)


@pytest.mark.parametrize(
    "event", ["cancel", "leave", "lost", "update_replace", "delete", "retry_elsewhere", "quota"]
)
def test_cold_events_promote_a_running_hot_run(event: str) -> None:
    cols, cold = twins("a")
    at = T0 + S
    run_id = f"a@{at}"
    assert apply(cols, fire_cols(at, [(1, 1, at, at + S)])).fired == 1
    assert apply(cold, tick("a", 1, at)).fired == 1
    assert apply(cols, assign_cols(at + 10, [(1, 1, 1)])).accounted == 1
    assert apply(cold, assign(at + 10, (run_id, 0, 1, "ex1"))).accounted == 1
    if event == "cancel":
        cmd = pb.Command(epoch=1, now_ms=at + 50, origin="n1")
        cmd.cancel_runs.run_ids.append(run_id)
        data = codec.encode_command(cmd)
    elif event == "leave":
        data = leave("ex1", at + 50, retry_at=at + 60)
    elif event == "lost":
        cmd = pb.Command(epoch=1, now_ms=at + 50, origin="n1")
        cmd.report_results.results.add(run_id=run_id, shard=0, attempt=1, lost=True, error="lease")
        data = codec.encode_command(cmd)
    elif event == "update_replace":
        spec = TaskSpec("a", EVERY_SECOND, command="true", overlap=Overlap.REPLACE)
        assert update(cols, spec, now=at + 50).ok and update(cold, spec, now=at + 50).ok
        assert not cols.tasks["a"].hot
        data = b""
    elif event == "delete":
        assert delete(cols, "a", now=at + 50).ok and delete(cold, "a", now=at + 50).ok
        data = b""
    elif event == "quota":  # the running hot attempt holds a place of the new quota
        cmd = pb.Command(epoch=1, now_ms=at + 50, origin="n1")
        cmd.set_quota.quota.kind = "namespace"
        cmd.set_quota.quota.name = "default"
        cmd.set_quota.quota.max_running = 5
        data = codec.encode_command(cmd)
    else:
        data = report(at + 50, (run_id, 0, 1, False))
    if data:
        a, b = cols.apply(data), cold.apply(data)
        assert a.result == b.result
        assert a.effects == b.effects
    assert stored_runs(cols) == stored_runs(cold)
    assert cols.active == cold.active
    assert dict(cols.usage.running) == dict(cold.usage.running) and not cols.usage.hot
    assert tables(reloaded(cols)) == tables(cols)


def test_a_pending_hot_run_promoted_by_a_cancel() -> None:
    cols, cold = twins("a")
    at = T0 + S
    assert apply(cols, fire_cols(at, [(1, 1, at, at + S)])).fired == 1
    assert apply(cold, tick("a", 1, at)).fired == 1
    cmd = pb.Command(epoch=1, now_ms=at + 50, origin="n1")
    cmd.cancel_runs.run_ids.append(f"a@{at}")
    a, b = cols.apply(codec.encode_command(cmd)), cold.apply(codec.encode_command(cmd))
    assert a.result == b.result and a.result.runs_cancelled == 1
    assert stored_runs(cols) == stored_runs(cold)


# --------------------------------------------------------------------------- a long attempt pins no slots


def promote_cmd(now: int, before_seq: int, epoch: int = 1) -> bytes:
    cmd = pb.Command(epoch=epoch, now_ms=now, origin="n1")
    cmd.promote_hot_runs.before_seq = before_seq
    return codec.encode_command(cmd)


def pinned(short_runs: int) -> tuple[SchedulerState, int]:
    """Task ``long`` (number 1) runs at seq 1 on ex1; then ``short`` (number 2) fires, runs and
    succeeds ``short_runs`` times (seqs 2...), then fires once more (pending) and once more
    (running). Returns the state and the time of the last entry."""
    state = hot_state("long", "short")
    at = T0 + S
    assert apply(state, fire_cols(at, [(1, 1, at, at + 3600 * S)])).fired == 1
    assert apply(state, assign_cols(at + 1, [(1, 1, 1)])).accounted == 1
    for seq in range(2, short_runs + 2):
        at += S
        assert apply(state, fire_cols(at, [(2, 1, at, at + S)])).fired == 1
        assert apply(state, assign_cols(at + 1, [(seq, 1, 2)])).accounted == 1
        assert apply(state, result_cols(at + 2, [(seq, 1, 2, 5, 1)])).accounted == 1
    at += S
    assert apply(state, fire_cols(at, [(2, 1, at, at + S)])).fired == 1  # left pending
    at += S
    assert apply(state, fire_cols(at, [(2, 1, at, at + S)])).fired == 1
    assert apply(state, assign_cols(at + 1, [(short_runs + 3, 1, 2)])).accounted == 1
    return state, at + 2


def test_one_long_attempt_keeps_every_later_slot_until_it_is_promoted(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(hot, "TRIM_EVERY", 16)  # trimmed at the end of the command that promoted
    state, at = pinned(300)
    slots = state.runs.slots
    assert slots.oldest_live() == 1 and len(slots) == 303  # pinned: the finished ones stay
    pending, running = 302, 303
    twin, _ = pinned(300)
    res = apply(state, promote_cmd(at, running))
    assert (res.ok, res.accounted) == (True, 2)  # the long run and the pending short one
    # What the cold events' promotion stores for the same runs, with the last short run left hot.
    twin.hot.promote(1)
    twin.hot.promote(pending)
    assert stored_runs(state) == stored_runs(twin)
    assert state.active == twin.active and dict(state.usage.running) == dict(twin.usage.running)
    assert slots.oldest_live() == running and slots.base == running and len(slots) == 1
    assert list(state.hot.live_runs()) == [f"short@{at - 2}"]
    assert tables(reloaded(state)) == tables(state)
    assert reloaded(state).digest() == state.digest()
    # Idempotent: nothing live is left below the bound.
    assert (apply(state, promote_cmd(at + 1, running)).accounted, len(slots)) == (0, 1)
    # The long attempt's success: refused as a hot row (no longer a live hot run), accepted as
    # the cold report the leader sends for a refused row.
    long_run = f"long@{T0 + S}"
    assert apply(state, result_cols(at + 2, [(1, 1, 1, 9, 0)])).refused == 1
    assert apply(state, cold_success(at + 3, long_run, "ex1", 9, 0)).accounted == 1
    assert run_of(state, long_run).state == pb.SUCCEEDED
    assert tables(reloaded(state)) == tables(state)


@pytest.mark.parametrize("case", ["logged", "before_logging", "format_18"])
def test_a_promoted_run_pruned_before_the_next_checkpoint_stays_promoted_on_reload(case: str) -> None:
    """A hot run promoted by a cold event (here its success reported the cold way) and pruned
    (the oldest of its task, keep count 5) before the next hot checkpoint: a replica that loads
    its store must not take the checkpoint's live slot for a live hot run again (its usage would
    hold an executor slot for ever, and a leader restarted from it would send the finished
    attempt again). Once promotions are logged (the first PromoteHotRuns), the command's hp/
    record says so; one promoted before that is held as promoted by the checkpoint the first
    PromoteHotRuns takes. A format-18 cluster only has the run record, which is gone."""
    state = fresh(Retention(keep_count=5))
    assert create(state, allow("t")).ok
    assert apply(state, join("ex1", 4)).ok
    assert apply(state, number_entities()).ok
    at = T0 + S
    assert apply(state, fire_cols(at, [(1, 1, at, at + S)])).fired == 1  # seq 1: a long attempt
    assert apply(state, assign_cols(at + 1, [(1, 1, 1)])).accounted == 1
    long_run = f"t@{at}"

    def short_runs(seqs: range, *states: SchedulerState) -> None:
        nonlocal at
        for seq in seqs:
            at += S
            for s in states or (state,):
                assert apply(s, fire_cols(at, [(1, 1, at, at + S)])).fired == 1
                assert apply(s, assign_cols(at + 1, [(seq, 1, 1)])).accounted == 1
                assert apply(s, result_cols(at + 2, [(seq, 1, 1, 5, 1)])).accounted == 1

    short_runs(range(2, 345))  # past a hot checkpoint (every 1,024 commands): it holds seq 1 live
    assert state.store.get(keys.HOT_SLOTS_KEY) is not None
    if case == "logged":
        assert apply(state, promote_cmd(at + 3, 1)).accounted == 0  # logging on, nothing promoted
        assert state.state_format == 5
    assert apply(state, cold_success(at + 4, long_run, "ex1", 9, 0)).accounted == 1  # promotes seq 1
    promoted = list(state.store.scan(keys.HOT_PROMOTED, keys.HOT_PROMOTED + keys.END))
    assert [pb.HotPromoted.FromString(v).seq for _, v in promoted] == ([[1]] if case == "logged" else [])
    if case == "before_logging":
        assert apply(state, promote_cmd(at + 5, 1)).accounted == 0  # its checkpoint holds seq 1
    short_runs(range(345, 445))
    assert state.store.get(keys.run_key_for_id(long_run)) is None  # pruned: the oldest of t
    other = reloaded(state)
    if case == "format_18":
        assert list(other.hot.live_runs()) == [long_run]  # the old behaviour, kept for format 18
        return
    assert list(other.hot.live_runs()) == list(state.hot.live_runs()) == []
    assert dict(other.usage.hot) == dict(state.usage.hot) == {}
    assert tables(other) == tables(state) and other.digest() == state.digest()
    with other.view() as v:
        assert v.pending_attempts() == []
    # Both apply the same log on, through the next checkpoint (which folds any hp/ record in).
    short_runs(range(445, 800), state, other)
    assert list(state.store.scan(keys.HOT_PROMOTED, keys.HOT_PROMOTED + keys.END)) == []
    assert other.digest() == state.digest() and tables(other) == tables(state)
    # The attempt sent again by a leader restarted from either store is refused as a hot row.
    assert apply(other, result_cols(at + 5, [(1, 1, 1, 9, 0)])).refused == 1


def test_a_state_that_logs_promotions_is_format_5_and_a_format_4_build_refuses_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    state, at = pinned(2)
    assert state.state_format == 4
    assert apply(state, promote_cmd(at, 1)).ok
    assert state.state_format == 5 and state.hot.promotions_logged
    image = state.snapshot()
    assert reloaded(state).hot.promotions_logged
    monkeypatch.setattr(codec, "SNAPSHOT_FORMAT", 4)
    with pytest.raises(Exception, match="newer than this build reads"):
        SchedulerState.load(MemoryStore(), state.retention).restore(image, state.store.applied_index())


@pytest.mark.parametrize("before_seq", [0, 7, 1 << 40])  # next_seq is 6
def test_a_promotion_bound_out_of_range_is_refused_whole(before_seq: int) -> None:
    state, at = pinned(2)
    assert state.hot.next_seq == 6
    unchanged(state, promote_cmd(at, before_seq), "invalid_argument")


def test_an_older_build_halts_on_a_promotion(monkeypatch: pytest.MonkeyPatch) -> None:
    state, at = pinned(2)
    data = promote_cmd(at, 2)
    assert pb.Command.FromString(data).format == codec.PROMOTE_FORMAT == codec.COMMAND_FORMAT == 19
    monkeypatch.setattr(codec, "COMMAND_FORMAT", 18)
    before, chain = domain(state), state.chain
    res = apply(state, data)
    assert (res.ok, res.code) == (False, codec.FORMAT_TOO_NEW)
    assert domain(state) == before and state.chain == chain


# --------------------------------------------------------------------------- refusals


def unchanged(state: SchedulerState, data: bytes, code: str) -> None:
    """``data`` is refused whole, as a value, and changes nothing stored or in the tables."""
    before, image = domain(state), tables(state)
    applied = state.apply(data)
    assert (applied.result.ok, applied.result.code) == (False, code)
    assert applied.effects == ()
    assert domain(state) == before and tables(state) == image


@pytest.mark.parametrize("event", ["cancel_then_unknown", "bad_quota"])
def test_a_refused_cold_command_promotes_no_hot_run(event: str) -> None:
    # A cold command that names a live hot run (or, for a quota, all of them) promotes it only once
    # nothing can refuse the command any more: a refusal leaves the state as it was.
    state = hot_state("a")
    at = T0 + S
    assert apply(state, fire_cols(at, [(1, 1, at, at + S)])).fired == 1
    assert apply(state, assign_cols(at + 10, [(1, 1, 1)])).accounted == 1
    cmd = pb.Command(epoch=1, now_ms=at + 50, origin="n1")
    if event == "cancel_then_unknown":
        cmd.cancel_runs.run_ids.extend([f"a@{at}", "a@1"])
        code = "not_found"
    else:
        cmd.set_quota.quota.kind = "namespace"
        cmd.set_quota.quota.name = "default"
        cmd.set_quota.quota.burst = 3  # a burst with no rate: refused
        code = "invalid_argument"
    unchanged(state, codec.encode_command(cmd), code)
    assert state.runs.slots.live(1) >= 0  # still a live hot run


def test_malformed_fire_columns_are_refused_whole() -> None:
    state = hot_state("a", "b")
    at = T0 + S
    cmd = pb.Command.FromString(fire_cols(at, [(1, 1, at, at + S), (2, 1, at, at + S)]))
    del cmd.fire_columns.version[1:]
    unchanged(state, codec.encode_command(cmd), "invalid_argument")  # columns of different lengths
    unchanged(state, fire_cols(at, [(1, 1, at, at + S), (9, 1, at, at + S)]), "invalid_argument")
    unchanged(state, fire_cols(at, [(0, 1, at, at + S)]), "invalid_argument")
    unchanged(state, fire_cols(at, [(1, 1, at + 5, at + S)]), "invalid_argument")  # early
    unchanged(state, fire_cols(at, [(1, 1, at, 1 << 62)]), "invalid_argument")  # out of range


def test_stale_fire_rows_are_refused_each_and_the_rest_apply() -> None:
    state = hot_state("a", "b", "c", "d")
    assert create(state, TaskSpec("cold", EVERY_SECOND, command="true")).ok  # not hot: number 5
    at = T0 + S
    assert apply(state, fire_cols(at, [(4, 1, at, at + S)])).fired == 1  # d: fired once already
    res = apply(
        state,
        fire_cols(
            at + 1,
            [
                (1, 2, at, at + S),  # another version
                (2, 1, at, at + 1),  # next fire not after now
                (3, 1, at, at + S),  # fine
                (4, 1, at, at + S),  # already accounted
                (5, 1, at, at + S),  # not hot
            ],
        ),
    )
    assert (res.ok, res.fired, res.refused) == (True, 1, 4)
    assert state.tasks["c"].active_runs == 1 and state.tasks["a"].active_runs == 0
    assert state.hot.next_seq == 3


def test_catch_up_rows_of_one_task_take_their_last_rows_next_fire() -> None:
    state = hot_state("a")
    at = T0 + 3 * S
    res = apply(state, fire_cols(at, [(1, 1, at - S, at), (1, 1, at, at + S)]))
    assert (res.fired, res.refused) == (2, 0)
    st = state.tasks["a"]
    assert (st.watermark_ms, st.next_fire_ms, st.active_runs, st.hot_seqs) == (at, at + S, 2, [1, 2])
    # A bad row refuses every row of its task.
    res = apply(state, fire_cols(at + S, [(1, 1, at + S, at + 2 * S), (1, 1, at + S, at + 2 * S)]))
    assert (res.fired, res.refused) == (0, 2)


def test_assign_refusals() -> None:
    state = hot_state("a", "b", "c", "d", slots=1)
    at = T0 + S
    assert apply(state, fire_cols(at, [(t, 1, at, at + S) for t in (1, 2, 3, 4)])).fired == 4
    unchanged(state, assign_cols(at, [(1, 1, 7)]), "invalid_argument")  # unknown executor
    unchanged(state, assign_cols(at, [(99, 1, 1)]), "invalid_argument")  # seq not allocated
    cmd = pb.Command.FromString(assign_cols(at, [(1, 1, 1), (2, 1, 2)]))
    del cmd.assign_columns.attempt[1:]
    unchanged(state, codec.encode_command(cmd), "invalid_argument")
    assert apply(state, assign_cols(at, [(1, 2, 1)])).refused == 1  # wrong attempt
    assert apply(state, assign_cols(at, [(1, 1, 1)], shard=1)).refused == 1  # shard 1
    res = apply(state, assign_cols(at, [(1, 1, 1), (2, 1, 1)]))  # ex1 has one slot
    assert (res.accounted, res.refused) == (1, 1)
    assert apply(state, assign_cols(at, [(1, 1, 2)])).refused == 1  # not pending any more
    assert apply(state, leave("ex2", at + 1)).ok
    assert apply(state, assign_cols(at + 2, [(3, 1, 2)])).refused == 1  # dead executor
    assert tables(reloaded(state)) == tables(state)


def test_result_refusals() -> None:
    state = hot_state("a", "b")
    at = T0 + S
    assert apply(state, fire_cols(at, [(1, 1, at, at + S), (2, 1, at, at + S)])).fired == 2
    assert apply(state, assign_cols(at, [(1, 1, 1)])).accounted == 1
    unchanged(state, result_cols(at + 5, [(1, 1, 9, 10, 0)]), "invalid_argument")
    cmd = pb.Command.FromString(result_cols(at + 5, [(1, 1, 1, 10, 0)]))
    cmd.result_columns.lateness_ms.append(0)
    unchanged(state, codec.encode_command(cmd), "invalid_argument")  # columns of different lengths
    unchanged(state, result_cols(at + 5, [(7, 1, 1, 10, 0)]), "invalid_argument")  # seq not allocated
    res = apply(
        state,
        result_cols(
            at + 5,
            [
                (2, 1, 1, 10, 0),  # not running
                (1, 2, 1, 10, 0),  # wrong attempt
                (1, 1, 2, 10, 0),  # wrong executor
            ],
        ),
    )
    assert (res.ok, res.accounted, res.refused) == (True, 0, 3)
    assert apply(state, result_cols(at + 6, [(1, 1, 1, 10, 0), (1, 1, 1, 10, 0)])).accounted == 1


def test_an_older_build_halts_on_a_columns_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    state = hot_state("a")
    data = fire_cols(T0 + S, [(1, 1, T0 + S, T0 + 2 * S)])
    assert pb.Command.FromString(data).format == codec.COLUMNS_FORMAT == 18
    monkeypatch.setattr(codec, "COMMAND_FORMAT", 17)
    before, chain = domain(state), state.chain
    res = apply(state, data)
    assert (res.ok, res.code) == (False, codec.FORMAT_TOO_NEW)
    assert domain(state) == before and state.chain == chain


# --------------------------------------------------------------------------- replicas, load, replay


def workload(steps: int = 12) -> list[bytes]:
    """Hot fires, assignments and results with cold events between them."""
    out = [number_entities()]
    for i, name in enumerate(("a", "b", "c")):
        out.append(
            codec.encode_command(
                pb.Command(
                    epoch=1,
                    now_ms=T0,
                    origin="n1",
                    create_task=pb.CreateTask(spec=codec.spec_to_pb(allow(name)), next_fire_ms=T0 + S + i),
                )
            )
        )
    out += [join("ex1", 8), join("ex2", 8)]
    seq = 1
    for k in range(1, steps + 1):
        at = T0 + k * S
        out.append(fire_cols(at, [(t, 1, at, at + S) for t in (1, 2, 3)]))
        out.append(assign_cols(at + 1, [(seq, 1, 1), (seq + 1, 1, 2), (seq + 2, 1, 1)]))
        if k % 4 == 0:
            out.append(result(at + 2, f"b@{at}", 1, "ex2", False, error="x"))  # promotes b's run
        if k % 5 == 0:
            out.append(leave("ex1", at + 3, retry_at=at + 4))
            out.append(join("ex1", 8, now=at + 5))
        out.append(result_cols(at + 6, [(seq, 1, 1, 5, 2), (seq + 1, 1, 2, 5, 2), (seq + 2, 1, 1, 5, 2)]))
        seq += 3
    return out


def test_replicas_agree_and_a_crash_at_every_commit_reloads_identical_tables() -> None:
    leader, follower = fresh(), fresh()
    for i, data in enumerate(workload(), start=1):
        a = leader.apply(data)
        b = follower.apply(data, leader_effects=False)
        assert a.result == b.result, i
        leader.store.commit(i)
        follower.store.commit(i)
        assert leader.digest() == follower.digest()
        assert tables(leader) == tables(follower)
        crashed = reloaded(leader)  # a replica that crashed here and loaded its store
        assert tables(crashed) == tables(leader), i
        assert crashed.digest() == leader.digest()
    assert leader.hot.next_seq > 30


def test_checkpoint_keeps_load_identical(monkeypatch: pytest.MonkeyPatch) -> None:
    from raftsched.fsm import tasks

    monkeypatch.setattr(tasks, "CHECKPOINT_EVERY", 7)
    state = fresh()
    saw_checkpoint = False
    for i, data in enumerate(workload(20), start=1):
        res = apply(state, data)
        assert res.ok or res.code, i
        state.store.commit(i)
        if state.store.get(keys.HOT_SLOTS_KEY) is not None:
            saw_checkpoint = True
            assert not list(state.store.scan(keys.HOT_FIRES, keys.HOT_FIRES + keys.END)) or (
                state.hot.checkpoint_index < state.applied_commands
            )
        assert tables(reloaded(state)) == tables(state), i
    assert saw_checkpoint and state.hot.checkpoint_index > 0


@pytest.mark.parametrize(
    ("keep_count", "keep_runs", "keep_for_ms"),
    [(3, 0, 0), (3, 5, 0), (1000, 2, 0), (1000, 0, 10 * S), (1000, 2, 3_600_000)],
    ids=["cluster", "own-count-above", "own-count-below", "own-age", "own-both"],
)
def test_history_is_pruned_by_hot_results_as_by_the_cold_path(
    keep_count: int, keep_runs: int, keep_for_ms: int
) -> None:
    """The cluster's retention, and a task's own (``keep_runs`` / ``keep_for``, issue 29 §5):
    the hot results apply decides when to prune from either (records.keeps)."""
    from raftsched.fsm.records import Retention

    cols = SchedulerState.load(MemoryStore(), Retention(keep_count=keep_count))
    cold = SchedulerState.load(MemoryStore(), Retention(keep_count=keep_count))
    spec = TaskSpec(
        "a", EVERY_SECOND, command="true", overlap=Overlap.ALLOW, keep_runs=keep_runs, keep_for_ms=keep_for_ms
    )
    for state in (cols, cold):
        assert create(state, spec).ok
        assert apply(state, join("ex1")).ok
        assert apply(state, number_entities()).ok
    for k in range(1, 80):
        at = T0 + k * S
        assert apply(cols, fire_cols(at, [(1, 1, at, at + S)])).fired == 1
        assert apply(cols, assign_cols(at, [(k, 1, 1)])).accounted == 1
        assert apply(cols, result_cols(at + 1, [(k, 1, 1, 1, 0)])).accounted == 1
        assert apply(cold, tick("a", 1, at)).fired == 1
        assert apply(cold, assign(at, (f"a@{at}", 0, 1, "ex1"))).accounted == 1
        assert apply(cold, cold_success(at + 1, f"a@{at}", "ex1", 1, 0)).accounted == 1
    assert stored_runs(cols) == stored_runs(cold)
    assert cols.tasks["a"].kept_runs == cold.tasks["a"].kept_runs < 79
    assert tables(reloaded(cols)) == tables(cols)


def test_digest_of_the_workload_is_stable() -> None:
    """Two runs of the same log give the same bytes (nothing depends on dict or set order)."""
    digests = set()
    for _ in range(2):
        state = fresh()
        for data in workload(6):
            state.apply(data)
        digests.add(hashlib.sha256(state.snapshot()).hexdigest())
    assert len(digests) == 1


def test_fire_queries_synthesise_the_fired_records_of_hot_fires() -> None:
    from raftsched.fsm import queries

    cols, cold = twins("a")
    for k in (1, 2, 3):
        at = T0 + k * S
        assert apply(cols, fire_cols(at, [(1, 1, at, at + S)])).fired == 1
        assert apply(cols, assign_cols(at, [(k, 1, 1)])).accounted == 1
        assert apply(cols, result_cols(at + 1, [(k, 1, 1, 1, 0)])).accounted == 1
        assert apply(cold, tick("a", 1, at)).fired == 1
        assert apply(cold, assign(at, (f"a@{at}", 0, 1, "ex1"))).accounted == 1
        assert apply(cold, cold_success(at + 1, f"a@{at}", "ex1", 1, 0)).accounted == 1
    with cols.store.reader() as r:
        assert not list(r.scan(keys.FIRE, keys.FIRE + keys.END))  # no fire record stored
        got = queries.fire_records(r, "a", 0, 0, 10)
        newest = queries.fire_records(r, "a", 0, 0, 2, newest=True)
    with cold.store.reader() as r:
        want = queries.fire_records(r, "a", 0, 0, 10)
    assert [(f.nominal_ms, f.outcome, f.run_id, f.decided_ms, f.epoch, f.task_version) for f in got] == [
        (f.nominal_ms, f.outcome, f.run_id, f.decided_ms, f.epoch, f.task_version) for f in want
    ]
    assert [f.nominal_ms for f in newest] == [T0 + 2 * S, T0 + 3 * S]
    # A state the hot path never touched reads as before: its fire records only.
    with cold.store.reader() as r:
        assert queries.synthesised_fires(r, "a", 0, 0, 10, False, want) == []


def test_the_end_of_run_record_from_wire_pieces_is_protobufs_deterministic_bytes() -> None:
    cases = [
        ("a", 1, "", "a@5", 5, 6, 9, 1, "ex1", 7, 5 + 40, 300),
        ("t" * 200, 1 << 40, '{"k": "v"}', "t@1", T0, T0 + 1, T0 + 99, 1 << 33, "é" * 70, T0 + 2, 0, 0),
        ("b", 3, "{}", "b@0", 0, 0, 0, 0, "", 0, -7, 1 << 31),
        # A run id of 128 bytes or more (a two-byte length): the record before 6a2a4b6 wrote it twice.
        ("u" * 120, 2, "", "u" * 120 + f"@{T0}", T0, T0, T0 + 5, 3, "ex2", T0 + 1, T0 + 2, 7),
    ]
    for task, version, params, rid, nominal, created, now, epoch, ex, assigned, started, dur in cases:
        run = pb.Run(
            run_id=rid,
            task=task,
            nominal_ms=nominal,
            task_version=version,
            state=pb.SUCCEEDED,
            created_ms=created,
            finished_ms=now,
            epoch=epoch,
            params_json=params,
            timeline_derived=True,
        )
        run.timeline.add(event="created", at_ms=created, reason="fire")
        run.shards.add(
            attempt=1, state=pb.SUCCEEDED, finished_ms=now, executor=ex, assigned_ms=assigned, duration_ms=dur
        ).started_ms = started
        head = hot_wire.finished_head(task, version, params)
        got = finished_run_bytes(head, rid, nominal, created, now, epoch, ex, assigned, started, dur)
        assert got == run.SerializeToString(deterministic=True)
        assert head.key_prefix + b"%016x" % nominal == keys.time_key(keys.RUN, task, nominal)


def finished_run_bytes(
    head: hot_wire.FinishedHead,
    run_id: str,
    nominal_ms: int,
    created_ms: int,
    finished_ms: int,
    epoch: int,
    executor: str,
    assigned_ms: int,
    started_ms: int,
    duration_ms: int,
) -> bytes:
    """A finished hot run's record from its wire pieces, in the order HotBook.result_columns
    concatenates them (see hot_wire.FinishedHead)."""
    data = run_id.encode()
    times = hot_wire.finished_times(created_ms, finished_ms, epoch)
    return b"".join(
        (
            hot_wire.id_tag(len(data)),
            data,
            head.task_field,
            hot_wire.int_field(3, nominal_ms),
            head.version_field,
            times[0],
            hot_wire.shard_field(finished_ms, executor, assigned_ms, started_ms, duration_ms),
            head.params_field,
            times[1],
        )
    )


def test_a_results_entry_of_varied_rows_stores_what_the_cold_path_stores() -> None:
    """The rows of one results entry share their pieces where they can (nominal times, created
    times, shards): rows that share some and differ in others, long run ids (a two-byte length),
    params, durations of 0, negative start lateness, two executors and two fire entries."""
    long_name = "t" * 120  # its run ids are over 127 bytes
    names = ("a", "b", long_name, "p")
    cols, cold = twins(*names)
    for state in (cols, cold):
        spec = TaskSpec("p", EVERY_SECOND, command="true", overlap=Overlap.ALLOW, params_json='{"k": "v"}')
        assert update(state, spec, now=T0).ok
    at, later = T0 + S, T0 + 2 * S
    numbers = {name: cols.tasks[name].number for name in names}
    versions = {name: cols.tasks[name].version for name in names}
    fires = [(numbers[n], versions[n], at, at + S) for n in names]
    assert cols.apply(fire_cols(at, fires)).result.fired == 4
    assert cols.apply(fire_cols(later, [(numbers["a"], versions["a"], later, later + S)])).result.fired == 1
    for n in names:
        assert apply(cold, tick(n, versions[n], at)).fired == 1
    assert apply(cold, tick("a", versions["a"], later)).fired == 1
    rows = [(1, 1, 1), (2, 1, 2), (3, 1, 1), (4, 1, 2), (5, 1, 1)]
    assert cols.apply(assign_cols(later + 10, rows)).result.accounted == 5
    runs = [(f"{n}@{at}", 0, 1, "ex1" if i % 2 == 0 else "ex2") for i, n in enumerate(names)]
    runs.append((f"a@{later}", 0, 1, "ex1"))
    assert apply(cold, assign(later + 10, *runs)).accounted == 5
    # (duration, lateness): rows 1 and 3 share executor, assigned time, start and duration; row
    # 4 differs from them in its executor only, row 5 in its fire (nominal and created times).
    times = [(300, 40), (0, -7), (300, 40), (300, 40), (300, 40)]
    got = cols.apply(result_cols(later + 500, [(*r, *t) for r, t in zip(rows, times, strict=True)]))
    assert got.result.accounted == 5
    for (run_id, _, _, ex), (dur, late) in zip(runs, times, strict=True):
        assert apply(cold, cold_success(later + 500, run_id, ex, dur, late)).accounted == 1
    assert stored_runs(cols) == stored_runs(cold)  # byte for byte
    assert cols.runs.unflushed == cold.runs.unflushed


def test_results_rows_that_differ_in_one_shared_piece_each_store_what_the_cold_path_stores() -> None:
    """The pieces one results entry shares between its rows are keyed by everything they hold:
    rows that differ from another *only* in their duration, *only* in their assignment's time
    (two assign entries), or *only* in their fire's epoch (two fire entries) each get their own."""
    names = ("a", "b", "c", "d")
    cols, cold = twins(*names)
    at, later = T0 + S, T0 + 2 * S
    numbers = {name: cols.tasks[name].number for name in names}
    versions = {name: cols.tasks[name].version for name in names}
    fires = [(numbers[n], versions[n], at, at + S) for n in names]
    # a, b, c fire in an entry of epoch 1, d in one of epoch 2 at the same time.
    assert cols.apply(fire_cols(at, fires[:3], epoch=1)).result.fired == 3
    assert cols.apply(fire_cols(at, fires[3:], epoch=2)).result.fired == 1
    for n in names:
        assert apply(cold, tick(n, versions[n], at, epoch=2 if n == "d" else 1)).fired == 1
    # a, b, d assigned at later + 10 and c at later + 20, all to ex1 (by the leader of epoch 2).
    rows_first = [(1, 1, 1), (2, 1, 1), (4, 1, 1)]
    assert cols.apply(assign_cols(later + 10, rows_first, epoch=2)).result.accounted == 3
    assert cols.apply(assign_cols(later + 20, [(3, 1, 1)], epoch=2)).result.accounted == 1
    first = [(f"{n}@{at}", 0, 1, "ex1") for n in ("a", "b", "d")]
    assert apply(cold, _at_epoch(assign(later + 10, *first), 2)).accounted == 3
    assert apply(cold, _at_epoch(assign(later + 20, (f"c@{at}", 0, 1, "ex1")), 2)).accounted == 1
    # b differs from a only in its duration, c only in its assignment, d only in its epoch.
    times = {"a": (300, 40), "b": (301, 40), "c": (300, 40), "d": (300, 40)}
    rows = [(seq, 1, 1, *times[n]) for seq, n in enumerate(names, start=1)]
    assert cols.apply(result_cols(later + 500, rows, epoch=2)).result.accounted == 4
    for n in names:
        success = cold_success(later + 500, f"{n}@{at}", "ex1", *times[n])
        assert apply(cold, _at_epoch(success, 2)).accounted == 1
    assert stored_runs(cols) == stored_runs(cold)  # byte for byte
    assert cols.runs.unflushed == cold.runs.unflushed


def test_a_run_of_a_version_no_longer_kept_stores_what_a_restarted_replica_stores() -> None:
    """A run of version 1 finishes after its task has moved 21 versions on (version 1's spec no
    longer kept: its params fall back to the current spec's). A replica whose caches were filled
    while version 1 was kept (it finished a run of it then) stores the same bytes as one that
    restarted since (its caches empty): the caches are keyed by the task's current version."""
    warm, restarted = twins("a")
    at, later = T0 + S, T0 + 2 * S
    number = warm.tasks["a"].number
    for state in (warm, restarted):
        assert state.apply(fire_cols(at, [(number, 1, at, later)])).result.fired == 1
        assert state.apply(fire_cols(later, [(number, 1, later, later + S)])).result.fired == 1
        assert state.apply(assign_cols(later + 10, [(1, 1, 1), (2, 1, 1)])).result.accounted == 2
        # The first run finishes while version 1 is current: the heads of (a, 1) are cached.
        assert state.apply(result_cols(later + 20, [(1, 1, 1, 5, 0)])).result.accounted == 1
        for i in range(21):
            spec = dataclasses.replace(allow("a"), params_json=f'{{"i": {i}}}')
            assert update(state, spec, now=later + 30 + i).ok
        assert state.tasks["a"].version == 22
    restarted.hot.finished_heads.clear()  # as after a restart
    restarted.hot.templates.clear()
    for state in (warm, restarted):
        assert state.apply(result_cols(later + 100, [(2, 1, 1, 5, 0)])).result.accounted == 1
    assert stored_runs(warm) == stored_runs(restarted)  # byte for byte
    [run] = [pb.Run.FromString(v) for k, v in stored_runs(warm).items() if b"%016x" % later in k]
    assert run.task_version == 1 and run.params_json == '{"i": 20}'  # the current spec's


def test_state_format_4_is_written_from_numbering_on_and_refused_by_a_format_3_build(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from raftsched.errors import SnapshotFormatError
    from raftsched.fsm.state import DERIVED_TIMELINES_FORMAT, HOT_STATE_FORMAT

    plain = fresh()
    assert create(plain, allow("a")).ok
    assert pb.Meta.FromString(plain.store.get(keys.META) or b"").state_format == DERIVED_TIMELINES_FORMAT
    assert pb.Snapshot.FromString(plain.snapshot()).format == DERIVED_TIMELINES_FORMAT
    assert apply(plain, number_entities()).ok
    assert pb.Meta.FromString(plain.store.get(keys.META) or b"").state_format == HOT_STATE_FORMAT
    assert pb.Snapshot.FromString(plain.snapshot()).format == HOT_STATE_FORMAT == codec.SNAPSHOT_FORMAT - 1
    data = plain.snapshot()
    monkeypatch.setattr(codec, "SNAPSHOT_FORMAT", DERIVED_TIMELINES_FORMAT)  # a build before it
    with pytest.raises(SnapshotFormatError):
        SchedulerState.load(MemoryStore()).restore(data, 1)
    with pytest.raises(SnapshotFormatError):
        SchedulerState.load(plain.store)


def test_reads_of_live_hot_runs_show_what_the_cold_path_stores() -> None:
    from raftsched.fsm import queries

    cols, cold = twins("a", "b")
    at = T0 + S
    assert apply(cols, fire_cols(at, [(1, 1, at, at + S), (2, 1, at, at + S)])).fired == 2
    assert apply(cold, tick("a", 1, at)).fired == 1 and apply(cold, tick("b", 1, at)).fired == 1
    assert apply(cols, assign_cols(at + 10, [(1, 1, 1)])).accounted == 1
    assert apply(cold, assign(at + 10, (f"a@{at}", 0, 1, "ex1"))).accounted == 1
    with cold.store.reader() as r:
        want = {rid: queries.stored_run(r, rid) for rid in (f"a@{at}", f"b@{at}")}
        listed = queries.list_runs(r, ["a", "b"], 0, 0, 0, 10)
    for rid, run in want.items():
        assert cols.live_hot_run(rid) == run
    assert cols.live_hot_run(f"a@{at + 1}") is None
    live = cols.live_hot_runs(["a", "b"], 0, 0, 0)
    assert sorted(live, key=lambda x: (x.nominal_ms, x.run_id), reverse=True) == listed
    assert [r.run_id for r in cols.live_hot_runs(["a", "b"], 0, 0, pb.RUNNING)] == [f"a@{at}"]
    assert cols.live_hot_runs(["b"], at + 1, 0, 0) == []


def test_running_runs_synthesise_only_the_running_hot_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The leader's zombie check reads the runs with a RUNNING attempt every few seconds, under
    the state lock: with a backlog of pending hot runs it must not synthesise them (a leader
    with 300,000 pending held the lock ~1 s, firing fell behind and the cluster lost its leader)."""
    names = [f"t{i}" for i in range(40)]
    cols, cold = twins(*names)
    at = T0 + S
    rows = [(i + 1, 1, at, at + S) for i in range(len(names))]
    assert apply(cols, fire_cols(at, rows)).fired == len(names)
    for name in names:
        assert apply(cold, tick(name, 1, at)).fired == 1
    assert apply(cols, assign_cols(at + 10, [(3, 1, 1), (7, 1, 2)])).accounted == 2
    assert apply(cold, assign(at + 10, (f"t2@{at}", 0, 1, "ex1"), (f"t6@{at}", 0, 1, "ex2"))).accounted == 2
    built: list[int] = []
    real = hot.HotBook._run_bytes

    def counted(self: hot.HotBook, j: int, st: object, run_id: str) -> bytes:
        built.append(j)
        return real(self, j, st, run_id)  # type: ignore[arg-type]

    monkeypatch.setattr(hot.HotBook, "_run_bytes", counted)
    with cols.view() as v:
        running = v.running_runs()
    with cold.view() as v:
        assert running == v.running_runs()  # what the cold path holds
    assert [r.run_id for r in running] == [f"t2@{at}", f"t6@{at}"]
    assert len(built) == 2  # not one per live run (40)


@pytest.mark.parametrize("seed", range(16))
def test_random_streams_of_hot_and_cold_events_keep_the_cold_paths_state(seed: int) -> None:
    """Seeded random streams: hot attempts as columns on one state, as today's bodies on its
    twin, with cold events between (failures, losses, cancels, leaves, disables, updates,
    deletes). After every step the stored runs are byte-identical, the unfinished runs and task
    counters equal (but kept fire records), and a reload rebuilds identical tables."""
    import random

    rnd = random.Random(seed)
    names = ["a", "b", "c", "d"]
    cols, cold = twins(*names)
    execs = {"ex1": 1, "ex2": 2}
    now = T0
    due = dict.fromkeys(names, T0 + S)

    def both(data: bytes) -> None:
        a, b = cols.apply(data), cold.apply(data)
        assert a.result == b.result, data

    def live(state: SchedulerState) -> dict[str, pb.Run]:
        with state.view() as v:
            return {rid: pb.Run.FromString(raw) for rid, raw in v.active.items()}

    for _step in range(60):
        now += rnd.randint(1, 700)
        op = rnd.random()
        if op < 0.3:  # fires of every hot task that is due
            rows, cold_entries = [], []
            for name in names:
                st = cols.tasks.get(name)
                if st is None:
                    continue
                due[name] = max(due[name], st.watermark_ms + 1)  # (enabling again moved it)
                if due[name] > now:
                    continue
                if not st.hot:
                    due[name] = now + S
                    continue
                rows.append((st.number, st.version, due[name], now + S))
                cold_entries.append((name, st.version, due[name]))
                due[name] = now + S
            if rows:
                res = apply(cols, fire_cols(now, rows))
                assert res.fired == len(rows)
                for name, version, nominal in cold_entries:
                    from tests.support.fsm import batch, entry, fire

                    one = batch(now, entry(name, version, [fire(nominal)], watermark=now, next_fire=now + S))
                    assert apply(cold, one).fired == 1
            continue
        runs = live(cold)
        assert runs == live(cols)
        if not runs:
            continue
        rid = rnd.choice(sorted(runs))
        run = runs[rid]
        shard = run.shards[0]
        with cols.view() as v:
            seq = v.hot_seq(rid)
        if op < 0.5 and shard.state == pb.PENDING and not run.held:
            ex = rnd.choice(sorted(execs))
            if seq:
                apply(cols, assign_cols(now, [(seq, shard.attempt, execs[ex])]))
            else:
                apply(cols, assign(now, (rid, 0, shard.attempt, ex)))
            apply(cold, assign(now, (rid, 0, shard.attempt, ex)))
        elif op < 0.7 and shard.state == pb.RUNNING:
            dur, late = rnd.randint(0, 900), rnd.randint(-5, 900)
            if seq:
                apply(cols, result_cols(now, [(seq, shard.attempt, execs[shard.executor], dur, late)]))
            else:
                apply(cols, cold_success(now, rid, shard.executor, dur, late))
            apply(cold, cold_success(now, rid, shard.executor, dur, late))
        elif op < 0.78 and shard.state == pb.RUNNING:
            both(result(now, rid, shard.attempt, shard.executor, False, error="boom"))
        elif op < 0.83 and shard.state == pb.RUNNING:
            cmd = pb.Command(epoch=1, now_ms=now, origin="n1")
            cmd.report_results.results.add(run_id=rid, shard=0, attempt=shard.attempt, lost=True)
            both(codec.encode_command(cmd))
        elif op < 0.88:
            cmd = pb.Command(epoch=1, now_ms=now, origin="n1")
            cmd.cancel_runs.run_ids.append(rid)
            cmd.cancel_runs.skip_finished = True
            both(codec.encode_command(cmd))
        elif op < 0.92:
            ex = rnd.choice(sorted(execs))
            both(leave(ex, now, retry_at=now + 1))
            both(join(ex, now=now + 1))
        elif op < 0.96:
            from tests.support.fsm import set_enabled

            name = run.task
            if name in cold.tasks:
                enabled = not cold.tasks[name].enabled
                a, b = set_enabled(cols, name, enabled, now=now), set_enabled(cold, name, enabled, now=now)
                a.task.kept_fires = b.task.kept_fires = 0  # hot fires store no fire record
                assert a == b
        else:
            name = run.task
            if name in cold.tasks and rnd.random() < 0.5:
                assert delete(cols, name, now=now).ok and delete(cold, name, now=now).ok
                names.remove(name)
            elif name in cold.tasks:
                overlap = rnd.choice([Overlap.ALLOW, Overlap.SKIP])
                spec = TaskSpec(name, EVERY_SECOND, command="true", overlap=overlap)
                a, b = update(cols, spec, now=now), update(cold, spec, now=now)
                a.task.kept_fires = b.task.kept_fires = 0
                assert a == b
                if a.ok:
                    due[name] = now + S
        # A live hot run has no record yet; the cold twin stored it at its fire.
        hot_live = {keys.run_key_for_id(rid) for rid in cols.hot.live_runs()}
        assert stored_runs(cols) == {k: v for k, v in stored_runs(cold).items() if k not in hot_live}
        assert live(cols) == live(cold)
        for name in names:
            c, d = cols.get_task(name), cold.get_task(name)
            assert c is not None and d is not None
            c.number = d.number = 0
            c.kept_fires = d.kept_fires = 0
            assert c == d, name
        assert tables(reloaded(cols)) == tables(cols)


def test_fire_queries_show_live_hot_fires_given_the_live_runs() -> None:
    from raftsched.fsm import queries

    cols, cold = twins("a")
    at = T0 + S
    assert apply(cols, fire_cols(at, [(1, 1, at, at + S)])).fired == 1
    assert apply(cold, tick("a", 1, at)).fired == 1
    assert apply(cols, assign_cols(at, [(1, 1, 1)])).accounted == 1
    assert apply(cold, assign(at, (f"a@{at}", 0, 1, "ex1"))).accounted == 1
    live = cols.live_hot_runs(["a"], 0, 0, 0)

    def key(f: pb.FireRecord) -> tuple[object, ...]:
        return (f.nominal_ms, f.outcome, f.run_id, f.decided_ms, f.epoch, f.task_version, f.count)

    with cols.store.reader() as r, cold.store.reader() as c:
        assert queries.fire_records(r, "a", 0, 0, 10) == []  # nothing stored yet
        assert [key(f) for f in queries.fire_records(r, "a", 0, 0, 10, live=live)] == [
            key(f) for f in queries.fire_records(c, "a", 0, 0, 10)
        ]
        got = queries.recent_fires(r, "a", 5, live)
        want = queries.recent_fires(c, "a", 5)
        assert [(key(f), s) for f, s in got] == [(key(f), s) for f, s in want]
        around, run = queries.fires_around(r, "a", at, live)
        around_c, run_c = queries.fires_around(c, "a", at)
        assert [key(f) for f in around] == [key(f) for f in around_c] and run == run_c


def test_hot_entries_do_not_bring_the_task_checkpoint_forward(monkeypatch: pytest.MonkeyPatch) -> None:
    """CHECKPOINT_TASKS bounds the counter records' replay, which hot entries do not add to: a
    checkpoint re-puts every task named since, so at 8,000 hot tasks counting them took one every
    few entries (22 us per attempt instead of 12 in bench attempt_apply --hot --tasks 8000)."""
    from raftsched.fsm import tasks

    monkeypatch.setattr(tasks, "CHECKPOINT_TASKS", 2)
    state = hot_state("a", "b", "c")
    at = T0 + S
    before = state.hot.checkpoint_index
    rows = [(1, 1, at, at + S), (2, 1, at, at + S), (3, 1, at, at + S)]
    assert apply(state, fire_cols(at, rows)).fired == 3
    assert state.hot.checkpoint_index == before  # no checkpoint
    assert list(state.store.scan(keys.HOT_FIRES, keys.HOT_FIRES + keys.END))
    assert state.task_book.hot_since == {"a", "b", "c"}
    assert tables(reloaded(state)) == tables(state)
    monkeypatch.setattr(tasks, "CHECKPOINT_EVERY", 1)  # the next command checkpoints
    assert apply(state, assign_cols(at, [(1, 1, 1)])).accounted == 1
    assert state.hot.checkpoint_index > before and not state.task_book.hot_since
    assert not list(state.store.scan(keys.HOT_FIRES, keys.HOT_FIRES + keys.END))
    assert record_of(state, "a").active_runs == 1  # re-put with the hot counters
    assert tables(reloaded(state)) == tables(state)


def record_of(state: SchedulerState, name: str) -> pb.TaskRecord:
    return pb.TaskRecord.FromString(state.store.get(keys.task_key(name)) or b"")


_U32 = st.integers(0, 2**32 - 1)
_I64 = st.integers(-(2**63), 2**63 - 1)
_U64 = st.integers(0, 2**64 - 1)
_COLUMN_VALUES = (_U32, _U64, _I64, _U32, _U32, _U32, _I64, _I64, _U64)  # HotCheckpoint's types


@settings(max_examples=200, deadline=None)
@given(
    data=st.data(),
    rows=st.integers(0, 12),
    start=st.integers(0, 13),
    seq_base=st.one_of(st.just(0), _U64),
    chunk=st.integers(1, 5),
)
def test_checkpoint_bytes_are_the_messages_deterministic_bytes(
    data: st.DataObject, rows: int, start: int, seq_base: int, chunk: int
) -> None:
    columns = tuple(data.draw(st.lists(values, min_size=rows, max_size=rows)) for values in _COLUMN_VALUES)
    want = pb.HotCheckpoint(
        seq_base=seq_base,
        **{name: col[start:] for name, col in zip(hot_wire.CHECKPOINT_FIELDS, columns, strict=True)},
    ).SerializeToString(deterministic=True)
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(hot_wire, "CHECKPOINT_CHUNK", chunk)
        assert hot_wire.checkpoint_bytes(seq_base, columns, start) == want


def test_a_checkpoint_encodes_a_big_slot_table_in_chunks(monkeypatch: pytest.MonkeyPatch) -> None:
    """No protobuf call takes every live slot at once: one call holds the GIL throughout (0.7 s
    at 400,000 slots), on every node at once, and stalled their Raft tick threads."""
    state = hot_state("a")
    at = T0 + S
    assert apply(state, fire_cols(at, [(1, 1, at, at + S)])).fired == 1
    slots = state.runs.slots
    for col in slots.columns():  # a backlog of live slots (copies of the one live run)
        col.extend([col[-1]] * 2 * hot_wire.CHECKPOINT_CHUNK)
    biggest = [0]
    real_serialise = pb.HotCheckpoint.SerializeToString

    def counting(self: pb.HotCheckpoint, **kwargs: bool) -> bytes:
        biggest[0] = max(biggest[0], len(self.task), len(self.nominal_ms), len(self.epoch))
        return real_serialise(self, **kwargs)

    monkeypatch.setattr(pb.HotCheckpoint, "SerializeToString", counting)
    state.hot.checkpoint(state.applied_commands)
    monkeypatch.undo()
    assert 0 < biggest[0] <= hot_wire.CHECKPOINT_CHUNK
    raw = state.store.get(keys.HOT_SLOTS_KEY)
    assert raw is not None and len(pb.HotCheckpoint.FromString(raw).task) == 2 * hot_wire.CHECKPOINT_CHUNK + 1


@pytest.mark.parametrize(
    ("aged", "head"),
    [
        (0, ()),
        (2, ()),
        (0, ("active",)),
        (3, ("active", "finishing")),
        (5, ("finishing", "active", "active")),
    ],
)
def test_the_age_rule_deletes_the_aged_finished_runs_at_the_head(aged: int, head: tuple[str, ...]) -> None:
    """RunBook.prune's age rule (every AGE_PRUNE_EVERY-th finish) looks for the oldest finished
    run among the first keys first: unfinished runs and the run finishing now at the head of the
    task's range are skipped, the aged finished runs behind them deleted, the rest kept."""
    from raftsched.fsm.records import AGE_PRUNE_EVERY

    state = fresh()
    assert create(state, TaskSpec("a", EVERY_SECOND, command="true", keep_for_ms=10 * S)).ok
    st = state.tasks["a"]
    now = T0 + 100 * S
    finishing = ""
    for i, kind in enumerate(head):
        run_id = f"a@{T0 + i * S}"
        if kind == "finishing":
            finishing = run_id
            state.store.put(keys.run_key_for_id(run_id), b"")  # stored after the prune, in apply
        else:
            state.runs.active[run_id] = b""
            state.store.put(keys.run_key_for_id(run_id), b"")
    finished = []
    for i in range(len(head), len(head) + 8):
        run_id = f"a@{T0 + i * S}"
        ended = now - 20 * S if i - len(head) < aged else now - S  # the first `aged` have aged out
        run = pb.Run(run_id=run_id, task="a", state=pb.SUCCEEDED, finished_ms=ended)
        state.store.put(keys.run_key_for_id(run_id), run.SerializeToString())
        finished.append(keys.run_key_for_id(run_id))
    st.kept_runs = AGE_PRUNE_EVERY
    st.active_runs = head.count("active")
    state.batched_prune = True  # as a hot results entry's format (>= BATCHED_PRUNE_FORMAT) sets
    before = stored_runs(state)
    state.runs.prune(st, now, finishing)
    gone = set(finished[:aged])
    assert stored_runs(state) == {k: v for k, v in before.items() if k not in gone}
    assert st.kept_runs == AGE_PRUNE_EVERY - aged
