"""Answer "why did (or didn't) this task fire at T?" from its record and fire accounting.

Runs on any node, outside apply: it may evaluate the trigger (croniter) to tell a non-fire time
from a missing record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Collection, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Protocol

from raftsched import codec, display
from raftsched.errors import InvalidSpec, NotFound
from raftsched.model import ManualTrigger
from raftsched.timing import jitter, sla
from raftsched.timing.calendar import Calendar
from raftsched.timing.schedule import next_fire_after
from raftsched.v1 import raftsched_pb2 as pb

_VERB = {
    pb.FIRED: "fired",
    pb.COALESCED: "coalesced",
    pb.SKIPPED_OVERLAP: "skipped (overlap)",
    pb.SKIPPED_MISFIRE: "skipped (misfire)",
    pb.SKIPPED_DISABLED: "skipped (disabled)",
    pb.SKIPPED_CALENDAR: "skipped (calendar)",
}


def iso(ms: int) -> str:
    if ms <= 0:
        return "never"
    return datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds").replace("+00:00", "Z")


def _covers(rec: pb.FireRecord, at_ms: int) -> bool:
    return rec.nominal_ms == at_ms or rec.nominal_ms <= at_ms <= rec.through_ms


def explain(
    task: pb.TaskRecord,
    at_ms: int,
    records: list[pb.FireRecord],
    run: pb.Run | None,
    calendars: list[Calendar] | None = None,
    now_ms: int = 0,
) -> pb.ExplainReply:
    """The verdict for ``task`` at ``at_ms``; ``calendars`` are the ones the task excludes (to
    say that a fire not yet accounted will be skipped, or why one was). With ``now_ms`` (the
    node's leader time) the task's SLA and freshness states are added."""
    out = _explain(task, at_ms, records, run)
    if now_ms:
        out.details.extend(sla_details(task, out.run if out.HasField("run") else None, now_ms))
    for cal in calendars or ():
        if not out.HasField("fire") and cal.excludes(at_ms):
            out.details.append(f"a fire at {iso(at_ms)} is skipped: {cal.why(at_ms)}")
    # Placement problems are part of why a fire has not run, whatever the record says.
    if task.unplaceable:
        out.details.append(f"unplaceable: {task.unplaceable}; its attempts wait for a fitting executor")
    if out.run.held:
        out.details.append("the run is buffered behind the task's running run (overlap=buffer_one)")
    if task.spec.jitter_ms:
        nominal = out.fire.nominal_ms if out.HasField("fire") else at_ms
        offset = jitter.offset_ms(task.spec.name, nominal, task.spec.jitter_ms)
        out.details.append(
            f"jitter {task.spec.jitter_ms} ms: the fire at {iso(nominal)} starts at or after "
            f"{iso(nominal + offset)} (offset {offset} ms; the fire keeps its nominal time)"
        )
    return out


def sla_details(task: pb.TaskRecord, run: pb.Run | None, now_ms: int) -> list[str]:
    """``sla.start_within``, ``sla.finish_within`` (for ``run``) and ``freshness`` states:
    ``met``, ``missed by X`` or ``pending`` (see :mod:`raftsched.timing.sla`)."""
    spec = task.spec
    out = []
    for within, what, state_of in (
        (spec.sla_start_within_ms, "sla.start_within", sla.start_state),
        (spec.sla_finish_within_ms, "sla.finish_within", sla.finish_state),
    ):
        if within and run is not None and run.run_id:
            state = state_of(run, within, now_ms)
            out.append(f"{what} {sla.late_text(within)} for run {run.run_id}: {state}")
    if spec.freshness_ms:
        last = f"last success {iso(task.last_success_ms)}" if task.last_success_ms else "no success yet"
        out.append(
            f"freshness {sla.late_text(spec.freshness_ms)}: {sla.freshness_state(task, now_ms)} ({last})"
        )
    return out


def workflow_sla_details(
    current: pb.WorkflowRecord, run: pb.WorkflowRun | None, now_ms: int, spec: pb.WorkflowSpec | None = None
) -> list[str]:
    """A workflow's ``sla.start_within`` and ``sla.finish_within`` states for ``run`` (a
    scheduled run: manual runs and backfills have none) and its ``freshness`` (``current``: the
    workflow's current record; ``spec``: the version ``run`` executes, default ``current``'s)."""
    spec = spec or current.spec
    out = []
    scheduled = run is not None and run.run_id and not run.manual and not run.backfill_id
    for within, what, state_of in (
        (spec.sla_start_within_ms, "sla.start_within", sla.workflow_start_state),
        (spec.sla_finish_within_ms, "sla.finish_within", sla.workflow_finish_state),
    ):
        if within and run is not None and scheduled:
            out.append(
                f"{what} {sla.late_text(within)} for run {run.run_id}: {state_of(run, within, now_ms)}"
            )
        elif within and run is not None and run.run_id:
            out.append(f"{what} {sla.late_text(within)}: not for run {run.run_id} (manual or backfill)")
    if current.spec.freshness_ms:
        last = f"last success {iso(current.last_success_ms)}" if current.last_success_ms else "no success yet"
        state = sla.freshness_state(current, now_ms)
        out.append(f"freshness {sla.late_text(current.spec.freshness_ms)}: {state} ({last})")
    return out


def _explain(
    task: pb.TaskRecord, at_ms: int, records: list[pb.FireRecord], run: pb.Run | None
) -> pb.ExplainReply:
    name = task.spec.name
    out = pb.ExplainReply()
    for rec in records:
        if _covers(rec, at_ms):
            out.fire.CopyFrom(rec)
            verb = _VERB.get(rec.outcome, "accounted")
            if rec.outcome == pb.FIRED:
                state = (
                    pb.RunState.Name(run.state).lower()
                    if run is not None and run.run_id == rec.run_id
                    else "?"
                )
                out.verdict = f"{name} fired at {iso(rec.nominal_ms)}: run {rec.run_id} ({state})"
                if run is not None and run.run_id == rec.run_id:
                    out.run.CopyFrom(run)
                    waiting = [sh for sh in run.shards if sh.state == pb.PENDING and sh.waiting]
                    if waiting:
                        out.verdict += f", waiting: {waiting[0].waiting}"
                    for sh in waiting:
                        out.details.append(
                            f"shard {sh.shard} attempt {sh.attempt} waiting since "
                            f"{iso(sh.waiting_since_ms)}: {sh.waiting}"
                        )
            elif rec.outcome == pb.SKIPPED_CALENDAR:
                out.verdict = f"{name} skipped at {iso(at_ms)} by calendar {rec.calendar!r}: {rec.reason}"
            elif rec.through_ms:
                out.verdict = (
                    f"{name} {verb} at {iso(at_ms)}: one of {rec.count} fires from "
                    f"{iso(rec.nominal_ms)} to {iso(rec.through_ms)}: {rec.reason}"
                )
            else:
                out.verdict = f"{name} {verb} at {iso(at_ms)}: {rec.reason}"
            out.details.append(
                f"decided by the leader of epoch {rec.epoch} at {iso(rec.decided_ms)} "
                f"(task version {rec.task_version})"
            )
            return out
    if at_ms < task.created_ms:
        out.verdict = f"{name} did not exist at {iso(at_ms)} (created {iso(task.created_ms)})"
        return out
    # Only the trigger matters here; decoding just it also explains a stored task that newer
    # submission rules would refuse (and internal workflow tasks, whose names are not user names).
    try:
        trigger = codec.trigger_from_pb(task.spec.trigger)
    except InvalidSpec as exc:
        out.verdict = f"{name}: cannot evaluate its trigger: {exc}"
        return out
    if isinstance(trigger, ManualTrigger):
        out.verdict = f"{name} has no schedule (manual trigger only); no run was triggered at {iso(at_ms)}"
        return out
    try:
        is_fire_time = next_fire_after(trigger, at_ms - 1) == at_ms
        following = next_fire_after(trigger, at_ms)
    except InvalidSpec as exc:
        out.verdict = f"{name}: cannot evaluate its trigger: {exc}"
        return out
    if at_ms > task.watermark_ms:
        out.verdict = (
            f"{name} has not reached {iso(at_ms)} yet: fires are accounted up to "
            f"{iso(task.watermark_ms)}; next fire {iso(task.next_fire_ms)}"
        )
        if not task.enabled:
            out.details.append("the task is disabled: nothing fires until it is enabled")
        return out
    if not is_fire_time:
        out.verdict = (
            f"{name} was not due at {iso(at_ms)}: it is not a fire time of the current trigger "
            f"(next fire time after it: {iso(following)})"
        )
        return out
    out.verdict = (
        f"{name} has no record for {iso(at_ms)}: the task was disabled then, its trigger was "
        "different then, or the record was pruned by history retention"
    )
    out.details.append(f"current version {task.version}, updated {iso(task.updated_ms)}")
    return out


# -- workflow tasks (issue 28): why a task of a workflow run is not running ---------------------

_NEEDS_TEXT: dict[int, str] = {pb.ON_SUCCESS: "success", pb.ON_FAILURE: "failure", pb.ON_DONE: "done"}
_LOCAL_DONE = frozenset({pb.TASK_SUCCESS, pb.TASK_FAILED, pb.TASK_TIMEOUT, pb.TASK_SKIPPED, pb.TASK_KILLED})
_RUN_DONE = frozenset({pb.WORKFLOW_SUCCESS, pb.WORKFLOW_FAILED, pb.WORKFLOW_KILLED})


def _when(ms: int) -> str:
    return display.iso(ms) if ms else "-"


def _late(deadline: int, now_ms: int) -> str:
    """``in 25m`` / ``passed 5m ago``: how far ``deadline`` is from ``now_ms``."""
    if now_ms <= 0:
        return ""
    gap = deadline - now_ms
    return f"in {_span(gap)}" if gap > 0 else f"passed {_span(-gap)} ago"


def _span(ms: int) -> str:
    h, rest = divmod(max(ms, 0) // 1000, 3600)
    m, sec = divmod(rest, 60)
    return "".join(p for p in (f"{h}h" if h else "", f"{m}m" if m else "", f"{sec}s" if sec else "")) or "0s"


def upstream_problem(
    dep: pb.Dependency,
    logical_ms: int,
    record: pb.WorkflowRecord | None,
    runs: Sequence[pb.WorkflowRun],
) -> str:
    """Why a cross-workflow edge on ``dep`` at upstream logical time ``logical_ms`` still waits,
    from the upstream's current ``record`` (None: deleted) and its stored ``runs`` (any logical
    time; those at ``logical_ms`` matter, the others tell a pruned run from one never started)."""
    wf = dep.workflow
    if record is None:
        return (
            f'upstream workflow "{wf}" no longer exists (deleted with force): nothing can meet the edge; '
            "it waits until its timeout"
        )
    if dep.task and all(t.name != dep.task for t in record.spec.tasks):
        return (
            f'upstream task "{dep.task}" no longer exists in version {record.version} of "{wf}": only a '
            "run of an older version that has it can meet the edge; else it waits until its timeout"
        )
    at = [r for r in runs if r.logical_ms == logical_ms]
    if not at:
        text = f'no run of "{wf}" at logical time {_when(logical_ms)} is stored'
        older = [r.logical_ms for r in runs if r.logical_ms < logical_ms]
        if not older and record.runs_total > len(runs):
            oldest = min((r.logical_ms for r in runs), default=0)
            return (
                f"{text}: it has not started yet, or it ran and history retention pruned it (the "
                f"oldest run kept is of {_when(oldest)}); a pruned run meets nothing: start one "
                f"again (raftsched workflow run {wf} --logical {_when(logical_ms)})"
            )
        return f"{text}: it has not started yet (by its schedule, by hand, a backfill or an event)"
    parts = []
    for r in sorted(at, key=lambda r: r.run_id):
        state = display.wf_state(r.state)
        if dep.task:
            task = next((t for t in r.tasks if t.name == dep.task), None)
            if task is None:
                parts.append(f"run {r.run_id} (version {r.version}) has no task {dep.task!r}: never decides")
            elif r.state == pb.WORKFLOW_KILLED or task.state == pb.TASK_KILLED:
                parts.append(f"run {r.run_id} was killed: a killed run decides nothing (rerun it)")
            else:
                shown = display.task_state(task.state)
                parts.append(f"run {r.run_id} is {state}, its task {dep.task!r} {shown}")
        elif r.state == pb.WORKFLOW_KILLED:
            parts.append(f"run {r.run_id} was killed: a killed run decides nothing (rerun it)")
        else:
            parts.append(f"run {r.run_id} is {state}")
    return "; ".join(parts)


def wait_rows(
    runs: list[pb.WorkflowRun],
    spec_of: Mapping[tuple[str, int], pb.WorkflowSpec],
    upstream: str = "",
    upstream_records: Mapping[str, pb.WorkflowRecord | None] | None = None,
    upstream_runs: Mapping[str, Sequence[pb.WorkflowRun]] | None = None,
) -> list[dict[str, object]]:
    """``workflow waits``: every cross-workflow edge still waiting among ``runs`` (active runs of
    any workflows), one row each, ordered by upstream, its logical time, then the downstream run.
    ``spec_of`` holds each run's version; ``upstream`` keeps the edges waiting on that workflow.
    With ``upstream_records`` (the upstream workflows' current records, None for a deleted one)
    each row has a ``note`` saying why it waits (:func:`upstream_problem`)."""
    rows: list[dict[str, object]] = []
    for run in runs:
        spec = spec_of.get((run.workflow, run.version))
        for i, task in enumerate(run.tasks):
            for wait in task.external:
                if wait.state != pb.EXTERNAL_PENDING or task.state != pb.TASK_WAITING:
                    continue
                dep = spec.tasks[i].depends_on[wait.edge] if spec is not None else pb.Dependency()
                if upstream and dep.workflow != upstream:
                    continue
                row: dict[str, object] = {
                    "upstream": dep.workflow,
                    "upstream_task": dep.task,
                    "upstream_logical_ms": wait.logical_ms,
                    "condition": _NEEDS_TEXT.get(dep.condition, "success"),
                    "downstream_run": run.run_id,
                    "downstream_task": task.name,
                    "since_ms": wait.since_ms,
                }
                if upstream_records is not None:
                    row["note"] = upstream_problem(
                        dep,
                        wait.logical_ms,
                        upstream_records.get(dep.workflow),
                        (upstream_runs or {}).get(dep.workflow, ()),
                    )
                rows.append(row)
    rows.sort(key=lambda r: (str(r["upstream"]), _int(r["upstream_logical_ms"]), str(r["downstream_run"])))
    return rows


def _int(value: object) -> int:
    return value if isinstance(value, int) else 0


@dataclass(frozen=True)
class WorkflowTaskExplanation:
    """Why a task of a workflow run is (not) running: a one-line ``verdict``, ``details`` lines,
    and the cross-workflow edges it still waits for (``waits``, rows as :func:`wait_rows` with
    the deadlines)."""

    verdict: str
    details: tuple[str, ...] = ()
    waits: tuple[Mapping[str, object], ...] = ()

    def to_dict(self) -> dict[str, object]:
        waits = [dict(w) for w in self.waits]
        return {"verdict": self.verdict, "details": list(self.details), "waits": waits}

    def to_reply(self) -> pb.ExplainWorkflowTaskReply:
        """As the ExplainWorkflowTask RPC answers it."""
        out = pb.ExplainWorkflowTaskReply(verdict=self.verdict, details=self.details)
        for w in self.waits:
            out.waits.add(**{k: v for k, v in w.items() if k in _WAIT_FIELDS})
        return out

    @classmethod
    def from_reply(cls, reply: pb.ExplainWorkflowTaskReply) -> WorkflowTaskExplanation:
        waits = tuple({f: getattr(w, f) for f in _WAIT_FIELDS} for w in reply.waits)
        return cls(reply.verdict, tuple(reply.details), waits)


_WAIT_FIELDS = (
    "upstream",
    "upstream_task",
    "upstream_logical_ms",
    "condition",
    "since_ms",
    "timeout_at_ms",
    "on_timeout",
    "warn_at_ms",
    "note",
)


class WorkflowTaskReads(Protocol):
    """The reads :func:`explain_from_reads` makes (the state machine's view has them)."""

    def get_workflow(self, name: str, version: int = 0) -> pb.WorkflowRecord | None: ...

    def get_workflow_run(self, run_id: str) -> pb.WorkflowRun | None: ...

    def list_workflow_runs(
        self, workflow: str, limit: int = 100, active_only: bool = False
    ) -> list[pb.WorkflowRun]: ...

    def active_run(self, run_id: str) -> pb.Run | None: ...


UPSTREAM_RUNS_READ = 1000
"""The newest runs of an upstream workflow read to tell why an edge waits."""


def explain_from_reads(
    reads: WorkflowTaskReads,
    run_id: str,
    task: str,
    now_ms: int,
    readable: Callable[[str], bool] = lambda _: True,
) -> WorkflowTaskExplanation:
    """:func:`explain_workflow_task` for ``task`` of run ``run_id``, reading what it needs from
    ``reads``; ``readable(workflow)``: whether the caller may see that upstream's runs (else its
    edge says so, and nothing of its runs). Raises NotFound for an unknown run or task."""
    run = reads.get_workflow_run(run_id)
    if run is None or not readable(run.workflow):
        raise NotFound(f"workflow run {run_id!r} does not exist")
    record = reads.get_workflow(run.workflow, run.version)
    if record is None:
        raise NotFound(f"workflow {run.workflow!r} version {run.version} is no longer stored")
    spec = record.spec
    current = next((t for t in run.tasks if t.name == task), None)
    records: dict[str, pb.WorkflowRecord | None] = {}
    runs: dict[str, list[pb.WorkflowRun]] = {}
    hidden: set[str] = set()
    task_run: pb.Run | None = None
    if current is not None:
        idx = list(run.tasks).index(current)
        deps = spec.tasks[idx].depends_on if idx < len(spec.tasks) else []
        for w in current.external:
            if w.state != pb.EXTERNAL_PENDING or w.edge >= len(deps):
                continue
            name = deps[w.edge].workflow
            if name in records or name in hidden:
                continue
            if not readable(name):
                hidden.add(name)
                continue
            records[name] = reads.get_workflow(name)
            if records[name] is not None:
                runs[name] = reads.list_workflow_runs(name, UPSTREAM_RUNS_READ)
        if current.run_id and current.state == pb.TASK_RUNNING:
            task_run = reads.active_run(current.run_id)
    got = explain_workflow_task(
        run,
        spec,
        task,
        upstream_records=records,
        upstream_runs=runs,
        task_run=task_run,
        now_ms=now_ms,
        hidden=hidden,
    )
    latest = reads.get_workflow(run.workflow)
    if latest is None:
        return got
    return dataclasses.replace(got, details=(*got.details, *workflow_sla_details(latest, run, now_ms, spec)))


def explain_workflow_task(
    run: pb.WorkflowRun,
    spec: pb.WorkflowSpec,
    task: str,
    *,
    upstream_records: Mapping[str, pb.WorkflowRecord | None],
    upstream_runs: Mapping[str, Sequence[pb.WorkflowRun]],
    task_run: pb.Run | None = None,
    now_ms: int = 0,
    hidden: Collection[str] = (),
) -> WorkflowTaskExplanation:
    """The answer for ``task`` of ``run`` (``spec``: the version the run executes): its unmet
    local dependencies, the cross-workflow edges it waits for (upstream, task, logical time,
    condition, since, timeout and warn deadlines, and why - :func:`upstream_problem`), an
    earliest-start gate not reached at ``now_ms`` (not_before, jitter), and what the attempts of
    its task run (``task_run``) wait for (pool, lock, quota). Raises NotFound for an unknown task."""
    idx = next((i for i, t in enumerate(run.tasks) if t.name == task), None)
    if idx is None or idx >= len(spec.tasks):
        raise NotFound(f"task {task!r} is not part of workflow {run.workflow!r} version {run.version}")
    t, tspec = run.tasks[idx], spec.tasks[idx]
    head = f"task {task} of {run.run_id}"
    details: list[str] = []
    waits: list[Mapping[str, object]] = []
    gate = _gate_details(run, spec, tspec)
    if t.state in _LOCAL_DONE:
        verdict = f"{head} is {display.task_state(t.state).upper()}" + (f": {t.reason}" if t.reason else "")
        return WorkflowTaskExplanation(verdict, tuple(details))
    if t.state == pb.TASK_READY and t.not_before_ms > now_ms:
        until = f"{_when(t.not_before_ms)} ({_late(t.not_before_ms, now_ms)})"
        details += [*gate, "it takes no max_parallel place meanwhile"]
        return WorkflowTaskExplanation(f"{head} is WAITING: held until {until}", tuple(details))
    if t.state == pb.TASK_READY:
        limits = []
        if spec.max_parallel:
            limits.append(f"max_parallel {spec.max_parallel} (tasks of all runs of the workflow)")
        if spec.max_parallel_per_run:
            limits.append(f"max_parallel_per_run {spec.max_parallel_per_run}")
        why = " or ".join(limits) or "the next scheduling pass"
        return WorkflowTaskExplanation(f"{head} is READY: its dependencies are met; it waits for {why}")
    if t.state == pb.TASK_RUNNING:
        if t.not_before_ms and t.not_before_ms > now_ms:
            until = f"{_when(t.not_before_ms)} ({_late(t.not_before_ms, now_ms)})"
            verdict = f"{head} is WAITING: held until {until}"
            details += gate
        else:
            verdict = f"{head} is RUNNING: task run {t.run_id or '-'}"
        if task_run is not None:
            for sh in task_run.shards:
                if sh.state == pb.PENDING and sh.waiting:
                    details.append(
                        f"shard {sh.shard} attempt {sh.attempt} waiting since "
                        f"{_when(sh.waiting_since_ms)}: {sh.waiting}"
                    )
                    if not verdict.endswith(")"):
                        verdict += f", waiting: {sh.waiting}"
                elif sh.state == pb.PENDING and not (t.not_before_ms > now_ms):
                    details.append(f"shard {sh.shard} attempt {sh.attempt} waits for a free executor slot")
        return WorkflowTaskExplanation(verdict, tuple(details))
    # WAITING: its dependencies.
    states = {rt.name: rt.state for rt in run.tasks}
    local_unmet = 0
    for d in tspec.depends_on:
        if d.workflow:
            continue
        st = states.get(d.task, pb.TASK_STATE_UNSPECIFIED)
        if st not in _LOCAL_DONE:
            local_unmet += 1
            details.append(
                f"local dependency {d.task!r} is {display.task_state(st).upper()} "
                f"(needs {_NEEDS_TEXT.get(d.condition, 'success')})"
            )
    for w in t.external:
        if w.state != pb.EXTERNAL_PENDING or w.edge >= len(tspec.depends_on):
            continue
        dep = tspec.depends_on[w.edge]
        if dep.workflow in hidden:
            note = f'upstream workflow "{dep.workflow}" is in a namespace this token may not read'
        else:
            note = upstream_problem(
                dep, w.logical_ms, upstream_records.get(dep.workflow), upstream_runs.get(dep.workflow, ())
            )
        row: dict[str, object] = {
            "upstream": dep.workflow,
            "upstream_task": dep.task,
            "upstream_logical_ms": w.logical_ms,
            "condition": _NEEDS_TEXT.get(dep.condition, "success"),
            "since_ms": w.since_ms,
            "timeout_at_ms": w.since_ms + dep.timeout_ms if dep.timeout_ms else 0,
            "on_timeout": "skip" if dep.on_timeout == pb.UPSTREAM_TIMEOUT_SKIP else "fail",
            "warn_at_ms": w.since_ms + (dep.warn_after_ms or spec.warn_after_ms)
            if (dep.warn_after_ms or spec.warn_after_ms)
            else 0,
            "note": note,
        }
        waits.append(row)
        what = f"{dep.workflow}:{dep.task or '*'}"
        line = (
            f"waits for {what} at logical time {_when(w.logical_ms)} (needs {row['condition']}), "
            f"since {_when(w.since_ms)}"
        )
        if dep.timeout_ms:
            at = w.since_ms + dep.timeout_ms
            line += f"; times out at {_when(at)} {_late(at, now_ms)}".rstrip()
            line += f" (on_timeout: {row['on_timeout']})"
        warn = _int(row["warn_at_ms"])
        if warn:
            line += f"; upstream_late warning at {_when(warn)}"
        details.append(line)
        details.append(f"  {note}")
    verdict = (
        f"{head} is WAITING for {local_unmet} local dependency(ies) and {len(waits)} cross-workflow edge(s)"
    )
    details += gate
    return WorkflowTaskExplanation(verdict, tuple(details), tuple(waits))


def _gate_details(run: pb.WorkflowRun, spec: pb.WorkflowSpec, tspec: pb.WorkflowTaskSpec) -> list[str]:
    """The earliest-start gates of a task (not_before, the workflow's jitter) as lines."""
    out = []
    if tspec.not_before:
        logical_at = _when(run.logical_ms)
        out.append(f"earliest start: not_before {tspec.not_before!r} (of the logical time {logical_at})")
    if spec.jitter_ms and not run.manual and not run.backfill_id:
        start = jitter.start_ms(spec.name, run.logical_ms, spec.jitter_ms)
        out.append(
            f"jitter {display.duration_text(spec.jitter_ms)}: this scheduled run's tasks start at or after "
            f"{_when(start)} (offset {start - run.logical_ms} ms)"
        )
    return out
