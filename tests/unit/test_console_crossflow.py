"""The console's issue 28 parts that need no node: external boxes of the workflow graph, the gate
text (``waits until 02:00 (Europe/Paris)``), the rows of the Waits page and the links of the
Events page, and the templates rendering them."""

from __future__ import annotations

import datetime as dt

from raftsched.v1 import raftsched_pb2 as pb
from raftsched.web import crossflow
from raftsched.web.graph import BOX_W, COL_GAP, PAD, dag_geometry, offset_text
from raftsched.web.templating import Renderer
from raftsched.web.views import FILTERS

DAY = 86_400_000
T0 = int(dt.datetime(2026, 12, 5, tzinfo=dt.UTC).timestamp() * 1000)


def _reconcile() -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name="reconcile", warn_after_ms=1_800_000)
    spec.schedule.expr = "0 2 * * *"
    spec.schedule.timezone = "Europe/Paris"
    spec.tasks.add(name="prep", command="prep")
    t = spec.tasks.add(name="reconcile", command="r", not_before="02:00")
    t.depends_on.add(task="prep")
    t.depends_on.add(workflow="orders-sync", task="load")
    t.depends_on.add(
        workflow="fx-rates",
        logical_offset_ms=-DAY,
        timeout_ms=3 * 3_600_000,
        on_timeout=pb.UPSTREAM_TIMEOUT_SKIP,
    )
    also = spec.tasks.add(name="report", command="x", emits=["reconciled"])
    also.depends_on.add(workflow="orders-sync", task="load", warn_after_ms=600_000)
    return spec


def test_cross_workflow_upstreams_are_external_boxes_left_of_the_first_layer_needing_them() -> None:
    dag = dag_geometry(_reconcile())
    ext = {b.name: b for b in dag.boxes if b.external}
    tasks = {b.name: b for b in dag.boxes if not b.external}
    # One box per distinct upstream (two tasks share orders-sync:load).
    assert [(b.name, b.external) for b in dag.boxes if b.external] == [
        ("orders-sync:load", "orders-sync"),
        ("fx-rates:* -1d", "fx-rates"),
    ]
    # report (layer 0) needs orders-sync:load: a column of its own left of every task.
    assert ext["orders-sync:load"].x == PAD
    assert tasks["prep"].x == tasks["report"].x == PAD + BOX_W + COL_GAP and tasks["prep"].layer == 0
    assert tasks["reconcile"].layer == 1 and tasks["reconcile"].x == PAD + 2 * (BOX_W + COL_GAP)
    # Only reconcile (layer 1) needs fx-rates: in the column left of it, below every task, so
    # its edge crosses no task box.
    fx = ext["fx-rates:* -1d"]
    assert fx.x == tasks["prep"].x and fx.y >= max(b.y + b.h for b in tasks.values())
    edges = {(e.upstream, e.downstream) for e in dag.edges}
    assert edges == {
        ("prep", "reconcile"),
        ("orders-sync:load", "reconcile"),
        ("fx-rates:* -1d", "reconcile"),
        ("orders-sync:load", "report"),
    }
    assert all(0 < b.x + b.w <= dag.width and 0 < b.y + b.h <= dag.height for b in dag.boxes)


def test_a_run_colours_the_external_edges_and_a_box_takes_its_least_done_state() -> None:
    states = {("reconcile", 1): "met", ("reconcile", 2): "waiting", ("report", 0): "not met"}
    dag = dag_geometry(_reconcile(), {"prep": "success"}, edge_states=states)
    ext = {b.name: b.state for b in dag.boxes if b.external}
    assert ext == {"orders-sync:load": "not met", "fx-rates:* -1d": "waiting"}
    by = {(e.upstream, e.downstream): e.state for e in dag.edges}
    assert by[("orders-sync:load", "reconcile")] == "met"
    assert by[("orders-sync:load", "report")] == "not met"
    assert by[("prep", "reconcile")] == ""


def test_offsets_are_written_as_a_file_writes_them() -> None:
    assert [offset_text(v) for v in (0, -DAY, 3_600_000, -90 * 60_000, 1500)] == [
        "same",
        "-1d",
        "+1h",
        "-90m",
        "+1500ms",
    ]


def test_a_gate_says_the_local_time_in_the_workflows_zone() -> None:
    until = int(dt.datetime(2026, 12, 5, 1, 0, tzinfo=dt.UTC).timestamp() * 1000)  # 02:00 in Paris
    gate = crossflow.gate_of(until, "Europe/Paris", T0, "not_before 02:00")
    assert gate.text == "waits until 02:00 (Europe/Paris)"
    # On another local date than the logical one, the date is written too; no zone is UTC.
    later = crossflow.gate_of(T0 + DAY + 60_000, "", T0, "jitter 5m")
    assert later.text == "waits until 2026-12-06 00:01 (UTC)"
    assert crossflow.gate_of(T0, "No/Such_Zone", T0, "x").zone == "UTC"


def _run(state: int, not_before_ms: int, *, manual: bool = False) -> pb.WorkflowRun:
    run = pb.WorkflowRun(
        run_id=f"reconcile@{T0}", workflow="reconcile", version=1, logical_ms=T0, manual=manual
    )
    run.tasks.add(name="prep", state=pb.TASK_SUCCESS)
    t = run.tasks.add(name="reconcile", state=state, not_before_ms=not_before_ms)
    t.external.add(
        edge=1, state=pb.EXTERNAL_MET, upstream_run=f"orders-sync@{T0}", logical_ms=T0, since_ms=T0
    )
    t.external.add(edge=2, state=pb.EXTERNAL_PENDING, logical_ms=T0 - DAY, since_ms=T0)
    run.tasks.add(name="report", state=pb.TASK_WAITING).external.add(
        edge=0, state=pb.EXTERNAL_PENDING, logical_ms=T0, since_ms=T0
    )
    return run


