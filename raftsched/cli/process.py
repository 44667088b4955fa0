"""What every long-running program (a node, an executor) sets up: logging and stop signals."""

from __future__ import annotations

import argparse
import asyncio
import datetime
import json
import logging
import signal
from typing import Any

__all__ = [
    "CONTEXT_FIELDS",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "JsonFormatter",
    "add_log_level_option",
    "configure_logging",
    "stop_on_signals",
]

LOG_LEVELS = ("debug", "info", "warning", "error")
LOG_FORMATS = ("text", "json")

CONTEXT_FIELDS = ("execution_id", "run_id", "task", "attempt", "executor", "term", "epoch", "leader", "node")
"""The ``extra=`` fields call sites attach; a JSON record carries each one the record has."""

_TEXT_FORMAT = "%(asctime)s %(levelname)s %(name)s: %(message)s"


class JsonFormatter(logging.Formatter):
    """One JSON object per record, on one line.

    Always present: ``ts`` (UTC, ISO 8601 with milliseconds), ``level``, ``logger``, ``message``.
    Present when the call site passed them with ``extra=``: each of :data:`CONTEXT_FIELDS`.
    ``exc_info`` becomes ``exception`` (the formatted traceback, newlines escaped by JSON).
    """

    def format(self, record: logging.LogRecord) -> str:
        ts = datetime.datetime.fromtimestamp(record.created, tz=datetime.UTC)
        out: dict[str, Any] = {
            "ts": ts.isoformat(timespec="milliseconds").replace("+00:00", "Z"),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        fields = record.__dict__
        for name in CONTEXT_FIELDS:
            value = fields.get(name)
            if value is not None:
                out[name] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        elif record.stack_info:
            out["stack"] = self.formatStack(record.stack_info)
        return json.dumps(out, default=str, ensure_ascii=False)


def add_log_level_option(parser: argparse.ArgumentParser, help_text: str | None = None) -> None:
    """``--log-level`` (one of :data:`LOG_LEVELS`, default ``info``) and ``--log-format``
    (``text`` or ``json``, default ``text``)."""
    parser.add_argument("--log-level", default="info", choices=list(LOG_LEVELS), help=help_text)
    parser.add_argument(
        "--log-format",
        default="text",
        choices=list(LOG_FORMATS),
        help="stderr log format: text (default) or json (one JSON object per line)",
    )


def configure_logging(level: str, fmt: str = "text") -> None:
    """Log to stderr at ``level`` (a name such as ``info``; unknown names mean info) in ``fmt``
    (``text`` or ``json``; see :class:`JsonFormatter`)."""
    handler = logging.StreamHandler()
    handler.setFormatter(JsonFormatter() if fmt == "json" else logging.Formatter(_TEXT_FORMAT))
    logging.basicConfig(level=getattr(logging, level.upper(), logging.INFO), handlers=[handler])


def stop_on_signals() -> asyncio.Event:
    """An event that SIGTERM and SIGINT set. Call inside the running loop (the main thread's)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop
