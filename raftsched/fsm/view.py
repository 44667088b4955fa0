"""The one read path into the replicated state for threads other than the applier.

The applier thread mutates the state machine's tables in place (``SchedulerState.apply`` holds
``SchedulerState.lock`` for each command). Any other thread - the leader driver, the dispatcher
on the event loop, gRPC servicers, the web console, metrics scrapes, alerts - reads them only
inside a view, or through ``SchedulerState``'s read methods (``get_task``, ``list_tasks_page``,
...: :class:`LockedReads`, defined here), each of which holds the same lock for one whole answer::

    with state.view() as v:
        ring = ShardRing(v.placeable_executors())
        spec = v.task_spec(name)

Contract:

* The lock is held for the whole block: every read in it sees the state after one whole
  command, never half of one (a torn read) and never a table changing size under a walk. Take
  one view per *batch* of reads (a dispatcher tick, a chunk of due tasks), not one per item, and
  keep the block short: the applier waits for it.
* Accessors are read-only. Mappings are typed :class:`~collections.abc.Mapping`; the records
  and task states in them (and :meth:`StateView.executor`'s record) are the live objects - never
  mutate them, and never keep them past the block (copy what must outlive it; protobuf messages
  with ``CopyFrom``). ``active_run``, ``spec_for`` and ``running_runs`` return fresh copies.
* A view is dead once its block ends: any accessor then raises ``RuntimeError``, so a view
  stored in an attribute or a closure fails loudly instead of reading unlocked.

Two small books are copy-on-write and readable from any thread without a view: the membership
record (``state.membership``: replaced, never mutated) and the token records (``state.access``:
a revocation stores a new record). ``tests/unit/test_architecture.py`` checks that code outside
``raftsched/fsm`` touches the other tables only through a view.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from collections.abc import Set as AbstractSet
from contextlib import contextmanager
from typing import Protocol

from raftsched.abc import StateStore
from raftsched.fsm import queries, timeline
from raftsched.fsm.calendars import CalendarBook
from raftsched.fsm.effects import AttemptReady, DispatchAttempt
from raftsched.fsm.hot import HotBook
from raftsched.fsm.hot_slots import HotRef, Numbering, SlotTable, hot_ref, seq_of
from raftsched.fsm.policy import LockView, PolicyBook, PoolView, Reservations, pool_reason
from raftsched.fsm.policy import Need as PolicyNeed
from raftsched.fsm.records import TaskState
from raftsched.fsm.runs import RunBook
from raftsched.fsm.taskbackfill import BACKFILL_ID_MARK
from raftsched.fsm.workflow_model import is_internal, split_internal
from raftsched.fsm.workflows import WorkflowBook
from raftsched.model import Lock, TaskSpec
from raftsched.sharding.placement import NO_NEED, ExecutorUsage, Need
from raftsched.timing.calendar import Calendar
from raftsched.v1 import log_pb2 as pb

Planning = tuple[TaskSpec, int, int, int]
"""``(spec, version, watermark_ms, next_fire_ms)`` of an enabled task."""
# What the leader's driver reads of a due task (StateView.planning_inputs).
PlanningInput = tuple[TaskSpec, int, int, bool, int]


class ViewHost(Protocol):
    """What a view reads of the state machine (``SchedulerState``; a protocol, so this module
    does not import the state's)."""

    @property
    def tasks(self) -> Mapping[str, TaskState]: ...
    @property
    def executors(self) -> Mapping[str, pb.ExecutorRecord]: ...
    @property
    def active(self) -> Mapping[str, bytes]: ...
    @property
    def active_per_task(self) -> Mapping[str, int]: ...
    @property
    def max_now_ms(self) -> int: ...
    @property
    def store(self) -> StateStore: ...
    @property
    def usage(self) -> ExecutorUsage: ...
    @property
    def unplaceable(self) -> AbstractSet[str]: ...
    @property
    def wf(self) -> WorkflowBook: ...
    @property
    def policy(self) -> PolicyBook: ...
    @property
    def numbering(self) -> Numbering: ...
    @property
    def hot(self) -> HotBook: ...
    @property
    def runs(self) -> RunBook: ...
    def active_run(self, run_id: str) -> pb.Run | None: ...
    def need_for_run(self, run: pb.Run) -> Need: ...
    def pending_attempts(self) -> list[AttemptReady | DispatchAttempt]: ...


class StateView:
    """Read-only accessors over a :class:`SchedulerState` whose lock is held (see module doc)."""

    __slots__ = ("_state",)

    def __init__(self, state: ViewHost) -> None:
        self._state: ViewHost | None = state

    def close(self) -> None:
        """End the view (``SchedulerState.view`` does, when its block ends)."""
        self._state = None

    @property
    def _s(self) -> ViewHost:
        s = self._state
        if s is None:
            raise RuntimeError("a state view was used outside its `with state.view()` block")
        return s

    # -- tables (live, read-only) ------------------------------------------------------------------

    @property
    def tasks(self) -> Mapping[str, TaskState]:
        return self._s.tasks

    @property
    def executors(self) -> Mapping[str, pb.ExecutorRecord]:
        return self._s.executors

    @property
    def active_count(self) -> int:
        """How many runs are unfinished (live hot runs included) without building :attr:`active`."""
        s = self._s
        return len(s.active) + (s.hot.live_count() if s.runs.slots.state else 0)

    @property
    def active(self) -> Mapping[str, bytes]:
        """Unfinished runs, serialized, by run id (the live hot runs synthesised, as the cold path
        would hold them: a copy then, built per call)."""
        s = self._s
        if not s.runs.slots.state:
            return s.active
        return {**s.active, **s.hot.live_runs()}

    @property
    def max_now_ms(self) -> int:
        return self._s.max_now_ms

    def unplaceable_tasks(self) -> frozenset[str]:
        """The tasks flagged unplaceable: no live executor could ever run them."""
        return frozenset(self._s.unplaceable)

    # -- the columnar hot path (raftsched.fsm.hot: how the leader maps numbers and seqs) ----------

    def numbering_on(self) -> bool:
        """Whether tasks and executors are numbered (a NumberEntities applied): columns may be proposed."""
        return self._s.numbering.on

    def hot_slots(self) -> int:
        """Slots in the hot path's in-memory table (unfinished hot runs, and the finished ones
        after the oldest of them not trimmed yet): its memory, for the metrics."""
        return len(self._s.hot.slots)

    def hot_promote_bound(self) -> int:
        """The ``before_seq`` of a ``PromoteHotRuns`` due now, or 0 (:meth:`HotBook.promote_bound`)."""
        return self._s.hot.promote_bound()

    def hot_promotion_applied(self, before_seq: int) -> bool:
        """Whether a ``PromoteHotRuns`` up to ``before_seq`` has applied
        (:meth:`HotBook.promotion_applied`)."""
        return self._s.hot.promotion_applied(before_seq)

    def task_by_number(self, number: int) -> TaskState | None:
        """The task numbered ``number`` (live object: read, never keep), or None."""
        return self._s.numbering.task(number)

    def tasks_by_numbers(self, numbers: Iterable[int]) -> list[TaskState | None]:
        """:meth:`task_by_number` of each of ``numbers``, in order (live objects: read, never keep)."""
        return self._s.numbering.tasks_of(numbers)

    def executor_name(self, number: int) -> str | None:
        """The executor numbered ``number``, or None."""
        return self._s.numbering.executor_name(number)

    def executor_number(self, name: str) -> int:
        """The number of executor ``name`` (0: not numbered)."""
        return self._s.numbering.executor_number(name)

    def hot_run(self, seq: int) -> HotRef | None:
        """The live (pending or running) hot run ``seq``, or None (finished, promoted, unknown)."""
        s = self._s
        return hot_ref(s.runs.slots, s.numbering, seq)

    def hot_seq(self, run_id: str) -> int:
        """The seq of the live hot run ``run_id`` (0: it is not one: report it the cold way)."""
        s = self._s
        return seq_of(s.runs.slots, s.tasks, run_id)

    def hot_live(self, seq: int) -> bool:
        """Whether ``seq`` is a live (pending or running) hot run. Seqs are never reused, so a
        reader that learnt a run's seq (from the entry that made it) asks this instead of
        :meth:`hot_seq`: the same answer for that run, without parsing its id."""
        return self._s.runs.slots.live(seq) >= 0

    def hot_tables(self) -> tuple[SlotTable, Numbering]:
        """The hot path's slot table and numbering themselves, for a reader's loop over many rows
        (:func:`raftsched.leader.columns.dispatched_rows`): live, read-only, valid in this view."""
        s = self._s
        return s.runs.slots, s.numbering

    # -- tasks -----------------------------------------------------------------------------------

    def task_spec(self, name: str) -> TaskSpec | None:
        st = self._s.tasks.get(name)
        return st.spec if st is not None else None

    def task_namespace(self, task: str) -> str:
        """The namespace of ``task`` ("default" if it is gone)."""
        st = self._s.tasks.get(task)
        return st.spec.namespace if st is not None else "default"

    def task_for_planning(self, name: str) -> Planning | None:
        """``(spec, version, watermark_ms, next_fire_ms)`` of an enabled task, or None."""
        return queries.task_for_planning(self._s.tasks, name)

    def planning_inputs(self, names: Iterable[str], numbers: bool = False) -> dict[str, PlanningInput | None]:
        """For each of ``names``: ``(spec, version, next_fire_ms, active, number)`` of an enabled
        task (``active``: it has a run still active; ``number``, with ``numbers``, its number if
        it is a hot task, else 0), None for one disabled or gone, in one pass (the leader driver
        reads a chunk of due tasks at once: once per fire)."""
        s = self._s
        tasks, active = s.tasks, s.active_per_task
        out: dict[str, PlanningInput | None] = {}
        for name in names:
            st = tasks.get(name)
            if st is None or not st.enabled:
                out[name] = None
            else:
                out[name] = (
                    st.spec,
                    st.version,
                    st.next_fire_ms,
                    name in active,
                    st.number if numbers and st.hot else 0,
                )
        return out

    def current_spec_bytes(self, task: str) -> tuple[int, bytes] | None:
        """``(version, serialised TaskRecord{spec})`` of ``task``'s current version (None if it is
        gone). A reader that keeps parsed specs checks an entry against these bytes *by
        identity*: a new version, or the task deleted and created again, brings new bytes."""
        st = self._s.tasks.get(task)
        return (st.version, st.spec_bytes) if st is not None else None

    def spec_for(self, task: str, version: int) -> pb.TaskSpec | None:
        """The spec a run of ``task`` at ``version`` executes (None if the task is gone)."""
        s = self._s
        return queries.spec_for(s.tasks, s.store.reader, task, version)

    # -- runs --------------------------------------------------------------------------------------

    def active_run(self, run_id: str) -> pb.Run | None:
        """A fresh copy of the unfinished run ``run_id`` (the caller may keep it), or None."""
        return self._s.active_run(run_id)

    def pending_attempts(self) -> list[AttemptReady | DispatchAttempt]:
        """See :meth:`SchedulerState.pending_attempts` (its lock is re-entrant)."""
        return self._s.pending_attempts()

    def tried_executors(self, run_id: str, shard: int, attempt: int) -> frozenset[str]:
        """The executors attempts of ``shard`` before ``attempt`` were assigned to, read from the
        unfinished run's timeline (its last TIMELINE_CAP entries); empty if the run is gone."""
        run = self._s.active_run(run_id)
        if run is None:
            return frozenset()
        return frozenset(
            e.executor
            for e in timeline.entries(run)
            if e.event == "assigned" and e.shard == shard and e.attempt < attempt and e.executor
        )

    def need_hint(self, task: str, run_id: str) -> Need:
        """The cpu, memory and labels ``run_id``'s attempts need: from the task's current spec
        when it declares nothing (the common case, two lookups), else from the run. The state
        machine checks the need of the run itself when the assignment applies."""
        s = self._s
        st = s.tasks.get(task)
        spec = st.spec if st is not None else None
        # A workflow task's needs are in its workflow's spec, not its internal task's.
        declared = spec is None or spec.resource_cpu or spec.resource_memory_mb or spec.selector
        if not declared and not is_internal(task):
            return NO_NEED
        run = s.active_run(run_id)
        return s.need_for_run(run) if run is not None else NO_NEED

    def running_runs(self) -> list[pb.Run]:
        """Copies of the runs with an attempt RUNNING, by run id (found from the state's usage,
        without parsing a backlog of pending runs)."""
        s = self._s
        running = sorted({run_id for run_id, _shard in s.usage.running})
        found = (s.active.get(run_id) for run_id in running)
        runs = [pb.Run.FromString(data) for data in found if data is not None]
        if s.usage.hot:
            runs.extend(map(pb.Run.FromString, s.hot.running_runs().values()))
            runs.sort(key=lambda run: run.run_id)
        return runs

    def cancellable_runs(self, task: str, namespace: str, owner: str, state: str) -> list[tuple[str, str]]:
        """``(run_id, namespace)`` of each unfinished run of a plain task that matches every given
        filter (``""``: any): ``task``, the task's ``namespace`` and ``owner``, ``state``
        ("pending" or "running"), by run id. Workflow task runs are left out (a workflow run is
        killed as a whole)."""
        s = self._s
        want = {"pending": pb.PENDING, "running": pb.RUNNING}.get(state)
        out: list[tuple[str, str]] = []
        active = self.active
        for run_id in sorted(active):
            name = run_id.partition("@")[0]
            if (task and name != task) or is_internal(name):
                continue
            st = s.tasks.get(name)
            spec = st.spec if st is not None else None
            ns = spec.namespace if spec is not None else "default"
            if (namespace and ns != namespace) or (owner and (spec is None or spec.owner != owner)):
                continue
            run = pb.Run.FromString(active[run_id])
            if run.workflow_run or (want is not None and run.state != want):
                continue
            out.append((run_id, ns))
        return out

    def attempt_cancelled(self, run_id: str, shard: int, attempt: int) -> bool:
        """Whether ``run_id``'s ``shard`` ended CANCELLED at ``attempt`` (its run cancelled,
        killed or replaced; a finished run is read from committed data)."""
        s = self._s
        if shard == 0 and seq_of(s.runs.slots, s.tasks, run_id):
            # A live hot run (pending or running: never cancelled), not built to be read: an
            # executor's heartbeat may list a run just reported, whose result is on its way.
            return False
        run = s.active_run(run_id)
        if run is None:
            with s.store.reader() as r:
                run = queries.stored_run(r, run_id)
        if run is None or shard >= len(run.shards):
            return False
        found = run.shards[shard]
        return found.attempt == attempt and found.state == pb.CANCELLED

    def workflow_run_states(self) -> list[pb.WorkflowRunState]:
        """The state of every workflow run in memory."""
        return [run.state for run in self._s.wf.runs.values()]

    def sla_workflows(self) -> list[tuple[pb.WorkflowSpec, pb.WorkflowRecord, list[pb.WorkflowRun]]]:
        """The workflows with an SLA or freshness: spec, record and unfinished runs (live
        messages: read them inside the view). Cost: one test per workflow."""
        book = self._s.wf
        out = []
        for name in sorted(book.workflows):
            wf = book.workflows[name]
            s = wf.spec
            if s.sla_start_within_ms or s.sla_finish_within_ms or s.freshness_ms:
                runs = [wr for wr in book.runs.values() if wr.workflow == name]
                out.append((s, wf.record(), runs))
        return out

    # -- executors ---------------------------------------------------------------------------------

    def waits_due_ms(self) -> tuple[int, int]:
        """The earliest cross-workflow deadline (timeout, warn_after, a release left for later) or
        gate of a task held outside the parallelism limits (0: none), when the leader proposes
        ``WorkflowWaitsDue``, and how many of those have
        applied (one applied: the leader may propose the next at once)."""
        deps = self._s.wf.deps
        gate = self._s.wf.next_gate_ms()
        due = min(d for d in (deps.next_due_ms, gate) if d) if deps.next_due_ms or gate else 0
        return due, deps.expiries

    def executor(self, name: str) -> pb.ExecutorRecord | None:
        return self._s.executors.get(name)

    def live_executors(self) -> dict[str, int]:
        """``name -> slots`` of executors alive in the replicated membership (draining included)."""
        return queries.live_executors(self._s.executors)

    def placeable_executors(self) -> dict[str, int]:
        """``name -> slots`` of live executors that are not draining: where new attempts go."""
        return queries.placeable_executors(self._s.executors)

    def restricted_executors(self) -> dict[str, frozenset[str]]:
        """``name -> namespaces`` of live executors that take work of some namespaces only."""
        return {
            name: frozenset(rec.namespaces)
            for name, rec in self._s.executors.items()
            if rec.alive and rec.namespaces and "*" not in rec.namespaces
        }

    def executor_usage(self, include_left: bool = False) -> list[tuple[pb.ExecutorRecord, int]]:
        """See :meth:`SchedulerState.executor_usage`."""
        s = self._s
        return queries.executor_usage(s.executors, lambda name: s.usage.used(name)[0], include_left)

    def usage_of(self, executor: str) -> tuple[int, float, int]:
        """``(slots, cpu, memory_mb)`` the running attempts on ``executor`` hold."""
        return self._s.usage.used(executor)

    # -- quotas and locks ----------------------------------------------------------------------------

    @property
    def has_quotas(self) -> bool:
        return bool(self._s.policy.quotas)

    def policy_need(
        self, owner: str, namespace: str, locks: tuple[Lock, ...], pool: str = ""
    ) -> PolicyNeed | None:
        """See :meth:`raftsched.fsm.policy.PolicyBook.need`."""
        return self._s.policy.need(owner, namespace, locks, pool)

    def pool_free(self, name: str, reserved: Reservations | None = None) -> int:
        """See :meth:`raftsched.fsm.policy.PolicyBook.pool_free`."""
        return self._s.policy.pool_free(name, reserved)

    def pool_reason(self, name: str) -> str:
        """The wait reason of an attempt held back by pool ``name``."""
        return pool_reason(name, self._s.policy.pools.get(name))

    def policy_check(self, need: PolicyNeed, now: int, reserved: Reservations | None = None) -> str:
        """See :meth:`raftsched.fsm.policy.PolicyBook.check`."""
        return self._s.policy.check(need, now, reserved)


class LockedReads:
    """The state's read methods (``SchedulerState`` inherits them): each holds the state's lock
    for one whole answer, so any thread may call them; :meth:`view` holds it for a block of
    reads. Nothing here writes."""

    # The state's tables these reads walk (set by ``SchedulerState``).
    lock: threading.RLock
    store: StateStore
    tasks: dict[str, TaskState]
    active: dict[str, bytes]
    active_per_task: dict[str, int]
    executors: dict[str, pb.ExecutorRecord]
    usage: ExecutorUsage
    unplaceable: set[str]
    max_now_ms: int
    wf: WorkflowBook
    policy: PolicyBook
    calendars: CalendarBook
    runs: RunBook
    numbering: Numbering
    hot: HotBook

    def active_run(self, run_id: str) -> pb.Run | None:
        """A fresh copy of the unfinished run ``run_id`` (a live hot run synthesised: nothing
        changes), or None (apply thread, or hold the lock)."""
        return self.runs.peek(run_id)

    def need_for_run(self, run: pb.Run) -> Need:
        """What each attempt of ``run`` holds on its executor besides its slot (hold the lock)."""
        return self.runs.need_for_run(run)

    @contextmanager
    def view(self) -> Iterator[StateView]:
        """Hold the lock and read through the view it yields (``raftsched.fsm.view``): the one
        read path for threads other than the applier. The view is dead after the block."""
        with self.lock:
            v = StateView(self)
            try:
                yield v
            finally:
                v.close()

    def get_task(self, name: str) -> pb.TaskRecord | None:
        with self.lock:
            return queries.task_record(self.tasks, name)

    def list_tasks(self, prefix: str = "", limit: int = 0) -> list[pb.TaskRecord]:
        # Choose the names off the lock (the applier takes it for every entry): copying the keys
        # is one C call; filtering and ordering a million of them is not.
        with self.lock:
            names = list(self.tasks)
        chosen = queries.first_task_names(names, prefix, limit)
        with self.lock:
            return queries.task_records(self.tasks, chosen)

    def list_tasks_page(
        self, prefix: str = "", after: str = "", size: int = 500
    ) -> tuple[list[pb.TaskRecord], bool]:
        """One page of :meth:`list_tasks` (names after ``after``) and whether more follow.

        The lock is held only to copy the names and then the page's record bytes, never while
        sorting or parsing, so concurrent readers do not hold up apply.
        """
        with self.lock:
            names = list(self.tasks)
        page, more = queries.task_page(names, prefix, after, size)
        with self.lock:
            raw = queries.record_bytes_of(self.tasks, page)
        return [pb.TaskRecord.FromString(b) for b in raw], more

    def user_task_names(self) -> list[str]:
        """The user task names, by name (the lock is held only to copy the names)."""
        with self.lock:
            names = list(self.tasks)
        return queries.task_page(names, "", "", len(names))[0]

    def armed_tasks(self) -> list[tuple[str, int]]:
        """``(name, next_fire_ms)`` of every enabled task with a next fire (the leader rebuilds its
        wheel from this). In creation order, not sorted: sorting a million names is one C call
        that holds the GIL for most of a second, long enough to stall Raft heartbeats."""
        with self.lock:
            return queries.armed_tasks(self.tasks)

    def task_for_planning(self, name: str) -> tuple[TaskSpec, int, int, int] | None:
        """``(spec, version, watermark_ms, next_fire_ms)`` of an enabled task, or None."""
        with self.lock:
            return queries.task_for_planning(self.tasks, name)

    def spec_for(self, task: str, version: int) -> pb.TaskSpec | None:
        """The spec a run of ``task`` at ``version`` executes (None if the task is gone)."""
        # Any thread may ask (the dispatcher runs on the event loop): an older version is read
        # from committed data through a reader, never the apply thread's open write batch.
        with self.lock:
            return queries.spec_for(self.tasks, self.store.reader, task, version)

    def live_hot_run(self, run_id: str) -> pb.Run | None:
        """The live hot run ``run_id`` as a read shows it (raftsched.fsm.hot: it has no stored
        record until it finishes or is promoted), or None."""
        with self.lock:
            if not self.runs.slots.state:
                return None
            seq = seq_of(self.runs.slots, self.tasks, run_id)
            run = self.hot.synthesise(seq) if seq else None
        return timeline.expand(run) if run is not None else None

    def read_run(self, run_id: str) -> pb.Run | None:
        """The run ``run_id`` (unfinished or retained) as a read shows it, or None; raises
        ValueError if ``run_id`` is not a run id (as :func:`queries.stored_run` does).

        A live hot run has no stored record (:meth:`live_hot_run`), and the record a run gets
        when it ends or is promoted is written in the applier's open batch, which a store reader
        on another thread sees only once the applier commits it (``Replica.end_of_tick``, every
        64 entries of a backlog or when it runs dry; between two entries it gives the lock to
        waiting readers). Reading the store first and the live runs next lost a run that ended
        in between: so the state's own view comes first (live, or written since the last
        commit: ``RunBook.unflushed``), under the lock, and the committed store only then (what
        is not there was committed before that batch)."""
        with self.lock:
            run = None
            if self.runs.slots.state:
                seq = seq_of(self.runs.slots, self.tasks, run_id)
                run = self.hot.synthesise(seq) if seq else None
            raw = self.runs.unflushed.get(run_id) if run is None else None
        if run is not None:
            return timeline.expand(run)
        if raw is not None:
            return timeline.expand(pb.Run.FromString(raw))
        with self.store.reader() as r:
            return queries.stored_run(r, run_id)

    def live_hot_runs(self, tasks: Iterable[str], since_ms: int, until_ms: int, state: int) -> list[pb.Run]:
        """The live hot runs of ``tasks`` with a nominal time in ``[since_ms, until_ms]`` (0: no
        end) in state ``state`` (0: any), as reads show them (see :meth:`live_hot_run`)."""
        with self.lock:
            if not self.runs.slots.state:
                return []
            wanted = set(tasks)
            live = self.hot.live_runs_of(wanted)
        out = []
        for run_id in sorted(live):
            if run_id.rpartition("@")[0] not in wanted:
                continue
            run = pb.Run.FromString(live[run_id])
            if run.nominal_ms < since_ms or (until_ms and run.nominal_ms > until_ms):
                continue
            if state and run.state != state:
                continue
            out.append(timeline.expand(run))
        return out

    def runs_in_memory(
        self, tasks: Iterable[str], since_ms: int, until_ms: int, state: int
    ) -> tuple[list[pb.Run], set[str]]:
        """For a list of runs (ListRuns): the runs of ``tasks`` the committed store may not show
        as they are, as :meth:`live_hot_runs` filters them - the live hot runs, and the runs whose
        record was written since the store's last commit (see :meth:`read_run`) - and the ids of
        all of those whatever the filter (their stored records, if any, are older: leave them out).
        Read this before the store: a run that leaves this set afterwards is committed by then."""
        wanted = set(tasks)
        with self.lock:
            raws = self.hot.live_runs_of(wanted) if self.runs.slots.state else {}
            for run_id, raw in self.runs.unflushed.items():
                if run_id not in raws and run_id.rpartition("@")[0] in wanted:
                    raws[run_id] = raw
        seen: set[str] = set()
        out = []
        for run_id in sorted(raws):
            if run_id.rpartition("@")[0] not in wanted:
                continue
            seen.add(run_id)
            run = pb.Run.FromString(raws[run_id])
            if run.nominal_ms < since_ms or (until_ms and run.nominal_ms > until_ms):
                continue
            if state and run.state != state:
                continue
            out.append(timeline.expand(run))
        return out, seen

    def pending_attempts(self) -> list[AttemptReady | DispatchAttempt]:
        """Unfinished attempts in run-id order: ``AttemptReady`` for those waiting for an executor,
        ``DispatchAttempt`` for those assigned (a new leader re-sends these to the same executor,
        whose execution log deduplicates them)."""
        with self.lock:
            out = queries.pending_attempts(self.active, self.wf)
            if self.runs.slots.state:
                out.extend(self.hot.pending_attempts())
                out.sort(key=lambda a: a.run_id)
            return out

    # -- workflow reads ---------------------------------------------------------------------------

    def get_calendar(self, name: str) -> pb.CalendarRecord | None:
        with self.lock:
            rec = self.calendars.records.get(name)
            return None if rec is None else _copy_calendar(rec)

    def list_calendars(self) -> list[pb.CalendarRecord]:
        with self.lock:
            return [_copy_calendar(self.calendars.records[n]) for n in sorted(self.calendars.records)]

    def calendar_for(self, name: str) -> Calendar | None:
        """The calendar ``name`` as apply decides with it (a frozen value), or None."""
        with self.lock:
            return self.calendars.calendars.get(name)

    def get_workflow(self, name: str, version: int = 0) -> pb.WorkflowRecord | None:
        """A workflow's record; ``version`` > 0 gives that version's definition (None if gone)."""
        with self.lock:
            return queries.workflow_record(self.wf, self.store.reader, name, version)

    def list_workflows(self, prefix: str = "", limit: int = 0) -> list[pb.WorkflowRecord]:
        with self.lock:
            return queries.workflow_records(self.wf, self.store.reader, prefix, limit)

    def get_workflow_run(self, run_id: str) -> pb.WorkflowRun | None:
        with self.lock:
            return queries.workflow_run(self.wf, self.store.reader, run_id)

    def list_workflow_runs(
        self, workflow: str, limit: int = 100, active_only: bool = False
    ) -> list[pb.WorkflowRun]:
        """Runs of ``workflow``, newest logical time first (retained history plus active runs)."""
        with self.lock:
            return queries.workflow_runs(self.wf, self.store.reader, workflow, limit, active_only)

    def get_backfill(self, backfill_id: str) -> pb.BackfillRecord | None:
        with self.lock, self.store.reader() as r:
            return queries.backfill(r, backfill_id)

    def list_backfills(self, workflow: str) -> list[pb.BackfillRecord]:
        with self.lock, self.store.reader() as r:
            return queries.backfills(r, workflow)

    def list_task_backfills(self, task: str) -> list[pb.BackfillRecord]:
        """The backfills of plain task ``task``, newest first."""
        with self.lock, self.store.reader() as r:
            return queries.backfills(r, task, BACKFILL_ID_MARK)

    def task_namespace(self, task: str) -> str:
        """The namespace of ``task`` ("default" if it is gone)."""
        with self.lock:
            st = self.tasks.get(task)
            return st.spec.namespace if st is not None else "default"

    def executor_usage(self, include_left: bool = False) -> list[tuple[pb.ExecutorRecord, int]]:
        """Executors by name (members only unless ``include_left``), each with the number of
        attempts assigned to it and not finished."""
        with self.lock:
            # The running-attempt counts come from ``usage`` (kept by apply as attempts start and
            # settle), not from parsing every active run: that parse took ~0.1 s per call on the
            # event loop of a node with 2,000 active runs.
            return queries.executor_usage(self.executors, lambda name: self.usage.used(name)[0], include_left)

    def live_executors(self) -> dict[str, int]:
        """``name -> slots`` of executors alive in the replicated membership (draining included)."""
        with self.lock:
            return queries.live_executors(self.executors)

    def placeable_executors(self) -> dict[str, int]:
        """``name -> slots`` of live executors that are not draining: where new attempts go."""
        with self.lock:
            return queries.placeable_executors(self.executors)

    def quotas(self) -> list[pb.QuotaRecord]:
        """Every quota (copies), buckets refilled to the newest applied leader time."""
        with self.lock:
            return self.policy.quota_view(self.max_now_ms)

    def locks(self) -> list[LockView]:
        """Every resource lock held or waited for, with its holders and waiters."""
        with self.lock:
            return self.policy.lock_view()

    def pools(self) -> list[PoolView]:
        """Every pool with its holders and waiting count."""
        with self.lock:
            return self.policy.pool_view()

    def calendar_users(self, name: str) -> list[str]:
        """Who excludes calendar ``name``: ``task NAME`` and ``workflow NAME`` entries, sorted."""
        with self.lock:  # readers (the admin service) call it too
            return self._calendar_users(name)

    def _pool_users(self, name: str) -> list[str]:
        """The tasks and workflows whose tasks name pool ``name``, sorted."""
        users: set[str] = set()
        for task, st in self.tasks.items():
            if st.peek().pool != name:
                continue
            users.add(f"workflow {split_internal(task)[0]}" if is_internal(task) else f"task {task}")
        return sorted(users)

    def _calendar_users(self, name: str) -> list[str]:
        users: set[str] = set()
        for task, st in self.tasks.items():
            if name not in st.peek().exclude:
                continue
            if is_internal(task):
                users.add(f"workflow {split_internal(task)[0]}")
            else:
                users.add(f"task {task}")
        for workflow in self.wf.workflows.values():
            if name in workflow.spec.exclude:
                users.add(f"workflow {workflow.spec.name}")
        return sorted(users)


def _copy_calendar(rec: pb.CalendarRecord) -> pb.CalendarRecord:
    out = pb.CalendarRecord()
    out.CopyFrom(rec)
    return out
