"""Workflow files: YAML (PyYAML, strict) and TOML give equal specs; every problem carries file:line."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from raftsched.errors import InvalidWorkflow
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.files import load_workflow_file, parse_workflow_text
from raftsched.workflow.template import TemplateContext, render, render_params_json

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "workflows"


def errors(text: str, fmt: str = "yaml", source: str = "wf.yaml") -> list[tuple[str, str]]:
    with pytest.raises(InvalidWorkflow) as info:
        parse_workflow_text(text, fmt, source)  # type: ignore[arg-type]
    return info.value.problems


def test_yaml_and_toml_examples_parse_to_equal_specs() -> None:
    from_yaml = load_workflow_file(EXAMPLES / "etl.yaml")
    from_toml = load_workflow_file(str(EXAMPLES / "etl.toml"))
    assert from_yaml == from_toml
    assert [t.name for t in from_yaml.tasks] == ["extract", "validate", "load"]
    load = from_yaml.tasks[2]
    assert [(d.task, d.condition) for d in load.depends_on] == [
        ("extract", pb.CONDITION_UNSPECIFIED),
        ("validate", pb.ON_SUCCESS),
    ]
    assert load.trigger_rule == pb.RULE_ALL and load.timeout_ms == 2 * 3600 * 1000
    assert dict(load.env) == {"TARGET": "warehouse.{{ params.table }}"}
    assert from_yaml.schedule.expr == "30 2 * * *" and from_yaml.schedule.timezone == "Europe/Berlin"
    assert from_yaml.tasks[0].timeout_ms == 300_000 and from_yaml.tasks[0].max_retries == 2
    assert from_yaml.backfill_share_pct == 30 and from_yaml.max_parallel_per_run == 2
    assert from_yaml.params_json == '{"table":"orders","rows":3}'


def test_example_commands_run_on_this_machine() -> None:
    spec = load_workflow_file(EXAMPLES / "etl.yaml")
    outputs = []
    for task in spec.tasks:
        params = render_params_json(spec.params_json, task.params_json, "")
        ctx = TemplateContext(1_740_796_200_000, "etl@1740796200000", params)
        command = render(task.command, ctx)
        env = {k: render(v, ctx) for k, v in task.env.items()}
        # the executor runs commands with /bin/sh -c; use this interpreter for python3 here
        command = command.replace("python3 ", f"{sys.executable} ", 1)
        done = subprocess.run(
            ["/bin/sh", "-c", command], env=env, capture_output=True, text=True, timeout=30, check=False
        )
        assert done.returncode == 0, done.stderr
        outputs.append(done.stdout.strip())
    assert outputs == [
        "extract orders for 2025-03-01",
        "validate orders 20250301: 3 rows",
        "load warehouse.orders 2025-03-01 2025-03-01T02:30:00Z 1740796200",
    ]


def test_three_errors_reported_at_once_with_lines() -> None:
    text = """\
name: etl
tasks:
  - name: extract
    comand: echo hi
  - name: load
    command: echo {{ ds }}
    retries: many
    depends_on: [extract, lod]
"""
    assert errors(text) == [
        ("wf.yaml:4", 'tasks[0]: unknown task key "comand" (did you mean "command"?)'),
        ("wf.yaml:7", 'tasks[1].retries ("load"): must be an integer, got string "many"'),
        ('wf.yaml:8: tasks[1].depends_on[1] ("load")', 'unknown task "lod"'),
    ]


def test_same_three_errors_in_toml() -> None:
    text = """\
name = "etl"

[[tasks]]
name = "extract"
comand = "echo hi"

[[tasks]]
name = "load"
command = "echo {{ ds }}"
retries = "many"
depends_on = ["extract", "lod"]
"""
    assert errors(text, "toml", "wf.toml") == [
        ("wf.toml:5", 'tasks[0]: unknown task key "comand" (did you mean "command"?)'),
        ("wf.toml:10", 'tasks[1].retries ("load"): must be an integer, got string "many"'),
        ('wf.toml:11: tasks[1].depends_on[1] ("load")', 'unknown task "lod"'),
    ]


def test_cycle_and_condition_and_template_problems_carry_lines() -> None:
    text = """\
