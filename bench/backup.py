"""Backup and restore cost: ``raftsched backup`` of a cluster holding N tasks, and the start of a
new cluster restored from the file.

    python -m bench.backup [--tasks 10000 100000]

For each N: a real 3-node cluster on loopback gets N manual tasks (bulk AddTasks), then a backup
is taken from a follower through the SDK (the CLI's path): its wall time, file size and entries.
Then a new 3-node cluster is started with ``--restore`` on every node: the time until its leader
accepts a write (its barrier applied, the restored tasks armed), next to the same time for the
empty cluster's first start. Prints one JSON line per N.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time
from pathlib import Path

from bench.common import Provenance
from raftsched.client import Client
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.testing.cluster import LocalCluster, wait_until

BATCH = 5000


def measure(tasks: int, base: Path) -> dict[str, float | int]:
    old = LocalCluster.create(base / "old", 3)
    new = LocalCluster.create(base / "new", 3)
    try:
        t0 = time.monotonic()
        old.start()
        leader = old.wait_for_leader(60)
        with Client(old.targets(), timeout=60, retries=50) as client:
            client.add_task(TaskSpec("probe", ManualTrigger(), command="true"))
            fresh_s = time.monotonic() - t0
            for start in range(0, tasks, BATCH):
                specs = [
                    TaskSpec(f"t{i:07d}", ManualTrigger(), command="true")
                    for i in range(start, min(tasks, start + BATCH))
                ]
                client.add_tasks(specs)
        follower = next(n for n in ("n1", "n2", "n3") if n != leader)
        wait_until(lambda: old.status(follower).tasks == tasks + 1, 120, 0.2, "the follower has every task")
        path = base / "cluster.rsb"
        t0 = time.monotonic()
        with Client([old.grpc_of(follower)], timeout=120) as client:
            header = client.backup(path)
        backup_s = time.monotonic() - t0
        old.stop()
        t0 = time.monotonic()
        new.start(extra_args=["--restore", str(path)])
        new.wait_for_leader(120)
        with Client(new.targets(), timeout=60, retries=50) as client:
            client.add_task(TaskSpec("after-restore", ManualTrigger(), command="true"))
        restore_s = time.monotonic() - t0
        wait_until(lambda: all(new.status(n).tasks >= tasks + 1 for n in ("n1", "n2", "n3")), 120, 0.2)
        return {
            "tasks": tasks,
            "backup_s": round(backup_s, 2),
            "file_bytes": path.stat().st_size,
            "entries": header.entries,
            "restore_start_to_first_write_s": round(restore_s, 2),
            "empty_start_to_first_write_s": round(fresh_s, 2),
        }
    finally:
        old.stop()
        new.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, nargs="+", default=[10_000])
    args = parser.parse_args()
    provenance = Provenance.start()
    for n in args.tasks:
        with tempfile.TemporaryDirectory() as tmp:
            print(json.dumps(measure(n, Path(tmp))), flush=True)
    provenance.print_record()


if __name__ == "__main__":
    main()
