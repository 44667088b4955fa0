"""Upgrade safety: formats of commands, snapshots and stored state.

* The checked-in ``tests/fixtures/snapshot_format1.bin`` was made by the format-1 code (see
  ``tests/fixtures/make_format1_snapshot.py``); the current code restores it, as a snapshot and
  as the payload of a backup, and keeps scheduling from it.
* A command of a newer format is refused without touching anything, and the replica stops the
  node's applying there (the entry stays in the log for an upgraded build), through the applier's
  stop path: the rest of the log is not applied.
* A snapshot, a stored state and a Raft snapshot copy of a newer format are refused before
  anything is replaced.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from raftsched import codec
from raftsched.abc import FormatTooNew
from raftsched.consensus.applier import Applier
from raftsched.errors import SnapshotFormatError
from raftsched.fsm import keys
from raftsched.fsm.state import DERIVED_TIMELINES_FORMAT, SchedulerState
from raftsched.leader import writes
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.replica import Replica
from raftsched.storage.lmdb_store import LmdbStore
from raftsched.storage.memory import MemoryStore
from raftsched.testing.cluster import wait_until
from raftsched.v1 import log_pb2 as pb

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "snapshot_format1.bin"
T0 = 1_700_000_040_000  # the fixture's time base


def fixture_state() -> SchedulerState:
    state = SchedulerState.load(MemoryStore())
    state.restore(FIXTURE.read_bytes(), applied_index=0)
    return state


def test_the_format_1_fixture_restores_with_its_tasks_watermarks_executor_and_workflow() -> None:
    raw = FIXTURE.read_bytes()
    assert pb.Snapshot.FromString(raw).format == 1
    state = fixture_state()
    assert sorted(state.tasks) == ["catch-up", "etl#extract", "etl#load", "every-second"]
    for name in ("every-second", "catch-up"):
        rec = state.get_task(name)
        assert rec is not None and rec.version == 1
        assert rec.watermark_ms == T0 + 2000 and rec.next_fire_ms == T0 + 3000
    every, catch_up = state.get_task("every-second"), state.get_task("catch-up")
    assert every is not None and catch_up is not None
    assert (every.spec.misfire, catch_up.spec.misfire) == (pb.MISFIRE_SKIP, pb.MISFIRE_ALL)
    assert state.executors["ex1"].slots == 4 and not state.executors["ex1"].draining
    wf = state.get_workflow("etl")
    assert wf is not None and [t.name for t in wf.spec.tasks] == ["extract", "load"]
    assert (state.max_epoch, state.max_now_ms, state.state_format) == (3, T0 + 2500, 1)
    # Restored and re-snapshotted, nothing is lost (the image differs only in the new state
    # format the next apply writes).
    again = SchedulerState.load(MemoryStore())
    again.restore(state.snapshot(), applied_index=0)
    assert again.digest() == state.digest()


def test_a_format_1_state_keeps_applying_and_is_marked_with_the_current_format() -> None:
    state = fixture_state()
    spec = TaskSpec(name="new", trigger=ManualTrigger(), command="true")
    res = state.apply(
        writes.create_task(spec, disabled=False, now_ms=T0 + 5000, epoch=3, origin="n1", key="")
    )
    assert res.result.ok, res.result.message
    meta = pb.Meta.FromString(state.store.get(keys.META) or b"")
    # The format of a state the columnar hot path never numbered (4 is written only from a
    # NumberEntities on, 5 from a PromoteHotRuns on: tests/unit/test_fsm_hot.py).
    assert meta.state_format == DERIVED_TIMELINES_FORMAT == state.state_format == codec.SNAPSHOT_FORMAT - 2
    assert meta.applied_commands == 23  # the fixture's 22, and this one


def test_commands_are_stamped_with_the_oldest_format_that_applies_them() -> None:
    spec = TaskSpec(name="t", trigger=ManualTrigger(), command="true")
    old = pb.Command.FromString(
        writes.create_task(spec, disabled=False, now_ms=T0, epoch=1, origin="n1", key="")
    )
    new = pb.Command.FromString(writes.drain_executor("ex1", "", now_ms=T0, epoch=1, origin="n1", key=""))
    assert (old.format, new.format) == (1, 2) and max(_named_formats()) == codec.COMMAND_FORMAT
    barrier = pb.Command(epoch=2, now_ms=T0, origin="n2")
    barrier.barrier.node_id = "n2"
    assert pb.Command.FromString(codec.encode_command(barrier)).format == 1
    barrier.barrier.clock_fault_ms = T0 + 600_000  # abandons a faulty leader time: format 3
    barrier.format = 0
    assert pb.Command.FromString(codec.encode_command(barrier)).format == 3


def test_a_newer_snapshot_or_state_format_is_refused_before_anything_is_replaced() -> None:
    state = fixture_state()
    before = state.digest()
    snap = pb.Snapshot.FromString(state.snapshot())
    snap.format = codec.SNAPSHOT_FORMAT + 1
    with pytest.raises(SnapshotFormatError, match="newer than this build reads"):
        state.restore(snap.SerializeToString(), applied_index=0)
    snap.format = codec.SNAPSHOT_FORMAT
    for entry in snap.entries:
        if entry.key == keys.META:
            meta = pb.Meta.FromString(entry.value)
            meta.state_format = codec.SNAPSHOT_FORMAT + 1
            entry.value = meta.SerializeToString()
    with pytest.raises(SnapshotFormatError, match=f"state format {codec.SNAPSHOT_FORMAT + 1}"):
        state.restore(snap.SerializeToString(), applied_index=0)
    assert state.digest() == before
    # A store whose state is newer: loading it is refused with the same clear error.
    newer = MemoryStore()
    for entry in snap.entries:
        newer.put(entry.key, entry.value)
    newer.commit(1)
    with pytest.raises(SnapshotFormatError, match="run a raftsched build that supports it"):
        SchedulerState.load(newer)


def test_a_newer_command_stops_the_replica_and_the_rest_of_the_log_waits_for_an_upgrade() -> None:
    store = MemoryStore()
    state = SchedulerState.load(store)
    replica = Replica(state, store)
    spec = TaskSpec(name="t1", trigger=ManualTrigger(), command="true")
    first = writes.create_task(spec, disabled=False, now_ms=T0, epoch=1, origin="n1", key="")
    newer = pb.Command(format=codec.COMMAND_FORMAT + 1, epoch=1, now_ms=T0 + 1, origin="n1")
    newer.barrier.node_id = "n1"
    later = writes.create_task(
        TaskSpec(name="t2", trigger=ManualTrigger(), command="true"),
        disabled=False,
        now_ms=T0 + 2,
        epoch=1,
        origin="n1",
        key="",
    )
    fatal: list[BaseException] = []
    applier = Applier(replica.apply_entry, replica.end_of_tick, on_fatal=fatal.append)
    applier.start()
    try:
        for i, data in enumerate([first, newer.SerializeToString(), later], start=1):
            applier.enqueue(i, data)
        wait_until(lambda: bool(fatal), 10, what="the replica stops on the newer command")
    finally:
        applier.stop()
    assert isinstance(fatal[0], FormatTooNew) and fatal[0].index == 2
    want = (
        f"command format {codec.COMMAND_FORMAT + 1} is newer than this build applies ({codec.COMMAND_FORMAT})"
    )
    assert want in str(fatal[0])
    assert applier.failed is fatal[0]
    # Entry 1 applied; entry 2 is not recorded as applied (a newer build replays it), nor is 3.
    assert replica.last_applied == 1
    assert sorted(state.tasks) == ["t1"]
    assert state.applied_commands == 1


def test_a_raft_snapshot_copy_of_a_newer_state_is_refused_before_the_swap(tmp_path: Path) -> None:
    leader = LmdbStore(tmp_path / "leader", sync=False)
    state = SchedulerState.load(leader)
    spec = TaskSpec(name="t1", trigger=ManualTrigger(), command="true")
    state.apply(writes.create_task(spec, disabled=False, now_ms=T0, epoch=1, origin="n1", key=""))
    meta = pb.Meta.FromString(leader.get(keys.META) or b"")
    meta.state_format = codec.SNAPSHOT_FORMAT + 1  # as a newer leader would write it
    leader.put(keys.META, meta.SerializeToString())
    leader.commit(7)
    copy = tmp_path / "snapshot"
    with open(copy, "wb") as f:
        leader.write_snapshot(f)
    leader.close()

    from raftsched.fsm.snapshot import check_stored_format

    follower = LmdbStore(tmp_path / "follower", sync=False)
    try:
        old = SchedulerState.load(follower)
        old.apply(
            writes.create_task(
                TaskSpec(name="mine", trigger=ManualTrigger(), command="true"),
                disabled=False,
                now_ms=T0,
                epoch=1,
                origin="n2",
                key="",
            )
        )
        follower.commit(3)
        with pytest.raises(SnapshotFormatError, match=f"state has format {codec.SNAPSHOT_FORMAT + 1}"):
            follower.load_snapshot_copy(copy, 0, validate=check_stored_format)
        assert follower.applied_index() == 3  # untouched
        assert follower.get(keys.task_key("mine")) is not None
    finally:
        follower.close()


def test_cross_workflow_dependencies_need_format_6() -> None:
    """An older node would store a workflow's cross-workflow edge and run the task without
    waiting for its upstream; so a command defining one (or warn_after), and the leader's
    WorkflowWaitsDue, are stamped format 6."""
    cmd = pb.Command(epoch=1, now_ms=T0, origin="n1")
    task = cmd.apply_workflow.spec.tasks.add(name="reconcile", command="true")
    plain = pb.Command.FromString(codec.encode_command(pb.Command.FromString(cmd.SerializeToString())))
    task.depends_on.add(workflow="orders-sync")
    edge = pb.Command.FromString(codec.encode_command(cmd))
    due = pb.Command(epoch=1, now_ms=T0, origin="n1")
    due.workflow_waits_due.SetInParent()
    stamped = pb.Command.FromString(codec.encode_command(due))
    assert (plain.format, edge.format, stamped.format) == (1, codec.CROSS_WORKFLOW_FORMAT, 6)


def test_fire_batches_and_result_reports_need_the_batched_prune_format() -> None:
    """Batched pruning changes the history a fire batch or a result report leaves behind, so
    both are stamped 17 (an older node would prune one record at a time and its state would
    differ); other commands keep their oldest format."""
    from tests.support.fsm import report, tick

    assert codec.decode_command(tick("t", 1, T0)).format == codec.BATCHED_PRUNE_FORMAT == 17
    assert codec.decode_command(report(T0, ("t@1", 0, 1, True))).format == codec.BATCHED_PRUNE_FORMAT
    cmd = pb.Command(epoch=1, now_ms=T0, origin="n1")
    cmd.assign_attempts.SetInParent()
    assert pb.Command.FromString(codec.encode_command(cmd)).format == 1


def _named_formats() -> list[int]:
    """Every named command format in codec (``EVENTS_FORMAT`` ...): the newest is COMMAND_FORMAT."""
    skip = ("COMMAND_FORMAT", "SNAPSHOT_FORMAT", "STATE_FORMAT")
    named = vars(codec).items()
    return [v for k, v in named if k.endswith("_FORMAT") and k not in skip and isinstance(v, int)]
