"""Per-task and per-workflow retention (issue 29 §5): ``keep_runs`` and ``keep_for`` override the
cluster's ``Retention`` for one task's runs and fire records, or one workflow's runs and its task
runs; pruning stays in apply (leader time), so replicas agree byte for byte."""

from __future__ import annotations

from raftsched.fsm import keys
from raftsched.fsm.records import AGE_PRUNE_EVERY, PRUNE_BATCH, Retention, prune_phase
from raftsched.fsm.state import SchedulerState
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import (
    T0,
    S,
    apply,
    apply_wf,
    complete,
    create,
    fires_of,
    fresh,
    join,
    record,
    report,
    runs_of,
    start,
    tick,
)

EVERY = CronTrigger("* * * * * *")
CLUSTER = Retention(keep_count=3, keep_ms=10_000 * S)


def _finish(state: SchedulerState, task: str, n: int) -> int:
    """``n`` per-second fires of ``task``, each run finished half a second later; the most
    finished runs it kept at any time."""
    most = 0
    for i in range(1, n + 1):
        apply(state, tick(task, 1, T0 + i * S))
        apply(state, report(T0 + i * S + 500, (f"{task}@{T0 + i * S}", 0, 1, True)))
        most = max(most, record(state, task).kept_runs)
    return most


def _two(*specs: TaskSpec) -> tuple[SchedulerState, SchedulerState]:
    out = []
    for _ in range(2):
        state = fresh(CLUSTER)
        for spec in specs:
            assert create(state, spec).ok
        out.append(state)
    return out[0], out[1]


def test_keep_runs_overrides_the_cluster_count_for_that_task_only() -> None:
    # Each keeps between its count and PRUNE_BATCH (less its phase) more: "own" at most
    # 5 + PRUNE_BATCH - phase, then down to 5; "default" the cluster's 3 + PRUNE_BATCH - phase,
    # then down to 3.
    own = TaskSpec("own", EVERY, command="x", overlap=Overlap.ALLOW, keep_runs=5)
    default = TaskSpec("default", EVERY, command="x", overlap=Overlap.ALLOW)
    a, b = _two(own, default)
    own_most = 5 + PRUNE_BATCH - prune_phase("own")
    default_most = 3 + PRUNE_BATCH - prune_phase("default")
    n = own_most + 1
    since = n - (default_most + 1)  # "default" prunes this many finishes before "own"
    assert 0 < since < PRUNE_BATCH - prune_phase("default")  # and only once
    for state in (a, b):
        most_own = _finish(state, "own", n)
        most_default = _finish(state, "default", n)
        assert (most_own, most_default) == (own_most, default_most)
    assert a.snapshot() == b.snapshot()
    assert [r.nominal_ms for r in runs_of(a, "own")] == [T0 + i * S for i in range(n - 4, n + 1)]
    assert len(fires_of(a, "own")) == 5 and record(a, "own").kept_runs == 5
    # "default" went down to 3 at its finish default_most + 1, and kept those since.
    assert len(runs_of(a, "default")) == 3 + since and len(fires_of(a, "default")) == 3 + since


def test_keep_for_alone_keeps_that_age_whatever_the_count_and_keeps_up() -> None:
    spec = TaskSpec("t", EVERY, command="x", overlap=Overlap.ALLOW, keep_for_ms=60 * S)
    a, b = _two(spec)
    most = _finish(a, "t", 400)
    _finish(b, "t", 400)
    assert a.digest() == b.digest()
    window = 60 + 1  # runs finished in [now - 60 s, now]
    # Well past the cluster's count of 3, and never more than one age check behind.
    assert window <= most <= window + AGE_PRUNE_EVERY + 1
    runs = runs_of(a, "t")
    assert len(runs) == record(a, "t").kept_runs
    assert runs[0].finished_ms >= T0 + 400 * S - 60 * S - AGE_PRUNE_EVERY * S
    fires = fires_of(a, "t")
    assert window <= len(fires) <= window + 64 + CLUSTER.prune_step


def test_a_workflows_keeps_apply_to_its_runs_and_its_task_runs() -> None:
    state = fresh(CLUSTER)
    assert apply(state, join("x1")).ok
    spec = pb.WorkflowSpec(name="etl", keep_runs=4)
    spec.tasks.add(name="only", command="x", priority=5)
    assert apply_wf(state, spec).ok
    runs = 4 + PRUNE_BATCH - prune_phase("etl#only") + 3
    for i in range(runs):
        now = T0 + i * 60 * S
        wr = start(state, now=now, logical=now)
        assert complete(state, wr.run_id, "only", now=now + S).ok
    lo, hi = keys.per_task_prefix(keys.WORKFLOW_RUN, "etl"), keys.per_task_end(keys.WORKFLOW_RUN, "etl")
    assert len(list(state.store.scan(lo, hi))) == 4  # not the cluster's 3
    # The task runs are pruned in batches: down to 4 at the 4 + PRUNE_BATCH - phase + 1-th, then
    # 2 more.
    assert len(runs_of(state, "etl#only")) == 6


def test_a_staged_workflow_with_keeps_out_of_range_is_refused_at_its_first_chunk() -> None:
    """Apply builds the internal tasks (with the workflow's keeps) while it stages each chunk:
    a header out of range is refused there, before anything changes (here: the unfinished
    stage a new first chunk replaces), naming the field."""
    from raftsched import codec
    from raftsched.leader import writes
    from tests.support.fsm import domain

    spec = pb.WorkflowSpec(name="big", keep_for_ms=60 * S)
    for i in range(writes.STAGE_CHUNK_TASKS + 1):
        spec.tasks.add(name=f"t{i:05d}", command="x")
    commands = writes.staged_workflow(spec, key="", now_ms=T0, epoch=1, origin="n1")
    first = codec.decode_command(commands[0])
    assert first.format == codec.RETRY_FORMAT
    first.stage_workflow_tasks.header.keep_for_ms = 10**15  # past what the leader lets through
    state = fresh()
    assert apply(state, commands[0]).ok  # an earlier stage, unfinished: a new chunk 0 drops it
    before = domain(state)
    res = apply(state, codec.encode_command(first))
    assert not res.ok and res.code == "invalid_argument" and "keep_for" in res.message
    assert domain(state) == before
