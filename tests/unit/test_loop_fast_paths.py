"""The leader loop's inline fast paths (issue 31, session 19) give exactly what the general paths
give, on rows of every kind: different priorities, pools, locks, owners, shard counts, retries,
backfill, declared needs, unknown tasks, restricted executors and attempts waiting already.

* :meth:`Placement.wait_rows` (the ReadyColumns rows: the owner cache and start order inline)
  against :meth:`Placement.wait` per row: the same waiting attempts, queues, and the same
  placement walk afterwards (commands, reservations, AssignColumns rows);
* :meth:`Placement.assign`'s inline admission test against :meth:`Admission.admit` asked of
  every attempt;
* :meth:`Placement._reserve`'s plain reservation against :meth:`Holdings.reserve`;
* :func:`columns.ready_rows` against the rows read one by one (``StateView.task_by_number``).
"""

from __future__ import annotations

import random

import pytest

from raftsched.fsm.effects import AttemptReady, ReadyColumns
from raftsched.fsm.hot_slots import run_id_of
from raftsched.fsm.policy import Need as PolicyNeed
from raftsched.fsm.state import SchedulerState
from raftsched.fsm.view import StateView
from raftsched.leader import columns, writes
from raftsched.leader.dispatch.dispatcher import Dispatcher
from raftsched.leader.dispatch.leases import Holdings, Lease
from raftsched.leader.dispatch.placement import Admission, HotAssignments, Placement
from raftsched.leader.dispatch.settings import DispatchSettings
from raftsched.model import Lock, LockMode, ManualTrigger, Overlap, TaskSpec
from raftsched.sharding.placement import NO_NEED
from raftsched.v1 import log_pb2 as pb
from tests.support.fsm import T0, S, apply, create, fresh, join, trigger
from tests.unit.test_leader_loop import fire_columns, world

SETTINGS = DispatchSettings(lease_ms=3000, retry_base_ms=1000, retry_cap_ms=8000, retry_jitter=0.2)
EXECUTORS = ("ex1", "ex2", "ex3")


def _spec(name: str, **extra: object) -> TaskSpec:
    return TaskSpec(name, ManualTrigger(), command="x", overlap=Overlap.ALLOW, **extra)  # type: ignore[arg-type]


SPECS = [
    _spec("p9", priority=9),
    _spec("p0", priority=0),
    _spec("pooled", pool="wh", priority=7),
    _spec("pooled2", pool="wh", owner="B"),
    _spec("locked", locks=(Lock("db", LockMode.EXCLUSIVE),)),
    _spec("shared", locks=(Lock("db", LockMode.SHARED),), owner="B"),
    _spec("owned", owner="A", priority=3),
    _spec("wide", shards=3, priority=6),
    _spec("sized", resource_memory_mb=64),
    _spec("retry", max_retries=3, retry_elsewhere=True),
    _spec("stay", max_retries=3, retry_elsewhere=False),
]


def _world() -> tuple[SchedulerState, list[str]]:
    """The state, and the runs of "sized" (a declared need is read from the run)."""
    state = fresh()
    for name, slots in zip(EXECUTORS, (2, 40, 40), strict=True):  # ex1 full: its queue waits
        assert state.apply(join(name, slots)).result.ok
    pool = writes.set_pool(pb.PoolRecord(name="wh", slots=2), now_ms=T0, epoch=1, origin="n1", key="p")
    assert apply(state, pool).ok
    for spec in SPECS:
        assert create(state, spec).ok
    return state, [trigger(state, "sized", now=T0 + i).run.run_id for i in range(2)]


def _rows(sized: list[str]) -> list[tuple[AttemptReady, int]]:
    """Rows of every kind, in an order that is neither start order nor by task."""
    rows = [(AttemptReady(run_id, "sized", T0, 0, 1, 1), 0) for run_id in sized]
    seq = 100
    for k in range(3):
        nominal = T0 + (2 - k) * S  # three fires of each task (shuffled below: inserts, not appends)
        for spec in SPECS:
            for shard in range(spec.shards):
                rows.append(
                    (AttemptReady(run_id_of(spec.name, nominal), spec.name, nominal, shard, 1, 1), seq)
                )
                seq += 1
    at = T0 + 5 * S
    rows += [
        (AttemptReady(run_id_of("retry", at), "retry", at, 0, 2, 1, not_before_ms=at + S), 0),  # a retry
        (AttemptReady(run_id_of("stay", at), "stay", at, 0, 3, 1), 0),
        (AttemptReady(run_id_of("p0", at), "p0", at, 0, 1, 1, backfill_share=50), 0),  # backfill
        (AttemptReady(run_id_of("gone", at), "gone", at, 0, 1, 1), 7),  # no such task
        (AttemptReady("wf#step@1", "wf#step", at, 0, 1, 1), 0),  # a workflow task's name
    ]
    random.Random(3).shuffle(rows)
    return rows


