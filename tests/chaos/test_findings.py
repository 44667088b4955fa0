"""Deterministic reproductions of invariant violations the chaos suite found (pure dispatcher on a
real state machine, manual time; pysyncobj's message handler fed messages by hand, no network,
no ticks). Each was fixed; these tests keep them fixed.
"""

from __future__ import annotations

import random
from types import SimpleNamespace

from pysyncobj import SyncObjConf

from raftsched.consensus.pysyncobj.node import _Raft
from raftsched.fsm.effects import BarrierCommitted
from raftsched.fsm.state import SchedulerState
from raftsched.leader.dispatch.dispatcher import Dispatcher, DispatchProposal
from raftsched.leader.dispatch.hub import ExecutorHub
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.leader.gate import LeaderGate
from raftsched.model import TaskSpec
from raftsched.testing.cluster import free_ports
from raftsched.timing.clock import ManualClock
from tests.support.fsm import EVERY_SECOND, T0, S, create, fresh, join, tick

LEASE_MS = 2000


def _step(state: SchedulerState, d: Dispatcher, data: bytes | DispatchProposal, now: int) -> None:
    applied = state.apply(data.encode() if isinstance(data, DispatchProposal) else data)
    d.on_effects(applied.effects, now)


def test_an_attempt_lost_with_its_dead_executor_is_never_resent_when_it_reconnects() -> None:
    """Chaos run: a leader was SIGSTOPped; the new leader assigned attempt 1 to ex1, which was
    still waiting on the paused leader and never got it; ex1 was declared dead (ExecutorLeave:
    attempt 1 lost, attempt 2 queued) while attempt 1's lease had not expired yet; when ex1
    re-registered and opened its stream, ``resend_to`` sent it attempt 1, then attempt 2 was
    assigned to it too: the shard's command ran twice with no executor fault."""
    state = fresh()
    assert create(state, TaskSpec("t", EVERY_SECOND, max_retries=1, command="true")).ok
    assert state.apply(join("ex1", 4)).result.ok
    d = Dispatcher(state, DispatchSettings(lease_ms=LEASE_MS, retry_base_ms=300), random.Random(0))
    d.become_leader(2, T0)  # every member gets a fresh chance plus the takeover grace of one lease
    _step(state, d, tick("t", 1, T0 + S, epoch=2), T0 + S)
    for data in d.poll(T0 + S):
        _step(state, d, data, T0 + S)  # attempt 1 assigned to ex1, lease until T0 + 3 s
    [(_, first)] = d.take_outbox()  # ex1 has no stream to this leader: never delivered
    assert first.execution_id.endswith("/0/1")

    now = T0 + 2 * LEASE_MS + 100  # ex1 silent past the grace: declared dead, attempt 1 lost
    # (never started, so re-placed as attempt 2 without counting as a lost try)
    commands = [c.command for c in d.poll(now)]
    assert [c.executor_leave.name for c in commands if c.WhichOneof("body") == "executor_leave"] == ["ex1"]
    for c in commands:
        _step(state, d, c.SerializeToString(), now)
    run = state.active_run(f"t@{T0 + S}")
    assert run is not None
    assert (run.shards[0].attempt, run.shards[0].lost, run.shards[0].unstarted) == (2, 0, 1)

    _step(state, d, join("ex1", 4, now + 300), now + 300)  # ex1 finds this leader again
    resent = [item.execution_id for item in d.resend_to("ex1", now + 300)]
    assert not [e for e in resent if e.endswith("/0/1")], f"re-sent the lost attempt: {resent}"


def test_a_follower_replaying_its_own_old_barrier_does_not_start_dispatching() -> None:
    """Chaos run: n3 led epochs 2 and 5, was wiped and restarted; replaying the log it applied its
    own old barriers and logged "dispatcher on n3 leads epoch 5" while a follower (n3 led again
    only in epoch 8), so ``require_leader`` passed and the follower accepted an executor's
    Register (the executor saw "write not committed: raft: leader_changed")."""
    state = fresh()
    assert create(state, TaskSpec("t", EVERY_SECOND, command="true")).ok
    driver = SimpleNamespace(leading=False, ready=False, epoch=0)  # what the node knows of its role
    gate = LeaderGate("n3", ManualClock(T0), state, driver, lambda: None, lambda: None)
    follower = SimpleNamespace(node_id="n3", state=state, gate=gate)
    hub = ExecutorHub(follower, Dispatcher(state, DispatchSettings(lease_ms=LEASE_MS), random.Random()))
    hub._on_effects((BarrierCommitted("n3", 5),))  # replayed from the log, the node is a follower
    assert not hub.dispatcher.leading


