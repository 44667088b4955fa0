"""The HTTP/JSON API against real nodes: a node in this process with [auth] (roles, namespaces,
audit, idempotency, problem documents, pagination), and a 3-process cluster with an executor
(follower redirects, stale reads, a run's output tails)."""

from __future__ import annotations

import concurrent.futures
import http.client
import json
import time
import urllib.parse
from collections.abc import Callable, Iterator

import pytest
from google.protobuf import json_format

from raftsched.rpc.http_api import message_to_json
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.console_support import write_http_config
from tests.integration.http_api_support import Answer, call
from tests.integration.test_console import Running, _admin_ok, _run_node

pytestmark = pytest.mark.integration

API = "/api/v1"


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Running]:
    yield from _run_node(tmp_path_factory.mktemp("http-api"), auth=True)


@pytest.fixture(scope="module")
def tokens(node: Running) -> dict[str, str]:
    out = {"admin": node.admin or ""}
    with node.client() as c:
        wait_until(lambda: _admin_ok(c), 30, 0.2, "the bootstrap admin token")
        out["viewer"], _ = c.create_token("viewer", description="http viewer")
        out["maintainer"], _ = c.create_token("maintainer", description="http maintainer")
        out["other"], _ = c.create_token("maintainer", ["other"], description="http other namespace")
    return out


def _task(name: str, **extra: object) -> dict[str, object]:
    return {"spec": {"name": name, "trigger": {"manual": {}}, "command": "echo hello", **extra}}


def test_create_read_update_delete_a_task(node: Running, tokens: dict[str, str]) -> None:
    m = tokens["maintainer"]
    made = call(node.http, "POST", f"{API}/tasks", _task("http-crud"), m, {"Idempotency-Key": "crud-1"})
    assert made.status == 200, made.body
    assert made.body["task"]["spec"]["name"] == "http-crud" and made.body["task"]["version"] == 1
    again = call(node.http, "POST", f"{API}/tasks", _task("http-crud"), m, {"Idempotency-Key": "crud-1"})
    assert again.status == 200 and again.body == made.body  # the first call's outcome
    dup = call(node.http, "POST", f"{API}/tasks", _task("http-crud"), m)
    assert dup.status == 409 and dup.body["code"] == "already_exists"

    got = call(node.http, "GET", f"{API}/tasks/http-crud", token=tokens["viewer"])
    assert got.status == 200
    with node.client() as c:  # the same JSON as the SDK's message (proto field names)
        assert got.body == {"task": message_to_json(c.get_task("http-crud"))}

    patched = call(
        node.http,
        "PATCH",
        f"{API}/tasks/http-crud",
        {"spec": {"trigger": {"manual": {}}, "command": "echo patched"}, "expected_version": 1},
        m,
    )
    assert patched.status == 200, patched.body
    assert patched.body["task"]["spec"]["command"] == "echo patched" and patched.body["task"]["version"] == 2
    stale = call(
        node.http,
        "PATCH",
        f"{API}/tasks/http-crud",
        {"spec": {"trigger": {"manual": {}}, "command": "x"}, "expected_version": 1},
        m,
    )
    assert stale.status == 409, stale.body

    off = call(node.http, "POST", f"{API}/tasks/http-crud:disable", token=m)
    assert off.status == 200 and off.body["task"]["enabled"] is False
    gone = call(node.http, "DELETE", f"{API}/tasks/http-crud", token=m)
    assert gone.status == 200 and gone.body == {}
    assert call(node.http, "GET", f"{API}/tasks/http-crud", token=m).status == 404


