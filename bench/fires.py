"""Fire throughput and commit lateness of a real 3-node cluster, against a bare heapq loop.

    python -m bench.fires [--tasks 10000] [--seconds 20]

Starts 3 ``raftsched-node`` processes on loopback (OS-assigned ports, temp data dirs), creates
N every-second cron tasks, measures over a window:

* fires committed per second (runs created by committed FireBatch entries on the leader);
* commit lateness p50/p99/max (leader apply time minus nominal time);
* leader CPU per fire (utime+stime of the leader process / fires), and the same for a bare
  ``heapq`` pop-and-dispatch loop measured in this run — the ratio is the figure that matters on
  a shared, noisy machine;
* replica agreement (all three state digests equal at the end).

Prints JSON with its provenance (and writes it with ``--json FILE``).
"""

from __future__ import annotations

import argparse
import asyncio
import heapq
import tempfile
import time
from pathlib import Path

import grpc

from bench.common import Provenance, cpu_seconds, next_whole_second_ms, with_scheduler_setting
from raftsched import codec
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.v1 import raftsched_pb2_grpc as pb_grpc


def heapq_loop(n_tasks: int, seconds: int) -> float:
    """CPU seconds per fire of the simplest scheduler: pop due entries, 'dispatch', push the next."""
    heap = [(0, i) for i in range(n_tasks)]
    heapq.heapify(heap)
    dispatched: list[tuple[int, int]] = []
    start = time.process_time()
    fires = 0
    for now in range(0, seconds * 1000, 1000):
        while heap and heap[0][0] <= now:
            due, task = heapq.heappop(heap)
            dispatched.append((task, due))
            heapq.heappush(heap, (due + 1000, task))
            fires += 1
        dispatched.clear()
    return (time.process_time() - start) / max(fires, 1)


async def create_tasks(targets: list[str], n: int, concurrency: int = 200) -> float:
    """Create N every-second tasks with `concurrency` RPCs in flight, following leader changes."""
    start = time.monotonic()
    channels = {t: grpc.aio.insecure_channel(t) for t in targets}
    leader = [targets[0]]
    sem = asyncio.Semaphore(concurrency)

    async def one(i: int) -> None:
        spec = TaskSpec(f"bench-{i:07d}", CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, command="true")
        request = pb.AddTaskRequest(spec=codec.spec_to_pb(spec), idempotency_key=f"bench-{i}")
        async with sem:
            last = ""
            for attempt in range(60):
                target = leader[0]
                try:
                    await pb_grpc.AdminStub(channels[target]).AddTask(request, timeout=30)
                    return
                except grpc.aio.AioRpcError as exc:
                    if exc.code() == grpc.StatusCode.ALREADY_EXISTS:
                        return
                    last = f"{exc.code().name}: {exc.details()}"
                    hint = dict(exc.trailing_metadata() or ()).get("raftsched-leader")
                    if hint in channels:
                        leader[0] = hint
                    elif exc.code() == grpc.StatusCode.UNAVAILABLE:
                        leader[0] = targets[(targets.index(target) + 1) % len(targets)]
                    await asyncio.sleep(min(1.0, 0.05 * 2 ** min(attempt, 5)))
            raise RuntimeError(f"could not create task {i}: {last}")

    try:
        await asyncio.gather(*(one(i) for i in range(n)))
    finally:
        for ch in channels.values():
            await ch.close()
    return time.monotonic() - start


def bulk_create(targets: list[str], n: int) -> float:
    """Create N every-second tasks by bulk import (5,000 per call, a few hundred per log entry).

    One ``AddTask`` per task (:func:`create_tasks`) took 25 s for 10,000 tasks on a quiet machine
    and over 6 minutes at a load average of 15-25: the tasks fire while the rest are created, and
    their runs' queueing shares the event loop with the RPCs. The window measures neither."""
    from raftsched.client import Client  # see run(): imported here, not at the top

    start = time.monotonic()
    specs = [
        TaskSpec(f"bench-{i:07d}", CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, command="true")
        for i in range(n)
    ]
    with Client(targets, timeout=120) as client:
        refused = [r for r in client.add_tasks(specs) if not r.ok and r.code != "already_exists"]
    if refused:
        raise RuntimeError(
            f"{len(refused)} tasks refused, the first: {refused[0].code}: {refused[0].message}"
        )
    return time.monotonic() - start


