"""The range of every integer a request or a replicated command carries, defined once.

The gRPC servicers refuse a request with a field outside its range (INVALID_ARGUMENT naming the
field and the range: :func:`check`, called by :func:`raftsched.rpc.plumbing.rpc`), and ``apply``
checks every command again (:func:`violation`, a rejection value): a leader bug, an old client or
a hand-made log entry cannot take an integer out of range inside the state machine, where an
overflow of an ``int64`` or ``uint32`` field is an exception on every replica.

The ranges are chosen so that the arithmetic apply derives from them stays inside its fields:

* a time is 0..:data:`MAX_TIME_MS` (9999-12-31, the end of what Python's calendar and croniter
  represent); a derived time (a token's expiry ``now + ttl``) is checked against the same range
  where it is computed (:func:`check_sum`);
* durations and counts are bounded well below their field's type, so a time plus a duration or a
  counter plus a count fits an ``int64`` (each is at most 2**48 or so);
* attempt numbers stay below :data:`MAX_ATTEMPT`: a forced retry past it is refused;
* fields that are output only (a record echoed back, such as ``QuotaRecord.running``) are
  ignored by the servicer and apply; their range is the type's.

A field at 0 is unset in proto3 and means the field's default (documented per field); the ranges
apply to values that are set. The table is the documentation: the docs site's "Task fields and
limits" page is generated from :func:`markdown_table` (docs/gen/pages.py) when the site is built.

Pure (part of the core): the limits it gathers are the model's, the workflow validator's, the
quota book's and the calendar's, imported, not copied.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

from google.protobuf.descriptor import Descriptor, FieldDescriptor
from google.protobuf.message import Message

from raftsched.errors import InvalidSpec
from raftsched.model import (
    MAX_INTERVAL_MS,
    MAX_JITTER_MS,
    MAX_KEEP_FOR_MS,
    MAX_KEEP_RUNS,
    MAX_MISFIRE_CAP,
    MAX_MISFIRE_WINDOW_MS,
    MAX_RESOURCE_MEMORY_MB,
    MAX_RETRIES,
    MAX_RETRY_DELAY_MS,
    MAX_SHARDS,
    MAX_SLA_MS,
    MAX_TIME_MS,
    MAX_TIMEOUT_MS,
)
from raftsched.timing.calendar import ALL_WEEKDAYS, FIRST_DAY, LAST_DAY
from raftsched.workflow.validate import MAX_LOGICAL_OFFSET_MS, MAX_PARALLEL, MAX_WORKFLOW_TASKS

__all__ = [
    "FIELDS",
    "MAX_ATTEMPT",
    "MAX_TIME_MS",
    "Range",
    "check",
    "check_sum",
    "markdown_table",
    "violation",
]

INT32_MIN, INT32_MAX = -(2**31), 2**31 - 1
UINT32_MAX = 2**32 - 1
INT64_MIN, INT64_MAX = -(2**63), 2**63 - 1
UINT64_MAX = 2**64 - 1

DAY_MS = 24 * 3600 * 1000
MAX_TTL_MS: Final = 100 * 366 * DAY_MS
"""A token lives at most about a century (and its expiry, ``now + ttl``, is a time)."""
MAX_ATTEMPT: Final = 1_000_000
"""Attempt numbers of a shard (1-based). Retries, free re-placements and forced retries each add
one; a forced retry that would pass this is refused."""
MAX_FIRE_COUNT: Final = MAX_TIME_MS // 1000 + 1
"""Fires one fire record may cover: a range of fires at least a second apart within the time range."""
MAX_COUNTER: Final = 2**62
"""Versions, sequences and epochs: far beyond any log (one step per command), and a counter plus
any count stays inside an ``int64``."""
MAX_DURATION_MS: Final = MAX_TIME_MS
"""An attempt's measured duration, or its lateness either way."""
MAX_SLOTS: Final = 10_000
MAX_RATE_MILLI: Final = 1_000_000 * 1000  # a quota's rate: a million attempts per second
MAX_BURST: Final = 1_000_000  # a quota's burst
MAX_RUNNING: Final = 1_000_000  # a quota's running attempts
MAX_POOL_SLOTS: Final = 1_000_000  # a pool's slots
"""An executor's slots."""
MAX_STAGE_CHUNKS: Final = MAX_WORKFLOW_TASKS
MAX_SCRYPT_N: Final = 2**20  # the verifier runs scrypt with it: larger is a memory bomb
MAX_SCRYPT_RP: Final = 64
MAX_OFFSET_S: Final = 26 * 3600  # a UTC offset (the widest in use is 14 h)


