"""Authorization: the one table that maps every RPC to the permission it needs, and the one
gRPC server interceptor that authenticates each call and checks it against the table.

Fail closed: an RPC the table does not name is refused (``PERMISSION_DENIED``), whoever calls;
a test enumerates every method of the proto descriptors against :data:`TABLE`.

Per call the cost is one dict lookup in the table plus, for a token already verified on this
node, a SHA-256 of the token and a dict lookup of its record (see
:mod:`raftsched.security.tokens`). A dispatch stream is authenticated once, when it opens.

Servicers learn who is calling through :func:`caller` (a context variable the interceptor sets
for the duration of the handler); they use it only to filter and check namespaces and to bind
executor names.
"""

from __future__ import annotations

import asyncio
import contextlib
import contextvars
import logging
import time
from collections.abc import AsyncIterator, Awaitable, Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any, Final

import grpc

from raftsched.errors import PermissionDenied, RaftschedError, Unauthenticated, Unavailable
from raftsched.security.auth import ANONYMOUS, Permission, Principal, Role, principal_from_cert
from raftsched.security.tokens import TokenVerifier

__all__ = [
    "PUBLIC",
    "TABLE",
    "AuthInterceptor",
    "Authenticator",
    "Caller",
    "RefusalLog",
    "caller",
    "required_permission",
]

log = logging.getLogger("raftsched.auth")

PUBLIC: Final = "public"
"""Marks an RPC anyone may call (health checks and server reflection only)."""

_A = "/raftsched.v1.Admin/"
_E = "/raftsched.v1.ExecutorService/"
_H = "/grpc.health.v1.Health/"
_R = "/grpc.reflection.v1alpha.ServerReflection/"

TABLE: Final[Mapping[str, Permission | str]] = {
    _A + "AddTask": Permission.TASKS_WRITE,
    _A + "AddTasks": Permission.TASKS_WRITE,
    _A + "UpdateTask": Permission.TASKS_WRITE,
    _A + "DeleteTask": Permission.TASKS_WRITE,
    _A + "SetEnabled": Permission.TASKS_WRITE,
    _A + "TriggerNow": Permission.RUNS_OPERATE,
    _A + "RetryRun": Permission.RUNS_OPERATE,
    _A + "GetTask": Permission.TASKS_READ,
    _A + "ListTasks": Permission.TASKS_READ,
    _A + "ListRuns": Permission.TASKS_READ,
    _A + "GetRun": Permission.TASKS_READ,
    _A + "FireAccounting": Permission.TASKS_READ,
    _A + "Explain": Permission.TASKS_READ,
    _A + "ClusterStatus": Permission.STATUS,
    _A + "NodeStatus": Permission.STATUS,
    _A + "ApplyWorkflow": Permission.WORKFLOWS_WRITE,
    _A + "GetWorkflow": Permission.WORKFLOWS_READ,
    _A + "ListWorkflows": Permission.WORKFLOWS_READ,
    _A + "StartWorkflowRun": Permission.WORKFLOWS_OPERATE,
    _A + "GetWorkflowRun": Permission.WORKFLOWS_READ,
    _A + "ListWorkflowRuns": Permission.WORKFLOWS_READ,
    _A + "OperateWorkflowRun": Permission.WORKFLOWS_OPERATE,
    _A + "Backfill": Permission.WORKFLOWS_OPERATE,
    _A + "GetBackfill": Permission.WORKFLOWS_READ,
    _A + "ListBackfills": Permission.WORKFLOWS_READ,
    _A + "Lineage": Permission.WORKFLOWS_READ,
    _A + "ExplainWorkflowTask": Permission.WORKFLOWS_READ,
    _A + "SetWorkflowPaused": Permission.WORKFLOWS_WRITE,
    _A + "DeleteWorkflow": Permission.WORKFLOWS_WRITE,
    _A + "ListExecutors": Permission.STATUS,
    _A + "SetQuota": Permission.QUOTAS,
    _A + "DeleteQuota": Permission.QUOTAS,
    _A + "ListQuotas": Permission.TASKS_READ,
    _A + "ListLocks": Permission.TASKS_READ,
    _A + "AddNode": Permission.MEMBERSHIP,
    _A + "RemoveNode": Permission.MEMBERSHIP,
    _A + "GetMembership": Permission.STATUS,
    _A + "DrainExecutor": Permission.EXECUTORS_MANAGE,
    _A + "Backup": Permission.BACKUP,
    _A + "CreateToken": Permission.TOKENS,
    _A + "ListTokens": Permission.TOKENS,
    _A + "RevokeToken": Permission.TOKENS,
    _A + "ListAudit": Permission.AUDIT,
    _A + "ListAlerts": Permission.TASKS_READ,
    _A + "AckAlert": Permission.RUNS_OPERATE,
    # Calendars are shared by every namespace: changing one changes what tasks of every namespace
    # run, so it is an administrator's permission; reading one is a task read.
    _A + "SetCalendar": Permission.CALENDARS,
    _A + "DeleteCalendar": Permission.CALENDARS,
    _A + "GetCalendar": Permission.TASKS_READ,
    _A + "ListCalendars": Permission.TASKS_READ,
    # Events: emitting needs events.emit in the event's namespace; listing is a task read.
    _A + "EmitEvent": Permission.EVENTS_EMIT,
    _A + "ListEvents": Permission.TASKS_READ,
    # Pools are shared by every owner and namespace: resizing one changes how much of everyone's
    # work runs, so it is an administrator's permission (as calendars); listing is a task read.
    _A + "SetPool": Permission.POOLS,
    _A + "DeletePool": Permission.POOLS,
    _A + "ListPools": Permission.TASKS_READ,
    # A plain task's backfill starts runs, as a trigger does (its progress: GetBackfill).
    _A + "BackfillTask": Permission.RUNS_OPERATE,
    # Cancelling a run needs what triggering one needs (runs.operate, in the task's namespace).
    _A + "CancelRun": Permission.RUNS_OPERATE,
    _A + "CancelRuns": Permission.RUNS_OPERATE,
    _E + "Register": Permission.EXECUTE,
    _E + "Dispatch": Permission.EXECUTE,
    _E + "DispatchBatch": Permission.EXECUTE,
    _E + "Heartbeat": Permission.EXECUTE,
    _E + "Report": Permission.EXECUTE,
    _E + "Leave": Permission.EXECUTE,
    _E + "Drain": Permission.EXECUTE,
    _E + "SendLogs": Permission.EXECUTE,
    _E + "Session": Permission.EXECUTE,
    # Full logs: reading an attempt's output is reading the run (and its namespace is checked).
    "/raftsched.v1.Logs/ReadLogs": Permission.TASKS_READ,
    _H + "Check": PUBLIC,
    _H + "Watch": PUBLIC,
    _H + "List": PUBLIC,
    # Reflection describes the services (the same schema the published .proto files hold); it
    # reads no scheduler state, so it is public like the health checks.
    _R + "ServerReflectionInfo": PUBLIC,
}
"""Every RPC the node serves and the permission it needs (``PUBLIC``: none)."""


