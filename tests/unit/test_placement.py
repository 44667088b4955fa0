"""Resource-aware placement and the overlap policies in the state machine and the dispatcher:
executors' capacity, tasks' needs and selectors, refusals that keep the replicated state from
over-committing an executor, unplaceable tasks, and buffer_one / replace."""

from __future__ import annotations

import pytest

from raftsched import codec
from raftsched.errors import InvalidSpec
from raftsched.fsm.effects import AttemptReady, RunCancelled
from raftsched.fsm.state import SchedulerState
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.model import Overlap, TaskSpec
from raftsched.sharding.placement import Need, could_ever_fit, fits_now, parse_memory_mb
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import (
    EVERY_SECOND,
    T0,
    S,
    apply,
    assign,
    command,
    create,
    fresh,
    record,
    result,
    run_of,
    tick,
)
from tests.unit.test_alerts import events


def join(name: str, slots: int = 4, cpu: float = 0.0, memory_mb: int = 0, **labels: str) -> bytes:
    cmd = command(T0)
    cmd.executor_join.name = name
    cmd.executor_join.slots = slots
    cmd.executor_join.cpu = cpu
    cmd.executor_join.memory_mb = memory_mb
    cmd.executor_join.labels.update(labels)
    return codec.encode_command(cmd)


def sized(name: str = "t", cpu: float = 0.0, memory_mb: int = 0, **kw: object) -> TaskSpec:
    return TaskSpec(name, EVERY_SECOND, command="x", resource_cpu=cpu, resource_memory_mb=memory_mb, **kw)  # type: ignore[arg-type]


def test_memory_sizes_parse_to_mib() -> None:
    assert parse_memory_mb("8GiB") == 8192
    assert parse_memory_mb("512MiB") == parse_memory_mb("512M") == parse_memory_mb("512") == 512
    assert parse_memory_mb("1.5G") == 1536
    assert parse_memory_mb(64) == 64
    for bad in ("lots", "-1G", "100B", "1.3M"):
        with pytest.raises(InvalidSpec):
            parse_memory_mb(bad)


def test_fit_rules() -> None:
    need = Need(2.0, 1024, (("gpu", "true"),))
    assert could_ever_fit(need, 4.0, 2048, {"gpu": "true"})
    assert not could_ever_fit(need, 1.0, 2048, {"gpu": "true"})
    assert not could_ever_fit(need, 4.0, 512, {"gpu": "true"})
    assert not could_ever_fit(need, 4.0, 2048, {"gpu": "false"})
    assert could_ever_fit(need, 0.0, 0, {"gpu": "true"})  # undeclared capacity: unlimited
    assert fits_now(need, 4, 4.0, 2048, {"gpu": "true"}, (1, 2.0, 1024))
    assert not fits_now(need, 4, 4.0, 2048, {"gpu": "true"}, (1, 2.5, 0))
    assert not fits_now(need, 1, 4.0, 2048, {"gpu": "true"}, (1, 0.0, 0))
    assert fits_now(Need(0.1), 9, 0.3, 0, {}, (2, 0.1 + 0.1, 0))  # float sums still fit


def test_task_needs_are_validated_and_carried() -> None:
    for cpu, memory in ((-1.0, 0), (float("nan"), 0), (0.0, -5)):
        with pytest.raises(InvalidSpec, match="resource"):
            sized(cpu=cpu, memory_mb=memory)
    with pytest.raises(InvalidSpec, match="selector"):
        sized(selector={"": "x"})
    spec = sized(cpu=1.5, memory_mb=256, selector={"zone": "b", "gpu": "true"})
    assert spec.selector == (("gpu", "true"), ("zone", "b"))
    assert codec.spec_from_pb(codec.spec_to_pb(spec)) == spec


def test_executor_capacity_is_validated_and_stored() -> None:
    state = fresh()
    assert not apply(state, join("big", cpu=-1)).ok
    assert apply(state, join("big", cpu=4, memory_mb=8192, gpu="true")).ok
    rec = state.executors["big"]
    assert (rec.cpu, rec.memory_mb, dict(rec.labels)) == (4.0, 8192, {"gpu": "true"})


def test_the_state_machine_refuses_an_assignment_that_over_commits_cpu_or_memory() -> None:
    state = fresh()
    apply(state, join("small", slots=8, cpu=2, memory_mb=1024))
    create(state, sized(cpu=1.5, memory_mb=100, overlap=Overlap.ALLOW))
    apply(state, tick("t", 1, T0 + S))
    apply(state, tick("t", 1, T0 + 2 * S))
    first, second = (r.run_id for r in state_runs(state))
    assert apply(state, assign(T0 + 2 * S, (first, 0, 1, "small"))).accounted == 1
    refused = apply(state, assign(T0 + 2 * S, (second, 0, 1, "small")))
    assert (refused.accounted, refused.refused) == (0, 1)  # 1.5 + 1.5 > 2 cpus
    apply(state, result(T0 + 3 * S, first, 1, "small", True))  # gives the cpu back
    assert apply(state, assign(T0 + 3 * S, (second, 0, 1, "small"))).accounted == 1
    # And the usage is derived state: a reload computes the same.
    again = SchedulerState.load(state.store)
    assert again.usage.used("small") == state.usage.used("small") == (1, 1.5, 100)


