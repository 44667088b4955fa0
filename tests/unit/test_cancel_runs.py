"""CancelRuns in the state machine (issue 29 §1): rejections are values naming the run, a cancel
is idempotent, who asked and why go into the timeline, a running attempt is stopped through the
one RunCancelled effect, a cancelled run counts as finished for overlap, and replicas agree."""

from __future__ import annotations

from raftsched import codec
from raftsched.fsm import keys
from raftsched.fsm.effects import RunCancelled
from raftsched.fsm.runs import MAX_CANCEL_PER_COMMAND
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import RUN_CANCELLED, RUN_FAILED, IntervalTrigger, Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb
from tests.fuzz_strategies import domain
from tests.property.test_apply_extremes import NOMINAL, RUN, T, _cmd, _ok, seeded


def _cancel(
    state: SchedulerState,
    run_ids: list[str],
    reason: str = "operator",
    *,
    shard: int | None = None,
    skip: bool = False,
    who: str = "",
    now: int = NOMINAL + 100,
) -> pb.CommandResult:
    body = pb.CancelRuns(run_ids=run_ids, reason=reason, skip_finished=skip)
    if shard is not None:
        body.shard = shard
    cmd = pb.Command.FromString(_cmd(now, cancel_runs=body))
    if who:
        cmd.audit.principal = who
    return state.apply(codec.encode_command(cmd)).result


def _run(state: SchedulerState, run_id: str = RUN) -> pb.Run:
    return pb.Run.FromString(state.store.get(keys.run_key_for_id(run_id)) or b"")


def _alert_kinds(state: SchedulerState) -> list[str]:
    return [pb.AlertRecord.FromString(v).kind for _, v in state.store.scan(keys.ALERT, keys.ALERT + keys.END)]


def test_cancel_of_a_running_run_ends_it_cancelled_with_who_and_why_and_stops_the_attempt() -> None:
    state = seeded()
    applied = state.apply(
        codec.encode_command(
            _with_principal(
                _cmd(NOMINAL + 100, cancel_runs=pb.CancelRuns(run_ids=[RUN], reason="hung")), "alice"
            )
        )
    )
    res = applied.result
    assert res.ok and res.runs_cancelled == 1 and list(res.cancelled_runs) == [RUN], res
    assert res.run.run_id == RUN and res.run.state == pb.CANCELLED
    run = _run(state)
    assert run.state == pb.CANCELLED and run.shards[0].state == pb.CANCELLED
    events = [(e.event, e.reason) for e in run.timeline]
    assert ("cancel_requested", "by alice: hung") in events and ("cancelled", "hung") in events
    assert [e for e in applied.effects if isinstance(e, RunCancelled)] == [
        RunCancelled(RUN, ((0, 1, "a"),), 1, "hung")
    ]
    kinds = _alert_kinds(state)
    assert RUN_CANCELLED in kinds and RUN_FAILED not in kinds
    assert RUN not in state.runs.active and state.runs.active_per_task.get("t", 0) == 0


def _with_principal(data: bytes, who: str) -> pb.Command:
    cmd = pb.Command.FromString(data)
    cmd.audit.principal = who
    return cmd


def test_an_unknown_run_is_a_not_found_value_and_changes_nothing() -> None:
    state = seeded()
    before = domain(state)
    res = _cancel(state, [f"t@{NOMINAL + 999}"])
    assert not res.ok and res.code == "not_found" and f"t@{NOMINAL + 999}" in res.message, res
    assert domain(state) == before


def test_a_run_that_finished_otherwise_is_a_conflict_naming_its_state() -> None:
    state = seeded()
    results = pb.ReportResults()
    results.results.add(run_id=RUN, shard=0, attempt=1, executor="a", success=True)
    _ok(state, NOMINAL + 50, report_results=results)
    before = domain(state)
    res = _cancel(state, [RUN])
    assert not res.ok and res.code == "conflict", res
    assert RUN in res.message and "succeeded" in res.message
    assert domain(state) == before


def test_cancelling_twice_is_harmless_and_the_second_changes_nothing_but_the_counters() -> None:
    state = seeded()
    assert _cancel(state, [RUN]).runs_cancelled == 1
    run = _run(state)
    res = _cancel(state, [RUN], now=NOMINAL + 200)
    assert res.ok and res.runs_cancelled == 0 and res.run.state == pb.CANCELLED, res
    assert _run(state) == run  # the run is as the first cancel left it