@dataclass(frozen=True, slots=True)
class Range:
    """``low..high`` (both included), with a unit for messages and what 0 (unset) means."""

    low: int
    high: int
    unit: str = ""
    zero: str = ""  # what an unset field means ("" : 0 is simply the smallest value)

    def text(self) -> str:
        return f"{self.low}..{self.high}{self.unit}"


TIME: Final = Range(0, MAX_TIME_MS, " ms", "none / not given")
TIME_RANGE_LOW: Final = Range(-MAX_TIME_MS, MAX_TIME_MS, " ms")  # zone transitions start in 1900
TTL: Final = Range(0, MAX_TTL_MS, " ms", "never expires")
COUNTER: Final = Range(0, MAX_COUNTER, "", "none / any")
LIMIT: Final = Range(0, UINT32_MAX, "", "the default (capped by the page size)")
SHARD: Final = Range(0, MAX_SHARDS - 1)
ATTEMPT: Final = Range(0, MAX_ATTEMPT)
DURATION: Final = Range(0, MAX_DURATION_MS, " ms")
LATENESS: Final = Range(-MAX_DURATION_MS, MAX_DURATION_MS, " ms")
EXIT_CODE: Final = Range(INT32_MIN, INT32_MAX)
MEMORY_MB: Final = Range(0, MAX_RESOURCE_MEMORY_MB, " MiB", "not declared")
PRIORITY: Final = Range(0, 9)
SHARDS: Final = Range(0, MAX_SHARDS, "", "1")
RETRIES: Final = Range(0, MAX_RETRIES)
TIMEOUT: Final = Range(0, MAX_TIMEOUT_MS, " ms", "no timeout")
IGNORED_U32: Final = Range(0, UINT32_MAX, "", "output only: ignored")
IGNORED_U64: Final = Range(0, UINT64_MAX, "", "output only: ignored")
IGNORED_I64: Final = Range(INT64_MIN, INT64_MAX, "", "output only: ignored")
RETRY_DELAY: Final = Range(0, MAX_RETRY_DELAY_MS, " ms")
KEEP_RUNS: Final = Range(0, MAX_KEEP_RUNS, "", "the cluster default")
KEEP_FOR: Final = Range(0, MAX_KEEP_FOR_MS, " ms", "the cluster default")
FORMAT: Final = Range(0, UINT32_MAX, "", "format 1 (a newer one stops apply: format_too_new)")

