"""The leader driver's planning: in-place FireBatch building equals plan_fires, entries stay small."""

from __future__ import annotations

import copy
import threading

import pytest

from raftsched import codec
from raftsched.abc import CommitHook, ProposeCallback
from raftsched.fsm.effects import FiresWanted
from raftsched.fsm.state import SchedulerState
from raftsched.leader import writes
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.leader.driver import MAX_ENTRY_BYTES, BatchBuilder, DriverThread, LeaderDriver, Proposal
from raftsched.model import CronTrigger, IntervalTrigger, OnceTrigger, Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.testing.cluster import wait_until
from raftsched.timing.clock import ManualClock
from raftsched.timing.schedule import plan_fires, single_fire
from raftsched.v1 import log_pb2 as pb

T0 = 1_800_000_000_000  # a whole second


def leader_with(specs: list[TaskSpec], created_ms: int, max_fires_per_batch: int = 1000) -> LeaderDriver:
    state = SchedulerState.load(MemoryStore())
    commands, refused = writes.create_tasks(
        [(s, False) for s in specs], now_ms=created_ms, epoch=1, origin="n1", key="k"
    )
    assert not refused
    for data in commands:
        assert state.apply(data).result.ok
    driver = LeaderDriver(state, "n1", max_fires_per_batch=max_fires_per_batch)
    driver.on_effects(state.apply(driver.become_leader(1, created_ms).data).effects)
    assert driver.ready
    return driver


def reference(driver: LeaderDriver, names: list[str], now: int) -> list[pb.TaskFires]:
    """What plan_fires says for each task, computed before the driver plans them."""
    out = []
    for name in names:
        planning = driver.state.task_for_planning(name)
        assert planning is not None
        spec, version, _, next_fire = planning
        tf = plan_fires(spec, version, next_fire, now, driver.misfire)
        if tf is not None:
            out.append(tf)
    return out


def due_at(driver: LeaderDriver, now: int) -> list[str]:
    """The tasks ``driver.poll(now)`` will find due, in its order (a copy of the wheel advances)."""
    return [n for n, _ in copy.deepcopy(driver.wheel).advance(now)]


def decoded(proposals: list[Proposal]) -> list[pb.Command]:
    return [codec.decode_command(p.data) for p in proposals]


def test_in_place_batches_equal_plan_fires_for_on_time_and_missed_fires() -> None:
    specs = [
        TaskSpec(f"every-{i:03d}", CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, command="true")
        for i in range(50)
    ]
    specs += [
        TaskSpec(f"two-{i:03d}", CronTrigger("* * * * * */2"), overlap=Overlap.ALLOW, command="true")
        for i in range(20)
    ]
    specs += [TaskSpec(f"iv-{i}", IntervalTrigger(3000), command="true") for i in range(5)]
    specs += [TaskSpec(f"once-{i}", OnceTrigger(T0 + 4000 + i), command="true") for i in range(5)]
    # Created 60 s before "now": every task has missed fires (coalesced records, general path)...
    driver = leader_with(specs, T0 - 60_000)
    now = T0 + 7
    names = due_at(driver, now)
    expected = reference(driver, names, now)
    proposals = driver.poll(now)
    got = [tf for cmd in decoded(proposals) for tf in cmd.fire_batch.tasks]
    assert [tf.SerializeToString(deterministic=True) for tf in got] == [
        tf.SerializeToString(deterministic=True) for tf in expected
    ]
    assert any(f.outcome == pb.COALESCED for tf in got for f in tf.fires)
    # Commit them; a second later one on-time fire each is due (the in-place fast path).
    for p in proposals:
        driver.on_effects(driver.state.apply(p.data).effects)
        driver.on_proposal_committed(p)
    now += 1000
    names = due_at(driver, now)
    assert len(names) >= 50
    expected = reference(driver, names, now)
    got = [tf for cmd in decoded(driver.poll(now)) for tf in cmd.fire_batch.tasks]
    assert [tf.SerializeToString(deterministic=True) for tf in got] == [
        tf.SerializeToString(deterministic=True) for tf in expected
    ]


