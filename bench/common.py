"""What the benchmarks share: one percentile, the fire accounting check, where a result came
from, CPU readings, the window timer, and the cluster with recording no-op executors.

Every benchmark runs as a module of this package, from the checkout it measures::

    cd <checkout> && python -m bench.<name> [options]

``-m`` puts the current directory first on ``sys.path``, so ``raftsched`` is this checkout's. The
node and executor processes a benchmark starts must run the same code: :meth:`Provenance.start`,
which every benchmark calls first, puts the checkout first on their ``PYTHONPATH`` (otherwise
they would import whatever copy of raftsched is installed). It also records the commit, whether
the tree was dirty, the exact command, the machine and the load around the run, and every result
a benchmark prints or writes carries that record.
"""

from __future__ import annotations

import contextlib
import json
import math
import os
import platform
import random
import shlex
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import raftsched
from raftsched.v1 import raftsched_pb2 as pb

if TYPE_CHECKING:
    from raftsched.testing.cluster import LocalCluster

# raftsched.testing.cluster is imported by the two functions that start processes, not here: it
# brings the executor, aiohttp and gRPC (~16,000 more objects for the garbage collector to walk),
# and the in-process benchmarks (hotpath, attempt_apply...) import this module too. With them
# loaded, a full collection costs more and falls elsewhere in the run: bench/hotpath.py's
# leader apply read ~2 us per fire slower for the same raftsched code (issue 27).

REPO = Path(__file__).resolve().parents[1]
"""The checkout this package is in."""

Json = dict[str, Any]


# -- percentiles and fire accounting ---------------------------------------------------------------


def percentile(values: Sequence[float], q: float) -> float:
    """The nearest-rank ``q`` quantile (0 < q <= 1): the smallest value with at least a share
    ``q`` of the values at or below it; ``nan`` for no values."""
    if not values:
        return math.nan
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, math.ceil(q * len(ordered)) - 1))]


def percentiles(values: Sequence[float], digits: int = 1) -> dict[str, float | int]:
    """p50, p90, p99, max, mean and count of ``values`` (``{"count": 0}`` for none)."""
    if not values:
        return {"count": 0}
    ordered = sorted(values)
    return {
        "p50": round(percentile(ordered, 0.50), digits),
        "p90": round(percentile(ordered, 0.90), digits),
        "p99": round(percentile(ordered, 0.99), digits),
        "max": round(ordered[-1], digits),
        "mean": round(sum(ordered) / len(ordered), digits),
        "count": len(ordered),
    }


def bootstrap_ratio(
    numerator: Sequence[float],
    denominator: Sequence[float],
    q: float,
    resamples: int = 2000,
    confidence: float = 0.95,
    seed: int = 30,
) -> dict[str, float | int | None]:
    """The ratio of the ``q`` quantiles (:func:`percentile`) of two independent samples, with a
    percentile-bootstrap confidence interval: each of ``resamples`` rounds redraws both samples
    with replacement (each from itself, seeded: the same input gives the same interval) and
    takes the ratio; the interval is the middle ``confidence`` of those ratios. ``None`` where a
    sample is empty or a denominator quantile is 0. With few values the top quantiles are the
    sample's maximum, and the interval says how much that is worth."""
    out: dict[str, float | int | None] = {"ratio": None, "low": None, "high": None, "resamples": resamples}
    if not numerator or not denominator or not percentile(denominator, q):
        return out
    rng = random.Random(seed)
    ratios: list[float] = []
    n, d = list(numerator), list(denominator)
    for _ in range(resamples):
        bottom = percentile(rng.choices(d, k=len(d)), q)
        if bottom:
            ratios.append(percentile(rng.choices(n, k=len(n)), q) / bottom)
    tail = (1.0 - confidence) / 2
    out["ratio"] = round(percentile(n, q) / percentile(d, q), 3)
    if ratios:
        out["low"] = round(percentile(ratios, tail), 3)
        out["high"] = round(percentile(ratios, 1.0 - tail), 3)
    return out


def covered_exactly_once(fires: Sequence[pb.FireRecord], first: int, last: int) -> tuple[int, int]:
    """(missing, doubled) nominal seconds in [first, last] of one every-second task's fire records
    (a record with ``through_ms`` covers every second up to it)."""
    seen: dict[int, int] = {}
    for f in fires:
        for t in range(f.nominal_ms, (f.through_ms or f.nominal_ms) + 1, 1000):
            seen[t] = seen.get(t, 0) + 1
    want = range(first, last + 1, 1000)
    return sum(1 for t in want if t not in seen), sum(1 for t in want if seen.get(t, 0) > 1)


# -- CPU -------------------------------------------------------------------------------------------


def with_scheduler_setting(extra_config: str, key: str, value: int) -> str:
    """``extra_config`` (TOML appended to a cluster's config) with ``[scheduler] key = value``
    added: into its ``[scheduler]`` table if it has one (TOML allows a table once)."""
    line = f"{key} = {value}\n"
    header = "[scheduler]\n"
    if header in extra_config:
        return extra_config.replace(header, header + line, 1)
    return extra_config + header + line


