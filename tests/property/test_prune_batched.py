"""Batched, keys-only history pruning (issue 31 P4) under random command streams.

A task fires and its runs finish in a random order (some never finish); the commands are stamped
with the batched format, or the format before it up to a point (a cluster upgraded mid-stream),
so both rules and the switch from one to the other are covered. After every command, on two
replicas fed the same log:

* a task keeps at least ``min(keep_count, finished so far)`` and at most
  ``keep_count + PRUNE_BATCH`` finished runs, and as many fire records by the same bounds;
* ``kept_runs`` / ``kept_fires`` count exactly what is stored;
* no unfinished run is ever pruned;
* the replicas are byte-identical, and a third one loaded from the first one's store mid-stream
  (a restart) ends identical too.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftsched import codec
from raftsched.fsm import keys
from raftsched.fsm.records import PRUNE_BATCH, PRUNE_MAX, Retention, count_excess
from raftsched.fsm.state import SchedulerState
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import T0, S, apply, create, fresh, record, report, tick

OLD = codec.BATCHED_PRUNE_FORMAT - 1


@given(kept=st.integers(0, 20_000), keep=st.integers(1, 5_000))
def test_the_count_rule_keeps_between_keep_count_and_keep_count_plus_a_batch(kept: int, keep: int) -> None:
    n = count_excess(kept, keep)
    if kept <= keep + PRUNE_BATCH:
        assert n == 0
    else:
        assert 0 < n <= PRUNE_MAX
        assert kept - n >= keep  # never below the keep count
        assert kept - n == keep or n == PRUNE_MAX  # down to it, unless the backlog is larger


def _stamp(data: bytes, fmt: int) -> bytes:
    cmd = codec.decode_command(data)
    cmd.format = fmt
    return codec.encode_command(cmd)


def _stored(state: SchedulerState, kind: bytes) -> list[bytes]:
    return [k for k, _ in state.store.scan(keys.per_task_prefix(kind, "t"), keys.per_task_end(kind, "t"))]


def _copy(state: SchedulerState, retention: Retention) -> SchedulerState:
    store = MemoryStore()
    store.replace_all(iter(list(state.store.scan(b"", keys.END))), 0)
    return SchedulerState.load(store, retention)


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    keep=st.integers(1, 4),
    steps=st.lists(
        st.sampled_from(["fire", "fire", "finish", "finish", "finish_oldest"]),
        min_size=220,
        max_size=400,
    ),
    data=st.data(),
)
def test_batched_pruning_keeps_its_bounds_and_replicas_agree(
    keep: int, steps: list[str], data: st.DataObject
) -> None:
    retention = Retention(keep_count=keep)
    spec = TaskSpec("t", CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, command="true")
    a, b = fresh(retention), fresh(retention)
    for state in (a, b):
        assert create(state, spec).ok
    replicas = [a, b]
    restart_at = data.draw(st.integers(0, len(steps) - 1), label="restart_at")
    # Commands before this step are of the format before batched pruning (an upgrade: the old
    # leader's, then the upgraded one's); 0: every command is batched.
    upgrade_at = data.draw(st.sampled_from([0, 0, len(steps) // 4, len(steps) // 2]), label="upgrade_at")
    for i, op in enumerate(steps):
        fmt = codec.BATCHED_PRUNE_FORMAT if i >= upgrade_at else OLD
        now = T0 + (i + 1) * S
        unfinished = sorted(a.active)
        if op == "fire" or not unfinished:
            cmd = tick("t", 1, now)
        else:
            pick = 0 if op == "finish_oldest" else data.draw(st.integers(0, len(unfinished) - 1))
            cmd = report(now, (unfinished[pick], 0, 1, data.draw(st.booleans())))
        cmd = _stamp(cmd, fmt)
        for state in replicas:
            assert apply(state, cmd).ok
        if i == restart_at:
            replicas.append(_copy(a, retention))
        rec = record(a, "t")
        runs = _stored(a, keys.RUN)
        active = {keys.run_key_for_id(run_id) for run_id in a.active}
        assert active <= set(runs), "an unfinished run was pruned"
        kept_runs = len(runs) - len(active)
        assert kept_runs == rec.kept_runs
        assert min(keep, rec.runs_total - rec.active_runs) <= kept_runs <= keep + PRUNE_BATCH
        fires = _stored(a, keys.FIRE)
        assert len(fires) == rec.kept_fires
        assert min(keep, rec.fires_total) <= len(fires) <= keep + PRUNE_BATCH
        assert a.digest() == b.digest()
    assert len({state.snapshot() for state in replicas}) == 1
    for k in _stored(a, keys.RUN):  # what is stored and not active is finished
        if keys.run_id_from_key(keys.RUN, k) not in a.active:
            assert pb.Run.FromString(a.store.get(k) or b"").state in (pb.SUCCEEDED, pb.FAILED, pb.CANCELLED)
