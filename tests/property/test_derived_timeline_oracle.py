"""Derived timelines (stored state format 3) against an oracle that stores every entry.

The oracle is the same build with derived timelines switched off (every new run created with
``timeline_derived`` false, so every ``assigned``, ``started`` and outcome entry is stored, as
format 2 stored them). Random command streams go through every path that leaves the hot shape
after a dispatch the leader sends without reading the run (the assignment's effect carries its
facts): failures with retries left, lost attempts (lease expired, unstarted or not), executors
that die with attempts on them, results from another executor, cancels of pending, running and
finished runs, forced retries of finished runs, manual triggers (with params), buffer_one's held
and released runs, overlap=replace, two-shard runs, and batched pruning (format 17) of a task with
``keep_runs``. After every command:

* both answer byte for byte the same (so their apply chains are equal);
* every stored run reads the same (``queries.stored_run``: its whole timeline, in order);
* the executors a retry avoids (``StateView.tried_executors``, read from the timeline) are the same
  for every unfinished attempt;
* a dispatch built without a copy of its run (``DispatchAttempt.known``) carries the run's
  task version, backfill flag and assignment time;
* a follower (no leader effects) of the derived build holds the same bytes as its leader, and a
  copy of its store loaded mid-stream (a restart, counters replayed from ``tc/`` records, with
  checkpoints every few commands) ends identical.
"""

from __future__ import annotations

import random
from typing import Any
from unittest.mock import patch

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from raftsched import codec
from raftsched.fsm import keys, queries, wire
from raftsched.fsm import tasks as tasks_mod
from raftsched.fsm.effects import AttemptReady, DispatchAttempt
from raftsched.fsm.records import Retention
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb

T0 = 1_700_000_040_000
S = 1000
EVERY = CronTrigger("* * * * * *")
SPECS = (
    TaskSpec("plain", EVERY, command="true"),
    TaskSpec("retry", EVERY, command="true", max_retries=2),
    TaskSpec("same", EVERY, command="true", max_retries=1, retry_elsewhere=False),
    TaskSpec("multi", EVERY, command="true", shards=2, max_retries=1),
    TaskSpec("buffer", EVERY, command="true", overlap=Overlap.BUFFER_ONE),
    TaskSpec("replace", EVERY, command="true", overlap=Overlap.REPLACE, max_retries=1),
    TaskSpec("kept", EVERY, command="true", keep_runs=1, max_retries=1),
)
RETENTION = Retention(keep_count=3)
_real_run_fields = wire.run_fields


def _whole_run_fields(*args: Any, **kwargs: Any) -> bytes:
    """``wire.run_fields`` of a build that stores every timeline entry (never derived)."""
    if len(args) > 6:
        args = (*args[:6], False)
    kwargs.pop("derived", None)
    return _real_run_fields(*args, **kwargs)


def _cmd(now: int) -> pb.Command:
    return pb.Command(epoch=1, now_ms=now, origin="n1")


def _step(
    rng: random.Random, state: SchedulerState, now: int, live: dict[str, bool], fired: dict[str, int]
) -> bytes:
    """One random command, valid (mostly) for ``state``."""
    pending = state.pending_attempts()
    ready = [a for a in pending if isinstance(a, AttemptReady) and a.not_before_ms <= now]
    running = [a for a in pending if isinstance(a, DispatchAttempt)]
    up = [name for name, alive in live.items() if alive]
    roll = rng.random()
    if roll < 0.45 and not (ready and up):
        roll = 0.0  # nothing to assign: fire instead
    elif 0.45 <= roll < 0.75 and not running:
        roll = 0.0  # nothing running: fire instead
    if roll < 0.22:
        cmd = _cmd(now)
        cmd.fire_batch.SetInParent()
        for name in rng.sample([s.name for s in SPECS], rng.randint(1, 3)):
            nominal = max(fired.get(name, 0) + S, now - 3 * S) // S * S
            if nominal > now:
                continue
            fired[name] = nominal
            tf = cmd.fire_batch.tasks.add(
                task=name, version=state.tasks[name].version, watermark_ms=nominal, next_fire_ms=nominal + S
            )
            tf.fires.add(nominal_ms=nominal, outcome=pb.FIRED)
        return codec.encode_command(cmd)
    if roll < 0.45 and ready and up:
        cmd = _cmd(now)
        cmd.assign_attempts.SetInParent()
        for a in rng.sample(ready, min(len(ready), rng.randint(1, 3))):
            cmd.assign_attempts.assignments.add(
                run_id=a.run_id, shard=a.shard, attempt=a.attempt, executor=rng.choice(up)
            )
        return codec.encode_command(cmd)
    if roll < 0.75 and running:
        cmd = _cmd(now)
        cmd.report_results.SetInParent()
        for d in rng.sample(running, min(len(running), rng.randint(1, 3))):
            other = rng.random() < 0.1
            r = cmd.report_results.results.add(
                run_id=d.run_id,
                shard=d.shard,
                attempt=d.attempt,
                executor=rng.choice(["ex1", "ex2", ""]) if other else d.executor,
            )
            kind = rng.random()
            if kind < 0.5:
                r.success = True
            elif kind < 0.8:
                r.error, r.exit_code = rng.choice([("boom", 1), ("x" * 300, 2), ("", -9)])
                r.timed_out = rng.random() < 0.3
                r.retry_at_ms = now + rng.choice([0, 2000])
            else:
                r.lost, r.unstarted, r.error, r.retry_at_ms = True, rng.random() < 0.5, "lease expired", now
            if not r.lost:
                if rng.random() < 0.7:
                    r.start_lateness_ms = rng.choice([0, 3, 250, -5])
                r.duration_ms = rng.choice([0, 7, 1234])
        return codec.encode_command(cmd)
    if roll < 0.79:
        stored = [pb.Run.FromString(v).run_id for _, v in state.store.scan(keys.RUN, keys.RUN + keys.END)]
        if stored:
            return writes.cancel_runs(
                [rng.choice(stored)], rng.choice(["", "by hand"]), now_ms=now, epoch=1, origin="n1", key=""
            )[0]
    if roll < 0.85:
        done = [
            run_id
            for run_id in (
                pb.Run.FromString(v).run_id for _, v in state.store.scan(keys.RUN, keys.RUN + keys.END)
            )
            if run_id not in state.active
        ]
        if done:
            return writes.retry_run(rng.choice(done), now_ms=now, epoch=1, origin="n1", key="")
    if roll < 0.89:
        name = rng.choice(SPECS).name
        return writes.trigger_now(
            name, rng.choice(["", '{"a": 1}']), now_ms=now, epoch=1, origin="n1", key=""
        )
    if roll < 0.94 and up:
        name = rng.choice(up)
        cmd = _cmd(now)
        cmd.executor_leave.name, cmd.executor_leave.dead, cmd.executor_leave.retry_at_ms = name, True, now
        cmd.executor_leave.unstarted.extend(
            f"{a.run_id}/{a.shard}/{a.attempt}" for a in running if a.executor == name and rng.random() < 0.5
        )
        live[name] = False
        return codec.encode_command(cmd)
    down = [name for name, alive in live.items() if not alive] or ["ex1"]
    name = rng.choice(down)
    live[name] = True
    cmd = _cmd(now)
    cmd.executor_join.name, cmd.executor_join.slots = name, 8
    return codec.encode_command(cmd)


