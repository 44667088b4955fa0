"""Reads must not starve firing: per-second tasks on a real cluster, without and with readers.

    python -m bench.readers [--seconds 30] [--readers 200] [--tasks 10] [--stale] [--get-seconds 5]

Starts a real 3-node cluster and one executor, adds ``--tasks`` per-second tasks (overlap skip,
command ``true``), lets them build some history, then measures ``get_task`` on the leader for
``--get-seconds`` each way, in the same run: linearizable (the default: each batch of reads waits
for a read barrier through the log) and stale (``stale=True`` sent to the leader: answered from
its state at once, which is what every leader read cost before linearizable reads), with
``--get-threads`` readers (over 4 processes), printing p50/p99 and reads/s; then two windows of
``--seconds``:

1. no readers;
2. ``--readers`` concurrent readers (threads spread over 4 processes), each looping over
   ListRuns (one task's newest 500 runs) and ListTasks. ``--stale`` lets followers answer them.

For each window it prints the fire lateness (decided - nominal, from the fire accounting) and
the dispatch lateness (assigned - nominal, from the runs) as p50/p99, the fires skipped for
overlap and the runs fired; then the with/without ratio of the p99s (target: at most 2x), the
reads' p50/p99 and count, and how many more overlap skips the readers caused (target: none).

Run it from another checkout (``cd <checkout> && python -m bench.readers``) to compare.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import contextlib
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path

from bench.common import Provenance, percentile, wait_registered
from raftsched.client import Client
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.testing.cluster import LocalCluster
from raftsched.v1 import raftsched_pb2 as pb

PROCESSES = 4


def _client(targets: list[str], stale: bool) -> Client:
    return Client(targets, timeout=30, stale_reads=stale)


def reader_process(
    targets: list[str], threads: int, seconds: float, tasks: list[str], stale: bool
) -> list[float]:
    """Run ``threads`` readers for ``seconds``; return every read's latency in seconds."""
    client = _client(targets, stale)
    out: list[float] = []
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def loop(seed: int) -> None:
        rng = random.Random(seed)
        mine: list[float] = []
        while time.monotonic() < end:
            start = time.perf_counter()
            try:
                if rng.random() < 0.5:
                    client.runs(rng.choice(tasks), limit=500)
                else:
                    client.list_tasks()
            except Exception:  # a failed read counts at its full time (a timeout, say)
                pass
            mine.append(time.perf_counter() - start)
        with lock:
            out.extend(mine)

    pool = [threading.Thread(target=loop, args=(i,)) for i in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    client.close()
    return out


def get_task_process(target: str, threads: int, seconds: float, task: str, stale: bool) -> list[float]:
    """``threads`` readers of one task on ``target`` only (the leader) for ``seconds``: latencies."""
    client = Client([target], timeout=30, stale_reads=stale)
    out: list[float] = []
    lock = threading.Lock()
    end = time.monotonic() + seconds

    def loop() -> None:
        mine: list[float] = []
        while time.monotonic() < end:
            start = time.perf_counter()
            with contextlib.suppress(Exception):  # a refused read counts at its full time
                client.get_task(task)
            mine.append(time.perf_counter() - start)
        with lock:
            out.extend(mine)

    pool = [threading.Thread(target=loop) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    client.close()
    return out


def get_task_phase(target: str, threads: int, seconds: float, task: str, stale: bool) -> list[float]:
    per = [threads // PROCESSES + (1 if i < threads % PROCESSES else 0) for i in range(PROCESSES)]
    with concurrent.futures.ProcessPoolExecutor(PROCESSES) as pool:
        futures = [pool.submit(get_task_process, target, n, seconds, task, stale) for n in per if n]
        return [x for f in futures for x in f.result()]


Window = tuple[list[float], list[float], list[float], int, int]


def window(client: Client, tasks: list[str], since: int, until: int) -> Window:
    """``(fire lateness s, dispatch lateness s, finish lateness s, overlap skips, fired)`` of the
    fires in [since, until). A run that finishes more than a second after its nominal time makes
    the next fire of a per-second task skip for overlap."""
    fire_late: list[float] = []
    dispatch_late: list[float] = []
    finish_late: list[float] = []
    skipped = fired = 0
    for task in tasks:
        for rec in client.fire_accounting(task, since_ms=since, until_ms=until - 1):
            if rec.outcome == pb.SKIPPED_OVERLAP:
                skipped += max(1, rec.count)
            elif rec.outcome == pb.FIRED:
                fired += 1
                fire_late.append((rec.decided_ms - rec.nominal_ms) / 1000)
        for run in client.runs(task, since_ms=since, until_ms=until - 1, limit=5000):
            if run.finished_ms:
                finish_late.append((run.finished_ms - run.nominal_ms) / 1000)
            for shard in run.shards:
                if shard.assigned_ms:
                    dispatch_late.append((shard.assigned_ms - run.nominal_ms) / 1000)
    return fire_late, dispatch_late, finish_late, skipped, fired


def _ms(values: list[float]) -> str:
    return f"{percentile(values, 0.5) * 1000:.0f}/{percentile(values, 0.99) * 1000:.0f}"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=30.0, help="length of each window")
    ap.add_argument("--readers", type=int, default=200)
    ap.add_argument("--tasks", type=int, default=10)
    ap.add_argument("--warmup", type=float, default=10.0, help="history built before measuring")
    ap.add_argument("--stale", action="store_true", help="readers allow stale reads (followers answer)")
    ap.add_argument("--get-seconds", type=float, default=5.0, help="each get_task phase (0: skip)")
    ap.add_argument("--get-threads", type=int, default=16, help="get_task readers of the leader")
    args = ap.parse_args()
    provenance = Provenance.start()
    print(provenance.header(), flush=True)
    get_task: dict[str, list[float]] = {}
    names = [f"tick{i:02d}" for i in range(args.tasks)]
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        cluster = LocalCluster.create(base, 3)
        exe = None
        try:
            cluster.start()
            cluster.wait_for_leader(60)
            exe = cluster.start_executor("ex1", 64, base / "ex1")
            wait_registered(cluster.log_dir, {"ex1": exe})
            with Client(cluster.targets(), timeout=30) as client:
                for name in names:
                    client.add_task(
                        TaskSpec(name, CronTrigger("* * * * * *"), command="true", overlap=Overlap.SKIP)
                    )
                time.sleep(args.warmup)
                if args.get_seconds > 0:
                    leader = cluster.grpc_of(cluster.wait_for_leader(60))
                    for mode, stale in (("linearizable", False), ("stale", True)):
                        get_task[mode] = get_task_phase(
                            leader, args.get_threads, args.get_seconds, names[0], stale
                        )
                    # getattr: a checkout from before linearizable reads has no such field
                    barriers = getattr(cluster.status(cluster.wait_for_leader(60)), "read_barriers", 0)
                a0 = int(time.time() * 1000)
                time.sleep(args.seconds)
                a1 = int(time.time() * 1000)
                per = [
                    args.readers // PROCESSES + (1 if i < args.readers % PROCESSES else 0)
                    for i in range(PROCESSES)
                ]
                with concurrent.futures.ProcessPoolExecutor(PROCESSES) as pool:
                    futures = [
                        pool.submit(reader_process, cluster.targets(), n, args.seconds + 2, names, args.stale)
                        for n in per
                        if n
                    ]
                    time.sleep(1.0)  # readers ramping up
                    b0 = int(time.time() * 1000)
                    time.sleep(args.seconds)
                    b1 = int(time.time() * 1000)
                    reads = [x for f in futures for x in f.result()]
                time.sleep(3.0)  # the last fires of the window settle
                quiet = window(client, names, a0, a1)
                loaded = window(client, names, b0, b1)
        finally:
            if exe is not None:
                exe.terminate()
                exe.wait(timeout=10)
            cluster.stop()
    for mode, lat in get_task.items():
        print(
            f"get_task on the leader, {mode:12}: {len(lat) / args.get_seconds:.0f} reads/s with "
            f"{args.get_threads} readers, p50 {percentile(lat, 0.5) * 1000:.1f} ms, "
            f"p99 {percentile(lat, 0.99) * 1000:.1f} ms"
        )
    if get_task:
        reads_done = len(get_task["linearizable"])
        print(f"read barriers committed by then: {barriers} (for {reads_done} linearizable get_task reads)")
    for label, (fl, dl, done, skipped, fired) in (("no readers", quiet), (f"{args.readers} readers", loaded)):
        print(
            f"{label:12}: fired {fired}, skipped for overlap {skipped}; p50/p99 lateness (ms): "
            f"fire {_ms(fl)}, dispatch {_ms(dl)}, finish {_ms(done)}"
        )
    ratio_fire = percentile(loaded[0], 0.99) / max(percentile(quiet[0], 0.99), 0.001)
    ratio_dispatch = percentile(loaded[1], 0.99) / max(percentile(quiet[1], 0.99), 0.001)
    print(
        f"p99 ratio with/without readers: fire {ratio_fire:.2f}x, dispatch {ratio_dispatch:.2f}x "
        "(target <= 2x)"
    )
    print(
        f"reads: {len(reads)} in {args.seconds:.0f} s ({'stale allowed' if args.stale else 'leader only'}), "
        f"p50 {percentile(reads, 0.5) * 1000:.0f} ms, p99 {percentile(reads, 0.99) * 1000:.0f} ms, "
        f"mean {statistics.fmean(reads) * 1000 if reads else float('nan'):.0f} ms"
    )
    print(f"extra overlap skips with readers: {loaded[3] - quiet[3]} (target: none)")
    print(provenance.footer())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
