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

class FireOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    OUTCOME_UNSPECIFIED: _ClassVar[FireOutcome]
    FIRED: _ClassVar[FireOutcome]
    COALESCED: _ClassVar[FireOutcome]
    SKIPPED_OVERLAP: _ClassVar[FireOutcome]
    SKIPPED_MISFIRE: _ClassVar[FireOutcome]
    SKIPPED_DISABLED: _ClassVar[FireOutcome]

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
MISFIRE_UNSPECIFIED: MisfirePolicy
MISFIRE_LATEST: MisfirePolicy
MISFIRE_ALL: MisfirePolicy
MISFIRE_SKIP: MisfirePolicy
OVERLAP_UNSPECIFIED: OverlapPolicy
OVERLAP_SKIP: OverlapPolicy
OVERLAP_ALLOW: OverlapPolicy
OUTCOME_UNSPECIFIED: FireOutcome
FIRED: FireOutcome
COALESCED: FireOutcome
SKIPPED_OVERLAP: FireOutcome
SKIPPED_MISFIRE: FireOutcome
SKIPPED_DISABLED: FireOutcome
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
    __slots__ = ("name", "trigger", "command", "handler", "shards", "misfire", "misfire_all_cap", "misfire_all_window_ms", "overlap", "max_retries", "timeout_ms", "priority", "owner", "namespace", "params_json", "description")
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
    def __init__(self, name: _Optional[str] = ..., trigger: _Optional[_Union[Trigger, _Mapping]] = ..., command: _Optional[str] = ..., handler: _Optional[str] = ..., shards: _Optional[int] = ..., misfire: _Optional[_Union[MisfirePolicy, str]] = ..., misfire_all_cap: _Optional[int] = ..., misfire_all_window_ms: _Optional[int] = ..., overlap: _Optional[_Union[OverlapPolicy, str]] = ..., max_retries: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., priority: _Optional[int] = ..., owner: _Optional[str] = ..., namespace: _Optional[str] = ..., params_json: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class TaskRecord(_message.Message):
    __slots__ = ("spec", "version", "enabled", "created_ms", "updated_ms", "watermark_ms", "next_fire_ms", "active_runs", "fires_total", "runs_total", "kept_fires", "kept_runs")
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
    def __init__(self, spec: _Optional[_Union[TaskSpec, _Mapping]] = ..., version: _Optional[int] = ..., enabled: _Optional[bool] = ..., created_ms: _Optional[int] = ..., updated_ms: _Optional[int] = ..., watermark_ms: _Optional[int] = ..., next_fire_ms: _Optional[int] = ..., active_runs: _Optional[int] = ..., fires_total: _Optional[int] = ..., runs_total: _Optional[int] = ..., kept_fires: _Optional[int] = ..., kept_runs: _Optional[int] = ...) -> None: ...

class FireRecord(_message.Message):
    __slots__ = ("task", "nominal_ms", "outcome", "reason", "decided_ms", "epoch", "run_id", "task_version", "through_ms", "count")
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
    def __init__(self, task: _Optional[str] = ..., nominal_ms: _Optional[int] = ..., outcome: _Optional[_Union[FireOutcome, str]] = ..., reason: _Optional[str] = ..., decided_ms: _Optional[int] = ..., epoch: _Optional[int] = ..., run_id: _Optional[str] = ..., task_version: _Optional[int] = ..., through_ms: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class ShardAttempt(_message.Message):
    __slots__ = ("shard", "attempt", "state", "error", "finished_ms", "executor", "not_before_ms", "assigned_ms", "exit_code", "stdout_tail", "stderr_tail", "lost", "retry_base", "timed_out")
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
    def __init__(self, shard: _Optional[int] = ..., attempt: _Optional[int] = ..., state: _Optional[_Union[RunState, str]] = ..., error: _Optional[str] = ..., finished_ms: _Optional[int] = ..., executor: _Optional[str] = ..., not_before_ms: _Optional[int] = ..., assigned_ms: _Optional[int] = ..., exit_code: _Optional[int] = ..., stdout_tail: _Optional[str] = ..., stderr_tail: _Optional[str] = ..., lost: _Optional[int] = ..., retry_base: _Optional[int] = ..., timed_out: _Optional[bool] = ...) -> None: ...

class Run(_message.Message):
    __slots__ = ("run_id", "task", "nominal_ms", "task_version", "state", "created_ms", "finished_ms", "epoch", "manual", "shards", "params_json", "command", "env", "workflow_run", "backfill")
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
    def __init__(self, run_id: _Optional[str] = ..., task: _Optional[str] = ..., nominal_ms: _Optional[int] = ..., task_version: _Optional[int] = ..., state: _Optional[_Union[RunState, str]] = ..., created_ms: _Optional[int] = ..., finished_ms: _Optional[int] = ..., epoch: _Optional[int] = ..., manual: _Optional[bool] = ..., shards: _Optional[_Iterable[_Union[ShardAttempt, _Mapping]]] = ..., params_json: _Optional[str] = ..., command: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., workflow_run: _Optional[str] = ..., backfill: _Optional[bool] = ...) -> None: ...

class Dependency(_message.Message):
    __slots__ = ("task", "condition")
    TASK_FIELD_NUMBER: _ClassVar[int]
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    task: str
    condition: EdgeCondition
    def __init__(self, task: _Optional[str] = ..., condition: _Optional[_Union[EdgeCondition, str]] = ...) -> None: ...

class WorkflowTaskSpec(_message.Message):
    __slots__ = ("name", "command", "handler", "shards", "max_retries", "timeout_ms", "params_json", "env", "depends_on", "trigger_rule", "priority", "description")
    class EnvEntry(_message.Message):
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
    def __init__(self, name: _Optional[str] = ..., command: _Optional[str] = ..., handler: _Optional[str] = ..., shards: _Optional[int] = ..., max_retries: _Optional[int] = ..., timeout_ms: _Optional[int] = ..., params_json: _Optional[str] = ..., env: _Optional[_Mapping[str, str]] = ..., depends_on: _Optional[_Iterable[_Union[Dependency, _Mapping]]] = ..., trigger_rule: _Optional[_Union[TriggerRule, str]] = ..., priority: _Optional[int] = ..., description: _Optional[str] = ...) -> None: ...

class WorkflowSpec(_message.Message):
    __slots__ = ("name", "schedule", "tasks", "max_parallel_per_run", "max_parallel", "params_json", "owner", "description", "misfire", "overlap", "backfill_share_pct")
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
    def __init__(self, name: _Optional[str] = ..., schedule: _Optional[_Union[CronTrigger, _Mapping]] = ..., tasks: _Optional[_Iterable[_Union[WorkflowTaskSpec, _Mapping]]] = ..., max_parallel_per_run: _Optional[int] = ..., max_parallel: _Optional[int] = ..., params_json: _Optional[str] = ..., owner: _Optional[str] = ..., description: _Optional[str] = ..., misfire: _Optional[_Union[MisfirePolicy, str]] = ..., overlap: _Optional[_Union[OverlapPolicy, str]] = ..., backfill_share_pct: _Optional[int] = ...) -> None: ...

class WorkflowRecord(_message.Message):
    __slots__ = ("spec", "version", "created_ms", "updated_ms", "runs_total", "active_runs", "running_tasks", "next_fire_ms")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    UPDATED_MS_FIELD_NUMBER: _ClassVar[int]
    RUNS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_RUNS_FIELD_NUMBER: _ClassVar[int]
    RUNNING_TASKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_MS_FIELD_NUMBER: _ClassVar[int]
    spec: WorkflowSpec
    version: int
    created_ms: int
    updated_ms: int
    runs_total: int
    active_runs: int
    running_tasks: int
    next_fire_ms: int
    def __init__(self, spec: _Optional[_Union[WorkflowSpec, _Mapping]] = ..., version: _Optional[int] = ..., created_ms: _Optional[int] = ..., updated_ms: _Optional[int] = ..., runs_total: _Optional[int] = ..., active_runs: _Optional[int] = ..., running_tasks: _Optional[int] = ..., next_fire_ms: _Optional[int] = ...) -> None: ...

class TimelineEntry(_message.Message):
    __slots__ = ("state", "at_ms", "reason")
    STATE_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    state: WorkflowTaskState
    at_ms: int
    reason: str
    def __init__(self, state: _Optional[_Union[WorkflowTaskState, str]] = ..., at_ms: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class WorkflowTaskRun(_message.Message):
    __slots__ = ("name", "state", "waiting", "reason", "run_id", "tries", "timeline")
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TRIES_FIELD_NUMBER: _ClassVar[int]
    TIMELINE_FIELD_NUMBER: _ClassVar[int]
    name: str
    state: WorkflowTaskState
    waiting: int
    reason: str
    run_id: str
    tries: int
    timeline: _containers.RepeatedCompositeFieldContainer[TimelineEntry]
    def __init__(self, name: _Optional[str] = ..., state: _Optional[_Union[WorkflowTaskState, str]] = ..., waiting: _Optional[int] = ..., reason: _Optional[str] = ..., run_id: _Optional[str] = ..., tries: _Optional[int] = ..., timeline: _Optional[_Iterable[_Union[TimelineEntry, _Mapping]]] = ...) -> None: ...

class WorkflowRun(_message.Message):
    __slots__ = ("run_id", "workflow", "version", "logical_ms", "state", "created_ms", "finished_ms", "backfill_id", "manual", "tasks", "params_json", "epoch")
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
    def __init__(self, run_id: _Optional[str] = ..., workflow: _Optional[str] = ..., version: _Optional[int] = ..., logical_ms: _Optional[int] = ..., state: _Optional[_Union[WorkflowRunState, str]] = ..., created_ms: _Optional[int] = ..., finished_ms: _Optional[int] = ..., backfill_id: _Optional[str] = ..., manual: _Optional[bool] = ..., tasks: _Optional[_Iterable[_Union[WorkflowTaskRun, _Mapping]]] = ..., params_json: _Optional[str] = ..., epoch: _Optional[int] = ...) -> None: ...

class BackfillRecord(_message.Message):
    __slots__ = ("backfill_id", "workflow", "from_ms", "to_ms", "runs_total", "runs_finished", "runs_failed", "created_ms", "finished_ms", "share_pct")
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
    def __init__(self, backfill_id: _Optional[str] = ..., workflow: _Optional[str] = ..., from_ms: _Optional[int] = ..., to_ms: _Optional[int] = ..., runs_total: _Optional[int] = ..., runs_finished: _Optional[int] = ..., runs_failed: _Optional[int] = ..., created_ms: _Optional[int] = ..., finished_ms: _Optional[int] = ..., share_pct: _Optional[int] = ...) -> None: ...

class CreateTask(_message.Message):
    __slots__ = ("spec", "next_fire_ms", "disabled")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_MS_FIELD_NUMBER: _ClassVar[int]
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    spec: TaskSpec
    next_fire_ms: int
    disabled: bool
    def __init__(self, spec: _Optional[_Union[TaskSpec, _Mapping]] = ..., next_fire_ms: _Optional[int] = ..., disabled: _Optional[bool] = ...) -> None: ...

class CreateTasks(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[CreateTask]
    def __init__(self, items: _Optional[_Iterable[_Union[CreateTask, _Mapping]]] = ...) -> None: ...

class UpdateTask(_message.Message):
    __slots__ = ("spec", "next_fire_ms", "expected_version")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_MS_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    spec: TaskSpec
    next_fire_ms: int
    expected_version: int
    def __init__(self, spec: _Optional[_Union[TaskSpec, _Mapping]] = ..., next_fire_ms: _Optional[int] = ..., expected_version: _Optional[int] = ...) -> None: ...

class DeleteTask(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class SetEnabled(_message.Message):
    __slots__ = ("name", "enabled", "next_fire_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    enabled: bool
    next_fire_ms: int
    def __init__(self, name: _Optional[str] = ..., enabled: _Optional[bool] = ..., next_fire_ms: _Optional[int] = ...) -> None: ...

class TriggerNow(_message.Message):
    __slots__ = ("name", "params_json")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    name: str
    params_json: str
    def __init__(self, name: _Optional[str] = ..., params_json: _Optional[str] = ...) -> None: ...

class RetryRun(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class Barrier(_message.Message):
    __slots__ = ("node_id",)
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    def __init__(self, node_id: _Optional[str] = ...) -> None: ...

class Fire(_message.Message):
    __slots__ = ("nominal_ms", "outcome", "reason", "through_ms", "count")
    NOMINAL_MS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    THROUGH_MS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    nominal_ms: int
    outcome: FireOutcome
    reason: str
    through_ms: int
    count: int
    def __init__(self, nominal_ms: _Optional[int] = ..., outcome: _Optional[_Union[FireOutcome, str]] = ..., reason: _Optional[str] = ..., through_ms: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

class TaskFires(_message.Message):
    __slots__ = ("task", "version", "fires", "next_fire_ms", "watermark_ms")
    TASK_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    FIRES_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_MS_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_MS_FIELD_NUMBER: _ClassVar[int]
    task: str
    version: int
    fires: _containers.RepeatedCompositeFieldContainer[Fire]
    next_fire_ms: int
    watermark_ms: int
    def __init__(self, task: _Optional[str] = ..., version: _Optional[int] = ..., fires: _Optional[_Iterable[_Union[Fire, _Mapping]]] = ..., next_fire_ms: _Optional[int] = ..., watermark_ms: _Optional[int] = ...) -> None: ...

class FireBatch(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[TaskFires]
    def __init__(self, tasks: _Optional[_Iterable[_Union[TaskFires, _Mapping]]] = ...) -> None: ...

class AttemptResult(_message.Message):
    __slots__ = ("run_id", "shard", "attempt", "success", "error", "executor", "exit_code", "stdout_tail", "stderr_tail", "lost", "retry_at_ms", "timed_out")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    STDERR_TAIL_FIELD_NUMBER: _ClassVar[int]
    LOST_FIELD_NUMBER: _ClassVar[int]
    RETRY_AT_MS_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    shard: int
    attempt: int
    success: bool
    error: str
    executor: str
    exit_code: int
    stdout_tail: str
    stderr_tail: str
    lost: bool
    retry_at_ms: int
    timed_out: bool
    def __init__(self, run_id: _Optional[str] = ..., shard: _Optional[int] = ..., attempt: _Optional[int] = ..., success: _Optional[bool] = ..., error: _Optional[str] = ..., executor: _Optional[str] = ..., exit_code: _Optional[int] = ..., stdout_tail: _Optional[str] = ..., stderr_tail: _Optional[str] = ..., lost: _Optional[bool] = ..., retry_at_ms: _Optional[int] = ..., timed_out: _Optional[bool] = ...) -> None: ...

class ExecutorJoin(_message.Message):
    __slots__ = ("name", "slots", "labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    name: str
    slots: int
    labels: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., slots: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class ExecutorLeave(_message.Message):
    __slots__ = ("name", "reason", "dead", "retry_at_ms")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DEAD_FIELD_NUMBER: _ClassVar[int]
    RETRY_AT_MS_FIELD_NUMBER: _ClassVar[int]
    name: str
    reason: str
    dead: bool
    retry_at_ms: int
    def __init__(self, name: _Optional[str] = ..., reason: _Optional[str] = ..., dead: _Optional[bool] = ..., retry_at_ms: _Optional[int] = ...) -> None: ...

class Assignment(_message.Message):
    __slots__ = ("run_id", "shard", "attempt", "executor")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    shard: int
    attempt: int
    executor: str
    def __init__(self, run_id: _Optional[str] = ..., shard: _Optional[int] = ..., attempt: _Optional[int] = ..., executor: _Optional[str] = ...) -> None: ...

class AssignAttempts(_message.Message):
    __slots__ = ("assignments",)
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    assignments: _containers.RepeatedCompositeFieldContainer[Assignment]
    def __init__(self, assignments: _Optional[_Iterable[_Union[Assignment, _Mapping]]] = ...) -> None: ...

class ExecutorRecord(_message.Message):
    __slots__ = ("name", "slots", "labels", "alive", "joined_ms", "left_ms", "left_reason")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    ALIVE_FIELD_NUMBER: _ClassVar[int]
    JOINED_MS_FIELD_NUMBER: _ClassVar[int]
    LEFT_MS_FIELD_NUMBER: _ClassVar[int]
    LEFT_REASON_FIELD_NUMBER: _ClassVar[int]
    name: str
    slots: int
    labels: _containers.ScalarMap[str, str]
    alive: bool
    joined_ms: int
    left_ms: int
    left_reason: str
    def __init__(self, name: _Optional[str] = ..., slots: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., alive: _Optional[bool] = ..., joined_ms: _Optional[int] = ..., left_ms: _Optional[int] = ..., left_reason: _Optional[str] = ...) -> None: ...

class AlertRecord(_message.Message):
    __slots__ = ("task", "owner", "run_id", "execution_id", "error", "at_ms")
    TASK_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    task: str
    owner: str
    run_id: str
    execution_id: str
    error: str
    at_ms: int
    def __init__(self, task: _Optional[str] = ..., owner: _Optional[str] = ..., run_id: _Optional[str] = ..., execution_id: _Optional[str] = ..., error: _Optional[str] = ..., at_ms: _Optional[int] = ...) -> None: ...

class ReportResults(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AttemptResult]
    def __init__(self, results: _Optional[_Iterable[_Union[AttemptResult, _Mapping]]] = ...) -> None: ...

class ApplyWorkflow(_message.Message):
    __slots__ = ("spec", "next_fire_ms")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_MS_FIELD_NUMBER: _ClassVar[int]
    spec: WorkflowSpec
    next_fire_ms: int
    def __init__(self, spec: _Optional[_Union[WorkflowSpec, _Mapping]] = ..., next_fire_ms: _Optional[int] = ...) -> None: ...

class StartWorkflowRun(_message.Message):
    __slots__ = ("workflow", "logical_ms", "params_json")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_MS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    workflow: str
    logical_ms: int
    params_json: str
    def __init__(self, workflow: _Optional[str] = ..., logical_ms: _Optional[int] = ..., params_json: _Optional[str] = ...) -> None: ...

class WorkflowRunOp(_message.Message):
    __slots__ = ("op", "run_id", "task", "reason")
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
    op: WorkflowRunOp.Op
    run_id: str
    task: str
    reason: str
    def __init__(self, op: _Optional[_Union[WorkflowRunOp.Op, str]] = ..., run_id: _Optional[str] = ..., task: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class StartBackfill(_message.Message):
    __slots__ = ("workflow", "logical_ms", "from_ms", "to_ms", "params_json")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_MS_FIELD_NUMBER: _ClassVar[int]
    FROM_MS_FIELD_NUMBER: _ClassVar[int]
    TO_MS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    workflow: str
    logical_ms: _containers.RepeatedScalarFieldContainer[int]
    from_ms: int
    to_ms: int
    params_json: str
    def __init__(self, workflow: _Optional[str] = ..., logical_ms: _Optional[_Iterable[int]] = ..., from_ms: _Optional[int] = ..., to_ms: _Optional[int] = ..., params_json: _Optional[str] = ...) -> None: ...

class Command(_message.Message):
    __slots__ = ("format", "idempotency_key", "epoch", "now_ms", "origin", "create_task", "update_task", "delete_task", "set_enabled", "trigger_now", "barrier", "fire_batch", "report_results", "create_tasks", "executor_join", "executor_leave", "assign_attempts", "retry_run", "apply_workflow", "start_workflow_run", "workflow_run_op", "start_backfill")
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    CREATE_TASK_FIELD_NUMBER: _ClassVar[int]
    UPDATE_TASK_FIELD_NUMBER: _ClassVar[int]
    DELETE_TASK_FIELD_NUMBER: _ClassVar[int]
    SET_ENABLED_FIELD_NUMBER: _ClassVar[int]
    TRIGGER_NOW_FIELD_NUMBER: _ClassVar[int]
    BARRIER_FIELD_NUMBER: _ClassVar[int]
    FIRE_BATCH_FIELD_NUMBER: _ClassVar[int]
    REPORT_RESULTS_FIELD_NUMBER: _ClassVar[int]
    CREATE_TASKS_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_JOIN_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_LEAVE_FIELD_NUMBER: _ClassVar[int]
    ASSIGN_ATTEMPTS_FIELD_NUMBER: _ClassVar[int]
    RETRY_RUN_FIELD_NUMBER: _ClassVar[int]
    APPLY_WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    START_WORKFLOW_RUN_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_RUN_OP_FIELD_NUMBER: _ClassVar[int]
    START_BACKFILL_FIELD_NUMBER: _ClassVar[int]
    format: int
    idempotency_key: str
    epoch: int
    now_ms: int
    origin: str
    create_task: CreateTask
    update_task: UpdateTask
    delete_task: DeleteTask
    set_enabled: SetEnabled
    trigger_now: TriggerNow
    barrier: Barrier
    fire_batch: FireBatch
    report_results: ReportResults
    create_tasks: CreateTasks
    executor_join: ExecutorJoin
    executor_leave: ExecutorLeave
    assign_attempts: AssignAttempts
    retry_run: RetryRun
    apply_workflow: ApplyWorkflow
    start_workflow_run: StartWorkflowRun
    workflow_run_op: WorkflowRunOp
    start_backfill: StartBackfill
    def __init__(self, format: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., epoch: _Optional[int] = ..., now_ms: _Optional[int] = ..., origin: _Optional[str] = ..., create_task: _Optional[_Union[CreateTask, _Mapping]] = ..., update_task: _Optional[_Union[UpdateTask, _Mapping]] = ..., delete_task: _Optional[_Union[DeleteTask, _Mapping]] = ..., set_enabled: _Optional[_Union[SetEnabled, _Mapping]] = ..., trigger_now: _Optional[_Union[TriggerNow, _Mapping]] = ..., barrier: _Optional[_Union[Barrier, _Mapping]] = ..., fire_batch: _Optional[_Union[FireBatch, _Mapping]] = ..., report_results: _Optional[_Union[ReportResults, _Mapping]] = ..., create_tasks: _Optional[_Union[CreateTasks, _Mapping]] = ..., executor_join: _Optional[_Union[ExecutorJoin, _Mapping]] = ..., executor_leave: _Optional[_Union[ExecutorLeave, _Mapping]] = ..., assign_attempts: _Optional[_Union[AssignAttempts, _Mapping]] = ..., retry_run: _Optional[_Union[RetryRun, _Mapping]] = ..., apply_workflow: _Optional[_Union[ApplyWorkflow, _Mapping]] = ..., start_workflow_run: _Optional[_Union[StartWorkflowRun, _Mapping]] = ..., workflow_run_op: _Optional[_Union[WorkflowRunOp, _Mapping]] = ..., start_backfill: _Optional[_Union[StartBackfill, _Mapping]] = ...) -> None: ...

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

class CommandResult(_message.Message):
    __slots__ = ("ok", "code", "message", "task", "run", "fired", "accounted", "refused", "items", "workflow", "workflow_run", "backfill", "changed")
    OK_FIELD_NUMBER: _ClassVar[int]
    CODE_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    FIRED_FIELD_NUMBER: _ClassVar[int]
    ACCOUNTED_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_RUN_FIELD_NUMBER: _ClassVar[int]
    BACKFILL_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    code: str
    message: str
    task: TaskRecord
    run: Run
    fired: int
    accounted: int
    refused: int
    items: _containers.RepeatedCompositeFieldContainer[ItemResult]
    workflow: WorkflowRecord
    workflow_run: WorkflowRun
    backfill: BackfillRecord
    changed: bool
    def __init__(self, ok: _Optional[bool] = ..., code: _Optional[str] = ..., message: _Optional[str] = ..., task: _Optional[_Union[TaskRecord, _Mapping]] = ..., run: _Optional[_Union[Run, _Mapping]] = ..., fired: _Optional[int] = ..., accounted: _Optional[int] = ..., refused: _Optional[int] = ..., items: _Optional[_Iterable[_Union[ItemResult, _Mapping]]] = ..., workflow: _Optional[_Union[WorkflowRecord, _Mapping]] = ..., workflow_run: _Optional[_Union[WorkflowRun, _Mapping]] = ..., backfill: _Optional[_Union[BackfillRecord, _Mapping]] = ..., changed: _Optional[bool] = ...) -> None: ...

class Meta(_message.Message):
    __slots__ = ("max_epoch", "max_leader_now_ms", "manual_seq", "applied_commands", "chain")
    MAX_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_LEADER_NOW_MS_FIELD_NUMBER: _ClassVar[int]
    MANUAL_SEQ_FIELD_NUMBER: _ClassVar[int]
    APPLIED_COMMANDS_FIELD_NUMBER: _ClassVar[int]
    CHAIN_FIELD_NUMBER: _ClassVar[int]
    max_epoch: int
    max_leader_now_ms: int
    manual_seq: int
    applied_commands: int
    chain: bytes
    def __init__(self, max_epoch: _Optional[int] = ..., max_leader_now_ms: _Optional[int] = ..., manual_seq: _Optional[int] = ..., applied_commands: _Optional[int] = ..., chain: _Optional[bytes] = ...) -> None: ...

class SnapshotEntry(_message.Message):
    __slots__ = ("key", "value")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    key: bytes
    value: bytes
    def __init__(self, key: _Optional[bytes] = ..., value: _Optional[bytes] = ...) -> None: ...

class Snapshot(_message.Message):
    __slots__ = ("format", "entries")
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    format: int
    entries: _containers.RepeatedCompositeFieldContainer[SnapshotEntry]
    def __init__(self, format: _Optional[int] = ..., entries: _Optional[_Iterable[_Union[SnapshotEntry, _Mapping]]] = ...) -> None: ...

class AddTaskRequest(_message.Message):
    __slots__ = ("spec", "disabled", "idempotency_key")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    spec: TaskSpec
    disabled: bool
    idempotency_key: str
    def __init__(self, spec: _Optional[_Union[TaskSpec, _Mapping]] = ..., disabled: _Optional[bool] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class AddTasksRequest(_message.Message):
    __slots__ = ("tasks", "idempotency_key")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[AddTaskRequest]
    idempotency_key: str
    def __init__(self, tasks: _Optional[_Iterable[_Union[AddTaskRequest, _Mapping]]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class AddTasksReply(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[ItemResult]
    def __init__(self, results: _Optional[_Iterable[_Union[ItemResult, _Mapping]]] = ...) -> None: ...

class UpdateTaskRequest(_message.Message):
    __slots__ = ("spec", "expected_version", "idempotency_key")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    spec: TaskSpec
    expected_version: int
    idempotency_key: str
    def __init__(self, spec: _Optional[_Union[TaskSpec, _Mapping]] = ..., expected_version: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class DeleteTaskRequest(_message.Message):
    __slots__ = ("name", "idempotency_key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    idempotency_key: str
    def __init__(self, name: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class SetEnabledRequest(_message.Message):
    __slots__ = ("name", "enabled", "idempotency_key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ENABLED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    enabled: bool
    idempotency_key: str
    def __init__(self, name: _Optional[str] = ..., enabled: _Optional[bool] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class TriggerNowRequest(_message.Message):
    __slots__ = ("name", "params_json", "idempotency_key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    params_json: str
    idempotency_key: str
    def __init__(self, name: _Optional[str] = ..., params_json: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class RetryRunRequest(_message.Message):
    __slots__ = ("run_id", "idempotency_key")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    idempotency_key: str
    def __init__(self, run_id: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class TaskReply(_message.Message):
    __slots__ = ("task",)
    TASK_FIELD_NUMBER: _ClassVar[int]
    task: TaskRecord
    def __init__(self, task: _Optional[_Union[TaskRecord, _Mapping]] = ...) -> None: ...

class DeleteTaskReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetTaskRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListTasksRequest(_message.Message):
    __slots__ = ("prefix", "limit")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    limit: int
    def __init__(self, prefix: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListTasksReply(_message.Message):
    __slots__ = ("tasks",)
    TASKS_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[TaskRecord]
    def __init__(self, tasks: _Optional[_Iterable[_Union[TaskRecord, _Mapping]]] = ...) -> None: ...

class RunReply(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: Run
    def __init__(self, run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("task", "since_ms", "until_ms", "state", "limit")
    TASK_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    task: str
    since_ms: int
    until_ms: int
    state: RunState
    limit: int
    def __init__(self, task: _Optional[str] = ..., since_ms: _Optional[int] = ..., until_ms: _Optional[int] = ..., state: _Optional[_Union[RunState, str]] = ..., limit: _Optional[int] = ...) -> None: ...

class ListRunsReply(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[Run]
    def __init__(self, runs: _Optional[_Iterable[_Union[Run, _Mapping]]] = ...) -> None: ...

class FireAccountingRequest(_message.Message):
    __slots__ = ("task", "since_ms", "until_ms", "limit")
    TASK_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    task: str
    since_ms: int
    until_ms: int
    limit: int
    def __init__(self, task: _Optional[str] = ..., since_ms: _Optional[int] = ..., until_ms: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class FireAccountingReply(_message.Message):
    __slots__ = ("fires",)
    FIRES_FIELD_NUMBER: _ClassVar[int]
    fires: _containers.RepeatedCompositeFieldContainer[FireRecord]
    def __init__(self, fires: _Optional[_Iterable[_Union[FireRecord, _Mapping]]] = ...) -> None: ...

class ExplainRequest(_message.Message):
    __slots__ = ("task", "at_ms")
    TASK_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    task: str
    at_ms: int
    def __init__(self, task: _Optional[str] = ..., at_ms: _Optional[int] = ...) -> None: ...

class ExplainReply(_message.Message):
    __slots__ = ("verdict", "details", "fire", "run")
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    FIRE_FIELD_NUMBER: _ClassVar[int]
    RUN_FIELD_NUMBER: _ClassVar[int]
    verdict: str
    details: _containers.RepeatedScalarFieldContainer[str]
    fire: FireRecord
    run: Run
    def __init__(self, verdict: _Optional[str] = ..., details: _Optional[_Iterable[str]] = ..., fire: _Optional[_Union[FireRecord, _Mapping]] = ..., run: _Optional[_Union[Run, _Mapping]] = ...) -> None: ...

class ClusterStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PeerStatus(_message.Message):
    __slots__ = ("node_id", "raft", "connected", "match_index")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    MATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    raft: str
    connected: bool
    match_index: int
    def __init__(self, node_id: _Optional[str] = ..., raft: _Optional[str] = ..., connected: _Optional[bool] = ..., match_index: _Optional[int] = ...) -> None: ...

class NodeStatusRequest(_message.Message):
    __slots__ = ("lateness_since_ms", "include_digest", "chain_at_index")
    LATENESS_SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_DIGEST_FIELD_NUMBER: _ClassVar[int]
    CHAIN_AT_INDEX_FIELD_NUMBER: _ClassVar[int]
    lateness_since_ms: int
    include_digest: bool
    chain_at_index: int
    def __init__(self, lateness_since_ms: _Optional[int] = ..., include_digest: _Optional[bool] = ..., chain_at_index: _Optional[int] = ...) -> None: ...

class LatencySummary(_message.Message):
    __slots__ = ("count", "p50_ms", "p99_ms", "max_ms", "mean_ms")
    COUNT_FIELD_NUMBER: _ClassVar[int]
    P50_MS_FIELD_NUMBER: _ClassVar[int]
    P99_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_MS_FIELD_NUMBER: _ClassVar[int]
    MEAN_MS_FIELD_NUMBER: _ClassVar[int]
    count: int
    p50_ms: float
    p99_ms: float
    max_ms: float
    mean_ms: float
    def __init__(self, count: _Optional[int] = ..., p50_ms: _Optional[float] = ..., p99_ms: _Optional[float] = ..., max_ms: _Optional[float] = ..., mean_ms: _Optional[float] = ...) -> None: ...

class NodeStatusReply(_message.Message):
    __slots__ = ("node_id", "raft", "grpc", "role", "leader_id", "leader_grpc", "term", "commit_index", "applied_index", "tasks", "active_runs", "state_digest", "max_leader_now_ms", "max_epoch", "log_len", "fires_committed", "commit_lateness", "apply_lateness", "rss_bytes", "chain", "chain_at_index")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_FIELD_NUMBER: _ClassVar[int]
    GRPC_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    LEADER_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_GRPC_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    COMMIT_INDEX_FIELD_NUMBER: _ClassVar[int]
    APPLIED_INDEX_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_RUNS_FIELD_NUMBER: _ClassVar[int]
    STATE_DIGEST_FIELD_NUMBER: _ClassVar[int]
    MAX_LEADER_NOW_MS_FIELD_NUMBER: _ClassVar[int]
    MAX_EPOCH_FIELD_NUMBER: _ClassVar[int]
    LOG_LEN_FIELD_NUMBER: _ClassVar[int]
    FIRES_COMMITTED_FIELD_NUMBER: _ClassVar[int]
    COMMIT_LATENESS_FIELD_NUMBER: _ClassVar[int]
    APPLY_LATENESS_FIELD_NUMBER: _ClassVar[int]
    RSS_BYTES_FIELD_NUMBER: _ClassVar[int]
    CHAIN_FIELD_NUMBER: _ClassVar[int]
    CHAIN_AT_INDEX_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    raft: str
    grpc: str
    role: str
    leader_id: str
    leader_grpc: str
    term: int
    commit_index: int
    applied_index: int
    tasks: int
    active_runs: int
    state_digest: str
    max_leader_now_ms: int
    max_epoch: int
    log_len: int
    fires_committed: int
    commit_lateness: LatencySummary
    apply_lateness: LatencySummary
    rss_bytes: int
    chain: str
    chain_at_index: str
    def __init__(self, node_id: _Optional[str] = ..., raft: _Optional[str] = ..., grpc: _Optional[str] = ..., role: _Optional[str] = ..., leader_id: _Optional[str] = ..., leader_grpc: _Optional[str] = ..., term: _Optional[int] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., tasks: _Optional[int] = ..., active_runs: _Optional[int] = ..., state_digest: _Optional[str] = ..., max_leader_now_ms: _Optional[int] = ..., max_epoch: _Optional[int] = ..., log_len: _Optional[int] = ..., fires_committed: _Optional[int] = ..., commit_lateness: _Optional[_Union[LatencySummary, _Mapping]] = ..., apply_lateness: _Optional[_Union[LatencySummary, _Mapping]] = ..., rss_bytes: _Optional[int] = ..., chain: _Optional[str] = ..., chain_at_index: _Optional[str] = ...) -> None: ...

class ClusterStatusReply(_message.Message):
    __slots__ = ("self", "peers")
    SELF_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    self: NodeStatusReply
    peers: _containers.RepeatedCompositeFieldContainer[PeerStatus]
    def __init__(self_, self: _Optional[_Union[NodeStatusReply, _Mapping]] = ..., peers: _Optional[_Iterable[_Union[PeerStatus, _Mapping]]] = ...) -> None: ...

class ApplyWorkflowRequest(_message.Message):
    __slots__ = ("spec", "idempotency_key")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    spec: WorkflowSpec
    idempotency_key: str
    def __init__(self, spec: _Optional[_Union[WorkflowSpec, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class WorkflowReply(_message.Message):
    __slots__ = ("workflow", "changed")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    workflow: WorkflowRecord
    changed: bool
    def __init__(self, workflow: _Optional[_Union[WorkflowRecord, _Mapping]] = ..., changed: _Optional[bool] = ...) -> None: ...

class GetWorkflowRequest(_message.Message):
    __slots__ = ("name", "version")
    NAME_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    name: str
    version: int
    def __init__(self, name: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class ListWorkflowsRequest(_message.Message):
    __slots__ = ("prefix", "limit")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    limit: int
    def __init__(self, prefix: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListWorkflowsReply(_message.Message):
    __slots__ = ("workflows",)
    WORKFLOWS_FIELD_NUMBER: _ClassVar[int]
    workflows: _containers.RepeatedCompositeFieldContainer[WorkflowRecord]
    def __init__(self, workflows: _Optional[_Iterable[_Union[WorkflowRecord, _Mapping]]] = ...) -> None: ...

class StartWorkflowRunRequest(_message.Message):
    __slots__ = ("workflow", "logical_ms", "params_json", "idempotency_key")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_MS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    workflow: str
    logical_ms: int
    params_json: str
    idempotency_key: str
    def __init__(self, workflow: _Optional[str] = ..., logical_ms: _Optional[int] = ..., params_json: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class WorkflowRunReply(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: WorkflowRun
    def __init__(self, run: _Optional[_Union[WorkflowRun, _Mapping]] = ...) -> None: ...

class GetWorkflowRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class ListWorkflowRunsRequest(_message.Message):
    __slots__ = ("workflow", "limit", "active_only")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_ONLY_FIELD_NUMBER: _ClassVar[int]
    workflow: str
    limit: int
    active_only: bool
    def __init__(self, workflow: _Optional[str] = ..., limit: _Optional[int] = ..., active_only: _Optional[bool] = ...) -> None: ...

class ListWorkflowRunsReply(_message.Message):
    __slots__ = ("runs",)
    RUNS_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[WorkflowRun]
    def __init__(self, runs: _Optional[_Iterable[_Union[WorkflowRun, _Mapping]]] = ...) -> None: ...

class WorkflowRunOpRequest(_message.Message):
    __slots__ = ("op", "run_id", "task", "reason", "idempotency_key")
    OP_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    op: WorkflowRunOp.Op
    run_id: str
    task: str
    reason: str
    idempotency_key: str
    def __init__(self, op: _Optional[_Union[WorkflowRunOp.Op, str]] = ..., run_id: _Optional[str] = ..., task: _Optional[str] = ..., reason: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class BackfillRequest(_message.Message):
    __slots__ = ("workflow", "from_ms", "to_ms", "params_json", "idempotency_key")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    FROM_MS_FIELD_NUMBER: _ClassVar[int]
    TO_MS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    workflow: str
    from_ms: int
    to_ms: int
    params_json: str
    idempotency_key: str
    def __init__(self, workflow: _Optional[str] = ..., from_ms: _Optional[int] = ..., to_ms: _Optional[int] = ..., params_json: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class BackfillReply(_message.Message):
    __slots__ = ("backfill",)
    BACKFILL_FIELD_NUMBER: _ClassVar[int]
    backfill: BackfillRecord
    def __init__(self, backfill: _Optional[_Union[BackfillRecord, _Mapping]] = ...) -> None: ...

class GetBackfillRequest(_message.Message):
    __slots__ = ("backfill_id",)
    BACKFILL_ID_FIELD_NUMBER: _ClassVar[int]
    backfill_id: str
    def __init__(self, backfill_id: _Optional[str] = ...) -> None: ...

class ListBackfillsRequest(_message.Message):
    __slots__ = ("workflow",)
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    workflow: str
    def __init__(self, workflow: _Optional[str] = ...) -> None: ...

class ListBackfillsReply(_message.Message):
    __slots__ = ("backfills",)
    BACKFILLS_FIELD_NUMBER: _ClassVar[int]
    backfills: _containers.RepeatedCompositeFieldContainer[BackfillRecord]
    def __init__(self, backfills: _Optional[_Iterable[_Union[BackfillRecord, _Mapping]]] = ...) -> None: ...

class LineageRequest(_message.Message):
    __slots__ = ("workflow", "task", "version")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    workflow: str
    task: str
    version: int
    def __init__(self, workflow: _Optional[str] = ..., task: _Optional[str] = ..., version: _Optional[int] = ...) -> None: ...

class LineageEntry(_message.Message):
    __slots__ = ("task", "depth")
    TASK_FIELD_NUMBER: _ClassVar[int]
    DEPTH_FIELD_NUMBER: _ClassVar[int]
    task: str
    depth: int
    def __init__(self, task: _Optional[str] = ..., depth: _Optional[int] = ...) -> None: ...

class LineageReply(_message.Message):
    __slots__ = ("upstream", "downstream")
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    DOWNSTREAM_FIELD_NUMBER: _ClassVar[int]
    upstream: _containers.RepeatedCompositeFieldContainer[LineageEntry]
    downstream: _containers.RepeatedCompositeFieldContainer[LineageEntry]
    def __init__(self, upstream: _Optional[_Iterable[_Union[LineageEntry, _Mapping]]] = ..., downstream: _Optional[_Iterable[_Union[LineageEntry, _Mapping]]] = ...) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("name", "slots", "labels")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    name: str
    slots: int
    labels: _containers.ScalarMap[str, str]
    def __init__(self, name: _Optional[str] = ..., slots: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ...) -> None: ...

class RegisterReply(_message.Message):
    __slots__ = ("epoch", "lease_ms", "heartbeat_ms")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_MS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    lease_ms: int
    heartbeat_ms: int
    def __init__(self, epoch: _Optional[int] = ..., lease_ms: _Optional[int] = ..., heartbeat_ms: _Optional[int] = ...) -> None: ...

class DispatchRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class WorkItem(_message.Message):
    __slots__ = ("execution_id", "run_id", "task", "nominal_ms", "shard", "shards", "attempt", "epoch", "command", "handler", "params_json", "timeout_ms", "task_version", "env", "cancel")
    class EnvEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_MS_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    HANDLER_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    TASK_VERSION_FIELD_NUMBER: _ClassVar[int]
    ENV_FIELD_NUMBER: _ClassVar[int]
    CANCEL_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    run_id: str
    task: str
    nominal_ms: int
    shard: int
    shards: int
    attempt: int
    epoch: int
    command: str
    handler: str
    params_json: str
    timeout_ms: int
    task_version: int
    env: _containers.ScalarMap[str, str]
    cancel: bool
    def __init__(self, execution_id: _Optional[str] = ..., run_id: _Optional[str] = ..., task: _Optional[str] = ..., nominal_ms: _Optional[int] = ..., shard: _Optional[int] = ..., shards: _Optional[int] = ..., attempt: _Optional[int] = ..., epoch: _Optional[int] = ..., command: _Optional[str] = ..., handler: _Optional[str] = ..., params_json: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., task_version: _Optional[int] = ..., env: _Optional[_Mapping[str, str]] = ..., cancel: _Optional[bool] = ...) -> None: ...

class WorkBatch(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[WorkItem]
    def __init__(self, items: _Optional[_Iterable[_Union[WorkItem, _Mapping]]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("name", "running", "free_slots")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    FREE_SLOTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    running: _containers.RepeatedScalarFieldContainer[str]
    free_slots: int
    def __init__(self, name: _Optional[str] = ..., running: _Optional[_Iterable[str]] = ..., free_slots: _Optional[int] = ...) -> None: ...

class HeartbeatReply(_message.Message):
    __slots__ = ("epoch", "registered")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    registered: bool
    def __init__(self, epoch: _Optional[int] = ..., registered: _Optional[bool] = ...) -> None: ...

class ExecResult(_message.Message):
    __slots__ = ("execution_id", "success", "exit_code", "error", "stdout_tail", "stderr_tail", "timed_out", "duration_ms")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    STDERR_TAIL_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    success: bool
    exit_code: int
    error: str
    stdout_tail: str
    stderr_tail: str
    timed_out: bool
    duration_ms: int
    def __init__(self, execution_id: _Optional[str] = ..., success: _Optional[bool] = ..., exit_code: _Optional[int] = ..., error: _Optional[str] = ..., stdout_tail: _Optional[str] = ..., stderr_tail: _Optional[str] = ..., timed_out: _Optional[bool] = ..., duration_ms: _Optional[int] = ...) -> None: ...

class ReportRequest(_message.Message):
    __slots__ = ("name", "results")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    name: str
    results: _containers.RepeatedCompositeFieldContainer[ExecResult]
    def __init__(self, name: _Optional[str] = ..., results: _Optional[_Iterable[_Union[ExecResult, _Mapping]]] = ...) -> None: ...

class ReportReply(_message.Message):
    __slots__ = ("acknowledged",)
    ACKNOWLEDGED_FIELD_NUMBER: _ClassVar[int]
    acknowledged: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, acknowledged: _Optional[_Iterable[str]] = ...) -> None: ...

class LeaveRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class LeaveReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...
