"""The HTTP/JSON API against gRPC in the same run, and what 50 HTTP clients cost firing.

    python -m bench.http_api [--seconds 8] [--clients 8] [--fire-seconds 15] [--http-clients 50]

Starts a real 3-node cluster (each node with its HTTP listener) and one executor, then:

1. For each of gRPC GetTask (the SDK), ``GET /api/v1/tasks/{name}``, gRPC TriggerNow and
   ``POST /api/v1/tasks/{name}:trigger``: ``--clients`` closed-loop clients (threads over 2
   processes, one kept-alive connection or channel each) against the leader for ``--seconds``;
   prints requests/s, p50 and p99, and errors.
2. ``--tasks`` per-second tasks: fire lateness (decided - nominal, from the fire accounting) over
   ``--fire-seconds`` without, then with ``--http-clients`` HTTP clients looping on
   ``GET /api/v1/tasks/{name}``; prints both and the p99 ratio (the console's bound: 1.2x).
   One window of each: for the bound itself, ``python -m bench.console_load --api-clients 50``
   alternates quiet and loaded windows over several rounds and reports the median ratio.

Every figure is from one run on this machine (shared: other work skews it); run it twice.
"""

from __future__ import annotations

import argparse
import concurrent.futures
import http.client
import json
import tempfile
import threading
import time
from pathlib import Path

from bench.common import Provenance, percentile, wait_registered
from bench.readers import window
from raftsched.client import Client
from raftsched.model import CronTrigger, ManualTrigger, Overlap, TaskSpec
from raftsched.testing.cluster import LocalCluster
from tests.integration.console_support import write_http_config

PROCESSES = 2
READ_TASK = "bench-read"
TRIGGER_TASK = "bench-trigger"


def client_process(mode: str, target: str, threads: int, seconds: float) -> tuple[list[float], int]:
    """``threads`` closed-loop clients of ``mode`` for ``seconds``: (latencies in s, errors)."""
    out: list[float] = []
    errors = [0]
    lock = threading.Lock()
    end = time.monotonic() + seconds
    grpc_client = Client(target, timeout=30) if mode.startswith("grpc") else None

    def loop() -> None:
        mine: list[float] = []
        bad = 0
        conn = None
        if grpc_client is None:
            host, port = target.rsplit(":", 1)
            conn = http.client.HTTPConnection(host, int(port), timeout=30)
        while time.monotonic() < end:
            start = time.perf_counter()
            try:
                if mode == "grpc-get":
                    assert grpc_client is not None
                    grpc_client.get_task(READ_TASK)
                elif mode == "grpc-trigger":
                    assert grpc_client is not None
                    grpc_client.trigger(TRIGGER_TASK)
                else:
                    assert conn is not None
                    if mode == "http-get":
                        conn.request("GET", f"/api/v1/tasks/{READ_TASK}")
                    else:
                        conn.request(
                            "POST",
                            f"/api/v1/tasks/{TRIGGER_TASK}:trigger",
                            body=b"{}",
                            headers={"Content-Type": "application/json"},
                        )
                    response = conn.getresponse()
                    body = response.read()
                    if response.status != 200:
                        raise RuntimeError(body[:200])
                    json.loads(body)
            except Exception:
                bad += 1
                if conn is not None:
                    conn.close()
            mine.append(time.perf_counter() - start)
        if conn is not None:
            conn.close()
        with lock:
            out.extend(mine)
            errors[0] += bad

    pool = [threading.Thread(target=loop) for _ in range(threads)]
    for t in pool:
        t.start()
    for t in pool:
        t.join()
    if grpc_client is not None:
        grpc_client.close()
    return out, errors[0]


