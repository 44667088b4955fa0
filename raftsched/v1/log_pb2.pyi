from raftsched.v1 import records_pb2 as _records_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union
from raftsched.v1.records_pb2 import CronTrigger as CronTrigger
from raftsched.v1.records_pb2 import IntervalTrigger as IntervalTrigger
from raftsched.v1.records_pb2 import OnceTrigger as OnceTrigger
from raftsched.v1.records_pb2 import ManualTrigger as ManualTrigger
from raftsched.v1.records_pb2 import Trigger as Trigger
from raftsched.v1.records_pb2 import TaskSpec as TaskSpec
from raftsched.v1.records_pb2 import RetryBackoff as RetryBackoff
from raftsched.v1.records_pb2 import TaskRecord as TaskRecord
from raftsched.v1.records_pb2 import FireRecord as FireRecord
from raftsched.v1.records_pb2 import ShardAttempt as ShardAttempt
from raftsched.v1.records_pb2 import Run as Run
from raftsched.v1.records_pb2 import Dependency as Dependency
from raftsched.v1.records_pb2 import WorkflowTaskSpec as WorkflowTaskSpec
from raftsched.v1.records_pb2 import WorkflowSpec as WorkflowSpec
from raftsched.v1.records_pb2 import WorkflowRecord as WorkflowRecord
from raftsched.v1.records_pb2 import TimelineEntry as TimelineEntry
from raftsched.v1.records_pb2 import WorkflowTaskRun as WorkflowTaskRun
from raftsched.v1.records_pb2 import ExternalWait as ExternalWait
from raftsched.v1.records_pb2 import WorkflowRun as WorkflowRun
from raftsched.v1.records_pb2 import BackfillRecord as BackfillRecord
from raftsched.v1.records_pb2 import AlertRecord as AlertRecord
from raftsched.v1.records_pb2 import WorkflowRunOp as WorkflowRunOp
from raftsched.v1.records_pb2 import ItemResult as ItemResult
from raftsched.v1.records_pb2 import AuditRecord as AuditRecord
from raftsched.v1.records_pb2 import TokenInfo as TokenInfo
from raftsched.v1.records_pb2 import LockRef as LockRef
from raftsched.v1.records_pb2 import QuotaRecord as QuotaRecord
from raftsched.v1.records_pb2 import CalendarSpec as CalendarSpec
from raftsched.v1.records_pb2 import CalendarRecord as CalendarRecord
from raftsched.v1.records_pb2 import Member as Member
from raftsched.v1.records_pb2 import MemberChange as MemberChange
from raftsched.v1.records_pb2 import MembershipRecord as MembershipRecord
from raftsched.v1.records_pb2 import EventRecord as EventRecord
from raftsched.v1.records_pb2 import PoolRecord as PoolRecord
from raftsched.v1.records_pb2 import MisfirePolicy as MisfirePolicy
from raftsched.v1.records_pb2 import OverlapPolicy as OverlapPolicy
from raftsched.v1.records_pb2 import FireOutcome as FireOutcome
from raftsched.v1.records_pb2 import RunState as RunState
from raftsched.v1.records_pb2 import EdgeCondition as EdgeCondition
from raftsched.v1.records_pb2 import TriggerRule as TriggerRule
from raftsched.v1.records_pb2 import UpstreamTimeout as UpstreamTimeout
from raftsched.v1.records_pb2 import WorkflowTaskState as WorkflowTaskState
from raftsched.v1.records_pb2 import WorkflowRunState as WorkflowRunState
from raftsched.v1.records_pb2 import ExternalWaitState as ExternalWaitState

DESCRIPTOR: _descriptor.FileDescriptor
MISFIRE_UNSPECIFIED: _records_pb2.MisfirePolicy
MISFIRE_LATEST: _records_pb2.MisfirePolicy
MISFIRE_ALL: _records_pb2.MisfirePolicy
MISFIRE_SKIP: _records_pb2.MisfirePolicy
OVERLAP_UNSPECIFIED: _records_pb2.OverlapPolicy
OVERLAP_SKIP: _records_pb2.OverlapPolicy
OVERLAP_ALLOW: _records_pb2.OverlapPolicy
OVERLAP_BUFFER_ONE: _records_pb2.OverlapPolicy
OVERLAP_REPLACE: _records_pb2.OverlapPolicy
OUTCOME_UNSPECIFIED: _records_pb2.FireOutcome
FIRED: _records_pb2.FireOutcome
COALESCED: _records_pb2.FireOutcome
SKIPPED_OVERLAP: _records_pb2.FireOutcome
SKIPPED_MISFIRE: _records_pb2.FireOutcome
SKIPPED_DISABLED: _records_pb2.FireOutcome
SKIPPED_CALENDAR: _records_pb2.FireOutcome
RUN_STATE_UNSPECIFIED: _records_pb2.RunState
PENDING: _records_pb2.RunState
RUNNING: _records_pb2.RunState
SUCCEEDED: _records_pb2.RunState
FAILED: _records_pb2.RunState
CANCELLED: _records_pb2.RunState
CONDITION_UNSPECIFIED: _records_pb2.EdgeCondition
ON_SUCCESS: _records_pb2.EdgeCondition
ON_FAILURE: _records_pb2.EdgeCondition
ON_DONE: _records_pb2.EdgeCondition
RULE_UNSPECIFIED: _records_pb2.TriggerRule
RULE_ALL: _records_pb2.TriggerRule
RULE_ANY: _records_pb2.TriggerRule
UPSTREAM_TIMEOUT_FAIL: _records_pb2.UpstreamTimeout
UPSTREAM_TIMEOUT_SKIP: _records_pb2.UpstreamTimeout
TASK_STATE_UNSPECIFIED: _records_pb2.WorkflowTaskState
TASK_WAITING: _records_pb2.WorkflowTaskState
TASK_READY: _records_pb2.WorkflowTaskState
TASK_RUNNING: _records_pb2.WorkflowTaskState
TASK_SUCCESS: _records_pb2.WorkflowTaskState
TASK_FAILED: _records_pb2.WorkflowTaskState
TASK_TIMEOUT: _records_pb2.WorkflowTaskState
TASK_SKIPPED: _records_pb2.WorkflowTaskState
TASK_KILLED: _records_pb2.WorkflowTaskState
WORKFLOW_STATE_UNSPECIFIED: _records_pb2.WorkflowRunState
WORKFLOW_RUNNING: _records_pb2.WorkflowRunState
WORKFLOW_SUCCESS: _records_pb2.WorkflowRunState
WORKFLOW_FAILED: _records_pb2.WorkflowRunState
WORKFLOW_KILLED: _records_pb2.WorkflowRunState
EXTERNAL_PENDING: _records_pb2.ExternalWaitState
EXTERNAL_MET: _records_pb2.ExternalWaitState
EXTERNAL_UNMET: _records_pb2.ExternalWaitState
EXTERNAL_TIMED_OUT: _records_pb2.ExternalWaitState

