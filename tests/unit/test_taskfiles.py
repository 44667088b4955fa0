"""Task files: parsing (YAML and TOML, defaults per file, overrides per task, aliases), every
problem at its file:line, and the plan ``raftsched apply`` prints (created / updated / unchanged /
deleted, with field-level changes), offline."""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path

import pytest

from raftsched.cli.apply import load_files, plan
from raftsched.cli.parser import main
from raftsched.model import CronTrigger, IntervalTrigger, OnceTrigger, Runner, TaskSpec
from raftsched.workflow.taskfiles import InvalidTaskFile, diff_specs, normalize_for, parse_task_text

YAML = """\
namespace: etl
owner: data
tasks:
  - name: report
    cron: "0 2 * * *"
    timezone: Europe/Berlin
    command: ./report.sh
    retry: 2
    timeout: 10m
    exclude: [holidays]
  - name: beat
    every: 30s
    command: echo ok
    namespace: ops
  - name: once
    at: "2030-01-01T00:00:00Z"
    worker_type: python
    command: tasks/x.py
    resource: {cpu: 0.5, memory: 256}
    params: {day: monday}
"""

TOML = """\
namespace = "etl"
owner = "data"

[[tasks]]
name = "report"
cron = "0 2 * * *"
timezone = "Europe/Berlin"
command = "./report.sh"
retries = 2
timeout = "10m"
exclude = ["holidays"]
"""


def test_yaml_tasks_get_file_defaults_and_their_own_overrides() -> None:
    tf = parse_task_text(YAML, "yaml", "t.yaml")
    specs = {spec.name: spec for spec, _ in tf.tasks}
    assert [where for _, where in tf.tasks] == ["t.yaml:4", "t.yaml:11", "t.yaml:15"]
    report = specs["report"]
    assert report.trigger == CronTrigger("0 2 * * *", "Europe/Berlin")
    assert (report.max_retries, report.timeout_ms, report.exclude) == (2, 600_000, ("holidays",))
    assert (report.owner, report.namespace) == ("data", "etl")
    assert specs["beat"].trigger == IntervalTrigger(30_000) and specs["beat"].namespace == "ops"
    once = specs["once"]
    assert once.trigger == OnceTrigger(1_893_456_000_000)
    assert (once.runner, once.resource_cpu, once.resource_memory_mb) == (Runner.PYTHON, 0.5, 256)
    assert once.params_json == '{"day":"monday"}'
    assert tf.namespaces == {"etl", "ops"}


def test_toml_reads_the_same_keys() -> None:
    yaml_report = next(s for s, _ in parse_task_text(YAML, "yaml", "t.yaml").tasks if s.name == "report")
    ((toml_report, where),) = parse_task_text(TOML, "toml", "t.toml").tasks
    assert toml_report == yaml_report
    assert where == "t.toml:4"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("tasks:\n  - name: a\n    command: x\n    cron: '0 2 * *'\n", 't.yaml:4: tasks[0].cron ("a")'),
        (
            "tasks:\n  - name: a\n    command: x\n    retries: 200\n",
            't.yaml:4: tasks[0].retries ("a"): 200 out of range',
        ),
        ("tasks:\n  - name: a\n    comand: x\n", 'unknown task key "comand" (did you mean "command"?)'),
        (
            "tasks:\n  - name: a\n    command: x\n    every: 30s\n    at: '2030-01-01T00:00:00Z'\n",
            "give one of cron, every, at",
        ),
        ("tasks:\n  - name: a\n    command: x\n    at: '2030-01-01T00:00:00'\n", "has no zone"),
        (
            "tasks:\n  - name: a\n    command: x\n  - name: a\n    command: y\n",
            "t.yaml:4: tasks[1]: task 'a' is declared twice (first at t.yaml:2)",
        ),
        ("tasks:\n  - name: a\n    command: x\n    timezone: UTC\n", "a time zone applies to cron"),
        ("tasks:\n  - name: a\n    handler: h\n    runner: python\n", "runner python runs a command"),
        ("tasks:\n  - name: a\n    command: x\n    resource: {cpu: 0}\n", "cpu: 0 must be > 0"),
        ("tasks:\n  - name: a\n", "give a command or a handler"),
        ("nope: 1\ntasks: []\n", 't.yaml:1: unknown file key "nope"'),
        ("tasks:\n  - name: a\n\tcommand: x\n", "t.yaml:3"),
    ],
)
def test_problems_name_the_file_and_line(text: str, expected: str) -> None:
    with pytest.raises(InvalidTaskFile) as info:
        parse_task_text(text, "yaml", "t.yaml")
    shown = [f"{where}: {message}" for where, message in info.value.problems]
    assert any(expected in line for line in shown), shown


def _specs(text: str) -> dict[str, tuple[TaskSpec, int]]:
    return {s.name: (s, 3) for s, _ in parse_task_text(text, "yaml", "t.yaml").tasks}


