"""Cross-workflow dependencies in the state machine (issue 28 §1): a downstream task waits for the
upstream workflow's run (or one task of it) of the matching logical time, whichever way that run
came and whenever it finished; failures skip, reruns re-evaluate, cycles and deletes are guarded."""

from __future__ import annotations

from raftsched import codec
from raftsched.fsm.state import SchedulerState
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import T0, S, apply, apply_wf, command, complete, domain, fresh, join, op, task_states

DAY = 86_400_000
UP, DOWN = "orders-sync", "reconcile"


def up_spec() -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name=UP, namespace="a", owner="A")
    spec.tasks.add(name="extract", command="extract {{ ds }}")
    spec.tasks.add(name="load", command="load {{ ds }}", depends_on=[pb.Dependency(task="extract")])
    return spec


def down_spec(*deps: pb.Dependency, rule: int = 0) -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name=DOWN, namespace="b", owner="B")
    spec.tasks.add(name="prep", command="prep")
    spec.tasks.add(
        name="reconcile",
        command="reconcile {{ ds }}",
        depends_on=[pb.Dependency(task="prep"), *(deps or [pb.Dependency(workflow=UP)])],
        trigger_rule=rule,
    )
    return spec


def start_wf(state: SchedulerState, workflow: str, logical: int = T0, now: int = T0) -> str:
    cmd = command(now)
    cmd.start_workflow_run.workflow = workflow
    cmd.start_workflow_run.logical_ms = logical
    res = apply(state, codec.encode_command(cmd))
    assert res.ok, res.message
    return res.workflow_run.run_id


def setup(*deps: pb.Dependency) -> SchedulerState:
    state = fresh()
    apply(state, join("x1", slots=64))
    assert apply_wf(state, up_spec()).ok
    res = apply_wf(state, down_spec(*deps))
    assert res.ok, res.message
    return state


def finish_up(state: SchedulerState, run_id: str, ok: bool = True, now: int = T0) -> None:
    complete(state, run_id, "extract", now=now)
    complete(state, run_id, "load", ok=ok, now=now, error="" if ok else "boom")


def test_downstream_waits_until_the_upstream_run_of_the_same_logical_time_succeeds() -> None:
    state = setup()
    down = start_wf(state, DOWN)
    complete(state, down, "prep")
    assert task_states(state, down)["reconcile"] == "WAITING"
    wr = state.get_workflow_run(down)
    assert wr is not None
    wait = wr.tasks[1].external[0]
    assert wait.state == pb.EXTERNAL_PENDING and wait.logical_ms == T0
    other_day = start_wf(state, UP, logical=T0 + DAY)  # another logical time meets nothing
    finish_up(state, other_day)
    assert task_states(state, down)["reconcile"] == "WAITING"
    up = start_wf(state, UP)
    complete(state, up, "extract")
    assert task_states(state, down)["reconcile"] == "WAITING"  # the whole run is awaited
    complete(state, up, "load", now=T0 + S)
    assert task_states(state, down)["reconcile"] == "RUNNING"
    got = state.get_workflow_run(down)
    assert got is not None
    entry = got.tasks[1].timeline[-2]
    assert entry.state == pb.TASK_READY and UP in entry.reason and up in entry.reason
    assert got.tasks[1].external[0].state == pb.EXTERNAL_MET and got.tasks[1].external[0].upstream_run == up


def test_an_upstream_that_finished_before_the_downstream_started_meets_it_at_once() -> None:
    state = setup()
    up = start_wf(state, UP)
    finish_up(state, up)
    down = start_wf(state, DOWN)
    assert task_states(state, down)["reconcile"] == "WAITING"  # still waits for prep
    complete(state, down, "prep")
    assert task_states(state, down)["reconcile"] == "RUNNING"


