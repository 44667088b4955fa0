"""The columnar prototype of issue 31 (bench/columnar_fsm.py, ``bench.attempt_apply --columnar``)
does the work today's state machine does, so its figure is for equivalent work: per task the
same fires, runs, watermark, next fire and kept runs; per finished run the same stored record
(less the timeline, plus the start and duration the timeline held). Bad entries and stale rows
are refused as values and change nothing; replicas agree; the tables rebuild from the store."""

from __future__ import annotations

import argparse
from collections.abc import Iterator
from pathlib import Path

import pytest

from bench import attempt_apply, columnar_fsm
from bench.columnar_fsm import ColumnarState, assign_command, fire_command, result_command
from raftsched.storage.lmdb_store import LmdbStore

T = 1_800_000_000_000


def test_the_prototype_does_what_todays_state_machine_does(tmp_path: Path) -> None:
    assert attempt_apply.check_equivalence(12, 3, 2, 5, tmp_path) == []


def test_the_equivalence_check_sees_a_record_that_differs(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The prototype writes the start lateness where nothing reads it: the check must say so.
    monkeypatch.setattr(columnar_fsm, "START_LATENESS_FIELD", 905)
    problems = attempt_apply.check_equivalence(4, 2, 2, 5, tmp_path)
    assert problems and all("start lateness 0" in p for p in problems)


def test_the_equivalence_check_sees_less_work(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The prototype's planner leaves out task 0's fire in the second simulated second.
    plan = attempt_apply._plan_rows

    def fewer(next_fire: list[int], now: int) -> list[list[tuple[int, int, int, int]]]:
        entries = plan(next_fire, now)
        if attempt_apply.T0 + 1000 < now < attempt_apply.T0 + 2000:
            entries = [[r for r in rows if r[0] != 0] for rows in entries]
        return entries

    monkeypatch.setattr(attempt_apply, "_plan_rows", fewer)
    problems = attempt_apply.check_equivalence(3, 3, 2, 5, tmp_path)
    assert "hot-0000000: fires_total 3, today 4" in problems
    assert any(p.startswith("finished runs: 11 stored, today 12") for p in problems)


@pytest.fixture
def state(tmp_path: Path) -> Iterator[ColumnarState]:
    store = LmdbStore(tmp_path / "a", sync=False)
    st = _registered(ColumnarState(store))
    yield st
    store.close()


def _registered(st: ColumnarState) -> ColumnarState:
    for i in range(3):
        st.hot.add(f"t{i}", 1, next_fire_ms=T)
    st.executors.add("ex1", 2)
    st.executors.add("ex2", 10)
    return st


def _tables(st: ColumnarState) -> bytes:
    return st.hot.image() + st.slots.image() + bytes(st.executors.running)


def test_a_malformed_entry_is_refused_whole_and_changes_no_table(state: ColumnarState) -> None:
    state.apply(fire_command(T + 5, [(0, 1, T, T + 1000)]))
    before = _tables(state)
    bad = columnar_fsm.command(T + 10)
    bad.fire_columns.task.extend([1, 2])
    bad.fire_columns.version.extend([1])  # one column shorter
    bad.fire_columns.nominal_delta.extend([10, 10])
    bad.fire_columns.next_delta.extend([1000, 1000])
    for data in (
        bad.SerializeToString(),
        fire_command(T + 10, [(7, 1, T, T + 1000)]),  # no task 7
        assign_command(T + 10, [1], [1], [5]),  # no executor 5
        b"\xff\xff\xff",  # not a command
    ):
        result = state.apply(data)
        assert not result.ok and result.code == "invalid_argument", result
        assert _tables(state) == before


def test_stale_rows_are_refused_one_by_one(state: ColumnarState) -> None:
    first = state.apply(fire_command(T + 5, [(0, 1, T, T + 1000), (1, 1, T, T + 1000)]))
    assert (first.accepted, first.refused) == (2, 0)
    again = state.apply(
        fire_command(
            T + 6,
            [
                (0, 1, T, T + 1000),  # accounted already
                (1, 2, T + 1, T + 1000),  # another version
                (2, 1, T + 7, T + 1000),  # early
            ],
        )
    )
    assert (again.accepted, again.refused) == (0, 3)
    assert state.hot.fired == [1, 1, 0] and state.hot.watermark == [T + 5, T + 5, 0]
    # Seqs 1 and 2. Executor 0 has two slots: a third attempt is refused.
    state.apply(fire_command(T + 1005, [(2, 1, T + 1000, T + 2000)]))
    assign = state.apply(assign_command(T + 1010, [1, 2, 3, 3, 9], [1, 1, 1, 1, 1], [0, 0, 0, 1, 1]))
    # seqs 1 and 2 on executor 0, seq 3 not there (full) but on executor 1; no seq 9
    assert (assign.accepted, assign.refused) == (3, 2)
    assert state.executors.running == [2, 1]
    assert state.apply(assign_command(T + 1010, [3], [1], [1])).refused == 1  # running already
    results = state.apply(result_command(T + 1020, [1, 2, 3], [1, 0, 1], 5, 3, attempts=[1, 2, 1]))
    # seq 1 is on executor 0, seq 2 is at attempt 1: only seq 3's result counts
    assert (results.accepted, results.refused) == (1, 2)
    assert state.hot.active == [1, 1, 0] and state.hot.kept_runs == [0, 0, 1]
    twice = state.apply(result_command(T + 1030, [3], [1], 5, 3))
    assert (twice.accepted, twice.refused) == (0, 1)


def test_a_task_catching_up_fires_twice_in_one_entry_and_a_bad_row_refuses_its_task(
    state: ColumnarState,
) -> None:
    rows = [(0, 1, T - 1000, T), (0, 1, T, T + 1000), (1, 1, T, T + 1000), (1, 1, T - 1000, T)]
    result = state.apply(fire_command(T + 5, rows))
    assert (result.accepted, result.refused) == (2, 2)  # task 1's rows are out of order
    assert state.hot.fired == [2, 0, 0] and state.hot.next_fire[0] == T + 1000


def test_replicas_agree_and_the_tables_rebuild_from_the_store(tmp_path: Path) -> None:
    stores = [LmdbStore(tmp_path / name, sync=False) for name in ("a", "b")]
    states = [_registered(ColumnarState(store)) for store in stores]
    entries = [
        fire_command(T + 5, [(0, 1, T, T + 1000), (1, 1, T, T + 1000), (2, 1, T, T + 1000)]),
        assign_command(T + 10, [1, 2, 3], [1, 1, 1], [1, 1, 0]),
        result_command(T + 20, [2, 1], [1, 1], 4, 2),
        fire_command(T + 1005, [(0, 1, T + 1000, T + 2000)]),
    ]
    for data in entries:
        for st, lead in zip(states, (True, False), strict=True):
            st.apply(data, leader_effects=lead)
    for store, st in zip(stores, states, strict=True):
        store.commit(st.applied)
    assert states[0].digest() == states[1].digest()
    assert states[0].effects and not states[1].effects  # only the leader builds effects
    rebuilt = _registered(ColumnarState(stores[1]))
    rebuilt.load()
    assert rebuilt.image() == states[1].image()
    for store in stores:
        store.close()


def test_the_bench_runs_the_prototype(tmp_path: Path) -> None:
    # run_columnar raises if a row is refused, the replicas differ or the rebuilt tables differ.
    for stage in ("B", "C"):
        result = attempt_apply.run_columnar(10, 2, 2, 4, 1, tmp_path / stage, stage)
        assert result["attempts"] == 10 * 3 and result["replay_equal"] is True


def test_the_columnar_command_runs_every_side_on_the_same_history(tmp_path: Path) -> None:
    args = argparse.Namespace(
        tasks=6,
        seconds=2,
        executors=2,
        batch=4,
        commit_every=1,
        history=3,
        check_tasks=6,
        stages="B,C",
        no_baseline=False,
    )
    result = attempt_apply._columnar_main(args, tmp_path)
    assert result["equivalence_check"] == "ok (6 tasks, 2 s)"
    for side in ("today", "columnar_B", "columnar_C"):
        figures = result[side]
        assert isinstance(figures, dict) and figures["history"] == 3, side
    stored = result["columnar_C"]
    assert isinstance(stored, dict) and stored["stored_records"] > 6 * 3  # the history is there
