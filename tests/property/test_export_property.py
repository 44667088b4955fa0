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
from raftsched.workflow.export import task_file_text
from raftsched.workflow.taskfiles import parse_task_text

S = 1000
# Every field but these is drawn below; the export refuses a task holding locks (a file cannot
# express one), a test of its own covers that.
NOT_DRAWN = {"locks"}

names = st.from_regex(r"[a-z0-9][a-z0-9_.:-]{0,20}", fullmatch=True)
# Durations a user writes: whole units, so the file's text (``90s``, ``1500ms``) reads back exactly.
durations = st.one_of(
    st.just(0),
    st.integers(1, 5_000),
    st.integers(1, 3_600).map(lambda s: s * S),
    st.integers(1, 48).map(lambda h: h * 3_600 * S),
)
# Any character params may hold (not NUL, not a lone surrogate): controls, DEL, C1 and the
# Unicode line separators included.
json_texts = st.text(
    st.characters(blacklist_categories=["Cs"], blacklist_characters="\x00")
    | st.sampled_from("\x7f\x85\x9f\u2028\u2029\ufeff\ufffe\uffff\t\n\r\x1b"),
    max_size=8,
)
texts = json_texts.map(lambda t: t * 5)  # commands, descriptions: the same alphabet, longer
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
        "command": "" if handled else draw(texts.filter(str.strip)),
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
        "jitter_ms": draw(durations.filter(lambda ms: ms <= 3_600 * S)),
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


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
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
