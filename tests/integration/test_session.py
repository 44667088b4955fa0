"""The executor Session stream (issue 31 P2) with real node processes and an embedded executor:
work and results as packed columns on one bidirectional stream, and both directions of an
upgrade.

* new leader, new executor: the executor opens a session; every-second fires of an eager async
  handler run inside the batches that deliver them, a handler that suspends goes on in a Task,
  and every result is committed (the runs succeed);
* old leader (no Session RPC, no ``RegisterReply.session_version``): the new executor keeps
  DispatchBatch, Report and Heartbeat;
* a leader that advertises sessions but answers ``UNIMPLEMENTED``: the executor falls back;
* new leader, old executor (one that never opens a session: ``session=False``, the code path of
  every earlier release): served as before.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.executor.agent import Executor
from raftsched.executor.runners import AttemptContext
from raftsched.model import CronTrigger, TaskSpec
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.conftest import ClusterFactory

pytestmark = pytest.mark.integration

LOAD_TASKS = 400  # every-second tasks of the steady-load test
LOAD_SECONDS = 8

# A leader of a build from before the Session stream: no Session method (the generated base
# class answers UNIMPLEMENTED) and nothing in RegisterReply.session_version.
OLD_LEADER = """
import runpy
from raftsched.rpc import executor_service
del executor_service.ExecutorServicer.Session
executor_service.SESSION_VERSION = 0
runpy.run_module("raftsched.cli.node", run_name="__main__")
"""

# A leader that says it serves sessions but has no Session method: the UNIMPLEMENTED fallback.
UNIMPLEMENTED_LEADER = """
import runpy
import grpc
from raftsched.rpc import executor_service

async def Session(self, requests, context):
    await context.abort(grpc.StatusCode.UNIMPLEMENTED, "Method not found!")  # as gRPC answers
    yield

