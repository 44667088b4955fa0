"""The pure workflow run state machine: propagation, skips, rules, rerun, kill, mark_success."""

from __future__ import annotations

import pytest

from raftsched.errors import Conflict
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow import run as wr
from raftsched.workflow.dag import Dag, compile_dag

Dep = str | tuple[str, int]


def build(*tasks: tuple[str, list[Dep]], rules: dict[str, int] | None = None) -> Dag:
    spec = pb.WorkflowSpec(name="wf")
    for name, deps in tasks:
        task = spec.tasks.add(name=name, command="true", trigger_rule=(rules or {}).get(name, 0))
        for dep in deps:
            if isinstance(dep, tuple):
                task.depends_on.add(task=dep[0], condition=dep[1])
            else:
                task.depends_on.add(task=dep)
    return compile_dag(spec)


ETL = build(("extract", []), ("validate", ["extract"]), ("load", ["extract", "validate"]))


def states(dag: Dag, run: pb.WorkflowRun) -> dict[str, str]:
    return {name: wr.state_name(run.tasks[i].state) for i, name in enumerate(dag.names)}


def new_run(dag: Dag, now: int = 1_000) -> tuple[pb.WorkflowRun, list[int]]:
    run = pb.WorkflowRun(run_id="wf@0")
    return run, wr.start(dag, run, now)


def go(dag: Dag, run: pb.WorkflowRun, name: str, outcome: int, now: int, reason: str = "") -> list[str]:
    """Start task ``name`` (must be READY) and finish it; returns the names made READY."""
    i = dag.index[name]
    wr.mark_running(run, i, f"run-{name}-{now}", now)
    return [dag.names[j] for j in wr.finish(dag, run, i, outcome, now + 1, reason)]


def check_counters(dag: Dag, run: pb.WorkflowRun) -> None:
    oracle = wr.recount_waiting(dag, run)
    for i, task in enumerate(run.tasks):
        if task.state == pb.TASK_WAITING:
            assert task.waiting == oracle[i] > 0, dag.names[i]
        else:
            assert task.waiting == 0, dag.names[i]


def test_happy_path_extract_validate_load() -> None:
    run, ready = new_run(ETL)
    assert ready == [0]
    assert run.state == pb.WORKFLOW_RUNNING
    assert states(ETL, run) == {"extract": "READY", "validate": "WAITING", "load": "WAITING"}
    assert [t.waiting for t in run.tasks] == [0, 1, 2]
    assert go(ETL, run, "extract", pb.TASK_SUCCESS, 2_000) == ["validate"]
    assert run.tasks[2].waiting == 1
    check_counters(ETL, run)
    assert go(ETL, run, "validate", pb.TASK_SUCCESS, 3_000) == ["load"]
    assert go(ETL, run, "load", pb.TASK_SUCCESS, 4_000) == []
    assert run.state == pb.WORKFLOW_SUCCESS
    assert run.finished_ms == 4_001
    assert wr.derive_state(run) == pb.WORKFLOW_SUCCESS
    load = run.tasks[2]
    assert load.tries == 1 and load.run_id == "run-load-4000"
    assert [(wr.state_name(e.state), e.at_ms) for e in load.timeline] == [
        ("WAITING", 1_000),
        ("READY", 3_001),
        ("RUNNING", 4_000),
        ("SUCCESS", 4_001),
    ]


def test_failed_validate_skips_load_with_reason_and_fails_the_run() -> None:
    run, _ = new_run(ETL)
    go(ETL, run, "extract", pb.TASK_SUCCESS, 2_000)
    assert go(ETL, run, "validate", pb.TASK_FAILED, 3_000, "exit code 1") == []
    load = run.tasks[2]
    assert load.state == pb.TASK_SKIPPED
    assert load.reason == 'upstream "validate" finished FAILED (needs success)'
    assert load.timeline[-1].reason == load.reason and load.timeline[-1].at_ms == 3_001
    assert run.tasks[1].reason == "exit code 1"
    assert run.state == pb.WORKFLOW_FAILED and run.finished_ms == 3_001


def test_skip_propagates_down_a_chain() -> None:
    dag = build(("a", []), ("b", ["a"]), ("c", ["b"]), ("d", [("c", pb.ON_DONE)]))
    run, _ = new_run(dag)
    assert go(dag, run, "a", pb.TASK_TIMEOUT, 10) == ["d"]  # b, c skipped; d runs on "done"
    assert states(dag, run) == {"a": "TIMEOUT", "b": "SKIPPED", "c": "SKIPPED", "d": "READY"}
    assert run.tasks[2].reason == 'upstream "b" finished SKIPPED (needs success)'
    go(dag, run, "d", pb.TASK_SUCCESS, 20)
    assert run.state == pb.WORKFLOW_FAILED


