"""Recovery time of a follower whose state store is damaged: ``raftsched-node --rebuild``.

    python -m bench.rebuild [--tasks 10000]

A real 3-node cluster on loopback (the leader compacts its log every 20 entries, so a rebuilt
follower is caught up by a snapshot, as in a long-running cluster) gets N manual tasks (bulk
AddTasks) and 5 every-second tasks (firing meanwhile). A follower is SIGKILLed and 16 KiB in the
middle of the pages its ``state/data.mdb`` uses are overwritten until the store's check finds the
damage. Then: the refused start (until it exits with status 5), and ``--rebuild``: from the start
until its applied index reaches the leader's at that start, and until the three state digests are
equal. Prints one JSON line per N.
"""

from __future__ import annotations

import argparse
import json
import re
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import Provenance
from raftsched.client import Client
from raftsched.model import CronTrigger, ManualTrigger, TaskSpec
from raftsched.testing.cluster import NODE_COMMAND, LocalCluster, wait_until
from raftsched.testing.damage import damage_store

BATCH = 5000


def measure(tasks: int, base: Path) -> dict[str, object]:
    cluster = LocalCluster.create(base, 3, extra_config="[raft]\nlog_compaction_min_entries = 20\n")
    try:
        cluster.start()
        leader = cluster.wait_for_leader(60)
        with Client(cluster.targets(), timeout=60, retries=50) as client:
            for start in range(0, tasks, BATCH):
                client.add_tasks(
                    [
                        TaskSpec(f"t{i:07d}", ManualTrigger(), command="true")
                        for i in range(start, min(tasks, start + BATCH))
                    ]
                )
            for i in range(5):
                client.add_task(TaskSpec(f"tick{i}", CronTrigger("* * * * * *"), command="true"))
        follower = next(n for n in ("n1", "n2", "n3") if n != leader)
        wait_until(
            lambda: cluster.status(follower).tasks == tasks + 5, 120, 0.2, "the follower has every task"
        )
        wait_until(lambda: _compacted(cluster, leader), 120, 0.2, "the leader to compact its log")
        cluster.kill(follower, signal.SIGKILL)
        data_dir = cluster.config.node(follower).data_dir
        store_bytes = (data_dir / "state" / "data.mdb").stat().st_size
        damage_store(data_dir, seed=1)

        t0 = time.monotonic()
        refused = subprocess.run(
            [*NODE_COMMAND, "--config", str(cluster.config_path), "--node-id", follower],
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
        refused_s = time.monotonic() - t0
        if refused.returncode != 5:
            raise RuntimeError(f"expected exit status 5, got {refused.returncode}: {refused.stderr}")

        target = cluster.status(leader).applied_index
        t0 = time.monotonic()
        cluster.start(follower, extra_args=["--rebuild"])
        wait_until(
            lambda: cluster.status(follower, timeout=5).applied_index >= target, 300, 0.05, "the catch-up"
        )
        caught_up_s = time.monotonic() - t0
        cluster.wait_converged(120)
        converged_s = time.monotonic() - t0
        log = (cluster.log_dir / f"{follower}.log").read_text(errors="replace")
        install = re.findall(r"installed snapshot at index (\d+) in (\d+) ms", log)
        return {
            "tasks": tasks,
            "store_bytes": store_bytes,
            "refused_start_s": round(refused_s, 2),
            "rebuild_to_caught_up_s": round(caught_up_s, 2),
            "rebuild_to_equal_digests_s": round(converged_s, 2),
            "snapshot_install_ms": int(install[-1][1]) if install else None,
            "error_line": refused.stderr.strip(),
        }
    finally:
        cluster.stop()


def _compacted(cluster: LocalCluster, node_id: str) -> bool:
    status = cluster.status(node_id)
    return status.log_len < status.commit_index - 10


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
