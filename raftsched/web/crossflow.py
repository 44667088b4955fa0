"""The console's pages for issue 28: dependencies across workflows, earliest-start gates and
jitter, and events.

Every page reads through the session's SDK client, as the CLI's commands do (``workflow status``,
``workflow waits``, ``events``, ``events --unused``), so the servicers authorize each read; the
emit form calls ``EmitEvent`` with the session's token, so the ``events.emit`` permission in the
event's namespace decides (the form is drawn only for a role that has it).

The helpers here also give the workflow and workflow run pages (:mod:`raftsched.web.views`) their
cross-workflow edges, their gates and the states of the external boxes of their graphs.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import re
import urllib.parse
import zoneinfo
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final

from raftsched.display import duration_text, iso
from raftsched.errors import NotFound, RaftschedError
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.web.base import REFRESH_S, Ctx, Redirect, View, local_path
from raftsched.web.graph import external_label, offset_text

__all__ = [
    "ROUTES",
    "Gate",
    "RunEdge",
    "WaitRow",
    "WorkflowEdge",
    "edge_states",
    "gate_of",
    "run_context",
    "run_gate",
    "task_run_gate",
    "workflow_context",
]

PAGE_SIZE: Final = 50
EVENTS_SHOWN: Final = 1000  # newest accepted events the Events page reads (then pages through)
UNUSED_READ: Final = 1_000_000  # accepted events read to find names never seen (as `events --unused`)
LIVE_WAITS_RUNS: Final = 1000
"""Above this many active workflow runs the Waits page (which reads them all) is not refreshed
by itself: each refresh would read them all again."""

WAIT_TEXT: Final = {
    pb.EXTERNAL_PENDING: "waiting",
    pb.EXTERNAL_MET: "met",
    pb.EXTERNAL_UNMET: "not met",
    pb.EXTERNAL_TIMED_OUT: "timed out",
}
_NEEDS: Final = {pb.ON_SUCCESS: "success", pb.ON_FAILURE: "failure", pb.ON_DONE: "done"}
_ON_TIMEOUT: Final = {pb.UPSTREAM_TIMEOUT_SKIP: "skip"}
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="raftsched-console-xwf")


def _q(text: str) -> str:
    return urllib.parse.quote(text, safe="")


# -- earliest-start gates ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Gate:
    """A task held until ``until_ms``: ``local`` is that time as ``HH:MM`` in ``zone`` (with the
    date when it is not the logical date), ``why`` what holds it (``not_before 02:00``,
    ``jitter 5m``, ``earliest start``)."""

    until_ms: int
    local: str
    zone: str
    why: str

    @property
    def text(self) -> str:
        return f"waits until {self.local} ({self.zone})"


def _zone_of(name: str) -> tuple[dt.tzinfo, str]:
    if not name or name == "UTC":
        return dt.UTC, "UTC"
    try:
        return zoneinfo.ZoneInfo(name), name
    except (zoneinfo.ZoneInfoNotFoundError, ValueError):
        return dt.UTC, "UTC"


def gate_of(until_ms: int, zone_name: str, logical_ms: int, why: str) -> Gate:
    """The :class:`Gate` of a hold until ``until_ms`` shown in zone ``zone_name`` ("" = UTC);
    the date is added when it differs from the logical time's local date."""
    zone, label = _zone_of(zone_name)
    at = dt.datetime.fromtimestamp(until_ms / 1000, zone)
    day = dt.datetime.fromtimestamp(logical_ms / 1000, zone).date() if logical_ms else at.date()
    local = at.strftime("%H:%M") if at.date() == day else at.strftime("%Y-%m-%d %H:%M")
    return Gate(until_ms, local, label, why)


