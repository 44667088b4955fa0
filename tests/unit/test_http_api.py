"""The HTTP/JSON API's route table, request building, error mapping and OpenAPI document, without a
node: the gateway calls a scripted Admin servicer through the real authorization interceptor."""

from __future__ import annotations

import asyncio
import json
import threading
import time
from pathlib import Path
from typing import Any

import grpc
import pytest
from google.protobuf import json_format
from openapi_spec_validator import validate

from raftsched.errors import InvalidSpec, NotFound, NotLeader
from raftsched.leader.window import FiringWindow
from raftsched.observability.listener import HttpListener, HttpRequest, HttpResponse, HttpStream
from raftsched.rpc import openapi, routes
from raftsched.rpc.http_api import FULL_LOGS, FULL_LOGS_QUERY, HTTP_STATUS, HttpApi, message_to_json
from raftsched.rpc.http_requests import ADMIN, BadRequest, build_request, merge_patch, query_fields
from raftsched.rpc.local_calls import LocalCalls
from raftsched.rpc.plumbing import rpc
from raftsched.security.auth import Principal, Role
from raftsched.security.authz import Authenticator, AuthInterceptor, caller
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

ROOT = Path(__file__).resolve().parents[2]


# -- the route table -------------------------------------------------------------------------------


def test_every_admin_rpc_has_a_route() -> None:
    routed = {r.rpc for r in routes.ROUTES}
    assert routed == {m.name for m in ADMIN.methods}


def test_every_route_names_real_fields() -> None:
    for r in routes.ROUTES:
        method = ADMIN.methods_by_name[r.rpc]
        for p in r.params:
            message: Any = method.input_type
            *parents, leaf = r.field_of(p).split(".")
            for name in parents:
                message = message.fields_by_name[name].message_type
            assert leaf in message.fields_by_name, (r, p)
        for name in r.fixed:
            assert name in method.input_type.fields_by_name, (r, name)
        if r.body not in ("", "*"):
            assert method.input_type.fields_by_name[r.body].message_type is not None, r
        if r.response:
            assert r.response.split(".")[0] in method.output_type.fields_by_name, r
        assert r.method in ("GET", "POST", "PUT", "PATCH", "DELETE"), r
        if r.merge is not None:
            assert r.method == "PATCH" and r.body == "*", r
            read = ADMIN.methods_by_name[r.merge.rpc]
            assert all(p in read.input_type.fields_by_name for p in r.params), r
            patched = method.input_type.fields_by_name[r.merge.field].message_type
            assert patched is not None and r.merge.version in method.input_type.fields_by_name, r
            current: Any = read.output_type
            for name in r.merge.current.split("."):
                current = current.fields_by_name[name].message_type
            assert current is patched, r
        reads = (
            "Get",
            "List",
            "Explain",
            "Lineage",
            "FireAccounting",
            "ClusterStatus",
            "NodeStatus",
            "Backup",
        )
        assert (r.method == "GET") == r.rpc.startswith(reads), r  # only reads are GET, every read is


def test_routes_match_percent_encoded_names_and_verbs() -> None:
    found = routes.find("POST", "/api/v1/tasks/a%2Fb%3Ac:trigger")
    assert found is not None
    assert (found[0].rpc, found[1]) == ("TriggerNow", {"name": "a/b:c"})
    found = routes.find("GET", "/api/v1/tasks/wf%23step")
    assert found is not None and found[1] == {"name": "wf#step"}
    found = routes.find("PATCH", "/api/v1/tasks/etl")
    assert found is not None and found[1] == {"spec.name": "etl"}
    found = routes.find("POST", "/api/v1/tasks/etl:disable")
    assert found is not None and found[0].fixed == {"enabled": False}
    assert routes.find("GET", "/api/v1/tasks/a/b") is None
    assert routes.allowed_methods("/api/v1/tasks") == ["GET", "POST"]


def test_a_custom_verb_is_never_read_as_part_of_a_name() -> None:
    # Found by schemathesis: OPTIONS /tasks/0:enable answered Allow: DELETE, GET, PATCH, POST.
    assert routes.find("GET", "/api/v1/tasks/etl:enable") is None
    assert routes.allowed_methods("/api/v1/tasks/etl:enable") == ["POST"]
    found = routes.find("GET", "/api/v1/tasks/etl%3Aenable")  # the task named "etl:enable"
    assert found is not None and found[1] == {"name": "etl:enable"}
    found = routes.find("GET", "/api/v1/tasks/a:b")  # not a verb of any route: a name
    assert found is not None and found[1] == {"name": "a:b"}


# -- request building ------------------------------------------------------------------------------


def _route(method: str, path: str) -> tuple[routes.Route, dict[str, str]]:
    found = routes.find(method, path)
    assert found is not None
    return found