def test_on_time_single_fires_are_byte_identical_to_single_fire() -> None:
    specs = [
        TaskSpec(f"t-{i:04d}", CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, command="true")
        for i in range(300)
    ]
    driver = leader_with(specs, T0 - 500)
    now = T0 + 3
    proposals = driver.poll(now)
    tasks = [tf for cmd in decoded(proposals) for tf in cmd.fire_batch.tasks]
    assert len(tasks) == 300
    for tf in tasks:
        planning = driver.state.task_for_planning(tf.task)
        assert planning is not None
        _, version, _, _ = planning
        want = single_fire(tf.task, version, T0, now, T0 + 1000)
        assert tf.SerializeToString(deterministic=True) == want.SerializeToString(deterministic=True)
    # Run-length encoded: one (nominal, count) per nominal time of a batch.
    assert [p.fired for p in proposals] == [((T0, fire_count(p)),) for p in proposals]
    assert sum(fire_count(p) for p in proposals) == 300
    assert [n for p in proposals for n in p.tasks] == [tf.task for tf in tasks]
    for cmd in decoded(proposals):
        assert cmd.epoch == 1 and cmd.now_ms == now and cmd.origin == "n1"


def fire_count(p: Proposal) -> int:
    """How many fires a proposal runs (its ``fired`` is run-length encoded)."""
    return sum(count for _, count in p.fired)


@pytest.mark.parametrize("name_len", [1, 20, 127, 128])
@pytest.mark.parametrize("version", [1, 127, 128, 1 << 40])
@pytest.mark.parametrize("following", [0, T0 + 1000])
def test_in_place_size_is_exactly_bytesize_plus_four(name_len: int, version: int, following: int) -> None:
    driver = leader_with([], T0)
    builder = BatchBuilder(driver, T0 + 5)
    name = "a" * name_len
    builder.add_single(name, version, T0, following)
    assert builder.size == single_fire(name, version, T0, T0 + 5, following).ByteSize() + 4


def test_batches_split_by_fire_count_and_stay_under_the_entry_limit() -> None:
    specs = [
        TaskSpec(f"t-{i:05d}-" + "x" * 100, CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, command="true")
        for i in range(2500)
    ]
    driver = leader_with(specs, T0 - 500, max_fires_per_batch=1000)
    proposals = driver.poll(T0 + 1)
    assert sum(fire_count(p) for p in proposals) == 2500
    for p in proposals:
        assert fire_count(p) <= 1000
        assert len(p.data) <= MAX_ENTRY_BYTES + 100  # + the command's envelope fields
    # The 60 KB limit, not the fire count, cut these (about 120 bytes per task).
    assert len(proposals) > 3
    small = leader_with(specs[:10], T0 - 500, max_fires_per_batch=3)
    assert [fire_count(p) for p in small.poll(T0 + 1)] == [3, 3, 3, 1]


def test_a_proposal_whose_callback_never_comes_holds_back_only_its_own_leadership() -> None:
    """The chaos soak's stalled leader: a leader deposed with fire batches in flight, whose
    callbacks never came (it caught up by a snapshot that covered them), led again with its
    pipeline still full and never proposed another fire. The pipeline counts only the
    proposals of the current leadership."""
    every_second = CronTrigger("* * * * * *")
    specs = [TaskSpec(f"t{i}", every_second, overlap=Overlap.ALLOW, command="x") for i in range(5)]
    driver = leader_with(specs, T0 - 1000, max_fires_per_batch=1)
    clock = ManualClock(T0 + 100)
    fire_batches: list[tuple[int, pb.Command]] = []
    lock = threading.Lock()
    thread: DriverThread

    def propose(data: bytes, done: ProposeCallback, committed: CommitHook | None) -> None:
        cmd = pb.Command.FromString(data)
        if cmd.WhichOneof("body") == "barrier":  # the new leadership's barrier: applied at once
            applied = driver.state.apply(data)
            thread.effects_applied(applied.effects)
            done(applied.encode(), None)
            return
        with lock:
            fire_batches.append((cmd.epoch, cmd))  # lost: neither committed nor done, ever

    def batches(epoch: int) -> int:
        with lock:
            return sum(1 for e, _ in fire_batches if e == epoch)

    thread = DriverThread(driver, clock, propose, max_sleep_s=0.05, max_in_flight=2)
    thread.start()
    try:
        thread.leadership_changed(True, 1)  # leads already: the pipeline fills and sticks
        wait_until(lambda: batches(1) == 2, 10, what="two batches in flight")
        thread.leadership_changed(False, 1)
        thread.leadership_changed(True, 2)
        wait_until(lambda: batches(2) >= 2, 10, what="the next leadership to propose fires again")
    finally:
        thread.stop()
    assert batches(1) == 2  # the first leadership never got past its lost proposals


