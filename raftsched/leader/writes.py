"""Client writes as the leader stamps them: validation against croniter and the clock, the first
fire computed here (never in apply), and the leader's ``now`` and ``epoch`` attached.

Used by the gRPC servicer on the leader and by the simulation harness, so both produce the
same commands. Raises :class:`raftsched.errors.InvalidSpec` or ``NotFound`` for bad input before
anything is proposed.
"""

from __future__ import annotations

import datetime as _dt
import hashlib
from collections.abc import Mapping, Sequence
from typing import Final, Protocol

from raftsched import codec
from raftsched.errors import InvalidSpec, NotFound, quote
from raftsched.fsm.events import check_event
from raftsched.fsm.runs import MAX_CANCEL_PER_COMMAND
from raftsched.fsm.state import SchedulerState
from raftsched.fsm.workflow_model import MAX_BACKFILL_RUNS as MAX_BACKFILL_RUNS
from raftsched.fsm.workflow_model import is_internal, trigger_name
from raftsched.model import (
    MAX_TIME_MS,
    CronTrigger,
    IntervalTrigger,
    TaskSpec,
    validate_name,
    validate_params,
)
from raftsched.timing.calendar import Calendar, zone_offsets
from raftsched.timing.cron import CronSchedule
from raftsched.timing.gates import is_wall_clock
from raftsched.timing.schedule import fires_in, next_fire_after, prepare_spec
from raftsched.v1 import log_pb2 as pb
from raftsched.workflow.validate import validate_workflow


def executor_join(
    name: str,
    slots: int,
    labels: Mapping[str, str],
    *,
    now_ms: int,
    epoch: int,
    origin: str,
    cpu: float = 0.0,
    memory_mb: int = 0,
) -> bytes:
    """An executor registers (or registers again) with its slots, labels and capacity; the caller
    has validated ``name`` and ``slots``."""
    cmd = pb.Command(epoch=epoch, now_ms=now_ms, origin=origin)
    set_executor_join(cmd, name, slots, labels, cpu=cpu, memory_mb=memory_mb)
    return codec.encode_command(cmd)


def set_executor_join(
    cmd: pb.Command,
    name: str,
    slots: int,
    labels: Mapping[str, str],
    principal: str = "",
    namespaces: Sequence[str] = (),
    cpu: float = 0.0,
    memory_mb: int = 0,
) -> None:
    """Make ``cmd`` an executor join; ``principal`` (auth on) binds the name to it, and the
    executor receives work of ``namespaces`` only (empty: every namespace). ``cpu`` and
    ``memory_mb`` are its capacity for tasks' declared needs (0: not declared)."""
    cmd.executor_join.name = name
    cmd.executor_join.slots = slots
    cmd.executor_join.labels.update(labels)
    cmd.executor_join.cpu = cpu
    cmd.executor_join.memory_mb = memory_mb
    if principal:
        cmd.executor_join.principal = principal
        cmd.executor_join.namespaces.extend(namespaces)


def drain_executor(name: str, reason: str, *, now_ms: int, epoch: int, origin: str, key: str) -> bytes:
    """Stop placing new attempts on executor ``name`` (refused by apply if it is not a member)."""
    validate_name(name, "executor.name")
    if len(reason) > 500:
        raise InvalidSpec("reason", "at most 500 characters")
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.drain_executor.name = name
    cmd.drain_executor.reason = reason
    return codec.encode_command(cmd)


def _envelope(now_ms: int, epoch: int, origin: str, key: str) -> pb.Command:
    return pb.Command(epoch=epoch, now_ms=now_ms, origin=origin, idempotency_key=key)


def create_task(spec: TaskSpec, *, disabled: bool, now_ms: int, epoch: int, origin: str, key: str) -> bytes:
    spec, first = prepare_spec(spec, now_ms)
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.create_task.spec.CopyFrom(codec.spec_to_pb(spec))
    cmd.create_task.next_fire_ms = first
    cmd.create_task.disabled = disabled
    return codec.encode_command(cmd)