def test_on_failure_alert_runs_only_on_failure() -> None:
    dag = build(("job", []), ("alert", [("job", pb.ON_FAILURE)]))
    run, _ = new_run(dag)
    assert go(dag, run, "job", pb.TASK_SUCCESS, 10) == []
    assert states(dag, run) == {"job": "SUCCESS", "alert": "SKIPPED"}
    assert run.tasks[1].reason == 'upstream "job" finished SUCCESS (needs failure)'
    assert run.state == pb.WORKFLOW_SUCCESS  # a skipped alert does not fail the run

    run, _ = new_run(dag)
    assert go(dag, run, "job", pb.TASK_FAILED, 10) == ["alert"]
    go(dag, run, "alert", pb.TASK_SUCCESS, 20)
    assert run.state == pb.WORKFLOW_FAILED  # the job still failed

    run, _ = new_run(dag)
    assert go(dag, run, "job", pb.TASK_TIMEOUT, 10) == ["alert"]  # a timeout is a failure


def test_on_done_cleanup_runs_after_failure() -> None:
    dag = build(("work", []), ("cleanup", [("work", pb.ON_DONE)]))
    run, _ = new_run(dag)
    assert go(dag, run, "work", pb.TASK_FAILED, 10) == ["cleanup"]
    go(dag, run, "cleanup", pb.TASK_SUCCESS, 20)
    assert states(dag, run) == {"work": "FAILED", "cleanup": "SUCCESS"}
    assert run.state == pb.WORKFLOW_FAILED


def test_rule_any_ready_on_first_met_and_skipped_when_none_met() -> None:
    dag = build(("a", []), ("b", []), ("c", ["a", "b"]), rules={"c": pb.RULE_ANY})
    run, ready = new_run(dag)
    assert ready == [0, 1]
    assert go(dag, run, "a", pb.TASK_SUCCESS, 10) == ["c"]  # ready before b finished
    assert run.tasks[2].reason == 'upstream "a" finished SUCCESS (any; needs success)'
    assert go(dag, run, "b", pb.TASK_FAILED, 20) == []  # c already decided: untouched
    assert run.tasks[2].state == pb.TASK_READY
    go(dag, run, "c", pb.TASK_SUCCESS, 30)
    assert run.state == pb.WORKFLOW_FAILED

    run, _ = new_run(dag)
    assert go(dag, run, "a", pb.TASK_FAILED, 10) == []
    assert run.tasks[2].state == pb.TASK_WAITING and run.tasks[2].waiting == 1
    assert go(dag, run, "b", pb.TASK_FAILED, 20) == []
    assert run.tasks[2].state == pb.TASK_SKIPPED
    assert run.tasks[2].reason == (
        'no upstream met its condition ("a" FAILED needs success, "b" FAILED needs success)'
    )


def test_rerun_from_validate_completes_the_run_keeping_extract() -> None:
    run, _ = new_run(ETL)
    go(ETL, run, "extract", pb.TASK_SUCCESS, 2_000)
    go(ETL, run, "validate", pb.TASK_FAILED, 3_000)
    assert run.state == pb.WORKFLOW_FAILED
    extract_timeline = list(run.tasks[0].timeline)

    assert wr.rerun(ETL, run, 1, 5_000, "data fixed") == [1]
    assert run.state == pb.WORKFLOW_RUNNING and run.finished_ms == 0
    assert states(ETL, run) == {"extract": "SUCCESS", "validate": "READY", "load": "WAITING"}
    assert run.tasks[1].reason == "rerun: data fixed"
    assert run.tasks[2].waiting == 1  # extract counts at once: only validate is awaited
    assert list(run.tasks[0].timeline) == extract_timeline
    check_counters(ETL, run)

    assert go(ETL, run, "validate", pb.TASK_SUCCESS, 6_000) == ["load"]
    assert run.tasks[1].tries == 2
    go(ETL, run, "load", pb.TASK_SUCCESS, 7_000)
    assert run.state == pb.WORKFLOW_SUCCESS and run.finished_ms == 7_001
    assert [wr.state_name(e.state) for e in run.tasks[2].timeline] == [
        "WAITING",
        "SKIPPED",
        "WAITING",
        "READY",
        "RUNNING",
        "SUCCESS",
    ]


