"""What a long per-task retention costs: RSS and LMDB store size with up to 1,000,000 stored runs.

    python -m bench.retention [--tasks 100] [--minutes 10080] [--keep-for 7d] [--every 1000]
                              [--json FILE]

N every-minute cron tasks with ``keep_for`` (issue 29 §5: an every-minute task keeping 7 days
instead of the cluster's 1,000 runs) in one :class:`SchedulerState` over an LMDB store
(``sync=False``, as a node opens it), filled **through apply**, as a replica would: for each
simulated minute one FireBatch (a fire of every task), one AssignAttempts and one ReportResults
(every run succeeds), then a commit. Finished runs live in LMDB only; the state keeps the
unfinished ones in memory, so RSS should not grow with what is stored, while the store does.

Every ``--every`` minutes, and at the end, it prints one JSON line: runs stored (the tasks'
``kept_runs``), fire records stored, the process RSS (``VmRSS``) and its peak (``VmHWM``), split
into the heap (``RssAnon``) and pages of the memory-mapped store (``RssFile``, reclaimable), the
store's ``data.mdb`` size (apparent and allocated on disk), and bytes on disk per stored run.
``--minutes`` x ``--tasks`` is the number of runs created; past ``--keep-for`` the oldest are
pruned in apply, so the stored count levels off at ``tasks x keep_for / 1 min``.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from pathlib import Path

from bench.common import Provenance
from raftsched import codec
from raftsched.fsm.executors import MAX_EXECUTOR_SLOTS
from raftsched.fsm.records import Retention
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.storage.lmdb_store import LmdbStore
from raftsched.timing.durations import parse_duration_ms
from raftsched.v1 import log_pb2 as pb

T0 = 1_800_000_000_000 - 1_800_000_000_000 % 60_000  # a whole minute
MINUTE = 60_000


def _status(field: str) -> int:
    """A ``VmRSS``-style line of /proc/self/status, in bytes."""
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(field + ":"):
                return int(line.split()[1]) * 1024
    return 0


def _store_size(path: Path) -> tuple[int, int]:
    """(apparent bytes, allocated bytes) of the store's data file."""
    st = os.stat(path / "state" / "data.mdb")
    return st.st_size, st.st_blocks * 512


class _Filler:
    def __init__(self, path: Path) -> None:
        self.path = path
        self.store = LmdbStore(path, sync=False)
        self.state = SchedulerState.load(self.store, Retention())
        self.index = 0

    def apply(self, data: bytes) -> pb.CommandResult:
        self.index += 1
        applied = self.state.apply(data, leader_effects=False)
        result = applied.result
        if not result.ok or result.refused:
            raise RuntimeError(f"entry {self.index} refused: {result}")
        return result

    def commit(self) -> None:
        self.store.commit(self.index)


def _command(now_ms: int) -> pb.Command:
    return pb.Command(epoch=1, now_ms=now_ms, origin="n1")


def run(tasks: int, minutes: int, keep_for_ms: int, every: int, base: Path) -> dict[str, object]:
    f = _Filler(base / "store")
    f.apply(writes.executor_join("ex1", MAX_EXECUTOR_SLOTS, {}, now_ms=T0 - 3000, epoch=1, origin="n1"))
    names = [f"minutely-{i:05d}" for i in range(tasks)]
    specs = [
        (
            TaskSpec(
                name, CronTrigger("* * * * *"), command="true", overlap=Overlap.ALLOW, keep_for_ms=keep_for_ms
            ),
            False,
        )
        for name in names
    ]
    commands, refused = writes.create_tasks(specs, now_ms=T0 - 2000, epoch=1, origin="n1", key="k")
    if refused:
        raise RuntimeError(f"tasks refused: {refused}")
    for data in commands:
        f.apply(data)
    f.commit()
    rss0 = _status("VmRSS")
    started = time.monotonic()
    rows: list[dict[str, object]] = []

    def sample(minute: int) -> dict[str, object]:
        runs = fires = 0
        for name in names:
            st = f.state.tasks[name]
            runs += st.kept_runs
            fires += st.kept_fires
        apparent, allocated = _store_size(f.path)
        row: dict[str, object] = {
            "minute": minute,
            "runs_created": minute * tasks,
            "runs_stored": runs,
            "fires_stored": fires,
            "rss_mb": round(_status("VmRSS") / 2**20, 1),
            "rss_peak_mb": round(_status("VmHWM") / 2**20, 1),
            # RSS counts the LMDB map's pages the process touched (RssFile): the heap is RssAnon.
            "rss_anon_mb": round(_status("RssAnon") / 2**20, 1),
            "rss_file_mb": round(_status("RssFile") / 2**20, 1),
            "store_apparent_mb": round(apparent / 2**20, 1),
            "store_allocated_mb": round(allocated / 2**20, 1),
            "disk_bytes_per_stored_run": round(allocated / runs) if runs else None,
            "elapsed_s": round(time.monotonic() - started, 1),
        }
        print(json.dumps(row), flush=True)
        return row

    for m in range(1, minutes + 1):
        at = T0 + m * MINUTE
        fires = _command(at)
        fires.fire_batch.SetInParent()
        for name in names:
            fires.fire_batch.tasks.add(
                task=name,
                version=1,
                fires=[pb.Fire(nominal_ms=at, outcome=pb.FIRED)],
                watermark_ms=at,
                next_fire_ms=at + MINUTE,
            )
        f.apply(codec.encode_command(fires))
        assign = _command(at + 10)
        done = _command(at + 500)
        for name in names:
            run_id = f"{name}@{at}"
            assign.assign_attempts.assignments.add(run_id=run_id, shard=0, attempt=1, executor="ex1")
            done.report_results.results.add(
                run_id=run_id, shard=0, attempt=1, executor="ex1", success=True, duration_ms=400
            )
        f.apply(codec.encode_command(assign))
        f.apply(codec.encode_command(done))
        f.commit()
        if m % every == 0 or m == minutes:
            rows.append(sample(m))
    if f.state.active:
        raise RuntimeError(f"{len(f.state.active)} runs did not finish")
    last = rows[-1]
    return {
        "tasks": tasks,
        "minutes": minutes,
        "keep_for_ms": keep_for_ms,
        "rss_before_fill_mb": round(rss0 / 2**20, 1),
        "final": last,
        "series": rows,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=100, help="every-minute tasks (default 100)")
    ap.add_argument(
        "--minutes",
        type=int,
        default=10_080,
        help="simulated minutes (default 10080: 7 days, 1,008,000 runs)",
    )
    ap.add_argument("--keep-for", default="7d", help="each task's keep_for (default 7d)")
    ap.add_argument("--every", type=int, default=1000, help="print a sample every N minutes")
    ap.add_argument("--json", type=Path, default=None, help="also write the result here")
    args = ap.parse_args()
    prov = Provenance.start()
    with tempfile.TemporaryDirectory(prefix="bench-retention-") as tmp:
        result = run(
            args.tasks, args.minutes, parse_duration_ms(args.keep_for, "--keep-for"), args.every, Path(tmp)
        )
    prov.emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
