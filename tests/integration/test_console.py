"""The web console against a real node in this process: sign-in, sessions, CSRF, role-gated
actions checked again by the RPC, every page, live fragments, pagination and escaping.

The node (pysyncobj, LMDB, gRPC, the HTTP listener) runs here: ``Node.start`` on the main thread,
its event loop on a background thread; the tests talk HTTP to its listener as a browser would.
"""

from __future__ import annotations

import asyncio
import gc
import os
import re
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.config.load import load_config
from raftsched.model import CronTrigger, ManualTrigger, Overlap, TaskSpec
from raftsched.security.tokens import new_token
from raftsched.server.node import Node
from raftsched.testing.cluster import wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.console_support import WebSession, csrf_of, write_http_config
from tests.support.procs import executor_argv, start_executor

pytestmark = pytest.mark.integration


@dataclass
class Running:
    node: Node
    http: str
    grpc: str
    admin: str | None
    loop: asyncio.AbstractEventLoop
    stop: asyncio.Event
    thread: threading.Thread

    def client(self, token: str | None = None) -> Client:
        return Client(self.grpc, token=token or self.admin, timeout=10)

    def web(self) -> WebSession:
        return WebSession(self.http)


def _run_node(base: Path, auth: bool) -> Iterator[Running]:
    base.mkdir(parents=True, exist_ok=True)
    admin = new_token() if auth else None
    extra = ""
    if admin is not None:
        (base / "admin.token").write_text(admin + "\n")
        extra = '[auth]\nbootstrap_token_file = "admin.token"\n'
    http = write_http_config(base / "cluster.toml", 1, extra)
    config = load_config(base / "cluster.toml")
    node = Node(config, "n1")
    switch = sys.getswitchinterval()
    node.start()  # main thread (pysyncobj); it also tunes the interpreter, restored below
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()
    started = threading.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)

        async def main() -> None:
            started.set()
            await node.serve(stop)

        loop.run_until_complete(main())

    thread = threading.Thread(target=serve, name="console-test-node", daemon=True)
    thread.start()
    started.wait(10)
    running = Running(node, http["n1"], config.node("n1").grpc, admin, loop, stop, thread)

    def ready() -> bool:
        try:
            return running.web().get("/healthz").status == 200 and node.state.access.get is not None
        except OSError:
            return False

    wait_until(ready, 30, 0.1, "the node's HTTP listener")
    with running.client() as c:
        wait_until(lambda: bool(c.node_status().leader_id), 30, 0.1, "a leader")
    try:
        yield running
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(15)
        node.stop()
        sys.setswitchinterval(switch)
        gc.unfreeze()


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    yield from _run_node(tmp_path_factory.mktemp("console-auth"), auth=True)


@pytest.fixture(scope="module")
def tokens(secured: Running, tmp_path_factory: pytest.TempPathFactory) -> Iterator[dict[str, str]]:
    with secured.client() as c:
        out = role_tokens(c, secured.admin or "", ("viewer", "maintainer", "executor"), "console test")
        c.add_task(
            TaskSpec(
                "etl-nightly", CronTrigger("0 3 * * *"), command="echo etl", description="<script>x</script>"
            )
        )
        c.add_task(TaskSpec("manual-job", ManualTrigger(), command="echo hi"))
        c.add_task(TaskSpec("ticker", CronTrigger("* * * * * *"), command="true", overlap=Overlap.ALLOW))
        c.add_tasks([TaskSpec(f"bulk-{i:03d}", ManualTrigger(), command="true") for i in range(60)])
        c.add_task(
            TaskSpec("boom", ManualTrigger(), command="sh -c 'echo bad news >&2; exit 4'", owner="ops")
        )
        spec = pb.WorkflowSpec(name="diamond")
        spec.tasks.add(name="a", command="sleep 60")  # runs stay running until killed
        for name in ("b", "c"):
            spec.tasks.add(name=name, command="true").depends_on.add(task="a")
        d = spec.tasks.add(name="d", command="true")
        d.depends_on.add(task="b")
        d.depends_on.add(task="c")
        c.apply_workflow(spec)
        flaky = pb.WorkflowSpec(name="flaky")
        flaky.tasks.add(name="c", command="sh -c 'echo c broke >&2; exit 3'")
        flaky.tasks.add(name="d", command="echo d ran").depends_on.add(task="c")
        c.apply_workflow(flaky)
    data = tmp_path_factory.mktemp("console-executor")
    executor = start_executor(
        executor_argv(secured.grpc, "ex1", data, slots=4),
        data / "executor.log",
        env={**os.environ, "RAFTSCHED_TOKEN": out["executor"]},
    )
    try:
        with secured.client() as c:
            wait_until(lambda: len(c.list_executors().executors) == 1, 30, 0.2, "the executor to join")
        yield out
    finally:
        executor.kill()  # SIGTERM would drain first, for up to its 30 s grace
        executor.wait(10)


