"""How a run's shards spread over executors, and how many move when one executor leaves.

    python -m bench.shard_spread [--tasks 2000]

For each (shards k, executors n) it prints, over ``--tasks`` task names, the share of runs whose
k shards land on min(k, n) distinct executors, the mean number of distinct executors per run,
and for one executor leaving (each of the first three in turn, averaged): the share of runs with
any shard moved and the share of shards moved. ``old`` is the placement before issue 35 (each
shard keyed ``task:shard`` on the ring, recomputed here with uhashring directly), ``walk`` the
current one (:class:`raftsched.sharding.ring.ShardRing`: shard i on the i-th distinct executor of
the task's walk). Pure computation: no cluster, no clock.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable

from uhashring import HashRing

from bench.common import Provenance
from raftsched.sharding.ring import DEFAULT_VNODES, ShardRing

Owner = Callable[[str, int], str]


def old_owner(members: list[str]) -> Owner:
    ring = HashRing(nodes=sorted(members), vnodes=DEFAULT_VNODES)
    return lambda task, shard: str(ring.get_node(f"{task}:{shard}"))


def walk_owner(members: list[str]) -> Owner:
    ring = ShardRing(members)
    return lambda task, shard: ring.owner(task, shard) or ""


def measure(make: Callable[[list[str]], Owner], k: int, n: int, tasks: list[str]) -> dict[str, float]:
    members = [f"ex-{i}" for i in range(n)]
    owner = make(members)
    runs = [[owner(t, s) for s in range(k)] for t in tasks]
    spread = sum(len(set(r)) == min(k, n) for r in runs) / len(runs)
    mean_distinct = sum(len(set(r)) for r in runs) / len(runs)
    moved_runs = moved_shards = 0.0
    leavers = members[:3] if n > 1 else []
    for leaver in leavers:
        after = make([m for m in members if m != leaver])
        new = [[after(t, s) for s in range(k)] for t in tasks]
        moved_runs += sum(a != b for a, b in zip(runs, new, strict=True)) / len(runs)
        moved_shards += sum(
            x != y for a, b in zip(runs, new, strict=True) for x, y in zip(a, b, strict=True)
        ) / (len(runs) * k)
    d = len(leavers) or 1
    return {
        "spread": round(spread, 3),
        "mean_distinct": round(mean_distinct, 2),
        "leave_moves_runs": round(moved_runs / d, 3),
        "leave_moves_shards": round(moved_shards / d, 3),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=2000)
    args = ap.parse_args()
    provenance = Provenance.start()
    tasks = [f"task-{i:05d}" for i in range(args.tasks)]
    for k, n in [(3, 2), (2, 4), (3, 4), (4, 4), (4, 10), (8, 10)]:
        row = {"shards": k, "executors": n}
        row["old"] = measure(old_owner, k, n, tasks)  # type: ignore[assignment]
        row["walk"] = measure(walk_owner, k, n, tasks)  # type: ignore[assignment]
        print(json.dumps(row), flush=True)
    provenance.print_record()


if __name__ == "__main__":
    main()