_V1 = "raftsched.v1."
FIELDS: Final[dict[str, Range]] = {
    _V1 + name: rng
    for name, rng in {
        # -- specs (shared by requests and commands) -------------------------------------------
        "IntervalTrigger.every_ms": Range(0, MAX_INTERVAL_MS, " ms", "required: 1000..(366 days)"),
        "IntervalTrigger.start_ms": TIME,
        "OnceTrigger.at_ms": TIME,
        "TaskSpec.shards": SHARDS,
        "TaskSpec.misfire_all_cap": Range(0, MAX_MISFIRE_CAP, "", "the cluster default"),
        "TaskSpec.misfire_all_window_ms": Range(0, MAX_MISFIRE_WINDOW_MS, " ms", "the cluster default"),
        "TaskSpec.max_retries": RETRIES,
        "TaskSpec.timeout_ms": TIMEOUT,
        "TaskSpec.jitter_ms": Range(0, MAX_JITTER_MS, " ms", "no jitter"),
        "WorkflowSpec.jitter_ms": Range(0, MAX_JITTER_MS, " ms", "no jitter"),
        "TaskSpec.sla_start_within_ms": Range(0, MAX_SLA_MS, " ms", "no start SLA"),
        "TaskSpec.sla_finish_within_ms": Range(0, MAX_SLA_MS, " ms", "no finish SLA"),
        "TaskSpec.freshness_ms": Range(0, MAX_SLA_MS, " ms", "no freshness check"),
        "WorkflowSpec.sla_start_within_ms": Range(0, MAX_SLA_MS, " ms", "no start SLA"),
        "WorkflowSpec.sla_finish_within_ms": Range(0, MAX_SLA_MS, " ms", "no finish SLA"),
        "WorkflowSpec.freshness_ms": Range(0, MAX_SLA_MS, " ms", "no freshness check"),
        "TaskSpec.priority": PRIORITY,
        "TaskSpec.resource_memory_mb": MEMORY_MB,
        "WorkflowTaskSpec.shards": SHARDS,
        "WorkflowTaskSpec.max_retries": RETRIES,
        "WorkflowTaskSpec.timeout_ms": TIMEOUT,
        "WorkflowTaskSpec.priority": PRIORITY,
        "WorkflowTaskSpec.resource_memory_mb": MEMORY_MB,
        "WorkflowSpec.max_parallel_per_run": Range(0, MAX_PARALLEL, "", "unlimited"),
        "WorkflowSpec.max_parallel": Range(0, MAX_PARALLEL, "", "unlimited"),
        "WorkflowSpec.backfill_share_pct": Range(0, 100, " %", "the cluster default (30)"),
        "Dependency.logical_offset_ms": Range(-MAX_LOGICAL_OFFSET_MS, 0, " ms", "same logical time"),
        "Dependency.timeout_ms": TIMEOUT,
        "Dependency.warn_after_ms": Range(0, MAX_TIMEOUT_MS, " ms", "the workflow's warn_after"),
        "WorkflowSpec.warn_after_ms": Range(0, MAX_TIMEOUT_MS, " ms", "no warning"),
        "QuotaRecord.rate_milli": Range(0, MAX_RATE_MILLI, "", "no rate limit"),
        "QuotaRecord.burst": Range(0, MAX_BURST, "", "one second of the rate"),
        "QuotaRecord.max_running": Range(0, MAX_RUNNING, "", "unlimited"),
        "QuotaRecord.tokens_micro": IGNORED_I64,
        "QuotaRecord.refilled_ms": IGNORED_I64,
        "QuotaRecord.running": IGNORED_U32,
        "QuotaRecord.updated_ms": IGNORED_I64,
        "QuotaRecord.waited": IGNORED_U64,
        "CalendarSpec.dates": Range(FIRST_DAY, LAST_DAY, " days since 1970-01-01 (years 1-9999)"),
        "CalendarSpec.weekdays": Range(0, ALL_WEEKDAYS, "", "no weekday (bit 0 Monday .. bit 6 Sunday)"),
        # -- Admin requests --------------------------------------------------------------------
        "UpdateTaskRequest.expected_version": COUNTER,
        "ApplyWorkflowRequest.expected_version": COUNTER,
        "ListTasksRequest.limit": LIMIT,
        "ListTasksRequest.page_size": LIMIT,
        "ListTasksRequest.recent_fires": LIMIT,
        "ListRunsRequest.since_ms": TIME,
        "ListRunsRequest.until_ms": TIME,
        "ListRunsRequest.limit": LIMIT,
        "ListRunsRequest.page_size": LIMIT,
        "FireAccountingRequest.since_ms": TIME,
        "FireAccountingRequest.until_ms": TIME,
        "FireAccountingRequest.limit": LIMIT,
        "ExplainRequest.at_ms": TIME,
        "NodeStatusRequest.lateness_since_ms": TIME,
        "NodeStatusRequest.chain_at_index": Range(0, INT64_MAX, "", "not asked"),
        "GetWorkflowRequest.version": COUNTER,
        "ListWorkflowsRequest.limit": LIMIT,
        "StartWorkflowRunRequest.logical_ms": TIME,
        "ListWorkflowRunsRequest.limit": LIMIT,
        "BackfillRequest.from_ms": TIME,
        "BackfillRequest.to_ms": TIME,
        "LineageRequest.version": COUNTER,
        "ListAlertsRequest.since_ms": TIME,
        "ListAlertsRequest.limit": LIMIT,
        "CreateTokenRequest.ttl_ms": TTL,
        "ListAuditRequest.since_ms": TIME,
        "ListAuditRequest.limit": LIMIT,
        # -- ExecutorService requests ----------------------------------------------------------
        "RegisterRequest.slots": Range(0, MAX_SLOTS, "", "required: 1.."),
        "RegisterRequest.memory_mb": MEMORY_MB,
        "HeartbeatRequest.free_slots": Range(0, MAX_SLOTS),
        "HeartbeatRequest.clock_offset_ms": LATENESS,
        "ExecResult.exit_code": EXIT_CODE,
        "ExecResult.duration_ms": DURATION,
        "ExecResult.start_lateness_ms": LATENESS,
        "SessionOpen.session_version": Range(0, UINT32_MAX, "", "none: refused (versions start at 1)"),
        "SessionReport.report_id": COUNTER,
        "SessionReport.duration_ms": Range(0, UINT32_MAX, " ms"),  # (a longer one goes cold)
        "SessionReport.start_lateness_ms": LATENESS,
        # -- replicated commands (log.proto) ---------------------------------------------------
        "Command.format": FORMAT,
        "Command.epoch": COUNTER,
        "Command.now_ms": TIME,
        "CreateTask.next_fire_ms": TIME,
        "UpdateTask.next_fire_ms": TIME,
        "UpdateTask.expected_version": COUNTER,
        "ApplyWorkflow.expected_version": COUNTER,
        "SetEnabled.next_fire_ms": TIME,
        "TaskFires.version": COUNTER,
        "TaskFires.next_fire_ms": TIME,
        "TaskFires.watermark_ms": TIME,
        "Fire.nominal_ms": TIME,
        "Fire.through_ms": TIME,
        "Fire.count": Range(0, MAX_FIRE_COUNT, "", "1"),
        "AttemptResult.shard": SHARD,
        "AttemptResult.attempt": ATTEMPT,
        "AttemptResult.exit_code": EXIT_CODE,
        "AttemptResult.retry_at_ms": TIME,
        "AttemptResult.duration_ms": DURATION,
        "AttemptResult.start_lateness_ms": LATENESS,
        "ExecutorJoin.slots": Range(0, MAX_SLOTS, "", "required: 1.."),
        "ExecutorJoin.memory_mb": MEMORY_MB,
        "ExecutorLeave.retry_at_ms": TIME,
        "Assignment.shard": SHARD,
        "Assignment.attempt": ATTEMPT,
        "AttemptWait.shard": SHARD,
        "AttemptWait.attempt": ATTEMPT,
        "ApplyWorkflow.next_fire_ms": TIME,
        "ApplyWorkflow.staged_tasks": Range(0, MAX_WORKFLOW_TASKS),
        "StageWorkflowTasks.seq": Range(0, MAX_STAGE_CHUNKS),
        "StartWorkflowRun.logical_ms": TIME,
        "StartBackfill.logical_ms": TIME,
        "StartBackfill.from_ms": TIME,
        "StartBackfill.to_ms": TIME,
        "AlertRecord.at_ms": TIME,
        "AlertRecord.seq": COUNTER,
        "AlertRecord.acked_ms": TIME,
        "AlertRecord.resolves_seq": COUNTER,
        "AlertsDelivered.through_seq": COUNTER,
        "TokenInfo.created_ms": TIME,
        "TokenInfo.expires_ms": TIME,
        "TokenInfo.revoked_ms": TIME,
        "TokenInfo.last_used_ms": TIME,
        "CreateToken.ttl_ms": TTL,
        "CreateToken.scrypt_n": Range(0, MAX_SCRYPT_N, "", "required: 1024.."),
        "CreateToken.scrypt_r": Range(0, MAX_SCRYPT_RP, "", "required: 1.."),
        "CreateToken.scrypt_p": Range(0, MAX_SCRYPT_RP, "", "required: 1.."),
        "SetWorkflowPaused.next_fire_ms": TIME,
        "SetCalendar.transition_ms": TIME_RANGE_LOW,
        "SetCalendar.offset_s": Range(-MAX_OFFSET_S, MAX_OFFSET_S, " s"),
        "ApplyWorkflow.zone_transition_ms": TIME_RANGE_LOW,
        "ApplyWorkflow.zone_offset_s": Range(-MAX_OFFSET_S, MAX_OFFSET_S, " s"),
        "MemberChange.started_ms": TIME,
        "Barrier.clock_fault_ms": Range(0, MAX_TIME_MS, " ms", "no clock fault"),
        "ListEventsRequest.limit": LIMIT,
        # -- issue 29 §3, §5: per-task retry timing and retention ------------------------------
        "TaskSpec.retry_delays_ms": RETRY_DELAY,
        "TaskSpec.keep_runs": KEEP_RUNS,
        "TaskSpec.keep_for_ms": KEEP_FOR,
        "WorkflowTaskSpec.retry_delays_ms": RETRY_DELAY,
        "WorkflowSpec.keep_runs": KEEP_RUNS,
        "WorkflowSpec.keep_for_ms": KEEP_FOR,
        "RetryBackoff.base_ms": Range(0, MAX_RETRY_DELAY_MS, " ms", "required with retry_backoff: 1.."),
        "RetryBackoff.cap_ms": Range(0, MAX_RETRY_DELAY_MS, " ms", "no cap (7 days)"),
        "RetryBackoff.jitter_pct": Range(0, 100, " %", "no jitter"),
        "PoolRecord.slots": Range(0, MAX_POOL_SLOTS, "", "refused: a pool has at least 1 slot"),
        "PoolRecord.updated_ms": IGNORED_I64,
        "StartTaskBackfill.nominal_ms": TIME,
        "StartTaskBackfill.from_ms": TIME,
        "StartTaskBackfill.to_ms": TIME,
        "TaskBackfillRequest.from_ms": TIME,
        "TaskBackfillRequest.to_ms": TIME,
        "LogEnd.bytes": IGNORED_U64,
        "ReadLogsRequest.shard": SHARD,
        "ReadLogsRequest.attempt": Range(0, MAX_ATTEMPT, "", "the shard's latest attempt"),
        "ReadLogsRequest.since_line": Range(0, UINT64_MAX, "", "from the first line"),
        "ReadLogsRequest.tail_bytes": Range(0, UINT64_MAX, " bytes", "the whole log"),
        "CancelRunRequest.shard": SHARD,
        "CancelRuns.shard": SHARD,
        # -- issue 31 P1: the columnar hot path (not walked: raftsched.fsm.hot validates every row;
        # an entry with a time out of range or an unknown number is refused whole) ----------------
        "FireColumns.task": Range(0, UINT32_MAX, "", "refused: task numbers start at 1"),
        "FireColumns.version": COUNTER,
        "FireColumns.nominal_delta": Range(0, MAX_TIME_MS, " ms"),
        "FireColumns.next_delta": Range(INT64_MIN, MAX_TIME_MS, " ms"),
        "AssignColumns.seq": COUNTER,
        "AssignColumns.shard": Range(0, 0, "", "hot runs have one shard"),
        "AssignColumns.attempt": ATTEMPT,
        "AssignColumns.executor": Range(0, UINT32_MAX, "", "refused: executor numbers start at 1"),
        "ResultColumns.seq": COUNTER,
        "ResultColumns.attempt": ATTEMPT,
        "ResultColumns.executor": Range(0, UINT32_MAX, "", "refused: executor numbers start at 1"),
        "ResultColumns.duration_ms": Range(0, UINT32_MAX, " ms"),
        "ResultColumns.lateness_ms": Range(INT32_MIN, INT32_MAX, " ms"),
        "PromoteHotRuns.before_seq": Range(0, MAX_COUNTER, "", "refused: 1-next_seq"),
    }.items()
}

