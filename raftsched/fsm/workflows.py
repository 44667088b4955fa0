"""Workflow runs inside the replicated state machine: starting them (scheduled, manual, by an
event, as a backfill), moving their tasks, settling them, and the operator's run operations.

Every workflow task runs as an ordinary run of its internal task (:mod:`raftsched.fsm.workflow_model`),
so it gets what a task gets: shards, leases, retries with backoff, timeouts, fencing, executor
dedupe and commit-before-dispatch; a scheduled workflow's trigger task fires through the leader's
timing wheel, misfire policy, DST rules and fire accounting unchanged. The definitions and their
versions are :mod:`raftsched.fsm.workflow_defs`; dependencies on other workflows' runs are
:mod:`raftsched.fsm.crossdeps`.

The :class:`WorkflowBook` tracks the runs (states, waiting counters, timelines — the pure
transitions are in :mod:`raftsched.workflow.run`) and moves READY tasks to RUNNING as the
parallelism limits allow. Like the rest of the FSM it is deterministic: no clock, no IO beyond
the injected store, and every choice (which READY task starts first) follows stored state only.
"""

from __future__ import annotations

import heapq
import json
from collections import OrderedDict
from collections.abc import Iterable
from datetime import UTC, datetime, timedelta

from raftsched.abc import StoreReader
from raftsched.errors import Conflict, InvalidSpec, NotFound, TemplateError
from raftsched.fsm import keys
from raftsched.fsm.alerts import BACKFILL_FAILED, FRESHNESS, SLA_MISSED, WORKFLOW_RUN_FAILED
from raftsched.fsm.crossdeps import CrossDeps, upstreams
from raftsched.fsm.effects import AttemptReady, Effect, TaskArmed
from raftsched.fsm.records import AGE_PRUNE_EVERY, TaskState, keeps
from raftsched.fsm.workflow_defs import WorkflowDefinitions
from raftsched.fsm.workflow_model import (
    DEFAULT_BACKFILL_SHARE,
    MAX_BACKFILL_RUNS,
    SEP,
    TERMINAL_RUN,
    TaskHost,
    WorkflowState,
    split_internal,
    task_name,
    trigger_name,
)
from raftsched.model import validate_params
from raftsched.timing import jitter, sla
from raftsched.timing.gates import Zone, gate_ms, is_wall_clock
from raftsched.v1 import log_pb2 as pb
from raftsched.workflow import run as wfrun
from raftsched.workflow.dag import Dag, compile_dag
from raftsched.workflow.template import TemplateContext, render, render_params_json

RECENT_RUNS_KEPT = 4096  # finished runs kept in memory for readers (see WorkflowBook.recent)