def test_selector_must_match_the_executors_labels() -> None:
    state = fresh()
    apply(state, join("plain"))
    apply(state, join("gpu", gpu="true"))
    create(state, sized(selector={"gpu": "true"}))
    apply(state, tick("t", 1, T0 + S))
    (run,) = state_runs(state)
    assert apply(state, assign(T0 + S, (run.run_id, 0, 1, "plain"))).refused == 1
    assert apply(state, assign(T0 + S, (run.run_id, 0, 1, "gpu"))).accounted == 1


def test_a_task_no_executor_could_ever_run_is_flagged_and_alerted_until_one_joins() -> None:
    state = fresh()
    apply(state, join("small", cpu=2, memory_mb=1024))
    create(state, sized(cpu=8))
    apply(state, tick("t", 1, T0 + S))
    apply(state, tick("t", 1, T0 + 2 * S))
    rec = record(state, "t")
    assert "cpu 8" in rec.unplaceable and "1 live executors" in rec.unplaceable
    alerts = [a for a in events(state) if a.kind == "unplaceable"]
    assert len(alerts) == 1 and alerts[0].task == "t"  # once, not per fire
    apply(state, join("big", cpu=16, memory_mb=1024))
    assert record(state, "t").unplaceable == ""
    assert SchedulerState.load(state.store).unplaceable == set()


def state_runs(state: SchedulerState) -> list[pb.Run]:
    return sorted((pb.Run.FromString(v) for v in state.active.values()), key=lambda r: r.nominal_ms)


def _running(state: SchedulerState, executor: str = "ex") -> None:
    for run in state_runs(state):
        if run.shards[0].state == pb.PENDING and not run.held:
            apply(state, assign(run.created_ms, (run.run_id, 0, 1, executor)))


def test_buffer_one_keeps_one_fire_waiting_and_skips_the_rest() -> None:
    state = fresh()
    apply(state, join("ex"))
    create(state, TaskSpec("t", EVERY_SECOND, command="x", overlap=Overlap.BUFFER_ONE))
    apply(state, tick("t", 1, T0 + S))
    _running(state)
    buffered = state.apply(tick("t", 1, T0 + 2 * S))
    assert not [e for e in buffered.effects if isinstance(e, AttemptReady)]  # held, not dispatchable
    apply(state, tick("t", 1, T0 + 3 * S))
    fires = [pb.FireOutcome.Name(f.outcome) for f in fires_of(state)]
    assert fires == ["FIRED", "FIRED", "SKIPPED_OVERLAP"]
    first, held = state_runs(state)
    assert held.held and record(state, "t").held_run == held.run_id
    assert state.pending_attempts() == [] or all(e.run_id != held.run_id for e in state.pending_attempts())
    done = state.apply(result(T0 + 4 * S, first.run_id, 1, "ex", True))
    ready = [e for e in done.effects if isinstance(e, AttemptReady)]
    assert [e.run_id for e in ready] == [held.run_id]
    assert not run_of(state, held.run_id).held and record(state, "t").held_run == ""


def test_replace_cancels_the_running_run_and_starts_the_new_one() -> None:
    state = fresh()
    apply(state, join("ex"))
    create(state, TaskSpec("t", EVERY_SECOND, command="x", overlap=Overlap.REPLACE))
    apply(state, tick("t", 1, T0 + S))
    _running(state)
    (old,) = state_runs(state)
    out = state.apply(tick("t", 1, T0 + 2 * S))
    cancelled = [e for e in out.effects if isinstance(e, RunCancelled)]
    assert cancelled and cancelled[0].run_id == old.run_id and cancelled[0].attempts == ((0, 1, "ex"),)
    assert run_of(state, old.run_id).state == pb.CANCELLED
    assert [pb.FireOutcome.Name(f.outcome) for f in fires_of(state)] == ["FIRED", "FIRED"]
    assert state.usage.used("ex") == (0, 0.0, 0)  # the cancelled attempt's slot is free again
    (new,) = state_runs(state)
    assert new.run_id != old.run_id


def fires_of(state: SchedulerState) -> list[pb.FireRecord]:
    from tests.support.fsm import fires_of as f

    return f(state, "t")


