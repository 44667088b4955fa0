"""Backup files: a consistent snapshot of the replicated state, with its log index, format and
checksum, written by ``raftsched backup FILE`` and restored by ``raftsched-node --restore FILE``.

File layout (backup format 1; every integer big-endian)::

    magic       17 bytes   b"RAFTSCHED-BACKUP\\n"
    header_len   4 bytes   length of the header
    header       header_len bytes: a BackupHeader message (raftsched.proto): backup format,
                           snapshot format, log index and term it covers, node, time, payload
                           length, entry count, apply chain, raftsched version
    payload      header.payload_bytes bytes: a Snapshot message (log.proto), the canonical image
                           every replica agrees on: every replicated key/value pair in key order
    end magic   14 bytes   b"RAFTSCHED-END\\n"
    sha256      32 bytes   sha256 over the header bytes, then the payload

Nothing may follow. A reader checks, in this order and each with a one-line reason: the magic,
the header, the backup format (newer: refused), the length (truncated: refused), the checksum
(corrupt: refused), the snapshot format (newer: refused).

The payload is the same encoding the state machine's ``snapshot()`` produces, so a backup can
also be read with nothing but the protobuf definitions.
"""

from __future__ import annotations

import hashlib
import os
import struct
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

from raftsched import __version__, codec
from raftsched.errors import InvalidBackup, SnapshotFormatError
from raftsched.fsm import keys
from raftsched.fsm.snapshot import check_snapshot_format
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb

__all__ = [
    "BACKUP_FORMAT",
    "CHUNK_BYTES",
    "Backup",
    "BackupSink",
    "backup_stream",
    "read_backup",
    "restored_entries",
]

BACKUP_FORMAT = 1
MAGIC = b"RAFTSCHED-BACKUP\n"
END_MAGIC = b"RAFTSCHED-END\n"
CHUNK_BYTES = 256 * 1024  # per stream message: well under gRPC's 4 MiB default
_MAX_HEADER = 64 * 1024


@dataclass(frozen=True, slots=True)
class Backup:
    """A verified backup: its header and its snapshot (format checked)."""

    header: pb.BackupHeader
    snapshot: logpb.Snapshot


def backup_stream(
    items: Iterable[tuple[bytes, bytes]], *, log_index: int, term: int, node_id: str, now_ms: int
) -> Iterator[pb.BackupChunk]:
    """The Backup RPC's messages for a consistent image ``items`` (key order) at ``log_index``:
    one header, the payload in chunks of :data:`CHUNK_BYTES`, then the checksum."""
    snap = logpb.Snapshot(format=codec.SNAPSHOT_FORMAT)
    chain = ""
    for key, value in items:
        snap.entries.add(key=key, value=value)
        if key == keys.META:
            chain = logpb.Meta.FromString(value).chain.hex()
    payload = snap.SerializeToString(deterministic=True)
    header = pb.BackupHeader(
        backup_format=BACKUP_FORMAT,
        snapshot_format=codec.SNAPSHOT_FORMAT,
        log_index=log_index,
        term=term,
        node_id=node_id,
        created_ms=now_ms,
        payload_bytes=len(payload),
        entries=len(snap.entries),
        chain=chain,
        build_version=__version__,
    )
    digest = hashlib.sha256(header.SerializeToString(deterministic=True))
    yield pb.BackupChunk(header=header)
    for at in range(0, len(payload), CHUNK_BYTES):
        piece = payload[at : at + CHUNK_BYTES]
        digest.update(piece)
        yield pb.BackupChunk(data=piece)
    yield pb.BackupChunk(sha256=digest.digest())


class BackupSink:
    """Writes a Backup stream to ``path`` atomically (a temporary file renamed on success).

    Feed every message to :meth:`add`, then call :meth:`finish`; a stream that is out of order,
    short, or whose checksum does not match what arrived raises :class:`InvalidBackup` and
    leaves no file at ``path``.
    """

    def __init__(self, path: Path) -> None:
        self.path = path
        self._tmp = path.with_name(f".{path.name}.partial")
        self._file: BinaryIO = open(self._tmp, "wb")  # noqa: SIM115 - closed by finish/abort
        self.header: pb.BackupHeader | None = None
        self._header_bytes = b""
        self._digest = hashlib.sha256()
        self._received = 0
        self._sha: bytes | None = None

    def add(self, chunk: pb.BackupChunk) -> None:
        part = chunk.WhichOneof("part")
        if part == "header":
            if self.header is not None:
                raise InvalidBackup("backup stream: a second header")
            self.header = chunk.header
            self._header_bytes = chunk.header.SerializeToString(deterministic=True)
            self._digest.update(self._header_bytes)
            self._file.write(MAGIC + struct.pack(">I", len(self._header_bytes)) + self._header_bytes)
        elif part == "data":
            if self.header is None or self._sha is not None:
                raise InvalidBackup("backup stream: data outside header and checksum")
            self._digest.update(chunk.data)
            self._received += len(chunk.data)
            self._file.write(chunk.data)
        elif part == "sha256":
            self._sha = chunk.sha256

    def finish(self) -> pb.BackupHeader:
        """Check what arrived, write the trailer, fsync and rename; return the header."""
        try:
            if self.header is None or self._sha is None:
                raise InvalidBackup("backup stream ended early (no header or no checksum): nothing written")
            if self._received != self.header.payload_bytes:
                raise InvalidBackup(
                    f"backup stream: {self._received} payload bytes received, "
                    f"{self.header.payload_bytes} announced: nothing written"
                )
            if self._digest.digest() != self._sha:
                raise InvalidBackup("backup stream: checksum mismatch in transit: nothing written")
            self._file.write(END_MAGIC + self._sha)
            self._file.flush()
            os.fsync(self._file.fileno())
            self._file.close()
            os.replace(self._tmp, self.path)
            return self.header
        except BaseException:
            self.abort()
            raise

    def abort(self) -> None:
        """Drop the partial file."""
        self._file.close()
        self._tmp.unlink(missing_ok=True)