def update_task(
    state: SchedulerState,
    spec: TaskSpec,
    *,
    expected_version: int,
    now_ms: int,
    epoch: int,
    origin: str,
    key: str,
) -> bytes:
    current = state.get_task(spec.name)
    if current is None:
        raise NotFound(f"task {quote(spec.name)} does not exist")
    spec, _ = prepare_spec(spec, now_ms)
    # Fires up to max(now, watermark) are accounted under the old definition; the new trigger
    # takes over strictly after that.
    after = max(now_ms, current.watermark_ms)
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.update_task.spec.CopyFrom(codec.spec_to_pb(spec))
    cmd.update_task.next_fire_ms = next_fire_after(spec.trigger, after)
    cmd.update_task.expected_version = expected_version
    return codec.encode_command(cmd)


def set_enabled(
    state: SchedulerState, name: str, enabled: bool, *, now_ms: int, epoch: int, origin: str, key: str
) -> bytes:
    validate_name(name)
    planning = state.get_task(name)
    if planning is None:
        raise NotFound(f"task {quote(name)} does not exist")
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.set_enabled.name = name
    cmd.set_enabled.enabled = enabled
    if enabled:
        spec = codec.spec_from_pb(planning.spec)
        cmd.set_enabled.next_fire_ms = next_fire_after(spec.trigger, max(now_ms, planning.watermark_ms))
    return codec.encode_command(cmd)


def delete_task(name: str, *, now_ms: int, epoch: int, origin: str, key: str) -> bytes:
    validate_name(name)
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.delete_task.name = name
    return codec.encode_command(cmd)


def trigger_now(name: str, params_json: str, *, now_ms: int, epoch: int, origin: str, key: str) -> bytes:
    validate_name(name)
    validate_params(params_json)
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.trigger_now.name = name
    cmd.trigger_now.params_json = params_json
    return codec.encode_command(cmd)


MAX_BULK_ENTRY_BYTES = 60_000


def create_tasks(
    items: list[tuple[TaskSpec, bool]], *, now_ms: int, epoch: int, origin: str, key: str
) -> tuple[list[bytes], dict[int, InvalidSpec]]:
    """Bulk create: ``(commands, refused)``. Items that fail validation on the leader are returned
    in ``refused`` (by position) and never proposed; the rest are packed into CreateTasks
    commands below the log-entry size limit, each with idempotency key ``key/<n>``."""
    refused: dict[int, InvalidSpec] = {}
    commands: list[bytes] = []
    cmd = _envelope(now_ms, epoch, origin, f"{key}/0")
    size = 0
    for position, (spec, disabled) in enumerate(items):
        try:
            spec, first = prepare_spec(spec, now_ms)
        except InvalidSpec as exc:
            refused[position] = exc
            continue
        item = pb.CreateTask(spec=codec.spec_to_pb(spec), next_fire_ms=first, disabled=disabled)
        item_size = item.ByteSize() + 8
        if cmd.create_tasks.items and size + item_size > MAX_BULK_ENTRY_BYTES:
            commands.append(codec.encode_command(cmd))
            cmd = _envelope(now_ms, epoch, origin, f"{key}/{len(commands)}")
            size = 0
        cmd.create_tasks.items.append(item)
        size += item_size
    if cmd.create_tasks.items:
        commands.append(codec.encode_command(cmd))
    return commands, refused


def retry_run(run_id: str, *, now_ms: int, epoch: int, origin: str, key: str) -> bytes:
    if not run_id or "@" not in run_id or len(run_id) > 256:
        raise InvalidSpec("run_id", f"{quote(run_id)} is not a run id (task@nominal_ms)")
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.retry_run.run_id = run_id
    return codec.encode_command(cmd)


# -- alerts ---------------------------------------------------------------------------------------


