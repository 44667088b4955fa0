"""The execution log's entries and records: their types, and how each is encoded and read back.

:class:`raftsched.executor.dedupe.DedupeLog` keeps the rules (what runs once, what is pending,
what is pruned); this module only turns an entry or a batch record into bytes and back, naming
the key whenever something is damaged (``ValueError``) or written by a newer release
(:class:`NewerFormat`).

Entry encoding (format 2, binary, written since the executor hot-path work of issue 31): a
version byte 2, a state byte (``R`` running, ``D`` done), and for a done entry a fixed
little-endian header (flags: success, timed out, has an exit code; exit code; duration; the
UTF-8 lengths of error, stdout tail and stderr tail) followed by those three texts. The key is
the execution id, so the entry does not repeat it. Format 1 entries (JSON objects with ``"v": 1``,
written by earlier releases) are still read, so an upgraded executor opens its old log and
recovers it; entries are never rewritten in place, they age out by the retention. An older
release cannot read format 2 entries: it refuses the log as damaged (downgrade needs a new data
dir once the executor has run on this release).

Batch records (format 3, ``DedupeLog(batched=True)``): keys start with ``\x01``
(:data:`RECORD_PREFIX`: no execution id may hold it), then ``b`` or ``f`` and a hexadecimal
counter; values start with the version byte 3 and a kind byte. A begin record: header, then the
ids joined by NUL. A finish record: header, the ids joined by NUL, then the columns (flags, exit
code, duration and the three text lengths of each row) and the texts. Before its first record a
batched log gets a marker entry (:data:`MARKER_KEY`, ``\x01format``, never settled): an older
release reads unsettled entries at open and refuses the log as "written by a newer release" on
it.
"""

from __future__ import annotations

import json
import struct
from enum import StrEnum
from typing import NamedTuple

from raftsched.executor.runners import AttemptResult

FORMAT_VERSION = 2  # the binary encoding (module docstring); 1 is the JSON one, still read
JSON_VERSION = 1


class BeginStatus(StrEnum):
    """What :meth:`DedupeLog.begin` found."""

    NEW = "new"  # recorded as running now: run the attempt, then finish() it
    RUNNING = "running"  # already running (here, or interrupted until recover()): do not run again
    DONE = "done"  # already finished: do not run again; report the stored result again


class ExecutionState(StrEnum):
    RUNNING = "running"
    DONE = "done"


class BeginOutcome(NamedTuple):
    """``status``, and for ``DONE`` the stored ``result`` (None otherwise)."""

    status: BeginStatus
    result: AttemptResult | None = None


class ExecutionRecord(NamedTuple):
    """One entry of the log. ``result`` is set when ``state`` is DONE; ``acknowledged`` means the
    cluster has committed the report (only a DONE entry can be acknowledged)."""

    execution_id: str
    state: ExecutionState
    result: AttemptResult | None = None
    acknowledged: bool = False


# Format 2 (module docstring): version, state, flags, exit code, duration, three text lengths.
_BINARY = FORMAT_VERSION
RUNNING_RAW = bytes((_BINARY, ord("R")))
_DONE = struct.Struct("<BBBqqIII")
_DONE_STATE = ord("D")
_SUCCESS, _TIMED_OUT, _HAS_EXIT = 1, 2, 4
_JSON_START = ord("{")


def _text(value: str) -> bytes:
    return value.encode("utf-8", "surrogatepass") if value else b""


def encode_done(result: AttemptResult) -> bytes:
    """A done entry, format 2; ``ValueError`` naming the id for a result it cannot hold."""
    try:
        error, out, err = _text(result.error), _text(result.stdout_tail), _text(result.stderr_tail)
        exit_code = result.exit_code
        flags = (
            (_SUCCESS if result.success else 0)
            | (_TIMED_OUT if result.timed_out else 0)
            | (0 if exit_code is None else _HAS_EXIT)
        )
        head = _DONE.pack(
            _BINARY, _DONE_STATE, flags, exit_code or 0, result.duration_ms, len(error), len(out), len(err)
        )
    except (struct.error, TypeError, AttributeError, UnicodeError) as exc:
        raise ValueError(f"result of {result.execution_id!r} cannot be recorded: {exc}") from None
    return b"".join((head, error, out, err)) if error or out or err else head


def encode(record: ExecutionRecord) -> bytes:
    if record.result is None:
        return RUNNING_RAW
    return encode_done(record.result)


class NewerFormat(ValueError):
    """An entry written by a newer release: not damage (an upgrade reads it)."""


