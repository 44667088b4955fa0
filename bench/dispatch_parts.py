"""What each step the leader's dispatch hot loop stopped doing per attempt cost (issue 31, P3).

    python -m bench.dispatch_parts [--tasks 1000] [--repeat 5]

In one process, on this checkout's code, CPU time (``process_time``, the least of ``--repeat``
runs) per attempt of the work each change removed, beside what replaced it:

* ``ring_owner``: the ring's owner of (task, shard), an md5 and a walk of the ring
  (``ShardRing.owner``), against the placement's cached owner;
* ``task_spec``: the spec parsed from the task record under the state lock (``spec_for``), against
  the dispatcher's spec kept per version (and its work-item fields);
* ``run_copy``: a copy of the run (``active_run``: a Run parse), which a plain task's dispatch no
  longer reads;
* ``work_item``: the work item built with seven arguments and six assignments, against one call
  with the spec's fields kept;
* ``retry_at``: a retry time drawn for a success (no longer drawn);
* ``split_id``: the second split of a reported execution id (no longer split twice);
* ``commit_lateness``: a committed batch of 1,000 fires of one nominal time recorded fire by fire
  (a tuple and a histogram bisect each), against one run-length entry;
* ``stream_queue``: a work item put on and taken off an executor stream's ``asyncio.Queue``
  one by one, against one list per flush (30 items a flush here);
* ``release``: the assignments read back from a proposal's command, against the list kept;
* ``lease_timer_us_per_tick``: the timer's look at every lease on each tick (all of the fire's
  attempts leased, none due), against its check of the bound before one may be due.

Prints JSON: each part's ``before_us`` and ``after_us`` per attempt (per fire for the lateness).
"""

from __future__ import annotations

import argparse
import asyncio
import random
import timeit
from collections.abc import Callable
from pathlib import Path
from time import process_time

from bench.common import Provenance
from raftsched import codec
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.leader.dispatch.dispatcher import Dispatcher, _item_fields
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.model import CronTrigger, Overlap, TaskSpec, execution_id
from raftsched.observability.lateness import LatenessLog
from raftsched.observability.metrics import Histogram
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb

T0 = 1_800_000_000_000


def _cpu_us(fn: Callable[[], object], per_call: int, repeat: int, number: int = 20) -> float:
    """Least CPU µs per item over ``repeat`` runs of ``number`` calls of ``fn`` (``per_call``
    items each)."""
    best = min(timeit.Timer(fn, timer=process_time).repeat(repeat=repeat, number=number))
    return round(best / number / per_call * 1e6, 3)


