"""The StateStore contract over MemoryStore and LmdbStore, plus what only LMDB promises.

No test sleeps: cross-thread tests use futures, barriers, or poll a condition with a deadline.
"""

from __future__ import annotations

import io
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import ClassVar, TypeVar

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

import raftsched
from raftsched.abc import StateStore
from raftsched.storage.lmdb_store import LmdbStore
from raftsched.storage.memory import MemoryStore
from raftsched.testing.cluster import wait_until

ALL = (b"", b"\xff")
T = TypeVar("T")


class SmallChunkStore(LmdbStore):
    """Scans cross chunk boundaries after three pairs, so the chunked path is exercised."""

    _SCAN_CHUNK: ClassVar[int] = 3


@pytest.fixture(params=["memory", "lmdb", "lmdb-small-chunks"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StateStore]:
    if request.param == "memory":
        yield MemoryStore()
        return
    cls = LmdbStore if request.param == "lmdb" else SmallChunkStore
    s = cls(tmp_path / "db", sync=False)
    yield s
    s.close()


@pytest.fixture
def lmdb_store(tmp_path: Path) -> Iterator[LmdbStore]:
    s = LmdbStore(tmp_path / "db", sync=False)
    yield s
    s.close()


def fill(store: StateStore, keys: list[bytes], index: int = 1) -> None:
    for k in keys:
        store.put(k, b"v" + k)
    store.commit(index)


def everything(store: StateStore) -> list[tuple[bytes, bytes]]:
    return list(store.scan(*ALL))


def in_thread(fn: Callable[[], T]) -> T:
    """Run ``fn`` on another thread and return its result (or raise its exception)."""
    with ThreadPoolExecutor(max_workers=1) as pool:
        return pool.submit(fn).result(timeout=30)


# -- the contract: every StateStore behaves like this -----------------------------------------


def test_put_get_overwrite_delete(store: StateStore) -> None:
    assert store.get(b"a") is None
    store.put(b"a", b"1")
    assert store.get(b"a") == b"1"
    store.put(b"a", b"2")
    assert store.get(b"a") == b"2"
    store.delete(b"a")
    assert store.get(b"a") is None
    store.delete(b"never-there")  # not an error
    store.put(b"b", b"")
    assert store.get(b"b") == b""


def test_writes_visible_on_write_path_before_commit(store: StateStore) -> None:
    store.put(b"k", b"v")
    assert store.get(b"k") == b"v"
    assert everything(store) == [(b"k", b"v")]
    store.commit(1)
    assert store.get(b"k") == b"v"


KEYS = [b"a", b"ab", b"abc", b"b", b"ba", b"c", b"d", b"e", b"f\x00", b"f\xff", b"g"]


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        (b"", b"\xff", KEYS),
        (b"a", b"b", [b"a", b"ab", b"abc"]),
        (b"ab", b"ba", [b"ab", b"abc", b"b"]),
        (b"aa", b"ab", []),
        (b"b", b"b", []),
        (b"c", b"a", []),
        (b"f", b"g", [b"f\x00", b"f\xff"]),
        (b"g", b"\xff", [b"g"]),
        (b"h", b"\xff", []),
        (b"", b"a", []),
    ],
)
def test_scan_ranges(store: StateStore, start: bytes, end: bytes, expected: list[bytes]) -> None:
    fill(store, KEYS)
    assert [k for k, _ in store.scan(start, end)] == expected
    assert [k for k, _ in store.scan(start, end, reverse=True)] == expected[::-1]
    for limit in (1, 2, 3, 4, 7, 100):
        assert [k for k, _ in store.scan(start, end, limit=limit)] == expected[:limit]
        assert [k for k, _ in store.scan(start, end, reverse=True, limit=limit)] == expected[::-1][:limit]
    assert all(v == b"v" + k for k, v in store.scan(start, end))


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        (b"", b"\xff", KEYS),
        (b"a", b"b", [b"a", b"ab", b"abc"]),
        (b"ab", b"ba", [b"ab", b"abc", b"b"]),
        (b"aa", b"ab", []),
        (b"b", b"b", []),
        (b"c", b"a", []),
        (b"f", b"g", [b"f\x00", b"f\xff"]),
        (b"h", b"\xff", []),
        (b"x" * 600, b"\xff", []),  # a bound longer than LMDB can position at
    ],
)
def test_scan_keys_gives_the_keys_of_scan_without_values(
    store: StateStore, start: bytes, end: bytes, expected: list[bytes]
) -> None:
    fill(store, KEYS)
    for limit in (1, 2, 3, 4, 7, 100):
        assert store.scan_keys(start, end, limit=limit) == expected[:limit]
    store.commit(1)  # no open batch: a read transaction
    assert store.scan_keys(start, end, limit=100) == expected
    # The open batch is seen (written and deleted), and what it names can be deleted after.
    store.put(b"ab\x00", b"new")
    store.delete(b"abc")
    got = store.scan_keys(b"a", b"b", limit=10)
    assert got == [b"a", b"ab", b"ab\x00"]
    for k in got:
        store.delete(k)
    assert store.scan_keys(b"a", b"b", limit=10) == []
    with pytest.raises(ValueError, match="limit"):
        store.scan_keys(b"", b"\xff", limit=0)


