"""Runners: carry out one attempt on the executor and describe how it went.

Two runners share one contract: ``await runner.run(target, ctx) -> AttemptResult``. ``run`` never
raises for anything the attempt does (a command that cannot start, a non-zero exit, a handler
that raises, a timeout): every outcome is an :class:`AttemptResult` the agent reports as it is.
Only cancellation of ``run`` itself propagates (after a subprocess's process group was killed).

* :class:`raftsched.executor.commands.SubprocessRunner` runs a shell command in its own process
  group. The exit code is the only truth: 0 is success, anything else failure, whatever the
  output says.
* :class:`raftsched.executor.handlers.CallableRunner` runs registered Python handlers (the
  embedded executor).

This module holds what both share: the contract (:class:`CommandRunner` names its command side,
so an executor can be given another way to carry out commands: a simulation runs them on its
own clock), what an attempt is given (:class:`AttemptContext`, its read-only params, its
:class:`Cancellation`) and what it gives back (:class:`AttemptResult`, its texts capped).

Time: the duration of an attempt is measured with the ``monotonic`` function the runner was
given; timeouts are enforced by the event loop's timers.
"""

from __future__ import annotations

import asyncio
import json
import logging
from collections import OrderedDict
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol

from raftsched.errors import InvalidSpec
from raftsched.model import MAX_SHARDS, MAX_TIME_MS, MAX_TIMEOUT_MS

# The runners' logger: commands.py and handlers.py log through it, so a filter on this one name
# still sees both runners (as before they had modules of their own).
log = logging.getLogger(__name__)

