"""Loading N tasks at start, in one process: the phase of a restart that grows with the tasks.

    python -m bench.task_load [--tasks 100000] [--keep DIR]

Builds an LMDB store of N daily cron tasks (bulk-created through the state machine, as
``Client.add_tasks`` would, then a counter checkpoint: the steady state), closes it, and then, in
a fresh process, opens it as a node does at start: the store verify (a full read and checksum),
then :meth:`SchedulerState.load` phase by phase. Prints the CPU time of each phase, per task,
and the memory a loaded task costs: traced Python objects (tracemalloc, in a second load) and
RSS (anonymous and mapped-file pages, from /proc). No cluster, no Raft: the figures of
``bench/scale.py``'s restart phases without the rest of the machine's load in them.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
import time
import tracemalloc
from pathlib import Path

from bench.common import Provenance
from raftsched.fsm import keys
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import CronTrigger, TaskSpec
from raftsched.storage.lmdb_store import LmdbStore

NOW = 1_780_000_000_000
STEP = 5000


def build(path: Path, n: int) -> None:
    store = LmdbStore(path, sync=False, replicated_below=keys.LOCAL_PREFIX)
    state = SchedulerState.load(store)
    index = 0
    for start in range(0, n, STEP):
        specs = [
            (TaskSpec(f"daily-{i:07d}", CronTrigger("0 3 * * *", "Europe/Berlin"), command="true"), False)
            for i in range(start, min(n, start + STEP))
        ]
        commands, refused = writes.create_tasks(specs, now_ms=NOW, epoch=1, origin="n1", key=f"k{start}")
        if refused:
            raise RuntimeError(f"{len(refused)} specs refused")
        for data in commands:
            index += 1
            if not state.apply(data).result.ok:
                raise RuntimeError("create_tasks refused")
            store.commit(index)
    state.task_book.checkpoint()
    store.commit(index)
    store.close()


def _rss() -> dict[str, int]:
    text = Path("/proc/self/status").read_text()
    return {k: int(v) * 1024 for k, v in re.findall(r"^(RssAnon|RssFile):\s+(\d+) kB", text, re.M)}


def measure(path: Path) -> dict[str, object]:
    """Open and load the store at ``path`` as a node's start does; figures as a dict."""
    rss0 = _rss()
    store = LmdbStore(path, sync=False, replicated_below=keys.LOCAL_PREFIX)
    cpu = time.process_time()
    verified = store.verify()
    phases = {"store verify": time.process_time() - cpu}
    mark = [time.process_time()]

    def phase(name: str) -> None:
        now = time.process_time()
        phases[name] = now - mark[0]
        mark[0] = now

    try:
        state = SchedulerState.load(store, on_phase=phase)
    except TypeError:  # a build before load phases (an A/B against an older commit): one phase
        state = SchedulerState.load(store)
        phase("load")
    n = len(state.tasks)
    rss = _rss()
    del state
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    again = SchedulerState.load(store)
    traced = tracemalloc.get_traced_memory()[0] - before
    tracemalloc.stop()
    del again
    store.close()
    return {
        "tasks": n,
        "store_entries": verified.pairs,
        "cpu_ms": {k: round(v * 1000) for k, v in phases.items()},
        "cpu_us_per_task": {k: round(v * 1e6 / max(1, n), 2) for k, v in phases.items() if v > 0.001},
        "traced_bytes_per_task": round(traced / max(1, n)),
        "rss_anon_bytes_per_task": round((rss["RssAnon"] - rss0["RssAnon"]) / max(1, n)),
        "rss_file_bytes_per_task": round((rss["RssFile"] - rss0["RssFile"]) / max(1, n)),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=100_000)
    ap.add_argument("--keep", type=Path, help="build the store here (kept; reused if it exists)")
    ap.add_argument("--measure", type=Path, help=argparse.SUPPRESS)  # the fresh process
    args = ap.parse_args()
    if args.measure:
        print(json.dumps(measure(args.measure)))
        return 0
    provenance = Provenance.start()
    with tempfile.TemporaryDirectory(prefix="raftsched-taskload-") as tmp:
        path = args.keep or Path(tmp) / "state"
        if not path.exists():
            cpu = time.process_time()
            build(path, args.tasks)
            print(f"built {args.tasks:,} tasks in {time.process_time() - cpu:.1f} s CPU", flush=True)
        out = subprocess.run(
            [sys.executable, "-m", "bench.task_load", "--measure", str(path)],
            check=True,
            capture_output=True,
            text=True,
        )
    result = json.loads(out.stdout)
    print(json.dumps(result, indent=1))
    provenance.print_record()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