def test_a_backfilled_upstream_meets_it_and_offsets_pick_the_earlier_run() -> None:
    state = setup(pb.Dependency(workflow=UP, logical_offset_ms=-DAY))
    down = start_wf(state, DOWN)
    complete(state, down, "prep")
    same_day = start_wf(state, UP)
    finish_up(state, same_day)
    assert task_states(state, down)["reconcile"] == "WAITING"  # waits for yesterday's run
    cmd = command(T0)
    cmd.start_backfill.workflow = UP
    cmd.start_backfill.logical_ms.append(T0 - DAY)
    res = apply(state, codec.encode_command(cmd))
    assert res.ok, res.message
    yesterday = f"{UP}@{T0 - DAY}~b{res.backfill.backfill_id.rsplit('~b', 1)[1]}"
    finish_up(state, yesterday)
    assert task_states(state, down)["reconcile"] == "RUNNING"


def test_a_failed_upstream_skips_the_downstream_naming_workflow_and_run() -> None:
    state = setup()
    down = start_wf(state, DOWN)
    up = start_wf(state, UP)
    finish_up(state, up, ok=False)
    states = task_states(state, down)
    assert states["reconcile"] == "SKIPPED"
    wr = state.get_workflow_run(down)
    assert wr is not None
    reason = wr.tasks[1].reason
    assert UP in reason and up in reason and "FAILED" in reason and "success" in reason


def test_a_task_edge_is_met_by_that_task_alone_and_failure_conditions_work() -> None:
    state = setup(
        pb.Dependency(workflow=UP, task="extract"),
        pb.Dependency(workflow=UP, task="load", condition=pb.ON_FAILURE),
    )
    down = start_wf(state, DOWN)
    complete(state, down, "prep")
    up = start_wf(state, UP)
    complete(state, up, "extract")
    wr = state.get_workflow_run(down)
    assert wr is not None and wr.tasks[1].state == pb.TASK_WAITING and wr.tasks[1].waiting == 1
    complete(state, up, "load", ok=False, error="boom")
    assert task_states(state, down)["reconcile"] == "RUNNING"


def test_a_rerun_of_a_killed_upstream_re_evaluates_the_waiting_downstream() -> None:
    state = setup()
    down = start_wf(state, DOWN)
    complete(state, down, "prep")
    up = start_wf(state, UP)
    complete(state, up, "extract")
    assert op(state, pb.WorkflowRunOp.KILL, up).ok
    assert task_states(state, down)["reconcile"] == "WAITING"  # killed decides nothing
    assert op(state, pb.WorkflowRunOp.RERUN, up, "load", now=T0 + S).ok
    complete(state, up, "load", now=T0 + S)
    assert task_states(state, down)["reconcile"] == "RUNNING"


def test_waiting_edges_survive_a_restore_from_the_store() -> None:
    state = setup()
    down = start_wf(state, DOWN)
    complete(state, down, "prep")
    restored = SchedulerState.load(state.store)
    assert domain(restored) == domain(state)
    up = start_wf(restored, UP)
    finish_up(restored, up)
    assert task_states(restored, down)["reconcile"] == "RUNNING"


def test_one_upstream_finishing_releases_many_downstream_runs_in_one_command() -> None:
    state = setup()
    runs = [start_wf(state, DOWN, now=T0 + i) for i in range(50)]
    for r in runs:
        complete(state, r, "prep")
    up = start_wf(state, UP)
    complete(state, up, "extract")
    complete(state, up, "load")
    assert all(task_states(state, r)["reconcile"] == "RUNNING" for r in runs)
    assert not state.wf.deps.waits and not state.wf.deps.by_run


def test_unknown_upstream_missing_task_and_cycles_are_refused_naming_the_field() -> None:
    state = fresh()
    res = apply_wf(state, down_spec())
    assert not res.ok and "orders-sync" in res.message and "depends_on[1].workflow" in res.message
    assert apply_wf(state, up_spec()).ok
    res = apply_wf(state, down_spec(pb.Dependency(workflow=UP, task="nope")))
    assert not res.ok and "nope" in res.message
    assert apply_wf(state, down_spec()).ok
    cyc = up_spec()
    cyc.tasks[0].depends_on.append(pb.Dependency(workflow=DOWN))
    res = apply_wf(state, cyc)
    assert not res.ok and f"{UP} → {DOWN} → {UP}" in res.message, res.message
    # Through an earlier logical time the loop ends: accepted.
    cyc.tasks[0].depends_on[0].logical_offset_ms = -DAY
    res = apply_wf(state, cyc)
    assert res.ok, res.message