def run_clients(mode: str, target: str, clients: int, seconds: float) -> tuple[list[float], int]:
    per = [clients // PROCESSES + (1 if i < clients % PROCESSES else 0) for i in range(PROCESSES)]
    with concurrent.futures.ProcessPoolExecutor(PROCESSES) as pool:
        futures = [pool.submit(client_process, mode, target, n, seconds) for n in per if n]
        results = [f.result() for f in futures]
    return [x for r in results for x in r[0]], sum(r[1] for r in results)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=8.0, help="length of each throughput window")
    ap.add_argument("--clients", type=int, default=8, help="concurrent clients per throughput window")
    ap.add_argument("--tasks", type=int, default=10, help="per-second tasks for the firing windows")
    ap.add_argument("--fire-seconds", type=float, default=15.0)
    ap.add_argument("--http-clients", type=int, default=50)
    args = ap.parse_args()
    provenance = Provenance.start()
    print(provenance.header(), flush=True)
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        http = write_http_config(base / "cluster.toml", 3)
        cluster = LocalCluster(base / "cluster.toml", base / "logs")
        exe = None
        try:
            cluster.start()
            leader = cluster.wait_for_leader(60)
            exe = cluster.start_executor("ex1", 64, base / "ex1")
            wait_registered(cluster.log_dir, {"ex1": exe})
            grpc_target, http_target = cluster.grpc_of(leader), http[leader]
            with Client(cluster.targets(), timeout=30) as client:
                client.add_task(TaskSpec(READ_TASK, ManualTrigger(), command="true"))
                client.add_task(
                    TaskSpec(TRIGGER_TASK, ManualTrigger(), command="true", overlap=Overlap.ALLOW)
                )
                print(f"{args.clients} closed-loop clients against the leader, {args.seconds:.0f} s each:")
                print("| call | requests/s | p50 ms | p99 ms | errors |")
                print("|---|---|---|---|---|")
                for mode, label in (
                    ("grpc-get", "gRPC GetTask"),
                    ("http-get", "GET /api/v1/tasks/{name}"),
                    ("grpc-trigger", "gRPC TriggerNow"),
                    ("http-trigger", "POST /api/v1/tasks/{name}:trigger"),
                ):
                    target = grpc_target if mode.startswith("grpc") else http_target
                    lat, errors = run_clients(mode, target, args.clients, args.seconds)
                    print(
                        f"| {label} | {len(lat) / args.seconds:.0f} | {percentile(lat, 0.5) * 1000:.1f} | "
                        f"{percentile(lat, 0.99) * 1000:.1f} | {errors} |",
                        flush=True,
                    )

                names = [f"tick{i:02d}" for i in range(args.tasks)]
                for name in names:
                    client.add_task(
                        TaskSpec(name, CronTrigger("* * * * * *"), command="true", overlap=Overlap.SKIP)
                    )
                time.sleep(5.0)  # the tasks' first fires settle
                a0 = int(time.time() * 1000)
                time.sleep(args.fire_seconds)
                a1 = int(time.time() * 1000)
                loaded_windows = []
                for mode, target in (("http-get", http_target), ("grpc-get", grpc_target)):
                    with concurrent.futures.ThreadPoolExecutor(1) as side:
                        load = side.submit(
                            run_clients, mode, target, args.http_clients, args.fire_seconds + 2
                        )
                        time.sleep(1.0)  # clients ramping up
                        b0 = int(time.time() * 1000)
                        time.sleep(args.fire_seconds)
                        b1 = int(time.time() * 1000)
                        reads, read_errors = load.result()
                    loaded_windows.append((mode, b0, b1, reads, read_errors))
                time.sleep(3.0)  # the last fires of the window settle
                quiet = window(client, names, a0, a1)
                loaded = [(m, window(client, names, b0, b1), r, e) for m, b0, b1, r, e in loaded_windows]
        finally:
            if exe is not None:
                exe.terminate()
                exe.wait(timeout=10)
            cluster.stop()
    print(f"{args.tasks} per-second tasks, {args.fire_seconds:.0f} s windows:")
    print(
        "| readers | fired | skipped for overlap | fire lateness p50/p99 ms | p99 ratio | reads/s (p99 ms) |"
    )
    print("|---|---|---|---|---|---|")
    base_p99 = max(percentile(quiet[0], 0.99), 0.001)
    p50, p99 = percentile(quiet[0], 0.5) * 1000, percentile(quiet[0], 0.99) * 1000
    print(f"| none | {quiet[4]} | {quiet[3]} | {p50:.0f}/{p99:.0f} | 1.00 | - |")
    for mode, w, reads, read_errors in loaded:
        who = f"{args.http_clients} {'HTTP' if mode.startswith('http') else 'gRPC'} GetTask clients"
        print(
            f"| {who} | {w[4]} | {w[3]} | "
            f"{percentile(w[0], 0.5) * 1000:.0f}/{percentile(w[0], 0.99) * 1000:.0f} | "
            f"{percentile(w[0], 0.99) / base_p99:.2f} | {len(reads) / (args.fire_seconds + 2):.0f} "
            f"({percentile(reads, 0.99) * 1000:.0f}){f', {read_errors} errors' if read_errors else ''} |"
        )
    print(provenance.footer())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