DEFAULT_TAIL_BYTES = 8 * 1024
DEFAULT_GRACE_S = 5.0
# Error messages come from user code (exception text); they are capped like the output tails.
MAX_ERROR_BYTES = 4 * 1024
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _check_int(value: object, field_name: str, low: int, high: int) -> None:
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpec(field_name, f"must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidSpec(field_name, f"{value} out of range ({low}-{high})")


def _check_str(value: object, field_name: str) -> None:
    if not isinstance(value, str) or not value:
        raise InvalidSpec(field_name, "required (a non-empty string)")


class Cancellation:
    """The scheduler's request to stop one attempt (a cancelled run, a killed workflow run, an
    ``overlap = replace`` fire): set once, on the executor's event loop, by the agent.

    A command's process group gets SIGTERM, the runner's grace, then SIGKILL. An async handler
    is cancelled (``CancelledError`` inside it). A plain (thread) handler cannot be stopped from
    outside: it should poll :meth:`AttemptContext.cancel_requested` and return; the runner waits
    for it at most its grace and then reports the attempt cancelled (the thread runs on)."""

    __slots__ = ("_event", "_flag", "_futures", "reason")

    def __init__(self) -> None:
        # Read by handler threads: a plain attribute is enough (set once, False -> True, on the
        # loop's thread; a read sees one or the other). A threading.Event here cost ~2 us per
        # attempt (its Condition and lock) for nothing a poll needs.
        self._flag = False
        self._event: asyncio.Event | None = None  # created on the loop by the first wait()
        self._futures: list[asyncio.Future[None]] | None = None  # the runners' waiters (stopped())
        self.reason = ""

    def set(self, reason: str = "") -> None:
        """Request the stop (idempotent; call on the event loop's thread)."""
        if self._flag:
            return
        self.reason = reason
        self._flag = True
        if self._event is not None:
            self._event.set()
        futures, self._futures = self._futures, None
        for fut in futures or ():
            if not fut.done():
                fut.set_result(None)

    def is_set(self) -> bool:
        return self._flag

    def __deepcopy__(self, _memo: dict[int, object]) -> Cancellation:
        return self  # one request per attempt: a copy of a context (dataclasses.asdict) shares it

    def stopped(self) -> asyncio.Future[None]:
        """A future done once the stop is requested (cancel it when no longer needed): what
        :meth:`wait` does, without a Task and an ``asyncio.Event`` per attempt (the runners)."""
        fut: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        if self._flag:
            fut.set_result(None)
        elif self._futures is None:
            self._futures = [fut]
        else:
            self._futures.append(fut)
        return fut

    async def wait(self) -> None:
        """Return once the stop is requested."""
        if self._event is None:
            self._event = asyncio.Event()
            if self._flag:
                self._event.set()
        await self._event.wait()


@dataclass(frozen=True)
class AttemptContext:
    """What one attempt of one shard knows about itself; handlers receive it, commands get it as env.

    ``execution_id`` (``run_id/shard/attempt``) is the idempotency key: the same id means the same
    attempt, so side effects keyed by it happen once even if the attempt is delivered twice.
    ``nominal_ms`` is the fire's scheduled time (UTC epoch ms), not when the attempt started.
    ``shard`` counts from 0 to ``shards - 1``; ``attempt`` counts from 1. ``params`` is the task's
    JSON object; the executor hands every attempt of a task version the same read-only one
    (:class:`FrozenParams`: ``copy.deepcopy(ctx.params)`` to change a copy). ``timeout_ms`` 0
    means no timeout. Invalid values raise
    :class:`raftsched.errors.InvalidSpec` naming the field.
    """

    execution_id: str
    run_id: str
    task: str
    nominal_ms: int
    shard: int
    shards: int
    attempt: int
    params: dict[str, Any] = field(default_factory=dict)
    timeout_ms: int = 0
    extra_env: dict[str, str] = field(default_factory=dict)  # workflow tasks: their rendered env
    # Secret values the executor knows: masked in the output as it is read (never in a repr).
    secret_values: tuple[str, ...] = field(default=(), repr=False)
    # The scheduler's request to stop this attempt (see Cancellation); handlers poll it through
    # cancel_requested(). Not part of the context's identity.
    cancellation: Cancellation = field(default_factory=Cancellation, compare=False, repr=False)

    def __post_init__(self) -> None:
        _check_str(self.execution_id, "execution_id")
        _check_str(self.run_id, "run_id")
        _check_str(self.task, "task")
        _check_int(self.nominal_ms, "nominal_ms", 0, MAX_TIME_MS)
        _check_int(self.shards, "shards", 1, MAX_SHARDS)
        _check_int(self.shard, "shard", 0, self.shards - 1)
        _check_int(self.attempt, "attempt", 1, 2**31 - 1)
        if not isinstance(self.params, dict):
            raise InvalidSpec("params", f"must be a JSON object (dict), got {type(self.params).__name__}")
        _check_int(self.timeout_ms, "timeout_ms", 0, MAX_TIMEOUT_MS)

    @classmethod
    def with_params_json(cls, params_json: str, **fields: Any) -> AttemptContext:
        """Build a context from the task's ``params_json`` text ('' means no params)."""
        try:
            params = json.loads(params_json) if params_json else {}
        except ValueError as exc:
            raise InvalidSpec("params", f"not valid JSON ({exc})") from None
        return cls(params=params, **fields)

    def cancel_requested(self) -> bool:
        """Whether the scheduler asked to stop this attempt (its run was cancelled, or it timed
        out): a long-running plain handler should poll this and return early."""
        return self.cancellation.is_set()

    @property
    def nominal_iso(self) -> str:
        """``nominal_ms`` as ISO 8601 UTC: ``2026-11-30T10:00:00Z`` (``.123Z`` when not whole seconds)."""
        moment = _EPOCH + timedelta(milliseconds=self.nominal_ms)
        text = moment.strftime("%Y-%m-%dT%H:%M:%S")
        millis = self.nominal_ms % 1000
        return f"{text}.{millis:03d}Z" if millis else f"{text}Z"

    @property
    def params_json(self) -> str:
        """``params`` as compact JSON (ASCII-only, so it is always a valid environment value)."""
        return json.dumps(self.params, separators=(",", ":"))

    def env(self) -> dict[str, str]:
        """The variables a subprocess receives: the task's own env, then ``RAFTSCHED_*``."""
        return {
            **self.extra_env,
            "RAFTSCHED_EXECUTION_ID": self.execution_id,
            "RAFTSCHED_TASK": self.task,
            "RAFTSCHED_NOMINAL_TIME": self.nominal_iso,
            "RAFTSCHED_SHARD": str(self.shard),
            "RAFTSCHED_SHARDS": str(self.shards),
            "RAFTSCHED_ATTEMPT": str(self.attempt),
            "RAFTSCHED_PARAMS": self.params_json,
        }


def attempt_context(
    execution_id: str,
    run_id: str,
    task: str,
    nominal_ms: int,
    shard: int,
    shards: int,
    attempt: int,
    params: dict[str, Any],
    timeout_ms: int,
    extra_env: dict[str, str],
    secret_values: tuple[str, ...],
    cancellation: Cancellation,
) -> AttemptContext:
    """``AttemptContext(...)`` as the agent builds one per attempt: the same object and the same
    checks as the generated ``__init__``, without its per-field ``object.__setattr__`` calls (a
    frozen dataclass's cost). Anything the quick checks doubt goes through ``__init__``, which
    raises :class:`InvalidSpec` naming the field."""
    if not (
        type(execution_id) is str
        and execution_id
        and type(run_id) is str
        and run_id
        and type(task) is str
        and task
        and type(nominal_ms) is int
        and 0 <= nominal_ms <= MAX_TIME_MS
        and type(shards) is int
        and 1 <= shards <= MAX_SHARDS
        and type(shard) is int
        and 0 <= shard < shards
        and type(attempt) is int
        and 1 <= attempt <= 2**31 - 1
        and isinstance(params, dict)
        and type(timeout_ms) is int
        and 0 <= timeout_ms <= MAX_TIMEOUT_MS
    ):
        return AttemptContext(
            execution_id,
            run_id,
            task,
            nominal_ms,
            shard,
            shards,
            attempt,
            params,
            timeout_ms,
            extra_env,
            secret_values,
            cancellation,
        )
    ctx = object.__new__(AttemptContext)
    ctx.__dict__.update(
        execution_id=execution_id,
        run_id=run_id,
        task=task,
        nominal_ms=nominal_ms,
        shard=shard,
        shards=shards,
        attempt=attempt,
        params=params,
        timeout_ms=timeout_ms,
        extra_env=extra_env,
        secret_values=secret_values,
        cancellation=cancellation,
    )
    return ctx


def _read_only(*_args: object, **_kwargs: object) -> Any:
    raise TypeError(
        "an attempt's params are shared by the attempts of its task version and read-only:"
        " copy them (copy.deepcopy(ctx.params)) to change them"
    )


class FrozenParams(dict[str, Any]):
    """A JSON object of a task's params that refuses changes (a ``dict`` otherwise: ``json.dumps``,
    ``==``, ``isinstance(..., dict)``). ``copy.copy``/``copy.deepcopy`` give a plain, mutable
    ``dict``. The agent parses a task version's params once and hands the same object to each of
    its attempts, so a handler's change would leak into the next attempt: hence read-only."""

    __slots__ = ()
    __setitem__ = __delitem__ = clear = pop = popitem = setdefault = update = __ior__ = _read_only

    def __copy__(self) -> dict[str, Any]:
        return dict(self)

    def __deepcopy__(self, memo: dict[int, object]) -> dict[str, Any]:
        import copy

        return {key: copy.deepcopy(value, memo) for key, value in self.items()}

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenParams, (dict(self),))


