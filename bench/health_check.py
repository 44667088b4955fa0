"""What the leader's fleet-health check costs (issue 36 §3, §4): one ``fleet_view`` read and one
``HealthMonitor.check`` with a backlog of waiting attempts.

    python -m bench.health_check [--tasks 1000] [--shards 10] [--repeat 20]

A simulated one-node cluster with no executor fires ``--tasks`` tasks of ``--shards`` shards
once, so ``tasks x shards`` attempts wait; the check is timed ``--repeat`` times and the fastest
is printed (the least disturbed run on a shared machine). The alert loop runs it at most once a
second, and less often when one check takes longer than 10 ms (at most ~1 % of the loop).
Nothing on the fire or attempt paths changes: the check's cost is per second, not per fire.
"""

from __future__ import annotations

import argparse
import time

from bench.common import Provenance
from raftsched.alerts.config import HealthSettings
from raftsched.alerts.health import HealthMonitor, fleet_view
from raftsched.model import IntervalTrigger, TaskSpec
from raftsched.testing import SimHarness


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tasks", type=int, default=1000)
    ap.add_argument("--shards", type=int, default=10)
    ap.add_argument("--repeat", type=int, default=20)
    args = ap.parse_args()
    provenance = Provenance.start()
    print(provenance.header())
    sim = SimHarness(["n1"], seed=1)
    sim.elect("n1")
    for i in range(args.tasks):
        sim.add_task(TaskSpec(f"t{i}", IntervalTrigger(1000), command="x", shards=args.shards))
    sim.run_for(1500, step_ms=500)
    node = sim.nodes["n1"]
    d, watch = node.dispatcher, node.watch
    assert watch is not None
    monitor = HealthMonitor(HealthSettings())
    now = sim.now("n1")
    best = float("inf")
    for _ in range(args.repeat):
        began = time.perf_counter()
        monitor.check(fleet_view(d, now, watch.view(leading=True)))
        best = min(best, time.perf_counter() - began)
    print(f"waiting attempts: {len(d.waiting)}; one check: {best * 1000:.2f} ms (fastest of {args.repeat})")
    print(provenance.footer())


if __name__ == "__main__":
    main()
