"""APScheduler 3.x on the same workloads as raftsched, in a process of its own (bench/run.py starts it).

    python -m bench.aps_bench cron --tasks 10000 [--seconds 20] [--warmup 5] [--store memory|sqlite]
    python -m bench.aps_bench once --tasks 50000 [--store memory|sqlite]

``BackgroundScheduler`` with its defaults: ``MemoryJobStore``, ``ThreadPoolExecutor`` (10
threads), ``coalesce=True``, ``misfire_grace_time=1`` s, ``max_instances=1``. The jobs are no-op
Python functions.

``--store sqlite`` is the durable single-node comparison: APScheduler's ``SQLAlchemyJobStore`` on
a SQLite file in a fresh temporary directory (deleted at the end), everything else the same. Every
job's next run time is then written to the file after each fire, as a durable APScheduler does.

Prints one JSON object on stdout (one row of ``python -m bench.run``'s result, which records the
provenance).

Lateness is measured as for raftsched's executors: the wall time at which the job function
started minus the fire's nominal time (the run time APScheduler passed to ``run_job``).

* ``cron``: N jobs with ``CronTrigger(second="*")`` (every second, all due at the same instant);
  after a warm-up, a window of whole seconds. Fires due in the window end as *started* (the job
  ran), *missed* (APScheduler dropped it: later than ``misfire_grace_time``), *skipped* (max
  instances) or *coalesced* (folded into a later run time by ``coalesce``: due, never submitted).
* ``once``: N jobs with ``DateTrigger`` at one instant T (added before the scheduler starts);
  throughput is N started / (last start - T).

Logging of the ``apscheduler`` loggers is set to ERROR: its per-missed-job warnings would
otherwise go to stderr by the thousand (which only makes it slower).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import os
import shutil
import sys
import tempfile
import threading
import time
from datetime import UTC, datetime
from typing import Any

from bench.common import percentiles

try:
    from apscheduler.events import EVENT_JOB_MAX_INSTANCES, EVENT_JOB_MISSED, JobEvent
    from apscheduler.executors import base as aps_base
    from apscheduler.executors import pool as aps_pool
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.jobstores.memory import MemoryJobStore
    from apscheduler.schedulers.background import BackgroundScheduler
    from apscheduler.triggers.cron import CronTrigger
    from apscheduler.triggers.date import DateTrigger
except ImportError:  # pragma: no cover - the bench extra is not installed
    print(json.dumps({"error": "apscheduler is not installed: pip install -e '.[bench]'"}))
    sys.exit(2)

_local = threading.local()
# (nominal ms, start ns) of every job function call; list.append is atomic under the GIL.
STARTS: list[tuple[int, int]] = []


def _run_job_recording(job: Any, jobstore_alias: str, run_times: list[datetime], logger_name: str) -> Any:
    """APScheduler's own ``run_job``, with the run time the job is about to run for made visible."""
    _local.run_times = run_times
    return aps_base.run_job(job, jobstore_alias, run_times, logger_name)


def noop() -> None:
    # With coalesce=True run_job gets a single run time; record it with the start.
    run_times = _local.run_times
    STARTS.append((int(run_times[-1].timestamp() * 1000), time.time_ns()))


def cpu_seconds() -> float:
    t = os.times()
    return t.user + t.system


STORES = ("memory", "sqlite")


def job_store(store: str, directory: str) -> Any:
    """The job store of ``--store``: APScheduler's memory store, or its SQLAlchemy store on a
    SQLite file under ``directory``."""
    if store == "memory":
        return MemoryJobStore()
    try:
        from apscheduler.jobstores.sqlalchemy import SQLAlchemyJobStore
    except ImportError as exc:  # pragma: no cover - the bench extra brings SQLAlchemy
        raise SystemExit(f"--store sqlite needs SQLAlchemy (pip install -e '.[bench]'): {exc}") from exc
    return SQLAlchemyJobStore(url=f"sqlite:///{os.path.join(directory, 'jobs.sqlite')}")


def make_scheduler(
    store: str = "memory", directory: str = ""
) -> tuple[BackgroundScheduler, list[tuple[int, int]], list[int]]:
    aps_pool.run_job = _run_job_recording  # the pool submits this module-level name
    logging.getLogger("apscheduler").setLevel(logging.ERROR)
    sched = BackgroundScheduler(
        jobstores={"default": job_store(store, directory)},
        executors={"default": ThreadPoolExecutor(10)},
        timezone=UTC,
    )
    missed: list[tuple[int, int]] = []  # (nominal ms, 1)
    skipped: list[int] = []

    def listener(event: JobEvent) -> None:
        if event.code == EVENT_JOB_MISSED:
            missed.append((int(event.scheduled_run_time.timestamp() * 1000), 1))
        elif event.code == EVENT_JOB_MAX_INSTANCES:
            skipped.extend(int(t.timestamp() * 1000) for t in event.scheduled_run_times)

    sched.add_listener(listener, EVENT_JOB_MISSED | EVENT_JOB_MAX_INSTANCES)
    return sched, missed, skipped