def workflow_waits_due(*, now_ms: int, epoch: int, origin: str) -> bytes:
    """Cross-workflow deadlines (timeout, warn_after) have come at ``now_ms``: apply acts on the
    ones that have, by its own state."""
    cmd = _envelope(now_ms, epoch, origin, "")
    cmd.workflow_waits_due.SetInParent()
    return codec.encode_command(cmd)


def raise_alerts(
    alerts: Sequence[pb.AlertRecord], *, now_ms: int, epoch: int, origin: str, key: str = ""
) -> bytes:
    """Leader-detected alert events (zombie, start_delay, sla_missed, freshness), each with its
    dedupe key."""
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.raise_alerts.alerts.extend(alerts)
    return codec.encode_command(cmd)


def alerts_delivered(
    target: str, through_seq: int, *, now_ms: int, epoch: int, origin: str, key: str = ""
) -> bytes:
    """Advance webhook ``target``'s delivered cursor to ``through_seq``."""
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.alerts_delivered.target = target
    cmd.alerts_delivered.through_seq = through_seq
    return codec.encode_command(cmd)


def ack_alert(alert_id: str, *, now_ms: int, epoch: int, origin: str, key: str) -> bytes:
    if not alert_id.startswith("alert-") or len(alert_id) > 64:
        raise InvalidSpec("id", f"{quote(alert_id)} is not an alert id (alert-<number>)")
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.ack_alert.id = alert_id
    return codec.encode_command(cmd)


# -- workflows ------------------------------------------------------------------------------------

# MAX_BACKFILL_RUNS (imported above) is the state machine's limit, checked here first so the user gets
# a clear message and nothing is proposed.
MAX_REASON_BYTES: Final = 4 * 1024
DAY_MS: Final = 86_400_000


class WorkflowReads(Protocol):
    """The reads of the replicated state that workflow writes check against (SchedulerState)."""

    def get_workflow(self, name: str, version: int = 0) -> pb.WorkflowRecord | None: ...

    def get_workflow_run(self, run_id: str) -> pb.WorkflowRun | None: ...


def workflow_next_fire(spec: pb.WorkflowSpec, after_ms: int) -> int:
    """The first scheduled run strictly after ``after_ms`` (0 when the workflow has no schedule)."""
    if not spec.HasField("schedule") or not spec.schedule.expr:
        return 0
    return next_fire_after(CronTrigger(spec.schedule.expr, spec.schedule.timezone or "UTC"), after_ms)


def apply_workflow(
    spec: pb.WorkflowSpec, *, now_ms: int, epoch: int, origin: str, key: str, expected_version: int = 0
) -> bytes:
    """Create a workflow or a new version of it. Raises InvalidWorkflow listing every problem.

    The state machine creates no version when the definition equals the current one
    (``CommandResult.changed`` is false), so re-applying an unchanged file is harmless.
    ``expected_version`` (0: any) makes the apply conditional: refused with a conflict unless
    the workflow is at that version when the command is applied.
    """
    validate_workflow(spec)
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.apply_workflow.spec.CopyFrom(spec)
    cmd.apply_workflow.expected_version = expected_version
    cmd.apply_workflow.next_fire_ms = workflow_next_fire(spec, now_ms)
    _stamp_zone(spec, cmd.apply_workflow)
    return codec.encode_command(cmd)


def _stamp_zone(spec: pb.WorkflowSpec, body: pb.ApplyWorkflow) -> None:
    """A task has a wall-clock not_before ("02:00"): expand the workflow zone's UTC offsets into
    the command here, so apply maps wall times without consulting tzdata (as calendars do).
    A workflow with earliest-start gates and a parallelism limit is stamped ``gates_free_slots``:
    its held tasks take no place (format 13, only then)."""
    gated = bool(spec.jitter_ms) or any(t.not_before for t in spec.tasks)
    if gated and (spec.max_parallel or spec.max_parallel_per_run):
        body.gates_free_slots = True
    if any(is_wall_clock(t.not_before) for t in spec.tasks):
        transitions, offsets = zone_offsets(spec.schedule.timezone or "UTC", "timezone")
        body.zone_transition_ms.extend(transitions)
        body.zone_offset_s.extend(offsets)


