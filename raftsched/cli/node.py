"""``raftsched-node`` (``python -m raftsched.cli.node``): run one node until SIGTERM/SIGINT;
SIGHUP reloads its TLS certificates; ``--restore FILE`` first loads a backup into an empty data
dir (a node of a new cluster restored from ``raftsched backup``); ``--rebuild`` moves a damaged
store aside and catches up from the leader.

The process around a :class:`raftsched.server.node.Node`: logging, SIGTERM/SIGINT and the exit
status. The node itself (pysyncobj, LMDB, the gRPC server) is imported only when
one runs, so the admin commands never load it.
"""

from __future__ import annotations

import asyncio
import dataclasses
import functools
import logging
import signal
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from raftsched import __version__
from raftsched.abc import FormatTooNew
from raftsched.cli.errors import STORE_DAMAGED_EXIT, ArgParser, UsageError, fail, run_guarded
from raftsched.cli.process import (
    LOCK_FILE,
    ClockFor,
    add_log_level_option,
    check_listen_address,
    configure_logging,
    lock_data_dir,
    move_aside,
    stop_on_signals,
)
from raftsched.errors import CannotStart, StoreDamaged

if TYPE_CHECKING:
    from raftsched.config.types import ClusterConfig

__all__ = [
    "REBUILD_FILES",
    "STORE_DAMAGED_EXIT",
    "node_main",
    "run_node",
    "with_data_dir",
]

log = logging.getLogger("raftsched.node")

STORE_FAILED_EXIT = 3  # the state store could not take writes; the node left the cluster
FORMAT_TOO_NEW_EXIT = 4  # the log holds a command of a newer format: upgrade this node
# STORE_DAMAGED_EXIT (5): a store file is damaged or unreadable: start again with --rebuild.
REBUILD_FILES = (
    "state",
    "state.restore",
    "state.old",
    "raft.journal",
    "raft.journal.meta",
    "raft.journal.meta.tmp",
    "raft.dump",
    "raft.dump.writing",
)
"""What ``--rebuild`` moves aside: the state store, the Raft journal and snapshot (and leftovers)."""


def node_parser() -> ArgParser:
    """The ``raftsched-node`` argument parser (the docs' CLI reference is generated from it)."""
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
        "--restore",
        metavar="FILE",
        help="bootstrap this node of a new cluster from a backup (raftsched backup FILE); every "
        "node of the new cluster restores the same file; refused if the data dir has state",
    )
    parser.add_argument(
        "--join",
        action="store_true",
        help="join an existing cluster (after `raftsched cluster add-node ID ...`) instead of "
        "bootstrapping one from the config file: wait, without campaigning, until the leader reaches "
        "this node, then catch up from it",
    )
    parser.add_argument(
        "--rebuild",
        action="store_true",
        help="this node's store is damaged (exit status 5): move its state, Raft journal and "
        "snapshot aside (into DATA_DIR/damaged-<time>, nothing is deleted) and catch up from the "
        "current leader's snapshot and log; rebuild one node at a time, while the others lead",
    )
    add_log_level_option(parser, "logging level (default: info)")
    return parser


