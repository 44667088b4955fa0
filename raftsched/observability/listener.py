"""The HTTP listener of a node or an executor: the only ``aiohttp`` import.

Routes built in:

* ``GET /metrics`` — the Prometheus text exposition;
* ``GET /healthz`` — 200 while the process serves (it answered, so it is alive);
* ``GET /readyz`` — 200 when the owner says it is ready, else 503; the body says why.

Others add routes with :meth:`HttpListener.add_route` before :meth:`HttpListener.start`, in
framework-neutral terms (:class:`HttpRequest` in, :class:`HttpResponse` out), so no module but
this one depends on the HTTP library.

The listener runs on the caller's asyncio loop. The metrics callable runs on a worker thread
(a scrape may take a lock the applier holds; it must not stall the loop's gRPC traffic); the
probes and added routes run on the loop and must not block.
"""

from __future__ import annotations

import asyncio
import errno
import logging
import socket
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from dataclasses import dataclass, field

from aiohttp import web

from raftsched.config.values import parse_address
from raftsched.errors import RaftschedError

__all__ = ["Handler", "HttpListener", "HttpRequest", "HttpResponse", "HttpStream", "ListenError", "Probe"]

log = logging.getLogger(__name__)

TEXT = "text/plain; charset=utf-8"


class ListenError(RaftschedError):
    """The HTTP listener could not bind its address (in use, not local, no permission).

    The message is one line naming the address and the reason; nothing was started.
    """


@dataclass(frozen=True, slots=True)
class Probe:
    """A probe's answer: ``ok`` and one line saying why (shown in the response body)."""

    ok: bool
    detail: str = ""


@dataclass(frozen=True, slots=True)
class HttpRequest:
    method: str
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    headers: Mapping[str, str] = field(default_factory=dict)
    body: bytes = b""
    raw_path: str = ""  # the path as sent, still percent-encoded ("" = same as path)
    raw_query: str = ""  # the query string as sent, without "?"
    remote: str = ""  # the peer's address
    secure: bool = False  # served over TLS
    peer_names: tuple[str, ...] = ()  # common names of the client certificate TLS verified


@dataclass(frozen=True, slots=True)
class HttpResponse:
    status: int = 200
    body: bytes = b""
    content_type: str = TEXT
    headers: Mapping[str, str] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class HttpStream:
    """A response sent as ``body`` yields it (server-sent events); the iterator is closed when
    the client goes away."""

    body: AsyncIterator[bytes]
    status: int = 200
    content_type: str = "text/event-stream"
    headers: Mapping[str, str] = field(default_factory=dict)


Handler = Callable[[HttpRequest], Awaitable[HttpResponse | HttpStream]]


def _always_ok() -> Probe:
    return Probe(True, "alive")