@pytest.mark.parametrize("late", [False, True])
def test_a_batch_firing_an_overlap_replace_task_is_stamped_with_the_format_that_releases(late: bool) -> None:
    """A fire of an overlap=replace task cancels the unfinished run; from command format 4 the
    cancelled attempts give back their quota places and locks. The leader stamps such a batch
    with format 4 or later (older nodes stop rather than apply it differently). From format 17
    (batched pruning) every fire batch is stamped 17, which releases too: an explicit format 4
    must not lower it."""
    specs = [
        TaskSpec("plain", CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, command="true"),
        TaskSpec("replacing", CronTrigger("* * * * * *"), overlap=Overlap.REPLACE, command="true"),
    ]
    # Created just before now: on-time single fires; a minute before: missed fires (general path).
    driver = leader_with(specs, T0 - (60_000 if late else 500), max_fires_per_batch=1)
    formats = {cmd.fire_batch.tasks[0].task: cmd.format for cmd in decoded(driver.poll(T0 + 7))}
    assert formats == {"plain": codec.BATCHED_PRUNE_FORMAT, "replacing": codec.BATCHED_PRUNE_FORMAT}
    assert codec.BATCHED_PRUNE_FORMAT >= codec.REPLACE_RELEASES_FORMAT


def test_the_leader_proposes_workflow_waits_due_when_a_cross_workflow_deadline_has_come() -> None:
    t0 = 1_700_000_040_000
    driver = leader_with([], t0)
    state = driver.state
    up = pb.WorkflowSpec(name="up")
    up.tasks.add(name="load", command="load")
    down = pb.WorkflowSpec(name="down")
    down.tasks.add(name="t", command="t", depends_on=[pb.Dependency(workflow="up", timeout_ms=60_000)])
    for spec in (up, down):
        assert state.apply(writes.apply_workflow(spec, now_ms=t0, epoch=1, origin="n1", key="")).result.ok
    start = pb.Command(epoch=1, now_ms=t0, origin="n1")
    start.start_workflow_run.workflow = "down"
    start.start_workflow_run.logical_ms = t0
    run_id = state.apply(codec.encode_command(start)).result.workflow_run.run_id
    assert driver.poll(t0 + 59_999) == []
    assert driver.next_wakeup_ms() == t0 + 60_000
    proposals = driver.poll(t0 + 60_000)
    assert [c.WhichOneof("body") for c in decoded(proposals)] == ["workflow_waits_due"]
    assert driver.poll(t0 + 60_100) == []  # proposed, not applied: not again before the retry
    assert driver.poll(t0 + 61_000) != []  # lost? proposed again after WAITS_RETRY_MS
    assert state.apply(proposals[0].data).result.accounted == 1
    got = state.get_workflow_run(run_id)
    assert got is not None and got.tasks[0].state == pb.TASK_FAILED
    assert driver.poll(t0 + 61_100) == []  # nothing due any more


def test_commit_lateness_is_reported_once_per_nominal_time_of_a_batch() -> None:
    """The commit hook runs on the Raft tick thread: it hands on one (nominal, lateness, count)
    per nominal time of the batch, not a tuple per fire."""
    every_second = CronTrigger("* * * * * *")
    specs = [TaskSpec(f"t{i}", every_second, overlap=Overlap.ALLOW, command="x") for i in range(5)]
    driver = leader_with(specs, T0 - 500)
    clock = ManualClock(T0 + 40)
    reported: list[list[tuple[int, int, int]]] = []
    lock = threading.Lock()
    thread: DriverThread

    def propose(data: bytes, done: ProposeCallback, committed: CommitHook | None) -> None:
        applied = driver.state.apply(data)
        if committed is not None:
            committed()
        thread.effects_applied(applied.effects)
        done(applied.encode(), None)

    def on_commit(runs: list[tuple[int, int, int]]) -> None:
        with lock:
            reported.append(runs)

    thread = DriverThread(driver, clock, propose, max_sleep_s=0.05, max_in_flight=2)
    thread.on_commit_lateness = on_commit
    thread.start()
    try:
        thread.leadership_changed(True, 1)
        wait_until(lambda: bool(reported), 10, what="a fire batch committed")
    finally:
        thread.stop()
    assert reported[0] == [(T0, 40, 5)]


