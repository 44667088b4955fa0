"""Bounded fuzz of hostile specs through validation and apply, in process.

For every drawn TaskSpec / WorkflowSpec / params text: validation raises nothing but
InvalidSpec (InvalidWorkflow for workflows) with a bounded message; ``apply`` of the raw command
(as if a buggy or hostile leader had skipped validation) never hits its internal-error path; a
rejected command leaves the replicated image byte-identical; and apply refuses exactly what the
model refuses, so validation on the leader and in apply cannot drift apart.
"""

from __future__ import annotations

from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from raftsched import codec
from raftsched.errors import MAX_MESSAGE_CHARS, InvalidSpec, InvalidWorkflow
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import ManualTrigger, TaskSpec, parse_params
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb
from raftsched.workflow.validate import validate_workflow
from tests.fuzz_strategies import domain, params_json, task_specs, workflow_specs

T0 = 1_700_000_040_000
FUZZ = settings(
    max_examples=150,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.large_base_example],
)


def seeded() -> SchedulerState:
    """A state holding task ``t`` (so updates and triggers reach their validation) and workflow ``etl``."""
    state = SchedulerState.load(MemoryStore())
    spec = TaskSpec("t", ManualTrigger(), command="true")
    assert state.apply(
        writes.create_task(spec, disabled=False, now_ms=T0, epoch=1, origin="n1", key="")
    ).result.ok
    wf = pb.WorkflowSpec(name="etl", tasks=[pb.WorkflowTaskSpec(name="extract", command="true")])
    assert state.apply(writes.apply_workflow(wf, now_ms=T0, epoch=1, origin="n1", key="")).result.ok
    return state


def envelope() -> pb.Command:
    return pb.Command(epoch=1, now_ms=T0 + 1000, origin="n1")


def bounded(exc: BaseException) -> None:
    assert len(str(exc)) <= MAX_MESSAGE_CHARS


def apply_checked(state: SchedulerState, cmd: pb.Command) -> pb.CommandResult:
    """Apply ``cmd``; a rejection must be a value with a bounded message that changed nothing."""
    before = domain(state)
    result = state.apply(codec.encode_command(cmd)).result
    assert result.code != "internal", result.message
    assert len(result.message) <= MAX_MESSAGE_CHARS
    for item in result.items:
        assert item.code != "internal", item.message
        assert len(item.message) <= MAX_MESSAGE_CHARS
    event(f"{cmd.WhichOneof('body')}: {'ok' if result.ok else result.code}")
    if not result.ok:
        assert domain(state) == before, f"rejected ({result.code}: {result.message[:200]}) yet state changed"
    return result


@FUZZ
@given(spec=task_specs(), verb=st.sampled_from(["create", "update", "create_many"]))
def test_hostile_task_specs_are_refused_as_values_and_change_nothing(spec: pb.TaskSpec, verb: str) -> None:
    model_ok = True
    try:
        decoded = codec.spec_from_pb(spec)
    except InvalidSpec as exc:
        bounded(exc)
        model_ok = False
    else:
        # Read back from the state (not validated again) it is the same value.
        assert codec.stored_spec_from_pb(codec.spec_to_pb(decoded)) == decoded
        try:  # the leader's planning (cron and zone through croniter, the first fire)
            writes.create_task(decoded, disabled=False, now_ms=T0 + 1000, epoch=1, origin="n1", key="")
        except InvalidSpec as exc:
            bounded(exc)
    state = seeded()
    cmd = envelope()
    if verb == "create":
        cmd.create_task.spec.CopyFrom(spec)
    elif verb == "update":
        if model_ok:
            spec.name = "t"
        cmd.update_task.spec.CopyFrom(spec)
    else:
        cmd.create_tasks.items.add(spec=spec)
    result = apply_checked(state, cmd)
    if not model_ok:  # apply refuses what the model refuses
        refused = [item for item in result.items if not item.ok] if verb == "create_many" else [result]
        assert [r.code for r in refused] == ["invalid_argument"]


@FUZZ
@given(spec=workflow_specs())
def test_hostile_workflow_specs_are_refused_as_values_and_change_nothing(spec: pb.WorkflowSpec) -> None:
    try:
        validate_workflow(spec)
    except InvalidWorkflow as exc:
        bounded(exc)
    state = seeded()
    cmd = envelope()
    cmd.apply_workflow.spec.CopyFrom(spec)
    apply_checked(state, cmd)


@FUZZ
@given(params=params_json(), target=st.sampled_from(["trigger_now", "start_workflow_run"]))
def test_hostile_run_params_are_refused_as_values_and_change_nothing(params: str, target: str) -> None:
    try:
        parse_params(params)
    except InvalidSpec as exc:
        bounded(exc)
        model_ok = False
    else:
        model_ok = True
    state = seeded()
    cmd = envelope()
    if target == "trigger_now":
        cmd.trigger_now.name = "t"
        cmd.trigger_now.params_json = params
    else:
        cmd.start_workflow_run.workflow = "etl"
        cmd.start_workflow_run.logical_ms = T0
        cmd.start_workflow_run.params_json = params
    result = apply_checked(state, cmd)
    assert result.ok == model_ok, result.message
