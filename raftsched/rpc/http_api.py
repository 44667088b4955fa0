"""The HTTP/JSON API (``/api/v1/``): each route of :mod:`raftsched.rpc.routes` calls the node's own
Admin servicer in process, through the same server interceptors the gRPC port runs.

Nothing here decides anything the gRPC API decides: a request becomes the RPC's request message
(protobuf's JSON mapping, proto field names, as the SDK's messages and the CLI's ``--json`` spell
them), :class:`LocalCalls` runs it through the node's authorization interceptor and the servicer
method with a :class:`LocalContext` standing in for gRPC's (it carries the ``Authorization``
header and the stale-read flag as invocation metadata and captures the abort), and the answer
or the abort becomes the HTTP response. So authentication, the authorization table, namespaces,
the audit log, validation, idempotency and the leader check are the gRPC API's own.

Answers (the one mapping table is :data:`HTTP_STATUS`):

* success: 200 and the reply message as JSON (int64 as JSON numbers, enums by name);
* a refusal: an RFC 9457 ``application/problem+json`` body with the gRPC status message as
  ``detail``, ``code`` (raftsched's error code), ``grpc_status``, ``field`` (the field path of an
  invalid argument) and, for 401/403, ``permission`` (what the route needs);
* a call a follower may not answer (a write, or a read without ``?stale=true``): 307 with
  ``Location`` on the leader's HTTP listener (same path and query), so a client that resends
  the body on 307 (``curl -L``; most libraries) reaches the leader; 503 if no leader is known.

Headers: ``Authorization: Bearer <token>``; ``Idempotency-Key`` is the request's
``idempotency_key`` (a retry with the same key gets the first call's outcome).
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import json
import logging
import re
import urllib.parse
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from http import HTTPStatus
from typing import Any, Final

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from raftsched import bounds
from raftsched.config.eventhooks import EventHook
from raftsched.errors import InvalidSpec
from raftsched.leader.window import FiringWindow
from raftsched.observability.listener import HttpRequest, HttpResponse, HttpStream
from raftsched.rpc import routes, webhooks
from raftsched.rpc.http_requests import (
    ADMIN,
    BOOLS,
    FOLLOW_PARAM,
    STALE_PARAM,
    BadRequest,
    body_object,
    build_request,
    merge_patch,
    request_header,
)
from raftsched.rpc.local_calls import Aborted, LocalCalls, LocalContext
from raftsched.rpc.plumbing import CODE_KEY, LEADER_KEY
from raftsched.rpc.rendering import JsonCache, join, message_to_json, render
from raftsched.rpc.routes import Merge, Route, Stream
from raftsched.security import authz
from raftsched.timing.clock import SystemClock
from raftsched.v1 import raftsched_pb2 as pb

__all__ = [
    "FULL_LOGS",
    "FULL_LOGS_INTS",
    "FULL_LOGS_QUERY",
    "HTTP_STATUS",
    "PROBLEM",
    "HttpApi",
    "LocalCalls",
    "LocalContext",
    "message_to_json",
]

log = logging.getLogger("raftsched.http_api")

JSON: Final = "application/json"
PROBLEM: Final = "application/problem+json"
SERVICE: Final = "/raftsched.v1.Admin/"
FULL_LOGS: Final = ("GET", "/runs/{run_id}/logs:full")
"""Full logs (:meth:`HttpApi._logs`): the one route outside the route table (a byte stream of
the Logs service, not an Admin RPC's JSON)."""
FULL_LOGS_INTS: Final = ("shard", "attempt", "since_line", "tail_bytes")
"""The full-log route's integer query parameters: the ``ReadLogsRequest`` fields of those names."""
FULL_LOGS_QUERY: Final = (*FULL_LOGS_INTS, "stream", FOLLOW_PARAM)
"""Every query parameter the full-log route takes (the OpenAPI document lists these)."""
_LOGS_PATH: Final = re.compile(re.escape(routes.PREFIX) + r"/runs/([^/]+)/logs:full")
WATCH_POLL_S: Final = 1.0
"""How often a stream calls its RPC again (events are at most this late)."""
WATCH_LOOKBACK_MS: Final = 60_000
"""A watch without ``since_ms`` starts with what happened this long before it opened."""
KEEPALIVE_S: Final = 15.0
MAX_STREAMS: Final = 64
"""Event streams one node serves at once (each costs one RPC per poll interval); more get 503."""
MAX_CALLS: Final = 64
"""API calls one node answers at once (a webhook too; an event stream or a full log counts
while it opens); more wait their turn. Most of a call is waiting (for the leader check, a
commit), so the turns are many."""
MAX_WAITING: Final = 256
"""Calls that wait for one of the :data:`MAX_CALLS` turns; more are refused at once with 429
and ``Retry-After`` (a flood is turned away rather than queued without end)."""
RETRY_AFTER_S: Final = 1
_SYSTEM_CLOCK: Final = SystemClock()
FIRING_HOLD_MS: Final = 100
"""How long a call waits at most for the leader's firing window to close (see
:meth:`HttpApi._give_way`); 0 never waits."""
PROBLEM_TYPE: Final = "urn:raftsched:error:"

HTTP_STATUS: Final[Mapping[grpc.StatusCode, int]] = {
    grpc.StatusCode.OK: 200,
    grpc.StatusCode.INVALID_ARGUMENT: 400,
    grpc.StatusCode.OUT_OF_RANGE: 400,
    grpc.StatusCode.FAILED_PRECONDITION: 400,  # not_leader is a 307 instead (see the docstring)
    grpc.StatusCode.UNAUTHENTICATED: 401,
    grpc.StatusCode.PERMISSION_DENIED: 403,
    grpc.StatusCode.NOT_FOUND: 404,
    grpc.StatusCode.ALREADY_EXISTS: 409,
    grpc.StatusCode.ABORTED: 409,  # conflict: a version that moved, a run in the wrong state
    grpc.StatusCode.RESOURCE_EXHAUSTED: 429,
    grpc.StatusCode.CANCELLED: 499,
    grpc.StatusCode.UNKNOWN: 500,
    grpc.StatusCode.INTERNAL: 500,
    grpc.StatusCode.DATA_LOSS: 500,
    grpc.StatusCode.UNIMPLEMENTED: 501,
    grpc.StatusCode.UNAVAILABLE: 503,  # retry (a write: with the same Idempotency-Key)
    grpc.StatusCode.DEADLINE_EXCEEDED: 504,
}
"""gRPC status → HTTP status: the one table (docs/reference/http.md shows it)."""


def full_logs_maximum(name: str) -> int:
    """The largest value integer query parameter ``name`` of the full-log route takes (its
    ``ReadLogsRequest`` field's type: uint32 or uint64)."""
    fd = pb.ReadLogsRequest.DESCRIPTOR.fields_by_name[name]
    return 2**32 - 1 if fd.cpp_type == FieldDescriptor.CPPTYPE_UINT32 else 2**64 - 1


# -- HTTP ------------------------------------------------------------------------------------------


def _problem(
    status: int,
    detail: str,
    instance: str,
    code: str = "",
    extra: Mapping[str, Any] | None = None,
    headers: Mapping[str, str] | None = None,
) -> HttpResponse:
    try:
        title = HTTPStatus(status).phrase
    except ValueError:
        title = "Client Closed Request" if status == 499 else "Error"
    body: dict[str, Any] = {
        "type": PROBLEM_TYPE + (code or "http"),
        "title": title,
        "status": status,
        "detail": detail,
        "instance": instance,
    }
    if code:
        body["code"] = code
    body.update(extra or {})
    return HttpResponse(
        status=status,
        body=json.dumps(body, ensure_ascii=False).encode(),
        content_type=PROBLEM,
        headers=dict(headers or {}),
    )


def _ok(text: str) -> HttpResponse:
    return HttpResponse(200, text.encode(), JSON)


_TRUE: Final = ("true", "1")


def _value(message: Message, path: str) -> Any:
    value: Any = message
    for name in path.split("."):
        value = getattr(value, name)
    return value


def _items(reply: Message, path: str) -> Iterator[Message]:
    value = _value(reply, path)
    if isinstance(value, Message):
        yield value
    else:
        yield from value


def _project(reply: Message | list[Message], path: str, cache: JsonCache | None) -> str:
    """The JSON text of the answer: ``path`` of ``reply`` (a message, or a list of them);
    rendered through ``cache`` unless None."""
    text = cache.text if cache is not None else render
    if isinstance(reply, list):
        return join(text(m) for m in reply)
    value: Any = reply
    for name in path.split(".") if path else ():
        value = getattr(value, name)
    if isinstance(value, Message):
        return text(value)
    return join(text(m) for m in value)


class HttpApi:
    """Serves ``/api/v1/``: :meth:`routes` to add to the node's listener, :meth:`attach` once
    the node's servicer exists (until then calls answer 503).

    ``leader_http(grpc_address)`` is the HTTP address (``host:port``) of the node whose gRPC
    address a ``not_leader`` answer names (None if it has no listener or is unknown);
    ``scheme`` is ``https`` when the listener serves TLS.
    """

    def __init__(
        self,
        leader_http: Callable[[str], str | None],
        scheme: str = "http",
        now_ms: Callable[[], int] | None = None,
        poll_s: float = WATCH_POLL_S,
        max_calls: int = MAX_CALLS,
        max_waiting: int = MAX_WAITING,
        firing: FiringWindow | None = None,
        firing_hold_ms: int = FIRING_HOLD_MS,
    ) -> None:
        self._calls: LocalCalls | None = None
        self._leader_http = leader_http
        self.scheme = scheme
        self.openapi: Callable[[], bytes] | None = None
        self._now_ms = now_ms
        self._poll_s = poll_s
        self.streams = 0
        """Event streams open now."""
        self.event_hooks: Mapping[str, EventHook] = {}
        """The ``[events.<name>]`` tables: webhook secrets and key rules, by event name."""
        self.observe: Callable[[str, int, float], None] | None = None
        """Called once per answer with (Admin RPC or ``none``, HTTP status, seconds)."""
        self.monotonic: Callable[[], float] | None = None
        self.max_calls = max_calls
        self.max_waiting = max_waiting
        self.waiting = 0
        """Calls waiting for a turn now."""
        self._gate: asyncio.Semaphore | None = None
        self._gate_loop: asyncio.AbstractEventLoop | None = None
        self.firing = firing
        """The leader's firing window (:mod:`raftsched.leader.window`): a call that arrives
        while it is busy waits until it closes, at most :attr:`firing_hold_ms`."""
        self.firing_hold_ms = firing_hold_ms
        self.held = 0
        """Calls that waited for the firing window (since start)."""
        self.observe_held: Callable[[float], None] | None = None
        """Called with the seconds each such call waited."""
        self._opened: asyncio.Event | None = None
        self._opened_loop: asyncio.AbstractEventLoop | None = None
        self.rendered = JsonCache()
        """Read answers' JSON by message (:mod:`raftsched.rpc.rendering`), on the loop only. A
        write's answer is rendered afresh and not kept (a created token's secret, for one)."""

    def attach(self, calls: LocalCalls) -> None:
        self._calls = calls

    def routes(self) -> list[tuple[str, str, Callable[[HttpRequest], Awaitable[HttpResponse | HttpStream]]]]:
        path = routes.PREFIX + r"/{tail:[\s\S]*}"  # any character: a %0A in a name as well
        return [("*", path, self.handle)]  # every method: a 405 with Allow comes from the table

    async def handle(self, request: HttpRequest) -> HttpResponse | HttpStream:
        """Answer one request (see the module docstring), at most :attr:`max_calls` at once
        (:data:`MAX_CALLS`), every route alike (a signed webhook too); observed by
        :attr:`observe`."""
        if self.observe is None or self.monotonic is None:
            return await self._limited(request)
        start = self.monotonic()
        out = await self._limited(request)
        raw = request.raw_path or request.path
        found = routes.find(request.method, raw)
        rpc = found[0].rpc if found else "openapi" if raw == routes.PREFIX + "/openapi.json" else "none"
        self.observe(rpc, out.status, self.monotonic() - start)
        return out

    async def _limited(self, request: HttpRequest) -> HttpResponse | HttpStream:
        """:meth:`_handle` in one of :attr:`max_calls` turns, after the leader's firing window
        (:meth:`_give_way`); a 429 when :attr:`max_waiting` calls wait already, for either
        (RESOURCE_EXHAUSTED, as the status table maps it)."""
        loop = asyncio.get_running_loop()
        if self._gate is None or self._gate_loop is not loop:
            self._gate, self._gate_loop = asyncio.Semaphore(self.max_calls), loop
        gate = self._gate
        if self.waiting >= self.max_waiting:  # for a turn, or for the firing window
            raw = request.raw_path or request.path
            detail = (
                f"this node answers {self.max_calls} API calls at once and {self.waiting} wait "
                f"(for a turn, or for a fire batch to commit); try again in {RETRY_AFTER_S} s"
            )
            return _problem(
                HTTP_STATUS[grpc.StatusCode.RESOURCE_EXHAUSTED],
                detail,
                raw,
                "resource_exhausted",
                {"grpc_status": grpc.StatusCode.RESOURCE_EXHAUSTED.name},
                headers={"Retry-After": str(RETRY_AFTER_S)},
            )
        self.waiting += 1
        try:
            await self._give_way(loop)
            await gate.acquire()
        finally:
            self.waiting -= 1
        try:
            return await self._handle(request)
        finally:
            gate.release()

    async def _give_way(self, loop: asyncio.AbstractEventLoop) -> None:
        """Wait while the leader's firing window is busy (a fire batch is due within its lead
        or waits for its commit), at most :attr:`firing_hold_ms`: the firing path goes first.

        An API call and a fire batch share the node's interpreter lock and cores; a call
        started in the window delays the batch's commit (each step of its way waits for the
        lock), and fifty clients back to back keep the loop busy all the time. A call waiting
        here costs nothing: it is parsed and parked until the driver's thread says the window
        closed (:meth:`FiringWindow.on_open`). On a follower the window is never busy."""
        window = self.firing
        if window is None or self.firing_hold_ms <= 0 or not window.busy(self._clock_ms()):
            return
        opened = self._opened
        if opened is None or self._opened_loop is not loop:
            opened, self._opened_loop = asyncio.Event(), loop
            self._opened = opened

            def wake() -> None:  # on the driver's thread
                with contextlib.suppress(RuntimeError):  # the loop is closed: nobody waits
                    loop.call_soon_threadsafe(opened.set)

            window.on_open(wake)
        self.held += 1
        start = loop.time()
        deadline = start + self.firing_hold_ms / 1000
        try:
            while window.busy(self._clock_ms()):
                remaining = deadline - loop.time()
                if remaining <= 0:
                    return  # the bound: the API is slowed by firing, never stopped by it
                opened.clear()  # earlier waiters were woken already (set resolves them at once)
                with contextlib.suppress(TimeoutError):
                    async with asyncio.timeout(remaining):
                        await opened.wait()
        finally:
            if self.observe_held is not None:
                self.observe_held(loop.time() - start)

    def _clock_ms(self) -> int:
        return self._now_ms() if self._now_ms is not None else _SYSTEM_CLOCK.now_ms()

    async def _handle(self, request: HttpRequest) -> HttpResponse | HttpStream:
        raw = request.raw_path or request.path
        if request.method == "GET" and raw == routes.PREFIX + "/openapi.json" and self.openapi:
            return HttpResponse(200, self.openapi(), JSON)
        if request.method == "POST":
            name = webhooks.event_name(raw)
            if name is not None:
                return await self._emit_event(request, name, raw)
        logs = _LOGS_PATH.fullmatch(raw)
        if logs is not None and request.method == "GET":
            return await self._logs(request, urllib.parse.unquote(logs[1]), raw)
        found = routes.find(request.method, raw)
        if found is None:
            allowed = routes.allowed_methods(raw)
            if allowed:
                return _problem(
                    405,
                    f"{request.method} is not served here; {', '.join(allowed)} is",
                    raw,
                    headers={"Allow": ", ".join(allowed)},
                )
            return _problem(404, f"no API route {raw}", raw, code="not_found")
        route, params = found
        auth = request_header(request.headers, "authorization")
        metadata = [("authorization", auth)] if auth else []
        if request.query.get(STALE_PARAM, "").lower() in _TRUE:
            metadata.append(("raftsched-allow-stale", "1"))
        peer = f"http:{request.remote}" if request.remote else "http"
        names = request.peer_names
        try:
            if route.merge is not None and self._calls is not None:
                merged = await self._merged(route, route.merge, params, request, metadata, peer, raw)
                if isinstance(merged, HttpResponse):
                    return merged
                request = merged
            message = build_request(route, params, request)
        except BadRequest as exc:
            return _problem(400, str(exc), raw, "invalid_argument", {"field": exc.field})
        if self._calls is None:
            return _problem(503, "this node is starting; try again", raw, "unavailable")
        stream = route.stream
        if stream is not None and stream.follow and request.query.get(FOLLOW_PARAM, "").lower() not in _TRUE:
            stream = None
        if stream is not None:
            if self.streams >= MAX_STREAMS:
                return _problem(
                    503, f"this node serves {MAX_STREAMS} event streams already", raw, "unavailable"
                )
            watch_since = not stream.follow and "since_ms" in message.DESCRIPTOR.fields_by_name
            if watch_since and self._now_ms is not None and not getattr(message, "since_ms"):  # noqa: B009
                setattr(message, "since_ms", self._now_ms() - WATCH_LOOKBACK_MS)  # noqa: B010
        context = LocalContext(metadata, peer, names)
        method = SERVICE + route.rpc
        try:
            reply = await self._calls.call(method, message, context)
        except Aborted as exc:
            return self._refused(exc, context, method, request, raw)
        except Exception:  # a bug in a handler: gRPC would answer UNKNOWN
            log.exception("HTTP %s %s failed", request.method, raw)
            return _problem(500, "internal error (see the node's log)", raw, "internal")
        if stream is not None:
            assert isinstance(reply, Message)
            events = self._events(stream, method, message, metadata, peer, names, reply)
            return HttpStream(events, headers={"X-Accel-Buffering": "no"})
        return _ok(_project(reply, route.response, None if route.write else self.rendered))

    async def _logs(self, request: HttpRequest, run_id: str, raw: str) -> HttpResponse | HttpStream:
        """``GET /api/v1/runs/{id}/logs:full``: an attempt's full log as ``text/plain``, streamed
        (``Logs.ReadLogs``; query ``shard``, ``attempt``, ``stream=stdout|stderr``, ``follow``,
        ``since_line``, ``tail_bytes``). The header travels as response headers
        ``X-Raftsched-Log-Source`` (``executor`` or ``stored_tail``) and
        ``X-Raftsched-Log-Note``. Not in the route table: that table maps Admin RPCs to JSON
        replies; this is a byte stream of another service. (``/logs`` without ``:full`` is the
        route-table one: the stored tails as JSON.)"""
        q = request.query
        try:
            message = pb.ReadLogsRequest(run_id=run_id)
            for name in FULL_LOGS_INTS:
                text = q.get(name, "")
                if text:
                    if not text.isascii() or not text.isdigit() or len(text) > 20:
                        raise BadRequest(name, f"{text[:50]!r} is not a non-negative integer")
                    value, limit = int(text), full_logs_maximum(name)
                    if value > limit:
                        raise BadRequest(name, f"{value} is out of range (at most {limit})")
                    setattr(message, name, value)
            stream_name = q.get("stream", "stdout")
            if stream_name not in ("stdout", "stderr"):
                raise BadRequest("stream", f"{stream_name[:50]!r} is neither stdout nor stderr")
            message.stderr = stream_name == "stderr"
            follow = q.get(FOLLOW_PARAM, "false").lower()
            if follow not in BOOLS:
                raise BadRequest(FOLLOW_PARAM, f"{follow[:50]!r} is not a boolean (true or false)")
            message.follow = follow in _TRUE
            unknown = sorted(set(q) - set(FULL_LOGS_QUERY))
            if unknown:
                raise BadRequest(unknown[0], "unknown query parameter")
            bounds.check(message)
        except (BadRequest, InvalidSpec) as exc:
            return _problem(400, str(exc), raw, "invalid_argument", {"field": exc.field})
        if self._calls is None:
            return _problem(503, "this node is starting; try again", raw, "unavailable")
        auth = request_header(request.headers, "authorization")
        metadata = [("authorization", auth)] if auth else []
        peer = f"http:{request.remote}" if request.remote else "http"
        context = LocalContext(metadata, peer, request.peer_names)
        method = "/raftsched.v1.Logs/ReadLogs"
        parts = self._calls.stream(method, message, context)
        try:
            first = await anext(parts)
        except Aborted as exc:
            return self._refused(exc, context, method, request, raw)
        header = first.header if isinstance(first, pb.ReadLogsChunk) else pb.LogsHeader()

        async def body() -> AsyncIterator[bytes]:
            try:
                async for part in parts:
                    if isinstance(part, pb.ReadLogsChunk) and part.HasField("data"):
                        yield part.data
            except Aborted:
                return  # ended by the node (leadership lost): the client sees the stream end
            finally:
                await parts.aclose()

        note = header.note.encode("ascii", "replace").decode()[:1000]
        return HttpStream(
            body(),
            content_type="text/plain; charset=utf-8",
            headers={
                "X-Raftsched-Log-Source": header.source,
                "X-Raftsched-Log-Note": note,
                "X-Accel-Buffering": "no",
            },
        )

    async def _emit_event(self, request: HttpRequest, name: str, raw: str) -> HttpResponse:
        """``POST /api/v1/events/{name}`` (see :mod:`raftsched.rpc.webhooks`)."""
        headers = {k.lower(): v for k, v in request.headers.items()}
        hook = self.event_hooks.get(name)
        try:
            message = webhooks.build_emit(name, request.body or b"", request.query, headers, hook)
        except InvalidSpec as exc:
            return _problem(400, str(exc), raw, "invalid_argument", {"field": exc.field})
        if self._calls is None:
            return _problem(503, "this node is starting; try again", raw, "unavailable")
        method = SERVICE + "EmitEvent"
        peer = f"http:{request.remote}" if request.remote else "http"
        signature = headers.get(webhooks.SIGNATURE_HEADER)
        metadata = [("authorization", headers["authorization"])] if "authorization" in headers else []
        if signature is None:
            context = LocalContext(metadata, peer, request.peer_names)
            acting: contextlib.AbstractContextManager[None] = contextlib.nullcontext()
        else:
            try:
                who = webhooks.signature_ok(hook, name, request.body or b"", signature)
            except webhooks.WebhookRefused as exc:
                refused = LocalContext(metadata, peer, request.peer_names)
                refused.trailing[CODE_KEY] = "unauthenticated"
                return self._refused(
                    Aborted(grpc.StatusCode.UNAUTHENTICATED, str(exc)), refused, method, request, raw
                )
            # The signature is the credential: the call goes through the same interceptors as a
            # token's (the damage guard, authorization, the audit stamp), as ``who``. acting_as
            # covers a node without auth, where no interceptor sets the caller.
            context = LocalContext([], peer, request.peer_names, verified_principal=who)
            acting = authz.acting_as(authz.Caller(who, method, peer, name))
        try:
            with acting:
                reply = await self._calls.call(method, message, context)
        except Aborted as exc:
            return self._refused(exc, context, method, request, raw)
        except Exception:
            log.exception("HTTP POST %s failed", raw)
            return _problem(500, "internal error (see the node's log)", raw, "internal")
        assert isinstance(reply, Message)
        return _ok(render(reply))

    async def _merged(
        self,
        route: Route,
        merge: Merge,
        params: Mapping[str, str],
        request: HttpRequest,
        metadata: list[tuple[str, str]],
        peer: str,
        raw: str,
    ) -> HttpRequest | HttpResponse:
        """``request`` with its merge patch applied to the current value (see
        :class:`Merge`), or the answer that refused the read."""
        assert self._calls is not None
        data = body_object(request)
        patch = data.get(merge.field, {})
        if not isinstance(patch, dict):
            raise BadRequest(merge.field, "must be a JSON object (a merge patch)")
        # A patch no current value could make valid is refused before the read (on the leader a
        # read is a Raft round): merged onto the defaults, every value is the patch's own, and
        # merging onto a valid current value adds only valid ones, so this refuses exactly what
        # the request built after the read would refuse (as a PUT's body is checked first).
        target = ADMIN.methods_by_name[route.rpc].input_type.fields_by_name[merge.field].message_type
        probe = {**data, merge.field: merge_patch({}, patch, target)}
        build_request(route, params, dataclasses.replace(request, body=json.dumps(probe).encode()))
        read: Message = getattr(pb, ADMIN.methods_by_name[merge.rpc].input_type.name)()
        for param in route.params:
            setattr(read, param, params[route.field_of(param)])
        context = LocalContext(metadata, peer, request.peer_names)
        try:
            reply = await self._calls.call(SERVICE + merge.rpc, read, context)
        except Aborted as exc:
            return self._refused(exc, context, SERVICE + merge.rpc, request, raw)
        assert isinstance(reply, Message)
        current = _value(reply, merge.current)
        data[merge.field] = merge_patch(message_to_json(current), patch, current.DESCRIPTOR)
        if not data.get(merge.version):  # absent, or 0 (which would write unconditionally)
            data[merge.version] = _value(reply, merge.current_version)
        return dataclasses.replace(request, body=json.dumps(data).encode())

    async def _events(
        self,
        stream: Stream,
        method: str,
        message: Message,
        metadata: list[tuple[str, str]],
        peer: str,
        names: tuple[str, ...],
        reply: Message,
    ) -> AsyncIterator[bytes]:
        """Server-sent events: each new or changed item of ``stream.items``, then the RPC again
        every poll interval (through the interceptors again: a revoked token ends the stream)."""
        assert self._calls is not None
        self.streams += 1
        seen: dict[str, str] = {}
        quiet = 0.0
        try:
            while True:
                current: dict[str, str] = {}
                sent = False
                for item in _items(reply, stream.items):
                    key = "/".join(str(getattr(item, k)) for k in stream.key)
                    data = self.rendered.text(item)
                    current[key] = data
                    if seen.get(key) != data:
                        sent = True
                        yield f"event: {stream.event}\nid: {key}\ndata: {data}\n\n".encode()
                    if stream.advance is not None:
                        field, item_field = stream.advance
                        setattr(message, field, max(getattr(message, field), getattr(item, item_field)))
                seen = current
                if stream.done and _value(reply, stream.done):
                    yield b"event: end\ndata: {}\n\n"
                    return
                quiet = 0.0 if sent else quiet + self._poll_s
                if quiet >= KEEPALIVE_S:
                    quiet = 0.0
                    yield b": keep-alive\n\n"
                await asyncio.sleep(self._poll_s)
                context = LocalContext(metadata, peer, names)
                try:
                    got = await self._calls.call(method, message, context)
                except Aborted as exc:
                    problem = {"status": HTTP_STATUS.get(exc.code, 500), "detail": exc.details}
                    problem["code"] = context.trailing.get(CODE_KEY, "")
                    yield f"event: error\ndata: {json.dumps(problem, ensure_ascii=False)}\n\n".encode()
                    return
                assert isinstance(got, Message)
                reply = got
        finally:
            self.streams -= 1

    def _refused(
        self, exc: Aborted, context: LocalContext, method: str, request: HttpRequest, raw: str
    ) -> HttpResponse:
        code = context.trailing.get(CODE_KEY, "")
        if code == "not_leader":
            leader = context.trailing.get(LEADER_KEY, "")
            http = self._leader_http(leader) if leader else None
            if http:
                query = request.raw_query
                location = f"{self.scheme}://{http}{raw}" + (f"?{query}" if query else "")
                return _problem(
                    307,
                    exc.details,
                    raw,
                    code,
                    {"leader": leader},
                    headers={"Location": location},
                )
            note = f" (the leader {leader} has no HTTP listener known to this node)" if leader else ""
            return _problem(503, exc.details + note, raw, code)
        status = HTTP_STATUS.get(exc.code, 500)
        extra: dict[str, Any] = {"grpc_status": exc.code.name}
        field = getattr(context.error, "field", "")
        if field:
            extra["field"] = field
        headers: dict[str, str] = {}
        if status in (401, 403):
            extra["permission"] = str(authz.TABLE.get(method, ""))
            if status == 401:
                headers["WWW-Authenticate"] = 'Bearer realm="raftsched"'
        return _problem(status, exc.details, raw, code, extra, headers)
