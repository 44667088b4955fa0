"""Frozen domain values: triggers, task specs, fire outcomes, run states.

Everything here validates at construction and raises :class:`raftsched.errors.InvalidSpec`
naming the field and the reason. Validation is *structural* (types, ranges, sizes): whether a
cron expression or a time zone is valid is decided on the leader by :mod:`raftsched.timing`,
because followers never run croniter (their tzdata may differ).

Times are UTC epoch milliseconds (``int``) everywhere.

Limits (documented in docs/reference/limits.md):

======================  ===========================================
name                    1-128 chars, ``[A-Za-z0-9][A-Za-z0-9_.:-]*``
command                 at most 16 KiB (UTF-8)
params_json             at most 16 KiB, a JSON object nested at most 64 deep;
                        no NaN/Infinity, no NUL or lone surrogate in a string
description             at most 4 KiB
owner, namespace        at most 128 chars
shards                  1-1024
max_retries             0-100
timeout                 0 (none) - 7 days
priority                0-9 (9 most urgent)
locks                   at most 16, names as above, each once
interval                1 s - 366 days, whole seconds
misfire_all_cap         0 (cluster default) - 10,000
misfire_all_window      0 (cluster default) - 30 days
exclude                 at most 16 calendar names, no repeats
resource_cpu            0 (none) or a finite number > 0, at most 1024
resource_memory_mb      0 (none) - 16,777,216 (16 TiB)
runner                  ``shell`` (default) or ``python`` (needs a command)
on_event                "" (none) or an event name: each accepted event starts one run
emits                   at most 16 event names, no repeats (emitted when a run succeeds)
retry_delays            at most 16 delays, each 0 - 7 days
retry_backoff           base 1 ms - 7 days, cap 0 (none) or base - 7 days, jitter 0-100 %
keep_runs               0 (cluster default) - 10,000,000
keep_for                0 (cluster default) - 3,660 days
pool                    "" (none) or a pool name: every attempt holds one of its slots
======================  ===========================================

Every text field refuses a NUL character (it cannot reach a process: argv, the environment and
most C libraries end a string there) and lone surrogates (not Unicode text; not encodable as
UTF-8). A task needs a ``command`` or a ``handler``: one with neither could only fail every run.
"""

from __future__ import annotations

import dataclasses
import json
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from enum import StrEnum
from typing import TYPE_CHECKING, Any, TypeVar

if TYPE_CHECKING:
    from _typeshed import DataclassInstance

from raftsched.errors import InvalidSpec, quote
from raftsched.secretref import check_secret_refs

NAME_RE = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:-]{0,127}")
MAX_NAME = 128
MAX_COMMAND_BYTES = 16 * 1024
MAX_PARAMS_BYTES = 16 * 1024
MAX_PARAMS_DEPTH = 64
MAX_DESCRIPTION_BYTES = 4 * 1024
MAX_LABEL = 128
MAX_SHARDS = 1024
MAX_RETRIES = 100
MAX_TIMEOUT_MS = 7 * 24 * 3600 * 1000
MAX_INTERVAL_MS = 366 * 24 * 3600 * 1000
MAX_MISFIRE_CAP = 10_000
MAX_MISFIRE_WINDOW_MS = 30 * 24 * 3600 * 1000
MAX_JITTER_MS = 24 * 3600 * 1000  # a fire's start waits at most a day past its nominal time
MAX_SLA_MS = 366 * 24 * 3600 * 1000  # sla.start_within, sla.finish_within and freshness: at most a year
MAX_EXCLUDE = 16
MAX_RESOURCE_CPU = 1024.0
MAX_SELECTOR = 16
MAX_RESOURCE_MEMORY_MB = 16 * 1024 * 1024
MAX_RETRY_DELAYS = 16
MAX_RETRY_DELAY_MS = 7 * 24 * 3600 * 1000
MAX_KEEP_RUNS = 10_000_000
MAX_KEEP_FOR_MS = 3660 * 24 * 3600 * 1000
# Year 9999 is the end of the calendar Python (and croniter) can represent.
MAX_TIME_MS = 253_402_300_799_000


