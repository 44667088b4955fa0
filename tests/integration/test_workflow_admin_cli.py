"""``raftsched executors`` and ``workflow pause|resume|delete`` against a real 3-node cluster with
an executor process; the CLI runs in-process against a follower (writes follow the leader hint,
the executor list is asked of the leader, which alone knows heartbeats and stream addresses).

A workflow scheduled every second (as the demo's every 20 s one) is paused (no scheduled run
starts any more), resumed (they start again), then deleted with its runs killed.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from raftsched.cli import main
from raftsched.client import Client
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.helpers import NODES, now_ms, wait_time_passed

pytestmark = pytest.mark.integration

Cli = Callable[..., tuple[int, str, str]]

WORKFLOW = """\
name: ticker
schedule: "* * * * * *"
overlap: allow
tasks:
  - name: work
    command: sleep 30
"""


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def scheduled_runs(client: Client) -> list[pb.WorkflowRun]:
    return [r for r in client.list_workflow_runs("ticker", limit=1000) if not r.manual and not r.backfill_id]


def test_executors_and_workflow_pause_resume_delete(cluster: LocalCluster, cli: Cli, tmp_path: Path) -> None:
    leader = cluster.wait_for_leader()
    follower = next(n for n in NODES if n != leader)
    at = ["--cluster", cluster.grpc_of(follower)]

    def ok(*argv: str) -> str:
        code, out, err = cli(*at, *argv)
        assert code == 0, f"raftsched {' '.join(argv)} exited {code}: {err}"
        return out

    path = tmp_path / "ticker.yaml"
    path.write_text(WORKFLOW)
    executor = cluster.start_executor("adm-ex1", slots=3)
    try:
        # -- executors: the leader's view, through a follower ---------------------------------
        def listed() -> dict[str, Any] | None:
            data: dict[str, Any] = json.loads(ok("executors", "--json"))
            rows = data["executors"]
            return data if rows and rows[0]["last_heartbeat_ms"] and rows[0]["address"] else None

        data = wait_until(listed, 60, what="the executor registered, heartbeating and streaming")
        assert data["leader_view"] is True and data["node_id"] == leader
        (row,) = data["executors"]
        assert (row["name"], row["state"], row["slots"]) == ("adm-ex1", "alive", 3)
        assert row["address"].startswith("ipv4:127.0.0.1:")
        table = ok("executors").splitlines()
        assert table[0].split()[:3] == ["NAME", "STATE", "SLOTS"]
        assert table[1].split()[:2] == ["adm-ex1", "alive"] and table[1].split()[2].endswith("/3")

        # -- a workflow every second: its runs hold executor slots ------------------------------
        assert ok("workflow", "apply", str(path)).startswith("applied workflow ticker: version 1")
        with Client(cluster.targets()) as client:
            wait_until(lambda: len(scheduled_runs(client)) >= 2, 60, what="two scheduled runs")

            def busy() -> bool:
                rows = json.loads(ok("executors", "--json"))["executors"]
                return bool(rows and rows[0]["slots_used"] >= 1)

            wait_until(busy, 60, what="an executor slot in use")

            # -- pause: no scheduled run starts any more ----------------------------------------
            assert ok("workflow", "pause", "ticker").startswith("paused workflow ticker")
            # Reads are the follower's: it sees the pause a moment after the leader committed it.
            wait_until(lambda: "(paused)" in ok("workflow", "list"), 30, what="the follower sees the pause")
            paused_at = len(scheduled_runs(client))
            wait_time_passed(now_ms() + 3000)  # three scheduled seconds pass while paused
            assert len(scheduled_runs(client)) == paused_at

            # -- resume: they start again, from now on --------------------------------------------
            assert ok("workflow", "resume", "ticker").startswith(
                "resumed workflow ticker; next scheduled run "
            )
            wait_until(
                lambda: len(scheduled_runs(client)) > paused_at, 60, what="a scheduled run after resume"
            )

            # -- delete: refused while runs are active, then forced ------------------------------
            code, out, err = cli(*at, "workflow", "delete", "ticker")
            assert code == 1 and out == ""
            assert "active run(s)" in err and "delete with force" in err and len(err.splitlines()) == 1
            out = ok("workflow", "delete", "ticker", "--force", "--reason", "retired")
            assert out.startswith("deleted workflow ticker (version 1), killed ")

            def deleted() -> bool:
                code, _, err = cli(*at, "workflow", "show", "ticker")
                return code == 1 and "does not exist" in err

            wait_until(deleted, 30, what="the follower sees the delete")

            # The killed runs' attempts are cancelled on the executor: its slots free up.
            def idle() -> bool:
                rows = json.loads(ok("executors", "--json"))["executors"]
                return bool(rows and rows[0]["slots_used"] == 0)

            wait_until(idle, 60, what="the executor's slots free again")
            assert ok("workflow", "list").strip() == "(none)"
        cluster.wait_converged(30)
    finally:
        executor.terminate()
        executor.wait(timeout=30)

    # -- an executor that left is listed with --all ------------------------------------------------
    def gone() -> dict[str, Any] | None:
        rows = json.loads(ok("executors", "--all", "--json"))["executors"]
        return rows[0] if rows and rows[0]["state"] == "left" else None

    left = wait_until(gone, 60, what="the executor listed as left")
    assert left["name"] == "adm-ex1" and left["left_ms"]
    assert ok("executors").strip().splitlines()[0] == "(none)"