def run_cron(
    n: int, seconds: int, warmup: float, store: str = "memory", directory: str = ""
) -> dict[str, object]:
    sched, missed, skipped = make_scheduler(store, directory)
    t0 = time.monotonic()
    for i in range(n):
        sched.add_job(noop, CronTrigger(second="*", timezone=UTC), id=f"job-{i}")
    add_s = time.monotonic() - t0
    sched.start()
    time.sleep(warmup)
    w0 = (time.time_ns() // 1_000_000 // 1000 + 1) * 1000
    time.sleep(max(0.0, w0 / 1000 - time.time()))
    cpu0 = cpu_seconds()
    time.sleep(seconds)
    cpu1 = cpu_seconds()
    w1 = w0 + seconds * 1000
    time.sleep(2.0)  # starts of fires due in the window that run late
    # Jobs the scheduler thread is still submitting after this are refused by the shut pool; its
    # "Error submitting job" per job is noise here, not a figure.
    logging.getLogger("apscheduler").setLevel(logging.CRITICAL)
    sched.shutdown(wait=False)
    starts = list(STARTS)
    in_window = [(nom, t) for nom, t in starts if w0 <= nom < w1]
    started_in_window = sum(1 for _, t in starts if w0 * 1_000_000 <= t < w1 * 1_000_000)
    lateness = [t / 1e6 - nom for nom, t in in_window]
    due = n * seconds
    n_missed = sum(1 for nom, _ in missed if w0 <= nom < w1)
    n_skipped = sum(1 for nom in skipped if w0 <= nom < w1)
    return {
        "scheduler": "apscheduler",
        "version": _aps_version(),
        "workload": "cron",
        "store": store,
        "tasks": n,
        "window_s": seconds,
        "add_jobs_s": round(add_s, 2),
        "fires_due": due,
        "started": len(in_window),
        "fires_per_s": round(started_in_window / seconds, 1),
        "lateness_ms": percentiles(lateness),
        "missed": n_missed,
        "skipped_max_instances": n_skipped,
        "coalesced": max(0, due - len(in_window) - n_missed - n_skipped),
        # None when nothing started: CPU over zero fires is no per-fire figure.
        "cpu_us_per_fire": round((cpu1 - cpu0) / started_in_window * 1e6, 1) if started_in_window else None,
        "cpu_s_per_s": round((cpu1 - cpu0) / seconds, 2),
    }


def run_once(n: int, lead_s: float, store: str = "memory", directory: str = "") -> dict[str, object]:
    sched, missed, skipped = make_scheduler(store, directory)
    t_ms = (time.time_ns() // 1_000_000 // 1000 + math.ceil(lead_s)) * 1000
    run_date = datetime.fromtimestamp(t_ms / 1000, UTC)
    t0 = time.monotonic()
    for i in range(n):
        sched.add_job(noop, DateTrigger(run_date=run_date, timezone=UTC), id=f"once-{i}")
    add_s = time.monotonic() - t0
    sched.start()
    if time.time() * 1000 > t_ms:
        raise SystemExit(f"adding {n} jobs took {add_s:.1f}s, past the due time: raise --lead")
    cpu0 = cpu_seconds()
    deadline = t_ms / 1000 + 120
    while len(STARTS) + len(missed) + len(skipped) < n and time.time() < deadline:
        time.sleep(0.05)
    cpu1 = cpu_seconds()
    # Jobs the scheduler thread is still submitting after this are refused by the shut pool; its
    # "Error submitting job" per job is noise here, not a figure.
    logging.getLogger("apscheduler").setLevel(logging.CRITICAL)
    sched.shutdown(wait=False)
    starts = list(STARTS)
    lateness = [t / 1e6 - nom for nom, t in starts]
    last_ns = max((t for _, t in starts), default=t_ms * 1_000_000)
    span_s = max(1e-3, last_ns / 1e9 - t_ms / 1000)
    return {
        "scheduler": "apscheduler",
        "version": _aps_version(),
        "workload": "once",
        "store": store,
        "tasks": n,
        "add_jobs_s": round(add_s, 2),
        "started": len(starts),
        "fires_per_s": round(len(starts) / span_s, 1),
        "lateness_ms": percentiles(lateness),
        "missed": len(missed),
        "skipped_max_instances": len(skipped),
        "coalesced": 0,
        "never_accounted": n - len(starts) - len(missed) - len(skipped),
        "cpu_us_per_fire": round((cpu1 - cpu0) / len(starts) * 1e6, 1) if starts else None,
    }


def _aps_version() -> str:
    from importlib.metadata import version

    return version("apscheduler")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("workload", choices=["cron", "once"])
    ap.add_argument("--tasks", type=int, required=True)
    ap.add_argument("--seconds", type=int, default=20)
    ap.add_argument("--warmup", type=float, default=5.0)
    ap.add_argument("--lead", type=float, default=0.0, help="once: seconds from now to the due time")
    ap.add_argument(
        "--store",
        choices=STORES,
        default="memory",
        help="job store: memory (default) or sqlite (SQLAlchemyJobStore on a SQLite file in a temp dir)",
    )
    args = ap.parse_args()
    sys.setswitchinterval(0.005)  # the interpreter default, stated
    directory = tempfile.mkdtemp(prefix="aps-bench-")
    try:
        if args.workload == "cron":
            result = run_cron(args.tasks, args.seconds, args.warmup, args.store, directory)
        else:
            result = run_once(args.tasks, args.lead or 3 + args.tasks / 10_000, args.store, directory)
    finally:
        shutil.rmtree(directory, ignore_errors=True)
    print(json.dumps(result))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