class CreateTask(_message.Message):
    __slots__ = ("spec", "next_fire_ms", "disabled")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_MS_FIELD_NUMBER: _ClassVar[int]
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    spec: _records_pb2.TaskSpec
    next_fire_ms: int
    disabled: bool
    def __init__(self, spec: _Optional[_Union[_records_pb2.TaskSpec, _Mapping]] = ..., next_fire_ms: _Optional[int] = ..., disabled: _Optional[bool] = ...) -> None: ...

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
    spec: _records_pb2.TaskSpec
    next_fire_ms: int
    expected_version: int
    def __init__(self, spec: _Optional[_Union[_records_pb2.TaskSpec, _Mapping]] = ..., next_fire_ms: _Optional[int] = ..., expected_version: _Optional[int] = ...) -> None: ...

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
    __slots__ = ("node_id", "clock_fault_ms", "read_by")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    CLOCK_FAULT_MS_FIELD_NUMBER: _ClassVar[int]
    READ_BY_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    clock_fault_ms: int
    read_by: str
    def __init__(self, node_id: _Optional[str] = ..., clock_fault_ms: _Optional[int] = ..., read_by: _Optional[str] = ...) -> None: ...

class Fire(_message.Message):
    __slots__ = ("nominal_ms", "outcome", "reason", "through_ms", "count")
    NOMINAL_MS_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    THROUGH_MS_FIELD_NUMBER: _ClassVar[int]
    COUNT_FIELD_NUMBER: _ClassVar[int]
    nominal_ms: int
    outcome: _records_pb2.FireOutcome
    reason: str
    through_ms: int
    count: int
    def __init__(self, nominal_ms: _Optional[int] = ..., outcome: _Optional[_Union[_records_pb2.FireOutcome, str]] = ..., reason: _Optional[str] = ..., through_ms: _Optional[int] = ..., count: _Optional[int] = ...) -> None: ...

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
    __slots__ = ("run_id", "shard", "attempt", "success", "error", "executor", "exit_code", "stdout_tail", "stderr_tail", "lost", "retry_at_ms", "timed_out", "duration_ms", "start_lateness_ms", "unstarted")
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
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    START_LATENESS_MS_FIELD_NUMBER: _ClassVar[int]
    UNSTARTED_FIELD_NUMBER: _ClassVar[int]
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
    duration_ms: int
    start_lateness_ms: int
    unstarted: bool
    def __init__(self, run_id: _Optional[str] = ..., shard: _Optional[int] = ..., attempt: _Optional[int] = ..., success: _Optional[bool] = ..., error: _Optional[str] = ..., executor: _Optional[str] = ..., exit_code: _Optional[int] = ..., stdout_tail: _Optional[str] = ..., stderr_tail: _Optional[str] = ..., lost: _Optional[bool] = ..., retry_at_ms: _Optional[int] = ..., timed_out: _Optional[bool] = ..., duration_ms: _Optional[int] = ..., start_lateness_ms: _Optional[int] = ..., unstarted: _Optional[bool] = ...) -> None: ...

class ExecutorJoin(_message.Message):
    __slots__ = ("name", "slots", "labels", "principal", "namespaces", "cpu", "memory_mb")
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
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    CPU_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    name: str
    slots: int
    labels: _containers.ScalarMap[str, str]
    principal: str
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    cpu: float
    memory_mb: int
    def __init__(self, name: _Optional[str] = ..., slots: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., principal: _Optional[str] = ..., namespaces: _Optional[_Iterable[str]] = ..., cpu: _Optional[float] = ..., memory_mb: _Optional[int] = ...) -> None: ...

class ExecutorLeave(_message.Message):
    __slots__ = ("name", "reason", "dead", "retry_at_ms", "unstarted")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DEAD_FIELD_NUMBER: _ClassVar[int]
    RETRY_AT_MS_FIELD_NUMBER: _ClassVar[int]
    UNSTARTED_FIELD_NUMBER: _ClassVar[int]
    name: str
    reason: str
    dead: bool
    retry_at_ms: int
    unstarted: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., reason: _Optional[str] = ..., dead: _Optional[bool] = ..., retry_at_ms: _Optional[int] = ..., unstarted: _Optional[_Iterable[str]] = ...) -> None: ...

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

