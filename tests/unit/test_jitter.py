"""Jitter offsets (raftsched.timing.jitter) and a jittered task's attempts in the state machine."""

from __future__ import annotations

import hashlib
from collections import Counter

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raftsched.model import MAX_JITTER_MS, OnceTrigger, TaskSpec
from raftsched.timing import jitter

NOMINAL = 1_800_000_000_000  # one instant many tasks are due at (a midnight burst)


@given(
    name=st.text(min_size=1, max_size=40),
    nominal=st.integers(0, 253_402_300_799_000),
    window=st.integers(1, MAX_JITTER_MS),
)
def test_an_offset_lies_in_the_window_and_is_stable(name: str, nominal: int, window: int) -> None:
    offset = jitter.offset_ms(name, nominal, window)
    assert 0 <= offset < window
    assert jitter.offset_ms(name, nominal, window) == offset
    assert jitter.start_ms(name, nominal, window) == nominal + offset


def test_no_jitter_is_no_offset() -> None:
    assert jitter.offset_ms("t", NOMINAL, 0) == 0
    assert jitter.start_ms("t", NOMINAL, 0) == NOMINAL


def test_offsets_are_fixed_values_not_a_per_process_hash() -> None:
    # Pinned: Python's hash() is salted per process; these must hold on every replica and release.
    assert jitter.offset_ms("nightly", NOMINAL, 300_000) == jitter.offset_ms("nightly", NOMINAL, 300_000)
    assert [jitter.offset_ms(f"t{i}", NOMINAL, 300_000) for i in range(3)] == [
        jitter.offset_ms("t0", NOMINAL, 300_000),
        jitter.offset_ms("t1", NOMINAL, 300_000),
        jitter.offset_ms("t2", NOMINAL, 300_000),
    ]
    assert jitter.offset_ms("t0", NOMINAL, 300_000) == _PINNED


# BLAKE2b-64 of "name NUL nominal", big-endian, modulo the window (documented in the module).
_DIGEST = hashlib.blake2b(f"t0\x00{NOMINAL}".encode(), digest_size=8).digest()
_PINNED = int.from_bytes(_DIGEST, "big") % 300_000


