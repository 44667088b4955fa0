"""The execution log's CPU per attempt: one entry per id against one record per batch.

    python -m bench.execlog_batch [--attempts 20000] [--burst 20] [--rounds 3]

A :class:`raftsched.executor.dedupe.DedupeLog` over LMDB without fsync (as the agent opens it)
takes ``--attempts`` ids in bursts of ``--burst``: ``begin_many`` of the burst, ``finish_many``
of its results (no-op successes), then ``acknowledge`` of them - what the agent does per
dispatch message, per event-loop pass of results and per report reply - and then the pending
list and a heartbeat's id list are read once per burst. Both modes run in this process,
alternating, ``--rounds`` times each, each on a fresh log: ``per_id`` (``batched=False``, one
LMDB entry per id, as before issue 31 P2) and ``batched`` (one begin record and one finish
record per burst). Prints process CPU time per attempt for each run and the minimum of each
mode: the execution log's share of an executor's per-attempt cost, without the event loop,
the handler or gRPC.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from bench.common import Provenance
from raftsched.executor.dedupe import DedupeLog
from raftsched.executor.runners import AttemptResult


def run(attempts: int, burst: int, batched: bool, data_dir: Path) -> float:
    """CPU µs per attempt for ``attempts`` ids through begin, finish and acknowledge."""
    ids = [f"task-{i % 97}@{1_800_000_000_000 + i * 1000}/0/1" for i in range(attempts)]
    results = [AttemptResult(i, True, 0, duration_ms=1) for i in ids]
    with DedupeLog.open(data_dir, sync=False, batched=batched) as log:
        c0 = time.process_time()
        for start in range(0, attempts, burst):
            chunk = ids[start : start + burst]
            log.begin_many(chunk)
            log.finish_many(results[start : start + burst])
            log.pending_reports(500)
            log.acknowledge(chunk, at_ms=1)
        cpu = time.process_time() - c0
        assert log.pending_count() == 0 and not log.running() and len(log) == attempts
    return cpu / attempts * 1e6


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--attempts", type=int, default=20_000)
    ap.add_argument("--burst", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=3)
    args = ap.parse_args()
    prov = Provenance.start()
    runs: dict[str, list[float]] = {"per_id": [], "batched": []}
    for _ in range(args.rounds):
        for mode in runs:
            with tempfile.TemporaryDirectory() as tmp:
                runs[mode].append(round(run(args.attempts, args.burst, mode == "batched", Path(tmp)), 2))
    prov.emit(
        {
            "attempts": args.attempts,
            "burst": args.burst,
            "cpu_us_per_attempt": runs,
            "min": {mode: min(values) for mode, values in runs.items()},
        },
        indent=None,
    )


if __name__ == "__main__":
    main()
