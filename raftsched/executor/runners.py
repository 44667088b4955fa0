"""Runners: carry out one attempt on the executor and describe how it went.

Two runners share one contract: ``await runner.run(target, ctx) -> AttemptResult``. ``run`` never
raises for anything the attempt does (a command that cannot start, a non-zero exit, a handler
that raises, a timeout): every outcome is an :class:`AttemptResult` the agent reports as it is.
Only cancellation of ``run`` itself propagates (after a subprocess's process group was killed).

* :class:`SubprocessRunner` runs a shell command in its own process group. The exit code is the
  only truth: 0 is success, anything else failure, whatever the output says.
* :class:`CallableRunner` runs registered Python handlers (the embedded executor).

:class:`CommandRunner` names the command side of that contract, so an executor can be given
another way to carry out commands (a simulation runs them on its own clock).

Time: the duration of an attempt is measured with the ``monotonic`` function the runner was
given; timeouts are enforced by the event loop's timers.
"""

from __future__ import annotations

import asyncio
import contextlib
import inspect
import json
import logging
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
import traceback
import types
from collections import OrderedDict
from collections.abc import Awaitable, Callable, Coroutine, Generator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from typing import Any, Protocol, TypeVar, cast

from raftsched.errors import InvalidSpec
from raftsched.executor.logfiles import CappedWriter, LogFiles
from raftsched.executor.secrets import Masker, StreamMasker, without_secret_env
from raftsched.logfields import attempt_fields
from raftsched.model import MAX_LABEL, MAX_SHARDS, MAX_TIME_MS, MAX_TIMEOUT_MS

log = logging.getLogger(__name__)

DEFAULT_TAIL_BYTES = 8 * 1024
DEFAULT_GRACE_S = 5.0
# How long output pipes may stay open after the main process exited (a background child still
# holding them) before the runner stops reading and reports what it has.
DEFAULT_DRAIN_S = 1.0
# Error messages come from user code (exception text); they are capped like the output tails.
MAX_ERROR_BYTES = 4 * 1024
_READ_CHUNK = 64 * 1024
_GROUP_POLL_S = 0.05
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
_REAPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reaper.py")
# In every command's environment (supervised runners): the reaper also ends, on Linux, the
# processes that carry its runner's token, so a command the executor died before registering
# (between its fork and the registration, which under load took hundreds of ms) is ended too.
REAPER_TOKEN_ENV = "RAFTSCHED_REAPER_TOKEN"


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


# -- output capture --------------------------------------------------------------------------------


