"""What every part of the state machine knows about workflows: the internal task names, the
workflow's in-memory state, and what the workflow books need from the task side (:class:`TaskHost`).

A workflow's tasks run as ordinary runs of internal tasks named ``<workflow>#<task>`` (``#`` is
not allowed in user task names); a workflow with a schedule also owns an internal *trigger task*
``<workflow>#`` whose fires start workflow runs. The books: :mod:`raftsched.fsm.workflow_defs`
(definitions, versions, staging, pause) and :mod:`raftsched.fsm.workflows` (runs).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol

from raftsched.abc import StateStore
from raftsched.fsm.effects import Effect
from raftsched.fsm.records import Retention, TaskState
from raftsched.model import TaskSpec
from raftsched.sharding.placement import Need
from raftsched.v1 import log_pb2 as pb
from raftsched.workflow.dag import Dag, compile_dag

SEP = "#"
TRIGGER_HANDLER = "workflow"
"""The handler of a workflow's trigger task: its fires start workflow runs, not executor runs."""
DEFAULT_BACKFILL_SHARE = 30
MAX_BACKFILL_RUNS = 1000
TERMINAL_RUN = (pb.WORKFLOW_SUCCESS, pb.WORKFLOW_FAILED, pb.WORKFLOW_KILLED)


def task_name(workflow: str, task: str) -> str:
    """The internal task whose runs execute ``task`` of ``workflow``."""
    return f"{workflow}{SEP}{task}"


def trigger_name(workflow: str) -> str:
    """The internal task that carries ``workflow``'s schedule."""
    return f"{workflow}{SEP}"


def is_trigger(spec: TaskSpec) -> bool:
    """Whether ``spec`` is a workflow's trigger task (see :func:`trigger_name`)."""
    return spec.handler == TRIGGER_HANDLER and spec.name.endswith(SEP)


def is_internal(name: str) -> bool:
    return SEP in name


def split_internal(name: str) -> tuple[str, str]:
    """``<workflow>#<task>`` → ``(workflow, task)`` (task is ``""`` for a trigger task)."""
    workflow, _, task = name.partition(SEP)
    return workflow, task


def internal_spec(name: str, **fields: object) -> TaskSpec:
    """A TaskSpec for an internal name (user-name validation would refuse the ``#``)."""
    spec = TaskSpec(name="internal", **fields)  # type: ignore[arg-type]
    object.__setattr__(spec, "name", name)
    return spec


class TaskHost(Protocol):
    """What the workflow book needs from the task side of the state machine (the FSM implements it).

    Called on the apply thread only, while a command applies; every method is deterministic and
    writes through the same store batch as the book.
    """

    @property
    def store(self) -> StateStore:
        """The state store (the apply thread's open batch)."""
        ...

    @property
    def retention(self) -> Retention:
        """The cluster's retention policy (workflow runs are kept like task runs)."""
        ...

    def task_state(self, name: str) -> TaskState | None:
        """The in-memory state of task ``name`` (internal tasks included), or None."""
        ...

    def add_task(self, st: TaskState) -> None:
        """Register a task new to the state machine (not yet stored: :meth:`put_task` does that).
        It counts the still-active runs of an earlier task of the same name."""
        ...

    def put_task(self, st: TaskState) -> None:
        """Store the task's record as it is now."""
        ...

    def put_version(self, st: TaskState) -> None:
        """Store the spec of the task's current version (runs execute the version they fired with)."""
        ...

    def add_run(self, st: TaskState, run_id: str, data: bytes) -> None:
        """A new unfinished run of ``st`` (``data``: the serialised run): counted and stored, with
        the task's record."""
        ...

    def active_run(self, run_id: str) -> pb.Run | None:
        """A fresh copy of the unfinished run ``run_id``, or None."""
        ...

    def cancel_run(self, run: pb.Run, reason: str, now: int, epoch: int, effects: list[Effect]) -> None:
        """Cancel the unfinished ``run``: its shards stop (quota places and locks given back, the
        leader stops the running attempts) and it is stored as history."""
        ...

    def next_sequence(self) -> int:
        """The next value of the replicated sequence that makes manual run ids unique."""
        ...

    def need_for_run(self, run: pb.Run) -> Need:
        """What each attempt of ``run`` holds on its executor besides its slot."""
        ...

    def check_placeable(self, st: TaskState, need: Need, now: int) -> None:
        """Flag ``st`` unplaceable (and alert once) if no live executor could ever fit ``need``."""
        ...

    def emit_for_workflow_run(
        self, spec: pb.WorkflowSpec, wr: pb.WorkflowRun, now: int, effects: list[Effect]
    ) -> None:
        """A run of the workflow succeeded: emit the events its spec declares (``emits``)."""
        ...

    def emit_task_events(
        self,
        task: str,
        names: Sequence[str],
        namespace: str,
        logical_ms: int,
        now: int,
        epoch: int,
        effects: list[Effect],
    ) -> None:
        """Internal task ``task`` (a workflow task marked succeeded by hand) emits ``names``, keyed
        by ``logical_ms``, in ``namespace``, as its task run succeeding would have."""
        ...

    def raise_alert(self, kind: str, reason: str, now: int, **fields: str) -> None:
        """Record an alert event (see :mod:`raftsched.fsm.alerts`)."""
        ...

    def raise_event(self, alert: pb.AlertRecord, now: int) -> None:
        """Record ``alert`` as an event (dropped if its dedupe key was raised before)."""
        ...

    def task_names(self, prefix: str) -> list[str]:
        """Names of the tasks (internal ones included) that start with ``prefix``, sorted."""
        ...

    def remove_task(self, name: str) -> None:
        """Forget task ``name`` with its history (fires, finished runs, versions); its unfinished
        runs are left to finish (their results are still accepted)."""
        ...


