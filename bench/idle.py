"""The fixed cost: CPU and context switches of an idle 3-node cluster, per ``[raft]`` setting.

    python -m bench.idle [--seconds 10] [--rounds 2] [--setting 0.005 0.01 0.02 0.005/0.05 ...]

Each setting is ``T`` (``raft.auto_tick_period`` T) or ``T/A`` (and ``raft.append_entries_period``
A). For each, alternating over the rounds (forward, then backward), a fresh cluster with no task:
after the leader is elected and 3 s of settling, over ``--seconds``, each node's CPU per second
(utime + stime from /proc), its busiest thread's (pysyncobj's tick thread, which also sends and
receives the heartbeats), and its voluntary and involuntary context switches per second summed
over its threads. Ends with the mean per setting of the three nodes' sum. Prints JSON lines, then
``{"provenance": ...}``.

This is the load-independent cost of issue 31's design review (§1.4): ticks, heartbeats and timers.
bench/run.py's ``tick`` section measures the same settings under load (commit lateness, CPU per
attempt).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import tempfile
import time
from pathlib import Path

from bench.common import Json, Provenance, cpu_seconds
from raftsched.testing.cluster import LocalCluster


def raft_extra(setting: str) -> str:
    """``[raft]`` TOML of a ``T`` or ``T/A`` setting."""
    tick, _, period = setting.partition("/")
    out = f"[raft]\nauto_tick_period = {float(tick)!r}\n"
    if period:
        out += f"append_entries_period = {float(period)!r}\n"
    return out


def threads(pid: int) -> dict[int, float]:
    """CPU seconds so far of each live thread of ``pid``."""
    out: dict[int, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        with contextlib.suppress(FileNotFoundError):  # the thread ended in between
            out[int(tid)] = cpu_seconds(pid, int(tid))
    return out


def switches(pid: int) -> tuple[int, int]:
    """(voluntary, involuntary) context switches so far, summed over the threads of ``pid``."""
    vol = invol = 0
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            text = Path(f"/proc/{pid}/task/{tid}/status").read_text()
        except FileNotFoundError:
            continue
        for line in text.splitlines():
            if line.startswith("voluntary_ctxt_switches:"):
                vol += int(line.split()[1])
            elif line.startswith("nonvoluntary_ctxt_switches:"):
                invol += int(line.split()[1])
    return vol, invol


def measure(setting: str, seconds: float, base: Path) -> Json:
    cluster = LocalCluster.create(base, 3, extra_config=raft_extra(setting))
    try:
        cluster.start()
        leader = cluster.wait_for_leader(60)
        time.sleep(3)
        pids = {nid: proc.pid for nid, proc in cluster.procs.items()}
        t0 = {n: threads(p) for n, p in pids.items()}
        c0 = {n: cpu_seconds(p) for n, p in pids.items()}
        s0 = {n: switches(p) for n, p in pids.items()}
        start = time.monotonic()
        time.sleep(seconds)
        t1 = {n: threads(p) for n, p in pids.items()}
        c1 = {n: cpu_seconds(p) for n, p in pids.items()}
        s1 = {n: switches(p) for n, p in pids.items()}
        elapsed = time.monotonic() - start
        leader_after = cluster.leader()
    finally:
        cluster.stop()
    nodes: Json = {}
    for n in pids:
        busiest = max(t1[n][tid] - t0[n].get(tid, 0.0) for tid in t1[n])
        nodes[n] = {
            "cpu_ms_per_s": round((c1[n] - c0[n]) / elapsed * 1000, 1),
            "busiest_thread_cpu_ms_per_s": round(busiest / elapsed * 1000, 1),
            "voluntary_switches_per_s": round((s1[n][0] - s0[n][0]) / elapsed),
            "involuntary_switches_per_s": round((s1[n][1] - s0[n][1]) / elapsed),
        }
    return {
        "setting": setting,
        "seconds": round(elapsed, 1),
        "leader": leader,
        "leader_changed": leader_after != leader,
        "nodes": nodes,
        "cpu_ms_per_s_3_nodes": round(sum(v["cpu_ms_per_s"] for v in nodes.values()), 1),
        "load_avg_1m": round(os.getloadavg()[0], 2),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=10.0)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--setting", nargs="+", default=["0.005", "0.01", "0.02"], help="T or T/A, see above")
    args = ap.parse_args()
    for s in args.setting:
        try:
            raft_extra(s)
        except ValueError:
            ap.error(f"--setting {s!r}: expected T or T/A, seconds as numbers (e.g. 0.02 or 0.005/0.05)")
    provenance = Provenance.start()
    rows: list[Json] = []
    for r in range(args.rounds):
        for setting in args.setting if r % 2 == 0 else list(reversed(args.setting)):
            with tempfile.TemporaryDirectory(prefix="raftsched-idle-") as tmp:
                row = measure(setting, args.seconds, Path(tmp))
            rows.append(row)
            print(json.dumps(row), flush=True)
    mean = {
        s: round(
            sum(float(r["cpu_ms_per_s_3_nodes"]) for r in rows if r["setting"] == s) / args.rounds,
            1,
        )
        for s in args.setting
    }
    print(json.dumps({"mean_cpu_ms_per_s_3_nodes": mean}), flush=True)
    print(json.dumps({"provenance": provenance.as_dict()}), flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
