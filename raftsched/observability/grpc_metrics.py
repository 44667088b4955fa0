"""A ``grpc.aio`` server interceptor that counts calls by service, method and status code.

Unary calls are also timed (``raftsched_grpc_request_seconds``); a stream is counted once, when
it ends, with the code it ended with (its lifetime is not a latency). The label values come
from the server's own method table, so their number is bounded by the API, not by callers: a
method the server does not implement is answered UNIMPLEMENTED by gRPC before it reaches here
and is not counted.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import grpc

from raftsched.observability.metrics import Counter, Histogram

__all__ = ["MetricsInterceptor"]


class MetricsInterceptor(grpc.aio.ServerInterceptor):  # type: ignore[misc]  # grpc has no types
    """Counts into ``requests{service, method, code}`` and times into ``seconds{service, method}``.

    Only ``async def`` handlers are supported (every raftsched servicer is one). ``monotonic``
    is the node's clock (seconds).
    """

    def __init__(self, requests: Counter, seconds: Histogram, monotonic: Callable[[], float]) -> None:
        self._requests = requests
        self._seconds = seconds
        self._monotonic = monotonic

    async def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], Awaitable[grpc.RpcMethodHandler]],
        details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler:
        handler = await continuation(details)
        if handler is None:
            return None
        service, method = _split(details.method)
        if handler.unary_unary is not None:
            return grpc.unary_unary_rpc_method_handler(
                self._unary(handler.unary_unary, service, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream is not None:
            return grpc.unary_stream_rpc_method_handler(
                self._stream(handler.unary_stream, service, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        if handler.stream_stream is not None:  # ExecutorService.Session: counted when it ends
            return grpc.stream_stream_rpc_method_handler(
                self._stream(handler.stream_stream, service, method),
                request_deserializer=handler.request_deserializer,
                response_serializer=handler.response_serializer,
            )
        return handler  # client streams (SendLogs): not counted

    def _unary(
        self, behavior: Callable[[Any, Any], Awaitable[Any]], service: str, method: str
    ) -> Callable[[Any, Any], Awaitable[Any]]:
        async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> Any:
            start = self._monotonic()
            code = "UNKNOWN"
            try:
                reply = await behavior(request, context)
                code = _code(context, "OK")
                return reply
            except BaseException:
                code = _code(context, "UNKNOWN")
                raise
            finally:
                self._requests.inc(service, method, code)
                self._seconds.observe(self._monotonic() - start, service, method)

        return wrapped

    def _stream(
        self, behavior: Callable[[Any, Any], AsyncIterator[Any]], service: str, method: str
    ) -> Callable[[Any, Any], AsyncIterator[Any]]:
        async def wrapped(request: Any, context: grpc.aio.ServicerContext) -> AsyncIterator[Any]:
            code = "UNKNOWN"
            try:
                async for item in behavior(request, context):
                    yield item
                code = _code(context, "OK")
            except BaseException:
                code = _code(context, "CANCELLED" if context.cancelled() else "UNKNOWN")
                raise
            finally:
                self._requests.inc(service, method, code)

        return wrapped


def _split(full_method: str) -> tuple[str, str]:
    # "/raftsched.v1.Admin/AddTask" -> ("raftsched.v1.Admin", "AddTask")
    service, _, method = full_method.lstrip("/").rpartition("/")
    return service, method


def _code(context: grpc.aio.ServicerContext, default: str) -> str:
    code = context.code()
    if code is None:
        return default
    if isinstance(code, grpc.StatusCode):
        return str(code.name)
    try:
        return str(grpc.StatusCode(code).name)  # pragma: no cover - some versions store the value
    except ValueError:
        return default