class _Tail:
    """The last ``limit`` bytes of a stream, and how many bytes went by in total."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.total = 0
        self._buf = bytearray()

    def add(self, chunk: bytes) -> None:
        self.total += len(chunk)
        self._buf += chunk
        # Trim in batches, not on every chunk: keeps copying linear in the output size.
        if len(self._buf) > 2 * self.limit + _READ_CHUNK:
            del self._buf[: len(self._buf) - self.limit]

    def text(self) -> str:
        return _tail_text(bytes(self._buf), self.total, self.limit)


def _tail_text(data: bytes, total: int, limit: int) -> str:
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


def _cap_text(text: str, limit: int) -> str:
    """``text`` cut to its last ``limit`` UTF-8 bytes, with the truncation marker if cut."""
    data = text.encode("utf-8", errors="replace")
    return _tail_text(data, len(data), limit)


def _cap_error(text: str) -> str:
    data = text.encode("utf-8", errors="replace")
    if len(data) <= MAX_ERROR_BYTES:
        return text
    return data[:MAX_ERROR_BYTES].decode("utf-8", errors="ignore") + f"\u2026[{len(data)} bytes]"


async def _drain(
    fd: int, tail: _Tail, secrets: tuple[str, ...] = (), sink: CappedWriter | None = None
) -> None:
    """Read the pipe ``fd`` to its end into ``tail`` (and ``sink``, the attempt's log file, if
    any), each of ``secrets`` masked as ``***`` before the tail cuts anything or the file sees
    it; closes ``fd`` and ``sink`` (also when cancelled)."""
    masker = StreamMasker(Masker(secrets)) if secrets else None
    loop = asyncio.get_running_loop()
    pipe = os.fdopen(fd, "rb", buffering=0)
    try:
        reader = asyncio.StreamReader(limit=_READ_CHUNK, loop=loop)
        transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    except BaseException:
        pipe.close()
        if sink is not None:
            sink.close()
        raise
    try:
        while chunk := await reader.read(_READ_CHUNK):
            data = masker.feed(chunk) if masker is not None else chunk
            tail.add(data)
            if sink is not None:
                sink.write(data)
    finally:
        transport.close()
        if masker is not None:
            rest = masker.flush()
            tail.add(rest)
            if sink is not None:
                sink.write(rest)
        if sink is not None:
            sink.close()


def _signal_name(signum: int) -> str:
    try:
        return signal.Signals(signum).name
    except ValueError:
        return f"signal {signum}"


def _group_alive(pgid: int) -> bool:
    """Whether any process of group ``pgid`` still runs (zombies do not count).

    ``killpg(pgid, 0)`` alone cannot tell: an orphaned member that exited stays a zombie until
    its new parent reaps it, and some container init processes never do. On Linux the process
    table in /proc says which members are zombies; elsewhere fall back to ``killpg``.
    """
    try:
        os.killpg(pgid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    try:
        entries = os.listdir("/proc")
    except OSError:
        return True
    for entry in entries:
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat", "rb") as f:
                stat = f.read()
        except OSError:
            continue  # exited meanwhile, or not ours to read
        # "pid (comm) state ppid pgrp ...": comm may hold spaces and parentheses.
        fields = stat[stat.rfind(b")") + 2 :].split()
        if len(fields) >= 3 and int(fields[2]) == pgid and fields[0] not in (b"Z", b"X"):
            return True
    return False


def _killpg(pgid: int, signum: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signum)


# -- subprocess ------------------------------------------------------------------------------------


_PYTHON_WORD = re.compile(r"\s*python(?:[0-9]+(?:\.[0-9]+)?)?(?=\s|$)")


def python_command(command: str, python: str = sys.executable) -> str:
    """The shell command that runs ``command`` with the interpreter ``python`` (a task's
    ``runner = python``, the seeds' ``worker_type: python``).

    A leading ``python``, ``python3`` or ``pythonX.Y`` word is replaced by ``python``; any other
    command is a script and its arguments, run by it. The rest of the command is left as written
    (it still goes through the shell, so quoting and redirections behave as for ``shell``).
    """
    quoted = shlex.quote(python)
    match = _PYTHON_WORD.match(command)
    if match is not None:
        return quoted + command[match.end() :]
    return f"{quoted} {command.lstrip()}"


class CommandRunner(Protocol):
    """Carries out a task's ``command`` for one attempt; never raises except on cancellation."""

    async def run(self, command: str, ctx: AttemptContext) -> AttemptResult: ...


class SubprocessRunner:
    """Runs a task's shell command: ``/bin/sh -c command`` in a new session (its own process group).

    The child gets this process's environment plus the ``RAFTSCHED_*`` variables of
    :meth:`AttemptContext.env`, stdin from /dev/null, and pipes for stdout and stderr that are read
    concurrently; only the last ``tail_bytes`` of each are kept, so any amount of output (binary
    included) costs constant memory.

    Timeout (``ctx.timeout_ms > 0``): SIGTERM goes to the whole process group; the runner then
    waits ``grace_s`` for the group to empty and sends SIGKILL to the group if it has not. The
    result has ``timed_out=True`` and ``success=False`` even if the command then exited 0.

    After a normal exit the runner does not signal the group: background children the command
    left behind keep running. If they hold the output pipes open, the runner reads for at most
    ``drain_s`` more and then reports what it has.

    A cancel (``ctx.cancellation`` set: the scheduler cancelled the run) ends the attempt like a
    timeout, SIGTERM → ``grace_s`` → SIGKILL of the group, and the result says ``cancelled``.
    Cancelling ``run`` kills the process group with SIGKILL before the cancellation propagates.
    One runner may run any number of attempts concurrently.

    With ``log_files``, the whole of each stream is also written to the attempt's log file
    (:mod:`raftsched.executor.logfiles`, capped per attempt), as it is read.
    ``supervise`` (default on): a command does not outlive its executor. One reaper process per
    runner (:mod:`raftsched.executor.reaper`, started before the first command) kills the process
    groups of the commands still running when this process ends in any way, SIGKILL included.
    :meth:`close` stops it.
    """

    def __init__(
        self,
        *,
        tail_bytes: int = DEFAULT_TAIL_BYTES,
        grace_s: float = DEFAULT_GRACE_S,
        drain_s: float = DEFAULT_DRAIN_S,
        shell: str = "/bin/sh",
        monotonic: Callable[[], float] = time.monotonic,
        env: dict[str, str] | None = None,
        log_files: LogFiles | None = None,
        supervise: bool = True,
    ) -> None:
        self.log_files = log_files
        if tail_bytes < 0 or grace_s < 0 or drain_s < 0:
            raise ValueError("tail_bytes, grace_s and drain_s must be >= 0")
        self.supervise = supervise
        self._reaper: subprocess.Popen[bytes] | None = None
        self._token = secrets.token_hex(16)
        self.extra_env = dict(env or {})  # e.g. RAFTSCHED_EXECUTOR, the executor's name
        self.tail_bytes = tail_bytes
        self.grace_s = grace_s
        self.drain_s = drain_s
        self.shell = shell
        self._monotonic = monotonic

    async def run(self, command: str, ctx: AttemptContext) -> AttemptResult:
        """Run ``command`` for ``ctx`` and return how it went; never raises except on cancellation."""
        started = self._monotonic()

        def failed(error: str) -> AttemptResult:
            return AttemptResult(
                ctx.execution_id, False, None, _cap_error(error), duration_ms=self._elapsed_ms(started)
            )

        if not isinstance(command, str) or not command.strip():
            return failed("empty command: the task has no command to run")
        # RAFTSCHED_SECRET_* stay with the executor: an attempt sees the secrets it references.
        env = {**without_secret_env(os.environ), **self.extra_env, **ctx.env()}
        if self.supervise:
            env[REAPER_TOKEN_ENV] = self._token  # the reaper finds it even if never registered
            # Before the fork: the reaper started after the first command left a window (the
            # fork to asyncio's return, long under load) in which an executor SIGKILLed had no
            # reaper at all and its command ran on as an orphan.
            self._ensure_reaper()
        # Our own pipes rather than asyncio's: asyncio's Process.wait() also waits for its pipes
        # to close, which a background child of the command can delay for ever.
        out_r, out_w = os.pipe()
        err_r, err_w = os.pipe()
        try:
            proc = await asyncio.create_subprocess_exec(
                self.shell,
                "-c",
                command,
                stdin=asyncio.subprocess.DEVNULL,
                stdout=out_w,
                stderr=err_w,
                env=env,
                start_new_session=True,
            )
        except BaseException as exc:
            os.close(out_r)
            os.close(err_r)
            if isinstance(exc, OSError | ValueError):  # ValueError: a NUL byte in the command or env
                return failed(f"could not start {self.shell}: {type(exc).__name__}: {exc}")
            raise
        finally:
            os.close(out_w)
            os.close(err_w)

        pgid = proc.pid  # a session leader's process group id is its pid
        self._tell_reaper(b"+%d\n" % pgid)  # no await since the fork: nothing else ran meanwhile
        out, err = _Tail(self.tail_bytes), _Tail(self.tail_bytes)
        files = self.log_files
        sinks = (
            (files.writer(ctx.execution_id, "stdout"), files.writer(ctx.execution_id, "stderr"))
            if files is not None
            else (None, None)
        )
        readers = [
            asyncio.create_task(_drain(out_r, out, ctx.secret_values, sinks[0])),
            asyncio.create_task(_drain(err_r, err, ctx.secret_values, sinks[1])),
        ]
        if log.isEnabledFor(logging.DEBUG):
            log.debug(
                "attempt %s: started pid %d",
                ctx.execution_id,
                proc.pid,
                extra=attempt_fields(ctx.execution_id, ctx.run_id, ctx.task, attempt=ctx.attempt),
            )
        try:
            code, stop_note, timed_out = await self._wait(proc, pgid, ctx)
            await self._finish_reading(readers)
        except BaseException:
            # Cancelled (or something unforeseen): leave no process behind.
            _killpg(pgid, signal.SIGKILL)
            for reader in readers:
                reader.cancel()
            with contextlib.suppress(BaseException):
                await asyncio.shield(proc.wait())
            raise
        finally:
            self._tell_reaper(b"-%d\n" % pgid)

        if stop_note:
            error = stop_note
        elif code < 0:
            error = f"killed by {_signal_name(-code)}"
        elif code:
            error = f"exit code {code}"
        else:
            error = ""
        return AttemptResult(
            execution_id=ctx.execution_id,
            success=code == 0 and not stop_note,
            exit_code=code,
            error=error,
            stdout_tail=out.text(),
            stderr_tail=err.text(),
            duration_ms=self._elapsed_ms(started),
            timed_out=timed_out,
        )

    def _ensure_reaper(self) -> subprocess.Popen[bytes] | None:
        """The running reaper, started first if there is none or it died; ``None`` (logged) when
        it cannot start: the command runs either way."""
        reaper = self._reaper
        if reaper is not None and reaper.poll() is None:
            return reaper
        try:
            reaper = self._reaper = subprocess.Popen(
                [sys.executable, "-I", "-S", _REAPER, f"{self.grace_s:g}", self._token],
                stdin=subprocess.PIPE,
                bufsize=0,
                stdout=subprocess.DEVNULL,
                start_new_session=True,  # a signal to the executor's group must not reach it
            )
        except OSError as exc:
            log.warning("cannot start the command reaper (%s): commands may outlive this executor", exc)
            self._reaper = None
            return None
        assert reaper.stdin is not None
        os.set_blocking(reaper.stdin.fileno(), False)
        return reaper

    def _tell_reaper(self, line: bytes) -> None:
        """Register (``+PGID``) or forget (``-PGID``) a command's process group with the reaper,
        starting it first if needed. A reaper that cannot start or died is logged and started
        again for the next command; the command runs either way."""
        if not self.supervise:
            return
        reaper = self._reaper
        if reaper is None or reaper.poll() is not None:
            if line.startswith(b"-"):
                return  # a new reaper never knew that group
            reaper = self._ensure_reaper()
            if reaper is None:
                return
        assert reaper.stdin is not None
        try:
            # Non-blocking: a stalled reaper (stopped, 8,000 lines behind) must not stall the loop.
            os.write(reaper.stdin.fileno(), line)
        except BlockingIOError:
            log.warning("the command reaper is not reading: %r not registered", line.strip())
        except OSError as exc:  # it died: the next command starts another
            log.warning("the command reaper is gone (%s): starting another with the next command", exc)

    def close(self) -> None:
        """Stop the reaper (the executor is stopping; its commands have ended or were killed)."""
        reaper, self._reaper = self._reaper, None
        if reaper is None:
            return
        if reaper.stdin is not None:
            with contextlib.suppress(OSError):
                reaper.stdin.close()
        try:
            reaper.wait(timeout=self.grace_s + 5)
        except subprocess.TimeoutExpired:
            reaper.kill()
            reaper.wait()

    def reaper_pid(self) -> int | None:
        """The reaper's pid while it runs (tests and diagnostics)."""
        return self._reaper.pid if self._reaper is not None and self._reaper.poll() is None else None

    async def _wait(
        self, proc: asyncio.subprocess.Process, pgid: int, ctx: AttemptContext
    ) -> tuple[int, str, bool]:
        """Wait for the process; on timeout or a cancel TERM → grace → KILL the group. Exit
        status, the note that ended the attempt ("": it exited by itself), and whether that was
        its timeout."""
        timeout_ms = ctx.timeout_ms
        waiter = asyncio.ensure_future(proc.wait())
        stopper = ctx.cancellation.stopped()
        try:
            done, _ = await asyncio.wait(
                (waiter, stopper),
                timeout=timeout_ms / 1000 if timeout_ms > 0 else None,
                return_when=asyncio.FIRST_COMPLETED,
            )
        except BaseException:
            waiter.cancel()
            raise
        finally:
            stopper.cancel()
        if waiter in done:
            return waiter.result(), "", False
        waiter.cancel()
        cancelled = stopper in done and not stopper.cancelled()
        fields = attempt_fields(ctx.execution_id, ctx.run_id, ctx.task, attempt=ctx.attempt)
        why = (
            f"cancelled ({ctx.cancellation.reason or 'by the scheduler'})"
            if cancelled
            else f"timed out after {timeout_ms} ms"
        )
        if not cancelled:
            ctx.cancellation.set("timed out")  # what the command's own handlers may ask
        log.info(
            "attempt %s %s: SIGTERM to process group %d (%g s grace)",
            ctx.execution_id,
            why,
            pgid,
            self.grace_s,
            extra=fields,
        )
        _killpg(pgid, signal.SIGTERM)
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.grace_s
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(proc.wait(), self.grace_s)
        # The main process is gone (or the grace is up): give other members the rest of the grace.
        while _group_alive(pgid) and loop.time() < deadline:
            await asyncio.sleep(_GROUP_POLL_S)
        killed = _group_alive(pgid)
        if killed:
            log.warning(
                "attempt %s: process group %d outlived the grace: SIGKILL",
                ctx.execution_id,
                pgid,
                extra=fields,
            )
            _killpg(pgid, signal.SIGKILL)
        code = await proc.wait()
        ending = f"SIGKILL after {self.grace_s:g} s grace" if killed else "the group ended within the grace"
        return code, f"{why}: sent SIGTERM to the process group, {ending}", not cancelled

    async def _finish_reading(self, readers: list[asyncio.Task[None]]) -> None:
        _, pending = await asyncio.wait(readers, timeout=self.drain_s)
        for reader in pending:
            reader.cancel()  # a leftover child holds the pipe: stop reading, keep what we have
        if pending:
            await asyncio.wait(pending)  # unlike `await reader`, never mistakes our own cancellation
        for reader in readers:
            if not reader.cancelled():
                reader.exception()  # a failed read keeps what it had; mark the error as seen

    def _elapsed_ms(self, started: float) -> int:
        return max(0, round((self._monotonic() - started) * 1000))


# -- Python callables ------------------------------------------------------------------------------

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
                error=_cap_error(f"unknown handler {handler!r} (registered: {registered})"),
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
                error=_cap_error(describe(exc)),
                stderr_tail=_cap_text(trace, self.tail_bytes),
                duration_ms=self._elapsed_ms(started),
            )
        return AttemptResult(
            ctx.execution_id,
            True,
            stdout_tail="" if value is None else _cap_text(str(value), self.tail_bytes),
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


def describe(exc: BaseException) -> str:
    """``Type: message`` of ``exc``, for an attempt's error; never raises (a handler's exception
    whose ``str()`` raises is described as such, as :mod:`traceback` does)."""
    try:
        return f"{type(exc).__name__}: {exc}"
    except Exception as inner:
        return f"{type(exc).__name__}: <str() failed: {type(inner).__name__}>"


def handler_failure(
    exc: BaseException, tail_bytes: int, duration_ms: int, execution_id: str
) -> AttemptResult:
    """The result of a handler that raised ``exc`` (as :meth:`CallableRunner.run` reports it)."""
    trace = "".join(traceback.format_exception(exc))
    return AttemptResult(
        execution_id,
        False,
        error=_cap_error(describe(exc)),
        stderr_tail=_cap_text(trace, tail_bytes),
        duration_ms=duration_ms,
    )


def handler_success(value: object, tail_bytes: int, duration_ms: int, execution_id: str) -> AttemptResult:
    """The result of a handler that returned ``value`` (as :meth:`CallableRunner.run` reports it)."""
    return AttemptResult(
        execution_id,
        True,
        stdout_tail="" if value is None else _cap_text(str(value), tail_bytes),
        duration_ms=duration_ms,
    )
