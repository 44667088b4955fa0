"""Quotas and locks end to end: the CLI and the SDK against a real 3-node cluster with a real
executor process running shell commands (``raftsched quota``, ``raftsched locks``, ``--lock``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

from raftsched.cli import main
from raftsched.client import Client
from raftsched.errors import InvalidSpec, NotFound
from raftsched.testing.cluster import LocalCluster, wait_until

pytestmark = pytest.mark.integration

Cli = Callable[..., tuple[int, str, str]]


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def test_quota_and_lock_commands_against_a_real_cluster(
    cluster: LocalCluster, cli: Cli, client: Client
) -> None:
    cluster.wait_for_leader()
    at = ["--cluster", ",".join(cluster.targets())]

    def ok(*argv: str) -> str:
        code, out, err = cli(*at, *argv)
        assert code == 0, f"raftsched {' '.join(argv)} exited {code}: {err}"
        return out

    def ok_json(*argv: str) -> Any:
        return json.loads(ok(*argv, "--json"))

    out = ok("quota", "set", "--owner", "team-a", "--rate", "50/s", "--burst", "100", "--max-running", "1")
    assert out.strip() == "quota owner team-a: rate 50/s, burst 100; max-running 1"
    code, _, err = cli(*at, "quota", "set", "--owner", "team-a", "--rate", "fast")
    assert code == 2 and "rate: 'fast' is not a rate" in err
    code, _, err = cli(*at, "quota", "set", "--namespace", "ns")
    assert code == 2 and "give --rate, --max-running or both" in err
    listed = ok_json("quota", "list")
    assert [(q["kind"], q["name"], q["burst"], q["max_running"]) for q in listed] == [
        ("owner", "team-a", 100, 1)
    ]
    assert "team-a" in ok("quota", "list") and "50/s" in ok("quota", "list")

    out = ok(
        "task", "add", "hold", "--manual", "--command", "sleep 30", "--owner", "team-a", "--lock", "db:shared"
    )
    assert "db (shared)" in out
    ok("task", "add", "writer", "--manual", "--command", "true", "--lock", "db")
    ok("task", "add", "second", "--manual", "--command", "true", "--owner", "team-a")
    assert ok_json("task", "show", "writer")["spec"]["locks"] == [{"name": "db", "shared": False}]
    executor = cluster.start_executor("ex1", slots=4)
    try:
        ok("trigger", "hold")
        wait_until(lambda: any(lk.holders for lk in client.list_locks()), 30, 0.1, "the shared lock held")
        ok("trigger", "writer")
        ok("trigger", "second")

        def waiting() -> dict[str, str]:
            return {
                r.task: sh.waiting
                for name in ("writer", "second")
                for r in client.runs(name)
                for sh in r.shards
                if sh.waiting
            }

        wait_until(lambda: len(waiting()) == 2, 30, 0.1, "both waiting with a reason")
        assert waiting() == {
            "writer": "lock db: held",
            "second": "quota owner=team-a: rate 50/s, burst 100, max-running 1",
        }
        locks = ok_json("locks")
        assert [lk["name"] for lk in locks] == ["db"]
        assert locks[0]["holders"][0]["task"] == "hold" and locks[0]["holders"][0]["shared"] is True
        assert locks[0]["waiters"][0]["task"] == "writer"
        assert "lock db: held" in ok("locks")
        assert "quota owner=team-a" in ok("runs", "second")
        # Deleting the quota lets the waiting work start; the lock still holds the writer back.
        assert ok("quota", "delete", "--owner", "team-a").strip() == "deleted quota owner team-a"
        wait_until(lambda: any(r.state == 3 for r in client.runs("second")), 30, 0.1, "second succeeded")
        assert all(r.state != 3 for r in client.runs("writer"))
    finally:
        executor.kill()  # SIGTERM would drain: wait for the 30 s "hold" attempt
        executor.wait(10)
    with pytest.raises(NotFound):
        client.delete_quota(owner="team-a")
    with pytest.raises(InvalidSpec, match="exactly one of owner or namespace"):
        client.set_quota(owner="a", namespace="b", max_running=1)
    q = client.set_quota(namespace="default", rate="300/m")
    assert (q.kind, q.rate_milli, q.burst) == ("namespace", 5000, 5)
    assert [x.name for x in client.list_quotas()] == ["default"]
