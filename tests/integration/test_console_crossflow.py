"""The console's issue 28 pages against a real node in this process: cross-workflow edges on the
workflow and workflow run pages and in the graph, the Waits page, an earliest-start gate, the
Events page with the runs events started, names never seen, and the emit form (allowed by
``events.emit`` in the namespace, CSRF as for every console POST).

A downstream run waits on its upstream without an executor and a gated task is held before any
executor could take it; one executor joins only to run the upstream that decides the edge (MET).
"""

from __future__ import annotations

import html
import os
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftsched.model import ManualTrigger, TaskSpec
from raftsched.testing.cluster import wait_until
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.web.crossflow import gate_of
from tests.integration.console_support import WebSession, csrf_of
from tests.integration.test_console import Running, _run_node, role_tokens, signed_in
from tests.support.procs import executor_argv, start_executor

pytestmark = pytest.mark.integration

HOUR = 3_600_000


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    yield from _run_node(tmp_path_factory.mktemp("console-xwf"), auth=True)


@pytest.fixture(scope="module")
def tokens(node: Running) -> dict[str, str]:
    with node.client() as c:
        out = role_tokens(c, node.admin or "", ("viewer", "maintainer", "executor"), "crossflow test")
        out["etl"], _ = c.create_token("maintainer", ["etl"], description="crossflow test, etl only")
        up = pb.WorkflowSpec(name="orders-sync")
        up.tasks.add(name="load", command="true")
        c.apply_workflow(up)
        down = pb.WorkflowSpec(
            name="reconcile", jitter_ms=300_000, warn_after_ms=1_800_000, emits=["reconciled"]
        )
        down.schedule.expr = "0 2 29 2 *"  # never during the test
        down.schedule.timezone = "Europe/Paris"
        t = down.tasks.add(name="reconcile", command="true")
        t.depends_on.add(
            workflow="orders-sync", task="load", timeout_ms=3 * HOUR, on_timeout=pb.UPSTREAM_TIMEOUT_SKIP
        )
        down.tasks.add(name="gated", command="true", not_before="+2h", emits=["gated-done"])
        c.apply_workflow(down)
        c.add_task(TaskSpec("on-order", ManualTrigger(), command="true", on_event="orders-ready"))
        c.add_task(TaskSpec("typo", ManualTrigger(), command="true", on_event="orders-redy"))
    return out


def _path(run_id: str) -> str:
    return run_id.replace("@", "%40").replace("#", "%23")


def _flash(page: str) -> str:
    found = re.search(r'<p class="flash (?:ok|error)" role="status">(.*?)</p>', page, re.S)
    assert found is not None, "no flash on the page"
    return html.unescape(found.group(1))


def test_the_workflow_pages_show_cross_workflow_edges_and_the_graph_draws_them(
    node: Running, tokens: dict[str, str]
) -> None:
    web = signed_in(node, tokens["viewer"])
    page = web.get("/workflows/reconcile")
    assert page.status == 200
    table = re.search(r'<table id="cross-edges">.*?</table>', page.text, re.S)
    assert table is not None
    row = re.sub(r"\s+", " ", table.group(0))
    assert '<a href="/workflows/orders-sync">orders-sync</a>:load' in row
    assert "<td>success</td><td>same</td><td>3h (then skip)</td><td>30m (workflow default)</td>" in row
    # The graph: the upstream is an external box linking to its workflow, with its edge.
    assert 'href="/workflows/orders-sync" class="node external"' in page.text
    assert "orders-sync:load → reconcile" in page.text
    starts = re.search(r'<dl class="fields" id="workflow-starts">.*?</dl>', page.text, re.S)
    assert starts is not None
    assert 'id="wf-jitter">5m' in starts.group(0) and "reconciled" in starts.group(0)
    assert "not before +2h after the logical time" in starts.group(0)
    assert "gated emits" in starts.group(0) and "gated-done" in starts.group(0)
    # The upstream's page names who depends on it.
    up = web.get("/workflows/orders-sync")
    deps = re.search(r'<table id="dependents">.*?</table>', up.text, re.S)
    assert deps is not None and 'href="/workflows/reconcile"' in deps.group(0)
    assert 'id="no-cross-edges"' in up.text
    # Lineage crosses workflows: load's downstream includes reconcile's task, and reconcile's
    # upstream is load (highlighted in the graph too).
    lineage = web.get("/workflows/orders-sync?task=load").text
    panel = re.search(r'<div class="panel" id="cross-lineage">.*?</div>', lineage, re.S)
    assert (
        panel is not None
        and 'href="/workflows/reconcile?task=reconcile">reconcile:reconcile</a>' in panel.group(0)
    )
    lineage = web.get("/workflows/reconcile?task=reconcile").text
    panel = re.search(r'<div class="panel" id="cross-lineage">.*?</div>', lineage, re.S)
    assert panel is not None and 'href="/workflows/orders-sync">orders-sync:load</a>' in panel.group(0)
    assert 'class="box ext m-up"' in lineage


