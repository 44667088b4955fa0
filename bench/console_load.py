"""Does the web console (or the HTTP/JSON API) slow firing? Commit lateness with and without load.

    python -m bench.console_load [--tasks 2000] [--seconds 15] [--loaders 2] [--pace 0] [--rounds 2]
    python -m bench.console_load --api-clients 50 [--tasks 2000] [--seconds 15] [--rounds 3]

Starts 3 ``raftsched-node`` processes on loopback with their HTTP listeners (so each serves the
console), creates N every-second cron tasks (as ``bench/fires.py`` does), then alternates
windows of ``--seconds``: *quiet* (no console traffic) and *loaded* (``--loaders`` threads load
console pages from the **leader** back to back: the cluster page, two pages of the task list
with its fire strips, a task page with its runs and fire accounting, the workflow list; with
``--pace S`` each loader waits S seconds between loads, as a person or a live refresh does). For each
window it reads the leader's commit lateness of the fires whose nominal time is in the window
(p50/p99/max) and the leader's CPU time, and for loaded windows the page loads per second and
their latency; the leader CPU a page load costs is the loaded windows' extra CPU over the quiet
windows' mean, per load (steadier than lateness on a shared machine).

With ``--api-clients N`` the loaded windows run N HTTP/JSON API clients instead of the console
loaders (issue 30's bound: fire lateness p99 under 50 concurrent API clients within 1.2x of
quiet): each a thread with one kept-alive connection to the leader's HTTP listener, looping
back to back over ``GET /api/v1/tasks/{name}`` (a task of the bench), ``GET /api/v1/tasks?page_size=20``
and ``GET /api/v1/status``; the windows then report API calls per second, their latency and the
leader CPU per call.

Prints JSON: each window, the median p50/p99 of each kind (windows with a leader change left
out, and counted), and the loaded/quiet ratios.

    python -m bench.console_load --api-clients 50 --interleave 120 [--tasks 1000]

``--interleave N`` measures the same thing paired in time, for a machine shared with other work
(whose load moves from one 10 s window to the next): for N seconds, each whole second's fire
batch runs either quiet or loaded (the clients stay connected and pause), in a shuffled order of
pairs, the condition set half a second before the batch is due; the batch's commit lateness
(the max over its fires) is read from the leader 0.9 s into the second. Prints the per-batch
lateness of each kind (p50, p90, p99, mean), their ratios with a 95 % bootstrap confidence
interval (each kind's batches redrawn 2,000 times, seeded), each batch's lateness, the leader
CPU per call, the API answers the clients received while a loaded batch was on its way to
commit (between its due time and its commit: the API work the firing window keeps out), and the
leader's count of calls that waited for its firing window (``/metrics``).
``--firing-hold-ms MS`` sets the nodes' ``[api] firing_hold_ms`` (0: calls never wait).

    python -m bench.console_load --pool RUN.json [RUN.json ...]

pools the batches of interleaved runs by their ``firing_hold_ms`` (each setting's loaded/quiet
ratios over all its runs' batches, with bootstrap intervals).
"""

from __future__ import annotations

import argparse
import asyncio
import bisect
import http.client
import json
import random
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import grpc

from bench import fires
from bench.common import Provenance, bootstrap_ratio, cpu_seconds, next_whole_second_ms, percentile
from raftsched.testing.cluster import LocalCluster, free_ports

PAGES = ("/cluster", "/tasks", "/tasks?page=2", "/tasks/bench-0000001", "/workflows")
API_CALLS = ("/api/v1/tasks/bench-0000001", "/api/v1/tasks?page_size=20", "/api/v1/status")


def write_config(path: Path, nodes: int = 3, firing_hold_ms: int | None = None) -> dict[str, str]:
    ports = free_ports(nodes * 3)
    lines = ["[cluster]", 'name = "console-bench"', 'secret = "console-bench-secret-0123456789"', ""]
    if firing_hold_ms is not None:
        lines += ["[api]", f"firing_hold_ms = {firing_hold_ms}", ""]
    http: dict[str, str] = {}
    for i in range(nodes):
        nid = f"n{i + 1}"
        raft, grpc, web = ports[3 * i : 3 * i + 3]
        http[nid] = f"127.0.0.1:{web}"
        lines += ["[[nodes]]", f'id = "{nid}"', f'raft = "127.0.0.1:{raft}"', f'grpc = "127.0.0.1:{grpc}"']
        lines += [f'http = "{http[nid]}"', f'data_dir = "data/{nid}"', ""]
    path.write_text("\n".join(lines) + "\n")
    return http


