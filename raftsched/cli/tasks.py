"""Task commands: ``task add|update|list|show|delete|enable|disable``, ``trigger``, ``retry``,
``runs``, ``fires`` and ``explain``, and the conversion of their options into a TaskSpec."""

from __future__ import annotations

import argparse
import dataclasses
from collections.abc import Iterable
from typing import Any

from raftsched import codec
from raftsched.cli.cluster import connect
from raftsched.cli.errors import UsageError
from raftsched.cli.input import Now, lazy_now, optional_time, parse_time
from raftsched.cli.render import print_fields, print_json, print_table, resource_text, to_dict
from raftsched.display import duration_text, enum_name, iso
from raftsched.errors import InvalidSpec
from raftsched.fsm.timeline import describe
from raftsched.model import (
    CronTrigger,
    IntervalTrigger,
    ManualTrigger,
    OnceTrigger,
    RetryBackoff,
    RunState,
    TaskSpec,
    Trigger,
    parse_lock,
)
from raftsched.taskfields import TASK_FIELDS, Field, Kind
from raftsched.timing import cron
from raftsched.v1 import raftsched_pb2 as pb

__all__ = [
    "cmd_explain",
    "cmd_fires",
    "cmd_retry",
    "cmd_run_cancel",
    "cmd_runs",
    "cmd_task_add",
    "cmd_task_delete",
    "cmd_task_disable",
    "cmd_task_enable",
    "cmd_task_list",
    "cmd_task_show",
    "cmd_task_update",
    "cmd_trigger",
    "merge_spec",
    "spec_from_args",
]


# The task fields ``task add|update`` has an option for: the schedule's, and the others.
TRIGGER_OPTION_FIELDS = tuple(f for f in TASK_FIELDS if f.flag and f.attr == "trigger")
OPTION_FIELDS = tuple(f for f in TASK_FIELDS if f.flag and f.attr != "trigger")


def option_dest(f: Field) -> str:
    """The attribute of the parsed arguments that holds the option of ``f``."""
    return f.dest or f.flag.lstrip("-").replace("-", "_")


def spec_from_args(args: argparse.Namespace, now: Now) -> TaskSpec:
    """The TaskSpec that ``task add`` sends. Raises InvalidSpec (model validation) or UsageError."""
    trigger = _trigger_from_args(args, now, None)
    if trigger is None:  # argparse requires one of the trigger options; kept for direct callers
        raise UsageError("give one of --cron, --every, --at or --manual")
    return TaskSpec(name=args.name, trigger=trigger, **_spec_changes(args))


def merge_spec(current: TaskSpec, args: argparse.Namespace, now: Now) -> TaskSpec:
    """``current`` with the options given to ``task update``; the others keep their value."""
    trigger = _trigger_from_args(args, now, current.trigger) or current.trigger
    return dataclasses.replace(current, trigger=trigger, **_spec_changes(args))


def _trigger_from_args(args: argparse.Namespace, now: Now, current: Trigger | None) -> Trigger | None:
    """The trigger the options describe (``current`` fills in what they leave out), or None."""
    other_than_cron = args.every is not None or args.at is not None or args.manual
    other_than_every = args.cron is not None or args.at is not None or args.manual
    if (
        args.tz is not None
        and args.cron is None
        and (other_than_cron or not isinstance(current, CronTrigger))
    ):
        raise UsageError("--tz applies to a cron schedule; give --cron too")
    if (
        args.start is not None
        and args.every is None
        and (other_than_every or not isinstance(current, IntervalTrigger))
    ):
        raise UsageError("--start applies to an interval schedule; give --every too")
    if args.cron is not None:
        tz = (
            args.tz
            if args.tz is not None
            else current.timezone
            if isinstance(current, CronTrigger)
            else "UTC"
        )
        return CronTrigger(args.cron, tz)
    if args.every is not None:
        if args.start is not None:
            start = parse_time(args.start, now, "--start")
        else:
            start = current.start_ms if isinstance(current, IntervalTrigger) else 0
        return IntervalTrigger(args.every, start)
    if args.at is not None:
        return OnceTrigger(parse_time(args.at, now, "--at"))
    if args.manual:
        return ManualTrigger()
    if args.tz is not None and isinstance(current, CronTrigger):
        return CronTrigger(current.expr, args.tz)
    if args.start is not None and isinstance(current, IntervalTrigger):
        return IntervalTrigger(current.every_ms, parse_time(args.start, now, "--start"))
    return None


def _selector(items: list[str]) -> tuple[tuple[str, str], ...]:
    """``--selector KEY=VALUE`` options as sorted pairs ('' entries are dropped: they clear)."""
    pairs: dict[str, str] = {}
    for item in items:
        if not item:
            continue
        key, sep, value = item.partition("=")
        if not sep:
            raise InvalidSpec("selector", f"{item!r} is not KEY=VALUE")
        pairs[key] = value
    return tuple(sorted(pairs.items()))


def _spec_changes(args: argparse.Namespace) -> dict[str, Any]:
    """TaskSpec fields set by options (trigger aside); options not given are absent."""
    out: dict[str, Any] = {}
    for f in OPTION_FIELDS:
        value = getattr(args, option_dest(f))
        if value is None or (f.kind == Kind.LOCKS and args.no_locks):
            continue
        if f.kind == Kind.CHOICE:
            assert f.enum is not None
            value = f.enum(value)
        elif f.kind == Kind.NAMES:
            value = tuple(name for name in value if name)
        elif f.kind == Kind.LABELS:
            value = _selector(value)
        elif f.kind == Kind.LOCKS:
            value = tuple(parse_lock(text, f.attr) for text in value)
        elif f.kind == Kind.BACKOFF:
            value = RetryBackoff(*value) if value else None
        out[f.attr] = value
        if f.clears and f.clears not in out:
            # A task has a command or a handler, retry delays or a backoff: not both. Both given
            # at once stay both, and the spec's validation names the conflict.
            out[f.clears] = _CLEARED.get(f.clears, "")
    if args.no_locks:
        out["locks"] = ()
    return out


# What an option that replaces another field sets it to (see Field.clears).
_CLEARED: dict[str, object] = {"retry_backoff": None, "retry_delays_ms": ()}


def _has_trigger_options(args: argparse.Namespace) -> bool:
    given = (getattr(args, option_dest(f)) for f in TRIGGER_OPTION_FIELDS)
    return any(value is not None and value is not False for value in given)  # --manual: False


def cmd_task_add(args: argparse.Namespace) -> int:
    spec = spec_from_args(args, lazy_now())
    with connect(args) as client:
        record = client.add_task(spec, disabled=args.disabled)
    print(f"added task {record.spec.name} (version {record.version})")
    _print_task(record)
    return 0


def cmd_task_update(args: argparse.Namespace) -> int:
    if not _spec_changes(args) and not _has_trigger_options(args):
        raise UsageError("nothing to update: give at least one option (see 'raftsched task update --help')")
    now = lazy_now()
    with connect(args) as client:
        current = client.get_task(args.name)
        spec = merge_spec(codec.spec_from_pb(current.spec), args, now)
        record = client.update_task(spec, expected_version=current.version)
    print(f"updated task {record.spec.name} (version {current.version} -> {record.version})")
    _print_task(record)
    return 0


def cmd_task_list(args: argparse.Namespace) -> int:
    with connect(args) as client:
        tasks = client.list_tasks(prefix=args.prefix)
    if args.json:
        return print_json([to_dict(t) for t in tasks])
    rows = [
        [
            t.spec.name,
            "yes" if t.enabled else "no",
            _trigger_text(t.spec.trigger),
            iso(t.next_fire_ms),
            str(t.version),
            str(t.active_runs),
            str(t.runs_total),
        ]
        for t in tasks
    ]
    print_table(["NAME", "ENABLED", "SCHEDULE", "NEXT FIRE (UTC)", "VERSION", "ACTIVE", "RUNS"], rows)
    return 0


def cmd_task_show(args: argparse.Namespace) -> int:
    with connect(args) as client:
        record = client.get_task(args.name)
    if args.json:
        return print_json(to_dict(record))
    _print_task(record)
    if record.spec.trigger.WhichOneof("kind") == "cron":
        warning = cron.changed_meaning_warning(record.spec.trigger.cron.expr)
        if warning is not None:
            print(f"warning: {warning}")
    return 0


