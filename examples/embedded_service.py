"""A Python service that embeds a raftsched scheduler node *and* an executor in one process.

Run one per host (three for a highly available cluster), each with its own node id:

    python examples/embedded_service.py --config cluster.example.toml --node-id n1
    python examples/embedded_service.py --config cluster.example.toml --node-id n2
    python examples/embedded_service.py --config cluster.example.toml --node-id n3

then schedule the handler from anywhere:

    raftsched --config cluster.example.toml task add report --every 5s --handler send-report

No database, no separate daemon: the service processes elect a leader among themselves, and every
fire of ``send-report`` runs exactly once in one of them, even when a process dies.
"""

from __future__ import annotations

import argparse
import asyncio
import signal
from pathlib import Path

from raftsched import Executor, Node
from raftsched.config.load import load_config
from raftsched.executor.runners import AttemptContext


def main() -> None:
    ap = argparse.ArgumentParser(description="a service embedding a raftsched node and executor")
    ap.add_argument("--config", required=True)
    ap.add_argument("--node-id", required=True)
    ap.add_argument("--marker", help="append one line per handled attempt to this file (for tests)")
    args = ap.parse_args()
    config = load_config(args.config)

    executor = Executor(
        config.grpc_targets(),
        f"{args.node_id}-worker",
        slots=4,
        data_dir=config.node(args.node_id).data_dir / "executor",
    )

    @executor.handler("send-report")
    def send_report(ctx: AttemptContext) -> str:
        # ctx.execution_id is the idempotency key: the same id is never handled twice here.
        line = f"{ctx.execution_id} {ctx.nominal_iso} handled by {args.node_id}"
        if args.marker:
            with open(args.marker, "a") as f:
                f.write(line + "\n")
        return line

    node = Node(config, args.node_id)

    async def serve() -> None:
        node.start()  # on the main thread, as pysyncobj requires
        stop = asyncio.Event()
        loop = asyncio.get_running_loop()
        for sig in (signal.SIGTERM, signal.SIGINT):
            loop.add_signal_handler(sig, stop.set)
        try:
            await asyncio.gather(node.serve(stop), executor.run(stop))
        finally:
            node.stop()

    Path(config.node(args.node_id).data_dir).mkdir(parents=True, exist_ok=True)
    asyncio.run(serve())


if __name__ == "__main__":
    main()