class AttemptWait(_message.Message):
    __slots__ = ("run_id", "shard", "attempt", "reason")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    shard: int
    attempt: int
    reason: str
    def __init__(self, run_id: _Optional[str] = ..., shard: _Optional[int] = ..., attempt: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class AssignAttempts(_message.Message):
    __slots__ = ("assignments", "waits")
    ASSIGNMENTS_FIELD_NUMBER: _ClassVar[int]
    WAITS_FIELD_NUMBER: _ClassVar[int]
    assignments: _containers.RepeatedCompositeFieldContainer[Assignment]
    waits: _containers.RepeatedCompositeFieldContainer[AttemptWait]
    def __init__(self, assignments: _Optional[_Iterable[_Union[Assignment, _Mapping]]] = ..., waits: _Optional[_Iterable[_Union[AttemptWait, _Mapping]]] = ...) -> None: ...

class SetQuota(_message.Message):
    __slots__ = ("quota",)
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    quota: _records_pb2.QuotaRecord
    def __init__(self, quota: _Optional[_Union[_records_pb2.QuotaRecord, _Mapping]] = ...) -> None: ...

class DeleteQuota(_message.Message):
    __slots__ = ("kind", "name")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class SetPool(_message.Message):
    __slots__ = ("pool",)
    POOL_FIELD_NUMBER: _ClassVar[int]
    pool: _records_pb2.PoolRecord
    def __init__(self, pool: _Optional[_Union[_records_pb2.PoolRecord, _Mapping]] = ...) -> None: ...

class DeletePool(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class StartTaskBackfill(_message.Message):
    __slots__ = ("task", "nominal_ms", "from_ms", "to_ms", "params_json")
    TASK_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_MS_FIELD_NUMBER: _ClassVar[int]
    FROM_MS_FIELD_NUMBER: _ClassVar[int]
    TO_MS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    task: str
    nominal_ms: _containers.RepeatedScalarFieldContainer[int]
    from_ms: int
    to_ms: int
    params_json: str
    def __init__(self, task: _Optional[str] = ..., nominal_ms: _Optional[_Iterable[int]] = ..., from_ms: _Optional[int] = ..., to_ms: _Optional[int] = ..., params_json: _Optional[str] = ...) -> None: ...

class ReportResults(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AttemptResult]
    def __init__(self, results: _Optional[_Iterable[_Union[AttemptResult, _Mapping]]] = ...) -> None: ...

class ApplyWorkflow(_message.Message):
    __slots__ = ("spec", "next_fire_ms", "stage", "staged_tasks", "zone_transition_ms", "zone_offset_s", "expected_version", "gates_free_slots")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_MS_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    STAGED_TASKS_FIELD_NUMBER: _ClassVar[int]
    ZONE_TRANSITION_MS_FIELD_NUMBER: _ClassVar[int]
    ZONE_OFFSET_S_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    GATES_FREE_SLOTS_FIELD_NUMBER: _ClassVar[int]
    spec: _records_pb2.WorkflowSpec
    next_fire_ms: int
    stage: str
    staged_tasks: int
    zone_transition_ms: _containers.RepeatedScalarFieldContainer[int]
    zone_offset_s: _containers.RepeatedScalarFieldContainer[int]
    expected_version: int
    gates_free_slots: bool
    def __init__(self, spec: _Optional[_Union[_records_pb2.WorkflowSpec, _Mapping]] = ..., next_fire_ms: _Optional[int] = ..., stage: _Optional[str] = ..., staged_tasks: _Optional[int] = ..., zone_transition_ms: _Optional[_Iterable[int]] = ..., zone_offset_s: _Optional[_Iterable[int]] = ..., expected_version: _Optional[int] = ..., gates_free_slots: _Optional[bool] = ...) -> None: ...

class StageWorkflowTasks(_message.Message):
    __slots__ = ("workflow", "stage", "seq", "header", "names", "tasks")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    STAGE_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    TASKS_FIELD_NUMBER: _ClassVar[int]
    workflow: str
    stage: str
    seq: int
    header: _records_pb2.WorkflowSpec
    names: _containers.RepeatedScalarFieldContainer[str]
    tasks: _containers.RepeatedCompositeFieldContainer[_records_pb2.WorkflowTaskSpec]
    def __init__(self, workflow: _Optional[str] = ..., stage: _Optional[str] = ..., seq: _Optional[int] = ..., header: _Optional[_Union[_records_pb2.WorkflowSpec, _Mapping]] = ..., names: _Optional[_Iterable[str]] = ..., tasks: _Optional[_Iterable[_Union[_records_pb2.WorkflowTaskSpec, _Mapping]]] = ...) -> None: ...

class WorkflowStage(_message.Message):
    __slots__ = ("stage", "header", "names", "chunks", "staged_tasks", "version")
    STAGE_FIELD_NUMBER: _ClassVar[int]
    HEADER_FIELD_NUMBER: _ClassVar[int]
    NAMES_FIELD_NUMBER: _ClassVar[int]
    CHUNKS_FIELD_NUMBER: _ClassVar[int]
    STAGED_TASKS_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    stage: str
    header: _records_pb2.WorkflowSpec
    names: _containers.RepeatedScalarFieldContainer[str]
    chunks: int
    staged_tasks: int
    version: int
    def __init__(self, stage: _Optional[str] = ..., header: _Optional[_Union[_records_pb2.WorkflowSpec, _Mapping]] = ..., names: _Optional[_Iterable[str]] = ..., chunks: _Optional[int] = ..., staged_tasks: _Optional[int] = ..., version: _Optional[int] = ...) -> None: ...

class StartWorkflowRun(_message.Message):
    __slots__ = ("workflow", "logical_ms", "params_json")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    LOGICAL_MS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    workflow: str
    logical_ms: int
    params_json: str
    def __init__(self, workflow: _Optional[str] = ..., logical_ms: _Optional[int] = ..., params_json: _Optional[str] = ...) -> None: ...

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

class RaiseAlerts(_message.Message):
    __slots__ = ("alerts",)
    ALERTS_FIELD_NUMBER: _ClassVar[int]
    alerts: _containers.RepeatedCompositeFieldContainer[_records_pb2.AlertRecord]
    def __init__(self, alerts: _Optional[_Iterable[_Union[_records_pb2.AlertRecord, _Mapping]]] = ...) -> None: ...

class AlertsDelivered(_message.Message):
    __slots__ = ("target", "through_seq")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    THROUGH_SEQ_FIELD_NUMBER: _ClassVar[int]
    target: str
    through_seq: int
    def __init__(self, target: _Optional[str] = ..., through_seq: _Optional[int] = ...) -> None: ...

class AckAlert(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class CreateToken(_message.Message):
    __slots__ = ("info", "ttl_ms", "salt", "hash", "scrypt_n", "scrypt_r", "scrypt_p")
    INFO_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    SCRYPT_N_FIELD_NUMBER: _ClassVar[int]
    SCRYPT_R_FIELD_NUMBER: _ClassVar[int]
    SCRYPT_P_FIELD_NUMBER: _ClassVar[int]
    info: _records_pb2.TokenInfo
    ttl_ms: int
    salt: bytes
    hash: bytes
    scrypt_n: int
    scrypt_r: int
    scrypt_p: int
    def __init__(self, info: _Optional[_Union[_records_pb2.TokenInfo, _Mapping]] = ..., ttl_ms: _Optional[int] = ..., salt: _Optional[bytes] = ..., hash: _Optional[bytes] = ..., scrypt_n: _Optional[int] = ..., scrypt_r: _Optional[int] = ..., scrypt_p: _Optional[int] = ...) -> None: ...

class RevokeToken(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class AuditStamp(_message.Message):
    __slots__ = ("principal", "rpc", "target")
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    RPC_FIELD_NUMBER: _ClassVar[int]
    TARGET_FIELD_NUMBER: _ClassVar[int]
    principal: str
    rpc: str
    target: str
    def __init__(self, principal: _Optional[str] = ..., rpc: _Optional[str] = ..., target: _Optional[str] = ...) -> None: ...

class SetWorkflowPaused(_message.Message):
    __slots__ = ("workflow", "paused", "next_fire_ms")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_MS_FIELD_NUMBER: _ClassVar[int]
    workflow: str
    paused: bool
    next_fire_ms: int
    def __init__(self, workflow: _Optional[str] = ..., paused: _Optional[bool] = ..., next_fire_ms: _Optional[int] = ...) -> None: ...

class DeleteWorkflow(_message.Message):
    __slots__ = ("workflow", "force", "reason")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    workflow: str
    force: bool
    reason: str
    def __init__(self, workflow: _Optional[str] = ..., force: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class DrainExecutor(_message.Message):
    __slots__ = ("name", "reason", "health", "resume")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    HEALTH_FIELD_NUMBER: _ClassVar[int]
    RESUME_FIELD_NUMBER: _ClassVar[int]
    name: str
    reason: str
    health: bool
    resume: bool
    def __init__(self, name: _Optional[str] = ..., reason: _Optional[str] = ..., health: _Optional[bool] = ..., resume: _Optional[bool] = ...) -> None: ...

class SetCalendar(_message.Message):
    __slots__ = ("spec", "transition_ms", "offset_s")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    TRANSITION_MS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_S_FIELD_NUMBER: _ClassVar[int]
    spec: _records_pb2.CalendarSpec
    transition_ms: _containers.RepeatedScalarFieldContainer[int]
    offset_s: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, spec: _Optional[_Union[_records_pb2.CalendarSpec, _Mapping]] = ..., transition_ms: _Optional[_Iterable[int]] = ..., offset_s: _Optional[_Iterable[int]] = ...) -> None: ...

class DeleteCalendar(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class SeedMembership(_message.Message):
    __slots__ = ("members",)
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[_records_pb2.Member]
    def __init__(self, members: _Optional[_Iterable[_Union[_records_pb2.Member, _Mapping]]] = ...) -> None: ...

class BeginMemberChange(_message.Message):
    __slots__ = ("change",)
    CHANGE_FIELD_NUMBER: _ClassVar[int]
    change: _records_pb2.MemberChange
    def __init__(self, change: _Optional[_Union[_records_pb2.MemberChange, _Mapping]] = ...) -> None: ...

class EndMemberChange(_message.Message):
    __slots__ = ("id", "kind", "applied", "reason")
    ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    APPLIED_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    id: str
    kind: str
    applied: bool
    reason: str
    def __init__(self, id: _Optional[str] = ..., kind: _Optional[str] = ..., applied: _Optional[bool] = ..., reason: _Optional[str] = ...) -> None: ...

class EmitEvent(_message.Message):
    __slots__ = ("name", "key", "payload_json", "namespace")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    name: str
    key: str
    payload_json: str
    namespace: str
    def __init__(self, name: _Optional[str] = ..., key: _Optional[str] = ..., payload_json: _Optional[str] = ..., namespace: _Optional[str] = ...) -> None: ...

class Command(_message.Message):
    __slots__ = ("format", "idempotency_key", "epoch", "now_ms", "origin", "request_fingerprint", "create_task", "update_task", "delete_task", "set_enabled", "trigger_now", "barrier", "fire_batch", "report_results", "create_tasks", "executor_join", "executor_leave", "assign_attempts", "retry_run", "apply_workflow", "start_workflow_run", "workflow_run_op", "start_backfill", "raise_alerts", "alerts_delivered", "ack_alert", "create_token", "revoke_token", "set_workflow_paused", "delete_workflow", "set_quota", "delete_quota", "stage_workflow_tasks", "set_calendar", "delete_calendar", "seed_membership", "begin_member_change", "end_member_change", "drain_executor", "workflow_waits_due", "emit_event", "set_pool", "delete_pool", "start_task_backfill", "cancel_runs", "fire_columns", "assign_columns", "result_columns", "number_entities", "promote_hot_runs", "audit")
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    REQUEST_FINGERPRINT_FIELD_NUMBER: _ClassVar[int]
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
    RAISE_ALERTS_FIELD_NUMBER: _ClassVar[int]
    ALERTS_DELIVERED_FIELD_NUMBER: _ClassVar[int]
    ACK_ALERT_FIELD_NUMBER: _ClassVar[int]
    CREATE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    REVOKE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    SET_WORKFLOW_PAUSED_FIELD_NUMBER: _ClassVar[int]
    DELETE_WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    SET_QUOTA_FIELD_NUMBER: _ClassVar[int]
    DELETE_QUOTA_FIELD_NUMBER: _ClassVar[int]
    STAGE_WORKFLOW_TASKS_FIELD_NUMBER: _ClassVar[int]
    SET_CALENDAR_FIELD_NUMBER: _ClassVar[int]
    DELETE_CALENDAR_FIELD_NUMBER: _ClassVar[int]
    SEED_MEMBERSHIP_FIELD_NUMBER: _ClassVar[int]
    BEGIN_MEMBER_CHANGE_FIELD_NUMBER: _ClassVar[int]
    END_MEMBER_CHANGE_FIELD_NUMBER: _ClassVar[int]
    DRAIN_EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    WORKFLOW_WAITS_DUE_FIELD_NUMBER: _ClassVar[int]
    EMIT_EVENT_FIELD_NUMBER: _ClassVar[int]
    SET_POOL_FIELD_NUMBER: _ClassVar[int]
    DELETE_POOL_FIELD_NUMBER: _ClassVar[int]
    START_TASK_BACKFILL_FIELD_NUMBER: _ClassVar[int]
    CANCEL_RUNS_FIELD_NUMBER: _ClassVar[int]
    FIRE_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    ASSIGN_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    RESULT_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    NUMBER_ENTITIES_FIELD_NUMBER: _ClassVar[int]
    PROMOTE_HOT_RUNS_FIELD_NUMBER: _ClassVar[int]
    AUDIT_FIELD_NUMBER: _ClassVar[int]
    format: int
    idempotency_key: str
    epoch: int
    now_ms: int
    origin: str
    request_fingerprint: bytes
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
    workflow_run_op: _records_pb2.WorkflowRunOp
    start_backfill: StartBackfill
    raise_alerts: RaiseAlerts
    alerts_delivered: AlertsDelivered
    ack_alert: AckAlert
    create_token: CreateToken
    revoke_token: RevokeToken
    set_workflow_paused: SetWorkflowPaused
    delete_workflow: DeleteWorkflow
    set_quota: SetQuota
    delete_quota: DeleteQuota
    stage_workflow_tasks: StageWorkflowTasks
    set_calendar: SetCalendar
    delete_calendar: DeleteCalendar
    seed_membership: SeedMembership
    begin_member_change: BeginMemberChange
    end_member_change: EndMemberChange
    drain_executor: DrainExecutor
    workflow_waits_due: WorkflowWaitsDue
    emit_event: EmitEvent
    set_pool: SetPool
    delete_pool: DeletePool
    start_task_backfill: StartTaskBackfill
    cancel_runs: CancelRuns
    fire_columns: FireColumns
    assign_columns: AssignColumns
    result_columns: ResultColumns
    number_entities: NumberEntities
    promote_hot_runs: PromoteHotRuns
    audit: AuditStamp
    def __init__(self, format: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., epoch: _Optional[int] = ..., now_ms: _Optional[int] = ..., origin: _Optional[str] = ..., request_fingerprint: _Optional[bytes] = ..., create_task: _Optional[_Union[CreateTask, _Mapping]] = ..., update_task: _Optional[_Union[UpdateTask, _Mapping]] = ..., delete_task: _Optional[_Union[DeleteTask, _Mapping]] = ..., set_enabled: _Optional[_Union[SetEnabled, _Mapping]] = ..., trigger_now: _Optional[_Union[TriggerNow, _Mapping]] = ..., barrier: _Optional[_Union[Barrier, _Mapping]] = ..., fire_batch: _Optional[_Union[FireBatch, _Mapping]] = ..., report_results: _Optional[_Union[ReportResults, _Mapping]] = ..., create_tasks: _Optional[_Union[CreateTasks, _Mapping]] = ..., executor_join: _Optional[_Union[ExecutorJoin, _Mapping]] = ..., executor_leave: _Optional[_Union[ExecutorLeave, _Mapping]] = ..., assign_attempts: _Optional[_Union[AssignAttempts, _Mapping]] = ..., retry_run: _Optional[_Union[RetryRun, _Mapping]] = ..., apply_workflow: _Optional[_Union[ApplyWorkflow, _Mapping]] = ..., start_workflow_run: _Optional[_Union[StartWorkflowRun, _Mapping]] = ..., workflow_run_op: _Optional[_Union[_records_pb2.WorkflowRunOp, _Mapping]] = ..., start_backfill: _Optional[_Union[StartBackfill, _Mapping]] = ..., raise_alerts: _Optional[_Union[RaiseAlerts, _Mapping]] = ..., alerts_delivered: _Optional[_Union[AlertsDelivered, _Mapping]] = ..., ack_alert: _Optional[_Union[AckAlert, _Mapping]] = ..., create_token: _Optional[_Union[CreateToken, _Mapping]] = ..., revoke_token: _Optional[_Union[RevokeToken, _Mapping]] = ..., set_workflow_paused: _Optional[_Union[SetWorkflowPaused, _Mapping]] = ..., delete_workflow: _Optional[_Union[DeleteWorkflow, _Mapping]] = ..., set_quota: _Optional[_Union[SetQuota, _Mapping]] = ..., delete_quota: _Optional[_Union[DeleteQuota, _Mapping]] = ..., stage_workflow_tasks: _Optional[_Union[StageWorkflowTasks, _Mapping]] = ..., set_calendar: _Optional[_Union[SetCalendar, _Mapping]] = ..., delete_calendar: _Optional[_Union[DeleteCalendar, _Mapping]] = ..., seed_membership: _Optional[_Union[SeedMembership, _Mapping]] = ..., begin_member_change: _Optional[_Union[BeginMemberChange, _Mapping]] = ..., end_member_change: _Optional[_Union[EndMemberChange, _Mapping]] = ..., drain_executor: _Optional[_Union[DrainExecutor, _Mapping]] = ..., workflow_waits_due: _Optional[_Union[WorkflowWaitsDue, _Mapping]] = ..., emit_event: _Optional[_Union[EmitEvent, _Mapping]] = ..., set_pool: _Optional[_Union[SetPool, _Mapping]] = ..., delete_pool: _Optional[_Union[DeletePool, _Mapping]] = ..., start_task_backfill: _Optional[_Union[StartTaskBackfill, _Mapping]] = ..., cancel_runs: _Optional[_Union[CancelRuns, _Mapping]] = ..., fire_columns: _Optional[_Union[FireColumns, _Mapping]] = ..., assign_columns: _Optional[_Union[AssignColumns, _Mapping]] = ..., result_columns: _Optional[_Union[ResultColumns, _Mapping]] = ..., number_entities: _Optional[_Union[NumberEntities, _Mapping]] = ..., promote_hot_runs: _Optional[_Union[PromoteHotRuns, _Mapping]] = ..., audit: _Optional[_Union[AuditStamp, _Mapping]] = ...) -> None: ...

class CommandResult(_message.Message):
    __slots__ = ("ok", "code", "message", "task", "run", "fired", "accounted", "refused", "items", "workflow", "workflow_run", "backfill", "changed", "alert", "token", "runs_killed", "quota", "calendar", "membership", "event", "duplicate", "pool", "runs_cancelled", "cancelled_runs")
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
    ALERT_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    RUNS_KILLED_FIELD_NUMBER: _ClassVar[int]
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    MEMBERSHIP_FIELD_NUMBER: _ClassVar[int]
    EVENT_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    POOL_FIELD_NUMBER: _ClassVar[int]
    RUNS_CANCELLED_FIELD_NUMBER: _ClassVar[int]
    CANCELLED_RUNS_FIELD_NUMBER: _ClassVar[int]
    ok: bool
    code: str
    message: str
    task: _records_pb2.TaskRecord
    run: _records_pb2.Run
    fired: int
    accounted: int
    refused: int
    items: _containers.RepeatedCompositeFieldContainer[_records_pb2.ItemResult]
    workflow: _records_pb2.WorkflowRecord
    workflow_run: _records_pb2.WorkflowRun
    backfill: _records_pb2.BackfillRecord
    changed: bool
    alert: _records_pb2.AlertRecord
    token: _records_pb2.TokenInfo
    runs_killed: int
    quota: _records_pb2.QuotaRecord
    calendar: _records_pb2.CalendarRecord
    membership: _records_pb2.MembershipRecord
    event: _records_pb2.EventRecord
    duplicate: bool
    pool: _records_pb2.PoolRecord
    runs_cancelled: int
    cancelled_runs: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, ok: _Optional[bool] = ..., code: _Optional[str] = ..., message: _Optional[str] = ..., task: _Optional[_Union[_records_pb2.TaskRecord, _Mapping]] = ..., run: _Optional[_Union[_records_pb2.Run, _Mapping]] = ..., fired: _Optional[int] = ..., accounted: _Optional[int] = ..., refused: _Optional[int] = ..., items: _Optional[_Iterable[_Union[_records_pb2.ItemResult, _Mapping]]] = ..., workflow: _Optional[_Union[_records_pb2.WorkflowRecord, _Mapping]] = ..., workflow_run: _Optional[_Union[_records_pb2.WorkflowRun, _Mapping]] = ..., backfill: _Optional[_Union[_records_pb2.BackfillRecord, _Mapping]] = ..., changed: _Optional[bool] = ..., alert: _Optional[_Union[_records_pb2.AlertRecord, _Mapping]] = ..., token: _Optional[_Union[_records_pb2.TokenInfo, _Mapping]] = ..., runs_killed: _Optional[int] = ..., quota: _Optional[_Union[_records_pb2.QuotaRecord, _Mapping]] = ..., calendar: _Optional[_Union[_records_pb2.CalendarRecord, _Mapping]] = ..., membership: _Optional[_Union[_records_pb2.MembershipRecord, _Mapping]] = ..., event: _Optional[_Union[_records_pb2.EventRecord, _Mapping]] = ..., duplicate: _Optional[bool] = ..., pool: _Optional[_Union[_records_pb2.PoolRecord, _Mapping]] = ..., runs_cancelled: _Optional[int] = ..., cancelled_runs: _Optional[_Iterable[str]] = ...) -> None: ...

class ExecutorRecord(_message.Message):
    __slots__ = ("name", "slots", "labels", "alive", "joined_ms", "left_ms", "left_reason", "principal", "namespaces", "cpu", "memory_mb", "draining", "draining_ms", "draining_reason", "health_drain", "number")
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
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    CPU_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    DRAINING_FIELD_NUMBER: _ClassVar[int]
    DRAINING_MS_FIELD_NUMBER: _ClassVar[int]
    DRAINING_REASON_FIELD_NUMBER: _ClassVar[int]
    HEALTH_DRAIN_FIELD_NUMBER: _ClassVar[int]
    NUMBER_FIELD_NUMBER: _ClassVar[int]
    name: str
    slots: int
    labels: _containers.ScalarMap[str, str]
    alive: bool
    joined_ms: int
    left_ms: int
    left_reason: str
    principal: str
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    cpu: float
    memory_mb: int
    draining: bool
    draining_ms: int
    draining_reason: str
    health_drain: bool
    number: int
    def __init__(self, name: _Optional[str] = ..., slots: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., alive: _Optional[bool] = ..., joined_ms: _Optional[int] = ..., left_ms: _Optional[int] = ..., left_reason: _Optional[str] = ..., principal: _Optional[str] = ..., namespaces: _Optional[_Iterable[str]] = ..., cpu: _Optional[float] = ..., memory_mb: _Optional[int] = ..., draining: _Optional[bool] = ..., draining_ms: _Optional[int] = ..., draining_reason: _Optional[str] = ..., health_drain: _Optional[bool] = ..., number: _Optional[int] = ...) -> None: ...

class TokenRecord(_message.Message):
    __slots__ = ("info", "salt", "hash", "scrypt_n", "scrypt_r", "scrypt_p")
    INFO_FIELD_NUMBER: _ClassVar[int]
    SALT_FIELD_NUMBER: _ClassVar[int]
    HASH_FIELD_NUMBER: _ClassVar[int]
    SCRYPT_N_FIELD_NUMBER: _ClassVar[int]
    SCRYPT_R_FIELD_NUMBER: _ClassVar[int]
    SCRYPT_P_FIELD_NUMBER: _ClassVar[int]
    info: _records_pb2.TokenInfo
    salt: bytes
    hash: bytes
    scrypt_n: int
    scrypt_r: int
    scrypt_p: int
    def __init__(self, info: _Optional[_Union[_records_pb2.TokenInfo, _Mapping]] = ..., salt: _Optional[bytes] = ..., hash: _Optional[bytes] = ..., scrypt_n: _Optional[int] = ..., scrypt_r: _Optional[int] = ..., scrypt_p: _Optional[int] = ...) -> None: ...

class TaskCounters(_message.Message):
    __slots__ = ("task", "watermark_ms", "next_fire_ms", "active_runs", "fires_total", "runs_total", "kept_fires", "kept_runs")
    TASK_FIELD_NUMBER: _ClassVar[int]
    WATERMARK_MS_FIELD_NUMBER: _ClassVar[int]
    NEXT_FIRE_MS_FIELD_NUMBER: _ClassVar[int]
    ACTIVE_RUNS_FIELD_NUMBER: _ClassVar[int]
    FIRES_TOTAL_FIELD_NUMBER: _ClassVar[int]
    RUNS_TOTAL_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIRES_FIELD_NUMBER: _ClassVar[int]
    KEPT_RUNS_FIELD_NUMBER: _ClassVar[int]
    task: _containers.RepeatedScalarFieldContainer[str]
    watermark_ms: _containers.RepeatedScalarFieldContainer[int]
    next_fire_ms: _containers.RepeatedScalarFieldContainer[int]
    active_runs: _containers.RepeatedScalarFieldContainer[int]
    fires_total: _containers.RepeatedScalarFieldContainer[int]
    runs_total: _containers.RepeatedScalarFieldContainer[int]
    kept_fires: _containers.RepeatedScalarFieldContainer[int]
    kept_runs: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, task: _Optional[_Iterable[str]] = ..., watermark_ms: _Optional[_Iterable[int]] = ..., next_fire_ms: _Optional[_Iterable[int]] = ..., active_runs: _Optional[_Iterable[int]] = ..., fires_total: _Optional[_Iterable[int]] = ..., runs_total: _Optional[_Iterable[int]] = ..., kept_fires: _Optional[_Iterable[int]] = ..., kept_runs: _Optional[_Iterable[int]] = ...) -> None: ...

class Meta(_message.Message):
    __slots__ = ("max_epoch", "max_leader_now_ms", "manual_seq", "applied_commands", "chain", "alert_seq", "state_format", "event_seq", "next_seq", "next_task_no", "next_executor_no", "hot_checkpoint_index", "numbered_ms", "promotions_logged")
    MAX_EPOCH_FIELD_NUMBER: _ClassVar[int]
    MAX_LEADER_NOW_MS_FIELD_NUMBER: _ClassVar[int]
    MANUAL_SEQ_FIELD_NUMBER: _ClassVar[int]
    APPLIED_COMMANDS_FIELD_NUMBER: _ClassVar[int]
    CHAIN_FIELD_NUMBER: _ClassVar[int]
    ALERT_SEQ_FIELD_NUMBER: _ClassVar[int]
    STATE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    EVENT_SEQ_FIELD_NUMBER: _ClassVar[int]
    NEXT_SEQ_FIELD_NUMBER: _ClassVar[int]
    NEXT_TASK_NO_FIELD_NUMBER: _ClassVar[int]
    NEXT_EXECUTOR_NO_FIELD_NUMBER: _ClassVar[int]
    HOT_CHECKPOINT_INDEX_FIELD_NUMBER: _ClassVar[int]
    NUMBERED_MS_FIELD_NUMBER: _ClassVar[int]
    PROMOTIONS_LOGGED_FIELD_NUMBER: _ClassVar[int]
    max_epoch: int
    max_leader_now_ms: int
    manual_seq: int
    applied_commands: int
    chain: bytes
    alert_seq: int
    state_format: int
    event_seq: int
    next_seq: int
    next_task_no: int
    next_executor_no: int
    hot_checkpoint_index: int
    numbered_ms: int
    promotions_logged: bool
    def __init__(self, max_epoch: _Optional[int] = ..., max_leader_now_ms: _Optional[int] = ..., manual_seq: _Optional[int] = ..., applied_commands: _Optional[int] = ..., chain: _Optional[bytes] = ..., alert_seq: _Optional[int] = ..., state_format: _Optional[int] = ..., event_seq: _Optional[int] = ..., next_seq: _Optional[int] = ..., next_task_no: _Optional[int] = ..., next_executor_no: _Optional[int] = ..., hot_checkpoint_index: _Optional[int] = ..., numbered_ms: _Optional[int] = ..., promotions_logged: _Optional[bool] = ...) -> None: ...

class AlertCursor(_message.Message):
    __slots__ = ("target", "through_seq", "at_ms")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    THROUGH_SEQ_FIELD_NUMBER: _ClassVar[int]
    AT_MS_FIELD_NUMBER: _ClassVar[int]
    target: str
    through_seq: int
    at_ms: int
    def __init__(self, target: _Optional[str] = ..., through_seq: _Optional[int] = ..., at_ms: _Optional[int] = ...) -> None: ...

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

class WorkflowZone(_message.Message):
    __slots__ = ("zone", "transition_ms", "offset_s")
    ZONE_FIELD_NUMBER: _ClassVar[int]
    TRANSITION_MS_FIELD_NUMBER: _ClassVar[int]
    OFFSET_S_FIELD_NUMBER: _ClassVar[int]
    zone: str
    transition_ms: _containers.RepeatedScalarFieldContainer[int]
    offset_s: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, zone: _Optional[str] = ..., transition_ms: _Optional[_Iterable[int]] = ..., offset_s: _Optional[_Iterable[int]] = ...) -> None: ...

class WorkflowWaitsDue(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class CancelRuns(_message.Message):
    __slots__ = ("run_ids", "reason", "skip_finished", "shard")
    RUN_IDS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SKIP_FINISHED_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    run_ids: _containers.RepeatedScalarFieldContainer[str]
    reason: str
    skip_finished: bool
    shard: int
    def __init__(self, run_ids: _Optional[_Iterable[str]] = ..., reason: _Optional[str] = ..., skip_finished: _Optional[bool] = ..., shard: _Optional[int] = ...) -> None: ...

class FireColumns(_message.Message):
    __slots__ = ("task", "version", "nominal_delta", "next_delta")
    TASK_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_DELTA_FIELD_NUMBER: _ClassVar[int]
    NEXT_DELTA_FIELD_NUMBER: _ClassVar[int]
    task: _containers.RepeatedScalarFieldContainer[int]
    version: _containers.RepeatedScalarFieldContainer[int]
    nominal_delta: _containers.RepeatedScalarFieldContainer[int]
    next_delta: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, task: _Optional[_Iterable[int]] = ..., version: _Optional[_Iterable[int]] = ..., nominal_delta: _Optional[_Iterable[int]] = ..., next_delta: _Optional[_Iterable[int]] = ...) -> None: ...

class AssignColumns(_message.Message):
    __slots__ = ("seq", "shard", "attempt", "executor")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    seq: _containers.RepeatedScalarFieldContainer[int]
    shard: _containers.RepeatedScalarFieldContainer[int]
    attempt: _containers.RepeatedScalarFieldContainer[int]
    executor: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, seq: _Optional[_Iterable[int]] = ..., shard: _Optional[_Iterable[int]] = ..., attempt: _Optional[_Iterable[int]] = ..., executor: _Optional[_Iterable[int]] = ...) -> None: ...

class ResultColumns(_message.Message):
    __slots__ = ("seq", "attempt", "executor", "duration_ms", "lateness_ms")
    SEQ_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    LATENESS_MS_FIELD_NUMBER: _ClassVar[int]
    seq: _containers.RepeatedScalarFieldContainer[int]
    attempt: _containers.RepeatedScalarFieldContainer[int]
    executor: _containers.RepeatedScalarFieldContainer[int]
    duration_ms: _containers.RepeatedScalarFieldContainer[int]
    lateness_ms: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, seq: _Optional[_Iterable[int]] = ..., attempt: _Optional[_Iterable[int]] = ..., executor: _Optional[_Iterable[int]] = ..., duration_ms: _Optional[_Iterable[int]] = ..., lateness_ms: _Optional[_Iterable[int]] = ...) -> None: ...

