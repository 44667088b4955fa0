"""How long a cancelled command, and the command of a SIGKILLed executor, takes to be gone.

    python -m bench.cancel [--cancels 5] [--kills 3]

A real 3-node cluster on loopback and real executors (``--kill-grace 5s``), a manual task whose
command is ``sleep 4711 & ...; wait`` (a shell with a child, as a job script is). Cancels: trigger,
wait for the command to start, ``Client.cancel_run``, then time from its return until the shell
and the sleep are gone. Kills: the same, but SIGKILL the executor running it instead (the reaper,
issue 29 §9, ends the command). A zombie counts as gone.
"""

from __future__ import annotations

import argparse
import os
import signal
import statistics
import subprocess
import tempfile
import time
from pathlib import Path

from bench.common import Provenance
from raftsched.client import Client
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.testing.cluster import LocalCluster, wait_until


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    try:
        return "State:\tZ" in Path(f"/proc/{pid}/status").read_text()
    except OSError:
        return False


def _pids(marker: Path, run_id: str) -> list[int]:
    if not marker.exists():
        return []
    return [
        int(p)
        for line in marker.read_text().splitlines()
        if line.startswith(run_id)
        for p in line.split()[1:3]
    ]


def _wait_gone(pids: list[int], what: str) -> None:
    try:
        wait_until(lambda: all(_gone(p) for p in pids), 60, 0.002, what)
    except TimeoutError:
        ps = subprocess.run(
            ["ps", "-eo", "pid,ppid,pgid,sid,stat,cmd"], capture_output=True, text=True
        ).stdout
        print(
            pids,
            "\n".join(
                line for line in ps.splitlines() if "4711" in line or "reaper" in line or "executor" in line
            ),
        )
        raise


def run(cancels: int, kills: int, base: Path) -> dict[str, object]:
    cluster = LocalCluster.create(base, 3, extra_config="[scheduler]\nlease_ms = 1500\nheartbeat_ms = 300\n")
    marker = base / "marker.log"
    procs: dict[str, subprocess.Popen[bytes]] = {}

    def executor(name: str) -> None:
        procs[name] = cluster.start_executor(
            name, 4, base / name, base / f"{name}.log", extra=["--kill-grace", "5s"]
        )

    def started(client: Client) -> tuple[str, list[int]]:
        run_id = client.trigger("hang").run_id
        wait_until(lambda: len(_pids(marker, run_id)) == 2, 90, 0.01, "the command started")
        return run_id, _pids(marker, run_id)

    cancel_ms: list[float] = []
    kill_ms: list[float] = []
    try:
        cluster.start()
        cluster.wait_for_leader(60)
        executor("ex0")
        command = f'sleep 4711 & echo "$RAFTSCHED_EXECUTION_ID $$ $!" >> {marker}; wait'
        with Client(cluster.targets()) as client:
            client.add_task(TaskSpec("hang", ManualTrigger(), command=command))
            for _ in range(cancels):
                run_id, pids = started(client)
                t0 = time.perf_counter()
                client.cancel_run(run_id, "bench")
                _wait_gone(pids, "the cancelled command ended")
                cancel_ms.append((time.perf_counter() - t0) * 1000)
            for i in range(kills):
                name = f"ex{i}"
                if name not in procs:
                    executor(name)
                run_id, pids = started(client)
                t0 = time.perf_counter()
                procs[name].send_signal(signal.SIGKILL)
                procs[name].wait(10)
                _wait_gone(pids, "the orphaned command ended")
                kill_ms.append((time.perf_counter() - t0) * 1000)
                client.cancel_run(run_id, "bench: clean up")
        return {
            "cancel_to_gone_ms": {
                "median": round(statistics.median(cancel_ms)),
                "all": [round(x) for x in cancel_ms],
            },
            "executor_sigkill_to_gone_ms": {
                "median": round(statistics.median(kill_ms)),
                "all": [round(x) for x in kill_ms],
            },
        }
    finally:
        for proc in procs.values():
            if proc.poll() is None:
                proc.terminate()
                proc.wait(timeout=15)
        cluster.stop()


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cancels", type=int, default=5)
    ap.add_argument("--kills", type=int, default=3)
    ap.add_argument("--json", type=Path)
    args = ap.parse_args()
    provenance = Provenance.start()
    with tempfile.TemporaryDirectory(prefix="raftsched-cancel-") as tmp:
        result = run(args.cancels, args.kills, Path(tmp))
    provenance.emit(result, args.json)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