class Loader(threading.Thread):
    """Loads console pages back to back until stopped; keeps its session cookie like a browser."""

    def __init__(self, address: str, pace_s: float = 0.0) -> None:
        super().__init__(daemon=True)
        self.pace_s = pace_s
        self.host, port = address.rsplit(":", 1)
        self.port = int(port)
        self.stop = threading.Event()
        self.latencies: list[float] = []
        self.by_path: dict[str, list[float]] = {}
        self.errors = 0
        self.cookie = ""

    def run(self) -> None:
        i = 0
        while not self.stop.is_set():
            path = PAGES[i % len(PAGES)]
            i += 1
            started = time.perf_counter()
            try:
                conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
                conn.request("GET", path, headers={"Cookie": self.cookie} if self.cookie else {})
                response = conn.getresponse()
                response.read()
                cookie = response.getheader("Set-Cookie")
                if cookie:
                    self.cookie = cookie.split(";", 1)[0]
                conn.close()
                if response.status != 200:
                    self.errors += 1
            except OSError:
                self.errors += 1
            self.latencies.append(time.perf_counter() - started)
            self.by_path.setdefault(path, []).append(self.latencies[-1])
            if self.pace_s:
                self.stop.wait(self.pace_s)


class ApiLoader(Loader):
    """An HTTP/JSON API client: one kept-alive connection, :data:`API_CALLS` back to back."""

    record_paths = True  # latencies by path too
    record_answers = False  # the wall-clock time of each answer (answered_at) too

    def __init__(self, address: str, pace_s: float = 0.0) -> None:
        super().__init__(address, pace_s)
        self.answered_at: list[float] = []

    def may_call(self) -> bool:
        """Whether to make the next call now (False: ask again)."""
        return True

    def run(self) -> None:
        i = 0
        conn: http.client.HTTPConnection | None = None
        while not self.stop.is_set():
            if not self.may_call():
                continue
            path = API_CALLS[i % len(API_CALLS)]
            i += 1
            started = time.perf_counter()
            try:
                if conn is None:
                    conn = http.client.HTTPConnection(self.host, self.port, timeout=30)
                conn.request("GET", path)
                response = conn.getresponse()
                response.read()
                if response.status != 200:
                    self.errors += 1
            except (OSError, http.client.HTTPException):
                self.errors += 1
                if conn is not None:
                    conn.close()
                conn = None
            self.latencies.append(time.perf_counter() - started)
            if self.record_answers:
                self.answered_at.append(time.time())
            if self.record_paths:
                self.by_path.setdefault(path, []).append(self.latencies[-1])
            if self.pace_s:
                self.stop.wait(self.pace_s)
        if conn is not None:
            conn.close()


class PausedApiLoader(ApiLoader):
    """An :class:`ApiLoader` that calls only while ``go`` is set (its connection stays open)."""

    record_paths = False
    record_answers = True

    def __init__(self, address: str, go: threading.Event) -> None:
        super().__init__(address)
        self.go = go

    def may_call(self) -> bool:
        return self.go.wait(0.1)