def _newer(where: str, version: int) -> NewerFormat:
    return NewerFormat(
        f"{where} has format version {version}, newer than this raftsched reads"
        f" ({FORMAT_VERSION}): it was written by a newer release; upgrade, or use a new data dir"
    )


def decode(execution_id: str, raw: bytes, settled: bool) -> ExecutionRecord:
    if not raw:
        raise ValueError(f"execution log entry {execution_id!r} is empty")
    version = raw[0]
    if version == _JSON_START:
        return _decode_v1(execution_id, raw, settled)
    if version != _BINARY:
        where = f"execution log entry {execution_id!r}"
        if _BINARY < version < _JSON_START:
            raise _newer(where, version)
        raise ValueError(f"{where} has an unknown encoding (first byte {version})")
    if raw == RUNNING_RAW:
        return ExecutionRecord(execution_id, ExecutionState.RUNNING, None, settled)
    where = f"execution log entry {execution_id!r}"
    if len(raw) < _DONE.size or raw[1] != _DONE_STATE:
        raise ValueError(f"{where} is truncated or has an unknown state")
    _, _, flags, exit_code, duration_ms, n_error, n_out, n_err = _DONE.unpack_from(raw)
    end_error = _DONE.size + n_error
    end_out = end_error + n_out
    if end_out + n_err != len(raw) or flags > 7:
        raise ValueError(f"{where} is malformed (its lengths do not add up)")
    try:
        result = AttemptResult(
            execution_id,
            bool(flags & _SUCCESS),
            exit_code if flags & _HAS_EXIT else None,
            raw[_DONE.size : end_error].decode("utf-8", "surrogatepass") if n_error else "",
            raw[end_error:end_out].decode("utf-8", "surrogatepass") if n_out else "",
            raw[end_out:].decode("utf-8", "surrogatepass") if n_err else "",
            duration_ms,
            bool(flags & _TIMED_OUT),
        )
    except UnicodeDecodeError as exc:
        raise ValueError(f"{where} holds text that is not UTF-8: {exc}") from None
    return ExecutionRecord(execution_id, ExecutionState.DONE, result, settled)


def _decode_v1(execution_id: str, raw: bytes, settled: bool) -> ExecutionRecord:
    where = f"execution log entry {execution_id!r}"
    try:
        data = json.loads(raw)
    except ValueError as exc:
        raise ValueError(f"{where} is not valid JSON: {exc}") from None
    if not isinstance(data, dict) or not isinstance(data.get("v"), int):
        raise ValueError(f"{where} has no format version")
    if data["v"] > JSON_VERSION:
        raise _newer(where, data["v"])
    try:
        state = ExecutionState(str(data.get("state")))
    except ValueError:
        raise ValueError(f"{where} has unknown state {data.get('state')!r}") from None
    result = None
    if state is ExecutionState.DONE:
        if not isinstance(data.get("result"), dict):
            raise ValueError(f"{where} is done but holds no result")
        result = AttemptResult.from_json_dict(data["result"])
    return ExecutionRecord(execution_id, state, result, acknowledged=settled)


# -- batch records (format 3; module docstring) --------------------------------------------------

BATCH_FORMAT = 3
RECORD_PREFIX = "\x01"
MARKER_KEY = RECORD_PREFIX + "format"
MARKER = bytes((BATCH_FORMAT, ord("M")))
BEGIN_KIND, FINISH_KIND = ord("B"), ord("F")
_HEAD = struct.Struct("<BBII")  # version, kind, rows, bytes of the ids
_MAX_ID = 511  # bytes, as the store's keys


def _check_ids(ids: list[str], blob: bytes) -> None:
    """``ValueError`` (nothing is recorded) for an id a batch record cannot hold."""
    if blob.count(b"\x00") != len(ids) - 1 or b"\x01" in blob or not all(ids):
        bad = next(i for i in ids if not i or "\x00" in i or "\x01" in i)
        raise ValueError(f"execution id {bad!r} cannot be recorded (empty, or holds NUL or \\x01)")
    if max(map(len, ids)) > _MAX_ID // 4:  # only then may an id exceed the limit in UTF-8
        for i in ids:
            n = len(i.encode("utf-8", "surrogatepass"))
            if n > _MAX_ID:
                raise ValueError(f"execution ids must be 1 to {_MAX_ID} UTF-8 bytes, got {n}")


def encode_begin(ids: list[str]) -> bytes:
    blob = "\x00".join(ids).encode("utf-8", "surrogatepass")
    _check_ids(ids, blob)
    return _HEAD.pack(BATCH_FORMAT, BEGIN_KIND, len(ids), len(blob)) + blob


