"""A damaged store is found and named: the LMDB state store (its pages, and content changed behind
its back, against the checksum committed with it), the Raft journal, its meta file and the
snapshot file. Each is one :class:`StoreDamaged` naming the file, never a traceback."""

from __future__ import annotations

import asyncio
import json
import os
import random
import struct
from collections.abc import AsyncIterator, Callable, Sequence
from pathlib import Path

import pytest

from raftsched.cli.cluster import content_warnings, content_warnings_by_format
from raftsched.consensus.pysyncobj.snapshot import check_raft_files
from raftsched.errors import StoreDamaged
from raftsched.executor.agent import Executor
from raftsched.executor.dedupe import DedupeLog
from raftsched.storage import lmdb_env
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.storage.lmdb_store import LmdbStore, content_hash
from raftsched.storage.memory import MemoryExecutionLog
from raftsched.v1 import raftsched_pb2 as pb
from tests.support.wait import until

PAGE = 4096


def _filled(path: Path, n: int = 3000) -> LmdbStore:
    store = LmdbStore(path, map_size=64 << 20, replicated_below=b"~")
    for i in range(n):
        store.put(b"k%06d" % i, b"v" * (i % 97) + b"%d" % i)
    store.put(b"~local", b"node-local")
    store.commit(n)
    return store


def _used_pages(path: Path) -> int:
    with LmdbStore(path, map_size=64 << 20) as store:
        return store.stats()["map_used_bytes"] // PAGE