def test_scan_is_safe_while_writing(store: StateStore) -> None:
    fill(store, [b"a", b"b", b"c", b"d"])
    seen = []
    for k, _ in store.scan(b"a", b"z", limit=3):
        seen.append(k)
        store.delete(k)
        store.put(k + b"x", b"new")
    assert seen == [b"a", b"b", b"c"]
    assert [k for k, _ in everything(store)] == [b"ax", b"bx", b"cx", b"d"]


def test_commit_and_applied_index(store: StateStore) -> None:
    assert store.applied_index() == 0
    store.put(b"a", b"1")
    store.commit(5)
    assert store.applied_index() == 5
    store.commit(5)  # nothing pending, same index: a no-op
    store.commit(7)  # index only
    assert store.applied_index() == 7
    store.commit(3)  # never backwards
    assert store.applied_index() == 7
    assert everything(store) == [(b"a", b"1")]  # the index is not a state key


def test_replace_all(store: StateStore) -> None:
    fill(store, [b"old1", b"old2"], index=10)
    store.put(b"pending", b"x")
    store.replace_all(iter([(b"n2", b"2"), (b"n1", b"1"), (b"n2", b"3")]), applied_index=4)
    assert everything(store) == [(b"n1", b"1"), (b"n2", b"3")]
    assert store.applied_index() == 4  # a snapshot install may lower the index
    with store.reader() as r:
        assert r.get(b"n1") == b"1"
        assert r.get(b"old1") is None
    store.replace_all(iter([]), applied_index=5)
    assert everything(store) == []
    store.put(b"after", b"a")
    store.commit(6)
    assert everything(store) == [(b"after", b"a")]


def test_reader_sees_committed_data(store: StateStore) -> None:
    fill(store, [b"a", b"b", b"c"], index=3)
    with store.reader() as r:
        assert r.get(b"b") == b"vb"
        assert r.get(b"zz") is None
        assert [k for k, _ in r.scan(b"a", b"c")] == [b"a", b"b"]
        assert [k for k, _ in r.scan(b"", b"\xff", reverse=True, limit=2)] == [b"c", b"b"]


# -- LMDB only: transactions, durability, threads -----------------------------------------------


def test_uncommitted_writes_invisible_to_readers(lmdb_store: LmdbStore) -> None:
    fill(lmdb_store, [b"a"], index=1)
    lmdb_store.put(b"b", b"new")
    lmdb_store.delete(b"a")
    with lmdb_store.reader() as r:
        assert r.get(b"a") == b"va"
        assert r.get(b"b") is None
        assert list(r.scan(*ALL)) == [(b"a", b"va")]
    assert in_thread(lambda: _read_all(lmdb_store)) == [(b"a", b"va")]
    lmdb_store.commit(2)
    with lmdb_store.reader() as r:
        assert list(r.scan(*ALL)) == [(b"b", b"new")]


def _read_all(store: LmdbStore) -> list[tuple[bytes, bytes]]:
    with store.reader() as r:
        return list(r.scan(*ALL))


