"""What one long attempt among many short ones costs the hot slot table, with and without the
leader's PromoteHotRuns (command format 19), in the state machine alone (no Raft, no gRPC).

    python -m bench.pinned_slots [--tasks 4000] [--seconds 120] [--json FILE]

N every-second hot tasks (10 finished runs kept per task) and one hot task whose single attempt
starts in the first second and runs past the end, in a :class:`SchedulerState` over a memory
store. Each simulated second
applies, as the leader would propose them, one FireColumns of the second's fires (at most 1,000
rows an entry), their AssignColumns and their ResultColumns (every short attempt succeeds within
the second). The slot table is trimmed only at its head, so the long attempt keeps every later
slot; with promotion on, after each second the leader's check (``HotBook.promote_bound``) is asked
and its PromoteHotRuns applied when one is due, as ``LeaderDriver`` does.

Each mode runs in its own child process (so their memory does not mix); printed per mode: slots
left in the table, the process's peak RSS, the bytes and time of one hot checkpoint at the end,
and the apply CPU per attempt. Both in the same run: compare them, not the absolute figures.
"""

from __future__ import annotations

import argparse
import json
import resource
import subprocess
import sys
import time
from pathlib import Path

from bench.common import Provenance
from raftsched import codec
from raftsched.fsm import hot, keys
from raftsched.fsm.records import Retention
from raftsched.fsm.state import SchedulerState
from raftsched.leader import columns, writes
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb

T0 = 1_700_000_000_000
S = 1000
ROWS = 1000  # rows per columns entry, as the leader splits them


def _cmd(now: int) -> pb.Command:
    return pb.Command(epoch=1, now_ms=now, origin="n1")


def _apply(state: SchedulerState, cmd: pb.Command) -> pb.CommandResult:
    res = state.apply(codec.encode_command(cmd)).result
    if not res.ok:
        raise RuntimeError(f"{cmd.WhichOneof('body')} refused: {res.code}: {res.message}")
    return res


def setup(tasks: int) -> SchedulerState:
    # History kept short (10 runs a task), so the store holds what the slot table does not and
    # the figures are the table's (a memory store's inserts slow down with its size).
    state = SchedulerState.load(MemoryStore(), Retention(keep_count=10))
    specs = [TaskSpec("long", CronTrigger("0 0 1 1 *"), command="long", overlap=Overlap.ALLOW)]
    specs += [
        TaskSpec(f"t{i:05d}", CronTrigger("* * * * * *"), command="x", overlap=Overlap.ALLOW)
        for i in range(tasks)
    ]
    commands, refused = writes.create_tasks(
        [(s, False) for s in specs], now_ms=T0, epoch=1, origin="n1", key="k"
    )
    assert not refused
    for data in commands:
        assert state.apply(data).result.ok
    for name in ("ex1", "ex2"):
        join = _cmd(T0)
        join.executor_join.name, join.executor_join.slots = name, 10_000
        _apply(state, join)
    assert state.apply(columns.number_entities(T0, 1, "n1")).result.ok
    return state


def run(tasks: int, seconds: int, promote: bool) -> dict[str, object]:
    state = setup(tasks)
    numbers = {name: st.number for name, st in state.tasks.items()}
    versions = {st.number: st.version for st in state.tasks.values()}
    short = [numbers[f"t{i:05d}"] for i in range(tasks)]
    long_no = numbers["long"]
    cpu = 0.0
    promoted = promotions = 0
    for k in range(1, seconds + 1):
        at = T0 + k * S
        rows = short + ([long_no] if k == 1 else [])
        t = time.process_time()
        for i in range(0, len(rows), ROWS):
            part = rows[i : i + ROWS]
            seq = state.hot.next_seq
            fire = _cmd(at)
            fc = fire.fire_columns
            fc.task.extend(part)
            fc.version.extend(versions[n] for n in part)
            fc.nominal_delta.extend([0] * len(part))
            fc.next_delta.extend([S] * len(part))
            _apply(state, fire)
            seqs = list(range(seq, seq + len(part)))
            assign = _cmd(at + 1)
            ac = assign.assign_columns
            ac.seq.extend(seqs)
            ac.shard.extend([0] * len(seqs))
            ac.attempt.extend([1] * len(seqs))
            ac.executor.extend(1 + (j % 2) for j in range(len(seqs)))
            _apply(state, assign)
            done = [(s, n) for s, n in zip(seqs, part, strict=True) if n != long_no]
            result = _cmd(at + 2)
            rc = result.result_columns
            rc.seq.extend(s for s, _ in done)
            rc.attempt.extend([1] * len(done))
            rc.executor.extend(1 + ((s - seq) % 2) for s, _ in done)
            rc.duration_ms.extend([1] * len(done))
            rc.lateness_ms.extend([1] * len(done))
            _apply(state, result)
        if promote and (bound := state.hot.promote_bound()):
            cmd = _cmd(at + 3)
            cmd.promote_hot_runs.before_seq = bound
            promoted += _apply(state, cmd).accounted
            promotions += 1
        cpu += time.process_time() - t
    attempts = seconds * tasks + 1
    t = time.perf_counter()
    state.hot.checkpoint(state.store.applied_index())
    checkpoint_s = time.perf_counter() - t
    checkpoint = state.store.get(keys.HOT_SLOTS_KEY) or b""
    return {
        "promote": promote,
        "attempts": attempts,
        "slots_in_table": len(state.runs.slots),
        "oldest_live_seq": state.runs.slots.oldest_live(),
        "next_seq": state.hot.next_seq,
        "promote_hot_runs_applied": promotions,
        "runs_promoted": promoted,
        "peak_rss_mb": round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024, 1),
        "checkpoint_bytes": len(checkpoint),
        "checkpoint_ms": round(checkpoint_s * 1000, 2),
        "apply_cpu_us_per_attempt": round(cpu / attempts * 1e6, 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=4000)
    ap.add_argument("--seconds", type=int, default=120)
    ap.add_argument("--json", type=Path)
    ap.add_argument("--child", choices=["on", "off"], help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.child:
        print(json.dumps(run(args.tasks, args.seconds, args.child == "on")))
        return 0
    provenance = Provenance.start()
    modes = {}
    for mode in ("off", "on"):
        out = subprocess.run(
            [
                sys.executable,
                "-m",
                "bench.pinned_slots",
                "--tasks",
                str(args.tasks),
                "--seconds",
                str(args.seconds),
                "--child",
                mode,
            ],
            check=True,
            capture_output=True,
            text=True,
        )
        modes[mode] = json.loads(out.stdout.strip().splitlines()[-1])
    off, on = modes["off"], modes["on"]
    result = {
        "tasks": args.tasks,
        "seconds": args.seconds,
        "max_hot_span": hot.MAX_HOT_SPAN,
        "promote_batch": hot.PROMOTE_BATCH,
        "without_promotion": off,
        "with_promotion": on,
        "ratios_on_over_off": {
            key: round(on[key] / off[key], 3) if off[key] else None
            for key in (
                "slots_in_table",
                "peak_rss_mb",
                "checkpoint_bytes",
                "checkpoint_ms",
                "apply_cpu_us_per_attempt",
            )
        },
    }
    provenance.emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
