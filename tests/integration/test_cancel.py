"""Cancel and the reaper with real processes (issue 29 §1, §9), one 3-node cluster for the module:
a bulk cancel through the CLI (dry run, then for real); an executor SIGKILLed while it runs
``sleep 4711`` leaves no orphan; a cancel committed just before the leader is SIGKILLed is
carried out by the next leader (the command's process group is gone, the run ends cancelled)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.testing.cluster import wait_until
from raftsched.v1 import raftsched_pb2 as pb
from tests.integration.helpers import Fleet

pytestmark = pytest.mark.integration


@pytest.fixture(scope="module")
def fleet(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Fleet]:
    f = Fleet(tmp_path_factory.mktemp("cancel"))
    try:
        f.cluster.start()
        f.cluster.wait_for_leader(60)
        yield f
    finally:
        f.stop()


def _gone(pid: int) -> bool:
    """Not running: no such process, or a zombie not yet reaped by its new parent."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        status = Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False
    return any(line.startswith("State:") and "Z" in line.split()[1] for line in status.splitlines())


def _pids(fleet: Fleet, run_id: str) -> list[int]:
    """The shell and sleep pids the task's command wrote (``<exec id> <shell> <sleep>``)."""
    return [int(x[1]) for x in fleet.lines() if x[0].startswith(run_id)] + [
        int(x[2]) for x in fleet.lines() if x[0].startswith(run_id)
    ]


def _hang(fleet: Fleet, name: str) -> TaskSpec:
    # The shell stays the group leader with a child, as a real job script would.
    command = f'sleep 4711 & echo "$RAFTSCHED_EXECUTION_ID $$ $!" >> {fleet.marker}; wait'
    return TaskSpec(name, ManualTrigger(), command=command, namespace="ops", owner="oncall")


def _cli(fleet: Fleet, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "raftsched.cli", "--cluster", ",".join(fleet.cluster.targets()), *args],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "PYTHONPATH": os.pathsep.join(sys.path)},
    )


def _kill_all(pids: list[int]) -> None:
    for pid in pids:
        if not _gone(pid):
            os.kill(pid, signal.SIGKILL)


def test_a_bulk_cancel_lists_with_dry_run_then_cancels_and_stops_the_commands(fleet: Fleet) -> None:
    fleet.start_executor("ex1", 4, "--kill-grace", "2s")
    with Client(fleet.cluster.targets()) as client:
        wait_until(fleet.all_registered, 30, what="ex1 registered")
        client.add_task(_hang(fleet, "bulk-a"))
        client.add_task(_hang(fleet, "bulk-b"))
        runs = [client.trigger("bulk-a").run_id, client.trigger("bulk-b").run_id]
        wait_until(lambda: all(len(_pids(fleet, r)) == 2 for r in runs), 30, what="both commands started")
        pids = [p for r in runs for p in _pids(fleet, r)]
        try:
            listed = _cli(fleet, "runs", "cancel", "--namespace", "ops", "--dry-run", "--json")
            assert listed.returncode == 0, listed.stderr
            assert json.loads(listed.stdout) == {"dry_run": True, "run_ids": sorted(runs)}
            assert all(client.get_run(r).state == pb.RUNNING for r in runs)  # a dry run changes nothing
            done = _cli(
                fleet, "runs", "cancel", "--owner", "oncall", "--state", "running", "--reason", "drill"
            )
            assert done.returncode == 0, done.stderr
            assert done.stdout.splitlines() == ["cancelled 2 run(s)", *sorted(runs)]
            wait_until(lambda: all(_gone(p) for p in pids), 20, what="the commands' processes ended")
            for run_id in runs:
                run = client.get_run(run_id)
                assert run.state == pb.CANCELLED
                assert any(
                    e.event == "cancel_requested" and e.reason == "by anonymous: drill" for e in run.timeline
                )
            again = _cli(fleet, "runs", "cancel", "--task", "bulk-a", "--json")
            assert json.loads(again.stdout) == {"dry_run": False, "run_ids": []}  # nothing left to cancel
            alerts = [a.alert.kind for a in client.alerts()]
            assert alerts.count("run_cancelled") == 2 and "run_failed" not in alerts
        finally:
            _kill_all(pids)


def test_an_executor_killed_with_sigkill_leaves_no_command_behind(fleet: Fleet) -> None:
    with Client(fleet.cluster.targets()) as client:
        client.add_task(_hang(fleet, "orphan"))
        run_id = client.trigger("orphan").run_id
        wait_until(lambda: len(_pids(fleet, run_id)) == 2, 30, what="the command started")
        pids = _pids(fleet, run_id)
        try:
            assert not any(_gone(p) for p in pids)
            fleet.kill_executor("ex1")
            # The reaper's grace is the executor's --kill-grace (2 s): SIGTERM ends sleep at once.
            wait_until(lambda: all(_gone(p) for p in pids), 30, 0.05, "the command and its child ended")
        finally:
            _kill_all(pids)
        client.cancel_run(run_id, "clean up")  # its lease would expire and it would run again


def test_a_cancel_committed_before_the_leader_dies_is_carried_out_by_the_next_leader(fleet: Fleet) -> None:
    fleet.start_executor("ex2", 4, "--kill-grace", "2s")
    ex2 = fleet.executors["ex2"]
    with Client(fleet.cluster.targets()) as client:
        wait_until(fleet.all_registered, 30, what="ex2 registered")
        client.add_task(_hang(fleet, "failover"))
        run_id = client.trigger("failover").run_id
        wait_until(lambda: len(_pids(fleet, run_id)) == 2, 30, what="the command started")
        pids = _pids(fleet, run_id)
        leader = fleet.cluster.wait_for_leader(10)
        try:
            # The executor is paused, so the leader's cancel cannot be carried out before it dies.
            ex2.send_signal(signal.SIGSTOP)
            run = client.cancel_run(run_id, "failover drill")
            assert run.state == pb.CANCELLED  # committed
            fleet.cluster.kill(leader, signal.SIGKILL)
            survivors = [n for n in fleet.cluster.alive() if n != leader]
            fleet.cluster.wait_for_leader(30, among=survivors)
            ex2.send_signal(signal.SIGCONT)
            wait_until(lambda: all(_gone(p) for p in pids), 30, 0.1, "the cancelled command ended")
            final = client.get_run(run_id)
            assert final.state == pb.CANCELLED and final.shards[0].state == pb.CANCELLED
            assert ex2.poll() is None  # the executor itself runs on
        finally:
            if ex2.poll() is None:
                ex2.send_signal(signal.SIGCONT)
            _kill_all(pids)