def required_permission(method: str) -> Permission | str:
    """What ``method`` (``/package.Service/Method``) needs. Raises :class:`PermissionDenied`
    for a method the table does not name (fail closed)."""
    need = TABLE.get(method)
    if need is None:
        raise PermissionDenied(f"{method} is not in the authorization table; refused")
    return need


@dataclass(frozen=True, slots=True)
class Caller:
    """Who is calling which RPC, from where: what a servicer may ask about the current call."""

    principal: Principal
    method: str
    peer: str
    target: str = ""  # what the request names (audit log)


STREAM_RECHECK_S = 1.0
"""A bidirectional stream (an executor's ``Session``) is admitted at open, and its credentials
checked again with the first message it sends after each such interval: the unary Heartbeat and
Report calls it replaces were admitted one by one, so a revoked or expired token (or a role that
lost the permission) must stop it as soon as it stopped them."""

_CALLER: contextvars.ContextVar[Caller] = contextvars.ContextVar("raftsched_caller")
_NO_AUTH: Final = Caller(ANONYMOUS, "", "")


@contextlib.contextmanager
def acting_as(who: Caller) -> Iterator[None]:
    """Handle the calls made inside as ``who`` (a caller the HTTP layer authenticated itself:
    a signed webhook), as the interceptor does for the calls it admits."""
    reset = _CALLER.set(who)
    try:
        yield
    finally:
        _CALLER.reset(reset)


def caller() -> Caller:
    """The caller of the RPC being handled; with auth off, an anonymous admin."""
    return _CALLER.get(_NO_AUTH)


class RefusalLog:
    """Logs refused calls with the peer address, at most ``burst`` lines per ``window_s``; the
    number suppressed is reported with the next line that gets through. Never logs a token."""

    def __init__(
        self, burst: int = 20, window_s: float = 10.0, clock: Callable[[], float] = time.monotonic
    ) -> None:
        self._burst = burst
        self._window_s = window_s
        self._clock = clock
        self._window_start = -1e18
        self._count = 0
        self.suppressed = 0
        self.total = 0

    def refused(self, status: grpc.StatusCode, method: str, peer: str, reason: str) -> None:
        self.total += 1
        now = self._clock()
        if now - self._window_start >= self._window_s:
            self._window_start, self._count = now, 0
        if self._count >= self._burst:
            self.suppressed += 1
            return
        self._count += 1
        extra = f" ({self.suppressed} more refusals not logged)" if self.suppressed else ""
        self.suppressed = 0
        log.warning("refused %s from %s: %s: %s%s", method, peer or "?", status.name, reason, extra)


