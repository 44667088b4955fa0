"""Per-task retry timing and placement (issue 29 §3): the pure maths of raftsched.timing.retry
against a dumb oracle, the fields' validation and every way in (task files, workflow files, CLI),
and the state machine retrying on the task's delays instead of the leader's cluster backoff."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given
from hypothesis import strategies as st

from raftsched import codec
from raftsched.cli.parser import parse_args
from raftsched.cli.tasks import keep_text, merge_spec, retry_text, spec_from_args
from raftsched.errors import InvalidSpec, InvalidWorkflow
from raftsched.leader import writes
from raftsched.model import MAX_RETRY_DELAY_MS, ManualTrigger, RetryBackoff, TaskSpec
from raftsched.timing import retry
from raftsched.v1 import log_pb2 as pb
from raftsched.workflow.files import parse_workflow_text
from raftsched.workflow.taskfiles import InvalidTaskFile, diff_specs, parse_task_text
from raftsched.workflow.validate import validate_workflow
from tests.support.fsm import T0, apply, assign, create, fresh, join, result, run_of, trigger

S = 1000
M = 60 * S


# -- the maths -------------------------------------------------------------------------------------


def test_the_nth_retry_waits_the_nth_delay_and_the_last_repeats() -> None:
    delays = (2 * M, 5 * M, 15 * M)
    assert [retry.delay_ms(n, delays, None, "r/0/1") for n in range(1, 7)] == [
        2 * M,
        5 * M,
        15 * M,
        15 * M,
        15 * M,
        15 * M,
    ]


def test_backoff_doubles_from_base_and_stops_at_the_cap() -> None:
    b = RetryBackoff(10 * S, 60 * S)
    assert [retry.delay_ms(n, (), b, "k") for n in range(1, 7)] == [
        10 * S,
        20 * S,
        40 * S,
        60 * S,
        60 * S,
        60 * S,
    ]
    # Without a cap it stops at the longest retry delay, and a huge retry number is quick.
    assert retry.delay_ms(2**32, (), RetryBackoff(S), "k") == MAX_RETRY_DELAY_MS
    assert retry.delay_ms(1, (), None, "k") == 0  # no policy: the cluster's backoff applies


def _oracle(n: int, base: int, cap: int, pct: int) -> tuple[int, int]:
    """The bounds of the n-th delay, written the slow way: double n-1 times, cap, then jitter."""
    delay = base
    for _ in range(n - 1):
        delay *= 2
        if delay >= (cap or MAX_RETRY_DELAY_MS):
            break
    delay = min(delay, cap or MAX_RETRY_DELAY_MS)
    return delay, delay + delay * pct // 100


@given(
    n=st.integers(1, 80),
    base=st.integers(1, MAX_RETRY_DELAY_MS),
    cap=st.integers(0, MAX_RETRY_DELAY_MS),
    pct=st.integers(0, 100),
    key=st.text(max_size=40),
)
def test_backoff_with_jitter_stays_within_the_oracles_bounds(
    n: int, base: int, cap: int, pct: int, key: str
) -> None:
    if cap and cap < base:
        cap = base
    b = RetryBackoff(base, cap, pct)
    low, high = _oracle(n, base, cap, pct)
    got = retry.delay_ms(n, (), b, key)
    assert low <= got <= high
    assert got == retry.delay_ms(n, (), b, key)  # stable: every replica computes the same
    if pct == 0:
        assert got == low


def test_jitter_spreads_attempts_over_its_range() -> None:
    b = RetryBackoff(100 * S, 0, 50)
    got = {retry.delay_ms(1, (), b, f"run-{i}/0/1") for i in range(200)}
    assert min(got) >= 100 * S and max(got) <= 150 * S
    assert len(got) > 150  # a hash of each attempt's id, not one value for all
    assert max(got) - min(got) > 40 * S


# -- validation ------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("fields", "field", "words"),
    [
        ({"retry_delays_ms": (S,), "retry_backoff": RetryBackoff(S)}, "retry_backoff", "not both"),
        ({"retry_delays_ms": (-1,)}, "retry_delays[0]", "out of range"),
        ({"retry_delays_ms": (S,) * 17}, "retry_delays", "at most 16"),
        ({"keep_runs": -1}, "keep_runs", "out of range"),
        ({"keep_for_ms": 10**15}, "keep_for", "out of range"),
    ],
)
def test_bad_retry_and_retention_fields_name_the_field(
    fields: dict[str, object], field: str, words: str
) -> None:
    with pytest.raises(InvalidSpec) as info:
        TaskSpec("t", ManualTrigger(), command="x", **fields)  # type: ignore[arg-type]
    assert info.value.field == field and words in info.value.reason


def test_a_backoff_refuses_a_cap_below_its_base_and_a_jitter_over_100() -> None:
    with pytest.raises(InvalidSpec, match="below the base") as info:
        RetryBackoff(10 * S, S)
    assert info.value.field == "retry_backoff.cap"
    with pytest.raises(InvalidSpec) as info:
        RetryBackoff(S, 0, 101)
    assert info.value.field == "retry_backoff.jitter"
    with pytest.raises(InvalidSpec) as info:
        RetryBackoff(0)
    assert info.value.field == "retry_backoff.base"


def test_the_fields_survive_the_wire_and_the_store() -> None:
    spec = TaskSpec(
        "t",
        ManualTrigger(),
        command="x",
        retry_backoff=RetryBackoff(S, M, 20),
        retry_elsewhere=False,
        keep_runs=50,
        keep_for_ms=7 * 24 * 60 * M,
    )
    msg = codec.spec_to_pb(spec)
    assert codec.spec_from_pb(msg) == spec == codec.stored_spec_from_pb(msg)
    plain = codec.spec_to_pb(TaskSpec("t", ManualTrigger(), command="x"))
    assert not plain.HasField("retry_backoff") and not plain.retry_same_executor


# -- the ways in -----------------------------------------------------------------------------------


def test_task_files_read_delays_backoff_elsewhere_and_keeps() -> None:
    text = """\
