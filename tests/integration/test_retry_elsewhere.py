"""A retry lands on another executor, with real processes (issue 29 §3): one node, two executors,
a task whose command fails everywhere; its first retry runs on the executor the first attempt did
not use, after the task's own retry delay (not the cluster's 10 s backoff)."""

from __future__ import annotations

from raftsched.client import Client
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.testing.cluster import wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.conftest import ClusterFactory


def test_a_failed_attempts_retry_runs_on_the_other_executor(make_cluster: ClusterFactory) -> None:
    cluster = make_cluster(nodes=1)
    cluster.wait_for_leader()
    executors = [cluster.start_executor(name) for name in ("ex-a", "ex-b")]
    try:
        with Client(cluster.targets()) as client:
            wait_until(
                lambda: len(client.list_executors().executors) == 2, 60, what="both executors registered"
            )
            client.add_task(
                TaskSpec("flaky", ManualTrigger(), command="exit 3", max_retries=2, retry_delays_ms=(300,))
            )
            run = client.trigger("flaky")
            wait_until(
                lambda: client.get_run(run.run_id).state == pb.FAILED,
                60,
                what="the run failed after its retries",
            )
            done = client.get_run(run.run_id)
    finally:
        for proc in executors:
            proc.terminate()
            proc.wait(30)
    assigned = [(e.attempt, e.executor) for e in done.timeline if e.event == "assigned"]
    assert [attempt for attempt, _ in assigned] == [1, 2, 3], assigned
    assert assigned[1][1] != assigned[0][1], assigned  # the first retry moved
    failed = {e.attempt: e.at_ms for e in done.timeline if e.event == "failed"}
    waits = [e.retry_at_ms - failed[e.attempt - 1] for e in done.timeline if e.event == "retry_scheduled"]
    assert waits == [300, 300]
