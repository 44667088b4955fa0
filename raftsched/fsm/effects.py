"""What an applied command asks the leader to do after commit, and what ``apply`` returns.

Effects are values: every replica computes the same ones, and only the leader acts on them (its
driver re-arms the timing wheel, its dispatcher places and sends attempts). Followers drop them.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import NamedTuple

from raftsched.v1 import log_pb2 as pb


class AttemptReady(NamedTuple):
    """A committed attempt waiting for an executor (new run, or a retry after ``not_before_ms``).

    The leader's dispatcher places it (ring + free slots) and commits the assignment. A
    NamedTuple, not a frozen dataclass: one is made per fire on every replica, and a frozen
    dataclass's ``__init__`` (``object.__setattr__`` per field) cost ~1 us of a ~15 us apply.
    """

    run_id: str
    task: str
    nominal_ms: int
    shard: int
    attempt: int
    epoch: int
    not_before_ms: int = 0
    backfill_share: int = 0  # > 0: a backfill attempt, placed only within this % of the slots


@dataclass(frozen=True, slots=True)
class DispatchAttempt:
    """An assignment of an attempt to an executor has committed: send it now (commit before dispatch).

    ``known``: the run's facts the dispatcher needs are carried here (``task_version``,
    ``backfill``, the shard's ``assigned_ms``) and the run has no command, params or environment
    of its own (not a workflow task), so the work item is built without a copy of the run. They
    are a copy of the run's fields, not part of what the effect is: equality ignores them."""

    run_id: str
    task: str
    nominal_ms: int
    shard: int
    attempt: int
    executor: str
    epoch: int
    known: bool = field(default=False, compare=False)
    task_version: int = field(default=0, compare=False)
    backfill: bool = field(default=False, compare=False)
    assigned_ms: int = field(default=0, compare=False)


class TaskArmed(NamedTuple):
    """The task's next fire changed. ``next_fire_ms == 0`` means: nothing to arm (disabled, gone)."""

    task: str
    version: int
    next_fire_ms: int


class FiresWanted(NamedTuple):
    """A write to ``task`` (disable, update) was refused because fires of it are due and not
    accounted yet: the leader plans them at once, even while its planning is held for the
    dispatch backlog (``[scheduler] max_dispatch_backlog``), so the write's retry is accepted.
    Carried by the rejection; it changes no state."""

    task: str


@dataclass(frozen=True, slots=True)
class BarrierCommitted:
    """A leader's barrier applied: everything before it (all older leaders' entries) is applied."""

    node_id: str
    epoch: int


@dataclass(frozen=True, slots=True)
class ExecutorChanged:
    """Executor membership changed (the shard ring must be rebuilt from the replicated list)."""

    name: str
    alive: bool


@dataclass(frozen=True, slots=True)
class RunCancelled:
    """This task run was cancelled (CancelRuns, a killed workflow run, overlap=replace); ``attempts`` are
    ``(shard, attempt, executor)`` of its unfinished shards (executor ``""``: never assigned)."""

    run_id: str
    attempts: tuple[tuple[int, int, str], ...]
    epoch: int
    reason: str = ""  # why (the executor's log line and the attempt's error)


class ReadyColumns(NamedTuple):
    """The rows a ``FireColumns`` entry accepted (one effect per entry): the runs with seqs
    ``seq_base, seq_base + 1, ...`` (row order) are committed and wait for an executor, as an
    :class:`AttemptReady` of shard 0, attempt 1, each; and row i's task is re-armed at
    ``next_fires[i]`` (as a :class:`TaskArmed` of the task's current version).

    ``tasks`` are task numbers (``TaskState.number``); run ``seq_base + i`` is the run of task
    ``tasks[i]`` at ``nominals[i]``: its run id is
    :func:`raftsched.fsm.hot_slots.run_id_of` ``(name, nominals[i])``, the name from
    :meth:`raftsched.fsm.hot_slots.Numbering.task_name`. The command's epoch is the run's epoch."""

    seq_base: int
    tasks: list[int]
    nominals: list[int]
    next_fires: list[int]


class DispatchColumns(NamedTuple):
    """The rows an ``AssignColumns`` entry accepted (one effect per entry): the attempt of run
    ``seqs[i]`` (shard 0, attempt ``attempts[i]``) is assigned to executor number
    ``executors[i]``; send it now (commit before dispatch), as a :class:`DispatchAttempt` each."""

    seqs: list[int]
    attempts: list[int]
    executors: list[int]


Effect = (
    AttemptReady
    | DispatchAttempt
    | TaskArmed
    | FiresWanted
    | BarrierCommitted
    | ExecutorChanged
    | RunCancelled
    | ReadyColumns
    | DispatchColumns
)


@dataclass(frozen=True, slots=True)
class Applied:
    """The outcome of one applied command: the result for the proposer, and the effects."""

    result: pb.CommandResult
    effects: tuple[Effect, ...] = ()

    def encode(self) -> bytes:
        """The result's canonical bytes (what the proposer receives and the apply chain hashes)."""
        return self.result.SerializeToString(deterministic=True)


def rejected(code: str, message: str) -> pb.CommandResult:
    """A rejection as a value: ``ok=False`` with an error code from :mod:`raftsched.errors`."""
    return pb.CommandResult(ok=False, code=code, message=message)
