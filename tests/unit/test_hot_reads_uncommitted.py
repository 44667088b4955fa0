"""Reads of a hot run across its end while the applier's batch is not committed yet.

A hot run has no stored record while it is live (raftsched.fsm.hot): reads show it from the
slot table, and from its stored record once it finished or was promoted. The record is written
in the applier's open batch, which other threads' store readers see only once the applier
commits it (every COMMIT_EVERY entries of a backlog, or when the queue runs dry; and the applier
gives the lock to waiting readers between two entries). A read between the apply and that
commit must still find the run."""

from __future__ import annotations

import threading
from pathlib import Path

from raftsched.fsm import queries
from raftsched.fsm.state import SchedulerState
from raftsched.model import Overlap, TaskSpec
from raftsched.storage.lmdb_store import LmdbStore
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import EVERY_SECOND, T0, S, apply, create, join, result
from tests.unit.test_fsm_hot import assign_cols, fire_cols, number_entities, result_cols


def hot_on_lmdb(path: Path) -> SchedulerState:
    state = SchedulerState.load(LmdbStore(path, sync=False))
    assert create(state, TaskSpec("a", EVERY_SECOND, command="true", overlap=Overlap.ALLOW)).ok
    assert apply(state, join("ex1", 4)).ok
    assert apply(state, number_entities()).ok
    assert state.tasks["a"].hot
    return state


def read_elsewhere(state: SchedulerState, run_id: str) -> pb.Run | None:
    """What GetRun reads, on another thread (as the admin servicer's loop does)."""
    out: list[pb.Run | None] = []

    def read() -> None:
        out.append(state.read_run(run_id))

    t = threading.Thread(target=read)
    t.start()
    t.join(10)
    return out[0]


def test_a_hot_run_that_finished_in_an_uncommitted_batch_is_still_found(tmp_path: Path) -> None:
    state = hot_on_lmdb(tmp_path / "s")
    at = T0 + S
    run_id = f"a@{at}"
    assert apply(state, fire_cols(at, [(1, 1, at, at + S)])).fired == 1
    assert apply(state, assign_cols(at + 10, [(1, 1, 1)])).accounted == 1
    state.store.commit(state.applied_commands)
    live = read_elsewhere(state, run_id)
    assert live is not None and live.state != 0
    # The run ends in the applier's batch; nothing committed it yet.
    assert apply(state, result_cols(at + 500, [(1, 1, 1, 300, 40)])).accounted == 1
    with state.store.reader() as r:
        assert queries.stored_run(r, run_id) is None  # (not committed: the reader's view)
    found = read_elsewhere(state, run_id)
    assert found is not None, "the run vanished between its end and the batch's commit"
    state.store.commit(state.applied_commands)
    with state.store.reader() as r:
        assert found == queries.stored_run(r, run_id)


def test_a_hot_run_promoted_in_an_uncommitted_batch_is_still_found(tmp_path: Path) -> None:
    state = hot_on_lmdb(tmp_path / "s")
    at = T0 + S
    run_id = f"a@{at}"
    assert apply(state, fire_cols(at, [(1, 1, at, at + S)])).fired == 1
    assert apply(state, assign_cols(at + 10, [(1, 1, 1)])).accounted == 1
    state.store.commit(state.applied_commands)
    # A failure promotes the run to the cold path (a retry waits): its record is in the batch.
    assert apply(state, result(at + 500, run_id, 1, "ex1", False)).accounted == 1
    assert state.hot.synthesise(1) is None and run_id not in state.active  # promoted, ended
    found = read_elsewhere(state, run_id)
    assert found is not None, "the run vanished between its promotion and the batch's commit"
    assert found.state == pb.FAILED
    state.committed()  # (Replica.end_of_tick, after the commit)
    assert not state.runs.unflushed
    state.store.commit(state.applied_commands)
    assert read_elsewhere(state, run_id) == found


def test_the_replica_empties_the_unflushed_records_after_its_commit(tmp_path: Path) -> None:
    from raftsched.replica import Replica

    state = hot_on_lmdb(tmp_path / "s")
    replica = Replica(state, state.store)
    at = T0 + S
    replica.apply_entry(1, fire_cols(at, [(1, 1, at, at + S)]))
    assert state.runs.unflushed == {}  # a live hot run writes no record
    replica.apply_entry(2, assign_cols(at + 10, [(1, 1, 1)]))
    replica.apply_entry(3, result_cols(at + 500, [(1, 1, 1, 300, 40)]))
    assert list(state.runs.unflushed) == [f"a@{at}"]
    replica.end_of_tick()
    assert state.runs.unflushed == {}
    assert read_elsewhere(state, f"a@{at}") is not None


