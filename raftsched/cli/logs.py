"""``raftsched logs RUN_ID``: an attempt's full output, streamed (issue 29 part 2).

Plain output is the log's bytes as they come (written to stdout unchanged, flushed per chunk so
``--follow`` shows lines as they appear). ``--json`` prints one JSON object per line of output
(NDJSON): first ``{"header": {...}}``, then ``{"line": N, "text": "..."}`` per line (N counts
from ``--since-line``, or 1; the text without its newline, decoded as UTF-8 with replacement; a
line longer than 1 MiB comes in pieces with ``"partial": true`` on all but the last), then
``{"end": {...}}``. When the full log is not available (the executor is gone, its file aged
out), a note on stderr says why and the stored tail (at most 8 KiB) is printed instead.
``--tails`` prints the stored tails of every shard, both streams (what ``logs`` printed before
full logs existed). Memory stays bounded whatever the size of the log.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from raftsched.cli.cluster import connect
from raftsched.cli.errors import UsageError
from raftsched.cli.render import to_dict
from raftsched.display import enum_name
from raftsched.v1 import raftsched_pb2 as pb

__all__ = ["cmd_logs"]

MAX_LINE_BYTES = 1024 * 1024
"""``--json``: a line longer than this is printed in pieces (the client's buffer stays bounded)."""


def cmd_logs(args: argparse.Namespace) -> int:
    if args.tails:
        return _tails(args)
    out = sys.stdout.buffer
    lines = _JsonLines(max(1, args.since_line)) if args.json else None
    with connect(args) as client:
        chunks = client.logs(
            args.run_id,
            shard=args.shard or 0,
            attempt=args.attempt,
            stderr=args.stderr,
            follow=args.follow,
            since_line=args.since_line,
            tail_bytes=args.tail,
        )
        try:
            for chunk in chunks:
                part = chunk.WhichOneof("part")
                if part == "header":
                    header = chunk.header
                    if header.source != "executor":
                        sys.stdout.flush()
                        print(f"raftsched: {header.note}", file=sys.stderr)
                    if lines is not None:
                        _emit({"header": to_dict(header)})
                elif part == "data":
                    if lines is not None:
                        lines.feed(chunk.data)
                    else:
                        out.write(chunk.data)
                        if args.follow:
                            out.flush()
                elif part == "end" and lines is not None:
                    lines.close()
                    _emit({"end": to_dict(chunk.end)})
        finally:
            close = getattr(chunks, "close", None)
            if close is not None:
                close()
    out.flush()
    return 0


def _emit(obj: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(obj, ensure_ascii=False) + "\n")
    sys.stdout.flush()


class _JsonLines:
    """Splits the byte stream into lines for ``--json``, holding at most one partial line."""

    def __init__(self, first: int) -> None:
        self.number = first
        self.carry = bytearray()

    def feed(self, data: bytes) -> None:
        start = 0
        while True:
            nl = data.find(b"\n", start)
            if nl < 0:
                self.carry += data[start:]
                while len(self.carry) > MAX_LINE_BYTES:
                    piece = bytes(self.carry[:MAX_LINE_BYTES])
                    del self.carry[:MAX_LINE_BYTES]
                    _emit({"line": self.number, "text": piece.decode("utf-8", "replace"), "partial": True})
                return
            self.carry += data[start:nl]
            self._line()
            start = nl + 1

    def _line(self) -> None:
        _emit({"line": self.number, "text": bytes(self.carry).decode("utf-8", "replace")})
        self.carry.clear()
        self.number += 1

    def close(self) -> None:
        if self.carry:
            self._line()


def _tails(args: argparse.Namespace) -> int:
    with connect(args) as client:
        run = client.get_run(args.run_id)
    shards = [s for s in run.shards if args.shard is None or s.shard == args.shard]
    if not shards:
        raise UsageError(f"run {run.run_id} has no shard {args.shard} (it has {len(run.shards)})")
    if args.json:
        for s in shards:
            _emit(
                {
                    "shard": s.shard,
                    "attempt": s.attempt,
                    "stdout_tail": s.stdout_tail,
                    "stderr_tail": s.stderr_tail,
                }
            )
        return 0
    for s in shards:
        print(f"== shard {s.shard} attempt {s.attempt} ({enum_name(pb.RunState, s.state)}) ==")
        for name, tail in (("stdout", s.stdout_tail), ("stderr", s.stderr_tail)):
            print(f"-- {name} --")
            if tail:
                print(tail, end="" if tail.endswith("\n") else "\n")
    return 0
