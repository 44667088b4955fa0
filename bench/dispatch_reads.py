"""The leader's dispatcher in one process: its CPU per attempt, state applies excluded.

    python -m bench.dispatch_reads [--tasks 4000] [--seconds 10] [--executors 8] [--slots 1000]

N every-second tasks and E joined executors in a :class:`SchedulerState` over an in-memory store,
and a :class:`Dispatcher` leading it. For each simulated second: a FireBatch of every task is
applied and its effects fed to the dispatcher; then, until nothing waits, the dispatcher polls
(its AssignAttempts entries are applied and their effects fed back) and every dispatched attempt
reports success (the dispatcher builds the ReportResults entry; it is applied and fed back).
``process_time`` is summed over the dispatcher's calls only (``poll``, ``on_effects``,
``results``), so the figure is what the dispatcher itself costs per attempt, including every read
of the state it makes (the state views it opens, see raftsched/fsm/view.py). Prints JSON.
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
from raftsched.leader import writes
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb

T0 = 1_800_000_000_000  # a whole second
T = TypeVar("T")


def run(tasks: int, seconds: int, executors: int, slots: int) -> dict[str, object]:
    state = SchedulerState.load(MemoryStore())
    every = CronTrigger("* * * * * *")
    for i in range(tasks):
        spec = TaskSpec(f"t{i:06d}", every, handler="noop", overlap=Overlap.ALLOW, timeout_ms=0)
        state.apply(writes.create_task(spec, disabled=False, now_ms=T0, epoch=1, origin="n1", key=""))
    for i in range(executors):
        cmd = logpb.Command(epoch=1, now_ms=T0, origin="n1")
        cmd.executor_join.name, cmd.executor_join.slots = f"ex{i}", slots
        state.apply(codec.encode_command(cmd))
    d = Dispatcher(state, DispatchSettings(), random.Random(0))
    d.become_leader(1, T0)
    cpu = 0.0
    started = 0

    def timed(fn: Callable[..., T], *args: object) -> T:
        nonlocal cpu
        t0 = time.process_time()
        out = fn(*args)
        cpu += time.process_time() - t0
        return out

    # What the dispatcher decides, encoded as its shell encodes it: the encoding is counted, as it
    # was when the dispatcher itself returned bytes.
    def poll_encoded(now: int) -> list[bytes]:
        return [p.encode() for p in d.poll(now)]

    def report_encoded(executor: str, results: list[pb.ExecResult], now: int) -> bytes | None:
        proposal = d.results(executor, results, now)
        return proposal.encode() if proposal is not None else None

    def feed(data: bytes, now: int) -> None:
        effects = state.apply(data).effects
        timed(d.on_effects, effects, now)

    for second in range(1, seconds + 1):
        now = T0 + second * 1000
        cmd = logpb.Command(epoch=1, now_ms=now, origin="n1")
        cmd.fire_batch.SetInParent()
        for i in range(tasks):
            tf = cmd.fire_batch.tasks.add(
                task=f"t{i:06d}", version=1, watermark_ms=now, next_fire_ms=now + 1000
            )
            tf.fires.add(nominal_ms=now, outcome=logpb.FIRED, count=1)
        feed(codec.encode_command(cmd), now)
        while d.waiting or d.leases:
            for data in timed(poll_encoded, now):
                feed(data, now)
            by_executor: dict[str, list[pb.ExecResult]] = {}
            for executor, item in d.take_outbox():
                by_executor.setdefault(executor, []).append(
                    pb.ExecResult(execution_id=item.execution_id, success=True)
                )
            if not by_executor and d.waiting:
                raise RuntimeError(f"{len(d.waiting)} attempts wait and nothing was dispatched")
            for executor, results in sorted(by_executor.items()):
                started += len(results)
                report = timed(report_encoded, executor, results, now)
                if report is not None:
                    feed(report, now)
    return {
        "tasks": tasks,
        "seconds": seconds,
        "executors": executors,
        "attempts": started,
        "dispatcher_cpu_s": round(cpu, 3),
        "dispatcher_us_per_attempt": round(cpu / max(1, started) * 1e6, 2),
    }


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=4000)
    p.add_argument("--seconds", type=int, default=10)
    p.add_argument("--executors", type=int, default=8)
    p.add_argument("--slots", type=int, default=1000)
    p.add_argument("--json", type=Path, help="also write the result here")
    a = p.parse_args()
    provenance = Provenance.start()
    provenance.emit(run(a.tasks, a.seconds, a.executors, a.slots), a.json)


if __name__ == "__main__":
    main()
