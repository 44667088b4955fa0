"""Backup and restore with real processes: back up a busy cluster (per-second tasks, an executor,
a workflow) from a follower with ``raftsched backup``, restore the file into a new 3-node
cluster (new ports, new data dirs) with ``raftsched-node --restore``, compare definitions and
fire watermarks, and watch the new cluster fire on from the watermarks by each task's misfire
policy after the gap."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from raftsched.backup import read_backup
from raftsched.client import Client
from raftsched.fsm.state import SchedulerState
from raftsched.model import CronTrigger, Misfire, Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import now_ms, wait_time_passed

pytestmark = pytest.mark.integration

CONFIG = (
    "[scheduler]\nlease_ms = 1500\nheartbeat_ms = 300\nretry_backoff_ms = 200\nkill_grace_ms = 1000\n"
    "misfire_grace_seconds = 1\n"
)
POLICIES = {"skip": Misfire.SKIP, "all": Misfire.ALL, "latest": Misfire.LATEST}
S = 1000


def task(name: str) -> TaskSpec:
    return TaskSpec(
        name, CronTrigger("* * * * * *"), command="true", overlap=Overlap.ALLOW, misfire=POLICIES[name]
    )


def workflow() -> pb.WorkflowSpec:
    spec = pb.WorkflowSpec(name="pipeline", params_json='{"region": "eu"}')
    spec.tasks.add(name="extract", command="echo extract {{ params.region }}")
    spec.tasks.add(name="load", command="true", depends_on=[pb.Dependency(task="extract")])
    return spec


def executor(cluster: LocalCluster, base: Path, name: str) -> subprocess.Popen[bytes]:
    return cluster.start_executor(name, 4, base / f"{name}-data", cluster.log_dir / f"{name}.log")


def stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        proc.kill()
        proc.wait(timeout=10)


def records(client: Client, name: str) -> list[tuple[int, int, int, int, str]]:
    return [
        (f.nominal_ms, f.outcome, f.through_ms, f.count, f.run_id)
        for f in client.fire_accounting(name, limit=0)
    ]


def backed_up_tasks(path: Path) -> dict[str, logpb.TaskRecord]:
    """The task records the backup holds, as a node loads them (since state format 3 a task's
    counters, the watermark among them, are partly in per-command records, not its stored
    TaskRecord)."""
    snap = read_backup(path).snapshot
    store = MemoryStore()
    store.replace_all(iter([(e.key, e.value) for e in snap.entries]), 0)
    state = SchedulerState.load(store)
    return {name: st.record() for name, st in state.tasks.items()}


def test_a_backup_of_a_busy_cluster_restores_into_a_new_one_that_fires_on_by_policy(
    make_cluster: ClusterFactory, tmp_path: Path
) -> None:
    old = make_cluster(extra_config=CONFIG, name="old")
    old_leader = old.wait_for_leader(60)
    ex_old = executor(old, tmp_path, "ex1")
    try:
        with Client(old.targets()) as client:
            for name in POLICIES:
                client.add_task(task(name))
            client.apply_workflow(workflow())
            run = client.start_workflow_run("pipeline", logical_ms=1_780_000_000_000)
            assert client.wait_workflow_run(run.run_id, 60).state == pb.WORKFLOW_SUCCESS
            wait_until(
                lambda: all(
                    sum(r.state == pb.SUCCEEDED for r in client.runs(name)) >= 3 for name in POLICIES
                ),
                60,
                0.2,
                "three runs of each task succeeded on the old cluster",
            )
            # Back up from a follower, with the CLI, while it keeps firing.
            follower = next(n for n in ("n1", "n2", "n3") if n != old_leader)
            backup = tmp_path / "cluster.rsb"
            done = subprocess.run(
                [
                    sys.executable,
                    "-m",
                    "raftsched.cli",
                    "--cluster",
                    old.grpc_of(follower),
                    "backup",
                    str(backup),
                ],
                capture_output=True,
                text=True,
                timeout=60,
                check=False,
            )
            assert done.returncode == 0, done.stderr
            assert done.stdout.startswith(f"backup {backup}: ") and f"on {follower}" in done.stdout
            backed_up_at = now_ms()
            saved = backed_up_tasks(backup)
            assert sorted(saved) == sorted([*POLICIES, "pipeline#extract", "pipeline#load"])
            definitions = {
                name: (client.get_task(name).spec, client.get_task(name).version) for name in POLICIES
            }
            old_wf = client.get_workflow("pipeline")
            old_records = {name: records(client, name) for name in POLICIES}
    finally:
        stop(ex_old)
        old.stop()
    marks = {name: saved[name].watermark_ms for name in POLICIES}
    for name, mark in marks.items():
        # The backup's watermark is one the old cluster had reached, and its definitions are the same.
        # (A watermark covers every nominal time <= it; it need not be a nominal time itself.)
        last_due = mark - mark % S
        assert any(r[0] <= last_due <= max(r[0], r[2]) for r in old_records[name]), (name, mark)
        assert (saved[name].spec, saved[name].version) == definitions[name]

    # A gap: the new cluster starts a few seconds after the backup.
    wait_time_passed(backed_up_at + 4 * S)
    new = make_cluster(extra_config=CONFIG, name="new", start=False)
    assert {n.grpc for n in new.config.nodes}.isdisjoint({n.grpc for n in old.config.nodes})
    new.start(extra_args=["--restore", str(backup)])
    new.wait_for_leader(60)
    started_at = now_ms()
    ex_new = executor(new, tmp_path / "new", "ex1")  # the same name, a fresh execution log
    try:
        with Client(new.targets()) as client:
            for name in POLICIES:
                rec = client.get_task(name)
                assert (rec.spec, rec.version) == definitions[name]
            wf = client.get_workflow("pipeline")
            assert (wf.spec, wf.version) == (old_wf.spec, old_wf.version)
            assert client.get_workflow_run(run.run_id).state == pb.WORKFLOW_SUCCESS
            wait_until(
                lambda: all(client.get_task(name).watermark_ms >= started_at + 3 * S for name in POLICIES),
                60,
                0.2,
                "the new cluster accounts fires past its start",
            )
            for name in POLICIES:
                mine = records(client, name)
                mark = marks[name]
                # Everything accounted up to the backup's watermark is exactly as it was.
                assert [r for r in mine if r[0] <= mark] == [r for r in old_records[name] if r[0] <= mark]
                after = sorted(r for r in mine if r[0] > mark)
                # Every second after the watermark is accounted exactly once: no gap, no double.
                covered = [n for r in after for n in range(r[0], max(r[0], r[2]) + 1, S)]
                next_due = mark - mark % S + S
                assert covered == list(range(next_due, covered[-1] + S, S)), name
                assert sum(r[3] for r in after) == len(covered)
                first = after[0]
                if name == "skip":
                    # The gap is accounted as skipped; nothing in it ran.
                    assert first[1] == pb.SKIPPED_MISFIRE and first[2] >= next_due + 2 * S, after[:3]
                elif name == "all":
                    # Every missed fire runs, each its own run.
                    gap = [r for r in after if r[0] <= backed_up_at + 4 * S]
                    assert gap and all(r[1] == pb.FIRED and r[3] == 1 and r[4] for r in gap), gap
                else:
                    # The missed fires coalesce into the newest one, which runs.
                    assert first[1] == pb.COALESCED and first[2] >= next_due + S, after[:3]
                    assert after[1][1] == pb.FIRED and after[1][0] == first[2] + S
            wait_until(
                lambda: all(
                    any(r.state == pb.SUCCEEDED and r.nominal_ms > marks[name] for r in client.runs(name))
                    for name in POLICIES
                ),
                60,
                0.2,
                "runs after the watermark succeed on the new cluster's executor",
            )
            status = client.cluster_status()
            assert all(n.status is not None for n in status.nodes)
        new.chains_agree()
    finally:
        stop(ex_new)