class WorkflowBook:
    """The workflow part of the state machine (same thread, same lock, same store as its host)."""

    def __init__(self, host: TaskHost) -> None:
        self.host = host
        self.workflows: dict[str, WorkflowState] = {}
        self.runs: dict[str, pb.WorkflowRun] = {}  # active workflow runs
        self.running: dict[str, int] = {}  # active run id -> its tasks RUNNING (max_parallel_per_run)
        # READY tasks waiting for a parallelism slot, per workflow: (logical, run id, task index).
        # Started in that order (oldest logical time first): a pure function of stored state.
        self.ready: dict[str, set[tuple[int, str, int]]] = {}
        self._versions: dict[tuple[str, int], tuple[pb.WorkflowSpec, Dag]] = {}
        self._zones: dict[tuple[str, int], Zone | None] = {}  # read from the store on first use
        # Recently finished runs, for readers on other threads: they read the store through a
        # reader (committed data only), which may not hold a run that finished a moment ago.
        # A read cache only: nothing replicated depends on it.
        self.recent: OrderedDict[str, pb.WorkflowRun] = OrderedDict()
        self._enqueued = 0  # READY entries ever queued (tells _start_ready a pass added some)
        # Runs and workflows changed by the command being applied: written once when it ends
        # (flush), not once per task transition - a 10,000-task run is a big message.
        self._dirty_runs: dict[str, pb.WorkflowRun] = {}
        self._dirty_workflows: dict[str, WorkflowState] = {}
        # The dirty runs by (workflow, logical time): cross-workflow edges look runs up by that.
        self._dirty_at: dict[tuple[str, int], set[str]] = {}
        self.deps = CrossDeps(self)  # cross-workflow dependencies (issue 28 §1)
        self.defs = WorkflowDefinitions(self)  # applying, staging and pausing workflows
        # (gate, workflow) of READY tasks held by their earliest start outside the parallelism
        # limits (workflows with gates_free_slots): WorkflowWaitsDue starts them when it has
        # come. Derived (load() finds them again); stale entries are harmless.
        self.gates: list[tuple[int, str]] = []

    # -- loading ---------------------------------------------------------------------------------

    def load(self) -> None:
        self.workflows.clear()
        self.runs.clear()
        self.running.clear()
        self.ready.clear()
        self.gates.clear()
        self._versions.clear()
        self._zones.clear()
        self.recent.clear()
        store = self.host.store
        for _, value in store.scan(keys.WORKFLOW, keys.WORKFLOW + keys.END):
            rec = pb.WorkflowRecord.FromString(value)
            wf = WorkflowState(rec.spec, rec.version)
            wf.created_ms, wf.updated_ms = rec.created_ms, rec.updated_ms
            wf.runs_total, wf.active_runs, wf.running_tasks = (
                rec.runs_total,
                rec.active_runs,
                rec.running_tasks,
            )
            wf.paused = rec.paused
            wf.last_success_ms, wf.last_success_run = rec.last_success_ms, rec.last_success_run
            wf.gates_free_slots = rec.gates_free_slots
            self.workflows[wf.spec.name] = wf
        for _, value in store.scan(keys.WORKFLOW_RUN, keys.WORKFLOW_RUN + keys.END):
            wr = pb.WorkflowRun.FromString(value)
            owner = self.workflows.get(wr.workflow)
            if owner is None:
                continue
            if wr.state in TERMINAL_RUN:
                owner.kept_runs += 1
                continue
            self.runs[wr.run_id] = wr
            self.running[wr.run_id] = sum(1 for t in wr.tasks if t.state == pb.TASK_RUNNING)
            for i, t in enumerate(wr.tasks):
                if t.state == pb.TASK_READY:
                    self.ready.setdefault(wr.workflow, set()).add((wr.logical_ms, wr.run_id, i))
                    if t.not_before_ms:
                        self.gates.append((t.not_before_ms, wr.workflow))
        heapq.heapify(self.gates)
        self.deps.load()

    # -- versions ----------------------------------------------------------------------------------

    def version(
        self, workflow: str, version: int, *, reader: StoreReader | None = None
    ) -> tuple[pb.WorkflowSpec, Dag] | None:
        """A version's spec and DAG. Threads other than apply's pass an open ``reader`` (committed
        data, never the apply thread's open batch) and hold the state lock."""
        wf = self.workflows.get(workflow)
        if wf is None:
            return None
        if version in (0, wf.version):
            return wf.spec, wf.dag
        cached = self._versions.get((workflow, version))
        if cached is None:
            vkey = keys.workflow_version_key(workflow, version)
            raw = reader.get(vkey) if reader is not None else self.host.store.get(vkey)
            if raw is None:
                return None
            spec = pb.WorkflowSpec.FromString(raw)
            cached = self._versions[(workflow, version)] = (spec, compile_dag(spec))
        return cached

    def _zone(self, workflow: str, version: int) -> Zone | None:
        """The zone offsets stored with a version whose tasks have a wall-clock not_before."""
        key = (workflow, version)
        if key not in self._zones:
            raw = self.host.store.get(keys.workflow_zone_key(workflow, version))
            z = pb.WorkflowZone.FromString(raw) if raw is not None else None
            self._zones[key] = Zone(z.zone, tuple(z.transition_ms), tuple(z.offset_s)) if z else None
        return self._zones[key]

    def task_spec(self, run: pb.Run) -> pb.WorkflowTaskSpec | None:
        """The workflow task spec a task run executes (its pinned version)."""
        workflow, task = split_internal(run.task)
        got = self.version(workflow, run.task_version)
        if got is None:
            return None
        spec, dag = got
        idx = dag.index.get(task)
        return spec.tasks[idx] if idx is not None else None

    def backfill_share(self, run: pb.Run) -> int:
        if not run.backfill:
            return 0
        if run.backfill_id:  # a plain task's backfill (raftsched.fsm.taskbackfill)
            return DEFAULT_BACKFILL_SHARE
        wf = self.workflows.get(split_internal(run.task)[0])
        return wf.backfill_share if wf is not None else DEFAULT_BACKFILL_SHARE

    # -- commands ----------------------------------------------------------------------------------

    def start_run_cmd(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        body = cmd.start_workflow_run
        wf = self.workflow_named(body.workflow)
        if body.params_json:
            validate_params(body.params_json, "params")
        seq = self.host.next_sequence()
        logical = body.logical_ms or now
        run_id = f"{wf.spec.name}@{logical}~m{seq}"
        effects: list[Effect] = []
        wr = self._start(
            wf, run_id, logical, now, cmd.epoch, effects, manual=True, params_json=body.params_json
        )
        return pb.CommandResult(ok=True, workflow_run=wr), tuple(effects)

    def start_for_event(
        self, workflow: str, event: pb.EventRecord, logical: int, now: int, epoch: int, effects: list[Effect]
    ) -> str:
        """An accepted event the workflow subscribes to (``on_event``): start one run of its
        current version at ``logical``, the event in its templates (raftsched.fsm.events)."""
        wf = self.workflows[workflow]
        run_id = f"{workflow}@{logical}~m{self.host.next_sequence()}"
        self._start(wf, run_id, logical, now, epoch, effects, manual=True, event=event)
        return run_id

    def start_scheduled(
        self, st: TaskState, nominal: int, now: int, epoch: int, effects: list[Effect]
    ) -> str:
        """A fire of a workflow's trigger task: start a workflow run for ``nominal``."""
        wf = self.workflows.get(split_internal(st.spec.name)[0])
        if wf is None:  # unreachable: the trigger task goes with its workflow
            return ""
        run_id = f"{wf.spec.name}@{nominal}"
        st.active_runs += 1
        st.runs_total += 1
        self._start(wf, run_id, nominal, now, epoch, effects)
        return run_id

    def start_backfill(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        body = cmd.start_backfill
        wf = self.workflow_named(body.workflow)
        times = sorted(set(body.logical_ms))
        if not times:
            raise InvalidSpec("backfill", "the date range holds no logical time of the workflow")
        if len(times) > MAX_BACKFILL_RUNS:
            raise InvalidSpec("backfill", f"{len(times)} runs, at most {MAX_BACKFILL_RUNS} per backfill")
        if body.params_json:
            validate_params(body.params_json, "params")
        seq = self.host.next_sequence()
        backfill_id = f"{wf.spec.name}~b{seq}"
        rec = pb.BackfillRecord(
            backfill_id=backfill_id,
            workflow=wf.spec.name,
            from_ms=body.from_ms or times[0],
            to_ms=body.to_ms or times[-1],
            runs_total=len(times),
            created_ms=now,
            share_pct=wf.backfill_share,
        )
        self.host.store.put(keys.backfill_key(backfill_id), rec.SerializeToString(deterministic=True))
        effects: list[Effect] = []
        for logical in times:
            run_id = f"{wf.spec.name}@{logical}~b{seq}"
            self._start(
                wf,
                run_id,
                logical,
                now,
                cmd.epoch,
                effects,
                backfill_id=backfill_id,
                params_json=body.params_json,
            )
        got = self.host.store.get(keys.backfill_key(backfill_id))
        assert got is not None
        return pb.CommandResult(ok=True, backfill=pb.BackfillRecord.FromString(got)), tuple(effects)

    def delete(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        """Delete a workflow with its versions, runs, backfills and internal tasks.

        Refused (conflict) while runs of it are active, unless ``force``: those are killed first,
        as ``workflow kill`` does (running attempts cancelled). Task runs still unfinished after
        that are left to finish, as for a deleted task."""
        body = cmd.delete_workflow
        wf = self.workflow_named(body.workflow)
        name = wf.spec.name
        dependents = sorted(n for n, w in self.workflows.items() if n != name and name in upstreams(w.spec))
        if dependents and not body.force:
            raise Conflict(
                f"workflow {name!r} is an upstream of {', '.join(dependents)} (their tasks depend on its "
                "runs): change or delete them first, or delete with force"
            )
        active = sorted(run_id for run_id, wr in self.runs.items() if wr.workflow == name)
        if active and not body.force:
            shown = ", ".join(active[:3]) + (f" and {len(active) - 3} more" if len(active) > 3 else "")
            raise Conflict(
                f"workflow {name!r} has {len(active)} active run(s) ({shown}): "
                "kill them first, or delete with force"
            )
        effects: list[Effect] = []
        for run_id in active:
            wr = self.runs[run_id]
            for running in wfrun.kill(wr, now, body.reason or "workflow deleted"):
                self._cancel_task_run(wr, running, now, cmd.epoch, effects)
            self._drop_ready(wr)
            self._settle(wr, now, cmd.epoch, effects)
        record = self.record(wf)
        self.flush()  # what the kills changed is written before the deletes below
        store = self.host.store
        store.delete(keys.workflow_key(name))
        for lo, hi in (
            (
                keys.WORKFLOW_VERSION + name.encode() + b"\x00",
                keys.WORKFLOW_VERSION + name.encode() + b"\x01",
            ),
            (keys.WORKFLOW_ZONE + name.encode() + b"\x00", keys.WORKFLOW_ZONE + name.encode() + b"\x01"),
            (keys.per_task_prefix(keys.WORKFLOW_RUN, name), keys.per_task_end(keys.WORKFLOW_RUN, name)),
            (keys.BACKFILL + f"{name}~b".encode(), keys.BACKFILL + f"{name}~b".encode() + keys.END),
        ):
            for k, _ in store.scan(lo, hi):
                store.delete(k)
        for internal in self.host.task_names(name + SEP):
            st = self.host.task_state(internal)
            self.host.remove_task(internal)
            if st is not None:
                effects.append(TaskArmed(internal, st.version, 0))
        del self.workflows[name]
        self.ready.pop(name, None)
        for version_key in [k for k in self._versions if k[0] == name]:
            del self._versions[version_key]
        for version_key in [k for k in self._zones if k[0] == name]:
            del self._zones[version_key]
        for run_id in [r for r, wr in self.recent.items() if wr.workflow == name]:
            del self.recent[run_id]
        return pb.CommandResult(ok=True, workflow=record, runs_killed=len(active)), tuple(effects)

    def run_op(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        body = cmd.workflow_run_op
        # The recent cache holds the very object stored when the run finished (same content on
        # every replica whether or not it is cached); mutating it keeps readers current.
        wr = self.runs.get(body.run_id) or self.recent.get(body.run_id) or self.stored_run(body.run_id)
        if wr is None:
            raise NotFound(f"workflow run {body.run_id!r} does not exist (or its history was pruned)")
        got = self.version(wr.workflow, wr.version)
        if got is None:
            raise NotFound(f"workflow {wr.workflow!r} version {wr.version} is no longer stored")
        dag = got[1]
        effects: list[Effect] = []
        if body.op == pb.WorkflowRunOp.KILL:
            if wr.state in TERMINAL_RUN:
                raise Conflict(f"workflow run {wr.run_id!r} already finished ({_run_state(wr)})")
            for running in wfrun.kill(wr, now, body.reason or "killed by an operator"):
                self._cancel_task_run(wr, running, now, cmd.epoch, effects)
            self._drop_ready(wr)
            self._settle(wr, now, cmd.epoch, effects)
            return pb.CommandResult(ok=True, workflow_run=wr), tuple(effects)
        idx = dag.index.get(body.task)
        if idx is None:
            raise NotFound(f"task {body.task!r} is not part of workflow {wr.workflow!r} version {wr.version}")
        was_active = wr.run_id in self.runs
        previous = 0 if was_active else int(wr.state)
        # Every READY task of the run is (re)queued below, so the READY lists returned are not needed.
        if body.op == pb.WorkflowRunOp.RERUN:
            wfrun.rerun(
                dag, wr, idx, now, body.reason or "rerun requested", redecide_external=body.redecide_external
            )
        elif body.op == pb.WorkflowRunOp.MARK_SUCCESS:
            wfrun.mark_success(dag, wr, idx, now, body.reason or "marked succeeded by an operator")
            if body.emit:  # downstream teams wait on the data: a task marked by hand emits too
                wspec, tspec = got[0], got[0].tasks[idx]
                if tspec.emits:
                    self.host.emit_task_events(
                        task_name(wr.workflow, tspec.name),
                        tuple(tspec.emits),
                        wspec.namespace or "default",
                        wr.logical_ms,
                        now,
                        cmd.epoch,
                        effects,
                    )
        else:
            raise InvalidSpec("op", f"unknown workflow run operation {body.op}")
        if not was_active and wr.state not in TERMINAL_RUN:
            self._reactivate(wr, previous)
        elif not was_active and wr.backfill_id and wr.state != previous:
            # A finished backfill run changed outcome without running again (mark-success).
            self._backfill_progress(wr, now, undo=previous)
            self._backfill_progress(wr, now)
        if wr.run_id in self.runs:
            self.deps.register(wr, now)  # edges a rerun set waiting again (READYs queued below)
        self._drop_ready(wr)
        self._enqueue(wr, (i for i, t in enumerate(wr.tasks) if t.state == pb.TASK_READY))
        self._start_ready(wr.workflow, now, cmd.epoch, effects)
        self._settle(wr, now, cmd.epoch, effects)
        return pb.CommandResult(ok=True, workflow_run=wr), tuple(effects)

    # -- hooks from the task-run machinery -----------------------------------------------------------

    def task_run_assigned(self, run: pb.Run, shard: pb.ShardAttempt, now: int) -> None:
        wr = self.runs.get(run.workflow_run)
        idx = self._task_index(wr, run)
        if wr is None or idx is None:
            return
        wfrun.note(
            wr,
            idx,
            pb.TASK_RUNNING,
            now,
            f"attempt {shard.attempt} of shard {shard.shard} started on executor {shard.executor}",
        )
        self._put_run(wr)

    def task_run_retrying(self, run: pb.Run, shard: pb.ShardAttempt, error: str, now: int) -> None:
        wr = self.runs.get(run.workflow_run)
        idx = self._task_index(wr, run)
        if wr is None or idx is None:
            return
        wfrun.note(wr, idx, pb.TASK_FAILED, now, f"attempt {shard.attempt - 1} failed: {error or 'failed'}")
        wfrun.note(wr, idx, pb.TASK_READY, now, f"retry {shard.attempt} not before {shard.not_before_ms}")
        self._put_run(wr)

    def task_run_finished(self, run: pb.Run, now: int, epoch: int, effects: list[Effect]) -> None:
        wr = self.runs.get(run.workflow_run)
        idx = self._task_index(wr, run)
        if wr is None or idx is None:
            return
        failed = [s for s in run.shards if s.state != pb.SUCCEEDED]
        if not failed:
            outcome, reason = pb.TASK_SUCCESS, ""
        elif any(s.timed_out for s in failed):
            outcome, reason = pb.TASK_TIMEOUT, failed[0].error or "timed out"
        else:
            outcome, reason = pb.TASK_FAILED, failed[0].error or f"exit code {failed[0].exit_code}"
        self._task_stopped(wr)
        ready = wfrun.finish(self._dag(wr), wr, idx, outcome, now, reason)
        self._enqueue(wr, ready)
        self._start_ready(wr.workflow, now, epoch, effects)
        self._settle(wr, now, epoch, effects)

    # -- what the cross-workflow dependencies (raftsched.fsm.crossdeps) call back ----------------

    def dag_of(self, wr: pb.WorkflowRun) -> Dag:
        """The DAG of the version ``wr`` executes."""
        return self._dag(wr)

    def queue_ready(self, wr: pb.WorkflowRun, indices: Iterable[int]) -> None:
        self._enqueue(wr, indices)

    def start_ready(self, workflow: str, now: int, epoch: int, effects: list[Effect]) -> None:
        self._start_ready(workflow, now, epoch, effects)

    def settle(self, wr: pb.WorkflowRun, now: int, epoch: int, effects: list[Effect]) -> None:
        self._settle(wr, now, epoch, effects)

    def put_run(self, wr: pb.WorkflowRun) -> None:
        self._put_run(wr)

    def runs_at(self, workflow: str, logical: int) -> list[pb.WorkflowRun]:
        """Every kept run of ``workflow`` at logical time ``logical``, in run id order: the stored
        ones, and those the command being applied changed (written when it ends)."""
        if workflow not in self.workflows or logical < 0:
            return []
        found: dict[str, pb.WorkflowRun] = {}
        lo = keys.time_key(keys.WORKFLOW_RUN, workflow, logical)
        for k, v in self.host.store.scan(lo, lo + b"\x7f"):  # "~" (0x7e) starts every suffix
            run_id = keys.run_id_from_key(keys.WORKFLOW_RUN, k)
            found[run_id] = self.runs.get(run_id) or pb.WorkflowRun.FromString(v)
        for run_id in self._dirty_at.get((workflow, logical), ()):
            wr = self._dirty_runs.get(run_id)
            if wr is not None:
                found[run_id] = wr
        return [found[r] for r in sorted(found)]

    def raise_late(self, alert: pb.AlertRecord, now: int) -> None:
        self.host.raise_event(alert, now)

    def was_raised(self, dedupe: str) -> bool:
        return self.host.store.get(keys.alert_dedupe_key(dedupe)) is not None

    def waits_due(self, cmd: pb.Command, now: int) -> tuple[pb.CommandResult, tuple[Effect, ...]]:
        """``WorkflowWaitsDue``: act on the cross-workflow deadlines that have come at ``now``."""
        effects: list[Effect] = []
        acted = self.deps.expire(now, cmd.epoch, effects)
        due: set[str] = set()
        while self.gates and self.gates[0][0] <= now:
            due.add(heapq.heappop(self.gates)[1])
        for workflow in sorted(due):
            if workflow in self.workflows:
                self._start_ready(workflow, now, cmd.epoch, effects)
        return pb.CommandResult(ok=True, accounted=acted), tuple(effects)

    def next_gate_ms(self) -> int:
        """The earliest gate of a READY task held outside the parallelism limits (0: none)."""
        return self.gates[0][0] if self.gates else 0

    def _held(self, workflow: str, entry: tuple[int, str, int], now: int) -> bool:
        """Whether READY ``entry`` waits for its earliest start outside the parallelism limits
        (workflow stamped gates_free_slots): it stays READY, takes no place, and its gate is
        recorded (``not_before_ms``, a timeline entry, the gates heap) once."""
        if not self.workflows[workflow].gates_free_slots:
            return False
        _, run_id, idx = entry
        wr = self.runs.get(run_id)
        if wr is None or wr.tasks[idx].state != pb.TASK_READY:
            return False
        got = self.version(workflow, wr.version)
        if got is None:
            return False
        spec, _ = got
        tspec = spec.tasks[idx]
        zone = self._zone(wr.workflow, wr.version) if is_wall_clock(tspec.not_before) else None
        gate = _gate_ms(spec, tspec, wr, zone)
        if gate <= now:
            return False
        task = wr.tasks[idx]
        if task.not_before_ms != gate:
            task.not_before_ms = gate
            wfrun.note(wr, idx, pb.TASK_READY, now, gate_reason(gate) + "; takes no parallelism place")
            heapq.heappush(self.gates, (gate, workflow))
            self._put_run(wr)
        return True

    # -- internals ----------------------------------------------------------------------------------

    def workflow_named(self, name: str) -> WorkflowState:
        wf = self.workflows.get(name)
        if wf is None:
            raise NotFound(f"workflow {name!r} does not exist")
        return wf

    def _dag(self, wr: pb.WorkflowRun) -> Dag:
        got = self.version(wr.workflow, wr.version)
        assert got is not None, f"workflow {wr.workflow} version {wr.version} missing"
        return got[1]

    def _task_index(self, wr: pb.WorkflowRun | None, run: pb.Run) -> int | None:
        if wr is None:
            return None
        idx = self._dag(wr).index.get(split_internal(run.task)[1])
        if idx is None or wr.tasks[idx].run_id != run.run_id or wr.tasks[idx].state != pb.TASK_RUNNING:
            return None  # superseded (killed, rerun, marked): this task run no longer speaks for it
        return idx

    def _start(
        self,
        wf: WorkflowState,
        run_id: str,
        logical: int,
        now: int,
        epoch: int,
        effects: list[Effect],
        *,
        manual: bool = False,
        backfill_id: str = "",
        params_json: str = "",
        event: pb.EventRecord | None = None,
    ) -> pb.WorkflowRun:
        wr = pb.WorkflowRun(
            run_id=run_id,
            workflow=wf.spec.name,
            version=wf.version,
            logical_ms=logical,
            created_ms=now,
            manual=manual,
            backfill_id=backfill_id,
            params_json=params_json,
            epoch=epoch,
        )
        if event is not None:
            wr.event_name, wr.event_key, wr.event_payload_json = event.name, event.key, event.payload_json
        ready = wfrun.start(wf.dag, wr, now)
        wf.runs_total += 1
        self._reactivate(wr)
        if wf.dag.external:
            ready += self.deps.register(wr, now)
        self._enqueue(wr, ready)
        self._start_ready(wf.spec.name, now, epoch, effects)
        self._settle(wr, now, epoch, effects)
        return wr

    def _reactivate(self, wr: pb.WorkflowRun, previous: int = 0) -> None:
        """(Re)enter the active set: a new run, or a finished one a rerun brought back
        (``previous``: the state it had finished in, whose accounting is undone)."""
        wf = self.workflows[wr.workflow]
        if wr.run_id not in self.runs:
            self.runs[wr.run_id] = wr
            self.recent.pop(wr.run_id, None)
            self.running[wr.run_id] = 0
            wf.active_runs += 1
            if previous:
                wf.kept_runs = max(0, wf.kept_runs - 1)
                if not wr.manual and not wr.backfill_id:
                    trig = self.host.task_state(trigger_name(wr.workflow))
                    if trig is not None:  # it counts for overlap again
                        trig.active_runs += 1
                        self.host.put_task(trig)
                if wr.backfill_id:
                    self._backfill_progress(wr, 0, undo=previous)
            wr.finished_ms = 0
            self.save(wf)

    def _enqueue(self, wr: pb.WorkflowRun, indices: Iterable[int]) -> None:
        bucket = self.ready.setdefault(wr.workflow, set())
        for i in indices:
            bucket.add((wr.logical_ms, wr.run_id, i))
            self._enqueued += 1

    def _drop_ready(self, wr: pb.WorkflowRun) -> None:
        bucket = self.ready.get(wr.workflow)
        if bucket:
            for entry in [e for e in bucket if e[1] == wr.run_id]:
                bucket.discard(entry)

    def _start_ready(self, workflow: str, now: int, epoch: int, effects: list[Effect]) -> None:
        """Move READY tasks to RUNNING, oldest logical time first, as the limits allow."""
        wf = self.workflows[workflow]
        bucket = self.ready.get(workflow)
        while bucket:
            mark = self._enqueued
            for entry in sorted(bucket):
                if self._held(workflow, entry, now):
                    continue  # stays queued; WorkflowWaitsDue starts it when its time has come
                if wf.spec.max_parallel and wf.running_tasks >= wf.spec.max_parallel:
                    return
                _, run_id, idx = entry
                wr = self.runs.get(run_id)
                if wr is None or wr.tasks[idx].state != pb.TASK_READY:
                    bucket.discard(entry)
                    continue
                got = self.version(workflow, wr.version)
                assert got is not None
                spec, dag = got
                if spec.max_parallel_per_run and self.running.get(run_id, 0) >= spec.max_parallel_per_run:
                    continue
                bucket.discard(entry)
                self._launch(wf, wr, spec, dag, idx, now, epoch, effects)
            if self._enqueued == mark:
                return  # else a task that failed to render readied others: one more pass

    def _launch(
        self,
        wf: WorkflowState,
        wr: pb.WorkflowRun,
        spec: pb.WorkflowSpec,
        dag: Dag,
        idx: int,
        now: int,
        epoch: int,
        effects: list[Effect],
    ) -> None:
        """READY → RUNNING: render the templates and create the task run (or fail the task)."""
        tspec = spec.tasks[idx]
        try:
            params = render_params_json(spec.params_json, tspec.params_json, wr.params_json)
            ctx = TemplateContext(
                logical_ms=wr.logical_ms,
                run_id=wr.run_id,
                params=params,
                event_name=wr.event_name,
                event_key=wr.event_key,
                event_payload=TemplateContext.payload_of(wr.event_payload_json) if wr.event_name else None,
            )
            command = render(tspec.command, ctx) if tspec.command else ""
            env = {k: render(v, ctx) for k, v in sorted(tspec.env.items())}
        except (TemplateError, ValueError) as exc:
            wfrun.mark_running(wr, idx, "", now, "template rendering")
            ready = wfrun.finish(dag, wr, idx, pb.TASK_FAILED, now, f"template error: {exc}")
            self._enqueue(wr, ready)
            return
        seq = self.host.next_sequence()
        name = task_name(wr.workflow, tspec.name)
        st = self.host.task_state(name)
        assert st is not None, f"internal task {name} missing"  # stored with its workflow's version
        run_id = f"{name}@{wr.logical_ms}~m{seq}"
        run = pb.Run(
            run_id=run_id,
            task=name,
            # Runnable from now: the logical time ({{ ds }}) may lie in the future or far in the
            # past (backfill); executors never start a run before its nominal time.
            nominal_ms=now,
            task_version=wr.version,
            state=pb.PENDING,
            created_ms=now,
            epoch=epoch,
            manual=True,
            timeline=[pb.TimelineEntry(event="created", at_ms=now, reason=f"workflow run {wr.run_id}")],
            shards=[pb.ShardAttempt(shard=i, attempt=1, state=pb.PENDING) for i in range(tspec.shards or 1)],
            params_json=json.dumps(params, sort_keys=True, separators=(",", ":")) if params else "",
            command=command,
            env=env,
            workflow_run=wr.run_id,
            backfill=bool(wr.backfill_id),
        )
        zone = self._zone(wr.workflow, wr.version) if is_wall_clock(tspec.not_before) else None
        gate = _gate_ms(spec, tspec, wr, zone)
        held = gate > now
        if held:  # its attempts wait for the gate; AssignAttempts refuses one before it
            for shard in run.shards:
                shard.not_before_ms = gate
        data = run.SerializeToString(deterministic=True)
        self.host.add_run(st, run_id, data)
        if tspec.resource_cpu or tspec.resource_memory_mb or tspec.selector or st.unplaceable:
            self.host.check_placeable(st, self.host.need_for_run(run), now)
        share = wf.backfill_share if wr.backfill_id else 0
        for i in range(tspec.shards or 1):
            effects.append(AttemptReady(run_id, name, now, i, 1, epoch, gate if held else 0, share))
        wfrun.mark_running(
            wr, idx, run_id, now, gate_reason(gate) if held else "handed to the executor fleet"
        )
        if held or wr.tasks[idx].not_before_ms:
            wr.tasks[idx].not_before_ms = gate if held else 0
        self.running[wr.run_id] = self.running.get(wr.run_id, 0) + 1
        wf.running_tasks += 1

    def _task_stopped(self, wr: pb.WorkflowRun) -> None:
        wf = self.workflows[wr.workflow]
        self.running[wr.run_id] = max(0, self.running.get(wr.run_id, 0) - 1)
        wf.running_tasks = max(0, wf.running_tasks - 1)

    def _cancel_task_run(
        self, wr: pb.WorkflowRun, idx: int, now: int, epoch: int, effects: list[Effect]
    ) -> None:
        run_id = wr.tasks[idx].run_id
        self._task_stopped(wr)
        run = self.host.active_run(run_id)
        if run is None:
            return
        self.host.cancel_run(run, "workflow run killed", now, epoch, effects)

    def _settle(self, wr: pb.WorkflowRun, now: int, epoch: int, effects: list[Effect]) -> None:
        """Store the run; when it just finished, release it (counters, backfill, trigger overlap).
        Then decide the cross-workflow edges waiting on what it now decides."""
        self._settle_run(wr, now, effects)
        if self.deps.waits or wr.state in TERMINAL_RUN:
            self.deps.upstream_changed(wr, now, epoch, effects)

    def _settle_run(self, wr: pb.WorkflowRun, now: int, effects: list[Effect]) -> None:
        # wr.state is kept current by raftsched.workflow.run (hinted: no full scan per completion)
        if wr.state in TERMINAL_RUN and wr.run_id in self.runs:
            wf = self.workflows[wr.workflow]
            del self.runs[wr.run_id]
            self.running.pop(wr.run_id, None)
            self.deps.forget(wr.run_id)
            wr.finished_ms = wr.finished_ms or now
            wf.active_runs = max(0, wf.active_runs - 1)
            wf.kept_runs += 1
            if not wr.manual and not wr.backfill_id:
                trig = self.host.task_state(trigger_name(wr.workflow))
                if trig is not None:
                    trig.active_runs = max(0, trig.active_runs - 1)
                    self.host.put_task(trig)
            if wr.backfill_id:
                self._backfill_progress(wr, now)
            if wr.state == pb.WORKFLOW_SUCCESS and wf.spec.emits:
                self.host.emit_for_workflow_run(wf.spec, wr, now, effects)
            if not wr.backfill_id and sla.has_sla(wf.spec):
                self._sla_finished(wf, wr, now)
            if wr.state == pb.WORKFLOW_FAILED:
                failed = [t.name for t in wr.tasks if t.state in (pb.TASK_FAILED, pb.TASK_TIMEOUT)]
                self.host.raise_alert(
                    WORKFLOW_RUN_FAILED,
                    f"workflow run failed: {', '.join(failed) or 'a task'} failed",
                    now,
                    workflow=wr.workflow,
                    workflow_run=wr.run_id,
                    run_id=wr.run_id,
                    owner=wf.spec.owner,
                )
            self.save(wf)
            self._put_run(wr)
            self._prune(wf, now)
            self.recent[wr.run_id] = wr
            self.recent.move_to_end(wr.run_id)
            while len(self.recent) > RECENT_RUNS_KEPT:
                self.recent.popitem(last=False)
            return
        self._put_run(wr)
        if wr.run_id in self.runs:
            self.save(self.workflows[wr.workflow])

    def _sla_finished(self, wf: WorkflowState, wr: pb.WorkflowRun, now: int) -> None:
        """A run (not a backfill's) of a workflow with an SLA or freshness finished: its finish
        SLA; its success moves the freshness clock and resolves a freshness miss (see
        :mod:`raftsched.timing.sla`)."""
        spec = wf.spec
        within = spec.sla_finish_within_ms
        if within and not wr.manual:
            state = sla.workflow_finish_state(wr, within, now)
            if state != sla.MET:
                shown = pb.WorkflowRunState.Name(wr.state).removeprefix("WORKFLOW_")
                late = sla.late_text(wr.finished_ms - wr.logical_ms)
                self._sla_event(
                    wf,
                    wr,
                    pb.AlertRecord(
                        kind=SLA_MISSED,
                        dedupe=sla.finish_key(sla.workflow_key(wr.run_id)),
                        error=f"workflow run finished {shown} {late} after its logical time: "
                        f"sla.finish_within {sla.late_text(within)} {state}",
                    ),
                    now,
                )
        if wr.state != pb.WORKFLOW_SUCCESS or wr.finished_ms < wf.last_success_ms:
            return
        base = sla.freshness_base(wf.created_ms, wf.last_success_ms)
        wf.last_success_ms, wf.last_success_run = wr.finished_ms, wr.run_id
        key = sla.freshness_key(sla.workflow_key(spec.name), base)
        if spec.freshness_ms and self.was_raised(key):
            self._sla_event(
                wf,
                wr,
                pb.AlertRecord(
                    kind=FRESHNESS,
                    dedupe=key + "/resolved",
                    resolved=True,
                    error=f"workflow run {wr.run_id} succeeded: fresh again after "
                    f"{sla.late_text(wr.finished_ms - base)} without a success",
                ),
                now,
            )

    def _sla_event(self, wf: WorkflowState, wr: pb.WorkflowRun, alert: pb.AlertRecord, now: int) -> None:
        alert.workflow, alert.workflow_run, alert.run_id = wf.spec.name, wr.run_id, wr.run_id
        alert.owner, alert.namespace = wf.spec.owner, wf.spec.namespace or "default"
        self.host.raise_event(alert, now)

    def _backfill_progress(self, wr: pb.WorkflowRun, now: int, undo: int = 0) -> None:
        """Count a finished backfill run; ``undo``: un-count one that had finished in that state."""
        raw = self.host.store.get(keys.backfill_key(wr.backfill_id))
        if raw is None:
            return
        rec = pb.BackfillRecord.FromString(raw)
        if undo:
            rec.runs_finished = max(0, rec.runs_finished - 1)
            if undo != pb.WORKFLOW_SUCCESS:
                rec.runs_failed = max(0, rec.runs_failed - 1)
            rec.finished_ms = 0
        else:
            rec.runs_finished += 1
            if wr.state != pb.WORKFLOW_SUCCESS:
                rec.runs_failed += 1
            if rec.runs_finished >= rec.runs_total:
                rec.finished_ms = now
                if rec.runs_failed:
                    wf = self.workflows.get(rec.workflow)
                    self.host.raise_alert(
                        BACKFILL_FAILED,
                        f"backfill {rec.backfill_id}: {rec.runs_failed} of {rec.runs_total} runs failed",
                        now,
                        workflow=rec.workflow,
                        run_id=rec.backfill_id,
                        owner=wf.spec.owner if wf is not None else "",
                    )
        self.host.store.put(keys.backfill_key(wr.backfill_id), rec.SerializeToString(deterministic=True))

    def _prune(self, wf: WorkflowState, now: int) -> None:
        """Finished workflow runs are kept like task runs: by count and age (bounded work)."""
        retention = self.host.retention
        keep_count, keep_ms = keeps(retention, wf.spec.keep_runs, wf.spec.keep_for_ms)
        horizon = now - keep_ms
        name = wf.spec.name
        lo, hi = keys.per_task_prefix(keys.WORKFLOW_RUN, name), keys.per_task_end(keys.WORKFLOW_RUN, name)
        if wf.kept_runs <= keep_count and wf.kept_runs % AGE_PRUNE_EVERY:
            return
        limit = retention.prune_step * 2 + wf.active_runs + 1
        for k, v in self.host.store.scan(lo, hi, limit=limit):
            if keys.run_id_from_key(keys.WORKFLOW_RUN, k) in self.runs:
                continue
            wr = pb.WorkflowRun.FromString(v)
            if wr.state not in TERMINAL_RUN:
                continue
            if wf.kept_runs <= keep_count and wr.finished_ms >= horizon:
                break
            self.host.store.delete(k)
            self._dirty_runs.pop(wr.run_id, None)
            # Out of the read cache too: readers (and run_op, which looks there first) must not
            # see a pruned run that a replica restarted from a snapshot no longer has.
            self.recent.pop(wr.run_id, None)
            wf.kept_runs -= 1

    def stored_run(self, run_id: str, *, reader: StoreReader | None = None) -> pb.WorkflowRun | None:
        """The stored workflow run ``run_id``, or None. Threads other than apply's pass an open
        ``reader`` (committed data)."""
        if "@" not in run_id:
            return None
        try:
            key = keys.workflow_run_key(run_id)
        except ValueError:
            return None
        raw = reader.get(key) if reader is not None else self.host.store.get(key)
        return pb.WorkflowRun.FromString(raw) if raw is not None else None

    def _put_run(self, wr: pb.WorkflowRun) -> None:
        self._dirty_runs[wr.run_id] = wr
        self._dirty_at.setdefault((wr.workflow, wr.logical_ms), set()).add(wr.run_id)

    def flush(self) -> None:
        """Write what the command just applied changed (called at the end of every apply)."""
        if self._dirty_runs:
            for run_id, wr in sorted(self._dirty_runs.items()):
                self.host.store.put(keys.workflow_run_key(run_id), wr.SerializeToString(deterministic=True))
            self._dirty_runs.clear()
            self._dirty_at.clear()
        if self._dirty_workflows:
            for name, wf in sorted(self._dirty_workflows.items()):
                self.host.store.put(keys.workflow_key(name), wf.record_bytes())
            self._dirty_workflows.clear()

    def record(self, wf: WorkflowState) -> pb.WorkflowRecord:
        """``wf``'s record as a fresh message, with the next fire of its schedule (if enabled)."""
        rec = wf.record()
        trig = self.host.task_state(trigger_name(wf.spec.name))
        if trig is not None and trig.enabled:
            rec.next_fire_ms = trig.next_fire_ms
        return rec

    def save(self, wf: WorkflowState) -> None:
        """Write ``wf``'s record when the command being applied ends (:meth:`flush`)."""
        self._dirty_workflows[wf.spec.name] = wf

    def remember_zone(self, workflow: str, version: int, zone: Zone) -> None:
        self._zones[(workflow, version)] = zone


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def _gate_ms(
    spec: pb.WorkflowSpec, tspec: pb.WorkflowTaskSpec, wr: pb.WorkflowRun, zone: Zone | None = None
) -> int:
    """The earliest start of task ``tspec`` in run ``wr`` (0: none): its ``not_before`` (an offset
    after the logical time, or a wall time on its local date in ``zone``, the version's stored
    offsets) and, for a scheduled run, the workflow's jitter offset; all replicated values."""
    gate = gate_ms(tspec.not_before, wr.logical_ms, zone)
    if spec.jitter_ms and not wr.manual and not wr.backfill_id:
        gate = max(gate, jitter.start_ms(spec.name, wr.logical_ms, spec.jitter_ms))
    return gate


def gate_reason(gate: int) -> str:
    """The reason a held task shows (``workflow status`` turns it into WAITING until the gate)."""
    at = _EPOCH + timedelta(milliseconds=gate)  # UTC arithmetic: no tz database, same on every replica
    return f"held: not before {at.strftime('%Y-%m-%dT%H:%M:%SZ')} (earliest start)"


def _run_state(wr: pb.WorkflowRun) -> str:
    return pb.WorkflowRunState.Name(wr.state).removeprefix("WORKFLOW_").lower()