name: w
params: {who: me}
tasks:
  - name: a
    command: "echo {{ params.who }} {{ params.nobody }}"
    depends_on: [c]
  - name: b
    handler: h
    depends_on: [a]
  - name: c
    handler: h
    trigger_rule: some
    depends_on:
      - {task: b, condition: failur}
"""
    assert errors(text) == [
        (
            'wf.yaml:5: tasks[0].command ("a")',
            '{{ params.nobody }}: no workflow or task param "nobody" (give it a default in params)',
        ),
        ('wf.yaml:6: tasks[0].depends_on[0] ("a")', "cycle: a → b → c → a"),
        ("wf.yaml:12", 'tasks[2].trigger_rule ("c"): "some" is not one of all, any'),
        (
            "wf.yaml:14",
            'tasks[2].depends_on[0].condition ("c"): "failur" is not one of success, failure, done '
            '(did you mean "failure"?)',
        ),
    ]


def test_workflow_level_problems_use_file_key_names() -> None:
    text = """\
name: w
schedule: 61 * * * *
timezone: Mars/Olympus
backfill_share: 150
misfire: lates
max_parallel: 2
max_parallel_per_run: 3
cron: "* * * * *"
tasks:
  - name: a
    command: x
    timeout: 8d
    retries: 500
"""
    found = errors(text)
    assert [loc for loc, _ in found] == [
        "wf.yaml:2: schedule",
        "wf.yaml:3: timezone",
        "wf.yaml:4: backfill_share",
        "wf.yaml:5",
        "wf.yaml:7: max_parallel_per_run",
        "wf.yaml:8",
        'wf.yaml:12: tasks[0].timeout ("a")',
        'wf.yaml:13: tasks[0].retries ("a")',
    ]
    assert found[3][1] == 'misfire: "lates" is not one of latest, all, skip (did you mean "latest"?)'
    assert found[5][1] == 'unknown workflow key "cron" (did you mean "schedule"?)'


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("name: w\ntasks:\n  - name: a\n   command: x\n", 4, "unexpected indentation"),
        ("name: w\ntasks:\n\t- a\n", 3, "tab in indentation"),
        ("name: &x w\n", 1, "anchors, aliases"),
        ("name: w\ntasks: [a,\n  b]\n", 2, "must close on the same line"),
        ("name: w\nname: v\n", 2, "duplicate key 'name' (first on line 1)"),
        ("# only a comment\n", 1, "empty"),
        ("name: w\n---\nname: v\n", 2, "only one YAML document"),
        ("name: w\ndescription: >\n  folded\n", 2, "folded scalars"),
        ('name: "w\n', 1, "unclosed quoted string"),
        ("name: w\ndescription: a: b\n", 2, "quote it"),
        ('name: "w" x\n', 1, "after a quoted string"),
        ("- a\n- b\n", 1, "mapping"),
        ("name: w\ntasks:\n  - {name: a, command: x\n", 3, "unclosed '{'"),
        ('name: "\\q"\n', 1, "unknown escape"),
    ],
)
def test_yaml_refusals_name_their_line(text: str, line: int, fragment: str) -> None:
    found = errors(text)
    assert len(found) == 1, found
    assert found[0][0] == f"wf.yaml:{line}" and fragment in found[0][1], found


def test_yaml_values() -> None:
    text = """\
---
name: 'w'   # a comment
owner: 'it''s'
description: "tab\\tand \\u00e9 # not a comment"
params:
  n: 42
  f: 1.5
  t: true
  off: off
  nothing: ~
  list: [1, "two", {three: 3}]
  nested:
    deep: [ ]
tasks:
- name: a
  command: |-
    first line
      second # kept
  env: {A: "1", B: 'x y'}
- name: b
  handler: h
  depends_on:
  - a
  - task: a2
    condition: done
- name: a2
  command: echo 'x' # trailing comment