def _executor(node: Running, token: str, data: Path) -> subprocess.Popen[bytes]:
    process = start_executor(
        executor_argv(node.grpc, "xwf-ex1", data, slots=2),
        data / "executor.log",
        env={**os.environ, "RAFTSCHED_TOKEN": token},
    )
    with node.client() as c:
        wait_until(lambda: len(c.list_executors().executors) == 1, 30, 0.2, "the executor to join")
    return process


def test_a_run_shows_its_waits_and_gate_and_the_waits_page_lists_them(
    node: Running, tokens: dict[str, str], tmp_path: Path
) -> None:
    with node.client() as c:
        run = c.start_workflow_run("reconcile")
        wait_until(
            lambda: any(t.not_before_ms for t in c.get_workflow_run(run.run_id).tasks),
            30,
            0.1,
            "the gated task",
        )
        run = c.get_workflow_run(run.run_id)
    web = signed_in(node, tokens["viewer"])
    page = web.get("/workflow-runs/" + _path(run.run_id))
    assert page.status == 200
    edges = re.search(r'<table id="run-edges">.*?</table>', page.text, re.S)
    assert edges is not None
    assert '<span class="state s-waiting">WAITING</span>' in edges.group(0)
    assert 'href="/workflows/orders-sync">orders-sync:load</a>' in edges.group(0)
    assert 'data-upstream="orders-sync:load" data-state="waiting"' in page.text  # the graph's box
    # The gated task is WAITING until logical + 2 h, in the workflow's zone (a manual run: no jitter).
    gated = next(t for t in run.tasks if t.name == "gated")
    assert gated.not_before_ms == run.logical_ms + 2 * HOUR
    expect = gate_of(gated.not_before_ms, "Europe/Paris", run.logical_ms, "not_before +2h").text
    gate = re.search(r'<p class="gate" id="gate-gated"[^>]*>(.*?)</p>', page.text, re.S)
    assert gate is not None and gate.group(1).startswith(expect + ", in ")
    assert "(not_before +2h)" in gate.group(1)
    assert 'id="task-gated" data-task="gated" data-state="waiting"' in page.text
    # Its task run says the same.
    task_run = web.get("/runs/" + _path(gated.run_id))
    assert task_run.status == 200 and 'id="run-gate"' in task_run.text and expect in task_run.text
    waits = web.get("/waits")
    row = re.search(r"<tr><th scope=\"row\"><a href=\"/workflows/orders-sync\">.*?</tr>", waits.text, re.S)
    assert row is not None and run.run_id in row.group(0) and "reconcile" in row.group(0)
    assert "orders-sync</a> holds 1 task" in waits.text
    assert 'id="no-waits"' in web.get("/waits?upstream=nothing").text
    # The upstream run of the same logical time succeeds on an executor: the edge is MET,
    # decided by that run.
    executor = _executor(node, tokens["executor"], tmp_path)
    try:
        with node.client() as c:
            upstream = c.start_workflow_run("orders-sync", logical_ms=run.logical_ms)
            wait_until(
                lambda: c.get_workflow_run(run.run_id).tasks[0].external[0].state != pb.EXTERNAL_PENDING,
                60,
                0.1,
                "the edge to be decided",
            )
    finally:
        executor.kill()  # SIGTERM would drain first, for up to its grace
        executor.wait(10)
    after = web.get("/workflow-runs/" + _path(run.run_id)).text
    edges = re.search(r'<table id="run-edges">.*?</table>', after, re.S)
    assert edges is not None and '<span class="state s-met">MET</span>' in edges.group(0)
    assert f'href="/workflow-runs/{_path(upstream.run_id)}"' in edges.group(0)
    assert 'data-upstream="orders-sync:load" data-state="met"' in after
    assert 'id="no-waits"' in web.get("/waits").text


