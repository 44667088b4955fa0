"""Full attempt logs on the executor (issue 29 part 2): one file per attempt and stream.

A command's stdout and stderr are written, as they come, to ``<data_dir>/logs/<id>.stdout`` and
``.stderr`` (``<id>`` is the execution id percent-encoded), besides the 8 KiB tails the agent
reports (those stay the replicated record). Nothing here reaches the replicated log: a reader
asks the leader, the leader asks this executor over its own dispatch stream, and the agent
streams the file back (:func:`answer_log_request`).

Bounds, configurable per executor (:class:`LogSettings`, keys ``logs_max_attempt``,
``logs_keep``, ``logs_max_total``):

* a file stops growing at ``max_attempt_bytes``: a marker line says so and the rest of that
  stream is counted, not kept (the process is not slowed or stopped);
* files older than ``keep_ms`` (by modification time) are deleted, and the oldest files are
  deleted while the total exceeds ``max_total_bytes``; files of attempts still running are never
  deleted. :func:`plan_prune` decides (pure: time and sizes are values); the agent calls
  :meth:`LogFiles.prune` every :data:`PRUNE_EVERY_S` (the first a period after start).

Reading (:func:`read_log`) goes in chunks of :data:`CHUNK` bytes: a file of any size streams in
constant memory.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import urllib.parse
from collections.abc import AsyncIterator, Callable, Container, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from raftsched.abc import LogUploader, TransportError
from raftsched.errors import InvalidSpec
from raftsched.timing.durations import parse_duration_ms
from raftsched.v1 import raftsched_pb2 as pb

# The agent's own logger, as batched.py: an executor's lines keep one name (log filters, and
# the tests that read an executor's log, match it).
log = logging.getLogger("raftsched.executor.agent")

CHUNK: Final = 64 * 1024
"""Bytes per read and per message on the way to the reader."""
PRUNE_EVERY_S: Final = 60.0
FOLLOW_POLL_S: Final = 0.1
"""How often a followed file is checked for new bytes."""
STREAMS: Final = ("stdout", "stderr")

DEFAULT_MAX_ATTEMPT_BYTES: Final = 1024**3  # 1 GiB per attempt and stream
DEFAULT_KEEP: Final = "7d"
DEFAULT_MAX_TOTAL_BYTES: Final = 20 * 1024**3  # 20 GiB per executor
DEFAULT_MAX_FILES: Final = 100_000  # per executor: bounds the directory (and each prune's scan)


def _size(value: int | str, key: str) -> int:
    """Bytes from an int or a string such as ``"512MiB"``, ``"2GB"``, ``"1048576"``."""
    if isinstance(value, bool):
        raise InvalidSpec(key, f"{value!r} is not a size")
    if isinstance(value, int):
        n = value
    else:
        text = value.strip().replace(" ", "")
        units = {
            "kib": 1024,
            "mib": 1024**2,
            "gib": 1024**3,
            "tib": 1024**4,
            "kb": 1000,
            "mb": 1000**2,
            "gb": 1000**3,
            "tb": 1000**4,
            "b": 1,
        }
        factor = 1
        for suffix, f in units.items():
            if text.lower().endswith(suffix):
                text, factor = text[: -len(suffix)], f
                break
        if not text.isdigit():
            raise InvalidSpec(key, f"{value!r} is not a size (bytes, or a number with KiB/MiB/GiB/TiB)")
        n = int(text) * factor
    if not 1024 <= n <= 1024**5:
        raise InvalidSpec(key, f"{value!r} out of range (1 KiB to 1 PiB)")
    return n


@dataclass(frozen=True)
class LogSettings:
    """An executor's log bounds (see the module docstring); :meth:`build` validates."""

    max_attempt_bytes: int = DEFAULT_MAX_ATTEMPT_BYTES
    keep_ms: int = 7 * 24 * 3600 * 1000
    max_total_bytes: int = DEFAULT_MAX_TOTAL_BYTES
    max_files: int = DEFAULT_MAX_FILES

    @classmethod
    def build(
        cls,
        max_attempt: int | str = DEFAULT_MAX_ATTEMPT_BYTES,
        keep: str | float = DEFAULT_KEEP,
        max_total: int | str = DEFAULT_MAX_TOTAL_BYTES,
        max_files: int = DEFAULT_MAX_FILES,
    ) -> LogSettings:
        """Raises :class:`InvalidSpec` naming the key (``logs_max_attempt``, ``logs_keep``,
        ``logs_max_total``, ``logs_max_files``) of a value out of range."""
        if isinstance(max_files, bool) or not isinstance(max_files, int) or not 1 <= max_files <= 10**9:
            raise InvalidSpec("logs_max_files", f"{max_files!r} out of range (1 to 1,000,000,000)")
        if isinstance(keep, str):
            keep_ms = parse_duration_ms(keep, "logs_keep")
        elif isinstance(keep, bool) or not isinstance(keep, int | float):
            raise InvalidSpec("logs_keep", f"{keep!r} is not a duration")
        else:
            keep_ms = round(keep * 1000)
        if not 1000 <= keep_ms <= 10 * 366 * 24 * 3600 * 1000:
            raise InvalidSpec("logs_keep", f"{keep!r} out of range (1 s to 10 years)")
        return cls(
            _size(max_attempt, "logs_max_attempt"), keep_ms, _size(max_total, "logs_max_total"), max_files
        )