def _task_gate(
    spec: pb.WorkflowSpec | None, run: pb.WorkflowRun, task: pb.WorkflowTaskRun, now_ms: int
) -> Gate | None:
    """The gate holding ``task`` of ``run`` now (its task run is created, its attempts wait), or
    None. ``workflow status`` shows such a task as WAITING; so does the console."""
    if task.state != pb.TASK_RUNNING or task.not_before_ms <= now_ms:
        return None
    why = "earliest start"
    zone = ""
    if spec is not None:
        zone = spec.schedule.timezone
        tspec = next((t for t in spec.tasks if t.name == task.name), None)
        parts = []
        if tspec is not None and tspec.not_before:
            parts.append(f"not_before {tspec.not_before}")
        if spec.jitter_ms and not run.manual and not run.backfill_id:
            parts.append(f"jitter {duration_text(spec.jitter_ms)}")
        why = " and ".join(parts) or why
    return gate_of(task.not_before_ms, zone, run.logical_ms, why)


def run_gate(
    record: pb.Run, spec: pb.TaskSpec | None, now_ms: int, workflow: pb.WorkflowSpec | None = None
) -> Gate | None:
    """The gate holding a (plain or workflow) task run whose attempts all wait for a start time:
    the task's jitter on a fire, a workflow task's earliest start (``workflow``: the spec of the
    run's version, for its zone and the task's ``not_before``), or a retry's backoff."""
    waiting = [s for s in record.shards if s.state == pb.PENDING and s.not_before_ms > now_ms]
    if record.state != pb.PENDING or not waiting or len(waiting) != len(record.shards):
        return None
    until = min(s.not_before_ms for s in waiting)
    zone = spec.trigger.cron.timezone if spec is not None and spec.trigger.HasField("cron") else ""
    if any(s.attempt > 1 for s in waiting):
        why = "retry backoff"
    elif record.workflow_run:
        why = "earliest start (not_before or the workflow's jitter)"
        if workflow is not None:
            zone = workflow.schedule.timezone
            name = record.task.partition("#")[2]
            written = next((t.not_before for t in workflow.tasks if t.name == name), "")
            why = f"not_before {written}" if written else "the workflow's jitter"
    elif spec is not None and spec.jitter_ms:
        why = f"jitter {duration_text(spec.jitter_ms)}"
    else:
        why = "earliest start"
    return gate_of(until, zone, record.nominal_ms, why)


def task_run_gate(ctx: Ctx, record: pb.Run, spec: pb.TaskSpec | None) -> Gate | None:
    """:func:`run_gate` for the run page: a workflow task run's gate reads its workflow's version
    (only when it is held, so most run pages read nothing more)."""
    if record.state != pb.PENDING or not any(s.not_before_ms > ctx.now_ms for s in record.shards):
        return None
    workflow = None
    if record.workflow_run:
        with contextlib.suppress(RaftschedError):  # pruned or deleted: the gate in UTC
            name = record.task.partition("#")[0]
            workflow = ctx.client.get_workflow(name, record.task_version).spec
    return run_gate(record, spec, ctx.now_ms, workflow)


# -- cross-workflow edges ----------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkflowEdge:
    """One cross-workflow dependency of a workflow's task, as the file declares it."""

    task: str
    upstream: str  # the upstream workflow
    upstream_task: str  # "" = its whole run
    needs: str  # success / failure / done
    logical: str  # same, -1d, ...
    timeout: str  # "never" or "3h (then fail)"
    warn_after: str  # "30m", "30m (workflow default)" or "never"


def _workflow_edges(spec: pb.WorkflowSpec) -> list[WorkflowEdge]:
    out = []
    for t in spec.tasks:
        for d in t.depends_on:
            if not d.workflow:
                continue
            timeout = "never"
            if d.timeout_ms:
                timeout = f"{duration_text(d.timeout_ms)} (then {_ON_TIMEOUT.get(d.on_timeout, 'fail')})"
            warn = "never"
            if d.warn_after_ms:
                warn = duration_text(d.warn_after_ms)
            elif spec.warn_after_ms:
                warn = f"{duration_text(spec.warn_after_ms)} (workflow default)"
            out.append(
                WorkflowEdge(
                    task=t.name,
                    upstream=d.workflow,
                    upstream_task=d.task,
                    needs=_NEEDS.get(d.condition, "success"),
                    logical=offset_text(d.logical_offset_ms),
                    timeout=timeout,
                    warn_after=warn,
                )
            )
    return out


