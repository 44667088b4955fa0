"""``raftsched-node`` (``python -m raftsched.cli.node``): run one node until SIGTERM/SIGINT;
SIGHUP reloads its TLS certificates.

The process around a :class:`raftsched.node.Node`: logging, SIGTERM/SIGINT, the test clock hook,
and the exit status. The node itself (pysyncobj, LMDB, the gRPC server) is imported only when
one runs, so the admin commands never load it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import os
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from raftsched import __version__
from raftsched.cli.errors import ArgParser, UsageError, fail, run_guarded
from raftsched.cli.process import (
    add_log_level_option,
    check_listen_address,
    configure_logging,
    lock_data_dir,
    stop_on_signals,
)
from raftsched.errors import InvalidSpec

if TYPE_CHECKING:
    from raftsched.config import ClusterConfig

__all__ = ["TEST_CLOCK_OFFSET_ENV", "clock_offset_for_tests", "node_main", "run_node", "with_data_dir"]

log = logging.getLogger("raftsched.node")

TEST_CLOCK_OFFSET_ENV = "RAFTSCHED_TEST_CLOCK_OFFSET_MS"
STORE_FAILED_EXIT = 3  # the state store could not take writes; the node left the cluster


def node_main(argv: Sequence[str] | None = None) -> int:
    """``raftsched-node --config FILE --node-id ID [--data-dir DIR] [--join] [--log-level info]
    [--log-format text|json]``: run one node until stopped."""
    parser = ArgParser(prog="raftsched-node", description="Run one raftsched node until SIGTERM/SIGINT.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    parser.add_argument("--config", required=True, metavar="FILE", help="the cluster's TOML config file")
    parser.add_argument("--node-id", required=True, metavar="ID", help="which [[nodes]] entry this is")
    parser.add_argument(
        "--data-dir",
        metavar="DIR",
        help="keep this node's state in DIR instead of its data_dir in the config",
    )
    parser.add_argument(
        "--join",
        action="store_true",
        help="join an existing cluster (after `raftsched cluster add-node ID ...`) instead of "
        "bootstrapping one from the config file: wait, without campaigning, until the leader reaches "
        "this node, then catch up from it",
    )
    add_log_level_option(parser, "logging level (default: info)")
    try:
        try:
            args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        except SystemExit as done:
            return done.code if isinstance(done.code, int) else 0
        run = functools.partial(run_node, join=True) if args.join else run_node
        return run_guarded(
            "raftsched-node",
            run,
            args.config,
            args.node_id,
            args.log_level,
            args.data_dir or "",
            args.log_format,
        )
    except UsageError as exc:
        return fail(str(exc), 2, prog="raftsched-node")


def run_node(
    config_path: str,
    node_id: str,
    log_level: str = "info",
    data_dir: str = "",
    log_format: str = "text",
    join: bool = False,
) -> int:
    """Run one node until SIGTERM/SIGINT (a leader hands leadership over first). Returns the
    process exit code.

    ``data_dir`` (if given) replaces the node's ``data_dir`` from the config. ``join``: the node
    joins an existing cluster whose membership already lists it (see ``raftsched cluster
    add-node``) instead of bootstrapping one from the config."""
    from raftsched.config import load_config
    from raftsched.node import Node
    from raftsched.timing.clock import SystemClock

    configure_logging(log_level, log_format)
    config = load_config(config_path)
    if data_dir:
        config = with_data_dir(config, node_id, Path(data_dir).absolute())
    me = config.node(node_id)
    offset_ms = clock_offset_for_tests("node")
    # Held until the process exits: a second process on this data dir would serve stale state.
    lock = lock_data_dir(me.data_dir, f"node {node_id}")
    check_listen_address(me.grpc_listen, "gRPC")
    node = Node(config, node_id, clock=SystemClock(offset_ms), joining=join)
    try:
        node.start()  # raises CannotStart if the Raft port is taken
    except BaseException:
        node.stop()
        raise

    async def main() -> None:
        stop = stop_on_signals()
        # SIGHUP: new certificates from the [tls] files, without a restart.
        asyncio.get_running_loop().add_signal_handler(signal.SIGHUP, node.reload_tls)
        try:
            await node.serve(stop)
        finally:
            # Leave Raft while the loop still runs: an entry applied during shutdown calls back
            # into the loop (a pending write's future), and a closed loop made that callback raise
            # "Event loop is closed" (seen in a chaos soak on a SIGTERM restart of the leader).
            await asyncio.to_thread(node.stop)

    try:
        asyncio.run(main())
    finally:
        node.stop()
        lock.release()
    return STORE_FAILED_EXIT if node.failure is not None else 0


def with_data_dir(config: ClusterConfig, node_id: str, data_dir: Path) -> ClusterConfig:
    """``config`` with node ``node_id`` keeping its state in ``data_dir`` (validated again: a
    directory another node of the config uses is a ConfigError)."""
    me = config.node(node_id)
    nodes = tuple(dataclasses.replace(n, data_dir=data_dir) if n is me else n for n in config.nodes)
    return dataclasses.replace(config, nodes=nodes)


def clock_offset_for_tests(what: str) -> int:
    """Test-only: the chaos suite skews a node's clock (and a test an executor's) with
    RAFTSCHED_TEST_CLOCK_OFFSET_MS. ``what`` names the process in the warning."""
    raw = os.environ.get(TEST_CLOCK_OFFSET_ENV, "")
    if not raw:
        return 0
    try:
        offset = int(raw)
    except ValueError:
        raise InvalidSpec(
            TEST_CLOCK_OFFSET_ENV, f"{raw!r} is not an integer number of milliseconds"
        ) from None
    log.warning("TEST SETTING: this %s's clock is skewed by %+d ms", what, offset)
    return offset


if __name__ == "__main__":
    sys.exit(node_main())
