"""The runners: real subprocesses and Python handlers, every outcome an AttemptResult.

No test sleeps to synchronise: processes are awaited, handlers block on events the test sets,
and "is this process gone" is polled with a deadline.
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import os
import re
import signal
import sys
import threading
from collections.abc import Coroutine, Iterator
from pathlib import Path
from typing import Any, TypeVar

import pytest

from raftsched.errors import InvalidSpec
from raftsched.executor.commands import SubprocessRunner
from raftsched.executor.handlers import CallableRunner
from raftsched.executor.runners import AttemptContext, AttemptResult
from raftsched.testing.cluster import wait_until
from tests.support.wait import until

T = TypeVar("T")
NOMINAL = 1_796_032_800_000  # 2026-11-30T10:00:00Z
MB50 = 50_000_000


def make_ctx(**fields: Any) -> AttemptContext:
    base: dict[str, Any] = {
        "execution_id": "nightly@1796032800000/2/1",
        "run_id": "nightly@1796032800000",
        "task": "nightly",
        "nominal_ms": NOMINAL,
        "shard": 2,
        "shards": 4,
        "attempt": 1,
        "params": {"region": "eu", "n": 3},
        "timeout_ms": 0,
    }
    base.update(fields)
    return AttemptContext(**base)


def run(coro: Coroutine[Any, Any, T]) -> T:
    return asyncio.run(coro)


def alive(pid: int) -> bool:
    """Whether ``pid`` runs. A zombie counts as dead: this container's init never reaps orphans."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    try:
        stat = Path(f"/proc/{pid}/stat").read_bytes()
    except FileNotFoundError:
        return False
    return stat[stat.rfind(b")") + 2 :].split()[0] not in (b"Z", b"X")


def wait_gone(pids: list[int], deadline_s: float = 5.0) -> None:
    wait_until(lambda: not any(alive(p) for p in pids), deadline_s, 0.01, f"processes {pids} to end")


def pids_in(text: str) -> dict[str, int]:
    return {k: int(v) for k, _, v in (line.partition("=") for line in text.splitlines()) if v.isdigit()}


# -- AttemptContext ----------------------------------------------------------------------------------


def test_nominal_iso_is_utc_with_z() -> None:
    assert make_ctx().nominal_iso == "2026-11-30T10:00:00Z"
    assert make_ctx(nominal_ms=NOMINAL + 123).nominal_iso == "2026-11-30T10:00:00.123Z"
    assert make_ctx(nominal_ms=0).nominal_iso == "1970-01-01T00:00:00Z"


@pytest.mark.parametrize(
    ("fields", "field_name"),
    [
        ({"shard": 4}, "shard"),
        ({"shard": -1}, "shard"),
        ({"shards": 0}, "shards"),
        ({"attempt": 0}, "attempt"),
        ({"timeout_ms": -1}, "timeout_ms"),
        ({"params": [1, 2]}, "params"),
        ({"execution_id": ""}, "execution_id"),
        ({"nominal_ms": True}, "nominal_ms"),
    ],
)
def test_context_validates_at_construction(fields: dict[str, Any], field_name: str) -> None:
    with pytest.raises(InvalidSpec) as info:
        make_ctx(**fields)
    assert info.value.field == field_name


def test_context_from_params_json() -> None:
    fields = dataclasses.asdict(make_ctx())
    del fields["params"]
    assert AttemptContext.with_params_json('{"a": [1]}', **fields).params == {"a": [1]}
    assert AttemptContext.with_params_json("", **fields).params == {}
    with pytest.raises(InvalidSpec, match="params"):
        AttemptContext.with_params_json("{nope", **fields)


def test_result_json_round_trip_and_refuses_malformed() -> None:
    result = AttemptResult("e/0/1", False, -9, "killed by SIGKILL", "\ufffdout", "err", 12, True)
    assert AttemptResult.from_json_dict(json.loads(json.dumps(result.to_json_dict()))) == result
    bad = result.to_json_dict() | {"success": "yes"}
    with pytest.raises(ValueError, match="malformed"):
        AttemptResult.from_json_dict(bad)
    with pytest.raises(ValueError, match="malformed"):
        AttemptResult.from_json_dict({"execution_id": "x"})


# -- SubprocessRunner: environment and exit codes -----------------------------------------------


