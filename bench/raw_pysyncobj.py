"""The Raft library's own limit: pipelined pysyncobj commits/s on 3 local nodes, no raftsched code.

    python -m bench.raw_pysyncobj [--seconds 5] [--in-flight 5000]

Starts 3 processes (this file with ``--node``), each a ``SyncObj`` with the configuration
raftsched uses (batch mode, ``appendEntriesPeriod=0.02``, ``autoTickPeriod=0.005``, a password,
a journal file). The process that wins the election measures, with callbacks (never
``sync=True``) and up to ``--in-flight`` calls outstanding:

* ``small``: ``incr(1)`` — one small command per log entry;
* ``batch100``: ``add(items)`` with 100 items of 16 bytes per call (a FireBatch-like entry).

It reports committed calls/s (and items/s) over the measured window after a 1 s warm-up. This is
a measurement of pysyncobj itself, so it lives in bench/ (the one-adapter rule of
tests/unit/test_architecture.py governs the raftsched/ package).
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf, replicated

from bench.common import Provenance
from raftsched.testing.cluster import free_ports

_RAFT_LEADER = 2  # getStatus()["state"] of the leader (pysyncobj's _RAFT_STATE.LEADER)


class Counter(SyncObj):  # type: ignore[misc]
    def __init__(self, self_addr: str, partners: list[str], conf: SyncObjConf) -> None:
        super().__init__(self_addr, partners, conf)
        self._value = 0

    @replicated  # type: ignore[untyped-decorator]
    def incr(self, n: int) -> int:
        self._value += n
        return self._value

    @replicated  # type: ignore[untyped-decorator]
    def add(self, items: list[bytes]) -> int:
        self._value += len(items)
        return self._value


def measure(obj: Counter, kind: str, seconds: float, in_flight: int) -> dict[str, float]:
    """Calls committed per second with up to ``in_flight`` outstanding (callbacks, pipelined)."""
    slots = threading.Semaphore(in_flight)
    done = [0, 0]  # ok, failed
    item = b"x" * 16
    batch = [item] * 100

    def cb(result: Any, err: int) -> None:
        done[0 if err == FAIL_REASON.SUCCESS else 1] += 1
        slots.release()

    warm_end = time.monotonic() + 1.0
    end = warm_end + seconds
    start_count = -1
    t_start = 0.0
    while True:
        now = time.monotonic()
        if start_count < 0 and now >= warm_end:
            start_count, t_start = done[0], now
        if now >= end:
            break
        if not slots.acquire(timeout=0.1):
            continue
        if kind == "small":
            obj.incr(1, callback=cb)
        else:
            obj.add(batch, callback=cb)
    committed = done[0] - start_count
    elapsed = time.monotonic() - t_start
    per_call = 1 if kind == "small" else 100
    # Let outstanding calls settle before the next measurement.
    for _ in range(in_flight):
        slots.acquire(timeout=10)
    for _ in range(in_flight):
        slots.release()
    return {
        "calls_per_s": round(committed / elapsed, 1),
        "items_per_s": round(committed * per_call / elapsed, 1),
        "failed": done[1],
    }


def node_main(args: argparse.Namespace) -> int:
    addrs: list[str] = args.addrs.split(",")
    me = addrs[args.node]
    conf = SyncObjConf(
        appendEntriesUseBatch=True,
        appendEntriesPeriod=0.02,
        autoTickPeriod=0.005,
        raftMinTimeout=0.4,
        raftMaxTimeout=1.4,
        connectionTimeout=3.5,
        connectionRetryTime=1.0,
        leaderFallbackTimeout=2.0,
        password="raw-pysyncobj-bench-secret-0123",
        commandsWaitLeader=False,
        journalFile=str(Path(args.dir) / f"n{args.node}.journal"),
        commandsQueueSize=max(100_000, 2 * args.in_flight),
    )
    obj = Counter(me, [a for a in addrs if a != me], conf)
    result_path = Path(args.dir) / "result.json"
    deadline = time.monotonic() + 60
    while obj.getStatus()["leader"] is None and time.monotonic() < deadline:
        time.sleep(0.05)
    time.sleep(0.5)
    if obj.getStatus()["state"] == _RAFT_LEADER:
        out = {
            "small": measure(obj, "small", args.seconds, args.in_flight),
            "batch100": measure(obj, "batch100", args.seconds, max(1, args.in_flight // 10)),
        }
        tmp = result_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(out))
        tmp.rename(result_path)
    while not result_path.exists() and time.monotonic() < deadline + 4 * args.seconds:
        time.sleep(0.1)
    time.sleep(0.5)
    obj.destroy()
    return 0


def run(seconds: float = 5.0, in_flight: int = 5000) -> dict[str, object]:
    with tempfile.TemporaryDirectory(prefix="raw-pysyncobj-") as tmp:
        addrs = ",".join(f"127.0.0.1:{p}" for p in free_ports(3))
        procs = [
            subprocess.Popen(
                [
                    sys.executable,
                    "-m",
                    "bench.raw_pysyncobj",
                    "--node",
                    str(i),
                    "--addrs",
                    addrs,
                    "--dir",
                    tmp,
                    "--seconds",
                    str(seconds),
                    "--in-flight",
                    str(in_flight),
                ]
            )
            for i in range(3)
        ]
        try:
            for p in procs:
                p.wait(timeout=120 + 4 * seconds)
        finally:
            for p in procs:
                if p.poll() is None:
                    p.kill()
                    p.wait()
        path = Path(tmp) / "result.json"
        if not path.exists():
            raise RuntimeError("no node measured (no stable leader?)")
        result: dict[str, object] = json.loads(path.read_text())
    result["in_flight"] = in_flight
    result["window_s"] = seconds
    return result


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--in-flight", type=int, default=5000)
    ap.add_argument("--node", type=int, help=argparse.SUPPRESS)
    ap.add_argument("--addrs", help=argparse.SUPPRESS)
    ap.add_argument("--dir", help=argparse.SUPPRESS)
    ap.add_argument("--json", type=Path, help="also write the result here")
    args = ap.parse_args()
    if args.node is not None:
        return node_main(args)
    provenance = Provenance.start()
    provenance.emit(run(args.seconds, args.in_flight), args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