def test_query_parameters_become_fields() -> None:
    route, params = _route("GET", "/api/v1/tasks/etl/runs")
    req = build_request(
        route,
        params,
        HttpRequest("GET", "", query={"page_size": "5", "state": "SUCCEEDED", "since_ms": "7", "stale": "1"}),
    )
    assert req == pb.ListRunsRequest(task="etl", page_size=5, state=pb.SUCCEEDED, since_ms=7)
    route, params = _route("GET", "/api/v1/executors")
    assert build_request(route, params, HttpRequest("GET", "", query={"include_left": "true"})) == (
        pb.ListExecutorsRequest(include_left=True)
    )


@pytest.mark.parametrize(
    ("query", "field"),
    [({"page_size": "many"}, "page_size"), ({"nope": "1"}, "nope"), ({"recent_fires": "-1"}, "recent_fires")],
)
def test_bad_query_parameters_name_the_parameter(query: dict[str, str], field: str) -> None:
    route, params = _route("GET", "/api/v1/tasks")
    with pytest.raises(BadRequest) as exc:
        build_request(route, params, HttpRequest("GET", "", query=query))
    assert exc.value.field == field


def test_body_path_and_idempotency_key() -> None:
    route, params = _route("PATCH", "/api/v1/tasks/etl")
    body = json.dumps({"spec": {"command": "true"}, "expected_version": 3}).encode()
    req = build_request(route, params, HttpRequest("PATCH", "", body=body, headers={"Idempotency-Key": "k1"}))
    assert isinstance(req, pb.UpdateTaskRequest)
    assert (req.spec.name, req.spec.command, req.expected_version, req.idempotency_key) == (
        "etl",
        "true",
        3,
        "k1",
    )
    other = json.dumps({"spec": {"name": "other"}}).encode()
    with pytest.raises(BadRequest, match="the path names 'etl', the body 'other'") as exc:
        build_request(route, params, HttpRequest("PATCH", "", body=other))
    assert exc.value.field == "spec.name"
    with pytest.raises(BadRequest) as exc:
        build_request(route, params, HttpRequest("PATCH", "", body=b'{"spec": {"nme": 1}}'))
    assert exc.value.field == "body"
    with pytest.raises(BadRequest, match="null is not a value") as exc:  # found by schemathesis
        build_request(route, params, HttpRequest("PATCH", "", body=b'{"spec": {"locks": [null]}}'))
    assert exc.value.field == "spec.locks[0]"
    for body, where in (  # found by schemathesis: protobuf took a float as the enum's value 0
        (b'{"spec": {"overlap": 2.5e-42}}', "spec.overlap"),
        (b'{"spec": {"locks": [{"name": "l"}], "misfire": true}}', "spec.misfire"),
    ):
        with pytest.raises(BadRequest, match="an enum value is a name or an integer") as exc:
            build_request(route, params, HttpRequest("PATCH", "", body=body))
        assert exc.value.field == where
    assert build_request(route, params, HttpRequest("PATCH", "", body=b'{"spec": {"overlap": 2.0}}'))
    with pytest.raises(BadRequest, match="not JSON"):
        build_request(route, params, HttpRequest("PATCH", "", body=b"{"))
    route, params = _route("GET", "/api/v1/tasks/etl")
    with pytest.raises(BadRequest, match="takes no body"):
        build_request(route, params, HttpRequest("GET", "", body=b"{}"))


def test_only_scalar_fields_are_query_parameters() -> None:
    for r in routes.ROUTES:
        for fd in query_fields(r):
            assert fd.message_type is None
        if r.body:
            assert query_fields(r) == []


# -- the gateway over a scripted servicer ----------------------------------------------------------


CRON_SPEC = pb.TaskSpec(
    name="etl-cron",
    trigger=pb.Trigger(cron=pb.CronTrigger(expr="0 2 * * *", timezone="Asia/Shanghai")),
    command="run-etl",
    shards=3,
    owner="data",
    selector={"zone": "a", "disk": "ssd"},
)