def cpu_seconds(pid: int, tid: int | None = None) -> float:
    """utime + stime of process ``pid`` (of its thread ``tid`` if given) so far, from /proc."""
    path = f"/proc/{pid}/stat" if tid is None else f"/proc/{pid}/task/{tid}/stat"
    with open(path) as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# -- provenance ------------------------------------------------------------------------------------


def _git(repo: Path, *args: str) -> str | None:
    try:
        done = subprocess.run(
            ["git", "-C", str(repo), *args], capture_output=True, text=True, check=True, timeout=30
        )
    except (OSError, subprocess.SubprocessError):
        return None
    return done.stdout.strip()


def checkout_state(repo: Path) -> Json:
    """The commit checked out at ``repo`` and whether tracked files differ from it (None: not a
    git checkout)."""
    status = _git(repo, "status", "--porcelain", "--untracked-files=no")
    return {"commit": _git(repo, "rev-parse", "HEAD"), "dirty": None if status is None else bool(status)}


def machine() -> Json:
    """CPU count and model, memory, Python and the platform of this machine."""
    model = "unknown"
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    mem_gib = 0.0
    with contextlib.suppress(OSError, ValueError, IndexError):
        mem_gib = round(int(Path("/proc/meminfo").read_text().split()[1]) / 2**20, 1)
    return {
        "cpus": os.cpu_count(),
        "cpu_model": model,
        "mem_gib": mem_gib,
        "python": platform.python_version(),
        "platform": platform.platform(),
        "host": platform.node(),
    }


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())


def _load() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def end_on_sigterm() -> None:
    """Make SIGTERM end this process as Ctrl-C does, through its cleanup: the ``with`` and
    ``finally`` blocks that stop the clusters and executors a benchmark started run, instead of the
    process dying and leaving them running (``timeout 600 python -m bench.executors ...`` used to
    orphan three nodes and the executors, which then loaded every later measurement). A second
    SIGTERM during the cleanup kills it. Only the main thread's default handler is replaced."""
    if threading.current_thread() is not threading.main_thread():
        return
    if signal.getsignal(signal.SIGTERM) is not signal.SIG_DFL:
        return

    def terminate(signum: int, frame: object) -> None:
        signal.signal(signal.SIGTERM, signal.SIG_DFL)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, terminate)


@dataclass
class Provenance:
    """Where a result came from: taken when a benchmark starts (:meth:`start`), completed with
    the load and the time at its end (:meth:`as_dict`)."""

    command: str
    commit: str | None
    dirty: bool | None
    raftsched: str
    started_at: str
    load_avg_at_start: list[float]
    machine: Json = field(default_factory=machine)

    @classmethod
    def start(cls) -> Provenance:
        """Start a benchmark run: the processes it starts from now on (nodes, executors, helpers)
        import raftsched and bench from this checkout, a SIGTERM ends it through its cleanup
        (:func:`end_on_sigterm`), and the record begins."""
        end_on_sigterm()
        others = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p and p != str(REPO)]
        os.environ["PYTHONPATH"] = os.pathsep.join([str(REPO), *others])
        checkout = checkout_state(REPO)
        imported_from = Path(str(raftsched.__file__)).resolve().parent
        if not imported_from.is_relative_to(REPO):
            print(
                f"warning: raftsched is imported from {imported_from}, not from this checkout ({REPO}); "
                "run the benchmark as `python -m bench.<name>` from the checkout's directory",
                file=sys.stderr,
            )
        return cls(
            # The interpreter's own argument list: ``python -m bench.x --flag``, as typed.
            command=shlex.join([Path(sys.orig_argv[0]).name, *sys.orig_argv[1:]]),
            commit=checkout["commit"],
            dirty=checkout["dirty"],
            raftsched=str(imported_from),
            started_at=_now(),
            load_avg_at_start=_load(),
        )

    def as_dict(self) -> Json:
        """The record, with the load average and the time now (the end of the run)."""
        return {
            "commit": self.commit,
            "dirty": self.dirty,
            "command": self.command,
            "raftsched": self.raftsched,
            "started_at": self.started_at,
            "finished_at": _now(),
            "machine": self.machine,
            "load_avg_at_start": self.load_avg_at_start,
            "load_avg_at_end": _load(),
        }

    def stamp(self, result: Json) -> Json:
        """``result`` with the record under ``"provenance"``."""
        return {"provenance": self.as_dict(), **result}

    def emit(self, result: Json, json_path: Path | None = None, indent: int | None = 2) -> None:
        """Print ``result`` stamped as JSON, and write it to ``json_path`` if given."""
        text = json.dumps(self.stamp(result), indent=indent)
        print(text, flush=True)
        if json_path is not None:
            json_path.parent.mkdir(parents=True, exist_ok=True)
            json_path.write_text(text + "\n")

    def print_record(self) -> None:
        """Print the record as one JSON line (the last line of a benchmark that prints a JSON line
        per measurement)."""
        print(json.dumps({"provenance": self.as_dict()}), flush=True)

    def header(self) -> str:
        """One line for a benchmark that prints text: commit, command, machine, load at start."""
        m = self.machine
        dirty = " (dirty tree)" if self.dirty else ""
        return (
            f"# commit {(self.commit or '?')[:12]}{dirty}, {self.started_at}, {m['host']}: {m['cpus']} CPUs "
            f"({m['cpu_model']}), Python {m['python']}, load {self.load_avg_at_start}; "
            f"command: {self.command}"
        )

    def footer(self) -> str:
        """The closing line of a text result: the load average and the time at the end."""
        return f"# finished {_now()}, load {_load()}"