class FrozenList(list[Any]):
    """A JSON array inside :class:`FrozenParams`: a ``list`` that refuses changes."""

    __slots__ = ()
    __setitem__ = __delitem__ = __iadd__ = __imul__ = _read_only
    append = extend = insert = pop = remove = clear = sort = reverse = _read_only

    def __copy__(self) -> list[Any]:
        return list(self)

    def __deepcopy__(self, memo: dict[int, object]) -> list[Any]:
        import copy

        return [copy.deepcopy(value, memo) for value in self]

    def __reduce__(self) -> tuple[Any, ...]:
        return (FrozenList, (list(self),))


def _freeze(value: Any) -> Any:
    if isinstance(value, dict):
        return FrozenParams({key: _freeze(item) for key, item in value.items()})
    if isinstance(value, list):
        return FrozenList(_freeze(item) for item in value)
    return value


def frozen_params(params_json: str) -> FrozenParams:
    """``params_json`` ('' means no params) parsed into read-only containers; :class:`InvalidSpec`
    naming ``params`` if it is not JSON or not an object."""
    try:
        params = json.loads(params_json) if params_json else {}
    except ValueError as exc:
        raise InvalidSpec("params", f"not valid JSON ({exc})") from None
    if not isinstance(params, dict):
        raise InvalidSpec("params", f"must be a JSON object (dict), got {type(params).__name__}")
    frozen: FrozenParams = _freeze(params)
    return frozen


class ParamsCache:
    """Parsed params per task: parsed once per ``(task, task version, params text)`` and shared,
    read-only (:class:`FrozenParams`), by the attempts of that version. A new task version, or
    a new text (a secret in the params resolved to a new value), parses again. At most ``size``
    tasks are kept (the least recently parsed goes first)."""

    def __init__(self, size: int = 4096) -> None:
        self.size = size
        self._by_task: OrderedDict[str, tuple[int, str, FrozenParams]] = OrderedDict()

    def get(self, task: str, version: int, params_json: str) -> FrozenParams:
        hit = self._by_task.get(task)
        if hit is not None and hit[0] == version and hit[1] == params_json:
            return hit[2]
        params = frozen_params(params_json)  # raises InvalidSpec: nothing cached
        self._by_task[task] = (version, params_json, params)
        self._by_task.move_to_end(task)
        while len(self._by_task) > self.size:
            self._by_task.popitem(last=False)
        return params


