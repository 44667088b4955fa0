"""A leader's tick is paced by its appends (patches.py: leader-tick-pacing): an append carries
every proposal made before its tick, and a leader sends on time whatever the tick bound is."""

from __future__ import annotations

import itertools
import statistics
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from pysyncobj import SyncObjConf, syncobj

from raftsched.abc import Leadership, ProposeError
from raftsched.config.types import RaftTuning
from raftsched.consensus.pysyncobj.node import PySyncObjNode, _Raft
from raftsched.testing.cluster import free_ports, wait_until


def _appends(raft: _Raft) -> list[tuple[float, Any]]:
    """Record every append_entries ``raft`` sends (when, to whom, what): a spy on its transport."""
    sent: list[tuple[float, Any]] = []
    transport = raft._SyncObj__transport
    send = transport.send

    def spy(node: Any, message: Any) -> bool:
        if isinstance(message, dict) and message.get("type") == "append_entries":
            sent.append((time.monotonic(), (str(node.address), dict(message))))
        return bool(send(node, message))

    transport.send = spy
    return sent


@pytest.fixture
def manual() -> Iterator[list[_Raft]]:
    """Three SyncObj nodes on loopback, ticked by the test (no tick thread)."""
    ports = free_ports(3)
    addrs = [f"127.0.0.1:{p}" for p in ports]
    conf = {"autoTick": False, "appendEntriesPeriod": 0.02, "raftMinTimeout": 0.3, "raftMaxTimeout": 0.6}
    nodes = [_Raft(lambda _i, _d: None, a, [o for o in addrs if o != a], SyncObjConf(**conf)) for a in addrs]
    yield nodes
    for n in nodes:
        n.destroy()


def _tick_all(nodes: list[_Raft]) -> None:
    for n in nodes:
        n.doTick(0.001)


def _caught_up_leader(manual: list[_Raft]) -> _Raft:
    def caught_up() -> _Raft | None:
        _tick_all(manual)
        leaders = [n for n in manual if n.leads()]
        if len(leaders) != 1 or any(n.raftLastApplied < leaders[0].raftCommitIndex for n in manual):
            return None
        return leaders[0] if leaders[0].raftCommitIndex > 0 else None

    return wait_until(caught_up, 30, 0.0, "a leader whose followers applied its no-op")


def test_an_append_carries_the_proposals_made_before_its_tick(manual: list[_Raft]) -> None:
    leader = _caught_up_leader(manual)
    sent = _appends(leader)
    leader.propose_entry(b"proposed-before-the-tick", lambda _r, _e: None)
    leader._SyncObj__newAppendEntriesTime = 0.0  # this tick sends the appends
    leader.doTick(0.001)
    carried = [
        entry
        for _at, (_to, message) in sent
        for entry in message.get("entries", [])
        if b"proposed-before-the-tick" in entry[0]
    ]
    assert len(sent) == 2, sent  # one append to each follower, in this tick
    assert len(carried) == 2  # both carry the entry proposed before the tick


# pysyncobj's clock behind time.monotonic (as on the dev machine) or ahead of it (less than the
# leader's 30 s fallback timeout here, or it would step down).
@pytest.mark.parametrize("shift", [-1000.0, 10.0])
def test_a_leader_waits_until_its_next_append_by_pysyncobj_s_own_clock(
    manual: list[_Raft], monkeypatch: pytest.MonkeyPatch, shift: float
) -> None:
    """pysyncobj times its appends with its own clock (``pysyncobj.monotonic``: CLOCK_MONOTONIC_RAW
    on Linux), which drifts from ``time.monotonic`` (NTP-slewed CLOCK_MONOTONIC) with uptime: on
    the dev machine it was 0.256 s behind after 18 h. Reading the deadline against
    ``time.monotonic`` made the wait wrong by that much: always "overdue" (a whole append period
    from whenever the tick started: appends up to a period late) when pysyncobj's clock is behind,
    always the full tick bound when it is ahead (0.5 s here: appends every 0.5 s)."""
    leader = _caught_up_leader(manual)
    raw = syncobj.monotonicTime
    monkeypatch.setattr(syncobj, "monotonicTime", lambda: raw() + shift)
    waits: list[float] = []
    poll = leader._poller.poll

    def spy(timeout: float) -> None:
        waits.append(timeout)
        poll(0)

    monkeypatch.setattr(leader._poller, "poll", spy)
    leader._SyncObj__newAppendEntriesTime = syncobj.monotonicTime() + 0.012  # due in 12 ms
    leader.doTick(0.5)
    assert len(waits) == 1 and 0 < waits[0] <= 0.012, waits  # (was 0.02 behind, 0.5 ahead)


@pytest.fixture
def slow_tick(tmp_path: Path) -> Iterator[dict[str, PySyncObjNode]]:
    """Three nodes whose tick bound (``raft.auto_tick_period``) is 25 append periods long."""
    ports = free_ports(3)
    addrs = {f"n{i}": f"127.0.0.1:{p}" for i, p in enumerate(ports, 1)}
    tuning = RaftTuning(
        append_entries_period=0.02,
        auto_tick_period=0.5,
        # Election timeouts well above the tick: a stall of this loaded test process must not
        # depose the leader (the assertions are about when appends leave, not about elections).
        raft_min_timeout=1.0,
        raft_max_timeout=2.0,
        connection_timeout=3.0,
        connection_retry_time=0.3,
        leader_fallback_timeout=3.0,
    )
    leaderships: list[Leadership] = []
    nodes = {
        n: PySyncObjNode(
            n,
            a,
            [o for o in addrs.values() if o != a],
            "tick-pacing-test-secret-0123456789",
            tmp_path / n,
            tuning,
            apply_fn=lambda _i, _d: b"",
            on_tick=lambda: None,
            on_leadership=leaderships.append,
            write_snapshot=lambda _f: None,
            load_snapshot=lambda _p, _o: None,
            applied_index=lambda: 0,
            addr_to_id={a: n for n, a in addrs.items()}.get,
        )
        for n, a in addrs.items()
    }
    yield nodes
    for node in nodes.values():
        node.destroy()


def test_a_leader_sends_its_appends_on_time_with_a_long_tick(slow_tick: dict[str, PySyncObjNode]) -> None:
    def one_leader() -> PySyncObjNode | None:
        leaders = [n for n in slow_tick.values() if n.is_leader()]
        if len(leaders) != 1 or any(n.leader_id() != leaders[0].node_id for n in slow_tick.values()):
            return None
        return leaders[0]

    leader = wait_until(one_leader, 60, 0.02, "one leader every node follows")
    sent = _appends(leader._raft)
    took: list[float] = []
    errors: list[ProposeError | None] = []
    for i in range(10):
        done = threading.Event()

        def answered(_result: bytes | None, error: ProposeError | None, done: threading.Event = done) -> None:
            errors.append(error)
            done.set()

        start = time.monotonic()
        leader.propose(b"entry %d" % i, answered)
        assert done.wait(10), "a proposal was not answered"
        took.append(time.monotonic() - start)
    assert errors == [None] * 10
    to_one = [at for at, (to, _m) in sent if to == sorted({to for _a, (to, _m) in sent})[0]]
    gaps = [b - a for a, b in itertools.pairwise(to_one)]
    # A tick of 0.5 s: before the pacing, a leader sent every 0.5 s (its deadline passed while it
    # waited) and a proposal waited for a tick to be taken in, then for the append after it.
    assert statistics.median(gaps) < 0.1, gaps
    assert statistics.median(took) < 0.25, took