def test_a_bulk_cancel_skips_runs_that_finished_meanwhile_and_rejects_nothing() -> None:
    state = seeded()
    res = _cancel(state, [RUN, f"t@{NOMINAL + 999}"], skip=True)
    assert res.ok and list(res.cancelled_runs) == [RUN], res
    res = _cancel(state, [RUN], skip=True)
    assert res.ok and res.runs_cancelled == 0


def test_one_bad_run_among_several_rejects_the_whole_command_before_anything_changes() -> None:
    state = seeded()
    before = domain(state)
    res = _cancel(state, [RUN, "nope@1"])
    assert not res.ok and res.code == "not_found" and "nope@1" in res.message
    assert domain(state) == before and _run(state).state == pb.RUNNING


def test_a_workflow_task_run_is_refused_with_the_way_to_stop_it() -> None:
    state = seeded()
    _ok(state, NOMINAL + 10, start_workflow_run=pb.StartWorkflowRun(workflow="w", logical_ms=NOMINAL))
    task_run = next(r for r in state.runs.active if r.startswith("w#"))
    res = _cancel(state, [task_run])
    assert not res.ok and res.code == "conflict" and "workflow kill" in res.message, res


def test_limits_are_rejection_values() -> None:
    state = seeded()
    res = _cancel(state, [f"t@{i}" for i in range(MAX_CANCEL_PER_COMMAND + 1)])
    assert not res.ok and res.code == "invalid_argument" and "run_ids" in res.message
    res = _cancel(state, [RUN, "t@1"], shard=0)
    assert not res.ok and res.code == "invalid_argument" and "shard" in res.message
    res = _cancel(state, [RUN], shard=3)
    assert not res.ok and res.code == "invalid_argument" and "shards 0..0" in res.message


def _sharded_state() -> tuple[SchedulerState, str]:
    state = SchedulerState(MemoryStore())
    _ok(state, T, executor_join=pb.ExecutorJoin(name="a", slots=4))
    spec = codec.spec_to_pb(TaskSpec("s", IntervalTrigger(1000), command="true", shards=2))
    _ok(state, T, create_task=pb.CreateTask(spec=spec, next_fire_ms=NOMINAL))
    fires = pb.FireBatch()
    fires.tasks.add(task="s", version=1, watermark_ms=NOMINAL, next_fire_ms=NOMINAL + 1000).fires.add(
        nominal_ms=NOMINAL, outcome=pb.FIRED
    )
    _ok(state, NOMINAL, fire_batch=fires)
    run_id = f"s@{NOMINAL}"
    assign = pb.AssignAttempts()
    assign.assignments.add(run_id=run_id, shard=0, attempt=1, executor="a")
    assign.assignments.add(run_id=run_id, shard=1, attempt=1, executor="a")
    _ok(state, NOMINAL, assign_attempts=assign)
    return state, run_id


def test_one_shard_cancelled_and_the_other_succeeding_ends_the_run_cancelled_without_failure() -> None:
    state, run_id = _sharded_state()
    res = _cancel(state, [run_id], shard=1)
    assert res.ok and res.runs_cancelled == 1
    assert _run(state, run_id).state == pb.RUNNING  # shard 0 runs on
    results = pb.ReportResults()
    results.results.add(run_id=run_id, shard=0, attempt=1, executor="a", success=True)
    _ok(state, NOMINAL + 200, report_results=results)
    run = _run(state, run_id)
    assert run.state == pb.CANCELLED and [s.state for s in run.shards] == [pb.SUCCEEDED, pb.CANCELLED]
    assert RUN_FAILED not in _alert_kinds(state)
    res = _cancel(state, [run_id], shard=1)
    assert res.ok and res.runs_cancelled == 0  # that shard is cancelled already


