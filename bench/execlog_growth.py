"""How an executor's data dir grows under load: 1,000 every-second tasks on 2 executors.

    python -m bench.execlog_growth [--tasks 1000] [--executors 2] [--minutes 3] [--every 15]
                                   [--keep DURATION] [--json FILE]

Starts 3 ``raftsched-node`` processes on loopback and N executor processes
(bench/noop_executor.py: an embedded ``raftsched.Executor`` with a no-op Python handler), imports
N every-second cron tasks (``handler="noop"``, overlap allow), then every ``--every`` seconds
prints, per executor, the size of its data dir (the execution log's ``data.mdb``, apparent size
and the blocks allocated on disk) and how many attempts it has started. ``--keep`` passes
``--execution-log-keep`` to the executors (omit it to run with the executor's default, or to run
against a raftsched that has no such option).

At the end it checks that no execution id started twice across all executors (each handler
call is recorded) and prints a JSON summary: the size series, the attempts, the duplicates.
"""

from __future__ import annotations

import argparse
import json
import os
import tempfile
import time
from collections import Counter
from pathlib import Path

from bench.common import Provenance, executor_data_dir, noop_cluster
from bench.executors import add_tasks_retrying
from bench.noop_executor import Samples
from raftsched.client import Client
from raftsched.model import CronTrigger, Overlap, TaskSpec


def dir_size(path: Path) -> tuple[int, int]:
    """(apparent bytes, allocated bytes) of every file under ``path``."""
    apparent = allocated = 0
    for root, _, files in os.walk(path):
        for name in files:
            try:
                st = os.stat(os.path.join(root, name))
            except FileNotFoundError:
                continue
            apparent += st.st_size
            allocated += st.st_blocks * 512
    return apparent, allocated


def run(
    n_tasks: int, n_executors: int, minutes: float, every: float, keep: str | None, base: Path
) -> dict[str, object]:
    names = [f"ex{i + 1}" for i in range(n_executors)]
    series: list[dict[str, object]] = []
    with noop_cluster(base, n_executors, slots=256, keep=keep) as (cluster, procs):
        targets = cluster.targets()
        specs = [
            TaskSpec(f"noop-{i:05d}", CronTrigger("* * * * * *"), handler="noop", overlap=Overlap.ALLOW)
            for i in range(n_tasks)
        ]
        with Client(targets, timeout=60) as client:
            add_tasks_retrying(client, specs)
        t0 = time.monotonic()
        end = t0 + minutes * 60
        while True:
            row: dict[str, object] = {"t_s": round(time.monotonic() - t0)}
            for name in names:
                apparent, allocated = dir_size(executor_data_dir(base, name))
                row[name] = {
                    "apparent_mb": round(apparent / 1e6, 1),
                    "allocated_mb": round(allocated / 1e6, 1),
                }
            series.append(row)
            print(json.dumps(row), flush=True)
            if time.monotonic() >= end:
                break
            time.sleep(min(every, max(0.0, end - time.monotonic())))
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"executor {name} exited with {proc.returncode} during the run")
    samples = [Samples.read(name, executor_data_dir(base, name) / "samples.txt") for name in names]
    starts = Counter(e for s in samples for e, _, _ in s.starts)
    return {
        "tasks": n_tasks,
        "executors": n_executors,
        "minutes": minutes,
        "keep": keep or "(executor default)",
        "attempts_started": {s.name: len(s.starts) for s in samples},
        "duplicate_starts": sum(c - 1 for c in starts.values() if c > 1),
        "series": series,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--executors", type=int, default=2)
    ap.add_argument("--minutes", type=float, default=3.0)
    ap.add_argument("--every", type=float, default=15.0, help="seconds between size samples")
    ap.add_argument("--keep", help="--execution-log-keep for the executors (e.g. 30s)")
    ap.add_argument("--json", type=Path, help="also write the summary here")
    args = ap.parse_args()
    provenance = Provenance.start()
    with tempfile.TemporaryDirectory(prefix="execlog-growth-") as tmp:
        result = run(args.tasks, args.executors, args.minutes, args.every, args.keep, Path(tmp))
    print(json.dumps(provenance.stamp({k: v for k, v in result.items() if k != "series"}), indent=2))
    if args.json:
        args.json.write_text(json.dumps(provenance.stamp(result), indent=2) + "\n")
    return 0 if result["duplicate_starts"] == 0 else 1


if __name__ == "__main__":
    raise SystemExit(main())
