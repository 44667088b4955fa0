"""The chaos soak: many leader and executor SIGKILLs against a real cluster, then the outside checker.

    python -m bench.chaos --leader-kills 100 --executor-kills 100 [--nodes 3|5] [--other-rounds N]
                          [--skew] [--slots N] [--prefetch N] [--json FILE] [--keep DIR]

3 (or 5) ``raftsched-node`` processes and 2 executors on loopback run per-second tasks (sharded,
with retries and a timeout) whose commands log every execution; every Raft link and gRPC port
goes through a TCP proxy the harness can cut. With ``--skew`` first a leader clock skewed by +2 s
and by -2 s; then leader and executor SIGKILLs interleaved, each followed by a wait for full
recovery, with ``--other-rounds`` rounds (default 1) of every other fault spread among them:
follower SIGKILL, leader SIGSTOP, planned leader restart (SIGTERM: it hands leadership over),
wiped follower, a SIGKILLed follower replaced by a fresh node (remove-node, then add-node and a
``--join`` start), a node added and a follower removed again, the leader partitioned from its
followers, executors and clients for 3 s (connections stall and survive), the same for 9 s (past
the Raft connection timeout: connections drop and reconnect), the leader partitioned from its
followers only (executors still reach it), and on 5 nodes the leader partitioned together with
one follower.

Prints the figures as JSON: time from a leader SIGKILL to the first fire committed by the new
leader and to the first execution of a fire decided after the kill (p50/p99/max); from a
planned leader restart (SIGTERM) to the next leader's first fire; the same from
a partition's cut, and until the cut-off leader stepped down; fires delayed (started more than
1 s after nominal), lost, duplicated, early; and the checker's violations. Exit status 1 if the
checker found a violation or a skew finding.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path

from bench.common import Provenance
from raftsched.testing.chaos.harness import ChaosSettings, run_chaos, soak_schedule


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--leader-kills", type=int, default=100)
    ap.add_argument("--executor-kills", type=int, default=100)
    ap.add_argument("--nodes", type=int, choices=(3, 5), default=3)
    ap.add_argument("--skew", action="store_true", help="also run the +/-2 s leader clock skew faults")
    ap.add_argument("--other-rounds", type=int, default=1, help="rounds of every other fault (0: only kills)")
    ap.add_argument("--slots", type=int, default=8, help="each executor's slots (default 8)")
    ap.add_argument("--prefetch", type=int, default=0, help="each executor's --prefetch (default 0)")
    ap.add_argument("--keep", type=Path, help="run in this directory and keep it (logs, marker file)")
    ap.add_argument("--json", type=Path, help="also write the figures and the report here")
    args = ap.parse_args()
    provenance = Provenance.start()
    schedule = soak_schedule(args.leader_kills, args.executor_kills, args.other_rounds, args.skew)
    settings = ChaosSettings(nodes=args.nodes, slots=args.slots, prefetch=args.prefetch)
    t0 = time.monotonic()

    def progress(msg: str) -> None:
        print(f"[{time.monotonic() - t0:7.1f} s] {msg}", file=sys.stderr, flush=True)

    if args.keep:
        result = run_chaos(args.keep, schedule, settings, progress)
    else:
        with tempfile.TemporaryDirectory(prefix="raftsched-chaos-") as tmp:
            result = run_chaos(Path(tmp), schedule, settings, progress)
    figures = {**result.figures, "seconds": round(result.seconds)}
    out = {
        "figures": figures,
        "faults": [e.describe() for e in result.events],
        "violations": result.report.violations,
        "skew_findings": result.report.skew_findings[:20],
        "log_problems": result.log_problems,
        "notes": result.report.notes,
    }
    provenance.emit(out)
    if args.json:
        args.json.write_text(
            json.dumps(provenance.stamp({**out, "report": result.report.as_dict()}), indent=2) + "\n"
        )
    return 0 if result.report.ok and not result.report.skew_findings else 1


if __name__ == "__main__":
    raise SystemExit(main())