def test_reader_is_a_snapshot(lmdb_store: LmdbStore) -> None:
    fill(lmdb_store, [b"a"], index=1)
    with lmdb_store.reader() as r:
        lmdb_store.put(b"b", b"1")
        lmdb_store.commit(2)
        assert r.get(b"b") is None
    with lmdb_store.reader() as r:
        assert r.get(b"b") == b"1"


def test_reader_outside_context_raises(lmdb_store: LmdbStore) -> None:
    r = lmdb_store.reader()
    with pytest.raises(RuntimeError, match="not open"):
        r.get(b"a")
    with r:
        it = r.scan(*ALL)
        assert list(it) == []
    with pytest.raises(RuntimeError, match="not open"):
        r.get(b"a")


def test_data_and_index_persist_across_reopen(tmp_path: Path) -> None:
    with LmdbStore(tmp_path) as s:
        fill(s, [b"a", b"b"], index=41)
        s.delete(b"a")
        s.commit(42)
    with LmdbStore(tmp_path) as s:
        assert s.applied_index() == 42
        assert everything(s) == [(b"b", b"vb")]


def test_close_without_commit_loses_the_batch(tmp_path: Path) -> None:
    with LmdbStore(tmp_path) as s:
        fill(s, [b"a"], index=7)
        s.put(b"b", b"lost")
        s.delete(b"a")
    with LmdbStore(tmp_path) as s:
        assert s.applied_index() == 7
        assert everything(s) == [(b"a", b"va")]


_CHILD = """
import os, signal, sys
from pathlib import Path
from raftsched.storage.lmdb_store import LmdbStore
s = LmdbStore(Path(sys.argv[1]), sync=True)
for i in range(1, 4):
    s.put(b"k%d" % i, b"v")
    s.commit(i)
s.put(b"uncommitted", b"x")
s.delete(b"k1")
os.kill(os.getpid(), signal.SIGKILL)
"""


def test_survives_kill_9_with_an_open_batch(tmp_path: Path) -> None:
    repo = Path(raftsched.__file__).resolve().parent.parent
    env = {**os.environ, "PYTHONPATH": str(repo)}
    proc = subprocess.run([sys.executable, "-c", _CHILD, str(tmp_path)], env=env, timeout=60)
    assert proc.returncode == -signal.SIGKILL
    with LmdbStore(tmp_path) as s:
        assert s.applied_index() == 3
        assert [k for k, _ in everything(s)] == [b"k1", b"k2", b"k3"]
        s.put(b"k4", b"v")  # writable again: the dead writer's lock was released
        s.commit(4)


def test_write_batch_is_bound_to_its_thread(lmdb_store: LmdbStore) -> None:
    lmdb_store.put(b"a", b"1")
    calls: list[Callable[[], object]] = [
        lambda: lmdb_store.put(b"b", b"2"),
        lambda: lmdb_store.delete(b"a"),
        lambda: lmdb_store.get(b"a"),
        lambda: list(lmdb_store.scan(*ALL)),
        lambda: lmdb_store.commit(1),
        lambda: lmdb_store.replace_all(iter([]), 1),
    ]
    for call in calls:
        with pytest.raises(RuntimeError, match="owned by thread"):
            in_thread(call)
    # Not a broken store: the owner carries on, and readers anywhere are fine.
    assert in_thread(lambda: _read_all(lmdb_store)) == []
    lmdb_store.commit(1)
    assert in_thread(lambda: lmdb_store.get(b"a")) == b"1"  # no batch open: any thread may read
    in_thread(lambda: fill(lmdb_store, [b"z"], index=2))  # ...or start the next batch
    assert everything(lmdb_store) == [(b"a", b"1"), (b"z", b"vz")]


def test_readers_on_two_threads_at_once(lmdb_store: LmdbStore) -> None:
    fill(lmdb_store, [b"a", b"b"])
    both_open = threading.Barrier(2, timeout=30)

    def read() -> list[tuple[bytes, bytes]]:
        with lmdb_store.reader() as r:
            both_open.wait()  # would time out if readers excluded each other
            return list(r.scan(*ALL))

    with ThreadPoolExecutor(max_workers=2) as pool:
        results = [f.result(timeout=30) for f in [pool.submit(read), pool.submit(read)]]
    assert results[0] == results[1] == [(b"a", b"va"), (b"b", b"vb")]


