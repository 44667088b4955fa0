"""A task run's timeline on a real cluster with a real executor: a failure, its retry and the
success are all recorded with times; the SDK returns it and the CLI prints it and the tails."""

from __future__ import annotations

import pytest

from raftsched.cli import main
from raftsched.client import Client
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.testing.cluster import wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.helpers import Fleet

pytestmark = pytest.mark.integration


def test_a_failed_then_retried_run_has_every_transition(
    fleet: Fleet, capsys: pytest.CaptureFixture[str]
) -> None:
    fleet.start_executor("ex1")
    # Attempt 1 fails with exit 3, attempt 2 succeeds; both print a line.
    command = 'case "$RAFTSCHED_EXECUTION_ID" in */1) echo first; exit 3;; *) echo "second ok";; esac'
    with Client(fleet.cluster.targets()) as client:
        wait_until(fleet.all_registered, 30, what="executor registered")
        client.add_task(TaskSpec("flaky", ManualTrigger(), command=command, max_retries=1))
        run_id = client.trigger("flaky").run_id
        wait_until(lambda: client.get_run(run_id).state in (pb.SUCCEEDED, pb.FAILED), 60, 0.2, "run finished")
        run = client.get_run(run_id)
    assert run.state == pb.SUCCEEDED, run
    events = [(e.event, e.attempt) for e in run.timeline]
    assert events == [
        ("created", 0),
        ("assigned", 1),
        ("started", 1),
        ("failed", 1),
        ("retry_scheduled", 2),
        ("assigned", 2),
        ("started", 2),
        ("succeeded", 2),
    ], events
    failed = run.timeline[3]
    assert (failed.exit_code, failed.executor) == (3, "ex1") and failed.duration_ms >= 0
    retry = run.timeline[4]
    assert retry.retry_at_ms >= retry.at_ms
    times = [e.at_ms for e in run.timeline if e.event != "started"]  # started: the executor's clock
    assert times == sorted(times)

    capsys.readouterr()
    leader_id = fleet.cluster.wait_for_leader(10)
    leader = fleet.cluster.grpc_of(leader_id)
    assert main(["--cluster", leader, "logs", run_id, "--tails"]) == 0
    out = capsys.readouterr().out
    assert "second ok" in out and "attempt 2" in out
    assert (
        main(["--cluster", fleet.cluster.grpc_of(fleet.cluster.wait_for_leader(10)), "run", "show", run_id])
        == 0
    )
    out = capsys.readouterr().out
    assert "retry_scheduled shard 0 attempt 2" in out and "failed shard 0 attempt 1 on ex1 exit 3" in out

    # Full logs, asked of a follower only: it redirects to the leader (the one node executors
    # keep a stream to). Each attempt's output, the first one's executor found in the timeline.
    follower = next(n for n in fleet.cluster.procs if n != leader_id)
    with Client([fleet.cluster.grpc_of(follower)]) as client:
        for attempt, text in ((0, b"second ok\n"), (2, b"second ok\n"), (1, b"first\n")):
            chunks = list(client.logs(run_id, attempt=attempt))
            assert chunks[0].header.source == "executor" and chunks[0].header.executor == "ex1"
            assert b"".join(c.data for c in chunks) == text
