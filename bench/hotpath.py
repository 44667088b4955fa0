"""The fire hot path in one process, without Raft or gRPC: planning (leader) and applying (every node).

    python -m bench.hotpath [--tasks 10000] [--seconds 10] [--store lmdb|memory] [--metrics] [--follower]

N every-second cron tasks in a :class:`SchedulerState` over an LMDB store (``sync=False``, as a
node opens it) and a :class:`LeaderDriver`; then, for each simulated second: the driver plans
every due fire into FireBatch entries (``poll``), each entry is applied through a
:class:`Replica` (as the applier thread does), the store commits once per second, and the
effects go back to the driver (re-arming the wheel). CPU time per fire is reported for each
step, next to the bare heapq loop of bench/fires.py measured in the same process.

The figures are deterministic enough to compare code changes (no network, no other process):
run it before and after, on the same machine. Times are single-thread CPU (``process_time``).
The figure to compare is ``leader_total_us_per_fire``; ``python -m bench.ab`` runs this against
two checkouts, alternating, with short runs (``--tasks 5000 --seconds 6``).

``--metrics`` adds what a node with ``http`` set does on these paths: the applier's tally (fires
by outcome, owner and namespace), the commit-lateness histogram per committed batch, and one
scrape of the node's metrics every 15 simulated seconds (Prometheus's default interval; its
cost is reported apart and included in the total).

``--follower`` applies every entry to a second state as well, as a follower does: its own store,
its effects handed to a driver and a dispatcher that do not lead (what a follower node does with
them, without the hop to its event loop), and reports that node's apply and commit CPU per fire.
"""

from __future__ import annotations

import argparse
import random
import tempfile
import time
from pathlib import Path

from bench import fires
from bench.common import Provenance
from raftsched.abc import StateStore
from raftsched.fsm.effects import Effect
from raftsched.fsm.records import Retention
from raftsched.fsm.state import SchedulerState
from raftsched.fsm.tally import ApplyTally
from raftsched.leader import writes
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.leader.driver import LeaderDriver
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.observability.node_metrics import NodeMetrics, NodeSample
from raftsched.replica import Replica
from raftsched.storage.lmdb_store import LmdbStore
from raftsched.storage.memory import MemoryStore

T0 = 1_800_000_000_000  # a whole second


def _open(store_kind: str, path: Path) -> StateStore:
    return LmdbStore(path, sync=False) if store_kind == "lmdb" else MemoryStore()


def run(
    n: int, seconds: int, store_kind: str, base: Path, metrics: bool = False, follower: bool = False
) -> dict[str, object]:
    store = _open(store_kind, base / "state")
    state = SchedulerState.load(store, Retention())
    node_metrics: NodeMetrics | None = None
    if metrics:
        state.tally = ApplyTally()
        node_metrics = NodeMetrics("n1", NodeSample, state.tally)
    replica = Replica(state, store)
    index = 0

    def apply(data: bytes) -> None:
        nonlocal index
        index += 1
        replica.apply_entry(index, data)
        if f_replica is not None:
            pending.append((index, data))

    # The follower applies what the leader applied, after it (timed apart).
    f_replica: Replica | None = None
    pending: list[tuple[int, bytes]] = []
    if follower:
        f_state = SchedulerState.load(_open(store_kind, base / "follower"), Retention())
        f_driver = LeaderDriver(f_state, "n2")
        f_dispatcher = Dispatcher(f_state, DispatchSettings(), random.Random(0))

        def f_sink(effects: tuple[Effect, ...]) -> None:
            f_driver.on_effects(effects)
            f_dispatcher.on_effects(effects, 0)

        # As raftsched.server.node: no leader effects on a node whose own barrier was never applied.
        f_replica = Replica(f_state, f_state.store, effect_sink=f_sink, node_id="n2")

    def follow() -> None:
        assert f_replica is not None
        for i, data in pending:
            f_replica.apply_entry(i, data)
        pending.clear()

    specs = [
        (TaskSpec(f"hot-{i:07d}", CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, command="true"), False)
        for i in range(n)
    ]
    commands, refused = writes.create_tasks(specs, now_ms=T0 - 2000, epoch=1, origin="n1", key="k")
    assert not refused
    for data in commands:
        apply(data)
    replica.end_of_tick()
    if f_replica is not None:
        follow()
        f_replica.end_of_tick()
    driver = LeaderDriver(state, "n1")
    replica.effect_sink = driver.on_effects
    apply(driver.become_leader(1, T0 - 1000).data)
    assert driver.ready
    plan_s = apply_s = commit_s = scrape_s = f_apply_s = f_commit_s = 0.0
    fired = batches = 0
    for s in range(seconds):
        now = T0 + s * 1000 + 5
        c0 = time.process_time()
        proposals = driver.poll(now)
        c1 = time.process_time()
        for p in proposals:
            apply(p.data)
            driver.on_proposal_committed(p)
            if node_metrics is not None:
                # What the node's commit hook does: one list per batch, one observe per batch.
                node_metrics.observe_commit_lateness([(f, now - f, c) for f, c in p.fired])
            fired += sum(count for _, count in p.fired)
        c2 = time.process_time()
        replica.end_of_tick()
        c3 = time.process_time()
        if node_metrics is not None and s % 15 == 14:
            node_metrics.exposition()
        c4 = time.process_time()
        plan_s += c1 - c0
        apply_s += c2 - c1
        commit_s += c3 - c2
        scrape_s += c4 - c3
        if f_replica is not None:
            f0 = time.process_time()
            follow()
            f1 = time.process_time()
            f_replica.end_of_tick()
            f_apply_s += f1 - f0
            f_commit_s += time.process_time() - f1
        batches += len(proposals)
    heap = fires.heapq_loop(n, seconds)
    per = max(fired, 1)
    if f_replica is not None:
        assert f_replica.state.digest() == state.digest(), "the follower's state differs"
    extra = (
        {
            "follower_apply_us_per_fire": round(f_apply_s / per * 1e6, 2),
            "follower_commit_us_per_fire": round(f_commit_s / per * 1e6, 2),
        }
        if follower
        else {}
    )
    return {
        "tasks": n,
        "seconds": seconds,
        "store": store_kind,
        "metrics": metrics,
        "fires": fired,
        "batches": batches,
        "plan_us_per_fire": round(plan_s / per * 1e6, 2),
        "apply_us_per_fire": round(apply_s / per * 1e6, 2),
        "commit_us_per_fire": round(commit_s / per * 1e6, 2),
        "scrape_us_per_fire": round(scrape_s / per * 1e6, 3),
        "leader_total_us_per_fire": round((plan_s + apply_s + commit_s + scrape_s) / per * 1e6, 2),
        "heapq_us_per_fire": round(heap * 1e6, 3),
        "leader_vs_heapq": round((plan_s + apply_s + commit_s + scrape_s) / per / heap, 1),
        **extra,
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--store", choices=["lmdb", "memory"], default="lmdb")
    ap.add_argument("--metrics", action="store_true", help="with a node's metrics")
    ap.add_argument("--follower", action="store_true", help="also apply every entry as a follower")
    ap.add_argument("--json", type=Path, help="also write the result here")
    args = ap.parse_args()
    provenance = Provenance.start()
    with tempfile.TemporaryDirectory(prefix="raftsched-hotpath-") as tmp:
        result = run(args.tasks, args.seconds, args.store, Path(tmp), args.metrics, args.follower)
    provenance.emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
