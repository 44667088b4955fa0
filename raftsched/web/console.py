"""The web console: every node serves it on its HTTP listener (``nodes[].http``).

Requests are handled on a worker thread (never on the node's event loop, which carries the gRPC
traffic of executors and clients): the handler reads the session cookie, re-checks the signed-in
token, calls the node's own gRPC API through an SDK :class:`~raftsched.client.Client` that
carries the user's token, and renders a template. So every read and write is authorized by the
same table and the same servicers as the SDK's and the CLI's, and a write made on a follower
reaches the leader as theirs do (the client follows the ``not_leader`` hint). On a follower a
page's reads accept this node's own state (stale reads: it answers them itself, as of what it
has applied, and the page says how far behind that may be), so a follower's console keeps its
reads off the leader; on the leader, and for :data:`READ_YOUR_WRITES_MS` after a session's
action, its reads are linearizable (through the leader's read index), so the page an action
lands on shows it. With ``[tls]`` the
internal client dials with the node's own certificate (trusting ``tls.ca_file``), as nodes dial
each other.

Contracts:

* Sign-in takes a bearer token, verified by this node's token verifier; the browser gets an
  HttpOnly, SameSite=Strict cookie holding a random session id (see
  :mod:`raftsched.web.sessions`). With auth off there is no sign-in and every page says so.
* Every POST must carry the session's CSRF token (a hidden field in every form) and, when the
  browser sends an ``Origin``, come from this host; otherwise 403 and nothing is called.
* Action buttons are drawn only when the caller's role grants the RPC's permission (asked of
  the authorization table) in the object's namespace; the RPC checks again and a refusal is a
  403 page.
* A request with ``X-Console-Live: 1`` gets only the page's live region (the script in
  ``static/console.js`` polls with it), so a page refreshes its data without a reload.
"""

from __future__ import annotations

import asyncio
import logging
import re
import threading
import urllib.parse
from collections.abc import AsyncIterator, Callable, Mapping
from importlib import resources
from typing import Any, Final, Protocol

from raftsched.abc import Clock
from raftsched.client import Client
from raftsched.config.types import ClusterConfig
from raftsched.config.values import is_loopback
from raftsched.errors import NotFound, PermissionDenied, RaftschedError, Unauthenticated, Unavailable
from raftsched.observability.listener import HttpRequest, HttpResponse, HttpStream
from raftsched.readinfo import ReadInfo
from raftsched.security.auth import ANONYMOUS, Principal
from raftsched.security.tls import node_client_tls
from raftsched.security.tokens import TokenVerifier
from raftsched.web import views
from raftsched.web.base import Ctx, Redirect, View, local_path
from raftsched.web.cache import ReadCache
from raftsched.web.sessions import COOKIE, Session, SessionStore
from raftsched.web.templating import Renderer
from raftsched.web.views import DOWNLOAD_PATH

__all__ = ["Console", "ConsoleNode", "Ctx", "Redirect", "View"]

log = logging.getLogger("raftsched.console")

