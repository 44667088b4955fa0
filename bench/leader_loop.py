"""The leader's dispatch loop on the columnar hot path, in one process: CPU per attempt.

    python -m bench.leader_loop [--tasks 4000] [--seconds 8] [--executors 2] [--batch 100]
                                [--repeat 1] [--json FILE]

N every-second hot tasks (numbered, one shard, overlap allow: :mod:`raftsched.fsm.hot`) and E
joined executors in a :class:`SchedulerState` over an in-memory store, and a :class:`Dispatcher`
leading it with the columnar bodies allowed, as the leader's event loop runs it at 4,000 tasks
(``bench.profile --target leader``). For each simulated second: FireColumns rows of every task
are applied and their effects (``ReadyColumns``) fed to the dispatcher; then, until nothing
waits or is leased, the dispatcher polls (its AssignColumns are encoded, applied, their effects
fed back and the proposal released), the outbox goes out as one message per executor (a
``WorkBatch``, or with ``--session`` a ``Session``'s ``SessionWork``, definitions once per
executor; serialised, as the stream does), and every attempt reports success in batches of
``--batch`` results per executor (the servicer's id check, :meth:`Dispatcher.report`, the
encoding; the ResultColumns applied and fed back). ``--session``: the work goes out as a
``Session``'s (:func:`raftsched.leader.dispatch.session.encode_work`) and the results come in as
its report does (:meth:`Dispatcher.results_columns`: ids and columns, no result objects).

``dispatcher_us_per_attempt``: ``process_time`` summed over the leader loop's own calls only
(``on_effects``, ``poll``, ``release``, the outbox flush and ``report``, with every read of the
state they make), per attempt started. ``apply_us_per_attempt``: the leader's apply of the same
entries (the effects the state machine builds for the dispatcher included), for reference.
The figure is the least of ``--repeat`` runs. Prints JSON with its provenance.
"""

from __future__ import annotations

import argparse
import random
import time
from collections.abc import Callable
from pathlib import Path
from typing import TypeVar

from bench.common import Provenance
from raftsched import codec
from raftsched.fsm.state import SchedulerState
from raftsched.leader import columns, writes
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.leader.dispatch.session import encode_work
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.leader.dispatch.work import DefKey, Work, work_items
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb

T0 = 1_800_000_000_000  # a whole second
T = TypeVar("T")
ROWS_PER_ENTRY = 1000  # FireColumns rows per entry (the driver's max_fires_per_batch)


def _check_id(exec_id: str) -> tuple[str, int, int]:
    # What the servicer's _check_execution_id does per result (its import path moves with the
    # session work; the check itself is the same few string operations).
    run_id, _, rest = exec_id.partition("/")
    shard, _, attempt = rest.partition("/")
    return run_id, int(shard), int(attempt)


def add_hot_tasks(state: SchedulerState, tasks: int) -> list[str]:
    """Create ``tasks`` every-second tasks (noop handler, overlap allow) in ``state`` before
    ``T0`` and number them (the columnar hot path); return their names. Also bench.driver_plan's."""
    specs = [
        (TaskSpec(f"t{i:06d}", CronTrigger("* * * * * *"), handler="noop", overlap=Overlap.ALLOW), False)
        for i in range(tasks)
    ]
    commands, refused = writes.create_tasks(specs, now_ms=T0 - 2000, epoch=1, origin="n1", key="k")
    if refused:
        raise RuntimeError(f"tasks refused: {refused}")
    for data in [*commands, columns.number_entities(T0 - 1500, 1, "n1")]:
        if not state.apply(data).result.ok:
            raise RuntimeError("the bench's setup was refused")
    return [spec.name for spec, _ in specs]