def cmd_task_delete(args: argparse.Namespace) -> int:
    with connect(args) as client:
        client.delete_task(args.name)
    print(f"deleted task {args.name}")
    return 0


def cmd_task_enable(args: argparse.Namespace) -> int:
    with connect(args) as client:
        record = client.enable_task(args.name)
    print(f"enabled task {record.spec.name} (next fire {iso(record.next_fire_ms)})")
    return 0


def cmd_task_disable(args: argparse.Namespace) -> int:
    with connect(args) as client:
        record = client.disable_task(args.name)
    print(f"disabled task {record.spec.name}")
    return 0


def cmd_trigger(args: argparse.Namespace) -> int:
    with connect(args) as client:
        run = client.trigger(args.name, args.params)
    print(f"triggered {run.task}: run {run.run_id} ({enum_name(pb.RunState, run.state)})")
    return 0


def cmd_retry(args: argparse.Namespace) -> int:
    with connect(args) as client:
        run = client.retry(args.run_id)
    print(f"retrying {run.run_id}: {sum(1 for s in run.shards if s.state != pb.SUCCEEDED)} shard(s) queued")
    return 0


def cmd_runs(args: argparse.Namespace) -> int:
    if args.name == "cancel":
        return _cancel_runs(args)
    if args.namespace or args.owner or args.dry_run or args.reason:
        raise UsageError("--namespace, --owner, --dry-run and --reason go with `runs cancel`")
    if args.task and args.name and args.task != args.name:
        raise UsageError(f"give the task once: NAME {args.name!r} or --task {args.task!r}")
    args.name = args.name or args.task
    now = lazy_now()
    since = optional_time(args.since, now, "--since")
    until = optional_time(args.until, now, "--until")
    state = RunState(args.state) if args.state is not None else None
    with connect(args) as client:
        runs = client.runs(args.name, since_ms=since, until_ms=until, state=state, limit=args.limit)
    if args.json:
        return print_json([to_dict(r) for r in runs])
    rows = [
        [
            r.run_id,
            r.task,
            iso(r.nominal_ms),
            enum_name(pb.RunState, r.state),
            "manual" if r.manual else "scheduled",
            _shards_text(r),
            iso(r.created_ms),
            iso(r.finished_ms),
            next((sh.waiting for sh in r.shards if sh.state == pb.PENDING and sh.waiting), "-"),
        ]
        for r in runs
    ]
    print_table(
        ["RUN", "TASK", "NOMINAL (UTC)", "STATE", "KIND", "SHARDS OK", "CREATED", "FINISHED", "WAITING"], rows
    )
    return 0


def _cancel_runs(args: argparse.Namespace) -> int:
    """``runs cancel``: every unfinished run of a task, namespace or owner."""
    given = [
        o for o, v in (("--task", args.task), ("--namespace", args.namespace), ("--owner", args.owner)) if v
    ]
    if len(given) != 1:
        raise UsageError("runs cancel: give exactly one of --task, --namespace or --owner")
    if args.state not in (None, "pending", "running"):
        raise UsageError(f"runs cancel: --state is pending or running, not {args.state}")
    if args.since or args.until or args.limit:
        raise UsageError("runs cancel: --since, --until and --limit list runs; they select nothing here")
    with connect(args) as client:
        run_ids = client.cancel_runs(
            task=args.task,
            namespace=args.namespace,
            owner=args.owner,
            state=args.state or "",
            dry_run=args.dry_run,
            reason=args.reason,
        )
    if args.json:
        return print_json({"dry_run": args.dry_run, "run_ids": run_ids})
    verb = "would cancel" if args.dry_run else "cancelled"
    print(f"{verb} {len(run_ids)} run(s)")
    for run_id in run_ids:
        print(run_id)
    return 0


def cmd_run_cancel(args: argparse.Namespace) -> int:
    with connect(args) as client:
        run = client.cancel_run(args.run_id, args.reason, shard=args.shard)
    if args.json:
        return print_json(to_dict(run))
    what = f"shard {args.shard} of {run.run_id}" if args.shard is not None else run.run_id
    print(f"cancelled {what}: run {enum_name(pb.RunState, run.state)}")
    return 0


