"""Workflows end to end on a real 3-node cluster with real executor processes running real
subprocesses: the extract → validate → load example from its YAML file, a failing validate that
skips load with the reason, a rerun from validate that completes the run, and a kill that
terminates the running process."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.testing.cluster import wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.helpers import Fleet

pytestmark = pytest.mark.integration

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "workflows" / "etl.yaml"
T_2026_11_30 = 1_795_996_800_000  # 2026-11-30T00:00:00Z


@pytest.fixture
def fleet(fleet: Fleet) -> Fleet:
    """The suite's fleet (conftest) with executor ex1 started."""
    fleet.start_executor("ex1", slots=4)
    return fleet


def states(run: pb.WorkflowRun) -> dict[str, str]:
    return {t.name: pb.WorkflowTaskState.Name(t.state).removeprefix("TASK_") for t in run.tasks}


def test_the_etl_example_runs_end_to_end_with_rendered_templates(fleet: Fleet) -> None:
    with Client(fleet.cluster.targets()) as client:
        record, changed = client.apply_workflow(EXAMPLE)
        assert changed and record.version == 1
        _, changed_again = client.apply_workflow(EXAMPLE)
        assert not changed_again
        run = client.start_workflow_run("etl", logical_ms=T_2026_11_30)
        done = client.wait_workflow_run(run.run_id, 60)
        assert done.state == pb.WORKFLOW_SUCCESS, states(done)
        assert states(done) == {"extract": "SUCCESS", "validate": "SUCCESS", "load": "SUCCESS"}
        by_name = {t.name: t for t in done.tasks}
        # load started only after both of its upstream tasks succeeded.
        load_started = min(e.at_ms for e in by_name["load"].timeline if e.state == pb.TASK_RUNNING)
        for up in ("extract", "validate"):
            succeeded = max(e.at_ms for e in by_name[up].timeline if e.state == pb.TASK_SUCCESS)
            assert load_started >= succeeded
        outputs = {
            r.task: r.shards[0].stdout_tail for r in client.runs("etl#load") + client.runs("etl#extract")
        }
        assert "extract orders for 2026-11-30" in outputs["etl#extract"]
        assert "load warehouse.orders 2026-11-30 2026-11-30T00:00:00Z 1795996800" in outputs["etl#load"]


def _gated(flag: Path, pidfile: Path) -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name="gated", params_json=json.dumps({"flag": str(flag)}))
    spec.tasks.add(name="extract", command="echo extracted")
    spec.tasks.add(
        name="validate",
        command="test -f {{ params.flag }}",
        depends_on=[pb.Dependency(task="extract")],
    )
    spec.tasks.add(
        name="load",
        command="echo loaded {{ ds }}",
        depends_on=[pb.Dependency(task="extract"), pb.Dependency(task="validate")],
    )
    spec.tasks.add(
        name="alert",
        command="echo validate failed",
        depends_on=[pb.Dependency(task="validate", condition=pb.ON_FAILURE)],
    )
    spec.tasks.add(name="slow", command=f"echo $$ > {pidfile}; exec sleep 120")
    return spec


def test_failing_validate_skips_load_and_a_rerun_from_validate_completes_the_run(
    fleet: Fleet, tmp_path: Path
) -> None:
    flag = tmp_path / "data-is-valid"
    with Client(fleet.cluster.targets()) as client:
        spec = _gated(flag, tmp_path / "pid")
        del spec.tasks[-1]  # no slow task here
        client.apply_workflow(spec)
        run = client.start_workflow_run("gated")
        failed = client.wait_workflow_run(run.run_id, 60)
        assert failed.state == pb.WORKFLOW_FAILED
        assert states(failed) == {
            "extract": "SUCCESS",
            "validate": "FAILED",
            "load": "SKIPPED",
            "alert": "SUCCESS",
        }
        load = next(t for t in failed.tasks if t.name == "load")
        assert "validate" in load.reason and "FAILED" in load.reason, load.reason
        extract_run = failed.tasks[0].run_id
        # Fix the data, rerun from validate: extract is not run again, load now runs.
        flag.write_text("ok")
        client.rerun_workflow_task(run.run_id, "validate")
        done = client.wait_workflow_run(run.run_id, 60)
        assert done.state == pb.WORKFLOW_SUCCESS, states(done)
        assert states(done)["load"] == "SUCCESS" and states(done)["alert"] == "SKIPPED"
        assert done.tasks[0].run_id == extract_run and done.tasks[0].tries == 1
        assert [len(client.runs("gated#extract")), len(client.runs("gated#validate"))] == [1, 2]


def test_killing_a_run_terminates_its_running_process(fleet: Fleet, tmp_path: Path) -> None:
    pidfile = tmp_path / "pid"
    with Client(fleet.cluster.targets()) as client:
        client.apply_workflow(_gated(tmp_path / "absent", pidfile))
        run = client.start_workflow_run("gated")
        wait_until(
            lambda: pidfile.exists() and pidfile.read_text().strip() != "", 60, what="the slow task to start"
        )
        pid = int(pidfile.read_text())
        killed = client.kill_workflow_run(run.run_id, "test says stop")
        assert killed.state == pb.WORKFLOW_KILLED
        assert states(killed)["slow"] == "KILLED"

        def gone() -> bool:
            try:
                os.kill(pid, 0)
            except ProcessLookupError:
                return True
            return False

        wait_until(gone, 30, what="the killed run's process to be terminated")