def test_nested_readers_on_one_thread(lmdb_store: LmdbStore) -> None:
    fill(lmdb_store, [b"a"])
    with lmdb_store.reader() as outer, lmdb_store.reader() as inner:
        assert outer.get(b"a") == inner.get(b"a") == b"va"


def test_keys_outside_lmdb_limits(lmdb_store: LmdbStore) -> None:
    for bad in (b"", b"x" * 512):
        with pytest.raises(ValueError, match="1 to 511 bytes"):
            lmdb_store.put(bad, b"v")
        assert lmdb_store.get(bad) is None
        lmdb_store.delete(bad)
    lmdb_store.put(b"ok", b"v")  # the rejected puts did not break the batch
    lmdb_store.commit(1)
    assert everything(lmdb_store) == [(b"ok", b"v")]


def test_longest_keys_and_bounds(tmp_path: Path) -> None:
    with SmallChunkStore(tmp_path) as s:
        keys = sorted([b"m" * 511, b"m" * 510, b"m" * 510 + b"n", b"m", b"n" * 511, b"l" * 511])
        fill(s, keys)
        mem = MemoryStore()
        fill(mem, keys)
        bounds = [
            b"",
            b"m" * 511,
            b"m" * 512,
            b"m" * 600,
            b"m" * 510 + b"\x00",
            b"n" * 511,
            b"n" * 512,
            b"\xff",
        ]
        for lo in bounds:
            for hi in bounds:
                for rev in (False, True):
                    assert list(s.scan(lo, hi, reverse=rev)) == list(mem.scan(lo, hi, reverse=rev)), (lo, hi)
                    with s.reader() as r:
                        assert list(r.scan(lo, hi, reverse=rev)) == list(mem.scan(lo, hi, reverse=rev))


def test_long_scan_tolerates_writes_between_chunks(tmp_path: Path) -> None:
    with SmallChunkStore(tmp_path) as s:
        fill(s, [b"%02d" % i for i in range(20)])
        seen = []
        for k, _ in s.scan(*ALL):
            seen.append(k)
            s.delete(k)  # behind the iterator
            s.put(b"+" + k, b"")  # also behind it ("+" < "0"): never yielded
            if k == b"05":
                s.delete(b"10")  # ahead of it: gone before it is reached
                s.put(b"15x", b"")  # ahead of it: seen
        assert seen == sorted(seen)
        assert len(seen) == len(set(seen))
        assert b"10" not in seen
        assert b"15x" in seen
        assert not any(k.startswith(b"+") for k in seen)
        assert [k for k, _ in everything(s)] == [b"+" + k for k in seen]


def test_limit_must_not_be_negative(lmdb_store: LmdbStore) -> None:
    with pytest.raises(ValueError, match="limit"):
        lmdb_store.scan(*ALL, limit=-1)


def test_failed_write_breaks_only_a_batch_with_earlier_writes(tmp_path: Path) -> None:
    s = LmdbStore(tmp_path, map_size=1 << 20)
    fill(s, [b"a"], index=1)
    # lmdb.MapFullError, matched by name: tests do not import lmdb either.
    with pytest.raises(Exception, match="MDB_MAP_FULL"):
        s.put(b"huge", b"x" * (2 << 20))  # a fresh batch: nothing earlier is lost
    s.put(b"b", b"1")
    with pytest.raises(Exception, match="MDB_MAP_FULL"):
        s.put(b"huge", b"x" * (2 << 20))  # this loses the put of b"b"
    calls: list[Callable[[], object]] = [lambda: s.put(b"c", b""), lambda: s.get(b"a"), lambda: s.commit(2)]
    for call in calls:
        with pytest.raises(RuntimeError, match="batch was lost"):
            call()
    with s.reader() as r:  # committed data is still readable
        assert list(r.scan(*ALL)) == [(b"a", b"va")]
    s.close()
    with LmdbStore(tmp_path, map_size=1 << 20) as s2:
        assert s2.applied_index() == 1
        assert everything(s2) == [(b"a", b"va")]


