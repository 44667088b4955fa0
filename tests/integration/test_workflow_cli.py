"""``raftsched workflow ...`` end to end: a real 3-node cluster and an executor process running the
tasks as subprocesses; the CLI runs in-process against a follower (writes follow the leader hint).

extract → validate → load (load needs both), plus an ``on failure`` alert: a failing validate
skips load with the reason and runs the alert; a rerun from validate, once it can pass, completes
the run (load runs, the alert is skipped) — and the graph, status and lineage show it.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from raftsched.cli import main
from raftsched.client import Client
from raftsched.testing.cluster import LocalCluster
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.helpers import NODES

pytestmark = pytest.mark.integration

Cli = Callable[..., tuple[int, str, str]]

WORKFLOW = """\
# extract -> validate -> load, with an alert when validate fails
name: etl
description: nightly ETL
params:
  region: eu
tasks:
  - name: extract
    command: echo "extract {{{{ ds }}}} {{{{ params.region }}}}"
  - name: validate
    command: test -f {marker}
  - name: load
    command: echo load
    depends_on: [extract, validate]
  - name: alert
    command: echo "validate failed"
    depends_on:
      - {{task: validate, condition: failure}}
"""


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_workflow_cli_end_to_end(cluster: LocalCluster, cli: Cli, tmp_path: Path) -> None:
    leader = cluster.wait_for_leader()
    follower = next(n for n in NODES if n != leader)
    at = ["--cluster", cluster.grpc_of(follower)]
    marker = tmp_path / "validated"
    path = tmp_path / "etl.yaml"
    # validate depends on extract too: written as a second line so the file exercises both forms
    path.write_text(
        WORKFLOW.format(marker=marker).replace(
            "    command: test -f", "    depends_on:\n      - extract\n    command: test -f"
        )
    )

    def ok(*argv: str) -> str:
        code, out, err = cli(*at, *argv)
        assert code == 0, f"raftsched {' '.join(argv)} exited {code}: {err}"
        return out

    executor = cluster.start_executor("wf-ex1", slots=4)
    try:
        assert ok("workflow", "apply", str(path)).startswith("applied workflow etl: version 1")
        assert ok("workflow", "apply", str(path)).startswith("workflow etl unchanged (version 1)")

        out = ok("workflow", "run", "etl")
        run_id = out.split()[1]
        assert run_id.startswith("etl@")
        with Client(cluster.grpc_of(leader)) as client:
            first = client.wait_workflow_run(run_id, 60, poll_s=0.2)
        states = {t.name: t for t in first.tasks}
        assert first.state == pb.WORKFLOW_FAILED
        assert states["validate"].state == pb.TASK_FAILED
        assert states["load"].state == pb.TASK_SKIPPED and "validate" in states["load"].reason
        assert states["alert"].state == pb.TASK_SUCCESS

        # Reads are served by the follower: wait until it has the finished run too.
        def follower_sees(state: str) -> dict[str, Any]:
            for _ in range(200):
                data: dict[str, Any] = json.loads(ok("workflow", "status", run_id, "--json"))
                if data["state"] == state:
                    return data
            raise AssertionError(f"{follower} never showed {run_id} as {state}")

        follower_sees("failed")
        graph = ok("workflow", "graph", run_id, "--ascii").splitlines()
        assert "  load      [skipped]  <- extract ok, validate x" in graph
        assert "  alert     [success]  <- validate x (on failure)" in graph
        status = ok("workflow", "status", run_id)
        assert "skipped" in status and "validate" in status and "timeline (UTC)" in status

        upstream, downstream = ok("workflow", "lineage", "etl", "validate").split("downstream")
        assert "  1  extract" in upstream
        assert "  1  load" in downstream and "  1  alert" in downstream

        # extract's task run rendered the templates; its attempts are an ordinary task's runs.
        runs = json.loads(ok("runs", "etl#extract", "--json"))
        assert runs and runs[0]["shards"][0]["stdout_tail"].startswith("extract 20")
        assert runs[0]["shards"][0]["stdout_tail"].strip().endswith(" eu")

        marker.write_text("ok")
        assert ok("workflow", "rerun", run_id, "validate").startswith(f"rerunning validate in {run_id}")
        with Client(cluster.grpc_of(leader)) as client:
            second = client.wait_workflow_run(run_id, 60, poll_s=0.2)
        states = {t.name: t for t in second.tasks}
        assert second.state == pb.WORKFLOW_SUCCESS
        assert [states[n].state for n in ("extract", "validate", "load", "alert")] == [
            pb.TASK_SUCCESS,
            pb.TASK_SUCCESS,
            pb.TASK_SUCCESS,
            pb.TASK_SKIPPED,
        ]
        assert states["extract"].tries == 1 and states["validate"].tries == 2  # upstream kept
        data = follower_sees("success")
        assert [t["state"] for t in data["tasks"]] == ["success"] * 3 + ["skipped"]
        graph = ok("workflow", "graph", run_id).splitlines()
        assert "  load      [success]  ← extract ✓, validate ✓" in graph

        listed = json.loads(ok("workflow", "list", "--json"))
        assert [(w["spec"]["name"], w["version"]) for w in listed] == [("etl", 1)]

        code, _, err = cli(*at, "workflow", "rerun", run_id, "lod")
        assert code == 1 and "'lod'" in err and len(err.splitlines()) == 1
        code, _, err = cli(*at, "workflow", "status", "etl@1")
        assert code == 1 and "etl@1" in err
    finally:
        executor.terminate()
        executor.wait(15)
