"""Stored state format 3 changes what LMDB holds, never what a user sees.

The oracle is ``tests/fixtures/format2_fixture.json``: a command stream and what the format-2
build (which stored every timeline entry and re-put a task's record on every fire and finished
run) answered and stored for it (see ``make_format2_fixture.py``). Its runs take every timeline
path: plain success with and without a reported start, final failure, timeout, retry, two
shards, held and released, executor lost, lease expired, cancels, a manual trigger, a forced
retry, a workflow task, runs left pending and running.

* The current build, fed the same commands, answers byte for byte the same (so the apply chain is
  the same) and shows the same runs (every timeline entry, in the same order) and task records,
  before and after a restart, although it stores the hot runs' timelines as fields.
* A format-2 state, as a snapshot or as a store, loads with the current build and answers the
  same; both go on alike.
* A node upgraded at any log index (its format-2 state migrated on load) holds the same runs, byte
  for byte, as one that ran this build throughout, and the same state digest from the first
  counter checkpoint after it: a rolling upgrade leaves replicas identical.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any
from unittest.mock import patch

import pytest

from raftsched import codec
from raftsched.fsm import keys, queries, timeline
from raftsched.fsm import tasks as tasks_mod
from raftsched.fsm.state import DERIVED_TIMELINES_FORMAT, SchedulerState
from raftsched.model import CronTrigger, TaskSpec
from raftsched.storage.lmdb_store import LmdbStore
from raftsched.storage.memory import MemoryStore
from raftsched.timing import sla
from raftsched.v1 import log_pb2 as pb

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "format2_fixture.json"


@pytest.fixture(scope="module")
def old() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(FIXTURE.read_text())
    return loaded


def replayed(old: dict[str, Any]) -> SchedulerState:
    state = SchedulerState.load(MemoryStore())
    for i, (data, result) in enumerate(zip(old["commands"], old["results"], strict=True)):
        applied = state.apply(bytes.fromhex(data))
        assert applied.encode().hex() == result, f"command {i}: {applied.result}"
    return state


def old_runs(old: dict[str, Any]) -> dict[str, pb.Run]:
    return {rid: pb.Run.FromString(bytes.fromhex(raw)) for rid, raw in old["runs"].items()}


def assert_shows_what_format_2_stored(state: SchedulerState, old: dict[str, Any]) -> None:
    expected = old_runs(old)
    with state.store.reader() as r:
        shown = {rid: queries.stored_run(r, rid) for rid in expected}
        listed = queries.list_runs(r, sorted({run.task for run in expected.values()}), 0, 0, 0, 100)
    for rid, run in expected.items():
        got = shown[rid]
        assert got == run, rid
        assert got is not None and [timeline.describe(e) for e in got.timeline] == [
            timeline.describe(e) for e in run.timeline
        ]
    assert {run.run_id: run for run in listed} == expected
    assert {n: st.record_bytes().hex() for n, st in state.tasks.items()} == old["tasks"]
    for rid, run in expected.items():  # the SLA's first start reads the derived start too
        if rid in state.active:
            got = state.active_run(rid)
            assert got is not None and sla.first_start_ms(got) == sla.first_start_ms(run)
            with state.view() as v:
                for shard in run.shards:
                    tried = {
                        e.executor for e in run.timeline if e.event == "assigned" and e.shard == shard.shard
                    }
                    assert v.tried_executors(rid, shard.shard, shard.attempt + 1) == tried


def test_the_same_commands_answer_and_show_what_the_format_2_build_did(old: dict[str, Any]) -> None:
    state = replayed(old)
    assert state.chain.hex() == old["chain"]  # every result byte for byte
    assert_shows_what_format_2_stored(state, old)
    # ... from a store that holds less: the hot runs' entries are fields, not stored entries.
    plain = pb.Run.FromString(state.store.get(keys.run_key_for_id("plain@1700000041000")) or b"")
    assert plain.timeline_derived and [e.event for e in plain.timeline] == ["created"]
    derived = [
        rid
        for rid in old["runs"]
        if pb.Run.FromString(state.store.get(keys.run_key_for_id(rid)) or b"").timeline_derived
    ]
    assert len(derived) >= 6, derived  # succeeded, failed, timed out... not only pending ones
    # A restart (loading the store) shows the same, and the counters replay to the same records.
    again = SchedulerState.load(state.store)
    assert_shows_what_format_2_stored(again, old)
    assert again.digest() == state.digest()


def test_a_format_2_snapshot_restores_and_answers_the_same(old: dict[str, Any]) -> None:
    restored = SchedulerState.load(MemoryStore())
    restored.restore(bytes.fromhex(old["snapshot"]), applied_index=len(old["commands"]))
    assert restored.state_format == 2
    assert_shows_what_format_2_stored(restored, old)
    # The restored one and one that applied the commands itself go on alike.
    live = replayed(old)
    t = max(live.max_now_ms, restored.max_now_ms) + 100
    cmd = pb.Command(epoch=2, now_ms=t, origin="n1")
    for rid in sorted(live.active):
        run = live.active_run(rid)
        assert run is not None
        for shard in run.shards:
            if shard.state == pb.RUNNING:
                cmd.report_results.results.add(
                    run_id=rid,
                    shard=shard.shard,
                    attempt=shard.attempt,
                    executor=shard.executor,
                    success=True,
                    start_lateness_ms=250,
                    duration_ms=60,
                )
    assert len(cmd.report_results.results) == 2
    data = codec.encode_command(cmd)
    assert restored.apply(data).encode() == live.apply(data).encode()
    assert restored.state_format == DERIVED_TIMELINES_FORMAT  # (format 4 only once numbered)
    with live.store.reader() as a, restored.store.reader() as b:
        for rid in old["runs"]:
            assert queries.stored_run(a, rid) == queries.stored_run(b, rid), rid
    assert {n: s.record_bytes() for n, s in live.tasks.items()} == {
        n: s.record_bytes() for n, s in restored.tasks.items()
    }


def test_a_format_2_store_loads_and_answers_the_same(old: dict[str, Any], tmp_path: Path) -> None:
    snap = pb.Snapshot.FromString(bytes.fromhex(old["snapshot"]))
    assert snap.format == 2
    store = LmdbStore(tmp_path / "state", sync=False)
    try:
        store.replace_all(iter([(e.key, e.value) for e in snap.entries]), len(old["commands"]))
        state = SchedulerState.load(store)
        assert state.state_format == 2
        assert_shows_what_format_2_stored(state, old)
    finally:
        store.close()


SPLITS = sorted(json.loads(FIXTURE.read_text())["snapshots_after"], key=int)


@pytest.mark.parametrize("tasks", [4096, 3])
@pytest.mark.parametrize("split", SPLITS)
def test_a_node_upgraded_at_any_index_ends_byte_identical_to_one_that_never_ran_format_2(
    old: dict[str, Any], split: str, tasks: int
) -> None:
    """... with checkpoints every 8 commands, and also (``tasks`` 3) whenever 3 tasks are named."""
    every = 8
    with (
        patch.object(tasks_mod, "CHECKPOINT_EVERY", every),
        patch.object(tasks_mod, "CHECKPOINT_TASKS", tasks),
    ):
        live = replayed(old)
        upgraded = SchedulerState.load(MemoryStore())
        upgraded.restore(bytes.fromhex(old["snapshots_after"][split]), applied_index=int(split))
        assert upgraded.state_format == 2
        for data, result in list(zip(old["commands"], old["results"], strict=True))[int(split) :]:
            assert upgraded.apply(bytes.fromhex(data)).encode().hex() == result
        assert upgraded.chain == live.chain

        def runs(state: SchedulerState) -> list[tuple[bytes, bytes]]:
            return list(state.store.scan(keys.RUN, keys.RUN + keys.END))

        assert runs(upgraded) == runs(live)  # the migrated runs at once
        t = live.max_now_ms + 10
        while True:  # read barriers up to the next counter checkpoint
            cmd = pb.Command(epoch=2, now_ms=t, origin="n1")
            cmd.barrier.SetInParent()
            data = codec.encode_command(cmd)
            assert live.apply(data).encode() == upgraded.apply(data).encode()
            if live.applied_commands % every == 0:
                break
        assert upgraded.digest() == live.digest()
        assert upgraded.snapshot() == live.snapshot()


def test_counters_a_refused_command_changed_are_kept_with_the_command_before_it() -> None:
    """A command refused after it changed counters (a bug's partial work) does not move the count
    of accepted commands: its rows go into the record of that count, after the earlier ones, and
    a reload has the counters the state kept in memory."""
    from raftsched.fsm.rules import Reject
    from tests.support.fsm import apply, create, fresh, tick

    state = fresh()
    for name in ("t", "u"):
        assert create(state, TaskSpec(name, CronTrigger("* * * * * *"), command="true")).ok
    batch = pb.Command.FromString(tick("t", 1, 1_700_000_041_000))
    batch.fire_batch.tasks.extend(pb.Command.FromString(tick("u", 1, 1_700_000_041_000)).fire_batch.tasks)
    assert apply(state, codec.encode_command(batch)).fired == 2

    def partial(s: SchedulerState, cmd: pb.Command, now: int) -> Any:
        st = s.tasks["t"]
        st.fires_total += 5
        s.touch_task(st)
        raise Reject("conflict", "refused after a change")

    count = state.applied_commands
    with patch.dict(SchedulerState._HANDLERS, {"trigger_now": partial}):
        cmd = pb.Command(epoch=1, now_ms=1_700_000_041_500, origin="n1")
        cmd.trigger_now.name = "t"
        assert not state.apply(codec.encode_command(cmd)).result.ok
    assert state.applied_commands == count
    rows = pb.TaskCounters.FromString(state.store.get(keys.counters_key(count)) or b"")
    assert list(rows.task) == ["t", "u", "t"]  # the fire batch's rows, then the refused command's
    again = SchedulerState.load(state.store)
    for name in ("t", "u"):
        assert again.tasks[name].record_bytes() == state.tasks[name].record_bytes(), name