class Scripted(pb_grpc.AdminServicer):  # type: ignore[misc, unused-ignore]
    def __init__(self) -> None:
        self.seen: list[tuple[Any, str, tuple[tuple[str, str], ...]]] = []

    @rpc
    async def GetTask(self, request: pb.GetTaskRequest, context: Any) -> pb.TaskReply:
        self.seen.append((request, caller().principal.id, tuple(context.invocation_metadata())))
        if request.name == "missing":
            raise NotFound(f"task {request.name!r} does not exist")
        if request.name == "follower":
            raise NotLeader("this node is not the leader", leader="127.0.0.1:7001")
        if request.name == "nowhere":
            raise NotLeader("this node is not the leader", leader="10.0.0.9:1")
        if request.name == "boom":
            raise RuntimeError("a bug")
        if request.name == "etl-cron":
            return pb.TaskReply(task=pb.TaskRecord(spec=CRON_SPEC, version=7))
        return pb.TaskReply(task=pb.TaskRecord(spec=pb.TaskSpec(name=request.name), version=2**60))

    @rpc
    async def ListRuns(self, request: pb.ListRunsRequest, context: Any) -> pb.ListRunsReply:
        self.polls = getattr(self, "polls", 0) + 1
        self.seen.append((request, caller().principal.id, tuple(context.invocation_metadata())))
        if self.polls >= 4:
            raise NotFound("task 'etl' does not exist")  # deleted meanwhile: the stream ends
        runs = [pb.Run(run_id="etl@1", state=pb.RUNNING if self.polls < 3 else pb.SUCCEEDED)]
        if self.polls >= 2:
            runs.append(pb.Run(run_id="etl@2", state=pb.PENDING))
        return pb.ListRunsReply(runs=runs)

    @rpc
    async def UpdateTask(self, request: pb.UpdateTaskRequest, context: Any) -> pb.TaskReply:
        self.seen.append((request, caller().principal.id, tuple(context.invocation_metadata())))
        return pb.TaskReply(task=pb.TaskRecord(spec=request.spec, version=request.expected_version + 1))

    @rpc
    async def AddTask(self, request: pb.AddTaskRequest, context: Any) -> pb.TaskReply:
        raise InvalidSpec("spec.trigger.cron", "not a cron expression")


class Verifier:
    def cached(self, token: str) -> Principal | None:
        return {
            "admin-token": Principal("admin", Role.ADMIN, frozenset({"*"})),
            "viewer-token": Principal("viewer", Role.VIEWER, frozenset({"*"})),
        }.get(token)

    def check(self, token: str) -> Principal:
        from raftsched.errors import Unauthenticated

        raise Unauthenticated("unknown token")


def _api(auth: bool = True) -> tuple[HttpApi, Scripted]:
    servicer = Scripted()
    interceptors = [AuthInterceptor(Authenticator(Verifier()))] if auth else []  # type: ignore[arg-type]
    api = HttpApi(lambda grpc: {"127.0.0.1:7001": "127.0.0.1:8001"}.get(grpc), scheme="https")
    api.attach(LocalCalls(servicer, interceptors))
    return api, servicer


def _get(api: HttpApi, path: str, token: str | None = "admin-token", **kw: Any) -> tuple[HttpResponse, Any]:
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    raw, _, query = path.partition("?")
    q = dict(p.split("=", 1) for p in query.split("&")) if query else {}
    out = asyncio.run(
        api.handle(HttpRequest(kw.pop("method", "GET"), raw, q, headers, raw_query=query, **kw))
    )
    assert isinstance(out, HttpResponse)
    return out, json.loads(out.body)


def test_a_call_reaches_the_servicer_with_its_principal_and_metadata() -> None:
    api, servicer = _api()
    out, body = _get(api, "/api/v1/tasks/etl?stale=true")
    assert out.status == 200 and out.content_type == "application/json"
    assert body["task"]["spec"]["name"] == "etl"
    assert body["task"]["version"] == 2**60  # a number, exact
    req, who, metadata = servicer.seen[-1]
    assert req == pb.GetTaskRequest(name="etl") and who == "admin"
    assert ("raftsched-allow-stale", "1") in metadata


def test_refusals_are_problem_documents() -> None:
    api, _ = _api()
    out, body = _get(api, "/api/v1/tasks/missing")
    assert (out.status, out.content_type) == (404, "application/problem+json")
    assert body["code"] == "not_found" and body["grpc_status"] == "NOT_FOUND"
    assert body["detail"] == "task 'missing' does not exist" and body["instance"] == "/api/v1/tasks/missing"
    out, body = _get(api, "/api/v1/tasks/etl", token=None)
    assert out.status == 401 and body["permission"] == "tasks.read"
    assert out.headers["WWW-Authenticate"].startswith("Bearer")
    out, body = _get(api, "/api/v1/tasks", token="viewer-token", method="POST", body=b"{}")
    assert out.status == 403 and body["permission"] == "tasks.write"
    assert "lacks permission tasks.write" in body["detail"]
    out, body = _get(api, "/api/v1/tasks", method="POST", body=b'{"spec": {"name": "x"}}')
    assert out.status == 400 and body["field"] == "spec.trigger.cron"
    assert body["detail"] == "spec.trigger.cron: not a cron expression"
    out, body = _get(api, "/api/v1/tasks/boom")
    assert out.status == 500 and "a bug" not in body["detail"]
    out, body = _get(api, "/api/v1/tasks", method="PUT")
    assert out.status == 405 and out.headers["Allow"] == "GET, POST"
    out, body = _get(api, "/api/v1/tasks/etl", method="POST")
    assert out.status == 405 and out.headers["Allow"] == "DELETE, GET, PATCH, PUT"
    out, body = _get(api, "/api/v1/nothing")
    assert out.status == 404


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("shard=4294967296", "shard"),  # past uint32 (it raised ValueError: a 500)
        ("attempt=99999999999", "attempt"),
        ("tail_bytes=99999999999999999999", "tail_bytes"),  # 20 digits, past uint64
        ("since_line=-1", "since_line"),
        ("stream=both", "stream"),
        ("follow=maybe", "follow"),
        ("stale=true", "stale"),  # not a parameter of this route
    ],
)
def test_full_log_query_parameters_out_of_range_are_refused(query: str, field: str) -> None:
    api, _ = _api()
    out, body = _get(api, f"/api/v1/runs/etl@1/logs:full?{query}")
    assert (out.status, body["field"]) == (400, field)


