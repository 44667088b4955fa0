"""Scale: many task definitions on a real 3-node cluster.

    python -m bench.scale [--tasks 100000 1000000]

For each N: a fresh cluster; N daily cron tasks bulk-imported (plus 20 per-second tasks so
something fires); then

* RSS per node, and the increase per task;
* Raft snapshot (LMDB copy) size and time, as logged by the nodes;
* cold restart of a follower (SIGKILL, restart) until it serves and has caught up, phase by
  phase from its log: the process start to the state loaded (store open and verify, then the
  state machine's books, each with its CPU time), the Raft journal opened, and the catch-up;
* SIGKILL of the leader until the first fire committed by the new leader (which must rebuild its
  timing wheel from N tasks).
"""

from __future__ import annotations

import argparse
import datetime
import json
import re
import signal
import tempfile
import time
from pathlib import Path

from bench.common import Provenance
from raftsched.client import Client
from raftsched.errors import Unavailable
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.testing.cluster import LocalCluster, wait_until

# Compact often enough that a snapshot of the full state is written during the run.
EXTRA = "[raft]\nlog_compaction_min_entries = 500\n"


def snapshot_lines(cluster: LocalCluster) -> list[tuple[int, float]]:
    out = []
    for log in cluster.log_dir.glob("*.log"):
        for m in re.finditer(r"snapshot written at index \d+: (\d+) bytes in (\d+) ms", log.read_text()):
            out.append((int(m.group(1)), float(m.group(2))))
    return out


def log_health(cluster: LocalCluster) -> dict[str, object]:
    """Elections, stalls and pysyncobj truncation warnings seen in the node logs."""
    text = "\n".join(log.read_text() for log in cluster.log_dir.glob("*.log"))
    stalls = [int(m) for m in re.findall(r"tick thread stalled for (\d+) ms", text)]
    return {
        "leader_elections": len(re.findall(r"raft role candidate -> leader", text)),
        "tick_stalls_over_200ms": len(stalls),
        "max_tick_stall_ms": max(stalls, default=0),
        "truncations_of_applied_entries": text.count("truncating already-applied"),
    }


_STAMP = re.compile(r"^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) ")


def _stamp(line: str) -> float | None:
    m = _STAMP.match(line)
    if m is None:
        return None
    return datetime.datetime.strptime(m.group(1), "%Y-%m-%d %H:%M:%S,%f").timestamp()


def rss_split(cluster: LocalCluster) -> dict[str, dict[str, int]]:
    """Per node, RSS in MB as anonymous memory (the Python heap: tasks, wheel, caches) and as
    mapped file pages (LMDB's map: the pages of the store this process has read, which the kernel
    may drop and read again; counted in RSS all the same), from /proc/<pid>/status."""
    out: dict[str, dict[str, int]] = {}
    for nid, proc in cluster.procs.items():
        if proc.poll() is not None:
            continue
        try:
            text = Path(f"/proc/{proc.pid}/status").read_text()
        except OSError:
            continue
        fields = dict(re.findall(r"^(RssAnon|RssFile|RssShmem):\s+(\d+) kB", text, re.M))
        out[nid] = {
            "anon_mb": int(fields.get("RssAnon", 0)) // 1024,
            "file_mb": int(fields.get("RssFile", 0)) // 1024,
        }
    return out


def restart_phases(log: Path, spawned: float, caught_up: float) -> dict[str, object]:
    """The phases of the restart of the node whose log is ``log``, spawned at ``spawned`` and
    caught up at ``caught_up`` (wall-clock seconds): from its last start-up lines."""
    loaded_at = started_at = None
    phases = journal = ""
    for line in log.read_text().splitlines():
        if "state loaded at index" in line:
            # "... state loaded at index I (E entries, T tasks) at <unix time>: <phases>" (logged
            # once the node started, with the time the load ended).
            m = re.search(r"\) at (\d+\.\d+): (.*)$", line)
            if m:
                loaded_at, phases = float(m.group(1)), m.group(2)
        elif " started: raft " in line:
            started_at = _stamp(line)
            m = re.search(r"opened in (\d+) ms", line)
            journal = f"{m.group(1)} ms" if m else "?"
    if loaded_at is None or started_at is None:
        return {"error": "no start-up lines in the log"}
    return {
        "spawn_to_state_loaded_s": round(loaded_at - spawned, 2),
        "state_load_phases": phases,
        "raft_journal_open": journal,
        "state_loaded_to_raft_started_s": round(started_at - loaded_at, 2),
        "raft_started_to_caught_up_s": round(caught_up - started_at, 2),
    }


