"""``POST /api/v1/events/{name}`` on a real node with auth on (issue 30 §5): a body signed with
the event's shared secret (GitHub-style ``X-Signature-256``) emits without a raftsched token,
its dedupe key taken from a JSON pointer into the body; a wrong signature is 401; a bearer token
works too (and without events.emit is 403); a duplicate is answered with the first acceptance."""

from __future__ import annotations

import asyncio
import gc
import hashlib
import hmac
import http.client
import json
import sys
import threading
from collections.abc import Iterator

import pytest

from raftsched.client import Client
from raftsched.config.load import load_config
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.security.tokens import new_token
from raftsched.server.node import Node
from raftsched.testing.cluster import wait_until
from tests.integration.console_support import write_http_config
from tests.integration.http_api_support import call

pytestmark = pytest.mark.integration

SECRET = b"a-shared-webhook-secret-of-some-length"
API = "/api/v1"


def _sign(body: bytes, secret: bytes = SECRET) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def _post(address: str, path: str, body: bytes, headers: dict[str, str]) -> tuple[int, dict[str, object]]:
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("POST", path, body=body, headers={"Content-Type": "application/json", **headers})
        response = conn.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        conn.close()


@pytest.fixture(scope="module")
def node(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Node, str, str, str]]:
    base = tmp_path_factory.mktemp("event-webhooks")
    admin = new_token()
    (base / "admin.token").write_text(admin + "\n")
    (base / "hook.secret").write_bytes(SECRET + b"\n")
    extra = (
        '[auth]\nbootstrap_token_file = "admin.token"\n\n'
        '[events.orders-ready]\nsecret_file = "hook.secret"\nkey_pointer = "/partition/date"\n'
    )
    http = write_http_config(base / "cluster.toml", 1, extra)
    config = load_config(base / "cluster.toml")
    running = Node(config, "n1")
    switch = sys.getswitchinterval()
    running.start()
    loop = asyncio.new_event_loop()
    stop = asyncio.Event()

    def serve() -> None:
        asyncio.set_event_loop(loop)
        loop.run_until_complete(running.serve(stop))

    thread = threading.Thread(target=serve, name="webhook-test-node", daemon=True)
    thread.start()
    grpc = config.node("n1").grpc
    with Client(grpc, token=admin, timeout=10) as c:
        wait_until(lambda: bool(c.node_status().leader_id), 30, 0.1, "a leader")

        def admin_ok() -> bool:
            try:
                c.list_tasks()
                return True
            except Exception:
                return False

        wait_until(admin_ok, 30, 0.2, "the bootstrap admin token")
    try:
        yield running, http["n1"], grpc, admin
    finally:
        loop.call_soon_threadsafe(stop.set)
        thread.join(15)
        running.stop()
        sys.setswitchinterval(switch)
        gc.unfreeze()


