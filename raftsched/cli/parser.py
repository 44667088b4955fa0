"""The ``raftsched`` admin CLI: its argument parser, and :func:`main`, which runs one command.

No scheduling logic lives in the CLI: commands parse arguments, call :class:`raftsched.Client`
(or, for ``cron preview``, :func:`raftsched.timing.cron.preview`), and print. Failures follow
:mod:`raftsched.cli.errors` (one line on stderr; exit status 2 for bad input, 3 when the cluster
does not accept the credentials, 4 when they do not allow the command, 1 otherwise).

The global options (``--cluster``, ``--config``, ``--timeout``) may come before the command or
after it (``raftsched status --config X``), except where the command has an option of the same
name (``task add|update --timeout`` is the task's timeout, ``demo --config`` the demo's config).
"""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Sequence
from typing import Any

from raftsched import __version__
from raftsched.cli import access, alerts, apply, calendars, cluster, cron, events, tasks, workflows
from raftsched.cli import logs as logs_cmd
from raftsched.cli import policy as policy_cli
from raftsched.cli import pools as pools_cli
from raftsched.cli import taskbackfill as taskbackfill_cli
from raftsched.cli.demo import DEFAULT_DEMO_CONFIG, cmd_demo
from raftsched.cli.errors import (
    ArgParser,
    UsageError,
    config_message,
    fail,
    fail_workflow,
    invalid_message,
    is_grpc_error,
)
from raftsched.cli.input import (
    TIME_HELP,
    attach_negative_times,
    backoff_arg,
    duration_arg,
    durations_arg,
    non_negative_int,
    positive_seconds,
)
from raftsched.cli.options import CLUSTER_ENV, TLS_HELP
from raftsched.errors import (
    ConfigError,
    InvalidSpec,
    InvalidWorkflow,
    PermissionDenied,
    RaftschedError,
    Unauthenticated,
)
from raftsched.model import RunState
from raftsched.taskfields import Field, Kind, cli_field
from raftsched.timing.cron import MAX_PREVIEW
from raftsched.workflow.dag import LINEAGE_MAX_DEPTH

__all__ = [
    "EXIT_BROKEN_PIPE",
    "EXIT_PERMISSION_DENIED",
    "EXIT_UNAUTHENTICATED",
    "build_parser",
    "main",
    "quiet_grpc_core",
]

EXIT_UNAUTHENTICATED = 3  # no token, or a malformed, unknown, expired or revoked one
EXIT_PERMISSION_DENIED = 4  # the token's role or namespaces do not allow the command
EXIT_BROKEN_PIPE = 141
"""The exit status when stdout's reader went away (``raftsched ... | head``): 128 + SIGPIPE, what
a command killed by SIGPIPE reports, as ``yes | head`` does."""

# The global options a command may also take after its name: (option, dest, keyword arguments).
_GLOBAL_OPTIONS: tuple[tuple[str, str, dict[str, Any]], ...] = (
    ("--cluster", "cluster", {"metavar": "HOST:PORT,...", "help": "the nodes' gRPC addresses"}),
    (
        "--config",
        "config",
        {"metavar": "FILE", "help": "read the nodes' gRPC addresses from a cluster config"},
    ),
    (
        "--timeout",
        "rpc_timeout",
        {
            "type": positive_seconds,
            "metavar": "SECONDS",
            "help": "deadline of each RPC attempt (default: 10)",
        },
    ),
    (
        "--tls-ca",
        "tls_ca",
        {"metavar": "FILE", "help": "PEM CA certificate(s) the nodes' certificates must chain to"},
    ),
    (
        "--tls-cert",
        "tls_cert",
        {"metavar": "FILE", "help": "PEM client certificate (for nodes that require one)"},
    ),
    ("--tls-key", "tls_key", {"metavar": "FILE", "help": "PEM private key of --tls-cert"}),
    (
        "--stale",
        "stale_reads",
        {
            "action": "store_true",
            "help": "let any node answer reads (possibly behind the leader); writes still go to the leader",
        },
    ),
)
_LATE = "late_"  # the dest prefix of a global option given after the command


