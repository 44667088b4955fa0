"""When a leader's appends leave, and what a proposal waits, per ``raft.auto_tick_period``.

    python -m bench.raft_pacing [--seconds 3] [--tick 0.005 0.02 ...] [--rounds 2] [--json FILE]

For each tick value, alternating over the rounds, three :class:`PySyncObjNode` in this process on
loopback (``append_entries_period`` 0.02 s, a cluster secret, temp data dirs). After a leader is
elected and 1 s of settling, for ``--seconds``: one proposal at a time on the leader, each
waited for (its commit and apply), and every ``append_entries`` the leader sends, timed. Prints
one JSON line per run: appends per second to one follower, the gap between two of them (p50,
max) and the proposals' latency (p50, p90), then the provenance. Before the pacing of
stage 4 (docs/dev/performance-history.md), a longer tick delayed a proposal by up to one tick
and the append after it; with it, the appends leave every period whatever the tick.
"""

from __future__ import annotations

import argparse
import itertools
import json
import statistics
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from bench.common import Json, Provenance
from raftsched.config.types import RaftTuning
from raftsched.consensus.pysyncobj.node import PySyncObjNode
from raftsched.testing.cluster import free_ports, wait_until

SECRET = "raft-pacing-bench-secret-0123456789"


def measure(tick: float, seconds: float) -> Json:
    ports = free_ports(3)
    addrs = {f"n{i}": f"127.0.0.1:{p}" for i, p in enumerate(ports, 1)}
    tuning = RaftTuning(append_entries_period=0.02, auto_tick_period=tick)
    with tempfile.TemporaryDirectory(prefix="raft-pacing-") as tmp:
        nodes = [
            PySyncObjNode(
                n,
                a,
                [o for o in addrs.values() if o != a],
                SECRET,
                Path(tmp) / n,
                tuning,
                apply_fn=lambda _i, _d: b"",
                on_tick=lambda: None,
                on_leadership=lambda _l: None,
                write_snapshot=lambda f: None,
                load_snapshot=lambda _p, _o: None,
                applied_index=lambda: 0,
                addr_to_id={a: n for n, a in addrs.items()}.get,
            )
            for n, a in addrs.items()
        ]
        try:
            leader = wait_until(lambda: next((n for n in nodes if n.is_leader()), None), 30, 0.02, "a leader")
            time.sleep(1.0)
            # The append sends are seen at the transport (pysyncobj has no hook for them).
            transport = leader._raft._SyncObj__transport  # noqa: SLF001
            send = transport.send
            sent: list[tuple[float, str]] = []

            def spy(node: Any, message: Any) -> bool:
                if isinstance(message, dict) and message.get("type") == "append_entries":
                    sent.append((time.monotonic(), str(node.address)))
                return bool(send(node, message))

            transport.send = spy
            took: list[float] = []
            failed = 0
            end = time.monotonic() + seconds
            while time.monotonic() < end:
                done = threading.Event()
                errors: list[object] = []

                def answered(
                    _r: bytes | None, e: object, box: list[object] = errors, ev: threading.Event = done
                ) -> None:
                    box.append(e)
                    ev.set()

                start = time.monotonic()
                leader.propose(b"x" * 100, answered)
                if not done.wait(5) or errors[0] is not None:
                    failed += 1
                    continue
                took.append(time.monotonic() - start)
            transport.send = send
        finally:
            for n in nodes:
                n.destroy()
    follower = sorted({to for _t, to in sent})[0] if sent else ""
    times = [t for t, to in sent if to == follower]
    gaps = [b - a for a, b in itertools.pairwise(times)]
    return {
        "tick": tick,
        "seconds": seconds,
        "appends_per_s_to_one_follower": round(len(times) / seconds, 1),
        "append_gap_ms": {
            "p50": round(1000 * statistics.median(gaps), 1) if gaps else None,
            "max": round(1000 * max(gaps), 1) if gaps else None,
        },
        "proposals": len(took),
        "proposals_failed": failed,
        "proposal_ms": {
            "p50": round(1000 * statistics.median(took), 1) if took else None,
            "p90": round(1000 * statistics.quantiles(took, n=10)[-1], 1) if len(took) > 1 else None,
        },
    }


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds", type=float, default=3.0)
    parser.add_argument("--tick", type=float, nargs="+", default=[0.005, 0.02])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--json", type=Path, default=None, help="also append the lines here")
    args = parser.parse_args()
    provenance = Provenance.start()
    rows: list[Json] = []
    for r in range(args.rounds):
        order = args.tick if r % 2 == 0 else list(reversed(args.tick))
        for tick in order:
            row = {"round": r + 1, **measure(tick, args.seconds)}
            rows.append(row)
            print(json.dumps(row), flush=True)
    if args.json is not None:
        with args.json.open("a") as f:
            for row in rows:
                f.write(json.dumps(row) + "\n")
            f.write(json.dumps({"provenance": provenance.as_dict()}) + "\n")
    provenance.print_record()


if __name__ == "__main__":
    main()
