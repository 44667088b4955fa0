"""Backup files: the documented layout, the stream a node sends, and every refusal a restore
makes (not a backup, truncated, corrupt, newer format, a data dir that has state), each as one
clear line with exit status 2 from ``raftsched-node --restore``."""

from __future__ import annotations

import hashlib
import struct
from pathlib import Path

import pytest

from raftsched import codec
from raftsched.backup import (
    BACKUP_FORMAT,
    CHUNK_BYTES,
    END_MAGIC,
    MAGIC,
    BackupSink,
    backup_stream,
    read_backup,
    restored_entries,
)
from raftsched.cli import node as node_cli
from raftsched.errors import CannotStart, InvalidBackup
from raftsched.fsm import keys
from raftsched.fsm.state import SchedulerState
from raftsched.storage.lmdb_store import LmdbStore
from raftsched.storage.memory import MemoryStore
from raftsched.testing.cluster import write_config
from raftsched.v1 import log_pb2 as logpb
from raftsched.v1 import raftsched_pb2 as pb

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "snapshot_format1.bin"


def fixture_state() -> SchedulerState:
    state = SchedulerState.load(MemoryStore())
    state.restore(FIXTURE.read_bytes(), applied_index=0)
    return state


def write_by_hand(path: Path, header: pb.BackupHeader, payload: bytes) -> None:
    """The layout as the module docstring and docs/guide/backup.md document it, written independently."""
    head = header.SerializeToString()
    trailer = END_MAGIC + hashlib.sha256(head + payload).digest()
    path.write_bytes(MAGIC + struct.pack(">I", len(head)) + head + payload + trailer)


def stream_to_file(path: Path, state: SchedulerState, index: int = 42) -> pb.BackupHeader:
    sink = BackupSink(path)
    for chunk in backup_stream(state.replicated_items(), log_index=index, term=5, node_id="n2", now_ms=7):
        sink.add(chunk)
    return sink.finish()


def test_a_streamed_backup_reads_back_as_the_same_canonical_image(tmp_path: Path) -> None:
    state = fixture_state()
    path = tmp_path / "b.rsb"
    header = stream_to_file(path, state)
    assert (header.log_index, header.term, header.node_id, header.backup_format) == (42, 5, "n2", 1)
    assert header.chain == state.chain.hex() and header.entries == len(list(state.replicated_items()))
    backup = read_backup(path)
    assert backup.header == header
    restored = SchedulerState.load(MemoryStore())
    restored.restore(backup.snapshot.SerializeToString(deterministic=True), applied_index=0)
    assert restored.digest() == state.digest()
    assert not list(tmp_path.glob(".*partial")), "no temporary file is left"


def test_a_big_image_streams_in_chunks(tmp_path: Path) -> None:
    items = [(b"t/" + f"{i:06d}".encode(), b"x" * 1000) for i in range(600)]
    chunks = list(backup_stream(items, log_index=1, term=1, node_id="n1", now_ms=0))
    assert chunks[0].WhichOneof("part") == "header" and chunks[-1].WhichOneof("part") == "sha256"
    data = [c.data for c in chunks[1:-1]]
    assert len(data) > 1 and all(len(d) <= CHUNK_BYTES for d in data)
    sink = BackupSink(tmp_path / "big")
    for c in chunks:
        sink.add(c)
    sink.finish()
    assert len(read_backup(tmp_path / "big").snapshot.entries) == 600


def test_a_stream_damaged_in_transit_leaves_no_file(tmp_path: Path) -> None:
    chunks = list(
        backup_stream(fixture_state().replicated_items(), log_index=1, term=1, node_id="n1", now_ms=0)
    )
    bad = list(chunks)
    bad[1] = pb.BackupChunk(data=bytes([chunks[1].data[0] ^ 1]) + chunks[1].data[1:])
    sink = BackupSink(tmp_path / "x")
    for c in bad:
        sink.add(c)
    with pytest.raises(InvalidBackup, match="checksum mismatch in transit"):
        sink.finish()
    short = BackupSink(tmp_path / "y")
    for c in chunks[:-2]:
        short.add(c)
    with pytest.raises(InvalidBackup, match="ended early"):
        short.finish()
    assert list(tmp_path.iterdir()) == []


def test_the_format_1_fixture_in_a_hand_written_file_restores(tmp_path: Path) -> None:
    payload = FIXTURE.read_bytes()
    header = pb.BackupHeader(backup_format=1, snapshot_format=1, log_index=9, payload_bytes=len(payload))
    write_by_hand(tmp_path / "old.rsb", header, payload)
    backup = read_backup(tmp_path / "old.rsb")
    assert backup.snapshot.format == 1 and len(backup.snapshot.entries) == 27


def _refusal(path: Path) -> str:
    with pytest.raises(InvalidBackup) as info:
        read_backup(path)
    return str(info.value)