def cmd_run_show(args: argparse.Namespace) -> int:
    with connect(args) as client:
        run = client.get_run(args.run_id)
    if args.json:
        return print_json(to_dict(run))
    print(f"run       {run.run_id}")
    print(f"task      {run.task} (version {run.task_version})")
    print(f"state     {enum_name(pb.RunState, run.state)}")
    print(f"nominal   {iso(run.nominal_ms)}")
    print(f"created   {iso(run.created_ms)}{'  (manual)' if run.manual else ''}")
    print(f"finished  {iso(run.finished_ms)}")
    if run.workflow_run:
        print(f"workflow  {run.workflow_run}")
    print()
    print_table(
        ["SHARD", "ATTEMPT", "STATE", "EXECUTOR", "EXIT", "LOST", "ERROR"],
        [
            [
                str(s.shard),
                str(s.attempt),
                enum_name(pb.RunState, s.state),
                s.executor or "-",
                str(s.exit_code) if s.state in (pb.SUCCEEDED, pb.FAILED) else "-",
                str(s.lost),
                s.error or "-",
            ]
            for s in run.shards
        ],
    )
    print()
    if run.timeline_dropped:
        print(f"({run.timeline_dropped} older entries dropped: the timeline keeps {len(run.timeline)})")
    print_table(["AT (UTC)", "EVENT"], [[iso(e.at_ms), describe(e, iso)] for e in run.timeline])
    return 0


def cmd_fires(args: argparse.Namespace) -> int:
    now = lazy_now()
    since = optional_time(args.since, now, "--since")
    until = optional_time(args.until, now, "--until")
    with connect(args) as client:
        fires = client.fire_accounting(args.name, since_ms=since, until_ms=until, limit=args.limit)
    if args.json:
        return print_json([to_dict(f) for f in fires])
    rows = [
        [
            iso(f.nominal_ms),
            iso(f.through_ms) if f.through_ms > f.nominal_ms else "",
            str(f.count or 1),
            enum_name(pb.FireOutcome, f.outcome),
            f.run_id or "-",
            iso(f.decided_ms),
            f.reason,
        ]
        for f in fires
    ]
    print_table(["NOMINAL (UTC)", "THROUGH", "COUNT", "OUTCOME", "RUN", "DECIDED", "REASON"], rows)
    return 0


def cmd_explain(args: argparse.Namespace) -> int:
    at = parse_time(args.at, lazy_now(), "--at")
    with connect(args) as client:
        reply = client.explain(args.name, at)
    if args.json:
        return print_json(to_dict(reply))
    print(f"{args.name} at {iso(at)}: {reply.verdict}")
    for detail in reply.details:
        print(f"  - {detail}")
    if reply.HasField("fire"):
        f = reply.fire
        outcome = enum_name(pb.FireOutcome, f.outcome)
        print(f"  fire: {iso(f.nominal_ms)} {outcome} (decided {iso(f.decided_ms)})")
    if reply.HasField("run"):
        r = reply.run
        print(f"  run:  {r.run_id} {enum_name(pb.RunState, r.state)} (finished {iso(r.finished_ms)})")
    return 0


# -- output ----------------------------------------------------------------------------------------


