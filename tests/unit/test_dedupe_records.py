"""The execution log per batch (issue 31 P2): one record for a batch's begins, one for its results.

The dedupe rules are the same as with one entry per id (tests/unit/test_dedupe.py holds them for
that mode): each id runs at most once across crashes, a begun attempt that never finished is
reported failed and not run again, a finished one is reported until acknowledged. Here they are
checked for batch records, against the same oracle, across real crashes, next to the per-id
entries of earlier releases, and the record layout itself (one record per batch, the format marker
that makes an older release refuse the log).
"""

from __future__ import annotations

import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftsched.errors import StoreDamaged
from raftsched.executor.dedupe import INTERRUPTED_ERROR, DedupeLog
from raftsched.executor.execlog_records import (
    MARKER_KEY,
    BeginOutcome,
    BeginStatus,
    NewerFormat,
    decode,
    decode_finish,
    encode_finish,
)
from raftsched.executor.runners import AttemptResult
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.storage.memory import MemoryExecutionLog

NEW, RUNNING, DONE = BeginStatus.NEW, BeginStatus.RUNNING, BeginStatus.DONE
OLD_RUNNING = b"\x02R"  # what the previous release wrote per id (dedupe format 2)


def ok(execution_id: str, out: str = "") -> AttemptResult:
    return AttemptResult(execution_id, True, 0, stdout_tail=out, duration_ms=7)


def ids(prefix: str, n: int) -> list[str]:
    return [f"{prefix}@{i}/0/1" for i in range(n)]


def test_a_batch_is_one_begin_record_and_one_finish_record(tmp_path: Path) -> None:
    batch = ids("t", 20)
    with DedupeLog.open(tmp_path, batched=True) as log:
        assert log.begin_many(batch) == [BeginOutcome(NEW)] * 20
        log.finish_many([ok(i) for i in batch])
        assert len(log) == 20
        assert log.acknowledge(batch, at_ms=5) == 20
    with LmdbExecutionLog(tmp_path) as raw:
        keys = [key for key, _, _ in raw.items()]
        # The marker, one begin record and one finish record: 3 keys for 20 attempts (per id: 20).
        assert len(keys) == 3 and keys[0] == MARKER_KEY
        assert raw.unsettled() == [(MARKER_KEY, b"\x03M")]  # both records settled; the marker never
    with DedupeLog.open(tmp_path, batched=True) as log:
        assert log.begin_many(batch[:2]) == [
            BeginOutcome(DONE, ok(batch[0])),
            BeginOutcome(DONE, ok(batch[1])),
        ]
        assert log.pending_reports() == [] and log.running() == []


@pytest.mark.parametrize("finished", [0, 1, 3])
def test_a_crash_between_begin_and_finish_never_runs_a_begun_attempt_again(
    tmp_path: Path, finished: int
) -> None:
    """The process dies (no close, no flush) after a batch was begun and ``finished`` of its
    rows were recorded: on restart the unfinished rows are RUNNING (never NEW, even before
    recover), recover() reports them failed, the finished ones are reported with their results,
    and a redelivery of any of them is not run."""
    script = (
        "import os, sys\n"
        "from raftsched.executor.dedupe import DedupeLog\n"
        "from raftsched.executor.runners import AttemptResult\n"
        "log = DedupeLog.open(sys.argv[1], batched=True, sync=False)\n"
        "batch = [f't@{i}/0/1' for i in range(4)]\n"
        "log.begin_many(batch)\n"
        "n = int(sys.argv[2])\n"
        "if n:\n"
        "    log.finish_many([AttemptResult(i, True, 0, duration_ms=7) for i in batch[:n]])\n"
        "os._exit(9)\n"
    )
    crashed = subprocess.run(
        [sys.executable, "-c", script, str(tmp_path), str(finished)], timeout=60, check=False
    )
    assert crashed.returncode == 9
    batch = ids("t", 4)
    with DedupeLog.open(tmp_path, batched=True) as log:
        assert log.running() == batch[finished:]
        assert [o.status for o in log.begin_many(batch)] == [DONE] * finished + [RUNNING] * (4 - finished)
        recovered = log.recover()
        assert recovered == [AttemptResult(i, False, None, INTERRUPTED_ERROR) for i in batch[finished:]]
        assert log.pending_reports() == [ok(i) for i in batch[:finished]] + recovered  # begin order
        assert [o.status for o in log.begin_many(batch)] == [DONE] * 4  # redelivered: not run
        assert log.recover() == []
        # Acknowledged by half: the records stay unsettled; a restart reports the rest again.
        assert log.acknowledge(batch[:2], at_ms=1) == 2
    with DedupeLog.open(tmp_path, batched=True) as log:
        assert log.running() == [] and log.recover() == []
        assert [r.execution_id for r in log.pending_reports()] == batch  # reports are idempotent
        assert log.acknowledge(batch, at_ms=2) == 4
    with DedupeLog.open(tmp_path, batched=True) as log:
        assert log.pending_reports() == [] and [o.status for o in log.begin_many(batch)] == [DONE] * 4


