"""The columnar hot path of the state machine (issue 31 P1; docs/dev/columnar.md).

A *hot* task (:func:`is_hot`: one shard, ``overlap = allow``, no locks, pool, resources,
selector, calendar, jitter, SLA, freshness, ``emits``, not a workflow task, enabled) fires on
the hot path: the leader proposes its single on-time fires as one ``FireColumns`` entry,
their assignments as ``AssignColumns`` and their first-try successes as ``ResultColumns``
(command format :data:`raftsched.codec.COLUMNS_FORMAT`). Their unfinished runs are not
``pb.Run`` records in ``RunBook.active``: each is a *slot* of the :class:`SlotTable`, indexed
by the run's ``seq`` (allocated at apply, ``Meta.next_seq``).

Numbers. Tasks and executors have dense numbers from 1 (``TaskRecord.number``,
``ExecutorRecord.number``; 0 = none), never reused. They are given by the ``NumberEntities``
command (every entity without one, in key order) and, from then on, at creation and at first
join. :class:`Numbering` maps them back.

How the leader maps what the columns name (pure, under a state view; see
:class:`raftsched.fsm.view.StateView`'s ``hot_*`` and ``*_number`` methods):

* task number ``n`` -> its :class:`TaskState` (name ``st.spec.name``, version ``st.version``):
  ``view.task_by_number(n)``; name -> number: ``view.tasks[name].number``;
* executor number -> name: ``view.executor_name(n)``; name -> number: ``view.executor_number(name)``;
* run ``seq`` -> run id: :func:`run_id_of` ``(task name, nominal_ms)`` -- the same id today's
  ``FireBatch`` gives the run of that fire (``raftsched.model.run_id_for``), so run ids, run keys
  and execution ids (:func:`raftsched.model.execution_id` ``(run_id, 0, attempt)``) are those of
  the cold path. For a :class:`~raftsched.fsm.effects.ReadyColumns`, run ``seq_base + i`` is the
  run of ``tasks[i]`` at ``nominals[i]``; for any live seq, ``view.hot_run(seq)`` returns its
  :class:`HotRef`;
* run id -> seq (a reported result): ``view.hot_seq(run_id)`` (0: not a live hot run -- it
  finished, was promoted to the cold path, or was never hot: report it as today).

Pure: no clock, no IO but the host's store, no randomness.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final, NamedTuple

from raftsched.fsm.records import TaskState
from raftsched.model import run_id_for
from raftsched.v1 import log_pb2 as pb

PENDING: Final = int(pb.PENDING)
RUNNING: Final = int(pb.RUNNING)
SUCCEEDED: Final = int(pb.SUCCEEDED)
PROMOTED: Final = 100
"""A slot whose run moved to the cold path (a ``pb.Run`` in ``RunBook.active``): finished here."""

TRIM_EVERY: Final = 4096
"""Finished slots at the head of the slot table before it is trimmed."""


def run_id_of(task: str, nominal_ms: int) -> str:
    """The run id of the hot run of ``task`` at ``nominal_ms``: the cold path's id of that fire."""
    return run_id_for(task, nominal_ms)


class HotRef(NamedTuple):
    """What the leader needs of one live hot run (a copy: valid after the view closed)."""

    seq: int
    run_id: str
    task: str
    task_number: int
    nominal_ms: int
    version: int  # the task version it fired with (Run.task_version)
    state: int  # PENDING or RUNNING
    attempt: int
    executor: str  # "" while pending
    executor_number: int  # 0 while pending
    assigned_ms: int
    created_ms: int
    epoch: int


