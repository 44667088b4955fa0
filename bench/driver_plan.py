"""The leader driver's planning in one process, on a manual clock: CPU and instructions per fire.

    python -m bench.driver_plan [--tasks 2000] [--seconds 5] [--record FILE | --replay FILE]

N every-second hot tasks (numbered, overlap allow: FireColumns rows, as the leader plans them at
4,000 tasks) in a :class:`SchedulerState` over an in-memory store, led by a
:class:`LeaderDriver` with the columnar bodies allowed. For each simulated second the driver
plans every due fire (``poll``: wheel advance, planning inputs, next fire, FireColumns build and
encoding), each entry is applied and its effects handed back to the driver (``on_effects``:
the wheel re-armed) and the proposal settled (``on_proposal_committed``).
``driver_us_per_fire`` is ``process_time`` over the driver's own calls only.

For instruction counts (cachegrind, ``PYTHONHASHSEED=0``), the driver's share is the difference
of two runs with the same arguments: a normal one, and ``--replay FILE`` of the entries a
``--record FILE`` run wrote (it applies the same bytes without a driver). ``--record`` also
checks nothing: compare two checkouts' recordings with ``cmp`` (the bytes must not change).
"""

from __future__ import annotations

import argparse
import json
import struct
import time
from pathlib import Path

from bench.leader_loop import T0, add_hot_tasks
from raftsched.fsm.state import SchedulerState
from raftsched.leader.driver import LeaderDriver
from raftsched.storage.memory import MemoryStore


def _setup(tasks: int) -> SchedulerState:
    state = SchedulerState.load(MemoryStore())
    add_hot_tasks(state, tasks)
    return state


def run(tasks: int, seconds: int, record: Path | None = None) -> dict[str, object]:
    state = _setup(tasks)
    driver = LeaderDriver(state, "n1")
    driver.columns_allowed = lambda: True
    barrier = state.apply(driver.become_leader(1, T0 - 1000).data)
    driver.on_effects(barrier.effects)
    if not driver.ready:
        raise RuntimeError("the driver's barrier did not apply")
    out = record.open("wb") if record is not None else None
    cpu = 0.0
    fires = entries = 0
    for s in range(-1, seconds):  # second -1: the first fires (not counted, as a warm-up)
        now = T0 + s * 1000 + 5
        t0 = time.process_time()
        proposals = driver.poll(now)
        spent = time.process_time() - t0
        for p in proposals:
            if out is not None:
                out.write(struct.pack("<I", len(p.data)) + p.data)
            applied = state.apply(p.data)
            t0 = time.process_time()
            driver.on_effects(applied.effects)
            driver.on_proposal_committed(p)
            spent += time.process_time() - t0
            if s >= 0:
                fires += sum(count for _, count in p.fired)
                entries += 1
        if s >= 0:
            cpu += spent
    if out is not None:
        out.close()
    if fires != tasks * seconds:
        raise RuntimeError(f"{fires} fires planned, {tasks * seconds} due")
    return {
        "tasks": tasks,
        "seconds": seconds,
        "fires": fires,
        "entries": entries,
        "driver_us_per_fire": round(cpu / max(fires, 1) * 1e6, 3),
    }


def replay(tasks: int, path: Path) -> dict[str, object]:
    """The same entries applied without a driver (the baseline of the instruction counts)."""
    state = _setup(tasks)
    state.apply(LeaderDriver(state, "n1").become_leader(1, T0 - 1000).data)
    data = path.read_bytes()
    pos = entries = 0
    while pos < len(data):
        (n,) = struct.unpack_from("<I", data, pos)
        pos += 4
        if not state.apply(data[pos : pos + n]).result.ok:
            raise RuntimeError("a replayed entry was refused")
        pos += n
        entries += 1
    return {"tasks": tasks, "entries": entries, "replay": True}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--tasks", type=int, default=2000)
    p.add_argument("--seconds", type=int, default=5)
    g = p.add_mutually_exclusive_group()
    g.add_argument("--record", type=Path, help="also write every proposed entry here")
    g.add_argument("--replay", type=Path, help="apply the entries of a --record run, without a driver")
    a = p.parse_args()
    result = replay(a.tasks, a.replay) if a.replay else run(a.tasks, a.seconds, a.record)
    print(json.dumps(result))


if __name__ == "__main__":
    main()