def read_backup(path: Path) -> Backup:
    """Read and verify the backup at ``path``.

    Raises :class:`InvalidBackup` (one line: what is wrong with which file) for a file that is
    not a backup, truncated, corrupt, or of a newer format.
    """
    try:
        data = path.read_bytes()
    except OSError as exc:
        raise InvalidBackup(f"cannot read backup {path}: {exc.strerror or exc}") from None
    if not data.startswith(MAGIC):
        raise InvalidBackup(f"{path} is not a raftsched backup (no {MAGIC!r} at its start)")
    at = len(MAGIC)
    if len(data) < at + 4:
        raise InvalidBackup(f"backup {path} is truncated ({len(data)} bytes, inside its header)")
    (header_len,) = struct.unpack_from(">I", data, at)
    at += 4
    if header_len > _MAX_HEADER:
        raise InvalidBackup(f"backup {path} is corrupt (header length {header_len})")
    if len(data) < at + header_len:
        raise InvalidBackup(f"backup {path} is truncated ({len(data)} bytes, inside its header)")
    header_bytes = data[at : at + header_len]
    at += header_len
    header = pb.BackupHeader()
    try:
        header.ParseFromString(header_bytes)
    except Exception:
        raise InvalidBackup(f"backup {path} is corrupt (its header does not decode)") from None
    if header.backup_format > BACKUP_FORMAT:
        raise InvalidBackup(
            f"backup {path} has backup format {header.backup_format}, newer than this build reads "
            f"({BACKUP_FORMAT}): restore it with the raftsched version that made it "
            f"({header.build_version or 'unknown'}) or newer"
        )
    expected = at + header.payload_bytes + len(END_MAGIC) + 32
    if len(data) < expected:
        raise InvalidBackup(f"backup {path} is truncated ({len(data)} of {expected} bytes)")
    if len(data) > expected:
        raise InvalidBackup(f"backup {path} is corrupt ({len(data) - expected} bytes after its end)")
    payload = data[at : at + header.payload_bytes]
    at += header.payload_bytes
    if data[at : at + len(END_MAGIC)] != END_MAGIC:
        raise InvalidBackup(f"backup {path} is corrupt (no end marker after the payload)")
    stored = data[at + len(END_MAGIC) :]
    if hashlib.sha256(header_bytes + payload).digest() != stored:
        raise InvalidBackup(f"backup {path} is corrupt (sha256 checksum mismatch)")
    if header.snapshot_format > codec.SNAPSHOT_FORMAT:
        raise InvalidBackup(_newer_snapshot(path, header, header.snapshot_format))
    snap = logpb.Snapshot()
    try:
        snap.ParseFromString(payload)
    except Exception:
        raise InvalidBackup(f"backup {path} is corrupt (its snapshot does not decode)") from None
    try:
        check_snapshot_format(snap)
    except SnapshotFormatError as exc:
        raise InvalidBackup(f"backup {path}: {exc}") from None
    return Backup(header, snap)


def _newer_snapshot(path: Path, header: pb.BackupHeader, fmt: int) -> str:
    return (
        f"backup {path} holds snapshot format {fmt}, newer than this build reads "
        f"({codec.SNAPSHOT_FORMAT}): restore it with raftsched "
        f"{header.build_version or 'of that format'} or newer"
    )


def restored_entries(snap: logpb.Snapshot) -> list[tuple[bytes, bytes]]:
    """The key/value pairs a new cluster starts from, given a backup's snapshot.

    Everything is kept as it was (tasks, versions, watermarks, runs, workflows, executors,
    tokens, the leader-time high mark, the apply chain) except what belongs to the old cluster's
    machines: ``Meta.max_epoch`` (epochs are Raft terms of the cluster that made the backup, and
    the new cluster's terms start again at 1, so keeping it would refuse every command of the new
    leaders as stale) and the scheduler-node membership (the new cluster has its own nodes and
    addresses: its first leader seeds the membership from its config file, as in any new
    cluster). Every node of the new cluster restores the same file, so they all start from the
    same image.
    """
    out: list[tuple[bytes, bytes]] = []
    for entry in snap.entries:
        if entry.key.startswith(keys.MEMBERSHIP):
            continue
        value = entry.value
        if entry.key == keys.META:
            meta = logpb.Meta.FromString(value)
            meta.max_epoch = 0
            value = meta.SerializeToString(deterministic=True)
        out.append((entry.key, value))
    return out
