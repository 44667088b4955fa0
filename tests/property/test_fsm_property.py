"""The replicated state machine under random command streams (docs/architecture.md §3
invariants 5 and 7; §8 ring 2).

Commands are drawn against the live state of one replica, so many are meaningful (real run ids,
current versions, batches planned by the real planner) and many are not: invalid specs encoded
straight into protos, malformed fire batches, epochs going up and down, clocks going backwards,
repeated idempotency keys, replayed entries and garbage bytes. Then:

(a) apply never raises (and never reports an internal error), and two fresh replicas fed the same
    log end byte-identical, result by result;
(b) replaying the log into a third fresh replica gives the same snapshot;
(c) ``restore(snapshot())`` is identity: equal digest, and one more command gives equal results.
"""

from __future__ import annotations

from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftsched import codec
from raftsched.errors import InvalidSpec
from raftsched.fsm import keys
from raftsched.fsm import tasks as tasks_mod
from raftsched.fsm.records import Retention
from raftsched.fsm.state import SchedulerState
from raftsched.storage.memory import MemoryStore
from raftsched.timing.schedule import MisfireSettings, plan_fires
from raftsched.v1 import log_pb2 as pb

T0 = 1_700_000_040_000
S = 1000
NAMES = ["a", "b", "c"]
# Small limits, so pruning of fires, runs and idempotency keys happens constantly.
RETENTION = Retention(keep_count=3, keep_ms=20 * S, idempotency_keep_ms=15 * S, prune_step=2)
MISFIRE = MisfireSettings(grace_ms=2 * S, all_cap=2, all_window_ms=10 * S)
KINDS = [
    "create", "create", "update", "delete", "enable", "disable", "trigger", "barrier",
    "planned", "planned", "planned", "planned", "batch", "report", "report", "garbage", "newer", "replay",
]  # fmt: skip


def fresh() -> SchedulerState:
    return SchedulerState.load(MemoryStore(), RETENTION)


CORRUPTIONS = [
    ("shards", 5000),
    ("name", ""),
    ("name", "bad name"),
    ("name", "x" * 130),
    ("cron", "  "),
    ("every_ms", 1500),
    ("every_ms", 0),
    ("at_ms", 0),
    ("misfire", 7),
    ("overlap", 9),
    ("misfire_all_cap", 20_000),
    ("priority", 10),
    ("params_json", "[1]"),
]


@st.composite
def spec_pbs(draw: st.DrawFn) -> pb.TaskSpec:
    """A valid spec, or (30%) one with a single field made invalid (never validated client-side)."""
    msg = pb.TaskSpec(name=draw(st.sampled_from(NAMES)), command="true")
    kind = draw(st.sampled_from(["cron", "cron", "interval", "interval", "once", "manual", "none"]))
    if kind == "cron":
        msg.trigger.cron.expr = draw(st.sampled_from(["* * * * * *", "* * * * * */3", "* * * * *"]))
        msg.trigger.cron.timezone = draw(st.sampled_from(["", "UTC", "Europe/Berlin"]))
    elif kind == "interval":
        msg.trigger.interval.every_ms = draw(st.sampled_from([S, 2 * S, 5 * S]))
        msg.trigger.interval.start_ms = draw(st.sampled_from([0, T0 + S, T0 + 7 * S]))
    elif kind == "once":
        msg.trigger.once.at_ms = draw(st.sampled_from([T0 + 5 * S, T0 + 30 * S]))
    elif kind == "manual":
        msg.trigger.manual.SetInParent()
    msg.shards = draw(st.sampled_from([0, 1, 1, 2, 3]))
    msg.misfire = draw(st.sampled_from([0, 1, 2, 3]))  # type: ignore[assignment]
    msg.overlap = draw(st.sampled_from([0, 1, 2, 2]))  # type: ignore[assignment]
    msg.misfire_all_cap = draw(st.sampled_from([0, 1, 3]))
    msg.params_json = draw(st.sampled_from(["", "", '{"k": 1}']))
    if draw(st.integers(min_value=0, max_value=9)) >= 7:  # (Hypothesis favours small draws)
        field, value = draw(st.sampled_from(CORRUPTIONS))
        if field == "cron":
            msg.trigger.cron.expr = str(value)
        elif field == "every_ms":
            msg.trigger.interval.every_ms = int(value)  # type: ignore[call-overload]
        elif field == "at_ms":
            msg.trigger.once.at_ms = int(value)  # type: ignore[call-overload]
        else:
            setattr(msg, field, value)
    return msg


