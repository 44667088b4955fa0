"""Planned leader restart (SIGTERM) against a crash (SIGKILL): the gap until the next leader fires.

    python -m bench.planned_restart [--rounds 10] [--nodes 3] [--json FILE]

A real cluster on loopback with per-second cron tasks (no executors: only the fires count).
Rounds alternate SIGTERM and SIGKILL of the leader; each one measures from the signal until one
of the other nodes leads a newer term (reported too) and has committed a fire (its
``fires_committed`` counter moves; fires fall due on whole seconds, so a new leader that is
ready at once may still wait up to a second for its first). On SIGTERM ``raftsched-node`` hands
leadership to a caught-up follower (Raft TimeoutNow) and stops campaigning before it exits; on
SIGKILL the followers wait out the election timeout (``raft_min_timeout`` ..
``raft_max_timeout``, 0.4-1.4 s by default). The victim is restarted from its data dir before
the next round. Also measured: the worst commit lateness (commit time minus nominal time) of
the next leader's first fires, i.e. how late the restart made any fire. Prints every round,
then the median (and p90, max) per signal, and the accounting check (every nominal second of a
watched task covered exactly once).
"""

from __future__ import annotations

import argparse
import signal
import statistics
import tempfile
import time
from pathlib import Path

from bench.common import Provenance, covered_exactly_once, percentile
from raftsched.client import Client
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.testing.cluster import LocalCluster, wait_until
from raftsched.v1 import raftsched_pb2 as pb

TASKS = 10
SIGNALS = {"SIGTERM": signal.SIGTERM, "SIGKILL": signal.SIGKILL}


def first_fire_by_new_leader(
    cluster: LocalCluster, others: list[str], old_term: int, before: dict[str, int], deadline_s: float
) -> tuple[str, float, float]:
    """Poll ``others`` until one leads a term after ``old_term`` and has committed a fire: its
    id, when it was first seen leading, and when its fire was seen."""
    end = time.monotonic() + deadline_s
    elected: float | None = None
    while time.monotonic() < end:
        for nid in others:
            try:
                st = cluster.status(nid, timeout=0.5)
            except Exception:
                continue
            if st.role == "leader" and st.term > old_term:
                elected = elected or time.monotonic()
                if st.fires_committed > before.get(nid, 0):
                    return nid, elected, time.monotonic()
        time.sleep(0.005)
    raise TimeoutError("no fire committed by a new leader")


def worst_lateness_ms(cluster: LocalCluster, node: str, since_ms: int) -> float:
    """The worst commit lateness (commit time minus nominal time) of the fires ``node`` led with
    a nominal time since ``since_ms``, once it has committed its first two such seconds."""

    def summary() -> pb.LatencySummary | None:
        got = cluster.status(node, timeout=1, lateness_since_ms=since_ms).commit_lateness
        return got if got.count >= 2 * TASKS else None

    return float(wait_until(summary, 30, 0.05, f"{node} to commit two seconds of fires").max_ms)


def caught_up(cluster: LocalCluster, nodes: list[str], index: int) -> None:
    """Wait until every one of ``nodes`` has applied ``index``."""

    def done() -> bool:
        return all(cluster.status(n, timeout=1).applied_index >= index for n in nodes)

    wait_until(done, 60, 0.05, f"{', '.join(nodes)} to apply index {index}")


def summary(values: list[float]) -> dict[str, int]:
    ordered = sorted(values)
    return {
        "n": len(ordered),
        "median": round(statistics.median(ordered) * 1000),
        "p90": round(percentile(ordered, 0.9) * 1000),
        "max": round(ordered[-1] * 1000),
    }


def run(rounds: int, nodes: int, base: Path) -> dict[str, object]:
    cluster = LocalCluster.create(base, nodes)
    gaps: dict[str, list[float]] = {name: [] for name in SIGNALS}
    elections: dict[str, list[float]] = {name: [] for name in SIGNALS}
    late: dict[str, list[float]] = {name: [] for name in SIGNALS}
    try:
        cluster.start()
        cluster.wait_for_leader(60)
        with Client(cluster.targets()) as client:
            for i in range(TASKS):
                client.add_task(
                    TaskSpec(f"tick-{i}", CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, command="true")
                )
            wait_until(lambda: len(client.fire_accounting("tick-0")) >= 3, 30, what="first fires")
            for round_no in range(2 * rounds):
                name = "SIGTERM" if round_no % 2 == 0 else "SIGKILL"
                leader = cluster.wait_for_leader(30)
                st = cluster.status(leader)
                others = [n for n in cluster.alive() if n != leader]
                caught_up(cluster, others, st.commit_index)
                before = {n: cluster.status(n).fires_committed for n in others}
                proc = cluster.procs[leader]
                t0 = time.monotonic()
                since_ms = int(time.time() * 1000) - 1000
                proc.send_signal(SIGNALS[name])
                new_leader, elected, t1 = first_fire_by_new_leader(cluster, others, st.term, before, 30)
                gaps[name].append(t1 - t0)
                elections[name].append(elected - t0)
                worst = worst_lateness_ms(cluster, new_leader, since_ms)
                late[name].append(worst / 1000)
                code = proc.wait(timeout=30)
                print(
                    f"round {round_no + 1:3}: {name} {leader} (term {st.term}): {new_leader} led after "
                    f"{(elected - t0) * 1000:.0f} ms, fired after {(t1 - t0) * 1000:.0f} ms (worst commit "
                    f"lateness {worst:.0f} ms); "
                    f"{leader} exited {code}",
                    flush=True,
                )
                cluster.start(leader)
                caught_up(cluster, [leader], cluster.status(new_leader).commit_index)
            task = client.get_task("tick-0")
            fires = client.fire_accounting("tick-0", limit=100_000)
        first = min(f.nominal_ms for f in fires)
        missing, doubled = covered_exactly_once(fires, first, task.watermark_ms)
        return {
            "rounds_per_signal": rounds,
            "nodes": nodes,
            "signal_to_first_fire_by_next_leader_ms": {name: summary(v) for name, v in gaps.items()},
            "signal_to_next_leader_ms": {name: summary(v) for name, v in elections.items()},
            "worst_commit_lateness_of_the_next_leaders_first_fires_ms": {
                name: summary(v) for name, v in late.items()
            },
            "accounting": {
                "seconds": (task.watermark_ms - first) // 1000 + 1,
                "missing": missing,
                "doubled": doubled,
            },
        }
    finally:
        cluster.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--rounds", type=int, default=10, help="rounds per signal (default: 10)")
    ap.add_argument("--nodes", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    provenance = Provenance.start()
    with tempfile.TemporaryDirectory(prefix="raftsched-planned-") as tmp:
        result = run(args.rounds, args.nodes, Path(tmp))
    provenance.emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