class Misfire(StrEnum):
    """What a task does with fires that fell due while nobody could fire them (or too late).

    ``latest`` runs once for the newest missed fire and accounts the rest as coalesced;
    ``all`` runs each missed fire within a window, up to a cap; ``skip`` runs none of them.
    """

    LATEST = "latest"
    ALL = "all"
    SKIP = "skip"


class Overlap(StrEnum):
    """What a fire does while an earlier run of the same task is unfinished."""

    SKIP = "skip"
    ALLOW = "allow"
    BUFFER_ONE = "buffer_one"  # at most one fire waits for the running run; later ones are skipped
    REPLACE = "replace"  # cancel the running run, then start the new one


class LockMode(StrEnum):
    """How an attempt holds a resource lock: alone, or together with other shared holders."""

    EXCLUSIVE = "exclusive"
    SHARED = "shared"


# Spellings of a lock mode accepted from users (the seeds' ``name:write`` / ``name:read`` too).
LOCK_MODES: dict[str, LockMode] = {
    "exclusive": LockMode.EXCLUSIVE,
    "write": LockMode.EXCLUSIVE,
    "shared": LockMode.SHARED,
    "read": LockMode.SHARED,
}
MAX_LOCKS = 16


@dataclass(frozen=True, slots=True)
class Lock:
    """A resource lock an attempt must hold while it runs (see :class:`TaskSpec.locks`)."""

    name: str
    mode: LockMode = LockMode.EXCLUSIVE

    def __post_init__(self) -> None:
        validate_name(self.name, "locks.name")
        if not isinstance(self.mode, LockMode):
            raise InvalidSpec("locks.mode", f"{quote(self.mode)} is not one of exclusive, shared")

    def __str__(self) -> str:
        return self.name if self.mode == LockMode.EXCLUSIVE else f"{self.name}:shared"


def parse_lock(text: str, field_name: str = "locks") -> Lock:
    """``name``, ``name:exclusive`` or ``name:shared`` (also ``:write`` / ``:read``) as a Lock."""
    if not isinstance(text, str):
        raise InvalidSpec(field_name, f"{quote(text)} is not a lock name")
    name, sep, mode = text.rpartition(":")
    if sep and mode.lower() in LOCK_MODES:
        return Lock(name, LOCK_MODES[mode.lower()])
    return Lock(text)


def check_locks(locks: object, field_name: str = "locks") -> None:
    """Refuse anything but a tuple of at most MAX_LOCKS :class:`Lock` values with distinct names."""
    if not isinstance(locks, tuple) or not all(isinstance(lk, Lock) for lk in locks):
        raise InvalidSpec(field_name, "must be a list of locks")
    if len(locks) > MAX_LOCKS:
        raise InvalidSpec(field_name, f"{len(locks)} locks, at most {MAX_LOCKS} allowed")
    names = [lk.name for lk in locks]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InvalidSpec(field_name, f"lock {quote(dup[0])} is named twice")


class Runner(StrEnum):
    """How an executor runs a task's command: ``shell`` (``/bin/sh -c``) or ``python``.

    ``python`` runs it with the executor's own interpreter (``sys.executable``): a leading
    ``python``/``python3``/``pythonX.Y`` word is replaced by it, and any other command is taken
    as a script and its arguments (``tasks/load.py --day 1`` → ``<python> tasks/load.py --day 1``).
    """

    SHELL = "shell"
    PYTHON = "python"


class Outcome(StrEnum):
    """How one nominal fire was accounted. Every nominal fire gets exactly one."""

    FIRED = "fired"
    COALESCED = "coalesced"
    SKIPPED_OVERLAP = "skipped_overlap"
    SKIPPED_MISFIRE = "skipped_misfire"
    SKIPPED_DISABLED = "skipped_disabled"
    SKIPPED_CALENDAR = "skipped_calendar"


class RunState(StrEnum):
    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"

    @property
    def finished(self) -> bool:
        return self in (RunState.SUCCEEDED, RunState.FAILED, RunState.CANCELLED)


