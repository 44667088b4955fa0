"""The one read path into the replicated state for threads other than the applier.

The applier thread mutates the state machine's tables in place (``SchedulerState.apply`` holds
``SchedulerState.lock`` for each command). Any other thread - the leader driver, the dispatcher
on the event loop, gRPC servicers, the web console, metrics scrapes, alerts - reads them only
inside a view, or through ``SchedulerState``'s read methods (``get_task``, ``list_tasks_page``,
...), each of which holds the same lock for one whole answer::

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

from collections.abc import Iterable, Mapping
from typing import Protocol

from raftsched.abc import StateStore
from raftsched.fsm import queries
from raftsched.fsm.effects import AttemptReady, DispatchAttempt
from raftsched.fsm.policy import Need as PolicyNeed
from raftsched.fsm.policy import PolicyBook, Reservations
from raftsched.fsm.records import TaskState
from raftsched.fsm.workflows import WorkflowBook, is_internal
from raftsched.model import Lock, TaskSpec
from raftsched.sharding.placement import NO_NEED, ExecutorUsage, Need
from raftsched.v1 import log_pb2 as pb

Planning = tuple[TaskSpec, int, int, int]
"""``(spec, version, watermark_ms, next_fire_ms)`` of an enabled task."""


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
    def wf(self) -> WorkflowBook: ...
    @property
    def policy(self) -> PolicyBook: ...
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
    def active(self) -> Mapping[str, bytes]:
        """Unfinished runs, serialized, by run id."""
        return self._s.active

    @property
    def max_now_ms(self) -> int:
        return self._s.max_now_ms

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

    def has_active_runs(self, task: str) -> bool:
        return task in self._s.active_per_task

    def planning_inputs(self, names: Iterable[str]) -> dict[str, tuple[Planning | None, bool]]:
        """For each of ``names``: what :meth:`task_for_planning` and :meth:`has_active_runs` say,
        in one pass (the leader driver reads a chunk of due tasks at once: once per fire)."""
        s = self._s
        tasks, active = s.tasks, s.active_per_task
        out: dict[str, tuple[Planning | None, bool]] = {}
        for name in names:
            st = tasks.get(name)
            planning = (st.spec, st.version, st.watermark_ms, st.next_fire_ms) if st and st.enabled else None
            out[name] = (planning, name in active)
        return out

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
        return [pb.Run.FromString(data) for data in found if data is not None]

    def workflow_run_states(self) -> list[pb.WorkflowRunState]:
        """The state of every workflow run in memory."""
        return [run.state for run in self._s.wf.runs.values()]

    # -- executors ---------------------------------------------------------------------------------

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

    def policy_need(self, owner: str, namespace: str, locks: tuple[Lock, ...]) -> PolicyNeed | None:
        """See :meth:`raftsched.fsm.policy.PolicyBook.need`."""
        return self._s.policy.need(owner, namespace, locks)

    def policy_check(self, need: PolicyNeed, now: int, reserved: Reservations | None = None) -> str:
        """See :meth:`raftsched.fsm.policy.PolicyBook.check`."""
        return self._s.policy.check(need, now, reserved)
