"""The tick thread per part, per node, over a benchmark's measured window.

    python -m bench.raft_probe.report PREFIX

``PREFIX`` is the ``RAFT_PROBE`` value of the run (see ``sitecustomize.py``); ``PREFIX.out`` is
the benchmark's JSON output (``bench.executors``: its ``window`` and ``attempts_per_s`` are read).
Prints, per node process: ticks per second, the tick thread's CPU in ms per second and µs per
attempt, its parts (poll, sending appends, the proposal queue, applies, compaction), the messages
sent per second and the thread CPU per send.
"""

from __future__ import annotations

import argparse
import glob
import json
from typing import Any


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("prefix")
    prefix = parser.parse_args().prefix
    with open(f"{prefix}.out") as f:
        out: dict[str, Any] = json.load(f)
    w0, w1 = (x / 1000 for x in out["window"])
    rate = float(out["attempts_per_s"]) or 1.0
    keys = ("attempts_per_s", "leader_cpu_us_per_attempt", "follower_cpu_us_per_attempt", "leader")
    print({k: out.get(k) for k in keys})
    for path in sorted(glob.glob(f"{prefix}.*.jsonl")):
        with open(path) as f:
            rows = [json.loads(line) for line in f if line.strip()]
        inside = [r for r in rows if w0 - 1 <= r["wall"] <= w1 + 1]
        if len(inside) < 2 or inside[-1]["tick_n"] == 0:
            continue  # not a node, or no sample in the window
        a, b = inside[0], inside[-1]
        dt = b["wall"] - a["wall"]
        d = {k: b[k] - a[k] for k in b}

        def per_s(key: str, d: dict[str, float] = d, dt: float = dt) -> float:
            return d[key] / dt

        sends = d["send_n"] or 1
        per_send = 1e6 * (d["t_pickle"] + d["t_zlib"] + d["t_enc"] + d["t_write"]) / sends
        print(
            f"pid {path.rsplit('.', 2)[-2]}: ticks/s {per_s('tick_n'):.0f}, tick thread "
            f"{1000 * per_s('t_tick'):.1f} ms/s = {1e6 * per_s('t_tick') / rate:.2f} us/attempt "
            f"[poll {1000 * per_s('t_poll'):.1f}, sending appends {1000 * per_s('t_sendae'):.1f}, "
            f"proposal queue {1000 * per_s('t_check'):.1f}, applies {1000 * per_s('t_apply'):.1f}, "
            f"compaction check {1000 * per_s('t_compact'):.1f} ms/s]; sends/s {per_s('send_n'):.0f} "
            f"(appends {per_s('ae_n'):.0f}), {per_send:.0f} us per send"
        )


if __name__ == "__main__":
    main()