def node_main(argv: Sequence[str] | None = None, clock_for: ClockFor | None = None) -> int:
    """``raftsched-node --config FILE --node-id ID [--data-dir DIR] [--join] [--log-level info]
    [--log-format text|json]``: run one node until stopped. ``clock_for(node id)``: the node's
    clock (default: the system clock; tests skew it, see :mod:`raftsched.testing.cluster`)."""
    parser = node_parser()
    try:
        try:
            args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        except SystemExit as done:
            return done.code if isinstance(done.code, int) else 0
        if args.join and args.restore:
            raise UsageError("--restore bootstraps a new cluster and --join joins one: give one of them")
        if args.rebuild and args.restore:
            raise UsageError(
                "--restore bootstraps a new cluster and --rebuild catches up with one: give one of them"
            )
        options: dict[str, Any] = {}
        if clock_for is not None:
            options["clock_for"] = clock_for
        if args.rebuild:
            options["rebuild"] = True
        if args.join:
            options["join"] = True
        if args.restore:
            options["restore"] = args.restore
        run = functools.partial(run_node, **options) if options else run_node
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
    restore: str = "",
    rebuild: bool = False,
    clock_for: ClockFor | None = None,
) -> int:
    """Run one node until SIGTERM/SIGINT (a leader hands leadership over first). Returns the
    process exit code.

    ``data_dir`` (if given) replaces the node's ``data_dir`` from the config. ``join``: the node
    joins an existing cluster whose membership already lists it (see ``raftsched cluster
    add-node``) instead of bootstrapping one from the config. ``restore`` (if given) is a backup
    file loaded into the (empty) data dir first. ``rebuild``: move the node's store files aside
    (:data:`REBUILD_FILES`) and start empty, caught up by the leader (see :class:`Node`)."""
    from raftsched.config.load import load_config
    from raftsched.server.node import Node
    from raftsched.timing.clock import SystemClock

    configure_logging(log_level, log_format)
    config = load_config(config_path)
    if data_dir:
        config = with_data_dir(config, node_id, Path(data_dir).absolute())
    me = config.node(node_id)
    clock = clock_for(node_id) if clock_for is not None else SystemClock()
    # Held until the process exits: a second process on this data dir would serve stale state.
    lock = lock_data_dir(me.data_dir, f"node {node_id}")
    try:
        if restore:
            restore_backup(Path(restore), me.data_dir, config.storage.map_size)
        check_listen_address(me.grpc_listen, "gRPC")
        if rebuild:
            moved = move_aside(me.data_dir, REBUILD_FILES, clock.now_ms())
            log.warning(
                "node %s rebuilds: %s; it catches up from the current leader",
                node_id,
                f"its store files were moved to {moved}" if moved else "it had no store files",
            )
        node = Node(config, node_id, clock=clock, joining=join, rebuilding=rebuild)
    except BaseException:
        lock.release()
        raise
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
    if node.failure is None:
        return 0
    if isinstance(node.failure, StoreDamaged):
        return STORE_DAMAGED_EXIT
    return FORMAT_TOO_NEW_EXIT if isinstance(node.failure, FormatTooNew) else STORE_FAILED_EXIT


def restore_backup(path: Path, data_dir: Path, map_size: int) -> None:
    """Load the backup at ``path`` into ``data_dir``, which must hold no state yet.

    Raises InvalidBackup (a file that is not a backup, truncated, corrupt or of a newer format)
    or CannotStart (the data dir already has state), with nothing written."""
    from raftsched.backup import read_backup, restored_entries
    from raftsched.storage.lmdb_store import LmdbStore

    backup = read_backup(path)
    present = sorted(p.name for p in data_dir.iterdir() if p.name != LOCK_FILE) if data_dir.exists() else []
    if present:
        raise CannotStart(
            f"--restore: data dir {data_dir} already has state ({', '.join(present[:4])}); a restore "
            "only bootstraps a new node: give it an empty data dir (and start it without --restore "
            "once restored)"
        )
    store = LmdbStore(data_dir, map_size=map_size, sync=True)
    try:
        # Applied index 0: the new cluster's Raft log starts again at its beginning.
        store.replace_all(iter(restored_entries(backup.snapshot)), 0)
    finally:
        store.close()
    h = backup.header
    log.info(
        "restored backup %s into %s: %d entries from node %s at log index %d (chain %s, made by "
        "raftsched %s)",
        path,
        data_dir,
        h.entries,
        h.node_id,
        h.log_index,
        h.chain[:12],
        h.build_version or "?",
    )


def with_data_dir(config: ClusterConfig, node_id: str, data_dir: Path) -> ClusterConfig:
    """``config`` with node ``node_id`` keeping its state in ``data_dir`` (validated again: a
    directory another node of the config uses is a ConfigError)."""
    me = config.node(node_id)
    nodes = tuple(dataclasses.replace(n, data_dir=data_dir) if n is me else n for n in config.nodes)
    return dataclasses.replace(config, nodes=nodes)


if __name__ == "__main__":
    sys.exit(node_main())