# Alert kinds: what an alert event is about. The state machine raises them (raftsched.fsm.alerts),
# a webhook's ``kinds`` filter names them (raftsched.alerts.config), so they are vocabulary.
RUN_FAILED = "run_failed"
TIMEOUT = "timeout"
LOST = "lost"
ZOMBIE = "zombie"
FIRE_SKIPPED = "fire_skipped"
FIRE_COALESCED = "fire_coalesced"
DELAY_P99 = "delay_p99"
BACKFILL_FAILED = "backfill_failed"
WORKFLOW_RUN_FAILED = "workflow_run_failed"
UNPLACEABLE = "unplaceable"
CLOCK_FAULT = "clock_fault"
STORE_DAMAGED = "store_damaged"
UPSTREAM_LATE = "upstream_late"
# Executor and fleet health, clock skew (issue 36 §3, §4)
NO_EXECUTOR = "no_executor"
WAITING_TOO_LONG = "waiting_too_long"
EXECUTOR_UNHEALTHY = "executor_unhealthy"
HEARTBEAT_MISSING = "heartbeat_missing"
CLOCK_SKEW = "clock_skew"
START_DELAY = "start_delay"
SLA_MISSED = "sla_missed"
FRESHNESS = "freshness"
RUN_CANCELLED = "run_cancelled"

ALERT_KINDS = (
    RUN_FAILED,
    TIMEOUT,
    LOST,
    ZOMBIE,
    FIRE_SKIPPED,
    FIRE_COALESCED,
    DELAY_P99,
    BACKFILL_FAILED,
    WORKFLOW_RUN_FAILED,
    UNPLACEABLE,
    CLOCK_FAULT,
    STORE_DAMAGED,
    UPSTREAM_LATE,
    NO_EXECUTOR,
    WAITING_TOO_LONG,
    EXECUTOR_UNHEALTHY,
    HEARTBEAT_MISSING,
    CLOCK_SKEW,
    START_DELAY,
    SLA_MISSED,
    FRESHNESS,
    RUN_CANCELLED,
)
"""Every alert kind (a webhook's ``kinds`` filter names these)."""


def validate_name(name: object, field_name: str = "name") -> str:
    if not isinstance(name, str) or not name:
        raise InvalidSpec(field_name, "required (a non-empty string)")
    if len(name) > MAX_NAME:
        raise InvalidSpec(field_name, f"{len(name):,} characters, at most {MAX_NAME} allowed")
    if not NAME_RE.fullmatch(name):
        raise InvalidSpec(
            field_name,
            f"{quote(name)} is not a valid name: use letters, digits and _ . : - "
            "(starting with a letter or digit)",
        )
    return name


def check_int(value: int, field_name: str, low: int, high: int, unit: str = "") -> None:
    """Refuse a non-integer (``bool`` included) or a value outside ``low..high``."""
    if isinstance(value, bool) or not isinstance(value, int):
        raise InvalidSpec(field_name, f"must be an integer, got {type(value).__name__}")
    if not low <= value <= high:
        raise InvalidSpec(field_name, f"{value}{unit} out of range ({low}-{high}{unit})")


# A NUL ends a string in argv, the environment and C libraries; a lone surrogate is not Unicode
# text and cannot be encoded as UTF-8 (protobuf, LMDB and every process would refuse it later).
_BAD_CHAR = re.compile(r"[\x00\ud800-\udfff]")


def _bad_char(value: str) -> str | None:
    """Why ``value`` holds a character no field may hold, or None."""
    bad = _BAD_CHAR.search(value)
    if bad is None:
        return None
    if bad.group() == "\x00":
        return f"contains a NUL character at position {bad.start():,}"
    return f"contains a lone surrogate {bad.group()!r} at position {bad.start():,} (not Unicode text)"