def test_plan_creates_updates_leaves_unchanged_and_prunes_only_the_files_namespaces() -> None:
    files = [parse_task_text(YAML, "yaml", "t.yaml")]
    current = _specs(YAML.replace("retry: 2", "retry: 1"))
    current.pop("once")
    current["stale"] = (TaskSpec("stale", command="x", namespace="etl"), 7)
    current["elsewhere"] = (TaskSpec("elsewhere", command="x", namespace="other"), 1)
    steps = plan(files, current, prune=True)
    assert [(s.action, s.name) for s in steps] == [
        ("updated", "report"),
        ("unchanged", "beat"),
        ("created", "once"),
        ("deleted", "stale"),
    ]
    report = steps[0]
    assert report.version == 3
    assert [(c.field, c.old, c.new) for c in report.changes] == [("retries", "1", "2")]
    assert [s.action for s in plan(files, current, prune=False)] == ["updated", "unchanged", "created"]


def test_applying_what_is_stored_is_all_unchanged_and_an_interval_keeps_its_phase() -> None:
    files = [parse_task_text(YAML, "yaml", "t.yaml")]
    stored = _specs(YAML)
    anchored = IntervalTrigger(30_000, 1_800_000_000_000)  # the leader anchored it at creation
    beat, version = stored["beat"]
    stored["beat"] = (
        TaskSpec(**{**{f: getattr(beat, f) for f in beat.__slots__}, "trigger": anchored}),
        version,
    )
    steps = plan(files, stored, prune=True)
    assert {s.action for s in steps} == {"unchanged"}
    assert normalize_for(beat, stored["beat"][0]).trigger == anchored
    # A different interval is a change, and the file's (absent) start takes over.
    slower = dataclasses.replace(beat, trigger=IntervalTrigger(60_000))
    (change,) = diff_specs(stored["beat"][0], normalize_for(slower, stored["beat"][0]))
    assert (change.field, change.new) == ("schedule", "every 1m")


def test_dry_run_prints_the_field_diff_without_a_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = tmp_path / "tasks.yaml"
    new.write_text(YAML)
    base = tmp_path / "base.toml"
    base.write_text(
        TOML.replace("retries = 2", "retries = 1") + '\n[[tasks]]\nname = "gone"\ncommand = "x"\n'
    )
    code = main(
        ["--cluster", "127.0.0.1:1", "apply", "--dry-run", "--prune", str(new), "--against", str(base)]
    )
    out = capsys.readouterr().out
    assert code == 0, out
    assert f"update    report  ({new}:4)" in out
    assert "    ~ retries: 1 -> 2" in out
    assert f"create    beat    ({new}:11)" in out and "    + schedule: every 30s" in out
    assert "delete    gone" in out
    assert out.rstrip().endswith("dry run: 2 to create, 1 to update, 1 to delete")


def test_a_task_in_two_files_is_refused_with_both_places(tmp_path: Path) -> None:
    a, b = tmp_path / "a.yaml", tmp_path / "b.yaml"
    a.write_text("tasks:\n  - name: x\n    command: x\n")
    b.write_text("tasks:\n  - name: y\n    command: y\n  - name: x\n    command: x\n")
    with pytest.raises(InvalidTaskFile) as info:
        load_files([str(a), str(b)])
    assert info.value.problems == [(f"{b}:4", f"task 'x' is also declared at {a}:2")]


def test_dry_run_json_lists_every_task_with_its_changes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = tmp_path / "tasks.yaml"
    new.write_text(YAML)
    assert main(["apply", "--dry-run", "--json", str(new)]) == 0
    data = json.loads(capsys.readouterr().out)
    assert data["dry_run"] is True
    assert [(t["task"], t["action"]) for t in data["tasks"]] == [
        ("report", "created"),
        ("beat", "created"),
        ("once", "created"),
    ]
    assert {"field": "exclude", "old": "[]", "new": "[holidays]"} in data["tasks"][0]["changes"]


def test_calendar_cli_refuses_bad_input_before_any_cluster(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    at = ["--cluster", "127.0.0.1:1"]
    assert main([*at, "calendar", "set", "h"]) == 2
    assert "--file" in capsys.readouterr().err
    assert main([*at, "calendar", "set", "h", "--weekdays", "funday"]) == 2
    assert "'funday' is not a weekday" in capsys.readouterr().err
    bad = tmp_path / "h.txt"
    bad.write_text("2026-12-25\n2026-13-01\n")
    assert main([*at, "calendar", "set", "h", "--file", str(bad)]) == 2
    assert f"{bad}:2" in capsys.readouterr().err
    # cron preview with an offline holidays file: no cluster needed.
    good = tmp_path / "days.txt"
    good.write_text("2027-01-01\n")
    code = main(
        [
            "cron",
            "preview",
            "0 0 * * *",
            "--tz",
            "Asia/Tokyo",
            "--from",
            "2026-12-31T00:00:00Z",
            "--count",
            "2",
            "--exclude-file",
            str(good),
        ]
    )
    out = capsys.readouterr().out
    assert code == 0
    lines = [line for line in out.splitlines() if line.startswith(("1 ", "2 "))]
    # The first fire is 2026-12-31T15:00Z: already 2027-01-01 in Tokyo, the calendar's zone.
    assert "2026-12-31T15:00:00Z" in lines[0]
    assert "skipped_calendar: 2027-01-01 (fri, a listed date)" in lines[0]
    assert "skipped_calendar" not in lines[1]
