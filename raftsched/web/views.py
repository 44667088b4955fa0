"""The console's pages and actions: each view reads through the session's SDK client (so the
node's servicers authorize it) and returns a :class:`~raftsched.web.base.View` to render or,
for an action, a :class:`~raftsched.web.base.Redirect` back to the page it was posted from.

Views block on gRPC calls; the console runs them on worker threads.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import functools
import html
import re
import urllib.parse
from collections.abc import Callable, Iterable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Final, TypeVar

from raftsched.display import duration_text, enum_name, iso, schedule_text
from raftsched.errors import InvalidSpec, NotFound, RaftschedError, Unauthenticated, Unavailable
from raftsched.explain import sla_details, workflow_sla_details
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.web import crossflow, pools
from raftsched.web.base import REFRESH_S, Ctx, Redirect, View, local_path
from raftsched.web.editing import ROUTES as EDIT_ROUTES
from raftsched.web.graph import dag_geometry, gantt_geometry
from raftsched.web.templating import trusted_html

__all__ = ["FILTERS", "PAGE_SIZE", "ROUTES"]

PAGE_SIZE: Final = 50
TASKS_PER_PAGE: Final = 25  # each row costs two reads (its strip)
STRIP: Final = 10  # fires in a task's strip on the task list
_FIRE_WINDOWS: Final = {"10m": 600_000, "1h": 3_600_000, "24h": 86_400_000, "7d": 7 * 86_400_000}
# Reads for the rows of one page run side by side (loopback gRPC, each a short local read).
# Two at a time: the reads are served on the node's event loop, which also carries dispatch.
_POOL = ThreadPoolExecutor(max_workers=2, thread_name_prefix="raftsched-console")

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Pager:
    """Page ``page`` of ``pages`` (1-based) of ``total`` items; ``total`` -1: unknown."""

    page: int
    pages: int
    total: int
    has_more: bool

    @property
    def has_prev(self) -> bool:
        return self.page > 1


def paginate(items: Sequence[T], page: int, size: int = PAGE_SIZE) -> tuple[Sequence[T], Pager]:
    pages = max(1, -(-len(items) // size))
    page = min(page, pages)
    return items[(page - 1) * size : page * size], Pager(page, pages, len(items), page < pages)


# -- filters the templates use -----------------------------------------------------------------


def run_state(value: int) -> str:
    return enum_name(pb.RunState, value)


def task_state(value: int) -> str:
    return enum_name(pb.WorkflowTaskState, value)


def wf_state(value: int) -> str:
    return enum_name(pb.WorkflowRunState, value)


def enum(value: int, name: str) -> str:
    """``value`` of the proto enum ``name`` (``"MisfirePolicy"``) as the CLI spells it."""
    return enum_name(getattr(pb, name), value)


def outcome(value: int) -> str:
    return enum_name(pb.FireOutcome, value)


def trigger_text(spec: pb.TaskSpec) -> str:
    kind = spec.trigger.WhichOneof("kind")
    if kind == "cron":
        return f"cron '{spec.trigger.cron.expr}' {spec.trigger.cron.timezone or 'UTC'}"
    if kind == "interval":
        return f"every {duration_text(spec.trigger.interval.every_ms)}"
    if kind == "once":
        return f"once at {iso(spec.trigger.once.at_ms)}"
    return "manual"


def relative(ms: int, now_ms: int) -> str:
    """``in 5s`` / ``3m ago`` / ``-`` for 0."""
    if not ms:
        return "-"
    delta = ms - now_ms
    text = _span(abs(delta))
    return f"in {text}" if delta > 0 else f"{text} ago"


def _span(ms: int) -> str:
    if ms < 1000:
        return f"{ms}ms"
    s = ms // 1000
    if s < 120:
        return f"{s}s"
    if s < 7200:
        return f"{s // 60}m"
    if s < 172_800:
        return f"{s // 3600}h"
    return f"{s // 86400}d"


def took(start_ms: int, end_ms: int) -> str:
    if not start_ms or not end_ms or end_ms < start_ms:
        return "-"
    return _span(end_ms - start_ms)


def quote(text: str) -> str:
    """One URL path segment."""
    return urllib.parse.quote(text, safe="")


def tail(text: str, lines: int = 50) -> str:
    return "\n".join(text.splitlines()[-lines:])


FILTERS: Final[dict[str, Callable[..., Any]]] = {
    "iso": iso,
    "run_state": run_state,
    "task_state": task_state,
    "wf_state": wf_state,
    "outcome": outcome,
    "enum": enum,
    "trigger_text": trigger_text,
    "schedule_text": schedule_text,
    "relative": relative,
    "took": took,
    "q": quote,
    "tail": tail,
    "duration": duration_text,
    "span": _span,
}

# -- sign-in -----------------------------------------------------------------------------------


def login_page(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    if not ctx.console.auth_on:
        return Redirect("/")
    return View("login.html", {"next": local_path(ctx.arg("next")) or "/", "error": ""}, title="Sign in")


def login(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    if not ctx.console.auth_on:
        return Redirect("/")
    token = ctx.form.get("token", "").strip()
    back = local_path(ctx.form.get("next", "")) or "/"
    try:
        principal = ctx.console.node.tokens.check(token)
    except Unauthenticated as exc:
        return View("login.html", {"next": back, "error": f"sign-in refused: {exc}"}, 401, "Sign in")
    except Unavailable as exc:  # a follower that has not applied the token yet
        error = f"sign-in not possible here yet: {exc}"
        return View("login.html", {"next": back, "error": error}, 503, "Sign in")
    session = ctx.console.sessions.sign_in(ctx.session, token, principal)
    ctx.extra["new_session"] = session
    return Redirect(back, ("ok", f"signed in as {principal.id} ({principal.role})"))


def logout(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    ctx.console.sessions.drop(ctx.session.sid)
    session = ctx.console.sessions.new()
    ctx.extra["new_session"] = session
    return Redirect("/login" if ctx.console.auth_on else "/", ("ok", "signed out"))


# -- cluster -----------------------------------------------------------------------------------


def cluster(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    digests = ctx.arg("digests") == "1"
    # Every node's status and the executors: cluster-wide reads on the page most often left open,
    # so read at most once a second per credential (see raftsched.web.cache; digests: always).
    view = (
        ctx.client.cluster_status(digests=True)
        if digests
        else ctx.cached("cluster_status", ctx.client.cluster_status)
    )
    executors = ctx.cached("list_executors", ctx.client.list_executors)
    return View(
        "cluster.html",
        {
            "view": view,
            "executors": executors,
            "digests": digests,
            "refresh": 0 if digests else REFRESH_S,
        },
        title="Cluster",
    )


# -- tasks -------------------------------------------------------------------------------------


def tasks(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    prefix, namespace, page = ctx.arg("q"), ctx.arg("ns"), ctx.page()
    # Tasks come in name order; one more than the page asks for says whether there is a next.
    size = TASKS_PER_PAGE
    want = page * size + 1
    if namespace:
        # A namespace filter reads up to 10 pages' worth (a prefix narrows it further), then
        # each shown task's strip (the exact name sorts first among names it prefixes).
        records = [
            r
            for r in ctx.client.list_tasks(prefix=prefix, limit=want * 10)
            if (r.spec.namespace or "default") == namespace
        ]
        shown = records[(page - 1) * size : page * size]
        recent = _parallel(lambda r: ctx.client.list_tasks_recent(r.spec.name, 1, STRIP)[0][1], shown)
    else:
        # One call: the tasks up to this page, each with its newest fires and their runs' states.
        rows = ctx.client.list_tasks_recent(prefix=prefix, limit=want, fires=STRIP)
        records = [rec for rec, _ in rows]
        shown = records[(page - 1) * size : page * size]
        recent = [fires for _, fires in rows[(page - 1) * size : page * size]]
    more = len(records) > page * size
    pager = Pager(page, page + (1 if more else 0), -1, more)
    return View(
        "tasks.html",
        {
            "tasks": [(rec, s, _strip_html(s)) for rec, s in zip(shown, map(_strip, recent), strict=True)],
            "q": prefix,
            "ns": namespace,
            "pager": pager,
            "strip": STRIP,
            "refresh": REFRESH_S,
        },
        title="Tasks",
    )


def _strip(recent: pb.RecentFires) -> list[tuple[str, str, str]]:
    """A task's newest fires, oldest first, as ``(state, title, link)``: each one's outcome, or its
    run's state if it fired (then ``link`` is its run's page). Built here rather than in the
    template: the strip is most of the task list's rendering."""
    out = []
    for fire, state in zip(recent.fires, recent.run_states, strict=True):
        name = (_RUN_STATE_NAMES.get(state) or run_state(state)) if state else _outcome_name(fire.outcome)
        title = f"{_iso(fire.nominal_ms)}: {name}" + (f" ({fire.count} fires)" if fire.count > 1 else "")
        out.append((name, title, f"/runs/{_segment(fire.run_id)}" if fire.run_id else ""))
    return out