"""
    spec = parse_workflow_text(text, "yaml", "wf.yaml")
    assert spec.name == "w" and spec.owner == "it's"
    assert spec.description == "tab\tand é # not a comment"
    assert spec.params_json == (
        '{"n":42,"f":1.5,"t":true,"off":"off","nothing":null,"list":[1,"two",{"three":3}],"nested":{"deep":[]}}'
    )
    assert spec.tasks[0].command == "first line\n  second # kept"
    assert dict(spec.tasks[0].env) == {"A": "1", "B": "x y"}
    assert [(d.task, d.condition) for d in spec.tasks[1].depends_on] == [
        ("a", pb.CONDITION_UNSPECIFIED),
        ("a2", pb.ON_DONE),
    ]
    assert spec.tasks[2].command == "echo 'x'"


def test_literal_block_chomping() -> None:
    base = (
        "name: w\ntasks:\n  - name: a\n    command: {header}\n      x\n\n      y\n\n\n"
        "  - name: b\n    command: z\n"
    )
    got = {
        header: parse_workflow_text(base.format(header=header), "yaml", "wf.yaml").tasks[0].command
        for header in ("|", "|-", "|+")
    }
    assert got == {"|": "x\n\ny\n", "|-": "x\n\ny", "|+": "x\n\ny\n\n\n"}


def test_wrong_types_and_shapes() -> None:
    text = """\
name: 12
max_parallel: -1
tasks:
  - name: a
    handler: h
    env: {X: 1, "bad key": ok}
    params: [1]
    depends_on: {b: failure}
  - just a string
"""
    found = errors(text)
    assert found == [
        ("wf.yaml:1", "name: must be a string, got integer 12 (quote it to make it a string)"),
        ("wf.yaml:2", "max_parallel: -1 out of range (0-4294967295)"),
        ("wf.yaml:6", 'tasks[0].env.X ("a"): must be a string, got integer 1 (quote it to make it a string)'),
        (
            'wf.yaml:6: tasks[0].env.bad key ("a")',
            '"bad key" is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)',
        ),
        ("wf.yaml:7", 'tasks[0].params ("a"): must be a mapping, got a list'),
        (
            "wf.yaml:8",
            'tasks[0].depends_on ("a"): must be a list; write each dependency as a name or as '
            "{task: NAME, condition: success|failure|done}, "
            "e.g. [extract, {task: validate, condition: failure}]",
        ),
        ("wf.yaml:9", 'tasks[1]: a task must be a mapping (name, command, ...), got string "just a string"'),
    ]


def test_toml_specifics(tmp_path: Path) -> None:
    bad = errors('name = "x"\n[[tasks]\n', "toml", "wf.toml")
    assert bad[0][0] == "wf.toml:2" and bad[0][1].startswith("TOML syntax:")
    dated = errors(
        'name = "x"\nowner = 2024-01-01\n[[tasks]]\nname = "a"\ncommand = "x"\n', "toml", "wf.toml"
    )
    assert dated == [("wf.toml:2", "owner: must be a string, got a TOML date")]
    text = """\
