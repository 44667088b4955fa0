"""The admin CLI end to end against a real 3-node cluster, run in-process (``raftsched.cli.main``).

Every command is pointed at a *follower* with ``--cluster``: writes must follow the leader hint,
reads are answered by the follower from its own state (so each read waits until the follower
has applied the preceding write).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from raftsched.cli import main
from raftsched.testing.cluster import LocalCluster, wait_until
from tests.integration.helpers import NODES

pytestmark = pytest.mark.integration

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()  # drop anything printed before
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _settled(cluster: LocalCluster, leader: str, follower: str) -> None:
    """Wait until ``follower`` has applied everything ``leader`` committed so far."""
    index = cluster.status(leader).commit_index
    wait_until(lambda: cluster.status(follower).applied_index >= index, 10, 0.02, f"{follower} at {index}")


def test_cli_against_a_real_cluster(cluster: LocalCluster, cli: Cli) -> None:
    leader = cluster.wait_for_leader()
    follower = next(n for n in NODES if n != leader)
    at = ["--cluster", cluster.grpc_of(follower)]

    def ok(*argv: str) -> str:
        code, out, err = cli(*at, *argv)
        assert code == 0, f"raftsched {' '.join(argv)} exited {code}: {err}"
        assert err == ""
        return out

    def ok_json(*argv: str) -> Any:
        return json.loads(ok(*argv, "--json"))

    out = ok("task", "add", "nightly", "--cron", "0 2 * * *", "--tz", "Europe/Berlin", "--command", "echo hi")
    assert "added task nightly (version 1)" in out
    _settled(cluster, leader, follower)

    listed = {t["spec"]["name"]: t for t in ok_json("task", "list")}
    nightly = listed["nightly"]
    assert nightly["version"] == 1 and nightly["enabled"] is True
    assert nightly["spec"]["trigger"]["cron"] == {"expr": "0 2 * * *", "timezone": "Europe/Berlin"}
    assert nightly["spec"]["command"] == "echo hi"
    next_fire = int(nightly["next_fire_ms"])
    assert next_fire > 0

    shown = ok("task", "show", "nightly")
    assert "cron '0 2 * * *' Europe/Berlin" in shown and "echo hi" in shown
    assert ok_json("task", "show", "nightly")["spec"]["overlap"] == "skip"

    out = ok("task", "update", "nightly", "--overlap", "allow")
    assert "version 1 -> 2" in out
    _settled(cluster, leader, follower)
    updated = ok_json("task", "show", "nightly")
    assert updated["version"] == 2 and updated["spec"]["overlap"] == "allow"
    assert updated["spec"]["trigger"]["cron"]["timezone"] == "Europe/Berlin"  # kept

    assert "disabled task nightly" in ok("task", "disable", "nightly")
    _settled(cluster, leader, follower)
    assert ok_json("task", "show", "nightly")["enabled"] is False
    assert "enabled task nightly" in ok("task", "enable", "nightly")
    _settled(cluster, leader, follower)
    assert ok_json("task", "show", "nightly")["enabled"] is True

    out = ok("trigger", "nightly")
    assert out.startswith("triggered nightly: run nightly@")
    _settled(cluster, leader, follower)
    runs = ok_json("runs", "nightly")
    assert len(runs) == 1 and runs[0]["manual"] is True and runs[0]["task"] == "nightly"
    assert runs[0]["run_id"] in out

    explained = ok("explain", "nightly", "--at", str(next_fire))
    assert explained.startswith("nightly at ") and "has not reached" in explained
    verdict = ok_json("explain", "nightly", "--at", "2000-01-01T00:00:00Z")["verdict"]
    assert "did not exist" in verdict

    status = json.loads(_run_ok(cli, "--config", str(cluster.config_path), "status", "--json"))
    nodes = [n["status"] for n in status["nodes"]]
    assert len(nodes) == 3 and all(n["reachable"] for n in status["nodes"])
    assert sorted(n["node_id"] for n in nodes) == list(NODES)
    assert [n["role"] for n in nodes].count("leader") == 1
    assert len({n["term"] for n in nodes}) == 1 and status["term"] == nodes[0]["term"]
    assert status["leader_id"] == leader
    # Every node reports its state digest (a real node computes it only when asked).
    assert all(len(n["state_digest"]) == 64 for n in nodes), nodes
    table = _run_ok(cli, "status", "--config", str(cluster.config_path)).splitlines()
    assert all(row.split()[6] != "-" for row in table[2:5]), table

    code, out, err = cli(*at, "task", "add", "broken", "--cron", "61 * * * *", "--command", "true")
    assert code == 2, (code, out, err)
    lines = err.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("raftsched: error: "), err
    assert "trigger.cron" in lines[0] or "--cron" in lines[0], err

    code, out, err = cli(*at, "task", "show", "missing")
    assert code == 1 and "missing" in err and len(err.strip().splitlines()) == 1, (code, out, err)

    assert "deleted task nightly" in ok("task", "delete", "nightly")
    _settled(cluster, leader, follower)
    code, _, err = cli(*at, "task", "show", "nightly")
    assert code == 1, err
    assert ok_json("task", "list") == []


def _run_ok(cli: Cli, *argv: str) -> str:
    code, out, err = cli(*argv)
    assert code == 0, f"raftsched {' '.join(argv)} exited {code}: {err}"
    return out