@dataclass(frozen=True)
class LogFile:
    """One file as :func:`plan_prune` sees it."""

    name: str
    size: int
    mtime_ms: int


def plan_prune(
    files: Iterable[LogFile],
    now_ms: int,
    keep_ms: int,
    max_total_bytes: int,
    active: Iterable[str] = (),
    max_files: int | None = None,
) -> list[str]:
    """The names to delete: every file older than ``keep_ms`` at ``now_ms``, then the oldest
    (by mtime, then name) while the rest exceed ``max_total_bytes`` or number more than
    ``max_files``. Names in ``active`` (files of running attempts) are never chosen, even if
    that leaves the rest above a bound. Pure."""
    keep_active = set(active)
    doomed: list[str] = []
    kept: list[LogFile] = []
    for f in sorted(files, key=lambda f: (f.mtime_ms, f.name)):
        if f.name in keep_active:
            kept.append(f)
        elif now_ms - f.mtime_ms > keep_ms:
            doomed.append(f.name)
        else:
            kept.append(f)
    total = sum(f.size for f in kept)
    count = len(kept)
    for f in kept:
        if total <= max_total_bytes and (max_files is None or count <= max_files):
            break
        if f.name in keep_active:
            continue
        doomed.append(f.name)
        total -= f.size
        count -= 1
    return doomed


def file_name(execution_id: str, stream: str) -> str:
    """``<execution id, percent-encoded>.<stream>``: one flat directory, no path tricks."""
    if stream not in STREAMS:
        raise ValueError(f"stream must be one of {STREAMS}, got {stream!r}")
    return f"{urllib.parse.quote(execution_id, safe='')}.{stream}"


class CappedWriter:
    """Appends one stream of one attempt to its file, up to ``cap`` bytes; then writes a marker
    line once and counts what it drops. The file is created on the first write: a stream that
    stays empty leaves no file. Writes are plain ``os.write`` calls (page cache): small next to
    the pipe reads that feed them. A write that fails (a full disk) stops the keeping of this
    log, never the attempt."""

    def __init__(self, path: Path, cap: int) -> None:
        self.path = path
        self.cap = cap
        self.written = 0
        self.dropped = 0
        self._fd: int | None = None
        self._closed = False

    def write(self, data: bytes) -> None:
        if self._closed or not data:
            return
        if self._fd is None:
            try:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                self._fd = os.open(self.path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC | os.O_APPEND, 0o600)
            except OSError:
                self._closed = True
                return
        room = self.cap - self.written
        if room <= 0:
            self.dropped += len(data)
            return
        part = data[:room]
        try:
            os.write(self._fd, part)
        except OSError:  # a full disk must not fail the attempt: stop keeping its log
            self.close()
            return
        self.written += len(part)
        if len(part) < len(data):
            self.dropped += len(data) - len(part)
            marker = f"\n\u2026[raftsched: log capped at {self.cap} bytes; the rest is not kept]\n"
            with contextlib.suppress(OSError):
                os.write(self._fd, marker.encode())

    def close(self) -> None:
        self._closed = True
        if self._fd is not None:
            fd, self._fd = self._fd, None
            os.close(fd)


