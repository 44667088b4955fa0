"""How long a reader waits for a lock that another thread takes again and again (the applier).

    python -m bench.lock_handoff [--hold-ms 20] [--reads 30]

One thread holds a lock for ``--hold-ms`` (busy, as an apply holds the state lock), releases it
and takes it again at once, in a loop, as the applier did between the entries of a backlog
(``raftsched.consensus.applier``). Another thread takes the lock ``--reads`` times, 10 ms apart,
and its waits are reported (p50 and max, ms) for each way of going from one hold to the next:

* ``none``: take it again at once (the applier before ``yield_to_readers``);
* ``yield``: ``time.sleep(0)`` in between (``yield_to_readers``: the GIL is released for a moment,
  and the woken reader gets the lock).

Wall-clock figures: the machine's load moves them; compare the two in the same run.
"""

from __future__ import annotations

import argparse
import threading
import time

from bench.common import Json, Provenance


def reader_waits(hold_s: float, reads: int, yield_between: bool) -> list[float]:
    lock = threading.Lock()
    stop = threading.Event()

    def holder() -> None:
        while not stop.is_set():
            with lock:
                end = time.perf_counter() + hold_s
                while time.perf_counter() < end:
                    pass
            if yield_between:
                time.sleep(0)

    thread = threading.Thread(target=holder, daemon=True)
    thread.start()
    waits: list[float] = []
    try:
        for _ in range(reads):
            t0 = time.perf_counter()
            with lock:
                pass
            waits.append(time.perf_counter() - t0)
            time.sleep(0.01)
    finally:
        stop.set()
        thread.join()
    return sorted(waits)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--hold-ms", type=float, default=20.0)
    ap.add_argument("--reads", type=int, default=30)
    args = ap.parse_args()
    provenance = Provenance.start()
    out: Json = {"hold_ms": args.hold_ms, "reads": args.reads}
    for name, flag in (("none", False), ("yield", True)):
        waits = reader_waits(args.hold_ms / 1000, args.reads, flag)
        out[name] = {
            "p50_ms": round(waits[len(waits) // 2] * 1000, 1),
            "max_ms": round(waits[-1] * 1000, 1),
        }
    provenance.emit(out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
