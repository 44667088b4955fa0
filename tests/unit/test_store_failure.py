"""A store that cannot take writes stops applying on this node; a restart replays and catches up.

The failures go through the real code path: the LMDB store's injectable commit fault (a full
disk: ``OSError(ENOSPC)``), and a real LMDB map that is too small (``MapFullError``).
"""

from __future__ import annotations

import errno
import logging
from pathlib import Path

import pytest

from raftsched.abc import StoreFailed
from raftsched.config.load import parse_config
from raftsched.config.types import StorageSettings
from raftsched.config.values import parse_map_size, parse_size
from raftsched.consensus.applier import Applier
from raftsched.errors import ConfigError, InvalidSpec
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.model import ManualTrigger, TaskSpec
from raftsched.replica import Replica
from raftsched.storage.lmdb_execlog import LmdbExecutionLog
from raftsched.storage.lmdb_store import LmdbStore, StoreUsage
from raftsched.testing.cluster import wait_until

T0 = 1_700_000_040_000


def add_task(i: int, payload: int = 0) -> bytes:
    spec = TaskSpec(name=f"t{i}", trigger=ManualTrigger(), command=f"echo {'x' * payload}")
    return writes.create_task(spec, disabled=False, now_ms=T0 + i, epoch=1, origin="n1", key="")


class DiskFull:
    """The commit fault: raises ENOSPC once armed."""

    def __init__(self) -> None:
        self.armed = False

    def __call__(self, op: str) -> None:
        if self.armed:
            raise OSError(errno.ENOSPC, "No space left on device")


def run_applier(replica: Replica, entries: list[bytes]) -> tuple[Applier, list[BaseException]]:
    fatal: list[BaseException] = []
    applier = Applier(replica.apply_entry, replica.end_of_tick, on_fatal=fatal.append)
    applier.start()
    for i, data in enumerate(entries, start=1):
        applier.enqueue(i, data)
    return applier, fatal


def digest_after(path: Path, entries: list[bytes]) -> tuple[str, int]:
    with LmdbStore(path, sync=False) as store:
        state = SchedulerState.load(store)
        replica = Replica(state, store)
        applier, fatal = run_applier(replica, entries)
        assert applier.quiesce(30)
        applier.stop()
        assert not fatal
        return state.digest(), store.applied_index()


def test_a_disk_full_commit_stops_the_applier_and_a_restart_catches_up(tmp_path: Path) -> None:
    entries = [add_task(i) for i in range(1, 41)]
    fault = DiskFull()
    store = LmdbStore(tmp_path / "n1", sync=False, fault=fault)
    state = SchedulerState.load(store)
    replica = Replica(state, store)
    applier, fatal = run_applier(replica, entries[:20])
    assert applier.quiesce(30)
    assert store.applied_index() == 20
    fault.armed = True
    results: list[bytes | None] = []
    for i, data in enumerate(entries[20:], start=21):
        applier.enqueue(i, data)
        applier.on_result(i, results.append)
    wait_until(lambda: bool(fatal), 10, what="the applier reports the store failure")
    assert isinstance(fatal[0], StoreFailed)
    assert isinstance(fatal[0].cause, OSError) and fatal[0].cause.errno == errno.ENOSPC
    assert applier.failed is fatal[0]
    assert not applier.quiesce(1)  # a snapshot must never copy a store that fell behind
    # Every waiting proposer is answered (the entries are committed in Raft: their results hold
    # cluster-wide); later entries are not applied here at all.
    wait_until(lambda: len(results) == 20, 10, what="every waiting proposer is answered")
    applier.enqueue(99, add_task(99))
    assert applier.backlog == 0
    assert isinstance(store.failure(), OSError)
    applier.stop()
    assert store.applied_index() == 20  # nothing past the last good commit claims to be stored
    store.close()

    # The operator frees space; the restart replays the log from the store's index.
    with LmdbStore(tmp_path / "n1", sync=False) as reopened:
        assert reopened.failure() is None
        assert reopened.applied_index() == 20
        state = SchedulerState.load(reopened)
        replica = Replica(state, reopened)
        applier, fatal = run_applier(replica, entries)  # the whole log; 1..20 are skipped
        assert applier.quiesce(30)
        applier.stop()
        assert not fatal
        assert replica.entries_skipped == 20
        caught_up = state.digest(), reopened.applied_index()
    assert caught_up == digest_after(tmp_path / "control", entries)
    assert caught_up[1] == 40


