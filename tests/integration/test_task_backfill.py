"""Backfill for plain tasks end to end (issue 29 §6): a real one-node cluster, a real executor
process running shell commands, the CLI and the SDK. Each attempt writes its nominal time and its
start and end times; the backfill creates exactly the missing nominal times of the schedule, runs
at most its share of the slots at once, shows its progress, and ``--wait`` returns at the end."""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from raftsched.cli import main
from raftsched.client import Client
from raftsched.display import iso
from raftsched.errors import InvalidSpec, NotFound
from raftsched.model import CronTrigger, ManualTrigger, TaskSpec
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.timing.schedule import fires_in

pytestmark = pytest.mark.integration

Cli = Callable[..., tuple[int, str, str]]
MIN = 60_000


@pytest.fixture
def cli(capsys: pytest.CaptureFixture[str]) -> Cli:
    def run(*argv: str) -> tuple[int, str, str]:
        capsys.readouterr()
        code = main(list(argv))
        out, err = capsys.readouterr()
        return code, out, err

    return run


def _spans(path: Path) -> list[tuple[str, int, int]]:
    if not path.exists():
        return []
    rows = [line.split() for line in path.read_text().splitlines()]
    return [(r[0], int(r[1]), int(r[2])) for r in rows if len(r) == 3]


def _max_concurrency(spans: list[tuple[int, int]]) -> int:
    events = sorted([(s, 1) for s, _ in spans] + [(e, -1) for _, e in spans])
    best = cur = 0
    for _, d in events:
        cur += d
        best = max(best, cur)
    return best


def test_backfill_creates_the_missing_nominal_times_within_its_share_and_wait_returns_at_the_end(
    make_cluster: Callable[..., LocalCluster], cli: Cli, tmp_path: Path
) -> None:
    cluster = make_cluster(nodes=1)
    cluster.wait_for_leader()
    at = ["--cluster", ",".join(cluster.targets())]
    out = tmp_path / "spans"
    command = f's=$(date +%s%N); sleep 0.3; echo "$RAFTSCHED_NOMINAL_TIME $s $(date +%s%N)" >> {out}'
    now = int(time.time() * 1000)
    start, end = now - 60 * MIN, now - 10 * MIN  # before the task exists: no run there yet
    expected = fires_in(CronTrigger("*/5 * * * *"), start, end, 100)
    with Client(cluster.targets()) as client:
        client.add_task(TaskSpec("five", CronTrigger("*/5 * * * *"), command=command))
        client.add_task(TaskSpec("manual", ManualTrigger(), command="true"))
        executor = cluster.start_executor("ex1", slots=4)  # the backfill share: 30 % of 4 slots = 1
        try:
            # A part of the range first, then the whole range: the second creates only the rest.
            first = client.backfill_task("five", expected[2], expected[4])
            assert (first.runs_total, first.runs_skipped) == (3, 0)
            code, text, err = cli(*at, "backfill", "five", "--from", iso(start), "--to", iso(end), "--wait")
            assert code == 0, err
            total = len(expected) - 3
            assert "backfill five~t" in text and f"{total} run(s) of five" in text and "(3 skipped" in text
            assert f"{total}/{total} runs finished, 0 failed; finished" in text.splitlines()[-1]
            listed = json.loads(cli(*at, "backfills", "five", "--json")[1])
            assert [(b["runs_total"], b.get("runs_skipped", 0)) for b in listed] == [(total, 3), (3, 0)]
            backfill_runs = [r for r in client.runs("five", limit=1000) if r.backfill]
            assert sorted(r.nominal_ms for r in backfill_runs) == expected
            wait_until(lambda: client.get_backfill(first.backfill_id).finished_ms > 0, 60, 0.2, "first done")
            # Nothing to add any more: a finished backfill of no run.
            code, text, err = cli(*at, "backfill", "five", "--from", iso(start), "--to", iso(end), "--json")
            assert code == 0 and json.loads(text)["runs_skipped"] == len(expected)
            code, _, err = cli(*at, "backfill", "five", "--from", iso(end), "--to", iso(start))
            assert code == 2 and "before it starts" in err
            with pytest.raises(NotFound):
                client.backfill_task("nope", start, end)
            with pytest.raises(InvalidSpec, match="has no schedule"):
                client.backfill_task("manual", start, end)
        finally:
            executor.kill()
            executor.wait(10)
    spans = _spans(out)
    assert len(spans) == len(expected), "every attempt wrote its line"
    assert _max_concurrency([(s, e) for _, s, e in spans]) == 1, "at most the share (1 slot) at once"
