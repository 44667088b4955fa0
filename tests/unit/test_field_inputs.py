"""Where the ways in used to disagree about a task field, they now answer alike (issue 27).

Task files, workflow files and ``task add|update`` read a field with one reader each kind; these
tests pin the places where they used to differ. They use only the loaders and the CLI, so they
also run against code from before the field table (where each of them fails).
"""

from __future__ import annotations

import pytest

from raftsched import cli
from raftsched.errors import InvalidWorkflow
from raftsched.workflow.files import parse_workflow_text
from raftsched.workflow.taskfiles import InvalidTaskFile, parse_task_text


def task_file_problems(task_lines: str) -> list[str]:
    with pytest.raises(InvalidTaskFile) as info:
        parse_task_text("tasks:\n  - name: a\n    command: x\n" + task_lines, "yaml", "t.yaml")
    return [f"{where}: {message}" for where, message in info.value.problems]


def workflow_problems(task_lines: str) -> list[str]:
    with pytest.raises(InvalidWorkflow) as info:
        parse_workflow_text("name: w\ntasks:\n  - name: a\n    command: x\n" + task_lines, "yaml", "w.yaml")
    return [f"{where}: {message}" for where, message in info.value.problems]


@pytest.mark.parametrize(("text", "ms"), [("1.5", 1500), ("90", 90_000), ('"90s"', 90_000)])
def test_a_task_timeout_in_seconds_reads_alike_in_both_files(text: str, ms: int) -> None:
    # Task files refused a number with a fraction ("must be a string"), workflow files took it.
    task_file = parse_task_text(f"tasks:\n  - name: a\n    command: x\n    timeout: {text}\n", "yaml", "t")
    workflow = parse_workflow_text(
        f"name: w\ntasks:\n  - name: a\n    command: x\n    timeout: {text}\n", "yaml", "w"
    )
    assert task_file.tasks[0][0].timeout_ms == workflow.tasks[0].timeout_ms == ms


def test_a_duration_of_the_wrong_type_is_explained_alike_in_both_files() -> None:
    expected = 'must be seconds (a number) or a duration like "90s", "5m", "2h", got boolean true'
    assert task_file_problems("    timeout: true\n") == [
        f't.yaml:4: tasks[0].timeout ("a"): {expected} (quote it to make it a string)'
    ]
    assert workflow_problems("    timeout: true\n") == [
        f'w.yaml:5: tasks[0].timeout ("a"): {expected} (quote it to make it a string)'
    ]


def test_a_misspelt_runner_gets_the_same_did_you_mean_in_both_files() -> None:
    message = 'tasks[0].runner ("a"): "pyton" is not one of shell, python (did you mean "python"?)'
    assert task_file_problems("    runner: pyton\n") == [f"t.yaml:4: {message}"]
    assert workflow_problems("    runner: pyton\n") == [f"w.yaml:5: {message}"]


def test_a_bad_selector_value_is_named_alike_in_both_files() -> None:
    message = 'tasks[0].selector.gpu ("a"): must be a string, got integer 1 (quote it to make it a string)'
    assert task_file_problems("    selector: {gpu: 1}\n") == [f"t.yaml:4: {message}"]
    assert workflow_problems("    selector: {gpu: 1}\n") == [f"w.yaml:5: {message}"]


@pytest.mark.parametrize(
    ("options", "error"),
    [
        (
            ["--handler", "h", "--runner", "python"],
            "--runner: runner python runs a command; a handler is already Python",
        ),
        (
            [arg for i in range(17) for arg in ("--exclude", f"c{i}")],
            "--exclude: 17 calendars, at most 16",
        ),
    ],
)
def test_the_cli_names_the_option_of_every_task_field_it_refuses(
    capsys: pytest.CaptureFixture[str], options: list[str], error: str
) -> None:
    # "runner" and "exclude" were the two task fields whose errors named the model field.
    status = cli.main(["--cluster", "127.0.0.1:1", "task", "add", "t", "--manual", *options])
    _, err = capsys.readouterr()
    assert status == 2
    assert err == f"raftsched: error: {error}\n"