# Workflows with more tasks than this are applied as several entries (chunks of this many tasks
# each, then the version itself), so no single apply holds the state for all of them.
STAGE_CHUNK_TASKS: Final = 1000


def staged_workflow(
    spec: pb.WorkflowSpec, *, now_ms: int, epoch: int, origin: str, key: str, expected_version: int = 0
) -> list[bytes]:
    """:func:`apply_workflow` for a big workflow, as commands to propose in order: its tasks in
    ``StageWorkflowTasks`` chunks, then an ``ApplyWorkflow`` of the stage. Raises as
    :func:`apply_workflow`. The stage id is a digest of the definition, so a retried request
    proposes the same final command (its idempotency key then answers with the first result)."""
    validate_workflow(spec)
    stage = hashlib.sha256(spec.SerializeToString(deterministic=True)).hexdigest()[:32]
    header = pb.WorkflowSpec()
    header.CopyFrom(spec)
    header.ClearField("tasks")
    out: list[bytes] = []
    for seq, start in enumerate(range(0, len(spec.tasks), STAGE_CHUNK_TASKS)):
        cmd = _envelope(now_ms, epoch, origin, "")
        body = cmd.stage_workflow_tasks
        body.workflow = spec.name
        body.stage = stage
        body.seq = seq
        if seq == 0:
            body.header.CopyFrom(header)
            body.names.extend(t.name for t in spec.tasks)
        body.tasks.extend(spec.tasks[start : start + STAGE_CHUNK_TASKS])
        out.append(codec.encode_command(cmd))
    final = _envelope(now_ms, epoch, origin, key)
    final.apply_workflow.spec.CopyFrom(header)
    final.apply_workflow.next_fire_ms = workflow_next_fire(spec, now_ms)
    final.apply_workflow.stage = stage
    final.apply_workflow.staged_tasks = len(spec.tasks)
    final.apply_workflow.expected_version = expected_version
    _stamp_zone(spec, final.apply_workflow)
    out.append(codec.encode_command(final))
    return out


def _check_time(ms: int, field: str) -> None:
    if not 0 <= ms <= MAX_TIME_MS:
        raise InvalidSpec(field, f"{ms} is outside 1970-01-01 .. 9999-12-31 (epoch ms)")


def _existing_workflow(state: WorkflowReads, workflow: str) -> pb.WorkflowRecord:
    validate_name(workflow, "workflow")
    record = state.get_workflow(workflow)
    if record is None:
        raise NotFound(f"workflow {quote(workflow)} does not exist")
    return record


def start_workflow_run(
    state: WorkflowReads,
    workflow: str,
    logical_ms: int,
    params_json: str,
    *,
    now_ms: int,
    epoch: int,
    origin: str,
    key: str,
) -> bytes:
    """Start a run of the workflow's current version now; ``logical_ms`` 0 means now.

    ``logical_ms`` is the run's nominal time (``{{ ds }}``, ``{{ ts }}``), not when it starts:
    the run starts as soon as it is committed whatever its logical time.
    """
    _existing_workflow(state, workflow)
    _check_time(logical_ms, "logical_ms")
    validate_params(params_json)
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.start_workflow_run.workflow = workflow
    cmd.start_workflow_run.logical_ms = logical_ms or now_ms
    cmd.start_workflow_run.params_json = params_json
    return codec.encode_command(cmd)


_OPS_WITH_TASK: Final = frozenset({pb.WorkflowRunOp.RERUN, pb.WorkflowRunOp.MARK_SUCCESS})


