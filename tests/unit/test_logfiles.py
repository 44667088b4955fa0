"""Full logs on the executor (raftsched.executor.logfiles): retention decided by a pure function
over injected times and sizes, the per-attempt cap, line skipping and following, settings."""

from __future__ import annotations

import asyncio
import os
from pathlib import Path

import pytest

from raftsched.errors import InvalidSpec
from raftsched.executor.logfiles import (
    CappedWriter,
    LogFile,
    LogFiles,
    LogSettings,
    file_name,
    plan_prune,
    read_log,
)

DAY = 24 * 3600 * 1000


def test_prune_by_age_deletes_only_files_older_than_keep() -> None:
    files = [LogFile("old", 10, 0), LogFile("edge", 10, 1000), LogFile("new", 10, 5000)]
    # keep 4000 ms at now 5000: "old" is 5000 old (deleted), "edge" exactly 4000 (kept).
    assert plan_prune(files, 5000, 4000, 10**9) == ["old"]
    assert plan_prune(files, 5000, 10_000, 10**9) == []


def test_prune_by_size_deletes_the_oldest_until_the_total_fits() -> None:
    files = [LogFile("c", 300, 30), LogFile("a", 300, 10), LogFile("b", 300, 20)]
    assert plan_prune(files, 100, DAY, 600) == ["a"]
    assert plan_prune(files, 100, DAY, 299) == ["a", "b", "c"]
    assert plan_prune(files, 100, DAY, 900) == []
    # Same mtime: by name, so the choice is deterministic.
    same = [LogFile("y", 10, 5), LogFile("x", 10, 5)]
    assert plan_prune(same, 5, DAY, 10) == ["x"]


def test_prune_never_deletes_files_of_running_attempts() -> None:
    files = [LogFile("running", 500, 0), LogFile("done", 100, 1)]
    # Old and over the size bound, but running: only the other one goes.
    assert plan_prune(files, 10 * DAY, DAY, 50, active={"running"}) == ["done"]
    assert plan_prune(files, 2, DAY, 50, active={"running"}) == ["done"]


