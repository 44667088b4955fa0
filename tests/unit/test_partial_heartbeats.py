"""Heartbeats carrying only changes (issue 31 P2): an early heartbeat, sent because attempts
started, lists only those attempts, to a leader that says it takes them; the full heartbeat
still goes every heartbeat interval and first to every leader. Both directions of an upgrade:
a new executor with an older leader (no ``partial_heartbeats`` in its RegisterReply) sends only
full heartbeats; the leader takes a partial one without treating what it does not list as
unheld."""

from __future__ import annotations

import asyncio

from raftsched.executor.agent import Executor
from raftsched.executor.memory import LoopbackEndpoint, MemoryTransport
from raftsched.executor.runners import AttemptContext
from raftsched.storage.memory import MemoryExecutionLog
from raftsched.v1 import raftsched_pb2 as pb
from tests.unit.test_dispatcher import SETTINGS
from tests.unit.test_dispatcher import term as term_of
from tests.unit.test_dispatcher_overlap_hold import TAKEOVER, inherited


def work(i: int) -> pb.WorkItem:
    return pb.WorkItem(
        execution_id=f"t@{i}/0/1", run_id=f"t@{i}", task="t", handler="block", attempt=1, epoch=1
    )


def heartbeats_while_starting(partial_heartbeats: bool) -> list[pb.HeartbeatRequest]:
    """An executor with a 10 s heartbeat interval (so every heartbeat after the first is an early
    one) starts 3 attempts, then 2 more, which block until the end; its heartbeats."""
    endpoint = LoopbackEndpoint(heartbeat_ms=10_000, lease_ms=30_000, partial_heartbeats=partial_heartbeats)
    ex = Executor(
        "loopback:1", "ex1", slots=10, transport=MemoryTransport(endpoint), execution_log=MemoryExecutionLog()
    )
    release = asyncio.Event()

    @ex.handler("block")
    async def block(ctx: AttemptContext) -> None:
        await release.wait()

    async def scenario() -> None:
        async with endpoint.serving(ex):
            await endpoint.until(lambda: len(endpoint.heartbeats) >= 1)  # the first one
            endpoint.push("ex1", [work(i) for i in range(3)])
            await endpoint.until(lambda: {"t@2/0/1"} <= {e for h in endpoint.heartbeats for e in h.started})
            endpoint.push("ex1", [work(i) for i in range(3, 5)])
            await endpoint.until(lambda: {"t@4/0/1"} <= {e for h in endpoint.heartbeats for e in h.started})
            release.set()
            await endpoint.until(lambda: len(endpoint.reports) == 5)

    asyncio.run(scenario())
    return list(endpoint.heartbeats)


def test_early_heartbeats_list_only_the_attempts_started_since_the_last_one() -> None:
    beats = heartbeats_while_starting(partial_heartbeats=True)
    assert not beats[0].partial and list(beats[0].running) == []  # the first one: full
    early = beats[1:]
    assert early and all(h.partial for h in early), beats
    listed = [e for h in early for e in h.running]
    assert sorted(listed) == [f"t@{i}/0/1" for i in range(5)]  # each start once, nothing else
    assert all(list(h.running) == list(h.started) and not h.finished for h in early)


def test_an_older_leader_gets_only_full_heartbeats() -> None:
    beats = heartbeats_while_starting(partial_heartbeats=False)
    assert len(beats) >= 2 and not any(h.partial for h in beats)
    # The last full heartbeat lists every attempt held, started or not (as before).
    assert {f"t@{i}/0/{1}" for i in range(5)} <= {e for h in beats for e in h.running}
    assert len(beats[-1].running) == 5


def test_a_partial_heartbeat_renews_and_marks_started_what_it_lists_and_confirms_nothing() -> None:
    _, d, executor, exec_id = inherited()
    t = term_of(d)
    lease = t.holdings.leases[exec_id]
    # A partial heartbeat that does not list the inherited attempt: not taken as unheld.
    assert d.heartbeat(executor, [], TAKEOVER + 100, started=[], partial=True)
    assert d.take_outbox() == [] and t.takeover.resent_unheld == 0
    assert executor in t.liveness.unconfirmed
    # One that lists it renews its lease and says it started.
    assert d.heartbeat(executor, [exec_id], TAKEOVER + 200, started=[exec_id], partial=True)
    assert lease.expires_ms == TAKEOVER + 200 + SETTINGS.lease_ms and lease.started is True
    assert executor in t.liveness.unconfirmed  # only a full heartbeat confirms what it holds
    # The full heartbeat that does not list it: sent again at once, as before.
    other = "ex1" if executor != "ex1" else "ex2"
    assert d.heartbeat(other, [], TAKEOVER + 250, started=[])
    d.take_outbox()
    assert d.heartbeat(executor, [], TAKEOVER + 300, started=[])
    [(to, item)] = d.take_outbox()
    assert (to, item.execution_id) == (executor, exec_id)