def test_a_seconds_batches_leave_four_at_a_time() -> None:
    """The pipeline holds MAX_IN_FLIGHT (4) fire batches proposed and not committed: a second's
    10,000 fires in 10 batches commit in 3 rounds, not 5 (commit p99 at 10,000 fires/s)."""
    from raftsched.leader.driver import MAX_IN_FLIGHT

    every_second = CronTrigger("* * * * * *")
    specs = [TaskSpec(f"t{i}", every_second, overlap=Overlap.ALLOW, command="x") for i in range(10)]
    driver = leader_with(specs, T0 - 500, max_fires_per_batch=1)
    clock = ManualClock(T0 + 40)
    held: list[tuple[bytes, ProposeCallback, CommitHook | None]] = []
    lock = threading.Lock()

    def propose(data: bytes, done: ProposeCallback, committed: CommitHook | None) -> None:
        with lock:
            held.append((data, done, committed))  # not committed until the test says so

    def proposed() -> int:
        with lock:
            return len(held)

    thread = DriverThread(driver, clock, propose, max_sleep_s=0.05)
    thread.start()
    try:
        thread.effects_applied(())  # wake the loop: ten tasks are due
        wait_until(lambda: proposed() >= MAX_IN_FLIGHT, 10, what="the pipeline to fill")
        with lock:
            data, done, committed = held[0]
        applied = driver.state.apply(data)
        assert committed is not None
        committed()  # one commit frees one place
        thread.effects_applied(applied.effects)
        done(applied.encode(), None)
        wait_until(lambda: proposed() >= MAX_IN_FLIGHT + 1, 10, what="the next batch")
        assert proposed() == MAX_IN_FLIGHT + 1
    finally:
        thread.stop()
    assert MAX_IN_FLIGHT == 4


# -- overload: planning held for the dispatch backlog ([scheduler] max_dispatch_backlog) ----------


def held_leader(limit: int, tasks: int = 10) -> tuple[LeaderDriver, list[int], dict[str, int]]:
    """A driver of ``tasks`` every-second tasks whose dispatch backlog is ``backlog[0]`` and
    whose tasks with attempts waiting are ``waiting`` (all of them to begin with)."""
    specs = [
        TaskSpec(f"t{i}", CronTrigger("* * * * * *"), overlap=Overlap.ALLOW, command="true")
        for i in range(tasks)
    ]
    driver = leader_with(specs, T0 - 500)
    backlog = [0]
    waiting = {s.name: 1 for s in specs}
    driver.max_dispatch_backlog = limit
    driver.dispatch_backlog = lambda: backlog[0]
    driver.dispatch_waiting = lambda: waiting
    return driver, backlog, waiting


def planned_tasks(proposals: list[Proposal]) -> list[str]:
    return sorted({tf.task for cmd in decoded(proposals) for tf in cmd.fire_batch.tasks})


def test_planning_stops_at_the_backlog_limit_and_resumes_at_three_quarters_of_it() -> None:
    driver, backlog, waiting = held_leader(limit=100)
    backlog[0] = 95
    # Room for 5: at most that many fires are planned (the rest stay due, in order).
    assert sum(fire_count(p) for p in driver.poll(T0 + 1)) == 5
    assert not driver.held_since_ms and driver.backlog == 5
    backlog[0] = 100
    assert driver.poll(T0 + 2) == []  # held: every task due has attempts waiting
    assert driver.held_since_ms == T0 + 2 and driver.holds == 1
    # Held, it wakes to look at the backlog again, not for the tasks due (they are due now).
    assert driver.next_wakeup_ms() == T0 + 2 + 100
    # A task whose attempts have all started is planned while held, at the next scan of the due
    # queue (every 100 ms, not on every applied entry); the others stay due.
    del waiting["t7"]
    assert driver.poll(T0 + 60) == []
    assert planned_tasks(driver.poll(T0 + 102)) == ["t7"]
    assert driver.held_since_ms == T0 + 2 and driver.backlog == 4
    # The firing window sees no batch coming at the recheck (the HTTP API is not held back).
    assert driver.next_wakeup_ms() == T0 + 202 and driver.next_wakeup_ms(for_window=True) is None
    backlog[0] = 76  # above three quarters: still held
    assert driver.poll(T0 + 300) == [] and driver.held_since_ms == T0 + 2
    backlog[0] = 75
    assert planned_tasks(driver.poll(T0 + 310)) == ["t5", "t6", "t8", "t9"]  # in their turn
    assert not driver.held_since_ms and driver.holds == 1


