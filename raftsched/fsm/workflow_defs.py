"""Workflow definitions inside the replicated state machine: applying a workflow (whole, or staged
in chunks when it is big), its versions and internal tasks, and pausing its schedule.

Each version of a workflow is stored with the internal tasks that run its tasks (at that version,
disabled: a run pins its version and starts them itself) and, with a schedule, its trigger task
(:mod:`raftsched.fsm.workflow_model`). A big workflow's tasks arrive as ``StageWorkflowTasks``
chunks, each checked and installed on its own, and one ``ApplyWorkflow`` naming the stage makes
the version current. What runs the versions is :class:`raftsched.fsm.workflows.WorkflowBook`,
which owns this book's state: deterministic like the rest of the state machine.
"""

from __future__ import annotations

from typing import Protocol

from raftsched import codec
from raftsched.errors import Conflict, InvalidSpec
from raftsched.fsm import keys
from raftsched.fsm.crossdeps import check_upstreams, upstreams
from raftsched.fsm.effects import Effect, TaskArmed
from raftsched.fsm.records import TaskState, spec_bytes
from raftsched.fsm.rules import check_next_fire, check_nothing_due
from raftsched.fsm.workflow_model import (
    SEP,
    TRIGGER_HANDLER,
    TaskHost,
    WorkflowState,
    canonical,
    internal_spec,
    task_name,
    trigger_name,
)
from raftsched.model import Runner, TaskSpec, validate_name
from raftsched.timing.gates import Zone, is_wall_clock
from raftsched.v1 import log_pb2 as pb
from raftsched.workflow.dag import Dag, compile_dag
from raftsched.workflow.validate import (
    MAX_WORKFLOW_TASKS,
    chunk_problems,
    graph_problems,
    raise_problems,
    validate_workflow,
    workflow_version_conflict,
)


class DefinitionsHost(Protocol):
    """What the definitions need from the workflow book that owns them."""

    @property
    def host(self) -> TaskHost:
        """The task side of the state machine."""
        ...

    @property
    def workflows(self) -> dict[str, WorkflowState]:
        """Every workflow by name, at its current version."""
        ...

    def workflow_named(self, name: str) -> WorkflowState:
        """Workflow ``name`` (raises NotFound)."""
        ...

    def record(self, wf: WorkflowState) -> pb.WorkflowRecord:
        """``wf``'s record, with the next fire of its schedule."""
        ...

    def save(self, wf: WorkflowState) -> None:
        """Write ``wf``'s record when the command being applied ends."""
        ...

    def remember_zone(self, workflow: str, version: int, zone: Zone) -> None:
        """Cache the zone offsets stored with ``workflow``'s ``version``."""
        ...