tasks:
  - name: a
    command: x
    retry_delays: [2m, 5m, 15m]
    retry_elsewhere: false
    keep_for: 7d
  - name: b
    command: x
    retry_backoff: {base: 10s, cap: 15m, jitter: 20%}
    keep_runs: 10080
"""
    specs = {s.name: s for s, _ in parse_task_text(text, "yaml", "t.yaml").tasks}
    a, b = specs["a"], specs["b"]
    assert a.retry_delays_ms == (2 * M, 5 * M, 15 * M)
    assert (a.retry_elsewhere, a.keep_for_ms) == (False, 7 * 1440 * M)
    assert (b.retry_backoff, b.retry_elsewhere, b.keep_runs) == (
        RetryBackoff(10 * S, 15 * M, 20),
        True,
        10080,
    )


@pytest.mark.parametrize(
    ("body", "expected"),
    [
        ("    retry_delays: [2m]\n    retry_backoff: {base: 1s}\n", "tasks[0].retry_backoff"),
        ("    retry_backoff: {cap: 1m}\n", "base required"),
        ("    retry_backoff: {base: 1m, jitter: 2}\n", 'jitter: must be a percent ("20%")'),
        ("    retry_backoff: {base: 1m, cap: 1s}\n", "below the base"),
        ("    retry_backoff: {base: 1s, jiter: 1%}\n", 'unknown retry_backoff key "jiter"'),
        ("    retry_delays: [2m, soon]\n", "tasks[0].retry_delays[1]"),
        ("    retry_elsewhere: maybe\n", "must be true or false"),
        ("    keep_for: forever\n", "tasks[0].keep_for"),
    ],
)
def test_task_file_problems_name_the_key(body: str, expected: str) -> None:
    text = "tasks:\n  - name: a\n    command: x\n" + body
    with pytest.raises(InvalidTaskFile) as info:
        parse_task_text(text, "yaml", "t.yaml")
    shown = [f"{where}: {message}" for where, message in info.value.problems]
    assert any(expected in line for line in shown), shown


def test_the_apply_diff_shows_the_fields_as_a_file_spells_them() -> None:
    old = TaskSpec("t", ManualTrigger(), command="x", retry_backoff=RetryBackoff(10 * S, 15 * M, 20))
    new = TaskSpec("t", ManualTrigger(), command="x", retry_delays_ms=(2 * M, 5 * M), retry_elsewhere=False)
    changes = {c.field: (c.old, c.new) for c in diff_specs(old, new)}
    assert changes == {
        "retry_delays": ("[]", "[2m, 5m]"),
        "retry_backoff": ("{base 10s, cap 15m, jitter 20%}", "none"),
        "retry_elsewhere": ("true", "false"),
    }
    kept = dataclasses.replace(new, keep_for_ms=7 * 1440 * M, keep_runs=10)
    changes = {c.field: (c.old, c.new) for c in diff_specs(new, kept)}
    assert changes == {"keep_runs": ("0", "10"), "keep_for": ("none", "1w")}


def test_workflow_files_read_the_retry_keys_per_task_and_the_keeps_per_workflow() -> None:
    text = """\
