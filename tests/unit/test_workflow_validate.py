"""validate_workflow: every problem at once, each with its location (and file position if given)."""

from __future__ import annotations

import pytest

from raftsched.errors import InvalidSpec, InvalidWorkflow
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.dag import compile_dag
from raftsched.workflow.validate import MAX_WORKFLOW_TASKS, validate_workflow


def etl() -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name="etl", params_json='{"target": "wh"}')
    spec.schedule.expr = "30 2 * * *"
    spec.schedule.timezone = "Europe/Berlin"
    spec.tasks.add(name="extract", command="echo extract {{ ds }}")
    spec.tasks.add(name="validate", command="echo validate", depends_on=[pb.Dependency(task="extract")])
    spec.tasks.add(
        name="load",
        command="echo load {{ params.target }} {{ params.batch }}",
        params_json='{"batch": 5}',
        env={"DS": "{{ ds }}"},
        depends_on=[pb.Dependency(task="extract"), pb.Dependency(task="validate")],
    )
    return spec


def problems(spec: pb.WorkflowSpec, locations: dict[str, str] | None = None) -> list[tuple[str, str]]:
    with pytest.raises(InvalidWorkflow) as info:
        validate_workflow(spec, locations)
    assert isinstance(info.value, InvalidSpec)
    return info.value.problems


def test_the_etl_example_is_valid() -> None:
    validate_workflow(etl())
    validate_workflow(pb.WorkflowSpec(name="w", tasks=[pb.WorkflowTaskSpec(name="a", handler="h")]))


def test_unknown_dependency_with_suggestion_and_file_location() -> None:
    spec = etl()
    spec.tasks[2].depends_on[1].task = "validat"
    found = problems(spec, {"tasks[2]": "etl.yaml:10", "tasks[2].depends_on[1]": "etl.yaml:14"})
    assert found == [
        ('etl.yaml:14: tasks[2].depends_on[1] ("load")', 'unknown task "validat" (did you mean "validate"?)')
    ]


def test_every_problem_at_once_and_readable_text() -> None:
    spec = etl()
    spec.name = "bad name"
    spec.backfill_share_pct = 150
    spec.schedule.timezone = "Mars/Olympus"
    spec.tasks[0].handler = "also"
    spec.tasks[2].shards = 5000
    spec.tasks[2].env["1BAD"] = "x"
    spec.tasks[2].command = "echo {{ params.nope }} {{ dss }}"
    spec.tasks[2].depends_on.add(task="load")
    spec.tasks[2].depends_on.add(task="extract")
    spec.tasks[2].depends_on.add(task="ghost")
    spec.tasks.add(name="extract", command="true")
    with pytest.raises(InvalidWorkflow) as info:
        validate_workflow(spec)
    found = info.value.problems
    assert [loc for loc, _ in found] == [
        "name",
        "schedule.timezone",
        "backfill_share_pct",
        'tasks[0].handler ("extract")',
        'tasks[2].shards ("load")',
        'tasks[2].env.1BAD ("load")',
        'tasks[2].command ("load")',
        'tasks[2].command ("load")',
        'tasks[2].depends_on[2] ("load")',
        'tasks[2].depends_on[3] ("load")',
        'tasks[2].depends_on[4] ("load")',
        'tasks[3].name ("extract")',
    ]
    messages = [m for _, m in found]
    assert "not a valid name" in messages[0]
    assert "unknown time zone" in messages[1]
    assert "150 % out of range" in messages[2]
    assert messages[3] == "give a command or a handler, not both"
    assert messages[6].startswith('template: unknown variable "dss" at column 24 (did you mean "ds"?)')
    assert messages[7] == '{{ params.nope }}: no workflow or task param "nope" (give it a default in params)'
    assert messages[8] == "a task cannot depend on itself"
    assert messages[9] == 'depends on "extract" twice (also depends_on[0])'
    assert messages[10] == 'unknown task "ghost"'
    lines = str(info.value).splitlines()
    assert lines[0] == 'invalid workflow "bad name": 12 problems'
    assert (
        lines[-1] == '  tasks[3].name ("extract"): duplicate task name "extract" (first defined at tasks[0])'
    )
    assert len(lines) == 13


