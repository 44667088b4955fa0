"""The executor's dedupe log: each execution id runs at most once, across restarts and crashes."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftsched.abc import ExecutionLog
from raftsched.executor.dedupe import INTERRUPTED_ERROR, DedupeLog
from raftsched.executor.execlog_records import BeginOutcome, BeginStatus, ExecutionState, decode
from raftsched.executor.runners import AttemptResult
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.storage.memory import MemoryExecutionLog

NEW, RUNNING, DONE = BeginStatus.NEW, BeginStatus.RUNNING, BeginStatus.DONE


def ok(execution_id: str, out: str = "") -> AttemptResult:
    return AttemptResult(execution_id, True, 0, stdout_tail=out, duration_ms=7)


@pytest.fixture(params=[10_000, 0, 2], ids=["cache", "no-cache", "tiny-cache"])
def cache_size(request: pytest.FixtureRequest) -> int:
    size: int = request.param
    return size


@pytest.fixture
def log(tmp_path: Path, cache_size: int) -> Iterator[DedupeLog]:
    with DedupeLog.open(tmp_path, cache_size=cache_size) as opened:
        yield opened


def test_new_running_done(log: DedupeLog) -> None:
    assert log.begin("t@1/0/1") == BeginOutcome(NEW)
    assert log.begin("t@1/0/1") == BeginOutcome(RUNNING)
    assert log.running() == ["t@1/0/1"]
    result = AttemptResult("t@1/0/1", False, 3, "exit code 3", "out", "err", 12)
    log.finish("t@1/0/1", result)
    assert log.begin("t@1/0/1") == BeginOutcome(DONE, result)
    assert log.running() == []
    record = log.get("t@1/0/1")
    assert record is not None
    assert (record.state, record.result, record.acknowledged) == (ExecutionState.DONE, result, False)
    assert log.get("t@1/0/2") is None
    # The next attempt is another id: it runs.
    assert log.begin("t@1/0/2") == BeginOutcome(NEW)


def test_finish_contract(log: DedupeLog) -> None:
    with pytest.raises(ValueError, match="without begin"):
        log.finish("a/0/1", ok("a/0/1"))
    log.begin("a/0/1")
    with pytest.raises(ValueError, match="is for 'b/0/1'"):
        log.finish("a/0/1", ok("b/0/1"))
    log.finish("a/0/1", ok("a/0/1", "first"))
    with pytest.raises(ValueError, match="first result stands"):
        log.finish("a/0/1", ok("a/0/1", "second"))
    assert log.begin("a/0/1") == BeginOutcome(DONE, ok("a/0/1", "first"))


def test_state_survives_close_and_reopen(tmp_path: Path, cache_size: int) -> None:
    with DedupeLog.open(tmp_path, cache_size=cache_size) as log:
        for eid in ("a/0/1", "b/0/1", "c/0/1"):
            assert log.begin(eid).status is NEW
        log.finish("a/0/1", ok("a/0/1", "A"))
        log.finish("b/0/1", ok("b/0/1", "B"))
        assert log.acknowledge(["a/0/1"]) == 1
    with DedupeLog.open(tmp_path, cache_size=cache_size) as log:
        assert log.begin("a/0/1") == BeginOutcome(DONE, ok("a/0/1", "A"))
        assert log.begin("b/0/1") == BeginOutcome(DONE, ok("b/0/1", "B"))
        assert log.begin("c/0/1") == BeginOutcome(RUNNING)
        assert log.pending_reports() == [ok("b/0/1", "B")]
        assert log.running() == ["c/0/1"]
        a = log.get("a/0/1")
        assert a is not None and a.acknowledged
        assert len(log) == 3


def test_values_are_versioned(tmp_path: Path) -> None:
    # Format 2 (binary) since issue 31; format 1 (JSON) is still read: test_executor_hot_path.py.
    with DedupeLog.open(tmp_path) as log:
        log.begin("a/0/1")
        log.finish("a/0/1", ok("a/0/1", "hi"))
    with LmdbExecutionLog(tmp_path) as raw:
        found = raw.get("a/0/1")
    assert found is not None
    value, settled = found
    assert not settled
    assert value[0] == 2 and decode("a/0/1", value, settled).result == ok("a/0/1", "hi")


def test_refuses_entries_from_a_newer_format(tmp_path: Path) -> None:
    with LmdbExecutionLog(tmp_path) as raw:
        raw.insert("a/0/1", json.dumps({"v": 99, "state": "running"}).encode())
    with pytest.raises(ValueError, match="format version 99, newer"):
        DedupeLog.open(tmp_path)
    with pytest.raises(ValueError, match="newer"):  # not "open in another process": it was released
        DedupeLog.open(tmp_path)


def test_recover_finishes_attempts_interrupted_by_a_crash(tmp_path: Path) -> None:
    # A real crash: the process dies with attempts running, without closing anything.
    script = (
        "import os, sys\n"
        "from raftsched.executor.dedupe import DedupeLog\n"
        "from raftsched.executor.runners import AttemptResult\n"
        "log = DedupeLog.open(sys.argv[1])\n"
        "for eid in ('a/0/1', 'b/0/1', 'c/0/1'):\n"
        "    log.begin(eid)\n"
        "log.finish('b/0/1', AttemptResult('b/0/1', True, 0))\n"
        "os._exit(9)\n"
    )
    crashed = subprocess.run([sys.executable, "-c", script, str(tmp_path)], timeout=60, check=False)
    assert crashed.returncode == 9

    with DedupeLog.open(tmp_path) as log:
        assert log.running() == ["a/0/1", "c/0/1"]
        assert log.begin("a/0/1") == BeginOutcome(RUNNING)  # not run again, even before recover()
        assert log.begin("d/0/1") == BeginOutcome(NEW)  # begun by this process: recover leaves it
        recovered = log.recover()
        expected = [AttemptResult(eid, False, None, INTERRUPTED_ERROR) for eid in ("a/0/1", "c/0/1")]
        assert recovered == expected
        assert log.running() == ["d/0/1"]
        assert log.begin("a/0/1") == BeginOutcome(DONE, expected[0])
        assert log.pending_reports() == [expected[0], AttemptResult("b/0/1", True, 0), expected[1]]
        assert log.recover() == []
    with DedupeLog.open(tmp_path) as log:  # a clean restart: d was running, so it was interrupted
        assert [r.execution_id for r in log.recover()] == ["d/0/1"]


def test_pending_reports_and_acknowledge(log: DedupeLog) -> None:
    for i in range(5):
        log.begin(f"r/{i}/1")
    for i in (3, 0, 1, 4):
        log.finish(f"r/{i}/1", ok(f"r/{i}/1"))
    # Insertion (begin) order, not finish order.
    assert [r.execution_id for r in log.pending_reports()] == ["r/0/1", "r/1/1", "r/3/1", "r/4/1"]
    # Unknown, running and duplicate ids are ignored; acknowledging is idempotent.
    assert log.acknowledge(["r/1/1", "r/2/1", "nope/0/1", "r/1/1", "r/3/1"]) == 2
    assert log.acknowledge(["r/1/1"]) == 0
    assert log.acknowledge([]) == 0
    assert [r.execution_id for r in log.pending_reports()] == ["r/0/1", "r/4/1"]
    assert log.running() == ["r/2/1"]
    # An acknowledged result is still deduplicated and can be re-reported.
    assert log.begin("r/1/1") == BeginOutcome(DONE, ok("r/1/1"))


def test_one_owner_per_directory(tmp_path: Path) -> None:
    with DedupeLog.open(tmp_path), pytest.raises(RuntimeError, match="open in another process"):
        DedupeLog.open(tmp_path)
    DedupeLog.open(tmp_path).close()


def test_closed_log_refuses_calls(tmp_path: Path) -> None:
    log = DedupeLog.open(tmp_path, cache_size=0)
    log.close()
    log.close()
    with pytest.raises(RuntimeError, match="closed"):
        log.begin("a/0/1")


def test_oversized_id_is_refused(log: DedupeLog) -> None:
    with pytest.raises(ValueError, match="511"):
        log.begin("x" * 512)


def test_racing_begins_yield_exactly_one_new(log: DedupeLog) -> None:
    barrier = threading.Barrier(8)

    def begin(_: int) -> BeginStatus:
        barrier.wait()
        return log.begin("race/0/1").status

    with ThreadPoolExecutor(8) as pool:
        statuses = list(pool.map(begin, range(8)))
    assert sorted(statuses) == sorted([NEW] + [RUNNING] * 7)


# -- against a dumb oracle -------------------------------------------------------------------------


@dataclass
class Entry:
    state: str  # "running" or "done"
    acked: bool
    seq: int  # insertion order
    acked_at: int = -1  # the op's clock when acknowledged


IDS = st.sampled_from([f"o/{i}/1" for i in range(4)])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("begin"), IDS),
        st.tuples(st.just("finish"), IDS),
        st.tuples(st.just("ack"), st.lists(IDS, max_size=3)),
        st.tuples(st.just("prune"), st.integers(0, 3)),  # drop what was acknowledged that many ops ago
        st.tuples(st.just("reopen"), st.none()),
    ),
    max_size=30,
)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, cache=st.sampled_from([0, 2, 100]))
def test_matches_a_dict_oracle(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, Any]], cache: int
) -> None:
    path = tmp_path_factory.mktemp("oracle")
    oracle: dict[str, Entry] = {}
    seq = 0
    log = DedupeLog.open(path, cache_size=cache, sync=False)
    try:
        for now, (op, arg) in enumerate(ops, start=1_000):
            if op == "begin":
                want = BeginStatus(oracle[arg].state) if arg in oracle else NEW
                if arg not in oracle:
                    oracle[arg] = Entry("running", False, seq)
                    seq += 1
                assert log.begin(arg).status is want
            elif op == "finish":
                if arg in oracle and oracle[arg].state == "running":
                    log.finish(arg, ok(arg))
                    oracle[arg].state = "done"
                else:
                    with pytest.raises(ValueError):
                        log.finish(arg, ok(arg))
            elif op == "ack":
                fresh = {i for i in arg if i in oracle and oracle[i].state == "done" and not oracle[i].acked}
                assert log.acknowledge(arg, at_ms=now) == len(fresh)
                for i in fresh:
                    oracle[i].acked = True
                    oracle[i].acked_at = now
            elif op == "prune":
                drop = [e for e in oracle if oracle[e].acked and oracle[e].acked_at <= now - arg]
                assert log.prune_older_than(now - arg) == len(drop)
                for eid in drop:
                    del oracle[eid]
            else:  # a restart: what was running is interrupted, and recover() finishes it
                log.close()
                log = DedupeLog.open(path, cache_size=cache, sync=False)
                interrupted = sorted(
                    (e for e in oracle if oracle[e].state == "running"), key=lambda e: oracle[e].seq
                )
                assert log.running() == interrupted
                assert [r.execution_id for r in log.recover()] == interrupted
                for eid in interrupted:
                    oracle[eid].state = "done"
            by_seq = sorted(oracle, key=lambda e: oracle[e].seq)
            pending = [e for e in by_seq if oracle[e].state == "done" and not oracle[e].acked]
            assert [r.execution_id for r in log.pending_reports()] == pending
            assert log.running() == [e for e in by_seq if oracle[e].state == "running"]
            assert len(log) == len(oracle)
    finally:
        log.close()


# -- the ExecutionLog contract, over both stores -------------------------------------------------


@pytest.fixture(params=["memory", "lmdb"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[ExecutionLog]:
    opened: ExecutionLog = MemoryExecutionLog() if request.param == "memory" else LmdbExecutionLog(tmp_path)
    try:
        yield opened
    finally:
        opened.close()


def test_store_inserts_once_and_keeps_insertion_order(store: ExecutionLog) -> None:
    assert store.insert_many([("b", b"1"), ("a", b"2"), ("b", b"3")]) == [None, None, (b"1", False)]
    assert store.insert_many([("a", b"9")]) == [(b"2", False)]
    assert store.get("a") == (b"2", False) and store.get("zz") is None
    store.update([("b", b"done", True)])  # settling keeps its place
    store.update([("b", b"again", False)])
    assert store.unsettled() == [("b", b"again"), ("a", b"2")]
    assert len(store) == 2


def test_store_update_of_a_missing_key_changes_nothing(store: ExecutionLog) -> None:
    store.insert_many([("a", b"1")])
    with pytest.raises(KeyError):
        store.update([("a", b"2", True), ("missing", b"x", True)])
    assert store.get("a") == (b"1", False)


def test_store_settle_keeps_values_and_order_and_a_missing_key_changes_nothing(store: ExecutionLog) -> None:
    store.insert_many([("a", b"1"), ("b", b"2"), ("c", b"3")])
    store.update([("b", b"done", False)])
    store.settle(["b", "a"])
    assert store.get("b") == (b"done", True) and store.get("a") == (b"1", True)
    assert store.unsettled() == [("c", b"3")]
    with pytest.raises(KeyError):
        store.settle(["c", "missing"])
    assert store.get("c") == (b"3", False)
    # settled together: in insertion order, not settling order
    assert store.prune_settled_before(2**62, 1) == ["a"]


def test_store_refuses_bad_keys_and_use_after_close(store: ExecutionLog) -> None:
    for bad in ("", "x" * 512, "é" * 256):
        with pytest.raises(ValueError):
            store.insert_many([("ok", b""), (bad, b"")])
    assert len(store) == 0
    store.insert_many([("x" * 511, b"")])
    store.flush()
    store.close()
    store.close()  # idempotent
    with pytest.raises(RuntimeError):
        store.insert_many([("a", b"")])


def test_the_dedupe_rules_hold_over_the_memory_store_across_a_restart() -> None:
    backing = MemoryExecutionLog()
    first = DedupeLog(backing)
    assert first.begin("a/0/1").status is NEW
    assert first.begin("b/0/1").status is NEW
    first.finish("b/0/1", ok("b/0/1"))
    second = DedupeLog(backing)  # a restarted agent over the surviving log
    assert second.begin("a/0/1").status is RUNNING
    [interrupted] = second.recover()
    assert interrupted.execution_id == "a/0/1" and interrupted.error == INTERRUPTED_ERROR
    assert [r.execution_id for r in second.pending_reports()] == ["a/0/1", "b/0/1"]  # begin order


def test_the_pruning_cutoff_never_moves_faster_than_real_time() -> None:
    """A wall clock stepped ten minutes forward must not prune every acknowledged id at once:
    the retention argument is about time that really passed (review of the merged work)."""
    from raftsched.executor.retention import PruneCutoff

    keep = 600_000
    cut = PruneCutoff(keep)
    t0 = 1_800_000_000_000
    assert cut.next(t0, 100.0) == t0 - keep
    assert cut.next(t0 + 1_000, 101.0) == t0 - keep + 1_000  # in step with real time
    # The wall clock jumps 10 min ahead while 1 s passes: the cutoff moves 1 s only.
    assert cut.next(t0 + 602_000, 102.0) == t0 - keep + 2_000
    # Stepped back: the wall clock is the tighter bound again.
    assert cut.next(t0 - 5_000, 103.0) == t0 - 5_000 - keep