_INTEGER_TYPES: Final = frozenset(
    {
        FieldDescriptor.CPPTYPE_INT32,
        FieldDescriptor.CPPTYPE_INT64,
        FieldDescriptor.CPPTYPE_UINT32,
        FieldDescriptor.CPPTYPE_UINT64,
    }
)

# Messages whose own decoder checks every integer field against the same constants, with
# messages users know (``shards: 5000 out of range (1-1024)``): codec.spec_from_pb (TaskSpec
# and its trigger), validate_workflow (WorkflowSpec, WorkflowTaskSpec), validate_quota
# (QuotaRecord), Calendar.build (CalendarSpec). The walk leaves them to it; their rows here are
# the documentation, and tests/unit/test_bounds.py checks each decoder refuses the row's limit + 1.
SELF_CHECKED: Final = frozenset(
    _V1 + name for name in ("TaskSpec", "WorkflowSpec", "QuotaRecord", "CalendarSpec")
)

# Per field descriptor: its range (an integer field), True (a message field to walk into) or
# None (nothing to check: text, bytes, enums, floats, string maps, self-checked messages).
# Built on first use.
_PLAN: dict[FieldDescriptor, Range | bool | None] = {}


def _plan(fd: FieldDescriptor) -> Range | bool | None:
    try:
        return _PLAN[fd]
    except KeyError:
        pass
    plan: Range | bool | None = None
    if fd.message_type is not None:
        sub = fd.message_type
        # Maps hold strings only (labels, env, selector: the tests check it).
        plan = None if sub.full_name in SELF_CHECKED or sub.GetOptions().map_entry else True
    elif fd.cpp_type in _INTEGER_TYPES and fd.type != FieldDescriptor.TYPE_ENUM:
        plan = FIELDS.get(fd.full_name)  # None: a field the table misses (the tests forbid it)
    _PLAN[fd] = plan
    return plan


