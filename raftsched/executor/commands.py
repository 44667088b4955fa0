"""The command runner: a task's shell command, one attempt, in its own process group.

:class:`SubprocessRunner` carries out the command side of the runners' contract
(:mod:`raftsched.executor.runners`: ``await run(command, ctx) -> AttemptResult``, never raising
for what the command does). The exit code is the only truth: 0 is success, anything else
failure, whatever the output says. Its output is read to a masked tail (and the attempt's full
log file, if any); a timeout or a cancel sends SIGTERM to the group, then SIGKILL after the
grace; a reaper process (:mod:`raftsched.executor.reaper`) ends the group if the executor dies.
:func:`python_command` is a ``runner = python`` task's command.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import re
import secrets
import shlex
import signal
import subprocess
import sys
import time
from collections.abc import Callable

from raftsched.executor.logfiles import CappedWriter, LogFiles
from raftsched.executor.runners import (
    DEFAULT_GRACE_S,
    DEFAULT_TAIL_BYTES,
    AttemptContext,
    AttemptResult,
    cap_error,
    log,
    tail_text,
)
from raftsched.executor.secrets import Masker, StreamMasker, without_secret_env
from raftsched.logfields import attempt_fields

# How long output pipes may stay open after the main process exited (a background child still
# holding them) before the runner stops reading and reports what it has.
DEFAULT_DRAIN_S = 1.0
_READ_CHUNK = 64 * 1024
_GROUP_POLL_S = 0.05
_REAPER = os.path.join(os.path.dirname(os.path.abspath(__file__)), "reaper.py")
# In every command's environment (supervised runners): the reaper also ends, on Linux, the
# processes that carry its runner's token, so a command the executor died before registering
# (between its fork and the registration, which under load took hundreds of ms) is ended too.
REAPER_TOKEN_ENV = "RAFTSCHED_REAPER_TOKEN"


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
        return tail_text(bytes(self._buf), self.total, self.limit)


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
                ctx.execution_id, False, None, cap_error(error), duration_ms=self._elapsed_ms(started)
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