def check_text(value: str, field_name: str, max_bytes: int) -> None:
    """Refuse a non-string, a NUL or lone surrogate in it, or more than ``max_bytes`` of UTF-8."""
    if not isinstance(value, str):
        raise InvalidSpec(field_name, f"must be a string, got {type(value).__name__}")
    ascii_only = value.isascii()  # the common case: no surrogate possible, one byte a character
    problem = _bad_char(value) if not ascii_only or "\x00" in value else None
    if problem is not None:
        raise InvalidSpec(field_name, problem)
    size = len(value) if ascii_only else len(value.encode("utf-8"))
    if size > max_bytes:
        raise InvalidSpec(field_name, f"{size:,} bytes, at most {max_bytes:,} allowed")


@dataclass(frozen=True, slots=True)
class RetryBackoff:
    """Exponential retry backoff of a task: the n-th retry waits ``base_ms x 2^(n-1)``, at most
    ``cap_ms`` (0: no cap below :data:`MAX_RETRY_DELAY_MS`), plus a stable jitter of up to
    ``jitter_pct`` % of that delay (:mod:`raftsched.timing.retry`)."""

    base_ms: int
    cap_ms: int = 0
    jitter_pct: int = 0

    def __post_init__(self) -> None:
        check_int(self.base_ms, "retry_backoff.base", 1, MAX_RETRY_DELAY_MS, " ms")
        check_int(self.cap_ms, "retry_backoff.cap", 0, MAX_RETRY_DELAY_MS, " ms")
        if self.cap_ms and self.cap_ms < self.base_ms:
            raise InvalidSpec("retry_backoff.cap", f"{self.cap_ms} ms is below the base ({self.base_ms} ms)")
        check_int(self.jitter_pct, "retry_backoff.jitter", 0, 100, " %")


def validate_retry_delays(delays: object, field_name: str = "retry_delays") -> None:
    """Refuse anything but a tuple of at most MAX_RETRY_DELAYS delays of 0..MAX_RETRY_DELAY_MS."""
    if not isinstance(delays, tuple):
        raise InvalidSpec(field_name, "must be a list of durations")
    if len(delays) > MAX_RETRY_DELAYS:
        raise InvalidSpec(field_name, f"{len(delays)} delays, at most {MAX_RETRY_DELAYS} allowed")
    for i, delay in enumerate(delays):
        check_int(delay, f"{field_name}[{i}]", 0, MAX_RETRY_DELAY_MS, " ms")


@dataclass(frozen=True, slots=True)
class CronTrigger:
    """Fires on a cron expression evaluated in ``timezone`` (5 fields, or 6 with seconds last)."""

    expr: str
    timezone: str = "UTC"

    def __post_init__(self) -> None:
        check_text(self.expr, "trigger.cron", 256)
        if not self.expr.strip():
            raise InvalidSpec("trigger.cron", "empty cron expression")
        check_text(self.timezone, "trigger.timezone", 64)


@dataclass(frozen=True, slots=True)
class IntervalTrigger:
    """Fires every ``every_ms`` (whole seconds), first at ``start_ms`` or one interval after creation."""

    every_ms: int
    start_ms: int = 0

    def __post_init__(self) -> None:
        check_int(self.every_ms, "trigger.interval", 1000, MAX_INTERVAL_MS, " ms")
        if self.every_ms % 1000:
            raise InvalidSpec("trigger.interval", f"{self.every_ms} ms is not a whole number of seconds")
        check_int(self.start_ms, "trigger.start", 0, MAX_TIME_MS)


@dataclass(frozen=True, slots=True)
class OnceTrigger:
    """Fires once, at ``at_ms``."""

    at_ms: int

    def __post_init__(self) -> None:
        check_int(self.at_ms, "trigger.at", 1, MAX_TIME_MS)


@dataclass(frozen=True, slots=True)
class ManualTrigger:
    """Never fires by itself; runs only when triggered through the API or CLI."""


Trigger = CronTrigger | IntervalTrigger | OnceTrigger | ManualTrigger


