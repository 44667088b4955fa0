"""Pools end to end (issue 29 §4): a real 3-node cluster, two real executor processes running
shell commands, the CLI and the SDK. Twenty tasks of three owners name a pool of 2; every attempt
writes its start and end time to a file; the leader is SIGKILLed while they run. At most two
attempts ever run at once, the others wait with the pool's reason (``explain`` shows it), and
every task still runs exactly once."""

from __future__ import annotations

import json
import signal
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from raftsched.cli import main
from raftsched.client import Client
from raftsched.errors import Conflict, InvalidSpec
from raftsched.model import OnceTrigger, TaskSpec
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb

pytestmark = pytest.mark.integration

Cli = Callable[..., tuple[int, str, str]]
TASKS = 20
SLOTS = 2


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _spans(out: Path) -> list[tuple[int, int]]:
    """``(start ns, end ns)`` of every finished attempt (one file per attempt: its pid)."""
    spans = []
    for f in out.glob("*.span"):
        parts = f.read_text().split()
        if len(parts) == 2:
            spans.append((int(parts[0]), int(parts[1])))
    return spans


def _max_concurrency(spans: list[tuple[int, int]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])  # an end sorts first
    best = cur = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def test_a_pool_of_two_under_twenty_tasks_holds_across_a_leader_sigkill(
    cluster: LocalCluster, cli: Cli, client: Client, tmp_path: Path
) -> None:
    cluster.wait_for_leader()
    at = ["--cluster", ",".join(cluster.targets())]

    def ok(*argv: str) -> str:
        code, out, err = cli(*at, *argv)
        assert code == 0, f"raftsched {' '.join(argv)} exited {code}: {err}"
        return out

    assert ok("pool", "set", "warehouse", "--slots", "2").strip() == "pool warehouse: 2 slots"
    assert json.loads(ok("pool", "set", "warehouse", "--slots", str(SLOTS), "--json"))["slots"] == SLOTS
    code, _, err = cli(*at, "pool", "set", "warehouse", "--slots", "0")
    assert code == 2 and "--slots must be at least 1" in err
    with pytest.raises(InvalidSpec, match=r"pool\.slots"):
        client.set_pool("warehouse", 2_000_000)

    out = tmp_path / "spans"
    out.mkdir()
    # The start time is taken before the sleep and the end time after it, both by the attempt
    # itself, so a span covers at least the time the attempt ran.
    command = (
        f'f={out}/$$.tmp; s=$(date +%s%N); sleep 1; echo "$s $(date +%s%N)" > $f; mv $f ${{f%.tmp}}.span'
    )
    due = int(time.time() * 1000) + 4_000
    specs = [
        TaskSpec(
            f"load{i:02}",
            OnceTrigger(due),
            command=command,
            owner=f"team{i % 3}",
            priority=i % 10,
            pool="warehouse",
        )
        for i in range(TASKS)
    ]
    assert all(r.ok for r in client.add_tasks(specs))
    assert "warehouse" in ok("task", "show", "load00")
    executors = [cluster.start_executor(name, slots=8) for name in ("ex1", "ex2")]
    try:
        wait_until(lambda: len(_spans(out)) >= 4, 60, 0.1, "some attempts finished")
        pools = json.loads(ok("pool", "list", "--json"))
        assert [(p["pool"]["name"], p["pool"]["slots"]) for p in pools] == [("warehouse", SLOTS)]
        assert pools[0]["used"] <= SLOTS
        waiting = [
            sh.waiting
            for s in specs
            for r in client.runs(s.name)
            for sh in r.shards
            if sh.state == pb.PENDING and sh.waiting
        ]
        assert waiting and set(waiting) == {"pool warehouse: 2 slots"}
        pending = next(s.name for s in specs for r in client.runs(s.name) if r.state == pb.PENDING)
        verdict = client.explain(pending, due).verdict
        assert "waiting: pool warehouse: 2 slots" in verdict, verdict
        assert "WAITING" in ok("pool", "list") and "warehouse" in ok("pool", "list")

        old = cluster.wait_for_leader()
        cluster.kill(old, signal.SIGKILL)
        survivors = [n for n in cluster.alive()]
        cluster.wait_for_leader(60, among=survivors)
        wait_until(lambda: len(_spans(out)) >= TASKS, 120, 0.2, "every task ran")
    finally:
        for ex in executors:
            ex.kill()
            ex.wait(10)
    spans = _spans(out)
    assert len(spans) == TASKS, "each task ran once"
    assert _max_concurrency(spans) == SLOTS
    with pytest.raises(Conflict, match="pool 'warehouse' is used by task load00, task load01"):
        client.delete_pool("warehouse")
