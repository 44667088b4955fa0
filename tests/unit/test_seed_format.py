"""The seeds' workflow format: ``dag_name``, ``retry``, ``worker_type``, ``timeout`` in seconds and
``resource`` accepted as documented aliases and fields, each refused clearly with its line when wrong;
the runner rule for ``python``; and the workflow ``exclude`` key."""

from __future__ import annotations

import pytest

from raftsched.errors import InvalidWorkflow
from raftsched.executor.commands import python_command
from raftsched.workflow.files import parse_workflow_text

SEED = """\
dag_name: d
schedule: 0 2 * * *
exclude: [holidays]
tasks:
  - name: a
    worker_type: python
    command: python tasks/a.py
    retry: 3
    timeout: 1800
    depends_on: []
    resource:
      cpu: 0.5
      memory: 512
"""


def problems(text: str) -> list[str]:
    with pytest.raises(InvalidWorkflow) as info:
        parse_workflow_text(text, "yaml", "w.yaml")
    return [f"{where}: {message}" for where, message in info.value.problems]


def test_seed_keys_map_to_this_formats_fields() -> None:
    spec = parse_workflow_text(SEED, "yaml", "w.yaml")
    assert spec.name == "d" and list(spec.exclude) == ["holidays"]
    task = spec.tasks[0]
    assert (task.runner, task.max_retries, task.timeout_ms) == ("python", 3, 1_800_000)
    assert (task.resource_cpu, task.resource_memory_mb) == (0.5, 512)
    shell = parse_workflow_text(SEED.replace("worker_type: python", "worker_type: shell"), "yaml", "w.yaml")
    assert shell.tasks[0].runner == ""  # the default is stored as unset: same definition as without


def test_the_same_formats_toml_takes_the_aliases_too() -> None:
    text = 'dag_name = "d"\n[[tasks]]\nname = "a"\ncommand = "x"\nretry = 2\nworker_type = "python"\n'
    spec = parse_workflow_text(text, "toml", "w.toml")
    assert (spec.name, spec.tasks[0].max_retries, spec.tasks[0].runner) == ("d", 2, "python")


@pytest.mark.parametrize(
    ("edit", "expected"),
    [
        (("dag_name: d\n", "dag_name: d\nname: e\n"), 'w.yaml:2: "name" and "dag_name" are the same key'),
        (("retry: 3", "retry: 3\n    retries: 1"), "are the same key"),
        (
            ("worker_type: python", "worker_type: java"),
            'w.yaml:6: tasks[0].worker_type ("a"): "java" is not one of shell, python',
        ),
        (("cpu: 0.5", "cpu: -1"), 'w.yaml:12: tasks[0].resource ("a").cpu: -1 must be > 0'),
        (("cpu: 0.5", "cpu: lots"), "must be a number"),
        (("memory: 512", "memory: 0"), "memory: 0 must be > 0 (MiB)"),
        (("memory: 512", "memory: 512\n      disk: 5"), 'unknown resource key "disk"'),
        (("cpu: 0.5", "cpu: 4096.0"), "out of range"),
        (("exclude: [holidays]", 'exclude: ["bad name"]'), "not a valid name"),
        (("schedule: 0 2 * * *\n", ""), "exclude: calendars exclude days from a schedule"),
        (
            ("worker_type: python\n    command: python tasks/a.py", "worker_type: python\n    handler: h"),
            "runner python runs a command",
        ),
    ],
)
def test_bad_seed_fields_are_refused_with_their_line(edit: tuple[str, str], expected: str) -> None:
    text = SEED.replace(*edit)
    assert text != SEED
    found = problems(text)
    assert any(expected in p for p in found), found


def test_python_runner_uses_the_executors_interpreter() -> None:
    assert python_command("python tasks/extract.py", "/opt/py") == "/opt/py tasks/extract.py"
    assert python_command("python3.12 -m pkg --x 'a b'", "/opt/py") == "/opt/py -m pkg --x 'a b'"
    assert python_command("tasks/load.py --day 1", "/opt/py") == "/opt/py tasks/load.py --day 1"
    assert python_command("pythonic.sh", "/opt/py") == "/opt/py pythonic.sh"
    assert python_command("python", "/opt/my py") == "'/opt/my py'"
