"""Random DAGs and random operation sequences against a naive oracle of the run state machine.

After every step: waiting counters equal a naive recount; a task enters READY only when its rule
is satisfied by the current upstream states (the rerun target excepted); every SKIPPED task is
justified by the current states of its upstream, and its reason names a dependency that justifies
it; the returned READY list is exactly the tasks that entered READY, in topological order; the run
state equals a full derivation. A refused operation changes nothing. Every run can be driven to a
finished state with no task stuck WAITING, and replaying the same operations on a fresh message
gives byte-identical results (the per-run scan hint never changes a result).
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from hypothesis import given, settings
from hypothesis import strategies as st

from raftsched.errors import Conflict
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow import run as wr
from raftsched.workflow.dag import Dag, compile_dag, downstream_closure

CONDITIONS = st.sampled_from([pb.CONDITION_UNSPECIFIED, pb.ON_SUCCESS, pb.ON_FAILURE, pb.ON_DONE])
RULES = st.sampled_from([pb.RULE_UNSPECIFIED, pb.RULE_ALL, pb.RULE_ANY])
OUTCOMES = st.sampled_from([pb.TASK_SUCCESS, pb.TASK_SUCCESS, pb.TASK_FAILED, pb.TASK_TIMEOUT])
NEEDS = {"success": pb.ON_SUCCESS, "failure": pb.ON_FAILURE, "done": pb.ON_DONE}
# The oracle's own reading of the conditions (not the module's tables).
MEETS: dict[int, set[int]] = {
    pb.ON_SUCCESS: {pb.TASK_SUCCESS},
    pb.ON_FAILURE: {pb.TASK_FAILED, pb.TASK_TIMEOUT},
    pb.ON_DONE: {pb.TASK_SUCCESS, pb.TASK_FAILED, pb.TASK_TIMEOUT, pb.TASK_SKIPPED},
}
FINAL: set[int] = {pb.TASK_SUCCESS, pb.TASK_FAILED, pb.TASK_TIMEOUT, pb.TASK_SKIPPED, pb.TASK_KILLED}
SKIP_ALL = re.compile(r'upstream "(?P<dep>[^"]+)" finished (?P<state>[A-Z]+) \(needs (?P<needs>\w+)\)$')


@st.composite
def dags(draw: st.DrawFn, max_tasks: int = 30) -> Dag:
    """An acyclic spec (hidden random rank order, edges from lower to higher rank), compiled."""
    n = draw(st.integers(min_value=1, max_value=max_tasks))
    rank = draw(st.permutations(range(n)))
    spec = pb.WorkflowSpec(name="wf")
    for i in range(n):
        task = spec.tasks.add(name=f"t{i}", command="true", trigger_rule=draw(RULES))
        lower = [j for j in range(n) if rank[j] < rank[i]]
        if lower:
            for j in draw(st.lists(st.sampled_from(lower), unique=True, max_size=4)):
                task.depends_on.add(task=f"t{j}", condition=draw(CONDITIONS))
    return compile_dag(spec)


@dataclass(frozen=True)
class Op:
    kind: str  # run | finish | rerun | mark | kill
    idx: int = 0
    outcome: int = 0
    hint: int | None = None  # planted as the run's scan hint first: any value must give the same result


def terminal(state: int) -> bool:
    return state in FINAL


def meets(condition: int, state: int) -> bool:
    return state in MEETS[condition]


def rule_satisfied(dag: Dag, run: pb.WorkflowRun, i: int) -> bool:
    """The oracle for READY: RULE_ALL every dependency terminal and met; RULE_ANY one met."""
    edges = dag.upstream[i]
    if not edges:
        return True
    met = [terminal(run.tasks[j].state) and meets(c, run.tasks[j].state) for j, c in edges]
    return any(met) if dag.rule[i] == pb.RULE_ANY else all(met)


def skip_justified(dag: Dag, run: pb.WorkflowRun, i: int) -> bool:
    """The oracle for SKIPPED, from the current upstream states and the task's reason."""
    edges = dag.upstream[i]
    reason = run.tasks[i].reason
    if dag.rule[i] == pb.RULE_ANY:
        all_done = all(terminal(run.tasks[j].state) for j, _ in edges)
        none_met = not any(meets(c, run.tasks[j].state) for j, c in edges)
        return bool(edges) and all_done and none_met and "no upstream met its condition" in reason
    m = SKIP_ALL.search(reason)
    if m is None:
        return False
    j = dag.index[m["dep"]]
    conditions = [c for k, c in edges if k == j]
    state = run.tasks[j].state
    return (
        bool(conditions)
        and wr.state_name(state) == m["state"]
        and terminal(state)
        and NEEDS[m["needs"]] in conditions
        and not meets(NEEDS[m["needs"]], state)
    )


