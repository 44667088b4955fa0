"""The applier thread: in-order application off the Raft tick thread, results to proposers."""

from __future__ import annotations

import functools
import threading
import time
from collections.abc import Callable

import pytest

from raftsched.consensus import applier as applier_module
from raftsched.consensus.applier import COMMIT_EVERY, Applier
from raftsched.testing.cluster import wait_until


class Recorder:
    def __init__(self) -> None:
        self.applied: list[int] = []
        self.commits: list[int] = []
        self.threads: set[str] = set()
        self.gate = threading.Event()
        self.gate.set()

    def apply(self, index: int, data: bytes) -> bytes | None:
        self.gate.wait(10)
        self.threads.add(threading.current_thread().name)
        self.applied.append(index)
        return b"r" + data

    def commit(self) -> None:
        self.commits.append(self.applied[-1] if self.applied else 0)


def test_entries_apply_in_order_on_the_applier_thread_and_results_reach_proposers() -> None:
    rec = Recorder()
    applier = Applier(rec.apply, rec.commit)
    applier.start()
    got: dict[int, bytes | None] = {}
    try:
        rec.gate.clear()  # hold the applier so results are awaited, not already stored
        for i in range(1, 6):
            applier.enqueue(i, str(i).encode())
        for i in (2, 5):
            applier.on_result(i, functools.partial(got.__setitem__, i))
        rec.gate.set()
        assert applier.quiesce(10)
        assert rec.applied == [1, 2, 3, 4, 5]
        assert rec.threads == {"raftsched-apply"}
        assert got == {2: b"r2", 5: b"r5"}
        assert rec.commits and rec.commits[-1] == 5  # committed once drained
        # A result asked for after the entry applied is delivered at once.
        late: list[bytes | None] = []
        applier.on_result(3, late.append)
        assert late == [b"r3"]
    finally:
        applier.stop()


def test_a_long_backlog_is_committed_as_it_drains() -> None:
    rec = Recorder()
    applier = Applier(rec.apply, rec.commit)
    rec.gate.clear()
    applier.start()
    try:
        for i in range(1, 3 * COMMIT_EVERY + 1):
            applier.enqueue(i, b"x")
        rec.gate.set()
        assert applier.quiesce(10)
        assert rec.applied == list(range(1, 3 * COMMIT_EVERY + 1))
        assert len(rec.commits) >= 3  # not one giant transaction at the very end
        assert rec.commits[-1] == 3 * COMMIT_EVERY
    finally:
        applier.stop()


def test_reset_drops_entries_covered_by_an_installed_snapshot_and_stop_drains() -> None:
    rec = Recorder()
    applier = Applier(rec.apply, rec.commit)
    rec.gate.clear()
    for i in range(1, 11):
        applier.enqueue(i, b"x")
    applier.reset(7)
    applier.start()
    rec.gate.set()
    wait_until(lambda: applier.backlog == 0, 10)
    applier.stop()
    assert rec.applied == [8, 9, 10]
    assert rec.commits[-1] == 10


def test_a_paused_applier_applies_nothing_until_resumed() -> None:
    """An asynchronous snapshot pauses applying while it copies the store (entries keep queueing)."""
    rec = Recorder()
    applier = Applier(rec.apply, rec.commit)
    applier.start()
    try:
        applier.enqueue(1, b"x")
        assert applier.quiesce(10)
        applier.pause()
        for i in range(2, 6):
            applier.enqueue(i, b"x")
        assert not applier.quiesce(0.2)  # queued, not applied
        assert rec.applied == [1] and applier.backlog == 4
        applier.resume()
        assert applier.quiesce(10)
        assert rec.applied == [1, 2, 3, 4, 5]
        assert rec.commits[-1] == 5
    finally:
        applier.stop()


def test_reset_answers_the_waiters_of_covered_entries_with_an_unknown_outcome() -> None:
    """An installed snapshot covers entries this node never applies: their proposers must not
    wait forever (a deposed leader's fire batches kept its pipeline full: see the driver)."""
    rec = Recorder()
    applier = Applier(rec.apply, rec.commit)
    rec.gate.clear()
    for i in range(1, 11):
        applier.enqueue(i, b"x")
    answers: dict[int, bytes | None] = {}

    def answer(index: int) -> Callable[[bytes | None], None]:
        return lambda res: answers.__setitem__(index, res)

    for i in (5, 7, 9):
        applier.on_result(i, answer(i))
    applier.reset(7)
    assert answers == {5: None, 7: None}  # answered at once; 9 is still to be applied
    applier.start()
    rec.gate.set()
    wait_until(lambda: 9 in answers, 10, what="entry 9's result")
    applier.stop()
    assert answers[9] is not None and rec.applied == [8, 9, 10]


def test_the_applier_yields_between_the_entries_of_a_backlog(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each entry's apply holds the state lock; taking it again at once for the next entry starved
    the leader's readers (its event loop, the fire planner) for seconds while a backlog drained.
    The applier gives the GIL away after every entry, so a woken reader takes the lock."""
    events: list[str] = []
    monkeypatch.setattr(applier_module, "yield_to_readers", lambda: events.append("yield"))

    def apply(index: int, data: bytes) -> bytes | None:
        events.append(f"apply {index}")
        return None

    applier = Applier(apply, lambda: None)
    for i in range(1, 5):
        applier.enqueue(i, b"x")  # queued before the thread starts: one backlog
    applier.start()
    try:
        wait_until(lambda: "apply 4" in events, 10, what="the backlog applied")
    finally:
        applier.stop()
    applies = [i for i, e in enumerate(events) if e.startswith("apply")]
    assert [events[i] for i in applies] == ["apply 1", "apply 2", "apply 3", "apply 4"]
    assert all(events[i + 1] == "yield" for i in applies[:-1])


def test_a_reader_takes_the_state_lock_while_a_backlog_drains() -> None:
    """The behaviour the yield is for: a reader waiting for the lock the applies hold gets it
    before the backlog (200 entries of 5 ms each, 1 s) has drained."""
    lock = threading.Lock()
    applied: list[int] = []

    def apply(index: int, data: bytes) -> bytes | None:
        with lock:
            end = time.perf_counter() + 0.005
            while time.perf_counter() < end:  # the lock held as an apply holds it (busy)
                pass
            applied.append(index)
        return None

    applier = Applier(apply, lambda: None)
    for i in range(1, 201):
        applier.enqueue(i, b"x")
    applier.start()
    try:
        wait_until(lambda: len(applied) >= 2, 10, what="the backlog to start draining")
        with lock:
            seen = len(applied)
    finally:
        applier.stop()
    assert seen < 200, "the reader waited until the whole backlog was applied"