# -- timers ----------------------------------------------------------------------------------------


def next_whole_second_ms() -> int:
    """Sleep until the next whole wall-clock second and return it in ms (a window's start: fires
    fall due on whole seconds)."""
    start_ms = (time.time_ns() // 1_000_000 // 1000 + 1) * 1000
    time.sleep(max(0.0, start_ms / 1000 - time.time()))
    return start_ms


# -- no-op executors -------------------------------------------------------------------------------


def start_noop_executor(
    name: str,
    targets: Sequence[str],
    *,
    slots: int,
    data_dir: Path,
    log_dir: Path,
    kind: str = "sync",
    log_sync: bool = True,
    keep: str | None = None,
    tls_args: Sequence[str] = (),
    token: str | None = None,
    extra: Sequence[str] = (),
) -> subprocess.Popen[bytes]:
    """Start ``python -m bench.noop_executor`` (an embedded executor with the handler ``noop``
    that records every start; see that module) dialling ``targets``, its output in
    ``log_dir/NAME.log``. The caller owns the process."""
    data_dir.mkdir(parents=True, exist_ok=True)
    log = open(log_dir / f"{name}.log", "ab")  # noqa: SIM115 - owned by the child
    try:
        return subprocess.Popen(
            [
                sys.executable,
                "-m",
                "bench.noop_executor",
                "--cluster",
                ",".join(targets),
                "--name",
                name,
                "--slots",
                str(slots),
                "--data-dir",
                str(data_dir),
                "--kind",
                kind,
                *([] if log_sync else ["--no-log-sync"]),
                *(["--execution-log-keep", keep] if keep else []),
                *tls_args,
                *extra,
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            env={**os.environ, **({"RAFTSCHED_TOKEN": token} if token else {})},
        )
    finally:
        log.close()


def wait_registered(
    log_dir: Path, procs: Mapping[str, subprocess.Popen[bytes]], timeout: float = 60.0
) -> None:
    """Wait until every executor of ``procs`` has logged its registration in ``log_dir/NAME.log``.
    TimeoutError after ``timeout`` s; if an executor exited, the error says with what status."""

    def registered() -> bool:
        for name, proc in procs.items():
            if proc.poll() is not None:
                raise RuntimeError(f"executor {name} exited with {proc.returncode}")
            log = log_dir / f"{name}.log"
            if not log.exists() or "registered with" not in log.read_text(errors="replace"):
                return False
        return True

    from raftsched.testing.cluster import wait_until

    wait_until(registered, timeout, 0.1, "every executor to register")


def executor_data_dir(base: Path, name: str) -> Path:
    """Where :func:`noop_cluster` keeps executor ``name``'s data (and its ``samples.txt``)."""
    return base / "executors" / name


@contextlib.contextmanager
def noop_cluster(
    base: Path,
    executors: int,
    *,
    slots: int,
    kind: str = "sync",
    keep: str | None = None,
    extra: Sequence[str] = (),
    extra_config: str = "",
) -> Iterator[tuple[LocalCluster, dict[str, subprocess.Popen[bytes]]]]:
    """A started 3-node cluster under ``base/cluster`` with a leader, and ``executors`` no-op
    executors ``ex1``, ``ex2``, ... (:func:`start_noop_executor`, data in
    :func:`executor_data_dir`) registered with it, ``extra`` appended to each executor's
    arguments (``["--eager"]``: the handler registered eager=True, as ``bench.run``'s);
    ``extra_config`` appended to the nodes' config file. On exit
    the executors are stopped (so their samples are written), then the cluster."""
    from raftsched.testing.cluster import LocalCluster, stop_processes

    cluster = LocalCluster.create(base / "cluster", 3, extra_config=extra_config)
    procs: dict[str, subprocess.Popen[bytes]] = {}
    try:
        cluster.start()
        cluster.wait_for_leader(60)
        for name in (f"ex{i + 1}" for i in range(executors)):
            procs[name] = start_noop_executor(
                name,
                cluster.targets(),
                slots=slots,
                data_dir=executor_data_dir(base, name),
                log_dir=cluster.log_dir,
                kind=kind,
                keep=keep,
                extra=extra,
            )
        wait_registered(cluster.log_dir, procs)
        yield cluster, procs
    finally:
        stop_processes(procs.values(), resume=True)
        cluster.stop()
