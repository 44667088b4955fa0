"""What every long-running program (a node, an executor) sets up: logging and stop signals."""

from __future__ import annotations

import argparse
import asyncio
import logging
import signal

__all__ = ["LOG_LEVELS", "add_log_level_option", "configure_logging", "stop_on_signals"]

LOG_LEVELS = ("debug", "info", "warning", "error")


def add_log_level_option(parser: argparse.ArgumentParser, help_text: str | None = None) -> None:
    """``--log-level`` (one of :data:`LOG_LEVELS`, default ``info``)."""
    parser.add_argument("--log-level", default="info", choices=list(LOG_LEVELS), help=help_text)


def configure_logging(level: str) -> None:
    """Log to stderr at ``level`` (a name such as ``info``; unknown names mean info)."""
    logging.basicConfig(
        level=getattr(logging, level.upper(), logging.INFO),
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )


def stop_on_signals() -> asyncio.Event:
    """An event that SIGTERM and SIGINT set. Call inside the running loop (the main thread's)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop
