"""What applying one attempt costs, entry by entry, in one process: no Raft, no gRPC, no executor.

    python -m bench.attempt_apply [--tasks 4000] [--seconds 10] [--executors 2] [--batch 256]
                                  [--commit-every 1] [--keep-count N [--prefill-seconds P]]

N every-second cron tasks and E joined executors in a :class:`SchedulerState` over an LMDB store
(``sync=False``, as a node opens it), and a second state applying the same entries as a follower
does (no leader effects). For each simulated second, the three entries of every attempt:

* **fire**: the driver plans the second's fires into FireBatch entries (as the leader's planning
  thread does) and both states apply them;
* **assign**: AssignAttempts entries of up to 1,000 assignments, one per new run, its executor
  taken round-robin (as the dispatcher's entries are);
* **result**: ReportResults entries of ``--batch`` successful results per executor (as an
  executor's batched report becomes), with the retry time, duration and start lateness set as
  the leader sets them.

The store commits every ``--commit-every`` entries (1: after each entry, the cluster's worst
case, since an applier commits whenever its queue runs dry; 0: once per simulated second). CPU
time (``process_time``) per attempt is reported for each entry kind and for the commits, on the
leader's state and on the follower's, and the two states' digests are compared at the end.

``--keep-count N`` keeps N finished runs and N fire records per task (``Retention.keep_count``,
the cluster's ``[scheduler] history_keep_count``; default 1000, which a short window never
reaches) and first runs ``--prefill-seconds`` simulated seconds unmeasured (default N), so the
measured window runs with history at its keep count and pruning active: the steady state of a
cluster that has run for longer than its keep count. History is pruned in batches (a task keeps
N to N + ``PRUNE_BATCH`` records, then drops to N in one pass), so a window shorter than
``PRUNE_BATCH + 1`` (65) seconds may hold no batch at all: measure over 65 seconds (or a multiple)
for the average.
Compare with ``applier`` in ``bench/profile.py``'s thread table (the applier thread in a real
cluster) to see what the cluster adds around the same work.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import Provenance
from raftsched import codec
from raftsched.alerts.config import StartDelayConfig
from raftsched.alerts.monitor import StartDelays
from raftsched.fsm.effects import AttemptReady, Effect
from raftsched.fsm.executors import MAX_EXECUTOR_SLOTS
from raftsched.fsm.records import Retention
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.leader.driver import LeaderDriver
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.replica import Replica
from raftsched.storage.lmdb_store import LmdbStore
from raftsched.v1 import log_pb2 as pb

T0 = 1_800_000_000_000  # a whole second
MAX_ASSIGNMENTS = 1000  # per AssignAttempts entry, as the dispatcher batches them
KINDS = ("fire", "assign", "result", "commit")


class _Node:
    """One replica: its state, store and the CPU seconds spent per entry kind."""

    def __init__(self, path: Path, lead: bool, commit_every: int, retention: Retention) -> None:
        self.store = LmdbStore(path, sync=False)
        self.state = SchedulerState.load(self.store, retention)
        # As raftsched.server.node: every replica keeps the reported starts for the start-delay alert.
        self.start_delays = StartDelays(StartDelayConfig())
        self.state.on_start = self.start_delays.record
        # As raftsched.server.node: a follower (its own barrier never applied) builds no leader effects.
        self.replica = Replica(self.state, self.store, node_id=None if lead else "follower")
        self.commit_every = commit_every
        self.since_commit = 0
        self.index = 0
        self.cpu = dict.fromkeys(KINDS, 0.0)

    def apply(self, kind: str, data: bytes) -> pb.CommandResult:
        self.index += 1
        t0 = time.process_time()
        raw = self.replica.apply_entry(self.index, data)
        if kind == "result":  # the alert loop drains the starts on every node; count it here
            self.start_delays.drain()
        t1 = time.process_time()
        self.cpu[kind] = self.cpu.get(kind, 0.0) + t1 - t0
        self.since_commit += 1
        if self.commit_every and self.since_commit >= self.commit_every:
            self.commit()
        result = pb.CommandResult()
        result.ParseFromString(raw or b"")
        return result

    def commit(self) -> None:
        t0 = time.process_time()
        self.replica.end_of_tick()
        self.cpu["commit"] += time.process_time() - t0
        self.since_commit = 0


def _command(now_ms: int) -> pb.Command:
    return pb.Command(epoch=1, now_ms=now_ms, origin="n1")


def run(
    tasks: int,
    seconds: int,
    executors: int,
    batch: int,
    commit_every: int,
    base: Path,
    keep_count: int = 0,
    prefill_seconds: int = 0,
) -> dict[str, object]:
    if tasks > executors * MAX_EXECUTOR_SLOTS:
        raise SystemExit(f"{tasks} tasks need at least {-(-tasks // MAX_EXECUTOR_SLOTS)} executors")
    retention = Retention(keep_count=keep_count) if keep_count else Retention()
    leader = _Node(base / "leader", True, commit_every, retention)
    follower = _Node(base / "follower", False, commit_every, retention)
    nodes = (leader, follower)

    def both(kind: str, data: bytes) -> None:
        for node in nodes:
            result = node.apply(kind, data)
            if not result.ok or result.refused:
                raise RuntimeError(f"a {kind} entry was refused: {result}")

    names = [f"ex{i + 1}" for i in range(executors)]
    for name in names:
        join = writes.executor_join(name, MAX_EXECUTOR_SLOTS, {}, now_ms=T0 - 3000, epoch=1, origin="n1")
        both("setup", join)
    specs = [
        (TaskSpec(f"hot-{i:07d}", CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, handler="noop"), False)
        for i in range(tasks)
    ]
    commands, refused = writes.create_tasks(specs, now_ms=T0 - 2000, epoch=1, origin="n1", key="k")
    if refused:
        raise RuntimeError(f"tasks refused: {refused}")
    for data in commands:
        both("setup", data)
    for node in nodes:
        node.commit()
    ready: list[AttemptReady] = []
    driver = LeaderDriver(leader.state, "n1")

    def sink(effects: tuple[Effect, ...]) -> None:
        driver.on_effects(effects)
        ready.extend(e for e in effects if isinstance(e, AttemptReady))

    leader.replica.effect_sink = sink
    both("setup", driver.become_leader(1, T0 - 1000).data)
    if not driver.ready:
        raise RuntimeError("the driver's barrier did not apply")
    for node in nodes:
        node.cpu = dict.fromkeys(KINDS, 0.0)  # setup is not measured
    attempts = 0
    plan_s = 0.0
    for s in range(prefill_seconds + seconds):
        if s == prefill_seconds:  # the prefill (history filled to its keep count) is not measured
            for node in nodes:
                node.commit()
                node.cpu = dict.fromkeys(KINDS, 0.0)
            attempts = 0
            plan_s = 0.0
        now = T0 + s * 1000 + 5
        c0 = time.process_time()
        proposals = driver.poll(now)
        plan_s += time.process_time() - c0
        for p in proposals:
            both("fire", p.data)
            driver.on_proposal_committed(p)
        placed = [(r, names[i % len(names)]) for i, r in enumerate(ready)]
        ready.clear()
        for start in range(0, len(placed), MAX_ASSIGNMENTS):
            cmd = _command(now + 20)
            for r, executor in placed[start : start + MAX_ASSIGNMENTS]:
                cmd.assign_attempts.assignments.add(
                    run_id=r.run_id, shard=r.shard, attempt=r.attempt, executor=executor
                )
            both("assign", codec.encode_command(cmd))
        by_executor: dict[str, list[AttemptReady]] = {}
        for r, executor in placed:
            by_executor.setdefault(executor, []).append(r)
        for executor, done in by_executor.items():
            for start in range(0, len(done), batch):
                cmd = _command(now + 60)
                for r in done[start : start + batch]:
                    cmd.report_results.results.add(
                        run_id=r.run_id,
                        shard=r.shard,
                        attempt=r.attempt,
                        executor=executor,
                        success=True,
                        retry_at_ms=now + 60 + 1000,
                        duration_ms=1,
                        start_lateness_ms=40,
                    )
                both("result", codec.encode_command(cmd))
        attempts += len(placed)
        if not commit_every:
            for node in nodes:
                node.commit()
    for node in nodes:
        node.commit()
    if leader.state.digest() != follower.state.digest():
        raise RuntimeError("the follower's state differs from the leader's")
    if leader.state.active:
        raise RuntimeError(f"{len(leader.state.active)} runs did not finish")
    per = max(attempts, 1)

    def figures(node: _Node) -> dict[str, float]:
        out = {f"{k}_us": round(v / per * 1e6, 2) for k, v in node.cpu.items()}
        out["total_us"] = round(sum(node.cpu.values()) / per * 1e6, 2)
        return out

    return {
        "tasks": tasks,
        "seconds": seconds,
        "executors": executors,
        "result_batch": batch,
        "commit_every": commit_every,
        "keep_count": retention.keep_count,
        "prefill_seconds": prefill_seconds,
        "attempts": attempts,
        "plan_us_per_attempt": round(plan_s / per * 1e6, 2),
        "leader_us_per_attempt": figures(leader),
        "follower_us_per_attempt": figures(follower),
    }


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=4000)
    ap.add_argument("--seconds", type=int, default=10)
    ap.add_argument("--executors", type=int, default=2)
    ap.add_argument("--batch", type=int, default=256, help="results per ReportResults entry")
    ap.add_argument("--commit-every", type=int, default=1, help="entries per commit (0: once per second)")
    ap.add_argument(
        "--keep-count",
        type=int,
        default=0,
        help="finished runs and fire records kept per task (Retention.keep_count; 0: the default, 1000)",
    )
    ap.add_argument(
        "--prefill-seconds",
        type=int,
        default=-1,
        help="unmeasured simulated seconds first, to fill the history (default: --keep-count)",
    )
    ap.add_argument("--json", type=Path, help="also write the result here")
    args = ap.parse_args()
    if args.keep_count < 0:
        ap.error(f"--keep-count {args.keep_count}: must be at least 1 (0: the default)")
    prefill = args.prefill_seconds if args.prefill_seconds >= 0 else args.keep_count
    provenance = Provenance.start()
    with tempfile.TemporaryDirectory(prefix="raftsched-attempt-apply-") as tmp:
        result = run(
            args.tasks,
            args.seconds,
            args.executors,
            args.batch,
            args.commit_every,
            Path(tmp),
            keep_count=args.keep_count,
            prefill_seconds=prefill,
        )
    provenance.emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