def test_without_a_limit_or_a_backlog_reader_nothing_is_held() -> None:
    for limit, reader in ((0, True), (10, False)):
        driver, backlog, _ = held_leader(limit=limit)
        backlog[0] = 1_000_000
        if not reader:
            driver.dispatch_backlog = None
        assert sum(fire_count(p) for p in driver.poll(T0 + 1)) == 10
        assert not driver.holds


def test_a_held_task_a_refused_write_wants_is_planned_alone() -> None:
    driver, backlog, _ = held_leader(limit=10)
    backlog[0] = 10
    assert driver.poll(T0 + 1) == [] and driver.held_since_ms
    # A write to t3 was refused for its due fire: the rejection carries FiresWanted("t3").
    state = driver.state
    refused = state.apply(
        writes.set_enabled(state, "t3", False, now_ms=T0 + 5, epoch=1, origin="n1", key="w")
    )
    assert not refused.result.ok and refused.result.code == "unavailable"
    assert refused.effects == (FiresWanted("t3"),)
    driver.on_effects(refused.effects)
    proposals = driver.poll(T0 + 10)
    assert planned_tasks(proposals) == ["t3"] and sum(fire_count(p) for p in proposals) == 1
    assert driver.held_since_ms  # still held for the others
    for proposal in proposals:
        driver.on_effects(state.apply(proposal.data).effects)
    assert state.apply(
        writes.set_enabled(state, "t3", False, now_ms=T0 + 20, epoch=1, origin="n1", key="w2")
    ).result.ok
    # The others are planned once the backlog is down, t3 (disabled) is not.
    backlog[0] = 0
    planned = driver.poll(T0 + 30)
    assert sum(fire_count(p) for p in planned) == 9
    assert "t3" not in planned_tasks(planned)


def test_the_retry_of_a_write_refused_for_a_task_held_past_the_grace_is_accepted() -> None:
    """Held 20 s (past the grace): the refused write's task is planned whole, not split into
    its missed fires and, a round later, its on-time ones, so the first retry finds nothing due."""
    driver, _, _ = held_leader(limit=10, tasks=3)
    driver.dispatch_backlog = lambda: 10
    assert driver.poll(T0 + 1) == [] and driver.held_since_ms
    state = driver.state
    now = T0 + 20_000
    assert driver.poll(now) == []
    refused = state.apply(
        writes.set_enabled(state, "t1", False, now_ms=now + 5, epoch=1, origin="n1", key="w")
    )
    assert refused.result.code == "unavailable"
    driver.on_effects(refused.effects)
    for p in driver.poll(now + 10):
        driver.on_effects(state.apply(p.data).effects)
    retry = state.apply(
        writes.set_enabled(state, "t1", False, now_ms=now + 200, epoch=1, origin="n1", key="w2")
    )
    assert retry.result.ok, retry.result.message


def test_the_backlog_is_read_once_when_the_dispatcher_steps_down_meanwhile() -> None:
    """The driver's thread reads the dispatcher's backlog while its loop may step down: its term
    is read once (a second read could see None and raise inside the poll)."""

    class Term:
        class placement:
            waiting = {("r@1", 0): None, ("r@2", 0): None, ("r@3", 0): None}

    class Flipping:
        reads = 0

        @property
        def _term(self) -> object:
            self.reads += 1
            return Term if self.reads == 1 else None

    assert Dispatcher.backlog.fget(Flipping()) == 3  # type: ignore[attr-defined]