def test_refusals_name_the_permission_and_the_field(node: Running, tokens: dict[str, str]) -> None:
    anonymous = call(node.http, "GET", f"{API}/tasks")
    assert anonymous.status == 401 and anonymous.headers["content-type"] == "application/problem+json"
    assert anonymous.body["permission"] == "tasks.read" and anonymous.body["code"] == "unauthenticated"
    viewer = call(node.http, "POST", f"{API}/tasks", _task("nope"), tokens["viewer"])
    assert viewer.status == 403 and viewer.body["permission"] == "tasks.write"
    assert "lacks permission tasks.write" in viewer.body["detail"]
    ns = call(node.http, "POST", f"{API}/tasks", _task("nope", namespace="secret"), tokens["maintainer"])
    assert ns.status == 403 and "namespace 'secret'" in ns.body["detail"]
    bad = call(
        node.http,
        "POST",
        f"{API}/tasks",
        {"spec": {"name": "bad", "trigger": {"cron": {"expr": "61 * * * *"}}, "command": "x"}},
        tokens["maintainer"],
    )
    assert bad.status == 400 and bad.body["code"] == "invalid_argument"
    assert bad.body["field"].startswith("trigger") and bad.body["detail"].startswith(bad.body["field"])
    unknown = call(node.http, "POST", f"{API}/tasks", {"spec": {"nam": "x"}}, tokens["maintainer"])
    assert unknown.status == 400 and unknown.body["field"] == "body"


def test_namespaces_hide_tasks_as_the_grpc_api_does(node: Running, tokens: dict[str, str]) -> None:
    assert call(node.http, "POST", f"{API}/tasks", _task("http-hidden"), tokens["maintainer"]).status == 200
    hidden = call(node.http, "GET", f"{API}/tasks/http-hidden", token=tokens["other"])
    assert hidden.status == 404
    listed = call(node.http, "GET", f"{API}/tasks?prefix=http-", token=tokens["other"])
    assert listed.status == 200 and listed.body["tasks"] == []


def test_trigger_run_and_audit(node: Running, tokens: dict[str, str]) -> None:
    m = tokens["maintainer"]
    assert call(node.http, "POST", f"{API}/tasks", _task("http-trig"), m).status == 200
    viewer = call(node.http, "POST", f"{API}/tasks/http-trig:trigger", {}, tokens["viewer"])
    assert viewer.status == 403 and viewer.body["permission"] == "runs.operate"
    run = call(node.http, "POST", f"{API}/tasks/http-trig:trigger", {}, m, {"Idempotency-Key": "t1"})
    assert run.status == 200, run.body
    run_id = run.body["run"]["run_id"]
    repeat = call(node.http, "POST", f"{API}/tasks/http-trig:trigger", {}, m, {"Idempotency-Key": "t1"})
    assert repeat.body["run"]["run_id"] == run_id
    path = f"{API}/runs/{urllib.parse.quote(run_id, safe='')}"
    got = call(node.http, "GET", path, token=m)
    assert got.status == 200 and got.body["run"]["run_id"] == run_id
    logs = call(node.http, "GET", path + "/logs", token=m)
    assert logs.status == 200 and isinstance(logs.body, list)
    runs = call(node.http, "GET", f"{API}/tasks/http-trig/runs", token=m)
    assert [r["run_id"] for r in runs.body["runs"]] == [run_id]

    audit = call(node.http, "GET", f"{API}/audit?limit=1000", token=tokens["admin"])
    assert audit.status == 200
    mine = [r for r in audit.body["records"] if r["target"] == "http-trig"]
    assert {r["rpc"] for r in mine} >= {"/raftsched.v1.Admin/AddTask", "/raftsched.v1.Admin/TriggerNow"}
    assert all(r["principal"].startswith("token:") for r in mine)
    assert call(node.http, "GET", f"{API}/audit", token=m).status == 403


def test_pages_and_the_openapi_document(node: Running, tokens: dict[str, str]) -> None:
    m = tokens["maintainer"]
    for i in range(3):
        assert call(node.http, "POST", f"{API}/tasks", _task(f"page-{i}"), m).status == 200
    first = call(node.http, "GET", f"{API}/tasks?prefix=page-&page_size=2", token=m)
    assert [t["spec"]["name"] for t in first.body["tasks"]] == ["page-0", "page-1"]
    token = urllib.parse.quote(first.body["next_page_token"])
    rest = call(node.http, "GET", f"{API}/tasks?prefix=page-&page_size=2&page_token={token}", token=m)
    assert [t["spec"]["name"] for t in rest.body["tasks"]] == ["page-2"]
    assert rest.body["next_page_token"] == ""
    bad = call(node.http, "GET", f"{API}/tasks?page_size=lots", token=m)
    assert bad.status == 400 and bad.body["field"] == "page_size"
    doc = call(node.http, "GET", f"{API}/openapi.json")
    assert doc.status == 200 and doc.body["openapi"] == "3.1.0"
    metrics = call(node.http, "GET", "/metrics")
    assert 'raftsched_http_api_requests_total{node="n1",rpc="ListTasks",status="200"}' in metrics.body
    assert 'raftsched_http_api_requests_total{node="n1",rpc="ListTasks",status="400"}' in metrics.body
    assert 'raftsched_http_api_requests_total{node="n1",rpc="openapi",status="200"} 1.0' in metrics.body
    assert 'raftsched_http_api_request_seconds_count{node="n1",rpc="ListTasks"}' in metrics.body