def main(argv: Sequence[str] | None = None) -> int:
    """``raftsched``: the admin CLI. Returns the exit status.

    Output cut short by its reader (``| head``) ends the command quietly with
    :data:`EXIT_BROKEN_PIPE`, without a traceback."""
    quiet_grpc_core()
    try:
        status = _run(list(sys.argv[1:] if argv is None else argv))
        sys.stdout.flush()  # here, not at interpreter exit, where a closed pipe cannot be caught
        return status
    except BrokenPipeError:
        _discard_stdout()
        return EXIT_BROKEN_PIPE


def _discard_stdout() -> None:
    """Point stdout at /dev/null: the interpreter flushes it once more at exit, and a write to the
    closed pipe would print "Exception ignored ... BrokenPipeError" there."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):
        return  # not a real file (a test's capture): nothing is flushed to a pipe at exit
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, fd)
    finally:
        os.close(devnull)


def parse_args(args_list: Sequence[str]) -> argparse.Namespace:
    """The command line parsed as the CLI runs it (global options before or after the command).
    Raises SystemExit for --help, --version or a usage error, as argparse does."""
    return _merge_late_globals(build_parser().parse_args(attach_negative_times(list(args_list))))


def _run(args_list: list[str]) -> int:
    try:
        try:
            args = parse_args(args_list)
        except SystemExit as done:  # --help, --version
            return done.code if isinstance(done.code, int) else 0
        command: Callable[[argparse.Namespace], int] = args.run_command
        return command(args)
    except UsageError as exc:
        return fail(str(exc), 2)
    except InvalidWorkflow as exc:
        return fail_workflow(exc)
    except InvalidSpec as exc:
        return fail(invalid_message(exc), 2)
    except ConfigError as exc:
        return fail(config_message(exc), 2)
    except Unauthenticated as exc:
        return fail(f"not authenticated: {exc}", EXIT_UNAUTHENTICATED)
    except PermissionDenied as exc:
        return fail(f"permission denied: {exc}", EXIT_PERMISSION_DENIED)
    except RaftschedError as exc:
        return fail(str(exc) or exc.code, 1)
    except KeyboardInterrupt:
        return fail("interrupted", 130)
    except Exception as exc:
        if is_grpc_error(exc):  # the client maps these; this is only a safety net
            return fail(f"gRPC error: {exc}", 1)
        raise


def quiet_grpc_core() -> None:
    """Keep gRPC core's own INFO lines (one per failed TLS handshake) off a program's stderr: the
    program reports the failure itself, in one line. Effective only before gRPC is imported;
    an explicit ``GRPC_VERBOSITY`` wins."""
    os.environ.setdefault("GRPC_VERBOSITY", "ERROR")


def build_parser() -> argparse.ArgumentParser:
    """The ``raftsched`` argument parser. Each leaf command sets ``run_command``."""
    # No abbreviations of the global options: "--to" of a subcommand must not be read as
    # (an ambiguous prefix of) the global --token / --token-file.
    parser = ArgParser(
        allow_abbrev=False,
        prog="raftsched",
        description="Manage a raftsched cluster (a Raft-replicated cron scheduler).\n"
        "Global options go before or after the command.",
        epilog=f"cluster: --cluster, else --config, else ${CLUSTER_ENV}.\n{TLS_HELP}\n{TIME_HELP}",
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    where = parser.add_mutually_exclusive_group()
    for option, dest, options in _GLOBAL_OPTIONS:
        container = where if dest in ("cluster", "config") else parser
        container.add_argument(option, dest=dest, **options)
    parser.set_defaults(rpc_timeout=10.0)
    access.add_token_options(parser)
    commands = parser.add_subparsers(dest="command", metavar="COMMAND", required=True)
    access.add_commands(commands, _leaf, _json_option)

    task = commands.add_parser("task", help="add, update, list, show, delete, enable or disable tasks")
    actions = task.add_subparsers(dest="action", metavar="ACTION", required=True)
    add = _leaf(actions, "add", tasks.cmd_task_add, "create a task", times=True, late=_NOT_TIMEOUT)
    add.add_argument("name", metavar="NAME", help="task name")
    _add_spec_options(add, update=False)
    update = _leaf(
        actions,
        "update",
        tasks.cmd_task_update,
        "change a task; options not given keep their current value "
        "(sent with the current version, so a concurrent change is a conflict)",
        times=True,
        late=_NOT_TIMEOUT,
    )
    update.add_argument("name", metavar="NAME", help="task name")
    _add_spec_options(update, update=True)
    listing = _leaf(actions, "list", tasks.cmd_task_list, "list tasks")
    listing.add_argument("--prefix", default="", metavar="P", help="only names starting with P")
    _json_option(listing)
    show = _leaf(actions, "show", tasks.cmd_task_show, "show one task")
    show.add_argument("name", metavar="NAME")
    _json_option(show)
    for action, handler, text in (
        ("delete", tasks.cmd_task_delete, "delete a task"),
        ("enable", tasks.cmd_task_enable, "enable a task (it fires again from now on)"),
        ("disable", tasks.cmd_task_disable, "disable a task (its fires are accounted as skipped_disabled)"),
    ):
        _leaf(actions, action, handler, text).add_argument("name", metavar="NAME")

    retry = _leaf(
        commands, "retry", tasks.cmd_retry, "run a failed run's failed shards again (retry count reset)"
    )
    retry.add_argument("run_id", metavar="RUN_ID", help="the run, e.g. backup@1796000000000")
    trigger = _leaf(commands, "trigger", tasks.cmd_trigger, "start a manual run of a task now")
    trigger.add_argument("name", metavar="NAME")
    trigger.add_argument("--params", metavar="JSON", default="", help="run parameters, a JSON object")

    runs = _leaf(
        commands,
        "runs",
        tasks.cmd_runs,
        "list runs (of one task, or all); `runs cancel (--task T | --namespace NS | --owner O) "
        "[--state pending|running] [--dry-run] [--reason TEXT]` cancels the unfinished ones",
        times=True,
    )
    runs.add_argument(
        "name",
        metavar="NAME",
        nargs="?",
        default="",
        help="task name (default: all tasks); `cancel`: cancel runs (a task named cancel: --task cancel)",
    )
    _range_options(runs, "nominal time")
    runs.add_argument("--state", choices=[s.value for s in RunState], help="only runs in this state")
    runs.add_argument("--limit", type=non_negative_int, default=0, metavar="N", help="at most N runs")
    _json_option(runs)
    runs.add_argument("--task", default="", metavar="T", help="the runs of task T (same as NAME)")
    runs.add_argument("--namespace", default="", metavar="NS", help="runs cancel: the runs of namespace NS")
    runs.add_argument("--owner", default="", metavar="O", help="runs cancel: the runs of owner O's tasks")
    runs.add_argument(
        "--dry-run", action="store_true", help="runs cancel: list what would be cancelled, change nothing"
    )
    runs.add_argument(
        "--reason", default="", metavar="TEXT", help="runs cancel: recorded in each run's timeline"
    )

    run = commands.add_parser("run", help="one run: its state and timeline")
    run_actions = run.add_subparsers(dest="action", metavar="ACTION", required=True)
    run_show = _leaf(
        run_actions, "show", tasks.cmd_run_show, "show a run, its shards and every transition with its time"
    )
    run_show.add_argument("run_id", metavar="RUN_ID", help="the run, e.g. backup@1796000000000")
    _json_option(run_show)
    run_cancel = _leaf(
        run_actions,
        "cancel",
        tasks.cmd_run_cancel,
        "cancel an unfinished run: running attempts get SIGTERM, the executor's grace, then SIGKILL; "
        "the run ends cancelled with the reason and who asked in its timeline",
    )
    run_cancel.add_argument("run_id", metavar="RUN_ID", help="the run, e.g. backup@1796000000000")
    run_cancel.add_argument("--shard", type=non_negative_int, default=None, metavar="N", help="only shard N")
    run_cancel.add_argument("--reason", default="", metavar="TEXT", help="recorded in the run's timeline")
    _json_option(run_cancel)
    logs = _leaf(
        commands,
        "logs",
        logs_cmd.cmd_logs,
        "stream an attempt's whole stdout (or stderr) from the executor that ran it, live or after "
        "the fact (the stored tail, with a note, when the executor or its file is gone)",
    )
    logs.add_argument("run_id", metavar="RUN_ID", help="the run, e.g. backup@1796000000000")
    logs.add_argument(
        "--shard", type=non_negative_int, default=None, metavar="N", help="shard N (default: 0; --tails: all)"
    )
    logs.add_argument(
        "--attempt", type=non_negative_int, default=0, metavar="N", help="attempt N (default: the latest)"
    )
    logs.add_argument("--stderr", action="store_true", help="stderr instead of stdout")
    logs.add_argument("--follow", "-f", action="store_true", help="keep streaming while the attempt runs")
    logs.add_argument(
        "--since-line", type=non_negative_int, default=0, metavar="N", help="start at line N (1-based)"
    )
    logs.add_argument(
        "--tail",
        type=non_negative_int,
        default=0,
        metavar="BYTES",
        help="only about the last BYTES of the log, from a line start",
    )
    logs.add_argument(
        "--tails", action="store_true", help="print the stored 8 KiB tails of every shard, both streams"
    )
    logs.add_argument(
        "--json", action="store_true", help="one JSON object per line: a header, each line, an end"
    )

    fires = _leaf(
        commands, "fires", tasks.cmd_fires, "fire accounting: how each nominal fire was handled", times=True
    )
    fires.add_argument("name", metavar="NAME")
    _range_options(fires, "nominal time")
    fires.add_argument("--limit", type=non_negative_int, default=0, metavar="N", help="at most N records")
    _json_option(fires)

    explain = _leaf(
        commands, "explain", tasks.cmd_explain, "explain why a task did or did not fire at a time", times=True
    )
    explain.add_argument("name", metavar="NAME")
    explain.add_argument("--at", required=True, metavar="T", help="the time to explain")
    _json_option(explain)

    status = _leaf(commands, "status", cluster.cmd_status, "cluster status: leader, term, every node's state")
    status.add_argument(
        "--no-digest",
        dest="digests",
        action="store_false",
        help="skip the state digests (each node hashes its whole store for them)",
    )
    _json_option(status)

    alerts_cmd = _leaf(
        commands, "alerts", alerts.cmd_alerts, "list alert events and their delivery per webhook", times=True
    )
    alerts_cmd.add_argument("--since", metavar="T", help="events at or after T (default: all retained)")
    alerts_cmd.add_argument("--limit", type=non_negative_int, default=0, metavar="N", help="newest N events")
    _json_option(alerts_cmd)
    alert_actions = alerts_cmd.add_subparsers(dest="action", metavar="ACTION")
    ack = _leaf(alert_actions, "ack", alerts.cmd_alerts_ack, "acknowledge an alert event")
    ack.add_argument("id", metavar="ID", help="the event's id, e.g. alert-12")
    executors = _leaf(
        commands,
        "executors",
        cluster.cmd_executors,
        "list the executors: state, slots used/total, labels, address and last heartbeat",
    )
    executors.add_argument("--all", action="store_true", help="also executors that left")
    _json_option(executors)
    executor_parser = commands.add_parser("executor", help="operate on one executor")
    executor_actions = executor_parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    drain = _leaf(
        executor_actions,
        "drain",
        cluster.cmd_executor_drain,
        "drain an executor: no new attempts are placed on it, the running ones finish; "
        "`executors` then shows it draining, and drained once nothing runs (it may leave)",
    )
    drain.add_argument("name", metavar="NAME")
    drain.add_argument("--reason", default="", metavar="TEXT", help="recorded with the drain")
    _json_option(drain)
    backup = _leaf(
        commands,
        "backup",
        cluster.cmd_backup,
        "write a consistent backup of the replicated state to FILE (from any node; admin role); "
        "restore it with raftsched-node --restore FILE",
    )
    backup.add_argument("file", metavar="FILE")
    _json_option(backup)

    policy_cli.add_commands(commands, _leaf, _json_option)
    cluster_parser = commands.add_parser("cluster", help="membership: add or remove scheduler nodes")
    cluster_actions = cluster_parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    add_node = _leaf(
        cluster_actions,
        "add-node",
        cluster.cmd_add_node,
        "add a scheduler node to the replicated membership (then start it with raftsched-node --join)",
    )
    add_node.add_argument("id", metavar="ID", help="the new node's id")
    add_node.add_argument("--raft", required=True, metavar="HOST:PORT", help="its Raft address")
    add_node.add_argument("--grpc", required=True, metavar="HOST:PORT", help="its gRPC address")
    add_node.add_argument("--http", default="", metavar="HOST:PORT", help="its /metrics listener, if any")
    _json_option(add_node)
    remove_node = _leaf(
        cluster_actions, "remove-node", cluster.cmd_remove_node, "remove a scheduler node from the membership"
    )
    remove_node.add_argument("id", metavar="ID", help="the node's id")
    _json_option(remove_node)
    members = _leaf(
        cluster_actions, "members", cluster.cmd_members, "the replicated membership and a change in progress"
    )
    _json_option(members)

    cron_parser = commands.add_parser("cron", help="cron tools (local; no cluster needed)")
    cron_actions = cron_parser.add_subparsers(dest="action", metavar="ACTION", required=True)
    preview = _leaf(
        cron_actions,
        "preview",
        cron.cmd_cron_preview,
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
        help=f"how many fires, 1-{MAX_PREVIEW} (default: 10)",
    )
    preview.add_argument(
        "--jitter",
        type=duration_arg,
        default=0,
        metavar="DURATION",
        help="show each fire's start offset for a task with this jitter (needs --task)",
    )
    preview.add_argument(
        "--task", default="", metavar="NAME", help="with --jitter: the task (offsets hash its name)"
    )
    preview.add_argument(
        "--exclude",
        action="append",
        metavar="CALENDAR",
        help="mark the fires this cluster calendar skips (repeatable; asks the cluster)",
    )
    preview.add_argument(
        "--exclude-file",
        action="append",
        metavar="FILE",
        help="mark the fires on the dates of this holidays file (offline; repeatable)",
    )
    preview.add_argument(
        "--exclude-zone", metavar="ZONE", help="time zone of --exclude-file's dates (default: --tz)"
    )
    _json_option(preview)

    _add_calendar_commands(commands)
    _add_event_commands(commands)
    applying = _leaf(
        commands,
        "apply",
        apply.cmd_apply,
        "make the cluster's tasks match task files (YAML or TOML): create, update or leave each "
        "unchanged, one line per task",
    )
    applying.add_argument("files", nargs="+", metavar="FILE", help="task files (.yaml, .yml, .toml)")
    applying.add_argument(
        "--prune",
        action="store_true",
        help="also delete the tasks of the files' namespaces that no file lists",
    )
    mode = applying.add_mutually_exclusive_group()
    mode.add_argument(
        "--dry-run",
        action="store_true",
        help="contact no cluster: print the field-level diff against --against (default: nothing)",
    )
    mode.add_argument(
        "--plan", action="store_true", help="print the field-level diff against the cluster; change nothing"
    )
    applying.add_argument(
        "--against",
        action="append",
        metavar="FILE",
        help="with --dry-run: the task files the diff starts from (e.g. the reviewed base; repeatable)",
    )
    _json_option(applying)
    _add_workflow_commands(commands)

    demo = _leaf(commands, "demo", cmd_demo, "run the demo cluster described by a config file", late=())
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
    pools_cli.add_commands(commands, _leaf, _json_option)
    taskbackfill_cli.add_commands(commands, _leaf, _json_option, _param_options)
    return parser


def _add_calendar_commands(commands: Any) -> None:
    calendar = commands.add_parser(
        "calendar", help="named calendars (dates, weekdays, a zone) that tasks and workflows exclude"
    )
    actions = calendar.add_subparsers(dest="action", metavar="ACTION", required=True)
    put = _leaf(
        actions,
        "set",
        calendars.cmd_calendar_set,
        "create or replace a calendar: the dates of --file and/or every weekday of --weekdays, in --zone",
    )
    put.add_argument("name", metavar="NAME")
    put.add_argument(
        "--file",
        action="append",
        metavar="FILE",
        help="holidays file: one YYYY-MM-DD (or FROM..TO) a line, '#' comments (repeatable)",
    )
    put.add_argument("--weekdays", metavar="RULE", help="weekdays it holds, e.g. sat,sun or mon-fri")
    put.add_argument(
        "--zone", default="UTC", metavar="ZONE", help="IANA time zone of its days (default: UTC)"
    )
    put.add_argument("--description", default="", metavar="TEXT")
    listing = _leaf(actions, "list", calendars.cmd_calendar_list, "list calendars")
    _json_option(listing)
    show = _leaf(actions, "show", calendars.cmd_calendar_show, "show a calendar and who excludes it")
    show.add_argument("name", metavar="NAME")
    _json_option(show)
    delete = _leaf(
        actions,
        "delete",
        calendars.cmd_calendar_delete,
        "delete a calendar (refused while a task or workflow excludes it)",
    )
    delete.add_argument("name", metavar="NAME")


def _add_event_commands(commands: Any) -> None:
    event = commands.add_parser("event", help="emit events that trigger tasks and workflows")
    actions = event.add_subparsers(dest="action", metavar="ACTION", required=True)
    emit = _leaf(
        actions,
        "emit",
        events.cmd_event_emit,
        "emit an event: accepted once per distinct (NAME, --key) within the dedupe window",
    )
    emit.add_argument("name", metavar="NAME")
    emit.add_argument("--key", metavar="K", help="dedupe key (a date or time becomes the runs' logical time)")
    emit.add_argument("--payload", metavar="JSON", help="a JSON object, at most 64 KiB")
    emit.add_argument("--namespace", metavar="NS", help="the event's namespace (default: default)")
    _json_option(emit)
    listing = _leaf(commands, "events", events.cmd_events, "list accepted events (newest first)")
    listing.add_argument("name", nargs="?", metavar="NAME", help="only this event")
    listing.add_argument("--limit", type=int, default=0, metavar="N", help="at most N (default 1000)")
    listing.add_argument(
        "--unused",
        action="store_true",
        help="list instead the event names tasks subscribe to (on_event) that no accepted event has",
    )
    _json_option(listing)


def _add_workflow_commands(commands: Any) -> None:
    workflow = commands.add_parser(
        "workflow",
        help="workflows (DAGs): apply, list, show, pause, resume, delete, run, runs, status, graph ...",
    )
    actions = workflow.add_subparsers(dest="action", metavar="ACTION", required=True)

    apply = _leaf(
        actions, "apply", workflows.cmd_wf_apply, "create or update a workflow from a YAML or TOML file"
    )
    apply.add_argument("file", metavar="FILE", help="workflow file (.yaml, .yml or .toml)")
    apply.add_argument(
        "--dry-run", action="store_true", help="only read and validate the file (no cluster needed)"
    )

    listing = _leaf(actions, "list", workflows.cmd_wf_list, "list workflows")
    listing.add_argument("--prefix", default="", metavar="P", help="only names starting with P")
    _json_option(listing)

    show = _leaf(
        actions, "show", workflows.cmd_wf_show, "show a workflow: definition, tasks and dependencies"
    )
    show.add_argument("name", metavar="NAME")
    show.add_argument(
        "--version",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="an older version (default: current)",
    )
    _json_option(show)

    for action, handler, text in (
        (
            "pause",
            workflows.cmd_wf_pause,
            "stop a workflow's scheduled runs (runs in flight go on; manual runs and backfills still start)",
        ),
        ("resume", workflows.cmd_wf_resume, "schedule a paused workflow again, from now on"),
    ):
        _leaf(actions, action, handler, text).add_argument("name", metavar="NAME")
    delete = _leaf(
        actions,
        "delete",
        workflows.cmd_wf_delete,
        "delete a workflow with its versions, runs and backfills (refused while a run is active)",
    )
    delete.add_argument("name", metavar="NAME")
    delete.add_argument("--force", action="store_true", help="kill the active runs first")
    delete.add_argument(
        "--reason", default="", metavar="TEXT", help="with --force: recorded in the killed runs"
    )

    start = _leaf(actions, "run", workflows.cmd_wf_run, "start a run of a workflow now", times=True)
    start.add_argument("name", metavar="NAME")
    start.add_argument("--logical", metavar="T", help="its logical time ({{ ds }}, {{ ts }}; default: now)")
    _param_options(start)

    runs = _leaf(actions, "runs", workflows.cmd_wf_runs, "list a workflow's runs, newest first")
    runs.add_argument("name", metavar="NAME")
    runs.add_argument("--active", action="store_true", help="only unfinished runs")
    runs.add_argument(
        "--limit", type=non_negative_int, default=100, metavar="N", help="at most N runs (default: 100)"
    )
    _json_option(runs)

    status = _leaf(
        actions, "status", workflows.cmd_wf_status, "one run: every task's state, tries, reason and timeline"
    )
    status.add_argument("run_id", metavar="RUN_ID", help="e.g. etl@1796000000000")
    _json_option(status)

    graph = _leaf(
        actions,
        "graph",
        workflows.cmd_wf_graph,
        "print a workflow's DAG in topological layers; given a run id, with each task's state",
    )
    graph.add_argument("target", metavar="NAME_OR_RUN_ID", help="a workflow name or a run id (NAME@...)")
    graph.add_argument(
        "--version", type=non_negative_int, default=0, metavar="N", help="with NAME: an older version"
    )
    graph.add_argument("--ascii", action="store_true", help="ASCII only (no arrows or check marks)")
    _json_option(graph)

    kill = _leaf(
        actions, "kill", workflows.cmd_wf_kill, "kill a run: live tasks are terminated and marked KILLED"
    )
    kill.add_argument("run_id", metavar="RUN_ID")
    kill.add_argument("--reason", default="", metavar="TEXT", help="recorded in each task's timeline")

    rerun = _leaf(
        actions,
        "rerun",
        workflows.cmd_wf_rerun,
        "run a task and everything downstream of it again, inside the run (upstream results kept)",
    )
    rerun.add_argument("run_id", metavar="RUN_ID")
    rerun.add_argument("task", metavar="TASK")

    mark = _leaf(
        actions, "mark-success", workflows.cmd_wf_mark_success, "mark a task of a run succeeded by hand"
    )
    mark.add_argument("run_id", metavar="RUN_ID")
    mark.add_argument("task", metavar="TASK")
    mark.add_argument("--reason", default="", metavar="TEXT", help="recorded in the task's timeline")

    waits = _leaf(
        actions,
        "waits",
        workflows.cmd_wf_waits,
        "what waits on what across workflows: every cross-workflow dependency still waiting",
    )
    waits.add_argument(
        "--upstream", default="", metavar="WORKFLOW", help="only edges waiting on this workflow"
    )
    _json_option(waits)

    lineage = _leaf(
        actions, "lineage", workflows.cmd_wf_lineage, "every task upstream and downstream of a task"
    )
    lineage.add_argument("name", metavar="NAME")
    lineage.add_argument("task", metavar="TASK")
    lineage.add_argument(
        "--version",
        type=non_negative_int,
        default=0,
        metavar="N",
        help="an older version (default: current)",
    )
    lineage.add_argument(
        "--depth",
        type=non_negative_int,
        default=LINEAGE_MAX_DEPTH,
        metavar="N",
        help=f"follow at most N cross-workflow hops (default and cap: {LINEAGE_MAX_DEPTH}; "
        "0: this workflow only)",
    )
    _json_option(lineage)

    wexplain = _leaf(
        actions,
        "explain",
        workflows.cmd_wf_explain,
        "why a task of a run is not running: unmet dependencies (across workflows, with their "
        "deadlines), earliest-start gate, jitter, pool/lock/quota waits",
    )
    wexplain.add_argument("run_id", metavar="RUN_ID")
    wexplain.add_argument("task", metavar="TASK")
    _json_option(wexplain)

    backfill = _leaf(
        actions,
        "backfill",
        workflows.cmd_wf_backfill,
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

    watch = _leaf(actions, "backfill-status", workflows.cmd_wf_backfill_status, "one backfill's progress")
    watch.add_argument("backfill_id", metavar="BACKFILL_ID", help="e.g. etl~b1")
    watch.add_argument("--wait", action="store_true", help="show a progress bar until every run finished")
    _json_option(watch)

    backfills = _leaf(actions, "backfills", workflows.cmd_wf_backfills, "list a workflow's backfills")
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


_LATE_GLOBALS = tuple(option for option, _, _ in _GLOBAL_OPTIONS)
# task add/update: --timeout is the task's timeout; demo: --config is the demo's config.
_NOT_TIMEOUT = tuple(option for option in _LATE_GLOBALS if option != "--timeout")


def _leaf(
    group: Any,
    name: str,
    handler: Callable[[argparse.Namespace], int],
    text: str,
    *,
    times: bool = False,
    late: tuple[str, ...] = _LATE_GLOBALS,
) -> argparse.ArgumentParser:
    """A command. It also accepts the global options named in ``late`` after its name."""
    sub: argparse.ArgumentParser = group.add_parser(
        name,
        help=text,
        description=text[0].upper() + text[1:] + ".",
        epilog=TIME_HELP if times else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    sub.set_defaults(run_command=handler)
    if late:
        globals_group = sub.add_argument_group("global options (also accepted before the command)")
        where = globals_group.add_mutually_exclusive_group()
        for option, dest, options in _GLOBAL_OPTIONS:
            if option in late:
                container = where if dest in ("cluster", "config") else globals_group
                # SUPPRESS: an option not given after the command leaves the one before it alone.
                container.add_argument(option, dest=_LATE + dest, default=argparse.SUPPRESS, **options)
    return sub


def _merge_late_globals(args: argparse.Namespace) -> argparse.Namespace:
    """Global options given after the command override the same option before it; ``--cluster``
    and ``--config`` stay mutually exclusive across both positions."""
    values = vars(args)
    late = {dest: values.pop(_LATE + dest) for _, dest, _ in _GLOBAL_OPTIONS if _LATE + dest in values}
    for dest, other in (("cluster", "config"), ("config", "cluster")):
        if dest in late and values.get(other) is not None and other not in late:
            raise UsageError(
                f"argument --{dest}: not allowed with argument --{other} (see 'raftsched --help')"
            )
    values.update(late)
    return args


def _json_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")


def _range_options(parser: argparse.ArgumentParser, what: str) -> None:
    parser.add_argument("--since", metavar="T", help=f"{what} >= T")
    parser.add_argument("--until", metavar="T", help=f"{what} <= T")


# How ``task add|update --help`` lays out the task options (each table field with a flag, once).
_SPEC_OPTION_LAYOUT: tuple[tuple[str, tuple[str, ...]], ...] = (
    ("what runs", ("command", "handler", "params", "shards", "selector")),
    (
        "policies",
        (
            "misfire",
            "misfire_cap",
            "misfire_window",
            "overlap",
            "jitter",
            "retries",
            "timeout",
            "priority",
            "locks",
            "exclude",
        ),
    ),
    ("what runs", ("runner", "resource.cpu", "resource.memory")),
    ("events", ("on_event", "emits")),
    ("labels", ("owner", "namespace", "description")),
    ("retries and retention", ("retry_delays", "retry_backoff", "retry_elsewhere", "keep_runs", "keep_for")),
    ("pools", ("pool",)),
    ("alerts", ("sla.start_within", "sla.finish_within", "freshness")),
)
_OPTION_TYPES: dict[Kind, Callable[[str], Any]] = {
    Kind.INT: int,
    Kind.NUMBER: float,
    Kind.DURATION: duration_arg,
    Kind.DURATIONS: durations_arg,
    Kind.BACKOFF: backoff_arg,
}


def _add_field_option(container: Any, f: Field, help_suffix: str = "") -> None:
    """The option of task field ``f``, as the table declares it."""
    options: dict[str, Any] = {}
    if f.dest:
        options["dest"] = f.dest
    if f.kind == Kind.FLAG:
        options["action"] = "store_true"
    elif f.kind == Kind.BOOL:
        options["action"] = argparse.BooleanOptionalAction
        options["default"] = None
    elif f.kind in (Kind.NAMES, Kind.LABELS, Kind.LOCKS):
        options["action"] = "append"
    elif f.kind in _OPTION_TYPES:
        options["type"] = _OPTION_TYPES[f.kind]
    if f.kind == Kind.CHOICE:
        options["choices"] = list(f.choices)
    if f.metavar is not None:
        options["metavar"] = f.metavar
    options["help"] = None if f.flag_help is None else f.flag_help + help_suffix
    container.add_argument(f.flag, **options)


def _add_spec_options(parser: argparse.ArgumentParser, *, update: bool) -> None:
    when = parser.add_argument_group(
        "schedule" + (" (replaces the current one)" if update else " (one is required)")
    )
    kind = when.add_mutually_exclusive_group(required=not update)
    for f in tasks.TRIGGER_OPTION_FIELDS:
        # One trigger kind (cron, every, at, manual); the zone and start qualify one of them.
        _add_field_option(kind if f.key in ("cron", "every", "at", "manual") else when, f)
    groups: dict[str, Any] = {}
    for title, keys in _SPEC_OPTION_LAYOUT:
        if title not in groups:
            groups[title] = parser.add_argument_group(title)
        group = groups[title]
        if "command" in keys:
            which = group.add_mutually_exclusive_group()  # a command or a handler
        for key in keys:
            f = cli_field(key)
            if key in ("command", "handler"):
                _add_field_option(which, f)
                continue
            _add_field_option(group, f, "; replaces the current locks" if update and key == "locks" else "")
            if key == "locks" and update:
                group.add_argument("--no-locks", action="store_true", help="remove every lock")
            elif key == "locks":
                parser.set_defaults(no_locks=False)
    if not update:
        parser.add_argument("--disabled", action="store_true", help="create the task disabled")
