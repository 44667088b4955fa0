"""An executor's execution log stays flat under a steady load with a short ``--execution-log-keep``,
and pruning never lets an execution run twice (real node and executor processes)."""

from __future__ import annotations

import time
from collections import Counter
from pathlib import Path

import pytest

from raftsched.client import Client
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.testing.cluster import wait_until
from tests.integration.helpers import Fleet

pytestmark = pytest.mark.integration

TASKS, SHARDS = 12, 4  # 48 attempts a second over two executors
KEEP_S = 2
# The executor prunes every max(0.5 s, keep / 4): the warm-up is three keep windows and a dozen
# prune rounds; the measured window at 48 attempts a second would grow an unpruned log by
# ~170 KB per executor, well past the 64 KiB of slack allowed.
WARM_UP_S, WINDOW_S = 6, 16


def data_file(fleet: Fleet, name: str) -> Path:
    return fleet.base / name / "executions" / "data.mdb"


def test_a_short_keep_holds_the_execution_log_flat_and_runs_nothing_twice(tmp_path: Path) -> None:
    fleet = Fleet(tmp_path)
    names = ("ex1", "ex2")
    try:
        fleet.cluster.start()
        fleet.cluster.wait_for_leader(60)
        for name in names:
            fleet.start_executor(name, 32, "--execution-log-keep", f"{KEEP_S}s")
        mark = f'echo "$RAFTSCHED_EXECUTION_ID" >> {fleet.marker}'
        with Client(fleet.cluster.targets(), timeout=10, retries=20) as client:
            for i in range(TASKS):
                client.add_task(
                    TaskSpec(
                        f"load-{i}",
                        CronTrigger("* * * * * *"),
                        command=mark,
                        shards=SHARDS,
                        overlap=Overlap.ALLOW,
                    )
                )
        wait_until(lambda: all(data_file(fleet, n).exists() for n in names), 60, 0.2, "both execution logs")
        # Warm up past the keep window and a few prune rounds: the log reaches its steady size.
        started = time.monotonic()
        wait_until(lambda: time.monotonic() - started > WARM_UP_S, 30, 0.5, "the warm-up")
        done_before = len(fleet.lines())
        sizes_before = {n: data_file(fleet, n).stat().st_size for n in names}
        wait_until(lambda: time.monotonic() - started > WARM_UP_S + WINDOW_S, 60, 0.5, "the measured window")
        done_after = len(fleet.lines())
        sizes_after = {n: data_file(fleet, n).stat().st_size for n in names}
        for name, proc in fleet.executors.items():
            assert proc.poll() is None, f"{name} exited with {proc.returncode}"
    finally:
        fleet.stop()
    ran = done_after - done_before
    assert ran > 300, f"only {ran} attempts in the measured {WINDOW_S} s: the load did not run"
    # Unpruned, each attempt adds ~450 B to the file (issue 35: 12 -> 142 MB in 10 minutes), so
    # the window would add ~ran * 450 / 2 per executor. Flat: at most a few pages of slack.
    for name in names:
        grown = sizes_after[name] - sizes_before[name]
        assert grown <= 64 * 1024, (name, sizes_before[name], sizes_after[name], ran)
    # Pruned for real: the logs hold about a keep window of entries, not everything ever run.
    held = 0
    for name in names:
        with LmdbExecutionLog(tmp_path / name) as log:
            held += len(log)
    total = len(fleet.lines())
    assert held < total / 4, (held, total)
    # And no execution ran twice.
    ids = Counter(line[0] for line in fleet.lines())
    assert ids and max(ids.values()) == 1, [e for e, n in ids.items() if n > 1][:5]
