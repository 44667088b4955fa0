"""raftsched/leader/window.py: when the leader's firing path is busy, and who is told it closed;
and the driver's thread keeping it (DriverThread publishes after every step)."""

from __future__ import annotations

import threading

import pytest

from raftsched.abc import CommitHook, ProposeCallback
from raftsched.leader.driver import DriverThread
from raftsched.leader.window import FiringWindow
from raftsched.model import CronTrigger, Overlap, TaskSpec
from raftsched.testing.cluster import wait_until
from raftsched.timing.clock import ManualClock
from raftsched.v1 import log_pb2 as pb
from tests.unit.test_driver import T0, leader_with


def test_a_window_is_busy_from_its_lead_before_a_batch_until_nothing_is_in_flight() -> None:
    window = FiringWindow(lead_ms=20)
    assert not window.busy(T0)  # a follower (nothing due): never busy
    window.publish(T0 + 1000, 0)
    assert not window.busy(T0 + 979)
    assert window.busy(T0 + 980) and window.busy(T0 + 1000)
    assert window.busy(T0 + 1005)  # due, not yet proposed
    window.publish(T0 + 2000, 1)  # proposed: busy until its commit
    assert window.busy(T0 + 1010)
    window.publish(T0 + 2000, 0)
    assert not window.busy(T0 + 1010)
    with pytest.raises(ValueError, match="lead_ms"):
        FiringWindow(lead_ms=-1)


def test_listeners_hear_when_the_window_may_have_closed_and_only_then() -> None:
    window = FiringWindow()
    heard: list[int] = []
    window.on_open(lambda: heard.append(1))
    window.publish(T0 + 1000, 0)  # the first due time: nothing was open
    window.publish(T0 + 1000, 0)  # unchanged
    window.publish(T0 + 1000, 1)  # proposed
    assert heard == []
    window.publish(T0 + 2000, 0)  # committed
    assert heard == [1]
    window.publish(T0 + 1500, 0)  # earlier: busier, not freer
    assert heard == [1]
    window.publish(None, 0)  # stepped down
    assert heard == [1, 1]


def test_the_driver_thread_keeps_the_window_busy_until_its_batch_commits() -> None:
    every_second = CronTrigger("* * * * * *")
    specs = [TaskSpec(f"t{i}", every_second, overlap=Overlap.ALLOW, command="x") for i in range(3)]
    driver = leader_with(specs, T0 - 500)
    clock = ManualClock(T0 + 40)
    window = FiringWindow(lead_ms=20)
    held: list[tuple[bytes, ProposeCallback, CommitHook | None]] = []
    lock = threading.Lock()
    thread: DriverThread

    def propose(data: bytes, done: ProposeCallback, committed: CommitHook | None) -> None:
        cmd = pb.Command.FromString(data)
        if cmd.WhichOneof("body") != "fire_batch":
            applied = driver.state.apply(data)
            thread.effects_applied(applied.effects)
            done(applied.encode(), None)
            return
        with lock:
            held.append((data, done, committed))  # committed when the test says so

    opened = threading.Event()
    window.on_open(opened.set)
    thread = DriverThread(driver, clock, propose, max_sleep_s=0.05, window=window)
    thread.start()
    try:
        thread.leadership_changed(True, 1)
        wait_until(lambda: bool(held), 10, what="the due batch proposed")
        wait_until(lambda: window.in_flight == 1, 10, what="the window to see it in flight")
        assert window.busy(clock.now_ms())
        assert not opened.is_set()
        with lock:
            data, done, committed = held.pop()
        applied = driver.state.apply(data)
        if committed is not None:
            committed()
        done(applied.encode(), None)
        thread.effects_applied(applied.effects)
        wait_until(opened.is_set, 10, what="the window to open at the commit")
        wait_until(lambda: not window.busy(clock.now_ms()), 10, what="idle until the next second")
        assert window.next_due_ms == T0 + 1000  # the next batch: busy again from its lead
        assert window.busy(T0 + 980)
    finally:
        thread.stop()