def check(dag: Dag, run: pb.WorkflowRun) -> None:
    oracle = wr.recount_waiting(dag, run)
    for i, task in enumerate(run.tasks):
        name = dag.names[i]
        if task.state == pb.TASK_WAITING:
            assert task.waiting == oracle[i], (name, task.waiting, oracle[i])
            # not stuck: RULE_ALL waits only while no terminal dependency failed its condition,
            # RULE_ANY only while none met it, and something is still pending
            assert oracle[i] > 0, name
            done = [(j, c) for j, c in dag.upstream[i] if terminal(run.tasks[j].state)]
            met = [meets(c, run.tasks[j].state) for j, c in done]
            assert (not any(met)) if dag.rule[i] == pb.RULE_ANY else all(met), name
        else:
            assert task.waiting == 0, name
        if task.state == pb.TASK_SKIPPED:
            assert skip_justified(dag, run, i), (name, task.reason)
        assert task.timeline and task.timeline[-1].state == task.state, name
    assert run.state == wr.derive_state(run)
    assert (run.finished_ms == 0) == (run.state == pb.WORKFLOW_RUNNING)


def apply(dag: Dag, run: pb.WorkflowRun, op: Op, now: int, forced: set[int]) -> None:
    """Apply ``op``, checking its contract against the oracle; ``forced``: rerun targets still READY."""
    if op.hint is not None:
        wr._hints[id(run)] = op.hint
    before = [t.state for t in run.tasks]
    snapshot = run.SerializeToString()
    ready: list[int] = []
    refused = False
    try:
        if op.kind == "run":
            assert before[op.idx] == pb.TASK_READY
            assert op.idx in forced or rule_satisfied(dag, run, op.idx), dag.names[op.idx]
            wr.mark_running(run, op.idx, f"r{now}", now)
        elif op.kind == "finish":
            ready = wr.finish(dag, run, op.idx, op.outcome, now, "result")
        elif op.kind == "rerun":
            closure = downstream_closure(dag, op.idx)
            expect_refusal = any(before[i] == pb.TASK_RUNNING for i in closure)
            try:
                ready = wr.rerun(dag, run, op.idx, now, "again")
            except Conflict:
                assert expect_refusal
                refused = True
            else:
                assert not expect_refusal
                assert run.tasks[op.idx].state == pb.TASK_READY
                forced.add(op.idx)
        elif op.kind == "mark":
            expect_refusal = (
                before[op.idx] in (pb.TASK_RUNNING, pb.TASK_SUCCESS) or run.state == pb.WORKFLOW_KILLED
            )
            try:
                ready = wr.mark_success(dag, run, op.idx, now, "by hand")
            except Conflict:
                assert expect_refusal
                refused = True
            else:
                assert not expect_refusal
        elif op.kind == "kill":
            was_running = run.state == pb.WORKFLOW_RUNNING
            try:
                killed = wr.kill(run, now, "stop")
            except Conflict:
                assert not was_running
                refused = True
            else:
                assert killed == [i for i, s in enumerate(before) if s == pb.TASK_RUNNING]
                assert all(terminal(t.state) for t in run.tasks)
                assert run.state == pb.WORKFLOW_KILLED
    finally:
        if refused:
            assert run.SerializeToString() == snapshot, "a refused operation changed the run"
    after = [t.state for t in run.tasks]
    entered = [i for i in range(len(after)) if after[i] == pb.TASK_READY and before[i] != pb.TASK_READY]
    pos = {i: r for r, i in enumerate(dag.topo)}
    assert ready == sorted(entered, key=pos.__getitem__), (op, ready, entered)
    forced &= {i for i, s in enumerate(after) if s == pb.TASK_READY}
    for i in entered:
        if i not in forced:
            assert rule_satisfied(dag, run, i), (op, dag.names[i], run.tasks[i].reason)
    check(dag, run)


