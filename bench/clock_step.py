"""A leader's wall-clock step: how long until executions are on time again (issue 35 §5).

    python -m bench.clock_step [--offset-ms 600000] [--kill] [--rounds 1]
        [--wait-s 60] [--json FILE]

The chaos harness (3 real nodes, 1 executor, two per-second tasks, no proxies) steps the running
leader's clock by ``--offset-ms`` through its offset file (``SystemClock(offset_file=...)``, as
an NTP step or a VM resume would); with ``--kill`` the leader is SIGKILLed 100 ms after the step.
Measured per round, from the step (from the kill with ``--kill``):

* ``handover_ms``: until another node leads;
* ``on_time_ms``: until the first execution of a later nominal time that started within 1 s of
  it (None: none within ``--wait-s``);
* ``max_leader_now_ahead_ms``: the new leader's committed leader time minus the wall clock.

No outside check runs (a cluster that does not recover within ``--wait-s`` is reported as it is,
then stopped), so the same script measures a build without the fix.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
from dataclasses import asdict
from pathlib import Path

from bench.common import Provenance
from raftsched.testing.chaos.harness import ChaosHarness, ChaosSettings, TaskPlan


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--offset-ms", type=int, default=600_000)
    ap.add_argument("--kill", action="store_true", help="SIGKILL the leader 100 ms after the step")
    ap.add_argument("--rounds", type=int, default=1)
    ap.add_argument("--wait-s", type=float, default=60.0, help="how long to wait for on-time firing")
    ap.add_argument("--json", type=Path, help="write the rounds here")
    args = ap.parse_args()
    provenance = Provenance.start()
    settings = ChaosSettings(
        partitions=False,
        executors=1,
        tasks=(TaskPlan("chaos-tick"), TaskPlan("chaos-sharded", shards=2)),
        recovery_timeout_s=args.wait_s,
    )
    rounds: list[dict[str, object]] = []
    with tempfile.TemporaryDirectory(prefix="clock-step-") as tmp, ChaosHarness(Path(tmp), settings) as h:
        h.start()
        for i in range(args.rounds):
            try:
                step = h.step_leader_clock(args.offset_ms, kill=args.kill)
                rounds.append(asdict(step))
            except TimeoutError as exc:  # the harness could not recover: say how far it got
                rounds.append({"round": i, "error": str(exc)})
                partial = h.clock_steps[-1:] or []
                print(f"round {i}: {exc}", file=sys.stderr)
                rounds[-1]["partial"] = [asdict(p) for p in partial]
                break
            print(json.dumps(rounds[-1]), flush=True)
    out = {"offset_ms": args.offset_ms, "kill": args.kill, "rounds": rounds}
    provenance.print_record()
    if args.json is not None:
        args.json.write_text(json.dumps(provenance.stamp(out), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
