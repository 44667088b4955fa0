"""How an executor's data dir grows under load: 1,000 every-second tasks on 2 executors.

    python bench/execlog_growth.py [--tasks 1000] [--executors 2] [--minutes 3] [--every 15]
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
import subprocess
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path

from raftsched.client import Client
from raftsched.localcluster import LocalCluster, wait_until
from raftsched.model import CronTrigger, Overlap, TaskSpec

BENCH_DIR = Path(__file__).resolve().parent
if str(BENCH_DIR) not in sys.path:
    sys.path.insert(0, str(BENCH_DIR))

from executors import Samples, add_tasks_retrying, stop_processes  # noqa: E402


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


def start_executor(
    name: str, targets: list[str], data_dir: Path, log_dir: Path, keep: str | None
) -> subprocess.Popen[bytes]:
    log = open(log_dir / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
    try:
        return subprocess.Popen(
            [
                sys.executable,
                str(BENCH_DIR / "noop_executor.py"),
                "--cluster",
                ",".join(targets),
                "--name",
                name,
                "--slots",
                "256",
                "--data-dir",
                str(data_dir),
                *(["--execution-log-keep", keep] if keep else []),
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
        )
    finally:
        log.close()


def run(
    n_tasks: int, n_executors: int, minutes: float, every: float, keep: str | None, base: Path
) -> dict[str, object]:
    cluster = LocalCluster.create(base / "cluster", 3)
    names = [f"ex{i + 1}" for i in range(n_executors)]
    data_dirs = {name: base / "executors" / name for name in names}
    procs: dict[str, subprocess.Popen[bytes]] = {}
    series: list[dict[str, object]] = []
    try:
        cluster.start()
        cluster.wait_for_leader(60)
        targets = cluster.targets()
        for name in names:
            data_dirs[name].mkdir(parents=True, exist_ok=True)
            procs[name] = start_executor(name, targets, data_dirs[name], cluster.log_dir, keep)

        def registered() -> bool:
            for name in names:
                if procs[name].poll() is not None:
                    raise RuntimeError(f"executor {name} exited with {procs[name].returncode}")
                if "registered with" not in (cluster.log_dir / f"{name}.log").read_text(errors="replace"):
                    return False
            return True

        wait_until(registered, 60, 0.1, "every executor to register")
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
                apparent, allocated = dir_size(data_dirs[name])
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
    finally:
        stop_processes(procs)
        cluster.stop()
    samples = [Samples.read(name, data_dirs[name] / "samples.txt") for name in names]
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
    with tempfile.TemporaryDirectory(prefix="execlog-growth-") as tmp:
        result = run(args.tasks, args.executors, args.minutes, args.every, args.keep, Path(tmp))
    summary = {k: v for k, v in result.items() if k != "series"}
    print(json.dumps(summary, indent=2))
    if args.json:
        args.json.write_text(json.dumps(result, indent=2) + "\n")
    return 0 if result["duplicate_starts"] == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