def test_rerun_decides_descendants_from_upstream_outside_the_closure() -> None:
    # d needs b's success and c's success; c failed and is not rerun, so d is skipped at once.
    dag = build(("a", []), ("b", ["a"]), ("c", []), ("d", ["b", "c"]), ("e", [("c", pb.ON_FAILURE)]))
    run, _ = new_run(dag)
    go(dag, run, "a", pb.TASK_SUCCESS, 10)
    go(dag, run, "c", pb.TASK_FAILED, 10)
    go(dag, run, "b", pb.TASK_FAILED, 20)
    assert wr.rerun(dag, run, dag.index["b"], 100) == [dag.index["b"]]
    assert run.tasks[dag.index["d"]].state == pb.TASK_SKIPPED
    assert run.tasks[dag.index["d"]].reason.endswith('upstream "c" finished FAILED (needs success)')


def test_rerun_refused_while_the_closure_is_running() -> None:
    run, _ = new_run(ETL)
    go(ETL, run, "extract", pb.TASK_SUCCESS, 10)
    wr.mark_running(run, 1, "r", 20)
    before = run.SerializeToString()
    with pytest.raises(Conflict, match='"validate" still RUNNING'):
        wr.rerun(ETL, run, 0, 30)
    assert run.SerializeToString() == before  # refused: nothing changed


def test_kill_then_rerun() -> None:
    dag = build(("a", []), ("b", []), ("c", ["a"]))
    run, _ = new_run(dag)
    wr.mark_running(run, 0, "ra", 10)
    assert wr.kill(run, 20, "operator") == [0]
    assert states(dag, run) == {"a": "KILLED", "b": "KILLED", "c": "KILLED"}
    assert run.tasks[2].reason == "operator"
    assert run.state == pb.WORKFLOW_KILLED and run.finished_ms == 20
    with pytest.raises(Conflict, match="not RUNNING"):
        wr.finish(dag, run, 0, pb.TASK_SUCCESS, 30)  # the late result of the cancelled task run
    with pytest.raises(Conflict, match="already KILLED"):
        wr.kill(run, 30, "again")
    with pytest.raises(Conflict, match="killed"):
        wr.mark_success(dag, run, 0, 30, "by hand")

    assert wr.rerun(dag, run, 0, 40) == [0]  # a and c again; b stays KILLED
    assert states(dag, run) == {"a": "READY", "b": "KILLED", "c": "WAITING"}
    assert run.state == pb.WORKFLOW_RUNNING
    go(dag, run, "a", pb.TASK_SUCCESS, 50)
    go(dag, run, "c", pb.TASK_SUCCESS, 60)
    assert run.state == pb.WORKFLOW_KILLED  # b's killed work was never redone
    wr.rerun(dag, run, 1, 70)
    go(dag, run, "b", pb.TASK_SUCCESS, 80)
    assert run.state == pb.WORKFLOW_SUCCESS


def test_mark_success_of_a_failed_task_revives_what_it_skipped() -> None:
    dag = build(
        ("extract", []),
        ("validate", ["extract"]),
        ("load", ["validate"]),
        ("alert", [("validate", pb.ON_FAILURE)]),
        ("report", ["load"]),
    )
    run, _ = new_run(dag)
    go(dag, run, "extract", pb.TASK_SUCCESS, 10)
    assert go(dag, run, "validate", pb.TASK_FAILED, 20) == ["alert"]
    assert states(dag, run)["load"] == "SKIPPED" and states(dag, run)["report"] == "SKIPPED"
    assert run.state == pb.WORKFLOW_RUNNING  # alert is READY

    assert wr.mark_success(dag, run, dag.index["validate"], 30, "checked by hand") == [dag.index["load"]]
    assert states(dag, run) == {
        "extract": "SUCCESS",
        "validate": "SUCCESS",
        "load": "READY",
        "alert": "SKIPPED",  # was READY on the failure; the failure is gone
        "report": "WAITING",
    }
    assert run.tasks[dag.index["validate"]].reason == "marked succeeded by hand: checked by hand"
    assert run.tasks[dag.index["alert"]].reason.endswith('"validate" finished SUCCESS (needs failure)')
    check_counters(dag, run)
    go(dag, run, "load", pb.TASK_SUCCESS, 40)
    go(dag, run, "report", pb.TASK_SUCCESS, 50)
    assert run.state == pb.WORKFLOW_SUCCESS


