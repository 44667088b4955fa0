"""A benchmark stopped with SIGTERM (``timeout 600 python -m bench...``) stops the cluster it
started, as Ctrl-C does (bench.common.end_on_sigterm): before, its three nodes and its executors
outlived it and loaded every later measurement on the machine."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from bench.common import REPO
from raftsched.testing.cluster import wait_until

pytestmark = pytest.mark.integration


def _children() -> dict[int, list[int]]:
    """Each process's children, from /proc."""
    out: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue  # gone meanwhile
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        out.setdefault(ppid, []).append(int(entry.name))
    return out


def _descendants(pid: int) -> set[int]:
    children, found, todo = _children(), set(), [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            if child not in found:
                found.add(child)
                todo.append(child)
    return found


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"  # a zombie has ended (its parent has not reaped it)


def _nodes(pid: int) -> set[int]:
    out = set()
    for p in _descendants(pid):
        try:
            if b"raftsched.cli.node" in Path(f"/proc/{p}/cmdline").read_bytes():
                out.add(p)
        except OSError:
            continue
    return out


def test_a_benchmark_stopped_by_sigterm_stops_the_nodes_it_started(tmp_path: Path) -> None:
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    bench = subprocess.Popen(
        [sys.executable, "-m", "bench.fires", "--tasks", "20", "--seconds", "300"],
        cwd=REPO,
        env=env,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    started: set[int] = set()
    try:
        wait_until(lambda: len(_nodes(bench.pid)) == 3, 60, 0.2, "the benchmark's three nodes started")
        started = _descendants(bench.pid)
        bench.send_signal(signal.SIGTERM)
        assert bench.wait(timeout=60) == 128 + signal.SIGTERM
        wait_until(lambda: not any(_alive(p) for p in started), 30, 0.2, "every process it started ended")
    finally:
        if bench.poll() is None:
            bench.kill()
            bench.wait()
        for pid in started:  # what a failure left running
            if _alive(pid):
                os.kill(pid, signal.SIGKILL)