def test_deleting_an_upstream_is_refused_naming_its_dependents_unless_forced() -> None:
    state = setup()

    def delete(force: bool) -> pb.CommandResult:
        cmd = command(T0)
        cmd.delete_workflow.workflow = UP
        cmd.delete_workflow.force = force
        return apply(state, codec.encode_command(cmd))

    res = delete(False)
    assert not res.ok and DOWN in res.message
    assert delete(True).ok


def test_workflow_files_accept_namespace_and_cross_workflow_dependencies() -> None:
    from raftsched.errors import InvalidWorkflow
    from raftsched.v1 import raftsched_pb2 as api
    from raftsched.workflow.files import parse_workflow_text

    text = """
name: reconcile
namespace: b
owner: B
tasks:
  - name: extract
    command: extract
  - name: reconcile
    command: reconcile {{ ds }}
    depends_on:
      - {workflow: orders-sync, task: load}
      - {workflow: fx-rates, logical: "-1d", condition: done}
      - extract
"""
    spec = parse_workflow_text(text, "yaml", "r.yaml")
    assert spec.namespace == "b"
    deps = spec.tasks[1].depends_on
    assert (deps[0].workflow, deps[0].task, deps[0].logical_offset_ms) == ("orders-sync", "load", 0)
    assert (deps[1].workflow, deps[1].task, deps[1].logical_offset_ms) == ("fx-rates", "", -DAY)
    assert deps[1].condition == api.ON_DONE and deps[2].task == "extract" and not deps[2].workflow
    bad = text.replace('"-1d"', '"+1d"').replace("workflow: orders-sync, ", "workflow: reconcile, ")
    try:
        parse_workflow_text(bad.replace("namespace: b", "namespace: 123"), "yaml", "r.yaml")
    except InvalidWorkflow as exc:
        shown = "\n".join(f"{where}: {msg}" for where, msg in exc.problems)
    else:
        raise AssertionError("refused")
    assert "namespace" in shown
    assert "depends_on[0].workflow" in shown and "is this workflow" in shown
    assert "depends_on[1].logical" in shown and "later logical time" in shown
    try:
        parse_workflow_text(text.replace('"-1d"', '"yesterday"'), "yaml", "r.yaml")
    except InvalidWorkflow as exc:
        assert "logical" in str(exc.problems) and "yesterday" in str(exc.problems)
    else:
        raise AssertionError("refused")


def waits_due(state: SchedulerState, now: int) -> pb.CommandResult:
    cmd = command(now)
    cmd.workflow_waits_due.SetInParent()
    return apply(state, codec.encode_command(cmd))


HOUR = 3_600_000


def test_timeout_counts_from_when_the_edge_could_first_be_met_and_fails_or_skips() -> None:
    state = setup(pb.Dependency(workflow=UP, timeout_ms=HOUR))
    # A run started before its logical time: the hour counts from the logical time.
    early = start_wf(state, DOWN, logical=T0 + HOUR, now=T0)
    late = start_wf(state, DOWN, logical=T0, now=T0)  # counts from its start
    assert state.wf.deps.next_due_ms == T0 + HOUR
    assert waits_due(state, T0 + HOUR - 1).accounted == 0
    assert waits_due(state, T0 + HOUR).accounted == 1
    got = state.get_workflow_run(late)
    assert got is not None
    task = got.tasks[1]
    assert task.state == pb.TASK_FAILED and "did not finish within 1h" in task.reason and UP in task.reason
    assert task.external[0].state == pb.EXTERNAL_TIMED_OUT
    assert task_states(state, early)["reconcile"] == "WAITING"
    assert state.wf.deps.next_due_ms == T0 + 2 * HOUR

    skipping = fresh()
    apply(skipping, join("x1", slots=64))
    assert apply_wf(skipping, up_spec()).ok
    spec = down_spec(pb.Dependency(workflow=UP, timeout_ms=HOUR, on_timeout=pb.UPSTREAM_TIMEOUT_SKIP))
    assert apply_wf(skipping, spec).ok
    run = start_wf(skipping, DOWN)
    complete(skipping, run, "prep")
    waits_due(skipping, T0 + HOUR)
    assert task_states(skipping, run)["reconcile"] == "SKIPPED"
    final = skipping.get_workflow_run(run)
    assert final is not None and final.state == pb.WORKFLOW_SUCCESS  # skipped alone fails nothing