def test_close_rules(tmp_path: Path) -> None:
    s = LmdbStore(tmp_path)
    s.put(b"a", b"1")
    with pytest.raises(RuntimeError, match="live thread"):
        in_thread(s.close)
    with s.reader(), pytest.raises(RuntimeError, match="open reader"):
        s.close()
    s.close()
    s.close()  # idempotent
    with pytest.raises(RuntimeError, match="closed"), s.reader():
        pass
    with pytest.raises(RuntimeError, match="closed"):
        s.put(b"b", b"2")


def test_close_after_the_owning_thread_exited(tmp_path: Path) -> None:
    s = LmdbStore(tmp_path)
    t = threading.Thread(target=lambda: s.put(b"a", b"1"))
    t.start()
    t.join(timeout=30)
    s.close()
    with LmdbStore(tmp_path) as s2:
        assert everything(s2) == []
        fill(s2, [b"b"], index=1)  # the dead thread's write lock did not survive the close
        assert everything(s2) == [(b"b", b"vb")]


def test_stats(lmdb_store: LmdbStore) -> None:
    fill(lmdb_store, [b"a", b"b", b"c"], index=9)
    st_ = lmdb_store.stats()
    assert st_["entries"] == 3
    assert st_["applied_index"] == 9
    assert 0 < st_["map_used_bytes"] <= st_["map_size_bytes"] == 64 << 30


# -- snapshots ------------------------------------------------------------------------------------


def _write_snapshot(store: LmdbStore, path: Path, header: bytes = b"") -> int:
    with open(path, "wb") as f:
        f.write(header)
        index = store.write_snapshot(f)
        assert f.tell() == os.path.getsize(path) > len(header)
        f.write(b"")  # the file object is usable after the copy
    return index


@pytest.mark.parametrize("header", [b"", b"HDR-" + b"x" * 4096 + b"-7"], ids=["at-0", "after-header"])
def test_snapshot_round_trip(tmp_path: Path, header: bytes) -> None:
    with LmdbStore(tmp_path / "a") as a, LmdbStore(tmp_path / "b") as b:
        fill(a, [b"k%03d" % i for i in range(300)], index=300)
        a.put(b"k001", b"changed")
        a.delete(b"k002")
        a.commit(301)
        fill(b, [b"only-in-b"], index=999)
        snap = tmp_path / "snap"
        assert _write_snapshot(a, snap, header) == 301
        assert b.load_snapshot_copy(snap, len(header)) == 301
        assert b.applied_index() == 301
        assert everything(b) == everything(a)
        with b.reader() as r:
            assert list(r.scan(*ALL)) == everything(a)
        b.put(b"next", b"1")  # the reopened store is fully usable
        b.commit(302)
        assert b.get(b"next") == b"1"
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == ["state"]
    with LmdbStore(tmp_path / "b") as b:
        assert b.applied_index() == 302


def test_snapshot_excludes_uncommitted_and_requires_commit_on_owner(tmp_path: Path) -> None:
    with LmdbStore(tmp_path / "a") as a, LmdbStore(tmp_path / "b") as b:
        fill(a, [b"x"], index=1)
        a.put(b"pending", b"p")
        with open(tmp_path / "snap", "wb") as f:
            with pytest.raises(RuntimeError, match="commit"):
                a.write_snapshot(f)
            # Another thread may snapshot while the batch is open: it gets the committed state.
            assert in_thread(lambda: a.write_snapshot(f)) == 1
        assert b.load_snapshot_copy(tmp_path / "snap", 0) == 1
        assert everything(b) == [(b"x", b"vx")]


def test_snapshot_of_an_empty_store(tmp_path: Path) -> None:
    with LmdbStore(tmp_path / "a") as a, LmdbStore(tmp_path / "b") as b:
        fill(b, [b"q"], index=3)
        assert _write_snapshot(a, tmp_path / "snap") == 0
        assert b.load_snapshot_copy(tmp_path / "snap", 0) == 0
        assert everything(b) == []


def test_bad_snapshot_leaves_store_untouched(tmp_path: Path) -> None:
    with LmdbStore(tmp_path / "b") as b:
        fill(b, [b"keep"], index=5)
        bad = tmp_path / "bad"
        bad.write_bytes(b"not lmdb at all" * 1000)
        with pytest.raises(ValueError, match="no LMDB data file"):
            b.load_snapshot_copy(bad, 0)
        # A valid LMDB file that is not a raftsched store: rename its b"state" database.
        payload = _snapshot_bytes(tmp_path, [b"k"], 1)
        assert payload.count(b"state") == 1
        foreign = tmp_path / "foreign"
        foreign.write_bytes(payload.replace(b"state", b"xtate"))
        with pytest.raises(ValueError, match="not a raftsched LMDB store"):
            b.load_snapshot_copy(foreign, 0)
        assert b.applied_index() == 5
        assert everything(b) == [(b"keep", b"vkeep")]


