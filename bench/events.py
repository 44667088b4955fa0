"""What accepting events costs in apply, and what the dedupe window holds, in one process: no
Raft, no gRPC, no executor (issue 28 §3).

    python -m bench.events [--events 100000] [--dup-percent 10] [--tasks 1000] [--subscribed 1]
                           [--commit-every 64]

A :class:`SchedulerState` over an LMDB store (``sync=False``, as a node opens it) holding
``--tasks`` manual tasks, of which ``--subscribed`` (default 1) subscribe (``on_event``) to the event
emitted. Then ``--events`` EmitEvent entries, one leader millisecond apart, each a new key except
``--dup-percent`` that repeat an earlier key (answered as duplicates). Reported: entries applied
per second (wall and CPU, commits included), runs started, and the dedupe window's footprint:
the ``ev/`` + ``evx/`` records and their bytes in the store, and the process RSS before/after.
Then the leader time jumps past the window and ``--events`` // 10 more emits show the pruning
(``prune_step`` + 1 expired records per emit).
"""

from __future__ import annotations

import argparse
import json
import random
import resource
import tempfile
import time
from pathlib import Path

from bench.common import Provenance
from raftsched.fsm import keys
from raftsched.fsm.records import Retention
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.replica import Replica
from raftsched.storage.lmdb_store import LmdbStore
from raftsched.v1 import log_pb2 as pb

T0 = 1_800_000_000_000
WINDOW = Retention().event_dedupe_ms


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _footprint(store: LmdbStore) -> tuple[int, int]:
    count = size = 0
    with store.reader() as r:
        for prefix in (keys.EVENT, keys.EVENT_EXPIRY):
            for k, v in r.scan(prefix, prefix + keys.END):
                count += 1
                size += len(k) + len(v)
    return count, size


def run(
    events: int, dup_percent: int, tasks: int, subscribed: int, commit_every: int, base: Path
) -> dict[str, object]:
    store = LmdbStore(base / "state", sync=False)
    state = SchedulerState.load(store, Retention())
    replica = Replica(state, store, node_id=None)
    index = 0

    def apply(data: bytes) -> pb.CommandResult:
        nonlocal index
        index += 1
        raw = replica.apply_entry(index, data)
        if index % commit_every == 0:
            replica.end_of_tick()
        return pb.CommandResult.FromString(raw or b"")

    for i in range(tasks):
        on_event = "orders-ready" if i < subscribed else ""
        spec = TaskSpec(f"t{i:05d}", ManualTrigger(), command="true", on_event=on_event)
        assert apply(writes.create_task(spec, disabled=False, now_ms=T0, epoch=1, origin="n1", key="")).ok
    replica.end_of_tick()
    rng = random.Random(7)
    payload = json.dumps({"rows": 1200, "source": "warehouse", "partition": "2026-12-04"})
    rss0 = _rss_mb()
    wall0, cpu0 = time.perf_counter(), time.process_time()
    dups = fresh = 0
    for i in range(events):
        repeat = i and rng.randrange(100) < dup_percent
        key = f"part-{rng.randrange(fresh)}" if repeat else f"part-{fresh}"
        data = writes.emit_event(
            "orders-ready", key, payload, "default", now_ms=T0 + 1 + i, epoch=1, origin="n1", key=f"k{i}"
        )
        res = apply(data)
        assert res.ok
        if res.duplicate:
            dups += 1
        else:
            fresh += 1
    replica.end_of_tick()
    wall, cpu = time.perf_counter() - wall0, time.process_time() - cpu0
    count, size = _footprint(store)
    runs = len(state.runs.active)
    out: dict[str, object] = {
        "events": events,
        "accepted": fresh,
        "duplicates": dups,
        "tasks": tasks,
        "subscribed": subscribed,
        "runs_started": runs,
        "apply_per_s_wall": round(events / wall),
        "apply_per_s_cpu": round(events / cpu),
        "us_per_event_cpu": round(cpu / events * 1e6, 1),
        "window_records": count,
        "window_bytes": size,
        "bytes_per_accepted_event": round(size / max(fresh, 1)),
        "rss_mb_before": round(rss0, 1),
        "rss_mb_after": round(_rss_mb(), 1),
    }
    # Past the window: every emit prunes up to prune_step + 1 expired events.
    later = T0 + WINDOW + events + 10
    for i in range(events // 10):
        data = writes.emit_event(
            "late", f"l{i}", "", "default", now_ms=later + i, epoch=1, origin="n1", key=f"late{i}"
        )
        assert apply(data).ok
    replica.end_of_tick()
    out["after_window_emits"] = events // 10
    out["window_records_after"] = _footprint(store)[0]
    store.close()
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--dup-percent", type=int, default=10)
    parser.add_argument("--tasks", type=int, default=1000)
    parser.add_argument("--subscribed", type=int, default=1)
    parser.add_argument("--commit-every", type=int, default=64)
    args = parser.parse_args()
    prov = Provenance.start()
    with tempfile.TemporaryDirectory() as tmp:
        result = run(args.events, args.dup_percent, args.tasks, args.subscribed, args.commit_every, Path(tmp))
    print(json.dumps({"result": result, "provenance": prov.as_dict()}, indent=2))


if __name__ == "__main__":
    main()