class NumberEntities(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PromoteHotRuns(_message.Message):
    __slots__ = ("before_seq",)
    BEFORE_SEQ_FIELD_NUMBER: _ClassVar[int]
    before_seq: int
    def __init__(self, before_seq: _Optional[int] = ...) -> None: ...

class HotFires(_message.Message):
    __slots__ = ("seq_base", "now_ms", "epoch", "rows")
    SEQ_BASE_FIELD_NUMBER: _ClassVar[int]
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    seq_base: int
    now_ms: int
    epoch: int
    rows: FireColumns
    def __init__(self, seq_base: _Optional[int] = ..., now_ms: _Optional[int] = ..., epoch: _Optional[int] = ..., rows: _Optional[_Union[FireColumns, _Mapping]] = ...) -> None: ...

class HotAssigns(_message.Message):
    __slots__ = ("now_ms", "rows")
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    now_ms: int
    rows: AssignColumns
    def __init__(self, now_ms: _Optional[int] = ..., rows: _Optional[_Union[AssignColumns, _Mapping]] = ...) -> None: ...

class HotResults(_message.Message):
    __slots__ = ("now_ms", "rows")
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    ROWS_FIELD_NUMBER: _ClassVar[int]
    now_ms: int
    rows: ResultColumns
    def __init__(self, now_ms: _Optional[int] = ..., rows: _Optional[_Union[ResultColumns, _Mapping]] = ...) -> None: ...

class HotPromoted(_message.Message):
    __slots__ = ("seq",)
    SEQ_FIELD_NUMBER: _ClassVar[int]
    seq: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, seq: _Optional[_Iterable[int]] = ...) -> None: ...

