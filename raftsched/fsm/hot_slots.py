"""The columnar hot path's numbers and slots (issue 31 P1; :mod:`raftsched.fsm.hot` has the
commands that use them, docs/dev/columnar.md the design).

Tasks and executors have dense numbers from 1 (:class:`Numbering`), and every unfinished hot run
is a *slot* of the :class:`SlotTable`, indexed by its ``seq``. :func:`hot_ref` and :func:`seq_of`
map a seq to what the leader needs of the run and a run id back to its seq; :func:`is_hot` says
whether a task's single on-time fires may take the hot path at all.

Pure: no clock, no IO, no randomness.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING, Final, NamedTuple

from raftsched.fsm.records import TaskState
from raftsched.fsm.workflow_model import is_internal
from raftsched.model import Overlap, run_id_for
from raftsched.v1 import log_pb2 as pb

if TYPE_CHECKING:
    from raftsched.fsm.policy import PolicyBook

PENDING: Final = int(pb.PENDING)
RUNNING: Final = int(pb.RUNNING)
SUCCEEDED: Final = int(pb.SUCCEEDED)
PROMOTED: Final = 100
"""A slot whose run moved to the cold path (a ``pb.Run`` in ``RunBook.active``): finished here."""
LIVE: Final = (PENDING, RUNNING)
"""A slot's states while its run is unfinished (SlotTable.live; the leader's loops test them inline)."""


def run_id_of(task: str, nominal_ms: int) -> str:
    """The run id of the hot run of ``task`` at ``nominal_ms``: the cold path's id of that fire."""
    return run_id_for(task, nominal_ms)


class HotRef(NamedTuple):
    """What the leader needs of one live hot run (a copy: valid after the view closed)."""

    seq: int
    run_id: str
    task: str
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

    __slots__ = ("executor_no", "executors", "next_executor_no", "next_task_no", "numbered_ms", "tasks")

    def __init__(self) -> None:
        self.tasks: list[TaskState | None] = [None]  # by number; [0] never a task
        self.executors: list[str | None] = [None]
        self.executor_no: dict[str, int] = {}
        self.next_task_no = 0  # Meta.next_task_no (0: numbering off)
        self.next_executor_no = 0
        self.numbered_ms = 0  # Meta.numbered_ms: leader time numbering turned on

    def clear(self) -> None:
        self.tasks[:] = [None]
        self.executors[:] = [None]
        self.executor_no.clear()
        self.next_task_no = self.next_executor_no = 0
        self.numbered_ms = 0

    @property
    def on(self) -> bool:
        """Whether numbering is on (a NumberEntities applied)."""
        return self.next_task_no > 0

    def task(self, number: int) -> TaskState | None:
        tasks = self.tasks
        return tasks[number] if 0 < number < len(tasks) else None

    def tasks_of(self, numbers: Iterable[int]) -> list[TaskState | None]:
        """:meth:`task` of each of ``numbers``, in order (one call for an entry's rows)."""
        tasks = self.tasks
        n = len(tasks)
        return [tasks[k] if 0 < k < n else None for k in numbers]

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
    (every :data:`raftsched.fsm.hot.TRIM_EVERY`)."""

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
        return j if j >= 0 and self.state[j] in LIVE else -1

    def oldest_live(self) -> int:
        """The seq of the oldest unfinished slot, or 0 if there is none. The same on every replica
        (which slots are live is replicated state; where each table starts is not)."""
        state = self.state
        first = len(state)
        for live in LIVE:
            try:
                first = min(first, state.index(live, 0, first))
            except ValueError:
                continue
        return self.base + first if first < len(state) else 0

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


def is_hot(st: TaskState, policy: PolicyBook, name: str) -> bool:
    """Whether ``st`` (task ``name``)'s single on-time fires may take the hot path: numbered,
    enabled, one shard, ``overlap = allow``, nothing an attempt holds besides its slot (locks,
    pool, quota, resources, selector), no calendar, jitter, SLA, freshness or events, not a
    workflow's task (an internal name; a workflow's trigger has one too). Reads the spec through
    ``peek``: deciding every task's bit at load decodes no task's own spec."""
    if not (st.number and st.enabled) or is_internal(name):
        return False
    s = st.peek()
    return bool(
        s.shards == 1
        and s.overlap == Overlap.ALLOW
        and not s.locks
        and not s.pool
        and not s.resource_cpu
        and not s.resource_memory_mb
        and not s.selector
        and not s.exclude
        and not s.jitter_ms
        and not s.sla_start_within_ms
        and not s.sla_finish_within_ms
        and not s.freshness_ms
        and not s.emits
        and not s.on_event
        and policy.need(s.owner, s.namespace, ()) is None
    )


def add_seq(st: TaskState, seq: int) -> None:
    """``seq`` is a live hot run of ``st`` now."""
    seqs = st.hot_seqs
    if isinstance(seqs, list):
        seqs.append(seq)
    else:
        st.hot_seqs = [seq]


def drop_seq(st: TaskState, seq: int) -> None:
    """``seq`` is no longer a live hot run of ``st`` (finished or promoted)."""
    seqs = st.hot_seqs
    if isinstance(seqs, list) and seq in seqs:
        seqs.remove(seq)