def test_env_vars_delivered(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("INHERITED_FROM_EXECUTOR", "yes")
    names = 'INHERITED_FROM_EXECUTOR $(env | grep -o "^RAFTSCHED_[A-Z_]*")'
    command = f'for v in {names}; do eval "echo $v=\\$$v"; done'
    result = run(SubprocessRunner().run(command, make_ctx()))
    assert result.success, result
    env = dict(line.split("=", 1) for line in result.stdout_tail.splitlines())
    assert re.fullmatch(r"[0-9a-f]{32}", env.pop("RAFTSCHED_REAPER_TOKEN"))  # the reaper's (issue 29 §9)
    assert env == {
        "INHERITED_FROM_EXECUTOR": "yes",
        "RAFTSCHED_EXECUTION_ID": "nightly@1796032800000/2/1",
        "RAFTSCHED_TASK": "nightly",
        "RAFTSCHED_NOMINAL_TIME": "2026-11-30T10:00:00Z",
        "RAFTSCHED_SHARD": "2",
        "RAFTSCHED_SHARDS": "4",
        "RAFTSCHED_ATTEMPT": "1",
        "RAFTSCHED_PARAMS": '{"region":"eu","n":3}',
    }
    assert json.loads(env["RAFTSCHED_PARAMS"]) == make_ctx().params


def test_exit_code_is_the_truth() -> None:
    runner = SubprocessRunner()
    failed = run(runner.run("echo success; echo 'all good, success' >&2; exit 3", make_ctx()))
    assert (failed.success, failed.exit_code, failed.error) == (False, 3, "exit code 3")
    assert failed.stdout_tail == "success\n"
    assert failed.stderr_tail == "all good, success\n"
    ok = run(runner.run("echo ERROR: FAILED >&2; exit 0", make_ctx()))
    assert (ok.success, ok.exit_code, ok.error, ok.timed_out) == (True, 0, "", False)
    assert ok.execution_id == make_ctx().execution_id


def test_killed_by_signal_reports_negative_signal_number() -> None:
    result = run(SubprocessRunner().run("kill -KILL $$", make_ctx()))
    assert (result.success, result.exit_code, result.error) == (False, -9, "killed by SIGKILL")
    assert not result.timed_out


@pytest.mark.parametrize(
    ("command", "shell", "error"),
    [
        ("", "/bin/sh", "empty command"),
        ("   \n", "/bin/sh", "empty command"),
        ("echo hi", "/nonexistent/sh", "could not start /nonexistent/sh: FileNotFoundError"),
        ("echo \0", "/bin/sh", "could not start /bin/sh: ValueError"),
    ],
)
def test_a_command_that_cannot_start_is_a_failed_result(command: str, shell: str, error: str) -> None:
    result = run(SubprocessRunner(shell=shell).run(command, make_ctx()))
    assert not result.success
    assert result.exit_code is None
    assert result.error.startswith(error), result.error


def test_duration_comes_from_the_injected_monotonic_function() -> None:
    ticks: Iterator[float] = iter([100.0, 102.5])
    result = run(SubprocessRunner(monotonic=lambda: next(ticks)).run("true", make_ctx()))
    assert result.duration_ms == 2500


# -- SubprocessRunner: output --------------------------------------------------------------------


def test_huge_output_keeps_the_tail_with_a_truncation_marker() -> None:
    command = (
        f"head -c {MB50} /dev/zero | tr '\\0' x & "
        f"head -c {MB50} /dev/zero | tr '\\0' y >&2; wait; printf END; printf ERR >&2"
    )
    result = run(SubprocessRunner().run(command, make_ctx()))
    assert result.success, result.error
    for tail, body in ((result.stdout_tail, "x" * 8189 + "END"), (result.stderr_tail, "y" * 8189 + "ERR")):
        assert tail == f"\u2026[truncated {MB50 + 3 - 8192} bytes]\n{body}"


def test_small_tail_setting_and_exact_fit() -> None:
    runner = SubprocessRunner(tail_bytes=4)
    assert run(runner.run("printf abcd", make_ctx())).stdout_tail == "abcd"
    assert run(runner.run("printf abcde", make_ctx())).stdout_tail == "\u2026[truncated 1 bytes]\nbcde"


def test_binary_output_is_decoded_with_replacement() -> None:
    result = run(SubprocessRunner().run(r"printf '\377\376\000\200abc'; printf '\001\377' >&2", make_ctx()))
    assert result.success
    assert result.stdout_tail == "\ufffd\ufffd\x00\ufffdabc"
    assert result.stderr_tail == "\x01\ufffd"
    assert AttemptResult.from_json_dict(json.loads(json.dumps(result.to_json_dict()))) == result


def test_tail_never_starts_inside_a_utf8_character() -> None:
    command = f"{sys.executable} -c \"import sys; sys.stdout.write('\u00e9' * 10000)\""
    result = run(SubprocessRunner(tail_bytes=8191).run(command, make_ctx()))
    marker, _, body = result.stdout_tail.partition("\n")
    assert marker == "\u2026[truncated 11810 bytes]"  # 20000 - (8191 - 1 continuation byte)
    assert body == "\u00e9" * 4095


def test_background_child_holding_the_pipe_does_not_hold_the_result() -> None:
    runner = SubprocessRunner(drain_s=0.2)
    result = run(runner.run("sleep 30 & echo child=$!", make_ctx()))
    child = pids_in(result.stdout_tail)["child"]
    try:
        assert (result.success, result.exit_code) == (True, 0)
        assert result.duration_ms < 10_000
    finally:
        os.kill(child, signal.SIGKILL)
    wait_gone([child])


# -- SubprocessRunner: timeouts and cancellation ---------------------------------------------------


def test_timeout_sigterm_then_sigkill_of_the_whole_group() -> None:
    # Both the shell and its child ignore SIGTERM (an ignored disposition is inherited), so only
    # the SIGKILL after the grace period ends them.
    command = "trap '' TERM; sleep 60 & echo child=$!; echo shell=$$; while :; do wait; done"
    runner = SubprocessRunner(grace_s=0.3)
    result = run(runner.run(command, make_ctx(timeout_ms=200)))
    pids = pids_in(result.stdout_tail)
    assert set(pids) == {"child", "shell"}
    wait_gone(list(pids.values()))
    assert (result.success, result.timed_out, result.exit_code) == (False, True, -9)
    assert result.error == (
        "timed out after 200 ms: sent SIGTERM to the process group, SIGKILL after 0.3 s grace"
    )


def test_timeout_group_that_obeys_sigterm_is_not_kept_waiting_for_the_grace() -> None:
    command = "sleep 60 & echo child=$!; echo shell=$$; wait"
    runner = SubprocessRunner(grace_s=30)
    result = run(runner.run(command, make_ctx(timeout_ms=200)))
    wait_gone(list(pids_in(result.stdout_tail).values()))
    assert (result.success, result.timed_out, result.exit_code) == (False, True, -signal.SIGTERM)
    assert "the group ended within the grace" in result.error
    assert result.duration_ms < 15_000  # far below the 30 s grace


def test_timeout_wins_over_a_clean_exit_after_sigterm() -> None:
    result = run(
        SubprocessRunner(grace_s=5).run("trap 'exit 0' TERM; sleep 60 & wait", make_ctx(timeout_ms=100))
    )
    assert (result.success, result.timed_out, result.exit_code) == (False, True, 0)


def test_cancelling_run_kills_the_process_group(tmp_path: Path) -> None:
    pidfile = tmp_path / "pids"
    tmp = f"{pidfile}.tmp"
    command = f"sleep 60 & echo child=$! > {tmp}; echo shell=$$ >> {tmp}; mv {tmp} {pidfile}; wait"

    async def scenario() -> dict[str, int]:
        task = asyncio.create_task(SubprocessRunner().run(command, make_ctx()))
        await until(pidfile.exists, 10, "the command to start")
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return pids_in(pidfile.read_text())

    pids = run(scenario())
    assert set(pids) == {"child", "shell"}
    wait_gone(list(pids.values()))


def test_concurrent_runs_are_independent() -> None:
    async def scenario() -> list[AttemptResult]:
        runner = SubprocessRunner()
        return await asyncio.gather(*(runner.run(f"echo {i}; exit {i}", make_ctx()) for i in range(8)))

    results = run(scenario())
    assert [(r.exit_code, r.stdout_tail) for r in results] == [(i, f"{i}\n") for i in range(8)]


# -- CallableRunner --------------------------------------------------------------------------------


def test_sync_handler_runs_in_a_thread_and_gets_the_context() -> None:
    runner = CallableRunner()
    seen: list[tuple[AttemptContext, int]] = []

    @runner.handler("report")
    def report(ctx: AttemptContext) -> str:
        seen.append((ctx, threading.get_ident()))
        return f"rows for {ctx.params['region']}"

    result = run(runner.run("report", make_ctx()))
    assert (result.success, result.error, result.stdout_tail, result.exit_code) == (
        True,
        "",
        "rows for eu",
        None,
    )
    assert seen[0][0] == make_ctx()
    assert seen[0][1] != threading.get_ident()
    assert report.__name__ == "report"  # the decorator returns the function itself


def test_async_handler_and_none_return() -> None:
    runner = CallableRunner()
    loops: list[asyncio.AbstractEventLoop] = []

    async def handler(ctx: AttemptContext) -> None:
        loops.append(asyncio.get_running_loop())
        await asyncio.sleep(0)

    runner.register("async", handler)
    result = run(runner.run("async", make_ctx()))
    assert (result.success, result.stdout_tail) == (True, "")
    assert len(loops) == 1


def test_async_callable_object_and_sync_wrapper_returning_a_coroutine() -> None:
    class Handler:
        async def __call__(self, ctx: AttemptContext) -> str:
            return f"object {asyncio.get_running_loop() is not None}"

    async def work(ctx: AttemptContext) -> str:
        return f"wrapped {ctx.attempt}"

    runner = CallableRunner()
    runner.register("object", Handler())
    runner.register("wrapper", lambda ctx: work(ctx))
    assert run(runner.run("object", make_ctx())).stdout_tail == "object True"
    assert run(runner.run("wrapper", make_ctx())).stdout_tail == "wrapped 1"


def test_handler_exception_is_a_failure_with_traceback_tail() -> None:
    runner = CallableRunner()

    @runner.handler("boom")
    def boom(ctx: AttemptContext) -> None:
        raise ValueError(f"bad shard {ctx.shard}")

    result = run(runner.run("boom", make_ctx()))
    assert (result.success, result.error, result.timed_out) == (False, "ValueError: bad shard 2", False)
    assert result.stderr_tail.startswith("Traceback")
    assert "in boom" in result.stderr_tail
    assert result.stderr_tail.endswith("ValueError: bad shard 2\n")


def test_handler_calling_sys_exit_does_not_stop_the_executor() -> None:
    runner = CallableRunner()
    runner.register("exits", lambda ctx: sys.exit(2))
    result = run(runner.run("exits", make_ctx()))
    assert (result.success, result.error) == (False, "SystemExit: 2")


def test_unknown_handler_names_the_registered_ones() -> None:
    runner = CallableRunner()
    assert run(runner.run("x", make_ctx())).error == "unknown handler 'x' (registered: none)"
    runner.register("b", lambda ctx: None)
    runner.register("a", lambda ctx: None)
    result = run(runner.run("x", make_ctx()))
    assert (result.success, result.error) == (False, "unknown handler 'x' (registered: a, b)")


def test_async_handler_timeout_cancels_it() -> None:
    runner = CallableRunner()
    cancelled: list[bool] = []

    @runner.handler("hang")
    async def hang(ctx: AttemptContext) -> None:
        try:
            await asyncio.Event().wait()
        except asyncio.CancelledError:
            cancelled.append(True)
            raise

    result = run(runner.run("hang", make_ctx(timeout_ms=50)))
    assert (result.success, result.timed_out) == (False, True)
    assert result.error == "timed out after 50 ms: handler 'hang' cancelled"
    assert cancelled == [True]


def test_sync_handler_timeout_reports_and_leaves_the_thread_running() -> None:
    runner = CallableRunner()
    release = threading.Event()
    finished = threading.Event()

    @runner.handler("block")
    def block(ctx: AttemptContext) -> None:
        release.wait(30)
        finished.set()

    async def scenario() -> AttemptResult:
        result = await runner.run("block", make_ctx(timeout_ms=50))
        assert not finished.is_set()  # the thread is still blocked: it cannot be killed
        release.set()
        return result

    result = run(scenario())  # asyncio.run joins the default executor's threads
    assert finished.is_set()
    assert (result.success, result.timed_out) == (False, True)
    assert "its thread cannot be stopped" in result.error


def test_large_return_value_and_error_are_capped() -> None:
    runner = CallableRunner(tail_bytes=100)
    runner.register("big", lambda ctx: "z" * 100_000)
    runner.register("loud", lambda ctx: (_ for _ in ()).throw(RuntimeError("e" * 100_000)))
    big = run(runner.run("big", make_ctx()))
    assert big.stdout_tail == f"\u2026[truncated {100_000 - 100} bytes]\n" + "z" * 100
    loud = run(runner.run("loud", make_ctx()))
    assert len(loud.error.encode()) < 5 * 1024
    assert loud.error.startswith("RuntimeError: eee")
    assert len(loud.stderr_tail.encode()) < 200


def test_register_rejects_bad_names_and_duplicates() -> None:
    runner = CallableRunner()
    runner.register("a", lambda ctx: None)
    with pytest.raises(InvalidSpec, match="already registered"):
        runner.register("a", lambda ctx: None)
    with pytest.raises(InvalidSpec, match="non-empty"):
        runner.register("", lambda ctx: None)
    with pytest.raises(InvalidSpec, match="at most 128"):
        runner.register("h" * 129, lambda ctx: None)
    with pytest.raises(InvalidSpec, match="not callable"):
        runner.register("c", "nope")  # type: ignore[arg-type]
    assert runner.names() == ["a"]


class _Unprintable(Exception):
    def __str__(self) -> str:
        raise ValueError("no text for this exception")


def test_an_exception_whose_str_raises_is_still_a_failure_of_its_attempt() -> None:
    """Before, formatting the error raised out of ``run`` (the agent's safety net then reported
    "runner error: ValueError" instead of the handler's own exception; the eager path of a
    Session had no such net: tests/unit/test_session_eager.py)."""
    runner = CallableRunner()

    @runner.handler("unprintable")
    async def unprintable(ctx: AttemptContext) -> None:
        raise _Unprintable()

    res = run(runner.run("unprintable", make_ctx()))
    assert not res.success and res.error.startswith("_Unprintable: <str() failed: ValueError"), res.error
    assert "_Unprintable" in res.stderr_tail
