"""The fields of a task and of a workflow, declared once: every way in reads this table.

A field is known by several names: its key in task files and workflow files (``retries``), its
:class:`~raftsched.model.TaskSpec` attribute (``max_retries``), its protobuf field, the name an
:class:`~raftsched.errors.InvalidSpec` gives it (``max_retries``, ``trigger.cron``) and its
``raftsched task add|update`` option (``--retries``). This module says, for each field, all of
them, with its kind (which reader parses it), its default and its help text, so that

* the task file parser (:mod:`raftsched.workflow.taskfiles`) and the workflow file parser
  (:mod:`raftsched.workflow.files`) take their keys, accepted aliases, did-you-mean hints and the
  file spelling of a model error from here;
* the CLI (:mod:`raftsched.cli.parser`, :mod:`raftsched.cli.tasks`, :mod:`raftsched.cli.errors`)
  builds the task options, turns them into spec changes, and names the option in an error;
* ``raftsched apply``'s diff names a changed field with its file key;
* the docs site's field table is generated from it when the site is built (docs/gen/pages.py).

The web console shows task and workflow fields read-only (it has no form that edits them), so it
reads none of this. Pure: values only, no IO.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from enum import StrEnum

from raftsched.model import Misfire, Overlap, Runner

__all__ = [
    "TASK_FIELDS",
    "WORKFLOW_FIELDS",
    "Field",
    "Kind",
    "accepted_aliases",
    "cli_field",
    "error_keys",
    "file_keys",
    "hints",
    "markdown_table",
    "option_of_error",
]


class Kind(StrEnum):
    """How a value is read (each kind has one reader per way in)."""

    TEXT = "text"  # a string
    INT = "int"  # a whole number >= 0
    NUMBER = "number"  # a number (CPU share)
    DURATION = "duration"  # seconds (a number) or a duration string ("90s", "1.5h")
    TIME = "time"  # an ISO 8601 time with a zone (files) / a time T (CLI)
    FLAG = "flag"  # present or not (``--manual``)
    CHOICE = "choice"  # one of ``choices``
    PERCENT = "percent"  # an integer or "30%"
    PARAMS = "params"  # a mapping, stored as JSON text
    NAMES = "names"  # a list of calendar names
    LOCKS = "locks"  # a list of NAME, NAME:shared or {name, mode}
    LABELS = "labels"  # a mapping of string to string (selector, env)
    DEPENDS = "depends"  # a list of task names or {task, condition}
    TASKS = "tasks"  # the list of tasks
    DURATIONS = "durations"  # a list of durations (a single one is a list of one)
    BACKOFF = "backoff"  # a mapping {base, cap, jitter} (CLI: BASE[,CAP[,JITTER%]])
    BOOL = "bool"  # true or false (CLI: --x / --no-x)


@dataclass(frozen=True, slots=True)
class Field:
    """One field and all its names. An empty name means "not there" (a task file has no ``locks``).

    ``key`` is the key in files (``resource.cpu`` is ``cpu`` inside the ``resource`` mapping);
    ``attr`` the TaskSpec attribute (``trigger`` for the schedule keys, whose values build one
    trigger); ``proto`` the field of ``pb.TaskSpec``/``pb.WorkflowTaskSpec``/``pb.WorkflowSpec``
    (a dotted path for a nested one). ``errors`` are the field names an InvalidSpec reports for it
    (model validation first). ``aliases`` are accepted spellings wherever the field is read;
    ``task_file_aliases`` only in task files; ``hints`` are spellings refused with a did-you-mean.
    ``flag``/``dest``/``metavar``/``flag_help`` describe the ``task add|update`` option; ``clears``
    is the attribute the option empties (a task has a command or a handler, not both).
    """

    key: str
    kind: Kind
    help: str
    default: str = ""
    attr: str = ""
    proto: str = ""
    errors: tuple[str, ...] = ()
    task_file: bool = True
    workflow_task: bool = False
    aliases: tuple[str, ...] = ()
    task_file_aliases: tuple[str, ...] = ()
    hints: tuple[str, ...] = ()
    choices: tuple[str, ...] = ()
    enum: type[StrEnum] | None = None
    enum_prefix: str = ""  # the protobuf enum's value prefix (MISFIRE_ for latest -> MISFIRE_LATEST)
    flag: str = ""
    dest: str = ""
    metavar: str | None = None
    flag_help: str | None = None
    clears: str = ""

    @property
    def file_key(self) -> str:
        """The top-level key in a file (``resource`` for ``resource.cpu``)."""
        return self.key.partition(".")[0]


def _names(enum: type[StrEnum]) -> tuple[str, ...]:
    return tuple(member.value for member in enum)


# In the workflow file's order of task keys (its problems on one line are reported in this order),
# then the keys only plain tasks have.
TASK_FIELDS: tuple[Field, ...] = (
    Field("name", Kind.TEXT, "task name (required; unique across the files applied)", attr="name",
          proto="name", errors=("name",), workflow_task=True),
    Field("command", Kind.TEXT, "shell command; or ``handler``: a registered handler", attr="command",
          proto="command", errors=("command",), workflow_task=True, flag="--command", dest="command",
          metavar="CMD", flag_help="shell command to run", clears="handler"),
    Field("handler", Kind.TEXT, "name of a Python handler registered on executors", attr="handler",
          proto="handler", errors=("handler",), workflow_task=True, flag="--handler", dest="handler",
          metavar="NAME", flag_help="registered handler to call", clears="command"),
    Field("depends_on", Kind.DEPENDS, "list of task names or ``{task, condition}``", task_file=False,
          proto="depends_on", workflow_task=True, hints=("deps", "depends", "upstream")),
    Field("trigger_rule", Kind.CHOICE, "``all`` | ``any`` of the dependencies", "all", task_file=False,
          proto="trigger_rule", workflow_task=True, choices=("all", "any"), enum_prefix="RULE_",
          hints=("rule",)),
    Field("not_before", Kind.TEXT, "earliest start: ``02:00`` (local, logical date) or ``+30m``", "none",
          task_file=False, proto="not_before", errors=("not_before",), workflow_task=True,
          hints=("earliest_start", "start_after")),
    Field("retries", Kind.INT, "retries after a failure (0-100)", "0", attr="max_retries",
          proto="max_retries", errors=("max_retries",), workflow_task=True, aliases=("retry",),
          task_file_aliases=("max_retries",), flag="--retries", dest="max_retries", metavar="N",
          flag_help="retries per shard (0-100)"),
    Field("timeout", Kind.DURATION, "per attempt: seconds or a duration (``90s``, ``1h``)", "none",
          attr="timeout_ms", proto="timeout_ms", errors=("timeout", "timeout_ms"), workflow_task=True,
          hints=("timeout_ms", "timeout_seconds"), flag="--timeout", dest="task_timeout",
          metavar="DURATION", flag_help="task timeout per attempt (0 = none)"),
    Field("shards", Kind.INT, "parallel shards (1-1024)", "1", attr="shards", proto="shards",
          errors=("shards",), workflow_task=True, flag="--shards", metavar="N",
          flag_help="run as N shards (1-1024, default 1)"),
    Field("priority", Kind.INT, "0-9 (9 most urgent)", "5", attr="priority", proto="priority",
          errors=("priority",), workflow_task=True, flag="--priority", metavar="0-9",
          flag_help="dispatch priority, 9 most urgent (default 5)"),
    Field("locks", Kind.LOCKS, "resource locks: ``NAME``, ``NAME:shared`` or ``{name, mode}``", "none",
          attr="locks", proto="locks", errors=("locks", "locks.name", "locks.mode"), task_file=False,
          workflow_task=True, hints=("resource_lock", "resource_locks"), flag="--lock", dest="locks",
          metavar="NAME[:shared]",
          flag_help="resource lock every attempt holds while it runs (repeat for several; exclusive "
          "unless :shared)"),
    Field("params", Kind.PARAMS, "mapping: the default run params", "none", attr="params_json",
          proto="params_json", errors=("params", "params_json"), workflow_task=True, hints=("params_json",),
          flag="--params", metavar="JSON", flag_help="default run parameters, a JSON object"),
    Field("env", Kind.LABELS, "mapping of environment variables (templated values)", task_file=False,
          proto="env", workflow_task=True),
    Field("description", Kind.TEXT, "free text", attr="description", proto="description",
          errors=("description",), workflow_task=True, flag="--description", metavar="TEXT"),
    Field("runner", Kind.CHOICE, "``shell`` | ``python`` (the executor's Python)", "shell", attr="runner",
          proto="runner", errors=("runner",), workflow_task=True, aliases=("worker_type",),
          enum=Runner, choices=_names(Runner), flag="--runner",
          flag_help="run the command with the shell (default) or the executor's Python"),
    Field("resource.cpu", Kind.NUMBER, "declared CPU need (> 0)", "none", attr="resource_cpu",
          proto="resource_cpu", errors=("resource.cpu",), workflow_task=True, flag="--cpu", dest="cpu",
          metavar="N", flag_help="declared CPU need (0 = none)"),
    Field("resource.memory", Kind.INT, "declared memory need in MiB (> 0)", "none",
          attr="resource_memory_mb", proto="resource_memory_mb", errors=("resource.memory",),
          workflow_task=True, flag="--memory", dest="memory", metavar="MIB",
          flag_help="declared memory need in MiB (0 = none)"),
    Field("selector", Kind.LABELS, "executor labels it needs: ``{gpu: \"true\"}``", "none", attr="selector",
          proto="selector", errors=("selector",), workflow_task=True, flag="--selector", metavar="KEY=VALUE",
          flag_help="run only on executors with this label (repeatable; --selector '' clears them)"),
    Field("cron", Kind.TEXT, "cron expression (5 fields, or 6 with seconds last)", "manual", attr="trigger",
          proto="trigger.cron.expr", errors=("trigger.cron",), task_file_aliases=("schedule",),
          flag="--cron", metavar="EXPR", flag_help="cron expression: 5 fields, or 6 with seconds last"),
    Field("every", Kind.DURATION, "interval: seconds or a duration (``90s``, ``1h``)", "manual",
          attr="trigger", proto="trigger.interval.every_ms", errors=("trigger.interval",),
          task_file_aliases=("interval",), flag="--every", metavar="DURATION",
          flag_help="fixed interval, whole seconds"),
    Field("at", Kind.TIME, "fire once, at this time", "manual", attr="trigger", proto="trigger.once.at_ms",
          errors=("trigger.at",), flag="--at", metavar="T", flag_help="fire once, at T"),
    Field("manual", Kind.FLAG, "never fire by itself (trigger only)", attr="trigger", proto="trigger.manual",
          task_file=False, flag="--manual", flag_help="never fire by itself (trigger only)"),
    Field("timezone", Kind.TEXT, "IANA zone of ``cron``", "UTC", attr="trigger",
          proto="trigger.cron.timezone", errors=("trigger.timezone",), task_file_aliases=("tz",),
          flag="--tz", metavar="ZONE", flag_help="with --cron: IANA time zone (default: UTC)"),
    Field("start", Kind.TIME, "with ``every``: first fire", "one interval after creation", attr="trigger",
          proto="trigger.interval.start_ms", errors=("trigger.start",), flag="--start", metavar="T",
          flag_help="with --every: first fire (default: one interval after now)"),
    Field("misfire", Kind.CHOICE, "missed fires: ``latest`` | ``all`` | ``skip``", "latest",
          attr="misfire", proto="misfire", errors=("misfire",), enum=Misfire, choices=_names(Misfire),
          enum_prefix="MISFIRE_", hints=("misfire_policy",), flag="--misfire",
          flag_help="missed fires: run latest (default), all, or skip"),
    Field("misfire_cap", Kind.INT, "with ``all``: at most this many (0 = cluster default)", "0",
          attr="misfire_all_cap", proto="misfire_all_cap", errors=("misfire_all_cap",),
          flag="--misfire-cap", metavar="N", flag_help="misfire=all: run at most N (0 = cluster default)"),
    Field("misfire_window", Kind.DURATION, "with ``all``: look back this far (0 = cluster default)", "0",
          attr="misfire_all_window_ms", proto="misfire_all_window_ms", errors=("misfire_all_window",),
          flag="--misfire-window", metavar="DURATION",
          flag_help="misfire=all: look back this far (0 = cluster default)"),
    Field("overlap", Kind.CHOICE,
          "while a run is unfinished: " + " | ".join(f"``{o}``" for o in _names(Overlap)), "skip",
          attr="overlap", proto="overlap", errors=("overlap",), enum=Overlap, choices=_names(Overlap),
          enum_prefix="OVERLAP_", hints=("overlap_policy",), flag="--overlap",
          flag_help="while a run is unfinished: skip (default) or allow"),
    Field("jitter", Kind.DURATION, "each fire starts a stable offset in [0, jitter) after its time", "0",
          attr="jitter_ms", proto="jitter_ms", errors=("jitter",), hints=("jitter_ms",), flag="--jitter",
          metavar="DURATION",
          flag_help="delay each fire's start by a stable offset below DURATION (0 = none)"),
    Field("exclude", Kind.NAMES, "calendar names whose days are skipped", "none", attr="exclude",
          proto="exclude", errors=("exclude",), flag="--exclude", metavar="CALENDAR",
          flag_help="skip fires on the days of this calendar (repeatable; --exclude '' clears the list)"),
    Field("on_event", Kind.TEXT, "event name: each accepted event (name, key) starts one run", "none",
          attr="on_event", proto="on_event", errors=("on_event",), flag="--on-event", metavar="EVENT",
          flag_help="start one run per accepted event of this name (see `raftsched event emit`)"),
    Field("emits", Kind.NAMES, "event names emitted (key: the run's logical time) when a run succeeds",
          "none", attr="emits", proto="emits", errors=("emits",), workflow_task=True, flag="--emits",
          metavar="EVENT",
          flag_help="emit this event when a run succeeds (repeatable; --emits '' clears the list)"),
    Field("owner", Kind.TEXT, "free text (at most 128 characters)", "the file's", attr="owner", proto="owner",
          errors=("owner",), flag="--owner", metavar="O"),
    Field("namespace", Kind.TEXT, "the task's namespace", "the file's, else ``default``", attr="namespace",
          proto="namespace", errors=("namespace",), flag="--namespace", metavar="NS",
          flag_help="default: 'default'"),
    Field("retry_delays", Kind.DURATIONS, "the n-th retry waits the n-th duration, the last repeats "
          "(``[2m, 5m, 15m]``; not with ``retry_backoff``)", "the cluster's backoff", attr="retry_delays_ms",
          proto="retry_delays_ms", errors=("retry_delays",), workflow_task=True,
          hints=("retry_delay", "retry_delays_ms"), flag="--retry-delays", metavar="D1,D2,...",
          flag_help="the n-th retry waits the n-th delay, the last repeats ('' clears)",
          clears="retry_backoff"),
    Field("retry_backoff", Kind.BACKOFF, "``{base, cap, jitter}``: the n-th retry waits base x 2^(n-1), "
          "at most cap, plus a stable jitter of up to ``jitter`` (``20%``) of it", "the cluster's backoff",
          attr="retry_backoff", proto="retry_backoff",
          errors=("retry_backoff", "retry_backoff.base", "retry_backoff.cap", "retry_backoff.jitter"),
          workflow_task=True, flag="--retry-backoff", metavar="BASE[,CAP[,JITTER%]]",
          flag_help="exponential retry backoff, e.g. 10s,15m,20%% ('' clears)", clears="retry_delays_ms"),
    Field("retry_elsewhere", Kind.BOOL, "a retry goes to another executor when one fits (``false``: the "
          "ring's choice, often the same one)", "true", attr="retry_elsewhere", proto="retry_same_executor",
          errors=("retry_elsewhere",), workflow_task=True, flag="--retry-elsewhere",
          flag_help="retry on another executor when one fits (default; --no-retry-elsewhere: do not)"),
    Field("keep_runs", Kind.INT, "finished runs (and fire records) kept; with ``keep_for`` alone: any "
          "number", "cluster ``history_keep_count``", attr="keep_runs", proto="keep_runs",
          errors=("keep_runs",), flag="--keep-runs", metavar="N",
          flag_help="keep N finished runs (0 = the cluster default)"),
    Field("keep_for", Kind.DURATION, "finished runs kept this long; with ``keep_runs`` alone: any age",
          "cluster ``history_keep_seconds``", attr="keep_for_ms", proto="keep_for_ms", errors=("keep_for",),
          hints=("keep_for_ms", "retention"), flag="--keep-for", metavar="DURATION",
          flag_help="keep finished runs this long (0 = the cluster default)"),
    Field("pool", Kind.TEXT, "pool name: each attempt holds one of its slots (``pool set``)", "none",
          attr="pool", proto="pool", errors=("pool",), workflow_task=True, flag="--pool", metavar="POOL",
          flag_help="hold a slot of this pool while each attempt runs (--pool '' clears it)"),
    Field("sla.start_within", Kind.DURATION, "SLA: alert ``sla_missed`` when a run has not started this "
          "long after its nominal time", "none", attr="sla_start_within_ms", proto="sla_start_within_ms",
          errors=("sla.start_within",), flag="--sla-start-within", metavar="DURATION",
          flag_help="alert when a run has not started this long after its nominal time (0 = none)"),
    Field("sla.finish_within", Kind.DURATION, "SLA: alert ``sla_missed`` when a run has not succeeded "
          "this long after its nominal time", "none", attr="sla_finish_within_ms",
          proto="sla_finish_within_ms", errors=("sla.finish_within",), flag="--sla-finish-within",
          metavar="DURATION",
          flag_help="alert when a run has not succeeded this long after its nominal time (0 = none)"),
    Field("freshness", Kind.DURATION, "alert ``freshness`` once when no run succeeded for this long "
          "(disabled, skipped or failing alike), ``resolved`` at the next success", "none",
          attr="freshness_ms", proto="freshness_ms", errors=("freshness",), flag="--freshness",
          metavar="DURATION", flag_help="alert when no run succeeded for this long (0 = none)"),
)  # fmt: skip

# The keys of a workflow file itself (its tasks are TASK_FIELDS with workflow_task).
WORKFLOW_FIELDS: tuple[Field, ...] = (
    Field("name", Kind.TEXT, "workflow name (required)", proto="name", aliases=("dag_name",)),
    Field("description", Kind.TEXT, "free text", proto="description"),
    Field("owner", Kind.TEXT, "free text (at most 128 characters)", proto="owner"),
    Field("namespace", Kind.TEXT, "the workflow's namespace (its tasks run in it)", "default",
          proto="namespace"),
    Field("schedule", Kind.TEXT, "cron expression; none: runs only on demand and by backfill", "none",
          proto="schedule.expr", hints=("cron",)),
    Field("timezone", Kind.TEXT, "IANA zone of ``schedule``", "UTC", proto="schedule.timezone",
          hints=("tz",)),
    Field("misfire", Kind.CHOICE, "``latest`` | ``all`` | ``skip`` (missed scheduled runs)", "latest",
          proto="misfire", choices=_names(Misfire), enum_prefix="MISFIRE_", hints=("misfire_policy",)),
    Field("overlap", Kind.CHOICE, "``skip`` | ``allow`` (a scheduled run while one is active)", "skip",
          proto="overlap", choices=("skip", "allow"), enum_prefix="OVERLAP_", hints=("overlap_policy",)),
    Field("max_parallel", Kind.INT, "tasks running at once across all runs (0 = unlimited)", "0",
          proto="max_parallel", hints=("parallelism", "concurrency")),
    Field("max_parallel_per_run", Kind.INT, "tasks running at once in one run (0 = unlimited)", "0",
          proto="max_parallel_per_run"),
    Field("backfill_share", Kind.PERCENT, "percent of executor slots backfill may use", "30",
          proto="backfill_share_pct", hints=("backfill_share_pct",)),
    Field("params", Kind.PARAMS, "mapping: defaults for ``{{ params.NAME }}``", proto="params_json",
          hints=("params_json",)),
    Field("jitter", Kind.DURATION, "scheduled runs start a stable offset in [0, jitter) after their time",
          "0", proto="jitter_ms", hints=("jitter_ms",)),
    Field("exclude", Kind.NAMES, "calendar names: scheduled runs on their days are skipped", "none",
          proto="exclude"),
    Field("warn_after", Kind.DURATION, "cross-workflow dependencies: alert ``upstream_late`` after waiting "
          "this long (an edge's own ``warn_after`` wins)", "none", proto="warn_after_ms"),
    Field("on_event", Kind.TEXT, "event name: each accepted event (name, key) starts one run, the event "
          "in ``{{ event.key }}``, ``{{ event.payload.NAME }}``", "none", proto="on_event"),
    Field("emits", Kind.NAMES, "event names emitted (key: the run's logical time) when a run succeeds",
          "none", proto="emits"),
    Field("tasks", Kind.TASKS, "list of tasks (required, at least one)", proto="tasks"),
    Field("keep_runs", Kind.INT, "workflow runs (and its task runs) kept (0 = cluster default)", "0",
          proto="keep_runs"),
    Field("keep_for", Kind.DURATION, "workflow runs (and its task runs) kept this long (0 = cluster "
          "default)", "0", proto="keep_for_ms", hints=("keep_for_ms",)),
    Field("sla.start_within", Kind.DURATION, "SLA: alert ``sla_missed`` when a scheduled run's first task "
          "has not started this long after its logical time", "none", proto="sla_start_within_ms"),
    Field("sla.finish_within", Kind.DURATION, "SLA: alert ``sla_missed`` when a scheduled run has not "
          "succeeded this long after its logical time", "none", proto="sla_finish_within_ms"),
    Field("freshness", Kind.DURATION, "alert ``freshness`` once when no run (backfills aside) succeeded "
          "for this long, ``resolved`` at the next success", "none", proto="freshness_ms"),
)  # fmt: skip


def file_keys(fields: Iterable[Field]) -> tuple[str, ...]:
    """The top-level keys of ``fields`` in a file, in table order, each once."""
    return tuple(dict.fromkeys(f.file_key for f in fields))


def accepted_aliases(fields: Iterable[Field], *, task_file: bool = False) -> dict[str, str]:
    """Alias → key for the spellings a file accepts (with ``task_file``, the task file's too)."""
    return {
        alias: f.file_key
        for f in fields
        for alias in (*f.aliases, *(f.task_file_aliases if task_file else ()))
    }


def hints(fields: Iterable[Field]) -> dict[str, str]:
    """Spelling → key a did-you-mean suggests (it is used only where the key is allowed)."""
    return {hint: f.file_key for f in fields for hint in (*f.hints, *f.task_file_aliases)}


def error_keys(fields: Iterable[Field]) -> dict[str, str]:
    """The field name an InvalidSpec reports → the key a file spells it with."""
    return {error: f.key for f in fields for error in f.errors}


def option_of_error(fields: Iterable[Field]) -> dict[str, str]:
    """The field name an InvalidSpec reports → the CLI option a user typed."""
    return {error: f.flag for f in fields if f.flag for error in f.errors}


def cli_field(key: str) -> Field:
    """The task field of file key ``key`` (for the CLI's option layout)."""
    return _BY_KEY[key]


_BY_KEY: Mapping[str, Field] = {f.key: f for f in TASK_FIELDS}


def markdown_table() -> str:
    """The docs' table of task fields: file key, CLI option, default and meaning."""

    def cell(text: str) -> str:
        return text.replace("``", "`").replace("|", "\\|")

    lines = [
        "| task file key | workflow task key | `task add/update` option | default | meaning |\n",
        "|---|---|---|---|---|\n",
    ]
    for f in TASK_FIELDS:
        in_file = f"`{f.key}`" if f.task_file else "—"
        in_file += "".join(f", `{a}`" for a in (*f.aliases, *f.task_file_aliases) if f.task_file)
        in_workflow = f"`{f.key}`" if f.workflow_task else "—"
        in_workflow += "".join(f", `{a}`" for a in f.aliases if f.workflow_task)
        option = f"`{f.flag}`" if f.flag else "NAME" if f.key == "name" else "—"
        lines.append(
            f"| {in_file} | {in_workflow} | {option} | {cell(f.default) or '—'} | {cell(f.help)} |\n"
        )
    return "".join(lines)
