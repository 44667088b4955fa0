"""Upgrade safety with real processes: nodes of a "newer build" (this code with its command
format raised to 4, and task disables stamped with it) lead a cluster in which one node still
runs the current build. That node refuses the newer command instead of applying it: it logs one
critical line, leaves the cluster and exits 4, while the others go on. "Upgraded" and restarted
on its data dir, it replays the log from there and agrees with the others."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from raftsched import codec
from raftsched.client import Client
from raftsched.model import CronTrigger, ManualTrigger, Overlap, TaskSpec
from raftsched.testing.cluster import LocalCluster, wait_until
from tests.integration.conftest import ClusterFactory
from tests.integration.helpers import set_aside_known_noise

pytestmark = pytest.mark.integration

NEWER_BUILD = """
import runpy
from raftsched import codec
codec.COMMAND_FORMAT = codec.COMMAND_FORMAT + 1
codec._BODY_FORMAT["set_enabled"] = codec.COMMAND_FORMAT
runpy.run_module("raftsched.cli.node", run_name="__main__")
"""


def start_build(cluster: LocalCluster, node_id: str, script: Path) -> None:
    """Start ``node_id`` from ``script``: this build with its formats changed (newer or older)."""
    log = open(cluster.log_dir / f"{node_id}.log", "ab")  # noqa: SIM115 - owned by the child
    cluster.procs[node_id] = subprocess.Popen(
        [sys.executable, str(script), "--config", str(cluster.config_path), "--node-id", node_id],
        stdout=log,
        stderr=subprocess.STDOUT,
    )
    log.close()


def test_a_node_refuses_a_newer_command_exits_4_and_catches_up_once_upgraded(
    make_cluster: ClusterFactory, tmp_path: Path
) -> None:
    script = tmp_path / "newer_node.py"
    script.write_text(NEWER_BUILD)
    cluster = make_cluster(start=False)
    start_build(cluster, "n1", script)
    start_build(cluster, "n2", script)
    leader = cluster.wait_for_leader(60, among=["n1", "n2"])
    cluster.start("n3")  # the current build
    with Client(cluster.targets()) as client:
        wait_until(lambda: cluster.status("n3").applied_index >= cluster.status(leader).commit_index, 30, 0.1)
        client.add_task(TaskSpec("old-format", ManualTrigger(), command="true"))  # format 1: all apply
        wait_until(lambda: cluster.status("n3").tasks == 1, 30, 0.1, "n3 applies a format-1 command")
        client.disable_task("old-format")  # stamped format 6 by the newer leader
        assert cluster.procs["n3"].wait(timeout=30) == 4
        log = (cluster.log_dir / "n3.log").read_text()
        critical = [line for line in log.splitlines() if " CRITICAL " in line]
        assert len(critical) == 1, critical
        newest = codec.COMMAND_FORMAT
        assert f"command format {newest + 1} is newer than this build applies ({newest})" in critical[0]
        assert "Upgrade raftsched on this node and restart it" in critical[0]
        # That CRITICAL line is this test's point: keep the log of the refusing run out of the
        # suite's check that node logs hold no errors (the upgraded run's log is checked).
        (cluster.log_dir / "n3.log").rename(tmp_path / "n3-refused.log")
        # The others go on: a majority of the newer build.
        client.add_task(TaskSpec("after", ManualTrigger(), command="true"))
        assert sorted(t.spec.name for t in client.list_tasks()) == ["after", "old-format"]
        # Upgraded: n3 restarts on its data dir with the newer build and catches up.
        start_build(cluster, "n3", script)
        wait_until(lambda: cluster.status("n3").tasks == 2, 60, 0.2, "n3 replays and catches up")
        cluster.chains_agree()


OLDER_BUILD = """
import runpy
from raftsched import codec
codec.COMMAND_FORMAT = codec.COLUMNS_FORMAT - 1  # a build from before the columnar hot path
runpy.run_module("raftsched.cli.node", run_name="__main__")
"""


def with_older_n3(make_cluster: ClusterFactory, script: Path, build: str) -> LocalCluster:
    """A cluster whose n1 and n2 run this build and n3 the older ``build`` (written to ``script``)."""
    script.write_text(build)
    cluster = make_cluster(start=False)
    cluster.start("n1")
    cluster.start("n2")
    start_build(cluster, "n3", script)
    return cluster


def upgrade(cluster: LocalCluster, node_id: str, old_log: Path) -> None:
    """Stop ``node_id`` (an older build) cleanly, keep its log at ``old_log``, start it on this one."""
    cluster.procs[node_id].terminate()
    assert cluster.procs[node_id].wait(timeout=30) == 0
    (cluster.log_dir / f"{node_id}.log").rename(old_log)
    cluster.start(node_id)


def _leader_logged(cluster: LocalCluster, text: str) -> bool:
    return any(
        text in log.read_text(errors="replace") for log in cluster.log_dir.glob("n*.log") if log.exists()
    )


def test_the_leader_builds_columns_only_once_every_member_reports_their_format(
    make_cluster: ClusterFactory, tmp_path: Path
) -> None:
    """With one node of a build before the columns, the leader keeps today's bodies (that node
    would halt on a columnar entry: it keeps applying); once it runs this build, the leader
    hears its format and proposes the columns, and every node applies them."""
    cluster = with_older_n3(make_cluster, tmp_path / "older_node.py", OLDER_BUILD)
    leader = cluster.wait_for_leader(60)
    every_second = CronTrigger("* * * * * *")
    with Client(cluster.targets()) as client:
        for i in range(3):
            client.add_task(TaskSpec(f"hot{i}", every_second, command="true", overlap=Overlap.ALLOW))
        # Several polls of the members' formats (every 2 s) and fires of every second later...
        start = cluster.status(leader).commit_index
        wait_until(lambda: client.get_task("hot0").fires_total >= 6, 60, 0.2, "hot0 fired 6 times")
        wait_until(lambda: cluster.status("n3").applied_index >= start + 6, 30, 0.2, "n3 applies")
        # ...the older node still applies everything: no columnar entry was proposed.
        assert cluster.procs["n3"].poll() is None
        assert not _leader_logged(cluster, "proposing the columnar bodies")
        # n3 runs this build now: the leader hears format 18 from every voter.
        upgrade(cluster, "n3", tmp_path / "n3-older.log")
        wait_until(
            lambda: _leader_logged(cluster, "proposing the columnar bodies"),
            60,
            0.2,
            "a leader proposing the columns once every voter reports their format",
        )
        fired = client.get_task("hot0").fires_total
        wait_until(lambda: client.get_task("hot0").fires_total >= fired + 4, 60, 0.2, "hot0 fires on")
    assert all(cluster.procs[n].poll() is None for n in ("n1", "n2", "n3"))
    cluster.chains_agree()
    set_aside_known_noise(cluster, tmp_path)  # (nodes started apart; the chains agree)


FORMAT_18_BUILD = """
import runpy
from raftsched import codec
codec.COMMAND_FORMAT = codec.PROMOTE_FORMAT - 1  # a build with the columns, before PromoteHotRuns
runpy.run_module("raftsched.cli.node", run_name="__main__")
"""


def test_promotions_are_recorded_only_once_every_member_reports_format_19(
    make_cluster: ClusterFactory, tmp_path: Path
) -> None:
    """With one node of a format-18 build the leader proposes the columns (every voter applies
    them) but no PromoteHotRuns (that node would halt on it): the stored state stays format 4 on
    every node and the older one keeps applying. Once it runs this build, the leader turns the
    record of hot promotions on and every replica reaches stored state format 5."""
    cluster = with_older_n3(make_cluster, tmp_path / "format18_node.py", FORMAT_18_BUILD)
    cluster.wait_for_leader(60)
    nodes = ("n1", "n2", "n3")
    with Client(cluster.targets()) as client:
        client.add_task(TaskSpec("hot0", CronTrigger("* * * * * *"), command="true", overlap=Overlap.ALLOW))
        gate = "proposing the columnar bodies"
        wait_until(lambda: _leader_logged(cluster, gate), 60, 0.2, "the columns' gate open")
        wait_until(lambda: client.get_task("hot0").fires_total >= 4, 60, 0.2, "hot0 fired on the hot path")
        assert {cluster.status(n).state_format for n in nodes} == {4}
        assert cluster.procs["n3"].poll() is None  # it applies everything proposed
        assert not _leader_logged(cluster, "turning the record of hot promotions on")
        # n3 runs this build now: every voter reports format 19.
        upgrade(cluster, "n3", tmp_path / "n3-format18.log")
        wait_until(
            lambda: _leader_logged(cluster, "turning the record of hot promotions on"),
            60,
            0.2,
            "the leader turning the record of hot promotions on once every voter reports format 19",
        )
        wait_until(
            lambda: {cluster.status(n).state_format for n in nodes} == {5}, 60, 0.2, "stored state format 5"
        )
        fired = client.get_task("hot0").fires_total
        wait_until(lambda: client.get_task("hot0").fires_total >= fired + 3, 60, 0.2, "hot0 fires on")
    assert all(cluster.procs[n].poll() is None for n in nodes)
    cluster.chains_agree()
    set_aside_known_noise(cluster, tmp_path)  # (nodes started apart; the chains agree)
