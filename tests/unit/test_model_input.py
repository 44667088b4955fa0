"""Hostile input at the model layer: refused with a clear InvalidSpec, never another exception.

Each case reproduces a problem found against a real cluster (deep params raised RecursionError, NaN
and NUL were accepted, a task with no command ran and failed forever, messages echoed megabytes),
first on the validation functions, then through the in-process apply path, where a rejected
command must leave the replicated state exactly as it was.
"""

from __future__ import annotations

import sys
from typing import Any

import pytest

from raftsched import codec
from raftsched.errors import (
    MAX_MESSAGE_CHARS,
    ConfigError,
    InvalidSpec,
    InvalidWorkflow,
    TemplateError,
    quote,
)
from raftsched.fsm import keys
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import (
    MAX_PARAMS_DEPTH,
    CronTrigger,
    ManualTrigger,
    Misfire,
    Overlap,
    Runner,
    TaskSpec,
    parse_params,
    validate_name,
    validate_params,
)
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb
from raftsched.workflow.template import render_params_json
from raftsched.workflow.validate import validate_workflow
from tests.fuzz_strategies import domain

T0 = 1_700_000_040_000
DEEP_ARRAY = "[" * 990 + "]" * 990  # 2 KB that raised RecursionError through AddTask
DEEP_OBJECT = '{"a":' * 2000 + "1" + "}" * 2000


def nested(depth: int) -> str:
    """A params object whose arrays and objects nest exactly ``depth`` levels."""
    return '{"a":' + "[" * (depth - 1) + "]" * (depth - 1) + "}"


def reason(call: object, *args: object, **kwargs: object) -> InvalidSpec:
    assert callable(call)
    with pytest.raises(InvalidSpec) as info:
        call(*args, **kwargs)
    return info.value


# -- params: nesting, NaN, NUL -------------------------------------------------------------------


@pytest.mark.parametrize("text", [DEEP_ARRAY, DEEP_OBJECT, '{"a":' + "[" * 8000 + "]" * 8000 + "}"])
def test_deeply_nested_params_are_refused_without_recursion(text: str) -> None:
    # Far below the interpreter's limit, so a recursive check would fail here too.
    limit = sys.getrecursionlimit()
    sys.setrecursionlimit(200)
    try:
        exc = reason(validate_params, text, "params")
    finally:
        sys.setrecursionlimit(limit)
    assert exc.field == "params"
    assert exc.reason == f"JSON nested deeper than {MAX_PARAMS_DEPTH} levels"


def test_nesting_up_to_the_limit_is_accepted_and_brackets_in_strings_do_not_count() -> None:
    parse_params(nested(MAX_PARAMS_DEPTH))
    reason(parse_params, nested(MAX_PARAMS_DEPTH + 1))
    assert parse_params('{"a": "' + "[" * 500 + '", "b": "\\"{{{"}') == {"a": "[" * 500, "b": '"{{{'}


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ('{"a": NaN}', "NaN is not JSON"),
        ('{"a": Infinity}', "Infinity is not JSON"),
        ('{"a": [-Infinity]}', "-Infinity is not JSON"),
        ('{"a": 1e400}', "out of range for a float"),
        ('{"a": "x\\u0000y"}', "NUL character"),
        ('{"k\\u0000": 1}', "NUL character"),
        ('{"a": ["\\ud800"]}', "lone surrogate"),
        ('{"a": 1' + "0" * 5000 + "}", "not valid JSON"),
        ("[1, 2]", "must be a JSON object, got list"),
        ("{oops", "not valid JSON"),
    ],
)
def test_params_that_are_not_plain_json_objects_are_refused(text: str, why: str) -> None:
    exc = reason(parse_params, text, "tasks[0].params_json")
    assert exc.field == "tasks[0].params_json"
    assert why in exc.reason


def test_valid_params_decode_and_empty_means_none() -> None:
    assert parse_params("") == {}
    assert parse_params('{"a": 1.5, "b": [null, true, "s"], "c": {"d": -3}}') == {
        "a": 1.5,
        "b": [None, True, "s"],
        "c": {"d": -3},
    }