def test_a_cancelled_run_counts_as_finished_for_overlap_a_buffered_run_starts() -> None:
    state = SchedulerState(MemoryStore())
    _ok(state, T, executor_join=pb.ExecutorJoin(name="a", slots=4))
    spec = codec.spec_to_pb(TaskSpec("b", IntervalTrigger(1000), command="true", overlap=Overlap.BUFFER_ONE))
    _ok(state, T, create_task=pb.CreateTask(spec=spec, next_fire_ms=NOMINAL))
    for nominal in (NOMINAL, NOMINAL + 1000):
        fires = pb.FireBatch()
        fires.tasks.add(task="b", version=1, watermark_ms=nominal, next_fire_ms=nominal + 1000).fires.add(
            nominal_ms=nominal, outcome=pb.FIRED
        )
        _ok(state, nominal, fire_batch=fires)
    held = f"b@{NOMINAL + 1000}"
    assert state.runs.get(held) is not None and state.runs.get(held).held  # type: ignore[union-attr]
    applied = state.apply(_cmd(NOMINAL + 1100, cancel_runs=pb.CancelRuns(run_ids=[f"b@{NOMINAL}"])))
    assert applied.result.ok
    released = state.runs.get(held)
    assert released is not None and not released.held
    assert any(getattr(e, "run_id", "") == held for e in applied.effects)  # its attempt is ready


def test_replicas_applying_the_same_cancels_agree() -> None:
    a, b = seeded(), seeded()
    for state in (a, b):
        _cancel(state, [RUN], who="bob")
        _cancel(state, [RUN])
        _cancel(state, ["nope@1"])
    assert a.digest() == b.digest()


def test_the_leader_splits_a_bulk_cancel_into_commands_of_the_format_that_gates_it() -> None:
    ids = [f"t@{i}" for i in range(MAX_CANCEL_PER_COMMAND * 2 + 1)]
    commands = writes.cancel_runs(ids, "r", skip_finished=True, now_ms=T, epoch=1, origin="n1", key="k")
    decoded = [pb.Command.FromString(c) for c in commands]
    assert [len(c.cancel_runs.run_ids) for c in decoded] == [
        MAX_CANCEL_PER_COMMAND,
        MAX_CANCEL_PER_COMMAND,
        1,
    ]
    assert [c.idempotency_key for c in decoded] == ["k/0", "k/1", "k/2"]
    assert {c.format for c in decoded} == {codec.CANCEL_FORMAT}


def test_a_new_leader_tells_the_executor_to_stop_an_attempt_cancelled_before_the_old_one_died() -> None:
    """The cancel committed under the old leader (epoch 1), whose cancel never left it; the new
    leader learns from the executor's heartbeat that it still runs the attempt and sends the
    cancel (once per lease, not on every heartbeat)."""
    import random

    from raftsched.leader.dispatch.dispatcher import Dispatcher
    from tests.support.fsm import T0, S, barrier, tick
    from tests.unit.test_dispatcher import SETTINGS, setup, step

    state, old = setup()
    step(state, old, tick("t", 1, T0 + S), T0 + S)
    for data in old.poll(T0 + S):
        step(state, old, data, T0 + S)
    [(executor, item)] = old.take_outbox()
    cancel = pb.Command(epoch=1, now_ms=T0 + 2 * S, origin="n1")
    cancel.cancel_runs.run_ids.append(item.run_id)
    assert state.apply(codec.encode_command(cancel)).result.runs_cancelled == 1  # old leader: gone
    takeover = T0 + 10 * S
    state.apply(barrier(takeover, 2))
    d = Dispatcher(state, SETTINGS, random.Random(1))
    d.become_leader(2, takeover)
    d.take_outbox()
    assert d.heartbeat(executor, [item.execution_id], takeover + 100, started=[item.execution_id])
    [(to, sent)] = d.take_outbox()
    assert (to, sent.execution_id, sent.cancel, sent.epoch) == (executor, item.execution_id, True, 2)
    assert d.heartbeat(executor, [item.execution_id], takeover + 200, started=[item.execution_id])
    assert d.take_outbox() == []  # sent once; again only if it still runs a lease later
    later = takeover + 100 + SETTINGS.lease_ms
    assert d.heartbeat(executor, [item.execution_id], later, started=[item.execution_id])
    assert [s.cancel for _, s in d.take_outbox()] == [True]
    # An attempt the log has not cancelled (a lost one still running) is left alone.
    assert d.heartbeat(executor, ["t@1/0/9"], later, started=["t@1/0/9"])
    assert d.take_outbox() == []