def test_a_signed_webhook_emits_without_a_token_and_a_bad_signature_is_refused(
    node: tuple[Node, str, str, str],
) -> None:
    _, http, grpc, admin = node
    with Client(grpc, token=admin, timeout=10) as c:
        c.add_task(TaskSpec("load", ManualTrigger(), command="true", on_event="orders-ready"))
        viewer, _ = c.create_token("viewer", description="webhook viewer")
        maintainer, _ = c.create_token("maintainer", description="webhook maintainer")
        elsewhere, _ = c.create_token("maintainer", ["other"], description="another namespace")
    body = json.dumps({"partition": {"date": "2026-12-04"}, "rows": 3}).encode()
    path = f"{API}/events/orders-ready"
    status, got = _post(http, path, body, {"X-Signature-256": _sign(body)})
    assert status == 200, got
    event = got["event"]
    assert isinstance(event, dict)
    assert (event["name"], event["key"], event["emitted_by"]) == (
        "orders-ready",
        "2026-12-04",
        "webhook:orders-ready",
    )
    assert json.loads(str(event["payload_json"])) == {"partition": {"date": "2026-12-04"}, "rows": 3}
    again, dup = _post(http, path, body, {"X-Signature-256": _sign(body)})
    assert again == 200 and dup["duplicate"] is True and dup["event"] == event
    # A wrong signature (another secret, or a changed body) is refused, naming why.
    bad, problem = _post(http, path, body, {"X-Signature-256": _sign(body, b"x" * 32)})
    assert bad == 401 and "does not match" in str(problem["detail"])
    tampered = body.replace(b"3", b"4")
    assert _post(http, path, tampered, {"X-Signature-256": _sign(body)})[0] == 401
    # No signature, no token: the ordinary API's 401; a viewer's token: 403 naming events.emit.
    assert _post(http, path, body, {})[0] == 401
    status, problem = _post(http, path, body, {"Authorization": f"Bearer {viewer}"})
    assert status == 403 and problem["permission"] == "events.emit"
    # A maintainer's token with the key in a header: a new event.
    status, got = _post(
        http, path, b'{"rows": 9}', {"Authorization": f"Bearer {maintainer}", "X-Event-Key": "b-2"}
    )
    assert status == 200 and got["event"]["key"] == "b-2" and not got.get("duplicate")  # type: ignore[index]
    # events.emit is per namespace: a maintainer of "other" may not emit into "default", and a
    # signed call may not leave its hook's namespace.
    status, problem = _post(http, path, b"{}", {"Authorization": f"Bearer {elsewhere}", "X-Event-Key": "c"})
    assert status == 403 and "namespace" in str(problem["detail"]), problem
    status, _ = _post(http, path + "?key=c&namespace=other", b"{}", {"Authorization": f"Bearer {elsewhere}"})
    assert status == 200
    assert _post(http, path + "?namespace=other", body, {"X-Signature-256": _sign(body)})[0] == 403
    # An event with no [events.x] secret cannot be signed; a body that is not an object is 400.
    other = f"{API}/events/unknown-event"
    assert _post(http, other, body, {"X-Signature-256": _sign(body)})[0] == 401
    assert _post(http, path, b"[1]", {"X-Signature-256": _sign(b"[1]")})[0] == 400
    with Client(grpc, token=admin, timeout=10) as c:
        wait_until(lambda: len(c.runs("load")) == 3, 30, 0.1, "one run per accepted event")
    listed = call(http, "GET", f"{API}/events?name=orders-ready", token=admin)
    assert listed.status == 200 and [e["key"] for e in listed.body["events"]] == ["c", "b-2", "2026-12-04"]


def _metric(address: str, rpc: str, status: str) -> float:
    """``raftsched_http_api_requests_total{rpc, status}`` as the node's /metrics shows it (0: none)."""
    answer = call(address, "GET", "/metrics")
    assert answer.status == 200
    for line in str(answer.body).splitlines():
        labelled = f'rpc="{rpc}"' in line and f'status="{status}"' in line
        if line.startswith("raftsched_http_api_requests_total{") and labelled:
            return float(line.rsplit(" ", 1)[1])
    return 0.0


def test_a_signed_webhook_is_counted_and_audited_as_its_principal(node: tuple[Node, str, str, str]) -> None:
    _, http, grpc, admin = node
    path = f"{API}/events/orders-ready"
    ok_before, refused_before = _metric(http, "EmitEvent", "200"), _metric(http, "EmitEvent", "401")
    body = json.dumps({"partition": {"date": "2026-12-05"}}).encode()
    status, got = _post(http, path, body, {"X-Signature-256": _sign(body)})
    assert status == 200, got
    assert _post(http, path, body, {"X-Signature-256": _sign(body, b"y" * 32)})[0] == 401
    assert _metric(http, "EmitEvent", "200") == ok_before + 1
    assert _metric(http, "EmitEvent", "401") == refused_before + 1
    with Client(grpc, token=admin, timeout=10) as c:
        records = c.audit(principal="webhook:orders-ready")
    assert records, "no audit record of the signed call"
    assert (records[0].rpc, records[0].target) == ("/raftsched.v1.Admin/EmitEvent", "orders-ready")