def violation(msg: Message, path: str = "") -> InvalidSpec | None:
    """The first integer field of ``msg`` (nested messages included) outside its range, as the
    error to answer with (the field's path and the range); None if every one is inside.

    Only fields that are set are looked at (proto3: an unset field is 0, its default)."""
    for fd, value in msg.ListFields():
        plan = _plan(fd)
        if plan is None:
            continue
        if plan is True:
            if fd.is_repeated:
                for i, sub in enumerate(value):
                    found = violation(sub, f"{path}{fd.name}[{i}].")
                    if found is not None:
                        return found
            else:
                found = violation(value, f"{path}{fd.name}.")
                if found is not None:
                    return found
            continue
        assert isinstance(plan, Range)
        if fd.is_repeated:
            # min/max first: a packed column of a session report is checked at C speed.
            if plan.low <= min(value) and max(value) <= plan.high:
                continue
            for i, item in enumerate(value):
                if not plan.low <= item <= plan.high:
                    return _out_of_range(f"{path}{fd.name}[{i}]", item, plan)
        elif not plan.low <= value <= plan.high:
            return _out_of_range(path + fd.name, value, plan)
    return None


def _out_of_range(where: str, value: int, rng: Range) -> InvalidSpec:
    return InvalidSpec(where, f"{value} out of range ({rng.text()})")