class Numbering:
    """Task and executor numbers (derived from the records: rebuilt on load)."""

    __slots__ = ("executor_no", "executors", "next_executor_no", "next_task_no", "tasks")

    def __init__(self) -> None:
        self.tasks: list[TaskState | None] = [None]  # by number; [0] never a task
        self.executors: list[str | None] = [None]
        self.executor_no: dict[str, int] = {}
        self.next_task_no = 0  # Meta.next_task_no (0: numbering off)
        self.next_executor_no = 0

    def clear(self) -> None:
        self.tasks[:] = [None]
        self.executors[:] = [None]
        self.executor_no.clear()
        self.next_task_no = self.next_executor_no = 0

    @property
    def on(self) -> bool:
        """Whether numbering is on (a NumberEntities applied)."""
        return self.next_task_no > 0

    def task(self, number: int) -> TaskState | None:
        tasks = self.tasks
        return tasks[number] if 0 < number < len(tasks) else None

    def task_name(self, number: int) -> str | None:
        st = self.task(number)
        return st.spec.name if st is not None else None

    def executor_name(self, number: int) -> str | None:
        names = self.executors
        return names[number] if 0 < number < len(names) else None

    def executor_number(self, name: str) -> int:
        return self.executor_no.get(name, 0)

    def set_task(self, st: TaskState) -> None:
        """Index ``st`` by its number (0: nothing)."""
        n = st.number
        if n:
            tasks = self.tasks
            if n >= len(tasks):
                tasks.extend([None] * (n + 1 - len(tasks)))
            tasks[n] = st

    def drop_task(self, st: TaskState) -> None:
        n = st.number
        if n and n < len(self.tasks) and self.tasks[n] is st:
            self.tasks[n] = None

    def set_executor(self, name: str, number: int) -> None:
        if number:
            names = self.executors
            if number >= len(names):
                names.extend([None] * (number + 1 - len(names)))
            names[number] = name
            self.executor_no[name] = number


class SlotTable:
    """Per run seq (from ``base``): task number, version, nominal, state, executor number,
    attempt, assigned, created times and epoch. Finished slots at the head are trimmed in bulk
    (every :data:`TRIM_EVERY`)."""

    def __init__(self) -> None:
        self.base = 1  # seqs start at 1 (Meta.next_seq)
        self.task: list[int] = []
        self.version: list[int] = []
        self.nominal: list[int] = []
        self.state: list[int] = []
        self.executor: list[int] = []
        self.attempt: list[int] = []
        self.assigned: list[int] = []
        self.created: list[int] = []
        self.epoch: list[int] = []
        self.finished = 0  # finished slots not trimmed yet

    def columns(self) -> tuple[list[int], ...]:
        return (
            self.task,
            self.version,
            self.nominal,
            self.state,
            self.executor,
            self.attempt,
            self.assigned,
            self.created,
            self.epoch,
        )

    def clear(self, base: int = 1) -> None:
        for col in self.columns():
            col.clear()
        self.base = base
        self.finished = 0

    def __len__(self) -> int:
        return len(self.state)

    def index(self, seq: int) -> int:
        """The position of live-or-finished slot ``seq``, or -1 if there is none."""
        j = seq - self.base
        return j if 0 <= j < len(self.state) else -1

    def live(self, seq: int) -> int:
        """The position of ``seq`` if it is an unfinished slot (pending or running), else -1."""
        j = self.index(seq)
        return j if j >= 0 and self.state[j] in (PENDING, RUNNING) else -1

    def _head(self) -> int:
        """How many slots at the head are finished."""
        state, k, n = self.state, 0, len(self.state)
        while k < n and state[k] not in (PENDING, RUNNING):
            k += 1
        return k

    def trim(self) -> None:
        k = self._head()
        if k:
            for col in self.columns():
                del col[:k]
            self.base += k
            self.finished -= k


def hot_ref(slots: SlotTable, numbering: Numbering, seq: int) -> HotRef | None:
    """The live hot run ``seq`` (pending or running), or None."""
    j = slots.live(seq)
    if j < 0:
        return None
    t = slots.task[j]
    st = numbering.task(t)
    if st is None:
        return None
    nominal = slots.nominal[j]
    e = slots.executor[j]
    name = st.spec.name
    return HotRef(
        seq=seq,
        run_id=run_id_of(name, nominal),
        task=name,
        task_number=t,
        nominal_ms=nominal,
        version=slots.version[j],
        state=slots.state[j],
        attempt=slots.attempt[j],
        executor=numbering.executor_name(e) or "",
        executor_number=e,
        assigned_ms=slots.assigned[j],
        created_ms=slots.created[j],
        epoch=slots.epoch[j],
    )


def seq_of(slots: SlotTable, tasks: Mapping[str, TaskState], run_id: str) -> int:
    """The seq of the live hot run ``run_id``, or 0 (not hot, finished, promoted, or no such run).

    Found through its task's unfinished hot seqs (``TaskState.hot_seqs``), by nominal time."""
    task, sep, rest = run_id.rpartition("@")
    if not sep or not rest.isdigit():
        return 0
    st = tasks.get(task)
    if st is None or not st.hot_seqs:
        return 0
    nominal = int(rest)
    for seq in st.hot_seqs:
        j = slots.live(seq)
        if j >= 0 and slots.nominal[j] == nominal:
            return seq
    return 0
