"""A 10,000-task workflow applied to a real 3-node cluster: it is staged in chunks, every node
ends with all its tasks, and an executor connected meanwhile stays registered (a long apply
used to stall the leader past the executor's heartbeat timeout, and it re-registered)."""

from __future__ import annotations

from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.testing.cluster import wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.conftest import ClusterFactory

pytestmark = pytest.mark.integration

TASKS = 10_000


def ten_thousand() -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name="big", params_json='{"target": "warehouse"}', max_parallel=64)
    for i in range(TASKS):
        task = spec.tasks.add(name=f"t{i:05d}", command=f"echo {i} {{{{ ds }}}} {{{{ params.target }}}}")
        if i:
            task.depends_on.add(task=f"t{(i * 7919) % i:05d}")
    return spec


def test_a_ten_thousand_task_workflow_applies_and_the_executor_stays_registered(
    make_cluster: ClusterFactory, tmp_path: Path
) -> None:
    cluster = make_cluster()
    exe = None
    try:
        cluster.wait_for_leader(60)
        log = tmp_path / "ex1.log"
        exe = cluster.start_executor("ex1", 4, tmp_path / "ex1", log)
        wait_until(
            lambda: log.exists() and "registered with" in log.read_text(), 60, what="executor registered"
        )
        with Client(cluster.targets(), timeout=60) as client:
            record, changed = client.apply_workflow(ten_thousand())
            assert changed and record.version == 1 and len(record.spec.tasks) == TASKS
            again, changed = client.apply_workflow(ten_thousand())
            assert not changed and again.version == 1  # unchanged: no new version
            cluster.chains_agree()
            for node in ("n1", "n2", "n3"):
                with Client([cluster.grpc_of(node)], stale_reads=True) as view:

                    def complete(v: Client = view) -> bool:
                        return len(v.get_workflow("big").spec.tasks) == TASKS

                    wait_until(complete, 30, 0.2, node)
            executors = client.list_executors()
        assert [e.name for e in executors.executors if e.state == pb.EXECUTOR_ALIVE] == ["ex1"]
        assert log.read_text().count("registered with") == 1, "the executor had to re-register"
    finally:
        if exe is not None:
            exe.terminate()
            exe.wait(timeout=10)