class _Ctx:
    def __init__(self, now_ms: int) -> None:
        self.now_ms = now_ms


def test_a_held_task_shows_its_gate_until_the_time_has_come() -> None:
    spec = _reconcile()
    spec.jitter_ms = 300_000
    until = T0 + 3_600_000
    held = crossflow.run_context(_Ctx(T0), _run(pb.TASK_RUNNING, until), spec)  # type: ignore[arg-type]
    gate = held["gates"]["reconcile"]
    assert gate.until_ms == until and gate.why == "not_before 02:00 and jitter 5m"
    assert gate.text == "waits until 02:00 (Europe/Paris)"
    # A manual run has no jitter; past the gate the task is just running.
    manual = crossflow.run_context(_Ctx(T0), _run(pb.TASK_RUNNING, until, manual=True), spec)  # type: ignore[arg-type]
    assert manual["gates"]["reconcile"].why == "not_before 02:00"
    assert crossflow.run_context(_Ctx(until), _run(pb.TASK_RUNNING, until), spec)["gates"] == {}  # type: ignore[arg-type]
    edges = held["run_edges"]
    assert [(e.task, e.label, e.state, e.upstream_run) for e in edges] == [
        ("reconcile", "orders-sync:load", "met", f"orders-sync@{T0}"),
        ("reconcile", "fx-rates:* -1d", "waiting", ""),
        ("report", "orders-sync:load", "waiting", ""),
    ]


def test_a_jittered_plain_run_waits_until_its_offset_and_a_retry_says_backoff() -> None:
    spec = pb.TaskSpec(name="nightly", jitter_ms=300_000)
    spec.trigger.cron.expr = "0 0 * * *"
    spec.trigger.cron.timezone = "Europe/Paris"
    record = pb.Run(run_id="nightly@1", task="nightly", nominal_ms=T0, state=pb.PENDING)
    record.shards.add(shard=0, attempt=1, state=pb.PENDING, not_before_ms=T0 + 120_000)
    gate = crossflow.run_gate(record, spec, T0)
    assert gate is not None and gate.text == "waits until 01:02 (Europe/Paris)" and gate.why == "jitter 5m"
    assert crossflow.run_gate(record, spec, T0 + 120_000) is None
    record.shards[0].attempt = 2
    retry = crossflow.run_gate(record, spec, T0)
    assert retry is not None and retry.why == "retry backoff"


def test_the_waits_rows_are_the_pending_edges_of_waiting_tasks() -> None:
    spec = _reconcile()
    run = _run(pb.TASK_WAITING, 0)
    rows = crossflow.wait_rows([run], {("reconcile", 1): spec})
    assert [(r.upstream, r.upstream_task, r.downstream_task, r.logical_ms) for r in rows] == [
        ("fx-rates", "", "reconcile", T0 - DAY),
        ("orders-sync", "load", "report", T0),
    ]
    assert [
        r.downstream_task for r in crossflow.wait_rows([run], {("reconcile", 1): spec}, "orders-sync")
    ] == ["report"]


def test_event_runs_link_to_workflow_runs_or_task_runs() -> None:
    links = crossflow._run_links(["reconcile@1", "load@2", "reconcile@1#prep"], {"reconcile"})
    assert links == [
        ("reconcile@1", "/workflow-runs/reconcile%401"),
        ("load@2", "/runs/load%402"),
        ("reconcile@1#prep", "/runs/reconcile%401%23prep"),
    ]


def test_the_workflow_graph_template_links_external_boxes_to_their_workflow() -> None:
    renderer = Renderer(FILTERS, {"cluster_name": "c", "node_id": "n1"})
    dag = dag_geometry(_reconcile())
    html = renderer._env.from_string(
        '{% import "macros.html" as ui with context %}{{ ui.dag_svg(dag, "?task=") }}'
    ).render(dag=dag, csrf="")
    assert 'href="/workflows/orders-sync" class="node external"' in html
    assert 'id="ext-fx-rates:*_-1d"' in html
    assert "Task graph: 3 tasks, 4 dependencies" in html


def test_a_lineage_highlight_crosses_into_the_external_upstreams() -> None:
    dag = dag_geometry(_reconcile(), None, "reconcile", ["prep"], [])
    marks = {b.name: b.mark for b in dag.boxes}
    assert marks["orders-sync:load"] == "up" and marks["fx-rates:* -1d"] == "up"
    lit = {(e.upstream, e.downstream) for e in dag.edges if e.lit}
    assert lit == {("prep", "reconcile"), ("orders-sync:load", "reconcile"), ("fx-rates:* -1d", "reconcile")}
    # report's upstream is orders-sync too, but report is not in prep's lineage.
    dag = dag_geometry(_reconcile(), None, "prep", [], ["reconcile"])
    assert {b.name: b.mark for b in dag.boxes if b.external} == {"orders-sync:load": "", "fx-rates:* -1d": ""}
    assert not any(e.lit for e in dag.edges if e.external)