def set_workflow_paused(
    state: SchedulerState, workflow: str, paused: bool, *, now_ms: int, epoch: int, origin: str, key: str
) -> bytes:
    """Pause (scheduled runs stop) or resume (they fire again from now on) a workflow.

    A resume carries the schedule's next fire after now (and after what the schedule has
    accounted), so apply never evaluates cron."""
    record = _existing_workflow(state, workflow)
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.set_workflow_paused.workflow = workflow
    cmd.set_workflow_paused.paused = paused
    if not paused:
        trigger = state.get_task(trigger_name(workflow))
        after = max(now_ms, trigger.watermark_ms if trigger is not None else 0)
        cmd.set_workflow_paused.next_fire_ms = workflow_next_fire(record.spec, after)
    return codec.encode_command(cmd)


def delete_workflow(
    state: WorkflowReads,
    workflow: str,
    force: bool,
    reason: str,
    *,
    now_ms: int,
    epoch: int,
    origin: str,
    key: str,
) -> bytes:
    """Delete a workflow with its versions, runs, backfills and internal tasks. Refused while a run
    is active unless ``force``, which kills the active runs first."""
    _existing_workflow(state, workflow)
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.delete_workflow.workflow = workflow
    cmd.delete_workflow.force = force
    cmd.delete_workflow.reason = reason
    return codec.encode_command(cmd)


def workflow_run_op(
    state: WorkflowReads,
    op: int,
    run_id: str,
    task: str,
    reason: str,
    *,
    now_ms: int,
    epoch: int,
    origin: str,
    key: str,
) -> bytes:
    """Kill a workflow run, rerun one of its tasks (and everything downstream), or mark a task
    succeeded. Raises NotFound naming the unknown run or task; InvalidSpec for a missing task name
    (rerun, mark-success), a task given to kill, or an unknown op.

    Whether the operation is possible in the run's current state (killing a finished run,
    rerunning a task that is still running) is decided by the state machine, which sees the
    state the command is applied to.
    """
    if op not in (pb.WorkflowRunOp.KILL, *_OPS_WITH_TASK):
        raise InvalidSpec("op", f"unknown workflow run operation {op}")
    if not run_id or len(run_id) > 512:
        raise InvalidSpec("run_id", "required (a workflow run id, <workflow>@<logical_ms>...)")
    if len(reason.encode("utf-8")) > MAX_REASON_BYTES:
        raise InvalidSpec("reason", f"at most {MAX_REASON_BYTES} bytes")
    run = state.get_workflow_run(run_id)
    if run is None:
        raise NotFound(f"workflow run {quote(run_id)} does not exist")
    if op in _OPS_WITH_TASK:
        if not task:
            raise InvalidSpec("task", "required: which task of the run")
        if all(t.name != task for t in run.tasks):
            raise NotFound(f"workflow run {quote(run_id)} has no task {quote(task)}")
    elif task:
        raise InvalidSpec("task", "kill applies to the whole run; give no task")
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.workflow_run_op.op = op  # type: ignore[assignment]  # an int checked against the enum above
    cmd.workflow_run_op.run_id = run_id
    cmd.workflow_run_op.task = task
    cmd.workflow_run_op.reason = reason
    # Only when it matters (so the command needs the newer format only then): a rerun in a run
    # with cross-workflow edges re-decides them; marking a task that declares emits emits them.
    if op == pb.WorkflowRunOp.RERUN and any(t.external for t in run.tasks):
        cmd.workflow_run_op.redecide_external = True
    if op == pb.WorkflowRunOp.MARK_SUCCESS:
        record = state.get_workflow(run.workflow, run.version)
        if record is not None and any(t.name == task and t.emits for t in record.spec.tasks):
            cmd.workflow_run_op.emit = True
    return codec.encode_command(cmd)