class Authenticator:
    """Turns one call's credentials into a :class:`Principal`: a bearer token first, else (under
    mutual TLS) a client certificate whose subject ``cert_roles`` grants a role."""

    def __init__(
        self,
        verifier: TokenVerifier,
        cert_roles: Mapping[str, tuple[Role, tuple[str, ...]]] | None = None,
    ) -> None:
        self.verifier = verifier
        self.cert_roles = dict(cert_roles or {})

    async def principal(self, context: grpc.aio.ServicerContext) -> Principal:
        """Raises :class:`Unauthenticated` if the call carries no acceptable credentials.

        A call the HTTP layer made in process for a caller it authenticated itself (a signed
        webhook: :class:`raftsched.rpc.local_calls.LocalContext` with ``verified_principal`` set)
        is that principal; a gRPC context has no such attribute, so nothing a network client
        sends can set it."""
        verified = getattr(context, "verified_principal", None)
        if isinstance(verified, Principal):
            return verified
        bearer = None
        for key, value in context.invocation_metadata() or ():
            if key == "authorization" and isinstance(value, str):
                bearer = value
                break
        if bearer is not None:
            scheme, _, token = bearer.strip().partition(" ")
            if scheme.lower() != "bearer" or not token.strip():
                raise Unauthenticated("the authorization header must be 'Bearer <token>'")
            token = token.strip()
            hit = self.verifier.cached(token)
            if hit is not None:
                return hit
            loop = asyncio.get_running_loop()
            return await loop.run_in_executor(None, self.verifier.check, token)
        if self.cert_roles:
            found = principal_from_cert(context.auth_context() or {}, self.cert_roles)
            if found is not None:
                return found
            raise Unauthenticated("no bearer token, and the client certificate (if any) is granted no role")
        raise Unauthenticated("no credentials: send 'authorization: Bearer <token>' metadata")


class AuthInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]
    """The node's one server interceptor: authenticate, check :data:`TABLE`, expose :func:`caller`.

    Refusals end the call with ``UNAUTHENTICATED`` (no or bad credentials) or ``PERMISSION_DENIED``
    (the message names the permission), with trailing metadata ``raftsched-code``, and are logged
    through ``refusals`` with the peer address.
    """

    def __init__(self, authenticator: Authenticator, refusals: RefusalLog | None = None) -> None:
        self.authenticator = authenticator
        self.refusals = refusals or RefusalLog()
        self._wrapped: dict[str, grpc.RpcMethodHandler] = {}

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        method: str = details.method
        done = self._wrapped.get(method)
        if done is not None:
            return done
        handler = await continuation(details)
        if handler is None:
            return None
        need = TABLE.get(method)
        if need == PUBLIC:
            self._wrapped[method] = handler
            return handler
        wrapped = self._wrap(handler, method, need)
        self._wrapped[method] = wrapped
        return wrapped

    async def _admit(
        self, method: str, need: Permission | str | None, request: Any, context: grpc.aio.ServicerContext
    ) -> Caller:
        peer = context.peer() or ""
        try:
            principal = await self._permitted(method, need, context)
        except (Unauthenticated, PermissionDenied) as exc:
            status = (
                grpc.StatusCode.UNAUTHENTICATED
                if isinstance(exc, Unauthenticated)
                else grpc.StatusCode.PERMISSION_DENIED
            )
            self.refusals.refused(status, method, peer, str(exc))
            await _abort(context, exc, status)
        except Unavailable as exc:  # a follower that has not applied the token yet: retry elsewhere
            await _abort(context, exc, grpc.StatusCode.UNAVAILABLE)
        return Caller(principal, method, peer, target_of(request))

    async def _permitted(
        self, method: str, need: Permission | str | None, context: grpc.aio.ServicerContext
    ) -> Principal:
        """The caller's principal if it may call ``method``; else :class:`Unauthenticated` or
        :class:`PermissionDenied` (or :class:`Unavailable`) saying why."""
        if need is None:
            raise PermissionDenied(f"{method} is not in the authorization table; refused")
        principal = await self.authenticator.principal(context)
        if not principal.may(Permission(need)):
            raise PermissionDenied(
                f"{principal.id} (role {principal.role}) lacks permission {need} needed by {method}"
            )
        return principal

    async def _rechecked(
        self, requests: AsyncIterator[Any], method: str, need: Permission | str | None, context: Any
    ) -> AsyncIterator[Any]:
        """``requests``, the caller's credentials checked again before the first message after
        each :data:`STREAM_RECHECK_S`: a refusal is raised to the handler as the error
        (:class:`Unauthenticated` or :class:`PermissionDenied`), which ends the stream with it."""
        loop = asyncio.get_running_loop()
        due = loop.time() + STREAM_RECHECK_S
        async for message in requests:
            if loop.time() >= due:
                try:
                    await self._permitted(method, need, context)
                except (Unauthenticated, PermissionDenied) as exc:
                    status = (
                        grpc.StatusCode.UNAUTHENTICATED
                        if isinstance(exc, Unauthenticated)
                        else grpc.StatusCode.PERMISSION_DENIED
                    )
                    self.refusals.refused(status, method, context.peer() or "", str(exc))
                    raise
                due = loop.time() + STREAM_RECHECK_S
            yield message

    def _wrap(
        self, handler: grpc.RpcMethodHandler, method: str, need: Permission | str | None
    ) -> grpc.RpcMethodHandler:
        if handler.unary_unary is not None:
            inner = handler.unary_unary

            async def unary(request: Any, context: grpc.aio.ServicerContext) -> Any:
                who = await self._admit(method, need, request, context)
                reset = _CALLER.set(who)
                try:
                    return await inner(request, context)
                finally:
                    _CALLER.reset(reset)

            return grpc.unary_unary_rpc_method_handler(
                unary,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            inner_stream = handler.unary_stream

            async def stream(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                who = await self._admit(method, need, request, context)  # once per stream
                _CALLER.set(who)
                async for item in inner_stream(request, context):
                    yield item

            return grpc.unary_stream_rpc_method_handler(
                stream,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )

        if handler.stream_unary is not None:  # ExecutorService.SendLogs (full logs)
            inner_upload = handler.stream_unary

            async def upload(requests: Any, context: grpc.aio.ServicerContext) -> Any:
                who = await self._admit(method, need, None, context)  # once per stream
                reset = _CALLER.set(who)
                try:
                    return await inner_upload(requests, context)
                finally:
                    _CALLER.reset(reset)

            return grpc.stream_unary_rpc_method_handler(
                upload,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )

        if handler.stream_stream is not None:  # ExecutorService.Session (issue 31 P2)
            inner_session = handler.stream_stream

            async def session(requests: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
                who = await self._admit(method, need, None, context)  # at open, then as it goes on
                _CALLER.set(who)
                async for item in inner_session(self._rechecked(requests, method, need, context), context):
                    yield item

            return grpc.stream_stream_rpc_method_handler(
                session,
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )

        # Any other shape does not exist in the API; refuse rather than pass unchecked.
        async def refuse(request: Any, context: grpc.aio.ServicerContext) -> Any:
            await _abort(
                context,
                PermissionDenied(f"{method}: unsupported RPC shape"),
                grpc.StatusCode.PERMISSION_DENIED,
            )

        return grpc.unary_unary_rpc_method_handler(refuse)


async def _abort(context: grpc.aio.ServicerContext, exc: RaftschedError, status: grpc.StatusCode) -> None:
    context.set_trailing_metadata((("raftsched-code", exc.code),))
    await context.abort(status, str(exc))


# -- namespaces: what a servicer checks about the objects a call names ----------------------------


def visible(namespace: str) -> bool:
    """Whether the current caller may see objects of ``namespace`` (always, with auth off)."""
    return caller().principal.in_namespace(namespace)


def require_namespace(namespace: str, what: str) -> None:
    """Raise :class:`PermissionDenied` unless the current caller may use ``namespace``.

    ``what`` names the object (``task 'etl'``) for the message; the namespace itself is named
    too, which reveals no more than the caller's own request did.
    """
    who = caller().principal
    if not who.in_namespace(namespace):
        raise PermissionDenied(
            f"{who.id} may not use namespace {namespace or 'default'!r} ({what}); "
            f"its namespaces: {who.namespaces_text() or 'none'}"
        )


def auth_on() -> bool:
    """Whether the current call went through the interceptor (auth configured on this node)."""
    return bool(caller().method)


def target_of(request: Any) -> str:
    """What a request names, for the audit log: the first of its ``name``, ``run_id``,
    ``workflow``, ``id``, ``backfill_id`` fields, or the name in its ``spec``."""
    for name in ("name", "run_id", "workflow", "id", "backfill_id"):
        value = getattr(request, name, None)
        if isinstance(value, str) and value:
            return value
    spec = getattr(request, "spec", None)
    value = getattr(spec, "name", None)
    if isinstance(value, str) and value:
        return value
    tasks = getattr(request, "tasks", None)
    if tasks is not None and not isinstance(tasks, str):
        try:
            return f"{len(tasks)} tasks"
        except TypeError:
            return ""
    return ""