@dataclass(frozen=True)
class AttemptResult:
    """How an attempt went, as the executor reports it.

    ``success`` is the verdict. ``exit_code`` is the process's exit status (negative: killed by
    that signal) or None when there was no process (a callable, or a command that never started).
    ``error`` is empty on success and otherwise says why in one line (at most 4 KiB).
    ``stdout_tail``/``stderr_tail`` are the last bytes of output, decoded as UTF-8 with
    replacement, with a leading ``…[truncated N bytes]`` line when output was cut.
    ``timed_out`` is True when the runner's timeout ended (or gave up on) the attempt.
    """

    execution_id: str
    success: bool
    exit_code: int | None = None
    error: str = ""
    stdout_tail: str = ""
    stderr_tail: str = ""
    duration_ms: int = 0
    timed_out: bool = False

    def to_json_dict(self) -> dict[str, Any]:
        """A JSON-ready dict (field name → value); :meth:`from_json_dict` reads it back."""
        return {
            "execution_id": self.execution_id,
            "success": self.success,
            "exit_code": self.exit_code,
            "error": self.error,
            "stdout_tail": self.stdout_tail,
            "stderr_tail": self.stderr_tail,
            "duration_ms": self.duration_ms,
            "timed_out": self.timed_out,
        }

    @classmethod
    def from_json_dict(cls, data: dict[str, Any]) -> AttemptResult:
        """Inverse of :meth:`to_json_dict`; raises ``ValueError`` for a malformed dict."""
        try:
            result = cls(
                execution_id=data["execution_id"],
                success=data["success"],
                exit_code=data["exit_code"],
                error=data["error"],
                stdout_tail=data["stdout_tail"],
                stderr_tail=data["stderr_tail"],
                duration_ms=data["duration_ms"],
                timed_out=data["timed_out"],
            )
        except (KeyError, TypeError) as exc:
            raise ValueError(f"malformed attempt result: {exc!r}") from None
        checks: list[tuple[object, type | tuple[type, ...]]] = [
            (result.execution_id, str),
            (result.success, bool),
            (result.exit_code, (int, type(None))),
            (result.error, str),
            (result.stdout_tail, str),
            (result.stderr_tail, str),
            (result.duration_ms, int),
            (result.timed_out, bool),
        ]
        if any(not isinstance(value, kind) for value, kind in checks):
            raise ValueError(f"malformed attempt result: {data!r:.200}")
        return result


# -- output text ---------------------------------------------------------------------------------


def tail_text(data: bytes, total: int, limit: int) -> str:
    """The last ``limit`` bytes of ``data`` (whose stream had ``total`` bytes), decoded, marked if cut."""
    kept = data[-limit:] if limit else b""
    # Do not start in the middle of a UTF-8 sequence: drop (at most 3) continuation bytes.
    skip = 0
    while skip < min(3, len(kept)) and kept[skip] & 0xC0 == 0x80 and len(kept) < total:
        skip += 1
    kept = kept[skip:]
    cut = total - len(kept)
    text = kept.decode("utf-8", errors="replace")
    return f"\u2026[truncated {cut} bytes]\n{text}" if cut else text


def cap_text(text: str, limit: int) -> str:
    """``text`` cut to its last ``limit`` UTF-8 bytes, with the truncation marker if cut."""
    data = text.encode("utf-8", errors="replace")
    return tail_text(data, len(data), limit)


def cap_error(text: str) -> str:
    data = text.encode("utf-8", errors="replace")
    if len(data) <= MAX_ERROR_BYTES:
        return text
    return data[:MAX_ERROR_BYTES].decode("utf-8", errors="ignore") + f"\u2026[{len(data)} bytes]"


class CommandRunner(Protocol):
    """Carries out a task's ``command`` for one attempt; never raises except on cancellation."""

    async def run(self, command: str, ctx: AttemptContext) -> AttemptResult: ...


def describe(exc: BaseException) -> str:
    """``Type: message`` of ``exc``, for an attempt's error; never raises (a handler's exception
    whose ``str()`` raises is described as such, as :mod:`traceback` does)."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception as inner:
        return f"{type(exc).__name__}: <str() failed: {type(inner).__name__}>"
