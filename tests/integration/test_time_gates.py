"""Jitter and not_before with real processes: a 3-node cluster, an executor process, the SDK and
the CLI. A jittered fire keeps its nominal time and starts at its offset, not before; a workflow
task with not_before waits (shown by ``workflow status``) and starts only at its time."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from raftsched.cli import main
from raftsched.client import Client
from raftsched.model import OnceTrigger, TaskSpec
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.timing import jitter
from raftsched.v1 import raftsched_pb2 as pb

pytestmark = pytest.mark.integration

WORKFLOW = """\
name: recon
tasks:
  - name: extract
    command: "true"
  - name: reconcile
    command: "true"
    not_before: "+8s"
    depends_on: [extract]
"""


def test_jitter_and_not_before_hold_starts_on_a_real_cluster(
    cluster: LocalCluster, client: Client, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cluster.wait_for_leader()
    executor = cluster.start_executor("gates-ex1", slots=4)
    try:
        # A jittered one-shot fire: it keeps its nominal time, its attempt waits for the offset.
        due = int(time.time() * 1000) + 3_000
        due -= due % 1000
        client.add_task(TaskSpec("burst", OnceTrigger(due), command="true", jitter_ms=5_000))
        start = jitter.start_ms("burst", due, 5_000)

        # A workflow task with not_before: waiting, shown by workflow status, then started at its
        # time. Started right away, so its gate and the burst's jitter elapse together.
        path = tmp_path / "recon.yaml"
        path.write_text(WORKFLOW)
        client.apply_workflow(str(path))
        wr = client.start_workflow_run("recon")
        gate = wr.logical_ms + 8_000

        def held() -> pb.WorkflowRun | None:
            got = client.get_workflow_run(wr.run_id)
            return got if got.tasks[1].not_before_ms == gate else None

        wait_until(held, 30, 0.2, "reconcile held by its not_before")
        capsys.readouterr()
        assert main(["--cluster", ",".join(cluster.targets()), "workflow", "status", wr.run_id]) == 0
        out = capsys.readouterr().out
        if int(time.time() * 1000) < gate - 2_000:  # still before the gate when the CLI read it
            row = next(line for line in out.splitlines() if line.startswith("reconcile"))
            assert "waiting" in row and "not before +8s" in row, out

        run = wait_until(
            lambda: next((r for r in client.runs("burst") if r.state == pb.SUCCEEDED), None),
            60,
            0.2,
            "burst ran",
        )
        assert run.nominal_ms == due
        assert [s.not_before_ms for s in run.shards] == [start]
        assert all(s.assigned_ms >= start for s in run.shards), (start, run.shards)

        def finished() -> pb.WorkflowRun | None:
            got = client.get_workflow_run(wr.run_id)
            return got if got.state == pb.WORKFLOW_SUCCESS else None

        done = wait_until(finished, 60, 0.2, "the run succeeded")
        task_run = client.get_run(done.tasks[1].run_id)
        assert all(s.assigned_ms >= gate for s in task_run.shards), (gate, task_run.shards)
    finally:
        executor.terminate()
        executor.wait(timeout=30)
