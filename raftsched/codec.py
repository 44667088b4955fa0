"""The one conversion layer between frozen domain values and their protobuf form.

Used by the state machine (commands and stored records), the gRPC servicers and the SDK.
Decoding validates: a malformed message becomes :class:`raftsched.errors.InvalidSpec`.
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable
from typing import Any

from google.protobuf.message import Message

from raftsched.errors import InvalidSpec
from raftsched.model import (
    RUN_FAILED,
    CronTrigger,
    IntervalTrigger,
    Lock,
    LockMode,
    ManualTrigger,
    Misfire,
    OnceTrigger,
    Overlap,
    RetryBackoff,
    Runner,
    RunState,
    TaskSpec,
    Trigger,
    parse_runner,
    unchecked,
)
from raftsched.secretref import uses_secrets
from raftsched.timing.calendar import Calendar
from raftsched.v1 import log_pb2 as pb

# Format history (a node applies or reads every format up to its own, never a newer one):
#   1  the first release.
#   2  commands DrainExecutor, StageWorkflowTasks, SetCalendar, DeleteCalendar, SeedMembership,
#      BeginMemberChange, EndMemberChange; ExecutorRecord.draining*; Meta.state_format;
#      Run.timeline; remembered idempotency keys with request fingerprints; calendars; the
#      scheduler-node membership; SetQuota, DeleteQuota, task locks and the reasons attempts wait
#      (AssignAttempts.waits); executor cpu/memory, task resources and selectors, the
#      buffer_one and replace overlap policies, held runs. A format-1 node checks no format at
#      all, so a cluster moves from 1 to 2 by a full restart, not a rolling upgrade (docs/guide/upgrade.md,
#      Upgrades); the stamps protect the upgrades after this one.
#   3  a barrier that abandons a faulty leader time (Barrier.clock_fault_ms).
#   4  a FireBatch with a fire of an overlap=replace task: the runs it cancels give back their
#      quota places and locks (format 3 and older kept them until the node reloaded its state).
#   5  a task or workflow that defines jitter or a workflow task with not_before (issue 28): an
#      older node would store it and then create runs without their start gates.
#   6  a workflow with a cross-workflow dependency or warn_after, and the WorkflowWaitsDue
#      command (issue 28): an older node would run the task without waiting for its upstream.
#   7  EmitEvent (events and the runs they trigger, issue 28 §3); a task or workflow written with
#      on_event or emits is stamped 7 too: a format-6 node would store it and then not emit on
#      its success, so it stops at the definition instead of diverging later.
#   8  a RaiseAlerts with a resolved run_failed record (a failure streak's recovery, issue 36 §5):
#      a format-7 node would refuse it while an upgraded one stores it.
#   9  a task or workflow that defines its own retry timing (retry_delays, retry_backoff), keeps
#      retries on the same executor, or its own retention (keep_runs, keep_for), issue 29 §3/§5:
#      an older node would store it without them and then retry and prune differently.
#  10  a task or workflow whose params, env or command hold a ``{{ secret.NAME }}`` reference
#      (issue 29 §7): an older node refuses the reference in a workflow template (replicas
#      would disagree) and its executors would pass the reference on as literal text. Also an
#      ApplyWorkflow with expected_version (the console's conditional edit, issue 29 §8): an
#      older node would ignore the condition.
#  11  SetPool, DeletePool (pools, issue 29 §4); a task or workflow written with a pool is stamped
#      11 too: an older node would store it and start its attempts without taking a pool slot.
#  12  StartTaskBackfill (backfill for plain tasks, issue 29 §6).
#  13  fleet health (issue 36 §3, §4): a RaiseAlerts with a no_executor, waiting_too_long,
#      heartbeat_missing or clock_skew alert (an older node refuses the kind: nothing stored,
#      where a newer node stores it), and a DrainExecutor that an executor makes or undoes
#      itself (health, resume: an older node would take a resume for a drain).
#  14  SLAs and freshness (issue 36 §2): a task or workflow written with sla or freshness (an older node
#      would store it and never raise its alerts nor keep its last success), and RaiseAlerts of
#      the start_delay, sla_missed and freshness kinds (an older node refuses those kinds: its
#      outbox would number the next events differently).
#  15  CancelRuns (cancel task runs, issue 29 §1): an older node would refuse it and keep the runs.
#  16  a WorkflowRunOp that re-decides the rerun tasks' cross-workflow edges (redecide_external)
#      or emits a marked task's events (emit), issue 28: an older node would run the task
#      whatever its upstream did, or emit nothing. Also an ApplyWorkflow with gates_free_slots (a
#      task held by not_before/jitter takes no max_parallel place): an older node would count it.
#  17  history pruned in batches (issue 31, P4): a FireBatch or a ReportResults prunes a task's
#      fire records and finished runs in batches of up to raftsched.fsm.records.PRUNE_BATCH past
#      the keep count, reading keys only; an older node prunes one record at a time and would keep
#      different history (its replicated state would differ). Every FireBatch and ReportResults
#      is stamped 17, so upgrade the leader last.
#  18  the columnar hot path (issue 31 P1, docs/dev/columnar.md): NumberEntities, FireColumns,
#      AssignColumns and ResultColumns. An older node would record them as rejected (unknown
#      body) where a newer one creates, places and finishes runs; it halts instead
#      (format_too_new). The leader proposes them only once every member reports format 18.
#  19  PromoteHotRuns (issue 31): the leader moves hot runs older than MAX_HOT_SPAN seqs to the
#      cold path, so one long attempt no longer pins the slot table. An older node would record
#      it as rejected (unknown body) where a newer one promotes; it halts instead
#      (format_too_new). The leader proposes it only once every member reports format 19.
COMMAND_FORMAT = 19
"""The newest log command format this build applies (``Command.format``). Each command is
stamped with the *oldest* format that can apply it (:func:`command_format`), so a cluster in
the middle of a rolling upgrade keeps applying everything but the commands that need the new
format."""
SNAPSHOT_FORMAT = 5
"""Format of the replicated state and snapshots this build writes and the newest it reads
(``Snapshot.format``, ``Meta.state_format``; 0, as written before the field existed, reads as 1).