class HttpListener:
    """One HTTP server on ``address`` (``host:port``; port 0 picks a free one).

    ``metrics`` returns ``(body, content type)`` and is called per scrape on a worker thread
    (it must be thread-safe), or on the loop with ``metrics_in_thread=False`` (it must be quick);
    ``readyz`` and ``healthz`` are called on the loop. Lifecycle:
    :meth:`bind` (optional, synchronous), :meth:`start`, :meth:`stop` (idempotent); routes may
    be added until :meth:`start`.
    """

    def __init__(
        self,
        address: str,
        *,
        metrics: Callable[[], tuple[bytes, str]] | None = None,
        readyz: Callable[[], Probe] = _always_ok,
        healthz: Callable[[], Probe] = _always_ok,
        name: str = "raftsched",
        metrics_in_thread: bool = True,
        ssl_context: ssl.SSLContext | None = None,
        metrics_client_cert: bool = False,
    ) -> None:
        self.host, self.port = _listen_address(address)
        self.address = address
        self.name = name
        self._metrics = metrics
        self._metrics_in_thread = metrics_in_thread
        self._readyz = readyz
        self._healthz = healthz
        self._routes: list[tuple[str, str, Handler]] = []
        self._ssl = ssl_context
        self._metrics_client_cert = metrics_client_cert
        self._runner: web.AppRunner | None = None
        self._sock: socket.socket | None = None
        self.bound: str | None = None
        """``host:port`` actually bound (the real port when ``address`` asked for 0)."""

    def add_route(self, method: str, path: str, handler: Handler) -> None:
        """Serve ``method path`` with ``handler``. Only before :meth:`start`."""
        if self._runner is not None:
            raise RuntimeError("routes must be added before the listener starts")
        self._routes.append((method.upper(), path, handler))

    def make_app(self) -> web.Application:
        """The application: the built-in routes plus every added one."""
        app = web.Application()
        app.router.add_get("/metrics", self._serve_metrics)
        app.router.add_get("/healthz", self._probe_handler(lambda: self._healthz()))
        app.router.add_get("/readyz", self._probe_handler(lambda: self._readyz()))
        for method, path, handler in self._routes:
            app.router.add_route(method, path, _adapt(handler))
        return app

    def bind(self) -> None:
        """Bind and listen on the address now, without serving yet; idempotent.

        Synchronous, so a caller can fail fast (before it joins a cluster) when the port is
        taken. Raises :class:`ListenError` (one line) if the address cannot be bound.
        """
        if self._sock is not None:
            return
        try:
            family, kind, proto, _, where = socket.getaddrinfo(
                self.host, self.port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE
            )[0]
            sock = socket.socket(family, kind, proto)
        except OSError as exc:
            raise ListenError(f"http: cannot listen on {self.address}: {exc.strerror or exc}") from None
        try:
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            sock.bind(where)
            sock.listen(128)
            sock.setblocking(False)
        except OSError as exc:
            sock.close()
            reason = "address already in use" if exc.errno == errno.EADDRINUSE else exc.strerror or str(exc)
            raise ListenError(f"http: cannot listen on {self.address}: {reason}") from None
        self._sock = sock
        host, port = sock.getsockname()[:2]
        self.bound = f"[{host}]:{port}" if ":" in str(host) else f"{host}:{port}"

    async def start(self) -> None:
        """Serve (binding first if :meth:`bind` was not called). Raises :class:`ListenError`."""
        self.bind()
        assert self._sock is not None
        runner = web.AppRunner(self.make_app(), access_log=None, handle_signals=False, shutdown_timeout=1.0)
        await runner.setup()
        await web.SockSite(runner, self._sock, ssl_context=self._ssl).start()
        self._runner = runner
        log.info(
            "%s serving %s (/metrics, /healthz, /readyz) on %s",
            self.name,
            "HTTPS" if self._ssl is not None else "HTTP",
            self.bound,
        )

    @property
    def scheme(self) -> str:
        """``https`` when the listener serves TLS, else ``http``."""
        return "https" if self._ssl is not None else "http"

    async def stop(self) -> None:
        """Stop serving and release the port; idempotent."""
        runner, self._runner = self._runner, None
        if runner is not None:
            await runner.cleanup()
        self.close()

    def close(self) -> None:
        """Release a socket bound but never served (:meth:`stop` does this too); idempotent."""
        sock, self._sock = self._sock, None
        if sock is not None:
            sock.close()

    async def _serve_metrics(self, request: web.Request) -> web.StreamResponse:
        if self._metrics is None:
            return web.Response(status=404, text="metrics are not enabled here\n")
        if self._metrics_client_cert and not _peer_certificate(request):
            return web.Response(
                status=403, text="/metrics needs a client certificate signed by this node's tls.ca_file\n"
            )
        if self._metrics_in_thread:
            body, content_type = await asyncio.to_thread(self._metrics)
        else:
            body, content_type = self._metrics()
        return web.Response(body=body, headers={"Content-Type": content_type})

    @staticmethod
    def _probe_handler(probe: Callable[[], Probe]) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
        async def handle(request: web.Request) -> web.StreamResponse:
            try:
                answer = probe()
            except Exception as exc:  # a probe that fails says "not ready", it does not 500
                log.exception("probe %s failed", request.path)
                answer = Probe(False, f"probe failed: {exc}")
            status = 200 if answer.ok else 503
            text = ("ok" if answer.ok else "not ready") + (f": {answer.detail}" if answer.detail else "")
            return web.Response(status=status, text=text + "\n")

        return handle


def _peer_names(request: web.Request) -> tuple[str, ...]:
    """The subject common names of the client certificate the handshake verified (none: no
    TLS, or no certificate)."""
    transport = request.transport
    obj = transport.get_extra_info("ssl_object") if transport is not None else None
    cert = obj.getpeercert() if obj is not None else None
    if not cert:
        return ()
    return tuple(value for rdn in cert.get("subject", ()) for key, value in rdn if key == "commonName")


def _peer_certificate(request: web.Request) -> bool:
    """Whether the client presented a certificate the TLS handshake verified (with a CA loaded
    and CERT_OPTIONAL, a certificate that does not verify fails the handshake instead)."""
    transport = request.transport
    obj = transport.get_extra_info("ssl_object") if transport is not None else None
    return bool(obj is not None and obj.getpeercert())


def _listen_address(address: str) -> tuple[str, int]:
    """``host:port`` as :func:`parse_address` reads it, and port 0 (any free port) too."""
    head, sep, port = address.rpartition(":")
    if sep and port.strip("0") == "" and port:
        host, _ = parse_address(f"{head}:1", "http")
        return host, 0
    return parse_address(address, "http")


def _adapt(handler: Handler) -> Callable[[web.Request], Awaitable[web.StreamResponse]]:
    async def handle(request: web.Request) -> web.StreamResponse:
        req = HttpRequest(
            method=request.method,
            path=request.path,
            query=dict(request.query),
            headers=dict(request.headers),
            body=await request.read(),
            raw_path=request.raw_path.partition("?")[0],
            raw_query=request.rel_url.raw_query_string,
            remote=request.remote or "",
            secure=request.secure,
            peer_names=_peer_names(request),
        )
        out = await handler(req)
        if isinstance(out, HttpStream):
            return await _stream(request, out)
        response = web.Response(status=out.status, body=out.body, headers=dict(out.headers))
        response.headers["Content-Type"] = out.content_type
        return response

    return handle


async def _stream(request: web.Request, out: HttpStream) -> web.StreamResponse:
    response = web.StreamResponse(status=out.status, headers=dict(out.headers))
    response.headers["Content-Type"] = out.content_type
    response.headers["Cache-Control"] = "no-store"
    await response.prepare(request)
    body = out.body
    try:
        async for chunk in body:
            await response.write(chunk)
    except ConnectionResetError:
        pass  # the client went away: nothing more to send
    finally:
        aclose = getattr(body, "aclose", None)
        if aclose is not None:
            await aclose()
    return response