def test_the_emit_form_starts_a_run_and_the_events_page_lists_it(
    node: Running, tokens: dict[str, str]
) -> None:
    web = signed_in(node, tokens["maintainer"])
    page = web.get("/events")
    assert page.status == 200 and 'id="emit-form"' in page.text and 'id="no-events"' in page.text
    csrf = csrf_of(page.text)
    form = {
        "csrf": csrf,
        "name": "orders-ready",
        "key": "2026-12-04",
        "payload": '{"rows": 3}',
        "namespace": "",
    }
    reply = web.post("/events/emit", form)
    assert reply.status == 303 and reply.location == "/events?name=orders-ready"
    listed = web.get(reply.location)
    said = _flash(listed.text)
    assert said.startswith("accepted event orders-ready key 2026-12-04 (#1); started on-order@"), said
    row = re.search(r'<tr data-event="orders-ready/2026-12-04">.*?</tr>', listed.text, re.S)
    assert row is not None
    assert re.search(r'<a href="/runs/on-order%40\d+[^"]*">on-order@', row.group(0))
    assert "{&#34;rows&#34;: 3}" in row.group(0) or "{&quot;rows&quot;: 3}" in row.group(0)
    # The same key again starts nothing.
    again = web.post("/events/emit", form)
    assert "duplicate: event orders-ready key 2026-12-04" in _flash(web.get(again.location).text)
    # A bad payload is refused with the field named, back on the form's page.
    bad = web.post("/events/emit", {**form, "key": "2026-12-05", "payload": "[1]", "back": "/events"})
    assert bad.status == 303 and bad.location == "/events"
    assert "payload" in _flash(web.get("/events").text)
    with node.client() as c:
        assert [e.key for e in c.events("orders-ready")] == ["2026-12-04"]
        assert len(c.runs("on-order")) == 1
    # The task page shows what starts it; the names never seen list the typo.
    assert 'id="task-on-event"><a href="/events?name=orders-ready">' in web.get("/tasks/on-order").text
    unused = web.get("/events/unused").text
    assert '<tr data-event="orders-redy">' in unused and 'href="/tasks/typo"' in unused
    assert '<tr data-event="orders-ready">' not in unused


def test_emitting_needs_events_emit_in_the_namespace(node: Running, tokens: dict[str, str]) -> None:
    viewer = signed_in(node, tokens["viewer"])
    page = viewer.get("/events")
    assert page.status == 200 and 'id="emit-form"' not in page.text
    form = {"csrf": csrf_of(page.text), "name": "orders-ready", "key": "viewer-try"}
    refused = viewer.post("/events/emit", form)
    assert refused.status == 403 and "lacks permission events.emit" in refused.text
    # A maintainer of namespace etl only: the form offers etl; default is refused by the RPC.
    etl = signed_in(node, tokens["etl"])
    page = etl.get("/events")
    assert (
        '<select id="emit-namespace" name="namespace"><option value="etl">etl</option></select>' in page.text
    )
    refused = etl.post("/events/emit", {**form, "csrf": csrf_of(page.text), "namespace": "default"})
    assert refused.status == 403, refused.text[-300:]
    # Without the session's CSRF token nothing is called either.
    maintainer = signed_in(node, tokens["maintainer"])
    assert maintainer.post("/events/emit", {**form, "csrf": "nope"}).status == 403
    with node.client() as c:
        assert c.events("orders-ready") == [] or all(e.key != "viewer-try" for e in c.events("orders-ready"))


def test_the_new_pages_are_in_the_navigation_and_signed_out_visitors_are_sent_to_sign_in(
    node: Running, tokens: dict[str, str]
) -> None:
    web = signed_in(node, tokens["viewer"])
    nav = web.get("/cluster").text
    assert nav.index('href="/pools"') < nav.index('href="/waits"') < nav.index('href="/events"')
    anonymous = WebSession(node.http)
    for path in ("/waits", "/events", "/events/unused"):
        assert anonymous.get(path).status == 303, path