def interleaved(cluster: LocalCluster, leader: str, http: str, clients: int, seconds: int) -> dict[str, Any]:
    """Each second's batch quiet or loaded, paired in time (see the module docstring)."""
    go = threading.Event()
    loaders = [PausedApiLoader(http, go) for _ in range(clients)]
    for t in loaders:
        t.start()
    rng = random.Random(30)
    order: list[str] = []
    while len(order) < seconds:
        pair = ["quiet", "loaded"]
        rng.shuffle(pair)
        order += pair
    lateness: dict[str, list[float]] = {"quiet": [], "loaded": []}
    cpu: dict[str, float] = {"quiet": 0.0, "loaded": 0.0}
    calls = 0
    spans: list[tuple[float, float]] = []  # each loaded batch: due time → its commit
    stopped = ""
    pid = cluster.procs[leader].pid
    try:
        for kind in order[:seconds]:
            now = time.time()
            due = int(now) + 1
            time.sleep(max(0.0, due - 0.5 - now))
            if kind == "loaded":
                go.set()
            else:
                go.clear()
            before = sum(len(t.latencies) for t in loaders)
            cpu0 = cpu_seconds(pid)
            time.sleep(max(0.0, due + 0.9 - time.time()))
            try:
                status = cluster.status(leader, timeout=30, lateness_since_ms=due * 1000)
            except grpc.RpcError as exc:
                stopped = f"the leader's status failed after {len(order[:seconds])} s: {exc.code()}"
                break
            lat = status.commit_lateness
            cpu[kind] += cpu_seconds(pid) - cpu0
            if kind == "loaded":
                calls += sum(len(t.latencies) for t in loaders) - before
            if lat.count:
                lateness[kind].append(float(lat.max_ms))
                if kind == "loaded":
                    spans.append((due, due + lat.max_ms / 1000))
            if status.role != "leader":  # a failover: what follows is not comparable
                stopped = f"{leader} stopped leading ({status.role})"
                break
    finally:
        go.set()
        for t in loaders:
            t.stop.set()
        for t in loaders:
            t.join(30)
    out: dict[str, Any] = {"seconds": len(lateness["quiet"]) + len(lateness["loaded"]), "stopped": stopped}
    for kind, xs in lateness.items():
        out[kind] = {
            "batches": len(xs),
            **{q: percentile(xs, f) for q, f in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))},
            "mean": round(statistics.mean(xs), 1) if xs else 0.0,
        }
    out["ratio_loaded_vs_quiet"] = {
        q: round(out["loaded"][q] / out["quiet"][q], 2) if out["quiet"][q] else None
        for q in ("p50", "p90", "p99", "mean")
    }
    # How far the ratios can be trusted: each kind's batches redrawn (seeded bootstrap).
    out["ratio_ci95"] = {
        q: bootstrap_ratio(lateness["loaded"], lateness["quiet"], f)
        for q, f in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
    }
    out["batches_ms"] = lateness
    loaded_s = max(out["loaded"]["batches"], 1)
    quiet_cpu_per_s = cpu["quiet"] / max(out["quiet"]["batches"], 1)
    out["api_calls_per_loaded_s"] = round(calls / loaded_s, 1)
    out["leader_cpu_ms_per_call"] = round(
        (cpu["loaded"] - quiet_cpu_per_s * loaded_s) / max(calls, 1) * 1000, 2
    )
    out["errors"] = sum(t.errors for t in loaders)
    try:
        out["held"] = held_calls(http)
    except OSError as exc:
        out["held"] = {"error": str(exc)}
    if stopped:  # what the nodes said about leadership, to tell the machine's load from a fault
        out["leadership_log"] = {
            path.stem: [
                line
                for line in path.read_text(errors="replace").splitlines()
                if any(w in line for w in ("leader", "elect", "step", "term"))
            ][-20:]
            for path in sorted(cluster.log_dir.glob("n*.log"))
        }
    # The API work the leader did while a batch was on its way to commit: answers the clients
    # received between the batch's due time and its commit (what the firing window keeps out).
    answers = sorted(x for t in loaders for x in t.answered_at)
    during = [bisect.bisect_left(answers, end) - bisect.bisect_left(answers, due) for due, end in spans]
    out["answers_during_commit"] = {
        "per_batch_mean": round(statistics.mean(during), 1) if during else 0.0,
        "per_batch_max": max(during, default=0),
    }
    return out


def held_calls(address: str) -> dict[str, float]:
    """The leader's count of API calls that waited for its firing window, and their wait."""
    host, port = address.rsplit(":", 1)
    conn = http.client.HTTPConnection(host, int(port), timeout=30)
    try:
        conn.request("GET", "/metrics")
        text = conn.getresponse().read().decode()
    finally:
        conn.close()
    out: dict[str, float] = {}
    for line in text.splitlines():
        for name in ("raftsched_http_api_held_total", "raftsched_http_api_held_seconds_total"):
            if line.startswith(name + "{") or line.startswith(name + " "):
                out[name] = float(line.rsplit(" ", 1)[1])
    return out


