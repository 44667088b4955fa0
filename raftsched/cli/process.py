"""What every long-running program (a node, an executor) sets up: logging, stop signals, the
lock on its data directory, and a check that its listen address is free."""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import errno
import fcntl
import json
import logging
import os
import signal
import socket
import sys
import threading
from collections.abc import Callable, Sequence
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

from raftsched.errors import CannotStart

if TYPE_CHECKING:
    from raftsched.abc import Clock

ClockFor = Callable[[str], "Clock"]
"""A process's clock by its name (node id, executor name); tests skew it (raftsched.testing.cluster)."""

__all__ = [
    "CONTEXT_FIELDS",
    "LOCK_FILE",
    "LOG_FORMATS",
    "LOG_LEVELS",
    "ClockFor",
    "DataDirLock",
    "JsonFormatter",
    "add_log_level_option",
    "check_listen_address",
    "configure_logging",
    "lock_data_dir",
    "move_aside",
    "stop_on_signals",
]

LOCK_FILE = "raftsched.lock"

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
    if fmt == "json":
        # Whatever else Python would print on stderr goes through the formatter too, so every
        # line stays one JSON object: warnings, and exceptions nobody caught (any thread).
        logging.captureWarnings(True)
        crash = logging.getLogger("raftsched.crash")

        def on_thread_crash(args: threading.ExceptHookArgs) -> None:
            if args.exc_type is SystemExit:
                return
            name = args.thread.name if args.thread is not None else "?"
            crash.critical(
                "uncaught exception in thread %s",
                name,
                exc_info=(args.exc_type, args.exc_value or args.exc_type(), args.exc_traceback),
            )

        def on_crash(kind: type[BaseException], value: BaseException, tb: TracebackType | None) -> None:
            crash.critical("uncaught exception", exc_info=(kind, value, tb))

        threading.excepthook = on_thread_crash
        sys.excepthook = on_crash


def stop_on_signals() -> asyncio.Event:
    """An event that SIGTERM and SIGINT set. Call inside the running loop (the main thread's)."""
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGTERM, signal.SIGINT):
        loop.add_signal_handler(sig, stop.set)
    return stop


class DataDirLock:
    """An exclusive ``flock`` on ``<data dir>/raftsched.lock``, held until :meth:`release` or the
    process exits (the kernel drops it then, also after SIGKILL, so a stale file never blocks a
    restart). The file holds the owner's pid, for the refusal message of the next one. Its
    descriptor is not inherited: a command an executor runs cannot keep the lock alive."""

    def __init__(self, path: Path, fd: int) -> None:
        self.path = path
        self._fd: int | None = fd

    def release(self) -> None:
        """Unlock (idempotent)."""
        if self._fd is not None:
            os.close(self._fd)
            self._fd = None


def lock_data_dir(data_dir: Path, owner: str) -> DataDirLock:
    """Lock ``data_dir`` (created if missing) for this process, as ``owner`` (``node n1``).

    Raises CannotStart when another process holds it: two processes on one LMDB directory would
    each serve their own view of the state, the second a stale one."""
    path = data_dir / LOCK_FILE
    try:
        data_dir.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_CLOEXEC, 0o644)
    except OSError as exc:
        raise CannotStart(f"cannot use data dir {data_dir}: {exc.strerror or exc}") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError as exc:
        holder = _holder(fd)
        os.close(fd)
        if exc.errno not in (errno.EWOULDBLOCK, errno.EAGAIN):
            raise CannotStart(f"cannot lock data dir {data_dir}: {exc.strerror or exc}") from None
        raise CannotStart(
            f"data dir {data_dir} is in use by another process{holder}: "
            f"stop it, or give {owner} a data dir of its own"
        ) from None
    os.ftruncate(fd, 0)
    os.write(fd, f"{os.getpid()}\n".encode())
    return DataDirLock(path, fd)


def _holder(fd: int) -> str:
    """`` (pid N)`` as the lock file names its owner, or ``""``."""
    with contextlib.suppress(OSError, ValueError):
        pid = int(os.pread(fd, 32, 0).decode().strip())
        return f" (pid {pid})"
    return ""


def check_listen_address(address: str, what: str) -> None:
    """Raise CannotStart naming ``address`` if something already listens there.

    A check ahead of the server's own bind, which fails too but only after the gRPC core logged
    lines of its own on stderr. SO_REUSEADDR as servers set it, so connections of an earlier
    process still in TIME_WAIT do not count as in use."""
    host, _, port = address.rpartition(":")
    host = host.strip("[]")
    try:
        infos = socket.getaddrinfo(host or None, int(port), type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except (OSError, ValueError):
        return  # unresolvable: the server's bind reports it
    for family, kind, proto, _, sockaddr in infos:
        with socket.socket(family, kind, proto) as probe:
            probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
            try:
                probe.bind(sockaddr)
            except OSError as exc:
                if exc.errno == errno.EADDRINUSE:
                    raise CannotStart(f"{what} address {address} is already in use") from None


def move_aside(data_dir: Path, names: Sequence[str], now_ms: int) -> Path | None:
    """Move the files or directories ``names`` of ``data_dir`` that exist into a new directory
    ``data_dir/damaged-<UTC time of now_ms>`` (nothing is deleted) and fsync; returns it, or None
    if none existed. The caller holds the data dir's lock."""
    present = [name for name in names if (data_dir / name).exists()]
    if not present:
        return None
    stamp = datetime.datetime.fromtimestamp(now_ms / 1000, datetime.UTC).strftime("%Y%m%dT%H%M%SZ")
    target = data_dir / f"damaged-{stamp}"
    n = 1
    while target.exists():
        n += 1
        target = data_dir / f"damaged-{stamp}-{n}"
    target.mkdir(mode=0o700)
    for name in present:
        os.rename(data_dir / name, target / name)
    for directory in (target, data_dir):
        fd = os.open(directory, os.O_RDONLY | os.O_DIRECTORY)
        try:
            os.fsync(fd)
        finally:
            os.close(fd)
    return target