def _admin_ok(c: Client) -> bool:
    try:
        c.list_tasks(limit=1)
        return True
    except Exception:
        return False


def role_tokens(c: Client, admin: str, roles: tuple[str, ...], purpose: str) -> dict[str, str]:
    """Once the bootstrap ``admin`` token works through ``c``: ``admin`` and a new token per role."""
    wait_until(lambda: _admin_ok(c), 30, 0.2, "the bootstrap admin token")
    out = {"admin": admin}
    for role in roles:
        out[role], _ = c.create_token(role, description=f"{purpose} {role}")
    return out


def signed_in(running: Running, token: str) -> WebSession:
    web = running.web()
    web.sign_in(token)
    return web


# -- sign-in and sessions ---------------------------------------------------------------------


def test_a_signed_out_visitor_is_sent_to_the_sign_in_form(secured: Running, tokens: dict[str, str]) -> None:
    web = secured.web()
    reply = web.get("/tasks?q=etl")
    assert reply.status == 303
    assert reply.location == "/login?next=/tasks%3Fq%3Detl"
    login = web.get("/login")
    assert login.status == 200 and 'type="password"' in login.text
    # A live poll of a signed-out session gets a 401 (the page script reloads), not a redirect.
    assert web.get("/tasks", live=True).status == 401


def test_sign_in_sets_a_strict_http_only_cookie_and_a_new_session_id(
    secured: Running, tokens: dict[str, str]
) -> None:
    web = secured.web()
    csrf = web.csrf("/login")
    before = dict(web.cookies)
    reply = web.post("/login", {"csrf": csrf, "token": tokens["viewer"], "next": "/tasks"})
    assert reply.status == 303 and reply.location == "/tasks"
    cookie = reply.headers["set-cookie"]
    assert "HttpOnly" in cookie and "SameSite=Strict" in cookie and "Path=/" in cookie
    assert web.cookies != before  # the pre-sign-in id is not the session's id
    assert tokens["viewer"] not in cookie
    page = web.get("/tasks")
    assert page.status == 200 and "viewer" in page.text
    assert "default-src 'self'" in page.headers["content-security-policy"]


def test_a_wrong_token_is_refused_with_the_form_again(secured: Running, tokens: dict[str, str]) -> None:
    web = secured.web()
    reply = web.post("/login", {"csrf": web.csrf(), "token": new_token(), "next": "/"})
    assert reply.status == 401
    assert "sign-in refused" in reply.text and 'id="token"' in reply.text


def test_sign_out_ends_the_session_for_a_copied_cookie_too(secured: Running, tokens: dict[str, str]) -> None:
    web = signed_in(secured, tokens["viewer"])
    copy = WebSession(secured.http, dict(web.cookies))
    assert copy.get("/cluster").status == 200
    reply = web.post("/logout", {"csrf": csrf_of(web.get("/cluster").text)})
    assert reply.status == 303 and reply.location == "/login"
    assert copy.get("/cluster").status == 303


def test_a_revoked_token_ends_its_console_session(secured: Running, tokens: dict[str, str]) -> None:
    with secured.client() as c:
        token, _ = c.create_token("viewer", description="to revoke")
        web = signed_in(secured, token)
        assert web.get("/tasks").status == 200
        c.revoke_token(token)
    wait_until(lambda: web.get("/tasks").status == 303, 10, 0.1, "the session to end")


# -- CSRF and authorization --------------------------------------------------------------------


def test_a_post_without_the_session_csrf_token_is_refused(secured: Running, tokens: dict[str, str]) -> None:
    web = signed_in(secured, tokens["maintainer"])
    other = signed_in(secured, tokens["maintainer"])
    for form in ({}, {"csrf": "nope"}, {"csrf": other.csrf("/tasks")}):
        reply = web.post("/tasks/manual-job/trigger", form)
        assert reply.status == 403, form
        assert "CSRF" in reply.text
    with secured.client() as c:
        assert c.runs("manual-job") == []


def test_a_post_from_another_origin_is_refused(secured: Running, tokens: dict[str, str]) -> None:
    web = signed_in(secured, tokens["maintainer"])
    csrf = web.csrf("/tasks")
    reply = web.post("/tasks/manual-job/trigger", {"csrf": csrf}, {"Origin": "http://evil.example"})
    assert reply.status == 403 and "posted from http://evil.example" in reply.text


def test_a_viewer_sees_no_action_buttons_and_a_forged_post_is_refused_by_the_rpc(
    secured: Running, tokens: dict[str, str]
) -> None:
    web = signed_in(secured, tokens["viewer"])
    for path in ("/tasks", "/tasks/manual-job", "/workflows/diamond"):
        page = web.get(path)
        assert page.status == 200, path
        assert "data-action=" not in page.text, path
    assert 'href="/audit"' not in web.get("/tasks").text
    # A valid session and CSRF token, but the role lacks runs.operate: the RPC refuses.
    reply = web.post("/tasks/manual-job/trigger", {"csrf": csrf_of(web.get("/tasks").text)})
    assert reply.status == 403
    assert "lacks permission runs.operate" in reply.text
    with secured.client() as c:
        assert c.runs("manual-job") == []
    assert web.get("/audit").status == 403


def test_a_maintainer_triggers_a_task_and_lands_on_its_run(secured: Running, tokens: dict[str, str]) -> None:
    web = signed_in(secured, tokens["maintainer"])
    page = web.get("/tasks/manual-job")
    assert 'data-action="trigger"' in page.text and 'data-action="disable"' in page.text
    reply = web.post("/tasks/manual-job/trigger", {"csrf": csrf_of(page.text), "back": ""})
    assert reply.status == 303
    m = re.fullmatch(r"/runs/(manual-job%40\d+~m\d+)", reply.location)
    assert m is not None, reply.location
    run_page = web.get(reply.location)
    assert run_page.status == 200 and "triggered manual-job" in run_page.text
    timeline = re.search(r'<ol class="timeline" id="timeline">(.*?)</ol>', run_page.text, re.S)
    assert timeline is not None and "<strong>created</strong>" in timeline.group(1)
    with secured.client() as c:
        assert len(c.runs("manual-job")) == 1


def test_disable_and_enable_through_the_console(secured: Running, tokens: dict[str, str]) -> None:
    web = signed_in(secured, tokens["maintainer"])
    csrf = web.csrf("/tasks/etl-nightly")
    assert web.post("/tasks/etl-nightly/disable", {"csrf": csrf, "back": "/tasks/etl-nightly"}).status == 303
    with secured.client() as c:
        assert not c.get_task("etl-nightly").enabled
        page = web.get("/tasks/etl-nightly")
        assert "task etl-nightly disabled" in page.text and 'data-action="enable"' in page.text
        assert web.post("/tasks/etl-nightly/enable", {"csrf": csrf}).status == 303
        assert c.get_task("etl-nightly").enabled


def test_start_and_kill_a_workflow_run_and_start_a_backfill(secured: Running, tokens: dict[str, str]) -> None:
    web = signed_in(secured, tokens["maintainer"])
    csrf = web.csrf("/workflows/diamond")
    started = web.post("/workflows/diamond/start", {"csrf": csrf, "back": ""})
    assert started.status == 303 and started.location.startswith("/workflow-runs/diamond%40")
    page = web.get(started.location)
    assert page.status == 200
    for task in "abcd":
        assert f'id="node-{task}"' in page.text
    assert 'data-action="kill"' in page.text
    killed = web.post(started.location + "/kill", {"csrf": csrf, "back": started.location})
    assert killed.status == 303
    after = web.get(started.location)
    assert "killed" in after.text and 'data-action="kill"' not in after.text
    bf = web.post("/workflows/diamond/backfill", {"csrf": csrf, "start": "2026-01-01", "end": "2026-01-03"})
    assert bf.status == 303 and bf.location.startswith("/backfills/diamond~b"), bf.location
    page = web.get(bf.location)
    assert page.status == 200 and "3 runs" in page.text
    assert "diamond~b" in web.get("/backfills").text
    bad = web.post("/workflows/diamond/backfill", {"csrf": csrf, "start": "yesterday", "end": "x"})
    assert bad.status == 303
    assert "not an ISO 8601 time" in web.get(bad.location).text


def test_start_a_task_backfill_from_the_task_page(secured: Running, tokens: dict[str, str]) -> None:
    import datetime as dt

    web = signed_in(secured, tokens["maintainer"])
    page = web.get("/tasks/etl-nightly")
    assert 'id="task-backfill-form"' in page.text
    viewer = signed_in(secured, tokens["viewer"])
    assert 'id="task-backfill-form"' not in viewer.get("/tasks/etl-nightly").text
    csrf = web.csrf("/tasks/etl-nightly")
    today = dt.datetime.now(dt.UTC).date()
    days = {"start": str(today - dt.timedelta(days=3)), "end": str(today - dt.timedelta(days=2))}
    bf = web.post("/tasks/etl-nightly/backfill", {"csrf": csrf, **days})
    assert bf.status == 303 and bf.location.startswith("/backfills/etl-nightly~t"), bf.location
    page = web.get(bf.location)
    assert page.status == 200 and "backfill etl-nightly~t" in page.text and "2 runs (0 skipped)" in page.text
    assert 'href="/tasks/etl-nightly"' in page.text and "etl-nightly@" in page.text
    assert "etl-nightly~t" in web.get("/tasks/etl-nightly").text


def test_retry_a_failed_run_and_acknowledge_its_alert(secured: Running, tokens: dict[str, str]) -> None:
    with secured.client() as c:
        run = c.trigger("boom")
        wait_until(lambda: c.get_run(run.run_id).state == pb.FAILED, 30, 0.2, "boom to fail")
    web = signed_in(secured, tokens["maintainer"])
    path = "/runs/" + run.run_id.replace("@", "%40")
    page = web.get(path)
    assert 'data-action="retry"' in page.text and "bad news" in page.text
    assert re.search(r'<dd class="exit">4', page.text)
    assert web.post(path + "/retry", {"csrf": csrf_of(page.text), "back": path}).status == 303
    with secured.client() as c:
        wait_until(lambda: c.get_run(run.run_id).shards[0].attempt == 2, 30, 0.2, "the forced retry")
        alert = next(a.alert for a in c.alerts() if a.alert.run_id == run.run_id)
    alerts = web.get("/alerts")
    assert f'data-action="ack-{alert.id}"' in alerts.text
    assert signed_in(secured, tokens["viewer"]).get("/alerts").text.count("data-action=") == 0
    reply = web.post(f"/alerts/{alert.id}/ack", {"csrf": csrf_of(alerts.text), "back": "/alerts"})
    assert reply.status == 303
    assert f'data-action="ack-{alert.id}"' not in web.get("/alerts").text
    with secured.client() as c:
        assert next(a.alert for a in c.alerts() if a.alert.id == alert.id).acked_ms > 0


