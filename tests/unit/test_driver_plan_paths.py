"""The leader driver's per-fire shortcuts plan the same bytes as the plain calls.

``poll`` answers a cron question once per (expression, zone, next fire) within a poll, hands its
FireColumns rows to the builder in slices (``BatchBuilder.add_hot_many``), takes the wheel's keys
without their due times (``advance_keys``), and ``on_effects`` re-arms through ``insert_many``.
Two identical states and drivers run the same script: one as it is, one with every shortcut
replaced by the plain call (``single_on_time_fire`` per fire, ``add_hot``'s split rule row by
row, ``advance``, ``insert`` per key); every proposal must be the same bytes, every wheel the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from raftsched.fsm.state import SchedulerState
from raftsched.leader import columns, writes
from raftsched.leader import driver as driver_module
from raftsched.leader.driver import (
    HOT_ROW_BYTES,
    MAX_ENTRY_BYTES,
    BatchBuilder,
    HotRow,
    LeaderDriver,
    Proposal,
)
from raftsched.model import CronTrigger, IntervalTrigger, Misfire, OnceTrigger, Overlap, TaskSpec
from raftsched.storage.memory import MemoryStore
from raftsched.timing.schedule import MisfireSettings, next_fire_after
from raftsched.timing.wheel import TimingWheel
from raftsched.v1 import log_pb2 as lpb
from tests.unit.test_driver import T0, decoded, due_at


def _spec(
    name: str, trigger: CronTrigger | IntervalTrigger | OnceTrigger, overlap: Overlap = Overlap.ALLOW
) -> TaskSpec:
    return TaskSpec(name, trigger, overlap=overlap, handler="noop")


def mixed_specs() -> list[TaskSpec]:
    specs = [_spec(f"s{i:02d}", CronTrigger("* * * * * *")) for i in range(12)]
    # every 5 s: one fire where an every-second task catches up on three, in the same poll
    specs[4:4] = [_spec(f"f{i:02d}", CronTrigger("* * * * * */5")) for i in range(3)]
    specs += [_spec(f"p{i:02d}", CronTrigger("* * * * * *", "Europe/Paris")) for i in range(4)]
    specs += [_spec(f"e{i:02d}", CronTrigger("* * * * * */2")) for i in range(5)]  # every 2 s
    specs += [_spec(f"n{i:02d}", CronTrigger("* * * * * */3", "America/New_York")) for i in range(4)]
    specs += [_spec(f"i{i:02d}", IntervalTrigger(1000)) for i in range(3)]
    specs += [_spec(f"j{i:02d}", IntervalTrigger(2000)) for i in range(2)]
    specs += [_spec(f"c{i:02d}", CronTrigger("* * * * * *"), Overlap.SKIP) for i in range(3)]  # cold
    specs += [_spec(f"r{i:02d}", CronTrigger("* * * * * */2"), Overlap.REPLACE) for i in range(2)]  # cold
    specs += [_spec(f"o{i:02d}", OnceTrigger(T0 + 3000 + i)) for i in range(2)]
    return specs


def leader(specs: list[TaskSpec], created_ms: int, grace_ms: int, max_fires_per_batch: int) -> LeaderDriver:
    state = SchedulerState.load(MemoryStore())
    commands, refused = writes.create_tasks(
        [(s, False) for s in specs], now_ms=created_ms, epoch=1, origin="n1", key="k"
    )
    assert not refused
    for data in [*commands, columns.number_entities(created_ms + 1, 1, "n1")]:
        assert state.apply(data).result.ok
    driver = LeaderDriver(
        state, "n1", misfire=MisfireSettings(grace_ms=grace_ms), max_fires_per_batch=max_fires_per_batch
    )
    driver.columns_allowed = lambda: True
    driver.on_effects(state.apply(driver.become_leader(1, created_ms + 2).data).effects)
    assert driver.ready
    return driver


class _NotCron:
    """Stands for CronTrigger in the plain driver: no trigger is of its type, so every fire
    takes ``single_on_time_fire``."""


def _add_hot_row_by_row(self: BatchBuilder, rows: list[HotRow]) -> None:
    # add_hot's split rule as it was written before add_hot_many: before each row, a new entry
    # when the current one has max_fires_per_batch rows or one more row could exceed the bytes.
    for row in rows:
        hot = self.hot
        if hot and (
            len(hot) >= self.driver.max_fires_per_batch or (len(hot) + 1) * HOT_ROW_BYTES > MAX_ENTRY_BYTES
        ):
            self._flush_hot()
            self.hot = []
        self.hot.append(row)


def _insert_one_by_one(self: TimingWheel[str], items: list[tuple[str, int]]) -> None:
    for key, due_ms in items:
        self.insert(key, due_ms)


def _advance_keys_plainly(self: TimingWheel[str], now_ms: int) -> list[str]:
    return [key for key, _ in self.advance(now_ms)]


@contextmanager
def plainly() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as m:
        m.setattr(driver_module, "CronTrigger", _NotCron)
        m.setattr(BatchBuilder, "add_hot_many", _add_hot_row_by_row)
        m.setattr(TimingWheel, "insert_many", _insert_one_by_one)
        m.setattr(TimingWheel, "advance_keys", _advance_keys_plainly)
        yield


def wheel_of(d: LeaderDriver) -> list[tuple[str, int | None]]:
    with d.state.view() as v:
        names = sorted(v.tasks)
    return [(name, d.wheel.due_of(name)) for name in names]


def settle(d: LeaderDriver, proposals: list[Proposal], refuse: set[str]) -> None:
    for p in proposals:
        if refuse & set(p.tasks):
            d.on_proposal_failed(p)  # lost: re-armed from the state
            continue
        d.on_effects(d.state.apply(p.data).effects)
        d.on_proposal_committed(p)


def test_poll_and_rearm_shortcuts_plan_the_same_bytes_as_the_plain_calls() -> None:
    for grace_ms, per_batch in [(5000, 7), (2000, 1000), (0, 3), (5000, 1)]:
        fast = leader(mixed_specs(), T0 - 60_000, grace_ms, per_batch)
        plain = leader(mixed_specs(), T0 - 60_000, grace_ms, per_batch)
        # (ms after T0, max_fires, mutation, names whose proposal is lost)
        script: list[tuple[int, int, str, set[str]]] = [
            (5, 0, "", set()),  # a minute of missed fires: coalesced (plan_fires)
            (1005, 0, "", set()),
            (2003, 9, "", set()),  # max_fires: the rest stays due for the next poll
            (2004, 0, "update s03", set()),
            (3000, 0, "zone p01", set()),
            (4000, 0, "", {"s05"}),
            (4001, 0, "disable e01", set()),
            (7002, 0, "", set()),  # a 3 s stall: catch-up rows between single rows
            (8002, 4, "delete s07", set()),
            (8003, 0, "", set()),
            (9010, 0, "", set()),
            (15_000, 0, "", set()),  # 6 s late: missed fires again, by the grace
            (16_000, 0, "", set()),
        ]
        for at, max_fires, mutation, lost in script:
            now = T0 + at
            if mutation:
                data = _mutation(fast, mutation, now)
                for d in (fast, plain):
                    d.on_effects(d.state.apply(data).effects)
            order = [*fast._due, *due_at(fast, now)]
            got = fast.poll(now, max_fires)
            assert_rows_in_due_order(got, order)
            with plainly():
                want = plain.poll(now, max_fires)
            assert [(p.data, p.tasks, p.fired) for p in got] == [(p.data, p.tasks, p.fired) for p in want]
            settle(fast, got, lost)
            with plainly():
                settle(plain, want, lost)
            assert wheel_of(fast) == wheel_of(plain)
            assert fast.wheel.next_due_ms() == plain.wheel.next_due_ms()
            assert fast.in_flight == plain.in_flight
        bodies = {c.WhichOneof("body") for c in decoded(got)}
        assert bodies <= {"fire_columns", "fire_batch"}


def assert_rows_in_due_order(proposals: list[Proposal], order: list[str]) -> None:
    """The FireColumns rows of a poll name their tasks in the order the tasks fell due (a
    task's catch-up rows together), as one ``add_hot`` per due task wrote them."""
    rows = [
        name
        for p, cmd in zip(proposals, decoded(proposals), strict=True)
        if cmd.HasField("fire_columns")
        for name in p.tasks
    ]
    first: dict[str, int] = {}
    for i, name in enumerate(order):
        first.setdefault(name, i)
    tasks = list(dict.fromkeys(rows))
    assert [first[name] for name in tasks] == sorted(first[name] for name in tasks)
    runs = sum(1 for i, name in enumerate(rows) if i == 0 or rows[i - 1] != name)
    assert runs == len(tasks)  # each task's rows together


def _mutation(d: LeaderDriver, what: str, now: int) -> bytes:
    kind, name = what.split()
    key = f"{what}@{now}"
    if kind == "delete":
        return writes.delete_task(name, now_ms=now, epoch=1, origin="n1", key=key)
    if kind == "disable":
        return writes.set_enabled(d.state, name, False, now_ms=now, epoch=1, origin="n1", key=key)
    planning = d.state.task_for_planning(name)
    assert planning is not None
    spec, version, _, _ = planning
    trigger = CronTrigger("* * * * * */2") if kind == "update" else CronTrigger("* * * * * *", "Asia/Tokyo")
    new = TaskSpec(name, trigger, overlap=spec.overlap, handler=spec.handler)
    return writes.update_task(
        d.state, new, expected_version=version, now_ms=now, epoch=1, origin="n1", key=key
    )


def test_one_poll_asks_each_zone_and_expression_its_own_question() -> None:
    """Two daily tasks, one in UTC and one in London, both due at midnight UTC on the day
    British summer time starts: the same expression and the same fire, but not the same next
    one. And two every-second expressions due at the same even second."""
    day = 1_806_192_000_000  # 2027-03-28T00:00:00Z: London is still on GMT until 01:00 UTC
    specs = [
        _spec("a-utc", CronTrigger("0 0 * * *")),
        _spec("b-london", CronTrigger("0 0 * * *", "Europe/London")),
        _spec("c-every", CronTrigger("* * * * * *")),
        _spec("d-even", CronTrigger("* * * * * */2")),
    ]
    d = leader(specs, day - 1000, 5000, 1000)
    proposals = d.poll(day + 5)
    (cmd,) = decoded(proposals)
    with d.state.view() as v:
        names = {v.tasks[name].number: name for name in v.tasks}
    cols = cmd.fire_columns
    following = {
        names[task]: day + 5 - nominal_delta + next_delta
        for task, nominal_delta, next_delta in zip(
            cols.task, cols.nominal_delta, cols.next_delta, strict=True
        )
    }
    assert {name: after - day for name, after in following.items()} == {
        "a-utc": 86_400_000,
        "b-london": 86_400_000 - 3_600_000,  # 00:00 BST on the 29th
        "c-every": 1000,
        "d-even": 2000,
    }
    for spec in specs:
        assert following[spec.name] == next_fire_after(spec.trigger, day)


def test_add_hot_many_splits_as_add_hot_row_by_row() -> None:
    d = leader([], T0, 5000, 1000)
    rows: list[HotRow] = [(f"t{i}", i + 1, 1, T0, T0 + 1000) for i in range(5000)]
    for per_batch in [1, 2, 7, 1000, 1666, 1667, 5000]:
        d.max_fires_per_batch = per_batch
        one, many = BatchBuilder(d, T0 + 5), BatchBuilder(d, T0 + 5)
        for row in rows[:13]:
            _add_hot_row_by_row(one, [row])
        _add_hot_row_by_row(one, rows[13:4000])
        one.add_hot_rows("late", 9999, 2, [T0 - 2000, T0 - 1000, T0], T0 + 1000)
        _add_hot_row_by_row(one, rows[4000:])
        many.add_hot_many(rows[:13])
        many.add_hot_many(rows[13:4000])
        many.add_hot_rows("late", 9999, 2, [T0 - 2000, T0 - 1000, T0], T0 + 1000)
        many.add_hot_many(rows[4000:])
        got, want = many.finish(), one.finish()
        assert [(p.data, p.tasks, p.fired) for p in got] == [(p.data, p.tasks, p.fired) for p in want]
        assert max(len(p.data) for p in got) < MAX_ENTRY_BYTES


def test_planning_inputs_read_what_task_for_planning_and_the_numbers_say() -> None:
    d = leader(mixed_specs(), T0 - 5000, 5000, 1000)
    off = writes.set_enabled(d.state, "s01", False, now_ms=T0 - 4500, epoch=1, origin="n1", key="off")
    assert d.state.apply(off).result.ok
    with d.state.view() as v:
        names = [*sorted(v.tasks), "missing"]
        plain = v.planning_inputs(names)
        numbered = v.planning_inputs(names, numbers=True)
        for name in names:
            st = v.tasks.get(name)
            planning = v.task_for_planning(name)
            if planning is None:
                assert plain[name] is None and numbered[name] is None
                continue
            spec, version, _watermark, next_fire = planning
            number = st.number if st is not None and st.hot else 0
            assert plain[name] == (spec, version, next_fire, False, 0)
            assert numbered[name] == (spec, version, next_fire, False, number)
    assert plain["s01"] is None and plain["missing"] is None
    assert any(read is not None and read[4] for read in numbered.values())


# The digest of every proposal the script below plans, recorded on the driver before its
# shortcuts (1da93ed): the shortcuts must plan the same entries *in the same order*. (A review
# found the first version of the shortcuts putting held-back FireColumns rows after a cold
# FireBatch planned later, in 26 of these 60 polls; the comparison above runs the new driver
# with its shortcuts swapped out, so it could not see that.) Missed fires of hot tasks with
# on-time fires after them are planned alone since (plan_missed, the overload hold): with it
# swapped out the script still plans the recorded entries; with it, the second digest.
PLANNED_BEFORE_THE_SHORTCUTS = "e3f040175c3297e881a425bd72233663e0e2694eb7c7c4a2b5d599fb90aeacfb"
PLANNED_WITH_MISSED_ALONE = "cef89a9a86b6a20749a275bee3ba59b2c7ddb39bcd68872d91401a00a7518e59"


def _planned_digest() -> str:
    h = hashlib.sha256()
    for grace_ms, per_batch in [(5000, 7), (2000, 1000), (0, 3), (5000, 1), (5000, 2), (5000, 5)]:
        d = leader(mixed_specs(), T0 - 60_000, grace_ms, per_batch)
        for at in [5, 1005, 2003, 3000, 4000, 7002, 8003, 9010, 15000, 16000]:
            got = d.poll(T0 + at)  # unbounded: every due fire in this one poll
            h.update(repr((grace_ms, per_batch, at, len(got))).encode())
            for p in got:
                h.update(p.data)
                h.update(repr((p.tasks, p.fired)).encode())
            h.update(repr(sorted(d.in_flight)).encode())
            for p in got:
                d.on_effects(d.state.apply(p.data).effects)
                d.on_proposal_committed(p)
    return h.hexdigest()


def test_polls_plan_the_entries_the_driver_planned_before_its_shortcuts(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _planned_digest() == PLANNED_WITH_MISSED_ALONE
    monkeypatch.setattr(driver_module, "plan_missed", lambda *args: None)
    assert _planned_digest() == PLANNED_BEFORE_THE_SHORTCUTS


# -- plan_missed in the driver: the on-time fires of a split task stay on time ---------------------


def _fired(proposals: list[Proposal]) -> int:
    n = 0
    for cmd in decoded(proposals):
        n += sum(1 for tf in cmd.fire_batch.tasks for f in tf.fires if f.outcome == lpb.FIRED)
        n += len(cmd.fire_columns.task)
    return n


@pytest.mark.parametrize("misfire", [Misfire.LATEST, Misfire.SKIP])
@pytest.mark.parametrize("round_trip_ms", [300, 1200, 6000])
def test_a_hot_task_behind_by_more_than_the_grace_runs_whatever_the_round_trip(
    misfire: Misfire, round_trip_ms: int
) -> None:
    """30 s behind: its missed fires are planned alone, and its on-time ones in the next poll,
    one round trip later. A round trip longer than the period must not turn them into missed
    ones (split again, and again: the task would never run), nor one longer than the grace."""
    spec = TaskSpec("t", CronTrigger("* * * * * *"), command="x", overlap=Overlap.ALLOW, misfire=misfire)
    d = leader([spec], T0 - 500, grace_ms=5_000, max_fires_per_batch=1000)
    now, runs = T0 + 30_000, 0
    for _ in range(50):  # each poll one round trip after the last one's commit
        proposals = d.poll(now)
        runs += _fired(proposals)
        settle(d, proposals, set())
        now += round_trip_ms
    # plan_fires would have run the on-time fires of the first poll, then one a second
    assert runs >= 40 * round_trip_ms // 1000, runs


def test_an_on_time_fire_of_an_hourly_skip_task_runs_when_its_missed_one_is_planned_first() -> None:
    """Back 1 h + 4.99 s after a fire: the missed fire alone (skipped), then, 20 ms later, the
    one of 4.99 s ago (5.01 s old by then) still runs: it was on time when the split was made."""
    spec = TaskSpec(
        "h", IntervalTrigger(3_600_000, T0), command="x", overlap=Overlap.ALLOW, misfire=Misfire.SKIP
    )
    d = leader([spec], T0 - 500, grace_ms=5_000, max_fires_per_batch=1000)
    now = T0 + 3_600_000 + 4_990
    outcomes: list[tuple[int, str]] = []
    for _ in range(3):
        proposals = d.poll(now)
        for cmd in decoded(proposals):
            outcomes += [
                (f.nominal_ms - T0, lpb.FireOutcome.Name(f.outcome))
                for tf in cmd.fire_batch.tasks
                for f in tf.fires
            ]
            outcomes += [(now - delta - T0, "FIRED") for delta in cmd.fire_columns.nominal_delta]
        settle(d, proposals, set())
        now += 20
    assert outcomes == [(0, "SKIPPED_MISFIRE"), (3_600_000, "FIRED")], outcomes