def run(tasks: int, seconds: int, executors: int, batch: int, session: bool = False) -> dict[str, object]:
    state = SchedulerState.load(MemoryStore())
    names = [f"ex{i + 1}" for i in range(executors)]
    for name in names:
        joined = state.apply(writes.executor_join(name, 10_000, {}, now_ms=T0 - 3000, epoch=1, origin="n1"))
        if not joined.result.ok:
            raise RuntimeError(f"executor {name} refused: {joined.result}")
    task_names = add_hot_tasks(state, tasks)
    with state.view() as v:
        numbers = [v.tasks[name].number for name in task_names]
        if not all(v.tasks[name].hot for name in task_names):
            raise RuntimeError("the bench's tasks are not hot")
    d = Dispatcher(state, DispatchSettings(), random.Random(0))
    d.columns_allowed = lambda: True
    d.become_leader(1, T0 - 1000)
    for name in names:  # each executor found this leader (the steady state: none unconfirmed)
        d.heartbeat(name, [], T0 - 900)
    cpu = 0.0
    apply_cpu = 0.0
    started = 0

    def timed(fn: Callable[..., T], *args: object) -> T:
        nonlocal cpu
        t0 = time.process_time()
        out = fn(*args)
        cpu += time.process_time() - t0
        return out

    def feed(data: bytes, now: int) -> None:
        nonlocal apply_cpu
        t0 = time.process_time()
        applied = state.apply(data)
        apply_cpu += time.process_time() - t0
        if not applied.result.ok:
            raise RuntimeError(f"refused: {applied.result}")
        timed(d.on_effects, applied.effects, now)

    def poll(now: int) -> list[tuple[bytes, object]]:
        return [(p.encode(), p) for p in d.poll(now)]

    defs: dict[str, dict[DefKey, int]] = {name: {} for name in names}  # each session's so far

    def flush() -> dict[str, bytes]:
        # As the hub's flush groups the outbox per executor, and the stream encodes each list:
        # a Session's SessionWork (--session), else a DispatchBatch stream's WorkBatch.
        by_executor: dict[str, list[Work]] = {}
        for executor, item in d.take_work():
            by_executor.setdefault(executor, []).append(item)
        out: dict[str, bytes] = {}
        for executor, items in by_executor.items():
            if session:
                work = encode_work(items, defs[executor], 1)
                out[executor] = pb.SessionDown(work=work).SerializeToString()
            else:
                out[executor] = pb.WorkBatch(items=work_items(items)).SerializeToString()
        return out

    tasks_by_ref: dict[str, dict[int, str]] = {name: {} for name in names}

    def received(executor: str, message: bytes) -> list[str]:
        """The execution ids an executor reads in ``message`` (its side: not timed)."""
        if not session:
            return [item.execution_id for item in pb.WorkBatch.FromString(message).items]
        work = pb.SessionDown.FromString(message).work
        refs = tasks_by_ref[executor]
        for definition in work.defs:
            refs[definition.ref] = definition.task
        ids = [
            f"{refs[ref]}@{nominal}/{shard}/{attempt}"
            for ref, nominal, shard, attempt in zip(
                work.task_ref, work.nominal_ms, work.shard, work.attempt, strict=True
            )
        ]
        return ids + [item.execution_id for item in work.cold]

    def report(executor: str, request: pb.ReportRequest, now: int) -> list[bytes]:
        ids = [_check_id(r.execution_id) for r in request.results]
        if session:  # a Session's report: its successes as columns (Dispatcher.results_columns)
            exec_ids = [r.execution_id for r in request.results]
            durations = [r.duration_ms for r in request.results]
            lateness = [r.start_lateness_ms for r in request.results]
            proposals = d.results_columns(executor, ids, exec_ids, durations, lateness, [], [], now)
        else:
            proposals = d.report(executor, request.results, now, ids)
        return [p.encode() for p in proposals]

    for second in range(1, seconds + 1):
        now = T0 + second * 1000
        for start in range(0, tasks, ROWS_PER_ENTRY):
            cmd = logpb.Command(epoch=1, now_ms=now, origin="n1")
            fc = cmd.fire_columns
            part = numbers[start : start + ROWS_PER_ENTRY]
            fc.task.extend(part)
            fc.version.extend([1] * len(part))
            fc.nominal_delta.extend([0] * len(part))
            fc.next_delta.extend([1000] * len(part))
            feed(codec.encode_command(cmd), now)
        rounds = 0
        while d.waiting or d.leases:
            rounds += 1
            if rounds > 1000:
                raise RuntimeError(f"{len(d.waiting)} wait, {len(d.leases)} leased: no progress")
            for data, proposal in timed(poll, now):
                feed(data, now)
                timed(d.release, proposal)
            sent = {executor: received(executor, message) for executor, message in timed(flush).items()}
            for executor, ids in sorted(sent.items()):
                for start in range(0, len(ids), batch):
                    request = pb.ReportRequest(name=executor)
                    for exec_id in ids[start : start + batch]:
                        request.results.add(
                            execution_id=exec_id, success=True, duration_ms=1, start_lateness_ms=40
                        )
                    started += len(request.results)
                    for data in timed(report, executor, request, now + 50):
                        feed(data, now + 50)
    with state.view() as v:
        if v.active_count:
            raise RuntimeError(f"{v.active_count} runs did not finish")
    per = max(1, started)
    return {
        "tasks": tasks,
        "seconds": seconds,
        "executors": executors,
        "batch": batch,
        "session": session,
        "attempts": started,
        "dispatcher_us_per_attempt": round(cpu / per * 1e6, 2),
        "apply_us_per_attempt": round(apply_cpu / per * 1e6, 2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=4000)
    p.add_argument("--seconds", type=int, default=8)
    p.add_argument("--executors", type=int, default=2)
    p.add_argument("--batch", type=int, default=100, help="results per report")
    p.add_argument("--repeat", type=int, default=1, help="runs; the least disturbed is kept")
    p.add_argument(
        "--session", action="store_true", help="results as a Session's report (Dispatcher.results_columns)"
    )
    p.add_argument("--json", type=Path, help="also write the result here")
    a = p.parse_args()
    provenance = Provenance.start()
    results = [run(a.tasks, a.seconds, a.executors, a.batch, a.session) for _ in range(a.repeat)]
    best = min(results, key=lambda r: float(r["dispatcher_us_per_attempt"]))  # type: ignore[arg-type]
    provenance.emit(best, a.json)


if __name__ == "__main__":
    main()