def test_every_answer_is_observed_with_its_rpc_and_status() -> None:
    api, _ = _api()
    seen: list[tuple[str, int, float]] = []
    api.observe = lambda rpc, status, seconds: seen.append((rpc, status, seconds))
    ticks = iter([1.0, 1.25, 2.0, 2.5])
    api.monotonic = lambda: next(ticks)
    _get(api, "/api/v1/tasks/etl")
    _get(api, "/api/v1/nothing")
    assert seen == [("GetTask", 200, 0.25), ("none", 404, 0.5)]


def test_not_leader_redirects_to_the_leaders_http_listener() -> None:
    api, _ = _api()
    out, body = _get(api, "/api/v1/tasks/follower?stale=false")
    assert out.status == 307
    assert out.headers["Location"] == "https://127.0.0.1:8001/api/v1/tasks/follower?stale=false"
    assert body["leader"] == "127.0.0.1:7001"
    out, body = _get(api, "/api/v1/tasks/nowhere")
    assert out.status == 503 and body["code"] == "not_leader"


def test_without_auth_calls_run_as_the_anonymous_admin() -> None:
    api, servicer = _api(auth=False)
    out, _ = _get(api, "/api/v1/tasks/etl", token=None)
    assert out.status == 200 and servicer.seen[-1][1] == "anonymous"


def test_a_watch_sends_what_is_new_or_changed_until_a_call_is_refused() -> None:
    servicer = Scripted()
    api = HttpApi(lambda grpc: None, now_ms=lambda: 100_000, poll_s=0.0)
    api.attach(LocalCalls(servicer))

    async def read() -> list[str]:
        out = await api.handle(HttpRequest("GET", "/api/v1/tasks/etl/runs:watch"))
        assert isinstance(out, HttpStream) and out.content_type == "text/event-stream"
        return [chunk.decode() async for chunk in out.body]

    events = asyncio.run(read())
    heads = [e.split("\ndata: ")[0] for e in events]
    assert heads == [
        "event: run\nid: etl@1",  # first poll: what exists
        "event: run\nid: etl@2",  # second: only the new run (etl@1 unchanged)
        "event: run\nid: etl@1",  # third: etl@1 succeeded
        "event: error",  # fourth: refused, the stream ends
    ]
    assert json.loads(events[2].split("data: ")[1])["state"] == "SUCCEEDED"
    assert '"status": 404' in events[3]
    first = servicer.seen[0][0]
    assert first == pb.ListRunsRequest(task="etl", since_ms=100_000 - 60_000)  # the last minute
    assert api.streams == 0


def test_status_table_covers_every_grpc_code() -> None:
    assert set(HTTP_STATUS) == set(grpc.StatusCode)


# -- the OpenAPI document --------------------------------------------------------------------------


def test_committed_openapi_document_is_regenerated_exactly() -> None:
    committed = (ROOT / "raftsched" / "rpc" / "openapi.json").read_bytes()
    assert committed == openapi.render(), "run `python tools/genopenapi.py` and commit"
    assert openapi.document_bytes() == committed


def test_openapi_document_is_valid_and_names_every_route() -> None:
    doc = json.loads(openapi.document_bytes())
    validate(doc)
    documented = {(m.upper(), p) for p, ops in doc["paths"].items() for m in ops}
    full_logs = (FULL_LOGS[0], routes.PREFIX + FULL_LOGS[1])
    assert documented == {(r.method, routes.PREFIX + r.path) for r in routes.ROUTES} | {full_logs}
    op = doc["paths"][full_logs[1]][full_logs[0].lower()]
    assert [p["name"] for p in op["parameters"]] == ["run_id", *FULL_LOGS_QUERY]
    assert set(op["responses"]["200"]["content"]) == {"text/plain"}
    for r in routes.ROUTES:
        op = doc["paths"][routes.PREFIX + r.path][r.method.lower()]
        names = {p["name"] for p in op["parameters"] if p["in"] != "header"}
        follow = {"follow"} if r.stream is not None and r.stream.follow else set()
        assert (
            names
            == set(r.params) | {f.name for f in query_fields(r)} | (set() if r.write else {"stale"}) | follow
        )


def test_a_route_missing_from_the_document_is_caught(monkeypatch: pytest.MonkeyPatch) -> None:
    extra = routes.Route("GET", "/tasks/{name}/extra", "GetTask", "drift")
    monkeypatch.setattr(routes, "ROUTES", (*routes.ROUTES, extra))
    monkeypatch.setitem(routes._OPERATION_IDS, ("GET", "/tasks/{name}/extra"), "GetTask_extra")
    with pytest.raises(AssertionError):
        test_committed_openapi_document_is_regenerated_exactly()