def test_a_met_edge_leaves_no_deadline_that_acts() -> None:
    state = setup(pb.Dependency(workflow=UP, timeout_ms=HOUR))
    down = start_wf(state, DOWN)
    complete(state, down, "prep")
    up = start_wf(state, UP)
    finish_up(state, up)
    assert waits_due(state, T0 + 2 * HOUR).accounted == 0
    assert task_states(state, down)["reconcile"] == "RUNNING"


def alerts_of(state: SchedulerState, kind: str) -> list[pb.AlertRecord]:
    from raftsched.fsm import keys

    return [
        a
        for a in (
            pb.AlertRecord.FromString(v) for _, v in state.store.scan(keys.ALERT, keys.ALERT + keys.END)
        )
        if a.kind == kind
    ]


def test_upstream_late_is_raised_once_naming_the_upstream_and_what_it_holds_and_clears() -> None:
    state = fresh()
    apply(state, join("x1", slots=64))
    assert apply_wf(state, up_spec()).ok
    spec = down_spec(pb.Dependency(workflow=UP))
    spec.warn_after_ms = 8 * 60_000  # the workflow's default
    assert apply_wf(state, spec).ok
    other = down_spec(pb.Dependency(workflow=UP, warn_after_ms=HOUR))
    other.name = "audit"
    assert apply_wf(state, other).ok
    runs = [start_wf(state, DOWN, now=T0 + i) for i in range(3)] + [start_wf(state, "audit")]
    waits_due(state, T0 + 8 * 60_000 + 5)
    late = alerts_of(state, "upstream_late")
    assert len(late) == 1
    alert = late[0]
    assert alert.workflow == UP and alert.owner == "A" and alert.namespace == "a" and not alert.resolved
    assert "8m" in alert.error and "4 downstream task(s)" in alert.error and "audit" in alert.error
    waits_due(state, T0 + 2 * HOUR)  # audit's own warn_after: same upstream, no second event
    assert len(alerts_of(state, "upstream_late")) == 1
    up = start_wf(state, UP, now=T0 + 2 * HOUR)
    finish_up(state, up, now=T0 + 2 * HOUR)
    late = alerts_of(state, "upstream_late")
    assert [a.resolved for a in late] == [False, True] and up in late[1].error
    assert all(task_states(state, r)["reconcile"] in ("WAITING", "RUNNING") for r in runs)


def test_status_waits_and_show_name_the_waiting_edge() -> None:
    from raftsched.cli.render import deps_text, render_status, wait_lines
    from raftsched.explain import wait_rows

    state = setup(pb.Dependency(workflow=UP, task="load", logical_offset_ms=-DAY))
    down = start_wf(state, DOWN)
    complete(state, down, "prep")
    wr = state.get_workflow_run(down)
    assert wr is not None
    first = wr.tasks[1].timeline[0].reason
    assert 'workflow "orders-sync" task "load" at 2023-11-13T22:14:00Z' in first, first
    text = "\n".join(render_status(wr))
    assert "cross-workflow dependencies" in text and "WAITING" in text
    record = state.get_workflow(DOWN)
    assert record is not None
    assert deps_text(record.spec.tasks[1]) == "prep, orders-sync:load (logical -1d)"
    rows = wait_rows([wr], {(DOWN, wr.version): record.spec})
    assert len(rows) == 1
    row = rows[0]
    assert row["upstream"] == UP and row["upstream_task"] == "load" and row["downstream_task"] == "reconcile"
    assert row["upstream_logical_ms"] == T0 - DAY and row["downstream_run"] == down
    assert wait_rows([wr], {(DOWN, wr.version): record.spec}, upstream="other") == []
    assert "orders-sync:load" in "\n".join(wait_lines(rows))
    # Once decided, nothing waits any more.
    up = start_wf(state, UP, logical=T0 - DAY)
    finish_up(state, up)
    after = state.get_workflow_run(down)
    assert after is not None and wait_rows([after], {(DOWN, after.version): record.spec}) == []
    assert "MET" in "\n".join(render_status(after))