def test_results_round_trip_through_a_finish_record() -> None:
    results = [
        ok("a@1/0/1"),
        AttemptResult("b@1/0/1", False, -9, "killed: \u00e9", "out\u2026", "err", 12, True),
        AttemptResult("c@1/0/1", False, None, INTERRUPTED_ERROR),
        AttemptResult("d@1/0/1", True, None, duration_ms=2**62),
    ]
    assert decode_finish("\x01f0", encode_finish(results)) == results


def test_a_result_a_record_cannot_hold_records_none_of_the_batch(tmp_path: Path) -> None:
    with DedupeLog.open(tmp_path, batched=True) as log:
        log.begin_many(["a/0/1", "b/0/1"])
        with pytest.raises(ValueError, match="b/0/1"):
            log.finish_many([ok("a/0/1"), AttemptResult("b/0/1", False, 2**70)])
        assert log.running() == ["a/0/1", "b/0/1"] and log.pending_ids() == []
        with pytest.raises(ValueError, match="511"):
            log.begin_many(["c/0/1", "x" * 512])
        with pytest.raises(ValueError, match="NUL"):
            log.begin_many(["c\x00/0/1"])
        assert log.begin("c/0/1").status is NEW  # nothing of the refused batches was recorded


def test_an_older_release_refuses_a_log_with_batch_records(tmp_path: Path) -> None:
    """The previous release reads the unsettled entries at open with the per-id decoder (this
    module's ``decode``, unchanged): the marker, inserted before the first record and never
    settled, makes it refuse the log as written by a newer release, not as damaged, and not by
    forgetting the ids in records it cannot read."""
    with DedupeLog.open(tmp_path, batched=True) as log:
        log.begin("a/0/1")
        log.finish("a/0/1", ok("a/0/1"))
        log.acknowledge(["a/0/1"], at_ms=1)
    with LmdbExecutionLog(tmp_path) as raw:
        unsettled = raw.unsettled()
    assert unsettled == [(MARKER_KEY, b"\x03M")]
    with pytest.raises(NewerFormat, match="format version 3, newer"):
        for key, value in unsettled:
            decode(key, value, False)


def test_a_record_of_a_newer_format_is_refused_as_newer_and_a_damaged_one_as_damage(tmp_path: Path) -> None:
    with LmdbExecutionLog(tmp_path) as raw:
        raw.insert_many([("\x01b0", b"\x04B")])
    with pytest.raises(NewerFormat, match="format version 4"):
        DedupeLog.open(tmp_path, batched=True)
    other = tmp_path / "other"
    with LmdbExecutionLog(other) as raw:
        raw.insert_many([("\x01f0", encode_finish([ok("a/0/1")])[:-3])])
    with pytest.raises(StoreDamaged, match="f0"):
        DedupeLog.open(other, batched=True)


def test_a_log_of_the_previous_release_opens_in_batched_mode(tmp_path: Path) -> None:
    """Per-id entries (the previous release) and batch records side by side: an acknowledged old
    id still dedupes, an old running one is recovered, an old result is reported; the old
    entries age out by the retention as before."""
    with LmdbExecutionLog(tmp_path) as raw:
        raw.insert_many([("a/0/1", OLD_RUNNING), ("b/0/1", OLD_RUNNING), ("c/0/1", OLD_RUNNING)])
        raw.update([("b/0/1", _encode_finish_single(ok("b/0/1", "B")), False)])
        raw.update([("c/0/1", _encode_finish_single(ok("c/0/1", "C")), False)])
        raw.settle(["c/0/1"], at_ms=5)
    with DedupeLog.open(tmp_path, batched=True) as log:
        assert log.running() == ["a/0/1"]
        assert [o.status for o in log.begin_many(["a/0/1", "b/0/1", "c/0/1", "d/0/1"])] == [
            RUNNING,
            DONE,
            DONE,
            NEW,
        ]
        [recovered] = log.recover()
        assert recovered.execution_id == "a/0/1" and recovered.error == INTERRUPTED_ERROR
        log.finish("d/0/1", ok("d/0/1", "D"))
        assert [r.execution_id for r in log.pending_reports()] == ["a/0/1", "b/0/1", "d/0/1"]
        assert log.acknowledge(["a/0/1", "b/0/1", "d/0/1"], at_ms=10) == 3
        assert len(log) == 4
        assert log.prune_older_than(10) == 4 and len(log) == 0
        assert log.begin("c/0/1").status is NEW  # forgotten once pruned, as before


def _encode_finish_single(result: AttemptResult) -> bytes:
    from raftsched.executor.execlog_records import encode_done

    return encode_done(result)


def test_an_id_is_kept_until_the_last_of_its_batch_is_acknowledged_long_enough(tmp_path: Path) -> None:
    batch = ids("t", 3)
    with DedupeLog.open(tmp_path, batched=True) as log:
        log.begin_many(batch)
        log.finish_many([ok(i) for i in batch])
        log.acknowledge(batch[:2], at_ms=1)
        assert log.prune_older_than(100) == 0  # its batch mate is not acknowledged
        log.acknowledge(batch[2:], at_ms=50)
        assert log.prune_older_than(49) == 0
        assert log.begin(batch[0]).status is DONE
        assert log.prune_older_than(50) == 3
        assert len(log) == 0 and log.begin(batch[0]).status is NEW