def test_age_and_size_together() -> None:
    files = [LogFile("ancient", 1, 0), LogFile("a", 400, 2 * DAY), LogFile("b", 400, 3 * DAY)]
    assert plan_prune(files, 3 * DAY, DAY + DAY // 2, 500) == ["ancient", "a"]


def test_logfiles_prune_deletes_on_disk_with_injected_now(tmp_path: Path) -> None:
    files = LogFiles(
        tmp_path, LogSettings(max_attempt_bytes=1 << 20, keep_ms=60_000, max_total_bytes=1 << 30)
    )
    for eid, mtime_s in (("t@1/0/1", 1000), ("t@2/0/1", 1900), ("t@3/0/1", 1000)):
        w = files.writer(eid, "stdout")
        assert w is not None
        w.write(b"x\n")
        w.close()
        os.utime(files.path(eid, "stdout"), (mtime_s, mtime_s))
    # now = 2050 s, keep 60 s: t@1 (1050 s old) and t@2 (150 s) go; t@3 is as old but running.
    deleted = files.prune(2_050_000, ["t@3/0/1"])
    assert sorted(deleted) == sorted([file_name("t@1/0/1", "stdout"), file_name("t@2/0/1", "stdout")])
    assert sorted(p.name for p in tmp_path.iterdir()) == [file_name("t@3/0/1", "stdout")]


def test_file_names_are_flat_and_safe() -> None:
    assert file_name("wf#a/b@1/0/2", "stderr") == "wf%23a%2Fb%401%2F0%2F2.stderr"
    with pytest.raises(ValueError):
        file_name("x@1/0/1", "../etc")


def test_capped_writer_keeps_the_cap_and_marks_the_cut(tmp_path: Path) -> None:
    w = CappedWriter(tmp_path / "f", 10)
    w.write(b"12345")
    w.write(b"67890abc")
    w.write(b"more")
    w.close()
    data = (tmp_path / "f").read_bytes()
    assert data.startswith(b"1234567890\n") and b"log capped at 10 bytes" in data
    assert data.count(b"capped") == 1 and w.written == 10 and w.dropped == 7


def _collect(path: Path, **kw: object) -> bytes:
    async def go() -> bytes:
        out = bytearray()
        async for chunk in read_log(path, **kw):  # type: ignore[arg-type]
            out += chunk
        return bytes(out)

    return asyncio.run(go())


def test_read_log_from_a_line_across_chunk_boundaries(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"".join(b"l%d\n" % i for i in range(1, 101)))
    assert _collect(path) == path.read_bytes()
    assert _collect(path, since_line=1) == path.read_bytes()
    assert _collect(path, since_line=99, chunk=7) == b"l99\nl100\n"
    assert _collect(path, since_line=50, chunk=3).startswith(b"l50\nl51\n")
    assert _collect(path, since_line=500, chunk=5) == b""
    with pytest.raises(FileNotFoundError):
        _collect(tmp_path / "missing")


def test_read_log_follows_while_running_then_ends(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"a\n")
    state = {"running": True}

    async def go() -> list[bytes]:
        got: list[bytes] = []
        async for chunk in read_log(path, follow=True, running=lambda: state["running"], poll_s=0.01):
            got.append(chunk)
            if chunk == b"a\n":
                with path.open("ab") as f:
                    f.write(b"b\n")
                state["running"] = False  # it ended after writing b: b must still be read
        return got

    assert b"".join(asyncio.run(asyncio.wait_for(go(), 10))) == b"a\nb\n"


def test_settings_are_validated_naming_the_key() -> None:
    s = LogSettings.build("512MiB", "2d", "10GiB")
    assert (s.max_attempt_bytes, s.keep_ms, s.max_total_bytes) == (512 << 20, 2 * DAY, 10 << 30)
    assert LogSettings.build(2048, 60, "1MB").keep_ms == 60_000
    for args, key in (
        (("lots", "1d", "1GiB"), "logs_max_attempt"),
        (("1GiB", "1d", "12"), "logs_max_total"),
        (("1GiB", "0s", "1GiB"), "logs_keep"),
        (("1GiB", "1d", "1GiB", 0), "logs_max_files"),
    ):
        with pytest.raises(InvalidSpec) as info:
            LogSettings.build(*args)
        assert info.value.field == key


def test_read_log_tail_bytes_starts_at_a_line(tmp_path: Path) -> None:
    path = tmp_path / "f"
    path.write_bytes(b"aaaa\nbbbb\ncccc\n")
    assert _collect(path, tail_bytes=5) == b"cccc\n"  # exactly one line
    assert _collect(path, tail_bytes=7) == b"cccc\n"  # the partial "bb\n" is dropped
    assert _collect(path, tail_bytes=10, chunk=2) == b"bbbb\ncccc\n"
    assert _collect(path, tail_bytes=1000) == path.read_bytes()
    assert _collect(path, tail_bytes=10, since_line=2) == b"cccc\n"


def test_prune_by_count_keeps_the_newest() -> None:
    files = [LogFile(f"f{i}", 1, i) for i in range(5)]
    assert plan_prune(files, 10, DAY, 10**9, max_files=2) == ["f0", "f1", "f2"]
    assert plan_prune(files, 10, DAY, 10**9, active={"f0"}, max_files=2) == ["f1", "f2", "f3"]


def test_an_empty_stream_leaves_no_file(tmp_path: Path) -> None:
    files = LogFiles(tmp_path / "logs")
    w = files.writer("t@1/0/1", "stderr")
    w.write(b"")
    w.close()
    assert not (tmp_path / "logs").exists()
    w = files.writer("t@1/0/1", "stdout")
    w.write(b"x")
    w.write(b"y")
    w.close()
    w.write(b"z")  # after close nothing more is written
    assert files.path("t@1/0/1", "stdout").read_bytes() == b"xy"
