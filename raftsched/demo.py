"""``raftsched demo``: a local 3-node cluster with sample tasks, printing fires as they commit.

Starts the nodes of a config file (by default ``cluster.example.toml``) as child processes,
waits for a leader, installs a few sample tasks and prints each fire as it is committed, with
its commit lateness and the epoch of the leader that committed it. Ctrl-C stops everything.
"""

from __future__ import annotations

import signal
import sys
import time
from pathlib import Path
from types import FrameType

from raftsched.client import Client
from raftsched.errors import AlreadyExists, RaftschedError
from raftsched.explain import iso
from raftsched.localcluster import LocalCluster
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.timing.clock import SystemClock
from raftsched.v1 import raftsched_pb2 as pb

SAMPLES = (
    TaskSpec(
        "hello-every-2s",
        CronTrigger("* * * * * */2"),
        command="echo hello from raftsched",
        overlap=Overlap.ALLOW,
        description="demo: every two seconds",
    ),
    TaskSpec(
        "report-every-10s",
        CronTrigger("* * * * * */10"),
        command="echo report",
        shards=3,
        overlap=Overlap.ALLOW,
        description="demo: every ten seconds, three shards",
    ),
    TaskSpec(
        "nightly-backup",
        CronTrigger("30 2 * * *", "Europe/Berlin"),
        command="echo backup",
        description="demo: 02:30 Berlin time (runs once on DST change days)",
    ),
)

_OUTCOME = {
    pb.FIRED: "fired",
    pb.COALESCED: "coalesced",
    pb.SKIPPED_OVERLAP: "skipped (overlap)",
    pb.SKIPPED_MISFIRE: "skipped (misfire)",
    pb.SKIPPED_DISABLED: "skipped (disabled)",
}


def run_demo(config_path: str, duration: str = "0") -> int:
    config = Path(config_path)
    if not config.is_file():
        raise RaftschedError(
            f"{config}: no such config file (run from the repository root, or pass --config)"
        )
    stop_after = float(duration)
    cluster = LocalCluster(config, config.parent / "data" / "logs")
    stopping = False

    def on_signal(signum: int, frame: FrameType | None) -> None:
        nonlocal stopping
        stopping = True

    signal.signal(signal.SIGINT, on_signal)
    signal.signal(signal.SIGTERM, on_signal)
    clock = SystemClock()
    print(f"starting {len(cluster.config.nodes)} nodes from {config} (logs in {cluster.log_dir})", flush=True)
    cluster.start()
    try:
        leader = cluster.wait_for_leader(60)
        st = cluster.status(leader)
        print(
            f"leader elected: {leader} (term {st.term}); gRPC targets {','.join(cluster.targets())}",
            flush=True,
        )
        with Client(cluster.targets()) as client:
            for spec in SAMPLES:
                try:
                    rec = client.add_task(spec)
                    print(f"added task {spec.name:18} next fire {iso(rec.next_fire_ms)}", flush=True)
                except AlreadyExists:
                    rec = client.get_task(spec.name)
                    nxt = iso(rec.next_fire_ms)
                    print(f"task {spec.name:18} exists (version {rec.version}), next fire {nxt}", flush=True)
            print("fires as they are committed (Ctrl-C to stop):", flush=True)
            print(f"{'NOMINAL (UTC)':26} {'TASK':18} {'OUTCOME':12} {'DECIDED':>8}  EPOCH  RUN", flush=True)
            seen = {spec.name: clock.now_ms() for spec in SAMPLES}
            started = time.monotonic()
            while not stopping and not (stop_after and time.monotonic() - started > stop_after):
                for name, since in seen.items():
                    try:
                        fires = client.fire_accounting(name, since_ms=since + 1)
                    except RaftschedError as exc:
                        print(f"  ({exc})", flush=True)
                        continue
                    for f in fires:
                        if f.nominal_ms <= since:
                            continue
                        shown = "" if not f.through_ms else f" x{f.count} through {iso(f.through_ms)}"
                        print(
                            f"{iso(f.nominal_ms):26} {name:18} {_OUTCOME.get(f.outcome, '?'):12} "
                            f"{f.decided_ms - f.nominal_ms:>6}ms  {f.epoch:>5}  {f.run_id}{shown}",
                            flush=True,
                        )
                        seen[name] = max(f.nominal_ms, f.through_ms)
                time.sleep(0.5)  # pacing of the display loop, not synchronisation
    finally:
        print("stopping the cluster...", flush=True)
        cluster.stop()
    return 0


if __name__ == "__main__":
    sys.exit(run_demo(sys.argv[1] if len(sys.argv) > 1 else "cluster.example.toml"))
