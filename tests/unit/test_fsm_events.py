"""The event book (raftsched.fsm.events) through the state machine's apply: dedupe per
(name, key) within the window, the first acceptance answered to duplicates, pruning by time,
refusals as values (issue 28 §3)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from raftsched import codec
from raftsched.fsm import keys
from raftsched.fsm.events import MAX_EVENT_PAYLOAD, list_events
from raftsched.fsm.records import Retention
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import T0, fresh

HOUR = 3600 * 1000
LATER = 1_800_000_000_000  # 2027-01-15: after the dates the tests use as keys
WINDOW = 24 * HOUR


def emit(
    state: SchedulerState, name: str, key: str, payload: str = "", now: int = T0, idem: str = ""
) -> pb.CommandResult:
    cmd = pb.Command(now_ms=now, epoch=1, origin="n1", idempotency_key=idem)
    body = cmd.emit_event
    body.name, body.key, body.payload_json, body.namespace = name, key, payload, "default"
    return state.apply(codec.encode_command(cmd)).result


def events(state: SchedulerState, name: str = "") -> list[pb.EventRecord]:
    with state.store.reader() as r:
        return list_events(r, name, 1000)


def stored_event_keys(state: SchedulerState) -> int:
    with state.store.reader() as r:
        return sum(1 for _ in r.scan(keys.EVENT, keys.EVENT + keys.END))


def test_an_event_is_accepted_once_and_a_duplicate_gets_the_first_acceptance() -> None:
    state = fresh()
    first = emit(state, "orders-ready", "2026-12-04", '{"rows": 10}')
    assert first.ok and not first.duplicate
    assert (first.event.name, first.event.key, first.event.seq) == ("orders-ready", "2026-12-04", 1)
    assert first.event.accepted_ms == T0
    again = emit(state, "orders-ready", "2026-12-04", '{"rows": 99}', now=T0 + HOUR)
    assert again.ok and again.duplicate
    assert again.event == first.event  # the first payload and time, not the second
    other = emit(state, "orders-ready", "2026-12-05", now=T0 + HOUR)
    assert other.ok and not other.duplicate and other.event.seq == 2
    assert [e.key for e in events(state)] == ["2026-12-05", "2026-12-04"]
    assert [e.key for e in events(state, "nothing")] == []


def test_after_the_window_the_same_pair_is_a_new_event_and_old_ones_are_pruned() -> None:
    state = fresh(Retention(event_dedupe_ms=WINDOW))
    assert not emit(state, "e", "k").duplicate
    assert emit(state, "e", "k", now=T0 + WINDOW - 1).duplicate
    renewed = emit(state, "e", "k", now=T0 + WINDOW)
    assert not renewed.duplicate and renewed.event.accepted_ms == T0 + WINDOW
    # Many events, then time passes: each later emit prunes a few, so storage drains.
    for i in range(40):
        emit(state, "bulk", str(i), now=T0 + WINDOW + i)
    assert stored_event_keys(state) == 41
    for i in range(20):
        emit(state, "later", str(i), now=T0 + 3 * WINDOW + i)
    assert stored_event_keys(state) == 20  # the 41 old ones are gone: pruning outpaces accepting


def test_bad_events_are_refused_as_values_and_change_nothing() -> None:
    state = fresh()
    assert emit(state, "first", "k").ok
    digest = state.content_digest()[0]
    big = json.dumps({"x": "a" * MAX_EVENT_PAYLOAD})
    res = emit(state, "e", "k", big)
    assert (res.ok, res.code) == (False, "invalid_argument")
    assert "64 KiB" in res.message and "payload" in res.message
    assert emit(state, "e", "k", "[1, 2]").code == "invalid_argument"
    assert emit(state, "e", "k", "{nope").code == "invalid_argument"
    assert emit(state, "bad name!", "k").code == "invalid_argument"
    assert emit(state, "e", "x" * 300).code == "invalid_argument"
    assert state.content_digest()[0] == digest
    assert state.event_seq == 1
    assert emit(state, "e", "k", '{"ok": true}').ok


def test_the_leader_refuses_a_big_payload_before_proposing_naming_the_field() -> None:
    import pytest

    from raftsched.errors import InvalidSpec

    big = json.dumps({"x": "a" * MAX_EVENT_PAYLOAD})
    with pytest.raises(InvalidSpec, match=r"payload.*64 KiB"):
        writes.emit_event("e", "k", big, "default", now_ms=T0, epoch=1, origin="n1", key="i")
    data = writes.emit_event("e", "", "", "", now_ms=T0, epoch=1, origin="n1", key="req-1")
    cmd = codec.decode_command(data)
    assert cmd.emit_event.key == "req-1" and cmd.emit_event.namespace == "default"
    assert codec.command_format(cmd) == codec.EVENTS_FORMAT


def test_a_retried_emit_with_the_same_idempotency_key_answers_the_first_outcome() -> None:
    state = fresh()
    first = emit(state, "e", "k", idem="req-1")
    second = emit(state, "e", "k", idem="req-1", now=T0 + 5)
    assert second == first  # remembered whole, not re-applied (not even as a duplicate)


def test_two_replicas_applying_the_same_emits_agree_byte_for_byte() -> None:
    a, b = fresh(), fresh()
    for state in (a, b):
        for i in range(30):
            emit(state, f"e{i % 3}", str(i % 7), now=T0 + i * HOUR)
    assert a.snapshot() == b.snapshot()


_emits = st.lists(
    st.tuples(
        st.sampled_from(["a", "b", "c"]), st.sampled_from(["1", "2", "3", "4"]), st.integers(0, 3 * HOUR)
    ),
    max_size=40,
)


@settings(max_examples=150, deadline=None)
@given(_emits)
def test_any_sequence_with_duplicates_accepts_exactly_one_per_distinct_pair_within_the_window(
    seq: list[tuple[str, str, int]],
) -> None:
    from tests.support.fsm import runs_of

    window = HOUR
    state = fresh(Retention(event_dedupe_ms=window))
    _subscribed(state, "on-a", "a")
    _subscribed(state, "on-b", "b")
    now = T0
    accepted: dict[tuple[str, str], int] = {}  # the model: pair -> acceptance time
    fresh_count = 0
    for name, key, step in seq:
        now += step
        res = emit(state, name, key, now=now)
        assert res.ok
        first = accepted.get((name, key))
        expect_dup = first is not None and now < first + window
        assert res.duplicate == expect_dup
        if expect_dup:
            assert res.event.accepted_ms == first
        else:
            accepted[(name, key)] = now
            fresh_count += 1
    assert state.event_seq == fresh_count
    # Exactly one run per accepted (name, key): none for duplicates, none for unsubscribed "c".
    for name in ("a", "b"):
        runs = runs_of(state, f"on-{name}")
        expected = sum(1 for n, _, _ in _accepts(seq, window) if n == name)
        assert len(runs) == expected
        assert {r.env["RAFTSCHED_EVENT_KEY"] for r in runs} <= {k for n, k, _ in seq if n == name}


def _accepts(seq: list[tuple[str, str, int]], window: int) -> list[tuple[str, str, int]]:
    """The model: the (name, key, time) emits that are accepted, not duplicates."""
    now = T0
    first: dict[tuple[str, str], int] = {}
    out: list[tuple[str, str, int]] = []
    for name, key, step in seq:
        now += step
        at = first.get((name, key))
        if at is None or now >= at + window:
            first[(name, key)] = now
            out.append((name, key, now))
    return out


# --------------------------------------------------------------------------- triggers (§3 step 2, 3)


def _subscribed(state: SchedulerState, name: str, on_event: str, **extra: object) -> None:
    from raftsched.model import ManualTrigger, TaskSpec
    from tests.support.fsm import create

    assert create(state, TaskSpec(name, ManualTrigger(), command="true", on_event=on_event, **extra)).ok  # type: ignore[arg-type]


def test_logical_time_is_the_key_when_it_is_a_date_or_time_else_the_accept_time() -> None:
    from raftsched.fsm.events import logical_from_key

    assert logical_from_key("2026-12-04", T0) == 1_796_342_400_000
    assert logical_from_key("2026-12-04T02:00:00Z", T0) == 1_796_342_400_000 + 2 * HOUR
    assert logical_from_key("2026-12-04T03:00:00+01:00", T0) == 1_796_342_400_000 + 2 * HOUR
    assert logical_from_key("2026-12-04T02:00", T0) == 1_796_342_400_000 + 2 * HOUR
    assert logical_from_key("2026-12-04T02:00:00.250Z", T0) == 1_796_342_400_000 + 2 * HOUR + 250
    assert logical_from_key("2026-12-04 01:30-00:30", T0) == 1_796_342_400_000 + 2 * HOUR
    for other in ("batch-17", "", "2026-13-40", "12345678901", "1800-01-01", "20261204", "2026-12-04T25:00"):
        assert logical_from_key(other, T0) == T0


def test_an_accepted_event_starts_one_run_per_subscribed_task_with_the_event_in_its_env() -> None:
    from tests.support.fsm import runs_of

    state = fresh()
    _subscribed(state, "reconcile", "orders-ready")
    _subscribed(state, "report", "orders-ready")
    _subscribed(state, "other", "something-else")
    applied = state.apply(
        codec.encode_command(
            pb.Command(
                now_ms=LATER,
                epoch=1,
                origin="n1",
                emit_event=pb.EmitEvent(name="orders-ready", key="2026-12-04", payload_json='{"rows": 3}'),
            )
        )
    )
    assert applied.result.ok and applied.effects  # the runs are ready for the leader to place
    assert [r.split("@")[0] for r in applied.result.event.runs] == ["reconcile", "report"]
    for task in ("reconcile", "report"):
        (run,) = runs_of(state, task)
        assert run.nominal_ms == 1_796_342_400_000 and run.manual
        assert dict(run.env) == {
            "RAFTSCHED_EVENT_NAME": "orders-ready",
            "RAFTSCHED_EVENT_KEY": "2026-12-04",
            "RAFTSCHED_EVENT_PAYLOAD": '{"rows": 3}',
        }
    assert runs_of(state, "other") == []
    # A duplicate starts nothing; a new key starts one more run each.
    assert emit(state, "orders-ready", "2026-12-04", now=LATER + 1).duplicate
    assert len(runs_of(state, "reconcile")) == 1
    assert not emit(state, "orders-ready", "batch-9", now=LATER + 2).duplicate
    # A key in the future starts its run now (no executor starts a run before its logical time).
    assert not emit(state, "orders-ready", "2030-01-01", now=LATER + 3).duplicate
    runs = runs_of(state, "reconcile")
    assert {r.nominal_ms for r in runs} == {1_796_342_400_000, LATER + 2, LATER + 3}


def test_a_disabled_subscriber_starts_nothing() -> None:
    from tests.support.fsm import runs_of, set_enabled

    state = fresh()
    _subscribed(state, "t", "e")
    assert set_enabled(state, "t", False, now=T0).ok
    assert emit(state, "e", "k").ok
    assert runs_of(state, "t") == []


def test_a_succeeded_run_emits_its_events_keyed_by_its_logical_time_which_start_the_downstream() -> None:
    from raftsched.model import TaskSpec
    from tests.support.fsm import EVERY_SECOND, S, apply, assign, create, join, result, runs_of, tick

    state = fresh()
    assert create(state, TaskSpec("sync", EVERY_SECOND, command="true", emits=("orders-ready",))).ok
    _subscribed(state, "reconcile", "orders-ready")
    assert apply(state, join("ex1")).ok
    assert apply(state, tick("sync", 1, T0 + S)).fired == 1
    run_id = f"sync@{T0 + S}"
    assert apply(state, assign(T0 + S, (run_id, 0, 1, "ex1"))).ok
    assert apply(state, result(T0 + 2 * S, run_id, 1, "ex1", True)).ok
    (ev,) = events(state, "orders-ready")
    assert ev.emitted_by == "task:sync" and ev.key == "2023-11-14T22:14:01Z"
    (down,) = runs_of(state, "reconcile")
    assert down.nominal_ms == T0 + S  # the upstream run's logical time, through the key
    # A failed run emits nothing.
    assert apply(state, tick("sync", 1, T0 + 3 * S)).fired == 1
    failed = f"sync@{T0 + 3 * S}"
    assert apply(state, assign(T0 + 3 * S, (failed, 0, 1, "ex1"))).ok
    assert apply(state, result(T0 + 4 * S, failed, 1, "ex1", False)).ok
    assert len(events(state, "orders-ready")) == 1


def test_the_subscriber_index_follows_tasks_created_updated_and_deleted_after_it_was_built() -> None:
    from raftsched.model import ManualTrigger, TaskSpec
    from tests.support.fsm import delete, runs_of, update

    state = fresh()
    _subscribed(state, "a", "e")
    assert emit(state, "e", "1").ok  # the index is built here
    _subscribed(state, "b", "e")
    assert update(state, TaskSpec("a", ManualTrigger(), command="true", on_event="other"), now=T0).ok
    assert emit(state, "e", "2").ok
    assert [len(runs_of(state, t)) for t in ("a", "b")] == [1, 1]
    assert delete(state, "b", now=T0).ok
    assert emit(state, "other", "3").ok and emit(state, "e", "4").ok
    assert [len(runs_of(state, t)) for t in ("a", "b")] == [2, 1]  # b: its one run before, no new one
    # A replica loading the same state from its store agrees (the index is not stored).
    reloaded = SchedulerState.load(state.store)
    assert emit(reloaded, "other", "5").ok and len(runs_of(reloaded, "a")) == 3


def test_a_workflow_on_event_starts_one_run_per_event_with_the_event_in_its_templates() -> None:
    from tests.support.fsm import apply_wf, task_run

    state = fresh()
    spec = pb.WorkflowSpec(name="reconcile", on_event="orders-ready")
    spec.tasks.add(
        name="go",
        command="reconcile --day {{ ds }} --key {{ event.key }} --rows {{ event.payload.rows }}"
        " --by {{ event.name }}",
        env={"REGION": "{{ event.payload.region }}"},
    )
    assert apply_wf(state, spec).ok
    res = emit(state, "orders-ready", "2026-12-04", '{"rows": 3, "region": "eu"}', now=LATER)
    assert res.ok and not res.duplicate
    (wr,) = state.list_workflow_runs("reconcile", limit=10)
    assert list(res.event.runs) == [wr.run_id]
    assert (wr.event_name, wr.event_key, wr.logical_ms) == ("orders-ready", "2026-12-04", 1_796_342_400_000)
    run = task_run(state, wr.run_id, "go")
    assert run.command == "reconcile --day 2026-12-04 --key 2026-12-04 --rows 3 --by orders-ready"
    assert run.env["REGION"] == "eu"
    assert emit(state, "orders-ready", "2026-12-04", now=LATER + 1).duplicate
    assert len(state.list_workflow_runs("reconcile", limit=10)) == 1
    # A payload without the field the template names fails that task with the reason.
    assert not emit(state, "orders-ready", "2026-12-05", '{"rows": 1}', now=LATER + 2).duplicate
    newest = state.list_workflow_runs("reconcile", limit=10)[0]
    (task,) = newest.tasks
    assert task.state == pb.TASK_FAILED and "event.payload.region" in task.reason
    # A paused workflow starts nothing.
    pause = pb.Command(now_ms=LATER + 3, epoch=1, origin="n1")
    pause.set_workflow_paused.workflow, pause.set_workflow_paused.paused = "reconcile", True
    assert state.apply(codec.encode_command(pause)).result.ok
    assert not emit(
        state, "orders-ready", "2026-12-06", '{"rows": 1, "region": "us"}', now=LATER + 4
    ).duplicate
    assert len(state.list_workflow_runs("reconcile", limit=10)) == 2


def test_template_check_knows_the_event_variables() -> None:
    from raftsched.workflow.template import check_template

    assert check_template("{{ event.key }} {{ event.name }} {{ event.payload.rows }}") == []
    assert check_template("{{ event.kee }}") != []


def test_a_succeeded_workflow_run_emits_its_workflows_events_keyed_by_its_logical_time() -> None:
    from tests.support.fsm import apply, apply_wf, complete, join, runs_of

    state = fresh()
    assert apply(state, join("x1")).ok
    spec = pb.WorkflowSpec(name="orders-sync", emits=["orders-ready"], namespace="team-a")
    spec.tasks.add(name="load", command="load {{ ds }}")
    assert apply_wf(state, spec).ok
    _subscribed(state, "reconcile", "orders-ready")
    start = pb.Command(now_ms=LATER, epoch=1, origin="n1")
    start.start_workflow_run.workflow, start.start_workflow_run.logical_ms = "orders-sync", 1_796_342_400_000
    wr = state.apply(codec.encode_command(start)).result.workflow_run
    assert events(state, "orders-ready") == []
    assert complete(state, wr.run_id, "load", now=LATER + 1).ok
    (ev,) = events(state, "orders-ready")
    assert (ev.key, ev.emitted_by, ev.namespace) == ("2026-12-04T00:00:00Z", "workflow:orders-sync", "team-a")
    (down,) = runs_of(state, "reconcile")
    assert down.nominal_ms == 1_796_342_400_000 and list(ev.runs) == [down.run_id]


def test_definitions_that_use_events_are_stamped_format_5_and_others_keep_theirs() -> None:
    from raftsched.model import CronTrigger, ManualTrigger, TaskSpec

    def stamped(data: bytes) -> int:
        return codec.decode_command(data).format

    plain = TaskSpec("p", CronTrigger("0 3 * * *"), command="true")
    sub = TaskSpec("s", ManualTrigger(), command="true", on_event="e")
    emits = TaskSpec("m", CronTrigger("0 3 * * *"), command="true", emits=("e",))
    make = {"disabled": False, "now_ms": T0, "epoch": 1, "origin": "n1", "key": ""}
    assert stamped(writes.create_task(plain, **make)) == 1  # type: ignore[arg-type]
    assert stamped(writes.create_task(sub, **make)) == codec.EVENTS_FORMAT  # type: ignore[arg-type]
    assert stamped(writes.create_task(emits, **make)) == codec.EVENTS_FORMAT  # type: ignore[arg-type]
    wf = pb.Command(now_ms=T0, epoch=1, origin="n1")
    wf.apply_workflow.spec.name = "w"
    assert codec.command_format(wf) == 1
    wf.apply_workflow.spec.on_event = "e"
    assert codec.command_format(wf) == codec.EVENTS_FORMAT
    wf.apply_workflow.spec.on_event = ""
    wf.apply_workflow.spec.tasks.add(name="t", command="x", emits=["e"])
    assert codec.command_format(wf) == codec.EVENTS_FORMAT
    staged = pb.Command(now_ms=T0, epoch=1, origin="n1")
    staged.stage_workflow_tasks.workflow = "w"
    assert codec.command_format(staged) == 2
    staged.stage_workflow_tasks.tasks.add(name="t", command="x", emits=["e"])
    assert codec.command_format(staged) == codec.EVENTS_FORMAT


def test_a_workflow_task_emits_when_it_succeeds_keyed_by_its_workflow_runs_logical_time() -> None:
    from raftsched.workflow.validate import validate_workflow
    from tests.support.fsm import apply, apply_wf, complete, join, runs_of

    state = fresh()
    assert apply(state, join("x1")).ok
    spec = pb.WorkflowSpec(name="sync")
    spec.tasks.add(name="extract", command="extract")
    spec.tasks.add(
        name="load", command="load", emits=["orders-loaded"], depends_on=[pb.Dependency(task="extract")]
    )
    validate_workflow(spec)
    assert apply_wf(state, spec).ok
    _subscribed(state, "audit", "orders-loaded")
    start = pb.Command(now_ms=LATER, epoch=1, origin="n1")
    start.start_workflow_run.workflow, start.start_workflow_run.logical_ms = "sync", 1_796_342_400_000
    wr = state.apply(codec.encode_command(start)).result.workflow_run
    assert complete(state, wr.run_id, "extract", now=LATER + 1).ok
    assert events(state, "orders-loaded") == []
    assert complete(state, wr.run_id, "load", now=LATER + 2).ok
    (ev,) = events(state, "orders-loaded")
    assert (ev.key, ev.emitted_by) == ("2026-12-04T00:00:00Z", "task:sync#load")
    assert len(runs_of(state, "audit")) == 1
    bad = pb.WorkflowSpec(name="bad")
    bad.tasks.add(name="t", command="x", emits=["not a name"])
    import pytest

    from raftsched.errors import InvalidWorkflow

    with pytest.raises(InvalidWorkflow, match=r"tasks\[0\]\.emits"):
        validate_workflow(bad)