def damage_used_pages(path: Path, seed: int = 0) -> None:
    """Overwrite 16 KiB in the middle of the pages LMDB uses (meta pages spared) with noise."""
    used = _used_pages(path)
    with open(path / "state" / "data.mdb", "r+b") as f:
        f.seek(max(2, used // 2) * PAGE)
        f.write(random.Random(seed).randbytes(4 * PAGE))


def test_the_checksum_follows_every_write_and_is_equal_for_equal_content(tmp_path: Path) -> None:
    a = LmdbStore(tmp_path / "a", map_size=64 << 20, replicated_below=b"~")
    b = LmdbStore(tmp_path / "b", map_size=64 << 20, replicated_below=b"~")
    try:
        for i in range(200):
            a.put(b"k%03d" % i, b"old")
        for i in range(0, 200, 2):
            a.put(b"k%03d" % i, b"new%d" % i)
        for i in range(1, 200, 2):
            a.delete(b"k%03d" % i)
        a.delete(b"absent")
        a.put(b"~mine", b"a's own")
        a.commit(7)
        b.replace_all(iter([(b"k%03d" % i, b"new%d" % i) for i in range(198, -1, -2)]), 7)
        b.put(b"~mine", b"b's own, not summed")
        b.commit(7)
        assert a.content_sum() == b.content_sum() != 0
        assert a.verify().checksum == a.content_sum()
        assert b.verify().checksum == b.content_sum()
        expected = sum(content_hash(b"k%03d" % i, b"new%d" % i) for i in range(0, 200, 2)) % (1 << 128)
        assert a.content_sum() == expected
    finally:
        a.close()
        b.close()


def test_an_aborted_batch_leaves_the_committed_checksum(tmp_path: Path) -> None:
    store = _filled(tmp_path, 10)
    try:
        before = store.content_sum()

        def fail(point: str) -> None:
            raise OSError(5, "injected I/O error")

        store._fault = fail
        store.put(b"k000001", b"changed")
        with pytest.raises(OSError):
            store.commit(11)
        assert store.content_sum() == before
    finally:
        store._fault = None
        store.close()
    with LmdbStore(tmp_path, map_size=64 << 20, replicated_below=b"~") as again:
        assert again.verify().checksum == before


def test_a_value_changed_behind_the_stores_back_fails_verify_naming_the_file(tmp_path: Path) -> None:
    _filled(tmp_path).close()
    env = lmdb_env.open_env(tmp_path / "state", map_size=64 << 20, max_dbs=2, sync=True)
    try:
        db = env.open_db(b"state")
        with env.begin(write=True) as txn:
            value = txn.get(b"k001234", db=db)
            txn.put(b"k001234", bytes([value[0] ^ 1]) + value[1:], db=db)
    finally:
        env.close()
    store = LmdbStore(tmp_path, map_size=64 << 20, replicated_below=b"~")
    try:
        with pytest.raises(StoreDamaged) as caught:
            store.verify()
    finally:
        store.close()
    message = str(caught.value)
    assert str(tmp_path / "state" / "data.mdb") in message
    assert "does not match the checksum committed with it at applied index 3000" in message
    assert "\n" not in message


def test_a_node_local_key_changed_is_not_a_mismatch(tmp_path: Path) -> None:
    _filled(tmp_path).close()
    with LmdbStore(tmp_path, map_size=64 << 20, replicated_below=b"~") as store:
        store.put(b"~local", b"changed, node-local")
        store.commit(3001)
        assert store.verify().pairs == 3000


@pytest.mark.parametrize("seed", range(4))
def test_damaged_pages_are_store_damaged_at_open_or_verify(tmp_path: Path, seed: int) -> None:
    _filled(tmp_path).close()
    damage_used_pages(tmp_path, seed)
    with pytest.raises(StoreDamaged) as caught:
        store = LmdbStore(tmp_path, map_size=64 << 20, replicated_below=b"~")
        try:
            store.verify()
        finally:
            store.close()
    assert caught.value.path == str(tmp_path / "state" / "data.mdb")


def test_overwritten_meta_pages_are_store_damaged_at_open(tmp_path: Path) -> None:
    _filled(tmp_path).close()
    with open(tmp_path / "state" / "data.mdb", "r+b") as f:
        f.write(b"\0" * 2 * PAGE)
    with pytest.raises(StoreDamaged, match=r"data\.mdb is damaged \(LMDB: "):
        LmdbStore(tmp_path, map_size=64 << 20)


def test_a_store_without_a_recorded_checksum_adopts_one_at_the_next_commit(tmp_path: Path) -> None:
    _filled(tmp_path).close()
    env = lmdb_env.open_env(tmp_path / "state", map_size=64 << 20, max_dbs=2, sync=True)
    try:
        local = env.open_db(b"local")  # before the write transaction: open_db begins its own
        with env.begin(write=True) as txn:
            txn.delete(b"content_sum", db=local)
    finally:
        env.close()
    with LmdbStore(tmp_path, map_size=64 << 20, replicated_below=b"~") as store:
        store.verify()  # nothing to compare with yet
        store.put(b"k000001", b"x")
        store.commit(3001)
    with LmdbStore(tmp_path, map_size=64 << 20, replicated_below=b"~") as store:
        assert store.verify().checksum == store.content_sum()


def test_a_snapshot_copy_that_does_not_match_its_checksum_is_refused(tmp_path: Path) -> None:
    src = _filled(tmp_path / "src")
    snap = tmp_path / "snap.bin"
    with open(snap, "wb") as f:
        src.write_snapshot(f)
    src.close()
    # Change one value inside the copy: find it by its bytes (the copy is compact).
    data = bytearray(snap.read_bytes())
    at = data.find(b"v" * (2050 % 97) + b"2050")
    assert at > 0
    data[at] ^= 1
    snap.write_bytes(bytes(data))
    dst = LmdbStore(tmp_path / "dst", map_size=64 << 20, replicated_below=b"~")
    try:
        with pytest.raises(ValueError, match="does not match its content checksum"):
            dst.load_snapshot_copy(snap, 0)
        assert dst.applied_index() == 0
    finally:
        dst.close()


# -- the Raft journal, its meta file and the snapshot file ----------------------------------------


def _journal(path: Path, entries: int = 50) -> None:
    from pysyncobj.journal import FileJournal  # only to write a journal as pysyncobj does

    journal = FileJournal(str(path))
    for i in range(1, entries + 1):
        journal.add(b"command %d " % i + b"x" * (i * 7), i, 1 + i // 10)
    journal.flush()
    journal._destroy()


def test_a_sound_journal_and_dump_pass(tmp_path: Path) -> None:
    _journal(tmp_path / "raft.journal")
    check_raft_files(tmp_path)
    check_raft_files(tmp_path / "nothing-here")


def _overwrite(path: Path, offset: int, data: bytes) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        f.write(data)


@pytest.mark.parametrize(
    ("offset", "data", "problem"),
    [
        (0, b"NOTSYNCOBJ", "its header is not a pysyncobj journal's"),
        (36, struct.pack("<I", 1 << 30), "its end offset 1073741824 lies outside the file"),
        (40, struct.pack("<I", 7), "the record at byte 40 claims an impossible size (7 bytes)"),
        (40, struct.pack("<I", 30), "the record at byte 40: its two length fields differ"),
        (44, struct.pack("<Q", 9), "holds index 2 (term 1) after index 9"),
    ],
)
def test_a_damaged_journal_is_named_with_what_is_wrong(
    tmp_path: Path, offset: int, data: bytes, problem: str
) -> None:
    _journal(tmp_path / "raft.journal")
    _overwrite(tmp_path / "raft.journal", offset, data)
    with pytest.raises(StoreDamaged) as caught:
        check_raft_files(tmp_path)
    assert caught.value.path == str(tmp_path / "raft.journal")
    assert problem in caught.value.problem


def test_sixteen_kib_of_noise_in_a_journal_is_found(tmp_path: Path) -> None:
    _journal(tmp_path / "raft.journal", 400)
    size = os.path.getsize(tmp_path / "raft.journal")
    _overwrite(tmp_path / "raft.journal", size // 4, random.Random(1).randbytes(16 << 10))
    with pytest.raises(StoreDamaged, match="Raft journal: "):
        check_raft_files(tmp_path)


def test_a_journal_meta_file_that_does_not_decode_is_named(tmp_path: Path) -> None:
    (tmp_path / "raft.journal.meta").write_bytes(b"\x00garbage")
    with pytest.raises(StoreDamaged, match=r"raft\.journal\.meta is damaged \(Raft term and vote"):
        check_raft_files(tmp_path)


def _dump(path: Path, header: bytes, payload: bytes) -> None:
    path.write_bytes(b"RSNAP1\n" + len(header).to_bytes(8, "big") + header + payload)


def test_a_damaged_snapshot_file_is_named(tmp_path: Path) -> None:
    store = _filled(tmp_path / "s", 10)
    with open(tmp_path / "copy", "wb") as f:
        store.write_snapshot(f)
    store.close()
    copy = (tmp_path / "copy").read_bytes()
    good = json.dumps({"last": ["", 5, 1], "prev": ["", 4, 1], "cluster": []}).encode()
    _dump(tmp_path / "raft.dump", good, copy)
    check_raft_files(tmp_path)
    for header, payload, problem in (
        (b"{not json", copy, "its header does not decode"),
        (json.dumps({"last": 1}).encode(), copy, "its header does not decode"),
        (good, b"\0" * 64, "no LMDB copy follows its header"),
    ):
        _dump(tmp_path / "raft.dump", header, payload)
        with pytest.raises(StoreDamaged, match="Raft snapshot file: " + problem):
            check_raft_files(tmp_path)
    (tmp_path / "raft.dump").write_bytes(b"garbage" * 10)
    with pytest.raises(StoreDamaged, match="not a raftsched snapshot"):
        check_raft_files(tmp_path)


# -- an executor with a rebuilt execution log ------------------------------------------------------


class _Recording:
    """An executor transport that records the calls it gets; the dispatch stream stays silent."""

    def __init__(self) -> None:
        self.calls: list[str] = []
        self.registered = asyncio.Event()

    async def register(
        self, target: str, request: pb.RegisterRequest, *, timeout_s: float
    ) -> pb.RegisterReply:
        self.calls.append("register")
        self.registered.set()
        return pb.RegisterReply(epoch=1, lease_ms=2000, heartbeat_ms=100)

    def dispatch(self, target: str, request: pb.DispatchRequest) -> _Silent:
        return _Silent()

    async def heartbeat(
        self, target: str, request: pb.HeartbeatRequest, *, timeout_s: float
    ) -> pb.HeartbeatReply:
        return pb.HeartbeatReply()

    async def report(self, target: str, request: pb.ReportRequest, *, timeout_s: float) -> pb.ReportReply:
        return pb.ReportReply()

    async def drain(self, target: str, request: pb.DrainRequest, *, timeout_s: float) -> pb.DrainReply:
        return pb.DrainReply()

    async def leave(self, target: str, request: pb.LeaveRequest, *, timeout_s: float) -> pb.LeaveReply:
        self.calls.append("leave")
        return pb.LeaveReply()

    async def close(self) -> None:
        return None


class _Silent:
    def cancel(self) -> None:
        pass

    async def __aiter__(self) -> AsyncIterator[Sequence[pb.WorkItem]]:
        await asyncio.Event().wait()
        yield ()


@pytest.mark.parametrize("rebuilt", [True, False])
def test_an_executor_with_a_rebuilt_log_leaves_before_it_registers(rebuilt: bool) -> None:
    """The leader re-sends an executor the attempts the state holds RUNNING on it; one of them
    may have run here before the log was lost, and a fresh log would run it again. Leaving first
    makes the leader declare them lost (new execution ids, by the retry policy)."""
    transport = _Recording()
    ex = Executor(
        "127.0.0.1:1",
        "ex1",
        transport=transport,
        execution_log=MemoryExecutionLog(),
        rebuilt=rebuilt,
    )

    async def scenario() -> None:
        stop = asyncio.Event()
        running = asyncio.ensure_future(ex.run(stop))
        await asyncio.wait_for(transport.registered.wait(), 10)
        stop.set()
        await asyncio.wait_for(running, 10)

    asyncio.run(scenario())
    assert transport.calls[0] == ("leave" if rebuilt else "register")
    assert "register" in transport.calls
    assert transport.calls.count("leave") == (1 if rebuilt else 0)


def test_an_execution_log_entry_that_does_not_decode_is_store_damaged(tmp_path: Path) -> None:
    log = LmdbExecutionLog(tmp_path)
    log.insert("t@1/0/1", b"{not json")
    log.close()
    with pytest.raises(StoreDamaged) as caught:
        DedupeLog.open(tmp_path)
    assert caught.value.path == str(tmp_path / "executions" / "data.mdb")
    assert "is not valid JSON" in caught.value.problem


def test_damaged_execution_log_pages_are_store_damaged_at_open(tmp_path: Path) -> None:
    with DedupeLog.open(tmp_path) as log:
        for i in range(3000):
            log.begin(f"t@{i}/0/1")
    with open(tmp_path / "executions" / "data.mdb", "r+b") as f:
        f.write(b"\0" * 2 * PAGE)  # both meta pages
    with pytest.raises(StoreDamaged, match=r"executions/data\.mdb is damaged \(execution log: LMDB: "):
        DedupeLog.open(tmp_path)


def test_an_lmdb_damage_error_while_running_is_kept_as_store_damaged(tmp_path: Path) -> None:
    """A node whose store fails with a damage error mid-run exits 5 with --rebuild, not 3 with
    "free disk space": the store classifies the failure it keeps."""
    store = _filled(tmp_path, 10)
    try:

        def corrupted(point: str) -> None:
            raise lmdb_env.DAMAGE[0]("mdb_page_get: MDB_CORRUPTED: Located page was wrong type")

        store._fault = corrupted
        store.put(b"k000001", b"x")
        with pytest.raises(lmdb_env.Error):
            store.commit(11)
        failure = store.failure()
        assert isinstance(failure, StoreDamaged)
        assert failure.path == str(tmp_path / "state" / "data.mdb")
        assert "MDB_CORRUPTED" in failure.problem

        def full(point: str) -> None:
            raise OSError(28, "No space left on device")

        other = _filled(tmp_path / "other", 10)
        other._fault = full
        other.put(b"k000001", b"x")
        with pytest.raises(OSError):
            other.commit(11)
        assert isinstance(other.failure(), OSError)
        other._fault = None
        other.close()
    finally:
        store._fault = None
        store.close()


def test_status_names_the_replica_whose_content_differs_from_the_majority() -> None:
    assert content_warnings({}) == []
    assert content_warnings({"n1": "aa", "n2": "aa", "n3": "aa"}) == []
    [line] = content_warnings({"n1": "aa", "n2": "bb", "n3": "aa"})
    assert line.startswith("the replicated content of n2 differs from the majority's at the same log index")
    assert line.endswith("restart it with --rebuild")
    [line] = content_warnings({"n1": "aa", "n2": "bb"})
    assert "of n1, n2 disagrees (no majority)" in line


def test_replicas_record_equal_content_sums_per_index(tmp_path: Path) -> None:
    """The per-index checksum a node reports (status ``content_sum_at_index``) is equal on two
    replicas applying the same entries, and moves with every entry."""
    from raftsched.fsm.keys import LOCAL_PREFIX
    from raftsched.fsm.state import SchedulerState
    from raftsched.replica import Replica
    from raftsched.v1 import log_pb2 as logpb

    replicas = []
    for name in ("a", "b"):
        store = LmdbStore(tmp_path / name, map_size=64 << 20, replicated_below=LOCAL_PREFIX)
        state = SchedulerState.load(store)
        replicas.append((store, Replica(state, store, content_sum=store.content_sum)))
    try:
        for index in range(1, 6):
            cmd = logpb.Command(epoch=1, now_ms=1_000 * index, idempotency_key=f"k{index}")
            cmd.executor_join.name = f"ex{index}"
            cmd.executor_join.slots = 2
            data = cmd.SerializeToString()
            for _store, replica in replicas:
                replica.apply_entry(index, data)
                replica.end_of_tick()
        sums = [replica.recent_sums for _store, replica in replicas]
        assert sums[0] == sums[1]
        assert len(set(sums[0].values())) == 6  # index 0 and each entry
        assert all(store.verify().checksum == sums[0][5] for store, _replica in replicas)
    finally:
        for store, _replica in replicas:
            store.close()


def test_a_node_delivers_its_own_store_damaged_alert_to_the_webhooks_that_take_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A follower's damage is seen by no other node, so it is not replicated: the node POSTs it,
    as a follower (its replicated outbox is delivered only by the leader), retrying failures."""
    from raftsched.alerts import delivery
    from raftsched.alerts.config import AlertsConfig, Webhook
    from tests.unit.test_alerts import FakeNode, FakePost, _three_events, fast_backoff

    node = FakeNode(_three_events())
    node.gate.leading = False
    post = FakePost()
    post.fail_next = 2
    hooks = (
        Webhook(url="http://h/a", name="all", secret="k"),
        Webhook(url="http://h/s", name="storage", kinds=frozenset({"store_damaged"})),
        Webhook(url="http://h/r", name="runs", kinds=frozenset({"run_failed"})),
    )

    async def scenario() -> None:
        loop = delivery.AlertLoop(node, AlertsConfig(webhooks=hooks), "prod", post=post, rng=random.Random(0))
        loop.start()
        try:
            loop.raise_node_alert("store_damaged", "n2", "data/n2/state/data.mdb is damaged (...)", 1_000)
            await until(lambda: len(post.received) >= 2, 5, "both webhooks posted")
        finally:
            await loop.stop()

    with fast_backoff(monkeypatch):
        asyncio.run(scenario())
    assert sorted(target for target, _, _ in post.received) == ["all", "storage"]
    body, headers = next((b, h) for t, b, h in post.received if t == "all")
    assert delivery.verify("k", body, headers[delivery.SIGNATURE_HEADER])
    sent = json.loads(body)
    assert sent["kind"] == "store_damaged" and sent["id"] == "n2/store_damaged/1000"
    assert sent["reason"] == "node n2: data/n2/state/data.mdb is damaged (...)"


class _Voter:
    """What ``_Raft._raftsched_may_vote`` reads of the SyncObj."""

    def __init__(self, votes_after: int | None) -> None:
        self._raftsched_votes_after = votes_after
        self.raftLastApplied = 0


def test_a_rebuilt_node_grants_no_vote_until_it_applied_the_first_leaders_commit_index() -> None:
    from raftsched.consensus.pysyncobj.node import _Raft

    may_vote: Callable[[_Voter, dict[str, object]], bool] = _Raft._raftsched_may_vote  # type: ignore[assignment]
    node = _Voter(-1)
    vote = {"type": "request_vote", "term": 9, "last_log_index": 3, "last_log_term": 2}
    assert not may_vote(node, vote)  # no leader heard yet: its log proves nothing
    assert may_vote(node, {"type": "append_entries", "term": 8, "commit_index": 120})
    assert node._raftsched_votes_after == 120
    node.raftLastApplied = 119
    assert not may_vote(node, vote)
    assert may_vote(node, {"type": "append_entries", "term": 8, "commit_index": 130})
    assert node._raftsched_votes_after == 120  # the first leader's index is the bar
    node.raftLastApplied = 120
    assert may_vote(node, vote)
    assert node._raftsched_votes_after is None  # caught up: a voter like any other from now on
    assert may_vote(_Voter(None), vote)


def test_a_node_is_diverged_only_when_a_majority_of_the_answers_disagrees_with_it() -> None:
    from raftsched.rpc.peercheck import Seen, verdict

    assert verdict("n1", Seen(7, {"n1": "aa", "n2": "aa", "n3": "aa"})) == ""
    assert verdict("n1", Seen(7, {"n1": "aa", "n2": "bb", "n3": "aa"})) == ""  # n2 is the odd one
    assert verdict("n1", Seen(7, {"n1": "aa", "n2": "bb"})) == ""  # no majority of two
    assert verdict("n1", Seen(7, {"n1": "aa"})) == ""  # nobody to compare with
    assert verdict("n1", Seen(7, {"n2": "bb", "n3": "bb"})) == ""  # its own is not known there
    why = verdict("n1", Seen(7, {"n1": "aa" * 16, "n2": "bb" * 16, "n3": "bb" * 16}))
    assert why == (
        f"its replicated content at log index 7 differs from that of n2, n3 (checksum {'a' * 12}, "
        f"theirs {'b' * 12})"
    )
    assert verdict("n1", Seen(7, {"n1": "aa", "n2": "bb", "n3": "bb", "n4": "cc", "n5": "aa"})) == ""


def test_peers_that_prune_by_other_retention_settings_are_not_compared() -> None:
    """Apply prunes by each node's retention settings, so a node whose [scheduler] history keep
    differs from its peers' holds other content without being damaged: the check compares only
    with peers reporting the same settings (review of the merged store-damage work: a rolling
    change of history_keep_count marked the first restarted node damaged, for good)."""
    from raftsched.fsm.records import Retention
    from raftsched.rpc.peercheck import PeerCheck, same_settings, verdict

    mine, theirs = Retention().fingerprint(), Retention(keep_count=10).fingerprint()
    assert mine != theirs

    class Check(PeerCheck):
        async def _ask(self, peers: Sequence[tuple[str, str]], index: int) -> list[pb.NodeStatusReply]:
            return [
                pb.NodeStatusReply(
                    node_id=n, applied_index=40, retention=theirs, content_sum_at_index="bb" if index else ""
                )
                for n, _ in peers
            ]

    check = Check(
        "n1", lambda: [("n2", "a:1"), ("n3", "a:2")], lambda: 40, lambda index: "aa", None, retention=mine
    )
    assert asyncio.run(check.look()) is None  # nobody comparable: nothing to judge
    assert asyncio.run(check.check_once()) == ""
    # The same peers with this node's settings outvote it.
    check._retention = theirs
    seen = asyncio.run(check.look())
    assert seen is not None and "differs from that of n2, n3" in verdict("n1", seen)
    # A peer of an older build (no fingerprint) is compared as before.
    same, other = same_settings(
        mine, [pb.NodeStatusReply(node_id="n2"), pb.NodeStatusReply(node_id="n3", retention=theirs)]
    )
    assert [r.node_id for r in same] == ["n2"] and other == ["n3"]


def test_content_is_compared_only_between_nodes_of_one_stored_state_format() -> None:
    # A rolling upgrade across state format 3: the upgraded nodes store the same state in the
    # new format (a different checksum), which is not a divergence; one within a format still is.
    formats = {"n1": 3, "n2": 2, "n3": 2}
    assert content_warnings_by_format({"n1": "cc", "n2": "aa", "n3": "aa"}, formats) == []
    [line] = content_warnings_by_format({"n1": "cc", "n2": "aa", "n3": "bb"}, formats)
    assert "n2, n3" in line


def test_state_digests_are_compared_only_between_nodes_of_one_stored_state_format() -> None:
    from raftsched.cli.cluster import _digest_warnings
    from raftsched.client import ClusterView, NodeView
    from raftsched.v1 import raftsched_pb2 as apipb

    def node(name: str, digest: str, fmt: int) -> NodeView:
        status = apipb.NodeStatusReply(node_id=name, applied_index=7, state_digest=digest, state_format=fmt)
        return NodeView(target=name, status=status)

    mixed = [node("n1", "cc", 3), node("n2", "aa", 2), node("n3", "aa", 2)]
    assert _digest_warnings(ClusterView("", "", 1, 7, tuple(mixed))) == []
    diverged = [node("n1", "cc", 3), node("n2", "aa", 2), node("n3", "bb", 2)]
    assert _digest_warnings(ClusterView("", "", 1, 7, tuple(diverged))) == [
        "nodes at applied index 7 report 2 different state digests"
    ]
