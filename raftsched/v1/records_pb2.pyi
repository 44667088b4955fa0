from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class MisfirePolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    MISFIRE_UNSPECIFIED: _ClassVar[MisfirePolicy]
    MISFIRE_LATEST: _ClassVar[MisfirePolicy]
    MISFIRE_ALL: _ClassVar[MisfirePolicy]
    MISFIRE_SKIP: _ClassVar[MisfirePolicy]

class OverlapPolicy(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OVERLAP_UNSPECIFIED: _ClassVar[OverlapPolicy]
    OVERLAP_SKIP: _ClassVar[OverlapPolicy]
    OVERLAP_ALLOW: _ClassVar[OverlapPolicy]
    OVERLAP_BUFFER_ONE: _ClassVar[OverlapPolicy]
    OVERLAP_REPLACE: _ClassVar[OverlapPolicy]

class FireOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_UNSPECIFIED: _ClassVar[FireOutcome]
    FIRED: _ClassVar[FireOutcome]
    COALESCED: _ClassVar[FireOutcome]
    SKIPPED_OVERLAP: _ClassVar[FireOutcome]
    SKIPPED_MISFIRE: _ClassVar[FireOutcome]
    SKIPPED_DISABLED: _ClassVar[FireOutcome]
    SKIPPED_CALENDAR: _ClassVar[FireOutcome]

class RunState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RUN_STATE_UNSPECIFIED: _ClassVar[RunState]
    PENDING: _ClassVar[RunState]
    RUNNING: _ClassVar[RunState]
    SUCCEEDED: _ClassVar[RunState]
    FAILED: _ClassVar[RunState]
    CANCELLED: _ClassVar[RunState]

class EdgeCondition(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONDITION_UNSPECIFIED: _ClassVar[EdgeCondition]
    ON_SUCCESS: _ClassVar[EdgeCondition]
    ON_FAILURE: _ClassVar[EdgeCondition]
    ON_DONE: _ClassVar[EdgeCondition]

class TriggerRule(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RULE_UNSPECIFIED: _ClassVar[TriggerRule]
    RULE_ALL: _ClassVar[TriggerRule]
    RULE_ANY: _ClassVar[TriggerRule]

class UpstreamTimeout(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    UPSTREAM_TIMEOUT_FAIL: _ClassVar[UpstreamTimeout]
    UPSTREAM_TIMEOUT_SKIP: _ClassVar[UpstreamTimeout]

class WorkflowTaskState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    TASK_STATE_UNSPECIFIED: _ClassVar[WorkflowTaskState]
    TASK_WAITING: _ClassVar[WorkflowTaskState]
    TASK_READY: _ClassVar[WorkflowTaskState]
    TASK_RUNNING: _ClassVar[WorkflowTaskState]
    TASK_SUCCESS: _ClassVar[WorkflowTaskState]
    TASK_FAILED: _ClassVar[WorkflowTaskState]
    TASK_TIMEOUT: _ClassVar[WorkflowTaskState]
    TASK_SKIPPED: _ClassVar[WorkflowTaskState]
    TASK_KILLED: _ClassVar[WorkflowTaskState]

class WorkflowRunState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    WORKFLOW_STATE_UNSPECIFIED: _ClassVar[WorkflowRunState]
    WORKFLOW_RUNNING: _ClassVar[WorkflowRunState]
    WORKFLOW_SUCCESS: _ClassVar[WorkflowRunState]
    WORKFLOW_FAILED: _ClassVar[WorkflowRunState]
    WORKFLOW_KILLED: _ClassVar[WorkflowRunState]

class ExternalWaitState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXTERNAL_PENDING: _ClassVar[ExternalWaitState]
    EXTERNAL_MET: _ClassVar[ExternalWaitState]
    EXTERNAL_UNMET: _ClassVar[ExternalWaitState]
    EXTERNAL_TIMED_OUT: _ClassVar[ExternalWaitState]
MISFIRE_UNSPECIFIED: MisfirePolicy
MISFIRE_LATEST: MisfirePolicy
MISFIRE_ALL: MisfirePolicy
MISFIRE_SKIP: MisfirePolicy
OVERLAP_UNSPECIFIED: OverlapPolicy
OVERLAP_SKIP: OverlapPolicy
OVERLAP_ALLOW: OverlapPolicy
OVERLAP_BUFFER_ONE: OverlapPolicy
OVERLAP_REPLACE: OverlapPolicy
OUTCOME_UNSPECIFIED: FireOutcome
FIRED: FireOutcome
COALESCED: FireOutcome
SKIPPED_OVERLAP: FireOutcome
SKIPPED_MISFIRE: FireOutcome
SKIPPED_DISABLED: FireOutcome
SKIPPED_CALENDAR: FireOutcome
RUN_STATE_UNSPECIFIED: RunState
PENDING: RunState
RUNNING: RunState
SUCCEEDED: RunState
FAILED: RunState
CANCELLED: RunState
CONDITION_UNSPECIFIED: EdgeCondition
ON_SUCCESS: EdgeCondition
ON_FAILURE: EdgeCondition
ON_DONE: EdgeCondition
RULE_UNSPECIFIED: TriggerRule
RULE_ALL: TriggerRule
RULE_ANY: TriggerRule
UPSTREAM_TIMEOUT_FAIL: UpstreamTimeout
UPSTREAM_TIMEOUT_SKIP: UpstreamTimeout
TASK_STATE_UNSPECIFIED: WorkflowTaskState
TASK_WAITING: WorkflowTaskState
TASK_READY: WorkflowTaskState
TASK_RUNNING: WorkflowTaskState
TASK_SUCCESS: WorkflowTaskState
TASK_FAILED: WorkflowTaskState
TASK_TIMEOUT: WorkflowTaskState
TASK_SKIPPED: WorkflowTaskState
TASK_KILLED: WorkflowTaskState
WORKFLOW_STATE_UNSPECIFIED: WorkflowRunState
WORKFLOW_RUNNING: WorkflowRunState
WORKFLOW_SUCCESS: WorkflowRunState
WORKFLOW_FAILED: WorkflowRunState
WORKFLOW_KILLED: WorkflowRunState
EXTERNAL_PENDING: ExternalWaitState
EXTERNAL_MET: ExternalWaitState
EXTERNAL_UNMET: ExternalWaitState
EXTERNAL_TIMED_OUT: ExternalWaitState

class CronTrigger(_message.Message):
    __slots__ = ("expr", "timezone")
    EXPR_FIELD_NUMBER: _ClassVar[int]
    TIMEZONE_FIELD_NUMBER: _ClassVar[int]
    expr: str
    timezone: str
    def __init__(self, expr: _Optional[str] = ..., timezone: _Optional[str] = ...) -> None: ...

class IntervalTrigger(_message.Message):
    __slots__ = ("every_ms", "start_ms")
    EVERY_MS_FIELD_NUMBER: _ClassVar[int]
    START_MS_FIELD_NUMBER: _ClassVar[int]
    every_ms: int
    start_ms: int
    def __init__(self, every_ms: _Optional[int] = ..., start_ms: _Optional[int] = ...) -> None: ...

class OnceTrigger(_message.Message):
    __slots__ = ("at_ms",)
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    at_ms: int
    def __init__(self, at_ms: _Optional[int] = ...) -> None: ...

class ManualTrigger(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class Trigger(_message.Message):
    __slots__ = ("cron", "interval", "once", "manual")
    CRON_FIELD_NUMBER: _ClassVar[int]
    INTERVAL_FIELD_NUMBER: _ClassVar[int]
    ONCE_FIELD_NUMBER: _ClassVar[int]
    MANUAL_FIELD_NUMBER: _ClassVar[int]
    cron: CronTrigger
    interval: IntervalTrigger
    once: OnceTrigger
    manual: ManualTrigger
    def __init__(self, cron: _Optional[_Union[CronTrigger, _Mapping]] = ..., interval: _Optional[_Union[IntervalTrigger, _Mapping]] = ..., once: _Optional[_Union[OnceTrigger, _Mapping]] = ..., manual: _Optional[_Union[ManualTrigger, _Mapping]] = ...) -> None: ...

class TaskSpec(_message.Message):
    __slots__ = ("name", "trigger", "command", "handler", "shards", "misfire", "misfire_all_cap", "misfire_all_window_ms", "overlap", "max_retries", "timeout_ms", "priority", "owner", "namespace", "params_json", "description", "locks", "exclude", "resource_cpu", "resource_memory_mb", "runner", "selector", "jitter_ms", "on_event", "emits", "retry_delays_ms", "retry_backoff", "retry_same_executor", "keep_runs", "keep_for_ms", "pool", "sla_start_within_ms", "sla_finish_within_ms", "freshness_ms")
    class SelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    HANDLER_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_ALL_CAP_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_ALL_WINDOW_MS_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_CPU_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    RUNNER_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    JITTER_MS_FIELD_NUMBER: _ClassVar[int]
    ON_EVENT_FIELD_NUMBER: _ClassVar[int]
    EMITS_FIELD_NUMBER: _ClassVar[int]
    RETRY_DELAYS_MS_FIELD_NUMBER: _ClassVar[int]
    RETRY_BACKOFF_FIELD_NUMBER: _ClassVar[int]
    RETRY_SAME_EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    KEEP_RUNS_FIELD_NUMBER: _ClassVar[int]
    KEEP_FOR_MS_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    SLA_START_WITHIN_MS_FIELD_NUMBER: _ClassVar[int]
    SLA_FINISH_WITHIN_MS_FIELD_NUMBER: _ClassVar[int]
    FRESHNESS_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    trigger: Trigger
    command: str
    handler: str
    shards: int
    misfire: MisfirePolicy
    misfire_all_cap: int
    misfire_all_window_ms: int
    overlap: OverlapPolicy
    max_retries: int
    timeout_ms: int
    priority: int
    owner: str
    namespace: str
    params_json: str
    description: str
    locks: _containers.RepeatedCompositeFieldContainer[LockRef]
    exclude: _containers.RepeatedScalarFieldContainer[str]
    resource_cpu: float
    resource_memory_mb: int
    runner: str
    selector: _containers.ScalarMap[str, str]
    jitter_ms: int
    on_event: str
    emits: _containers.RepeatedScalarFieldContainer[str]
    retry_delays_ms: _containers.RepeatedScalarFieldContainer[int]
    retry_backoff: RetryBackoff
    retry_same_executor: bool
    keep_runs: int
    keep_for_ms: int
    pool: str
    sla_start_within_ms: int
    sla_finish_within_ms: int
    freshness_ms: int
    def __init__(self, name: _Optional[str] = ..., trigger: _Optional[_Union[Trigger, _Mapping]] = ..., command: _Optional[str] = ..., handler: _Optional[str] = ..., shards: _Optional[int] = ..., misfire: _Optional[_Union[MisfirePolicy, str]] = ..., misfire_all_cap: _Optional[int] = ..., misfire_all_window_ms: _Optional[int] = ..., overlap: _Optional[_Union[OverlapPolicy, str]] = ..., max_retries: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., priority: _Optional[int] = ..., owner: _Optional[str] = ..., namespace: _Optional[str] = ..., params_json: _Optional[str] = ..., description: _Optional[str] = ..., locks: _Optional[_Iterable[_Union[LockRef, _Mapping]]] = ..., exclude: _Optional[_Iterable[str]] = ..., resource_cpu: _Optional[float] = ..., resource_memory_mb: _Optional[int] = ..., runner: _Optional[str] = ..., selector: _Optional[_Mapping[str, str]] = ..., jitter_ms: _Optional[int] = ..., on_event: _Optional[str] = ..., emits: _Optional[_Iterable[str]] = ..., retry_delays_ms: _Optional[_Iterable[int]] = ..., retry_backoff: _Optional[_Union[RetryBackoff, _Mapping]] = ..., retry_same_executor: _Optional[bool] = ..., keep_runs: _Optional[int] = ..., keep_for_ms: _Optional[int] = ..., pool: _Optional[str] = ..., sla_start_within_ms: _Optional[int] = ..., sla_finish_within_ms: _Optional[int] = ..., freshness_ms: _Optional[int] = ...) -> None: ...

class RetryBackoff(_message.Message):
    __slots__ = ("base_ms", "cap_ms", "jitter_pct")
    BASE_MS_FIELD_NUMBER: _ClassVar[int]
    CAP_MS_FIELD_NUMBER: _ClassVar[int]
    JITTER_PCT_FIELD_NUMBER: _ClassVar[int]
    base_ms: int
    cap_ms: int
    jitter_pct: int
    def __init__(self, base_ms: _Optional[int] = ..., cap_ms: _Optional[int] = ..., jitter_pct: _Optional[int] = ...) -> None: ...

class TaskRecord(_message.Message):
    __slots__ = ("spec", "version", "enabled", "created_ms", "updated_ms", "watermark_ms", "next_fire_ms", "active_runs", "fires_total", "runs_total", "kept_fires", "kept_runs", "unplaceable", "held_run", "last_success_ms", "last_success_run", "number")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_MS_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_MS_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_MS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_RUNS_FIELD_NUMBER: _ClassVar[int]
    FIRES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    RUNS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIRES_FIELD_NUMBER: _ClassVar[int]
    KEPT_RUNS_FIELD_NUMBER: _ClassVar[int]
    UNPLACEABLE_FIELD_NUMBER: _ClassVar[int]
    HELD_RUN_FIELD_NUMBER: _ClassVar[int]
    LAST_SUCCESS_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_SUCCESS_RUN_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    spec: TaskSpec
    version: int
    enabled: bool
    created_ms: int
    updated_ms: int
    watermark_ms: int
    next_fire_ms: int
    active_runs: int
    fires_total: int
    runs_total: int
    kept_fires: int
    kept_runs: int
    unplaceable: str
    held_run: str
    last_success_ms: int
    last_success_run: str
    number: int
    def __init__(self, spec: _Optional[_Union[TaskSpec, _Mapping]] = ..., version: _Optional[int] = ..., enabled: _Optional[bool] = ..., created_ms: _Optional[int] = ..., updated_ms: _Optional[int] = ..., watermark_ms: _Optional[int] = ..., next_fire_ms: _Optional[int] = ..., active_runs: _Optional[int] = ..., fires_total: _Optional[int] = ..., runs_total: _Optional[int] = ..., kept_fires: _Optional[int] = ..., kept_runs: _Optional[int] = ..., unplaceable: _Optional[str] = ..., held_run: _Optional[str] = ..., last_success_ms: _Optional[int] = ..., last_success_run: _Optional[str] = ..., number: _Optional[int] = ...) -> None: ...

class FireRecord(_message.Message):
    __slots__ = ("task", "nominal_ms", "outcome", "reason", "decided_ms", "epoch", "run_id", "task_version", "through_ms", "count", "calendar")
    TASK_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_MS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DECIDED_MS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_VERSION_FIELD_NUMBER: _ClassVar[int]
    THROUGH_MS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    task: str
    nominal_ms: int
    outcome: FireOutcome
    reason: str
    decided_ms: int
    epoch: int
    run_id: str
    task_version: int
    through_ms: int
    count: int
    calendar: str
    def __init__(self, task: _Optional[str] = ..., nominal_ms: _Optional[int] = ..., outcome: _Optional[_Union[FireOutcome, str]] = ..., reason: _Optional[str] = ..., decided_ms: _Optional[int] = ..., epoch: _Optional[int] = ..., run_id: _Optional[str] = ..., task_version: _Optional[int] = ..., through_ms: _Optional[int] = ..., count: _Optional[int] = ..., calendar: _Optional[str] = ...) -> None: ...

class ShardAttempt(_message.Message):
    __slots__ = ("shard", "attempt", "state", "error", "finished_ms", "executor", "not_before_ms", "assigned_ms", "exit_code", "stdout_tail", "stderr_tail", "lost", "retry_base", "timed_out", "holds", "waiting", "waiting_since_ms", "unstarted", "started_ms", "duration_ms")
    SHARD_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    FINISHED_MS_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_MS_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_MS_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    STDERR_TAIL_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    RETRY_BASE_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    HOLDS_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    WAITING_SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    UNSTARTED_FIELD_NUMBER: _ClassVar[int]
    STARTED_MS_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    shard: int
    attempt: int
    state: RunState
    error: str
    finished_ms: int
    executor: str
    not_before_ms: int
    assigned_ms: int
    exit_code: int
    stdout_tail: str
    stderr_tail: str
    lost: int
    retry_base: int
    timed_out: bool
    holds: _containers.RepeatedScalarFieldContainer[str]
    waiting: str
    waiting_since_ms: int
    unstarted: int
    started_ms: int
    duration_ms: int
    def __init__(self, shard: _Optional[int] = ..., attempt: _Optional[int] = ..., state: _Optional[_Union[RunState, str]] = ..., error: _Optional[str] = ..., finished_ms: _Optional[int] = ..., executor: _Optional[str] = ..., not_before_ms: _Optional[int] = ..., assigned_ms: _Optional[int] = ..., exit_code: _Optional[int] = ..., stdout_tail: _Optional[str] = ..., stderr_tail: _Optional[str] = ..., lost: _Optional[int] = ..., retry_base: _Optional[int] = ..., timed_out: _Optional[bool] = ..., holds: _Optional[_Iterable[str]] = ..., waiting: _Optional[str] = ..., waiting_since_ms: _Optional[int] = ..., unstarted: _Optional[int] = ..., started_ms: _Optional[int] = ..., duration_ms: _Optional[int] = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ("run_id", "task", "nominal_ms", "task_version", "state", "created_ms", "finished_ms", "epoch", "manual", "shards", "params_json", "command", "env", "workflow_run", "backfill", "timeline", "timeline_dropped", "held", "backfill_id", "timeline_derived")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_MS_FIELD_NUMBER: _ClassVar[int]
    TASK_VERSION_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_MS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    MANUAL_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_RUN_FIELD_NUMBER: _ClassVar[int]
    BACKFILL_FIELD_NUMBER: _ClassVar[int]
    TIMELINE_FIELD_NUMBER: _ClassVar[int]
    TIMELINE_DROPPED_FIELD_NUMBER: _ClassVar[int]
    HELD_FIELD_NUMBER: _ClassVar[int]
    BACKFILL_ID_FIELD_NUMBER: _ClassVar[int]
    TIMELINE_DERIVED_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    task: str
    nominal_ms: int
    task_version: int
    state: RunState
    created_ms: int
    finished_ms: int
    epoch: int
    manual: bool
    shards: _containers.RepeatedCompositeFieldContainer[ShardAttempt]
    params_json: str
    command: str
    env: _containers.ScalarMap[str, str]
    workflow_run: str
    backfill: bool
    timeline: _containers.RepeatedCompositeFieldContainer[TimelineEntry]
    timeline_dropped: int
    held: bool
    backfill_id: str
    timeline_derived: bool
    def __init__(self, run_id: _Optional[str] = ..., task: _Optional[str] = ..., nominal_ms: _Optional[int] = ..., task_version: _Optional[int] = ..., state: _Optional[_Union[RunState, str]] = ..., created_ms: _Optional[int] = ..., finished_ms: _Optional[int] = ..., epoch: _Optional[int] = ..., manual: _Optional[bool] = ..., shards: _Optional[_Iterable[_Union[ShardAttempt, _Mapping]]] = ..., params_json: _Optional[str] = ..., command: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., workflow_run: _Optional[str] = ..., backfill: _Optional[bool] = ..., timeline: _Optional[_Iterable[_Union[TimelineEntry, _Mapping]]] = ..., timeline_dropped: _Optional[int] = ..., held: _Optional[bool] = ..., backfill_id: _Optional[str] = ..., timeline_derived: _Optional[bool] = ...) -> None: ...

class Dependency(_message.Message):
    __slots__ = ("task", "condition", "workflow", "logical_offset_ms", "timeout_ms", "on_timeout", "warn_after_ms")
    TASK_FIELD_NUMBER: _ClassVar[int]
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_OFFSET_MS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    ON_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    WARN_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    task: str
    condition: EdgeCondition
    workflow: str
    logical_offset_ms: int
    timeout_ms: int
    on_timeout: UpstreamTimeout
    warn_after_ms: int
    def __init__(self, task: _Optional[str] = ..., condition: _Optional[_Union[EdgeCondition, str]] = ..., workflow: _Optional[str] = ..., logical_offset_ms: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., on_timeout: _Optional[_Union[UpstreamTimeout, str]] = ..., warn_after_ms: _Optional[int] = ...) -> None: ...

class WorkflowTaskSpec(_message.Message):
    __slots__ = ("name", "command", "handler", "shards", "max_retries", "timeout_ms", "params_json", "env", "depends_on", "trigger_rule", "priority", "description", "locks", "resource_cpu", "resource_memory_mb", "runner", "selector", "not_before", "emits", "retry_delays_ms", "retry_backoff", "retry_same_executor", "pool")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    class SelectorEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    HANDLER_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    MAX_RETRIES_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    DEPENDS_ON_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_RULE_FIELD_NUMBER: _ClassVar[int]
    PRIORITY_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_CPU_FIELD_NUMBER: _ClassVar[int]
    RESOURCE_MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    RUNNER_FIELD_NUMBER: _ClassVar[int]
    SELECTOR_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_FIELD_NUMBER: _ClassVar[int]
    EMITS_FIELD_NUMBER: _ClassVar[int]
    RETRY_DELAYS_MS_FIELD_NUMBER: _ClassVar[int]
    RETRY_BACKOFF_FIELD_NUMBER: _ClassVar[int]
    RETRY_SAME_EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    name: str
    command: str
    handler: str
    shards: int
    max_retries: int
    timeout_ms: int
    params_json: str
    env: _containers.ScalarMap[str, str]
    depends_on: _containers.RepeatedCompositeFieldContainer[Dependency]
    trigger_rule: TriggerRule
    priority: int
    description: str
    locks: _containers.RepeatedCompositeFieldContainer[LockRef]
    resource_cpu: float
    resource_memory_mb: int
    runner: str
    selector: _containers.ScalarMap[str, str]
    not_before: str
    emits: _containers.RepeatedScalarFieldContainer[str]
    retry_delays_ms: _containers.RepeatedScalarFieldContainer[int]
    retry_backoff: RetryBackoff
    retry_same_executor: bool
    pool: str
    def __init__(self, name: _Optional[str] = ..., command: _Optional[str] = ..., handler: _Optional[str] = ..., shards: _Optional[int] = ..., max_retries: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., params_json: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., depends_on: _Optional[_Iterable[_Union[Dependency, _Mapping]]] = ..., trigger_rule: _Optional[_Union[TriggerRule, str]] = ..., priority: _Optional[int] = ..., description: _Optional[str] = ..., locks: _Optional[_Iterable[_Union[LockRef, _Mapping]]] = ..., resource_cpu: _Optional[float] = ..., resource_memory_mb: _Optional[int] = ..., runner: _Optional[str] = ..., selector: _Optional[_Mapping[str, str]] = ..., not_before: _Optional[str] = ..., emits: _Optional[_Iterable[str]] = ..., retry_delays_ms: _Optional[_Iterable[int]] = ..., retry_backoff: _Optional[_Union[RetryBackoff, _Mapping]] = ..., retry_same_executor: _Optional[bool] = ..., pool: _Optional[str] = ...) -> None: ...

class WorkflowSpec(_message.Message):
    __slots__ = ("name", "schedule", "tasks", "max_parallel_per_run", "max_parallel", "params_json", "owner", "description", "misfire", "overlap", "backfill_share_pct", "namespace", "exclude", "jitter_ms", "warn_after_ms", "on_event", "emits", "keep_runs", "keep_for_ms", "sla_start_within_ms", "sla_finish_within_ms", "freshness_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SCHEDULE_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    MAX_PARALLEL_PER_RUN_FIELD_NUMBER: _ClassVar[int]
    MAX_PARALLEL_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    MISFIRE_FIELD_NUMBER: _ClassVar[int]
    OVERLAP_FIELD_NUMBER: _ClassVar[int]
    BACKFILL_SHARE_PCT_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    EXCLUDE_FIELD_NUMBER: _ClassVar[int]
    JITTER_MS_FIELD_NUMBER: _ClassVar[int]
    WARN_AFTER_MS_FIELD_NUMBER: _ClassVar[int]
    ON_EVENT_FIELD_NUMBER: _ClassVar[int]
    EMITS_FIELD_NUMBER: _ClassVar[int]
    KEEP_RUNS_FIELD_NUMBER: _ClassVar[int]
    KEEP_FOR_MS_FIELD_NUMBER: _ClassVar[int]
    SLA_START_WITHIN_MS_FIELD_NUMBER: _ClassVar[int]
    SLA_FINISH_WITHIN_MS_FIELD_NUMBER: _ClassVar[int]
    FRESHNESS_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    schedule: CronTrigger
    tasks: _containers.RepeatedCompositeFieldContainer[WorkflowTaskSpec]
    max_parallel_per_run: int
    max_parallel: int
    params_json: str
    owner: str
    description: str
    misfire: MisfirePolicy
    overlap: OverlapPolicy
    backfill_share_pct: int
    namespace: str
    exclude: _containers.RepeatedScalarFieldContainer[str]
    jitter_ms: int
    warn_after_ms: int
    on_event: str
    emits: _containers.RepeatedScalarFieldContainer[str]
    keep_runs: int
    keep_for_ms: int
    sla_start_within_ms: int
    sla_finish_within_ms: int
    freshness_ms: int
    def __init__(self, name: _Optional[str] = ..., schedule: _Optional[_Union[CronTrigger, _Mapping]] = ..., tasks: _Optional[_Iterable[_Union[WorkflowTaskSpec, _Mapping]]] = ..., max_parallel_per_run: _Optional[int] = ..., max_parallel: _Optional[int] = ..., params_json: _Optional[str] = ..., owner: _Optional[str] = ..., description: _Optional[str] = ..., misfire: _Optional[_Union[MisfirePolicy, str]] = ..., overlap: _Optional[_Union[OverlapPolicy, str]] = ..., backfill_share_pct: _Optional[int] = ..., namespace: _Optional[str] = ..., exclude: _Optional[_Iterable[str]] = ..., jitter_ms: _Optional[int] = ..., warn_after_ms: _Optional[int] = ..., on_event: _Optional[str] = ..., emits: _Optional[_Iterable[str]] = ..., keep_runs: _Optional[int] = ..., keep_for_ms: _Optional[int] = ..., sla_start_within_ms: _Optional[int] = ..., sla_finish_within_ms: _Optional[int] = ..., freshness_ms: _Optional[int] = ...) -> None: ...

class WorkflowRecord(_message.Message):
    __slots__ = ("spec", "version", "created_ms", "updated_ms", "runs_total", "active_runs", "running_tasks", "next_fire_ms", "paused", "last_success_ms", "last_success_run", "gates_free_slots")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_MS_FIELD_NUMBER: _ClassVar[int]
    RUNS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_RUNS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_TASKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_MS_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    LAST_SUCCESS_MS_FIELD_NUMBER: _ClassVar[int]
    LAST_SUCCESS_RUN_FIELD_NUMBER: _ClassVar[int]
    GATES_FREE_SLOTS_FIELD_NUMBER: _ClassVar[int]
    spec: WorkflowSpec
    version: int
    created_ms: int
    updated_ms: int
    runs_total: int
    active_runs: int
    running_tasks: int
    next_fire_ms: int
    paused: bool
    last_success_ms: int
    last_success_run: str
    gates_free_slots: bool
    def __init__(self, spec: _Optional[_Union[WorkflowSpec, _Mapping]] = ..., version: _Optional[int] = ..., created_ms: _Optional[int] = ..., updated_ms: _Optional[int] = ..., runs_total: _Optional[int] = ..., active_runs: _Optional[int] = ..., running_tasks: _Optional[int] = ..., next_fire_ms: _Optional[int] = ..., paused: _Optional[bool] = ..., last_success_ms: _Optional[int] = ..., last_success_run: _Optional[str] = ..., gates_free_slots: _Optional[bool] = ...) -> None: ...

class TimelineEntry(_message.Message):
    __slots__ = ("state", "at_ms", "reason", "event", "shard", "attempt", "executor", "exit_code", "duration_ms", "retry_at_ms")
    STATE_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    RETRY_AT_MS_FIELD_NUMBER: _ClassVar[int]
    state: WorkflowTaskState
    at_ms: int
    reason: str
    event: str
    shard: int
    attempt: int
    executor: str
    exit_code: int
    duration_ms: int
    retry_at_ms: int
    def __init__(self, state: _Optional[_Union[WorkflowTaskState, str]] = ..., at_ms: _Optional[int] = ..., reason: _Optional[str] = ..., event: _Optional[str] = ..., shard: _Optional[int] = ..., attempt: _Optional[int] = ..., executor: _Optional[str] = ..., exit_code: _Optional[int] = ..., duration_ms: _Optional[int] = ..., retry_at_ms: _Optional[int] = ...) -> None: ...

class WorkflowTaskRun(_message.Message):
    __slots__ = ("name", "state", "waiting", "reason", "run_id", "tries", "timeline", "not_before_ms", "external")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TRIES_FIELD_NUMBER: _ClassVar[int]
    TIMELINE_FIELD_NUMBER: _ClassVar[int]
    NOT_BEFORE_MS_FIELD_NUMBER: _ClassVar[int]
    EXTERNAL_FIELD_NUMBER: _ClassVar[int]
    name: str
    state: WorkflowTaskState
    waiting: int
    reason: str
    run_id: str
    tries: int
    timeline: _containers.RepeatedCompositeFieldContainer[TimelineEntry]
    not_before_ms: int
    external: _containers.RepeatedCompositeFieldContainer[ExternalWait]
    def __init__(self, name: _Optional[str] = ..., state: _Optional[_Union[WorkflowTaskState, str]] = ..., waiting: _Optional[int] = ..., reason: _Optional[str] = ..., run_id: _Optional[str] = ..., tries: _Optional[int] = ..., timeline: _Optional[_Iterable[_Union[TimelineEntry, _Mapping]]] = ..., not_before_ms: _Optional[int] = ..., external: _Optional[_Iterable[_Union[ExternalWait, _Mapping]]] = ...) -> None: ...

class ExternalWait(_message.Message):
    __slots__ = ("edge", "state", "upstream_run", "logical_ms", "since_ms")
    EDGE_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_RUN_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_MS_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    edge: int
    state: ExternalWaitState
    upstream_run: str
    logical_ms: int
    since_ms: int
    def __init__(self, edge: _Optional[int] = ..., state: _Optional[_Union[ExternalWaitState, str]] = ..., upstream_run: _Optional[str] = ..., logical_ms: _Optional[int] = ..., since_ms: _Optional[int] = ...) -> None: ...

class WorkflowRun(_message.Message):
    __slots__ = ("run_id", "workflow", "version", "logical_ms", "state", "created_ms", "finished_ms", "backfill_id", "manual", "tasks", "params_json", "epoch", "event_name", "event_key", "event_payload_json")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_MS_FIELD_NUMBER: _ClassVar[int]
    BACKFILL_ID_FIELD_NUMBER: _ClassVar[int]
    MANUAL_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    EVENT_NAME_FIELD_NUMBER: _ClassVar[int]
    EVENT_KEY_FIELD_NUMBER: _ClassVar[int]
    EVENT_PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    workflow: str
    version: int
    logical_ms: int
    state: WorkflowRunState
    created_ms: int
    finished_ms: int
    backfill_id: str
    manual: bool
    tasks: _containers.RepeatedCompositeFieldContainer[WorkflowTaskRun]
    params_json: str
    epoch: int
    event_name: str
    event_key: str
    event_payload_json: str
    def __init__(self, run_id: _Optional[str] = ..., workflow: _Optional[str] = ..., version: _Optional[int] = ..., logical_ms: _Optional[int] = ..., state: _Optional[_Union[WorkflowRunState, str]] = ..., created_ms: _Optional[int] = ..., finished_ms: _Optional[int] = ..., backfill_id: _Optional[str] = ..., manual: _Optional[bool] = ..., tasks: _Optional[_Iterable[_Union[WorkflowTaskRun, _Mapping]]] = ..., params_json: _Optional[str] = ..., epoch: _Optional[int] = ..., event_name: _Optional[str] = ..., event_key: _Optional[str] = ..., event_payload_json: _Optional[str] = ...) -> None: ...

class BackfillRecord(_message.Message):
    __slots__ = ("backfill_id", "workflow", "from_ms", "to_ms", "runs_total", "runs_finished", "runs_failed", "created_ms", "finished_ms", "share_pct", "task", "runs_skipped")
    BACKFILL_ID_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    FROM_MS_FIELD_NUMBER: _ClassVar[int]
    TO_MS_FIELD_NUMBER: _ClassVar[int]
    RUNS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    RUNS_FINISHED_FIELD_NUMBER: _ClassVar[int]
    RUNS_FAILED_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    FINISHED_MS_FIELD_NUMBER: _ClassVar[int]
    SHARE_PCT_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    RUNS_SKIPPED_FIELD_NUMBER: _ClassVar[int]
    backfill_id: str
    workflow: str
    from_ms: int
    to_ms: int
    runs_total: int
    runs_finished: int
    runs_failed: int
    created_ms: int
    finished_ms: int
    share_pct: int
    task: str
    runs_skipped: int
    def __init__(self, backfill_id: _Optional[str] = ..., workflow: _Optional[str] = ..., from_ms: _Optional[int] = ..., to_ms: _Optional[int] = ..., runs_total: _Optional[int] = ..., runs_finished: _Optional[int] = ..., runs_failed: _Optional[int] = ..., created_ms: _Optional[int] = ..., finished_ms: _Optional[int] = ..., share_pct: _Optional[int] = ..., task: _Optional[str] = ..., runs_skipped: _Optional[int] = ...) -> None: ...

class AlertRecord(_message.Message):
    __slots__ = ("task", "owner", "run_id", "execution_id", "error", "at_ms", "seq", "id", "kind", "workflow", "namespace", "output_tail", "acked_ms", "dedupe", "workflow_run", "resolved", "resolves_seq", "executor", "node", "severity")
    TASK_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    OUTPUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    ACKED_MS_FIELD_NUMBER: _ClassVar[int]
    DEDUPE_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_RUN_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_FIELD_NUMBER: _ClassVar[int]
    RESOLVES_SEQ_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    NODE_FIELD_NUMBER: _ClassVar[int]
    SEVERITY_FIELD_NUMBER: _ClassVar[int]
    task: str
    owner: str
    run_id: str
    execution_id: str
    error: str
    at_ms: int
    seq: int
    id: str
    kind: str
    workflow: str
    namespace: str
    output_tail: str
    acked_ms: int
    dedupe: str
    workflow_run: str
    resolved: bool
    resolves_seq: int
    executor: str
    node: str
    severity: str
    def __init__(self, task: _Optional[str] = ..., owner: _Optional[str] = ..., run_id: _Optional[str] = ..., execution_id: _Optional[str] = ..., error: _Optional[str] = ..., at_ms: _Optional[int] = ..., seq: _Optional[int] = ..., id: _Optional[str] = ..., kind: _Optional[str] = ..., workflow: _Optional[str] = ..., namespace: _Optional[str] = ..., output_tail: _Optional[str] = ..., acked_ms: _Optional[int] = ..., dedupe: _Optional[str] = ..., workflow_run: _Optional[str] = ..., resolved: _Optional[bool] = ..., resolves_seq: _Optional[int] = ..., executor: _Optional[str] = ..., node: _Optional[str] = ..., severity: _Optional[str] = ...) -> None: ...

class WorkflowRunOp(_message.Message):
    __slots__ = ("op", "run_id", "task", "reason", "redecide_external", "emit")
    class Op(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
        __slots__ = ()
        OP_UNSPECIFIED: _ClassVar[WorkflowRunOp.Op]
        KILL: _ClassVar[WorkflowRunOp.Op]
        RERUN: _ClassVar[WorkflowRunOp.Op]
        MARK_SUCCESS: _ClassVar[WorkflowRunOp.Op]
    OP_UNSPECIFIED: WorkflowRunOp.Op
    KILL: WorkflowRunOp.Op
    RERUN: WorkflowRunOp.Op
    MARK_SUCCESS: WorkflowRunOp.Op
    OP_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    REDECIDE_EXTERNAL_FIELD_NUMBER: _ClassVar[int]
    EMIT_FIELD_NUMBER: _ClassVar[int]
    op: WorkflowRunOp.Op
    run_id: str
    task: str
    reason: str
    redecide_external: bool
    emit: bool
    def __init__(self, op: _Optional[_Union[WorkflowRunOp.Op, str]] = ..., run_id: _Optional[str] = ..., task: _Optional[str] = ..., reason: _Optional[str] = ..., redecide_external: _Optional[bool] = ..., emit: _Optional[bool] = ...) -> None: ...

class ItemResult(_message.Message):
    __slots__ = ("name", "ok", "code", "message", "version", "next_fire_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    OK_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    ok: bool
    code: str
    message: str
    version: int
    next_fire_ms: int
    def __init__(self, name: _Optional[str] = ..., ok: _Optional[bool] = ..., code: _Optional[str] = ..., message: _Optional[str] = ..., version: _Optional[int] = ..., next_fire_ms: _Optional[int] = ...) -> None: ...

class AuditRecord(_message.Message):
    __slots__ = ("at_ms", "principal", "rpc", "target", "seq")
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    RPC_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    at_ms: int
    principal: str
    rpc: str
    target: str
    seq: int
    def __init__(self, at_ms: _Optional[int] = ..., principal: _Optional[str] = ..., rpc: _Optional[str] = ..., target: _Optional[str] = ..., seq: _Optional[int] = ...) -> None: ...

class TokenInfo(_message.Message):
    __slots__ = ("id", "role", "namespaces", "description", "created_ms", "expires_ms", "revoked", "revoked_ms", "created_by", "last_used_ms")
    ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    EXPIRES_MS_FIELD_NUMBER: _ClassVar[int]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    REVOKED_MS_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    LAST_USED_MS_FIELD_NUMBER: _ClassVar[int]
    id: str
    role: str
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    description: str
    created_ms: int
    expires_ms: int
    revoked: bool
    revoked_ms: int
    created_by: str
    last_used_ms: int
    def __init__(self, id: _Optional[str] = ..., role: _Optional[str] = ..., namespaces: _Optional[_Iterable[str]] = ..., description: _Optional[str] = ..., created_ms: _Optional[int] = ..., expires_ms: _Optional[int] = ..., revoked: _Optional[bool] = ..., revoked_ms: _Optional[int] = ..., created_by: _Optional[str] = ..., last_used_ms: _Optional[int] = ...) -> None: ...

class LockRef(_message.Message):
    __slots__ = ("name", "shared")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    name: str
    shared: bool
    def __init__(self, name: _Optional[str] = ..., shared: _Optional[bool] = ...) -> None: ...

class QuotaRecord(_message.Message):
    __slots__ = ("kind", "name", "rate_milli", "burst", "max_running", "tokens_micro", "refilled_ms", "running", "updated_ms", "waited")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    RATE_MILLI_FIELD_NUMBER: _ClassVar[int]
    BURST_FIELD_NUMBER: _ClassVar[int]
    MAX_RUNNING_FIELD_NUMBER: _ClassVar[int]
    TOKENS_MICRO_FIELD_NUMBER: _ClassVar[int]
    REFILLED_MS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    UPDATED_MS_FIELD_NUMBER: _ClassVar[int]
    WAITED_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    rate_milli: int
    burst: int
    max_running: int
    tokens_micro: int
    refilled_ms: int
    running: int
    updated_ms: int
    waited: int
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ..., rate_milli: _Optional[int] = ..., burst: _Optional[int] = ..., max_running: _Optional[int] = ..., tokens_micro: _Optional[int] = ..., refilled_ms: _Optional[int] = ..., running: _Optional[int] = ..., updated_ms: _Optional[int] = ..., waited: _Optional[int] = ...) -> None: ...

class CalendarSpec(_message.Message):
    __slots__ = ("name", "dates", "weekdays", "zone", "description")
    NAME_FIELD_NUMBER: _ClassVar[int]
    DATES_FIELD_NUMBER: _ClassVar[int]
    WEEKDAYS_FIELD_NUMBER: _ClassVar[int]
    ZONE_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    dates: _containers.RepeatedScalarFieldContainer[int]
    weekdays: int
    zone: str
    description: str
    def __init__(self, name: _Optional[str] = ..., dates: _Optional[_Iterable[int]] = ..., weekdays: _Optional[int] = ..., zone: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class CalendarRecord(_message.Message):
    __slots__ = ("spec", "transition_ms", "offset_s", "version", "created_ms", "updated_ms")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TRANSITION_MS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_S_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_MS_FIELD_NUMBER: _ClassVar[int]
    spec: CalendarSpec
    transition_ms: _containers.RepeatedScalarFieldContainer[int]
    offset_s: _containers.RepeatedScalarFieldContainer[int]
    version: int
    created_ms: int
    updated_ms: int
    def __init__(self, spec: _Optional[_Union[CalendarSpec, _Mapping]] = ..., transition_ms: _Optional[_Iterable[int]] = ..., offset_s: _Optional[_Iterable[int]] = ..., version: _Optional[int] = ..., created_ms: _Optional[int] = ..., updated_ms: _Optional[int] = ...) -> None: ...

class Member(_message.Message):
    __slots__ = ("id", "raft", "grpc", "http")
    ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_FIELD_NUMBER: _ClassVar[int]
    GRPC_FIELD_NUMBER: _ClassVar[int]
    HTTP_FIELD_NUMBER: _ClassVar[int]
    id: str
    raft: str
    grpc: str
    http: str
    def __init__(self, id: _Optional[str] = ..., raft: _Optional[str] = ..., grpc: _Optional[str] = ..., http: _Optional[str] = ...) -> None: ...

class MemberChange(_message.Message):
    __slots__ = ("kind", "member", "started_ms")
    KIND_FIELD_NUMBER: _ClassVar[int]
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    STARTED_MS_FIELD_NUMBER: _ClassVar[int]
    kind: str
    member: Member
    started_ms: int
    def __init__(self, kind: _Optional[str] = ..., member: _Optional[_Union[Member, _Mapping]] = ..., started_ms: _Optional[int] = ...) -> None: ...

class MembershipRecord(_message.Message):
    __slots__ = ("members", "pending", "changes")
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    PENDING_FIELD_NUMBER: _ClassVar[int]
    CHANGES_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[Member]
    pending: MemberChange
    changes: int
    def __init__(self, members: _Optional[_Iterable[_Union[Member, _Mapping]]] = ..., pending: _Optional[_Union[MemberChange, _Mapping]] = ..., changes: _Optional[int] = ...) -> None: ...

class EventRecord(_message.Message):
    __slots__ = ("name", "key", "payload_json", "namespace", "accepted_ms", "emitted_by", "seq", "runs")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_MS_FIELD_NUMBER: _ClassVar[int]
    EMITTED_BY_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    RUNS_FIELD_NUMBER: _ClassVar[int]
    name: str
    key: str
    payload_json: str
    namespace: str
    accepted_ms: int
    emitted_by: str
    seq: int
    runs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., key: _Optional[str] = ..., payload_json: _Optional[str] = ..., namespace: _Optional[str] = ..., accepted_ms: _Optional[int] = ..., emitted_by: _Optional[str] = ..., seq: _Optional[int] = ..., runs: _Optional[_Iterable[str]] = ...) -> None: ...

class PoolRecord(_message.Message):
    __slots__ = ("name", "slots", "updated_ms", "description")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_MS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    name: str
    slots: int
    updated_ms: int
    description: str
    def __init__(self, name: _Optional[str] = ..., slots: _Optional[int] = ..., updated_ms: _Optional[int] = ..., description: _Optional[str] = ...) -> None: ...
