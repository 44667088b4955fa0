"""The seeds' founding story on a real 3-node cluster with a real executor (issue 28 §1): team A's
``orders-sync`` (namespace a) and team B's ``reconcile`` (namespace b) that waits for it, both
applied from workflow files. A slow upstream (the downstream waits, named in ``workflow waits``),
a failed one (the downstream is skipped naming it), and a rerun of the upstream that meets the
edge for a downstream run started afterwards."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from raftsched.cli import main
from raftsched.client import Client
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb

pytestmark = pytest.mark.integration

DAY = 86_400_000
L1 = 1_795_996_800_000  # 2026-11-30T00:00:00Z

ORDERS_SYNC = """\
name: orders-sync
namespace: a
owner: team-a
tasks:
  - name: extract
    command: echo "extract {{{{ ds }}}}"
  - name: load
    command: test -f {gate}
    depends_on: [extract]
"""

RECONCILE = """\
name: reconcile
namespace: b
owner: team-b
warn_after: 1h
tasks:
  - name: prep
    command: echo prep
  - name: reconcile
    command: echo "reconcile {{{{ ds }}}}"
    depends_on:
      - prep
      - {{workflow: orders-sync, task: load}}
"""


def _task(run: pb.WorkflowRun, name: str) -> pb.WorkflowTaskRun:
    return next(t for t in run.tasks if t.name == name)


def test_reconcile_waits_for_orders_sync_across_namespaces(
    cluster: LocalCluster, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gate = tmp_path / "orders-landed"
    up_file, down_file = tmp_path / "orders-sync.yaml", tmp_path / "reconcile.yaml"
    up_file.write_text(ORDERS_SYNC.format(gate=gate))
    down_file.write_text(RECONCILE.format())
    cluster.wait_for_leader()
    executor = cluster.start_executor("cd-ex1", slots=4)

    def cli(*argv: str) -> str:
        capsys.readouterr()
        code = main(["--cluster", ",".join(cluster.targets()), *argv])
        out, err = capsys.readouterr()
        assert code == 0, f"raftsched {' '.join(argv)} exited {code}: {err}"
        return out

    try:
        with Client(cluster.targets()) as client:
            up, _ = client.apply_workflow(up_file)
            down, _ = client.apply_workflow(down_file)
            assert (up.spec.namespace, down.spec.namespace) == ("a", "b")

            # A slow upstream: the downstream run comes first and waits, named everywhere.
            first = client.start_workflow_run("reconcile", logical_ms=L1)

            def reconcile_state(run_id: str) -> int:
                return _task(client.get_workflow_run(run_id), "reconcile").state

            wait_until(
                lambda: _task(client.get_workflow_run(first.run_id), "prep").state == pb.TASK_SUCCESS,
                60,
                0.2,
                "prep to succeed",
            )
            assert reconcile_state(first.run_id) == pb.TASK_WAITING
            waiting = _task(client.get_workflow_run(first.run_id), "reconcile")
            assert 'workflow "orders-sync" task "load"' in waiting.timeline[0].reason
            rows = json.loads(cli("workflow", "waits", "--json"))
            assert [(r["upstream"], r["upstream_task"], r["downstream_run"]) for r in rows] == [
                ("orders-sync", "load", first.run_id)
            ]
            assert "cross-workflow dependencies" in cli("workflow", "status", first.run_id)
            assert rows[0]["note"].startswith('no run of "orders-sync" at logical time')
            why = client.explain_workflow_task(first.run_id, "reconcile")  # the leader's answer
            assert "1 cross-workflow edge(s)" in why.verdict and why.waits[0]["upstream"] == "orders-sync"
            assert "orders-sync:load" in cli("workflow", "explain", first.run_id, "reconcile")

            gate.write_text("landed\n")
            sync = client.start_workflow_run("orders-sync", logical_ms=L1)
            assert client.wait_workflow_run(sync.run_id, 60).state == pb.WORKFLOW_SUCCESS
            done = client.wait_workflow_run(first.run_id, 60)
            assert done.state == pb.WORKFLOW_SUCCESS
            load = _task(client.get_workflow_run(sync.run_id), "load")
            load_ok = max(e.at_ms for e in load.timeline if e.state == pb.TASK_SUCCESS)
            started = min(e.at_ms for e in _task(done, "reconcile").timeline if e.state == pb.TASK_RUNNING)
            assert started >= load_ok, "reconcile started before orders-sync's load succeeded"
            assert json.loads(cli("workflow", "waits", "--json")) == []

            # A failed upstream: the downstream is skipped, naming the upstream and its run.
            gate.unlink()
            failed = client.start_workflow_run("orders-sync", logical_ms=L1 + DAY)
            assert client.wait_workflow_run(failed.run_id, 60).state == pb.WORKFLOW_FAILED
            second = client.start_workflow_run("reconcile", logical_ms=L1 + DAY)
            skipped = client.wait_workflow_run(second.run_id, 60)
            reason = _task(skipped, "reconcile").reason
            assert _task(skipped, "reconcile").state == pb.TASK_SKIPPED
            assert "orders-sync" in reason and failed.run_id in reason and "load" in reason

            # A rerun of the upstream's load succeeds; a downstream run started now is met by it.
            gate.write_text("landed late\n")
            client.rerun_workflow_task(failed.run_id, "load")
            assert client.wait_workflow_run(failed.run_id, 60).state == pb.WORKFLOW_SUCCESS
            third = client.start_workflow_run("reconcile", logical_ms=L1 + DAY)
            assert client.wait_workflow_run(third.run_id, 60).state == pb.WORKFLOW_SUCCESS

            # Team A cannot delete the workflow team B depends on without --force.
            code = main(["--cluster", ",".join(cluster.targets()), "workflow", "delete", "orders-sync"])
            assert code != 0 and "reconcile" in capsys.readouterr().err
    finally:
        executor.terminate()
        executor.wait(timeout=10)


def test_applying_a_dependency_needs_the_upstreams_namespace(make_cluster: Any, tmp_path: Path) -> None:
    from raftsched.errors import PermissionDenied
    from raftsched.security.tokens import new_token

    admin = new_token()
    base = tmp_path / "cluster"
    base.mkdir(parents=True, exist_ok=True)
    (base / "admin.token").write_text(admin + "\n")
    cluster = make_cluster(extra_config='[auth]\nbootstrap_token_file = "admin.token"\n', start=False)
    cluster.token = admin
    cluster.start()
    cluster.wait_for_leader()
    up_file, down_file = tmp_path / "orders-sync.yaml", tmp_path / "reconcile.yaml"
    up_file.write_text(ORDERS_SYNC.format(gate=tmp_path / "gate"))
    down_file.write_text(RECONCILE.format())
    with Client(cluster.targets(), token=admin) as root:
        root.apply_workflow(up_file)
        team_b, _ = root.create_token("maintainer", ["b"], description="team b")
        both, _ = root.create_token("maintainer", ["a", "b"], description="reads a, writes b")
    with Client(cluster.targets(), token=team_b) as b, pytest.raises(PermissionDenied, match="'a'"):
        b.apply_workflow(down_file)
    with Client(cluster.targets(), token=both) as ab:
        record, _ = ab.apply_workflow(down_file)
        assert record.spec.namespace == "b"


def test_the_tutorials_pipeline_runs_as_written(
    cluster: LocalCluster, capsys: pytest.CaptureFixture[str]
) -> None:
    """docs/tutorials/cross-team-pipeline.md, step by step, with its example files as shipped."""
    examples = Path(__file__).resolve().parents[2] / "examples" / "workflows"
    cluster.wait_for_leader()
    executor = cluster.start_executor("tutorial-ex1", slots=4)

    def cli(*argv: str) -> str:
        capsys.readouterr()
        code = main(["--cluster", ",".join(cluster.targets()), *argv])
        out, err = capsys.readouterr()
        assert code == 0, f"raftsched {' '.join(argv)} exited {code}: {err}"
        return out

    try:
        cli("workflow", "apply", str(examples / "orders-sync.yaml"))
        cli("workflow", "apply", str(examples / "reconcile.yaml"))
        with Client(cluster.targets()) as client:
            down = client.start_workflow_run("reconcile", logical_ms=L1)
            wait_until(
                lambda: json.loads(cli("workflow", "waits", "--json")) != [], 60, 0.2, "reconcile to wait"
            )
            rows = json.loads(cli("workflow", "waits", "--json"))
            assert [(r["upstream"], r["upstream_task"]) for r in rows] == [("orders-sync", "load")]
            up = client.start_workflow_run("orders-sync", logical_ms=L1)
            assert client.wait_workflow_run(up.run_id, 60).state == pb.WORKFLOW_SUCCESS
            assert client.wait_workflow_run(down.run_id, 60).state == pb.WORKFLOW_SUCCESS
    finally:
        executor.terminate()
        executor.wait(timeout=10)
