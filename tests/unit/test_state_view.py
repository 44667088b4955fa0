"""Other threads read the replicated state through one path, :meth:`SchedulerState.view`.

The race test runs executor joins and leaves on an "applier" thread (as the node's applier does,
through ``SchedulerState.apply``) against a dispatcher on another thread that rebuilds its ring
and places attempts, with the interpreter switching threads every few microseconds. Before the
view, ``Dispatcher._rebuild_ring`` walked ``state.executors`` unlocked and a join in the middle
of that walk raised ``RuntimeError: dictionary changed size during iteration``.
"""

from __future__ import annotations

import random
import sys
import threading
import time
from collections.abc import Iterator

import pytest

from raftsched import codec
from raftsched.fsm.effects import AttemptReady, Effect, ExecutorChanged
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.model import Overlap, TaskSpec
from raftsched.replica import Replica
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as logpb
from tests.support.fsm import EVERY_SECOND, T0, S, create, fresh, join, leave, tick

# Executors that joined and left: the table the dispatcher walks is long, its ring short.
GONE = 3000
LIVE = 4


@pytest.fixture
def fast_switching() -> Iterator[None]:
    """Switch threads every 5 us (the default is 5 ms): a walk of a few thousand entries is then
    interrupted many times, so a race shows on nearly every run."""
    before = sys.getswitchinterval()
    sys.setswitchinterval(5e-6)
    try:
        yield
    finally:
        sys.setswitchinterval(before)


def _cluster() -> SchedulerState:
    state = fresh()
    assert create(state, TaskSpec("t", EVERY_SECOND, shards=8, timeout_ms=0, command="true")).ok
    for i in range(GONE):
        assert state.apply(join(f"gone{i:05d}", 2)).result.ok
        assert state.apply(leave(f"gone{i:05d}", T0)).result.ok
    for i in range(LIVE):
        assert state.apply(join(f"live{i}", 2)).result.ok
    return state


def test_joins_and_leaves_on_the_applier_thread_never_break_a_busy_dispatcher(fast_switching: None) -> None:
    state = _cluster()
    d = Dispatcher(state, DispatchSettings(), random.Random(1))
    d.become_leader(1, T0)
    d.on_effects(state.apply(tick("t", 1, T0 + S)).effects, T0 + S)  # 8 attempts wait for a slot
    stop = threading.Event()
    applied = [0]
    failures: list[BaseException] = []

    def applier() -> None:
        # New executors join and leave: the table grows while the dispatcher reads it.
        try:
            i = 0
            while not stop.is_set():
                name = f"churn{i:06d}"
                state.apply(join(name, 2, T0 + S))
                state.apply(leave(name, T0 + S))
                applied[0] += 2
                i += 1
        except BaseException as exc:  # reported by the main thread
            failures.append(exc)

    thread = threading.Thread(target=applier, name="test-applier", daemon=True)
    thread.start()
    rounds = 0
    # Race for 2 s, and on past them until both sides have done 20 rounds (a loaded machine gave
    # the dispatcher 7 in 2 s); the deadline only bounds a stuck run.
    started = time.monotonic()

    def racing() -> bool:
        elapsed = time.monotonic() - started
        return elapsed < 2.0 or (elapsed < 60.0 and (rounds < 20 or applied[0] < 20))

    try:
        while racing() and not failures:
            # What the hub does when an ExecutorChanged effect arrives, then a dispatch tick.
            d.on_effects([ExecutorChanged("live0", True)], T0 + S)
            for proposal in d.poll(T0 + S):
                d.release(proposal)  # not proposed: the attempts may be placed again
            rounds += 1
    finally:
        stop.set()
        thread.join(timeout=10)
    assert not failures, failures
    assert rounds >= 20 and applied[0] >= 20, (rounds, applied[0])
    d.on_effects([ExecutorChanged("live0", True)], T0 + S)
    assert d.members == frozenset(f"live{i}" for i in range(LIVE))  # every churned one left


def test_a_view_is_usable_only_inside_its_block() -> None:
    state = fresh()
    assert state.apply(join("ex1")).result.ok
    with state.view() as v:
        assert v.executor("ex1") is not None
        assert v.placeable_executors() == {"ex1": 4}
    with pytest.raises(RuntimeError, match="outside"):
        v.executor("ex1")


def _barrier(node_id: str, now: int, epoch: int) -> bytes:
    cmd = logpb.Command(epoch=epoch, now_ms=now, origin=node_id)
    cmd.barrier.node_id = node_id
    return codec.encode_command(cmd)


def test_the_applier_builds_leader_effects_from_its_own_barrier_to_another_nodes() -> None:
    """Leader effects are an argument of apply, chosen on the applier thread from the log: off
    on a node whose barrier was never applied, on after its own barrier, off again after another
    node's. No other thread writes anything the applier reads to decide it."""
    store = MemoryStore()
    state = SchedulerState.load(store)
    replica = Replica(state, store, node_id="n1")
    entries = iter(range(1, 100))

    def ready_after(data: bytes) -> int:
        out: list[Effect] = []
        replica.effect_sink = out.extend
        replica.apply_entry(next(entries), data)
        return sum(isinstance(e, AttemptReady) for e in out)

    spec = TaskSpec("t", EVERY_SECOND, timeout_ms=0, command="true", overlap=Overlap.ALLOW)
    ready_after(writes.create_task(spec, disabled=False, now_ms=T0, epoch=1, origin="n1", key=""))
    assert not replica.leads
    assert ready_after(tick("t", 1, T0 + S)) == 0  # a follower: no attempt to place
    assert ready_after(_barrier("n1", T0 + S, 2)) == 0 and replica.leads
    assert ready_after(tick("t", 1, T0 + 2 * S, epoch=2)) == 1  # its own barrier applied: it leads
    assert ready_after(_barrier("n2", T0 + 2 * S, 3)) == 0 and not replica.leads
    assert ready_after(tick("t", 1, T0 + 3 * S, epoch=3)) == 0  # another node leads now
    assert state.active_run(f"t@{T0 + 3 * S}") is not None  # the run exists all the same


def test_a_read_barrier_leaves_the_leaders_effects_on() -> None:
    """A read barrier (an empty ``node_id``, leader/reads.py) is no takeover: the leader that
    proposed it keeps building effects. (Merged from two branches, a read barrier once turned
    the leader's own effects off, and its dispatch stopped.)"""
    store = MemoryStore()
    state = SchedulerState.load(store)
    replica = Replica(state, store, node_id="n1")
    entries = iter(range(1, 100))

    def ready_after(data: bytes) -> int:
        out: list[Effect] = []
        replica.effect_sink = out.extend
        replica.apply_entry(next(entries), data)
        return sum(isinstance(e, AttemptReady) for e in out)

    spec = TaskSpec("t", EVERY_SECOND, timeout_ms=0, command="true", overlap=Overlap.ALLOW)
    ready_after(writes.create_task(spec, disabled=False, now_ms=T0, epoch=1, origin="n1", key=""))
    ready_after(_barrier("n1", T0 + S, 2))
    read = logpb.Command(epoch=2, now_ms=T0 + S, origin="n1")
    read.barrier.read_by = "n1"
    ready_after(codec.encode_command(read))
    assert replica.leads
    assert ready_after(tick("t", 1, T0 + 2 * S, epoch=2)) == 1
