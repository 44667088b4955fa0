"""A barrier that abandons a faulty committed leader time (issue 35 §5): apply only records the
leader's decision, the same on every replica, and it never lowers a task's watermark."""

from __future__ import annotations

from raftsched import codec
from raftsched.fsm import alerts as alerts_mod
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.leader.driver import LeaderDriver
from raftsched.model import CLOCK_FAULT, CronTrigger, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.v1 import log_pb2 as pb

T0 = 1_800_000_000_000
AHEAD = 600_000


def barrier(now: int, epoch: int, fault_ms: int = 0) -> bytes:
    cmd = pb.Command(epoch=epoch, now_ms=now, origin="n2")
    cmd.barrier.node_id = "n2"
    cmd.barrier.clock_fault_ms = fault_ms
    return codec.encode_command(cmd)


def poisoned() -> tuple[SchedulerState, list[bytes]]:
    """A state whose committed leader time is ten minutes ahead (a leader with a stepped clock)."""
    state = SchedulerState.load(MemoryStore())
    spec = TaskSpec("t", CronTrigger("* * * * * *"), command="true")
    log = [
        writes.create_task(spec, disabled=False, now_ms=T0, epoch=1, origin="n1", key="k1"),
        barrier(T0 + AHEAD, 2),  # n1's barrier, stamped with its stepped clock
    ]
    for data in log:
        assert state.apply(data).result.ok
    assert state.max_now_ms == T0 + AHEAD
    return state, log


def clock_faults(state: SchedulerState) -> list[pb.AlertRecord]:
    with state.store.reader() as r:
        return [a for a in alerts_mod.list_alerts(r, 0, 0) if a.kind == CLOCK_FAULT]


def test_a_clock_fault_barrier_takes_the_new_leaders_time_and_raises_one_alert() -> None:
    state, log = poisoned()
    watermark = state.tasks["t"].watermark_ms
    data = barrier(T0 + 1000, 3, fault_ms=T0 + AHEAD)
    assert pb.Command.FromString(data).format == 3
    assert state.apply(data).result.ok
    log.append(data)
    assert state.max_now_ms == T0 + 1000
    assert state.tasks["t"].watermark_ms == watermark  # never lowered
    (alert,) = clock_faults(state)
    assert "599.0 s ahead of the clock of the new leader n2 (epoch 3)" in alert.error
    assert alert.at_ms == T0 + 1000
    # Replayed on a fresh replica: the same state, byte for byte.
    replica = SchedulerState.load(MemoryStore())
    for entry in log:
        replica.apply(entry)
    assert replica.digest() == state.digest() and replica.chain == state.chain


def test_a_barrier_without_the_decision_keeps_the_floor_and_a_stale_decision_changes_nothing() -> None:
    state, _ = poisoned()
    assert state.apply(barrier(T0 + 1000, 3)).result.ok
    assert state.max_now_ms == T0 + AHEAD and not clock_faults(state)
    assert state.apply(barrier(T0 + AHEAD + 5, 4, fault_ms=T0)).result.ok  # not behind: no fault
    assert state.max_now_ms == T0 + AHEAD + 5 and not clock_faults(state)


def test_the_driver_decides_a_fault_only_beyond_max_skew_and_only_with_a_clock_not_known_off() -> None:
    state, _ = poisoned()
    driver = LeaderDriver(state, "n2", max_skew_ms=10_000)
    cmd = pb.Command.FromString(driver.become_leader(3, T0 + AHEAD - 9_000).data)
    assert cmd.barrier.clock_fault_ms == 0 and cmd.now_ms == T0 + AHEAD  # within max_skew: a floor
    cmd = pb.Command.FromString(driver.become_leader(4, T0 + 1000).data)
    assert cmd.barrier.clock_fault_ms == T0 + AHEAD and cmd.now_ms == T0 + 1000
    driver.clock_faulty = lambda: True  # our own clock is the one off: keep the floor
    cmd = pb.Command.FromString(driver.become_leader(5, T0 + 1000).data)
    assert cmd.barrier.clock_fault_ms == 0 and cmd.now_ms == T0 + AHEAD
    driver.on_barrier_committed(5)
    assert driver.poll(T0 + AHEAD + 10_000) == []  # and it plans nothing while its clock is off


def test_a_fault_barrier_decided_against_a_time_already_abandoned_lowers_nothing() -> None:
    """n2 abandoned the faulty time; n3, elected before it applied n2's barrier, saw the faulty
    time too and decided the same. Applied after n2's, n3's barrier must not put leader time
    back below n2's sound time (n3's clock a little behind n2's, within max_skew)."""
    state, _log = poisoned()
    assert state.apply(barrier(T0 + 5000, 3, fault_ms=T0 + AHEAD)).result.ok
    assert state.max_now_ms == T0 + 5000
    late = pb.Command(epoch=4, now_ms=T0 + 4000, origin="n3")
    late.barrier.node_id = "n3"
    late.barrier.clock_fault_ms = T0 + AHEAD  # the time n3 saw: already abandoned
    assert state.apply(codec.encode_command(late)).result.ok
    assert state.max_now_ms == T0 + 5000  # never back in time
    assert len(clock_faults(state)) == 1  # and no second alert


def test_a_driver_whose_store_is_damaged_plans_nothing() -> None:
    drivers = []
    for damaged in (False, True):
        state, _ = poisoned()
        driver = LeaderDriver(state, "n2", max_skew_ms=10_000)
        driver.become_leader(3, T0 + AHEAD)
        driver.on_barrier_committed(3)
        driver.damaged = lambda damaged=damaged: damaged
        drivers.append(driver)
    sound, damaged_one = drivers
    assert sound.poll(T0 + AHEAD + 2_000) != []  # due fires are planned
    assert damaged_one.poll(T0 + AHEAD + 2_000) == []  # a damaged store: nothing, it hands over
