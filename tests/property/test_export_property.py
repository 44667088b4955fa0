"""A task's file text (what the console's edit page starts from, ``raftsched.workflow.export``)
parses back to the same definition, for any definition a file can express: every field of
:class:`~raftsched.model.TaskSpec` but ``locks`` is drawn, so a field added later and left out of
the export (silently dropped by the next console edit) fails here first."""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftsched.model import (
    CronTrigger,
    IntervalTrigger,
    ManualTrigger,
    Misfire,
    OnceTrigger,
    Overlap,
    RetryBackoff,
    Runner,
    TaskSpec,
)
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.export import task_file_text, workflow_file_text
from raftsched.workflow.files import parse_workflow_text
from raftsched.workflow.taskfiles import parse_task_text

S = 1000
# Every field but these is drawn below; the export refuses a task holding locks (a file cannot
# express one), a test of its own covers that.
NOT_DRAWN = {"locks"}

names = st.from_regex(r"[a-z0-9][a-z0-9_.:-]{0,20}", fullmatch=True)
# Durations a user writes: whole units, so the file's text (``90s``, ``1500ms``) reads back exactly.
nonzero_durations = st.one_of(
    st.integers(1, 5_000),
    st.integers(1, 3_600).map(lambda s: s * S),
    st.integers(1, 48).map(lambda h: h * 3_600 * S),
)
durations = st.just(0) | nonzero_durations
# Any character params may hold (not NUL, not a lone surrogate): controls, DEL, C1 and the
# Unicode line separators included.
json_texts = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00")
    | st.sampled_from("\x7f\x85\x9f\u2028\u2029\ufeff\ufffe\uffff\t\n\r\x1b"),
    max_size=8,
)
texts = json_texts.map(lambda t: t * 5)  # commands, descriptions: the same alphabet, longer
# A command: something to run, and no template (a file's templates are checked: not this test's).
commands = st.tuples(names, texts).map(lambda p: (p[0] + p[1]).replace("{", "("))
json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(10**6), 10**6) | json_texts,
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(json_texts, inner, max_size=3),
    max_leaves=8,
)
triggers = st.one_of(
    st.just(ManualTrigger()),
    st.builds(
        CronTrigger,
        st.sampled_from(["*/5 * * * *", "0 2 * * *", "30 1 * * mon-fri", "* * * * * *", "0 0 L * *"]),
        st.sampled_from(["UTC", "Europe/Berlin", "Asia/Shanghai", "America/New_York"]),
    ),
    st.builds(
        IntervalTrigger,
        st.integers(1, 3_600).map(lambda s: s * S),
        st.one_of(st.just(0), st.integers(1_700_000_000, 1_900_000_000).map(lambda s: s * S)),
    ),
    st.builds(OnceTrigger, st.integers(1_700_000_000_000, 1_900_000_000_000)),
)


