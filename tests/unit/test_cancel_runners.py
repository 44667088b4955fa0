"""How the runners carry out a cancel (issue 29 §1) and the reaper (issue 29 §9): a command's
process group gets SIGTERM, the grace, then SIGKILL; an async handler is cancelled; a plain
handler sees ``ctx.cancel_requested()``; a command does not outlive the process that started it."""

from __future__ import annotations

import asyncio
import os
import signal
import subprocess
import sys
import textwrap
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from raftsched.executor.commands import SubprocessRunner
from raftsched.executor.handlers import CallableRunner
from raftsched.executor.runners import AttemptContext, Cancellation
from raftsched.testing.cluster import wait_until


def _ctx(cancellation: Cancellation, timeout_ms: int = 0) -> AttemptContext:
    return AttemptContext(
        execution_id="t@1/0/1",
        run_id="t@1",
        task="t",
        nominal_ms=1,
        shard=0,
        shards=1,
        attempt=1,
        timeout_ms=timeout_ms,
        cancellation=cancellation,
    )


def _gone(pid: int) -> bool:
    """Not running: no such process, or a zombie (ended, not yet reaped by its new parent)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return any(line.startswith("State:") and "Z" in line.split()[1] for line in status.splitlines())


async def _cancel_when(path: Path, stop: Cancellation, reason: str) -> None:
    while not path.exists() or not path.read_text().strip():
        await asyncio.sleep(0.02)
    stop.set(reason)


def test_a_cancelled_command_gets_sigterm_and_may_clean_up_within_the_grace(tmp_path: Path) -> None:
    marker = tmp_path / "pid"
    # Foreground sleeps: a TERM to the group ends the current one and the shell's trap runs.
    command = (
        f"trap 'echo cleaned >> {marker}.term; exit 3' TERM; echo $$ > {marker}; while :; do sleep 0.1; done"
    )

    async def main() -> tuple[object, ...]:
        runner = SubprocessRunner(grace_s=5)
        stop = Cancellation()
        try:
            result, _ = await asyncio.gather(
                runner.run(command, _ctx(stop)), _cancel_when(marker, stop, "hung")
            )
        finally:
            runner.close()
        return (result,)

    started = time.monotonic()
    (result,) = asyncio.run(main())
    assert time.monotonic() - started < 10
    assert not result.success and not result.timed_out  # type: ignore[attr-defined]
    assert result.error.startswith("cancelled (hung): sent SIGTERM")  # type: ignore[attr-defined]
    assert "ended within the grace" in result.error  # type: ignore[attr-defined]
    assert (tmp_path / "pid.term").read_text().strip() == "cleaned"


def test_a_command_that_ignores_sigterm_is_killed_after_the_grace(tmp_path: Path) -> None:
    marker = tmp_path / "pid"
    command = f"trap '' TERM; echo $$ > {marker}; while true; do sleep 0.1; done"

    async def main() -> object:
        runner = SubprocessRunner(grace_s=0.5)
        stop = Cancellation()
        try:
            result, _ = await asyncio.gather(runner.run(command, _ctx(stop)), _cancel_when(marker, stop, "x"))
        finally:
            runner.close()
        return result

    result = asyncio.run(main())
    assert "SIGKILL after 0.5 s grace" in result.error, result  # type: ignore[attr-defined]
    assert _gone(int(marker.read_text()))


def test_an_async_handler_is_cancelled_and_a_plain_one_sees_the_flag() -> None:
    runner = CallableRunner(grace_s=2)
    seen: list[str] = []
    polled = threading.Event()

    async def slow(ctx: AttemptContext) -> None:
        try:
            await asyncio.sleep(30)
        except asyncio.CancelledError:
            seen.append("async cancelled")
            raise

    def plain(ctx: AttemptContext) -> str:
        polled.set()
        while not ctx.cancel_requested():
            time.sleep(0.01)
        seen.append("plain saw the flag")
        return "stopped early"

    runner.register("slow", slow)
    runner.register("plain", plain)

    async def main() -> list[object]:
        out: list[object] = []
        for name in ("slow", "plain"):
            stop = Cancellation()
            task = asyncio.ensure_future(runner.run(name, _ctx(stop)))
            await asyncio.sleep(0.1)
            stop.set("operator")
            out.append(await asyncio.wait_for(task, 5))
        return out

    results = asyncio.run(main())
    assert seen == ["async cancelled", "plain saw the flag"]
    for result in results:
        assert not result.success and result.error.startswith("cancelled (operator)")  # type: ignore[attr-defined]


def test_a_plain_handler_sees_the_flag_at_its_timeout_too() -> None:
    runner = CallableRunner(grace_s=1)
    done = threading.Event()

    def plain(ctx: AttemptContext) -> None:
        while not ctx.cancel_requested():
            time.sleep(0.01)
        done.set()

    runner.register("plain", plain)
    result = asyncio.run(runner.run("plain", _ctx(Cancellation(), timeout_ms=100)))
    assert result.timed_out and done.wait(5)


_HOST = textwrap.dedent(
    """
    import asyncio, sys
    from raftsched.executor.commands import SubprocessRunner
    from raftsched.executor.runners import AttemptContext

    async def main():
        runner = SubprocessRunner(grace_s=1)
        ctx = AttemptContext(execution_id="t@1/0/1", run_id="t@1", task="t", nominal_ms=1,
                             shard=0, shards=1, attempt=1)
        await runner.run(sys.argv[1], ctx)

    asyncio.run(main())
    """
)


@pytest.mark.skipif(sys.platform == "win32", reason="POSIX process groups")
def test_a_command_does_not_outlive_the_process_that_started_it(tmp_path: Path) -> None:
    """SIGKILL of the process running a SubprocessRunner: its command (and the command's own
    child, in the same group) are gone within the grace, not orphaned."""
    marker = tmp_path / "pids"
    command = f"sleep 4711 & echo $$ $! > {marker}; wait"
    host = subprocess.Popen(
        [sys.executable, "-c", _HOST, command], env={**os.environ, "PYTHONPATH": os.getcwd()}
    )
    try:
        wait_until(
            lambda: marker.exists() and len(marker.read_text().split()) == 2, 20, what="command started"
        )
        pids = [int(p) for p in marker.read_text().split()]
        assert not any(_gone(p) for p in pids)
        host.send_signal(signal.SIGKILL)
        host.wait(10)
        wait_until(lambda: all(_gone(p) for p in pids), 30, what="the command and its child ended")
    finally:
        if host.poll() is None:
            host.kill()
        for pid in [int(p) for p in marker.read_text().split()] if marker.exists() else []:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_reaper_runs_before_the_first_command_is_forked(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    """An executor SIGKILLed between its first command's fork and asyncio's return (long under
    load) must already have a reaper: one started only after the fork left that command running
    as an orphan (the test above timed out so on a loaded machine)."""
    runner = SubprocessRunner(grace_s=1)
    at_fork: list[int | None] = []
    spawn = asyncio.create_subprocess_exec

    async def spawn_and_record(*args: Any, **kwargs: Any) -> asyncio.subprocess.Process:
        at_fork.append(runner.reaper_pid())
        return await spawn(*args, **kwargs)

    monkeypatch.setattr(asyncio, "create_subprocess_exec", spawn_and_record)
    try:
        result = asyncio.run(runner.run("true", _ctx(Cancellation())))
        assert result.success
        assert len(at_fork) == 1 and at_fork[0] is not None, "no reaper ran when the command was forked"
    finally:
        runner.close()


_UNREGISTERED_HOST = textwrap.dedent(
    """
    import asyncio, sys
    from raftsched.executor.commands import SubprocessRunner
    from raftsched.executor.runners import AttemptContext

    class Unregistered(SubprocessRunner):
        def _tell_reaper(self, line):  # the executor dies before it registers the group
            super()._tell_reaper(b"+1\\n" if line.startswith(b"+") else line)

    async def main():
        runner = Unregistered(grace_s=1)
        ctx = AttemptContext(execution_id="t@1/0/1", run_id="t@1", task="t", nominal_ms=1,
                             shard=0, shards=1, attempt=1)
        await runner.run(sys.argv[1], ctx)

    asyncio.run(main())
    """
)


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="the token scan reads /proc")
def test_on_linux_a_command_its_executor_died_before_registering_is_ended_too(tmp_path: Path) -> None:
    """The executor registers a command's group from its event loop after the fork; one killed in
    between (under load that took hundreds of ms) left it running. The reaper also ends the
    processes that carry its runner's token in their environment."""
    marker = tmp_path / "pids"
    command = f"sleep 4711 & echo $$ $! > {marker}; wait"
    env = {**os.environ, "PYTHONPATH": os.getcwd()}
    host = subprocess.Popen([sys.executable, "-c", _UNREGISTERED_HOST, command], env=env)
    try:
        wait_until(
            lambda: marker.exists() and len(marker.read_text().split()) == 2, 20, what="command started"
        )
        pids = [int(p) for p in marker.read_text().split()]
        host.send_signal(signal.SIGKILL)
        host.wait(10)
        wait_until(lambda: all(_gone(p) for p in pids), 30, what="the unregistered command ended")
    finally:
        if host.poll() is None:
            host.kill()
        for pid in [int(p) for p in marker.read_text().split()] if marker.exists() else []:
            if not _gone(pid):
                os.kill(pid, signal.SIGKILL)


def test_the_reaper_ends_with_a_normal_stop_and_knows_no_finished_group() -> None:
    async def main() -> int | None:
        runner = SubprocessRunner(grace_s=1)
        ctx = _ctx(Cancellation())
        result = await runner.run("true", ctx)
        assert result.success
        pid = runner.reaper_pid()
        runner.close()
        return pid

    pid = asyncio.run(main())
    assert pid is not None
    wait_until(lambda: _gone(pid), 10, what="the reaper exited")
