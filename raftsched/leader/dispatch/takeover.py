"""A new leader's unresolved attempts, and the overlap decisions they hold.

Every attempt of an unfinished run is *unresolved* for a new leader until an executor says it
has started it (a heartbeat lists it as started: an overlap with it is real), or its result,
loss or cancellation is applied, or a bound passes (the takeover grace plus one lease). That
covers attempts the old leader committed and never delivered: assigned to an executor whose
first heartbeat to this leader does not list it (it is sent again at once, the executor
deduplicates), or committed and not assigned yet (placed now). Attempts that become ready while
some executor has not reached this leader yet are unresolved the same way: a run waiting for its
executor to find this leader has not started, and a fire decided against it would be skipped on
a run that never ran. Meanwhile the leader driver holds the overlap decisions of their tasks
(:meth:`raftsched.leader.dispatch.dispatcher.Dispatcher.overlap_unknown`).
"""

from __future__ import annotations

from dataclasses import dataclass

from raftsched.fsm.view import StateView
from raftsched.fsm.workflow_model import is_internal, split_internal, trigger_name
from raftsched.model import execution_id
from raftsched.v1 import raftsched_pb2 as pb


def held_names(task: str) -> tuple[str, ...]:
    """The tasks whose overlap decisions an inherited attempt of ``task`` holds: the task itself
    and, for a workflow task, its workflow's trigger (a scheduled workflow's next fire is skipped
    while a run of it is unfinished, and the attempt's result may be what finishes that run)."""
    if is_internal(task):
        workflow, _ = split_internal(task)
        return (task, trigger_name(workflow))
    return (task,)


@dataclass(slots=True)
class Inherited:
    """An unresolved attempt (see the module docstring): RUNNING in the log when this leader
    took over with no word yet from its executor (its result may be on the way, or it never
    reached the executor), or waiting to be placed and started."""

    task: str
    run_id: str
    shard: int
    attempt: int
    # The wait ends here whatever happens: the takeover grace plus one lease, the moment its
    # first lease would expire unheard (a later result or loss proposal gets one lease to apply).
    until_ms: int
    # Its result or loss has been proposed: the wait ends once the state no longer has the
    # attempt RUNNING (applied), not before - a fire planned earlier would enter the log ahead.
    settling: bool = False


class Takeover:
    """The unresolved attempts of one leadership, by execution id, and how many each task has.

    Written on the dispatcher's thread; the driver's thread reads :attr:`unknown_tasks`."""

    __slots__ = ("hold_ends", "inherited", "resent_unheld", "settling", "unknown_tasks", "until_ms")

    def __init__(self, until_ms: int) -> None:
        # Attempts that become ready before this (the takeover grace plus one lease) while an
        # executor has not reached this leader are unresolved too.
        self.until_ms = until_ms
        self.inherited: dict[str, Inherited] = {}
        self.unknown_tasks: dict[str, int] = {}
        self.settling: set[str] = set()  # of inherited: result or loss proposed
        # How the wait for inherited attempts ended: "running" (a heartbeat said so), "applied"
        # (their result, loss, executor's death or cancellation applied), "bound" (the takeover
        # grace plus one lease passed). For the leader's log line.
        self.hold_ends: dict[str, int] = {}
        # Attempts assigned to an executor whose first heartbeat to this leader did not list them
        # (committed, never delivered): sent again at once. For the leader's log line.
        self.resent_unheld = 0

    def unresolved(self, task: str, run_id: str, shard: int, attempt: int, until_ms: int) -> None:
        """Hold the overlap decisions of ``task`` until this attempt is resolved."""
        exec_id = execution_id(run_id, shard, attempt)
        if exec_id not in self.inherited:
            self.inherited[exec_id] = Inherited(task, run_id, shard, attempt, until_ms)
            for name in held_names(task):
                self.unknown_tasks[name] = self.unknown_tasks.get(name, 0) + 1

    def known(self, exec_id: str, why: str) -> None:
        """The state of inherited attempt ``exec_id`` is known now (``why``: see
        :attr:`hold_ends`): stop waiting for it."""
        h = self.inherited.pop(exec_id, None)
        if h is not None:
            self.settling.discard(exec_id)
            self.hold_ends[why] = self.hold_ends.get(why, 0) + 1
            for name in held_names(h.task):
                left = self.unknown_tasks.get(name, 0) - 1
                if left > 0:
                    self.unknown_tasks[name] = left
                else:
                    self.unknown_tasks.pop(name, None)

    def proposed(self, exec_id: str, now_ms: int, lease_ms: int) -> None:
        """The result or loss of ``exec_id`` is proposed: it is known once applied (or one lease
        from now at the latest)."""
        h = self.inherited.get(exec_id)
        if h is not None and not h.settling:
            h.settling = True
            h.until_ms = max(h.until_ms, now_ms + lease_ms)
            self.settling.add(exec_id)

    def settle(self, v: StateView, now_ms: int | None) -> None:
        """Stop waiting for inherited attempts whose proposed result or loss is applied (the
        state no longer has them RUNNING), and, with ``now_ms``, for those past their bound."""
        for exec_id in sorted(self.settling):
            if not _running(v, self.inherited[exec_id]):
                self.known(exec_id, "applied")
        if now_ms is not None:
            for exec_id, h in list(self.inherited.items()):
                if h.until_ms <= now_ms:
                    self.known(exec_id, "bound")


def _running(v: StateView, h: Inherited) -> bool:
    run = v.active_run(h.run_id)
    if run is None or h.shard >= len(run.shards):
        return False
    shard = run.shards[h.shard]
    return shard.attempt == h.attempt and shard.state == pb.RUNNING
