"""Command-line entry points: ``raftsched`` (the admin CLI) and ``raftsched-node`` (one node).

No scheduling logic lives here: commands parse arguments, call :class:`raftsched.Client` (or, for
``cron preview``, :func:`raftsched.timing.cron.preview`), and print. The wall clock is read only to
resolve ``now`` and relative times, through :class:`raftsched.timing.clock.SystemClock`.

Exit status: 0 on success, 2 for usage errors and invalid input (including input the cluster
rejects as invalid, and an invalid config file), 1 for every other error (not found, conflict,
unreachable cluster...), 130 when interrupted. An error is one line on stderr,
``raftsched: error: <message>``, never a traceback.
"""

from __future__ import annotations

import argparse
import asyncio
import dataclasses
import datetime as dt
import importlib
import json
import logging
import os
import re
import signal
import sys
import time
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from raftsched import codec
from raftsched.errors import ConfigError, InvalidSpec, InvalidWorkflow, RaftschedError
from raftsched.model import (
    MAX_TIME_MS,
    CronTrigger,
    IntervalTrigger,
    ManualTrigger,
    Misfire,
    OnceTrigger,
    Overlap,
    RunState,
    TaskSpec,
    Trigger,
    validate_params,
)
from raftsched.timing import cron
from raftsched.timing.clock import SystemClock
from raftsched.v1 import raftsched_pb2 as pb

if TYPE_CHECKING:
    from raftsched.client import Client, ClusterView

__all__ = [
    "build_parser",
    "demo_main",
    "main",
    "merge_spec",
    "node_main",
    "parse_duration_ms",
    "parse_time",
    "spec_from_args",
]

CLUSTER_ENV = "RAFTSCHED_CLUSTER"
DEFAULT_DEMO_CONFIG = "cluster.example.toml"

Now = Callable[[], int]
"""Returns the current UTC epoch ms; called only when a ``now``/relative time needs it."""

_UNIT_MS = {"ms": 1, "s": 1000, "m": 60_000, "h": 3_600_000, "d": 86_400_000, "w": 604_800_000}
_RELATIVE_RE = re.compile(r"([+-])(\d{1,12})(ms|s|m|h|d|w)")
_DURATION_RE = re.compile(r"(\d{1,12}(?:\.\d{1,3})?)(ms|s|m|h|d|w)?")
_DATE_RE = re.compile(r"\d{4}-\d{2}-\d{2}")
_EPOCH = dt.datetime(1970, 1, 1, tzinfo=dt.UTC)
# Options whose value may be a negative relative time ("-10m"), which argparse would take for a flag.
_TIME_OPTIONS = frozenset({"--since", "--until", "--from", "--to", "--at", "--start", "--logical"})
_NEGATIVE_TIME_RE = re.compile(r"-\d+(?:ms|s|m|h|d|w)")

TIME_HELP = """\
times (T): ISO 8601 with a zone (2026-11-30T10:00:00Z, 2026-11-30T10:00:00+01:00), a date
  (2026-11-30 = midnight UTC), 'now', relative to now (-10m, -2h, -1d, +30s; units ms s m h d w),
  or epoch milliseconds (1796032800000).
durations: seconds (90, 1.5) or with a unit (500ms, 90s, 10m, 2h, 1d, 1w)."""

# Model field names (as InvalidSpec reports them) -> the option a CLI user typed.
_FLAGS = {
    "name": "NAME",
    "task": "NAME",
    "targets": "--cluster",
    "timeout": "--timeout",
    "trigger.cron": "--cron",
    "trigger.timezone": "--tz",
    "trigger.interval": "--every",
    "trigger.start": "--start",
    "trigger.at": "--at",
    "command": "--command",
    "handler": "--handler",
    "shards": "--shards",
    "misfire": "--misfire",
    "misfire_all_cap": "--misfire-cap",
    "misfire_all_window": "--misfire-window",
    "overlap": "--overlap",
    "max_retries": "--retries",
    "priority": "--priority",
    "owner": "--owner",
    "namespace": "--namespace",
    "params": "--params",
    "description": "--description",
    "count": "--count",
    "workflow": "NAME",
    "param": "--param",
    "run_id": "RUN_ID",
    "from": "--from",
    "to": "--to",
    "logical_ms": "--logical",
    "version": "--version",
}


class UsageError(Exception):
    """Bad command-line input: reported as one line, exit status 2."""


class _Parser(argparse.ArgumentParser):
    """An ArgumentParser whose errors become :class:`UsageError` (one line, no usage dump)."""

    def error(self, message: str) -> NoReturn:
        raise UsageError(f"{message} (see '{self.prog} --help')")


# ------------------------------------------------------------------------------------------------
# Entry points
# ------------------------------------------------------------------------------------------------


def main(argv: Sequence[str] | None = None) -> int:
    """``raftsched``: the admin CLI. Returns the exit status."""
    args_list = list(sys.argv[1:] if argv is None else argv)
    try:
        try:
            args = build_parser().parse_args(_attach_negative_times(args_list))
        except SystemExit as done:  # --help
            return done.code if isinstance(done.code, int) else 0
        command: Callable[[argparse.Namespace], int] = args.run_command
        return command(args)
    except UsageError as exc:
        return _fail(str(exc), 2)
    except InvalidWorkflow as exc:
        return _fail_workflow(exc)
    except InvalidSpec as exc:
        return _fail(_invalid_message(exc), 2)
    except ConfigError as exc:
        return _fail(_config_message(exc), 2)
    except RaftschedError as exc:
        return _fail(str(exc) or exc.code, 1)
    except KeyboardInterrupt:
        return _fail("interrupted", 130)
    except Exception as exc:
        if _is_grpc_error(exc):  # the client maps these; this is only a safety net
            return _fail(f"gRPC error: {exc}", 1)
        raise


def node_main(argv: Sequence[str] | None = None) -> int:
    """``raftsched-node --config FILE --node-id ID [--log-level info]``: run one node until stopped."""
    parser = _Parser(prog="raftsched-node", description="Run one raftsched node until SIGTERM/SIGINT.")
    parser.add_argument("--config", required=True, metavar="FILE", help="the cluster's TOML config file")
    parser.add_argument("--node-id", required=True, metavar="ID", help="which [[nodes]] entry this is")
    parser.add_argument(
        "--log-level",
        default="info",
        choices=["debug", "info", "warning", "error"],
        help="logging level (default: info)",
    )
    try:
        try:
            args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        except SystemExit as done:
            return done.code if isinstance(done.code, int) else 0
        return _run_node_function("run_node", args.config, args.node_id, args.log_level)
    except UsageError as exc:
        return _fail(str(exc), 2, prog="raftsched-node")


def demo_main(config_path: str = DEFAULT_DEMO_CONFIG, duration: float = 0.0) -> int:
    """Run the local demo cluster described by ``config_path`` (``raftsched demo``).

    ``duration`` > 0 stops the demo after that many seconds (0 runs until Ctrl-C)."""
    return _run_node_function("run_demo", config_path, str(duration))


def _run_node_function(name: str, *args: str) -> int:
    # Imported lazily: the node pulls in pysyncobj, LMDB and the gRPC server, which the admin
    # commands never need. importlib keeps this module type-checkable on its own.
    prog = "raftsched-node" if name == "run_node" else "raftsched"
    try:
        node = importlib.import_module("raftsched.node")
        function: Callable[..., int] = getattr(node, name)
        return int(function(*args))
    except ConfigError as exc:
        return _fail(_config_message(exc), 2, prog=prog)
    except InvalidSpec as exc:
        return _fail(str(exc), 2, prog=prog)
    except RaftschedError as exc:
        return _fail(str(exc) or exc.code, 1, prog=prog)
    except KeyboardInterrupt:
        return _fail("interrupted", 130, prog=prog)


# ------------------------------------------------------------------------------------------------
# The parser
# ------------------------------------------------------------------------------------------------


