"""The webhook half of ``POST /api/v1/events/{name}`` (raftsched.rpc.webhooks) and the
``[events.<name>]`` config tables (raftsched.config.eventhooks)."""

from __future__ import annotations

import hashlib
import hmac
from pathlib import Path

import pytest

from raftsched.config.eventhooks import EventHook, parse_event_hooks
from raftsched.errors import InvalidSpec
from raftsched.rpc import webhooks
from raftsched.security.auth import Permission

SECRET = b"0123456789abcdef-secret"
HOOK = EventHook("orders-ready", SECRET, "team-a", "", "/partition/date")


def _sig(body: bytes, secret: bytes = SECRET) -> str:
    return "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()


def test_the_event_name_comes_from_the_route() -> None:
    assert webhooks.event_name("/api/v1/events/orders-ready") == "orders-ready"
    assert webhooks.event_name("/api/v1/events") is None
    assert webhooks.event_name("/api/v1/tasks/x") is None


def test_a_signature_is_checked_against_the_body_and_the_hooks_secret() -> None:
    body = b'{"a": 1}'
    who = webhooks.signature_ok(HOOK, "orders-ready", body, _sig(body))
    assert who.id == "webhook:orders-ready" and who.namespaces == frozenset({"team-a"})
    assert who.may(Permission.EVENTS_EMIT) and not who.may(Permission.TOKENS)
    for bad in (_sig(body, b"x" * 20), _sig(b'{"a": 2}'), "sha1=abc", "", "sha256="):
        with pytest.raises(webhooks.WebhookRefused):
            webhooks.signature_ok(HOOK, "orders-ready", body, bad)
    with pytest.raises(webhooks.WebhookRefused, match=r"no \[events.other\] secret_file"):
        webhooks.signature_ok(None, "other", body, _sig(body))


def test_the_key_comes_from_the_query_then_the_header_then_the_pointer() -> None:
    body = b'{"partition": {"date": "2026-12-04"}, "n": [5, {"x/y": 7}]}'
    made = webhooks.build_emit("orders-ready", body, {}, {}, HOOK)
    assert (made.key, made.namespace, made.payload_json) == ("2026-12-04", "team-a", body.decode())
    assert webhooks.build_emit("orders-ready", body, {}, {"x-event-key": "h"}, HOOK).key == "h"
    assert webhooks.build_emit("orders-ready", body, {"key": "q"}, {"x-event-key": "h"}, HOOK).key == "q"
    assert webhooks.resolve_pointer({"n": [5, {"x/y": 7}]}, "/n/1/x~1y") == 7
    assert webhooks.build_emit("e", b"", {}, {"idempotency-key": "i-1"}, None).idempotency_key == "i-1"
    with pytest.raises(InvalidSpec, match="nothing at key_pointer"):
        webhooks.build_emit("orders-ready", b'{"other": 1}', {}, {}, HOOK)
    with pytest.raises(InvalidSpec, match="JSON object"):
        webhooks.build_emit("orders-ready", b"[1, 2]", {}, {}, HOOK)
    with pytest.raises(InvalidSpec, match="not JSON"):
        webhooks.build_emit("orders-ready", b"{nope", {}, {}, HOOK)


def test_event_tables_are_checked_with_their_key_paths(tmp_path: Path) -> None:
    (tmp_path / "good.secret").write_bytes(SECRET + b"\n")
    (tmp_path / "short.secret").write_bytes(b"short")
    problems: list[str] = []
    hooks = parse_event_hooks(
        {
            "good": {"secret_file": "good.secret", "namespace": "a", "key_header": "X-Part"},
            "short": {"secret_file": "short.secret"},
            "missing": {"namespace": "a"},
            "typo": {"secret_file": "good.secret", "secert": 1},
            "ptr": {"secret_file": "good.secret", "key_pointer": "partition"},
        },
        tmp_path,
        problems,
    )
    assert [h.name for h in hooks] == ["good", "typo"]
    assert hooks[0].secret == SECRET and "secret" not in repr(hooks[0]).replace("secret_file", "")
    assert problems == [
        "events.short.secret_file: the secret is 5 bytes, at least 16",
        "events.missing.secret_file: required (a file holding the shared HMAC secret)",
        "events.typo.secert: unknown key (expected one of: secret_file, namespace, key_header, key_pointer)",
        "events.ptr.key_pointer: a JSON pointer starts with '/', got 'partition'",
    ]
