"""SLAs and freshness of tasks (issue 36 §2): what each means, decided from values.

A task may say ``sla: {start_within, finish_within}`` (from each run's nominal time) and
``freshness`` (some run succeeded within it). A *miss* gives one ``sla_missed`` or ``freshness``
alert event, whoever notices it first:

* apply, when a run's first start is reported late (``start_within``) or a run finishes late or
  without success (``finish_within``): exact, from the executor's start lateness and the finish;
* the leader's alert monitor (:mod:`raftsched.alerts.monitor`), for what only time reveals: an
  unfinished run past its deadline, a task with no success within ``freshness``.

Both give the miss the same dedupe key (:func:`start_key`, :func:`finish_key`,
:func:`freshness_key`), and apply keeps one event per key, so a miss is one event across leader
changes (while its event is retained: ``[retention] keep``, 7 days by default).

Freshness counts from the task's last success (``TaskRecord.last_success_ms``, kept by apply for
tasks with an SLA or freshness), else from its creation: a task that keeps failing, is disabled,
paused, always skipped or waits forever misses it once per stale stretch, not once per run.
When a run then succeeds, apply raises the ``resolved`` event of that miss.

Pure: values in, values out.
"""

from __future__ import annotations

from raftsched.v1 import log_pb2 as pb

__all__ = [
    "MET",
    "PENDING",
    "finish_key",
    "finish_state",
    "freshness_base",
    "freshness_key",
    "freshness_state",
    "has_sla",
    "late_text",
    "start_key",
    "start_state",
]

MET = "met"
PENDING = "pending"


def has_sla(spec: pb.TaskSpec | pb.WorkflowSpec) -> bool:
    """Whether ``spec`` (a task's or a workflow's) has an SLA or freshness (apply then keeps its
    last success)."""
    return bool(spec.sla_start_within_ms or spec.sla_finish_within_ms or spec.freshness_ms)


def start_key(run_id: str) -> str:
    return f"sla/{run_id}/start"


def finish_key(run_id: str) -> str:
    return f"sla/{run_id}/finish"


def freshness_key(task: str, base_ms: int) -> str:
    """One key per stale stretch: the stretch starts at the last success (or creation)."""
    return f"freshness/{task}/{base_ms}"


def late_text(late_ms: int) -> str:
    """A lateness for people, to the second: ``45s``, ``3m 5s``, ``2d 1h 0m``."""
    seconds = max(0, late_ms) // 1000
    if seconds < 60:
        return f"{seconds}s" if seconds or late_ms <= 0 else f"{max(0, late_ms)}ms"
    days, rest = divmod(seconds, 86_400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}d {hours}h {minutes}m"
    if hours:
        return f"{hours}h {minutes}m {secs}s"
    return f"{minutes}m {secs}s"


def freshness_base(created_ms: int, last_success_ms: int) -> int:
    """Where the freshness clock of a task starts: its last success, else its creation."""
    return last_success_ms or created_ms


def first_start_ms(run: pb.Run) -> int:
    """When the run's first attempt started (its timeline's first ``started``; 0 if none)."""
    for entry in run.timeline:
        if entry.event == "started":
            return entry.at_ms
    if run.timeline_derived:  # stored state format 3: the hot entries are the shard's fields
        for shard in run.shards:
            if shard.HasField("started_ms"):
                return shard.started_ms
    return 0


def start_state(run: pb.Run, within_ms: int, now_ms: int) -> str:
    """``met``, ``missed by X`` or ``pending`` for a run's ``start_within`` at ``now_ms``. A run
    counts as started at its first reported start, or (not reported yet) when an attempt was
    assigned to an executor."""
    deadline = run.nominal_ms + within_ms
    started = first_start_ms(run) or min((s.assigned_ms for s in run.shards if s.assigned_ms), default=0)
    if started:
        return MET if started <= deadline else f"missed by {late_text(started - deadline)}"
    if run.state in (pb.SUCCEEDED, pb.FAILED, pb.CANCELLED):
        return MET if run.finished_ms <= deadline else f"missed by {late_text(run.finished_ms - deadline)}"
    return PENDING if now_ms <= deadline else f"missed by {late_text(now_ms - deadline)}"


def finish_state(run: pb.Run, within_ms: int, now_ms: int) -> str:
    """``met``, ``missed by X`` (``missed: FAILED`` when it finished without success in time) or
    ``pending`` for a run's ``finish_within`` (a run meets it by succeeding in time)."""
    deadline = run.nominal_ms + within_ms
    if run.state == pb.SUCCEEDED:
        return MET if run.finished_ms <= deadline else f"missed by {late_text(run.finished_ms - deadline)}"
    if run.state in (pb.FAILED, pb.CANCELLED):
        if run.finished_ms > deadline:
            return f"missed by {late_text(run.finished_ms - deadline)}"
        return f"missed: {pb.RunState.Name(run.state)}"
    return PENDING if now_ms <= deadline else f"missed by {late_text(now_ms - deadline)}"


def workflow_key(name: str) -> str:
    """A workflow (or workflow run id) in the keys: ``workflow:<name>``, apart from a task's."""
    return f"workflow:{name}"


def workflow_start_ms(wr: pb.WorkflowRun) -> int:
    """When the workflow run's first task was launched (0 if none yet)."""
    starts = [e.at_ms for t in wr.tasks for e in t.timeline if e.state == pb.TASK_RUNNING and e.at_ms]
    return min(starts, default=0)


_WORKFLOW_DONE = (pb.WORKFLOW_SUCCESS, pb.WORKFLOW_FAILED, pb.WORKFLOW_KILLED)


def workflow_start_state(wr: pb.WorkflowRun, within_ms: int, now_ms: int) -> str:
    """``start_within`` of a workflow run: its first task launched by logical time + within."""
    deadline = wr.logical_ms + within_ms
    started = workflow_start_ms(wr)
    if started:
        return MET if started <= deadline else f"missed by {late_text(started - deadline)}"
    if wr.state in _WORKFLOW_DONE:
        return MET if wr.finished_ms <= deadline else f"missed by {late_text(wr.finished_ms - deadline)}"
    return PENDING if now_ms <= deadline else f"missed by {late_text(now_ms - deadline)}"


def workflow_finish_state(wr: pb.WorkflowRun, within_ms: int, now_ms: int) -> str:
    """``finish_within`` of a workflow run: SUCCESS by logical time + within."""
    deadline = wr.logical_ms + within_ms
    if wr.state == pb.WORKFLOW_SUCCESS:
        return MET if wr.finished_ms <= deadline else f"missed by {late_text(wr.finished_ms - deadline)}"
    if wr.state in _WORKFLOW_DONE:
        if wr.finished_ms > deadline:
            return f"missed by {late_text(wr.finished_ms - deadline)}"
        return f"missed: {pb.WorkflowRunState.Name(wr.state).removeprefix('WORKFLOW_')}"
    return PENDING if now_ms <= deadline else f"missed by {late_text(now_ms - deadline)}"


def freshness_state(rec: pb.TaskRecord | pb.WorkflowRecord, now_ms: int) -> str:
    """``met`` or ``missed by X`` for a task's or workflow's freshness at ``now_ms``."""
    base = freshness_base(rec.created_ms, rec.last_success_ms)
    late = now_ms - (base + rec.spec.freshness_ms)
    return MET if late <= 0 else f"missed by {late_text(late)}"