def build_parser() -> argparse.ArgumentParser:
    """The ``raftsched`` argument parser. Each leaf command sets ``run_command``."""
    parser = _Parser(
        prog="raftsched",
        description="Manage a raftsched cluster (a Raft-replicated cron scheduler).\n"
        "Global options go before the command.",
        epilog=f"cluster: --cluster, else --config, else ${CLUSTER_ENV}.\n{TIME_HELP}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    where = parser.add_mutually_exclusive_group()
    where.add_argument("--cluster", metavar="HOST:PORT,...", help="the nodes' gRPC addresses")
    where.add_argument(
        "--config", metavar="FILE", help="read the nodes' gRPC addresses from a cluster config"
    )
    parser.add_argument(
        "--timeout",
        dest="rpc_timeout",
        type=_positive_seconds,
        default=10.0,
        metavar="SECONDS",
        help="deadline of each RPC attempt (default: 10)",
    )
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)

    task = commands.add_parser("task", help="add, update, list, show, delete, enable or disable tasks")
    actions = task.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = _leaf(actions, "add", _cmd_task_add, "create a task", times=True)
    add.add_argument("name", metavar="NAME", help="task name")
    _add_spec_options(add, update=False)
    update = _leaf(
        actions,
        "update",
        _cmd_task_update,
        "change a task; options not given keep their current value "
        "(sent with the current version, so a concurrent change is a conflict)",
        times=True,
    )
    update.add_argument("name", metavar="NAME", help="task name")
    _add_spec_options(update, update=True)
    listing = _leaf(actions, "list", _cmd_task_list, "list tasks")
    listing.add_argument("--prefix", default="", metavar="P", help="only names starting with P")
    _json_option(listing)
    show = _leaf(actions, "show", _cmd_task_show, "show one task")
    show.add_argument("name", metavar="NAME")
    _json_option(show)
    for action, handler, text in (
        ("delete", _cmd_task_delete, "delete a task"),
        ("enable", _cmd_task_enable, "enable a task (it fires again from now on)"),
        ("disable", _cmd_task_disable, "disable a task (its fires are accounted as skipped_disabled)"),
    ):
        _leaf(actions, action, handler, text).add_argument("name", metavar="NAME")

    retry = _leaf(commands, "retry", _cmd_retry, "run a failed run's failed shards again (retry count reset)")
    retry.add_argument("run_id", metavar="RUN_ID", help="the run, e.g. backup@1796000000000")
    trigger = _leaf(commands, "trigger", _cmd_trigger, "start a manual run of a task now")
    trigger.add_argument("name", metavar="NAME")
    trigger.add_argument("--params", metavar="JSON", default="", help="run parameters, a JSON object")

    runs = _leaf(commands, "runs", _cmd_runs, "list runs (of one task, or all)", times=True)
    runs.add_argument("name", metavar="NAME", nargs="?", default="", help="task name (default: all tasks)")
    _range_options(runs, "nominal time")
    runs.add_argument("--state", choices=[s.value for s in RunState], help="only runs in this state")
    runs.add_argument("--limit", type=_non_negative_int, default=0, metavar="N", help="at most N runs")
    _json_option(runs)

    fires = _leaf(
        commands, "fires", _cmd_fires, "fire accounting: how each nominal fire was handled", times=True
    )
    fires.add_argument("name", metavar="NAME")
    _range_options(fires, "nominal time")
    fires.add_argument("--limit", type=_non_negative_int, default=0, metavar="N", help="at most N records")
    _json_option(fires)

    explain = _leaf(
        commands, "explain", _cmd_explain, "explain why a task did or did not fire at a time", times=True
    )
    explain.add_argument("name", metavar="NAME")
    explain.add_argument("--at", required=True, metavar="T", help="the time to explain")
    _json_option(explain)

    status = _leaf(commands, "status", _cmd_status, "cluster status: leader, term, every node's state")
    _json_option(status)

    cron_parser = commands.add_parser("cron", help="cron tools (local; no cluster needed)")
    cron_actions = cron_parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    preview = _leaf(
        cron_actions,
        "preview",
        _cmd_cron_preview,
        "show the next fires of a cron expression, in UTC and local time, with the DST policy applied",
        times=True,
    )
    preview.add_argument("expr", metavar="EXPR", help="5 fields, or 6 with seconds last, or @daily etc.")
    preview.add_argument("--tz", default="UTC", metavar="ZONE", help="IANA time zone (default: UTC)")
    preview.add_argument(
        "--from", dest="from_", default="now", metavar="T", help="start after T (default: now)"
    )
    preview.add_argument(
        "--count",
        type=int,
        default=10,
        metavar="N",
        help=f"how many fires, 1-{cron.MAX_PREVIEW} (default: 10)",
    )
    _json_option(preview)

    _add_workflow_commands(commands)

    demo = _leaf(commands, "demo", _cmd_demo, "run the demo cluster described by a config file")
    demo.add_argument(
        "--config",
        dest="demo_config",
        metavar="FILE",
        help=f"cluster config (default: the global --config, else {DEFAULT_DEMO_CONFIG})",
    )
    demo.add_argument(
        "--duration",
        type=float,
        default=0.0,
        metavar="SECONDS",
        help="stop after this many seconds (default: run until Ctrl-C)",
    )
    return parser


def _add_workflow_commands(commands: Any) -> None:
    workflow = commands.add_parser(
        "workflow", help="workflows (DAGs): apply, list, show, run, runs, status, graph, backfill ..."
    )
    actions = workflow.add_subparsers(dest="action", metavar="ACTION", required=True)

    apply = _leaf(actions, "apply", _cmd_wf_apply, "create or update a workflow from a YAML or TOML file")
    apply.add_argument("file", metavar="FILE", help="workflow file (.yaml, .yml or .toml)")
    apply.add_argument(
        "--dry-run", action="store_true", help="only read and validate the file (no cluster needed)"
    )

    listing = _leaf(actions, "list", _cmd_wf_list, "list workflows")
    listing.add_argument("--prefix", default="", metavar="P", help="only names starting with P")
    _json_option(listing)

    show = _leaf(actions, "show", _cmd_wf_show, "show a workflow: definition, tasks and dependencies")
    show.add_argument("name", metavar="NAME")
    show.add_argument(
        "--version",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="an older version (default: current)",
    )
    _json_option(show)

    start = _leaf(actions, "run", _cmd_wf_run, "start a run of a workflow now", times=True)
    start.add_argument("name", metavar="NAME")
    start.add_argument("--logical", metavar="T", help="its logical time ({{ ds }}, {{ ts }}; default: now)")
    _param_options(start)

    runs = _leaf(actions, "runs", _cmd_wf_runs, "list a workflow's runs, newest first")
    runs.add_argument("name", metavar="NAME")
    runs.add_argument("--active", action="store_true", help="only unfinished runs")
    runs.add_argument(
        "--limit", type=_non_negative_int, default=100, metavar="N", help="at most N runs (default: 100)"
    )
    _json_option(runs)

    status = _leaf(
        actions, "status", _cmd_wf_status, "one run: every task's state, tries, reason and timeline"
    )
    status.add_argument("run_id", metavar="RUN_ID", help="e.g. etl@1796000000000")
    _json_option(status)

    graph = _leaf(
        actions,
        "graph",
        _cmd_wf_graph,
        "print a workflow's DAG in topological layers; given a run id, with each task's state",
    )
    graph.add_argument("target", metavar="NAME_OR_RUN_ID", help="a workflow name or a run id (NAME@...)")
    graph.add_argument(
        "--version", type=_non_negative_int, default=0, metavar="N", help="with NAME: an older version"
    )
    graph.add_argument("--ascii", action="store_true", help="ASCII only (no arrows or check marks)")
    _json_option(graph)

    kill = _leaf(actions, "kill", _cmd_wf_kill, "kill a run: live tasks are terminated and marked KILLED")
    kill.add_argument("run_id", metavar="RUN_ID")
    kill.add_argument("--reason", default="", metavar="TEXT", help="recorded in each task's timeline")

    rerun = _leaf(
        actions,
        "rerun",
        _cmd_wf_rerun,
        "run a task and everything downstream of it again, inside the run (upstream results kept)",
    )
    rerun.add_argument("run_id", metavar="RUN_ID")
    rerun.add_argument("task", metavar="TASK")

    mark = _leaf(actions, "mark-success", _cmd_wf_mark_success, "mark a task of a run succeeded by hand")
    mark.add_argument("run_id", metavar="RUN_ID")
    mark.add_argument("task", metavar="TASK")
    mark.add_argument("--reason", default="", metavar="TEXT", help="recorded in the task's timeline")

    lineage = _leaf(actions, "lineage", _cmd_wf_lineage, "every task upstream and downstream of a task")
    lineage.add_argument("name", metavar="NAME")
    lineage.add_argument("task", metavar="TASK")
    lineage.add_argument(
        "--version",
        type=_non_negative_int,
        default=0,
        metavar="N",
        help="an older version (default: current)",
    )
    _json_option(lineage)

    backfill = _leaf(
        actions,
        "backfill",
        _cmd_wf_backfill,
        "one run per logical time in [--from, --to]: every schedule occurrence "
        "(or every UTC midnight without a schedule), within the workflow's backfill share of slots",
        times=True,
    )
    backfill.add_argument("name", metavar="NAME")
    backfill.add_argument("--from", dest="from_", required=True, metavar="T", help="first logical time")
    backfill.add_argument(
        "--to", required=True, metavar="T", help="last logical time (inclusive; a date means the whole day)"
    )
    backfill.add_argument("--wait", action="store_true", help="show a progress bar until every run finished")
    _param_options(backfill)

    watch = _leaf(actions, "backfill-status", _cmd_wf_backfill_status, "one backfill's progress")
    watch.add_argument("backfill_id", metavar="BACKFILL_ID", help="e.g. etl~b1")
    watch.add_argument("--wait", action="store_true", help="show a progress bar until every run finished")
    _json_option(watch)

    backfills = _leaf(actions, "backfills", _cmd_wf_backfills, "list a workflow's backfills")
    backfills.add_argument("name", metavar="NAME")
    _json_option(backfills)


