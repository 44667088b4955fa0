"""The Raft snapshot file: its format, its asynchronous writer, and the checks of pysyncobj's files.

The file is ``SNAPSHOT_MAGIC``, an 8-byte big-endian header length, a JSON header (pysyncobj's
``(last_applied_entry, prev_entry, cluster)``: entries as ``[command hex, index, term]``, the
cluster as a sorted list of addresses) and then the store image (an LMDB copy). Never pickle.

pysyncobj calls a custom serializer synchronously on its tick thread; :class:`SnapshotWriter`
only starts the copy there and writes the file on a thread of its own (pysyncobj's
``serializeChecker`` protocol): on the tick thread, a 1M-task copy (~1 s) stalled heartbeats past
the election timeout (bench/scale.py: 14 stalls, 4 elections per run).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import struct
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any, BinaryIO

from pysyncobj import SERIALIZER_STATE

from raftsched.consensus.applier import Applier
from raftsched.consensus.pysyncobj.transport import pickle_loads
from raftsched.errors import StoreDamaged

log = logging.getLogger(__name__)

SNAPSHOT_MAGIC = b"RSNAP1\n"

Entry = tuple[bytes, int, int]  # pysyncobj's log entry: (command bytes, index, term)


def encode_header(last: Entry, prev: Entry, cluster: list[str]) -> bytes:
    """The JSON header of a snapshot at ``last`` (the magic and length are written with it)."""
    return json.dumps(
        {
            "last": [last[0].hex(), last[1], last[2]],
            "prev": [prev[0].hex(), prev[1], prev[2]],
            "cluster": sorted(cluster),
        }
    ).encode()


def read_header(path: str) -> tuple[Entry, Entry, list[str], int]:
    """``(last, prev, cluster addresses, offset of the store image)`` of the snapshot at ``path``."""
    with open(path, "rb") as f:
        magic = f.read(len(SNAPSHOT_MAGIC))
        if magic != SNAPSHOT_MAGIC:
            raise ValueError(f"{path}: not a raftsched snapshot")
        size = int.from_bytes(f.read(8), "big")
        header = json.loads(f.read(size))
        offset = f.tell()
    last = (bytes.fromhex(header["last"][0]), header["last"][1], header["last"][2])
    prev = (bytes.fromhex(header["prev"][0]), header["prev"][1], header["prev"][2])
    return last, prev, list(header["cluster"]), offset


class SnapshotWriter:
    """pysyncobj's serializer and serializeChecker for one node: copies the store to
    ``dump_file`` on a writer thread.

    ``write_snapshot(file)`` writes the store image at the current applied index. A snapshot
    installed from the leader meanwhile (:meth:`supersede`) makes a copy begun before it drop
    itself instead of replacing the installed file."""

    def __init__(
        self, node_id: str, dump_file: Path, applier: Applier, write_snapshot: Callable[[BinaryIO], None]
    ) -> None:
        self.node_id = node_id
        self._dump_file = dump_file
        self._applier = applier
        self._write_snapshot = write_snapshot
        # The writer thread, its outcome for the checker (None while it runs), and a generation
        # that an install bumps so a copy begun before the install never replaces the installed file.
        self._thread: threading.Thread | None = None
        self._outcome: int | None = None  # a SERIALIZER_STATE
        self._generation = 0

    def serialize(self, _tmp_path: str, data: tuple[Any, Any, Any]) -> None:
        """pysyncobj's serializer: ``data = (last_applied_entry, prev_entry, cluster)``.

        Runs on the tick thread, so it only starts the copy: with everything up to
        raftLastApplied applied and committed (quiesce), the applier is paused - the store then
        holds exactly the state at that index - and a writer thread copies it to a file of its
        own, fsyncs it and renames it onto the dump file. The tick thread goes on with heartbeats
        and commits meanwhile; only applying waits for the copy. ``tmp_path`` is deliberately
        not created: pysyncobj's rename of it fails, and :meth:`state` reports the
        outcome instead (pysyncobj truncates its log only after SUCCESS).
        """
        if self._thread is not None:
            return  # pysyncobj asks only when the checker says NOT_SERIALIZING; be safe anyway
        last, prev, cluster = data
        header = encode_header(last, prev, [str(n.address) for n in cluster])
        # Everything up to raftLastApplied is queued; apply and commit it so the copy is exact.
        if not self._applier.quiesce():
            log.warning("%s: applier did not drain in time; snapshot skipped", self.node_id)
            self._outcome = SERIALIZER_STATE.FAILED
            return
        self._applier.pause()
        self._outcome = None
        thread = threading.Thread(
            target=self._write_file,
            args=(header, int(last[1]), self._generation),
            name="raftsched-snapshot",
            daemon=True,
        )
        self._thread = thread
        thread.start()

    def _write_file(self, header: bytes, index: int, generation: int) -> None:
        started = time.monotonic()
        tmp = self._dump_file.with_name(self._dump_file.name + ".writing")
        outcome = SERIALIZER_STATE.FAILED
        try:
            try:
                with open(tmp, "wb") as f:
                    f.write(SNAPSHOT_MAGIC + len(header).to_bytes(8, "big") + header)
                    self._write_snapshot(f)
                    self._applier.resume()  # the copy is complete; fsync without holding applies
                    f.flush()
                    os.fsync(f.fileno())
                    size = f.tell()
            finally:
                self._applier.resume()
            if generation != self._generation:
                # A snapshot from the leader was installed meanwhile: it is newer than this copy.
                tmp.unlink(missing_ok=True)
                log.info("%s: snapshot at index %d dropped (an install superseded it)", self.node_id, index)
                return
            os.replace(tmp, self._dump_file)
            outcome = SERIALIZER_STATE.SUCCESS
            log.info(
                "%s: snapshot written at index %d: %d bytes in %.0f ms",
                self.node_id,
                index,
                size,
                (time.monotonic() - started) * 1000,
            )
        except Exception:
            log.exception("%s: writing the snapshot at index %d failed", self.node_id, index)
            with contextlib.suppress(OSError):
                tmp.unlink(missing_ok=True)
        finally:
            self._outcome = outcome

    def state(self) -> int:
        """pysyncobj's serializeChecker (tick thread): SERIALIZING while the writer runs, then
        its outcome exactly once, then NOT_SERIALIZING."""
        thread = self._thread
        if thread is None:
            outcome, self._outcome = self._outcome, None
            return int(SERIALIZER_STATE.NOT_SERIALIZING if outcome is None else outcome)
        if thread.is_alive() or self._outcome is None:
            return int(SERIALIZER_STATE.SERIALIZING)
        self._thread = None
        outcome, self._outcome = self._outcome, None
        return int(outcome)

    def supersede(self) -> None:
        """A snapshot from the leader is being installed: a copy of our own still being written
        must finish first (it pauses the applier) and must not replace it."""
        self._generation += 1
        self.join()

    def join(self, timeout: float = 120.0) -> None:
        thread = self._thread
        if thread is not None:
            thread.join(timeout)


_JOURNAL_HEADER = struct.Struct("<24s8sII")  # pysyncobj's: app name, version, format, end offset
_JOURNAL_RECORD = struct.Struct("<IQQ")  # a record: its size, then index and term
_LMDB_MAGIC_AT = 16  # an LMDB meta page: a 16-byte page header, then the magic
_LMDB_MAGIC = 0xBEEFC0DE


def check_raft_files(data_dir: Path) -> None:
    """Check the Raft journal, its meta file and the snapshot file in ``data_dir`` before
    pysyncobj reads them; raises :class:`StoreDamaged` naming the file and what is wrong.

    pysyncobj checks none of them: a damaged journal either raises deep inside its constructor
    or is read as entries that never were, a damaged meta file is silently replaced by term 0
    and no vote, and a damaged snapshot is logged with a traceback and skipped. The checks read
    the framing only (pysyncobj keeps no checksums): the journal's header, that every record's
    two length fields agree and fit, and that the indexes follow each other; the meta file
    decodes; the snapshot's header is ours and an LMDB copy follows it."""
    _check_journal(data_dir / "raft.journal")
    _check_journal_meta(data_dir / "raft.journal.meta")
    _check_dump(data_dir / "raft.dump")