@dataclass(frozen=True, slots=True)
class TaskSpec:
    """A task definition as the user gives it. Versioning is the state machine's business."""

    name: str
    trigger: Trigger = field(default_factory=ManualTrigger)
    command: str = ""
    handler: str = ""
    shards: int = 1
    misfire: Misfire = Misfire.LATEST
    misfire_all_cap: int = 0
    misfire_all_window_ms: int = 0
    overlap: Overlap = Overlap.SKIP
    max_retries: int = 0
    timeout_ms: int = 0
    priority: int = 5
    owner: str = ""
    namespace: str = "default"
    params_json: str = ""
    description: str = ""
    # Resource locks every attempt holds while it runs: it starts only when it can take all of
    # them at once. Canonical order is by name (the state machine acquires in that order).
    locks: tuple[Lock, ...] = ()
    exclude: tuple[str, ...] = ()
    resource_cpu: float = 0.0
    resource_memory_mb: int = 0
    runner: Runner = Runner.SHELL
    # Executor labels the task needs, all with equal values; a mapping is accepted and kept as
    # sorted pairs (the spec stays hashable and compares equal whatever the order given).
    selector: tuple[tuple[str, str], ...] = ()
    # Each fire's start waits a stable offset in [0, jitter_ms) (raftsched.timing.jitter).
    jitter_ms: int = 0
    # Events (issue 28 §3): each accepted event named ``on_event`` starts one run; each
    # successful run emits the events of ``emits`` with its logical time as the key.
    on_event: str = ""
    emits: tuple[str, ...] = ()
    # Retries (issue 29 §3): the n-th retry waits the n-th of ``retry_delays_ms`` (the last
    # repeats), or ``retry_backoff``; neither: the cluster's backoff. A retry goes to another
    # executor when one fits, unless ``retry_elsewhere`` is False.
    retry_delays_ms: tuple[int, ...] = ()
    retry_backoff: RetryBackoff | None = None
    retry_elsewhere: bool = True
    # Retention (issue 29 §5): finished runs and fire records kept (0: the cluster's default).
    keep_runs: int = 0
    keep_for_ms: int = 0
    # A named capacity (raftsched pool set): every attempt holds one of its slots while it runs.
    pool: str = ""
    # Issue 36 §2: an alert when a run has not started / succeeded this long after its nominal
    # time, or when no run succeeded for ``freshness_ms`` (0 = none).
    sla_start_within_ms: int = 0
    sla_finish_within_ms: int = 0
    freshness_ms: int = 0

    def __post_init__(self) -> None:
        validate_name(self.name)
        if not isinstance(self.trigger, CronTrigger | IntervalTrigger | OnceTrigger | ManualTrigger):
            raise InvalidSpec("trigger", f"unknown trigger type {type(self.trigger).__name__}")
        check_text(self.command, "command", MAX_COMMAND_BYTES)
        check_text(self.handler, "handler", MAX_LABEL)
        if self.command and self.handler:
            raise InvalidSpec("handler", "give a command or a handler, not both")
        check_int(self.shards, "shards", 1, MAX_SHARDS)
        # The policies' names are accepted as plain strings too (misfire="all"): kept as the enum.
        for attr, kind in (("misfire", Misfire), ("overlap", Overlap), ("runner", Runner)):
            value = getattr(self, attr)
            if isinstance(value, str) and not isinstance(value, kind) and value in kind._value2member_map_:
                object.__setattr__(self, attr, kind(value))
        if not isinstance(self.misfire, Misfire):
            raise InvalidSpec("misfire", f"{quote(self.misfire)} is not one of latest, all, skip")
        if not isinstance(self.overlap, Overlap):
            raise InvalidSpec(
                "overlap", f"{quote(self.overlap)} is not one of skip, allow, buffer_one, replace"
            )
        check_int(self.misfire_all_cap, "misfire_all_cap", 0, MAX_MISFIRE_CAP)
        check_int(self.misfire_all_window_ms, "misfire_all_window", 0, MAX_MISFIRE_WINDOW_MS, " ms")
        check_int(self.max_retries, "max_retries", 0, MAX_RETRIES)
        check_int(self.timeout_ms, "timeout", 0, MAX_TIMEOUT_MS, " ms")
        check_int(self.jitter_ms, "jitter", 0, MAX_JITTER_MS, " ms")
        check_int(self.sla_start_within_ms, "sla.start_within", 0, MAX_SLA_MS, " ms")
        check_int(self.sla_finish_within_ms, "sla.finish_within", 0, MAX_SLA_MS, " ms")
        check_int(self.freshness_ms, "freshness", 0, MAX_SLA_MS, " ms")
        check_int(self.priority, "priority", 0, 9)
        check_locks(self.locks)
        check_text(self.owner, "owner", MAX_LABEL)
        check_text(self.namespace, "namespace", MAX_LABEL)
        check_text(self.description, "description", MAX_DESCRIPTION_BYTES)
        validate_params(self.params_json)
        validate_exclude(self.exclude)
        if self.on_event:
            validate_name(self.on_event, "on_event")
        validate_event_names(self.emits)
        if self.pool:
            validate_name(self.pool, "pool")
        validate_resource(self.resource_cpu, self.resource_memory_mb)
        if not isinstance(self.runner, Runner):
            raise InvalidSpec("runner", f"{quote(self.runner)} is not one of shell, python")
        if self.runner == Runner.PYTHON and self.handler:
            raise InvalidSpec("runner", "runner python runs a command; a handler is already Python")
        selector: object = self.selector
        if isinstance(selector, tuple) and all(isinstance(p, tuple) and len(p) == 2 for p in selector):
            selector = dict(selector)
        validate_selector(selector)
        assert isinstance(selector, Mapping)
        object.__setattr__(self, "selector", tuple(sorted(selector.items())))
        validate_retry_policy(self.retry_delays_ms, self.retry_backoff, self.retry_elsewhere)
        check_int(self.keep_runs, "keep_runs", 0, MAX_KEEP_RUNS)
        check_int(self.keep_for_ms, "keep_for", 0, MAX_KEEP_FOR_MS, " ms")
        # Last, so that a more specific problem with the fields given is the one reported.
        if not self.command and not self.handler:
            raise InvalidSpec("command", "give a command or a handler (a task with neither cannot run)")


