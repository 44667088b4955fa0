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
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, NoReturn

from google.protobuf.json_format import MessageToDict
from google.protobuf.message import Message

from raftsched import codec
from raftsched.errors import ConfigError, InvalidSpec, RaftschedError
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
_TIME_OPTIONS = frozenset({"--since", "--until", "--from", "--at", "--start"})
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
    if any(row[3] for row in rows):
        print(
            "DST policy: a wall time that occurs twice fires once, at its first occurrence; "
            "one that does not exist fires at the end of the gap (or is skipped if the hour field is *)."
        )
    return 0


def _cmd_demo(args: argparse.Namespace) -> int:
    return demo_main(args.demo_config or args.config or DEFAULT_DEMO_CONFIG, args.duration)


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