def test_the_dispatcher_walks_the_ring_to_an_executor_with_room() -> None:
    state = fresh()
    apply(state, join("small", slots=4, cpu=1, memory_mb=512))
    apply(state, join("big", slots=4, cpu=8, memory_mb=8192))
    create(state, sized(cpu=2, memory_mb=1024, overlap=Overlap.ALLOW))
    d = Dispatcher(state)
    d.become_leader(1, T0)
    for i in range(1, 7):
        d.on_effects(state.apply(tick("t", 1, T0 + i * S)).effects, T0 + i * S)
    placed: list[str] = []
    for proposal in d.poll(T0 + 7 * S):
        if proposal.kind == "assign":
            placed += [a.executor for a in proposal.command.assign_attempts.assignments]
            out = state.apply(proposal.encode())
            d.on_effects(out.effects, T0 + 7 * S)
            assert out.result.refused == 0
    assert placed == ["big"] * 4  # 4 slots on big; small can never hold 2 cpus
    assert d.backlog == 2  # the other two wait for room


def test_explain_and_task_show_flag_an_unplaceable_task(capsys: pytest.CaptureFixture[str]) -> None:
    from raftsched.cli.tasks import _print_task
    from raftsched.explain import explain

    state = fresh()
    apply(state, join("small", cpu=2))
    create(state, sized(cpu=8, memory_mb=64, selector={"gpu": "true"}))
    apply(state, tick("t", 1, T0 + S))
    rec = record(state, "t")
    fire = fires_of(state)[0]
    (run,) = state_runs(state)
    reply = explain(rec, fire.nominal_ms, [fire], run)
    assert any("unplaceable: needs cpu 8, memory 64 MiB, labels gpu=true" in d for d in reply.details)
    shown = pb_task(rec)
    _print_task(shown)
    out = capsys.readouterr().out
    assert "cpu 8, memory 64 MiB" in out and "gpu=true" in out
    assert "unplaceable" in out and "none of the 1 live executors" in out


def pb_task(rec: pb.TaskRecord) -> pb.TaskRecord:
    from raftsched.v1 import raftsched_pb2 as api

    return api.TaskRecord.FromString(rec.SerializeToString())


def test_workflow_yaml_takes_a_selector_and_validates_it() -> None:
    from raftsched.errors import InvalidWorkflow
    from raftsched.workflow.files import parse_workflow_text

    text = "name: wf\ntasks:\n  - name: train\n    command: run\n    selector: {gpu: 'true', zone: b}\n"
    spec = parse_workflow_text(text, "yaml", "wf.yaml")
    assert dict(spec.tasks[0].selector) == {"gpu": "true", "zone": "b"}
    with pytest.raises(InvalidWorkflow, match="selector"):
        parse_workflow_text(
            "name: wf\ntasks:\n  - name: t\n    command: x\n    selector: [gpu]\n", "yaml", "wf.yaml"
        )


def test_a_workflow_task_with_a_selector_is_placed_on_a_matching_executor_only() -> None:
    from raftsched.leader import writes
    from raftsched.workflow.files import parse_workflow_text

    state = fresh()
    apply(state, join("plain"))
    apply(state, join("gpu", gpu="true"))
    text = "name: wf\ntasks:\n  - name: train\n    command: run\n    shards: 3\n    selector: {gpu: 'true'}\n"
    spec = parse_workflow_text(text, "yaml", "wf.yaml")
    assert apply(state, writes.apply_workflow(spec, now_ms=T0, epoch=1, origin="n1", key="k1")).ok
    d = Dispatcher(state)
    d.become_leader(1, T0)
    out = state.apply(
        writes.start_workflow_run(state, "wf", T0, "", now_ms=T0 + S, epoch=1, origin="n1", key="k2")
    )
    assert out.result.ok, out.result
    d.on_effects(out.effects, T0 + S)
    placed = []
    for proposal in d.poll(T0 + S):
        if proposal.kind == "assign":
            placed += [a.executor for a in proposal.command.assign_attempts.assignments]
            assert state.apply(proposal.encode()).result.refused == 0
    assert placed == ["gpu", "gpu", "gpu"]


def test_workflows_refuse_the_task_only_overlap_policies() -> None:
    from raftsched.errors import InvalidWorkflow
    from raftsched.v1 import raftsched_pb2 as api
    from raftsched.workflow.validate import validate_workflow

    spec = api.WorkflowSpec(name="wf", tasks=[api.WorkflowTaskSpec(name="a", command="x")])
    validate_workflow(spec)
    spec.overlap = api.OVERLAP_REPLACE
    with pytest.raises(InvalidWorkflow, match="overlap"):
        validate_workflow(spec)


def test_task_files_take_a_selector_and_the_new_overlap_policies() -> None:
    from raftsched.workflow.taskfiles import parse_task_text

    text = (
        "tasks:\n"
        "  - name: train\n    command: run\n    overlap: buffer_one\n"
        "    resource: {cpu: 2.0, memory: 512}\n    selector: {gpu: 'true'}\n"
        "  - name: sync\n    command: run\n    overlap: replace\n"
    )
    parsed = parse_task_text(text, "yaml", "tasks.yaml")
    train, sync = (spec for spec, _ in parsed.tasks)
    assert train.selector == (("gpu", "true"),) and train.overlap == Overlap.BUFFER_ONE
    assert (train.resource_cpu, train.resource_memory_mb) == (2.0, 512)
    assert sync.overlap == Overlap.REPLACE