def test_a_list_of_runs_reads_the_runs_that_ended_in_an_uncommitted_batch(tmp_path: Path) -> None:
    """ListRuns reads the state's own runs first (live hot, or written since the last commit),
    then the store without them: a run that ended in between is listed once, as it is now."""
    state = hot_on_lmdb(tmp_path / "s")
    at = T0 + S
    assert apply(state, fire_cols(at, [(1, 1, at, at + S)])).fired == 1
    assert apply(state, assign_cols(at + 10, [(1, 1, 1)])).accounted == 1
    assert apply(state, fire_cols(at + S, [(1, 1, at + S, at + 2 * S)])).fired == 1
    state.store.commit(state.applied_commands)
    state.committed()
    assert apply(state, result_cols(at + 500, [(1, 1, 1, 300, 40)])).accounted == 1
    with state.store.reader() as r:
        stored = queries.list_runs(r, ["a"], 0, 0, 0, 10)
    assert stored == []  # (nothing of it committed)
    assert [r.run_id for r in state.live_hot_runs(["a"], 0, 0, 0)] == [f"a@{at + S}"]  # the other ended
    runs, seen = state.runs_in_memory(["a"], 0, 0, 0)
    assert seen == {f"a@{at}", f"a@{at + S}"}
    assert {r.run_id: r.state for r in runs} == {f"a@{at}": pb.SUCCEEDED, f"a@{at + S}": pb.PENDING}
    succeeded, _ = state.runs_in_memory(["a"], 0, 0, pb.SUCCEEDED)
    assert [r.run_id for r in succeeded] == [f"a@{at}"]
    assert state.runs_in_memory(["b"], 0, 0, 0) == ([], set())
    state.store.commit(state.applied_commands)
    state.committed()
    with state.store.reader() as r:
        assert [r.run_id for r in queries.list_runs(r, ["a"], 0, 0, 0, 10)] == [f"a@{at}"]
    assert state.runs_in_memory(["a"], 0, 0, 0)[1] == {f"a@{at + S}"}


def test_fire_reads_show_the_fire_of_a_run_that_ended_in_an_uncommitted_batch(tmp_path: Path) -> None:
    """FireAccounting, recent fires and Explain synthesise a hot fire's FIRED record from its run:
    given the state's own runs (read first), a run that ended in the uncommitted batch still
    shows its fire, once, with its run's state."""
    state = hot_on_lmdb(tmp_path / "s")
    at = T0 + S
    run_id = f"a@{at}"
    assert apply(state, fire_cols(at, [(1, 1, at, at + S)])).fired == 1
    assert apply(state, assign_cols(at + 10, [(1, 1, 1)])).accounted == 1
    state.store.commit(state.applied_commands)
    state.committed()
    assert apply(state, result_cols(at + 500, [(1, 1, 1, 300, 40)])).accounted == 1
    old_live = state.live_hot_runs(["a"], 0, 0, 0)
    mine, _ = state.runs_in_memory(["a"], 0, 0, 0)
    with state.store.reader() as r:
        assert queries.fire_records(r, "a", 0, 0, 10, live=old_live) == []  # (the old reads)
        fires = queries.fire_records(r, "a", 0, 0, 10, live=mine)
        assert [(f.nominal_ms, f.outcome, f.run_id) for f in fires] == [(at, pb.FIRED, run_id)]
        assert [(f.run_id, s) for f, s in queries.recent_fires(r, "a", 5, mine)] == [(run_id, pb.SUCCEEDED)]
        around, run = queries.fires_around(r, "a", at, mine)
        assert [f.run_id for f in around] == [run_id] and run is not None and run.run_id == run_id
    # Committed, with the record still in memory (before Replica.end_of_tick empties it): once.
    state.store.commit(state.applied_commands)
    with state.store.reader() as r:
        assert [f.run_id for f in queries.fire_records(r, "a", 0, 0, 10, live=mine)] == [run_id]
    state.committed()
    with state.store.reader() as r:
        assert [f.run_id for f in queries.fire_records(r, "a", 0, 0, 10)] == [run_id]