class Source:
    """Draws the next command from the state of the replica it is given (bytes, as logged)."""

    def __init__(self, data: st.DataObject) -> None:
        self.data = data
        self.now = T0
        self.epoch = 1
        self.log: list[bytes] = []

    def draw(self, strategy: st.SearchStrategy[object]) -> object:
        return self.data.draw(strategy)

    def envelope(self, state: SchedulerState) -> pb.Command:
        # Leader time mostly moves forward; sometimes a stamp lags the committed time. Epochs are
        # mostly the newest, sometimes a new leader's (up), sometimes a deposed leader's (down).
        self.now += self.data.draw(st.sampled_from([0, 100, 1000, 1000, 2500, 7000]))
        now = self.now - self.data.draw(st.sampled_from([0, 0, 0, 0, 3000]))
        self.epoch = max(0, state.max_epoch + self.data.draw(st.sampled_from([0, 0, 0, 0, 0, 0, 1, -1])))
        key = self.data.draw(st.sampled_from(["", "", "", "k1", "k2", "k3"]))
        return pb.Command(epoch=self.epoch, now_ms=now, origin="n1", idempotency_key=key)

    def next_fire(self, cmd: pb.Command) -> int:
        offset = self.data.draw(st.sampled_from([1, 1, 2, 3, 0, -1, -2000]))
        return 0 if offset == 0 else cmd.now_ms + offset * S if offset > -2000 else -5

    def next(self, state: SchedulerState) -> bytes:
        kind = self.data.draw(st.sampled_from(KINDS))
        if kind == "garbage":
            data: bytes = self.data.draw(st.binary(max_size=40))
        elif kind == "replay" and self.log:
            data = self.data.draw(st.sampled_from(self.log))
        else:
            cmd = self.envelope(state)
            self.fill(kind, cmd, state)
            if kind == "newer":
                cmd.format = codec.COMMAND_FORMAT + 1
            data = codec.encode_command(cmd)
        self.log.append(data)
        return data

    def fill(self, kind: str, cmd: pb.Command, state: SchedulerState) -> None:
        draw = self.data.draw
        name = draw(st.sampled_from(NAMES))
        if kind == "create":
            cmd.create_task.spec.CopyFrom(draw(spec_pbs()))
            cmd.create_task.next_fire_ms = self.next_fire(cmd)
            cmd.create_task.disabled = draw(st.booleans())
        elif kind == "update":
            cmd.update_task.spec.CopyFrom(draw(spec_pbs()))
            cmd.update_task.next_fire_ms = self.next_fire(cmd)
            cmd.update_task.expected_version = draw(st.sampled_from([0, 0, 1, 2]))
        elif kind == "delete":
            cmd.delete_task.name = name
        elif kind in ("enable", "disable"):
            cmd.set_enabled.name = name
            cmd.set_enabled.enabled = kind == "enable"
            cmd.set_enabled.next_fire_ms = self.next_fire(cmd)
        elif kind == "trigger":
            cmd.trigger_now.name = name
            cmd.trigger_now.params_json = draw(st.sampled_from(["", '{"x": 2}', "nope"]))
        elif kind in ("barrier", "newer"):
            cmd.barrier.node_id = "n1"
        elif kind == "planned":
            cmd.fire_batch.SetInParent()
            for task in sorted(state.tasks):
                planning = state.task_for_planning(task)
                if planning is None:
                    continue
                spec, version, _, next_fire = planning
                try:
                    tf = plan_fires(spec, version, next_fire, cmd.now_ms, MISFIRE)
                except InvalidSpec:
                    continue
                if tf is not None:
                    cmd.fire_batch.tasks.append(tf)
        elif kind == "batch":
            cmd.fire_batch.SetInParent()
            for _ in range(draw(st.integers(min_value=0, max_value=3))):
                tf = cmd.fire_batch.tasks.add(task=draw(st.sampled_from([*NAMES, "ghost"])))
                tf.version = draw(st.sampled_from([0, 1, 1, 2, 3]))
                for _ in range(draw(st.integers(min_value=0, max_value=3))):
                    f = tf.fires.add(nominal_ms=cmd.now_ms + draw(st.integers(min_value=-8, max_value=2)) * S)
                    f.outcome = draw(st.sampled_from([1, 1, 2, 3, 0, 4, 5, 9]))  # type: ignore[assignment]
                    f.through_ms = draw(st.sampled_from([0, 0, f.nominal_ms + S, f.nominal_ms - S]))
                    f.count = draw(st.sampled_from([0, 1, 2, 7]))
                tf.watermark_ms = cmd.now_ms + draw(st.integers(min_value=-4, max_value=1)) * S
                tf.next_fire_ms = draw(st.sampled_from([0, tf.watermark_ms, tf.watermark_ms + S]))
        elif kind == "report":
            cmd.report_results.SetInParent()
            active = sorted(state.active)
            for _ in range(draw(st.integers(min_value=1, max_value=4))):
                use_active = bool(active) and draw(st.booleans())
                run_id = draw(st.sampled_from(active)) if use_active else f"a@{T0 + S}"
                cmd.report_results.results.add(
                    run_id=run_id,
                    shard=draw(st.sampled_from([0, 0, 1, 2, 7])),
                    attempt=draw(st.sampled_from([1, 1, 1, 0, 2])),
                    success=draw(st.booleans()),
                )