def _print_task(t: pb.TaskRecord) -> None:
    s = t.spec
    window = f", window {duration_text(s.misfire_all_window_ms)}" if s.misfire_all_window_ms else ""
    cap = f", cap {s.misfire_all_cap}" if s.misfire_all_cap else ""
    fields = [
        ("name", s.name),
        ("enabled", "yes" if t.enabled else "no"),
        ("schedule", _trigger_text(s.trigger)),
        ("next fire", iso(t.next_fire_ms)),
        ("command", s.command) if s.command else ("handler", s.handler or "-"),
        ("params", s.params_json or "-"),
        ("shards", str(s.shards or 1)),
        ("misfire", enum_name(pb.MisfirePolicy, s.misfire) + cap + window),
        ("overlap", enum_name(pb.OverlapPolicy, s.overlap)),
        ("jitter", duration_text(s.jitter_ms) if s.jitter_ms else "none"),
        ("sla start", duration_text(s.sla_start_within_ms)) if s.sla_start_within_ms else None,
        ("sla finish", duration_text(s.sla_finish_within_ms)) if s.sla_finish_within_ms else None,
        ("freshness", duration_text(s.freshness_ms)) if s.freshness_ms else None,
        ("last success", f"{iso(t.last_success_ms)} ({t.last_success_run})") if t.last_success_ms else None,
        ("buffered run", t.held_run) if t.held_run else None,
        ("unplaceable", t.unplaceable) if t.unplaceable else None,
        ("retries", str(s.max_retries)),
        ("timeout", duration_text(s.timeout_ms) if s.timeout_ms else "none"),
        ("retry timing", retry_text(s)),
        ("retry elsewhere", "no" if s.retry_same_executor else "yes"),
        ("priority", str(s.priority)),
        ("locks", locks_text(s.locks)),
        ("pool", s.pool) if s.pool else None,
        ("exclude", ", ".join(s.exclude) or "-"),
        ("runner", s.runner or "shell"),
        ("resource", resource_text(s.resource_cpu, s.resource_memory_mb)),
        ("selector", ",".join(f"{k}={v}" for k, v in sorted(s.selector.items())) or "-"),
        ("owner", s.owner or "-"),
        ("namespace", s.namespace or "default"),
        ("description", s.description or "-"),
        ("version", str(t.version)),
        ("created", iso(t.created_ms)),
        ("updated", iso(t.updated_ms)),
        ("watermark", iso(t.watermark_ms)),
        ("active runs", str(t.active_runs)),
        ("fires total", f"{t.fires_total} ({t.kept_fires} kept)"),
        ("runs total", f"{t.runs_total} ({t.kept_runs} finished kept)"),
        ("retention", keep_text(s.keep_runs, s.keep_for_ms)),
    ]
    print_fields([f for f in fields if f is not None])


def retry_text(s: pb.TaskSpec | pb.WorkflowTaskSpec) -> str:
    """A task's retry timing: its delays, its backoff, or the cluster's."""
    if s.retry_delays_ms:
        return "delays " + ", ".join(duration_text(d) for d in s.retry_delays_ms) + " (the last repeats)"
    if s.HasField("retry_backoff"):
        b = s.retry_backoff
        cap = f", cap {duration_text(b.cap_ms)}" if b.cap_ms else ""
        jitter = f", jitter {b.jitter_pct}%" if b.jitter_pct else ""
        return f"backoff from {duration_text(b.base_ms)}, doubling{cap}{jitter}"
    return "the cluster's backoff"


def keep_text(keep_runs: int, keep_for_ms: int) -> str:
    """A task's or workflow's retention."""
    if not (keep_runs or keep_for_ms):
        return "the cluster default"
    count = f"{keep_runs} runs" if keep_runs else "any number of runs"
    age = f"for {duration_text(keep_for_ms)}" if keep_for_ms else "of any age"
    return f"{count} {age}"


def _trigger_text(trigger: pb.Trigger) -> str:
    kind = trigger.WhichOneof("kind")
    if kind == "cron":
        return f"cron '{trigger.cron.expr}' {trigger.cron.timezone or 'UTC'}"
    if kind == "interval":
        start = f" from {iso(trigger.interval.start_ms)}" if trigger.interval.start_ms else ""
        return f"every {duration_text(trigger.interval.every_ms)}{start}"
    if kind == "once":
        return f"once at {iso(trigger.once.at_ms)}"
    return "manual"


def _shards_text(run: pb.Run) -> str:
    shards = {a.shard for a in run.shards}
    done = {a.shard for a in run.shards if a.state == pb.SUCCEEDED}
    return f"{len(done)}/{len(shards)}" if shards else "-"


def locks_text(locks: Iterable[pb.LockRef]) -> str:
    """``a, b (shared)`` or ``-``."""
    return ", ".join(f"{lk.name} (shared)" if lk.shared else lk.name for lk in locks) or "-"
