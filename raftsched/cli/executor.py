"""``raftsched-executor`` (``python -m raftsched.executor``): run one executor until stopped.

SIGTERM or SIGINT drains it: nothing new is placed on it, the attempts it runs finish (for at
most ``--grace``; then they are killed and the leader declares them lost), it leaves the cluster
and exits 0. A second signal ends the wait at once (what still runs is killed; it still leaves).

A damaged execution log stops it with one line and exit status 5; ``--rebuild`` moves the log
aside, leaves the cluster (its attempts there are declared lost) and registers with a fresh one.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path

from raftsched import __version__
from raftsched.cli.errors import STORE_DAMAGED_EXIT, ArgParser, UsageError, config_message, fail
from raftsched.cli.input import duration_arg
from raftsched.cli.options import CLUSTER_ENV, TLS_HELP, add_tls_options, tls_from_args
from raftsched.cli.process import (
    ClockFor,
    add_log_level_option,
    configure_logging,
    lock_data_dir,
    move_aside,
)
from raftsched.errors import CannotStart, ConfigError, InvalidSpec, RaftschedError, StoreDamaged, TlsError

__all__ = ["executor_main"]


DEFAULT_KEEP_MS = 600_000  # raftsched.executor.retention.DEFAULT_EXECUTION_LOG_KEEP, not imported at startup


def keep_arg(text: str) -> int | None:
    """``--execution-log-keep``: a duration as ms, at least 1s, or ``forever`` (None)."""
    if text.strip().lower() == "forever":
        return None
    ms = duration_arg(text)
    if ms < 1000:
        raise argparse.ArgumentTypeError(f"{text!r} is below 1s (use 'forever' to never prune)")
    return ms


def executor_parser() -> ArgParser:
    """The ``raftsched-executor`` argument parser (the docs' CLI reference is generated from it)."""
    parser = ArgParser(
        prog="raftsched-executor",
        description="Run a raftsched executor until SIGTERM/SIGINT.",
        epilog=TLS_HELP,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--cluster", metavar="HOST:PORT,...", help="the nodes' gRPC addresses")
    parser.add_argument(
        "--config", metavar="FILE", help="read the nodes' gRPC addresses from a cluster config"
    )
    parser.add_argument("--name", required=True, help="this executor's unique name")
    parser.add_argument("--slots", type=int, default=4, help="attempts run at once (default: 4)")
    parser.add_argument(
        "--prefetch",
        type=int,
        default=0,
        metavar="N",
        help="attempts the cluster may assign beyond --slots; they wait here, unstarted, for a slot "
        "(keeps slots busy through the commit round between two short attempts; default: 0)",
    )
    parser.add_argument(
        "--cpu", type=float, default=0.0, help="cpu capacity for tasks' declared cpu (default: not declared)"
    )
    parser.add_argument(
        "--memory",
        default="0",
        metavar="SIZE",
        help="memory capacity for tasks' declared memory, e.g. 8GiB or 512MiB (default: not declared)",
    )
    parser.add_argument("--data-dir", default="executor-data", help="execution log directory")
    parser.add_argument(
        "--map-size",
        default="64GiB",
        metavar="SIZE",
        help="most the execution log may grow to, e.g. 512MiB or 64GiB (default: 64GiB)",
    )
    parser.add_argument(
        "--execution-log-keep",
        type=keep_arg,
        default=DEFAULT_KEEP_MS,
        metavar="DURATION",
        help="how long the execution log keeps an id after the cluster acknowledged its result "
        "(default: 10m; 'forever' never prunes). Older entries are pruned so the log stays flat",
    )
    parser.add_argument(
        "--label", action="append", default=[], metavar="KEY=VALUE", help="a label (repeatable)"
    )
    parser.add_argument(
        "--logs-max-attempt",
        default="1GiB",
        metavar="SIZE",
        help="full logs (DATA_DIR/logs): most kept of one attempt's stdout, and of its stderr; "
        "the rest is dropped with a marker line (default: 1GiB)",
    )
    parser.add_argument(
        "--logs-keep",
        default="7d",
        metavar="DURATION",
        help="full logs: delete an attempt's log files this long after they were last written (default: 7d)",
    )
    parser.add_argument(
        "--logs-max-total",
        default="20GiB",
        metavar="SIZE",
        help="full logs: delete the oldest files while all of them exceed this (default: 20GiB)",
    )
    parser.add_argument(
        "--logs-max-files",
        type=int,
        default=100_000,
        metavar="N",
        help="full logs: delete the oldest files while there are more than N (default: 100000)",
    )
    parser.add_argument(
        "--http", metavar="HOST:PORT", help="serve /metrics, /healthz and /readyz here (default: off)"
    )
    parser.add_argument(
        "--grace",
        type=duration_arg,
        default=30_000,
        metavar="DURATION",
        help="on SIGTERM/SIGINT, how long running attempts may take to finish before they are "
        "killed (default: 30s; a second signal ends the wait at once)",
    )
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="the execution log is damaged (exit status 5): move it aside (into "
        "DATA_DIR/damaged-<time>, nothing is deleted), leave the cluster (its attempts there are "
        "declared lost, the retry policy decides) and register with a fresh log",
    )
    parser.add_argument(
        "--secrets",
        metavar="PATH",
        help="resolve {{ secret.NAME }} from this file (.toml, or NAME=value lines) or directory "
        "(one file per secret), after RAFTSCHED_SECRET_<NAME> variables; refused if other users "
        "may read it",
    )
    parser.add_argument(
        "--full-at",
        type=float,
        default=0.9,
        metavar="FRACTION",
        help="drain itself when its data directory's filesystem or its execution log's map is "
        "this full (default: 0.9); running attempts finish, an executor_unhealthy alert names it",
    )
    parser.add_argument(
        "--resume-at",
        type=float,
        default=0.8,
        metavar="FRACTION",
        help="take work again once both are below this (default: 0.8; at most --full-at)",
    )
    parser.add_argument(
        "--kill-grace",
        type=duration_arg,
        default=5_000,
        metavar="DURATION",
        help="when an attempt times out or its run is cancelled: how long its command's process "
        "group has between SIGTERM and SIGKILL, and a handler to return (default: 5s)",
    )
    parser.add_argument(
        "--no-session",
        action="store_true",
        help="never open the Session stream (work and results as packed columns on one stream); "
        "use DispatchBatch, Report and Heartbeat as releases before it did, whatever the leader serves",
    )
    add_tls_options(parser)
    parser.add_argument("--token", metavar="TOKEN", help="executor token (prefer --token-file)")
    parser.add_argument("--token-file", metavar="FILE", help="read the executor token from FILE")
    add_log_level_option(parser)
    return parser


def executor_main(argv: Sequence[str] | None = None, clock_for: ClockFor | None = None) -> int:
    """``raftsched-executor --cluster ADDRS --name NAME [--slots N] [--data-dir DIR] [--http ADDR]``.
    ``clock_for(name)``: the executor's clock (default: the system clock; tests skew it, see
    :mod:`raftsched.testing.cluster`)."""
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")  # it reports failed handshakes itself
    parser = executor_parser()
    try:
        try:
            args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        except SystemExit as done:
            return done.code if isinstance(done.code, int) else 0
        configure_logging(args.log_level, args.log_format)
        targets = args.cluster or os.environ.get(CLUSTER_ENV, "")
        config = None
        if args.config:
            from raftsched.config.load import load_config

            config = load_config(args.config)
            targets = ",".join(config.grpc_targets())
        if not targets:
            raise UsageError("give --cluster HOST:PORT,... or --config FILE (or set RAFTSCHED_CLUSTER)")
        labels = dict(label.split("=", 1) for label in args.label if "=" in label)
        # Held until the process exits: two executors on one execution log would each run and
        # report the other's attempts as their own.
        lock = lock_data_dir(Path(args.data_dir), f"executor {args.name}")
        try:
            from raftsched.executor.agent import Executor
            from raftsched.executor.logfiles import LogSettings
            from raftsched.security.tokens import resolve_token
            from raftsched.sharding.placement import parse_memory_mb
            from raftsched.timing.clock import SystemClock

            token = resolve_token(args.token, args.token_file)
            if args.rebuild:
                moved = move_aside(Path(args.data_dir), ["executions"], SystemClock().now_ms())
                logging.getLogger("raftsched.executor").warning(
                    "executor %s rebuilds: %s",
                    args.name,
                    f"its execution log was moved to {moved}" if moved else "it had no execution log",
                )
            executor = Executor(
                targets,
                args.name,
                slots=args.slots,
                prefetch=args.prefetch,
                data_dir=args.data_dir,
                labels=labels,
                map_size=args.map_size,
                tls=tls_from_args(args, config),
                http=args.http,
                token=token,
                cpu=args.cpu,
                memory_mb=parse_memory_mb(args.memory, "--memory"),
                drain_grace_s=args.grace / 1000,
                grace_s=args.kill_grace / 1000,
                execution_log_keep=None
                if args.execution_log_keep is None
                else args.execution_log_keep / 1000,
                clock=clock_for(args.name) if clock_for is not None else SystemClock(),
                rebuilt=args.rebuild,
                secrets=args.secrets,
                logs=LogSettings.build(
                    args.logs_max_attempt, args.logs_keep, args.logs_max_total, args.logs_max_files
                ),
                full_at=args.full_at,
                resume_at=args.resume_at,
                session=not args.no_session,
            )

            async def serve() -> None:
                stop, drain = drain_on_signals()
                await executor.run(stop, drain=drain)

            asyncio.run(serve())
        finally:
            lock.release()
        return 0
    except UsageError as exc:
        return fail(str(exc), 2, prog="raftsched-executor")
    except StoreDamaged as exc:
        remedy = (
            f"start executor {args.name} with --rebuild: it moves the log aside (nothing is deleted), "
            "leaves the cluster (its attempts there are declared lost) and registers with a fresh log"
        )
        return fail(str(exc.with_remedy(remedy)), STORE_DAMAGED_EXIT, prog="raftsched-executor")
    except ConfigError as exc:
        return fail(config_message(exc), 2, prog="raftsched-executor")
    except (InvalidSpec, CannotStart) as exc:
        return fail(str(exc), 2, prog="raftsched-executor")
    except TlsError as exc:
        return fail(str(exc), 1, prog="raftsched-executor")
    except RaftschedError as exc:  # e.g. the --http port is in use
        return fail(str(exc) or exc.code, 1, prog="raftsched-executor")


def drain_on_signals() -> tuple[asyncio.Event, asyncio.Event]:
    """``(stop, drain)``: the first SIGTERM/SIGINT sets ``drain``, the next one ``stop``. Call
    inside the running loop (the main thread's)."""
    stop, drain = asyncio.Event(), asyncio.Event()
    loop = asyncio.get_running_loop()

    def signalled() -> None:
        (stop if drain.is_set() else drain).set()

    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, signalled)
    return stop, drain
