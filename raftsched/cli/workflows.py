"""Workflow commands: ``workflow apply|list|show|pause|resume|delete|run|runs|status|graph|kill|
rerun|mark-success|lineage|backfill|backfill-status|backfills``."""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

from raftsched.cli.cluster import connect
from raftsched.cli.errors import UsageError, fail
from raftsched.cli.input import backfill_end, lazy_now, params_from_args, parse_time
from raftsched.cli.render import (
    can_print,
    cross_lineage,
    deps_text,
    graph_dict,
    print_fields,
    print_json,
    print_table,
    progress_bar,
    render_graph,
    render_status,
    resource_text,
    run_kind,
    tasks_done_text,
    to_dict,
    wait_lines,
)
from raftsched.cli.tasks import keep_text, locks_text
from raftsched.display import duration_text, enum_name, iso, schedule_text, wf_state
from raftsched.errors import RaftschedError
from raftsched.timing import sla
from raftsched.v1 import raftsched_pb2 as pb
from raftsched.workflow.dag import CrossNode

if TYPE_CHECKING:
    from raftsched.client import Client

__all__ = [
    "BACKFILL_POLL_S",
    "backfill_line",
    "cmd_wf_apply",
    "cmd_wf_backfill",
    "cmd_wf_backfill_status",
    "cmd_wf_backfills",
    "cmd_wf_delete",
    "cmd_wf_explain",
    "cmd_wf_graph",
    "cmd_wf_kill",
    "cmd_wf_lineage",
    "cmd_wf_list",
    "cmd_wf_mark_success",
    "cmd_wf_pause",
    "cmd_wf_rerun",
    "cmd_wf_resume",
    "cmd_wf_run",
    "cmd_wf_runs",
    "cmd_wf_show",
    "cmd_wf_status",
    "watch_backfill",
]

BACKFILL_POLL_S = 1.0
# The one place the CLI waits (backfill --wait); a module attribute so tests record instead of sleeping.
_sleep: Callable[[float], None] = time.sleep


def cmd_wf_apply(args: argparse.Namespace) -> int:
    from raftsched.workflow.files import load_workflow_file  # YAML/TOML reading only when used

    spec = load_workflow_file(args.file)
    if args.dry_run:
        print(f"{args.file}: workflow {spec.name} is valid ({len(spec.tasks)} tasks; not applied)")
        return 0
    with connect(args) as client:
        record, changed = client.apply_workflow(spec)
    name = record.spec.name or spec.name
    if changed:
        first = " (created)" if record.version == 1 else ""
        print(f"applied workflow {name}: version {record.version}{first}")
    else:
        print(f"workflow {name} unchanged (version {record.version})")
    if record.next_fire_ms:
        print(f"next scheduled run: {iso(record.next_fire_ms)}")
    return 0


def cmd_wf_list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        workflows = client.list_workflows(prefix=args.prefix)
    if args.json:
        return print_json([to_dict(w) for w in workflows])
    rows = [
        [
            w.spec.name,
            str(w.version),
            schedule_text(w.spec) + (" (paused)" if w.paused else ""),
            iso(w.next_fire_ms),
            str(len(w.spec.tasks)),
            str(w.active_runs),
            str(w.runs_total),
        ]
        for w in workflows
    ]
    print_table(["NAME", "VERSION", "SCHEDULE", "NEXT RUN (UTC)", "TASKS", "ACTIVE", "RUNS"], rows)
    return 0


