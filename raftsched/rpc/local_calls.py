"""Calling the node's own Admin (and Logs) servicers in process, through the same server
interceptors its gRPC port runs: the call path of the HTTP/JSON API (:mod:`raftsched.rpc.http_api`)
and of signed webhooks.

:class:`LocalCalls` captures the method handlers the generated ``add_*_to_server`` functions
register, wraps them in the interceptors (outermost first) and calls them with a
:class:`LocalContext` standing in for gRPC's servicer context: it carries the ``Authorization``
header and the stale-read flag as invocation metadata, a verified client certificate's names,
and captures the abort (:class:`Aborted`) and the error being answered.
"""

from __future__ import annotations

from collections.abc import AsyncGenerator, AsyncIterator, Awaitable, Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NoReturn

import grpc
from google.protobuf.message import Message

from raftsched.errors import RaftschedError
from raftsched.security.auth import Principal
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc

__all__ = ["Aborted", "LocalCalls", "LocalContext"]


class Aborted(Exception):
    """What :meth:`LocalContext.abort` raises (gRPC's ``context.abort`` raises too)."""

    def __init__(self, code: grpc.StatusCode, details: str) -> None:
        super().__init__(details)
        self.code = code
        self.details = details


class LocalContext:
    """The part of ``grpc.aio.ServicerContext`` the interceptors and servicers use, for a call
    made in process: invocation metadata, peer, trailing metadata, abort (raises
    :class:`Aborted`), and :meth:`note_error` (called by :func:`raftsched.rpc.plumbing.abort`
    with the error being answered, so the field path of an invalid argument is known)."""

    def __init__(
        self,
        metadata: Sequence[tuple[str, str]],
        peer: str,
        cert_names: Sequence[str] = (),
        verified_principal: Principal | None = None,
    ) -> None:
        self._metadata = tuple(metadata)
        self._peer = peer
        self._cert_names = tuple(cert_names)
        self.verified_principal = verified_principal
        """A caller the HTTP layer authenticated itself (a signed webhook): the authorization
        interceptor takes it as the call's principal (:meth:`authz.Authenticator.principal`)."""
        self.trailing: dict[str, str] = {}
        self.error: RaftschedError | None = None

    def invocation_metadata(self) -> tuple[tuple[str, str], ...]:
        return self._metadata

    def peer(self) -> str:
        return self._peer

    def auth_context(self) -> dict[str, list[bytes]]:
        """As gRPC gives it: the verified client certificate's common names (``[auth.subjects]``
        grants them roles, on the HTTP listener as on the gRPC port)."""
        return {"x509_common_name": [n.encode() for n in self._cert_names]} if self._cert_names else {}

    def set_trailing_metadata(self, metadata: Sequence[tuple[str, str | bytes]]) -> None:
        for key, value in metadata:
            self.trailing[key] = value.decode() if isinstance(value, bytes) else value

    def note_error(self, exc: RaftschedError) -> None:
        self.error = exc

    def add_done_callback(self, callback: Callable[[Any], None]) -> None:
        """Accepted and not called: an in-process stream ends when the HTTP layer closes its
        generator (the handler's own ``finally`` runs then)."""

    async def abort(self, code: grpc.StatusCode, details: str = "", *_: object) -> NoReturn:
        raise Aborted(code, details)

    def cancelled(self) -> bool:
        return False

    def done(self) -> bool:
        return False


@dataclass(frozen=True, slots=True)
class _Details:
    """A ``grpc.HandlerCallDetails`` for the interceptors."""

    method: str
    invocation_metadata: tuple[tuple[str, str], ...]


class _Capture:
    """A stand-in server that keeps the method handlers the generated ``add_*_to_server`` gives."""

    def __init__(self) -> None:
        self.handlers: dict[str, grpc.RpcMethodHandler] = {}

    def add_generic_rpc_handlers(self, handlers: Sequence[Any]) -> None:
        pass

    def add_registered_method_handlers(self, service: str, handlers: Mapping[str, Any]) -> None:
        for name, handler in handlers.items():
            self.handlers[f"/{service}/{name}"] = handler


Continuation = Callable[[Any], Awaitable[Any]]


class LocalCalls:
    """Calls the Admin RPCs of ``servicer`` in process, through ``interceptors`` (outermost
    first, the list the node's gRPC server runs, less what only counts gRPC traffic)."""

    def __init__(
        self,
        servicer: pb_grpc.AdminServicer,
        interceptors: Sequence[Any] = (),
        logs: pb_grpc.LogsServicer | None = None,
    ) -> None:
        capture = _Capture()
        pb_grpc.add_AdminServicer_to_server(servicer, capture)
        if logs is not None:  # full logs: GET /api/v1/runs/{id}/logs:full (streamed, see HttpApi)
            pb_grpc.add_LogsServicer_to_server(logs, capture)
        self._handlers = capture.handlers
        self._interceptors = tuple(interceptors)

    async def _handler(self, method: str, metadata: tuple[tuple[str, str], ...]) -> Any:
        async def base(details: Any) -> Any:
            return self._handlers.get(details.method)

        call: Continuation = base
        for interceptor in reversed(self._interceptors):
            call = _layer(interceptor, call)
        return await call(_Details(method, metadata))

    async def call(self, method: str, request: Message, context: LocalContext) -> Message | list[Message]:
        """The reply of RPC ``method`` (``/raftsched.v1.Admin/GetTask``); a server-streaming
        RPC's messages as a list. Raises :class:`Aborted` as the call ends with a status."""
        handler = await self._handler(method, context.invocation_metadata())
        if handler is None:
            raise Aborted(grpc.StatusCode.UNIMPLEMENTED, f"{method} is not served")
        if handler.unary_unary is not None:
            reply: Message = await handler.unary_unary(request, context)
            return reply
        stream: AsyncIterator[Message] = handler.unary_stream(request, context)
        return [item async for item in stream]

    async def stream(
        self, method: str, request: Message, context: LocalContext
    ) -> AsyncGenerator[Message, None]:
        """A server-streaming RPC's messages one by one, as the handler yields them (never
        collected: a full log may be gigabytes). Raises :class:`Aborted` as :meth:`call`."""
        handler = await self._handler(method, context.invocation_metadata())
        if handler is None or handler.unary_stream is None:
            raise Aborted(grpc.StatusCode.UNIMPLEMENTED, f"{method} is not served")
        async for item in handler.unary_stream(request, context):
            yield item


def _layer(interceptor: Any, inner: Continuation) -> Continuation:
    async def call(details: Any) -> Any:
        return await interceptor.intercept_service(inner, details)

    return call