# -- text fields: NUL and lone surrogates; command or handler ------------------------------------


@pytest.mark.parametrize("field", ["command", "handler", "owner", "namespace", "description"])
def test_a_nul_in_any_text_field_is_refused_at_submission(field: str) -> None:
    fields: dict[str, object] = {"command": "true", field: "ab\x00c"}
    if field == "handler":
        fields["command"] = ""
    exc = reason(TaskSpec, "t", ManualTrigger(), **fields)
    assert (exc.field, exc.reason) == (field, "contains a NUL character at position 2")


def test_a_lone_surrogate_is_invalid_spec_not_a_unicode_error() -> None:
    exc = reason(TaskSpec, "t", ManualTrigger(), command="echo \udcff")
    assert exc.field == "command"
    assert "lone surrogate" in exc.reason


def test_a_task_needs_a_command_or_a_handler() -> None:
    exc = reason(TaskSpec, "t", CronTrigger("* * * * *"))
    assert exc.field == "command"
    assert "give a command or a handler" in exc.reason
    TaskSpec("t", CronTrigger("* * * * *"), command="true")
    TaskSpec("t", CronTrigger("* * * * *"), handler="h")
    # another problem with a field given is reported first, it is the more specific one
    assert reason(TaskSpec, "t", ManualTrigger(), shards=0).field == "shards"


# -- bounded messages ----------------------------------------------------------------------------


def test_quote_shows_at_most_200_characters_then_the_length() -> None:
    assert quote("a" * 3_145_728) == "'" + "a" * 200 + "…' (3,145,728 characters)"
    assert quote("short") == "'short'"
    assert quote('say "hi"', double=True) == '"say \\"hi\\""'
    assert quote("x\x00y") == "'x\\x00y'"  # control characters are escaped, never raw


def test_a_3_mb_name_or_value_is_not_echoed() -> None:
    huge = "n" * 3_145_728
    assert str(reason(validate_name, huge)) == "name: 3,145,728 characters, at most 128 allowed"
    msg = str(reason(TaskSpec, "t", command="x", misfire=huge))
    assert len(msg) < 300
    assert "(3,145,728 characters)" in msg
    # The backstop: even a message built from raw input is cut, field path included.
    exc = InvalidSpec("env." + huge, huge)
    assert len(exc.field) == 200
    assert len(str(exc)) == MAX_MESSAGE_CHARS
    assert str(exc).endswith("… (3,145,728 characters)")  # the reason's own length


def test_a_long_problem_list_shows_twenty_then_how_many_more() -> None:
    problems = [(f"tasks[{i}].depends_on[0]", "unknown task " + quote("x" * 10_000)) for i in range(5000)]
    exc = InvalidWorkflow(problems, "w" * 100_000)
    text = str(exc)
    assert len(text) <= MAX_MESSAGE_CHARS
    lines = text.split("\n")
    assert lines[0].startswith('invalid workflow "www')
    assert lines[0].endswith("(100,000 characters): 5000 problems")
    assert len(lines) == 1 + 20 + 1
    assert lines[-1] == "  … and 4,980 more problems"
    assert exc.problems == problems  # the full list stays available to local callers
    config = ConfigError("c.toml", [f"nodes[{i}].raft: bad" for i in range(100)])
    assert str(config).splitlines()[-1] == "  … and 80 more problems"
    assert len(str(config).splitlines()) == 22


# -- one params implementation: tasks, workflows, templates --------------------------------------


def workflow(params_json: str = "", task_params: str = "", command: str = "echo {{ ds }}") -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name="etl", params_json=params_json)
    spec.tasks.add(name="extract", command=command, params_json=task_params)
    return spec