def validate_retry_policy(delays: object, backoff: object, elsewhere: object, at: str = "") -> None:
    """Refuse bad retry fields (``at``: a prefix for the field names, ``tasks[0].``)."""
    validate_retry_delays(delays, f"{at}retry_delays")
    if backoff is not None and not isinstance(backoff, RetryBackoff):
        raise InvalidSpec(f"{at}retry_backoff", "must be a mapping {base, cap, jitter}")
    if delays and backoff is not None:
        raise InvalidSpec(
            f"{at}retry_backoff",
            "give retry_delays or retry_backoff, not both (a list of delays, or base x 2^n up to a cap)",
        )
    if isinstance(backoff, RetryBackoff):
        backoff.__post_init__()  # a decoded one is built unchecked: its ranges are checked here
    if not isinstance(elsewhere, bool):
        raise InvalidSpec(f"{at}retry_elsewhere", f"must be true or false, got {type(elsewhere).__name__}")


_D = TypeVar("_D", bound="DataclassInstance")


def unchecked(cls: type[_D], **values: Any) -> _D:
    """An instance of the frozen value class ``cls`` built from ``values`` *without* validation.

    Only for a value read back from the replicated state (a stored task record): it was valid
    under the rules of the version that accepted it, and a rule added since (a command now being
    required, NUL refused, params nesting bounded) must not stop a node from loading its state.
    New rules apply to every submission; a stored value that breaks them keeps working as it
    did and is refused only when it is submitted again. Fields not given take their defaults.
    """
    obj = object.__new__(cls)
    for f in dataclasses.fields(cls):
        if f.name in values:
            value = values[f.name]
        elif f.default is not dataclasses.MISSING:
            value = f.default
        elif f.default_factory is not dataclasses.MISSING:
            value = f.default_factory()
        else:
            raise TypeError(f"{cls.__name__}.{f.name} has no default; give it")
        object.__setattr__(obj, f.name, value)
    return obj


def validate_params(params_json: str, field_name: str = "params") -> None:
    """Refuse params that :func:`parse_params` refuses (empty means none)."""
    parse_params(params_json, field_name)