def test_cycle_refused_with_its_path_at_the_closing_edge() -> None:
    spec = pb.WorkflowSpec(name="w")
    spec.tasks.add(name="x", command="true")
    spec.tasks.add(name="a", command="true", depends_on=[pb.Dependency(task="c")])
    spec.tasks.add(name="b", command="true", depends_on=[pb.Dependency(task="a")])
    spec.tasks.add(name="c", command="true", depends_on=[pb.Dependency(task="x"), pb.Dependency(task="b")])
    assert problems(spec, {"tasks[1].depends_on[0]": "w.toml:7"}) == [
        ('w.toml:7: tasks[1].depends_on[0] ("a")', "cycle: a → b → c → a")
    ]


@pytest.mark.parametrize(
    ("mutate", "path", "fragment"),
    [
        (lambda s: s.tasks[0].ClearField("command"), 'tasks[0] ("extract")', "give a command or a handler"),
        (lambda s: setattr(s.tasks[0], "max_retries", 101), "tasks[0].max_retries", "out of range (0-100)"),
        (lambda s: setattr(s.tasks[0], "timeout_ms", 8 * 86_400_000), "tasks[0].timeout_ms", "out of range"),
        (lambda s: setattr(s.tasks[0], "priority", 10), "tasks[0].priority", "out of range (0-9)"),
        (lambda s: setattr(s.tasks[0], "params_json", "[1]"), "tasks[0].params_json", "JSON object"),
        (lambda s: setattr(s, "params_json", "{"), "params_json", "not valid JSON"),
        (lambda s: setattr(s.tasks[0], "trigger_rule", 9), "tasks[0].trigger_rule", "unknown trigger rule 9"),
        (
            lambda s: setattr(s.tasks[1].depends_on[0], "condition", 4),
            "tasks[1].depends_on[0]",
            "condition 4",
        ),
        (lambda s: setattr(s.tasks[1].depends_on[0], "task", ""), "tasks[1].depends_on[0]", "names no task"),
        (lambda s: setattr(s.schedule, "expr", "61 * * * *"), "schedule.expr", "minute: 61 out of range"),
        (lambda s: setattr(s.schedule, "expr", ""), "schedule.timezone", "without a schedule"),
        (lambda s: setattr(s, "misfire", 7), "misfire", "unknown misfire policy 7"),
        (lambda s: setattr(s, "overlap", 7), "overlap", "unknown overlap policy 7"),
        (lambda s: setattr(s, "max_parallel", 10_001), "max_parallel", "out of range"),
        (
            lambda s: s.MergeFrom(pb.WorkflowSpec(max_parallel=4, max_parallel_per_run=8)),
            "max_parallel_per_run",
            "exceeds max_parallel 4",
        ),
        (
            lambda s: s.tasks[0].env.update({"RAFTSCHED_EXECUTION_ID": "x"}),
            "tasks[0].env.RAFTSCHED_EXECUTION_ID",
            "set by the executor",
        ),
        (lambda s: s.tasks[0].env.update({"X": "{{ params.zz }}"}), "tasks[0].env.X", 'param "zz"'),
        (lambda s: s.ClearField("tasks"), "tasks", "at least one task"),
        (lambda s: setattr(s.tasks[0], "name", "a b"), "tasks[0].name", "not a valid name"),
    ],
)
def test_each_check(mutate: object, path: str, fragment: str) -> None:
    spec = etl()
    mutate(spec)  # type: ignore[operator]
    found = problems(spec)
    assert any(loc.startswith(path) and fragment in msg for loc, msg in found), found


def test_too_many_tasks() -> None:
    spec = pb.WorkflowSpec(name="w")
    for i in range(MAX_WORKFLOW_TASKS + 1):
        spec.tasks.add(name=f"t{i}", command="true")
    assert problems(spec) == [
        ("tasks", f"{MAX_WORKFLOW_TASKS + 1} tasks, at most {MAX_WORKFLOW_TASKS} allowed")
    ]


def test_a_ten_thousand_task_dag_validates_and_compiles() -> None:
    # Its speed is measured by bench/workflows.py (a wall-clock bound here failed on a loaded machine).
    spec = pb.WorkflowSpec(name="big", params_json='{"p": 1}')
    for i in range(MAX_WORKFLOW_TASKS):
        task = spec.tasks.add(name=f"t{i}", command=f"echo {i} {{{{ ds }}}} {{{{ params.p }}}}")
        for dep in {i - 1, i // 2, (i * 7) // 10} - {i}:
            if dep >= 0:
                task.depends_on.add(task=f"t{dep}")
    validate_workflow(spec)
    dag = compile_dag(spec)
    assert len(dag.names) == MAX_WORKFLOW_TASKS
    position = {task: i for i, task in enumerate(dag.topo)}
    assert all(position[up] < position[task] for task, ups in enumerate(dag.upstream) for up, _ in ups)