@pytest.mark.parametrize("bad", [DEEP_ARRAY, '{"a": NaN}', '{"a": "\\u0000"}'])
def test_workflow_and_template_params_use_the_same_rules(bad: str) -> None:
    expected = reason(parse_params, bad, "x").reason
    for spec, where in ((workflow(params_json=bad), "params_json"), (workflow(task_params=bad), "tasks[0]")):
        with pytest.raises(InvalidWorkflow) as info:
            validate_workflow(spec)
        assert [m for loc, m in info.value.problems if loc.startswith(where)] == [expected]
    with pytest.raises(TemplateError, match="run params: "):
        render_params_json("", "", bad)


def test_a_workflow_task_without_command_or_with_nul_is_refused() -> None:
    with pytest.raises(InvalidWorkflow) as info:
        validate_workflow(workflow(command="echo \x00 {{ ds }}"))
    assert info.value.problems == [('tasks[0].command ("extract")', "contains a NUL character at position 5")]
    spec = workflow()
    spec.tasks[0].env["X"] = "a\x00"
    with pytest.raises(InvalidWorkflow, match="NUL character"):
        validate_workflow(spec)


def test_an_oversized_command_is_one_problem_not_one_per_placeholder() -> None:
    with pytest.raises(InvalidWorkflow) as info:
        validate_workflow(workflow(command="{{ nope }}" * 10_000))
    assert [loc for loc, _ in info.value.problems] == ['tasks[0].command ("extract")']


def test_a_huge_unknown_dependency_is_quoted_bounded() -> None:
    spec = workflow()
    spec.tasks[0].depends_on.add(task="d" * 1_000_000)
    with pytest.raises(InvalidWorkflow) as info:
        validate_workflow(spec)
    (message,) = [m for _, m in info.value.problems]
    assert message.endswith('…" (1,000,000 characters)')
    assert len(message) < 300


# -- through apply: rejected, state untouched ----------------------------------------------------


def fresh() -> SchedulerState:
    return SchedulerState.load(MemoryStore())


def envelope(now: int = T0) -> pb.Command:
    return pb.Command(epoch=1, now_ms=now, origin="n1")


def seeded() -> SchedulerState:
    state = fresh()
    data = writes.create_task(
        TaskSpec("m", ManualTrigger(), command="true"),
        disabled=False,
        now_ms=T0,
        epoch=1,
        origin="n1",
        key="",
    )
    assert state.apply(data).result.ok
    return state


def hostile_specs() -> list[pb.TaskSpec]:
    good = codec.spec_to_pb(TaskSpec("t", ManualTrigger(), command="true"))
    out = []
    for field, value in [
        ("params_json", DEEP_ARRAY),
        ("params_json", '{"a": NaN}'),
        ("params_json", '{"a": "\\u0000"}'),
        ("command", "echo \x00"),
        ("command", ""),
        ("handler", "h\x00"),
        ("name", "n" * 3_145_728),
    ]:
        spec = pb.TaskSpec()
        spec.CopyFrom(good)
        setattr(spec, field, value)
        out.append(spec)
    return out


@pytest.mark.parametrize("spec", hostile_specs(), ids=lambda s: "spec")
@pytest.mark.parametrize("verb", ["create", "update"])
def test_a_hostile_spec_in_apply_is_rejected_and_changes_nothing(verb: str, spec: pb.TaskSpec) -> None:
    state = seeded()
    if verb == "update":
        spec.name = spec.name if len(spec.name) > 128 else "m"
    before = domain(state)
    cmd = envelope(T0 + 1)
    body = cmd.create_task if verb == "create" else cmd.update_task
    body.spec.CopyFrom(spec)
    result = state.apply(codec.encode_command(cmd)).result
    assert (result.ok, result.code) == (False, "invalid_argument")
    assert len(result.message) <= MAX_MESSAGE_CHARS
    assert domain(state) == before


@pytest.mark.parametrize("params", [DEEP_OBJECT, '{"a": -Infinity}', '{"a": "\\ud800"}'])
def test_trigger_now_with_hostile_params_is_rejected_and_changes_nothing(params: str) -> None:
    state = seeded()
    with pytest.raises(InvalidSpec):
        writes.trigger_now("m", params, now_ms=T0 + 1, epoch=1, origin="n1", key="")
    before = domain(state)
    cmd = envelope(T0 + 1)
    cmd.trigger_now.name = "m"
    cmd.trigger_now.params_json = params
    result = state.apply(codec.encode_command(cmd)).result
    assert (result.ok, result.code) == (False, "invalid_argument")
    assert domain(state) == before