def test_snapshot_install_discards_an_open_batch(tmp_path: Path) -> None:
    with LmdbStore(tmp_path / "a") as a, LmdbStore(tmp_path / "b") as b:
        fill(a, [b"a"], index=2)
        _write_snapshot(a, tmp_path / "snap")
        b.put(b"pending", b"p")
        with pytest.raises(RuntimeError, match="owned by thread"):
            in_thread(lambda: b.load_snapshot_copy(tmp_path / "snap", 0))
        assert b.load_snapshot_copy(tmp_path / "snap", 0) == 2
        assert everything(b) == [(b"a", b"va")]


def test_swap_waits_for_open_readers(tmp_path: Path) -> None:
    with LmdbStore(tmp_path / "a") as a, LmdbStore(tmp_path / "b") as b:
        fill(a, [b"new"], index=2)
        fill(b, [b"old"], index=1)
        _write_snapshot(a, tmp_path / "snap")
        with ThreadPoolExecutor(max_workers=1) as pool:
            with b.reader() as r:
                swap = pool.submit(b.load_snapshot_copy, tmp_path / "snap", 0)
                wait_until(lambda: b.swaps_waiting() == 1, 10, 0.001, "a swap waiting")
                assert not swap.done()
                assert r.get(b"old") == b"vold"  # the reader's environment is still open
            assert swap.result(timeout=30) == 2
        with b.reader() as r:
            assert list(r.scan(*ALL)) == [(b"new", b"vnew")]


def _snapshot_bytes(tmp_path: Path, keys: list[bytes], index: int) -> bytes:
    src = tmp_path / "src"
    with LmdbStore(src) as s:
        fill(s, keys, index)
        buf = tmp_path / "src.snap"
        _write_snapshot(s, buf)
    shutil.rmtree(src)
    return buf.read_bytes()


def test_reopen_after_crash_between_the_two_renames(tmp_path: Path) -> None:
    root = tmp_path / "b"
    with LmdbStore(root) as b:
        fill(b, [b"old"], index=1)
    payload = _snapshot_bytes(tmp_path, [b"new"], 2)
    (root / "state").rename(root / "state.old")
    (root / "state.restore").mkdir()
    (root / "state.restore" / "data.mdb").write_bytes(payload)
    with LmdbStore(root) as b:
        assert b.applied_index() == 2
        assert everything(b) == [(b"new", b"vnew")]
    assert sorted(p.name for p in root.iterdir()) == ["state"]


def test_reopen_after_crash_during_extraction_or_cleanup(tmp_path: Path) -> None:
    root = tmp_path / "b"
    with LmdbStore(root) as b:
        fill(b, [b"live"], index=1)
    (root / "state.restore").mkdir()
    (root / "state.restore" / "data.mdb").write_bytes(b"partial")
    shutil.copytree(root / "state", root / "state.old")
    with LmdbStore(root) as b:
        assert everything(b) == [(b"live", b"vlive")]
    assert sorted(p.name for p in root.iterdir()) == ["state"]


def test_write_snapshot_into_bytesio_is_refused(lmdb_store: LmdbStore) -> None:
    with pytest.raises(io.UnsupportedOperation):
        lmdb_store.write_snapshot(io.BytesIO())


# -- property: LmdbStore behaves like MemoryStore plus a committed copy ---------------------------

