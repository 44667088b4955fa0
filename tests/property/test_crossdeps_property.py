"""Cross-workflow dependencies against dumb oracles: which upstream run (logical time + offset)
decides a waiting edge, in any interleaving of starts and finishes; and which applies a
cross-workflow cycle check refuses (reachability by brute force)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from raftsched import codec
from raftsched.fsm.state import SchedulerState
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import T0, apply, apply_wf, command, complete, fresh, join

HOUR = 3_600_000
UP, DOWN = "up", "down"

# An operation: ("down", k) starts a downstream run at logical T0 + k hours; ("up", k, ok) starts
# an upstream run at T0 + k hours and finishes it at once, succeeding or failing; ("up_open", k)
# starts one left running; ("finish", ok) finishes the oldest upstream run left running.
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("down"), st.integers(0, 4)),
        st.tuples(st.just("up"), st.integers(-2, 4), st.booleans()),
        st.tuples(st.just("up_open"), st.integers(-2, 4)),
        st.tuples(st.just("finish"), st.booleans()),
    ),
    max_size=14,
)


def _start(state: SchedulerState, workflow: str, logical: int) -> str:
    cmd = command(T0)
    cmd.start_workflow_run.workflow = workflow
    cmd.start_workflow_run.logical_ms = logical
    res = apply(state, codec.encode_command(cmd))
    assert res.ok, res.message
    return res.workflow_run.run_id


@settings(max_examples=60, deadline=None)
@given(offset_h=st.sampled_from([0, -1, -2]), condition=st.sampled_from([1, 2, 3]), ops=OPS)
def test_edges_are_decided_by_the_upstream_run_of_the_offset_logical_time(
    offset_h: int, condition: int, ops: list[tuple[object, ...]]
) -> None:
    state = fresh()
    apply(state, join("x1", slots=64))
    up = pb.WorkflowSpec(name=UP, overlap=pb.OVERLAP_ALLOW)
    up.tasks.add(name="load", command="load")
    assert apply_wf(state, up).ok
    down = pb.WorkflowSpec(name=DOWN, overlap=pb.OVERLAP_ALLOW)
    down.tasks.add(
        name="t",
        command="t",
        depends_on=[pb.Dependency(workflow=UP, logical_offset_ms=offset_h * HOUR, condition=condition)],  # type: ignore[arg-type]
    )
    assert apply_wf(state, down).ok
    meets = {1: {True}, 2: {False}, 3: {True, False}}[condition]

    finished: dict[int, list[bool]] = {}  # upstream logical -> outcomes in finishing order
    open_runs: list[tuple[str, int]] = []
    expected: dict[str, str] = {}  # downstream run -> WAITING / RUNNING / SKIPPED
    waiting_for: dict[str, int] = {}

    def upstream_finished(logical: int, ok: bool) -> None:
        finished.setdefault(logical, []).append(ok)
        for run_id, want in list(waiting_for.items()):
            if want == logical:
                expected[run_id] = "RUNNING" if ok in meets else "SKIPPED"
                del waiting_for[run_id]

    for op in ops:
        if op[0] == "down":
            logical = T0 + int(op[1]) * HOUR  # type: ignore[call-overload]
            run_id = _start(state, DOWN, logical)
            want = logical + offset_h * HOUR
            outcomes = finished.get(want, [])
            if any(ok in meets for ok in outcomes):
                expected[run_id] = "RUNNING"
            elif outcomes:
                expected[run_id] = "SKIPPED"
            else:
                expected[run_id] = "WAITING"
                waiting_for[run_id] = want
        elif op[0] in ("up", "up_open"):
            logical = T0 + int(op[1]) * HOUR  # type: ignore[call-overload]
            run_id = _start(state, UP, logical)
            if op[0] == "up":
                assert complete(state, run_id, "load", ok=bool(op[2])).ok
                upstream_finished(logical, bool(op[2]))
            else:
                open_runs.append((run_id, logical))
        elif open_runs:
            run_id, logical = open_runs.pop(0)
            assert complete(state, run_id, "load", ok=bool(op[1])).ok
            upstream_finished(logical, bool(op[1]))
        for run_id, want_state in expected.items():
            wr = state.get_workflow_run(run_id)
            assert wr is not None
            got = pb.WorkflowTaskState.Name(wr.tasks[0].state).removeprefix("TASK_")
            assert got == want_state, (run_id, op, got, want_state)
    assert sorted(state.wf.deps.by_run) == sorted(waiting_for)


NAMES = [f"w{i}" for i in range(5)]
APPLIES = st.lists(
    st.tuples(
        st.sampled_from(NAMES),
        st.lists(st.tuples(st.sampled_from(NAMES), st.booleans()), max_size=3, unique_by=lambda e: e[0]),
    ),
    max_size=12,
)


def _reaches(graph: dict[str, set[str]], src: str, dst: str) -> bool:
    """Whether ``dst`` is reachable from ``src`` following upstream -> downstream edges."""
    seen, todo = {src}, [src]
    while todo:
        node = todo.pop()
        for nxt in sorted(n for n, ups in graph.items() if node in ups):
            if nxt == dst:
                return True
            if nxt not in seen:
                seen.add(nxt)
                todo.append(nxt)
    return False


@settings(max_examples=80, deadline=None)
@given(applies=APPLIES)
def test_cross_workflow_cycles_of_same_time_edges_are_refused(
    applies: list[tuple[str, list[tuple[str, bool]]]],
) -> None:
    state = fresh()
    existing: dict[str, set[str]] = {}  # workflow -> upstreams through same-time edges
    for name in NAMES[:3]:  # some exist from the start (others are unknown until applied)
        assert apply_wf(
            state, pb.WorkflowSpec(name=name, tasks=[pb.WorkflowTaskSpec(name="t", command="t")])
        ).ok
        existing[name] = set()
    for name, deps in applies:
        spec = pb.WorkflowSpec(name=name)
        task = spec.tasks.add(name="t", command="t")
        for upstream, earlier in deps:
            task.depends_on.add(workflow=upstream, logical_offset_ms=-HOUR if earlier else 0)
        res = apply_wf(state, spec)
        same_time = {u for u, earlier in deps if not earlier}
        if any(u == name for u, _ in deps):
            assert not res.ok and "is this workflow" in res.message
            continue
        if any(u not in existing for u, _ in deps):
            assert not res.ok and "apply it first" in res.message, res.message
            continue
        trial = {**existing, name: same_time}
        # A cycle through ``name``: one of its same-time upstreams is reachable from it.
        cyclic = any(u == name or _reaches(trial, name, u) for u in same_time)
        if cyclic:
            assert not res.ok and "cross-workflow cycle" in res.message, res.message
            path = res.message.split("cycle: ", 1)[1].split(" (", 1)[0].split(" → ")
            assert path[0] == path[-1] == name
            for a, b in itertools.pairwise(path):
                assert a in trial[b], (a, b, path)  # each step is an edge: b depends on a
        else:
            assert res.ok, res.message
            existing[name] = same_time