def _dependents(name: str, others: Sequence[pb.WorkflowRecord]) -> list[tuple[str, str, str, str]]:
    """``(workflow, its task, what of ``name`` it waits for, the task of ``name`` or "")`` for
    every task of another workflow that depends on ``name``'s runs or tasks."""
    out = []
    for other in others:
        if other.spec.name == name:
            continue
        for t in other.spec.tasks:
            for d in t.depends_on:
                if d.workflow == name:
                    out.append((other.spec.name, t.name, external_label(d), d.task))
    return sorted(out)


def workflow_context(
    ctx: Ctx,
    spec: pb.WorkflowSpec,
    focus: str = "",
    upstream: Sequence[str] = (),
    downstream: Sequence[str] = (),
) -> dict[str, Any]:
    """What the workflow page shows of issue 28: its cross-workflow edges, the workflows that
    depend on it, its events (``on_event``, ``emits``), jitter and the tasks' gates; with a
    ``focus`` task (and its ``upstream`` and ``downstream`` tasks in this workflow), its lineage
    across workflows, one hop, as ``workflow lineage`` prints it."""
    dependents = _dependents(spec.name, ctx.client.list_workflows())
    cross_up: list[tuple[str, str]] = []
    cross_down: list[tuple[str, str, str, str]] = []
    if focus:
        feeds = {focus, *upstream}
        seen: set[str] = set()
        for t in spec.tasks:
            for d in t.depends_on:
                if d.workflow and t.name in feeds and external_label(d) not in seen:
                    seen.add(external_label(d))
                    cross_up.append((external_label(d), d.workflow))
        after = {focus, *downstream}
        cross_down = [d for d in dependents if not d[3] or d[3] in after]  # a whole run, or a task after
    return {
        "cross_edges": _workflow_edges(spec),
        "dependents": dependents,
        "cross_up": sorted(cross_up),
        "cross_down": cross_down,
        "gated_tasks": [(t.name, t.not_before) for t in spec.tasks if t.not_before],
        "emitting_tasks": [(t.name, list(t.emits)) for t in spec.tasks if t.emits],
    }


@dataclass(frozen=True, slots=True)
class RunEdge:
    """One cross-workflow edge of a task in a run, with its state (``workflow status``)."""

    task: str
    label: str  # workflow:task -1d
    upstream: str
    needs: str
    logical_ms: int  # the upstream logical time waited for
    state: str  # waiting / met / not met / timed out
    upstream_run: str  # the upstream run that decided it ("" while waiting)
    since_ms: int


def _run_edges(run: pb.WorkflowRun, spec: pb.WorkflowSpec | None) -> list[RunEdge]:
    out = []
    tasks = {t.name: t for t in spec.tasks} if spec is not None else {}
    for t in run.tasks:
        tspec = tasks.get(t.name)
        for w in t.external:
            dep = tspec.depends_on[w.edge] if tspec is not None and w.edge < len(tspec.depends_on) else None
            out.append(
                RunEdge(
                    task=t.name,
                    label=external_label(dep) if dep is not None else "?",
                    upstream=dep.workflow if dep is not None else "",
                    needs=_NEEDS.get(dep.condition, "success") if dep is not None else "?",
                    logical_ms=w.logical_ms,
                    state=WAIT_TEXT.get(w.state, str(w.state)),
                    upstream_run=w.upstream_run,
                    since_ms=w.since_ms,
                )
            )
    return out


def edge_states(run: pb.WorkflowRun) -> dict[tuple[str, int], str]:
    """``(task, index in its depends_on) -> state`` of every cross-workflow edge of ``run``."""
    return {(t.name, w.edge): WAIT_TEXT.get(w.state, "") for t in run.tasks for w in t.external}