def _views(state: SchedulerState) -> dict[str, pb.Run]:
    with state.store.reader() as r:
        ids = [pb.Run.FromString(v).run_id for _, v in r.scan(keys.RUN, keys.RUN + keys.END)]
        return {run_id: run for run_id in ids if (run := queries.stored_run(r, run_id)) is not None}


def _tried(state: SchedulerState) -> dict[tuple[str, int], frozenset[str]]:
    with state.view() as v:
        return {
            (a.run_id, a.shard): v.tried_executors(a.run_id, a.shard, a.attempt) for a in v.pending_attempts()
        }


def _check_known_dispatches(state: SchedulerState, effects: tuple[Any, ...]) -> None:
    """A dispatch sent without a copy of its run carries exactly the run's facts it stands for."""
    for eff in effects:
        if not isinstance(eff, DispatchAttempt):
            continue
        run = state.active_run(eff.run_id)
        assert run is not None
        shard = run.shards[eff.shard]
        assert (shard.attempt, shard.executor, shard.state) == (eff.attempt, eff.executor, pb.RUNNING)
        assert eff.known == (not (run.command or run.params_json or run.env))
        if eff.known:
            assert (eff.task_version, eff.backfill, eff.assigned_ms) == (
                run.task_version,
                run.backfill,
                shard.assigned_ms,
            )


@settings(max_examples=20, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 2**32 - 1), restart_at=st.integers(0, 239))
def test_derived_timelines_answer_and_read_as_the_whole_ones(seed: int, restart_at: int) -> None:
    rng = random.Random(seed)
    derived = SchedulerState.load(MemoryStore(), RETENTION)
    follower = SchedulerState.load(MemoryStore(), RETENTION)
    whole = SchedulerState.load(MemoryStore(), RETENTION)
    commands = [
        writes.create_task(spec, disabled=False, now_ms=T0, epoch=1, origin="n1", key="") for spec in SPECS
    ]
    live: dict[str, bool] = {}
    for name in ("ex1", "ex2", "ex3"):
        cmd = _cmd(T0)
        cmd.executor_join.name, cmd.executor_join.slots = name, 8
        commands.append(codec.encode_command(cmd))
        live[name] = True
    fired: dict[str, int] = {}
    now = T0
    with patch.object(tasks_mod, "CHECKPOINT_EVERY", 5), patch.object(tasks_mod, "CHECKPOINT_TASKS", 3):
        for i in range(240):
            if i >= len(commands):
                now += rng.choice([1, 5, 50, 300, S])
                commands.append(_step(rng, derived, now, live, fired))
            data = commands[i]
            got = derived.apply(data)
            assert follower.apply(data, leader_effects=False).encode() == got.encode()
            with patch.object(wire, "run_fields", _whole_run_fields):
                want = whole.apply(data)
            assert got.encode() == want.encode(), f"command {i}: {got.result} != {want.result}"
            _check_known_dispatches(derived, got.effects)
            assert _views(derived) == _views(whole), f"after command {i}"
            assert _tried(derived) == _tried(whole), f"after command {i}"
            assert derived.digest() == follower.digest(), f"after command {i}"
            if i == restart_at:
                store = MemoryStore()
                store.replace_all(iter(list(follower.store.scan(b"", keys.END))), 0)
                follower = SchedulerState.load(store, RETENTION)
    assert any(
        run.timeline_derived for run in (pb.Run.FromString(v) for v in derived.active.values())
    ) or any(
        pb.Run.FromString(v).timeline_derived for _, v in derived.store.scan(keys.RUN, keys.RUN + keys.END)
    ), "no run kept a derived timeline: the stream never took the hot shape"