# -- a 3-node cluster ------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[LocalCluster, dict[str, str]]]:
    base = tmp_path_factory.mktemp("http-api-cluster")
    http = write_http_config(base / "cluster.toml", 3)
    c = LocalCluster(base / "cluster.toml", base / "logs")
    c.start()
    executor = None
    try:
        leader = c.wait_for_leader(60)
        # Elected is not yet leading: until its first entry applies it answers 503 "taking over".
        wait_until(
            lambda: call(http[leader], "GET", f"{API}/tasks").status == 200,
            30,
            0.1,
            "the leader to finish taking over",
        )
        executor = c.start_executor("http-exec", slots=2)
        yield c, http
    finally:
        if executor is not None:
            executor.terminate()
            executor.wait(15)
        c.stop()


def _answered(address: str, method: str, path: str, body: object = None) -> Answer:
    out = call(address, method, path, body)
    assert out.status < 500, out.body
    return out


def test_followers_redirect_writes_and_answer_stale_reads(
    cluster: tuple[LocalCluster, dict[str, str]],
) -> None:
    c, http = cluster
    leader = c.wait_for_leader(60)
    follower = next(n for n in http if n != leader)

    def redirected() -> Answer | None:
        out = call(http[follower], "POST", f"{API}/tasks", _task("http-follow"))
        return out if out.status != 503 else None  # 503 until the follower hears of the leader

    moved = wait_until(redirected, 30, 0.1, "the follower to learn the leader")
    assert moved.status == 307 and moved.body["code"] == "not_leader"
    assert moved.location == f"http://{http[leader]}{API}/tasks"
    target = urllib.parse.urlsplit(moved.location)

    def created() -> Answer | None:  # 503 "taking over as leader; retry shortly" until its term is ready
        out = call(target.netloc, "POST", target.path, _task("http-follow"))
        return None if out.status == 503 else out

    made = wait_until(created, 30, 0.1, "the leader to finish taking over")
    assert made.status == 200, made.body

    read = call(http[follower], "GET", f"{API}/tasks/http-follow")
    assert read.status == 307 and read.location.startswith(f"http://{http[leader]}/")

    def applied() -> Answer | None:
        out = call(http[follower], "GET", f"{API}/tasks/http-follow?stale=true")
        return out if out.status == 200 else None

    local = wait_until(applied, 30, 0.1, "the follower to apply the task")
    assert local.body["task"]["spec"]["name"] == "http-follow"


def test_a_runs_logs_hold_its_output_tails(cluster: tuple[LocalCluster, dict[str, str]]) -> None:
    c, http = cluster
    leader = http[c.wait_for_leader(60)]
    assert _answered(leader, "POST", f"{API}/tasks", _task("http-logs")).status == 200
    run = _answered(leader, "POST", f"{API}/tasks/http-logs:trigger", {})
    path = f"{API}/runs/{urllib.parse.quote(run.body['run']['run_id'], safe='')}"

    def finished() -> Answer | None:
        got = _answered(leader, "GET", path)
        return got if got.body["run"]["state"] == "SUCCEEDED" else None

    wait_until(finished, 60, 0.2, "the run to succeed")
    logs = _answered(leader, "GET", path + "/logs")
    assert [s["stdout_tail"] for s in logs.body] == ["hello\n"]
    status = _answered(leader, "GET", f"{API}/status")
    json_format.ParseDict(status.body, pb.ClusterStatusReply())  # the reply message, field for field