def _param_options(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--params", metavar="JSON", default="", help="run params, a JSON object")
    parser.add_argument(
        "--param",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="one run param, a string (repeatable; applied over --params)",
    )


def _leaf(
    group: Any, name: str, handler: Callable[[argparse.Namespace], int], text: str, *, times: bool = False
) -> argparse.ArgumentParser:
    sub: argparse.ArgumentParser = group.add_parser(
        name,
        help=text,
        description=text[0].upper() + text[1:] + ".",
        epilog=TIME_HELP if times else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub.set_defaults(run_command=handler)
    return sub


def _json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _range_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--since", metavar="T", help=f"{what} >= T")
    parser.add_argument("--until", metavar="T", help=f"{what} <= T")


def _add_spec_options(parser: argparse.ArgumentParser, *, update: bool) -> None:
    when = parser.add_argument_group(
        "schedule" + (" (replaces the current one)" if update else " (one is required)")
    )
    kind = when.add_mutually_exclusive_group(required=not update)
    kind.add_argument("--cron", metavar="EXPR", help="cron expression: 5 fields, or 6 with seconds last")
    kind.add_argument("--every", type=_duration_arg, metavar="DURATION", help="fixed interval, whole seconds")
    kind.add_argument("--at", metavar="T", help="fire once, at T")
    kind.add_argument("--manual", action="store_true", help="never fire by itself (trigger only)")
    when.add_argument("--tz", metavar="ZONE", help="with --cron: IANA time zone (default: UTC)")
    when.add_argument(
        "--start", metavar="T", help="with --every: first fire (default: one interval after now)"
    )

    work = parser.add_argument_group("what runs")
    which = work.add_mutually_exclusive_group()
    which.add_argument("--command", metavar="CMD", help="shell command to run")
    which.add_argument("--handler", metavar="NAME", help="registered handler to call")
    work.add_argument("--params", metavar="JSON", help="default run parameters, a JSON object")
    work.add_argument("--shards", type=int, metavar="N", help="run as N shards (1-1024, default 1)")

    policy = parser.add_argument_group("policies")
    policy.add_argument(
        "--misfire",
        choices=[m.value for m in Misfire],
        help="missed fires: run latest (default), all, or skip",
    )
    policy.add_argument(
        "--misfire-cap", type=int, metavar="N", help="misfire=all: run at most N (0 = cluster default)"
    )
    policy.add_argument(
        "--misfire-window",
        type=_duration_arg,
        metavar="DURATION",
        help="misfire=all: look back this far (0 = cluster default)",
    )
    policy.add_argument(
        "--overlap",
        choices=[o.value for o in Overlap],
        help="while a run is unfinished: skip (default) or allow",
    )
    policy.add_argument(
        "--retries", dest="max_retries", type=int, metavar="N", help="retries per shard (0-100)"
    )
    policy.add_argument(
        "--timeout",
        dest="task_timeout",
        type=_duration_arg,
        metavar="DURATION",
        help="task timeout per attempt (0 = none)",
    )
    policy.add_argument("--priority", type=int, metavar="0-9", help="dispatch priority (default 5)")

    labels = parser.add_argument_group("labels")
    labels.add_argument("--owner", metavar="O")
    labels.add_argument("--namespace", metavar="NS", help="default: 'default'")
    labels.add_argument("--description", metavar="TEXT")
    if not update:
        parser.add_argument("--disabled", action="store_true", help="create the task disabled")


# ------------------------------------------------------------------------------------------------
# Input conversion (pure: the clock comes in as ``now``)
# ------------------------------------------------------------------------------------------------


def parse_time(text: str, now: Now, field: str = "time") -> int:
    """A CLI time (see ``TIME_HELP``) as UTC epoch ms. Raises InvalidSpec naming ``field``."""
    value = text.strip()
    if value.lower() == "now":
        return _in_range(now(), text, field)
    if value.isdigit():
        return _in_range(int(value) if len(value) <= 16 else MAX_TIME_MS + 1, text, field)
    relative = _RELATIVE_RE.fullmatch(value)
    if relative is not None:
        sign = 1 if relative.group(1) == "+" else -1
        return _in_range(now() + sign * int(relative.group(2)) * _UNIT_MS[relative.group(3)], text, field)
    if _DATE_RE.fullmatch(value):
        value += "T00:00:00Z"
    try:
        parsed = dt.datetime.fromisoformat(value)
    except ValueError:
        raise InvalidSpec(
            field,
            f"{text!r} is not a time; use ISO 8601 (2026-11-30T10:00:00Z), a date (2026-11-30), "
            "now, a relative time (-10m, +2h) or epoch milliseconds",
        ) from None
    if parsed.tzinfo is None:
        raise InvalidSpec(field, f"{text!r} has no UTC offset; add Z or one such as +01:00")
    return _in_range((parsed - _EPOCH) // dt.timedelta(milliseconds=1), text, field)


def _in_range(ms: int, text: str, field: str) -> int:
    if not 0 <= ms <= MAX_TIME_MS:
        raise InvalidSpec(field, f"{text!r} is outside 1970-01-01 .. 9999-12-31")
    return ms


def parse_duration_ms(text: str) -> int:
    """Seconds (``90``, ``1.5``) or a number with a unit (``500ms 90s 10m 2h 1d 1w``) as ms.

    Raises ValueError with a message for anything else.
    """
    match = _DURATION_RE.fullmatch(text.strip())
    if match is None:
        raise ValueError(f"{text!r} is not a duration; use seconds (90) or 500ms, 90s, 10m, 2h, 1d, 1w")
    number, unit = match.group(1), match.group(2) or "s"
    whole, _, fraction = number.partition(".")
    scale = _UNIT_MS[unit]
    # Integer arithmetic: "0.1" must be exactly 100 ms.
    ms_times_1000 = (int(whole) * 1000 + int(fraction.ljust(3, "0") or "0")) * scale
    if ms_times_1000 % 1000:
        raise ValueError(f"{text!r} is not a whole number of milliseconds")
    return ms_times_1000 // 1000


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


def _spec_changes(args: argparse.Namespace) -> dict[str, Any]:
    """TaskSpec fields set by options (trigger aside); options not given are absent."""
    out: dict[str, Any] = {}
    if args.command is not None:
        out.update(command=args.command, handler="")  # a task has a command or a handler, not both
    if args.handler is not None:
        out.update(handler=args.handler, command="")
    if args.misfire is not None:
        out["misfire"] = Misfire(args.misfire)
    if args.overlap is not None:
        out["overlap"] = Overlap(args.overlap)
    simple = {
        "shards": "shards",
        "misfire_cap": "misfire_all_cap",
        "misfire_window": "misfire_all_window_ms",
        "max_retries": "max_retries",
        "task_timeout": "timeout_ms",
        "priority": "priority",
        "owner": "owner",
        "namespace": "namespace",
        "params": "params_json",
        "description": "description",
    }
    for option, field in simple.items():
        value = getattr(args, option)
        if value is not None:
            out[field] = value
    return out


def _has_trigger_options(args: argparse.Namespace) -> bool:
    return any(getattr(args, o) is not None for o in ("cron", "every", "at", "tz", "start")) or args.manual


def _attach_negative_times(argv: list[str]) -> list[str]:
    """``--since -10m`` → ``--since=-10m``: argparse would take ``-10m`` for an option."""
    out: list[str] = []
    i = 0
    while i < len(argv):
        token = argv[i]
        if token in _TIME_OPTIONS and i + 1 < len(argv) and _NEGATIVE_TIME_RE.fullmatch(argv[i + 1]):
            out.append(f"{token}={argv[i + 1]}")
            i += 2
            continue
        out.append(token)
        i += 1
    return out


def _duration_arg(text: str) -> int:
    try:
        return parse_duration_ms(text)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def _positive_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds") from None
    if not 0 < value < 86_400:
        raise argparse.ArgumentTypeError(f"{text!r} must be more than 0 and less than 86400 seconds")
    return value


def _non_negative_int(text: str) -> int:
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r} is not a whole number") from None
    if not 0 <= value <= 2**32 - 1:
        raise argparse.ArgumentTypeError(f"{text!r} out of range (0-4294967295)")
    return value


def _lazy_now() -> Now:
    """A ``now`` that reads the system clock once, on first use (so --since and --until agree)."""
    cache: list[int] = []

    def now() -> int:
        if not cache:
            cache.append(SystemClock().now_ms())
        return cache[0]

    return now


def _optional_time(text: str | None, now: Now, field: str) -> int:
    return 0 if text is None else parse_time(text, now, field)


# ------------------------------------------------------------------------------------------------
# Commands
# ------------------------------------------------------------------------------------------------


def _connect(args: argparse.Namespace) -> Client:
    from raftsched.client import Client  # lazily: 'cron preview' and --help need no gRPC

    targets: str | list[str]
    if args.cluster is not None:
        targets = args.cluster
    elif args.config is not None:
        from raftsched.config import load_config

        targets = load_config(args.config).grpc_targets()
    elif os.environ.get(CLUSTER_ENV, "").strip():
        targets = os.environ[CLUSTER_ENV]
    else:
        raise UsageError(
            f"no cluster given: use --cluster HOST:PORT,... or --config FILE, or set {CLUSTER_ENV}"
        )
    return Client(targets, timeout=args.rpc_timeout)


def _cmd_task_add(args: argparse.Namespace) -> int:
    spec = spec_from_args(args, _lazy_now())
    with _connect(args) as client:
        record = client.add_task(spec, disabled=args.disabled)
    print(f"added task {record.spec.name} (version {record.version})")
    _print_task(record)
    return 0


def _cmd_task_update(args: argparse.Namespace) -> int:
    if not _spec_changes(args) and not _has_trigger_options(args):
        raise UsageError("nothing to update: give at least one option (see 'raftsched task update --help')")
    now = _lazy_now()
    with _connect(args) as client:
        current = client.get_task(args.name)
        spec = merge_spec(codec.spec_from_pb(current.spec), args, now)
        record = client.update_task(spec, expected_version=current.version)
    print(f"updated task {record.spec.name} (version {current.version} -> {record.version})")
    _print_task(record)
    return 0


def _cmd_task_list(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        tasks = client.list_tasks(prefix=args.prefix)
    if args.json:
        return _print_json([_to_dict(t) for t in tasks])
    rows = [
        [
            t.spec.name,
            "yes" if t.enabled else "no",
            _trigger_text(t.spec.trigger),
            _iso(t.next_fire_ms),
            str(t.version),
            str(t.active_runs),
            str(t.runs_total),
        ]
        for t in tasks
    ]
    _print_table(["NAME", "ENABLED", "SCHEDULE", "NEXT FIRE (UTC)", "VERSION", "ACTIVE", "RUNS"], rows)
    return 0


def _cmd_task_show(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        record = client.get_task(args.name)
    if args.json:
        return _print_json(_to_dict(record))
    _print_task(record)
    if record.spec.trigger.WhichOneof("kind") == "cron":
        warning = cron.changed_meaning_warning(record.spec.trigger.cron.expr)
        if warning is not None:
            print(f"warning: {warning}")
    return 0


def _cmd_task_delete(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        client.delete_task(args.name)
    print(f"deleted task {args.name}")
    return 0


def _cmd_task_enable(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        record = client.enable_task(args.name)
    print(f"enabled task {record.spec.name} (next fire {_iso(record.next_fire_ms)})")
    return 0


def _cmd_task_disable(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        record = client.disable_task(args.name)
    print(f"disabled task {record.spec.name}")
    return 0


def _cmd_trigger(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        run = client.trigger(args.name, args.params)
    print(f"triggered {run.task}: run {run.run_id} ({_enum(pb.RunState, run.state)})")
    return 0


def _cmd_retry(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        run = client.retry(args.run_id)
    print(f"retrying {run.run_id}: {sum(1 for s in run.shards if s.state != pb.SUCCEEDED)} shard(s) queued")
    return 0


def _cmd_runs(args: argparse.Namespace) -> int:
    now = _lazy_now()
    since = _optional_time(args.since, now, "--since")
    until = _optional_time(args.until, now, "--until")
    state = RunState(args.state) if args.state is not None else None
    with _connect(args) as client:
        runs = client.runs(args.name, since_ms=since, until_ms=until, state=state, limit=args.limit)
    if args.json:
        return _print_json([_to_dict(r) for r in runs])
    rows = [
        [
            r.run_id,
            r.task,
            _iso(r.nominal_ms),
            _enum(pb.RunState, r.state),
            "manual" if r.manual else "scheduled",
            _shards_text(r),
            _iso(r.created_ms),
            _iso(r.finished_ms),
        ]
        for r in runs
    ]
    _print_table(["RUN", "TASK", "NOMINAL (UTC)", "STATE", "KIND", "SHARDS OK", "CREATED", "FINISHED"], rows)
    return 0


def _cmd_fires(args: argparse.Namespace) -> int:
    now = _lazy_now()
    since = _optional_time(args.since, now, "--since")
    until = _optional_time(args.until, now, "--until")
    with _connect(args) as client:
        fires = client.fire_accounting(args.name, since_ms=since, until_ms=until, limit=args.limit)
    if args.json:
        return _print_json([_to_dict(f) for f in fires])
    rows = [
        [
            _iso(f.nominal_ms),
            _iso(f.through_ms) if f.through_ms > f.nominal_ms else "",
            str(f.count or 1),
            _enum(pb.FireOutcome, f.outcome),
            f.run_id or "-",
            _iso(f.decided_ms),
            f.reason,
        ]
        for f in fires
    ]
    _print_table(["NOMINAL (UTC)", "THROUGH", "COUNT", "OUTCOME", "RUN", "DECIDED", "REASON"], rows)
    return 0


def _cmd_explain(args: argparse.Namespace) -> int:
    at = parse_time(args.at, _lazy_now(), "--at")
    with _connect(args) as client:
        reply = client.explain(args.name, at)
    if args.json:
        return _print_json(_to_dict(reply))
    print(f"{args.name} at {_iso(at)}: {reply.verdict}")
    for detail in reply.details:
        print(f"  - {detail}")
    if reply.HasField("fire"):
        f = reply.fire
        print(
            f"  fire: {_iso(f.nominal_ms)} {_enum(pb.FireOutcome, f.outcome)} (decided {_iso(f.decided_ms)})"
        )
    if reply.HasField("run"):
        r = reply.run
        print(f"  run:  {r.run_id} {_enum(pb.RunState, r.state)} (finished {_iso(r.finished_ms)})")
    return 0


def _cmd_status(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        view = client.cluster_status()
    if args.json:
        _print_json(_cluster_dict(view))
    else:
        leader = f"{view.leader_id} ({view.leader_addr})" if view.leader_id else "unknown"
        print(f"leader: {leader}   term: {view.term}   commit index: {view.commit_index}")
        rows = []
        for n in view.nodes:
            s = n.status
            if s is None:
                rows.append([n.target, "-", "-", "-", "-", "-", "-", f"unreachable: {n.error}"])
                continue
            rows.append(
                [
                    n.target,
                    s.node_id,
                    s.role,
                    str(s.term),
                    str(s.commit_index),
                    str(s.applied_index),
                    s.state_digest[:12] or "-",
                    "ok",
                ]
            )
        _print_table(["TARGET", "NODE", "ROLE", "TERM", "COMMIT", "APPLIED", "DIGEST", "STATUS"], rows)
        for warning in _digest_warnings(view):
            print(f"warning: {warning}")
    if not view.reachable:
        tried = ", ".join(n.target for n in view.nodes)
        return _fail(f"no node reachable (tried {tried})", 1)
    return 0


def _cmd_cron_preview(args: argparse.Namespace) -> int:
    start = parse_time(args.from_, _lazy_now(), "--from")
    cron.CronSchedule.parse(args.expr, args.tz, field="EXPR", tz_field="--tz")  # errors name the CLI's words
    fires = cron.preview(args.expr, args.tz, start, args.count)
    if args.json:
        return _print_json(
            {
                "expr": args.expr,
                "timezone": args.tz,
                "from": _iso(start),
                "from_ms": start,
                "fires": [{"utc": _iso(ms), "utc_ms": ms, "local": local} for ms, local in fires],
                **({"day_rule": note} if (note := cron.day_rule_note(args.expr)) else {}),
            }
        )
    print(f"cron {args.expr!r} in {args.tz}: {len(fires)} fire(s) after {_iso(start)}")
    rows: list[list[str]] = []
    previous = ""
    for i, (ms, local) in enumerate(fires, 1):
        offset = _offset_of(local)
        note = f"UTC offset {previous} -> {offset}" if previous and offset != previous else ""
        rows.append([str(i), _iso(ms), local, note])
        previous = offset
    _print_table(["#", "UTC", f"LOCAL ({args.tz})", "NOTE"], rows)
    day_rule = cron.day_rule_note(args.expr)
    if day_rule is not None:
        print(day_rule)
    if any(row[3] for row in rows):
        print(
            "DST policy: a wall time that occurs twice fires once, at its first occurrence; "
            "one that does not exist fires at the end of the gap (or is skipped if the hour field is *)."
        )
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    return demo_main(args.demo_config or args.config or DEFAULT_DEMO_CONFIG, args.duration)


# ------------------------------------------------------------------------------------------------
# Workflow commands
# ------------------------------------------------------------------------------------------------

BACKFILL_POLL_S = 1.0
_DAY_MS = 86_400_000
# The one place the CLI waits (backfill --wait); a module attribute so tests record instead of sleeping.
_sleep: Callable[[float], None] = time.sleep


def params_from_args(params: str, pairs: Sequence[str]) -> str:
    """``--params JSON`` with every ``--param KEY=VALUE`` (a string) applied over it, as JSON text.

    Raises InvalidSpec (``--params``/``--param``) for a bad object or pair."""
    if not pairs:
        if params:
            validate_params(params, "params")
        return params
    merged: dict[str, Any] = {}
    if params:
        validate_params(params, "params")
        merged = json.loads(params)
    for pair in pairs:
        key, sep, value = pair.partition("=")
        if not sep or not key.strip():
            raise InvalidSpec("param", f"{pair!r} is not KEY=VALUE")
        merged[key.strip()] = value
    text = json.dumps(merged, sort_keys=True, ensure_ascii=False)
    validate_params(text, "params")
    return text


def backfill_end(text: str, now: Now) -> int:
    """``--to``: a time, or a bare date meaning the whole day (its last millisecond, UTC)."""
    end = parse_time(text, now, "--to")
    return end + _DAY_MS - 1 if _DATE_RE.fullmatch(text.strip()) else end


def _cmd_wf_apply(args: argparse.Namespace) -> int:
    from raftsched.workflow.files import load_workflow_file  # YAML/TOML reading only when used

    spec = load_workflow_file(args.file)
    if args.dry_run:
        print(f"{args.file}: workflow {spec.name} is valid ({len(spec.tasks)} tasks; not applied)")
        return 0
    with _connect(args) as client:
        record, changed = client.apply_workflow(spec)
    name = record.spec.name or spec.name
    if changed:
        first = " (created)" if record.version == 1 else ""
        print(f"applied workflow {name}: version {record.version}{first}")
    else:
        print(f"workflow {name} unchanged (version {record.version})")
    if record.next_fire_ms:
        print(f"next scheduled run: {_iso(record.next_fire_ms)}")
    return 0


def _cmd_wf_list(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        workflows = client.list_workflows(prefix=args.prefix)
    if args.json:
        return _print_json([_to_dict(w) for w in workflows])
    rows = [
        [
            w.spec.name,
            str(w.version),
            _schedule_text(w.spec),
            _iso(w.next_fire_ms),
            str(len(w.spec.tasks)),
            str(w.active_runs),
            str(w.runs_total),
        ]
        for w in workflows
    ]
    _print_table(["NAME", "VERSION", "SCHEDULE", "NEXT RUN (UTC)", "TASKS", "ACTIVE", "RUNS"], rows)
    return 0


def _cmd_wf_show(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        record = client.get_workflow(args.name, args.version)
    if args.json:
        return _print_json(_to_dict(record))
    s = record.spec
    fields = [
        ("name", s.name),
        ("version", str(record.version)),
        ("schedule", _schedule_text(s)),
        ("next run", _iso(record.next_fire_ms)),
        ("misfire", _enum(pb.MisfirePolicy, s.misfire, "MISFIRE_") if s.misfire else "latest"),
        ("overlap", _enum(pb.OverlapPolicy, s.overlap, "OVERLAP_") if s.overlap else "skip"),
        ("parallel per run", str(s.max_parallel_per_run or "unlimited")),
        ("parallel overall", str(s.max_parallel or "unlimited")),
        ("backfill share", f"{s.backfill_share_pct or 30}% of executor slots"),
        ("params", s.params_json or "-"),
        ("owner", s.owner or "-"),
        ("description", s.description or "-"),
        ("created", _iso(record.created_ms)),
        ("updated", _iso(record.updated_ms)),
        ("active runs", str(record.active_runs)),
        ("runs total", str(record.runs_total)),
    ]
    width = max(len(k) for k, _ in fields)
    for key, value in fields:
        print(f"{key.ljust(width)}  {value}")
    print()
    rows = [
        [
            t.name,
            _deps_text(t),
            "any" if t.trigger_rule == pb.RULE_ANY else "all",
            f"handler {t.handler}" if t.handler else t.command,
            str(t.max_retries),
            _duration_text(t.timeout_ms) if t.timeout_ms else "-",
            str(t.shards or 1),
        ]
        for t in s.tasks
    ]
    _print_table(["TASK", "DEPENDS ON", "RULE", "RUNS", "RETRIES", "TIMEOUT", "SHARDS"], rows)
    return 0


def _cmd_wf_run(args: argparse.Namespace) -> int:
    logical = 0 if args.logical is None else parse_time(args.logical, _lazy_now(), "--logical")
    params = params_from_args(args.params, args.param)
    with _connect(args) as client:
        run = client.start_workflow_run(args.name, logical, params or None)
    print(f"started {run.run_id} (workflow {run.workflow} v{run.version}, logical {_iso(run.logical_ms)})")
    print(f"follow it: raftsched workflow status {run.run_id}  /  raftsched workflow graph {run.run_id}")
    return 0


def _cmd_wf_runs(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        runs = client.list_workflow_runs(args.name, limit=args.limit, active_only=args.active)
    if args.json:
        return _print_json([_to_dict(r) for r in runs])
    rows = [
        [
            r.run_id,
            str(r.version),
            _iso(r.logical_ms),
            _wf_state(r.state),
            _run_kind(r),
            _tasks_done_text(r),
            _iso(r.created_ms),
            _iso(r.finished_ms),
        ]
        for r in runs
    ]
    _print_table(
        ["RUN", "VERSION", "LOGICAL (UTC)", "STATE", "KIND", "TASKS OK", "CREATED", "FINISHED"], rows
    )
    return 0


def _cmd_wf_status(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        run = client.get_workflow_run(args.run_id)
    if args.json:
        return _print_json(_to_dict(run))
    for line in render_status(run):
        print(line)
    return 0


def _cmd_wf_graph(args: argparse.Namespace) -> int:
    run: pb.WorkflowRun | None = None
    with _connect(args) as client:
        if "@" in args.target:
            if args.version:
                raise UsageError("--version applies to a workflow name; a run has its own version")
            run = client.get_workflow_run(args.target)
            record = client.get_workflow(run.workflow, run.version)
        else:
            record = client.get_workflow(args.target, args.version)
    if args.json:
        return _print_json(graph_dict(record.spec, record.version, run))
    ascii_only = args.ascii or not _can_print("✓←⊘■▶…")
    for line in render_graph(record.spec, record.version, run, ascii_only=ascii_only):
        print(line)
    return 0


def _cmd_wf_kill(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        run = client.kill_workflow_run(args.run_id, args.reason)
    print(f"killed {run.run_id}: {_wf_state(run.state)}")
    return 0


def _cmd_wf_rerun(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        run = client.rerun_workflow_task(args.run_id, args.task)
    again = [t.name for t in run.tasks if t.state in (pb.TASK_WAITING, pb.TASK_READY, pb.TASK_RUNNING)]
    print(f"rerunning {args.task} in {run.run_id}: {len(again)} task(s) to run ({', '.join(again) or '-'})")
    return 0


def _cmd_wf_mark_success(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        run = client.mark_task_success(args.run_id, args.task, args.reason)
    print(f"marked {args.task} succeeded in {run.run_id} (run {_wf_state(run.state)})")
    return 0


def _cmd_wf_lineage(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        upstream, downstream = client.lineage(args.name, args.task, args.version)
    if args.json:
        return _print_json(
            {
                "workflow": args.name,
                "task": args.task,
                "upstream": [{"task": t, "depth": d} for t, d in upstream],
                "downstream": [{"task": t, "depth": d} for t, d in downstream],
            }
        )
    for title, entries in (("upstream", upstream), ("downstream", downstream)):
        print(f"{title} of {args.task}: {len(entries)} task(s)")
        for task, depth in entries:
            print(f"  {depth}  {'  ' * (depth - 1)}{task}")
    return 0


def _cmd_wf_backfill(args: argparse.Namespace) -> int:
    now = _lazy_now()
    start = parse_time(args.from_, now, "--from")
    end = backfill_end(args.to, now)
    params = params_from_args(args.params, args.param)
    with _connect(args) as client:
        record = client.backfill(args.name, start, end, params or None)
        print(
            f"backfill {record.backfill_id}: {record.runs_total} run(s) of {record.workflow}, "
            f"logical times {_iso(record.from_ms)} .. {_iso(record.to_ms)}, "
            f"at most {record.share_pct or 30}% of executor slots"
        )
        if not args.wait:
            print(
                f"watch it: raftsched workflow backfill-status {record.backfill_id} --wait"
                f"  (runs: raftsched workflow runs {record.workflow})"
            )
            return 0
        return _watch_backfill(client, record)


def _cmd_wf_backfill_status(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        record = client.get_backfill(args.backfill_id)
        if args.json:
            return _print_json(_to_dict(record))
        if args.wait:
            return _watch_backfill(client, record)
    print(_backfill_line(record))
    return 0


def _cmd_wf_backfills(args: argparse.Namespace) -> int:
    with _connect(args) as client:
        records = client.list_backfills(args.name)
    if args.json:
        return _print_json([_to_dict(b) for b in records])
    rows = [
        [
            b.backfill_id,
            _iso(b.from_ms),
            _iso(b.to_ms),
            progress_bar(b.runs_finished, b.runs_total, width=10),
            str(b.runs_failed),
            f"{b.share_pct or 30}%",
            _iso(b.created_ms),
            _iso(b.finished_ms),
        ]
        for b in records
    ]
    _print_table(["BACKFILL", "FROM", "TO", "PROGRESS", "FAILED", "SHARE", "CREATED", "FINISHED"], rows)
    return 0


def _watch_backfill(client: Client, record: pb.BackfillRecord) -> int:
    """Poll the backfill until every run finished, redrawing a progress bar (one line per change
    when stdout is not a terminal). Exit status 1 if any run failed."""
    tty = sys.stdout.isatty()
    last = ""
    while True:
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
    if tty:
        print()
    print(_backfill_line(record))
    if record.runs_failed:
        return _fail(f"backfill {record.backfill_id}: {record.runs_failed} run(s) failed", 1)
    return 0


def _backfill_done(record: pb.BackfillRecord) -> bool:
    return bool(record.finished_ms) or record.runs_finished >= record.runs_total


def _backfill_line(b: pb.BackfillRecord) -> str:
    state = f"finished {_iso(b.finished_ms)}" if _backfill_done(b) else "running"
    return (
        f"backfill {b.backfill_id} ({b.workflow}, {_iso(b.from_ms)} .. {_iso(b.to_ms)}): "
        f"{b.runs_finished}/{b.runs_total} runs finished, {b.runs_failed} failed; {state}"
    )


# -- workflow rendering (pure) ------------------------------------------------------------------------


def progress_bar(done: int, total: int, width: int = 30) -> str:
    """``[#####.....] 12/30 runs``: ``width`` cells, filled in proportion (never full before done)."""
    done = max(0, min(done, total))
    filled = width if total and done >= total else (width * done // total if total else 0)
    return f"[{'#' * filled}{'.' * (width - filled)}] {done}/{total} runs"


_STATE_MARK: dict[int, tuple[str, str]] = {
    pb.TASK_SUCCESS: ("✓", "ok"),
    pb.TASK_FAILED: ("✗", "x"),
    pb.TASK_TIMEOUT: ("✗", "x"),
    pb.TASK_SKIPPED: ("⊘", "-"),
    pb.TASK_KILLED: ("■", "k"),
    pb.TASK_RUNNING: ("▶", ">"),
    pb.TASK_READY: ("…", "."),
    pb.TASK_WAITING: ("…", "."),
}
_CONDITION_TEXT: dict[int, str] = {pb.ON_FAILURE: "on failure", pb.ON_DONE: "on done"}


def graph_layers(spec: pb.WorkflowSpec) -> list[list[int]]:
    """Task indexes by topological layer: layer 0 has no dependencies; a task's layer is one more
    than its deepest dependency's (so every edge points to a later layer). Spec order within a layer."""
    from raftsched.workflow.dag import compile_dag

    dag = compile_dag(spec)
    depth = [0] * len(dag.names)
    for i in dag.topo:
        depth[i] = max((depth[j] + 1 for j, _ in dag.upstream[i]), default=0)
    layers: list[list[int]] = [[] for _ in range(max(depth, default=-1) + 1)]
    for i in range(len(dag.names)):
        layers[depth[i]].append(i)
    return layers


def render_graph(
    spec: pb.WorkflowSpec, version: int, run: pb.WorkflowRun | None = None, *, ascii_only: bool = False
) -> list[str]:
    """The DAG as text, one block per topological layer, one line per task with its dependencies::

        layer 2
          load      [skipped]  ← extract ✓, validate ✗

    With a run, each task shows its state and each dependency a mark of its state; an edge that
    waits for something other than success says so (``(on failure)``, ``(on done)``), as does a
    task that needs only one of its dependencies (``any of:``).
    """
    arrow = "<-" if ascii_only else "←"
    states: dict[str, int] = {t.name: t.state for t in run.tasks} if run is not None else {}
    index = {t.name: t for t in spec.tasks}
    if run is not None:
        head = f"workflow {spec.name} v{version}, run {run.run_id}: {_wf_state(run.state)}"
    else:
        head = f"workflow {spec.name} v{version}: {len(spec.tasks)} task(s), {_schedule_text(spec)}"
    lines = [head]
    layers = graph_layers(spec)
    width = max((len(t.name) for t in spec.tasks), default=0)
    state_width = max((len(_task_state(s)) + 2 for s in states.values()), default=0)
    for n, layer in enumerate(layers):
        lines.append(f"layer {n}")
        for i in layer:
            task = spec.tasks[i]
            cells = [task.name.ljust(width)]
            if run is not None:
                cells.append(f"[{_task_state(states.get(task.name, 0))}]".ljust(state_width))
            deps = []
            for dep in task.depends_on:
                text = dep.task
                if run is not None and dep.task in index:
                    text += " " + _STATE_MARK.get(states.get(dep.task, 0), ("?", "?"))[ascii_only]
                condition = _CONDITION_TEXT.get(dep.condition)
                if condition:
                    text += f" ({condition})"
                deps.append(text)
            if deps:
                rule = "any of: " if task.trigger_rule == pb.RULE_ANY and len(deps) > 1 else ""
                cells.append(f"{arrow} {rule}{', '.join(deps)}")
            lines.append(("  " + "  ".join(cells)).rstrip())
    if run is not None:
        marks = [
            (pb.TASK_SUCCESS, "success"),
            (pb.TASK_FAILED, "failed/timeout"),
            (pb.TASK_SKIPPED, "skipped"),
        ]
        marks += [(pb.TASK_KILLED, "killed"), (pb.TASK_RUNNING, "running"), (pb.TASK_WAITING, "waiting")]
        lines.append("  ".join(f"{_STATE_MARK[s][ascii_only]} {text}" for s, text in marks))
    return lines


def graph_dict(spec: pb.WorkflowSpec, version: int, run: pb.WorkflowRun | None) -> dict[str, Any]:
    """``workflow graph --json``: the layers, each task with its dependencies (and states)."""
    states = {t.name: t for t in run.tasks} if run is not None else {}

    def task_dict(i: int) -> dict[str, Any]:
        task = spec.tasks[i]
        out: dict[str, Any] = {
            "task": task.name,
            "rule": "any" if task.trigger_rule == pb.RULE_ANY else "all",
            "depends_on": [
                {
                    "task": d.task,
                    "condition": _CONDITION_TEXT.get(d.condition, "on success").replace(" ", "_"),
                }
                for d in task.depends_on
            ],
        }
        if run is not None:
            out["state"] = _task_state(states[task.name].state) if task.name in states else None
        return out

    return {
        "workflow": spec.name,
        "version": version,
        "run_id": run.run_id if run is not None else None,
        "state": _wf_state(run.state) if run is not None else None,
        "layers": [[task_dict(i) for i in layer] for layer in graph_layers(spec)],
    }


def render_status(run: pb.WorkflowRun) -> list[str]:
    """``workflow status``: the run, a table of its tasks, then every task's timeline."""
    kind = _run_kind(run)
    lines = [
        f"run {run.run_id}: {_wf_state(run.state)}",
        f"workflow {run.workflow} v{run.version}, {kind}, logical {_iso(run.logical_ms)}, "
        f"created {_iso(run.created_ms)}, finished {_iso(run.finished_ms)}",
    ]
    if run.params_json:
        lines.append(f"params {run.params_json}")
    headers = ["TASK", "STATE", "TRIES", "TASK RUN", "REASON"]
    rows = [[t.name, _task_state(t.state), str(t.tries), t.run_id or "-", t.reason] for t in run.tasks]
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(headers)]
    lines.append("")
    for row in [headers, *rows]:
        lines.append("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())
    lines += ["", "timeline (UTC)"]
    for t in run.tasks:
        lines.append(f"  {t.name}")
        for entry in t.timeline:
            lines.append(
                f"    {_iso(entry.at_ms)}  {_task_state(entry.state).ljust(9)}{entry.reason}".rstrip()
            )
    return lines


def _schedule_text(spec: pb.WorkflowSpec) -> str:
    if not spec.schedule.expr:
        return "no schedule"
    return f"cron '{spec.schedule.expr}' {spec.schedule.timezone or 'UTC'}"


def _deps_text(task: pb.WorkflowTaskSpec) -> str:
    parts = []
    for d in task.depends_on:
        condition = _CONDITION_TEXT.get(d.condition)
        parts.append(f"{d.task} ({condition})" if condition else d.task)
    return ", ".join(parts) or "-"


def _task_state(state: int) -> str:
    return _enum(pb.WorkflowTaskState, state, "TASK_")


def _wf_state(state: int) -> str:
    return _enum(pb.WorkflowRunState, state, "WORKFLOW_")


def _run_kind(run: pb.WorkflowRun) -> str:
    if run.backfill_id:
        return f"backfill {run.backfill_id}"
    return "manual" if run.manual else "scheduled"


def _tasks_done_text(run: pb.WorkflowRun) -> str:
    ok = sum(1 for t in run.tasks if t.state == pb.TASK_SUCCESS)
    return f"{ok}/{len(run.tasks)}"


def _can_print(text: str) -> bool:
    encoding = getattr(sys.stdout, "encoding", None) or "ascii"
    try:
        text.encode(encoding)
    except (UnicodeEncodeError, LookupError):
        return False
    return True


# ------------------------------------------------------------------------------------------------
# Output
# ------------------------------------------------------------------------------------------------


def _print_task(t: pb.TaskRecord) -> None:
    s = t.spec
    window = f", window {_duration_text(s.misfire_all_window_ms)}" if s.misfire_all_window_ms else ""
    cap = f", cap {s.misfire_all_cap}" if s.misfire_all_cap else ""
    fields = [
        ("name", s.name),
        ("enabled", "yes" if t.enabled else "no"),
        ("schedule", _trigger_text(s.trigger)),
        ("next fire", _iso(t.next_fire_ms)),
        ("command", s.command) if s.command else ("handler", s.handler or "-"),
        ("params", s.params_json or "-"),
        ("shards", str(s.shards or 1)),
        ("misfire", _enum(pb.MisfirePolicy, s.misfire, "MISFIRE_") + cap + window),
        ("overlap", _enum(pb.OverlapPolicy, s.overlap, "OVERLAP_")),
        ("retries", str(s.max_retries)),
        ("timeout", _duration_text(s.timeout_ms) if s.timeout_ms else "none"),
        ("priority", str(s.priority)),
        ("owner", s.owner or "-"),
        ("namespace", s.namespace or "default"),
        ("description", s.description or "-"),
        ("version", str(t.version)),
        ("created", _iso(t.created_ms)),
        ("updated", _iso(t.updated_ms)),
        ("watermark", _iso(t.watermark_ms)),
        ("active runs", str(t.active_runs)),
        ("fires total", f"{t.fires_total} ({t.kept_fires} kept)"),
        ("runs total", f"{t.runs_total} ({t.kept_runs} finished kept)"),
    ]
    width = max(len(k) for k, _ in fields)
    for key, value in fields:
        print(f"{key.ljust(width)}  {value}")


def _trigger_text(trigger: pb.Trigger) -> str:
    kind = trigger.WhichOneof("kind")
    if kind == "cron":
        return f"cron '{trigger.cron.expr}' {trigger.cron.timezone or 'UTC'}"
    if kind == "interval":
        start = f" from {_iso(trigger.interval.start_ms)}" if trigger.interval.start_ms else ""
        return f"every {_duration_text(trigger.interval.every_ms)}{start}"
    if kind == "once":
        return f"once at {_iso(trigger.once.at_ms)}"
    return "manual"


def _shards_text(run: pb.Run) -> str:
    shards = {a.shard for a in run.shards}
    done = {a.shard for a in run.shards if a.state == pb.SUCCEEDED}
    return f"{len(done)}/{len(shards)}" if shards else "-"


def _digest_warnings(view: ClusterView) -> list[str]:
    """Nodes that applied the same index must hold the same state; say so loudly if not."""
    by_index: dict[int, set[str]] = {}
    for n in view.nodes:
        if n.status is not None and n.status.state_digest:
            by_index.setdefault(n.status.applied_index, set()).add(n.status.state_digest)
    return [
        f"nodes at applied index {index} report {len(digests)} different state digests"
        for index, digests in sorted(by_index.items())
        if len(digests) > 1
    ]


def _cluster_dict(view: ClusterView) -> dict[str, Any]:
    return {
        "leader_id": view.leader_id,
        "leader_addr": view.leader_addr,
        "term": view.term,
        "commit_index": view.commit_index,
        "nodes": [
            {
                "target": n.target,
                "reachable": n.status is not None,
                "status": _to_dict(n.status) if n.status is not None else None,
                "error": n.error,
            }
            for n in view.nodes
        ],
    }


def _iso(ms: int) -> str:
    """UTC ISO 8601 with a Z (milliseconds only when there are any); ``-`` for 0 (unset)."""
    if not ms:
        return "-"
    try:
        moment = _EPOCH + dt.timedelta(milliseconds=ms)
    except OverflowError:
        return str(ms)
    text = moment.isoformat(timespec="milliseconds" if ms % 1000 else "seconds")
    return text.removesuffix("+00:00") + "Z"


def _offset_of(local_iso: str) -> str:
    return local_iso[-6:] if local_iso[-6:-5] in "+-" else "Z"


def _duration_text(ms: int) -> str:
    for unit, size in (("d", 86_400_000), ("h", 3_600_000), ("m", 60_000), ("s", 1000)):
        if ms and ms % size == 0:
            return f"{ms // size}{unit}"
    return f"{ms}ms"


def _enum(enum: Any, value: int, prefix: str = "") -> str:
    """A protobuf enum value's name, lower case, without its prefix (the number if unknown)."""
    try:
        name: str = enum.Name(value)
    except ValueError:
        return str(value)
    return name.removeprefix(prefix).lower()


def _to_dict(message: Message) -> dict[str, Any]:
    return MessageToDict(
        message,
        preserving_proto_field_name=True,
        always_print_fields_with_no_presence=True,
        unquote_int64_if_possible=True,
    )


def _print_json(value: object) -> int:
    print(json.dumps(value, indent=2, ensure_ascii=False))
    return 0


def _print_table(headers: list[str], rows: list[list[str]]) -> None:
    if not rows:
        print("(none)")
        return
    widths = [max(len(h), *(len(r[i]) for r in rows)) for i, h in enumerate(headers)]
    for row in [headers, *rows]:
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())


# ------------------------------------------------------------------------------------------------
# Errors
# ------------------------------------------------------------------------------------------------


def _fail(message: str, status: int, *, prog: str = "raftsched") -> int:
    one_line = " ".join(part.strip() for part in message.splitlines() if part.strip())
    print(f"{prog}: error: {one_line}", file=sys.stderr)
    return status


def _fail_workflow(exc: InvalidWorkflow) -> int:
    """An invalid workflow: a headline, then every problem on its own line (file:line first)."""
    headline = str(exc).split("\n", 1)[0]  # "invalid workflow "etl": 3 problems"
    print(f"raftsched: error: {headline}", file=sys.stderr)
    for location, message in exc.problems:
        print(f"  {location}: {message}" if location else f"  {message}", file=sys.stderr)
    return 2


def _invalid_message(exc: InvalidSpec) -> str:
    if not exc.field:
        return exc.reason
    return f"{_FLAGS.get(exc.field, exc.field)}: {exc.reason}"


def _config_message(exc: ConfigError) -> str:
    return f"invalid config {exc.source}: " + "; ".join(exc.problems)


def _is_grpc_error(exc: Exception) -> bool:
    grpc = sys.modules.get("grpc")
    return grpc is not None and isinstance(exc, grpc.RpcError)


if __name__ == "__main__":
    sys.exit(main())


def executor_main(argv: Sequence[str] | None = None) -> int:
    """``raftsched-executor --cluster HOST:PORT,... --name NAME --slots N --data-dir DIR``."""
    parser = _Parser(prog="raftsched-executor", description="Run a raftsched executor until SIGTERM/SIGINT.")
    parser.add_argument("--cluster", metavar="HOST:PORT,...", help="the nodes' gRPC addresses")
    parser.add_argument(
        "--config", metavar="FILE", help="read the nodes' gRPC addresses from a cluster config"
    )
    parser.add_argument("--name", required=True, help="this executor's unique name")
    parser.add_argument("--slots", type=int, default=4, help="attempts run at once (default: 4)")
    parser.add_argument("--data-dir", default="executor-data", help="execution log directory")
    parser.add_argument(
        "--label", action="append", default=[], metavar="KEY=VALUE", help="a label (repeatable)"
    )
    parser.add_argument("--log-level", default="info", choices=["debug", "info", "warning", "error"])
    try:
        try:
            args = parser.parse_args(list(sys.argv[1:] if argv is None else argv))
        except SystemExit as done:
            return done.code if isinstance(done.code, int) else 0
        logging.basicConfig(
            level=args.log_level.upper(), format="%(asctime)s %(levelname)s %(name)s: %(message)s"
        )
        targets = args.cluster or os.environ.get("RAFTSCHED_CLUSTER", "")
        if args.config:
            from raftsched.config import load_config

            targets = ",".join(load_config(args.config).grpc_targets())
        if not targets:
            raise UsageError("give --cluster HOST:PORT,... or --config FILE (or set RAFTSCHED_CLUSTER)")
        labels = dict(label.split("=", 1) for label in args.label if "=" in label)
        from raftsched.executor.agent import Executor

        executor = Executor(targets, args.name, slots=args.slots, data_dir=args.data_dir, labels=labels)

        async def serve() -> None:
            stop = asyncio.Event()
            loop = asyncio.get_running_loop()
            for sig in (signal.SIGTERM, signal.SIGINT):
                loop.add_signal_handler(sig, stop.set)
            await executor.run(stop)

        asyncio.run(serve())
        return 0
    except UsageError as exc:
        return _fail(str(exc), 2, prog="raftsched-executor")
    except ConfigError as exc:
        return _fail(_config_message(exc), 2, prog="raftsched-executor")
    except InvalidSpec as exc:
        return _fail(str(exc), 2, prog="raftsched-executor")