def test_an_upstream_releases_at_most_a_thousand_edges_per_command_the_rest_by_waits_due() -> None:
    from raftsched.fsm.crossdeps import RELEASE_PER_COMMAND

    state = fresh()
    apply(state, join("x1", slots=64))
    assert apply_wf(state, up_spec()).ok
    spec = pb.WorkflowSpec(name=DOWN, overlap=pb.OVERLAP_ALLOW)
    spec.tasks.add(name="r", command="r", depends_on=[pb.Dependency(workflow=UP)])
    assert apply_wf(state, spec).ok
    total = RELEASE_PER_COMMAND * 2 + 500
    runs = [start_wf(state, DOWN) for _ in range(total)]

    def released() -> int:
        return sum(1 for r in runs if task_states(state, r)["r"] == "RUNNING")

    up = start_wf(state, UP)
    finish_up(state, up, now=T0 + S)
    assert released() == RELEASE_PER_COMMAND
    with state.view() as v:
        due, applied = v.waits_due_ms()
    assert (due, applied) == (1, 0)  # due at once: the leader proposes WorkflowWaitsDue
    # A replica restarted from the store now finds the same edges left to release.
    restarted = SchedulerState(MemoryStore())
    restarted.restore(state.snapshot(), 1)
    assert restarted.wf.deps.releases == state.wf.deps.releases
    assert waits_due(state, T0 + S).accounted == RELEASE_PER_COMMAND
    assert released() == 2 * RELEASE_PER_COMMAND
    assert waits_due(state, T0 + S).accounted == 500
    assert released() == total and state.wf.deps.next_due_ms == 0 and not state.wf.deps.waits
    for _ in range(2):
        waits_due(restarted, T0 + S)
    assert domain(restarted) == domain(state)


def test_lineage_crosses_workflows() -> None:
    from raftsched.cli.render import cross_lineage

    up = up_spec()
    down = down_spec(pb.Dependency(workflow=UP, task="load", logical_offset_ms=-DAY))
    audit = pb.WorkflowSpec(name="audit")
    audit.tasks.add(name="a", command="a", depends_on=[pb.Dependency(workflow=UP)])
    other = pb.WorkflowSpec(name="other")
    other.tasks.add(name="o", command="o", depends_on=[pb.Dependency(workflow="elsewhere")])
    # From orders-sync's extract: load is downstream of it, so reconcile (on load) and audit (on
    # the whole run) come after it.
    assert cross_lineage(UP, "extract", up, [], ["load"], [down, audit, other]) == (
        [],
        ["audit:a", "reconcile:reconcile (logical -1d)"],
    )
    assert cross_lineage(DOWN, "reconcile", down, ["prep"], [], [up, audit]) == (
        ["orders-sync:load (logical -1d)"],
        [],
    )


def test_graphs_draw_a_workflow_with_cross_workflow_dependencies() -> None:
    from raftsched.cli.render import graph_dict, render_graph
    from raftsched.web.graph import dag_geometry

    spec = down_spec(pb.Dependency(workflow=UP, task="load", logical_offset_ms=-DAY))
    geometry = dag_geometry(spec)  # raised KeyError: the upstream is no box of this graph
    # The upstream of the other workflow is an external box of its own, with its edge.
    assert [(e.upstream, e.downstream) for e in geometry.edges] == [
        ("prep", "reconcile"),
        ("orders-sync:load -1d", "reconcile"),
    ]
    assert [b.external for b in geometry.boxes] == [UP, "", ""]
    text = "\n".join(render_graph(spec, 1, None, ascii_only=True))
    assert "orders-sync:load" in text
    deps = graph_dict(spec, 1, None)["layers"][1][0]["depends_on"]
    assert deps[1] == {"task": "load", "condition": "on_success", "workflow": UP, "logical_offset_ms": -DAY}