# A JSON string (escapes included) or a bracket; brackets inside strings are skipped with them.
_JSON_NESTING = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[\]{}]', re.DOTALL)


class _NotJson(ValueError):
    pass


def _refuse_constant(name: str) -> Any:
    raise _NotJson(f"{name} is not JSON (use null or a string)")


def _finite_float(text: str) -> float:
    value = float(text)
    if value in (float("inf"), float("-inf")):
        raise _NotJson(f"number {quote(text, 40)} is out of range for a float")
    return value


_PARAMS_DECODER = json.JSONDecoder(parse_constant=_refuse_constant, parse_float=_finite_float)


def _json_depth_exceeds(text: str, limit: int) -> bool:
    """Whether arrays and objects in ``text`` nest deeper than ``limit``. A scan, no recursion."""
    depth = 0
    for match in _JSON_NESTING.finditer(text):
        token = match.group()
        if token in ("[", "{"):
            depth += 1
            if depth > limit:
                return True
        elif token in ("]", "}"):
            depth -= 1
    return False


def parse_params(params_json: str, field_name: str = "params") -> dict[str, Any]:
    """Decode params: a JSON object of at most 16 KiB, nested at most :data:`MAX_PARAMS_DEPTH` deep.

    ``""`` means none (``{}``). Refused with :class:`InvalidSpec` naming ``field_name``: text that
    is not JSON, NaN and Infinity (Python's json accepts them; JSON does not), a number out of
    float range, a value other than an object, and a string (key or value) holding a NUL or a
    lone surrogate (``"\\u0000"``, ``"\\ud800"``), since params reach commands and processes.
    Nothing else is ever raised: the nesting is checked by a scan before decoding, so no input can
    exhaust the recursion of the JSON decoder (a ``RecursionError``).
    """
    check_text(params_json, field_name, MAX_PARAMS_BYTES)
    if not params_json:
        return {}
    # Fewer brackets than the limit cannot nest past it: most params skip the scan.
    brackets = params_json.count("[") + params_json.count("{")
    if brackets > MAX_PARAMS_DEPTH and _json_depth_exceeds(params_json, MAX_PARAMS_DEPTH):
        raise InvalidSpec(field_name, f"JSON nested deeper than {MAX_PARAMS_DEPTH} levels")
    try:
        value = _PARAMS_DECODER.decode(params_json)
    except _NotJson as exc:
        raise InvalidSpec(field_name, str(exc)) from None
    except ValueError as exc:  # JSONDecodeError, and int() past its digit limit
        raise InvalidSpec(field_name, f"not valid JSON ({exc})") from None
    if not isinstance(value, dict):
        raise InvalidSpec(field_name, f"must be a JSON object, got {type(value).__name__}")
    if "\\" in params_json:  # a NUL or surrogate can only come from an escape (the raw text passed)
        _check_json_strings(value, field_name)
    if "{{" in params_json or "\\" in params_json:
        _check_secret_strings(value, field_name)
    return value


def _check_secret_strings(value: object, field_name: str) -> None:
    """Refuse a malformed ``{{ secret.NAME }}`` reference in any string value (see secretref)."""
    stack: list[tuple[object, str]] = [(value, field_name)]
    while stack:
        item, path = stack.pop()
        if isinstance(item, dict):
            stack.extend((inner, f"{path}.{key}") for key, inner in item.items())
        elif isinstance(item, list):
            stack.extend((inner, f"{path}[{i}]") for i, inner in enumerate(item))
        elif isinstance(item, str) and "{{" in item:
            problems = check_secret_refs(item)
            if problems:
                raise InvalidSpec(path, "; ".join(problems))


def _check_json_strings(value: object, field_name: str) -> None:
    """Refuse a NUL or lone surrogate in any key or string of a decoded value (iteratively)."""
    stack = [value]
    while stack:
        item = stack.pop()
        if isinstance(item, dict):
            for key, inner in item.items():
                problem = _bad_char(key)
                if problem is not None:
                    raise InvalidSpec(field_name, f"key {quote(key, 40)} {problem}")
                stack.append(inner)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, str):
            problem = _bad_char(item)
            if problem is not None:
                raise InvalidSpec(field_name, f"string {quote(item, 40)} {problem}")