def test_a_full_map_stops_the_applier_and_a_bigger_map_catches_up(tmp_path: Path) -> None:
    entries = [add_task(i, payload=300) for i in range(1, 801)]
    small = 256 << 10
    store = LmdbStore(tmp_path / "n1", map_size=small, sync=False)
    state = SchedulerState.load(store)
    replica = Replica(state, store)
    applier, fatal = run_applier(replica, entries)
    wait_until(lambda: bool(fatal), 30, what="the map fills")
    assert isinstance(fatal[0], StoreFailed)
    assert "MapFull" in type(fatal[0].cause).__name__
    applier.stop()
    stopped_at = store.applied_index()
    assert 0 < stopped_at < len(entries)
    store.close()
    with LmdbStore(tmp_path / "n1", map_size=64 << 20, sync=False) as bigger:
        assert bigger.applied_index() == stopped_at
        state = SchedulerState.load(bigger)
        replica = Replica(state, bigger)
        applier, fatal = run_applier(replica, entries)
        assert applier.quiesce(30)
        applier.stop()
        assert not fatal
        caught_up = state.digest(), bigger.applied_index()
    assert caught_up == digest_after(tmp_path / "control", entries)


def test_usage_reports_the_fill_level_and_warns_past_80_percent(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    with LmdbStore(tmp_path, map_size=1 << 20, sync=False) as store:
        usage = store.usage()
        assert isinstance(usage, StoreUsage)
        assert usage.map_bytes == 1 << 20
        assert 0 < usage.used_bytes < usage.map_bytes
        caplog.set_level(logging.WARNING, logger="raftsched.storage.lmdb_store")
        for i in range(200):
            store.put(b"k%05d" % i, b"v" * 4000)
            store.commit(i + 1)
            store._next_usage_check = 0.0  # check on every commit here, not every few seconds
        assert store.usage().fraction >= 0.8
        warnings = [r for r in caplog.records if "full" in r.getMessage()]
        assert len(warnings) == 1  # rate-limited: once a minute at most
        assert "storage.map_size" in warnings[0].getMessage()


def test_sizes_parse_with_units_and_refuse_clearly() -> None:
    assert parse_size("64GiB") == 64 << 30
    assert parse_size("512MiB") == 512 << 20
    assert parse_size("1.5GB") == 1_500_000_000
    assert parse_size("4096") == parse_size(4096) == 4096
    assert parse_size("2 kib") == 2048
    for bad, why in [
        ("64 gigs", "is not a size"),
        ("1.3B", "whole number of bytes"),
        (True, "got boolean"),
        (1.5, "got float"),
        (-1, "must not be negative"),
        ("", "is not a size"),
    ]:
        with pytest.raises(InvalidSpec, match=why):
            parse_size(bad, "storage.map_size")
    with pytest.raises(InvalidSpec, match="between 256KiB and 1PiB"):
        parse_map_size("1KiB", "executor.map_size")


def test_storage_map_size_in_the_cluster_config(tmp_path: Path) -> None:
    base = {
        "cluster": {"secret": "s" * 32},
        "nodes": [{"id": "n1", "raft": "127.0.0.1:7001", "grpc": "127.0.0.1:7101", "data_dir": "d1"}],
    }
    assert parse_config(base, base_dir=tmp_path).storage == StorageSettings()
    assert StorageSettings().map_size == 64 << 30
    cfg = parse_config({**base, "storage": {"map_size": "512MiB"}}, base_dir=tmp_path)
    assert cfg.storage.map_size == 512 << 20
    with pytest.raises(ConfigError) as info:
        parse_config({**base, "storage": {"map_size": "lots", "mapsize": 1}}, base_dir=tmp_path)
    assert any(p.startswith("storage.map_size: 'lots' is not a size") for p in info.value.problems)
    assert any(
        p.startswith("storage.mapsize: unknown key (did you mean 'map_size'?)") for p in info.value.problems
    )
    with pytest.raises(ConfigError, match="between 256KiB and 1PiB"):
        parse_config({**base, "storage": {"map_size": 1024}}, base_dir=tmp_path)


def test_the_execution_log_reports_usage_and_warns_on_flush(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.WARNING, logger="raftsched.storage.lmdb_execlog")
    with LmdbExecutionLog(tmp_path, map_size=1 << 20, sync=False) as execlog:
        assert execlog.usage().map_bytes == 1 << 20
        execlog.flush()
        assert not caplog.records
        i = 0
        while execlog.usage().fraction < 0.8:
            execlog.insert_many([(f"e{i}-{j}", b"v" * 2000) for j in range(10)])
            i += 1
        execlog.flush()
        execlog.flush()
    warnings = [r.getMessage() for r in caplog.records]
    assert len(warnings) == 1 and "--map-size" in warnings[0], warnings