name: w
keep_runs: 500
keep_for: 30d
tasks:
  - name: a
    command: x
    retry_delays: [1m, 2m]
    retry_elsewhere: false
  - name: b
    command: y
    retry_backoff: {base: 5s, cap: 1m, jitter: 0.1}
"""
    spec = parse_workflow_text(text, "yaml", "w.yaml")
    validate_workflow(spec)
    assert (spec.keep_runs, spec.keep_for_ms) == (500, 30 * 1440 * M)
    a, b = spec.tasks
    assert list(a.retry_delays_ms) == [M, 2 * M] and a.retry_same_executor
    assert (b.retry_backoff.base_ms, b.retry_backoff.cap_ms, b.retry_backoff.jitter_pct) == (5 * S, M, 10)
    bad = pb.WorkflowSpec()
    bad.CopyFrom(spec)
    bad.tasks[0].retry_backoff.base_ms = S
    with pytest.raises(InvalidWorkflow, match=r"tasks\[0\].retry_backoff.*not both"):
        validate_workflow(bad)


def test_cli_options_set_and_clear_the_fields() -> None:
    args = parse_args(
        ["task", "add", "t", "--manual", "--command", "x", "--retry-delays", "2m,5m,15m",
         "--no-retry-elsewhere", "--keep-runs", "10080", "--keep-for", "7d"]
    )  # fmt: skip
    spec = spec_from_args(args, lambda: T0)
    assert spec.retry_delays_ms == (2 * M, 5 * M, 15 * M) and not spec.retry_elsewhere
    assert (spec.keep_runs, spec.keep_for_ms) == (10080, 7 * 1440 * M)
    # --retry-backoff replaces the delays (a task has one or the other).
    update = parse_args(["task", "update", "t", "--retry-backoff", "10s,15m,20%", "--retry-elsewhere"])
    merged = merge_spec(spec, update, lambda: T0)
    assert merged.retry_backoff == RetryBackoff(10 * S, 15 * M, 20) and merged.retry_delays_ms == ()
    assert merged.retry_elsewhere
    cleared = merge_spec(merged, parse_args(["task", "update", "t", "--retry-backoff", ""]), lambda: T0)
    assert cleared.retry_backoff is None
    both = parse_args(["task", "update", "t", "--retry-backoff", "10s", "--retry-delays", "1m"])
    with pytest.raises(InvalidSpec, match="not both"):
        merge_spec(spec, both, lambda: T0)


def test_definitions_with_the_fields_are_stamped_with_the_retry_format() -> None:
    make = {"disabled": False, "now_ms": T0, "epoch": 1, "origin": "n1", "key": ""}
    plain = TaskSpec("p", ManualTrigger(), command="x")
    assert pb.Command.FromString(writes.create_task(plain, **make)).format == 1  # type: ignore[arg-type]
    for changed in (
        {"retry_delays_ms": (S,)},
        {"retry_backoff": RetryBackoff(S)},
        {"retry_elsewhere": False},
        {"keep_runs": 5},
        {"keep_for_ms": M},
    ):
        spec = dataclasses.replace(plain, **changed)
        data = writes.create_task(spec, **make)  # type: ignore[arg-type]
        assert pb.Command.FromString(data).format == codec.RETRY_FORMAT, changed
    wf = pb.Command(now_ms=T0, epoch=1, origin="n1")
    wf.apply_workflow.spec.name = "w"
    task = wf.apply_workflow.spec.tasks.add(name="t", command="x")
    assert codec.command_format(wf) == 1
    task.retry_delays_ms.append(S)
    assert codec.command_format(wf) == codec.RETRY_FORMAT
    del task.retry_delays_ms[:]
    wf.apply_workflow.spec.keep_for_ms = M
    assert codec.command_format(wf) == codec.RETRY_FORMAT


# -- the state machine -----------------------------------------------------------------------------


def _failing_run(spec: TaskSpec) -> tuple[list[int], list[int]]:
    """Trigger ``spec`` and fail every attempt (the leader proposing a 1 h cluster backoff):
    how long each retry waited, and the attempts' not_before in order."""
    state = fresh()
    assert apply(state, join("ex1")).ok
    assert create(state, spec).ok
    res = trigger(state, spec.name, now=T0 + S)
    run_id = res.run.run_id
    now = T0 + 2 * S
    waits = []
    for attempt in range(1, spec.max_retries + 2):
        assert apply(state, assign(now, (run_id, 0, attempt, "ex1"))).ok
        now += 500
        apply(state, result(now, run_id, attempt, "ex1", False, retry_at_ms=now + 3_600_000))
        shard = run_of(state, run_id).shards[0]
        if shard.state != pb.PENDING:
            break
        waits.append(shard.not_before_ms - now)
        now = shard.not_before_ms
    return waits, [run_of(state, run_id).state]