def choose(data: st.DataObject, dag: Dag, run: pb.WorkflowRun, chaos: bool) -> Op | None:
    ready = [i for i, t in enumerate(run.tasks) if t.state == pb.TASK_READY]
    running = [i for i, t in enumerate(run.tasks) if t.state == pb.TASK_RUNNING]
    kinds = (["run"] if ready else []) + (["finish"] if running else [])
    if chaos:
        kinds += ["rerun", "mark", "kill"]
    if not kinds:
        return None
    weights = {"run": 6, "finish": 6, "rerun": 1, "mark": 1, "kill": 1}
    kind = data.draw(st.sampled_from([k for k in kinds for _ in range(weights[k])]))
    hint = data.draw(st.none() | st.integers(0, len(dag.names)))
    if kind == "run":
        return Op("run", data.draw(st.sampled_from(ready)), hint=hint)
    if kind == "finish":
        return Op("finish", data.draw(st.sampled_from(running)), data.draw(OUTCOMES), hint=hint)
    if kind == "kill":
        return Op("kill", hint=hint)
    return Op(kind, data.draw(st.integers(0, len(dag.names) - 1)), hint=hint)


@settings(max_examples=300, deadline=None)
@given(dag=dags(), data=st.data())
def test_random_runs_keep_the_invariants(dag: Dag, data: st.DataObject) -> None:
    run = pb.WorkflowRun(run_id="wf@0")
    forced: set[int] = set()
    ready = wr.start(dag, run, 0)
    assert ready == [i for i in dag.topo if not dag.upstream[i]]
    check(dag, run)
    ops: list[Op] = []
    now = 0
    chaos_steps = data.draw(st.integers(0, 40))
    for step in range(chaos_steps + 4 * len(dag.names) + 10):
        op = choose(data, dag, run, chaos=step < chaos_steps)
        if op is None:
            break
        now += 1
        apply(dag, run, op, now, forced)
        ops.append(op)
    # Driven to the end: nothing READY or RUNNING is left, so nothing may be WAITING either.
    while (op := choose(data, dag, run, chaos=False)) is not None:
        now += 1
        apply(dag, run, op, now, forced)
        ops.append(op)
    assert all(terminal(t.state) for t in run.tasks), [wr.state_name(t.state) for t in run.tasks]
    assert run.state != pb.WORKFLOW_RUNNING

    replay = pb.WorkflowRun(run_id="wf@0")
    wr.start(dag, replay, 0)
    for t, op in enumerate(ops, start=1):
        try:
            if op.kind == "run":
                wr.mark_running(replay, op.idx, f"r{t}", t)
            elif op.kind == "finish":
                wr.finish(dag, replay, op.idx, op.outcome, t, "result")
            elif op.kind == "rerun":
                wr.rerun(dag, replay, op.idx, t, "again")
            elif op.kind == "mark":
                wr.mark_success(dag, replay, op.idx, t, "by hand")
            else:
                wr.kill(replay, t, "stop")
        except Conflict:
            pass
    assert replay.SerializeToString() == run.SerializeToString()