def cmd_wf_show(args: argparse.Namespace) -> int:
    with connect(args) as client:
        record = client.get_workflow(args.name, args.version)
    if args.json:
        return print_json(to_dict(record))
    s = record.spec
    fields = [
        ("name", s.name),
        ("version", str(record.version)),
        (
            "schedule",
            schedule_text(s) + (" (paused: 'workflow resume' to schedule it again)" if record.paused else ""),
        ),
        ("next run", iso(record.next_fire_ms)),
        ("exclude", ", ".join(s.exclude) or "-"),
        ("misfire", enum_name(pb.MisfirePolicy, s.misfire) if s.misfire else "latest"),
        ("overlap", enum_name(pb.OverlapPolicy, s.overlap) if s.overlap else "skip"),
        ("jitter", duration_text(s.jitter_ms) if s.jitter_ms else "none"),
        ("sla start", duration_text(s.sla_start_within_ms) if s.sla_start_within_ms else "none"),
        ("sla finish", duration_text(s.sla_finish_within_ms) if s.sla_finish_within_ms else "none"),
        (
            "freshness",
            f"{duration_text(s.freshness_ms)}: {sla.freshness_state(record, lazy_now()())}"
            if s.freshness_ms
            else "none",
        ),
        (
            "last success",
            f"{iso(record.last_success_ms)} ({record.last_success_run})" if record.last_success_ms else "-",
        ),
        ("parallel per run", str(s.max_parallel_per_run or "unlimited")),
        ("parallel overall", str(s.max_parallel or "unlimited")),
        ("backfill share", f"{s.backfill_share_pct or 30}% of executor slots"),
        ("params", s.params_json or "-"),
        ("owner", s.owner or "-"),
        ("description", s.description or "-"),
        ("created", iso(record.created_ms)),
        ("updated", iso(record.updated_ms)),
        ("active runs", str(record.active_runs)),
        ("runs total", str(record.runs_total)),
        ("retention", keep_text(s.keep_runs, s.keep_for_ms)),
    ]
    print_fields(fields)
    print()
    rows = [
        [
            t.name,
            deps_text(t),
            "any" if t.trigger_rule == pb.RULE_ANY else "all",
            t.not_before or "-",
            f"handler {t.handler}" if t.handler else t.command,
            str(t.max_retries),
            duration_text(t.timeout_ms) if t.timeout_ms else "-",
            str(t.shards or 1),
            str(t.priority),
            locks_text(t.locks),
            t.runner or "shell",
            resource_text(t.resource_cpu, t.resource_memory_mb),
            ",".join(f"{k}={v}" for k, v in sorted(t.selector.items())) or "-",
        ]
        for t in s.tasks
    ]
    print_table(
        [
            "TASK",
            "DEPENDS ON",
            "RULE",
            "NOT BEFORE",
            "RUNS",
            "RETRIES",
            "TIMEOUT",
            "SHARDS",
            "PRIORITY",
            "LOCKS",
            "RUNNER",
            "RESOURCE",
            "SELECTOR",
        ],
        rows,
    )
    return 0


def cmd_wf_pause(args: argparse.Namespace) -> int:
    with connect(args) as client:
        record = client.pause_workflow(args.name)
    print(f"paused workflow {record.spec.name or args.name}: no scheduled runs until 'workflow resume'")
    return 0


def cmd_wf_resume(args: argparse.Namespace) -> int:
    with connect(args) as client:
        record = client.resume_workflow(args.name)
    name = record.spec.name or args.name
    nxt = f"; next scheduled run {iso(record.next_fire_ms)}" if record.next_fire_ms else " (no schedule)"
    print(f"resumed workflow {name}{nxt}")
    return 0


def cmd_wf_delete(args: argparse.Namespace) -> int:
    if args.reason and not args.force:
        raise UsageError("--reason applies with --force (it is recorded in the runs it kills)")
    with connect(args) as client:
        record, killed = client.delete_workflow(args.name, force=args.force, reason=args.reason)
    runs = f", killed {killed} active run(s)" if killed else ""
    print(f"deleted workflow {record.spec.name or args.name} (version {record.version}){runs}")
    return 0


def cmd_wf_run(args: argparse.Namespace) -> int:
    logical = 0 if args.logical is None else parse_time(args.logical, lazy_now(), "--logical")
    params = params_from_args(args.params, args.param)
    with connect(args) as client:
        run = client.start_workflow_run(args.name, logical, params or None)
    print(f"started {run.run_id} (workflow {run.workflow} v{run.version}, logical {iso(run.logical_ms)})")
    print(f"follow it: raftsched workflow status {run.run_id}  /  raftsched workflow graph {run.run_id}")
    return 0


def cmd_wf_runs(args: argparse.Namespace) -> int:
    with connect(args) as client:
        runs = client.list_workflow_runs(args.name, limit=args.limit, active_only=args.active)
    if args.json:
        return print_json([to_dict(r) for r in runs])
    rows = [
        [
            r.run_id,
            str(r.version),
            iso(r.logical_ms),
            wf_state(r.state),
            run_kind(r),
            tasks_done_text(r),
            iso(r.created_ms),
            iso(r.finished_ms),
        ]
        for r in runs
    ]
    print_table(["RUN", "VERSION", "LOGICAL (UTC)", "STATE", "KIND", "TASKS OK", "CREATED", "FINISHED"], rows)
    return 0