def test_the_docs_list_every_route() -> None:
    section = (ROOT / "docs" / "reference" / "http.md").read_text()
    table = section.split("| route | RPC | what |\n|---|---|---|\n", 1)[1].split("\n\n", 1)[0]
    listed = [line.split("`")[1] for line in table.splitlines()]
    assert listed == [f"{r.method} {routes.PREFIX}{r.path}" for r in routes.ROUTES]


def test_the_wheel_ships_the_openapi_document() -> None:
    import tomllib

    patterns = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["package-data"]
    assert "rpc/openapi.json" in patterns["raftsched"]


def test_the_listener_routes_every_api_path_to_the_gateway() -> None:
    # Found by schemathesis: a %0A in a name fell through aiohttp's "{tail:.*}" to a text/plain 404.
    from tests.integration.http_api_support import call

    api, _ = _api(auth=False)

    async def main() -> list[tuple[int, str, Any]]:
        listener = HttpListener("127.0.0.1:0")
        for method, path, handler in api.routes():
            listener.add_route(method, path, handler)
        await listener.start()
        try:
            assert listener.bound is not None
            out = []
            for path in ("/api/v1/tasks/a%0Ab", "/api/v1/nothing%0A"):
                got = await asyncio.to_thread(call, listener.bound, "GET", path)
                out.append((got.status, got.headers["content-type"], got.body))
            return out
        finally:
            await listener.stop()

    (ok_status, ok_type, ok_body), (missing, missing_type, _) = asyncio.run(main())
    assert (ok_status, ok_type, ok_body["task"]["spec"]["name"]) == (200, "application/json", "a\nb")
    assert (missing, missing_type) == (404, "application/problem+json")


def test_a_node_with_a_damaged_store_refuses_api_calls_as_its_grpc_port_does() -> None:
    from raftsched.rpc.plumbing import DamagedGuard

    damage = ""
    servicer = Scripted()
    api = HttpApi(lambda grpc: None, scheme="https")
    api.attach(LocalCalls(servicer, [DamagedGuard(lambda: damage)]))
    out, _ = _get(api, "/api/v1/tasks/etl", token=None)
    assert out.status == 200
    damage = "data.mdb: content checksum mismatch"
    out, body = _get(api, "/api/v1/tasks/etl", token=None)
    assert out.status == 503 and "stored state is damaged" in body["detail"]


# -- PATCH is a merge patch, PUT replaces ------------------------------------------------------------


def test_merge_patch_follows_rfc_7396_and_the_message() -> None:
    current = message_to_json(CRON_SPEC)
    merged = merge_patch(
        current,
        {
            "command": "run-etl --fast",  # replaces
            "owner": None,  # null: back to its default
            "trigger": {"cron": {"expr": "30 2 * * *", "timezone": None}},  # merges: UTC now
            "selector": {"disk": None, "gpu": "yes"},  # a map merges key by key
            "maxRetries": 2,  # a JSON name works as the proto name does
        },
        pb.TaskSpec.DESCRIPTOR,
    )
    spec = pb.TaskSpec()
    json_format.ParseDict(merged, spec)
    assert spec.command == "run-etl --fast" and spec.owner == "" and spec.shards == 3
    assert spec.trigger.cron.expr == "30 2 * * *" and spec.trigger.cron.timezone == ""
    keep = merge_patch(current, {"trigger": {"cron": {"expr": "1 2 * * *"}}}, pb.TaskSpec.DESCRIPTOR)
    assert keep["trigger"]["cron"] == {"expr": "1 2 * * *", "timezone": "Asia/Shanghai"}
    assert dict(spec.selector) == {"zone": "a", "gpu": "yes"} and spec.max_retries == 2
    # A oneof member replaces its siblings: cron becomes manual, not both (which would not parse).
    manual = merge_patch(current, {"trigger": {"manual": {}}}, pb.TaskSpec.DESCRIPTOR)
    assert manual["trigger"] == {"manual": {}}
    assert merge_patch(current, {}, pb.TaskSpec.DESCRIPTOR) == current
    # Removing a oneof member that is not set leaves the one that is (RFC 7396: a no-op).
    kept = merge_patch(current, {"trigger": {"interval": None}}, pb.TaskSpec.DESCRIPTOR)
    assert kept["trigger"] == current["trigger"]
    # An unknown name stays for the parser to refuse by name, null or not.
    assert merge_patch(current, {"bogus": None}, pb.TaskSpec.DESCRIPTOR)["bogus"] == {}