def run_context(ctx: Ctx, run: pb.WorkflowRun, spec: pb.WorkflowSpec) -> dict[str, Any]:
    """What the workflow run page shows of issue 28: each task's cross-workflow edges with their
    state, and the gates holding tasks now (``waits until 02:00 (Europe/Paris)``)."""
    gates = {}
    for t in run.tasks:
        gate = _task_gate(spec, run, t, ctx.now_ms)
        if gate is not None:
            gates[t.name] = gate
    edges = _run_edges(run, spec)
    by_task: dict[str, list[RunEdge]] = {}
    for e in edges:
        by_task.setdefault(e.task, []).append(e)
    return {"run_edges": edges, "edges_of": by_task, "gates": gates}


# -- the Waits page ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WaitRow:
    """One cross-workflow edge still waiting (``workflow waits``)."""

    upstream: str
    upstream_task: str
    logical_ms: int
    needs: str
    downstream_run: str
    downstream_task: str
    since_ms: int


def wait_rows(
    runs: Sequence[pb.WorkflowRun], spec_of: dict[tuple[str, int], pb.WorkflowSpec], upstream: str = ""
) -> list[WaitRow]:
    """Every cross-workflow edge still waiting among ``runs`` (active runs), ordered by upstream,
    its logical time, then the downstream run; ``upstream`` keeps those waiting on that workflow."""
    rows = []
    for run in runs:
        spec = spec_of.get((run.workflow, run.version))
        for i, task in enumerate(run.tasks):
            for wait in task.external:
                if wait.state != pb.EXTERNAL_PENDING or task.state != pb.TASK_WAITING:
                    continue
                deps = spec.tasks[i].depends_on if spec is not None and i < len(spec.tasks) else ()
                dep = deps[wait.edge] if wait.edge < len(deps) else pb.Dependency()
                if upstream and dep.workflow != upstream:
                    continue
                rows.append(
                    WaitRow(
                        upstream=dep.workflow,
                        upstream_task=dep.task,
                        logical_ms=wait.logical_ms,
                        needs=_NEEDS.get(dep.condition, "success"),
                        downstream_run=run.run_id,
                        downstream_task=task.name,
                        since_ms=wait.since_ms,
                    )
                )
    rows.sort(key=lambda r: (r.upstream, r.logical_ms, r.downstream_run, r.downstream_task))
    return rows