def validate_exclude(names: object, field_name: str = "exclude") -> None:
    """Refuse anything but a tuple of at most :data:`MAX_EXCLUDE` distinct calendar names."""
    if not isinstance(names, tuple):
        raise InvalidSpec(field_name, f"must be a tuple of calendar names, got {type(names).__name__}")
    if len(names) > MAX_EXCLUDE:
        raise InvalidSpec(field_name, f"{len(names)} calendars, at most {MAX_EXCLUDE}")
    seen: set[str] = set()
    for i, name in enumerate(names):
        validate_name(name, f"{field_name}[{i}]")
        if name in seen:
            raise InvalidSpec(f"{field_name}[{i}]", f"calendar {name!r} is listed twice")
        seen.add(name)


def validate_event_names(names: object, field_name: str = "emits") -> None:
    """Refuse anything but a tuple of at most :data:`MAX_EXCLUDE` distinct event names."""
    if not isinstance(names, tuple):
        raise InvalidSpec(field_name, f"must be a tuple of event names, got {type(names).__name__}")
    if len(names) > MAX_EXCLUDE:
        raise InvalidSpec(field_name, f"{len(names)} events, at most {MAX_EXCLUDE}")
    seen: set[str] = set()
    for i, name in enumerate(names):
        validate_name(name, f"{field_name}[{i}]")
        if name in seen:
            raise InvalidSpec(f"{field_name}[{i}]", f"event {name!r} is listed twice")
        seen.add(name)


def validate_resource(cpu: object, memory_mb: object, field_name: str = "resource") -> None:
    """Refuse a CPU need that is negative, not finite or over 1024, and a memory need out of range.

    0 means "not declared"; a declared need must be > 0.
    """
    if isinstance(cpu, bool) or not isinstance(cpu, int | float):
        raise InvalidSpec(f"{field_name}.cpu", f"must be a number, got {type(cpu).__name__}")
    if cpu != cpu or cpu < 0 or cpu > MAX_RESOURCE_CPU:  # cpu != cpu: NaN
        raise InvalidSpec(f"{field_name}.cpu", f"{cpu} out of range (> 0, at most {MAX_RESOURCE_CPU:g})")
    check_int(memory_mb, f"{field_name}.memory", 0, MAX_RESOURCE_MEMORY_MB, " MiB")  # type: ignore[arg-type]


def parse_runner(value: str, field_name: str = "runner") -> Runner:
    try:
        return Runner(value or "shell")
    except ValueError:
        raise InvalidSpec(field_name, f"{quote(value)} is not one of shell, python") from None


def validate_selector(selector: object, field_name: str = "selector") -> None:
    """Refuse a selector that is not a mapping of at most 16 non-empty label keys to values."""
    if not isinstance(selector, Mapping):
        raise InvalidSpec(field_name, f"must be a mapping of label to value, got {type(selector).__name__}")
    if len(selector) > MAX_SELECTOR:
        raise InvalidSpec(field_name, f"{len(selector)} labels, at most {MAX_SELECTOR}")
    for key, value in selector.items():
        if not isinstance(key, str) or not key or len(key) > 128 or "\0" in key:
            raise InvalidSpec(field_name, f"label {key!r}: a non-empty string of at most 128 characters")
        if not isinstance(value, str) or len(value) > 128 or "\0" in value:
            raise InvalidSpec(f"{field_name}.{key}", f"value {value!r}: a string of at most 128 characters")


def run_id_for(task: str, nominal_ms: int, manual_seq: int = 0) -> str:
    """The identity of the run a fire produces: ``task@nominal_ms`` (``task@nominal_ms~m<seq>`` if manual)."""
    return f"{task}@{nominal_ms}" if not manual_seq else f"{task}@{nominal_ms}~m{manual_seq}"


def execution_id(run_id: str, shard: int, attempt: int) -> str:
    """The idempotency key executor code sees for one attempt of one shard."""
    return f"{run_id}/{shard}/{attempt}"