def test_patch_merges_onto_the_task_at_the_version_read() -> None:
    api, servicer = _api()
    body = json.dumps({"spec": {"command": "run-etl --fast", "owner": None}}).encode()
    out, reply = _get(api, "/api/v1/tasks/etl-cron", method="PATCH", body=body)
    assert out.status == 200, reply
    read, update = servicer.seen[-2][0], servicer.seen[-1][0]
    assert read == pb.GetTaskRequest(name="etl-cron")
    expected = pb.TaskSpec()
    expected.CopyFrom(CRON_SPEC)
    expected.command, expected.owner = "run-etl --fast", ""
    assert update.spec == expected and update.expected_version == 7  # the version read
    # expected_version 0 ("any version") is the version read too: the merge was made from it.
    body = json.dumps({"spec": {"shards": 2}, "expected_version": 0}).encode()
    _get(api, "/api/v1/tasks/etl-cron", method="PATCH", body=body)
    assert servicer.seen[-1][0].expected_version == 7
    # An expected_version in the body wins: the servicer refuses it if the task moved on.
    body = json.dumps({"spec": {"shards": 1}, "expected_version": 6}).encode()
    _get(api, "/api/v1/tasks/etl-cron", method="PATCH", body=body)
    assert servicer.seen[-1][0].expected_version == 6 and servicer.seen[-1][0].spec.shards == 1


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"spec": "command=x"}, "spec"),
        ({"spec": {"locks": [None]}}, "spec.locks[0]"),  # a list replaces: no null in it
        ({"spec": {"bogus": None}}, "body"),  # the detail names the unknown field
        ({"spec": {"name": "other"}}, "spec.name"),
    ],
)
def test_a_bad_patch_names_the_field(body: dict[str, Any], field: str) -> None:
    api, servicer = _api()
    out, reply = _get(api, "/api/v1/tasks/etl-cron", method="PATCH", body=json.dumps(body).encode())
    assert out.status == 400 and reply["field"] == field, reply
    assert not any(isinstance(seen[0], pb.UpdateTaskRequest) for seen in servicer.seen)
    # Refused before the read (a Raft round on the leader), as after it, for a missing task too.
    assert servicer.seen == []
    out, missing = _get(api, "/api/v1/tasks/missing", method="PATCH", body=json.dumps(body).encode())
    assert out.status == 400 and missing["field"] == field
    assert missing["detail"] == reply["detail"].replace("etl-cron", "missing")


def test_patch_refused_by_the_read_answers_as_the_read_does() -> None:
    api, _ = _api()
    out, reply = _get(api, "/api/v1/tasks/missing", method="PATCH", body=b'{"spec": {"command": "x"}}')
    assert out.status == 404, reply
    out, _ = _get(api, "/api/v1/tasks/follower", method="PATCH", body=b"{}")
    assert out.status == 307 and out.headers["Location"] == "https://127.0.0.1:8001/api/v1/tasks/follower"
    out, reply = _get(api, "/api/v1/tasks/etl-cron", token="viewer-token", method="PATCH", body=b"{}")
    assert out.status == 403 and reply["permission"] == "tasks.write"


def test_put_replaces_the_whole_spec() -> None:
    api, servicer = _api()
    body = json.dumps({"spec": {"trigger": {"manual": {}}, "command": "x"}, "expected_version": 7}).encode()
    out, reply = _get(api, "/api/v1/tasks/etl-cron", method="PUT", body=body)
    assert out.status == 200, reply
    update = servicer.seen[-1][0]
    assert update == pb.UpdateTaskRequest(
        spec=pb.TaskSpec(name="etl-cron", trigger=pb.Trigger(manual=pb.ManualTrigger()), command="x"),
        expected_version=7,
    )
    assert not any(isinstance(seen[0], pb.GetTaskRequest) for seen in servicer.seen)


# -- signed webhooks go the way every other call goes ---------------------------------------------

HOOK_SECRET = b"a-webhook-secret-for-the-tests"


class Emitting(pb_grpc.AdminServicer):  # type: ignore[misc, unused-ignore]
    """EmitEvent that records who called, and (while ``hold`` is set) waits until released."""

    def __init__(self) -> None:
        self.callers: list[str] = []
        self.hold: asyncio.Event | None = None

    @rpc
    async def EmitEvent(self, request: pb.EmitEventRequest, context: Any) -> pb.EmitEventReply:
        self.callers.append(caller().principal.id)
        if self.hold is not None:
            await self.hold.wait()
        return pb.EmitEventReply(event=pb.EventRecord(name=request.name, emitted_by=caller().principal.id))