keys = st.text(alphabet="abc", min_size=1, max_size=3).map(str.encode)
bounds = st.one_of(st.just(b""), st.just(b"\xff"), st.text(alphabet="abc", max_size=3).map(str.encode))
Op = tuple[str, bytes, bytes, bool, int]
ops = st.one_of(
    st.tuples(st.just("put"), keys, st.binary(max_size=4), st.just(False), st.just(0)),
    st.tuples(st.just("delete"), keys, st.just(b""), st.just(False), st.just(0)),
    st.tuples(st.just("get"), keys, st.just(b""), st.just(False), st.just(0)),
    st.tuples(st.just("commit"), st.just(b""), st.just(b""), st.just(False), st.integers(0, 50)),
    st.tuples(st.just("scan"), bounds, bounds, st.booleans(), st.integers(0, 5)),
    st.tuples(st.just("read"), bounds, bounds, st.booleans(), st.integers(0, 5)),
    st.tuples(st.just("crash"), st.just(b""), st.just(b""), st.just(False), st.just(0)),
)


@settings(max_examples=300, deadline=None)
@given(st.lists(ops, max_size=40))
def test_lmdb_matches_memory_store(program: list[Op]) -> None:
    live = MemoryStore()  # what the apply thread sees
    committed = MemoryStore()  # what readers, and a restarted node, see
    with tempfile.TemporaryDirectory() as d:
        store = SmallChunkStore(Path(d), sync=False)
        try:
            for kind, a, b, flag, n in program:
                if kind == "put":
                    store.put(a, b)
                    live.put(a, b)
                elif kind == "delete":
                    store.delete(a)
                    live.delete(a)
                elif kind == "get":
                    assert store.get(a) == live.get(a)
                elif kind == "commit":
                    store.commit(n)
                    live.commit(n)
                    committed.replace_all(live.scan(*ALL), live.applied_index())
                elif kind == "scan":
                    assert list(store.scan(a, b, reverse=flag, limit=n)) == list(
                        live.scan(a, b, reverse=flag, limit=n)
                    )
                elif kind == "read":
                    with store.reader() as r:
                        assert list(r.scan(a, b, reverse=flag, limit=n)) == list(
                            committed.scan(a, b, reverse=flag, limit=n)
                        )
                else:  # crash: drop the batch and reopen
                    store.close()
                    store = SmallChunkStore(Path(d), sync=False)
                    live.replace_all(committed.scan(*ALL), committed.applied_index())
                assert store.applied_index() == committed.applied_index()
            assert list(store.scan(*ALL)) == list(live.scan(*ALL))
        finally:
            store.close()


def _mapped_rss_kb(path: Path) -> int:
    """The resident kB of this process's mappings of file ``path`` (/proc/self/smaps)."""
    target, total, inside = str(path.resolve()), 0, False
    for line in Path("/proc/self/smaps").read_text().splitlines():
        head = line.split(maxsplit=5)
        if len(head) >= 5 and "-" in head[0] and ":" not in head[0]:
            inside = len(head) == 6 and head[5] == target
        elif inside and line.startswith("Rss:"):
            total += int(line.split()[1])
    return total


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="/proc and madvise: Linux")
def test_release_pages_drops_the_read_pages_from_the_resident_set(tmp_path: Path) -> None:
    """A verify (or a snapshot copy, or the B-tree walks of writes) maps every page of the store
    it reads, and they counted in the node's RSS (~400 B per task at 1,000,000 tasks) until
    released; released, they are read again from the same file, unchanged. (The node releases
    them after its start-up verify and load, after each periodic verify and every 10 s.)"""
    store = LmdbStore(tmp_path)
    try:
        value = os.urandom(2000)
        for i in range(0, 20_000, 1000):
            for j in range(i, i + 1000):
                store.put(f"k/{j:06d}".encode(), value)
            store.commit(i + 1)
        data = tmp_path / "state" / "data.mdb"
        with store.reader() as r:
            assert sum(1 for _ in r.scan(b"k/", b"k0")) == 20_000  # every page read: mapped
        assert _mapped_rss_kb(data) > 20_000  # ~40 MB of values
        assert store.release_pages() > 0
        assert _mapped_rss_kb(data) < 2_000
        assert store.verify().pairs >= 20_000  # reads it all again, unchanged
        assert _mapped_rss_kb(data) > 20_000
        with tempfile.TemporaryFile() as f:
            store.write_snapshot(f)  # a snapshot copy reads it all too, and releases it after
        assert _mapped_rss_kb(data) < 2_000
        with store.reader() as r:
            assert r.get(b"k/012345") == value
    finally:
        store.close()
    assert store.release_pages() == 0  # closed: nothing mapped, nothing advised