def _strip_html(strip: list[tuple[str, str, str]]) -> Any:
    """The strip's ticks as HTML, every value escaped (25 rows of 10 ticks were a third of the
    task list's CPU when the template looped over them)."""
    parts = []
    for state, title, link in strip:
        cls, tip = html.escape(state), html.escape(title)
        if link:
            parts.append(f'<a href="{html.escape(link)}" class="tick s-{cls}" title="{tip}"></a>')
        else:
            parts.append(f'<span class="tick s-{cls}" title="{tip}"></span>')
    return trusted_html("".join(parts))


_RUN_STATE_NAMES: Final = {n: enum_name(pb.RunState, n) for n in pb.RunState.DESCRIPTOR.values_by_number}
_OUTCOME_NAMES: Final = {n: enum_name(pb.FireOutcome, n) for n in pb.FireOutcome.DESCRIPTOR.values_by_number}
_SAFE_SEGMENT: Final = re.compile(r"[A-Za-z0-9_.~-]*")


def _outcome_name(value: int) -> str:
    return _OUTCOME_NAMES.get(value) or outcome(value)


@functools.lru_cache(maxsize=4096)
def _iso(ms: int) -> str:
    """:func:`iso`, remembered: the strips of a page share their nominal times."""
    return iso(ms)


def _segment(text: str) -> str:
    """:func:`quote` without its cost for the usual run id (nothing to quote)."""
    return text if _SAFE_SEGMENT.fullmatch(text) else quote(text)