def cmd_wf_status(args: argparse.Namespace) -> int:
    with connect(args) as client:
        run = client.get_workflow_run(args.run_id)
        gates: dict[str, str] = {}
        if not args.json and any(t.not_before_ms for t in run.tasks):
            try:  # the gates as the file writes them ("02:00"); the version may be pruned or gone
                spec = client.get_workflow(run.workflow, run.version).spec
                gates = {t.name: t.not_before for t in spec.tasks if t.not_before}
            except RaftschedError:
                pass
    if args.json:
        return print_json(to_dict(run))
    for line in render_status(run, lazy_now()(), gates):
        print(line)
    return 0


def cmd_wf_graph(args: argparse.Namespace) -> int:
    run: pb.WorkflowRun | None = None
    with connect(args) as client:
        if "@" in args.target:
            if args.version:
                raise UsageError("--version applies to a workflow name; a run has its own version")
            run = client.get_workflow_run(args.target)
            record = client.get_workflow(run.workflow, run.version)
        else:
            record = client.get_workflow(args.target, args.version)
    if args.json:
        return print_json(graph_dict(record.spec, record.version, run))
    ascii_only = args.ascii or not can_print("✓←⊘■▶…")
    for line in render_graph(record.spec, record.version, run, ascii_only=ascii_only):
        print(line)
    return 0


def cmd_wf_kill(args: argparse.Namespace) -> int:
    with connect(args) as client:
        run = client.kill_workflow_run(args.run_id, args.reason)
    print(f"killed {run.run_id}: {wf_state(run.state)}")
    return 0


def cmd_wf_rerun(args: argparse.Namespace) -> int:
    with connect(args) as client:
        run = client.rerun_workflow_task(args.run_id, args.task)
    again = [t.name for t in run.tasks if t.state in (pb.TASK_WAITING, pb.TASK_READY, pb.TASK_RUNNING)]
    print(f"rerunning {args.task} in {run.run_id}: {len(again)} task(s) to run ({', '.join(again) or '-'})")
    return 0


def cmd_wf_mark_success(args: argparse.Namespace) -> int:
    with connect(args) as client:
        run = client.mark_task_success(args.run_id, args.task, args.reason)
    print(f"marked {args.task} succeeded in {run.run_id} (run {wf_state(run.state)})")
    return 0


def cmd_wf_waits(args: argparse.Namespace) -> int:
    """What waits on what across workflows: every cross-workflow edge still waiting."""
    with connect(args) as client:
        rows = client.workflow_waits(args.upstream or None)
    if args.json:
        return print_json(rows)
    if not rows:
        print("nothing waits on another workflow")
        return 0
    for line in wait_lines(rows):
        print(line)
    held: dict[str, int] = {}
    for r in rows:
        held[str(r["upstream"])] = held.get(str(r["upstream"]), 0) + 1
    print()
    print("; ".join(f"{name} holds {n} task(s)" for name, n in sorted(held.items())))
    return 0


def cmd_wf_explain(args: argparse.Namespace) -> int:
    """Why a task of a workflow run is not running (or how it ended)."""
    with connect(args) as client:
        got = client.explain_workflow_task(args.run_id, args.task)
    if args.json:
        return print_json(got.to_dict())
    print(got.verdict)
    for line in got.details:
        print(f"  {line}")
    return 0


def _node_dict(n: CrossNode) -> dict[str, object]:
    return {
        "workflow": n.workflow,
        "task": n.task,
        "hop": n.hop,
        "logical_offset_ms": n.logical_offset_ms,
        "via": n.via,
    }


def _node_text(n: CrossNode) -> str:
    shift = f" (logical {duration_text(n.logical_offset_ms)})" if n.logical_offset_ms else ""
    return f"{n.label}{shift}" + (f"  via {n.via}" if n.hop > 1 else "")


def cmd_wf_lineage(args: argparse.Namespace) -> int:
    with connect(args) as client:
        upstream, downstream = client.lineage(args.name, args.task, args.version)
        spec = client.get_workflow(args.name, args.version).spec
        others = [w.spec for w in client.list_workflows() if w.spec.name != args.name]
        far_up, far_down, truncated = client.cross_lineage(args.name, args.task, args.depth)
    ups, downs = cross_lineage(
        args.name, args.task, spec, [t for t, _ in upstream], [t for t, _ in downstream], others
    )
    if args.json:
        return print_json(
            {
                "workflow": args.name,
                "task": args.task,
                "upstream": [{"task": t, "depth": d} for t, d in upstream],
                "downstream": [{"task": t, "depth": d} for t, d in downstream],
                "upstream_workflows": ups,
                "downstream_workflows": downs,
                "cross_upstream": [_node_dict(n) for n in far_up],
                "cross_downstream": [_node_dict(n) for n in far_down],
                "truncated": truncated,
            }
        )
    for title, entries in (("upstream", upstream), ("downstream", downstream)):
        print(f"{title} of {args.task}: {len(entries)} task(s)")
        for task, depth in entries:
            print(f"  {depth}  {'  ' * (depth - 1)}{task}")
    for title, nodes in (("upstream", far_up), ("downstream", far_down)):
        if nodes:
            print(f"{title} in other workflows (hops, transitively):")
            for n in nodes:
                print(f"  {n.hop}  {'  ' * (n.hop - 1)}{_node_text(n)}")
    if truncated:
        print("(cut short: more than 500 workflow tasks; narrow it with --depth)")
    return 0


def cmd_wf_backfill(args: argparse.Namespace) -> int:
    now = lazy_now()
    start = parse_time(args.from_, now, "--from")
    end = backfill_end(args.to, now)
    params = params_from_args(args.params, args.param)
    with connect(args) as client:
        record = client.backfill(args.name, start, end, params or None)
        print(
            f"backfill {record.backfill_id}: {record.runs_total} run(s) of {record.workflow}, "
            f"logical times {iso(record.from_ms)} .. {iso(record.to_ms)}, "
            f"at most {record.share_pct or 30}% of executor slots"
        )
        if not args.wait:
            print(
                f"watch it: raftsched workflow backfill-status {record.backfill_id} --wait"
                f"  (runs: raftsched workflow runs {record.workflow})"
            )
            return 0
        return watch_backfill(client, record)


def cmd_wf_backfill_status(args: argparse.Namespace) -> int:
    with connect(args) as client:
        record = client.get_backfill(args.backfill_id)
        if args.json:
            return print_json(to_dict(record))
        if args.wait:
            return watch_backfill(client, record)
    print(backfill_line(record))
    return 0


def cmd_wf_backfills(args: argparse.Namespace) -> int:
    with connect(args) as client:
        records = client.list_backfills(args.name)
    if args.json:
        return print_json([to_dict(b) for b in records])
    rows = [
        [
            b.backfill_id,
            iso(b.from_ms),
            iso(b.to_ms),
            progress_bar(b.runs_finished, b.runs_total, width=10),
            str(b.runs_failed),
            f"{b.share_pct or 30}%",
            iso(b.created_ms),
            iso(b.finished_ms),
        ]
        for b in records
    ]
    print_table(["BACKFILL", "FROM", "TO", "PROGRESS", "FAILED", "SHARE", "CREATED", "FINISHED"], rows)
    return 0


def watch_backfill(client: Client, record: pb.BackfillRecord, *, as_json: bool = False) -> int:
    """Poll the backfill until every run finished, redrawing a progress bar (one line per change
    when stdout is not a terminal; ``as_json``: no bar, the final record as JSON). Exit status 1
    if any run failed."""
    tty = sys.stdout.isatty() and not as_json
    last = ""
    while not as_json:
        line = progress_bar(record.runs_finished, record.runs_total) + (
            f", {record.runs_failed} failed" if record.runs_failed else ""
        )
        if line != last:
            if tty:
                print("\r" + line.ljust(len(last)), end="", flush=True)
            else:
                print(line, flush=True)
            last = line
        if _backfill_done(record):
            break
        _sleep(BACKFILL_POLL_S)
        record = client.get_backfill(record.backfill_id)
    while as_json and not _backfill_done(record):
        _sleep(BACKFILL_POLL_S)
        record = client.get_backfill(record.backfill_id)
    if tty:
        print()
    if as_json:
        print_json(to_dict(record))
    else:
        print(backfill_line(record))
    if record.runs_failed:
        return fail(f"backfill {record.backfill_id}: {record.runs_failed} run(s) failed", 1)
    return 0


def _backfill_done(record: pb.BackfillRecord) -> bool:
    return bool(record.finished_ms) or record.runs_finished >= record.runs_total


def backfill_line(b: pb.BackfillRecord) -> str:
    state = f"finished {iso(b.finished_ms)}" if _backfill_done(b) else "running"
    return (
        f"backfill {b.backfill_id} ({b.workflow or b.task}, {iso(b.from_ms)} .. {iso(b.to_ms)}): "
        f"{b.runs_finished}/{b.runs_total} runs finished, {b.runs_failed} failed; {state}"
    )