def test_cancel_a_run_from_its_page_and_list_then_cancel_a_tasks_runs_with_the_bulk_form(
    secured: Running, tokens: dict[str, str]
) -> None:
    with secured.client() as c:
        c.add_task(TaskSpec("slow", ManualTrigger(), command="sleep 600"))
        first, second = c.trigger("slow"), c.trigger("slow")
        wait_until(lambda: c.get_run(first.run_id).state == pb.RUNNING, 30, 0.2, "slow to run")
    web = signed_in(secured, tokens["maintainer"])
    path = "/runs/" + first.run_id.replace("@", "%40")
    page = web.get(path)
    assert 'data-action="cancel-run"' in page.text
    assert 'data-action="cancel-run"' not in signed_in(secured, tokens["viewer"]).get(path).text
    assert web.post(path + "/cancel", {"csrf": csrf_of(page.text), "back": path}).status == 303
    after = web.get(path)
    assert "cancelled " + first.run_id in after.text and 'data-action="cancel-run"' not in after.text
    task_page = web.get("/tasks/slow")
    form = {"csrf": csrf_of(task_page.text), "back": "/tasks/slow", "state": "", "reason": "bulk"}
    listed = web.post("/tasks/slow/cancel-runs", {**form, "dry_run": "1"})
    assert listed.status == 303 and "would cancel 1 run(s): " + second.run_id in web.get(listed.location).text
    done = web.post("/tasks/slow/cancel-runs", form)
    assert "cancelled 1 run(s)" in web.get(done.location).text
    with secured.client() as c:
        assert {c.get_run(r.run_id).state for r in (first, second)} == {pb.CANCELLED}


def test_mark_a_failed_task_succeeded_lets_its_downstream_run(
    secured: Running, tokens: dict[str, str]
) -> None:
    with secured.client() as c:
        run = c.wait_workflow_run(c.start_workflow_run("flaky").run_id, 60)
    assert run.state == pb.WORKFLOW_FAILED
    web = signed_in(secured, tokens["maintainer"])
    path = "/workflow-runs/" + run.run_id.replace("@", "%40")
    page = web.get(path)
    assert 'data-action="mark-success-c"' in page.text and "c broke" in page.text
    c_run = next(t for t in run.tasks if t.name == "c").run_id
    task_run = web.get("/runs/" + c_run.replace("@", "%40").replace("#", "%23"))
    assert task_run.status == 200 and 'href="/workflows/flaky"' in task_run.text
    assert 'data-action="retry"' not in task_run.text  # reruns go through the workflow run
    reply = web.post(path + "/mark-success", {"csrf": csrf_of(page.text), "task": "c", "back": path})
    assert reply.status == 303
    with secured.client() as c:
        done = c.wait_workflow_run(run.run_id, 60)
    assert done.state == pb.WORKFLOW_SUCCESS
    assert 'data-state="success"' in web.get(path).text


# -- pages ---------------------------------------------------------------------------------------


def test_every_page_renders_for_an_admin(secured: Running, tokens: dict[str, str]) -> None:
    web = signed_in(secured, tokens["admin"])
    with secured.client() as c:
        run = c.start_workflow_run("diamond")
        c.set_pool("warehouse", 3, description="the warehouse's connections")
    pages = {
        "/": "Leader",
        "/cluster?digests=1": "State digest",
        "/tasks": "bulk-000",
        "/tasks/ticker?window=10m": "Fire accounting",
        "/tasks/etl-nightly?at=2026-01-02T03:00:00Z": 'id="explained"',
        "/workflows": "diamond",
        "/workflows/diamond?task=b": 'id="lineage"',
        f"/workflow-runs/{run.run_id.replace('@', '%40')}": 'class="gantt"',
        "/backfills": "Backfills",
        "/alerts": "Alerts",
        "/audit": "AddTask",
        "/pools": 'id="pool-warehouse"><th scope="row">warehouse</th><td>3</td><td>0</td>',
    }
    for path, expect in pages.items():
        page = web.get(path)
        assert page.status == 200, (path, page.text[-500:])
        assert expect in page.text, path
        assert page.text.startswith("<!doctype html>"), path
    lineage = web.get("/workflows/diamond?task=b").text
    assert 'class="box m-focus"' in lineage and lineage.count("m-up") == 1 and lineage.count("m-down") == 1
    assert web.get("/tasks/no-such-task").status == 404
    assert web.get("/runs/nope@1").status == 404
    assert web.get("/no/such/page").status == 404