class WorkflowDefinitions:
    """The commands that define workflows (same thread, same lock, same store as the book)."""

    def __init__(self, book: DefinitionsHost) -> None:
        self.book = book

    # -- staged workflows: a big workflow's tasks arrive in chunks, each applied on its own --------

    def stage_tasks(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        """Check and keep one chunk of a workflow's tasks (see ``StageWorkflowTasks``). Refused
        (changing nothing) if out of order, of another stage, or if any of its tasks is invalid."""
        body = cmd.stage_workflow_tasks
        validate_name(body.workflow, "workflow")
        if not body.stage or len(body.stage) > 128:
            raise InvalidSpec("stage", "1-128 characters")
        store = self.book.host.store
        if body.seq == 0:
            if body.header.name != body.workflow or body.header.tasks:
                raise InvalidSpec("header", "the workflow's own fields, without its tasks")
            if not 0 < len(body.names) <= MAX_WORKFLOW_TASKS:
                raise InvalidSpec("names", f"{len(body.names)} tasks (1-{MAX_WORKFLOW_TASKS} allowed)")
            if self.book.host.task_state(body.workflow) is not None:
                raise Conflict(f"{body.workflow!r} is the name of a task; a workflow needs its own name")
            current = self.book.workflows.get(body.workflow)
            head = pb.WorkflowStage(
                stage=body.stage, names=body.names, version=current.version + 1 if current else 1
            )
            head.header.CopyFrom(body.header)
        else:
            raw = store.get(keys.stage_key(body.workflow))
            head = pb.WorkflowStage.FromString(raw) if raw is not None else pb.WorkflowStage()
            if raw is None or head.stage != body.stage or head.chunks != body.seq:
                raise Conflict(f"chunk {body.seq} of stage {body.stage!r} is out of order (restage it)")
            current = self.book.workflows.get(body.workflow)
            if head.version != (current.version + 1 if current else 1):
                raise Conflict(f"workflow {body.workflow!r} changed while staged (restage it)")
        if head.staged_tasks + len(body.tasks) > len(head.names):
            raise InvalidSpec("tasks", "more tasks than the stage names")
        raise_problems(
            chunk_problems(head.header, head.names, head.staged_tasks, body.tasks), head.header, head.names
        )
        if body.seq == 0:
            self.drop_stage(body.workflow)  # an earlier stage that never finished
            if current is None:
                # Internal tasks that an unfinished stage of a workflow never created left.
                for internal in self.book.host.task_names(body.workflow + SEP):
                    self.book.host.remove_task(internal)
        # Installed now, disabled, at the staged version (runs pin theirs, so none sees them):
        # the final entry then only makes the version current.
        for t in body.tasks:
            tspec = self._internal(head.header, t)
            self._put(tspec, head.version, now, enabled=False, next_fire_ms=0)
        chunk = pb.WorkflowSpec(tasks=body.tasks)
        store.put(
            keys.stage_chunk_key(body.workflow, head.chunks), chunk.SerializeToString(deterministic=True)
        )
        head.chunks += 1
        head.staged_tasks += len(body.tasks)
        store.put(keys.stage_key(body.workflow), head.SerializeToString(deterministic=True))
        return pb.CommandResult(ok=True, accounted=len(body.tasks)), ()

    def _staged_spec(self, body: pb.ApplyWorkflow) -> pb.WorkflowSpec:
        """The workflow ``body`` names, assembled from its stage (raises if the stage is not
        complete, or was made for other workflow fields)."""
        name = body.spec.name
        raw = self.book.host.store.get(keys.stage_key(name))
        head = pb.WorkflowStage.FromString(raw) if raw is not None else None
        if head is None or head.stage != body.stage:
            raise Conflict(f"workflow {name!r} has no stage {body.stage!r} (restage it)")
        if head.staged_tasks != len(head.names) or head.staged_tasks != body.staged_tasks:
            raise Conflict(f"stage {body.stage!r} holds {head.staged_tasks} of {body.staged_tasks} tasks")
        if body.spec.tasks or canonical(body.spec) != canonical(head.header):
            raise InvalidSpec("spec", "differs from the staged workflow's fields")
        current = self.book.workflows.get(name)
        if head.version != (current.version + 1 if current else 1):
            raise Conflict(f"workflow {name!r} changed while staged (restage it)")
        spec = pb.WorkflowSpec()
        spec.CopyFrom(head.header)
        for chunk in range(head.chunks):
            data = self.book.host.store.get(keys.stage_chunk_key(name, chunk))
            if data is None:
                raise Conflict(f"stage {body.stage!r} lost chunk {chunk} (restage it)")
            spec.MergeFromString(data)  # appends the chunk's tasks
        return spec

    def drop_stage(self, name: str) -> None:
        raw = self.book.host.store.get(keys.stage_key(name))
        if raw is None:
            return
        for chunk in range(pb.WorkflowStage.FromString(raw).chunks):
            self.book.host.store.delete(keys.stage_chunk_key(name, chunk))
        self.book.host.store.delete(keys.stage_key(name))

    def apply_workflow(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        body = cmd.apply_workflow
        spec = self._staged_spec(body) if body.stage else body.spec
        # Structure only: the leader validated the schedule (cron + time zone) against its tz
        # database before proposing; apply must not consult tzdata, which may differ per host.
        unscheduled = pb.WorkflowSpec()
        unscheduled.CopyFrom(spec)
        unscheduled.ClearField("schedule")
        dag: Dag | None = None
        if body.stage:
            # Each task was checked when its chunk was staged: only what spans tasks is left,
            # and compiling finds any cycle (then checked again, for a message naming it).
            names = [t.name for t in spec.tasks]
            raise_problems(graph_problems(unscheduled, cycles=False), spec, names)
            try:
                dag = compile_dag(unscheduled)
            except ValueError as exc:
                raise_problems(graph_problems(unscheduled), spec, names)
                raise InvalidSpec("tasks", str(exc)) from None
        else:
            validate_workflow(unscheduled)
        name = spec.name
        if self.book.host.task_state(name) is not None:
            raise Conflict(f"{name!r} is the name of a task; a workflow needs its own name")
        if upstreams(spec):
            check_upstreams(spec, {n: w.spec for n, w in self.book.workflows.items() if n != name})
        wf = self.book.workflows.get(name)
        at = wf.version if wf is not None else 0
        if body.expected_version and at != body.expected_version:
            raise Conflict(workflow_version_conflict(name, at, body.expected_version))
        # A staged definition equal to the current one still makes a version (its chunks wrote
        # the internal tasks at that version); the leader does not stage an unchanged one.
        if wf is not None and not body.stage and canonical(wf.spec) == canonical(spec):
            return pb.CommandResult(ok=True, workflow=self.book.record(wf), changed=False), ()
        trig_name = trigger_name(name)
        trig = self.book.host.task_state(trig_name)
        has_schedule = bool(spec.schedule.expr)
        # Check everything that can refuse before mutating anything.
        if has_schedule:
            check_next_fire(body.next_fire_ms, max(trig.watermark_ms if trig else 0, now))
            schedule = codec.trigger_from_pb(pb.Trigger(cron=spec.schedule))  # its structure
        if trig is not None:
            check_nothing_due(trig, now)
        zone = stamped_zone(spec, body)
        version = wf.version + 1 if wf is not None else 1
        new = WorkflowState(spec, version, dag)
        if wf is not None:
            new.created_ms, new.runs_total = wf.created_ms, wf.runs_total
            new.active_runs, new.running_tasks, new.kept_runs = wf.active_runs, wf.running_tasks, wf.kept_runs
            new.paused = wf.paused  # a new version of a paused workflow stays paused
            new.last_success_ms, new.last_success_run = wf.last_success_ms, wf.last_success_run
        else:
            new.created_ms = now
        new.updated_ms = now
        new.gates_free_slots = body.gates_free_slots
        self.book.workflows[name] = new
        store = self.book.host.store
        store.put(keys.workflow_version_key(name, version), canonical(spec))
        if zone is not None:  # with the version: runs pin versions
            zrec = pb.WorkflowZone(zone=zone.name, transition_ms=zone.transitions_ms, offset_s=zone.offsets_s)
            store.put(keys.workflow_zone_key(name, version), zrec.SerializeToString())
            self.book.remember_zone(name, version, zone)
        # The internal tasks: one per workflow task, at the workflow's version (a staged
        # workflow's chunks wrote them already).
        if not body.stage:
            for t in spec.tasks:
                self._put(self._internal(spec, t), version, now, enabled=False, next_fire_ms=0)
        effects: list[Effect] = []
        if has_schedule:
            tspec = internal_spec(
                trig_name,
                trigger=schedule,
                command="",
                handler=TRIGGER_HANDLER,
                misfire=codec.MISFIRE_FROM_PB[spec.misfire],
                overlap=codec.OVERLAP_FROM_PB[spec.overlap],
                owner=spec.owner,
                namespace=spec.namespace or "default",
                exclude=tuple(spec.exclude),
            )
            st = self._put(tspec, version, now, enabled=not new.paused, next_fire_ms=body.next_fire_ms)
            effects.append(TaskArmed(st.spec.name, st.version, st.next_fire_ms if st.enabled else 0))
        elif trig is not None:
            # The schedule was removed: the trigger stops (its history stays with the workflow).
            trig.enabled = False
            trig.next_fire_ms = 0
            trig.updated_ms = now
            self.book.host.put_task(trig)
            effects.append(TaskArmed(trig.spec.name, trig.version, 0))
        self.book.save(new)
        if body.stage:
            self.drop_stage(name)
        return pb.CommandResult(ok=True, workflow=self.book.record(new), changed=True), tuple(effects)

    @staticmethod
    def _internal(spec: pb.WorkflowSpec, t: pb.WorkflowTaskSpec) -> TaskSpec:
        """The internal task that runs workflow task ``t`` of ``spec``."""
        return internal_spec(
            task_name(spec.name, t.name),
            trigger=codec.trigger_from_pb(pb.Trigger(manual=pb.ManualTrigger())),
            command=t.command,
            handler=t.handler,
            shards=t.shards or 1,
            max_retries=t.max_retries,
            timeout_ms=t.timeout_ms,
            priority=t.priority,
            locks=codec.locks_from_pb(t.locks),
            owner=spec.owner,
            namespace=spec.namespace or "default",
            description=t.description,
            resource_cpu=t.resource_cpu,
            resource_memory_mb=t.resource_memory_mb,
            runner=Runner.PYTHON if t.runner == "python" else Runner.SHELL,
            emits=tuple(t.emits),
            # Issue 29: placement reads retry_elsewhere here; the retry timing is read from the
            # workflow version a run is pinned to. The task runs are kept like the workflow's.
            retry_delays_ms=tuple(t.retry_delays_ms),
            retry_backoff=codec.retry_backoff_from_pb(t),
            retry_elsewhere=not t.retry_same_executor,
            keep_runs=spec.keep_runs,
            keep_for_ms=spec.keep_for_ms,
            pool=t.pool,
        )

    def _put(self, spec: TaskSpec, version: int, now: int, *, enabled: bool, next_fire_ms: int) -> TaskState:
        st = self.book.host.task_state(spec.name)
        pb_spec = codec.spec_to_pb(spec)
        pb_spec.name = spec.name
        if st is None:
            st = TaskState(spec, spec_bytes(pb_spec))
            st.created_ms = now
            st.watermark_ms = now
            self.book.host.add_task(st)
        else:
            st.spec = spec
            st.spec_bytes = spec_bytes(pb_spec)
            st.run_template = st.fire_template = None
            st.watermark_ms = max(st.watermark_ms, now)
        st.version = version
        st.enabled = enabled
        st.updated_ms = now
        st.next_fire_ms = next_fire_ms
        self.book.host.put_task(st)
        self.book.host.put_version(st)
        return st

    def set_paused(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        """Pause or resume the workflow's schedule: its trigger task is disabled or enabled, as
        ``task disable|enable`` does to a task (a resume fires from now on: nothing owed for the
        paused time). Runs in flight, manual runs and backfills are not affected. Asking for the
        state it is in changes nothing (``changed`` false)."""
        body = cmd.set_workflow_paused
        wf = self.book.workflow_named(body.workflow)
        if wf.paused == body.paused:
            return pb.CommandResult(ok=True, workflow=self.book.record(wf), changed=False), ()
        trig = self.book.host.task_state(trigger_name(wf.spec.name))
        effects: list[Effect] = []
        if trig is not None and wf.spec.schedule.expr:
            if body.paused:
                check_nothing_due(trig, now)
                trig.enabled = False
            else:
                check_next_fire(body.next_fire_ms, max(trig.watermark_ms, now))
                trig.enabled = True
                # Fires that fell due while paused are not owed: accounting starts from now.
                trig.watermark_ms = max(trig.watermark_ms, now)
                trig.next_fire_ms = body.next_fire_ms
            trig.updated_ms = now
            self.book.host.put_task(trig)
            effects.append(TaskArmed(trig.spec.name, trig.version, trig.next_fire_ms if trig.enabled else 0))
        wf.paused = body.paused
        wf.updated_ms = now
        self.book.save(wf)
        return pb.CommandResult(ok=True, workflow=self.book.record(wf), changed=True), tuple(effects)


def stamped_zone(spec: pb.WorkflowSpec, body: pb.ApplyWorkflow) -> Zone | None:
    """The zone offsets the leader stamped for wall-clock not_before gates (None when no task has
    one). Raises InvalidSpec when they are needed but missing or malformed."""
    if not any(is_wall_clock(t.not_before) for t in spec.tasks):
        return None
    if not body.zone_offset_s:
        raise InvalidSpec("not_before", "a wall-clock not_before needs the zone offsets the leader stamps")
    return Zone.build(spec.schedule.timezone or "UTC", body.zone_transition_ms, body.zone_offset_s)