5: promotions logged (issue 31; command format 19): ``Meta.promotions_logged`` and the ``hp/``
records of the hot runs each command promoted (raftsched.fsm.hot.HotBook.flush), until the next
hot checkpoint. Written from the first PromoteHotRuns on: a state before it stays format 4, byte
for byte. An older build refuses a format-5 state or snapshot (it would neither write nor fold
those records, and would take a promoted run whose record was pruned for a live one).

4: the columnar hot path (issue 31 P1, raftsched.fsm.hot): task and executor numbers, the
``h/``, ``ha/``, ``hf/`` entry records and the ``hc/s`` checkpoint, whose unfinished hot runs
have no run record. Written only once a NumberEntities (command format 18) applied: a state
that never numbered stays format 3, byte for byte, so a cluster mid-upgrade stays identical.
An older build refuses a format-4 state or snapshot (it would lose the hot runs).

3: a task's hot counters (watermark, next fire, active runs, fire and run totals, kept counts)
are stored per command in ``tc/`` TaskCounters records and replayed over the TaskRecords on
load (raftsched.fsm.tasks); a TaskRecord is re-put only when another field changes. A hot
single-shard run keeps its ``assigned``/``started``/outcome timeline entries as fields
(``Run.timeline_derived``, raftsched.fsm.timeline). A format-2 state has no counter records and
every TaskRecord current; its runs are migrated on load (``RunBook.migrate_timelines``: each run
stored in the form this build stores it). An older build refuses a format-3 state (its
TaskRecords' counters may be behind, its timelines derived)."""
# Command bodies a format-1 node does not know (it would record them as rejected).
_BODY_FORMAT = {
    body: 2
    for body in (
        "drain_executor",
        "stage_workflow_tasks",
        "set_calendar",
        "delete_calendar",
        "seed_membership",
        "begin_member_change",
        "end_member_change",
        "set_quota",
        "delete_quota",
    )
}
REPLACE_RELEASES_FORMAT = 4
"""The format a FireBatch is stamped with when it fires an overlap=replace task (see the history)."""
TIME_GATES_FORMAT = 5
"""The format of a command that defines jitter or a not_before gate (see the history)."""
CROSS_WORKFLOW_FORMAT = 6
"""The format of a command that defines a cross-workflow dependency or warn_after, and of
WorkflowWaitsDue (see the history)."""
EVENTS_FORMAT = 7
"""The format of EmitEvent and of task and workflow definitions that use events (see the history)."""
_BODY_FORMAT["emit_event"] = EVENTS_FORMAT
ROUTING_FORMAT = 8
"""The format of a RaiseAlerts that carries a resolved record of a kind apply raises (see the history)."""
RETRY_FORMAT = 9
"""The format of task and workflow definitions with their own retry timing, retry placement or
retention (see the history)."""
SECRETS_FORMAT = 10
"""The format of a task or workflow definition that references a secret (see the history)."""
WORKFLOW_VERSION_CHECK_FORMAT = 10
"""The format of an ApplyWorkflow conditional on the version (``expected_version``): an older
node would ignore the condition and apply what a newer one refuses (see the history)."""
POOLS_FORMAT = 11
"""The format of SetPool, DeletePool and of task and workflow definitions naming a pool."""
_BODY_FORMAT["set_pool"] = POOLS_FORMAT
_BODY_FORMAT["delete_pool"] = POOLS_FORMAT
TASK_BACKFILL_FORMAT = 12
"""The format of StartTaskBackfill (a backfill of a plain task)."""
_BODY_FORMAT["start_task_backfill"] = TASK_BACKFILL_FORMAT
HEALTH_FORMAT = 13
"""The format of a RaiseAlerts with a fleet-health kind and of an executor's own (health) drain
or its resume (see the history)."""
# The leader-raised kinds of that format (raftsched.fsm.alerts.HEALTH_KINDS; named here, as
# vocabulary, so the codec does not load the state machine).
_HEALTH_ALERT_KINDS = frozenset({"no_executor", "waiting_too_long", "heartbeat_missing", "clock_skew"})
SLA_FORMAT = 14
"""The format of task definitions with an SLA or freshness and of RaiseAlerts of the kinds
issue 36 added (see the history)."""
_SLA_ALERT_KINDS = frozenset({"start_delay", "sla_missed", "freshness"})
CANCEL_FORMAT = 15
"""The format of CancelRuns (see the history)."""
_BODY_FORMAT["cancel_runs"] = CANCEL_FORMAT
WORKFLOW_OPS_FORMAT = 16
"""The format of a WorkflowRunOp with ``redecide_external`` or ``emit``, and of an ApplyWorkflow
with ``gates_free_slots`` (see the history)."""
BATCHED_PRUNE_FORMAT = 17
"""The format of every FireBatch and ReportResults: apply prunes the history they add in batches
(``raftsched.fsm.records.PRUNE_BATCH``); an older command prunes one record at a time, as the
builds before did (see the history)."""
_BATCHED_PRUNE_BODIES = frozenset({"fire_batch", "report_results"})
COLUMNS_FORMAT = 18
"""The format of the columnar hot path's commands: NumberEntities, FireColumns, AssignColumns and
ResultColumns (see the history)."""
COLUMNS_BODIES = frozenset({"fire_columns", "assign_columns", "result_columns", "number_entities"})
"""The ``Command`` bodies of :data:`COLUMNS_FORMAT`."""
PROMOTE_FORMAT = 19
"""The format of PromoteHotRuns (see the history)."""
_BODY_FORMAT["promote_hot_runs"] = PROMOTE_FORMAT
FORMAT_TOO_NEW = "format_too_new"
"""Rejection code of a command whose format is newer than :data:`COMMAND_FORMAT`: the replica
stops applying rather than record a rejection that an upgraded node would not (see
:class:`raftsched.abc.FormatTooNew`)."""

_MISFIRE_TO_PB = {
    Misfire.LATEST: pb.MISFIRE_LATEST,
    Misfire.ALL: pb.MISFIRE_ALL,
    Misfire.SKIP: pb.MISFIRE_SKIP,
}
MISFIRE_FROM_PB = {v: k for k, v in _MISFIRE_TO_PB.items()} | {pb.MISFIRE_UNSPECIFIED: Misfire.LATEST}
_OVERLAP_TO_PB = {
    Overlap.SKIP: pb.OVERLAP_SKIP,
    Overlap.ALLOW: pb.OVERLAP_ALLOW,
    Overlap.BUFFER_ONE: pb.OVERLAP_BUFFER_ONE,
    Overlap.REPLACE: pb.OVERLAP_REPLACE,
}
OVERLAP_FROM_PB = {v: k for k, v in _OVERLAP_TO_PB.items()} | {pb.OVERLAP_UNSPECIFIED: Overlap.SKIP}

RUN_STATE_TO_PB = {
    RunState.PENDING: pb.PENDING,
    RunState.RUNNING: pb.RUNNING,
    RunState.SUCCEEDED: pb.SUCCEEDED,
    RunState.FAILED: pb.FAILED,
    RunState.CANCELLED: pb.CANCELLED,
}


def trigger_to_pb(trigger: Trigger, out: pb.Trigger) -> None:
    match trigger:
        case CronTrigger(expr, tz):
            out.cron.expr = expr
            out.cron.timezone = tz
        case IntervalTrigger(every, start):
            out.interval.every_ms = every
            out.interval.start_ms = start
        case OnceTrigger(at):
            out.once.at_ms = at
        case ManualTrigger():
            out.manual.SetInParent()


def trigger_from_pb(msg: pb.Trigger, *, stored: bool = False) -> Trigger:
    """Decode and validate a trigger (``stored``: one read back from the state, not re-validated)."""
    kind = msg.WhichOneof("kind")
    if kind == "cron":
        cron = {"expr": msg.cron.expr, "timezone": msg.cron.timezone or "UTC"}
        return unchecked(CronTrigger, **cron) if stored else CronTrigger(**cron)
    if kind == "interval":
        interval = {"every_ms": msg.interval.every_ms, "start_ms": msg.interval.start_ms}
        return unchecked(IntervalTrigger, **interval) if stored else IntervalTrigger(**interval)
    if kind == "once":
        return unchecked(OnceTrigger, at_ms=msg.once.at_ms) if stored else OnceTrigger(msg.once.at_ms)
    return ManualTrigger()


def spec_to_pb(spec: TaskSpec) -> pb.TaskSpec:
    out = pb.TaskSpec(
        name=spec.name,
        command=spec.command,
        handler=spec.handler,
        shards=spec.shards,
        misfire=_MISFIRE_TO_PB[spec.misfire],
        misfire_all_cap=spec.misfire_all_cap,
        misfire_all_window_ms=spec.misfire_all_window_ms,
        overlap=_OVERLAP_TO_PB[spec.overlap],
        max_retries=spec.max_retries,
        timeout_ms=spec.timeout_ms,
        priority=spec.priority,
        owner=spec.owner,
        namespace=spec.namespace,
        params_json=spec.params_json,
        description=spec.description,
        locks=locks_to_pb(spec.locks),
        exclude=spec.exclude,
        resource_cpu=spec.resource_cpu,
        resource_memory_mb=spec.resource_memory_mb,
        # The default is stored as "" so a spec without the field encodes as before it existed.
        runner="" if spec.runner == Runner.SHELL else str(spec.runner),
        selector=dict(spec.selector),
        jitter_ms=spec.jitter_ms,
        sla_start_within_ms=spec.sla_start_within_ms,
        sla_finish_within_ms=spec.sla_finish_within_ms,
        freshness_ms=spec.freshness_ms,
        on_event=spec.on_event,
        emits=spec.emits,
        retry_delays_ms=spec.retry_delays_ms,
        retry_same_executor=not spec.retry_elsewhere,
        keep_runs=spec.keep_runs,
        keep_for_ms=spec.keep_for_ms,
        pool=spec.pool,
    )
    if spec.retry_backoff is not None:
        out.retry_backoff.CopyFrom(retry_backoff_to_pb(spec.retry_backoff))
    trigger_to_pb(spec.trigger, out.trigger)
    return out


def spec_from_pb(msg: pb.TaskSpec) -> TaskSpec:
    """Decode and validate a spec. Raises InvalidSpec (never anything else) on bad input."""
    misfire = MISFIRE_FROM_PB.get(msg.misfire)
    if misfire is None:
        raise InvalidSpec("misfire", f"unknown misfire policy value {msg.misfire}")
    overlap = OVERLAP_FROM_PB.get(msg.overlap)
    if overlap is None:
        raise InvalidSpec("overlap", f"unknown overlap policy value {msg.overlap}")
    return TaskSpec(
        trigger=trigger_from_pb(msg.trigger),
        misfire=misfire,
        overlap=overlap,
        runner=parse_runner(msg.runner),
        **_spec_fields(msg),
    )


def stored_spec_from_pb(msg: pb.TaskSpec) -> TaskSpec:
    """Decode a spec read back from the replicated state, internal names included, *without*
    validating it again (see :func:`raftsched.model.unchecked`): validation rules added after it
    was accepted must not stop a node from loading its state."""
    return unchecked(
        TaskSpec,
        trigger=trigger_from_pb(msg.trigger, stored=True),
        misfire=MISFIRE_FROM_PB.get(msg.misfire, Misfire.LATEST),
        overlap=OVERLAP_FROM_PB.get(msg.overlap, Overlap.SKIP),
        runner=Runner.PYTHON if msg.runner == "python" else Runner.SHELL,
        **_spec_fields(msg),
    )


def _spec_fields(msg: pb.TaskSpec) -> dict[str, Any]:
    return {
        "name": msg.name,
        "command": msg.command,
        "handler": msg.handler,
        "shards": msg.shards or 1,
        "misfire_all_cap": msg.misfire_all_cap,
        "misfire_all_window_ms": msg.misfire_all_window_ms,
        "max_retries": msg.max_retries,
        "timeout_ms": msg.timeout_ms,
        "priority": msg.priority,
        "owner": msg.owner,
        "namespace": msg.namespace or "default",
        "params_json": msg.params_json,
        "description": msg.description,
        "locks": locks_from_pb(msg.locks),
        "exclude": tuple(msg.exclude),
        "resource_cpu": msg.resource_cpu,
        "resource_memory_mb": msg.resource_memory_mb,
        "selector": tuple(sorted(msg.selector.items())),
        "jitter_ms": msg.jitter_ms,
        "sla_start_within_ms": msg.sla_start_within_ms,
        "sla_finish_within_ms": msg.sla_finish_within_ms,
        "freshness_ms": msg.freshness_ms,
        "on_event": msg.on_event,
        "emits": tuple(msg.emits),
        "retry_delays_ms": tuple(msg.retry_delays_ms),
        "retry_backoff": retry_backoff_from_pb(msg),
        "retry_elsewhere": not msg.retry_same_executor,
        "keep_runs": msg.keep_runs,
        "keep_for_ms": msg.keep_for_ms,
        "pool": msg.pool,
    }


def retry_backoff_to_pb(backoff: RetryBackoff) -> pb.RetryBackoff:
    return pb.RetryBackoff(base_ms=backoff.base_ms, cap_ms=backoff.cap_ms, jitter_pct=backoff.jitter_pct)


def retry_backoff_from_pb(msg: pb.TaskSpec | pb.WorkflowTaskSpec) -> RetryBackoff | None:
    """A spec's backoff (None when it has none), unchecked: the spec's validation checks it."""
    if not msg.HasField("retry_backoff"):
        return None
    b = msg.retry_backoff
    return unchecked(RetryBackoff, base_ms=b.base_ms, cap_ms=b.cap_ms, jitter_pct=b.jitter_pct)


def command_format(cmd: pb.Command) -> int:
    """The oldest command format whose nodes can apply ``cmd`` (its body decides; a barrier that
    abandons a faulty leader time needs format 3: an older node would keep it as a floor)."""
    body = cmd.WhichOneof("body") or ""
    if body in COLUMNS_BODIES:
        return COLUMNS_FORMAT
    if body in _BATCHED_PRUNE_BODIES:
        return BATCHED_PRUNE_FORMAT
    if body == "barrier" and cmd.barrier.clock_fault_ms:
        return 3
    # Newest first: a command that needs several new formats needs the newest of them.
    if body == "workflow_run_op" and (cmd.workflow_run_op.redecide_external or cmd.workflow_run_op.emit):
        return WORKFLOW_OPS_FORMAT
    if body == "apply_workflow" and cmd.apply_workflow.gates_free_slots:
        return WORKFLOW_OPS_FORMAT
    if _defines_sla(cmd, body):
        return SLA_FORMAT
    if body == "raise_alerts" and any(a.kind in _HEALTH_ALERT_KINDS for a in cmd.raise_alerts.alerts):
        return HEALTH_FORMAT
    if body == "drain_executor" and (cmd.drain_executor.health or cmd.drain_executor.resume):
        return HEALTH_FORMAT
    if body in _POOL_SPECS and _POOL_SPECS[body](cmd):
        return POOLS_FORMAT
    if body in _SECRET_SPECS and _SECRET_SPECS[body](cmd):
        return SECRETS_FORMAT
    if body == "apply_workflow" and cmd.apply_workflow.expected_version:
        return WORKFLOW_VERSION_CHECK_FORMAT
    if body in _RETRY_SPECS and _RETRY_SPECS[body](cmd):
        return RETRY_FORMAT
    if body == "raise_alerts" and any(a.resolved and a.kind == RUN_FAILED for a in cmd.raise_alerts.alerts):
        return ROUTING_FORMAT
    if body in _EVENT_SPECS and _EVENT_SPECS[body](cmd):
        return EVENTS_FORMAT
    if body == "workflow_waits_due" or _defines_cross_workflow(cmd, body):
        return CROSS_WORKFLOW_FORMAT
    if _defines_time_gates(cmd, body):
        return TIME_GATES_FORMAT
    return _BODY_FORMAT.get(body, 1)


def _uses_sla(spec: pb.TaskSpec | pb.WorkflowSpec) -> bool:
    return bool(spec.sla_start_within_ms or spec.sla_finish_within_ms or spec.freshness_ms)


def _defines_sla(cmd: pb.Command, body: str) -> bool:
    """Whether ``cmd`` stores an SLA or freshness, or raises an alert kind of :data:`SLA_FORMAT`."""
    if body in ("create_task", "update_task"):
        return _uses_sla(getattr(cmd, body).spec)
    if body == "create_tasks":
        return any(_uses_sla(item.spec) for item in cmd.create_tasks.items)
    if body == "raise_alerts":
        return any(a.kind in _SLA_ALERT_KINDS for a in cmd.raise_alerts.alerts)
    if body == "apply_workflow":
        return _uses_sla(cmd.apply_workflow.spec)
    if body == "stage_workflow_tasks":
        return _uses_sla(cmd.stage_workflow_tasks.header)
    return False


def _defines_time_gates(cmd: pb.Command, body: str) -> bool:
    """Whether ``cmd`` stores a jitter or a not_before (which an older node would ignore)."""
    if body in ("create_task", "update_task"):
        return bool(getattr(cmd, body).spec.jitter_ms)
    if body == "create_tasks":
        return any(item.spec.jitter_ms for item in cmd.create_tasks.items)
    if body == "apply_workflow":
        spec = cmd.apply_workflow.spec
        return bool(spec.jitter_ms) or any(t.not_before for t in spec.tasks)
    if body == "stage_workflow_tasks":
        stage = cmd.stage_workflow_tasks
        return bool(stage.header.jitter_ms) or any(t.not_before for t in stage.tasks)
    return False


def _defines_cross_workflow(cmd: pb.Command, body: str) -> bool:
    """Whether ``cmd`` stores a cross-workflow dependency or a warn_after (which an older node
    would ignore, running the task without waiting for its upstream)."""
    if body == "apply_workflow":
        spec = cmd.apply_workflow.spec
        tasks: Any = spec.tasks
        warn = spec.warn_after_ms
    elif body == "stage_workflow_tasks":
        tasks = cmd.stage_workflow_tasks.tasks
        warn = cmd.stage_workflow_tasks.header.warn_after_ms
    else:
        return False
    return bool(warn) or any(d.workflow for t in tasks for d in t.depends_on)


def _uses_events(spec: Any) -> bool:
    return bool(spec.on_event or spec.emits)


_EVENT_SPECS: dict[str, Callable[[pb.Command], bool]] = {
    "create_task": lambda c: _uses_events(c.create_task.spec),
    "update_task": lambda c: _uses_events(c.update_task.spec),
    "create_tasks": lambda c: any(_uses_events(i.spec) for i in c.create_tasks.items),
    "apply_workflow": lambda c: (
        _uses_events(c.apply_workflow.spec) or any(t.emits for t in c.apply_workflow.spec.tasks)
    ),
    "stage_workflow_tasks": lambda c: (
        _uses_events(c.stage_workflow_tasks.header) or any(t.emits for t in c.stage_workflow_tasks.tasks)
    ),
}


def _retry_task(spec: Any) -> bool:
    """Whether a TaskSpec or WorkflowTaskSpec sets a retry field an older node would drop."""
    return bool(spec.retry_delays_ms or spec.HasField("retry_backoff") or spec.retry_same_executor)


def _keeps(spec: Any) -> bool:
    return bool(spec.keep_runs or spec.keep_for_ms)


_RETRY_SPECS: dict[str, Callable[[pb.Command], bool]] = {
    "create_task": lambda c: _retry_task(c.create_task.spec) or _keeps(c.create_task.spec),
    "update_task": lambda c: _retry_task(c.update_task.spec) or _keeps(c.update_task.spec),
    "create_tasks": lambda c: any(_retry_task(i.spec) or _keeps(i.spec) for i in c.create_tasks.items),
    "apply_workflow": lambda c: (
        _keeps(c.apply_workflow.spec) or any(_retry_task(t) for t in c.apply_workflow.spec.tasks)
    ),
    "stage_workflow_tasks": lambda c: (
        _keeps(c.stage_workflow_tasks.header) or any(_retry_task(t) for t in c.stage_workflow_tasks.tasks)
    ),
}


def _task_uses_secrets(spec: pb.TaskSpec) -> bool:
    return uses_secrets(spec.params_json)


def _workflow_tasks_use_secrets(tasks: Any) -> bool:
    return any(
        uses_secrets(t.params_json) or uses_secrets(t.command) or any(uses_secrets(v) for v in t.env.values())
        for t in tasks
    )


_SECRET_SPECS: dict[str, Callable[[pb.Command], bool]] = {
    "create_task": lambda c: _task_uses_secrets(c.create_task.spec),
    "update_task": lambda c: _task_uses_secrets(c.update_task.spec),
    "create_tasks": lambda c: any(_task_uses_secrets(i.spec) for i in c.create_tasks.items),
    "apply_workflow": lambda c: (
        uses_secrets(c.apply_workflow.spec.params_json)
        or _workflow_tasks_use_secrets(c.apply_workflow.spec.tasks)
    ),
    "stage_workflow_tasks": lambda c: (
        uses_secrets(c.stage_workflow_tasks.header.params_json)
        or _workflow_tasks_use_secrets(c.stage_workflow_tasks.tasks)
    ),
    # Run params are checked in apply too: an older node would accept a malformed reference.
    "trigger_now": lambda c: uses_secrets(c.trigger_now.params_json),
    "start_workflow_run": lambda c: uses_secrets(c.start_workflow_run.params_json),
    "start_backfill": lambda c: uses_secrets(c.start_backfill.params_json),
}


_POOL_SPECS: dict[str, Callable[[pb.Command], bool]] = {
    "create_task": lambda c: bool(c.create_task.spec.pool),
    "update_task": lambda c: bool(c.update_task.spec.pool),
    "create_tasks": lambda c: any(i.spec.pool for i in c.create_tasks.items),
    "apply_workflow": lambda c: any(t.pool for t in c.apply_workflow.spec.tasks),
    "stage_workflow_tasks": lambda c: any(t.pool for t in c.stage_workflow_tasks.tasks),
}


def calendar_from_pb(spec: pb.CalendarSpec, transitions_ms: Any, offsets_s: Any) -> Calendar:
    """A calendar from its replicated form (a spec and the zone's expanded offsets).

    Checks the structure and raises InvalidSpec; the zone's name is not looked up (apply may not
    consult tzdata: the offsets are what the leader expanded)."""
    return Calendar.build(
        spec.name, spec.dates, spec.weekdays, spec.zone or "UTC", list(transitions_ms), list(offsets_s)
    )


def locks_to_pb(locks: tuple[Lock, ...]) -> list[pb.LockRef]:
    """Locks in canonical order (by name): equal specs encode to equal bytes."""
    return [
        pb.LockRef(name=lk.name, shared=lk.mode == LockMode.SHARED) for lk in sorted(locks, key=_lock_name)
    ]


def locks_from_pb(msgs: Iterable[pb.LockRef]) -> tuple[Lock, ...]:
    return tuple(
        sorted(
            (Lock(m.name, LockMode.SHARED if m.shared else LockMode.EXCLUSIVE) for m in msgs), key=_lock_name
        )
    )


def _lock_name(lock: Lock) -> str:
    return lock.name


def encode_command(cmd: pb.Command) -> bytes:
    """Commands are serialised deterministically so replicas log identical bytes; an unset
    ``format`` is stamped with :func:`command_format`."""
    if not cmd.format:
        cmd.format = command_format(cmd)
    return cmd.SerializeToString(deterministic=True)


def request_fingerprint(method: str, request: Message) -> bytes:
    """sha256 of a client request: the method name and the request's canonical bytes with its
    idempotency key cleared, so one key can be told apart from the same key on another request."""
    body = type(request)()
    body.CopyFrom(request)
    if "idempotency_key" in body.DESCRIPTOR.fields_by_name:
        body.ClearField("idempotency_key")
    return hashlib.sha256(method.encode() + b"\0" + body.SerializeToString(deterministic=True)).digest()


def with_fingerprint(data: bytes, fingerprint: bytes) -> bytes:
    """An encoded command with ``request_fingerprint`` set. Protobuf merges concatenated
    encodings, so this appends the one field without decoding the command again; the log holds
    these exact bytes, so every replica decodes the same command."""
    return data + pb.Command(request_fingerprint=fingerprint).SerializeToString()


def decode_command(data: bytes) -> pb.Command:
    cmd = pb.Command()
    cmd.ParseFromString(data)
    return cmd