# -- against the same dict oracle as the per-id mode, with batches of several ids ---------------


@dataclass
class Entry:
    state: str  # "running" or "done"
    acked: bool
    seq: int
    batch: int  # the begin batch it was recorded in


IDS = st.sampled_from([f"o/{i}/1" for i in range(6)])
OPS = st.lists(
    st.one_of(
        st.tuples(st.just("begin"), st.lists(IDS, min_size=1, max_size=4)),
        st.tuples(st.just("finish"), st.lists(IDS, min_size=1, max_size=3)),
        st.tuples(st.just("ack"), st.lists(IDS, max_size=4)),
        st.tuples(st.just("prune"), st.none()),
        st.tuples(st.just("reopen"), st.none()),
    ),
    max_size=30,
)


@settings(max_examples=200, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(ops=OPS, lmdb=st.booleans())
def test_batch_records_match_a_dict_oracle(
    tmp_path_factory: pytest.TempPathFactory, ops: list[tuple[str, Any]], lmdb: bool
) -> None:
    path = tmp_path_factory.mktemp("oracle")
    memory = MemoryExecutionLog()

    def open_log() -> DedupeLog:
        if lmdb:
            return DedupeLog.open(path, sync=False, batched=True)
        return DedupeLog(memory, batched=True)

    oracle: dict[str, Entry] = {}
    seq = batches = 0
    log = open_log()
    try:
        for op, arg in ops:
            if op == "begin":
                want = []
                for i in arg:
                    if i in oracle:
                        want.append(BeginStatus(oracle[i].state))
                    else:
                        want.append(NEW)
                        oracle[i] = Entry("running", False, seq, batches)
                        seq += 1
                batches += 1
                assert [o.status for o in log.begin_many(arg)] == want
            elif op == "finish":
                good = len(set(arg)) == len(arg) and all(
                    i in oracle and oracle[i].state == "running" for i in arg
                )
                if good:
                    log.finish_many([ok(i) for i in arg])
                    for i in arg:
                        oracle[i].state = "done"
                else:
                    with pytest.raises(ValueError):
                        log.finish_many([ok(i) for i in arg])
            elif op == "ack":
                fresh = {i for i in arg if i in oracle and oracle[i].state == "done" and not oracle[i].acked}
                assert log.acknowledge(arg, at_ms=1) == len(fresh)
                for i in fresh:
                    oracle[i].acked = True
            elif op == "prune":
                # An id goes with its begin batch, once every id of that batch is acknowledged.
                whole = {
                    b
                    for b in {e.batch for e in oracle.values()}
                    if all(e.acked for e in oracle.values() if e.batch == b)
                }
                drop = [i for i in oracle if oracle[i].batch in whole]
                assert log.prune_older_than(1) == len(drop)
                for i in drop:
                    del oracle[i]
            else:  # a restart: running ids are interrupted; acknowledgements of a batch not yet
                # whole are forgotten (its results are reported again: reports are idempotent)
                if lmdb:  # a memory store survives its DedupeLog, as a simulated restart uses it
                    log.close()
                log = open_log()
                by_seq = sorted(oracle, key=lambda e: oracle[e].seq)
                interrupted = [e for e in by_seq if oracle[e].state == "running"]
                assert log.running() == interrupted
                assert [r.execution_id for r in log.recover()] == interrupted
                for eid in interrupted:
                    oracle[eid].state = "done"
                for b in {entry.batch for entry in oracle.values()}:
                    mates = [entry for entry in oracle.values() if entry.batch == b]
                    if not all(entry.acked for entry in mates):
                        for entry in mates:
                            entry.acked = False
            by_seq = sorted(oracle, key=lambda e: oracle[e].seq)
            pending = [e for e in by_seq if oracle[e].state == "done" and not oracle[e].acked]
            assert [r.execution_id for r in log.pending_reports()] == pending
            assert log.running() == [e for e in by_seq if oracle[e].state == "running"]
            assert len(log) == len(oracle)
            for eid in by_seq:  # from memory: the oracle's state, or "ask the store"
                known = log.known(eid)
                assert known is None or known.status is BeginStatus(oracle[eid].state)
    finally:
        log.close()


def test_an_id_whose_records_are_pruned_under_it_answers_done(tmp_path: Path) -> None:
    """The pruning thread deletes the records before it takes the lock to drop the index: a
    begin of a redelivered id in between answers DONE (never NEW, never an error)."""
    with DedupeLog.open(tmp_path, batched=True, cache_size=0) as log:
        log.begin("a/0/1")
        log.finish("a/0/1", ok("a/0/1"))
        log.acknowledge(["a/0/1"], at_ms=1)
        store = log._store
        assert len(store.prune_settled_before(1, 10)) == 2  # the store only, as the thread does first
        assert log.begin("a/0/1") == BeginOutcome(DONE)