def test_an_attempt_assigned_before_its_executor_finds_the_new_leader_is_not_lost() -> None:
    """Chaos soak (3 nodes, after a leader SIGSTOP): the new leader took over at 28.30 and at once
    assigned a shard of a no-retry task to ex1, which was still waiting on the paused old leader
    (it followed a follower's stale redirect to it). The attempt's lease counted from the
    assignment and expired at 30.42, 100 ms before ex1 registered: "lease expired: executor ex1
    silent for 2000 ms", the run FAILED and the fire never executed, with no executor fault. The
    takeover grace covered ex1 itself (not declared dead before takeover + 2 leases) but not the
    attempts assigned to it during that grace."""
    state = fresh()
    assert create(state, TaskSpec("t", EVERY_SECOND, max_retries=0, command="true")).ok
    assert state.apply(join("ex1", 4)).result.ok
    d = Dispatcher(state, DispatchSettings(lease_ms=LEASE_MS, retry_base_ms=300), random.Random(0))
    d.become_leader(2, T0)  # ex1 has not found this leader yet
    _step(state, d, tick("t", 1, T0 + S, epoch=2), T0 + S)
    for data in d.poll(T0 + S):
        _step(state, d, data, T0 + S)  # attempt 1 assigned to ex1, which has no stream here yet
    [(_, first)] = d.take_outbox()

    now = T0 + S + LEASE_MS + 100  # a lease after the assignment, inside ex1's takeover grace
    commands = [c.command for c in d.poll(now)]
    lost = [r for c in commands if c.WhichOneof("body") == "report_results" for r in c.report_results.results]
    assert not lost, f"declared lost while its executor was still within the takeover grace: {lost}"

    _step(state, d, join("ex1", 4, now), now)  # ex1 registers and opens its stream
    assert [item.execution_id for item in d.resend_to("ex1", now)] == [first.execution_id]
    run = state.active_run(f"t@{T0 + S}")
    assert run is not None and (run.shards[0].attempt, run.shards[0].lost) == (1, 0)


NO_OP = b"\x01"  # pysyncobj's no-op log entry


def test_a_deposed_leader_never_commits_its_own_uncommitted_entries_on_a_snapshot_chunk() -> None:
    """Chaos soak (5 nodes, the leader n3 partitioned from its followers): n3 kept appending
    entries of its epoch 92 while cut off. After the heal the new leader began sending n3 a
    snapshot; pysyncobj raises a follower's commit index to min(leader's commit, own log end) on
    every append_entries, even a snapshot chunk that verified nothing about the follower's log,
    so n3 committed and applied its own epoch-92 FireBatch. The cluster fired that second in
    epoch 93: replica digests differed (invariant 5, docs/architecture.md §3), and a node whose
    state diverged that way
    later led and dispatched an attempt the cluster never created (a duplicate execution)."""
    ports = free_ports(3)
    raft = _Raft(
        lambda _index, _data: None,
        f"127.0.0.1:{ports[0]}",
        [f"127.0.0.1:{p}" for p in ports[1:]],
        SyncObjConf(autoTick=False),
    )
    try:
        receive = raft._SyncObj__onMessageReceived
        old_leader, new_leader = sorted(raft.otherNodes, key=lambda n: n.address)
        # The old leader (term 1) replicated entries 2-5 here; only entry 2 was committed.
        receive(
            old_leader,
            {
                "type": "append_entries",
                "term": 1,
                "commit_index": 2,
                "prevLogIdx": 1,
                "prevLogTerm": 0,
                "entries": [(NO_OP, i, 1) for i in range(2, 6)],
            },
        )
        assert raft.raftCommitIndex == 2
        # The new leader (term 2, commit index 10, a different log) starts sending a snapshot.
        chunk = (b"first 64 KB of the snapshot", True, False)  # (data, first, last)
        receive(new_leader, {"type": "append_entries", "term": 2, "commit_index": 10, "serialized": chunk})
        receive(new_leader, {"type": "append_entries", "term": 2, "commit_index": 10, "serialized": None})
        assert raft.raftCommitIndex == 2, "committed entries the new leader never verified"
        # A verified append_entries still advances it (and replaces the stale entries 3-5).
        receive(
            new_leader,
            {
                "type": "append_entries",
                "term": 2,
                "commit_index": 3,
                "prevLogIdx": 2,
                "prevLogTerm": 1,
                "entries": [(NO_OP, 3, 2)],
            },
        )
        assert raft.raftCommitIndex == 3
    finally:
        raft.destroy()