class HotCheckpoint(_message.Message):
    __slots__ = ("seq_base", "task", "version", "nominal_ms", "state", "executor", "attempt", "assigned_ms", "created_ms", "epoch")
    SEQ_BASE_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    ASSIGNED_MS_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    seq_base: int
    task: _containers.RepeatedScalarFieldContainer[int]
    version: _containers.RepeatedScalarFieldContainer[int]
    nominal_ms: _containers.RepeatedScalarFieldContainer[int]
    state: _containers.RepeatedScalarFieldContainer[int]
    executor: _containers.RepeatedScalarFieldContainer[int]
    attempt: _containers.RepeatedScalarFieldContainer[int]
    assigned_ms: _containers.RepeatedScalarFieldContainer[int]
    created_ms: _containers.RepeatedScalarFieldContainer[int]
    epoch: _containers.RepeatedScalarFieldContainer[int]
    def __init__(self, seq_base: _Optional[int] = ..., task: _Optional[_Iterable[int]] = ..., version: _Optional[_Iterable[int]] = ..., nominal_ms: _Optional[_Iterable[int]] = ..., state: _Optional[_Iterable[int]] = ..., executor: _Optional[_Iterable[int]] = ..., attempt: _Optional[_Iterable[int]] = ..., assigned_ms: _Optional[_Iterable[int]] = ..., created_ms: _Optional[_Iterable[int]] = ..., epoch: _Optional[_Iterable[int]] = ...) -> None: ...