name = "w"
[[tasks]]
name = "a"
command = "x"
[[tasks.depends_on]]
task = "b"
condition = "failure"
[[tasks]]
name = "b"
command = "y"
depends_on = ["a"]
[tasks.env]
GOOD = "1"
"bad key" = "2"
"""
    found = errors(text, "toml", "wf.toml")
    assert found == [
        ('wf.toml:5: tasks[0].depends_on[0] ("a")', "cycle: a → b → a"),
        (
            'wf.toml:14: tasks[1].env.bad key ("b")',
            '"bad key" is not a valid environment variable name ([A-Za-z_][A-Za-z0-9_]*)',
        ),
    ]


def test_load_workflow_file_errors(tmp_path: Path) -> None:
    other = tmp_path / "wf.json"
    other.write_text("{}")
    with pytest.raises(InvalidWorkflow, match=r"use \.yaml, \.yml or \.toml"):
        load_workflow_file(other)
    with pytest.raises(InvalidWorkflow, match="cannot read the file"):
        load_workflow_file(tmp_path / "missing.yaml")
    binary = tmp_path / "wf.yml"
    binary.write_bytes(b"name: \xff\n")
    with pytest.raises(InvalidWorkflow, match="not UTF-8"):
        load_workflow_file(binary)


# -- PyYAML: what stays refused, and the scalar typing rule ----------------------------------------

TASKS = "tasks:\n  - name: a\n    command: x\n"


@pytest.mark.parametrize(
    ("text", "line", "fragment"),
    [
        ("name: w\nparams:\n  a: &base {x: 1}\n" + TASKS, 3, "anchor '&base'"),
        ("name: w\nparams: {x: 1}\nowner: *who\n" + TASKS, 3, "alias '*who'"),
        ("name: w\ndescription: !!str 12\n" + TASKS, 2, "tag 'tag:yaml.org,2002:str'"),
        ("name: w\nparams: !custom {a: 1}\n" + TASKS, 2, "tag '!custom'"),
        ("name: w\n" + TASKS + "---\nname: v\n", 5, "only one YAML document"),
        ("name: w\n" + TASKS + "...\n---\n", 6, "only one YAML document"),
        ("%YAML 1.1\n---\nname: w\n" + TASKS, 1, "directives"),
        ("name: w\n" + TASKS + "    command: y\n", 5, "duplicate key 'command' (first on line 4)"),
        ("name: w\nparams: {a: 1, b: 2, a: 3}\n" + TASKS, 2, "duplicate key 'a'"),
        ("name: w\nparams:\n  ? [a, b]\n  : 1\n" + TASKS, 3, "keys must be plain strings"),
        ("name: w\ndescription: one\n  two\n" + TASKS, 2, "runs over several lines"),
        ("name: w\ndescription: 'one\n  two'\n" + TASKS, 2, "runs over several lines"),
        (
            "name: w\nparams: {a: [1, [2, [3, [4, [5, [6, [7, [8, [9, [10, [11, [12, [13, [14, [15, [16, "
            "[17, [18, [19, [20, [21, [22, [23, [24, [25, [26, [27, [28, [29, [30, [31, [32]]]]]]]]]]]]]]]]"
            "]]]]]]]]]]]]]]]]}\n" + TASKS,
            2,
            "nested deeper than 32 levels",
        ),
        ("name: w\ndescription: \x07\n" + TASKS, 2, "U+0007"),
        ("name: w\nparams: {a: [1, 2]]}\n" + TASKS, 2, "malformed flow collection"),
        ("name: w\nowner: [1, 2]]\n" + TASKS, 2, "unexpected ']'"),
        ("name: w\n" + TASKS + "   - name: b\n", 5, "unexpected indentation"),
    ],
)
def test_yaml_refuses_anchors_aliases_tags_documents_and_duplicates_with_their_line(
    text: str, line: int, fragment: str
) -> None:
    found = errors(text)
    assert len(found) == 1, found
    assert found[0][0] == f"wf.yaml:{line}" and fragment in found[0][1], found


@pytest.mark.parametrize(
    ("plain", "fragment"),
    [
        ("010", "leading zero"),
        ("-007", "leading zero"),
        ("0x1F", "hexadecimal"),
        ("0o17", "hexadecimal, octal or binary"),
        ("0b101", "hexadecimal, octal or binary"),
        ("1_000", "'_'"),
        ("12:30", "base-60"),
        ("-1:20:30.5", "base-60"),
        ("1e3", "exponent"),
        ("1.5e3", "exponent"),
        ("2024-01-01", "date or timestamp"),
        ("2024-01-01T10:00:00Z", "date or timestamp"),
        ("2001-12-14 21:59:43.10 -5", "date or timestamp"),
        (".inf", "infinity or NaN"),
        ("-.Inf", "infinity or NaN"),
        (".NaN", "infinity or NaN"),
    ],
)
def test_yaml_values_that_yaml_versions_read_differently_are_refused(plain: str, fragment: str) -> None:
    for text in (f"name: w\nparams:\n  v: {plain}\n{TASKS}", f"name: w\nparams: {{v: [{plain}]}}\n{TASKS}"):
        found = errors(text)
        assert len(found) == 1, found
        where, message = found[0]
        assert where == "wf.yaml:3" if "\n  v:" in text else where == "wf.yaml:2"
        assert fragment in message and "quote it" in message, message
    # Quoted, the same text is the string it reads as.
    quoted = parse_workflow_text(f"name: w\nparams:\n  v: '{plain}'\n{TASKS}", "yaml", "wf.yaml")
    assert json.loads(quoted.params_json) == {"v": plain}


def test_yaml_typing_rule_for_what_is_accepted() -> None:
    text = (
        """\
name: w
params:
  words: [yes, no, on, off, y, n, Yes, OFF]
  bools: [true, false, True, FALSE]
  nulls: [~, null, NULL]
  empty:
  ints: [0, 42, -7, +3]
  floats: [1.5, -0.25, 1.0e+3, 2., .5]
  strings: ["010", '12:30', "2024-01-01", 1e3x, v1.2, 12:75]
  on: key
  010: key
  1: key