def test_mark_success_resumes_a_failed_run_and_keeps_what_ran() -> None:
    dag = build(("job", []), ("alert", [("job", pb.ON_FAILURE)]), ("next", ["job"]))
    run, _ = new_run(dag)
    go(dag, run, "job", pb.TASK_FAILED, 10)
    go(dag, run, "alert", pb.TASK_SUCCESS, 20)
    assert run.state == pb.WORKFLOW_FAILED and run.finished_ms == 21
    assert wr.mark_success(dag, run, 0, 30, "") == [2]
    assert run.state == pb.WORKFLOW_RUNNING and run.finished_ms == 0
    assert states(dag, run)["alert"] == "SUCCESS"  # it ran; history is not rewritten
    go(dag, run, "next", pb.TASK_SUCCESS, 40)
    assert run.state == pb.WORKFLOW_SUCCESS


def test_mark_success_from_waiting_is_an_ordinary_completion() -> None:
    run, _ = new_run(ETL)
    wr.mark_running(run, 0, "r", 10)
    assert wr.mark_success(ETL, run, 1, 20, "skip validation") == []  # load still waits for extract
    assert run.tasks[2].waiting == 1
    check_counters(ETL, run)
    assert wr.finish(ETL, run, 0, pb.TASK_SUCCESS, 30) == [2]


def test_mark_success_conflicts() -> None:
    run, _ = new_run(ETL)
    wr.mark_running(run, 0, "r", 10)
    with pytest.raises(Conflict, match='"extract" is RUNNING'):
        wr.mark_success(ETL, run, 0, 20, "x")
    wr.finish(ETL, run, 0, pb.TASK_SUCCESS, 20)
    with pytest.raises(Conflict, match='"extract" already succeeded'):
        wr.mark_success(ETL, run, 0, 30, "x")


def test_operation_conflicts_and_bad_outcome() -> None:
    run, _ = new_run(ETL)
    with pytest.raises(Conflict, match='"validate" is WAITING, not READY'):
        wr.mark_running(run, 1, "r", 10)
    with pytest.raises(Conflict, match="not RUNNING"):
        wr.finish(ETL, run, 0, pb.TASK_SUCCESS, 10)
    wr.mark_running(run, 0, "r", 10)
    with pytest.raises(ValueError, match="outcome"):
        wr.finish(ETL, run, 0, pb.TASK_SKIPPED, 10)
    with pytest.raises(Conflict, match="already started"):
        wr.start(ETL, run, 10)
    wr.finish(ETL, run, 0, pb.TASK_FAILED, 20)
    with pytest.raises(Conflict, match="already FAILED"):
        wr.kill(run, 30, "x")


def test_note_appends_without_changing_state() -> None:
    run, _ = new_run(ETL)
    wr.mark_running(run, 0, "r", 10)
    wr.note(run, 0, pb.TASK_FAILED, 20, "attempt 1 failed: exit code 2")
    wr.note(run, 0, pb.TASK_READY, 20, "retry 2")
    task = run.tasks[0]
    assert task.state == pb.TASK_RUNNING and task.tries == 1
    assert [(wr.state_name(e.state), e.at_ms, e.reason) for e in task.timeline][-2:] == [
        ("FAILED", 20, "attempt 1 failed: exit code 2"),
        ("READY", 20, "retry 2"),
    ]
    assert wr.finish(ETL, run, 0, pb.TASK_SUCCESS, 30) == [1]


def test_empty_dag_succeeds_at_start() -> None:
    dag = build()
    run, ready = new_run(dag, 5)
    assert ready == [] and run.state == pb.WORKFLOW_SUCCESS and run.finished_ms == 5


def test_ready_indices_come_in_topological_order() -> None:
    # spec order is not topological: the children are listed before their parent "r".
    dag = build(("x", ["r"]), ("y", ["r"]), ("r", []))
    run, ready = new_run(dag)
    assert ready == [2]
    assert go(dag, run, "r", pb.TASK_SUCCESS, 10) == ["x", "y"]
    # "late" (spec 0) depends on "mid" on done; mid is skipped when root fails, so late runs.
    dag = build(("late", [("mid", pb.ON_DONE)]), ("root", []), ("mid", ["root"]))
    run, _ = new_run(dag)
    assert go(dag, run, "root", pb.TASK_FAILED, 10) == ["late"]


def test_wide_and_deep_graphs_do_not_recurse() -> None:
    n = 20_000
    tasks: list[tuple[str, list[Dep]]] = [("t0", [])]
    tasks += [(f"t{i}", [f"t{i - 1}"]) for i in range(1, n)]
    chain = build(*tasks)
    run, _ = new_run(chain)
    assert go(chain, run, "t0", pb.TASK_FAILED, 10) == []
    assert run.tasks[n - 1].state == pb.TASK_SKIPPED
    assert run.state == pb.WORKFLOW_FAILED