class WorkflowState:
    """In-memory state of one workflow (its record, the compiled DAG of its current version)."""

    __slots__ = (
        "active_runs",
        "created_ms",
        "dag",
        "gates_free_slots",
        "kept_runs",
        "last_success_ms",
        "last_success_run",
        "paused",
        "running_tasks",
        "runs_total",
        "spec",
        "spec_bytes",
        "updated_ms",
        "version",
    )

    def __init__(self, spec: pb.WorkflowSpec, version: int, dag: Dag | None = None) -> None:
        self.spec = spec
        # WorkflowRecord{spec} serialised once: a big DAG's spec is not re-encoded on every save.
        self.spec_bytes = pb.WorkflowRecord(spec=spec).SerializeToString(deterministic=True)
        self.version = version
        self.dag = dag if dag is not None else compile_dag(spec)
        self.created_ms = 0
        self.updated_ms = 0
        self.runs_total = 0
        self.active_runs = 0
        self.running_tasks = 0
        self.kept_runs = 0
        self.paused = False
        self.last_success_ms = 0  # kept only with an SLA or freshness (issue 36)
        self.last_success_run = ""
        self.gates_free_slots = False

    def record(self) -> pb.WorkflowRecord:
        return pb.WorkflowRecord.FromString(self.record_bytes())

    def record_bytes(self) -> bytes:
        # Serialised messages concatenate into one; the spec (field 1) first keeps the bytes
        # identical to serialising the whole record deterministically.
        return (
            self.spec_bytes
            + pb.WorkflowRecord(
                version=self.version,
                created_ms=self.created_ms,
                updated_ms=self.updated_ms,
                runs_total=self.runs_total,
                active_runs=self.active_runs,
                running_tasks=self.running_tasks,
                paused=self.paused,
                gates_free_slots=self.gates_free_slots,
            ).SerializeToString(deterministic=True)
            + (
                # Fields 900-901 come last: appended only when set, so other records keep their bytes.
                pb.WorkflowRecord(
                    last_success_ms=self.last_success_ms, last_success_run=self.last_success_run
                ).SerializeToString(deterministic=True)
                if self.last_success_ms
                else b""
            )
        )

    @property
    def backfill_share(self) -> int:
        return self.spec.backfill_share_pct or DEFAULT_BACKFILL_SHARE


def canonical(spec: pb.WorkflowSpec) -> bytes:
    """The bytes a workflow definition is stored and compared as."""
    return spec.SerializeToString(deterministic=True)