def _signed(body: bytes, secret: bytes = HOOK_SECRET) -> dict[str, str]:
    import hashlib
    import hmac

    return {"X-Signature-256": "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()}


def _hook_api(damage: list[str] | None = None, **limits: Any) -> tuple[HttpApi, Emitting]:
    from raftsched.config.eventhooks import EventHook
    from raftsched.rpc.plumbing import DamagedGuard

    servicer = Emitting()
    damaged = damage if damage is not None else []
    interceptors = [
        DamagedGuard(lambda: damaged[0] if damaged else ""),
        AuthInterceptor(Authenticator(Verifier())),  # type: ignore[arg-type]
    ]
    api = HttpApi(lambda grpc: None, scheme="https", **limits)
    api.attach(LocalCalls(servicer, interceptors))
    api.event_hooks = {"orders": EventHook("orders", HOOK_SECRET, "default")}
    return api, servicer


def _emit(api: HttpApi, headers: dict[str, str], body: bytes = b'{"n": 1}') -> HttpRequest:
    return HttpRequest("POST", "/api/v1/events/orders", {}, headers, body)


def test_a_signed_webhook_passes_the_interceptors_as_its_principal() -> None:
    damage: list[str] = []
    api, servicer = _hook_api(damage)
    seen: list[tuple[str, int]] = []
    api.observe = lambda rpc, status, seconds: seen.append((rpc, status))
    api.monotonic = lambda: 0.0
    body = b'{"n": 1}'
    out = asyncio.run(api.handle(_emit(api, _signed(body), body)))
    assert isinstance(out, HttpResponse) and out.status == 200, out.body
    assert json.loads(out.body)["event"]["emitted_by"] == "webhook:orders"
    assert servicer.callers == ["webhook:orders"] and seen == [("EmitEvent", 200)]
    # The damage guard refuses a signed call as it refuses a token's (it was skipped before).
    damage.append("data.mdb: content checksum mismatch")
    for headers in (_signed(body), {"Authorization": "Bearer admin-token"}):
        out = asyncio.run(api.handle(_emit(api, headers, body)))
        assert isinstance(out, HttpResponse) and out.status == 503
        assert "stored state is damaged" in json.loads(out.body)["detail"]
    assert servicer.callers == ["webhook:orders"]
    assert seen[1:] == [("EmitEvent", 503), ("EmitEvent", 503)]


def test_a_bad_signature_is_refused_as_a_bad_token_is() -> None:
    api, servicer = _hook_api()
    body = b'{"n": 1}'
    signed = asyncio.run(api.handle(_emit(api, _signed(body, b"another-secret-of-enough-length"), body)))
    unsigned = asyncio.run(api.handle(_emit(api, {"Authorization": "Bearer nobody"}, body)))
    assert isinstance(signed, HttpResponse) and isinstance(unsigned, HttpResponse)
    assert signed.status == unsigned.status == 401
    assert signed.headers["WWW-Authenticate"] == unsigned.headers["WWW-Authenticate"]
    problem, token_problem = json.loads(signed.body), json.loads(unsigned.body)
    assert "does not match" in problem["detail"]
    for key in ("code", "grpc_status", "permission", "type"):
        assert problem[key] == token_problem[key], key
    assert servicer.callers == []


def test_a_flood_beyond_the_limit_is_refused_for_signed_and_token_calls_alike() -> None:
    api, servicer = _hook_api(max_calls=1, max_waiting=1)
    body = b'{"n": 1}'

    async def main() -> list[HttpResponse]:
        servicer.hold = asyncio.Event()
        first = asyncio.ensure_future(api.handle(_emit(api, {"Authorization": "Bearer admin-token"}, body)))
        second = asyncio.ensure_future(api.handle(_emit(api, _signed(body), body)))
        deadline = asyncio.get_running_loop().time() + 10
        while not (servicer.callers and api.waiting == 1):  # one runs, one waits its turn
            assert asyncio.get_running_loop().time() < deadline, "the calls never queued"
            await asyncio.sleep(0.001)
        flood = [
            await api.handle(_emit(api, _signed(body), body)),
            await api.handle(_emit(api, {"Authorization": "Bearer admin-token"}, body)),
        ]
        servicer.hold.set()
        done = [await first, await second]
        return [*flood, *done]  # type: ignore[list-item]

    signed_flood, token_flood, first, second = asyncio.run(main())
    for refused in (signed_flood, token_flood):
        assert refused.status == 429 and refused.headers["Retry-After"] == "1"
        problem = json.loads(refused.body)
        assert (problem["code"], problem["grpc_status"]) == ("resource_exhausted", "RESOURCE_EXHAUSTED")
    assert (first.status, second.status) == (200, 200)
    assert servicer.callers == ["admin", "webhook:orders"]


def test_read_answers_are_cached_and_write_answers_are_not() -> None:
    api, _ = _api()
    first, body = _get(api, "/api/v1/tasks/etl-cron")
    again, _ = _get(api, "/api/v1/tasks/etl-cron")
    assert first.body == again.body and body["task"]["version"] == 7
    assert len(api.rendered) == 1
    patch = json.dumps({"spec": {"command": "secret-ish"}}).encode()
    out, reply = _get(api, "/api/v1/tasks/etl-cron", method="PATCH", body=patch)
    assert out.status == 200 and reply["task"]["spec"]["command"] == "secret-ish"
    assert len(api.rendered) == 1  # the PATCH's read is not rendered; its answer is not kept


def _windowed_api(window: FiringWindow, hold_ms: int = 10_000, **limits: Any) -> tuple[HttpApi, Scripted]:
    servicer = Scripted()
    api = HttpApi(
        lambda grpc: None, now_ms=lambda: 1_000_000, firing=window, firing_hold_ms=hold_ms, **limits
    )
    api.attach(LocalCalls(servicer, [AuthInterceptor(Authenticator(Verifier()))]))  # type: ignore[arg-type]
    return api, servicer


def _task_request() -> HttpRequest:
    return HttpRequest("GET", "/api/v1/tasks/etl", {}, {"Authorization": "Bearer admin-token"})


def test_a_call_waits_while_the_firing_window_is_busy_and_goes_when_it_closes() -> None:
    window = FiringWindow(lead_ms=20)
    window.publish(1_000_010, 0)  # a batch due in 10 ms: inside the lead
    api, servicer = _windowed_api(window)

    async def main() -> HttpResponse:
        call = asyncio.ensure_future(api.handle(_task_request()))
        deadline = asyncio.get_running_loop().time() + 10
        while api.held == 0:
            assert asyncio.get_running_loop().time() < deadline, "the call was never held"
            await asyncio.sleep(0.001)
        window.publish(1_000_010, 1)  # proposed: still busy, nobody is told
        for _ in range(20):
            await asyncio.sleep(0)
        assert not call.done() and servicer.seen == []  # the servicer was not reached
        # The driver's thread sees the commit: the window opens and the call goes on.
        opener = threading.Thread(target=window.publish, args=(1_001_000, 0))
        opener.start()
        opener.join()
        out = await asyncio.wait_for(call, 10)
        assert isinstance(out, HttpResponse)
        return out

    out = asyncio.run(main())
    assert out.status == 200 and json.loads(out.body)["task"]["spec"]["name"] == "etl"
    assert len(servicer.seen) == 1 and api.held == 1


def test_a_call_waits_for_the_firing_window_at_most_its_bound() -> None:
    window = FiringWindow()
    window.publish(1_000_000, 1)  # a batch that never commits
    api, servicer = _windowed_api(window, hold_ms=50)
    started = time.monotonic()
    out = asyncio.run(api.handle(_task_request()))
    waited = time.monotonic() - started
    assert isinstance(out, HttpResponse) and out.status == 200
    assert 0.05 <= waited < 5 and api.held == 1 and len(servicer.seen) == 1


@pytest.mark.parametrize(("due", "hold_ms"), [(None, 10_000), (1_000_500, 10_000), (1_000_000, 0)])
def test_a_call_goes_at_once_when_the_window_is_idle_or_waiting_is_off(due: int | None, hold_ms: int) -> None:
    window = FiringWindow(lead_ms=20)  # a follower (None), a batch 500 ms away, or waiting off
    window.publish(due, 0)
    api, servicer = _windowed_api(window, hold_ms=hold_ms)
    out = asyncio.run(asyncio.wait_for(api.handle(_task_request()), 5))
    assert isinstance(out, HttpResponse) and out.status == 200
    assert api.held == 0 and len(servicer.seen) == 1


def test_calls_held_for_the_firing_window_count_against_the_waiting_bound() -> None:
    window = FiringWindow()
    window.publish(1_000_000, 1)
    api, servicer = _windowed_api(window, max_waiting=1)

    async def main() -> tuple[HttpResponse | HttpStream, HttpResponse | HttpStream]:
        first = asyncio.ensure_future(api.handle(_task_request()))
        deadline = asyncio.get_running_loop().time() + 10
        while api.held == 0:
            assert asyncio.get_running_loop().time() < deadline, "the call was never held"
            await asyncio.sleep(0.001)
        refused = await api.handle(_task_request())  # one waits already: the bound
        window.publish(1_001_000, 0)
        return refused, await asyncio.wait_for(first, 10)

    refused, first = asyncio.run(main())
    assert isinstance(refused, HttpResponse) and refused.status == 429
    assert refused.headers["Retry-After"] == "1" and "fire batch" in json.loads(refused.body)["detail"]
    assert first.status == 200 and len(servicer.seen) == 1


def test_the_firing_window_is_waited_for_on_whichever_loop_serves() -> None:
    window = FiringWindow()
    api, servicer = _windowed_api(window)

    async def held_then_opened() -> int:
        window.publish(1_000_000, 1)
        call = asyncio.ensure_future(api.handle(_task_request()))
        while api.held == held_before:
            await asyncio.sleep(0.001)
        threading.Thread(target=window.publish, args=(1_001_000, 0)).start()
        out = await asyncio.wait_for(call, 10)
        return out.status

    for _ in range(2):  # a second loop (a restarted listener): its own wake-up, not the first's
        held_before = api.held
        assert asyncio.run(held_then_opened()) == 200
    assert api.held == 2 and len(servicer.seen) == 2