def test_every_damaged_or_newer_file_is_refused_with_a_clear_reason(tmp_path: Path) -> None:
    good = tmp_path / "good.rsb"
    stream_to_file(good, fixture_state())
    raw = good.read_bytes()
    cases = {
        "not a raftsched backup": b"PK\x03\x04" + raw[4:],
        "is truncated (": raw[: len(raw) // 2],
        "truncated (20 bytes, inside its header)": raw[:20],
        "sha256 checksum mismatch": raw[:-100] + bytes([raw[-100] ^ 0x40]) + raw[-99:],
        "bytes after its end": raw + b"\n",
    }
    for expected, data in cases.items():
        path = tmp_path / "case.rsb"
        path.write_bytes(data)
        message = _refusal(path)
        assert expected in message, (expected, message)
        assert "\n" not in message
    assert "cannot read backup" in _refusal(tmp_path / "missing.rsb")

    payload = FIXTURE.read_bytes()
    newer_file = pb.BackupHeader(
        backup_format=BACKUP_FORMAT + 1, snapshot_format=1, payload_bytes=len(payload), build_version="9.0"
    )
    write_by_hand(tmp_path / "newer.rsb", newer_file, payload)
    assert "backup format 2, newer than this build reads (1)" in _refusal(tmp_path / "newer.rsb")
    assert "raftsched version that made it (9.0)" in _refusal(tmp_path / "newer.rsb")
    newer_snap = pb.BackupHeader(
        backup_format=1, snapshot_format=codec.SNAPSHOT_FORMAT + 1, payload_bytes=len(payload)
    )
    write_by_hand(tmp_path / "newer-snap.rsb", newer_snap, payload)
    fmt = codec.SNAPSHOT_FORMAT
    expected = f"snapshot format {fmt + 1}, newer than this build reads ({fmt})"
    assert expected in _refusal(tmp_path / "newer-snap.rsb")
    # The snapshot inside says it is newer although the header does not: refused too.
    inner = logpb.Snapshot.FromString(payload)
    inner.format = codec.SNAPSHOT_FORMAT + 1
    body = inner.SerializeToString()
    write_by_hand(tmp_path / "inner.rsb", pb.BackupHeader(backup_format=1, payload_bytes=len(body)), body)
    assert "newer than this build reads" in _refusal(tmp_path / "inner.rsb")


def test_restored_entries_keep_everything_but_the_old_clusters_epoch_and_nodes() -> None:
    state = fixture_state()
    snap = logpb.Snapshot.FromString(state.snapshot())
    snap.entries.add(key=keys.MEMBERSHIP_KEY, value=b"the old cluster's nodes")
    entries = dict(restored_entries(snap))
    assert keys.MEMBERSHIP_KEY not in entries
    original = dict(state.replicated_items())
    assert entries.keys() == original.keys()
    assert {k: v for k, v in entries.items() if k != keys.META} == {
        k: v for k, v in original.items() if k != keys.META
    }
    meta, before = logpb.Meta.FromString(entries[keys.META]), logpb.Meta.FromString(original[keys.META])
    assert (meta.max_epoch, before.max_epoch) == (0, 3)
    assert (meta.max_leader_now_ms, meta.chain, meta.applied_commands) == (
        before.max_leader_now_ms,
        before.chain,
        before.applied_commands,
    )


def test_restore_loads_an_empty_data_dir_and_refuses_one_with_state(tmp_path: Path) -> None:
    state = fixture_state()
    backup = tmp_path / "b.rsb"
    stream_to_file(backup, state)
    data = tmp_path / "n1"
    data.mkdir()
    (data / "raftsched.lock").write_text("1\n")  # the node's own lock is no state
    node_cli.restore_backup(backup, data, 64 << 20)
    with LmdbStore(data, map_size=64 << 20) as store:
        assert store.applied_index() == 0, "the new cluster's log starts at its beginning"
        restored = SchedulerState.load(store)
        assert sorted(restored.tasks) == sorted(state.tasks)
        assert restored.max_epoch == 0 and restored.max_now_ms == state.max_now_ms
    with pytest.raises(CannotStart, match="already has state"):
        node_cli.restore_backup(backup, data, 64 << 20)


def test_node_restore_failures_are_one_line_with_exit_status_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = write_config(tmp_path / "cluster.toml", 3)
    bad = tmp_path / "bad.rsb"
    bad.write_bytes(MAGIC + b"\x00\x00")
    code = node_cli.node_main(
        ["--config", str(tmp_path / "cluster.toml"), "--node-id", "n1", "--restore", str(bad)]
    )
    err = capsys.readouterr().err
    assert code == 2
    assert err.startswith("raftsched-node: error: backup ") and "truncated" in err and err.count("\n") == 1
    assert not (config.node("n1").data_dir / "state").exists()