def test_apply_retries_on_the_tasks_delays_not_the_leaders_backoff() -> None:
    spec = TaskSpec("t", ManualTrigger(), command="x", max_retries=4, retry_delays_ms=(2 * M, 5 * M, 15 * M))
    waits, state = _failing_run(spec)
    assert waits == [2 * M, 5 * M, 15 * M, 15 * M] and state == [pb.FAILED]


def test_apply_retries_on_the_tasks_backoff_and_without_a_policy_on_the_leaders() -> None:
    spec = TaskSpec(
        "t", ManualTrigger(), command="x", max_retries=4, retry_backoff=RetryBackoff(10 * S, 50 * S)
    )
    waits, _ = _failing_run(spec)
    assert waits == [10 * S, 20 * S, 40 * S, 50 * S]
    waits, _ = _failing_run(TaskSpec("t", ManualTrigger(), command="x", max_retries=2))
    assert waits == [3_600_000, 3_600_000]  # the cluster's backoff, as the leader chose it


def test_task_and_workflow_show_name_the_retry_timing_and_retention() -> None:
    def shown(**fields: object) -> str:
        return retry_text(codec.spec_to_pb(TaskSpec("t", ManualTrigger(), command="x", **fields)))  # type: ignore[arg-type]

    assert shown() == "the cluster's backoff"
    assert shown(retry_delays_ms=(2 * M, 5 * M)) == "delays 2m, 5m (the last repeats)"
    assert (
        shown(retry_backoff=RetryBackoff(10 * S, 15 * M, 20))
        == "backoff from 10s, doubling, cap 15m, jitter 20%"
    )
    assert keep_text(0, 0) == "the cluster default"
    assert keep_text(0, 7 * 1440 * M) == "any number of runs for 7d"
    assert keep_text(50, 0) == "50 runs of any age"


def test_a_workflow_task_retries_on_the_delays_of_the_version_its_run_is_pinned_to() -> None:
    from tests.support.fsm import apply_wf, complete, start, task_run

    state = fresh()
    assert apply(state, join("x1")).ok
    spec = pb.WorkflowSpec(name="etl")
    spec.tasks.add(name="load", command="x", priority=5, max_retries=2, retry_delays_ms=[7 * S, 11 * S])
    assert apply_wf(state, spec).ok
    wr = start(state, now=T0, logical=T0)
    # A new version with other delays: the running workflow run keeps its own.
    spec.tasks[0].retry_delays_ms[:] = [M]
    assert apply_wf(state, spec, now=T0 + 1).ok
    now = T0 + 2 * S
    for wait in (7 * S, 11 * S):
        assert complete(state, wr.run_id, "load", ok=False, now=now, retry_at_ms=now + 3_600_000).ok
        shard = task_run(state, wr.run_id, "load").shards[0]
        assert shard.state == pb.PENDING and shard.not_before_ms == now + wait
        now = shard.not_before_ms
