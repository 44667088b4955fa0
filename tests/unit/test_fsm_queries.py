"""Read queries (raftsched.fsm.queries) over a store reader and the FSM's in-memory view."""

from __future__ import annotations

import pytest

from raftsched.abc import StoreReader
from raftsched.fsm import queries
from raftsched.model import Overlap, TaskSpec
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import (
    EVERY_SECOND,
    T0,
    S,
    apply,
    apply_wf,
    batch,
    create,
    entry,
    etl_spec,
    fire,
    fresh,
    report,
    start,
    tick,
    with_task,
)


def no_reader() -> StoreReader:
    raise AssertionError("the answer was in memory: no reader should be opened")


def test_fire_records_include_a_range_that_reaches_into_the_window() -> None:
    state = with_task()
    coalesced = fire(T0 + S, pb.COALESCED, through=T0 + 8 * S, count=8)
    e = entry("t", 1, [coalesced, fire(T0 + 9 * S)], watermark=T0 + 9 * S, next_fire=T0 + 10 * S)
    assert apply(state, batch(T0 + 9 * S, e)).ok
    with state.store.reader() as r:
        inside = queries.fire_records(r, "t", T0 + 5 * S, T0 + 6 * S, 10)
        everything = queries.fire_records(r, "t", 0, 0, 10)
        after = queries.fire_records(r, "t", T0 + 9 * S, 0, 10)
        capped = queries.fire_records(r, "t", 0, 0, 1)
    assert [(f.nominal_ms, f.through_ms) for f in inside] == [(T0 + S, T0 + 8 * S)]
    assert [f.nominal_ms for f in everything] == [T0 + S, T0 + 9 * S]
    assert [f.nominal_ms for f in after] == [T0 + 9 * S]
    assert [f.nominal_ms for f in capped] == [T0 + S]


def test_fires_around_finds_the_run_of_the_fire() -> None:
    state = with_task()
    assert apply(state, tick("t", 1, T0 + S)).fired == 1
    with state.store.reader() as r:
        around, run = queries.fires_around(r, "t", T0 + S)
        nothing, none = queries.fires_around(r, "t", T0 + 30 * S)
    assert [f.nominal_ms for f in around] == [T0 + S]
    assert run is not None and run.run_id == around[0].run_id
    assert (nothing, none) == ([], None)


def test_list_runs_filters_by_state_and_window_newest_first() -> None:
    state = fresh()
    for name in ("a", "b"):
        assert create(state, TaskSpec(name, EVERY_SECOND, overlap=Overlap.ALLOW, command="true")).ok
    for i in (1, 2, 3):
        at = T0 + i * S
        e = [entry(n, 1, [fire(at)], watermark=at, next_fire=at + S) for n in ("a", "b")]
        assert apply(state, batch(at, *e)).fired == 2
    assert apply(state, report(T0 + 4 * S, (f"a@{T0 + 2 * S}", 0, 1, True))).accounted == 1
    with state.store.reader() as r:
        every = queries.list_runs(r, ["a", "b"], 0, 0, 0, 10)
        done = queries.list_runs(r, ["a", "b"], 0, 0, pb.SUCCEEDED, 10)
        window = queries.list_runs(r, ["a"], T0 + 2 * S, T0 + 3 * S, 0, 10)
        newest = queries.list_runs(r, ["a", "b"], 0, 0, 0, 2)
    assert [x.nominal_ms for x in every] == sorted([T0 + i * S for i in (1, 2, 3)] * 2, reverse=True)
    assert [x.run_id for x in done] == [f"a@{T0 + 2 * S}"]
    assert [x.run_id for x in window] == [f"a@{T0 + 3 * S}", f"a@{T0 + 2 * S}"]
    assert [x.run_id for x in newest] == [f"b@{T0 + 3 * S}", f"a@{T0 + 3 * S}"]


def test_in_memory_answers_open_no_reader() -> None:
    state = with_task()
    assert apply_wf(state, etl_spec()).ok
    wr = start(state)
    spec = queries.spec_for(state.tasks, no_reader, "t", 1)
    assert spec is not None and spec.name == "t"
    rec = queries.workflow_record(state.wf, no_reader, "etl")
    assert rec is not None and rec.version == 1
    got = queries.workflow_run(state.wf, no_reader, wr.run_id)
    assert got == wr
    assert queries.workflow_run(state.wf, no_reader, "no-at-sign") is None
    assert queries.workflow_runs(state.wf, no_reader, "etl", active_only=True) == [wr]


def test_answers_are_copies_the_caller_may_mutate() -> None:
    state = with_task()
    assert apply_wf(state, etl_spec()).ok
    wr = start(state)
    got = state.get_workflow_run(wr.run_id)
    assert got is not None
    got.state = pb.WORKFLOW_KILLED
    assert state.get_workflow_run(wr.run_id) == wr
    rec = state.get_task("t")
    assert rec is not None
    rec.version = 99
    assert queries.task_record(state.tasks, "t") == state.get_task("t") != rec


@pytest.mark.parametrize("version", [2, 50])
def test_spec_for_an_unkept_version_falls_back_to_the_current_spec(version: int) -> None:
    state = with_task()
    spec = queries.spec_for(state.tasks, state.store.reader, "t", version)
    assert spec is not None and spec.name == "t"
    assert queries.spec_for(state.tasks, state.store.reader, "gone", 1) is None