def add_chunk(client: Client, specs: list[TaskSpec], attempts: int = 5) -> None:
    """Add ``specs``; a chunk the cluster could not take while its leadership changed (a loaded
    machine) is sent again, and a task the first try added is then refused as already existing,
    which is what was wanted."""
    for attempt in range(attempts):
        try:
            results = client.add_tasks(specs)
        except Unavailable:
            if attempt == attempts - 1:
                raise
            time.sleep(2.0)  # the election under way: the client already retried within it
            continue
        bad = [r for r in results if not r.ok and not (attempt and r.code == "already_exists")]
        if bad:
            raise RuntimeError(f"{len(bad)} tasks refused, e.g. {bad[0]}")
        return


def run_one(n: int, base: Path) -> dict[str, object]:
    cluster = LocalCluster.create(base, 3, extra_config=EXTRA)
    try:
        cluster.start()
        leader = cluster.wait_for_leader(60)
        # A follower may not serve yet when the leader is known.
        rss0 = wait_until(
            lambda: {nid: cluster.status(nid).rss_bytes for nid in cluster.alive()},
            60,
            0.1,
            "every node to answer NodeStatus",
        )
        with Client(cluster.targets(), timeout=60) as client:
            t0 = time.monotonic()
            step = 50_000
            for start in range(0, n, step):
                specs = [
                    TaskSpec(f"daily-{i:07d}", CronTrigger("0 3 * * *", "Europe/Berlin"), command="true")
                    for i in range(start, min(n, start + step))
                ]
                add_chunk(client, specs)
            import_s = time.monotonic() - t0
            for i in range(20):
                client.add_task(
                    TaskSpec(f"tick-{i}", CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, command="true")
                )
            wait_until(
                lambda: all(cluster.status(nid, timeout=10).tasks >= n + 20 for nid in cluster.alive()),
                600,
                0.5,
                "every node to hold all tasks",
            )
            time.sleep(2)
            rss = {nid: cluster.status(nid, timeout=10).rss_bytes for nid in cluster.alive()}
            per_task = {nid: round((rss[nid] - rss0[nid]) / n) for nid in rss}
            split = rss_split(cluster)
            leader_at_rss = cluster.leader()  # the leader arms every task: its RSS is the largest

            # Cold restart of a follower.
            leader = cluster.wait_for_leader(30)
            follower = next(nid for nid in cluster.alive() if nid != leader)
            target = cluster.status(leader, timeout=10).applied_index
            cluster.kill(follower, signal.SIGKILL)
            t0, spawned = time.monotonic(), time.time()
            cluster.start(follower)
            wait_until(
                lambda: cluster.status(follower, timeout=2).applied_index >= target,
                600,
                0.05,
                "restarted follower to serve and catch up",
            )
            restart_s = time.monotonic() - t0
            phases = restart_phases(cluster.log_dir / f"{follower}.log", spawned, time.time())

            # Leader kill until the first fire by the new leader.
            leader = cluster.wait_for_leader(30)
            old = cluster.status(leader, timeout=10)
            survivors = [nid for nid in cluster.alive() if nid != leader]
            before = {nid: cluster.status(nid, timeout=10).fires_committed for nid in survivors}
            t0 = time.monotonic()
            cluster.kill(leader, signal.SIGKILL)

            def fired() -> bool:
                for nid in survivors:
                    st = cluster.status(nid, timeout=2)
                    if st.role == "leader" and st.term > old.term and st.fires_committed > before[nid]:
                        return True
                return False

            wait_until(fired, 120, 0.02, "a fire by the new leader")
            failover_s = time.monotonic() - t0
        snaps = snapshot_lines(cluster)
        health = log_health(cluster)
        return {
            "tasks": n,
            "bulk_import_s": round(import_s, 1),
            "import_tasks_per_s": round(n / import_s),
            "rss_mb": {k: round(v / 2**20) for k, v in rss.items()},
            "rss_bytes_per_task": per_task,
            "rss_split_mb": split,
            "leader_at_rss": leader_at_rss,
            "snapshot": {
                "count": len(snaps),
                "largest_mb": round(max((s for s, _ in snaps), default=0) / 2**20, 1),
                "slowest_ms": max((t for _, t in snaps), default=0),
            },
            "follower_cold_restart_s": round(restart_s, 2),
            "follower_restart_phases": phases,
            "leader_kill_to_first_fire_s": round(failover_s, 2),
            "log_health": health,
        }
    finally:
        cluster.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, nargs="+", default=[100_000, 1_000_000])
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    provenance = Provenance.start()
    results = []
    for n in args.tasks:
        with tempfile.TemporaryDirectory(prefix="raftsched-scale-") as tmp:
            result = run_one(n, Path(tmp))
        print(json.dumps(result), flush=True)
        results.append(result)
    provenance.print_record()
    if args.json:
        args.json.write_text(json.dumps(provenance.stamp({"runs": results}), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