def encode_finish(results: list[AttemptResult]) -> bytes:
    """A finish record; ``ValueError`` naming the id for a result it cannot hold."""
    n = len(results)
    ids = [r.execution_id for r in results]
    blob = "\x00".join(ids).encode("utf-8", "surrogatepass")
    _check_ids(ids, blob)
    flags: list[int] = []
    exits: list[int] = []
    durations: list[int] = []
    lengths: list[int] = []
    texts: list[bytes] = []
    try:
        for r in results:
            exit_code = r.exit_code
            flags.append(
                (_SUCCESS if r.success else 0)
                | (_TIMED_OUT if r.timed_out else 0)
                | (0 if exit_code is None else _HAS_EXIT)
            )
            exits.append(exit_code or 0)
            durations.append(r.duration_ms)
            if r.error or r.stdout_tail or r.stderr_tail:
                three = (_text(r.error), _text(r.stdout_tail), _text(r.stderr_tail))
                lengths.extend(len(t) for t in three)
                texts.extend(three)
            else:
                lengths.extend((0, 0, 0))
        columns = struct.pack(f"<{n}B{n}q{n}q{3 * n}I", *flags, *exits, *durations, *lengths)
    except (struct.error, TypeError, AttributeError, UnicodeError):
        for r in results:  # name the row that cannot be recorded
            encode_done(r)
        raise ValueError(f"results of {ids[:3]!r}... cannot be recorded") from None
    return b"".join((_HEAD.pack(BATCH_FORMAT, FINISH_KIND, n, len(blob)), blob, columns, *texts))


def record_head(key: str, raw: bytes) -> tuple[int, int, list[str]]:
    """A batch record's kind, rows and ids; ``NewerFormat`` or ``ValueError`` naming the key."""
    where = f"execution log record {key!r}"
    if not raw:
        raise ValueError(f"{where} is empty")
    if raw[0] != BATCH_FORMAT:
        if BATCH_FORMAT < raw[0] < _JSON_START:
            raise NewerFormat(
                f"{where} has format version {raw[0]}, newer than this raftsched reads"
                f" ({BATCH_FORMAT}): it was written by a newer release; upgrade, or use a new data dir"
            )
        raise ValueError(f"{where} has an unknown encoding (first byte {raw[0]})")
    if raw == MARKER:
        return ord("M"), 0, []
    if len(raw) < _HEAD.size:
        raise ValueError(f"{where} is truncated")
    _, kind, n, n_ids = _HEAD.unpack_from(raw)
    end = _HEAD.size + n_ids
    malformed = kind not in (BEGIN_KIND, FINISH_KIND) or end > len(raw) or n < 1
    if malformed or (kind == BEGIN_KIND and end != len(raw)):
        raise ValueError(f"{where} is malformed (unknown kind, or its lengths do not add up)")
    ids = raw[_HEAD.size : end].decode("utf-8", "surrogatepass").split("\x00")
    if len(ids) != n:
        raise ValueError(f"{where} is malformed (it names {len(ids)} ids for {n} rows)")
    return kind, n, ids


def decode_finish(key: str, raw: bytes) -> list[AttemptResult]:
    """The results of a finish record; ``ValueError`` naming the key if it is damaged."""
    kind, n, ids = record_head(key, raw)
    where = f"execution log record {key!r}"
    if kind != FINISH_KIND:
        raise ValueError(f"{where} is not a finish record")
    columns = struct.Struct(f"<{n}B{n}q{n}q{3 * n}I")
    start = _HEAD.size + _HEAD.unpack_from(raw)[3]
    if start + columns.size > len(raw):
        raise ValueError(f"{where} is truncated")
    values = columns.unpack_from(raw, start)
    flags, exits, durations, lengths = values[:n], values[n : 2 * n], values[2 * n : 3 * n], values[3 * n :]
    at = start + columns.size
    if at + sum(lengths) != len(raw) or max(flags) > 7:
        raise ValueError(f"{where} is malformed (its lengths do not add up)")
    out: list[AttemptResult] = []
    try:
        for i, execution_id in enumerate(ids):
            f = flags[i]
            texts = []
            for length in lengths[3 * i : 3 * i + 3]:
                texts.append(raw[at : at + length].decode("utf-8", "surrogatepass") if length else "")
                at += length
            out.append(
                AttemptResult(
                    execution_id,
                    bool(f & _SUCCESS),
                    exits[i] if f & _HAS_EXIT else None,
                    texts[0],
                    texts[1],
                    texts[2],
                    durations[i],
                    bool(f & _TIMED_OUT),
                )
            )
    except (UnicodeError, ValueError, TypeError) as exc:
        raise ValueError(f"{where} is malformed: {exc}") from None
    return out