class LogFiles:
    """The executor's log directory. Not thread-safe: used on the agent's event loop."""

    def __init__(self, directory: str | Path, settings: LogSettings | None = None) -> None:
        self.dir = Path(directory)
        self.settings = settings or LogSettings()

    def path(self, execution_id: str, stream: str) -> Path:
        return self.dir / file_name(execution_id, stream)

    def writer(self, execution_id: str, stream: str) -> CappedWriter:
        """A writer for a new attempt's stream (its file appears with the first byte)."""
        return CappedWriter(self.path(execution_id, stream), self.settings.max_attempt_bytes)

    def scan(self) -> list[LogFile]:
        out: list[LogFile] = []
        try:
            entries = list(os.scandir(self.dir))
        except FileNotFoundError:
            return out
        for e in entries:
            with contextlib.suppress(OSError):
                st = e.stat()
                out.append(LogFile(e.name, st.st_size, st.st_mtime_ns // 1_000_000))
        return out

    def prune(self, now_ms: int, active_ids: Sequence[str]) -> list[str]:
        """Delete what :func:`plan_prune` chooses; returns the names deleted."""
        active = [file_name(i, s) for i in active_ids for s in STREAMS]
        s = self.settings
        doomed = plan_prune(self.scan(), now_ms, s.keep_ms, s.max_total_bytes, active, s.max_files)
        for name in doomed:
            with contextlib.suppress(FileNotFoundError):
                (self.dir / name).unlink()
        return doomed


async def read_log(
    path: Path,
    *,
    since_line: int = 0,
    tail_bytes: int = 0,
    follow: bool = False,
    running: Callable[[], bool] = lambda: False,
    chunk: int = CHUNK,
    poll_s: float = FOLLOW_POLL_S,
) -> AsyncIterator[bytes]:
    """The file's bytes from line ``since_line`` (1-based; 0 or 1: all), ``chunk`` at a time;
    with ``tail_bytes``, only the last that many bytes, from the first line that starts in them
    (then ``since_line`` counts from there).

    With ``follow``, keeps reading while ``running()`` says the attempt runs, and ends once it
    does not and the file is read to its end. Raises ``FileNotFoundError`` if there is no file.
    """
    skip = max(0, since_line - 1)  # newlines still to pass
    f = open(path, "rb")  # noqa: SIM115 - closed in the finally below, across awaits
    try:
        size = os.fstat(f.fileno()).st_size
        if 0 < tail_bytes < size:
            f.seek(size - tail_bytes - 1)
            skip += 1  # drop the partial line (the byte before the tail tells if it is one)
        while True:
            was_running = follow and running()
            data = await asyncio.to_thread(f.read, chunk)
            if data:
                if skip:
                    start = 0
                    while skip and start <= len(data):
                        nl = data.find(b"\n", start)
                        if nl < 0:
                            start = len(data) + 1
                            break
                        skip -= 1
                        start = nl + 1
                    if skip:
                        continue
                    data = data[start:]
                    if not data:
                        continue
                yield data
                continue
            if not was_running:
                return
            await asyncio.sleep(poll_s)
    finally:
        f.close()


async def prune_log_files(
    files: LogFiles, now_ms: Callable[[], int], running: Callable[[], Sequence[str]], name: str
) -> None:
    """Apply ``files``' retention (age, size, count) every :data:`PRUNE_EVERY_S`, in a worker
    thread, sparing the logs of the attempts ``running()`` names (``name``: the executor's, for
    its log lines). Runs until cancelled."""
    while True:
        await asyncio.sleep(PRUNE_EVERY_S)
        try:
            deleted = await asyncio.to_thread(files.prune, now_ms(), running())
            if deleted:
                log.info("%s: log retention deleted %d file(s)", name, len(deleted))
        except Exception:
            log.exception("%s: log retention failed", name)


async def answer_log_request(
    transport: object,
    leader: str,
    executor: str,
    files: LogFiles,
    req: pb.LogRequest,
    running_ids: Container[str],
) -> None:
    """Answer one log request of executor ``executor``: dial SendLogs at ``leader`` and stream
    the file (``running_ids``: the attempts running now, a live view). Nothing is sent unless
    ``transport`` is a :class:`~raftsched.abc.LogUploader`. Never raises: a reader that went away
    or a broken connection ends the answer; the reader's side reports it."""
    if not isinstance(transport, LogUploader):
        return
    stream = "stderr" if req.stderr else "stdout"
    path = files.path(req.execution_id, stream) if req.execution_id else None

    def running() -> bool:
        return req.execution_id in running_ids

    ended = False  # the end was sent: the reader had the whole answer

    async def parts() -> Any:
        nonlocal ended
        header = pb.LogUploadHeader(request_id=req.request_id, executor=executor, running=running())
        exists = path is not None and path.exists()
        # A running attempt's file appears with its first byte of output: until then its log
        # is empty (followed: wait for the file), not missing.
        if path is None or (not exists and not header.running):
            header.found = False
            header.problem = (
                f"executor {executor} has no {stream} log for {req.execution_id} (it wrote nothing "
                f"to {stream}, its file was deleted by the log retention, it did not run here, or it "
                "ran a handler, whose output is not kept)"
            )
            yield pb.LogUpload(header=header)
            ended = True
            yield pb.LogUpload(end=pb.LogEnd(complete=False))
            return
        header.found = True
        yield pb.LogUpload(header=header)
        while not path.exists() and req.follow and running():
            await asyncio.sleep(FOLLOW_POLL_S)
        if not path.exists():
            ended = True
            yield pb.LogUpload(end=pb.LogEnd(bytes=0, complete=True))
            return
        sent = 0
        async for data in read_log(
            path, since_line=req.since_line, tail_bytes=req.tail_bytes, follow=req.follow, running=running
        ):
            sent += len(data)
            yield pb.LogUpload(data=data)
        capped = path.stat().st_size >= files.settings.max_attempt_bytes
        ended = True
        yield pb.LogUpload(end=pb.LogEnd(bytes=sent, capped=capped, complete=True))

    gen = parts()
    try:
        await transport.send_logs(leader, gen)
        if not ended:
            log.info("%s: log answer for %s ended: the reader went away", executor, req.execution_id)
    except TransportError as exc:
        log.info("%s: log answer for %s ended: %s", executor, req.execution_id, exc)
    except OSError as exc:
        log.warning("%s: cannot read the log of %s: %s", executor, req.execution_id, exc)
    finally:
        with contextlib.suppress(RuntimeError):  # still being closed by the transport
            await gen.aclose()  # the file is closed now, not when the generator is collected