@st.composite
def task_fields(draw: st.DrawFn) -> dict[str, Any]:
    runner = draw(st.sampled_from(list(Runner)))
    handled = runner == Runner.SHELL and draw(st.booleans())
    misfire = draw(st.sampled_from(list(Misfire)))
    delays: tuple[int, ...] = ()
    backoff: RetryBackoff | None = None
    match draw(st.sampled_from(["none", "delays", "backoff"])):
        case "delays":
            delays = tuple(draw(st.lists(durations, min_size=1, max_size=4)))
        case "backoff":
            base = draw(st.integers(1, 600).map(lambda s: s * S))
            cap = draw(st.one_of(st.just(0), st.integers(base // S, 3_600).map(lambda s: s * S)))
            backoff = RetryBackoff(base, cap, draw(st.integers(0, 100)))
    params = draw(st.one_of(st.just(""), st.dictionaries(json_texts, json_values, max_size=3)))
    fields: dict[str, Any] = {
        "name": draw(names),
        "trigger": draw(triggers),
        "command": "" if handled else draw(commands),
        "handler": draw(names) if handled else "",
        "shards": draw(st.integers(1, 64)),
        "misfire": misfire,
        "misfire_all_cap": draw(st.integers(0, 100)) if misfire == Misfire.ALL else 0,
        "misfire_all_window_ms": draw(durations) if misfire == Misfire.ALL else 0,
        "overlap": draw(st.sampled_from(list(Overlap))),
        "max_retries": draw(st.integers(0, 10)),
        "timeout_ms": draw(durations),
        "priority": draw(st.integers(0, 9)),
        "owner": draw(st.one_of(st.just(""), names)),
        "namespace": draw(st.one_of(st.just("default"), names)),
        "params_json": json.dumps(params, separators=(",", ":")) if params != "" else "",
        "description": draw(texts),
        "exclude": tuple(draw(st.lists(names, max_size=3, unique=True))),
        "resource_cpu": draw(st.one_of(st.just(0.0), st.sampled_from([0.25, 0.5, 1.0, 1.5, 4.0]))),
        "resource_memory_mb": draw(st.integers(0, 65_536)),
        "runner": runner,
        "selector": tuple(draw(st.dictionaries(names, names, max_size=3)).items()),
        "jitter_ms": draw(st.just(0) | st.integers(1, 3_600 * S)),
        "on_event": draw(st.one_of(st.just(""), names)),
        "emits": tuple(draw(st.lists(names, max_size=3, unique=True))),
        "retry_delays_ms": delays,
        "retry_backoff": backoff,
        "retry_elsewhere": draw(st.booleans()),
        "keep_runs": draw(st.integers(0, 1_000)),
        "keep_for_ms": draw(durations),
        "pool": draw(st.one_of(st.just(""), names)),
        "sla_start_within_ms": draw(durations),
        "sla_finish_within_ms": draw(durations),
        "freshness_ms": draw(durations),
    }
    return fields


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(task_fields())
def test_a_task_reads_back_from_its_file_text(fields: dict[str, Any]) -> None:
    missing = {f.name for f in dataclasses.fields(TaskSpec)} - NOT_DRAWN - fields.keys()
    assert not missing, (
        f"TaskSpec fields this property does not draw (add them, and to the export): {missing}"
    )
    spec = TaskSpec(**fields)
    text = task_file_text(spec)
    [(back, _)] = parse_task_text(text, "yaml", "x.yaml").tasks
    # params come back as the same JSON object, written the parser's way (compact, ``{}`` as none).
    assert json.loads(back.params_json or "{}") == json.loads(spec.params_json or "{}"), text
    assert dataclasses.replace(back, params_json=spec.params_json) == spec, text


# A workflow is drawn as its *file* (JSON on one line is YAML too), so the parser makes the spec
# and nothing here restates its defaults: ``parse(export(parse(file))) == parse(file)``. Every
# field of WorkflowSpec and WorkflowTaskSpec must be reachable from a key drawn below.
WORKFLOW_KEYS = {  # file key -> proto field(s)
    "name": ["name"], "description": ["description"], "owner": ["owner"], "namespace": ["namespace"],
    "schedule": ["schedule"], "misfire": ["misfire"], "overlap": ["overlap"],
    "max_parallel": ["max_parallel"], "max_parallel_per_run": ["max_parallel_per_run"],
    "backfill_share": ["backfill_share_pct"], "params": ["params_json"], "jitter": ["jitter_ms"],
    "exclude": ["exclude"], "warn_after": ["warn_after_ms"], "on_event": ["on_event"],
    "emits": ["emits"], "keep_runs": ["keep_runs"], "keep_for": ["keep_for_ms"],
    "sla": ["sla_start_within_ms", "sla_finish_within_ms"], "freshness": ["freshness_ms"],
    "tasks": ["tasks"],
}  # fmt: skip
WORKFLOW_TASK_KEYS = {
    "name": ["name"], "command": ["command"], "handler": ["handler"], "runner": ["runner"],
    "depends_on": ["depends_on"], "trigger_rule": ["trigger_rule"], "not_before": ["not_before"],
    "retries": ["max_retries"], "timeout": ["timeout_ms"], "shards": ["shards"],
    "priority": ["priority"], "locks": ["locks"], "params": ["params_json"], "env": ["env"],
    "resource": ["resource_cpu", "resource_memory_mb"], "selector": ["selector"], "emits": ["emits"],
    "retry_delays": ["retry_delays_ms"], "retry_backoff": ["retry_backoff"],
    "retry_elsewhere": ["retry_same_executor"], "pool": ["pool"], "description": ["description"],
}  # fmt: skip


env_names = st.from_regex(r"[A-QS-Z_][A-Z0-9_]{0,8}", fullmatch=True)  # (RAFTSCHED_* is refused)


def _ms(ms: int) -> str:
    return f"{ms}ms"


@st.composite
def workflow_files(draw: st.DrawFn) -> dict[str, Any]:
    optional = draw(st.sets(st.sampled_from(sorted(set(WORKFLOW_KEYS) - {"name", "tasks"}))))
    wf: dict[str, Any] = {"name": draw(names)}
    values: dict[str, Any] = {
        "description": draw(texts),
        "owner": draw(names),
        "namespace": draw(names),
        "schedule": draw(st.sampled_from(["0 2 * * *", "*/15 * * * *", "30 1 * * mon-fri"])),
        "misfire": draw(st.sampled_from(["latest", "all", "skip"])),
        "overlap": draw(st.sampled_from(["skip", "allow"])),
        "max_parallel": draw(st.integers(1, 50)),
        "max_parallel_per_run": draw(st.integers(1, 50)),
        "backfill_share": draw(st.integers(1, 100)),
        "params": draw(st.dictionaries(json_texts, json_values, min_size=1, max_size=3)),
        "jitter": _ms(draw(st.integers(1, 3_600 * S))),
        "exclude": draw(st.lists(names, min_size=1, max_size=3, unique=True)),
        "warn_after": _ms(draw(nonzero_durations)),
        "on_event": draw(names),
        "emits": draw(st.lists(names, min_size=1, max_size=3, unique=True)),
        "keep_runs": draw(st.integers(1, 1_000)),
        "keep_for": _ms(draw(nonzero_durations)),
        "sla": {"start_within": _ms(draw(nonzero_durations)), "finish_within": _ms(draw(nonzero_durations))},
        "freshness": _ms(draw(nonzero_durations)),
    }  # fmt: skip
    if "on_event" in optional:
        optional.discard("schedule")  # (a workflow starts from its schedule or from an event)
    if "schedule" not in optional:
        optional.discard("exclude")  # (calendars exclude days from a schedule)
    if "max_parallel" in optional and "max_parallel_per_run" in optional:
        values["max_parallel_per_run"] = min(values["max_parallel_per_run"], values["max_parallel"])
    for key in sorted(optional):
        wf[key] = values[key]
    task_names = draw(st.lists(names, min_size=1, max_size=5, unique=True))
    wf["tasks"] = [draw(workflow_task(name, task_names[:i])) for i, name in enumerate(task_names)]
    return wf


@st.composite
def workflow_task(draw: st.DrawFn, name: str, earlier: list[str]) -> dict[str, Any]:
    task: dict[str, Any] = {"name": name}
    runner = draw(st.sampled_from(["shell", "python"]))
    if runner == "shell" and draw(st.booleans()):
        task["handler"] = draw(names)
    else:
        task["command"] = draw(commands)
        task["runner"] = runner
    if len(earlier) > 0 and draw(st.booleans()):
        ups = draw(st.lists(st.sampled_from(earlier), min_size=1, unique=True))
        task["depends_on"] = [
            up
            if draw(st.booleans())
            else {"task": up, "condition": draw(st.sampled_from(["success", "failure", "done"]))}
            for up in ups
        ]
        if draw(st.booleans()):
            task["trigger_rule"] = draw(st.sampled_from(["all", "any"]))
    values: dict[str, Any] = {
        "not_before": draw(st.sampled_from(["02:00", "23:59:30", "+30m", "+1500ms"])),
        "retries": draw(st.integers(1, 10)),
        "timeout": _ms(draw(nonzero_durations)),
        "shards": draw(st.integers(2, 16)),
        "priority": draw(st.integers(0, 9)),
        "locks": [{"name": n, "mode": draw(st.sampled_from(["exclusive", "shared"]))}
                  for n in draw(st.lists(names, min_size=1, max_size=3, unique=True))],
        "params": draw(st.dictionaries(json_texts, json_values, min_size=1, max_size=3)),
        "env": draw(st.dictionaries(env_names, texts, min_size=1, max_size=3)),
        "resource": {"cpu": draw(st.sampled_from([0.25, 1.0, 2.5])), "memory": draw(st.integers(1, 65_536))},
        "selector": draw(st.dictionaries(names, names, min_size=1, max_size=3)),
        "emits": draw(st.lists(names, min_size=1, max_size=3, unique=True)),
        "retry_elsewhere": draw(st.booleans()),
        "pool": draw(names),
        "description": draw(texts),
    }  # fmt: skip
    for key in sorted(draw(st.sets(st.sampled_from(sorted(values))))):
        task[key] = values[key]
    match draw(st.sampled_from(["none", "delays", "backoff"])):
        case "delays":
            task["retry_delays"] = [_ms(ms) for ms in draw(st.lists(durations, min_size=1, max_size=4))]
        case "backoff":
            base = draw(st.integers(1, 600)) * S
            task["retry_backoff"] = {"base": _ms(base), "cap": _ms(base * draw(st.integers(1, 10)))}
            if draw(st.booleans()):
                task["retry_backoff"]["jitter"] = f"{draw(st.integers(0, 100))}%"
    return task


def test_every_workflow_field_has_a_file_key_drawn() -> None:
    mapped = {f for fields in WORKFLOW_KEYS.values() for f in fields}
    assert {f.name for f in pb.WorkflowSpec.DESCRIPTOR.fields} == mapped
    mapped = {f for fields in WORKFLOW_TASK_KEYS.values() for f in fields}
    assert {f.name for f in pb.WorkflowTaskSpec.DESCRIPTOR.fields} == mapped


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(workflow_files())
def test_a_workflow_reads_back_from_its_file_text(wf: dict[str, Any]) -> None:
    assert set(wf) <= set(WORKFLOW_KEYS)
    assert all(set(task) <= set(WORKFLOW_TASK_KEYS) for task in wf["tasks"])
    spec = parse_workflow_text(json.dumps(wf), "yaml", "drawn.yaml")
    text = workflow_file_text(spec)
    assert parse_workflow_text(text, "yaml", "wf.yaml") == spec, text
