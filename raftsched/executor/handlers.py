"""The handler runner: a registered Python callable, one attempt (the embedded executor).

:class:`CallableRunner` carries out the handler side of the runners' contract
(:mod:`raftsched.executor.runners`): a handler that raises, exits or times out is a failed
:class:`~raftsched.executor.runners.AttemptResult`, never an exception of the agent's. A plain
function runs in a worker thread, an ``async def`` on the agent's loop; one registered
``eager=True`` may be started inside the batch that delivered it
(:mod:`raftsched.executor.batched`), which :func:`resume_started`, :func:`handler_success` and
:func:`handler_failure` serve.
"""

from __future__ import annotations

import asyncio
import inspect
import logging
import time
import traceback
import types
from collections.abc import Awaitable, Callable, Coroutine, Generator
from typing import Any, TypeVar, cast

from raftsched.errors import InvalidSpec
from raftsched.executor.runners import (
    DEFAULT_GRACE_S,
    DEFAULT_TAIL_BYTES,
    AttemptContext,
    AttemptResult,
    cap_error,
    cap_text,
    describe,
    log,
)
from raftsched.logfields import attempt_fields
from raftsched.model import MAX_LABEL

Handler = Callable[[AttemptContext], object]
H = TypeVar("H", bound=Handler)


class CallableRunner:
    """Runs registered Python handlers by name: the embedded executor's runner.

    A handler takes the :class:`AttemptContext`. Coroutine functions run on the event loop; plain
    functions run in a worker thread (``asyncio.to_thread``, so the default executor's thread
    limit applies). Returning normally is success; the return value, if not None, is reported as
    ``stdout_tail`` (``str()`` of it, capped). Raising is failure: ``error`` is ``ExcType:
    message`` and ``stderr_tail`` the traceback's tail. What a handler prints is not captured.

    Timeout (``ctx.timeout_ms > 0``): an async handler is cancelled. A sync handler cannot be
    stopped: the result says ``timed_out`` at once, but its thread runs on to completion in the
    background (its outcome is discarded) and holds a worker thread meanwhile. Handlers that may
    overrun should be async, or poll ``ctx.cancel_requested()`` (set at the timeout too).

    Cancel (the scheduler cancelled the run: ``ctx.cancellation`` set): an async handler is
    cancelled (``CancelledError`` raised inside it; ``grace_s`` to clean up); a sync handler sees
    ``ctx.cancel_requested()`` turn True and has ``grace_s`` to return. The result says
    ``cancelled`` either way.

    Register handlers before running; registration is not synchronised with ``run``.
    """

    def __init__(
        self,
        *,
        tail_bytes: int = DEFAULT_TAIL_BYTES,
        monotonic: Callable[[], float] = time.monotonic,
        grace_s: float = DEFAULT_GRACE_S,
    ) -> None:
        if tail_bytes < 0 or grace_s < 0:
            raise ValueError("tail_bytes and grace_s must be >= 0")
        self.tail_bytes = tail_bytes
        self.grace_s = grace_s
        self._monotonic = monotonic
        self.monotonic = monotonic  # the clock durations are measured on
        self._handlers: dict[str, Handler] = {}
        self._async: dict[str, bool] = {}  # per handler, resolved once at registration (inspect)
        self._eager: dict[str, Handler] = {}  # async handlers registered eager=True

    def register(self, name: str, fn: Handler, *, eager: bool = False) -> None:
        """Register ``fn`` as handler ``name``. A bad or already used name raises :class:`InvalidSpec`.

        ``eager`` (an async handler only): over a Session stream the agent starts it at once,
        inside the batch that delivered it (``coro.send(None)``: no Task unless it suspends;
        :mod:`raftsched.executor.batched`). Until its first ``await`` it then runs with no
        current task: ``asyncio.current_task()`` is None there, so an ``asyncio.timeout`` or a
        ``TaskGroup`` opened before the first ``await`` fails the attempt (RuntimeError) instead
        of cancelling the agent. Leave it off for such handlers."""
        if not isinstance(name, str) or not name.strip():
            raise InvalidSpec("handler", "required (a non-empty string)")
        if len(name) > MAX_LABEL:
            raise InvalidSpec("handler", f"{len(name)} characters, at most {MAX_LABEL} allowed")
        if not callable(fn):
            raise InvalidSpec("handler", f"{name!r}: {fn!r} is not callable")
        if name in self._handlers:
            raise InvalidSpec("handler", f"{name!r} is already registered")
        self._handlers[name] = fn
        self._async[name] = _is_async(fn)
        if eager and not self._async[name]:
            raise InvalidSpec("handler", f"{name!r}: only an async handler may be eager")
        if eager:
            self._eager[name] = fn

    def handler(self, name: str, *, eager: bool = False) -> Callable[[H], H]:
        """Decorator form of :meth:`register`: ``@runner.handler("name")``; returns the function as is."""

        def decorate(fn: H) -> H:
            self.register(name, fn, eager=eager)
            return fn

        return decorate

    def eager(self, name: str) -> Handler | None:
        """The handler ``name`` if it was registered ``eager=True``, else None."""
        return self._eager.get(name)

    def names(self) -> list[str]:
        """Registered handler names, sorted."""
        return sorted(self._handlers)

    async def run(
        self,
        handler: str,
        ctx: AttemptContext,
        call: asyncio.Future[object] | None = None,
        started: float | None = None,
    ) -> AttemptResult:
        """Run handler ``handler`` for ``ctx``; never raises except on cancellation.

        ``call``: the handler already started (an eager start that suspended, see
        :meth:`register`) at ``started`` (this runner's monotonic clock): wait for it as for
        one started here, with the rest of its timeout."""
        if started is None:
            started = self._monotonic()
        fn = self._handlers.get(handler)
        if fn is None:
            registered = ", ".join(self.names()) or "none"
            return AttemptResult(
                ctx.execution_id,
                False,
                error=cap_error(f"unknown handler {handler!r} (registered: {registered})"),
                duration_ms=self._elapsed_ms(started),
            )
        timeout = ctx.timeout_ms / 1000 if ctx.timeout_ms > 0 else None
        if timeout is not None and call is not None:
            timeout = max(0.0, timeout - (self._monotonic() - started))
        is_async = self._async[handler]
        try:
            value = await self._call(fn, ctx, timeout, is_async, call)
        except _Stopped:
            what = "cancelled" if is_async else "its thread did not return within the grace and runs on"
            log.info(
                "attempt %s cancelled (%s): handler %r %s",
                ctx.execution_id,
                ctx.cancellation.reason or "by the scheduler",
                handler,
                what,
                extra=attempt_fields(ctx.execution_id, ctx.run_id, ctx.task, attempt=ctx.attempt),
            )
            why = ctx.cancellation.reason or "by the scheduler"
            return AttemptResult(
                ctx.execution_id,
                False,
                error=f"cancelled ({why}): handler {handler!r} {what}",
                duration_ms=self._elapsed_ms(started),
            )
        except TimeoutError:
            what = "cancelled" if is_async else "its thread cannot be stopped and runs on"
            log.log(
                logging.INFO if is_async else logging.WARNING,
                "attempt %s timed out after %d ms: handler %r %s",
                ctx.execution_id,
                ctx.timeout_ms,
                handler,
                what,
                extra=attempt_fields(ctx.execution_id, ctx.run_id, ctx.task, attempt=ctx.attempt),
            )
            return AttemptResult(
                ctx.execution_id,
                False,
                error=f"timed out after {ctx.timeout_ms} ms: handler {handler!r} {what}",
                duration_ms=self._elapsed_ms(started),
                timed_out=True,
            )
        except (Exception, SystemExit) as exc:  # SystemExit: a handler's sys.exit() must not stop us
            trace = "".join(traceback.format_exception(exc))
            return AttemptResult(
                ctx.execution_id,
                False,
                error=cap_error(describe(exc)),
                stderr_tail=cap_text(trace, self.tail_bytes),
                duration_ms=self._elapsed_ms(started),
            )
        return AttemptResult(
            ctx.execution_id,
            True,
            stdout_tail="" if value is None else cap_text(str(value), self.tail_bytes),
            duration_ms=self._elapsed_ms(started),
        )

    async def _call(
        self,
        fn: Handler,
        ctx: AttemptContext,
        timeout: float | None,
        is_async: bool,
        call: asyncio.Future[object] | None = None,
    ) -> object:
        """The handler's value. Raises TimeoutError at the timeout (an async handler cancelled, a
        thread's ``ctx.cancel_requested()`` set), :class:`_Stopped` on a cancel (an async
        handler is cancelled; a thread gets ``grace_s`` to notice and return), or what the handler
        raised.

        Async handlers are not started eagerly (``coro.send(None)`` before a Task, measured at
        ~10 us less per attempt): on Python 3.11, code a handler runs before its first await
        would see the agent's task as ``asyncio.current_task()``, so an ``asyncio.timeout`` or a
        ``TaskGroup`` opened there would cancel the agent's task instead of the handler's
        (Python 3.12's ``eager_task_factory`` swaps the current task; adopt it with 3.12).
        Handlers registered ``eager=True`` are, over a Session (:mod:`raftsched.executor.batched`),
        with no current task until their first await: ``call`` is then the rest of one."""
        if call is None:
            call = asyncio.ensure_future(_exits_wrapped(fn, ctx, is_async))
        stopper = ctx.cancellation.stopped()
        try:
            done, _ = await asyncio.wait(
                (call, stopper), timeout=timeout, return_when=asyncio.FIRST_COMPLETED
            )
        except BaseException:
            call.cancel()
            raise
        finally:
            stopper.cancel()
        if call in done:
            try:
                return call.result()
            except _HandlerExit as wrapped:
                raise wrapped.exit from None  # the caller reports it as the handler's failure
        if stopper not in done:  # the timeout
            ctx.cancellation.set("timed out")
            call.cancel()
            raise TimeoutError
        if is_async:
            call.cancel()
            await asyncio.wait((call,), timeout=self.grace_s)
        else:
            await asyncio.wait((call,), timeout=self.grace_s)  # it may poll cancel_requested()
            call.cancel()
        if call.done() and not call.cancelled():
            call.exception()  # mark a late failure as seen: the attempt is cancelled either way
        raise _Stopped

    def _elapsed_ms(self, started: float) -> int:
        return max(0, round((self._monotonic() - started) * 1000))