def _leader(state: SchedulerState) -> Dispatcher:
    d = Dispatcher(state, SETTINGS, random.Random(7))
    d.columns_allowed = lambda: True
    d.become_leader(1, T0)
    for name in EXECUTORS:
        d.heartbeat(name, [], T0)
    return d


def _snapshot(p: Placement) -> object:
    return (
        dict(p.waiting),
        dict(p.sized),
        dict(p.pooled),
        p.backfill_waiting,
        {owner: [(w.ready.run_id, w.ready.shard, w.order) for w in q] for owner, q in p.queues.items()},
    )


def _walk(p: Placement, state: SchedulerState, now: int, general: pytest.MonkeyPatch | None = None) -> object:
    """A placement walk and what it reserved. ``general``: the walk asks Admission.admit of every
    attempt (the state says it has quotas: admit then works out each attempt's policies in full,
    none for a plain one), not only of those naming a lock or a pool."""
    cmd = pb.Command(epoch=1, now_ms=now)
    cmd.assign_attempts.SetInParent()
    hot = HotAssignments()
    with state.view() as v:
        if general is None:
            assigned = p.assign(v, now, set(), 1000, cmd, hot)
        else:
            with general.context() as m:
                m.setattr(StateView, "has_quotas", property(lambda self: True))
                assigned = p.assign(v, now, set(), 1000, cmd, hot)
    h = p.holdings
    return (
        cmd.SerializeToString(),
        assigned,
        (hot.seqs, hot.attempts, hot.executors, hot.assigned),
        dict(h.used),
        set(h.backfill_busy),
        dict(h.reserved.by_key),
        {key: w.reserved_for for key, w in p.waiting.items()},
    )


@pytest.mark.parametrize("restricted", [False, True], ids=["open", "restricted"])
@pytest.mark.parametrize("already", [0, 5, 40], ids=["none-waiting", "some-waiting", "many-waiting"])
def test_wait_rows_places_every_kind_of_row_as_wait_does(
    restricted: bool, already: int, monkeypatch: pytest.MonkeyPatch
) -> None:
    state, sized = _world()
    fast, general = _leader(state).term, _leader(state).term
    assert fast is not None and general is not None
    rows = _rows(sized)
    with state.view() as v:
        for p in (fast.placement, general.placement):
            if restricted:  # as rebuild sets it when tokens bind executors to namespaces
                p.restricted = {"ex1": frozenset({"default"}), "ex2": frozenset({"other"})}
            for ready, seq in rows[:already]:  # these wait already (replaced, as wait replaces)
                p.wait(v, ready._replace(not_before_ms=T0), seq + 1)
        fast.placement.wait_rows(v, rows)
        for ready, seq in rows:
            general.placement.wait(v, ready, seq)
    assert len(fast.placement.waiting) == len(rows)
    assert _snapshot(fast.placement) == _snapshot(general.placement)
    for now in (T0 + 6 * S, T0 + 7 * S):  # the walks that follow propose the same
        assert _walk(fast.placement, state, now) == _walk(general.placement, state, now, monkeypatch)


def test_the_inline_admission_test_answers_as_admit() -> None:
    """Whenever no quota exists and an attempt names no lock and no pool, admit says None (what
    assign takes without calling it); with quotas, locks or pools it is asked."""
    state, sized = _world()
    t = _leader(state).term
    assert t is not None
    with state.view() as v:
        t.placement.wait_rows(v, _rows(sized))
        assert not v.has_quotas
        cmd = pb.Command(epoch=1, now_ms=T0)
        admission = Admission(v, T0 + 6 * S, t.holdings.reserved, cmd, {})
        skipped = [w for w in t.placement.waiting.values() if not (w.locks or w.pool)]
        asked = [w for w in t.placement.waiting.values() if w.locks or w.pool]
        assert skipped and asked
        assert all(admission.admit(w) is None for w in skipped)
        assert any(admission.admit(w) is not None for w in asked)


