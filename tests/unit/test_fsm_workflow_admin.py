"""Workflow pause, resume and delete in the replicated state machine: what the schedule does, what
is refused (unknown workflow, active runs without force), what a forced delete kills, that
nothing of a deleted workflow remains, and that replay gives the same state."""

from __future__ import annotations

from raftsched import codec
from raftsched.fsm import keys, workflow_model
from raftsched.fsm.effects import RunCancelled, TaskArmed
from raftsched.fsm.state import SchedulerState
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import (
    T0,
    S,
    W,
    apply,
    apply_wf,
    command,
    complete,
    domain,
    etl_spec,
    fresh,
    join,
    start,
)

TRIGGER = workflow_model.trigger_name(W)


def set_paused(state: SchedulerState, paused: bool, now: int = T0, next_fire: int = 0) -> pb.CommandResult:
    cmd = command(now)
    cmd.set_workflow_paused.workflow = W
    cmd.set_workflow_paused.paused = paused
    cmd.set_workflow_paused.next_fire_ms = next_fire
    return apply(state, codec.encode_command(cmd))


def delete_cmd(name: str = W, *, force: bool = False, now: int = T0, reason: str = "") -> bytes:
    cmd = command(now)
    cmd.delete_workflow.workflow = name
    cmd.delete_workflow.force = force
    cmd.delete_workflow.reason = reason
    return codec.encode_command(cmd)


def scheduled() -> SchedulerState:
    state = fresh()
    apply(state, join("x1", slots=8))
    res = apply_wf(state, etl_spec(schedule=pb.CronTrigger(expr="* * * * * *")), next_fire=T0 + S)
    assert res.ok, res.message
    return state


def fire_trigger(state: SchedulerState, at: int) -> pb.CommandResult:
    cmd = command(at)
    tf = cmd.fire_batch.tasks.add(task=TRIGGER, version=1, next_fire_ms=at + S, watermark_ms=at)
    tf.fires.add(nominal_ms=at, outcome=pb.FIRED)
    return apply(state, codec.encode_command(cmd))


def test_pause_stops_the_schedule_and_resume_restarts_it_from_now() -> None:
    state = scheduled()
    assert (TRIGGER, T0 + S) in state.armed_tasks()

    res = set_paused(state, True)
    assert res.ok and res.changed and res.workflow.paused
    assert res.workflow.next_fire_ms == 0  # nothing scheduled while paused
    assert TRIGGER not in dict(state.armed_tasks())
    assert state.get_workflow(W).paused  # type: ignore[union-attr]
    # Pausing again changes nothing.
    again = set_paused(state, True)
    assert again.ok and not again.changed
    # Manual runs still start while paused.
    assert start(state).state == pb.WORKFLOW_RUNNING

    later = T0 + 60 * S
    res = set_paused(state, False, now=later, next_fire=later + S)
    assert res.ok and res.changed and not res.workflow.paused
    assert res.workflow.next_fire_ms == later + S
    assert (TRIGGER, later + S) in state.armed_tasks()
    trig = state.get_task(TRIGGER)
    assert trig is not None and trig.watermark_ms == later  # the paused minute is not owed


def test_pause_and_resume_emit_the_trigger_arming() -> None:
    state = scheduled()
    cmd = command(T0)
    cmd.set_workflow_paused.workflow = W
    cmd.set_workflow_paused.paused = True
    out = state.apply(codec.encode_command(cmd))
    assert TaskArmed(TRIGGER, 1, 0) in out.effects
    cmd = command(T0 + 5 * S)
    cmd.set_workflow_paused.workflow = W
    cmd.set_workflow_paused.next_fire_ms = T0 + 6 * S
    out = state.apply(codec.encode_command(cmd))
    assert TaskArmed(TRIGGER, 1, T0 + 6 * S) in out.effects