def check(msg: Message) -> None:
    """Raise :class:`InvalidSpec` for the first integer field of ``msg`` outside its range."""
    found = violation(msg)
    if found is not None:
        raise found


def check_sum(where: str, base: int, delta: int, rng: Range, what: str) -> int:
    """``base + delta`` if it is inside ``rng``; else InvalidSpec naming ``where`` and ``what`` the
    sum is (``expiry``, ``deadline``)."""
    total = base + delta
    if not rng.low <= total <= rng.high:
        raise InvalidSpec(where, f"{what} {base} + {delta} = {total} out of range ({rng.text()})")
    return total


def integer_fields(desc: Descriptor, seen: set[str] | None = None) -> list[FieldDescriptor]:
    """Every integer field (not enums) of ``desc`` and the messages it holds, each once."""
    seen = set() if seen is None else seen
    if desc.full_name in seen:
        return []
    seen.add(desc.full_name)
    out: list[FieldDescriptor] = []
    for fd in desc.fields:
        if fd.message_type is not None:
            out.extend(integer_fields(fd.message_type, seen))
        elif fd.cpp_type in _INTEGER_TYPES and fd.type != FieldDescriptor.TYPE_ENUM:
            out.append(fd)
    return out


def markdown_table() -> str:
    """The table as the docs show it (Task fields and limits, Integer fields): one row per range, with what
    an unset field (0) means and every field that has it, ``Message.field``."""
    groups: dict[Range, list[str]] = {}
    for name, rng in FIELDS.items():
        groups.setdefault(rng, []).append(name.removeprefix(_V1))
    lines = ["| range | unset (0) means | fields |", "|---|---|---|"]
    for rng in sorted(groups, key=lambda r: (r.low, r.high, r.unit, r.zero)):
        fields = ", ".join(f"`{n}`" for n in sorted(groups[rng]))
        lines.append(f"| {rng.low:,} … {rng.high:,}{rng.unit} | {rng.zero or '—'} | {fields} |")
    return "\n".join(lines) + "\n"