@pytest.mark.parametrize("backfill", [0, 50])
@pytest.mark.parametrize("policy", [None, PolicyNeed((), (Lock("db"),))], ids=["no-policy", "lock"])
def test_a_plain_reservation_holds_what_holdings_reserve_holds(
    backfill: int, policy: PolicyNeed | None
) -> None:
    state, sized = _world()
    t = _leader(state).term
    assert t is not None
    with state.view() as v:
        for spec in SPECS:
            at = T0 + 9 * S
            ready = AttemptReady(run_id_of(spec.name, at), spec.name, at, 0, 1, 1, backfill_share=backfill)
            t.placement.wait(v, ready)
        for run_id in sized:
            t.placement.wait(v, AttemptReady(run_id, "sized", T0, 0, 1, 1, backfill_share=backfill))
        reference = Holdings()
        cmd = pb.Command(epoch=1, now_ms=T0)
        assigned: list[tuple[tuple[str, int], str]] = []
        for key, w in sorted(t.placement.waiting.items()):
            t.placement._reserve(v, w, "ex2", policy, cmd, assigned, None)
            reference.reserve(key, "ex2", w.need, policy, w.ready.backfill_share > 0)
            assert w.reserved_for == "ex2"
    h = t.holdings
    assert any(w.need is not NO_NEED for w in t.placement.waiting.values())
    assert h.used == reference.used
    assert h.backfill_busy == reference.backfill_busy
    assert h.reserved.by_key == reference.reserved.by_key
    assert h.held.running == reference.held.running
    assert [key for key, _ in assigned] == sorted(t.placement.waiting)


def test_ready_rows_reads_each_row_as_task_by_number_does() -> None:
    state = world()
    at = T0 + S
    applied = state.apply(fire_columns(state, [f"h{i}" for i in range(12)], at))
    assert applied.result.ok
    [eff] = [e for e in applied.effects if isinstance(e, ReadyColumns)]
    with state.view() as v:
        # numbers no task has (0 and past the last): left out, their seqs skipped
        unknown = eff._replace(
            tasks=[0, *eff.tasks, 10_000],
            nominals=[at, *eff.nominals, at],
            next_fires=[0, *eff.next_fires, 0],
        )
        for e in (eff, unknown):
            expected = []
            for i, (number, nominal) in enumerate(zip(e.tasks, e.nominals, strict=True)):
                st = v.task_by_number(number)
                if st is not None:
                    name = st.spec.name
                    expected.append(
                        (AttemptReady(run_id_of(name, nominal), name, nominal, 0, 1, 4), e.seq_base + i)
                    )
            rows = columns.ready_rows(v, e, 4)
            assert rows == expected and all(type(ready) is AttemptReady for ready, _ in rows)


@pytest.mark.parametrize("backfill", [0, 50], ids=["plain", "backfill"])
def test_a_handed_over_reservation_gives_back_its_lock_and_backfill_place(backfill: int) -> None:
    """unwait's and Holdings.drop's inline hand-over test each kind held (found untested by the
    review: dropping the lock test would leak the lock's reservation for the rest of the term)."""
    state, _ = _world()
    t = _leader(state).term
    assert t is not None
    p, h = t.placement, t.holdings
    for table in (p.waiting, p.queues, p.sized, p.pooled):  # only this attempt waits
        table.clear()
    at = T0 + 9 * S
    ready = AttemptReady(run_id_of("locked", at), "locked", at, 0, 1, 1, backfill_share=backfill)
    with state.view() as v:
        p.wait(v, ready)
    _walk(p, state, at)
    key = (ready.run_id, 0)
    w = p.waiting[key]
    assert w.reserved_for and key in h.reserved.by_key
    assert (key in h.backfill_busy) == bool(backfill) and not h.held.running
    assert p.unwait(key, w.reserved_for)  # handed over: the slot kept, the lock and place given back
    assert key not in h.reserved.by_key and key not in h.backfill_busy
    assert h.used[w.reserved_for] == 1

    # The same through a lease's end: what a reservation held and no hand-over gave back yet.
    h.reserve(key, "ex2", NO_NEED, PolicyNeed((), (Lock("db"),)), bool(backfill))
    h.leases["x/0/1"] = Lease("x/0/1", ready.run_id, "locked", 0, 1, "ex2", at + S, 0)
    assert key in h.reserved.by_key
    assert h.drop("x/0/1") is not None
    assert key not in h.reserved.by_key and key not in h.backfill_busy