def test_a_new_version_of_a_paused_workflow_stays_paused() -> None:
    state = scheduled()
    assert set_paused(state, True).ok
    spec = etl_spec(schedule=pb.CronTrigger(expr="*/5 * * * * *"))
    res = apply_wf(state, spec, now=T0 + S, next_fire=T0 + 5 * S)
    assert res.ok and res.workflow.version == 2 and res.workflow.paused
    assert TRIGGER not in dict(state.armed_tasks())


def test_pause_refusals_change_nothing() -> None:
    state = scheduled()
    before = domain(state)
    cmd = command(T0)
    cmd.set_workflow_paused.workflow = "nope"
    cmd.set_workflow_paused.paused = True
    res = apply(state, codec.encode_command(cmd))
    assert (res.ok, res.code, res.message) == (False, "not_found", "workflow 'nope' does not exist")
    # A fire due but not yet accounted: the leader accounts it first (transient refusal).
    res = set_paused(state, True, now=T0 + 2 * S)
    assert not res.ok and res.code == "unavailable"
    assert domain(state) == before


def test_pausing_a_workflow_without_schedule_only_records_it() -> None:
    state = fresh()
    apply(state, join("x1"))
    assert apply_wf(state, etl_spec()).ok
    res = set_paused(state, True)
    assert res.ok and res.workflow.paused
    res = set_paused(state, False)
    assert res.ok and not res.workflow.paused and res.workflow.next_fire_ms == 0


def test_delete_refuses_while_a_run_is_active_and_changes_nothing() -> None:
    state = scheduled()
    run = start(state)
    before = domain(state)
    res = apply(state, delete_cmd())
    assert not res.ok and res.code == "conflict"
    assert res.message == (
        f"workflow 'etl' has 1 active run(s) ({run.run_id}): kill them first, or delete with force"
    )
    assert domain(state) == before
    res = apply(state, delete_cmd("nope", force=True))
    assert (res.ok, res.code) == (False, "not_found")
    assert domain(state) == before


def test_forced_delete_kills_the_active_runs_and_leaves_nothing() -> None:
    state = scheduled()
    finished = start(state, logical=T0 - 86_400_000)
    for task in ("extract", "validate", "load"):
        assert complete(state, finished.run_id, task).ok
    assert fire_trigger(state, T0 + S).fired == 1
    live = start(state)
    extract = state.get_workflow_run(live.run_id).tasks[0].run_id  # type: ignore[union-attr]
    cmd = command(T0)
    cmd.start_backfill.workflow = W
    cmd.start_backfill.logical_ms.append(T0 - 2 * 86_400_000)
    assert apply(state, codec.encode_command(cmd)).ok
    # One task run assigned to x1, so the kill must cancel a running attempt.
    active = state.active_run(extract)
    assert active is not None
    cmd = command(T0)
    cmd.assign_attempts.assignments.add(run_id=extract, shard=0, attempt=1, executor="x1")
    assert apply(state, codec.encode_command(cmd)).accounted == 1

    out = state.apply(delete_cmd(force=True, now=T0 + 2 * S, reason="retired"))
    assert out.result.ok, out.result.message
    assert out.result.runs_killed == 3  # the scheduled, the manual and the backfill run
    assert out.result.workflow.spec.name == W
    cancelled = [e for e in out.effects if isinstance(e, RunCancelled)]
    assert any(e.run_id == extract and e.attempts == ((0, 1, "x1"),) for e in cancelled)
    assert TaskArmed(TRIGGER, 1, 0) in out.effects

    assert state.get_workflow(W) is None
    assert state.list_workflows() == []
    assert state.list_workflow_runs(W) == []
    assert state.list_backfills(W) == []
    assert state.get_workflow_run(live.run_id) is None
    assert state.get_workflow_run(finished.run_id) is None
    assert TRIGGER not in dict(state.armed_tasks())
    assert state.task_names(W + workflow_model.SEP) == []
    prefixes = (
        keys.WORKFLOW,
        keys.WORKFLOW_VERSION,
        keys.WORKFLOW_RUN,
        keys.BACKFILL,
        keys.TASK,
        keys.VERSION,
        keys.FIRE,
        keys.RUN,
    )
    leftovers = [k for k, _ in state.replicated_items() if k.startswith(prefixes) and W.encode() in k]
    assert leftovers == []
    # The name is free again, for a workflow or a task.
    assert apply_wf(state, etl_spec(), now=T0 + 3 * S).workflow.version == 1


