"""``POST /api/v1/events/{name}``: emit an event from another system's webhook (issue 30 §5).

The body is the event's payload (a JSON object; empty: none). The dedupe key is ``?key=``, else
the header the event's ``[events.<name>]`` table names (``key_header``, default
``X-Event-Key``), else its JSON pointer into the body (``key_pointer``); none: a new event each
call (an ``Idempotency-Key`` header makes a retry the same one).

Authentication, either of:

* a bearer token (``Authorization: Bearer``) with ``events.emit`` in the event's namespace, as
  every other route (with auth off: nobody needs one);
* ``X-Signature-256: sha256=<hex>``, the HMAC-SHA256 of the raw body under the event's shared
  secret (``[events.<name>] secret_file``), as GitHub signs its webhooks. A valid signature
  emits as the principal ``webhook:<name>``, with ``events.emit`` in the hook's namespace only;
  a wrong one is refused (401) whatever else the request carries.
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping
from typing import Any, Final

from raftsched.config.eventhooks import EventHook
from raftsched.errors import InvalidSpec
from raftsched.rpc import routes
from raftsched.security.auth import Principal, Role
from raftsched.v1 import raftsched_pb2 as pb

__all__ = [
    "SIGNATURE_HEADER",
    "WebhookRefused",
    "build_emit",
    "event_name",
    "resolve_pointer",
    "signature_ok",
]

SIGNATURE_HEADER: Final = "x-signature-256"
DEFAULT_KEY_HEADER: Final = "x-event-key"
_PATH: Final = routes.PREFIX + "/events/"


class WebhookRefused(Exception):
    """A signed request whose signature cannot be checked or does not match (HTTP 401)."""


def event_name(raw_path: str) -> str | None:
    """The event name of a ``/api/v1/events/{name}`` path (percent-decoded), else None."""
    if not raw_path.startswith(_PATH):
        return None
    found = routes.find("POST", raw_path)
    if found is None or found[0].rpc != "EmitEvent":
        return None
    return found[1].get("name")


def signature_ok(hook: EventHook | None, name: str, body: bytes, signature: str) -> Principal:
    """The principal a valid ``X-Signature-256`` of ``body`` stands for; raises WebhookRefused."""
    if hook is None:
        raise WebhookRefused(
            f"event {name!r} has no [events.{name}] secret_file on this node: a signed request "
            "cannot be checked (configure the secret, or send a bearer token instead)"
        )
    algo, _, digest = signature.strip().partition("=")
    if algo.lower() != "sha256" or not digest:
        raise WebhookRefused("X-Signature-256 must be sha256=<hex digest of the body>")
    expected = hmac.new(hook.secret, body, hashlib.sha256).hexdigest()
    if not hmac.compare_digest(digest.lower().encode(), expected.encode()):
        raise WebhookRefused(f"X-Signature-256 does not match the body under event {name!r}'s secret")
    return Principal(id=f"webhook:{name}", role=Role.MAINTAINER, namespaces=frozenset({hook.namespace}))


def resolve_pointer(document: Any, pointer: str) -> Any:
    """RFC 6901: the value at ``pointer`` in ``document``; raises KeyError if there is none."""
    value = document
    for raw in pointer.split("/")[1:]:
        token = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(value, dict):
            value = value[token]
        elif isinstance(value, list) and token.isdigit() and int(token) < len(value):
            value = value[int(token)]
        else:
            raise KeyError(token)
    return value


def build_emit(
    name: str,
    body: bytes,
    query: Mapping[str, str],
    header: Mapping[str, str],
    hook: EventHook | None,
) -> pb.EmitEventRequest:
    """The EmitEvent request of a webhook call (``header``: lower-cased names). Raises
    InvalidSpec (HTTP 400, with the field) for a body that is not a JSON object or a key pointer
    that finds nothing."""
    document: Any = None
    payload = ""
    if body.strip():
        try:
            text = body.decode("utf-8")
            document = json.loads(text)
        except (UnicodeDecodeError, ValueError) as exc:
            raise InvalidSpec("payload", f"the body is not JSON: {exc}") from None
        if not isinstance(document, dict):
            raise InvalidSpec("payload", f"the body must be a JSON object, got {type(document).__name__}")
        payload = text
    key = query.get("key", "")
    if not key:
        key = header.get((hook.key_header if hook and hook.key_header else DEFAULT_KEY_HEADER).lower(), "")
    if not key and hook is not None and hook.key_pointer:
        try:
            found = resolve_pointer(document, hook.key_pointer)
        except (KeyError, TypeError):
            raise InvalidSpec("key", f"the body has nothing at key_pointer {hook.key_pointer!r}") from None
        if isinstance(found, bool) or not isinstance(found, str | int | float):
            raise InvalidSpec(
                "key", f"key_pointer {hook.key_pointer!r} finds a {type(found).__name__}, not a string"
            )
        key = str(found)
    return pb.EmitEventRequest(
        name=name,
        key=key,
        payload_json=payload,
        namespace=query.get("namespace", "") or (hook.namespace if hook is not None else ""),
        idempotency_key=header.get("idempotency-key", ""),
    )
