"""The failover chaos suite: real node and executor processes, injected faults, an outside checker.

* :mod:`raftsched.testing.chaos.harness` — starts a cluster (3 or 5 nodes) and an executor fleet on
  loopback, installs per-second tasks that log every execution to a marker file, and injects
  faults (SIGKILL of leaders, followers and executors; SIGSTOP of the leader; restarts; a wiped
  data dir; a skewed leader clock; a step of the leader's clock while it runs; a partition of the
  leader from its followers, executors and clients);
* :mod:`raftsched.testing.chaos.netproxy` — the TCP proxies every Raft link and gRPC port runs through,
  which the harness cuts and heals to make partitions;
* :mod:`raftsched.testing.chaos.checker` — reads only the marker file and the cluster's public API and
  reports every lost, duplicated or early fire (docs/architecture.md §3, invariants 1-6).

``python -m raftsched.testing.chaos`` runs the CI-sized schedule and prints the figures as JSON;
``bench/chaos.py`` runs the soak.
"""

from raftsched.testing.chaos.checker import ChaosReport, analyse, settle
from raftsched.testing.chaos.harness import (
    ChaosHarness,
    ChaosResult,
    ChaosSettings,
    ci_schedule,
    run_chaos,
    soak_schedule,
)

__all__ = [
    "ChaosHarness",
    "ChaosReport",
    "ChaosResult",
    "ChaosSettings",
    "analyse",
    "ci_schedule",
    "run_chaos",
    "settle",
    "soak_schedule",
]