def window(
    cluster: LocalCluster,
    leader: str,
    seconds: int,
    http: str | None,
    loaders: int,
    pace_s: float,
    api: bool = False,
) -> dict[str, Any]:
    start_ms = next_whole_second_ms()
    pid = cluster.procs[leader].pid
    kind = ApiLoader if api else Loader
    threads = [kind(http, pace_s) for _ in range(loaders)] if http else []
    cpu0 = cpu_seconds(pid)
    for t in threads:
        t.start()
    time.sleep(seconds)
    for t in threads:
        t.stop.set()
    for t in threads:
        t.join(30)
    cpu = cpu_seconds(pid) - cpu0
    status = cluster.status(leader, timeout=30, lateness_since_ms=start_ms)
    lat = status.commit_lateness
    out: dict[str, Any] = {
        "kind": "loaded" if threads else "quiet",
        "fires": lat.count,
        "leader_cpu_s": round(cpu, 2),
        "commit_lateness_ms": {"p50": lat.p50_ms, "p99": lat.p99_ms, "max": lat.max_ms},
    }
    if threads:
        pages = [x for t in threads for x in t.latencies]
        out["page_loads"] = len(pages)
        out["page_loads_per_s"] = round(len(pages) / seconds, 1)
        out["page_ms"] = {
            "p50": round(percentile(pages, 0.5) * 1000, 1) if pages else 0.0,
            "p99": round(percentile(pages, 0.99) * 1000, 1) if pages else 0.0,
        }
        by_path: dict[str, list[float]] = {}
        for t in threads:
            for path, xs in t.by_path.items():
                by_path.setdefault(path, []).extend(xs)
        out["page_ms_by_path"] = {
            path: {
                "n": len(xs),
                "median": round(percentile(xs, 0.5) * 1000, 1),
                "max": round(max(xs) * 1000, 1),
            }
            for path, xs in by_path.items()
        }
        out["page_errors"] = sum(t.errors for t in threads)
    return out


def run(
    n_tasks: int,
    seconds: int,
    loaders: int,
    pace_s: float,
    rounds: int,
    base: Path,
    api: bool = False,
    interleave: int = 0,
    firing_hold_ms: int | None = None,
) -> dict[str, Any]:
    http = write_config(base / "cluster.toml", firing_hold_ms=firing_hold_ms)
    cluster = LocalCluster(base / "cluster.toml", base / "logs")
    try:
        cluster.start()
        leader = cluster.wait_for_leader(60)
        asyncio.run(fires.create_tasks([cluster.grpc_of(leader), *cluster.targets()], n_tasks))
        leader = cluster.wait_for_leader(30)
        time.sleep(3)  # let the schedule settle into its steady state
        if interleave:
            result = interleaved(cluster, leader, http[leader], loaders, interleave)
            return {
                "tasks": n_tasks,
                "load": "http_api_clients",
                "loaders": loaders,
                "firing_hold_ms": firing_hold_ms,
                **result,
            }
        windows = []
        for _ in range(rounds):
            for loaded in (False, True):
                target = http[leader] if loaded else None
                result = window(cluster, leader, seconds, target, loaders, pace_s, api)
                now = cluster.wait_for_leader(30)
                result["leader_changed"] = now != leader  # a window with a failover is not comparable
                windows.append(result)
                leader = now
    finally:
        cluster.stop()

    def median(kind: str, q: str) -> float:
        kept = [w["commit_lateness_ms"][q] for w in windows if w["kind"] == kind and not w["leader_changed"]]
        return float(statistics.median(kept)) if kept else 0.0

    summary = {q: {"quiet": median("quiet", q), "loaded": median("loaded", q)} for q in ("p50", "p99")}
    # The leader's CPU a page load costs: loaded windows' CPU over the quiet windows' mean.
    kept = [w for w in windows if not w["leader_changed"]]
    quiet_cpu = statistics.mean(w["leader_cpu_s"] for w in kept if w["kind"] == "quiet")
    loads = sum(w["page_loads"] for w in kept if w["kind"] == "loaded")
    extra_cpu = sum(w["leader_cpu_s"] - quiet_cpu for w in kept if w["kind"] == "loaded")
    return {
        "tasks": n_tasks,
        "window_s": seconds,
        "load": "http_api_clients" if api else "console_loaders",
        "loaders": loaders,
        "pace_s": pace_s,
        "pages": list(API_CALLS if api else PAGES),
        "windows": windows,
        "commit_lateness_ms": summary,
        "leader_changes": sum(1 for w in windows if w["leader_changed"]),
        "leader_cpu_ms_per_page_load": round(extra_cpu / max(loads, 1) * 1000, 1),
        "ratio_loaded_vs_quiet": {
            q: round(v["loaded"] / v["quiet"], 2) if v["quiet"] else None for q, v in summary.items()
        },
    }