class _HandlerExit(Exception):
    """A handler's ``SystemExit``, carried out of its task: raised as it is inside a task, the
    event loop would re-raise it and stop the executor."""

    def __init__(self, exit: SystemExit) -> None:
        super().__init__(str(exit))
        self.exit = exit


async def _exits_wrapped(fn: Handler, ctx: AttemptContext, is_async: bool) -> object:
    try:
        return await _invoke(fn, ctx, is_async)
    except SystemExit as exc:
        raise _HandlerExit(exc) from None


class _Stopped(Exception):
    """The attempt was cancelled by the scheduler (inside :class:`CallableRunner`)."""


def _is_async(fn: Handler) -> bool:
    # Also an instance whose class defines ``async def __call__``.
    return inspect.iscoroutinefunction(fn) or inspect.iscoroutinefunction(type(fn).__call__)


async def _invoke(fn: Handler, ctx: AttemptContext, is_async: bool) -> object:
    if is_async:
        return await cast(Awaitable[object], fn(ctx))
    value = await asyncio.to_thread(fn, ctx)
    if inspect.isawaitable(value):  # a sync wrapper that returned a coroutine
        awaited: Awaitable[object] = value
        return await awaited
    return value


@types.coroutine
def _resume(coro: Coroutine[Any, Any, Any], yielded: Any) -> Generator[Any, Any, Any]:
    """The rest of a coroutine that already ran up to its first suspension (it yielded
    ``yielded``): driven inside a Task, which waits on what it yielded, then goes on.
    Cancellation (a timeout, a cancel) is thrown into the coroutine, as a Task would."""
    while True:
        try:
            sent = yield yielded
        except GeneratorExit:
            coro.close()
            raise
        except BaseException as exc:
            try:
                yielded = coro.throw(exc)
            except StopIteration as stop:
                return stop.value
            continue
        try:
            yielded = coro.send(sent)
        except StopIteration as stop:
            return stop.value