def backfill_times(
    spec: pb.WorkflowSpec, from_ms: int, to_ms: int, limit: int = MAX_BACKFILL_RUNS
) -> list[int]:
    """The logical times a backfill of ``[from_ms, to_ms]`` (both inclusive) runs, ascending.

    Every occurrence of the workflow's schedule in the range (the cron DST policy applied, as for
    scheduled runs), or every UTC midnight in the range when the workflow has no schedule. At most
    ``limit + 1`` values come back, so a caller can tell "too many" from "exactly the limit".
    Leader only: it evaluates cron.
    """
    if to_ms < from_ms:
        return []
    if spec.HasField("schedule") and spec.schedule.expr:
        schedule = CronSchedule.parse(
            spec.schedule.expr, spec.schedule.timezone or "UTC", "schedule.cron", "schedule.timezone"
        )
        return schedule.fires_between(from_ms - 1, to_ms, limit + 1)
    first = -(-from_ms // DAY_MS) * DAY_MS  # the first midnight at or after from_ms
    return list(range(first, to_ms + 1, DAY_MS))[: limit + 1]


def start_backfill(
    state: WorkflowReads,
    workflow: str,
    from_ms: int,
    to_ms: int,
    params_json: str,
    *,
    now_ms: int,
    epoch: int,
    origin: str,
    key: str,
) -> bytes:
    """One run per logical time in ``[from_ms, to_ms]`` (see :func:`backfill_times`), of the
    workflow's current version, dispatched within its backfill share of the executor slots.

    Refused (InvalidSpec) when ``from`` is after ``to``, when the range holds no logical time, or
    when it holds more than :data:`MAX_BACKFILL_RUNS`; NotFound for an unknown workflow.
    """
    record = _existing_workflow(state, workflow)
    _check_range(from_ms, to_ms)
    validate_params(params_json)
    times = backfill_times(record.spec, from_ms, to_ms)
    if record.spec.schedule.expr:
        what = f"occurrence of the schedule '{record.spec.schedule.expr}'"
    else:
        what = "UTC midnight (a workflow without a schedule backfills one run per day)"
    _check_backfill_size(times, what, from_ms, to_ms)
    cmd = _envelope(now_ms, epoch, origin, key)
    body = cmd.start_backfill
    body.workflow = workflow
    body.logical_ms.extend(times)
    body.from_ms = from_ms
    body.to_ms = to_ms
    body.params_json = params_json
    return codec.encode_command(cmd)


def _check_range(from_ms: int, to_ms: int) -> None:
    """A backfill's ``[from, to]``: two times, in order (InvalidSpec naming the field)."""
    _check_time(from_ms, "from")
    _check_time(to_ms, "to")
    if from_ms > to_ms:
        raise InvalidSpec("to", f"the range ends ({_iso(to_ms)}) before it starts ({_iso(from_ms)})")


def _check_backfill_size(times: Sequence[int], what: str, from_ms: int, to_ms: int) -> None:
    """A backfill holds at least one run (one per ``what``) and at most :data:`MAX_BACKFILL_RUNS`."""
    if not times:
        raise InvalidSpec(
            "from", f"no {what} in [{_iso(from_ms)}, {_iso(to_ms)}]: the backfill would be empty"
        )
    if len(times) > MAX_BACKFILL_RUNS:
        raise InvalidSpec(
            "to",
            f"[{_iso(from_ms)}, {_iso(to_ms)}] holds more than {MAX_BACKFILL_RUNS:,} runs "
            f"(one per {what}); split it into several backfills",
        )


def _iso(ms: int) -> str:
    """UTC ISO 8601 for messages (whole seconds)."""
    return _dt.datetime.fromtimestamp(ms // 1000, _dt.UTC).isoformat().replace("+00:00", "Z")


def set_quota(quota: pb.QuotaRecord, *, now_ms: int, epoch: int, origin: str, key: str) -> bytes:
    """Create or replace an owner's or a namespace's quota (only its limits are sent: kind,
    name, rate_milli, burst, max_running; apply validates them and keeps the bucket's state)."""
    cmd = _envelope(now_ms, epoch, origin, key)
    q = cmd.set_quota.quota
    q.kind, q.name = quota.kind, quota.name
    q.rate_milli, q.burst, q.max_running = quota.rate_milli, quota.burst, quota.max_running
    return codec.encode_command(cmd)


def delete_quota(kind: str, name: str, *, now_ms: int, epoch: int, origin: str, key: str) -> bytes:
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.delete_quota.kind, cmd.delete_quota.name = kind, name
    return codec.encode_command(cmd)


def start_task_backfill(
    state: SchedulerState,
    task: str,
    from_ms: int,
    to_ms: int,
    params_json: str,
    *,
    now_ms: int,
    epoch: int,
    origin: str,
    key: str,
) -> bytes:
    """One run per nominal time of the plain task's schedule in ``[from_ms, to_ms]`` (both
    inclusive; cron occurrences with the DST policy of its fires, or interval steps), dispatched
    within the backfill share of the executor slots. Apply skips the times that have a run
    already, and those the scheduler has not accounted yet (it fires them itself).

    Refused (InvalidSpec) when ``from`` is after ``to``, when the task has no schedule (manual or
    one-shot), when the range holds no nominal time, or when it holds more than
    :data:`MAX_BACKFILL_RUNS`; NotFound for an unknown task.
    """
    validate_name(task, "task")
    record = state.get_task(task)
    if record is None or is_internal(task):
        raise NotFound(f"task {quote(task)} does not exist")
    _check_range(from_ms, to_ms)
    validate_params(params_json)
    trigger = codec.trigger_from_pb(record.spec.trigger, stored=True)
    if isinstance(trigger, CronTrigger):
        what = f"occurrence of the schedule '{trigger.expr}' ({trigger.timezone})"
    elif isinstance(trigger, IntervalTrigger):
        what = f"interval step (every {trigger.every_ms // 1000} s from {_iso(trigger.start_ms)})"
    else:
        raise InvalidSpec(
            "task",
            f"task {quote(task)} has no schedule (manual or one-shot): nothing to backfill; trigger it",
        )
    times = fires_in(trigger, from_ms, to_ms, MAX_BACKFILL_RUNS + 1)
    _check_backfill_size(times, what, from_ms, to_ms)
    cmd = _envelope(now_ms, epoch, origin, key)
    body = cmd.start_task_backfill
    body.task = task
    body.nominal_ms.extend(times)
    body.from_ms = from_ms
    body.to_ms = to_ms
    body.params_json = params_json
    return codec.encode_command(cmd)


def set_pool(pool: pb.PoolRecord, *, now_ms: int, epoch: int, origin: str, key: str) -> bytes:
    """Create or resize a pool (its name, slots and description; apply validates them)."""
    cmd = _envelope(now_ms, epoch, origin, key)
    p = cmd.set_pool.pool
    p.name, p.slots, p.description = pool.name, pool.slots, pool.description
    return codec.encode_command(cmd)


def delete_pool(name: str, *, now_ms: int, epoch: int, origin: str, key: str) -> bytes:
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.delete_pool.name = name
    return codec.encode_command(cmd)


def set_calendar(spec: pb.CalendarSpec, *, now_ms: int, epoch: int, origin: str, key: str) -> bytes:
    """Create or replace a calendar. The leader expands the zone's UTC offsets into the command
    here (apply never consults tzdata). Raises InvalidSpec for a bad name, zone or day list."""
    validate_name(spec.name, "calendar")
    if list(spec.dates) != sorted(set(spec.dates)):
        raise InvalidSpec("calendar.dates", "dates must be ascending and unique")
    if len(spec.description.encode("utf-8")) > 4096:
        raise InvalidSpec("calendar.description", "at most 4 KiB")
    zone = spec.zone or "UTC"
    transitions, offsets = zone_offsets(zone, "calendar.zone")
    Calendar.build(spec.name, spec.dates, spec.weekdays, zone, transitions, offsets)  # the structure
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.set_calendar.spec.CopyFrom(spec)
    cmd.set_calendar.spec.zone = zone
    cmd.set_calendar.transition_ms.extend(transitions)
    cmd.set_calendar.offset_s.extend(offsets)
    return codec.encode_command(cmd)


def delete_calendar(
    state: SchedulerState, name: str, *, now_ms: int, epoch: int, origin: str, key: str
) -> bytes:
    """Delete a calendar; NotFound if there is none. Apply refuses it while a task or workflow
    excludes it (the refusal lists them)."""
    validate_name(name, "calendar")
    if state.get_calendar(name) is None:
        raise NotFound(f"calendar {name!r} does not exist")
    cmd = _envelope(now_ms, epoch, origin, key)
    cmd.delete_calendar.name = name
    return codec.encode_command(cmd)


def emit_event(
    name: str,
    event_key: str,
    payload_json: str,
    namespace: str,
    *,
    now_ms: int,
    epoch: int,
    origin: str,
    key: str,
) -> bytes:
    """Emit event ``name`` with dedupe key ``event_key`` (an empty one gets the request's
    idempotency ``key``: each call a new event, a retry the same one). Raises InvalidSpec for a
    bad name, key or payload (over 64 KiB, not a JSON object); apply checks again."""
    check_event(name, event_key, payload_json)
    cmd = _envelope(now_ms, epoch, origin, key)
    body = cmd.emit_event
    body.name, body.key, body.payload_json = name, event_key or key, payload_json
    body.namespace = namespace or "default"
    return codec.encode_command(cmd)


# -- cancel (issue 29 §1) --------------------------------------------------------------------------

CANCEL_STATES: Final = ("pending", "running")
"""What a bulk cancel may select by (``--state``; empty: both)."""


def cancel_run(
    run_id: str, reason: str, *, shard: int | None = None, now_ms: int, epoch: int, origin: str, key: str
) -> bytes:
    """The CancelRuns command for one run (or one ``shard`` of it); see :func:`cancel_runs`."""
    return cancel_runs([run_id], reason, shard=shard, now_ms=now_ms, epoch=epoch, origin=origin, key=key)[0]


def cancel_runs(
    run_ids: Sequence[str],
    reason: str,
    *,
    shard: int | None = None,
    skip_finished: bool = False,
    now_ms: int,
    epoch: int,
    origin: str,
    key: str,
) -> list[bytes]:
    """CancelRuns commands for ``run_ids`` (at most MAX_CANCEL_PER_COMMAND each; the n-th gets
    idempotency key ``key/<n>`` when there are several). Raises InvalidSpec for a malformed run id,
    a reason past MAX_REASON_BYTES, or a shard with more than one run. Whether each run can be
    cancelled is decided by the state machine, on the state the command applies to."""
    for run_id in run_ids:
        if not run_id or "@" not in run_id or len(run_id) > 256:
            raise InvalidSpec("run_id", f"{quote(run_id)} is not a run id (task@nominal_ms)")
    if len(reason.encode("utf-8")) > MAX_REASON_BYTES:
        raise InvalidSpec("reason", f"at most {MAX_REASON_BYTES} bytes")
    if shard is not None and len(run_ids) != 1:
        raise InvalidSpec("shard", "names a shard of one run; give exactly one run id")
    chunks = [run_ids[i : i + MAX_CANCEL_PER_COMMAND] for i in range(0, len(run_ids), MAX_CANCEL_PER_COMMAND)]
    out: list[bytes] = []
    for n, chunk in enumerate(chunks):
        cmd = _envelope(now_ms, epoch, origin, f"{key}/{n}" if key and len(chunks) > 1 else key)
        cmd.cancel_runs.run_ids.extend(chunk)
        cmd.cancel_runs.reason = reason
        cmd.cancel_runs.skip_finished = skip_finished
        if shard is not None:
            cmd.cancel_runs.shard = shard
        out.append(codec.encode_command(cmd))
    return out