def test_values_from_the_cluster_are_escaped(secured: Running, tokens: dict[str, str]) -> None:
    page = signed_in(secured, tokens["viewer"]).get("/tasks/etl-nightly")
    assert "&lt;script&gt;x&lt;/script&gt;" in page.text and "<script>x" not in page.text


def test_the_task_list_paginates_and_filters(secured: Running, tokens: dict[str, str]) -> None:
    web = signed_in(secured, tokens["viewer"])
    first = web.get("/tasks")
    assert first.text.count("<tr data-task=") == 25 and 'rel="next"' in first.text
    second = web.get("/tasks?page=2")
    assert 'rel="prev"' in second.text and "bulk-0" in second.text
    only = web.get("/tasks?q=bulk-05")
    assert only.text.count("<tr data-task=") == 10 and 'rel="next"' not in only.text
    assert web.get("/tasks?ns=elsewhere").text.count("<tr data-task=") == 0


def test_the_strip_shows_the_newest_fires_coloured_by_outcome(
    secured: Running, tokens: dict[str, str]
) -> None:
    web = signed_in(secured, tokens["viewer"])
    with secured.client() as c:
        wait_until(lambda: len(c.fire_accounting("ticker")) >= 14, 30, 0.2, "ticker fires")
        newest = c.fire_accounting("ticker", limit=12, newest=True)
        everything = c.fire_accounting("ticker", limit=100000)
        (rec, recent), *_ = c.list_tasks_recent("ticker", 1, fires=12)
    assert len(newest) == 12 and newest[-1].nominal_ms >= everything[-2].nominal_ms
    assert rec.spec.name == recent.task == "ticker" and len(recent.fires) == len(recent.run_states) == 12
    assert recent.fires[0].nominal_ms >= newest[0].nominal_ms
    assert all(
        s != pb.RUN_STATE_UNSPECIFIED
        for f, s in zip(recent.fires, recent.run_states, strict=False)
        if f.run_id
    )
    assert [f.nominal_ms for f in newest] == sorted(f.nominal_ms for f in newest)
    row = re.search(r'<tr data-task="ticker">.*?</tr>', web.get("/tasks?q=ticker").text, re.S)
    assert row is not None
    assert row.group(0).count('class="tick s-') == 10


def test_a_live_poll_gets_the_live_region_only(secured: Running, tokens: dict[str, str]) -> None:
    web = signed_in(secured, tokens["viewer"])
    full = web.get("/cluster")
    assert 'data-refresh="3"' in full.text and 'src="/static/console.js"' in full.text
    live = web.get("/cluster", live=True)
    assert live.status == 200
    assert "<html" not in live.text and "<nav" not in live.text and 'id="nodes"' in live.text


def test_static_assets_ship_with_the_package(secured: Running) -> None:
    web = secured.web()
    css = web.get("/static/console.css")
    assert css.status == 200 and css.headers["content-type"].startswith("text/css")
    assert web.get("/static/console.js").headers["content-type"].startswith("text/javascript")
    assert web.get("/static/../templates/base.html").status == 404
    # The built-in routes are still the listener's own.
    assert web.get("/healthz").status == 200
    assert "raftsched_" in web.get("/metrics").text


# -- auth off --------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def open_node(tmp_path_factory: pytest.TempPathFactory, secured: Running) -> Iterator[Running]:
    # After the secured node's tests (module-scoped fixtures are torn down in reverse order).
    yield from _run_node(tmp_path_factory.mktemp("console-open"), auth=False)


def test_with_auth_off_every_page_says_so_and_needs_no_sign_in(open_node: Running) -> None:
    web = open_node.web()
    page = web.get("/tasks")
    assert page.status == 200 and 'id="auth-off"' in page.text
    assert web.get("/login").status == 303
    with open_node.client() as c:
        c.add_task(TaskSpec("hello", ManualTrigger(), command="true"))
    csrf = csrf_of(web.get("/tasks").text)
    assert 'data-action="trigger-hello"' in web.get("/tasks").text
    assert web.post("/tasks/hello/trigger", {"csrf": csrf}).status == 303
    assert web.post("/tasks/hello/trigger", {}).status == 403  # CSRF still applies