def test_delete_and_pause_replay_to_the_same_state() -> None:
    log: list[bytes] = []

    def record(state: SchedulerState, data: bytes) -> None:
        log.append(data)
        state.apply(data)

    state = fresh()
    record(state, join("x1"))
    cmd = command(T0)
    cmd.apply_workflow.spec.CopyFrom(etl_spec(schedule=pb.CronTrigger(expr="* * * * * *")))
    cmd.apply_workflow.next_fire_ms = T0 + S
    record(state, codec.encode_command(cmd))
    cmd = command(T0)
    cmd.set_workflow_paused.workflow = W
    cmd.set_workflow_paused.paused = True
    record(state, codec.encode_command(cmd))
    cmd = command(T0)
    cmd.start_workflow_run.workflow = W
    record(state, codec.encode_command(cmd))
    record(state, delete_cmd(force=True, now=T0 + S))
    replayed = SchedulerState.load(MemoryStore())
    for data in log:
        replayed.apply(data)
    assert replayed.digest() == state.digest()
    # A node restarted from its store holds the same state too.
    reloaded = SchedulerState.load(state.store)
    assert reloaded.digest() == state.digest()


def counts(state: SchedulerState) -> dict[str, int]:
    return {rec.name: used for rec, used in state.executor_usage()}


def parsed_counts(state: SchedulerState) -> dict[str, int]:
    """The running attempts per executor as a parse of every active run finds them (what
    ``executor_usage`` computed before it read the state's ``usage``)."""
    out = {rec.name: 0 for rec, _ in state.executor_usage()}
    for data in state.active.values():
        for s in pb.Run.FromString(data).shards:
            if s.state == pb.RUNNING and s.executor:
                out[s.executor] = out.get(s.executor, 0) + 1
    return out


def test_executor_usage_counts_unfinished_assigned_attempts() -> None:
    state = fresh()
    apply(state, join("x1", slots=8))
    apply(state, join("x2", slots=2))
    assert apply_wf(state, etl_spec()).ok
    run = start(state)
    extract = state.get_workflow_run(run.run_id).tasks[0].run_id  # type: ignore[union-attr]
    cmd = command(T0)
    cmd.assign_attempts.assignments.add(run_id=extract, shard=0, attempt=1, executor="x2")
    assert apply(state, codec.encode_command(cmd)).accounted == 1
    usage = [(rec.name, rec.slots, used) for rec, used in state.executor_usage()]
    assert usage == [("x1", 8, 0), ("x2", 2, 1)]
    assert counts(state) == parsed_counts(state) == {"x1": 0, "x2": 1}
    assert counts(SchedulerState.load(state.store)) == {"x1": 0, "x2": 1}  # rebuilt on load
    done = command(T0)
    done.report_results.results.add(run_id=extract, shard=0, attempt=1, executor="x2", success=True)
    assert apply(state, codec.encode_command(done)).ok
    assert counts(state) == parsed_counts(state) == {"x1": 0, "x2": 0}  # settled: released
    assert complete(state, run.run_id, "validate").ok  # the next task, on x1 (assigned, finished)
    assert counts(state) == parsed_counts(state) == {"x1": 0, "x2": 0}
    cmd = command(T0)
    cmd.executor_leave.name = "x1"
    cmd.executor_leave.reason = "bye"
    assert apply(state, codec.encode_command(cmd)).ok
    assert [rec.name for rec, _ in state.executor_usage()] == ["x2"]
    left = [(rec.name, rec.alive, rec.left_reason) for rec, _ in state.executor_usage(include_left=True)]
    assert left == [("x1", False, "bye"), ("x2", True, "")]