def run(
    n_tasks: int,
    seconds: int,
    base: Path,
    extra_config: str = "",
    idle_seconds: float = 0.0,
    settle_s: float = 3.0,
) -> dict[str, object]:
    """``extra_config``: TOML appended to the cluster's config (bench/run.py's ``--keep-count``
    and ``--tick``). ``idle_seconds`` > 0: first each node's CPU per second with no task
    (``idle_cpu_ms_per_s``). ``settle_s``: seconds between creating the tasks and the window."""
    # Imported here, not at the top: bench/hotpath.py imports this module for heapq_loop, and
    # raftsched.testing brings the executor and aiohttp, whose objects slow that in-process
    # benchmark's garbage collections (see bench/common.py).
    from raftsched.testing.cluster import LocalCluster

    # No executor runs these attempts, by design: they wait, one more per fire, and the overload
    # hold ([scheduler] max_dispatch_backlog) would stop the firing this measures within seconds.
    extra_config = with_scheduler_setting(extra_config, "max_dispatch_backlog", 0)
    cluster = LocalCluster.create(base, 3, extra_config=extra_config)
    try:
        cluster.start()
        leader = cluster.wait_for_leader(60)
        idle: dict[str, float] = {}
        if idle_seconds > 0:
            pids = {nid: proc.pid for nid, proc in cluster.procs.items()}
            idle0 = {nid: cpu_seconds(pid) for nid, pid in pids.items()}
            t_idle = time.monotonic()
            time.sleep(idle_seconds)
            elapsed = time.monotonic() - t_idle
            idle = {
                nid: round((cpu_seconds(pid) - idle0[nid]) / elapsed * 1000, 1) for nid, pid in pids.items()
            }
            idle["leader"] = idle[cluster.wait_for_leader(30)]
        created_s = bulk_create([cluster.grpc_of(leader), *cluster.targets()], n_tasks)
        leader = cluster.wait_for_leader(30)
        pid = cluster.procs[leader].pid
        # Let the schedule settle into its steady state before measuring.
        time.sleep(settle_s)
        window_start_ms = next_whole_second_ms()
        cpu0 = cpu_seconds(pid)
        all_cpu0 = {nid: cpu_seconds(proc.pid) for nid, proc in cluster.procs.items()}
        fired0 = cluster.status(leader, timeout=60).fires_committed
        time.sleep(seconds)
        cpu1 = cpu_seconds(pid)
        all_cpu1 = {nid: cpu_seconds(proc.pid) for nid, proc in cluster.procs.items()}
        # A loaded machine: the leader's event loop may answer late (it queues the runs too).
        st = cluster.status(leader, timeout=60, lateness_since_ms=window_start_ms)
        fired = st.fires_committed - fired0
        end_ms = window_start_ms + seconds * 1000
        # Fires whose nominal time is inside the window, as committed (may trail by the lateness).
        summary = st.commit_lateness
        applied = st.apply_lateness
        chain_index, _ = cluster.chains_agree()
        statuses = [cluster.status(n, timeout=30) for n in cluster.alive()]
        heap_cpu = heapq_loop(n_tasks, 30)
        leader_cpu_per_fire = (cpu1 - cpu0) / max(fired, 1)
        return {
            "tasks": n_tasks,
            "window_s": seconds,
            "settle_s": settle_s,
            "window": [window_start_ms, end_ms],
            "task_creation_s": round(created_s, 2),
            "fires_committed": fired,
            "fires_per_s": round(fired / seconds, 1),
            # Raft commit time of the FireBatch minus nominal time (the "commit lateness").
            "commit_lateness_ms": {
                "p50": summary.p50_ms,
                "p99": summary.p99_ms,
                "max": summary.max_ms,
                "mean": round(summary.mean_ms, 1),
                "count": summary.count,
            },
            # The run visible in the leader's applied state minus nominal time.
            "apply_lateness_ms": {"p50": applied.p50_ms, "p99": applied.p99_ms, "max": applied.max_ms},
            "leader": leader,
            "leader_cpu_us_per_fire": round(leader_cpu_per_fire * 1e6, 1),
            "node_cpu_us_per_fire": {
                nid: round((all_cpu1[nid] - all_cpu0[nid]) / max(fired, 1) * 1e6, 1) for nid in all_cpu0
            },
            "heapq_cpu_us_per_fire": round(heap_cpu * 1e6, 2),
            "cpu_ratio_vs_heapq": round(leader_cpu_per_fire / heap_cpu, 1),
            "replicas_agree_at_index": chain_index,  # equal apply-chain hash on all nodes at that index
            "rss_mb": {s.node_id: round(s.rss_bytes / 2**20, 1) for s in statuses},
            **({"idle_cpu_ms_per_s": idle} if idle else {}),
        }
    finally:
        cluster.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    provenance = Provenance.start()
    with tempfile.TemporaryDirectory(prefix="raftsched-bench-") as tmp:
        result = run(args.tasks, args.seconds, Path(tmp))
    provenance.emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