def run(tasks: int, repeat: int) -> dict[str, object]:
    state = SchedulerState.load(MemoryStore())
    names = [f"t{i:06d}" for i in range(tasks)]
    every = CronTrigger("* * * * * *")
    for name in names:
        task = TaskSpec(name, every, handler="noop", overlap=Overlap.ALLOW, timeout_ms=0)
        state.apply(writes.create_task(task, disabled=False, now_ms=T0, epoch=1, origin="n1", key=""))
    for i in range(2):
        cmd = logpb.Command(epoch=1, now_ms=T0, origin="n1")
        cmd.executor_join.name, cmd.executor_join.slots = f"ex{i}", 10_000
        state.apply(codec.encode_command(cmd))
    d = Dispatcher(state, DispatchSettings(), random.Random(0))
    d.become_leader(1, T0)
    fire = logpb.Command(epoch=1, now_ms=T0 + 1000, origin="n1")
    for name in names:
        tf = fire.fire_batch.tasks.add(task=name, version=1, watermark_ms=T0 + 1000, next_fire_ms=T0 + 2000)
        tf.fires.add(nominal_ms=T0 + 1000, outcome=logpb.FIRED, count=1)
    d.on_effects(state.apply(codec.encode_command(fire)).effects, T0 + 1000)
    [assign] = d.poll(T0 + 1000)
    d.on_effects(state.apply(assign.encode()).effects, T0 + 1000)  # every attempt leased
    d.take_outbox()
    run_ids = [f"{name}@{T0 + 1000}" for name in names]
    exec_ids = [execution_id(r, 0, 1) for r in run_ids]
    term = d.term
    assert term is not None
    placement = term.placement
    out: dict[str, dict[str, float]] = {}

    def part(name: str, before: Callable[[], object], after: Callable[[], object], per_call: int) -> None:
        out[name] = {
            "before_us": _cpu_us(before, per_call, repeat),
            "after_us": _cpu_us(after, per_call, repeat),
        }

    with state.view() as v:
        ring = placement.ring
        part(
            "ring_owner",
            lambda: [ring.owner(name, 0) for name in names],
            # The placement's own lookup, as it runs per attempt (a private method, on purpose).
            lambda: [placement._owner(v, name, 0) for name in names],  # noqa: SLF001
            tasks,
        )
        part(
            "task_spec",
            lambda: [_item_fields(v.spec_for(name, 1)) for name in names],
            lambda: [d._spec(v, name, 1) for name in names],  # noqa: SLF001 (the dispatcher's own lookup)
            tasks,
        )
        part("run_copy", lambda: [v.active_run(r) for r in run_ids], lambda: None, tasks)
    spec = state.spec_for(names[0], 1)
    fields = _item_fields(spec)

    def item_before() -> pb.WorkItem:
        item = pb.WorkItem(
            execution_id=exec_ids[0],
            run_id=run_ids[0],
            task=names[0],
            nominal_ms=T0,
            shard=0,
            attempt=1,
            epoch=1,
        )
        assert spec is not None
        item.shards = spec.shards or 1
        item.command = spec.command
        item.handler = spec.handler
        item.params_json = spec.params_json
        item.timeout_ms = spec.timeout_ms
        item.runner = spec.runner
        return item

    def item_after() -> pb.WorkItem:
        return pb.WorkItem(
            execution_id=exec_ids[0],
            run_id=run_ids[0],
            task=names[0],
            nominal_ms=T0,
            shard=0,
            attempt=1,
            epoch=1,
            **fields,
        )

    part(
        "work_item",
        lambda: [item_before() for _ in range(100)],
        lambda: [item_after() for _ in range(100)],
        100,
    )
    part("retry_at", lambda: [d.retry_at(1, T0) for _ in range(1000)], lambda: None, 1000)

    def split(exec_id: str) -> tuple[str, int, int]:
        run_id, _, rest = exec_id.partition("/")
        shard, _, attempt = rest.partition("/")
        return run_id, int(shard), int(attempt)

    part("split_id", lambda: [split(e) for e in exec_ids], lambda: None, tasks)
    nominals = [T0] * 1000
    runs = [(T0, 1000)]
    per_fire_log, rle_log = LatenessLog(), LatenessLog()
    per_fire_h = Histogram("raftsched_before_seconds", "fire by fire")
    rle_h = Histogram("raftsched_after_seconds", "run-length encoded")

    def lateness_before() -> None:
        samples = [(n, T0 + 40 - n) for n in nominals]  # what the commit callback built
        for nominal, late in samples:  # LatenessLog.record_many's deque entries, one per fire
            per_fire_log.record(nominal, late)
        per_fire_h.observe_many(late / 1000.0 for _, late in samples)

    def lateness_after() -> None:
        entries = [(n, T0 + 40 - n, count) for n, count in runs]
        rle_log.record_runs(entries)
        rle_h.observe_counted((late / 1000.0, count) for _, late, count in entries)

    part("commit_lateness", lateness_before, lateness_after, 1000)
    queue: asyncio.Queue[object] = asyncio.Queue()
    items = [pb.WorkItem(execution_id=e) for e in exec_ids[:30]]

    def queue_before() -> None:
        for item in items:
            queue.put_nowait(item)
        while not queue.empty():
            queue.get_nowait()

    def queue_after() -> None:
        queue.put_nowait(list(items))
        while not queue.empty():
            queue.get_nowait()

    part("stream_queue", queue_before, queue_after, len(items))
    part(
        "release",
        lambda: [((a.run_id, a.shard), a.executor) for a in assign.command.assign_attempts.assignments],
        lambda: list(assign.assigned),
        max(1, len(assign.assigned)),
    )
    # The lease timer, per tick (20 a second, plus one per batch of new attempts) with every
    # attempt of the fire leased and none due: every lease looked at, against the bound's check.
    leases = d.leases if d.leases else {}
    holdings = term.holdings

    def scan_before() -> list[str]:
        return [
            e
            for e, lease in list(leases.items())
            if lease.expires_ms <= T0 or (lease.deadline_ms and lease.deadline_ms <= T0)
        ]

    lease_scan = {
        "leases": len(leases),
        "before_us": _cpu_us(scan_before, 1, repeat),
        "after_us": _cpu_us(lambda: holdings.due(T0), 1, repeat),
    }
    total_before = round(sum(p["before_us"] for k, p in out.items() if k != "commit_lateness"), 2)
    total_after = round(sum(p["after_us"] for k, p in out.items() if k != "commit_lateness"), 2)
    return {
        "tasks": tasks,
        "parts_us_per_attempt": out,
        "event_loop_parts_total_us_per_attempt": {"before": total_before, "after": total_after},
        "lease_timer_us_per_tick": lease_scan,
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=1000)
    p.add_argument("--repeat", type=int, default=5)
    p.add_argument("--json", type=Path, help="also write the result here")
    a = p.parse_args()
    provenance = Provenance.start()
    provenance.emit(run(a.tasks, a.repeat), a.json)


if __name__ == "__main__":
    main()