def check_invariants(state: SchedulerState) -> None:
    """Cross-checks that hold after every command, whatever it was."""
    for name, st_ in state.tasks.items():
        lo, hi = keys.per_task_prefix(keys.FIRE, name), keys.per_task_end(keys.FIRE, name)
        records = [pb.FireRecord.FromString(v) for _, v in state.store.scan(lo, hi)]
        assert st_.kept_fires == len(records)
        assert st_.fires_total >= sum(r.count for r in records)
        assert st_.active_runs == sum(1 for run_id in state.active if run_id.rpartition("@")[0] == name)
        for rec in records:
            assert max(rec.nominal_ms, rec.through_ms) <= rec.decided_ms  # never early


@settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(data=st.data(), length=st.integers(min_value=1, max_value=45))
def test_random_streams_replay_to_identical_snapshots(data: st.DataObject, length: int) -> None:
    source = Source(data)
    a, b = fresh(), fresh()
    epochs, times = [], []
    for _ in range(length):
        entry = source.next(a)
        ra, rb = a.apply(entry), b.apply(entry)  # (a) never raises
        assert ra.result.code != "internal", ra.result.message
        assert ra.encode() == rb.encode()
        check_invariants(a)
        epochs.append(a.max_epoch)
        times.append(a.max_now_ms)
    assert epochs == sorted(epochs) and times == sorted(times)  # fencing and time never go back
    assert a.snapshot() == b.snapshot()
    # (b) a third replica replaying the same log
    c = fresh()
    for entry in source.log:
        c.apply(entry)
    assert c.snapshot() == a.snapshot()
    assert c.pending_attempts() == a.pending_attempts()
    assert sorted(c.armed_tasks()) == sorted(a.armed_tasks())
    # (c) restore(snapshot()) is identity, and both go on identically
    d = fresh()
    d.restore(a.snapshot(), applied_index=len(source.log))
    assert d.digest() == a.digest()
    assert d.pending_attempts() == a.pending_attempts()
    for _ in range(2):
        entry = source.next(a)
        assert a.apply(entry).encode() == d.apply(entry).encode()
    assert a.snapshot() == d.snapshot()
    # and so is a restart from a copy of the store (the "disk" outlives the process)
    disk = MemoryStore()
    disk.replace_all(iter(list(a.store.scan(b"", b"\xff\xff"))), a.store.applied_index())
    e = SchedulerState.load(disk, RETENTION)
    assert e.digest() == a.digest()
    entry = source.next(a)
    assert a.apply(entry).encode() == e.apply(entry).encode()


@settings(
    max_examples=100, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large]
)
@given(
    data=st.data(),
    length=st.integers(min_value=1, max_value=40),
    every=st.integers(min_value=1, max_value=4),
)
def test_a_restart_after_any_command_has_the_task_state_of_a_replica_that_never_stopped(
    data: st.DataObject, length: int, every: int
) -> None:
    """Task counters are stored per command (``tc/`` records, replayed on load) and checkpointed
    every few commands (here every ``every``, so checkpoints fall inside the stream): after every
    command a replica loaded from a copy of the store has the same tasks, counters, checkpoint
    position and digest as the one that applied it, and both go on alike."""
    with patch.object(tasks_mod, "CHECKPOINT_EVERY", every), patch.object(tasks_mod, "CHECKPOINT_TASKS", 2):
        source = Source(data)
        a = fresh()
        for _ in range(length):
            a.apply(source.next(a))
            disk = MemoryStore()
            disk.replace_all(iter(list(a.store.scan(b"", b"\xff\xff"))), a.store.applied_index())
            e = SchedulerState.load(disk, RETENTION)
            assert {n: s.record_bytes() for n, s in e.tasks.items()} == {
                n: s.record_bytes() for n, s in a.tasks.items()
            }
            book, again = a.task_book, e.task_book
            assert (again.last_key, again.since_checkpoint) == (book.last_key, book.since_checkpoint)
            held = sum(1 for _ in a.store.scan(keys.TASK_COUNTERS, keys.TASK_COUNTERS + keys.END))
            assert held <= every  # a checkpoint deletes them
            assert e.digest() == a.digest()
        entry = source.next(a)
        assert a.apply(entry).encode() == e.apply(entry).encode()
        assert a.snapshot() == e.snapshot()