"""
        + TASKS
    )
    params = json.loads(parse_workflow_text(text, "yaml", "wf.yaml").params_json)
    assert params == {
        "words": ["yes", "no", "on", "off", "y", "n", "Yes", "OFF"],
        "bools": [True, False, True, False],
        "nulls": [None, None, None],
        "empty": None,
        "ints": [0, 42, -7, 3],
        "floats": [1.5, -0.25, 1000.0, 2.0, 0.5],
        "strings": ["010", "12:30", "2024-01-01", "1e3x", "v1.2", "12:75"],
        "on": "key",
        "010": "key",
        "1": "key",
    }


def test_a_yaml_word_where_a_number_is_wanted_is_still_a_type_error() -> None:
    found = errors("name: w\nmax_parallel: on\n" + TASKS)
    assert found == [("wf.yaml:2", 'max_parallel: must be an integer, got string "on"')]


# -- task timeouts: the shared duration grammar -------------------------------------------------


@pytest.mark.parametrize(
    ("value", "ms"),
    [
        ("60", 60_000),
        ("1.5", 1_500),
        ('"90"', 90_000),
        ('"500ms"', 500),
        ('"90s"', 90_000),
        ('"5m"', 300_000),
        ('"1.5h"', 5_400_000),
        ('"1d"', 86_400_000),
        ('"1w"', 604_800_000),
        ('" 2h "', 7_200_000),
        ("0", 0),
    ],
)
def test_task_timeout_reads_the_duration_grammar(value: str, ms: int) -> None:
    # The same value in YAML (plain when unquoted) and TOML (a number or a basic string).
    yaml_text = f"name: w\ntasks:\n  - name: a\n    command: x\n    timeout: {value.strip(chr(34))}\n"
    toml_text = f'name = "w"\n[[tasks]]\nname = "a"\ncommand = "x"\ntimeout = {value}\n'
    assert parse_workflow_text(yaml_text, "yaml", "wf.yaml").tasks[0].timeout_ms == ms
    assert parse_workflow_text(toml_text, "toml", "wf.toml").tasks[0].timeout_ms == ms


@pytest.mark.parametrize(
    ("value", "fragment"),
    [
        ("90 s", "no space between the number and the unit"),
        ("-5m", "cannot be negative"),
        ("1.5ms", "not a whole number of milliseconds"),
        ("5 minutes", "is not a duration"),
        ("true", "must be seconds (a number) or a duration"),
        ("[1]", "must be seconds (a number) or a duration"),
        ("-1", "out of range"),
    ],
)
def test_task_timeout_refusals_name_the_field_and_line(value: str, fragment: str) -> None:
    found = errors(f"name: w\ntasks:\n  - name: a\n    command: x\n    timeout: {value}\n")
    assert len(found) == 1, found
    where, message = found[0]
    assert where == "wf.yaml:5" and message.startswith('tasks[0].timeout ("a"): ') and fragment in message, (
        found
    )


def test_escaped_surrogates_are_joined_as_json_joins_them_and_a_lone_one_is_an_error_with_its_line() -> None:
    """PyYAML reads each \\u escape as its own code point: a pair (as a JSON writer escapes an
    emoji) was two lone surrogates and the parser stopped with a bare UnicodeEncodeError."""
    pair = 'name: w\ntasks:\n  - name: a\n    command: "echo \\ud83d\\ude00"\n'
    assert parse_workflow_text(pair, "yaml", "w.yaml").tasks[0].command == "echo \U0001f600"
    for where, text in (
        ("w.yaml:2", 'name: w\ndescription: "x\\udc00"\ntasks:\n  - name: a\n    command: x\n'),
        ("w.yaml:4", 'name: w\ntasks:\n  - name: a\n    env: {"K\\ud800": "1"}\n    command: x\n'),
        # the lone one is named, not the pair before it
        ("w.yaml:2", 'name: w\ndescription: "\\ud83d\\ude00\\ud800"\ntasks:\n  - name: a\n    command: x\n'),
    ):
        with pytest.raises(InvalidWorkflow, match=rf"{where}: \\u(dc00|d800) is a lone surrogate"):
            parse_workflow_text(text, "yaml", "w.yaml")
