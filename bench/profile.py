"""Profile a raftsched process under load with py-spy (sampling; the process is not paused).

    python -m bench.profile [--tasks 10000] [--seconds 15] [--executors 0|N] [--target leader|ex1]
                            [--kind sync|async] [--eager] [--top 30] [--raw FILE]
                            [--max-dispatch-backlog N]

Starts 3 nodes on loopback (and N executor processes with the no-op Python handler of
bench/noop_executor.py), bulk-imports N every-second cron tasks, waits for the steady state and
samples the target process (the leader, or an executor) for ``--seconds``. Prints, per thread
and for the whole process, the functions with the most samples: *self* (the function was on top
of the stack) and *total* (anywhere on the stack), as a share of the process's samples, then each
thread's CPU as measured (utime + stime from /proc over the same window) in seconds per second
and microseconds per fire committed. The raw py-spy output (collapsed stacks) is kept with
``--raw``.

Needs py-spy (the bench extra: ``pip install -e '.[bench]'``) and permission to ptrace the target
(root, or ``kernel.yama.ptrace_scope=0``).
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter, defaultdict
from pathlib import Path

from bench.common import Provenance, cpu_seconds, noop_cluster, with_scheduler_setting
from raftsched.client import Client
from raftsched.model import CronTrigger, Overlap, TaskSpec

_FRAME = re.compile(r"^(?P<fn>.*?) \((?P<file>[^:()]*)(?::\d+)?\)$")


def frame_name(frame: str) -> str:
    """``func (path/to/file.py:12)`` → ``file.py:func`` (lines merged)."""
    m = _FRAME.match(frame.strip())
    if not m:
        return frame.strip()
    path = m.group("file")
    short = "/".join(path.split("/")[-2:]) if "raftsched" in path else path.split("/")[-1]
    return f"{short}:{m.group('fn')}"


def summarise(raw: str, top: int) -> str:
    self_by: dict[str, Counter[str]] = defaultdict(Counter)
    total_by: dict[str, Counter[str]] = defaultdict(Counter)
    samples: Counter[str] = Counter()
    for line in raw.splitlines():
        if not line.strip():
            continue
        stack, _, count_s = line.rpartition(" ")
        try:
            count = int(count_s)
        except ValueError:
            continue
        frames = stack.split(";")
        # With --threads the first frame is "thread (0x...)" or the thread's name.
        thread = frames[0] if frames and frames[0].startswith(("thread", "process")) else "all"
        if frames and frames[0].startswith("process"):
            frames = frames[1:]
            thread = frames[0] if frames else "all"
        if frames and frames[0].startswith("thread"):
            thread, frames = frames[0], frames[1:]
        names = [frame_name(f) for f in frames]
        if not names:
            continue
        for key in (thread, "ALL"):
            samples[key] += count
            self_by[key][names[-1]] += count
            for name in set(names):
                total_by[key][name] += count
    out: list[str] = []
    grand = samples["ALL"] or 1
    for key in ["ALL", *sorted((k for k in samples if k != "ALL"), key=lambda k: -samples[k])]:
        n = samples[key]
        out.append(f"\n== {key}: {n} samples ({100 * n / grand:.1f}% of the process)")
        out.append("   self%  total%  function")
        for name, c in self_by[key].most_common(top):
            out.append(f"  {100 * c / grand:6.1f}  {100 * total_by[key][name] / grand:6.1f}  {name}")
        if key == "ALL":
            out.append("   -- by total --")
            for name, c in total_by[key].most_common(top):
                out.append(f"  {100 * self_by[key][name] / grand:6.1f}  {100 * c / grand:6.1f}  {name}")
    return "\n".join(out)


_THREAD = re.compile(r"^thread \((?P<tid>\d+)\): (?P<name>[^;]*)$")


def thread_cpu(pid: int) -> dict[int, float]:
    """CPU seconds (utime + stime) of each thread of ``pid`` so far, by native thread id."""
    out: dict[int, float] = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            out[int(tid)] = cpu_seconds(pid, int(tid))
        except OSError:
            continue  # the thread ended
    return out


def thread_table(
    before: dict[int, float], after: dict[int, float], raw: str, seconds: float, fired: int
) -> str:
    """Each thread's measured CPU over the sampled window, named from py-spy's raw output: what
    the threads spent, where py-spy's shares are of its samples."""
    names: dict[int, str] = {}
    for line in raw.splitlines():
        stack = line.rpartition(" ")[0]  # the sample count ends the line
        m = _THREAD.match(stack.split(";", 1)[0])
        if m:
            names[int(m.group("tid"))] = m.group("name")
    # A thread that ended within the window is missing from ``after``: its CPU is not counted.
    used = {tid: after[tid] - before.get(tid, 0.0) for tid in after}
    total = sum(used.values()) or 1e-9
    out = [
        "\n== CPU by thread (utime + stime from /proc over the sampled window)",
        "   s/s   share  us/fire  thread",
    ]
    for tid, cpu in sorted(used.items(), key=lambda kv: -kv[1]):
        if cpu <= 0:
            continue
        per_fire = cpu / fired * 1e6 if fired else 0.0
        name = names.get(tid, "(not sampled)")
        out.append(f"  {cpu / seconds:5.2f}  {100 * cpu / total:5.1f}%  {per_fire:7.1f}  {tid}: {name}")
    out.append(f"  {total / seconds:5.2f}  100.0%  {total / fired * 1e6 if fired else 0.0:7.1f}  all threads")
    return "\n".join(out)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--tasks", type=int, default=10_000)
    ap.add_argument("--seconds", type=int, default=15)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--executors", type=int, default=0)
    ap.add_argument("--slots", type=int, default=256)
    ap.add_argument("--target", default="leader", help="'leader', 'follower' or an executor name (ex1)")
    ap.add_argument("--kind", choices=["sync", "async"], default="sync", help="the executors' no-op handler")
    ap.add_argument(
        "--eager",
        action="store_true",
        help="--kind async: register the handler eager=True, as bench.run's cron ladder does",
    )
    ap.add_argument(
        "--max-dispatch-backlog",
        type=int,
        help="the cluster's [scheduler] max_dispatch_backlog (0: no limit; default: the cluster's, "
        "0 with no executor: its attempts wait by design, as in bench/fires.py)",
    )
    ap.add_argument("--rate", type=int, default=200, help="samples per second")
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--raw", type=Path, help="keep py-spy's collapsed stacks here")
    args = ap.parse_args()
    pyspy = shutil.which("py-spy")
    if pyspy is None:
        print("py-spy is not installed: pip install -e '.[bench]'", file=sys.stderr)
        return 2
    if args.max_dispatch_backlog is None and not args.executors:
        args.max_dispatch_backlog = 0
    provenance = Provenance.start()
    print(provenance.header())
    with (
        tempfile.TemporaryDirectory(prefix="raftsched-profile-") as tmp,
        noop_cluster(
            Path(tmp),
            args.executors,
            slots=args.slots,
            kind=args.kind,
            extra=["--eager"] if args.eager else [],
            extra_config=""
            if args.max_dispatch_backlog is None
            else with_scheduler_setting("", "max_dispatch_backlog", args.max_dispatch_backlog),
        ) as (cluster, procs),
    ):
        targets = cluster.targets()
        names = list(procs)
        specs = [
            TaskSpec(
                f"prof-{i:07d}",
                CronTrigger("* * * * * *"),
                # With no executor, a command (as bench/fires.py): a task needs a command or a
                # handler, and nothing runs it anyway.
                handler="noop" if names else "",
                command="" if names else "true",
                overlap=Overlap.ALLOW,
            )
            for i in range(args.tasks)
        ]
        with Client(targets, timeout=60) as client:
            bad = [r for r in client.add_tasks(specs) if not r.ok]
            if bad:
                raise RuntimeError(f"{len(bad)} tasks refused")
        time.sleep(args.warmup)
        leader = cluster.wait_for_leader(30)
        if args.target == "leader":
            pid = cluster.procs[leader].pid
        elif args.target == "follower":
            pid = next(p.pid for n, p in cluster.procs.items() if n != leader)
        else:
            pid = procs[args.target].pid
        raw_path = args.raw or Path(tmp) / "profile.txt"
        before = cluster.status(leader).fires_committed
        cpu_before, t0 = thread_cpu(pid), time.monotonic()
        subprocess.run(
            [
                pyspy,
                "record",
                "--pid",
                str(pid),
                "--duration",
                str(args.seconds),
                "--rate",
                str(args.rate),
                "--format",
                "raw",
                "--threads",
                "--nonblocking",
                "--output",
                str(raw_path),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        cpu_after, elapsed = thread_cpu(pid), time.monotonic() - t0
        st = cluster.status(leader, timeout=10, lateness_since_ms=1)
        fired = st.fires_committed - before
        lat = st.commit_lateness
        print(
            f"target {args.target} (pid {pid}), {args.tasks} every-second tasks, "
            f"{args.executors} executors: {fired / elapsed:.0f} fires committed/s while sampled; "
            f"commit lateness p50 {lat.p50_ms:.0f} ms, p99 {lat.p99_ms:.0f} ms"
        )
        raw = raw_path.read_text()
        print(summarise(raw, args.top))
        print(thread_table(cpu_before, cpu_after, raw, elapsed, fired))
        print(provenance.footer())
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