def test_a_thousand_tasks_due_at_one_instant_spread_over_the_window() -> None:
    window = 300_000
    buckets = Counter(jitter.offset_ms(f"task-{i}", NOMINAL, window) * 10 // window for i in range(1000))
    assert sorted(buckets) == list(range(10))
    assert max(buckets.values()) <= 2 * 100, buckets  # no bucket over twice its share


def test_the_same_task_moves_between_fires() -> None:
    offsets = {jitter.offset_ms("nightly", NOMINAL + day * 86_400_000, 300_000) for day in range(30)}
    assert len(offsets) > 20


def test_jitter_is_validated_with_the_field_named() -> None:
    from raftsched.errors import InvalidSpec

    with pytest.raises(InvalidSpec) as bad:
        TaskSpec("t", OnceTrigger(NOMINAL), command="x", jitter_ms=MAX_JITTER_MS + 1)
    assert bad.value.field == "jitter"
    with pytest.raises(InvalidSpec):
        TaskSpec("t", OnceTrigger(NOMINAL), command="x", jitter_ms=-1)


# -- the ways in: files, CLI, preview, explain ------------------------------------------------------


def test_a_task_file_and_the_cli_take_jitter_as_a_duration() -> None:
    from raftsched.cli import parser, tasks
    from raftsched.workflow.taskfiles import parse_task_text

    text = "tasks:\n  - name: a\n    command: x\n    cron: '0 0 * * *'\n    jitter: 5m\n"
    assert parse_task_text(text, "yaml", "t.yaml").tasks[0][0].jitter_ms == 300_000
    args = parser.parse_args(["task", "add", "a", "--command", "x", "--cron", "0 0 * * *", "--jitter", "90s"])
    assert tasks.spec_from_args(args, lambda: NOMINAL).jitter_ms == 90_000


def test_a_task_file_names_a_jitter_out_of_range() -> None:
    from raftsched.errors import InvalidSpec
    from raftsched.workflow.taskfiles import parse_task_text

    with pytest.raises(InvalidSpec) as bad:
        parse_task_text("tasks:\n  - name: a\n    command: x\n    jitter: 2d\n", "yaml", "t.yaml")
    assert "t.yaml:4" in str(bad.value) and "jitter" in str(bad.value)


def test_cron_preview_shows_each_fires_start_with_the_tasks_offset(
    capsys: pytest.CaptureFixture[str],
) -> None:
    import json

    from raftsched import cli

    status = cli.main(
        ["cron", "preview", "0 0 * * *", "--from", "2026-12-01", "--count", "3", "--jitter", "5m",
         "--task", "nightly", "--json"]
    )  # fmt: skip
    out, _ = capsys.readouterr()
    assert status == 0
    fires = json.loads(out)["fires"]
    for fire in fires:
        assert fire["start_ms"] == jitter.start_ms("nightly", fire["utc_ms"], 300_000)
        assert fire["utc_ms"] <= fire["start_ms"] < fire["utc_ms"] + 300_000
    assert cli.main(["cron", "preview", "0 0 * * *", "--jitter", "5m"]) != 0
    _, err = capsys.readouterr()
    assert "--jitter needs --task" in err


def test_explain_names_the_offset_of_a_jittered_fire() -> None:
    from raftsched import codec
    from raftsched.explain import explain
    from raftsched.model import CronTrigger
    from raftsched.v1 import raftsched_pb2 as pb

    spec = TaskSpec("nightly", CronTrigger("0 0 * * *"), command="x", jitter_ms=300_000)
    record = pb.TaskRecord(spec=codec.spec_to_pb(spec), created_ms=1, watermark_ms=NOMINAL + 1)
    fire = pb.FireRecord(task="nightly", nominal_ms=NOMINAL, outcome=pb.FIRED, run_id="r")
    reply = explain(record, NOMINAL, [fire], None)
    start = jitter.start_ms("nightly", NOMINAL, 300_000)
    assert any(f"offset {start - NOMINAL} ms" in d for d in reply.details), reply.details


# -- the state machine ------------------------------------------------------------------------------


def test_a_jittered_fire_is_held_in_the_replicated_attempts_and_never_assigned_early() -> None:
    from raftsched.fsm.effects import AttemptReady
    from raftsched.model import IntervalTrigger
    from tests.support.fsm import T0, S, apply, assign, create, fresh, join, run_of, tick

    state = fresh()
    spec = TaskSpec("t", IntervalTrigger(S), command="true", jitter_ms=60 * S)
    assert create(state, spec).ok
    assert apply(state, join("ex1")).ok
    applied = state.apply(tick("t", 1, T0 + S))
    run_id = f"t@{T0 + S}"
    start = jitter.start_ms("t", T0 + S, 60 * S)
    assert start > T0 + S  # this fire's offset is not zero (else the test shows nothing)
    assert AttemptReady(run_id, "t", T0 + S, 0, 1, 1, start) in applied.effects
    run = run_of(state, run_id)
    assert run.nominal_ms == T0 + S and [s.not_before_ms for s in run.shards] == [start]
    assert apply(state, assign(start - 1, (run_id, 0, 1, "ex1"))).refused == 1  # never early
    assert apply(state, assign(start, (run_id, 0, 1, "ex1"))).accounted == 1


def test_a_task_without_jitter_keeps_its_run_bytes() -> None:
    from raftsched.model import IntervalTrigger
    from tests.support.fsm import T0, S, apply, create, fresh, run_of, tick

    state = fresh()
    assert create(state, TaskSpec("t", IntervalTrigger(S), command="true")).ok
    assert apply(state, tick("t", 1, T0 + S)).fired == 1
    assert [s.not_before_ms for s in run_of(state, f"t@{T0 + S}").shards] == [0]