@pytest.mark.parametrize("params", [DEEP_ARRAY, '{"a": NaN}'])
def test_apply_workflow_with_hostile_params_is_rejected_and_changes_nothing(params: str) -> None:
    state = seeded()
    for spec in (workflow(params_json=params), workflow(task_params=params)):
        with pytest.raises(InvalidWorkflow):
            writes.apply_workflow(spec, now_ms=T0 + 1, epoch=1, origin="n1", key="")
        before = domain(state)
        cmd = envelope(T0 + 1)
        cmd.apply_workflow.spec.CopyFrom(spec)
        result = state.apply(codec.encode_command(cmd)).result
        assert (result.ok, result.code) == (False, "invalid_argument")
        assert domain(state) == before


# -- stored before these rules: still loads ------------------------------------------------------


@pytest.mark.parametrize(
    "legacy",
    [
        pb.TaskSpec(name="legacy", trigger=pb.Trigger(manual=pb.ManualTrigger())),  # no command
        pb.TaskSpec(name="legacy", command="echo \x00", params_json='{"a": NaN}'),
        pb.TaskSpec(name="legacy", command="true", params_json=DEEP_ARRAY[:200] + DEEP_ARRAY[-200:]),
    ],
)
def test_a_task_stored_before_the_new_rules_still_loads(legacy: pb.TaskSpec) -> None:
    # A node must be able to restart on state an older version accepted; the new rules apply
    # when the task is submitted again, not when it is read back.
    with pytest.raises(InvalidSpec):
        codec.spec_from_pb(legacy)
    state = seeded()
    record = pb.TaskRecord(spec=legacy, version=1, enabled=True, created_ms=T0, watermark_ms=T0)
    state.store.put(keys.task_key("legacy"), record.SerializeToString(deterministic=True))
    before = domain(state)
    reloaded = SchedulerState.load(state.store)
    assert reloaded.get_task("legacy") is not None
    assert domain(reloaded) == before
    assert codec.stored_spec_from_pb(legacy).command == legacy.command


@pytest.mark.parametrize("expr", [" ", "x" * 300, "* * * * *\x00"])
def test_a_malformed_schedule_in_apply_is_refused_before_anything_is_written(expr: str) -> None:
    # Found by the fuzz test: apply skips the schedule in its structural check (the leader checks
    # it against croniter) and used to build the trigger task after writing the new version.
    state = seeded()
    spec = workflow()
    spec.schedule.expr = expr
    before = domain(state)
    cmd = envelope(T0 + 1)
    cmd.apply_workflow.spec.CopyFrom(spec)
    cmd.apply_workflow.next_fire_ms = T0 + 60_000
    result = state.apply(codec.encode_command(cmd)).result
    assert (result.ok, result.code) == (False, "invalid_argument")
    assert result.message.startswith("trigger.cron: ")
    assert domain(state) == before


def test_policy_names_are_taken_as_plain_strings_and_kept_as_the_enum() -> None:
    names: dict[str, Any] = {"misfire": "all", "overlap": "allow", "runner": "python"}
    spec = TaskSpec("t", CronTrigger("* * * * *"), command="x", **names)
    assert spec.misfire is Misfire.ALL and spec.overlap is Overlap.ALLOW and spec.runner is Runner.PYTHON
    assert spec == TaskSpec(
        "t",
        CronTrigger("* * * * *"),
        command="x",
        misfire=Misfire.ALL,
        overlap=Overlap.ALLOW,
        runner=Runner.PYTHON,
    )
    with pytest.raises(
        InvalidSpec, match="overlap: 'sometimes' is not one of skip, allow, buffer_one, replace"
    ):
        TaskSpec("t", CronTrigger("* * * * *"), command="x", overlap="sometimes")  # type: ignore[arg-type]
