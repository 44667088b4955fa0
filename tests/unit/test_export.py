"""Definitions back to file text (the console's edit pages start from it): parsing the export with
the CLI's parsers gives the definition back, for every field a file can hold."""

from __future__ import annotations

import pytest

from raftsched.model import (
    CronTrigger,
    IntervalTrigger,
    Lock,
    ManualTrigger,
    Misfire,
    OnceTrigger,
    Overlap,
    Runner,
    TaskSpec,
)
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.export import NotExportable, task_file_text, workflow_file_text
from raftsched.workflow.files import parse_workflow_text
from raftsched.workflow.taskfiles import parse_task_text

TASKS = [
    TaskSpec("plain", command="true"),
    TaskSpec(
        "full",
        CronTrigger("*/5 * * * *", "Europe/Berlin"),
        command="echo 'quoted' \"twice\" # not a comment",
        params_json='{"a":[1,{"b":"{{ secret.pw }}"}],"t":true,"n":null}',
        max_retries=2,
        timeout_ms=90_000,
        owner="ops",
        namespace="etl",
        selector=(("gpu", "true"),),
        resource_cpu=1.5,
        resource_memory_mb=512,
        exclude=("holidays",),
        description="line: one\nline two",
        jitter_ms=1500,
        misfire=Misfire.ALL,
        misfire_all_cap=3,
        misfire_all_window_ms=3_600_000,
        overlap=Overlap.ALLOW,
        priority=0,
        shards=4,
        on_event="orders",
        emits=("done",),
    ),
    TaskSpec(
        "every", IntervalTrigger(90_000, start_ms=1_796_000_000_000), command="x.py", runner=Runner.PYTHON
    ),
    TaskSpec("handled", IntervalTrigger(90_000), handler="h"),
    TaskSpec("once", OnceTrigger(1_796_000_000_500), command="true", overlap=Overlap.REPLACE),
    TaskSpec("manual", ManualTrigger(), command="ünïcode ✓"),
]


@pytest.mark.parametrize("spec", TASKS, ids=[t.name for t in TASKS])
def test_a_task_round_trips_through_its_file_text(spec: TaskSpec) -> None:
    [(back, where)] = parse_task_text(task_file_text(spec), "yaml", "x.yaml").tasks
    assert back == spec and where.startswith("x.yaml:")


def test_a_task_with_locks_is_refused_naming_what() -> None:
    with pytest.raises(NotExportable, match="task 'l' holds locks: a file cannot express it"):
        task_file_text(TaskSpec("l", command="true", locks=(Lock("db"),)))


def test_a_workflow_round_trips_through_its_file_text() -> None:
    spec = pb.WorkflowSpec(
        name="etl",
        description="d",
        owner="o",
        namespace="ns",
        schedule=pb.CronTrigger(expr="0 3 * * *", timezone="America/New_York"),
        misfire=pb.MISFIRE_SKIP,
        overlap=pb.OVERLAP_ALLOW,
        max_parallel=3,
        max_parallel_per_run=2,
        backfill_share_pct=50,
        params_json='{"table":"orders"}',
        jitter_ms=60_000,
        exclude=["holidays"],
        emits=["etl-done"],
    )
    spec.tasks.add(name="a", command="echo {{ ds }}", env={"PW": "{{ secret.pw }}", "B": "1"}, max_retries=1)
    b = spec.tasks.add(name="b", handler="h", timeout_ms=60_000, not_before="02:00", priority=7, shards=2)
    b.depends_on.add(task="a", condition=pb.ON_FAILURE)
    b.locks.add(name="db", shared=True)
    c = spec.tasks.add(name="c", command="true", trigger_rule=pb.RULE_ANY, resource_cpu=0.5, emits=["x"])
    c.depends_on.add(task="a")
    c.depends_on.add(task="b", condition=pb.ON_DONE)
    c.selector["zone"] = "eu"
    text = workflow_file_text(spec)
    back = parse_workflow_text(text, "yaml", "etl.yaml")
    # The parser fills defaults the spec left unset; from then on it is exact. A priority is
    # always written: the protobuf's 0 is the lowest, and a file without one means 5.
    assert parse_workflow_text(workflow_file_text(back), "yaml", "etl.yaml") == back
    assert [t.priority for t in back.tasks] == [0, 7, 0]
    assert [t.name for t in back.tasks] == ["a", "b", "c"]
    assert back.tasks[1].locks[0].shared and back.tasks[2].trigger_rule == pb.RULE_ANY
    assert dict(back.tasks[0].env) == {"PW": "{{ secret.pw }}", "B": "1"}
    assert back.schedule.timezone == "America/New_York" and back.params_json == spec.params_json


def test_a_cross_workflow_dependency_is_refused() -> None:
    spec = pb.WorkflowSpec(name="w")
    spec.tasks.add(name="a", command="true").depends_on.add(workflow="up", task="")
    with pytest.raises(NotExportable, match="cross-workflow dependency"):
        workflow_file_text(spec)


@pytest.mark.parametrize("char", ["\x7f", "\x85", "\x9f", "\u2028", "\u2029", "\ufffe"])
def test_characters_yaml_will_not_read_raw_are_escaped(char: str) -> None:
    """DEL, C1 controls and U+FFFE are not allowed raw in a YAML stream, and NEL and the Unicode
    line separators fold to a space inside a quoted string: the console's edit page showed a
    definition holding one as text its own parser refused (found by tests/property/
    test_export_property.py)."""
    spec = TaskSpec("t", command=f"echo a{char}b", description=f"x{char}y", params_json=f'{{"k":"{char}"}}')
    text = task_file_text(spec)
    assert char not in text
    [(back, _)] = parse_task_text(text, "yaml", "x.yaml").tasks
    assert back == spec


def test_a_workflow_task_of_priority_0_and_explicit_defaults_read_back_as_they_were() -> None:
    """A workflow task of priority 0 (the lowest) was exported without its priority, and a file
    without one means 5: a console edit raised it. ``trigger_rule: all`` and a ``success``
    condition written out are kept as written (found by tests/property/test_export_property.py)."""
    text = (
        "name: wf\ntasks:\n  - name: a\n    command: x\n    priority: 0\n"
        "  - name: b\n    command: y\n    depends_on: [{task: a, condition: success}]\n"
        "    trigger_rule: all\n"
    )
    wf = parse_workflow_text(text, "yaml", "wf.yaml")
    assert wf.tasks[0].priority == 0
    assert parse_workflow_text(workflow_file_text(wf), "yaml", "wf.yaml") == wf
