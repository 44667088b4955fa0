"""Failover time: SIGKILL of the leader until the first fire committed by the new leader.

    python -m bench.failover [--kills 20] [--nodes 3]

A real cluster on loopback with per-second cron tasks. Each round: wait for a stable leader,
SIGKILL it, then poll the survivors until one of them leads a newer term and has committed a
fire (its ``fires_committed`` counter moves). The killed node is restarted from its data dir
before the next round, so every round starts from a full cluster. Prints p50/p90/p99/max and
the accounting check (every nominal second of the watched task covered exactly once).
"""

from __future__ import annotations

import argparse
import functools
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import Provenance, covered_exactly_once, percentile
from raftsched.client import Client
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb


def first_fire_by_new_leader(
    cluster: LocalCluster, survivors: list[str], old_term: int, before: dict[str, int], deadline_s: float
) -> tuple[str, float]:
    end = time.monotonic() + deadline_s
    while time.monotonic() < end:
        for nid in survivors:
            try:
                st = cluster.status(nid, timeout=0.5)
            except Exception:
                continue
            if st.role == "leader" and st.term > old_term and st.fires_committed > before.get(nid, 0):
                return nid, time.monotonic()
        time.sleep(0.01)
    raise TimeoutError("no fire committed by a new leader")


def caught_up(cluster: LocalCluster, node: str, leader: str) -> bool:
    return (
        cluster.status(node, timeout=1).applied_index >= cluster.status(leader, timeout=1).applied_index - 50
    )


def first_execution_after(marker: Path, t0_ns: int, deadline_s: float) -> int:
    """Wall-clock ns of the first execution that started after ``t0_ns`` (polls the marker file)."""

    def found() -> int | None:
        if not marker.exists():
            return None
        starts = [int(line.split()[1]) for line in marker.read_text().splitlines() if len(line.split()) == 2]
        later = [t for t in starts if t > t0_ns]
        return min(later) if later else None

    return wait_until(found, deadline_s, 0.02, "an execution under the new leader")


def run(kills: int, nodes: int, base: Path, executors: int = 2) -> dict[str, object]:
    cluster = LocalCluster.create(
        base, nodes, extra_config="[scheduler]\nlease_ms = 3000\nheartbeat_ms = 500\n"
    )
    times: list[float] = []
    exec_times: list[float] = []
    marker = base / "executions.log"
    procs: list[subprocess.Popen[bytes]] = []
    try:
        cluster.start()
        cluster.wait_for_leader(60)
        for i in range(executors):
            procs.append(cluster.start_executor(f"ex{i + 1}", slots=8, data_dir=base / f"ex{i + 1}"))
        with Client(cluster.targets()) as client:
            command = f'echo "$RAFTSCHED_EXECUTION_ID $(date +%s%N)" >> {marker}' if executors else ""
            for i in range(20):
                client.add_task(
                    TaskSpec(f"tick-{i}", CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, command=command)
                )
            wait_until(lambda: len(client.fire_accounting("tick-0")) >= 3, 30, what="first fires")
            for round_no in range(kills):
                leader = cluster.wait_for_leader(30)
                st = cluster.status(leader)
                survivors = [n for n in cluster.alive() if n != leader]
                before = {n: cluster.status(n).fires_committed for n in survivors}
                t0 = time.monotonic()
                t0_ns = time.time_ns()
                cluster.kill(leader, signal.SIGKILL)
                new_leader, t1 = first_fire_by_new_leader(cluster, survivors, st.term, before, 30)
                times.append(t1 - t0)
                if executors:
                    exec_times.append((first_execution_after(marker, t0_ns, 30) - t0_ns) / 1e9)
                print(
                    f"round {round_no + 1:3}: killed {leader} (term {st.term}), {new_leader} fired after "
                    f"{(t1 - t0) * 1000:.0f} ms",
                    flush=True,
                )
                cluster.start(leader)
                wait_until(
                    functools.partial(caught_up, cluster, leader, new_leader),
                    60,
                    0.1,
                    "rejoin",
                )
            tasks = client.get_task("tick-0")
            fires = client.fire_accounting("tick-0", limit=100_000)
        first = min(f.nominal_ms for f in fires)
        missing, doubled = covered_exactly_once(fires, first, tasks.watermark_ms)
        index, _ = cluster.chains_agree()
        return {
            "kills": kills,
            "nodes": nodes,
            "failover_ms": {
                "p50": round(percentile(times, 0.50) * 1000),
                "p90": round(percentile(times, 0.90) * 1000),
                "p99": round(percentile(times, 0.99) * 1000),
                "max": round(max(times) * 1000),
                "all": [round(t * 1000) for t in times],
            },
            "kill_to_first_execution_ms": {
                "p50": round(percentile(exec_times, 0.50) * 1000),
                "p99": round(percentile(exec_times, 0.99) * 1000),
                "max": round(max(exec_times) * 1000),
            }
            if exec_times
            else None,
            "accounting": {
                "seconds": (tasks.watermark_ms - first) // 1000 + 1,
                "missing": missing,
                "doubled": doubled,
                "coalesced": sum(f.count for f in fires if f.outcome == pb.COALESCED),
            },
            "replicas_agree_at_index": index,
        }
    finally:
        for proc in procs:
            proc.terminate()
        for proc in procs:
            proc.wait(timeout=15)
        cluster.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--kills", type=int, default=20)
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--executors", type=int, default=2, help="executor processes running the tasks (0: none)")
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    provenance = Provenance.start()
    with tempfile.TemporaryDirectory(prefix="raftsched-failover-") as tmp:
        result = run(args.kills, args.nodes, Path(tmp), args.executors)
    provenance.emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