def pooled(results: list[dict[str, Any]]) -> dict[str, Any]:
    """Interleaved runs (their ``--json`` files) pooled by ``firing_hold_ms``: each setting's
    batches of every run together, the loaded/quiet ratios with their bootstrap intervals, and
    the runs' calls per second, answers during commit and machine load."""
    by_setting: dict[str, list[dict[str, Any]]] = {}
    for r in results:
        by_setting.setdefault(str(r.get("firing_hold_ms")), []).append(r)
    out: dict[str, Any] = {}
    for setting, runs in sorted(by_setting.items()):
        quiet = [x for r in runs for x in r["batches_ms"]["quiet"]]
        loaded = [x for r in runs for x in r["batches_ms"]["loaded"]]
        out[f"firing_hold_ms={setting}"] = {
            "runs": len(runs),
            "batches": {"quiet": len(quiet), "loaded": len(loaded)},
            "quiet_ms": {q: percentile(quiet, f) for q, f in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))},
            "loaded_ms": {q: percentile(loaded, f) for q, f in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))},
            "ratio_ci95": {
                q: bootstrap_ratio(loaded, quiet, f) for q, f in (("p50", 0.5), ("p90", 0.9), ("p99", 0.99))
            },
            "api_calls_per_loaded_s": [r["api_calls_per_loaded_s"] for r in runs],
            "answers_during_commit_per_batch": [
                r.get("answers_during_commit", {}).get("per_batch_mean") for r in runs
            ],
            "held": [r.get("held", {}).get("raftsched_http_api_held_total") for r in runs],
            "load_avg": [
                (r["provenance"]["load_avg_at_start"][0], r["provenance"]["load_avg_at_end"][0]) for r in runs
            ],
            "commits": sorted({r["provenance"]["commit"][:8] for r in runs}),
        }
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=2000)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--loaders", type=int, default=2)
    ap.add_argument("--pace", type=float, default=0.0, help="seconds each loader waits between loads")
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument(
        "--api-clients",
        type=int,
        default=0,
        help="load with this many HTTP/JSON API clients instead of --loaders console loaders",
    )
    ap.add_argument(
        "--interleave",
        type=int,
        default=0,
        metavar="N",
        help="with --api-clients: N seconds, each second's batch quiet or loaded (paired in time)",
    )
    ap.add_argument(
        "--firing-hold-ms",
        type=int,
        default=None,
        metavar="MS",
        help="the nodes' [api] firing_hold_ms (0: API calls never wait for the firing window; "
        "default: the config's default)",
    )
    ap.add_argument(
        "--pool",
        type=Path,
        nargs="+",
        metavar="FILE",
        help="pool the batches of these --interleave results by firing_hold_ms (runs nothing)",
    )
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    provenance = Provenance.start()
    if args.pool:
        provenance.emit(
            {
                "pooled_from": [str(p) for p in args.pool],
                **pooled([json.loads(p.read_text()) for p in args.pool]),
            },
            args.json,
        )
        return 0
    api = args.api_clients > 0
    loaders = args.api_clients if api else args.loaders
    with tempfile.TemporaryDirectory(prefix="raftsched-console-bench-") as tmp:
        result = run(
            args.tasks,
            args.seconds,
            loaders,
            args.pace,
            args.rounds,
            Path(tmp),
            api,
            args.interleave if api else 0,
            args.firing_hold_ms,
        )
    provenance.emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