async def resume_started(coro: Coroutine[Any, Any, Any], yielded: Any) -> object:
    """The rest of an eagerly started handler (see :meth:`CallableRunner.register`), for
    ``CallableRunner.run(..., call=ensure_future(resume_started(coro, yielded)))``: its
    ``SystemExit`` is carried out as the runner expects."""
    try:
        return await _resume(coro, yielded)
    except SystemExit as exc:
        raise _HandlerExit(exc) from None


def handler_failure(
    exc: BaseException, tail_bytes: int, duration_ms: int, execution_id: str
) -> AttemptResult:
    """The result of a handler that raised ``exc`` (as :meth:`CallableRunner.run` reports it)."""
    trace = "".join(traceback.format_exception(exc))
    return AttemptResult(
        execution_id,
        False,
        error=cap_error(describe(exc)),
        stderr_tail=cap_text(trace, tail_bytes),
        duration_ms=duration_ms,
    )


def handler_success(value: object, tail_bytes: int, duration_ms: int, execution_id: str) -> AttemptResult:
    """The result of a handler that returned ``value`` (as :meth:`CallableRunner.run` reports it)."""
    return AttemptResult(
        execution_id,
        True,
        stdout_tail="" if value is None else cap_text(str(value), tail_bytes),
        duration_ms=duration_ms,
    )