HTML: Final = "text/html; charset=utf-8"
LIVE_HEADER: Final = "x-console-live"
READ_YOUR_WRITES_MS: Final = 3000
"""After a session's POST, how long its reads go to the leader (a follower may not have applied
the write yet)."""
MAX_CONCURRENT: Final = 2
"""Requests a node's console handles at once; more wait their turn (in arrival order)."""
_STATIC_TYPES: Final = {".css": "text/css; charset=utf-8", ".js": "text/javascript; charset=utf-8"}
_SECURITY_HEADERS: Final = {
    # Everything the console needs is served by itself; nothing else may load or frame it.
    "Content-Security-Policy": (
        "default-src 'self'; img-src 'self' data:; style-src 'self'; script-src 'self'; "
        "frame-ancestors 'none'; form-action 'self'; base-uri 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "same-origin",
    "Cache-Control": "no-store",
}


class ConsoleNode(Protocol):
    """What the console reads of its node."""

    @property
    def node_id(self) -> str: ...

    @property
    def config(self) -> ClusterConfig: ...

    @property
    def clock(self) -> Clock: ...

    @property
    def tokens(self) -> TokenVerifier: ...


Handler = Callable[[Ctx, "re.Match[str]"], View | Redirect]


class Console:
    """The console of ``node``. :meth:`routes` lists what to add to the node's HTTP listener.

    ``client_factory(token)`` makes the SDK client a session acts with (default: the node's own
    gRPC address first, then its peers', with the node's client TLS); ``reader_factory(token)``
    the one its pages read with (default: the same targets, stale reads allowed, so this node
    answers; given only a ``client_factory``, that one)."""

    def __init__(
        self,
        node: ConsoleNode,
        client_factory: Callable[[str | None], Client] | None = None,
        reader_factory: Callable[[str | None], Client] | None = None,
        leads: Callable[[], bool] | None = None,
        confirm_read: Callable[[], int] | None = None,
    ) -> None:
        self.node = node
        # Whether this node leads now: a leader's pages read linearizably (through the read
        # index), a follower's read its own state (stale, and say how stale).
        self._leads = leads or (lambda: False)
        # On the leader, one read barrier for a whole page (blocking; the confirmed log index,
        # or raises): the page's reads then come from this node's state, which covers it, so a
        # page of several reads costs one commit round, not one each. Without it (or when it
        # fails) each read goes through the read index on its own.
        self._confirm_read = confirm_read
        self.auth_on = node.config.auth is not None
        http = node.config.node(node.node_id).http
        # As for the gRPC port: without [auth] the console lets anyone run commands, so it is
        # served only on loopback unless cluster.insecure says the exposure is deliberate.
        self.refused = ""
        if not self.auth_on and not node.config.insecure and http is not None and not is_loopback(http):
            self.refused = (
                f"The web console is off on this node: its http address {http} is not loopback and [auth] "
                "is not configured, so anyone who reaches it could run commands. Configure [auth] "
                "(or set cluster.insecure = true to accept the exposure)."
            )
        self._client_factory = client_factory or self._default_client
        self._reader_factory = reader_factory or client_factory or self._default_reader
        self.sessions = SessionStore(node.clock.now_ms, on_drop=_close_client)
        self._shared: Client | None = None  # auth off: one client for everyone
        self._shared_reader: Client | None = None
        self._clients_lock = threading.Lock()
        self.reads = ReadCache(node.clock.now_ms)  # cluster-wide figures, per credential, ~1 s
        self._gate: asyncio.Semaphore | None = None  # made on the listener's loop
        self.renderer = Renderer(views.FILTERS, {"cluster_name": node.config.name, "node_id": node.node_id})
        self._static = _load_static()
        self._routes: list[tuple[str, re.Pattern[str], Handler, bool]] = []
        for method, pattern, handler, open_ in views.ROUTES:
            self._routes.append((method, re.compile(pattern), handler, open_))

    # -- wiring ----------------------------------------------------------------------------------

    def routes(self) -> list[tuple[str, str, Callable[[HttpRequest], Any]]]:
        """``(method, aiohttp path, handler)`` to add to the listener: everything the built-in
        routes (``/metrics``, ``/healthz``, ``/readyz``, added first) do not take."""
        return [
            ("GET", DOWNLOAD_PATH, self.download_log),
            ("GET", "/{tail:.*}", self.handle),
            ("POST", "/{tail:.*}", self.handle),
        ]

    async def download_log(self, request: HttpRequest) -> HttpResponse | HttpStream:
        """``/download/log?run=ID&shard=N&attempt=N&stream=stdout|stderr``: an attempt's whole
        log as a file, streamed chunk by chunk (:meth:`raftsched.client.Client.logs` on a worker
        thread per chunk; aiohttp writes each before the next is read, so memory stays bounded).
        The caller's session and permissions as for every page; when only the stored tail is
        available, its first line says why."""
        if self.refused:
            return HttpResponse(
                403, (self.refused + "\n").encode(), "text/plain; charset=utf-8", _SECURITY_HEADERS
            )
        headers = {k.lower(): v for k, v in request.headers.items()}
        session = self.sessions.get(_cookie(headers.get("cookie", ""), COOKIE))
        principal = await asyncio.to_thread(self._principal, session) if session is not None else None
        if session is None or principal is None:
            target = urllib.parse.quote(request.path + "?" + _query(request.query))
            return _redirect(f"/login?next={target}")
        q = request.query
        run_id = q.get("run", "")
        stream = q.get("stream", "stdout")
        try:
            shard, attempt = int(q.get("shard", "0") or 0), int(q.get("attempt", "0") or 0)
        except ValueError:
            return HttpResponse(400, b"shard and attempt must be numbers\n", "text/plain; charset=utf-8")
        if stream not in ("stdout", "stderr"):
            return HttpResponse(400, b"stream must be stdout or stderr\n", "text/plain; charset=utf-8")
        client = self._client_of(session, False)
        chunks = client.logs(run_id, shard=shard, attempt=attempt, stderr=stream == "stderr")
        try:
            first = await asyncio.to_thread(next, chunks, None)
        except (NotFound, PermissionDenied, RaftschedError) as exc:
            status = 404 if isinstance(exc, NotFound) else 403 if isinstance(exc, PermissionDenied) else 503
            return HttpResponse(status, f"{exc}\n".encode(), "text/plain; charset=utf-8", _SECURITY_HEADERS)
        note = b""
        if first is not None and first.HasField("header") and first.header.source != "executor":
            note = f"[raftsched] {first.header.note}\n".encode()

        async def body() -> AsyncIterator[bytes]:
            try:
                if note:
                    yield note
                while (chunk := await asyncio.to_thread(next, chunks, None)) is not None:
                    if chunk.HasField("data"):
                        yield chunk.data
            finally:
                await asyncio.to_thread(chunks.close)

        safe = re.sub(r"[^A-Za-z0-9._@-]", "_", run_id)
        disposition = f'attachment; filename="{safe}.{shard}.{attempt or "latest"}.{stream}.log"'
        return HttpStream(
            body(),
            content_type="text/plain; charset=utf-8",
            headers={**_SECURITY_HEADERS, "Content-Disposition": disposition},
        )

    async def handle(self, request: HttpRequest) -> HttpResponse:
        """Serve one request on a worker thread (page handlers block on gRPC calls)."""
        if request.method == "GET" and request.path.startswith("/static/"):
            return self._serve_static(request.path.removeprefix("/static/"))
        if self._gate is None:
            self._gate = asyncio.Semaphore(MAX_CONCURRENT)
        async with self._gate:  # bounds the CPU the console can take from the scheduler
            return await asyncio.to_thread(self.handle_sync, request)

    def close(self) -> None:
        """Close every session's client; idempotent."""
        self.sessions.drop_all()
        for shared in (self._shared, self._shared_reader):
            if shared is not None:
                shared.close()
        self._shared = self._shared_reader = None

    def _default_client(self, token: str | None, stale_reads: bool = False) -> Client:
        config = self.node.config
        me = config.node(self.node.node_id)
        targets = [me.grpc] + [n.grpc for n in config.nodes if n.id != me.id]
        return Client(
            targets, timeout=5.0, retries=4, tls=node_client_tls(config), token=token, stale_reads=stale_reads
        )

    def _default_reader(self, token: str | None) -> Client:
        # Reads only, so the node it prefers stays this one (it answers every stale read).
        return self._default_client(token, stale_reads=True)

    def _client_of(self, session: Session, local: bool) -> Client:
        """The client ``session`` reads with (``local``: this node's state) or acts with."""
        with self._clients_lock:
            if not self.auth_on:
                if local:
                    if self._shared_reader is None:
                        self._shared_reader = self._reader_factory(None)
                    return self._shared_reader
                if self._shared is None:
                    self._shared = self._client_factory(None)
                return self._shared
            if local:
                if session.reader is None:
                    session.reader = self._reader_factory(session.token)
                reader: Client = session.reader
                return reader
            if session.client is None:
                session.client = self._client_factory(session.token)
            client: Client = session.client
            return client

    # -- the request path ------------------------------------------------------------------------

    def handle_sync(self, request: HttpRequest) -> HttpResponse:
        """Serve one (non-static) request; blocking. Never raises: a failure is a 500 page."""
        if self.refused:
            return HttpResponse(
                403, (self.refused + "\n").encode(), "text/plain; charset=utf-8", _SECURITY_HEADERS
            )
        headers = {k.lower(): v for k, v in request.headers.items()}
        session = self.sessions.get(_cookie(headers.get("cookie", ""), COOKIE))
        fresh = session is None
        if session is None:
            session = self.sessions.new()
        try:
            response = self._dispatch(request, headers, session)
        except Exception:  # a bug in a page must not take the listener down: log it, say so
            log.exception("console: %s %s failed", request.method, request.path)
            response = self._page(
                None, View("error.html", {"message": "internal error (logged on the node)"}, 500)
            )
        out_headers = {**_SECURITY_HEADERS, **response.headers}
        sid = out_headers.pop("x-session", None)
        if sid is not None or fresh:
            out_headers["Set-Cookie"] = _set_cookie(
                sid if sid is not None else session.sid, secure=request.secure
            )
        return HttpResponse(response.status, response.body, response.content_type, out_headers)

    def _dispatch(self, request: HttpRequest, headers: Mapping[str, str], session: Session) -> HttpResponse:
        method, path = request.method.upper(), request.path
        for want, pattern, handler, open_ in self._routes:
            match = pattern.fullmatch(path)
            if match is None or want != method:
                continue
            form: dict[str, str] = {}
            if method == "POST":
                form = _form(request.body)
                problem = _post_problem(headers, form, session)
                if problem:
                    return self._page(None, View("error.html", {"message": problem}, 403), session)
            now_ms = self.node.clock.now_ms()
            if method == "POST":  # an action (or sign-in/out): the next pages read the leader's state
                session.consistent_until_ms = now_ms + READ_YOUR_WRITES_MS
            local = (
                method == "GET"
                and not 0 < session.consistent_until_ms - now_ms <= READ_YOUR_WRITES_MS
                and not self._leads()
            )
            principal = self._principal(session)
            confirmed = 0
            if method == "GET" and principal is not None and self._confirm_read is not None and self._leads():
                try:
                    confirmed = self._confirm_read()
                except RaftschedError:
                    confirmed = 0  # not sure it leads: each read asks (and is refused) itself
                local = local or confirmed > 0
            if principal is None and not open_:
                if headers.get(LIVE_HEADER):
                    return HttpResponse(401, b"signed out\n", "text/plain; charset=utf-8")
                target = urllib.parse.quote(path + ("?" + _query(request.query) if request.query else ""))
                return _redirect(f"/login?next={target}")
            ctx = Ctx(
                console=self,
                session=session,
                principal=principal or ANONYMOUS,
                client=self._client_of(session, local) if principal is not None else _NO_CLIENT,
                query=dict(request.query),
                form=form,
                path=path,
                now_ms=now_ms,
                live=bool(headers.get(LIVE_HEADER)),
            )
            if confirmed:
                ctx.extra["linearizable_at"] = confirmed
            return self._run(ctx, handler, match)
        status = 405 if any(p.fullmatch(path) for _, p, _, _ in self._routes) else 404
        return self._page(None, View("error.html", {"message": f"no page at {path}"}, status), session)

    def _principal(self, session: Session) -> Principal | None:
        """Who the session acts as now: anonymous admin with auth off; the token's principal as
        the verifier sees it now (revoked or expired: the session ends); None if signed out."""
        if not self.auth_on:
            return ANONYMOUS
        if session.token is None:
            return None
        try:
            session.principal = self.node.tokens.check(session.token)
        except Unauthenticated as exc:
            log.info("console session of %s ended: %s", _principal_id(session), exc)
            self.sessions.drop(session.sid)
            return None
        except Unavailable:  # a follower that has not applied the token yet: not signed in here
            return None
        return session.principal

    def _run(self, ctx: Ctx, handler: Handler, match: re.Match[str]) -> HttpResponse:
        try:
            out = handler(ctx, match)
        except Unauthenticated as exc:
            # The token stopped working between the check and the call (revoked just now).
            self.sessions.drop(ctx.session.sid)
            return self._page(ctx, View("error.html", {"message": f"signed out: {exc}"}, 401))
        except PermissionDenied as exc:
            return self._page(ctx, View("error.html", {"message": f"refused: {exc}"}, 403))
        except NotFound as exc:
            return self._page(ctx, View("error.html", {"message": str(exc)}, 404))
        except RaftschedError as exc:
            if ctx.form:  # a form: back to the page it came from, saying why
                back = local_path(ctx.form.get("back", "")) or ctx.path
                return self._redirect(ctx, Redirect(back, ("error", str(exc))))
            status = 400 if exc.code in ("invalid_spec", "invalid_workflow") else 503
            return self._page(ctx, View("error.html", {"message": str(exc)}, status))
        if isinstance(out, Redirect):
            return self._redirect(ctx, out)
        return self._page(ctx, out)

    def _redirect(self, ctx: Ctx, out: Redirect) -> HttpResponse:
        session = ctx.extra.get("new_session", ctx.session)
        if out.flash is not None:
            session.flash.append(out.flash)
        response = _redirect(out.location)
        if "new_session" in ctx.extra:
            response = HttpResponse(
                response.status,
                response.body,
                response.content_type,
                {**response.headers, "x-session": session.sid},
            )
        return response

    def _page(self, ctx: Ctx | None, view: View, session: Session | None = None) -> HttpResponse:
        session = ctx.session if ctx is not None else session
        flash = []
        if session is not None and not (ctx is not None and ctx.live):
            flash, session.flash = session.flash, []
        context = {
            "auth_on": self.auth_on,
            "principal": ctx.principal
            if ctx is not None and self.auth_on and session and session.token
            else None,
            "csrf": session.csrf if session is not None else "",
            "flash": flash,
            "layout": "live.html" if ctx is not None and ctx.live else "base.html",
            "can": ctx.can if ctx is not None else (lambda rpc, namespace="": False),
            "now_ms": ctx.now_ms if ctx is not None else self.node.clock.now_ms(),
            "path": ctx.path if ctx is not None else "/",
            "here": _here(ctx),
            "title": view.title,
            "refresh": 0,
            "read_note": _read_note(ctx),
            **view.context,
        }
        body = self.renderer.render(view.template, context)
        return HttpResponse(view.status, body.encode(), HTML)

    def _serve_static(self, name: str) -> HttpResponse:
        found = self._static.get(name)
        if found is None:
            return HttpResponse(404, b"not found\n", "text/plain; charset=utf-8")
        body, content_type = found
        return HttpResponse(
            200,
            body,
            content_type,
            {"Cache-Control": "max-age=300", "X-Content-Type-Options": "nosniff"},
        )


class _NoClient(Client):
    """Stands in for a client on the pages a signed-out visitor may see (sign-in): any call is
    refused rather than sent without credentials."""

    def __init__(self) -> None:  # no targets, no channels
        pass

    def _call(self, method: str, request: Any, *, write: bool = False, stale: bool | None = None) -> Any:
        raise Unauthenticated("sign in first")


_NO_CLIENT: Final = _NoClient()


def _read_note(ctx: Ctx | None) -> str:
    """What the page says of its data's freshness: a stale page (a follower's, read from its own
    state) says how far behind it may be; a linearizable one says nothing."""
    if ctx is None or ctx.client is _NO_CLIENT or ctx.extra.get("linearizable_at"):
        return ""  # (a page read after one read barrier, on the leader, is linearizable)
    info = getattr(ctx.client, "last_read", None)  # a client stand-in may not say
    if not isinstance(info, ReadInfo) or info.linearizable:
        return ""
    return f"Read from this node's own state ({info.describe()})."


def _close_client(session: Session) -> None:
    for client in (session.client, session.reader):
        if client is not None:
            client.close()
    session.client = session.reader = None


def _principal_id(session: Session) -> str:
    return session.principal.id if session.principal is not None else "?"


def _load_static() -> dict[str, tuple[bytes, str]]:
    out: dict[str, tuple[bytes, str]] = {}
    root = resources.files("raftsched.web") / "static"
    for entry in root.iterdir():
        suffix = "." + entry.name.rpartition(".")[2]
        if entry.is_file() and suffix in _STATIC_TYPES:
            out[entry.name] = (entry.read_bytes(), _STATIC_TYPES[suffix])
    return out


def _cookie(header: str, name: str) -> str | None:
    for part in header.split(";"):
        key, _, value = part.strip().partition("=")
        if key == name:
            return value
    return None


def _set_cookie(sid: str, secure: bool = False) -> str:
    # "Secure" when served over TLS (tls.http): the browser then never sends the cookie over
    # plain HTTP. Strict keeps the cookie off every cross-site request, forms included.
    return f"{COOKIE}={sid}; Path=/; HttpOnly; SameSite=Strict" + ("; Secure" if secure else "")


def _form(body: bytes) -> dict[str, str]:
    try:
        text = body.decode("utf-8")
    except UnicodeDecodeError:
        return {}
    return {k: v for k, v in urllib.parse.parse_qsl(text, keep_blank_values=True)}


def _post_problem(headers: Mapping[str, str], form: Mapping[str, str], session: Session) -> str:
    """Why a POST is refused before anything is called ("" if it is not)."""
    origin = headers.get("origin")
    if origin and origin != "null":
        host = urllib.parse.urlsplit(origin).netloc
        if host != headers.get("host", ""):
            return f"refused: the form was posted from {origin}, not from this console"
    if not session.csrf_ok(form.get("csrf", "")):
        return "refused: the form's CSRF token is missing or stale (reload the page and try again)"
    return ""


def _query(query: Mapping[str, str]) -> str:
    return urllib.parse.urlencode(dict(query))


def _here(ctx: Ctx | None) -> str:
    if ctx is None:
        return "/"
    visible = {k: v for k, v in ctx.query.items()}
    return ctx.path + ("?" + _query(visible) if visible else "")


def _redirect(location: str) -> HttpResponse:
    return HttpResponse(303, b"", "text/plain; charset=utf-8", {"Location": location})
