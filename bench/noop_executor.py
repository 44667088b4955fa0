"""One embedded ``raftsched.Executor`` with a no-op handler ``noop``, instrumented for bench/executors.py.

    python -m bench.noop_executor --cluster HOST:PORT,... --name NAME --slots N --data-dir DIR
        [--kind sync|async] [--execution-log-keep DURATION] [--tls-ca FILE --tls-cert FILE --tls-key FILE]

Runs until SIGTERM/SIGINT, then writes ``DIR/samples.txt`` (one write, at exit) with lines:

* ``S <execution_id> <nominal_ms> <start_ns>``: the handler started (wall clock, inside the handler;
  one line per handler call, so a second start of one id shows up as a second line);
* ``A <execution_id> <accept_ns>``: the agent's event loop took the work item off the dispatch
  stream (``Attempts.accept``, before its execution-log write) and it was new (it now holds a slot);
* ``D <execution_id> <done_ns>``: the attempt left the agent's running set (result logged);
* ``M <max_running> <started> <refused_stale>``: the agent's largest running set (less the
  attempts waiting for a slot, with ``--prefetch``) seen right after accepting a dispatch, and its
  counters.

Samples are appended to in-memory lists (one tuple append, well under a microsecond) and written
once at exit, so recording costs next to nothing at thousands of attempts per second;
:class:`Samples` reads them back. ``bench.common.start_noop_executor`` starts this module.

``--no-log-sync`` (a diagnostic, not production behaviour) opens the execution log itself, with
no fsync at all (not even the agent's once-a-second flush), to show what fsync costs.

``--kind sync`` (default) registers ``def noop(ctx)``: the agent runs it in a worker thread
(``asyncio.to_thread``), as for any plain function. ``--kind async`` registers ``async def``,
which runs on the agent's event loop; with ``--eager``, registered ``eager=True`` (over a
Session stream it starts inside the batch that delivered it, see raftsched.executor.batched).
``--no-session`` keeps DispatchBatch, Report and Heartbeat whatever the leader serves (the
protocol of releases before the Session stream, for an A/B in one tree).
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from raftsched.executor.agent import Executor
from raftsched.executor.attempts import Attempts
from raftsched.executor.runners import AttemptContext
from raftsched.security.tls import TlsConfig
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.v1 import raftsched_pb2 as pb


@dataclass
class Samples:
    """What one executor process recorded (``DIR/samples.txt``, written by :func:`main` at exit)."""

    name: str
    starts: list[tuple[str, int, int]] = field(default_factory=list)  # (execution id, nominal ms, ns)
    accepted: dict[str, int] = field(default_factory=dict)
    done: dict[str, int] = field(default_factory=dict)
    max_running: int = -1
    started: int = 0
    refused_stale: int = 0

    @classmethod
    def read(cls, name: str, path: Path) -> Samples:
        out = cls(name)
        with open(path) as f:
            for line in f:
                parts = line.split()
                if parts[0] == "S":
                    out.starts.append((parts[1], int(parts[2]), int(parts[3])))
                elif parts[0] == "A":
                    out.accepted[parts[1]] = int(parts[2])
                elif parts[0] == "D":
                    out.done[parts[1]] = int(parts[2])
                elif parts[0] == "M":
                    out.max_running, out.started, out.refused_stale = (int(p) for p in parts[1:4])
        return out

    def max_concurrency(self, *, from_start: bool = False) -> int:
        """Largest number of attempts between accept (``from_start``: the handler's start) and
        done at once (unfinished: until the end). With prefetch an accepted attempt may wait for
        a slot: the attempts held are bounded by slots + prefetch, those started by the slots."""
        began = {e: t for e, _, t in self.starts} if from_start else self.accepted
        events = [(t, 1) for e, t in began.items() if e in self.accepted]
        events += [(t, -1) for e, t in self.done.items() if e in self.accepted]
        events.sort(key=lambda ev: (ev[0], ev[1]))  # a slot freed at t is free for an accept at t
        level = peak = 0
        for _, step in events:
            level += step
            peak = max(peak, level)
        return peak


class BenchAttempts(Attempts):
    """Records when each attempt was accepted and left the running set (the slot it held)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.accepted: list[tuple[str, int]] = []
        self.done: list[tuple[str, int]] = []
        self.max_running = 0

    def accept(self, item: pb.WorkItem) -> None:
        now = time.time_ns()  # before super().accept's execution-log write
        before = len(self.running)
        super().accept(item)
        held = len(self.running)
        if held > before:
            self.accepted.append((item.execution_id, now))
        running = held - (self.gate.waiting if self.gate is not None else 0)  # not the prefetched
        if running > self.max_running:
            self.max_running = running

    async def execute(self, item: pb.WorkItem) -> None:
        await super().execute(item)
        self.done.append((item.execution_id, time.time_ns()))

    def _run_eager(self, rows: list[Any], epoch: int) -> None:
        # Rows of a session message started in their batch (no accept): accepted as they
        # arrive, done when they did not go on in a Task (an eager no-op never does).
        now = time.time_ns()
        fresh = [row[1] for row in rows if row[1] not in self.running]
        super()._run_eager(rows, epoch)
        self.accepted.extend((e, now) for e in fresh)
        end = time.time_ns()
        self.done.extend((e, end) for e in fresh if e not in self.running)


class BenchExecutor(Executor):
    """The agent, its attempts recorded by :class:`BenchAttempts`."""

    attempts_type = BenchAttempts

    def __init__(
        self,
        targets: str,
        name: str,
        *,
        slots: int,
        data_dir: Path,
        log: LmdbExecutionLog | None,
        tls: TlsConfig | None = None,
        execution_log_keep: str | None = None,
        session: bool = True,
        prefetch: int = 0,
    ) -> None:
        # Passed only when given, so this script also runs against a raftsched without the option.
        keep: dict[str, Any] = (
            {} if execution_log_keep is None else {"execution_log_keep": execution_log_keep}
        )
        if not session:
            keep["session"] = False
        if prefetch:
            keep["prefetch"] = prefetch
        super().__init__(targets, name, slots=slots, data_dir=data_dir, execution_log=log, tls=tls, **keep)
        assert isinstance(self.attempts, BenchAttempts)
        self.recorded: BenchAttempts = self.attempts


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--cluster", required=True)
    ap.add_argument("--name", required=True)
    ap.add_argument("--slots", type=int, default=256)
    ap.add_argument("--prefetch", type=int, default=0, help="the agent's prefetch (0: none)")
    ap.add_argument("--data-dir", required=True, type=Path)
    ap.add_argument("--kind", choices=["sync", "async"], default="sync")
    ap.add_argument(
        "--no-log-sync",
        action="store_true",
        help="diagnostic only: open the execution log without fsync (not what production does)",
    )
    ap.add_argument("--execution-log-keep", help="the agent's execution_log_keep (e.g. 30s)")
    ap.add_argument("--eager", action="store_true", help="--kind async: register the handler eager=True")
    ap.add_argument("--no-session", action="store_true", help="never open a Session stream")
    ap.add_argument("--tls-ca", type=Path, help="dial over TLS, trusting this CA")
    ap.add_argument("--tls-cert", type=Path, help="client certificate (mutual TLS)")
    ap.add_argument("--tls-key", type=Path, help="its key")
    args = ap.parse_args()
    tls = TlsConfig(args.tls_ca, args.tls_cert, args.tls_key) if args.tls_ca or args.tls_cert else None
    logging.basicConfig(level="INFO", format="%(asctime)s %(levelname)s %(name)s: %(message)s")

    # --no-log-sync: the log is opened here instead of by the agent (which, since it batches its
    # writes, opens it without fsync too but fsyncs it every second): no fsync at all.
    log = LmdbExecutionLog(args.data_dir, sync=False) if args.no_log_sync else None
    ex = BenchExecutor(
        args.cluster,
        args.name,
        slots=args.slots,
        data_dir=args.data_dir,
        log=log,
        tls=tls,
        execution_log_keep=args.execution_log_keep,
        session=not args.no_session,
        prefetch=args.prefetch,
    )
    eager: dict[str, Any] = {"eager": True} if args.eager else {}
    starts: list[tuple[str, int, int]] = []
    append = starts.append

    if args.kind == "sync":

        @ex.handler("noop")
        def noop(ctx: AttemptContext) -> None:
            append((ctx.execution_id, ctx.nominal_ms, time.time_ns()))

    else:

        @ex.handler("noop", **eager)
        async def noop_async(ctx: AttemptContext) -> None:
            append((ctx.execution_id, ctx.nominal_ms, time.time_ns()))

    async def serve() -> None:
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        await ex.run(stop)

    try:
        asyncio.run(serve())
    finally:
        lines = [f"S {e} {n} {t}\n" for e, n, t in list(starts)]
        rec = ex.recorded
        lines += [f"A {e} {t}\n" for e, t in rec.accepted]
        lines += [f"D {e} {t}\n" for e, t in rec.done]
        lines.append(f"M {rec.max_running} {rec.started} {rec.refused_stale}\n")
        tmp = args.data_dir / "samples.txt.tmp"
        tmp.write_text("".join(lines))
        tmp.rename(args.data_dir / "samples.txt")
        if log is not None:
            log.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