def _check_journal(path: Path) -> None:
    if not path.exists():
        return
    data = path.read_bytes()

    def damaged(problem: str) -> StoreDamaged:
        return StoreDamaged(str(path), f"Raft journal: {problem}")

    if len(data) < _JOURNAL_HEADER.size:
        raise damaged(f"{len(data)} bytes, shorter than its header")
    name, _version, fmt, end = _JOURNAL_HEADER.unpack_from(data)
    if name.rstrip(b"\0") != b"PYSYNCOBJ" or fmt != 1:
        raise damaged("its header is not a pysyncobj journal's")
    if not _JOURNAL_HEADER.size <= end <= len(data):
        raise damaged(f"its end offset {end} lies outside the file ({len(data)} bytes)")
    offset, previous = _JOURNAL_HEADER.size, None
    while offset < end:
        if offset + _JOURNAL_RECORD.size > end:
            raise damaged(f"the record at byte {offset} is cut off")
        size, index, term = _JOURNAL_RECORD.unpack_from(data, offset)
        if size < 16 or offset + 8 + size > end:
            raise damaged(f"the record at byte {offset} claims an impossible size ({size} bytes)")
        if struct.unpack_from("<I", data, offset + 4 + size)[0] != size:
            raise damaged(f"the record at byte {offset}: its two length fields differ")
        if previous is not None and (index != previous[0] + 1 or term < previous[1]):
            raise damaged(
                f"the record at byte {offset} holds index {index} (term {term}) after index "
                f"{previous[0]} (term {previous[1]})"
            )
        previous = (index, term)
        offset += size + 8


def _check_journal_meta(path: Path) -> None:
    if not path.exists():
        return
    try:
        meta = pickle_loads(path.read_bytes())  # pysyncobj's own file, read as pysyncobj reads it
    except Exception as exc:
        raise StoreDamaged(str(path), f"Raft term and vote record does not decode: {exc}") from None
    if not isinstance(meta, dict):
        raise StoreDamaged(str(path), "Raft term and vote record does not decode")


def _check_dump(path: Path) -> None:
    if not path.exists():
        return
    with open(path, "rb") as f:
        magic = f.read(len(SNAPSHOT_MAGIC))
        size = int.from_bytes(f.read(8), "big")
        problem = ""
        if magic != SNAPSHOT_MAGIC:
            problem = "not a raftsched snapshot (its magic is gone)"
        elif not 0 < size <= 1 << 20:
            problem = f"its header claims {size} bytes"
        else:
            try:
                header = json.loads(f.read(size))
                missing = [key for key in ("last", "prev", "cluster") if key not in header]
                if missing:
                    raise KeyError(missing[0])
            except (ValueError, KeyError, TypeError) as exc:
                problem = f"its header does not decode: {exc!r}"
            else:
                page = f.read(_LMDB_MAGIC_AT + 4)
                if len(page) < _LMDB_MAGIC_AT + 4 or (
                    struct.unpack_from("=I", page, _LMDB_MAGIC_AT)[0] != _LMDB_MAGIC
                ):
                    problem = "no LMDB copy follows its header"
    if problem:
        raise StoreDamaged(str(path), f"Raft snapshot file: {problem}")
