"""What applying a 10,000-task workflow costs the leader: one apply, and the stall it causes.

    python -m bench.workflow_apply [--tasks 10000] [--cluster] [--seed 1]

In process (always): the workflow (bench/workflows.py's ``random`` shape) is applied to a fresh
state on LMDB, the way every replica applies it,

* as ONE ApplyWorkflow entry (how it was applied before staging), and
* staged: StageWorkflowTasks chunks, then the ApplyWorkflow of the stage (what the leader
  proposes now for a workflow of more than 1,000 tasks).

For each it prints the longest single apply and the longest wait of a probe thread that takes
the state lock every millisecond, as the node's event loop does to serve executors (the
"tick stall": a heartbeat waits that long).

``--cluster`` also starts a real 3-node cluster with one executor, applies the workflow through
the SDK while a probe heartbeats the leader (NodeStatus every 20 ms), and prints the call's
time, the probe's longest wait, the "raft tick thread stalled" warnings in the node logs, and
whether the executor stayed registered (no re-registration). Run it from another checkout to
compare (the in-process staged figures need a raftsched with staged workflows).
"""

from __future__ import annotations

import argparse
import tempfile
import threading
import time
from pathlib import Path

from bench.common import Provenance, wait_registered
from bench.workflows import random_dag
from raftsched import codec
from raftsched.client import Client
from raftsched.fsm.state import SchedulerState
from raftsched.storage.lmdb_store import LmdbStore
from raftsched.testing.cluster import LocalCluster
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb

T0 = 1_700_000_000_000


class LockProbe:
    """Takes ``lock`` every millisecond and records the longest wait."""

    def __init__(self, lock: threading.Lock | threading.RLock) -> None:
        self.lock = lock
        self.worst = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            start = time.perf_counter()
            with self.lock:
                pass
            self.worst = max(self.worst, time.perf_counter() - start)
            time.sleep(0.001)

    def __enter__(self) -> LockProbe:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()


def _commands(spec: pb.WorkflowSpec, staged: bool) -> list[bytes]:
    if staged:
        from raftsched.leader import writes

        return writes.staged_workflow(spec, now_ms=T0, epoch=1, origin="n1", key="bench")
    cmd = logpb.Command(epoch=1, now_ms=T0, origin="n1", idempotency_key="bench")
    cmd.apply_workflow.spec.CopyFrom(spec)
    return [codec.encode_command(cmd)]


def in_process(spec: pb.WorkflowSpec, staged: bool) -> tuple[int, float, float, float]:
    """``(entries, longest apply s, total s, longest lock wait s)``."""
    with tempfile.TemporaryDirectory() as tmp:
        store = LmdbStore(Path(tmp), sync=False)
        state = SchedulerState.load(store)
        commands = _commands(spec, staged)
        longest = total = 0.0
        with LockProbe(state.lock) as probe:
            time.sleep(0.05)
            for index, data in enumerate(commands, 1):
                start = time.perf_counter()
                applied = state.apply(data)
                took = time.perf_counter() - start
                assert applied.result.ok, applied.result.message
                longest, total = max(longest, took), total + took
                store.commit(index)
            time.sleep(0.05)
        store.close()
        return len(commands), longest, total, probe.worst


def on_cluster(spec: pb.WorkflowSpec) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        base = Path(tmp)
        cluster = LocalCluster.create(base, 3)
        exe = None
        try:
            cluster.start()
            leader = cluster.wait_for_leader(60)
            exe = cluster.start_executor("ex1", 4, base / "ex1")
            log = cluster.log_dir / "ex1.log"
            wait_registered(cluster.log_dir, {"ex1": exe})
            with Client(cluster.targets(), timeout=60) as client:
                worst = [0.0]
                stop = threading.Event()

                def probe() -> None:
                    with Client([cluster.grpc_of(leader)], timeout=30) as c:
                        while not stop.is_set():
                            start = time.perf_counter()
                            c.node_status(cluster.grpc_of(leader))
                            worst[0] = max(worst[0], time.perf_counter() - start)
                            time.sleep(0.02)

                thread = threading.Thread(target=probe, daemon=True)
                thread.start()
                time.sleep(1.0)
                start = time.perf_counter()
                record, _ = client.apply_workflow(spec)
                took = time.perf_counter() - start
                time.sleep(3.0)  # a heartbeat timeout would show as a re-registration by now
                stop.set()
                thread.join()
                executors = client.list_executors()
            stalls = [
                line
                for n in ("n1", "n2", "n3")
                for line in (cluster.log_dir / f"{n}.log").read_text().splitlines()
                if "tick thread stalled" in line
            ]
            registrations = log.read_text().count("registered with")
            alive = [e.name for e in executors.executors if e.state == pb.EXECUTOR_ALIVE]
            print(
                f"cluster: ApplyWorkflow of {len(record.spec.tasks)} tasks took {took:.2f} s "
                f"(version {record.version})"
            )
            print(f"cluster: leader NodeStatus probe, longest call {worst[0] * 1000:.0f} ms")
            print(
                f"cluster: raft tick stall warnings: {len(stalls)}" + "".join(f"\n  {s}" for s in stalls[:5])
            )
            print(
                f"cluster: executor registrations {registrations} (1 = it stayed registered), alive {alive}"
            )
        finally:
            if exe is not None:
                exe.terminate()
                exe.wait(timeout=10)
            cluster.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--cluster", action="store_true", help="also measure on a real 3-node cluster")
    args = ap.parse_args()
    provenance = Provenance.start()
    print(provenance.header(), flush=True)
    spec = random_dag(args.tasks, args.seed)
    spec.name = "bench-apply"
    spec.ClearField("schedule")
    try:
        from raftsched.leader import writes

        modes = [False, True] if hasattr(writes, "staged_workflow") else [False]
    except ImportError:
        modes = [False]
    for staged in modes:
        entries, longest, total, wait = in_process(spec, staged)
        label = "staged" if staged else "one entry"
        print(
            f"in process, {label:9}: {entries:3} entries, longest apply {longest * 1000:6.0f} ms, "
            f"total {total * 1000:6.0f} ms, longest state-lock wait {wait * 1000:6.0f} ms"
        )
    if args.cluster:
        on_cluster(spec)
    print(provenance.footer())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