executor_service.ExecutorServicer.Session = Session
runpy.run_module("raftsched.cli.node", run_name="__main__")
"""


def start_build(cluster: LocalCluster, script: Path) -> None:
    for node_id in [n.id for n in cluster.config.nodes]:
        log = open(cluster.log_dir / f"{node_id}.log", "ab")  # noqa: SIM115 - owned by the child
        cluster.procs[node_id] = subprocess.Popen(
            [sys.executable, str(script), "--config", str(cluster.config_path), "--node-id", node_id],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
        log.close()


class Unprintable:
    def __str__(self) -> str:
        raise ValueError("no text for this value")


class Embedded:
    """An embedded executor on its own thread and event loop, with an eager async handler
    ``quick`` (returns at once), an eager one ``slow`` that suspends, and a plain ``plain``."""

    def __init__(self, cluster: LocalCluster, data: Path, session: bool = True, slots: int = 64) -> None:
        self.ex = Executor(cluster.targets(), "emb", slots=slots, data_dir=data, session=session)
        self.ran: list[str] = []
        self.long_started: list[str] = []

        @self.ex.handler("quick", eager=True)
        async def quick(ctx: AttemptContext) -> None:
            self.ran.append(ctx.execution_id)

        @self.ex.handler("slow", eager=True)
        async def slow(ctx: AttemptContext) -> str:
            await asyncio.sleep(0.05)
            self.ran.append(ctx.execution_id)
            return "slept"

        @self.ex.handler("plain")
        def plain(ctx: AttemptContext) -> None:
            self.ran.append(ctx.execution_id)

        @self.ex.handler("guarded", eager=True)
        async def guarded(ctx: AttemptContext) -> None:
            # Before its first await an eager handler has no current task: asyncio.timeout
            # refuses to work there (RuntimeError), and the agent's own task is never touched.
            async with asyncio.timeout(5):
                await asyncio.sleep(0)

        @self.ex.handler("overrun", eager=True)
        async def overrun(ctx: AttemptContext) -> None:
            await asyncio.sleep(30)  # suspends: the rest runs in a Task, under the timeout

        @self.ex.handler("badvalue", eager=True)
        async def badvalue(ctx: AttemptContext) -> object:
            return Unprintable()  # its str() raises: the attempt fails, the batch goes on

        @self.ex.handler("long", eager=True)
        async def long(ctx: AttemptContext) -> None:
            self.long_started.append(ctx.execution_id)
            await asyncio.sleep(60)  # suspends: cancelled when its run is

        self.loop = asyncio.new_event_loop()
        self.stop = asyncio.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        self.loop.run_until_complete(self.ex.run(self.stop))

    def __enter__(self) -> Embedded:
        self.thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self.loop.call_soon_threadsafe(self.stop.set)
        self.thread.join(30)
        assert not self.thread.is_alive()


@pytest.fixture
def tasks() -> Iterator[list[TaskSpec]]:
    yield [TaskSpec(name, CronTrigger("* * * * * *"), handler=name) for name in ("quick", "slow", "plain")]


def succeeded(client: Client, task: str) -> int:
    return sum(1 for r in client.runs(task) if r.state == pb.SUCCEEDED)


def wait_for_successes(client: Client, task: str, n: int) -> None:
    wait_until(lambda: succeeded(client, task) >= n, 60, 0.2, f"{n} runs of {task} succeed")


def run_tasks(cluster: LocalCluster, data: Path, specs: list[TaskSpec], session: bool = True) -> Embedded:
    with Embedded(cluster, data, session) as emb, Client(cluster.targets()) as client:
        wait_until(lambda: emb.ex._registered, 30, 0.1, "registered")
        for spec in specs:
            client.add_task(spec)
        for spec in specs:
            wait_for_successes(client, spec.name, 3)
        for spec in specs:
            client.disable_task(spec.name)
    return emb


def test_a_new_executor_works_over_a_session_with_eager_and_suspending_handlers(
    make_cluster: ClusterFactory, tmp_path: Path, tasks: list[TaskSpec]
) -> None:
    cluster = make_cluster()
    cluster.wait_for_leader(60)
    emb = run_tasks(cluster, tmp_path / "emb", tasks)
    assert emb.ex.sessions_opened >= 1
    assert emb.ex.eager_rows >= 6  # quick and slow ran in their batches
    assert emb.ex.suspended_rows >= 3  # slow went on in a Task
    assert len(emb.ran) == len(set(emb.ran))  # nothing ran twice


def test_a_new_executor_keeps_the_old_rpcs_with_an_old_leader(
    make_cluster: ClusterFactory, tmp_path: Path, tasks: list[TaskSpec]
) -> None:
    script = tmp_path / "old_leader.py"
    script.write_text(OLD_LEADER)
    cluster = make_cluster(start=False)
    start_build(cluster, script)
    cluster.wait_for_leader(60)
    emb = run_tasks(cluster, tmp_path / "emb", tasks)
    assert emb.ex.sessions_opened == 0 and emb.ex.eager_rows == 0
    assert len(emb.ran) == len(set(emb.ran))


def test_a_new_executor_falls_back_when_the_leader_answers_unimplemented(
    make_cluster: ClusterFactory, tmp_path: Path, tasks: list[TaskSpec], caplog: pytest.LogCaptureFixture
) -> None:
    script = tmp_path / "unimplemented_leader.py"
    script.write_text(UNIMPLEMENTED_LEADER)
    cluster = make_cluster(start=False)
    start_build(cluster, script)
    cluster.wait_for_leader(60)
    with caplog.at_level("INFO", logger="raftsched.executor.agent"):
        emb = run_tasks(cluster, tmp_path / "emb", tasks[:1])
    assert emb.ex.sessions_opened == 0 and emb.ex.eager_rows == 0
    assert "has no Session stream; using DispatchBatch, Report and Heartbeat" in caplog.text


def test_a_new_leader_serves_an_executor_that_never_opens_a_session(
    make_cluster: ClusterFactory, tmp_path: Path, tasks: list[TaskSpec]
) -> None:
    cluster = make_cluster()
    cluster.wait_for_leader(60)
    emb = run_tasks(cluster, tmp_path / "emb", tasks, session=False)
    assert emb.ex.sessions_opened == 0 and emb.ex.eager_rows == 0
    assert len(emb.ran) == len(set(emb.ran))


def test_eager_handlers_that_suspend_keep_their_timeout_and_cancel_and_a_guarded_one_fails_alone(
    make_cluster: ClusterFactory, tmp_path: Path
) -> None:
    cluster = make_cluster()
    cluster.wait_for_leader(60)
    every_second = CronTrigger("* * * * * *")
    with Embedded(cluster, tmp_path / "emb") as emb, Client(cluster.targets()) as client:
        wait_until(lambda: emb.ex._registered, 30, 0.1, "registered")
        client.add_task(TaskSpec("guarded", every_second, handler="guarded"))
        client.add_task(TaskSpec("overrun", every_second, handler="overrun", timeout_ms=300))
        client.add_task(TaskSpec("long", every_second, handler="long"))
        client.add_task(TaskSpec("quick", every_second, handler="quick"))
        client.add_task(TaskSpec("badvalue", every_second, handler="badvalue"))

        def failed(task: str) -> list[pb.Run]:
            return [r for r in client.runs(task) if r.state == pb.FAILED]

        wait_until(lambda: len(failed("guarded")) >= 2, 60, 0.2, "guarded runs fail")
        wait_until(lambda: len(failed("overrun")) >= 2, 60, 0.2, "overrun runs time out")
        wait_until(lambda: len(failed("badvalue")) >= 2, 60, 0.2, "badvalue runs fail")
        wait_until(lambda: len(emb.long_started) >= 1, 60, 0.2, "a long run starts")
        long_run = emb.long_started[0].rsplit("/", 2)[0]
        client.cancel_run(long_run, "test")
        wait_until(
            lambda: any(r.run_id == long_run and r.state == pb.CANCELLED for r in client.runs("long")),
            60,
            0.2,
            "the long run is cancelled",
        )
        wait_for_successes(client, "quick", 3)  # the agent goes on
        for task in ("guarded", "overrun", "long", "quick", "badvalue"):
            client.disable_task(task)
        guarded_error = failed("guarded")[0].shards[0].error
        overrun_shard = failed("overrun")[0].shards[0]
        badvalue_error = failed("badvalue")[0].shards[0].error
    assert "RuntimeError" in guarded_error and "inside a task" in guarded_error, guarded_error
    assert overrun_shard.timed_out and "timed out after 300 ms" in overrun_shard.error, overrun_shard
    assert "runner error: ValueError: no text for this value" in badvalue_error, badvalue_error
    assert "runner error: ValueError: no text for this value" in badvalue_error, badvalue_error
    assert emb.ex.suspended_rows >= 3


def test_a_session_under_steady_load_stays_open_and_runs_every_fire_once(
    make_cluster: ClusterFactory, tmp_path: Path
) -> None:
    """Hundreds of every-second fires for several seconds: the heartbeat loop and the report
    loop write to the one session at the same moments. Before the writes were taken one at a
    time, gRPC refused the second (``INTERNAL: Internal error from Core``) and the executor
    lost its session and registered again several times a second."""
    cluster = make_cluster()
    cluster.wait_for_leader(60)
    every_second = CronTrigger("* * * * * *")
    names = [f"load-{i:03d}" for i in range(LOAD_TASKS)]
    with Embedded(cluster, tmp_path / "emb", slots=512) as emb, Client(cluster.targets()) as client:
        wait_until(lambda: emb.ex._registered, 30, 0.1, "registered")
        client.add_tasks([TaskSpec(name, every_second, handler="quick") for name in names])
        wait_until(lambda: len(emb.ran) >= LOAD_TASKS * LOAD_SECONDS, 120, 0.2, "the load runs")
        for name in names:
            client.disable_task(name)

        def unfinished() -> list[pb.Run]:
            return [r for r in client.runs(limit=100_000) if r.state in (pb.PENDING, pb.RUNNING)]

        # Nothing lost: every run of the load finishes, successfully (its result was reported
        # and committed) ...
        wait_until(lambda: not unfinished(), 120, 0.5, "every run of the load finishes")
        runs = client.runs(limit=100_000)
        opened = emb.ex.sessions_opened
        ran = list(emb.ran)
    assert opened == 1, f"the session was opened {opened} times under load"
    assert len(ran) == len(set(ran)), "an attempt ran twice"
    assert len(runs) >= LOAD_TASKS * LOAD_SECONDS
    assert [r.run_id for r in runs if r.state != pb.SUCCEEDED] == []
    # ... and ran here exactly once (one attempt each: no retry after a lost lease).
    assert sorted(r.run_id for r in runs) == sorted(e.rsplit("/", 2)[0] for e in ran)