def task(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    name = m["name"]
    rec = ctx.client.get_task(name)
    window = ctx.arg("window", "1h")
    window_ms = _FIRE_WINDOWS.get(window, _FIRE_WINDOWS["1h"])
    since = max(0, ctx.now_ms - window_ms)
    # Only what the pages shown need (plus one, to know whether there is a next page).
    runs_page, fires_page = _int(ctx.arg("runs_page"), 1), _int(ctx.arg("fires_page"), 1)
    runs = ctx.client.runs(name, limit=runs_page * PAGE_SIZE + 1)
    fires = ctx.client.fire_accounting(name, since_ms=since, limit=fires_page * PAGE_SIZE + 1, newest=True)
    fires_newest = list(reversed(fires))
    run_pager = _pager(runs_page, len(runs))
    fire_pager = _pager(fires_page, len(fires))
    explained = None
    at_text = ctx.arg("at")
    explain_error = ""
    if at_text:
        try:
            explained = ctx.client.explain(name, _parse_time(at_text))
        except InvalidSpec as exc:
            explain_error = str(exc)
    counts: dict[str, int] = {}
    for fire in fires:
        counts[outcome(fire.outcome)] = counts.get(outcome(fire.outcome), 0) + max(fire.count, 1)
    scheduled = rec.spec.trigger.WhichOneof("kind") in ("cron", "interval")
    return View(
        "task.html",
        {
            "scheduled": scheduled,
            "task_backfills": ctx.client.list_task_backfills(name)[:10] if scheduled else [],
            "rec": rec,
            "spec": rec.spec,
            "runs": runs[(runs_page - 1) * PAGE_SIZE : runs_page * PAGE_SIZE],
            "run_pager": run_pager,
            "fires": fires_newest[(fires_page - 1) * PAGE_SIZE : fires_page * PAGE_SIZE],
            "fire_pager": fire_pager,
            "fire_counts": sorted(counts.items()),
            "fire_records": len(fires),
            "window": window,
            "windows": list(_FIRE_WINDOWS),
            "at": at_text,
            "explained": explained,
            "explain_error": explain_error,
            "refresh": 0 if at_text else REFRESH_S,
            # SLA and freshness states (met / missed by X / pending) for the newest run.
            "sla": sla_details(rec, runs[0] if runs else None, ctx.now_ms),
        },
        title=f"Task {name}",
    )


def _pager(page: int, fetched: int) -> Pager:
    """The pager of page ``page`` when ``page * PAGE_SIZE + 1`` items were asked for."""
    more = fetched > page * PAGE_SIZE
    return Pager(page, page + (1 if more else 0), -1, more)


def set_enabled(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    name, on = m["name"], m["what"] == "enable"
    if on:
        ctx.client.enable_task(name)
    else:
        ctx.client.disable_task(name)
    return _back(ctx, f"/tasks/{quote(name)}", f"task {name} {'enabled' if on else 'disabled'}")


def trigger(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    name = m["name"]
    run = ctx.client.trigger(name)
    return _back(ctx, f"/runs/{quote(run.run_id)}", f"triggered {name}: run {run.run_id}")


# -- runs --------------------------------------------------------------------------------------


def get_run(ctx: Ctx, run_id: str) -> pb.Run:
    """Run ``run_id`` with its shards, output tails and timeline. Raises NotFound."""
    return ctx.client.get_run(run_id)


DOWNLOAD_PATH: Final = "/download/log"
"""An attempt's full log as a file (``Console.download_log``, streamed)."""
LIVE_TAIL_BYTES: Final = 16 * 1024
"""How much of a running attempt's stdout the run page shows (refreshed with the page)."""


def live_tails(ctx: Ctx, record: pb.Run) -> dict[int, tuple[str, str]]:
    """``shard -> (text, note)``: the last :data:`LIVE_TAIL_BYTES` of each running shard's
    stdout, read from its executor through the leader (full logs); ``note`` says why only the
    stored tail (or nothing) is shown."""
    out: dict[int, tuple[str, str]] = {}
    for s in record.shards:
        if s.state != pb.RUNNING or not s.executor:
            continue
        data, note = bytearray(), ""
        try:
            for chunk in ctx.client.logs(record.run_id, shard=s.shard, tail_bytes=LIVE_TAIL_BYTES):
                if chunk.HasField("header") and chunk.header.source != "executor":
                    note = chunk.header.note
                data += chunk.data
        except Unauthenticated:
            raise
        except RaftschedError as exc:
            note = f"the live output is not available: {exc}"
        out[s.shard] = (bytes(data).decode("utf-8", "replace"), note)
    return out


def run(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    record = get_run(ctx, m["id"])
    task_spec: pb.TaskSpec | None = None
    with contextlib.suppress(NotFound):
        task_spec = ctx.client.get_task(record.task).spec if "#" not in record.task else None
    namespace = task_spec.namespace if task_spec is not None else ""
    timeline = list(record.timeline)
    finished = record.state in (pb.SUCCEEDED, pb.FAILED, pb.CANCELLED)
    return View(
        "run.html",
        {
            "run": record,
            "namespace": namespace,
            "timeline": timeline,
            "finished": finished,
            "refresh": 0 if finished else REFRESH_S,
            "live_tails": live_tails(ctx, record),
            "download": DOWNLOAD_PATH,
            "gate": crossflow.task_run_gate(ctx, record, task_spec),
        },
        title=f"Run {record.run_id}",
    )


def retry(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    run_id = m["id"]
    ctx.client.retry(run_id)
    return _back(ctx, f"/runs/{quote(run_id)}", f"retry of {run_id} requested")


def cancel_run(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    run_id = m["id"]
    reason = ctx.form.get("reason", "").strip() or "from the web console"
    ctx.client.cancel_run(run_id, reason)
    return _back(ctx, f"/runs/{quote(run_id)}", f"cancelled {run_id}")


def cancel_task_runs(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    """The task page's bulk form: list (dry run) or cancel the task's unfinished runs."""
    name = m["name"]
    dry_run = ctx.form.get("dry_run", "") == "1"
    reason = ctx.form.get("reason", "").strip() or "from the web console"
    run_ids = ctx.client.cancel_runs(
        task=name, state=ctx.form.get("state", ""), dry_run=dry_run, reason=reason
    )
    shown = ", ".join(run_ids[:20]) + (f" and {len(run_ids) - 20} more" if len(run_ids) > 20 else "")
    verb = "would cancel" if dry_run else "cancelled"
    return _back(ctx, f"/tasks/{quote(name)}", f"{verb} {len(run_ids)} run(s){': ' + shown if shown else ''}")


# -- workflows ---------------------------------------------------------------------------------


def workflows(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    prefix = ctx.arg("q")
    records = ctx.client.list_workflows(prefix=prefix)
    shown, pager = paginate(records, ctx.page())
    return View(
        "workflows.html",
        {"workflows": shown, "pager": pager, "q": prefix, "refresh": REFRESH_S},
        title="Workflows",
    )


def workflow(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    name = m["name"]
    rec = ctx.client.get_workflow(name)
    focus = ctx.arg("task")
    up: list[tuple[str, int]] = []
    down: list[tuple[str, int]] = []
    if focus:
        up, down = ctx.client.lineage(name, focus)
    dag = dag_geometry(rec.spec, None, focus, [t for t, _ in up], [t for t, _ in down])
    cross = crossflow.workflow_context(ctx, rec.spec, focus, [t for t, _ in up], [t for t, _ in down])
    runs = ctx.client.list_workflow_runs(name, limit=200)
    shown, pager = paginate(runs, ctx.page())
    backfills = ctx.client.list_backfills(name)
    return View(
        "workflow.html",
        {
            "rec": rec,
            "spec": rec.spec,
            "dag": dag,
            "focus": focus,
            "upstream": up,
            "downstream": down,
            "runs": shown,
            "pager": pager,
            "backfills": backfills[-10:][::-1],
            "refresh": REFRESH_S,
            "sla": workflow_sla_details(rec, _latest_scheduled(runs), ctx.now_ms),
            **cross,
        },
        title=f"Workflow {name}",
    )


def _latest_scheduled(runs: list[pb.WorkflowRun]) -> pb.WorkflowRun | None:
    """The newest run the schedule started (SLAs apply to those only), if any is listed."""
    return next((r for r in runs if not r.manual and not r.backfill_id), None)


def workflow_run(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    run_id = m["id"]
    record = ctx.client.get_workflow_run(run_id)
    spec = ctx.client.get_workflow(record.workflow, record.version).spec
    cross = crossflow.run_context(ctx, record, spec)
    # A task held by its earliest start is WAITING, as `workflow status` shows it.
    states = {t.name: "waiting" if t.name in cross["gates"] else task_state(t.state) for t in record.tasks}
    dag = dag_geometry(spec, states, edge_states=crossflow.edge_states(record))
    finished = record.state != pb.WORKFLOW_RUNNING
    end = record.finished_ms if finished and record.finished_ms else ctx.now_ms
    rows = [(t.name, [(task_state(e.state), e.at_ms) for e in t.timeline]) for t in record.tasks]
    start = (
        min((at for _, changes in rows for _, at in changes), default=record.created_ms) or record.created_ms
    )
    gantt = gantt_geometry(rows, start, end)
    task_runs = _parallel(lambda t: _task_run(ctx, t.run_id), list(record.tasks))
    return View(
        "workflow_run.html",
        {
            "run": record,
            "spec": spec,
            "sla": workflow_sla_details(ctx.client.get_workflow(record.workflow), record, ctx.now_ms, spec),
            "namespace": spec.namespace,
            "dag": dag,
            "gantt": gantt,
            "tasks": list(zip(record.tasks, task_runs, strict=True)),
            "finished": finished,
            "refresh": REFRESH_S,
            **cross,
        },
        title=f"Workflow run {run_id}",
    )


def _task_run(ctx: Ctx, run_id: str) -> pb.Run | None:
    if not run_id:
        return None
    try:
        return get_run(ctx, run_id)
    except NotFound:
        return None


def start_workflow_run(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    name = m["name"]
    record = ctx.client.start_workflow_run(name)
    return _back(ctx, f"/workflow-runs/{quote(record.run_id)}", f"started {record.run_id}")


def operate_workflow_run(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    run_id, op = m["id"], m["op"]
    task_name = ctx.form.get("task", "")
    reason = ctx.form.get("reason", "").strip() or "from the web console"
    here = f"/workflow-runs/{quote(run_id)}"
    if op == "kill":
        ctx.client.kill_workflow_run(run_id, reason)
        return _back(ctx, here, f"killed {run_id}")
    if op == "rerun":
        ctx.client.rerun_workflow_task(run_id, task_name)
        return _back(ctx, here, f"rerunning {task_name} and everything downstream of it")
    ctx.client.mark_task_success(run_id, task_name, reason)
    return _back(ctx, here, f"marked {task_name} succeeded")


# -- backfills ---------------------------------------------------------------------------------


def backfills(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    records = ctx.client.list_workflows()
    shown, pager = paginate(records, ctx.page(), 20)
    lists = _parallel(lambda w: ctx.client.list_backfills(w.spec.name), list(shown))
    rows = [b for found in lists for b in found]
    rows.sort(key=lambda b: b.created_ms, reverse=True)
    return View(
        "backfills.html", {"backfills": rows, "pager": pager, "refresh": REFRESH_S}, title="Backfills"
    )


def backfill(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    record = ctx.client.get_backfill(m["id"])
    found: Sequence[Any] = (
        ctx.client.runs(record.task, limit=1000)
        if record.task
        else ctx.client.list_workflow_runs(record.workflow, limit=1000)
    )
    runs = [r for r in found if r.backfill_id == record.backfill_id]
    shown, pager = paginate(runs, ctx.page())
    return View(
        "backfill.html",
        {"b": record, "runs": shown, "pager": pager, "refresh": 0 if record.finished_ms else REFRESH_S},
        title=f"Backfill {record.backfill_id}",
    )


def start_backfill(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    name = m["name"]
    try:
        start = _parse_day_or_time(ctx.form.get("start", ""), "start")
        end = _parse_day_or_time(ctx.form.get("end", ""), "end")
    except InvalidSpec as exc:
        return _back(ctx, f"/workflows/{quote(name)}", str(exc), "error")
    record = ctx.client.backfill(name, start, end)
    return _back(
        ctx,
        f"/backfills/{quote(record.backfill_id)}",
        f"backfill {record.backfill_id}: {record.runs_total} runs",
    )


def start_task_backfill(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    name = m["name"]
    try:
        start = _parse_day_or_time(ctx.form.get("start", ""), "start")
        end = _parse_day_or_time(ctx.form.get("end", ""), "end")
    except InvalidSpec as exc:
        return _back(ctx, f"/tasks/{quote(name)}", str(exc), "error")
    record = ctx.client.backfill_task(name, start, end)
    return _back(
        ctx,
        f"/backfills/{quote(record.backfill_id)}",
        f"backfill {record.backfill_id}: {record.runs_total} runs ({record.runs_skipped} skipped)",
    )


# -- alerts and audit --------------------------------------------------------------------------


def alerts(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    found = list(reversed(ctx.client.alerts(limit=1000)))
    shown, pager = paginate(found, ctx.page())
    return View("alerts.html", {"alerts": shown, "pager": pager, "refresh": REFRESH_S}, title="Alerts")


def ack(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    ctx.client.ack_alert(m["id"])
    return _back(ctx, "/alerts", f"acknowledged {m['id']}")


def audit(ctx: Ctx, m: re.Match[str]) -> View | Redirect:
    who = ctx.arg("principal")
    records = ctx.client.audit(principal=who, limit=1000)
    shown, pager = paginate(records, ctx.page())
    return View(
        "audit.html", {"records": shown, "pager": pager, "who": who, "refresh": REFRESH_S}, title="Audit"
    )


# -- helpers -----------------------------------------------------------------------------------


def _back(ctx: Ctx, default: str, message: str, kind: str = "ok") -> Redirect:
    return Redirect(local_path(ctx.form.get("back", "")) or default, (kind, message))


def _parallel(fn: Callable[[Any], T], items: Iterable[Any]) -> list[T]:
    return list(_POOL.map(fn, items))


def _int(text: str, default: int) -> int:
    try:
        return max(1, int(text))
    except ValueError:
        return default


def _parse_time(text: str) -> int:
    """Epoch ms of ``text``: digits (epoch ms) or ISO 8601 (UTC unless it names an offset)."""
    text = text.strip()
    if text.isdigit():
        return int(text)
    try:
        moment = dt.datetime.fromisoformat(text)
    except ValueError:
        raise InvalidSpec(
            "at", f"{text!r} is not an ISO 8601 time (2026-01-02T03:04:05Z) or epoch ms"
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=dt.UTC)
    return int(moment.timestamp() * 1000)


def _parse_day_or_time(text: str, what: str) -> int | dt.date:
    text = text.strip()
    if not text:
        raise InvalidSpec(what, "required (a date such as 2026-01-02, or an ISO 8601 time)")
    if re.fullmatch(r"\d{4}-\d{2}-\d{2}", text):
        return dt.date.fromisoformat(text)
    return _parse_time(text)


_NAME: Final = r"(?P<name>[^/]+)"
_ID: Final = r"(?P<id>[^/]+)"

ROUTES: Final[list[tuple[str, str, Callable[[Ctx, re.Match[str]], View | Redirect], bool]]] = [
    ("GET", r"/login", login_page, True),
    ("POST", r"/login", login, True),
    ("POST", r"/logout", logout, True),
    ("GET", r"/(cluster)?", cluster, False),
    ("GET", r"/tasks", tasks, False),
    ("GET", rf"/tasks/{_NAME}", task, False),
    ("POST", rf"/tasks/{_NAME}/(?P<what>enable|disable)", set_enabled, False),
    ("POST", rf"/tasks/{_NAME}/trigger", trigger, False),
    ("GET", rf"/runs/{_ID}", run, False),
    ("POST", rf"/runs/{_ID}/retry", retry, False),
    ("GET", r"/workflows", workflows, False),
    ("GET", rf"/workflows/{_NAME}", workflow, False),
    ("POST", rf"/workflows/{_NAME}/start", start_workflow_run, False),
    ("POST", rf"/workflows/{_NAME}/backfill", start_backfill, False),
    ("GET", rf"/workflow-runs/{_ID}", workflow_run, False),
    ("POST", rf"/workflow-runs/{_ID}/(?P<op>kill|rerun|mark-success)", operate_workflow_run, False),
    ("GET", r"/backfills", backfills, False),
    ("GET", rf"/backfills/{_ID}", backfill, False),
    ("GET", r"/alerts", alerts, False),
    ("POST", rf"/alerts/{_ID}/ack", ack, False),
    ("GET", r"/audit", audit, False),
    *EDIT_ROUTES,
    *pools.ROUTES,
    ("POST", rf"/tasks/{_NAME}/backfill", start_task_backfill, False),
    ("POST", rf"/runs/{_ID}/cancel", cancel_run, False),
    ("POST", rf"/tasks/{_NAME}/cancel-runs", cancel_task_runs, False),
    *crossflow.ROUTES,
]
"""``(method, path regex, view, open to signed-out visitors)``; the first full match wins."""