Event = tuple[str, dict[str, object]]


def _events(
    address: str, path: str, until: Callable[[list[Event]], bool], timeout: float = 60.0
) -> list[Event]:
    """The events of the stream at ``path`` until ``until(events)`` holds; fails after ``timeout``
    (the stream sends a comment at least every 15 s, so the deadline is checked that often)."""
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=20)
    deadline = time.monotonic() + timeout
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        assert response.status == 200 and response.getheader("Content-Type") == "text/event-stream"
        out: list[Event] = []
        event = ""
        while not until(out):
            assert time.monotonic() < deadline, f"events so far: {out}"
            line = response.readline().decode().rstrip("\n")
            if line.startswith("event: "):
                event = line.removeprefix("event: ")
            elif line.startswith("data: "):
                out.append((event, json.loads(line.removeprefix("data: "))))
        return out
    finally:
        conn.close()


def test_a_watch_streams_a_runs_states_and_logs_follow(cluster: tuple[LocalCluster, dict[str, str]]) -> None:
    c, http_of = cluster
    leader = http_of[c.wait_for_leader(60)]
    made = _answered(leader, "POST", f"{API}/tasks", _task("http-watch", command="sleep 3; echo watched"))
    assert made.status == 200

    def succeeded(events: list[Event]) -> bool:
        return any(d.get("state") == "SUCCEEDED" for _, d in events)

    with concurrent.futures.ThreadPoolExecutor(1) as pool:
        watching = pool.submit(_events, leader, f"{API}/tasks/http-watch/runs:watch", succeeded)
        run = _answered(leader, "POST", f"{API}/tasks/http-watch:trigger", {})
        events = watching.result(timeout=90)
    run_id = run.body["run"]["run_id"]
    assert {e for e, _ in events} == {"run"} and {d["run_id"] for _, d in events} == {run_id}
    states = [d["state"] for _, d in events]
    assert "RUNNING" in states and states[-1] == "SUCCEEDED", states  # one event per change

    path = f"{API}/runs/{urllib.parse.quote(run_id, safe='')}/logs?follow=true"
    followed = _events(leader, path, lambda got: bool(got) and got[-1][0] == "end")
    assert followed[0][0] == "shard" and followed[0][1]["stdout_tail"] == "watched\n"
    assert followed[1:] == [("end", {})]


def test_calls_on_the_leader_give_way_to_a_due_fire_batch(node: Running, tokens: dict[str, str]) -> None:
    """Firing goes first: calls arriving while a fire batch is due or committing wait for it
    (counted in /metrics), and are answered as usual afterwards."""
    spec = {"name": "http-every-second", "trigger": {"cron": {"expr": "* * * * * *"}}, "command": "true"}
    made = call(node.http, "POST", f"{API}/tasks", {"spec": spec}, tokens["maintainer"])
    assert made.status == 200, made.body
    api = node.node.http_api
    assert api is not None and api.firing is node.node.firing_window
    before = api.held
    statuses: list[int] = []

    def hammer(_: int) -> None:  # back to back until one call arrived inside a firing window
        deadline = time.monotonic() + 60
        while api.held == before and time.monotonic() < deadline:
            got = call(node.http, "GET", f"{API}/tasks/http-every-second", token=tokens["viewer"])
            statuses.append(got.status)

    try:
        with concurrent.futures.ThreadPoolExecutor(4) as pool:
            list(pool.map(hammer, range(4)))
        assert api.held > before, "no call ever met a firing window"
        assert statuses and set(statuses) == {200}
        metrics = call(node.http, "GET", "/metrics").body
        held = next(
            line for line in metrics.splitlines() if line.startswith("raftsched_http_api_held_total{")
        )
        assert float(held.rsplit(" ", 1)[1]) >= api.held - before
        assert 'raftsched_http_api_held_seconds_total{node="n1"}' in metrics
    finally:
        gone = call(node.http, "DELETE", f"{API}/tasks/http-every-second", token=tokens["maintainer"])
        assert gone.status == 200, gone.body