def waits(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    upstream = ctx.arg("upstream")
    records = ctx.client.list_workflows()
    lists = _parallel(
        lambda w: ctx.client.list_workflow_runs(w.spec.name, limit=100_000, active_only=True), records
    )
    runs = [r for found in lists for r in found]
    specs: dict[tuple[str, int], pb.WorkflowSpec] = {}
    for run in runs:
        if any(t.external for t in run.tasks) and (run.workflow, run.version) not in specs:
            try:
                specs[(run.workflow, run.version)] = ctx.client.get_workflow(run.workflow, run.version).spec
            except NotFound:  # deleted or pruned since the listing
                continue
    rows = wait_rows(runs, specs, upstream)
    held: dict[str, int] = {}
    for r in rows:
        held[r.upstream] = held.get(r.upstream, 0) + 1
    page = ctx.page()
    pages = max(1, -(-len(rows) // PAGE_SIZE))
    page = min(page, pages)
    return View(
        "waits.html",
        {
            "rows": rows[(page - 1) * PAGE_SIZE : page * PAGE_SIZE],
            "total": len(rows),
            "held": sorted(held.items()),
            "upstream": upstream,
            "page": page,
            "pages": pages,
            "runs_read": len(runs),
            "refresh": REFRESH_S if len(runs) <= LIVE_WAITS_RUNS else 0,
        },
        title="Waits",
    )


# -- events ------------------------------------------------------------------------------------


def _run_links(runs: Sequence[str], workflows: set[str]) -> list[tuple[str, str]]:
    """``(run id, its page)``: a workflow run's page when the name before ``@`` is a workflow."""
    out = []
    for run_id in runs:
        owner = run_id.split("@", 1)[0]
        base = "/workflow-runs/" if owner in workflows and "#" not in run_id else "/runs/"
        out.append((run_id, base + _q(run_id)))
    return out


def events(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    name = ctx.arg("name")
    records = ctx.client.events(name, limit=EVENTS_SHOWN)
    workflow_names = {w.spec.name for w in ctx.client.list_workflows()}
    page = ctx.page()
    pages = max(1, -(-len(records) // PAGE_SIZE))
    page = min(page, pages)
    shown = records[(page - 1) * PAGE_SIZE : page * PAGE_SIZE]
    return View(
        "events.html",
        {
            "events": [(e, _run_links(list(e.runs), workflow_names)) for e in shown],
            "total": len(records),
            "capped": len(records) >= EVENTS_SHOWN,
            "name": name,
            "page": page,
            "pages": pages,
            "emit_namespaces": _emit_namespaces(ctx),
            "refresh": REFRESH_S,
        },
        title="Events",
    )


def _emit_namespaces(ctx: Ctx) -> list[str]:
    """Namespaces the emit form offers: the caller's where its role may emit (``[""]``: any,
    typed in; ``[]``: the form is not drawn)."""
    if ctx.principal.every_namespace:
        return [""] if ctx.can("EmitEvent") else []
    return [ns for ns in sorted(ctx.principal.namespaces) if ctx.can("EmitEvent", ns)]


def events_unused(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    """Event names tasks and workflows subscribe to (``on_event``) that no accepted event inside
    the dedupe window has: a typo, or an outside system that has not sent one yet."""
    seen = {e.name for e in ctx.client.events(limit=UNUSED_READ)}
    waiting: dict[str, list[tuple[str, str]]] = {}
    for rec in ctx.client.list_tasks():
        if rec.spec.on_event and rec.spec.on_event not in seen:
            waiting.setdefault(rec.spec.on_event, []).append((rec.spec.name, f"/tasks/{_q(rec.spec.name)}"))
    for wf in ctx.client.list_workflows():
        if wf.spec.on_event and wf.spec.on_event not in seen:
            waiting.setdefault(wf.spec.on_event, []).append(
                (f"workflow {wf.spec.name}", f"/workflows/{_q(wf.spec.name)}")
            )
    return View(
        "events_unused.html",
        {"unused": [(n, waiting[n]) for n in sorted(waiting)]},
        title="Events never seen",
    )


def emit(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    name = ctx.form.get("name", "").strip()
    key = ctx.form.get("key", "").strip()
    payload = ctx.form.get("payload", "").strip()
    namespace = ctx.form.get("namespace", "").strip()
    record, duplicate = ctx.client.emit_event(name, key=key, payload=payload, namespace=namespace)
    back = local_path(ctx.form.get("back", "")) or f"/events?name={_q(record.name)}"
    if duplicate:
        said = (
            f"duplicate: event {record.name} key {record.key} was accepted at {iso(record.accepted_ms)} "
            f"(#{record.seq}); nothing new was triggered"
        )
    else:
        started = f"; started {', '.join(record.runs)}" if record.runs else "; it started no run"
        said = f"accepted event {record.name} key {record.key} (#{record.seq}){started}"
    return Redirect(back, ("ok", said))


def _parallel(fn: Callable[[Any], Any], items: Sequence[Any]) -> list[Any]:
    return list(_POOL.map(fn, items))


ROUTES: Final = [
    ("GET", r"/waits", waits, False),
    ("GET", r"/events", events, False),
    ("GET", r"/events/unused", events_unused, False),
    ("POST", r"/events/emit", emit, False),
]
"""The routes of issue 28's pages, appended to :data:`raftsched.web.views.ROUTES`."""
