"""Retention of the executor's execution log: entries acknowledged before a cutoff are dropped in
bounded steps, over both stores; nothing running or unacknowledged is; a pruned LMDB log reuses
its freed pages instead of growing; the agent's and the CLI's ``execution_log_keep``."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import lmdb
import pytest

from raftsched.abc import ExecutionLog
from raftsched.cli.executor import keep_arg
from raftsched.errors import InvalidSpec
from raftsched.executor.agent import Executor
from raftsched.executor.dedupe import DedupeLog
from raftsched.executor.execlog_records import BeginOutcome, BeginStatus
from raftsched.executor.runners import AttemptResult
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.storage.memory import MemoryExecutionLog


@pytest.fixture(params=["memory", "lmdb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ExecutionLog]:
    opened: ExecutionLog = MemoryExecutionLog() if request.param == "memory" else LmdbExecutionLog(tmp_path)
    try:
        yield opened
    finally:
        opened.close()


def test_store_prunes_by_settle_time_oldest_first_in_bounded_steps(store: ExecutionLog) -> None:
    store.insert_many([(k, b"v") for k in "abcdefg"])
    store.settle(["c"], 100)
    store.settle(["a", "b"], 200)  # a and b settled together: insertion order between them
    store.settle(["d"], 300)
    store.settle(["c"], 999)  # settled already: keeps its first time
    store.update([("e", b"w", True)], 150)
    store.update([("f", b"w", True)], 250)
    store.update([("f", b"x", False)], 0)  # unsettled again: out of the time index
    assert store.prune_settled_before(99, 10) == []
    assert store.prune_settled_before(200, 2) == ["c", "e"]  # the step bound
    assert store.prune_settled_before(200, 10) == ["a", "b"]
    assert store.prune_settled_before(10**12, 10) == ["d"]  # f and g are unsettled: never pruned
    assert [k for k, _ in store.unsettled()] == ["f", "g"]
    assert len(store) == 2
    with pytest.raises(ValueError, match="limit"):
        store.prune_settled_before(0, 0)


def test_store_sizes_count_entries_and_bytes(store: ExecutionLog) -> None:
    assert store.sizes()[0] == 0
    store.insert_many([(f"k{i}", b"x" * 100) for i in range(50)])
    entries, size = store.sizes()
    assert entries == 50 and size >= 50 * 100


def test_a_log_from_before_settle_times_gets_them_at_open(tmp_path: Path) -> None:
    with LmdbExecutionLog(tmp_path) as log:
        log.insert_many([("old", b"v"), ("open", b"v")])
        log.settle(["old"], 1)
    # What a log written by the previous release looks like: no settle-time databases.
    env = lmdb.open(str(tmp_path / "executions"), max_dbs=5)
    with env.begin(write=True) as txn:
        txn.drop(env.open_db(b"settled_at", txn=txn), delete=True)
        txn.drop(env.open_db(b"settled", txn=txn), delete=True)
    env.close()
    with LmdbExecutionLog(tmp_path) as log:
        assert log.prune_settled_before(10**9, 10) == []  # indexed as settled now, not at 1
        assert log.prune_settled_before(2**62, 10) == ["old"]
        assert [k for k, _ in log.unsettled()] == ["open"]


def test_a_pruned_lmdb_log_reuses_its_freed_pages(tmp_path: Path) -> None:
    # LMDB never shrinks its file; flat means later writes go into the pages pruning freed.
    data = tmp_path / "executions" / "data.mdb"
    sizes = []
    with LmdbExecutionLog(tmp_path, sync=False) as log:
        for rnd in range(30):
            keys = [f"run-{rnd}-{i}@1764806400000/0/1" for i in range(2000)]
            log.insert_many([(k, b"x" * 300) for k in keys])
            log.settle(keys, rnd)
            while log.prune_settled_before(rnd - 2, 1000):  # keep this round and the last
                pass
            sizes.append(data.stat().st_size)
        assert len(log) == 2 * 2000
    # Unpruned, the last 20 rounds alone would add ~16 MB (40,000 entries of ~400 B); pruned, the
    # file stops growing after a few rounds but for a few pages of LMDB's free-list bookkeeping
    # (measured: 5.08 MB after 10 rounds, 5.12 MB after 150).
    assert sizes[-1] - sizes[9] <= 64 * 1024, sizes


def test_dedupe_log_prunes_acknowledged_entries_older_than_a_cutoff(tmp_path: Path) -> None:
    with DedupeLog.open(tmp_path, sync=False) as log:
        for eid in ("a/0/1", "b/0/1", "c/0/1", "d/0/1"):
            log.begin(eid)
        for eid in ("a/0/1", "b/0/1", "c/0/1"):
            log.finish(eid, AttemptResult(eid, True))
        log.acknowledge(["a/0/1"], at_ms=1_000)
        log.acknowledge(["b/0/1"], at_ms=5_000)
        assert log.prune_older_than(4_999) == 1  # a; b is younger, c pending, d running
        assert log.get("a/0/1") is None and log.begin("a/0/1") == BeginOutcome(BeginStatus.NEW)
        assert log.begin("b/0/1").status is BeginStatus.DONE
        assert [r.execution_id for r in log.pending_reports()] == ["c/0/1"]
        assert log.running() == ["d/0/1", "a/0/1"]
        assert log.prune_older_than(10**12) == 1 and log.get("b/0/1") is None
        assert log.sizes()[0] == 3


def test_executor_execution_log_keep() -> None:
    def keep(value: object) -> int | None:
        return Executor("127.0.0.1:1", "ex", execution_log_keep=value).execution_log_keep_ms  # type: ignore[arg-type]

    assert keep("10m") == 600_000 and keep(90) == 90_000 and keep(None) is None
    assert Executor("127.0.0.1:1", "ex").execution_log_keep_ms == 600_000  # bounded by default
    for bad in ("0s", "500ms", 0, "367d", "soon", True, [1]):
        with pytest.raises(InvalidSpec, match="execution_log_keep"):
            keep(bad)


def test_cli_execution_log_keep() -> None:
    assert keep_arg("30s") == 30_000 and keep_arg("forever") is None
    for bad in ("0s", "1x", "-1m"):
        with pytest.raises(argparse.ArgumentTypeError):
            keep_arg(bad)
