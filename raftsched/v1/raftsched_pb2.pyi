from raftsched.v1 import records_pb2 as _records_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
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

class ExecutorState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    EXECUTOR_STATE_UNSPECIFIED: _ClassVar[ExecutorState]
    EXECUTOR_ALIVE: _ClassVar[ExecutorState]
    EXECUTOR_LEFT: _ClassVar[ExecutorState]
    EXECUTOR_DRAINING: _ClassVar[ExecutorState]
    EXECUTOR_DRAINED: _ClassVar[ExecutorState]
EXECUTOR_STATE_UNSPECIFIED: ExecutorState
EXECUTOR_ALIVE: ExecutorState
EXECUTOR_LEFT: ExecutorState
EXECUTOR_DRAINING: ExecutorState
EXECUTOR_DRAINED: ExecutorState

class AddTaskRequest(_message.Message):
    __slots__ = ("spec", "disabled", "idempotency_key")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    DISABLED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    spec: _records_pb2.TaskSpec
    disabled: bool
    idempotency_key: str
    def __init__(self, spec: _Optional[_Union[_records_pb2.TaskSpec, _Mapping]] = ..., disabled: _Optional[bool] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

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
    results: _containers.RepeatedCompositeFieldContainer[_records_pb2.ItemResult]
    def __init__(self, results: _Optional[_Iterable[_Union[_records_pb2.ItemResult, _Mapping]]] = ...) -> None: ...

class UpdateTaskRequest(_message.Message):
    __slots__ = ("spec", "expected_version", "idempotency_key")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    spec: _records_pb2.TaskSpec
    expected_version: int
    idempotency_key: str
    def __init__(self, spec: _Optional[_Union[_records_pb2.TaskSpec, _Mapping]] = ..., expected_version: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

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
    task: _records_pb2.TaskRecord
    def __init__(self, task: _Optional[_Union[_records_pb2.TaskRecord, _Mapping]] = ...) -> None: ...

class DeleteTaskReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetTaskRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListTasksRequest(_message.Message):
    __slots__ = ("prefix", "limit", "page_token", "page_size", "recent_fires")
    PREFIX_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    RECENT_FIRES_FIELD_NUMBER: _ClassVar[int]
    prefix: str
    limit: int
    page_token: str
    page_size: int
    recent_fires: int
    def __init__(self, prefix: _Optional[str] = ..., limit: _Optional[int] = ..., page_token: _Optional[str] = ..., page_size: _Optional[int] = ..., recent_fires: _Optional[int] = ...) -> None: ...

class ListTasksReply(_message.Message):
    __slots__ = ("tasks", "next_page_token", "recent")
    TASKS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RECENT_FIELD_NUMBER: _ClassVar[int]
    tasks: _containers.RepeatedCompositeFieldContainer[_records_pb2.TaskRecord]
    next_page_token: str
    recent: _containers.RepeatedCompositeFieldContainer[RecentFires]
    def __init__(self, tasks: _Optional[_Iterable[_Union[_records_pb2.TaskRecord, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., recent: _Optional[_Iterable[_Union[RecentFires, _Mapping]]] = ...) -> None: ...

class RecentFires(_message.Message):
    __slots__ = ("task", "fires", "run_states")
    TASK_FIELD_NUMBER: _ClassVar[int]
    FIRES_FIELD_NUMBER: _ClassVar[int]
    RUN_STATES_FIELD_NUMBER: _ClassVar[int]
    task: str
    fires: _containers.RepeatedCompositeFieldContainer[_records_pb2.FireRecord]
    run_states: _containers.RepeatedScalarFieldContainer[_records_pb2.RunState]
    def __init__(self, task: _Optional[str] = ..., fires: _Optional[_Iterable[_Union[_records_pb2.FireRecord, _Mapping]]] = ..., run_states: _Optional[_Iterable[_Union[_records_pb2.RunState, str]]] = ...) -> None: ...

class GetRunRequest(_message.Message):
    __slots__ = ("run_id",)
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    def __init__(self, run_id: _Optional[str] = ...) -> None: ...

class RunReply(_message.Message):
    __slots__ = ("run",)
    RUN_FIELD_NUMBER: _ClassVar[int]
    run: _records_pb2.Run
    def __init__(self, run: _Optional[_Union[_records_pb2.Run, _Mapping]] = ...) -> None: ...

class ListRunsRequest(_message.Message):
    __slots__ = ("task", "since_ms", "until_ms", "state", "limit", "page_token", "page_size")
    TASK_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    task: str
    since_ms: int
    until_ms: int
    state: _records_pb2.RunState
    limit: int
    page_token: str
    page_size: int
    def __init__(self, task: _Optional[str] = ..., since_ms: _Optional[int] = ..., until_ms: _Optional[int] = ..., state: _Optional[_Union[_records_pb2.RunState, str]] = ..., limit: _Optional[int] = ..., page_token: _Optional[str] = ..., page_size: _Optional[int] = ...) -> None: ...

class ListRunsReply(_message.Message):
    __slots__ = ("runs", "next_page_token")
    RUNS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    runs: _containers.RepeatedCompositeFieldContainer[_records_pb2.Run]
    next_page_token: str
    def __init__(self, runs: _Optional[_Iterable[_Union[_records_pb2.Run, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class FireAccountingRequest(_message.Message):
    __slots__ = ("task", "since_ms", "until_ms", "limit", "newest")
    TASK_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    UNTIL_MS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    NEWEST_FIELD_NUMBER: _ClassVar[int]
    task: str
    since_ms: int
    until_ms: int
    limit: int
    newest: bool
    def __init__(self, task: _Optional[str] = ..., since_ms: _Optional[int] = ..., until_ms: _Optional[int] = ..., limit: _Optional[int] = ..., newest: _Optional[bool] = ...) -> None: ...

class FireAccountingReply(_message.Message):
    __slots__ = ("fires",)
    FIRES_FIELD_NUMBER: _ClassVar[int]
    fires: _containers.RepeatedCompositeFieldContainer[_records_pb2.FireRecord]
    def __init__(self, fires: _Optional[_Iterable[_Union[_records_pb2.FireRecord, _Mapping]]] = ...) -> None: ...

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
    fire: _records_pb2.FireRecord
    run: _records_pb2.Run
    def __init__(self, verdict: _Optional[str] = ..., details: _Optional[_Iterable[str]] = ..., fire: _Optional[_Union[_records_pb2.FireRecord, _Mapping]] = ..., run: _Optional[_Union[_records_pb2.Run, _Mapping]] = ...) -> None: ...

class ClusterStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PeerStatus(_message.Message):
    __slots__ = ("node_id", "raft", "connected", "match_index", "refused")
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    RAFT_FIELD_NUMBER: _ClassVar[int]
    CONNECTED_FIELD_NUMBER: _ClassVar[int]
    MATCH_INDEX_FIELD_NUMBER: _ClassVar[int]
    REFUSED_FIELD_NUMBER: _ClassVar[int]
    node_id: str
    raft: str
    connected: bool
    match_index: int
    refused: str
    def __init__(self, node_id: _Optional[str] = ..., raft: _Optional[str] = ..., connected: _Optional[bool] = ..., match_index: _Optional[int] = ..., refused: _Optional[str] = ...) -> None: ...

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
    __slots__ = ("node_id", "raft", "grpc", "role", "leader_id", "leader_grpc", "term", "commit_index", "applied_index", "tasks", "active_runs", "state_digest", "max_leader_now_ms", "max_epoch", "log_len", "fires_committed", "commit_lateness", "apply_lateness", "rss_bytes", "chain", "chain_at_index", "content_digest", "accepted_commands", "raft_peers", "membership", "config_mismatch", "raft_members", "command_format", "snapshot_format", "build_version", "state_format", "clock_offset_ms", "clock_skew_ms", "clock_known", "clock_faulty", "contact_age_ms", "read_barriers", "reads_refused", "store_damaged", "content_sum_at_index", "retention")
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
    CONTENT_DIGEST_FIELD_NUMBER: _ClassVar[int]
    ACCEPTED_COMMANDS_FIELD_NUMBER: _ClassVar[int]
    RAFT_PEERS_FIELD_NUMBER: _ClassVar[int]
    MEMBERSHIP_FIELD_NUMBER: _ClassVar[int]
    CONFIG_MISMATCH_FIELD_NUMBER: _ClassVar[int]
    RAFT_MEMBERS_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FORMAT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FORMAT_FIELD_NUMBER: _ClassVar[int]
    BUILD_VERSION_FIELD_NUMBER: _ClassVar[int]
    STATE_FORMAT_FIELD_NUMBER: _ClassVar[int]
    CLOCK_OFFSET_MS_FIELD_NUMBER: _ClassVar[int]
    CLOCK_SKEW_MS_FIELD_NUMBER: _ClassVar[int]
    CLOCK_KNOWN_FIELD_NUMBER: _ClassVar[int]
    CLOCK_FAULTY_FIELD_NUMBER: _ClassVar[int]
    CONTACT_AGE_MS_FIELD_NUMBER: _ClassVar[int]
    READ_BARRIERS_FIELD_NUMBER: _ClassVar[int]
    READS_REFUSED_FIELD_NUMBER: _ClassVar[int]
    STORE_DAMAGED_FIELD_NUMBER: _ClassVar[int]
    CONTENT_SUM_AT_INDEX_FIELD_NUMBER: _ClassVar[int]
    RETENTION_FIELD_NUMBER: _ClassVar[int]
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
    content_digest: str
    accepted_commands: int
    raft_peers: _containers.RepeatedCompositeFieldContainer[PeerStatus]
    membership: _records_pb2.MembershipRecord
    config_mismatch: str
    raft_members: _containers.RepeatedScalarFieldContainer[str]
    command_format: int
    snapshot_format: int
    build_version: str
    state_format: int
    clock_offset_ms: int
    clock_skew_ms: int
    clock_known: bool
    clock_faulty: bool
    contact_age_ms: int
    read_barriers: int
    reads_refused: int
    store_damaged: str
    content_sum_at_index: str
    retention: str
    def __init__(self, node_id: _Optional[str] = ..., raft: _Optional[str] = ..., grpc: _Optional[str] = ..., role: _Optional[str] = ..., leader_id: _Optional[str] = ..., leader_grpc: _Optional[str] = ..., term: _Optional[int] = ..., commit_index: _Optional[int] = ..., applied_index: _Optional[int] = ..., tasks: _Optional[int] = ..., active_runs: _Optional[int] = ..., state_digest: _Optional[str] = ..., max_leader_now_ms: _Optional[int] = ..., max_epoch: _Optional[int] = ..., log_len: _Optional[int] = ..., fires_committed: _Optional[int] = ..., commit_lateness: _Optional[_Union[LatencySummary, _Mapping]] = ..., apply_lateness: _Optional[_Union[LatencySummary, _Mapping]] = ..., rss_bytes: _Optional[int] = ..., chain: _Optional[str] = ..., chain_at_index: _Optional[str] = ..., content_digest: _Optional[str] = ..., accepted_commands: _Optional[int] = ..., raft_peers: _Optional[_Iterable[_Union[PeerStatus, _Mapping]]] = ..., membership: _Optional[_Union[_records_pb2.MembershipRecord, _Mapping]] = ..., config_mismatch: _Optional[str] = ..., raft_members: _Optional[_Iterable[str]] = ..., command_format: _Optional[int] = ..., snapshot_format: _Optional[int] = ..., build_version: _Optional[str] = ..., state_format: _Optional[int] = ..., clock_offset_ms: _Optional[int] = ..., clock_skew_ms: _Optional[int] = ..., clock_known: _Optional[bool] = ..., clock_faulty: _Optional[bool] = ..., contact_age_ms: _Optional[int] = ..., read_barriers: _Optional[int] = ..., reads_refused: _Optional[int] = ..., store_damaged: _Optional[str] = ..., content_sum_at_index: _Optional[str] = ..., retention: _Optional[str] = ...) -> None: ...

class ClusterStatusReply(_message.Message):
    __slots__ = ("self", "peers")
    SELF_FIELD_NUMBER: _ClassVar[int]
    PEERS_FIELD_NUMBER: _ClassVar[int]
    self: NodeStatusReply
    peers: _containers.RepeatedCompositeFieldContainer[PeerStatus]
    def __init__(self_, self: _Optional[_Union[NodeStatusReply, _Mapping]] = ..., peers: _Optional[_Iterable[_Union[PeerStatus, _Mapping]]] = ...) -> None: ...

class ApplyWorkflowRequest(_message.Message):
    __slots__ = ("spec", "idempotency_key", "expected_version")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    spec: _records_pb2.WorkflowSpec
    idempotency_key: str
    expected_version: int
    def __init__(self, spec: _Optional[_Union[_records_pb2.WorkflowSpec, _Mapping]] = ..., idempotency_key: _Optional[str] = ..., expected_version: _Optional[int] = ...) -> None: ...

class WorkflowReply(_message.Message):
    __slots__ = ("workflow", "changed")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    CHANGED_FIELD_NUMBER: _ClassVar[int]
    workflow: _records_pb2.WorkflowRecord
    changed: bool
    def __init__(self, workflow: _Optional[_Union[_records_pb2.WorkflowRecord, _Mapping]] = ..., changed: _Optional[bool] = ...) -> None: ...

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
    workflows: _containers.RepeatedCompositeFieldContainer[_records_pb2.WorkflowRecord]
    def __init__(self, workflows: _Optional[_Iterable[_Union[_records_pb2.WorkflowRecord, _Mapping]]] = ...) -> None: ...

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
    run: _records_pb2.WorkflowRun
    def __init__(self, run: _Optional[_Union[_records_pb2.WorkflowRun, _Mapping]] = ...) -> None: ...

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
    runs: _containers.RepeatedCompositeFieldContainer[_records_pb2.WorkflowRun]
    def __init__(self, runs: _Optional[_Iterable[_Union[_records_pb2.WorkflowRun, _Mapping]]] = ...) -> None: ...

class SetWorkflowPausedRequest(_message.Message):
    __slots__ = ("name", "paused", "idempotency_key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    PAUSED_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    paused: bool
    idempotency_key: str
    def __init__(self, name: _Optional[str] = ..., paused: _Optional[bool] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class DeleteWorkflowRequest(_message.Message):
    __slots__ = ("name", "force", "reason", "idempotency_key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    FORCE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    force: bool
    reason: str
    idempotency_key: str
    def __init__(self, name: _Optional[str] = ..., force: _Optional[bool] = ..., reason: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class DeleteWorkflowReply(_message.Message):
    __slots__ = ("workflow", "runs_killed")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    RUNS_KILLED_FIELD_NUMBER: _ClassVar[int]
    workflow: _records_pb2.WorkflowRecord
    runs_killed: int
    def __init__(self, workflow: _Optional[_Union[_records_pb2.WorkflowRecord, _Mapping]] = ..., runs_killed: _Optional[int] = ...) -> None: ...

class WorkflowRunOpRequest(_message.Message):
    __slots__ = ("op", "run_id", "task", "reason", "idempotency_key")
    OP_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    op: _records_pb2.WorkflowRunOp.Op
    run_id: str
    task: str
    reason: str
    idempotency_key: str
    def __init__(self, op: _Optional[_Union[_records_pb2.WorkflowRunOp.Op, str]] = ..., run_id: _Optional[str] = ..., task: _Optional[str] = ..., reason: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

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
    backfill: _records_pb2.BackfillRecord
    def __init__(self, backfill: _Optional[_Union[_records_pb2.BackfillRecord, _Mapping]] = ...) -> None: ...

class GetBackfillRequest(_message.Message):
    __slots__ = ("backfill_id",)
    BACKFILL_ID_FIELD_NUMBER: _ClassVar[int]
    backfill_id: str
    def __init__(self, backfill_id: _Optional[str] = ...) -> None: ...

class ListBackfillsRequest(_message.Message):
    __slots__ = ("workflow", "task")
    WORKFLOW_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    workflow: str
    task: str
    def __init__(self, workflow: _Optional[str] = ..., task: _Optional[str] = ...) -> None: ...

class ListBackfillsReply(_message.Message):
    __slots__ = ("backfills",)
    BACKFILLS_FIELD_NUMBER: _ClassVar[int]
    backfills: _containers.RepeatedCompositeFieldContainer[_records_pb2.BackfillRecord]
    def __init__(self, backfills: _Optional[_Iterable[_Union[_records_pb2.BackfillRecord, _Mapping]]] = ...) -> None: ...

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

class SetQuotaRequest(_message.Message):
    __slots__ = ("quota", "idempotency_key")
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    quota: _records_pb2.QuotaRecord
    idempotency_key: str
    def __init__(self, quota: _Optional[_Union[_records_pb2.QuotaRecord, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class QuotaReply(_message.Message):
    __slots__ = ("quota",)
    QUOTA_FIELD_NUMBER: _ClassVar[int]
    quota: _records_pb2.QuotaRecord
    def __init__(self, quota: _Optional[_Union[_records_pb2.QuotaRecord, _Mapping]] = ...) -> None: ...

class DeleteQuotaRequest(_message.Message):
    __slots__ = ("kind", "name", "idempotency_key")
    KIND_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    kind: str
    name: str
    idempotency_key: str
    def __init__(self, kind: _Optional[str] = ..., name: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class ListQuotasRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListQuotasReply(_message.Message):
    __slots__ = ("quotas",)
    QUOTAS_FIELD_NUMBER: _ClassVar[int]
    quotas: _containers.RepeatedCompositeFieldContainer[_records_pb2.QuotaRecord]
    def __init__(self, quotas: _Optional[_Iterable[_Union[_records_pb2.QuotaRecord, _Mapping]]] = ...) -> None: ...

class LockHolder(_message.Message):
    __slots__ = ("execution_id", "task", "shared", "since_ms", "reason")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    SHARED_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    task: str
    shared: bool
    since_ms: int
    reason: str
    def __init__(self, execution_id: _Optional[str] = ..., task: _Optional[str] = ..., shared: _Optional[bool] = ..., since_ms: _Optional[int] = ..., reason: _Optional[str] = ...) -> None: ...

class LockInfo(_message.Message):
    __slots__ = ("name", "holders", "waiters")
    NAME_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    WAITERS_FIELD_NUMBER: _ClassVar[int]
    name: str
    holders: _containers.RepeatedCompositeFieldContainer[LockHolder]
    waiters: _containers.RepeatedCompositeFieldContainer[LockHolder]
    def __init__(self, name: _Optional[str] = ..., holders: _Optional[_Iterable[_Union[LockHolder, _Mapping]]] = ..., waiters: _Optional[_Iterable[_Union[LockHolder, _Mapping]]] = ...) -> None: ...

class ListLocksRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListLocksReply(_message.Message):
    __slots__ = ("locks",)
    LOCKS_FIELD_NUMBER: _ClassVar[int]
    locks: _containers.RepeatedCompositeFieldContainer[LockInfo]
    def __init__(self, locks: _Optional[_Iterable[_Union[LockInfo, _Mapping]]] = ...) -> None: ...

class CreateTokenRequest(_message.Message):
    __slots__ = ("token", "role", "namespaces", "ttl_ms", "description", "idempotency_key")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    NAMESPACES_FIELD_NUMBER: _ClassVar[int]
    TTL_MS_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    token: str
    role: str
    namespaces: _containers.RepeatedScalarFieldContainer[str]
    ttl_ms: int
    description: str
    idempotency_key: str
    def __init__(self, token: _Optional[str] = ..., role: _Optional[str] = ..., namespaces: _Optional[_Iterable[str]] = ..., ttl_ms: _Optional[int] = ..., description: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class TokenReply(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: _records_pb2.TokenInfo
    def __init__(self, token: _Optional[_Union[_records_pb2.TokenInfo, _Mapping]] = ...) -> None: ...

class ListTokensRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListTokensReply(_message.Message):
    __slots__ = ("tokens",)
    TOKENS_FIELD_NUMBER: _ClassVar[int]
    tokens: _containers.RepeatedCompositeFieldContainer[_records_pb2.TokenInfo]
    def __init__(self, tokens: _Optional[_Iterable[_Union[_records_pb2.TokenInfo, _Mapping]]] = ...) -> None: ...

class RevokeTokenRequest(_message.Message):
    __slots__ = ("id", "idempotency_key")
    ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    id: str
    idempotency_key: str
    def __init__(self, id: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class ListAuditRequest(_message.Message):
    __slots__ = ("since_ms", "principal", "limit")
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    PRINCIPAL_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    since_ms: int
    principal: str
    limit: int
    def __init__(self, since_ms: _Optional[int] = ..., principal: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListAuditReply(_message.Message):
    __slots__ = ("records",)
    RECORDS_FIELD_NUMBER: _ClassVar[int]
    records: _containers.RepeatedCompositeFieldContainer[_records_pb2.AuditRecord]
    def __init__(self, records: _Optional[_Iterable[_Union[_records_pb2.AuditRecord, _Mapping]]] = ...) -> None: ...

class ListAlertsRequest(_message.Message):
    __slots__ = ("since_ms", "limit")
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    since_ms: int
    limit: int
    def __init__(self, since_ms: _Optional[int] = ..., limit: _Optional[int] = ...) -> None: ...

class AlertDelivery(_message.Message):
    __slots__ = ("target", "state")
    TARGET_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    target: str
    state: str
    def __init__(self, target: _Optional[str] = ..., state: _Optional[str] = ...) -> None: ...

class AlertInfo(_message.Message):
    __slots__ = ("alert", "deliveries", "link")
    ALERT_FIELD_NUMBER: _ClassVar[int]
    DELIVERIES_FIELD_NUMBER: _ClassVar[int]
    LINK_FIELD_NUMBER: _ClassVar[int]
    alert: _records_pb2.AlertRecord
    deliveries: _containers.RepeatedCompositeFieldContainer[AlertDelivery]
    link: str
    def __init__(self, alert: _Optional[_Union[_records_pb2.AlertRecord, _Mapping]] = ..., deliveries: _Optional[_Iterable[_Union[AlertDelivery, _Mapping]]] = ..., link: _Optional[str] = ...) -> None: ...

class ListAlertsReply(_message.Message):
    __slots__ = ("alerts",)
    ALERTS_FIELD_NUMBER: _ClassVar[int]
    alerts: _containers.RepeatedCompositeFieldContainer[AlertInfo]
    def __init__(self, alerts: _Optional[_Iterable[_Union[AlertInfo, _Mapping]]] = ...) -> None: ...

class AckAlertRequest(_message.Message):
    __slots__ = ("id", "idempotency_key")
    ID_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    id: str
    idempotency_key: str
    def __init__(self, id: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class AckAlertReply(_message.Message):
    __slots__ = ("alert",)
    ALERT_FIELD_NUMBER: _ClassVar[int]
    alert: _records_pb2.AlertRecord
    def __init__(self, alert: _Optional[_Union[_records_pb2.AlertRecord, _Mapping]] = ...) -> None: ...

class AddNodeRequest(_message.Message):
    __slots__ = ("member",)
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    member: _records_pb2.Member
    def __init__(self, member: _Optional[_Union[_records_pb2.Member, _Mapping]] = ...) -> None: ...

class RemoveNodeRequest(_message.Message):
    __slots__ = ("id",)
    ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    def __init__(self, id: _Optional[str] = ...) -> None: ...

class GetMembershipRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class MembershipReply(_message.Message):
    __slots__ = ("membership", "note")
    MEMBERSHIP_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    membership: _records_pb2.MembershipRecord
    note: str
    def __init__(self, membership: _Optional[_Union[_records_pb2.MembershipRecord, _Mapping]] = ..., note: _Optional[str] = ...) -> None: ...

class ListExecutorsRequest(_message.Message):
    __slots__ = ("include_left",)
    INCLUDE_LEFT_FIELD_NUMBER: _ClassVar[int]
    include_left: bool
    def __init__(self, include_left: _Optional[bool] = ...) -> None: ...

class ExecutorInfo(_message.Message):
    __slots__ = ("name", "state", "slots", "slots_used", "labels", "joined_ms", "left_ms", "left_reason", "last_heartbeat_ms", "address", "cpu", "memory_mb", "cpu_used", "memory_used_mb", "draining_ms", "draining_reason", "clock_offset_ms", "disk_used", "log_used", "health_drain")
    class LabelsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: str
        def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...
    NAME_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    SLOTS_FIELD_NUMBER: _ClassVar[int]
    SLOTS_USED_FIELD_NUMBER: _ClassVar[int]
    LABELS_FIELD_NUMBER: _ClassVar[int]
    JOINED_MS_FIELD_NUMBER: _ClassVar[int]
    LEFT_MS_FIELD_NUMBER: _ClassVar[int]
    LEFT_REASON_FIELD_NUMBER: _ClassVar[int]
    LAST_HEARTBEAT_MS_FIELD_NUMBER: _ClassVar[int]
    ADDRESS_FIELD_NUMBER: _ClassVar[int]
    CPU_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    CPU_USED_FIELD_NUMBER: _ClassVar[int]
    MEMORY_USED_MB_FIELD_NUMBER: _ClassVar[int]
    DRAINING_MS_FIELD_NUMBER: _ClassVar[int]
    DRAINING_REASON_FIELD_NUMBER: _ClassVar[int]
    CLOCK_OFFSET_MS_FIELD_NUMBER: _ClassVar[int]
    DISK_USED_FIELD_NUMBER: _ClassVar[int]
    LOG_USED_FIELD_NUMBER: _ClassVar[int]
    HEALTH_DRAIN_FIELD_NUMBER: _ClassVar[int]
    name: str
    state: ExecutorState
    slots: int
    slots_used: int
    labels: _containers.ScalarMap[str, str]
    joined_ms: int
    left_ms: int
    left_reason: str
    last_heartbeat_ms: int
    address: str
    cpu: float
    memory_mb: int
    cpu_used: float
    memory_used_mb: int
    draining_ms: int
    draining_reason: str
    clock_offset_ms: int
    disk_used: float
    log_used: float
    health_drain: bool
    def __init__(self, name: _Optional[str] = ..., state: _Optional[_Union[ExecutorState, str]] = ..., slots: _Optional[int] = ..., slots_used: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., joined_ms: _Optional[int] = ..., left_ms: _Optional[int] = ..., left_reason: _Optional[str] = ..., last_heartbeat_ms: _Optional[int] = ..., address: _Optional[str] = ..., cpu: _Optional[float] = ..., memory_mb: _Optional[int] = ..., cpu_used: _Optional[float] = ..., memory_used_mb: _Optional[int] = ..., draining_ms: _Optional[int] = ..., draining_reason: _Optional[str] = ..., clock_offset_ms: _Optional[int] = ..., disk_used: _Optional[float] = ..., log_used: _Optional[float] = ..., health_drain: _Optional[bool] = ...) -> None: ...

class DrainExecutorRequest(_message.Message):
    __slots__ = ("name", "reason", "idempotency_key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    reason: str
    idempotency_key: str
    def __init__(self, name: _Optional[str] = ..., reason: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class DrainExecutorReply(_message.Message):
    __slots__ = ("executor",)
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    executor: ExecutorInfo
    def __init__(self, executor: _Optional[_Union[ExecutorInfo, _Mapping]] = ...) -> None: ...

class BackupRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class BackupHeader(_message.Message):
    __slots__ = ("backup_format", "snapshot_format", "log_index", "term", "node_id", "created_ms", "payload_bytes", "entries", "chain", "build_version")
    BACKUP_FORMAT_FIELD_NUMBER: _ClassVar[int]
    SNAPSHOT_FORMAT_FIELD_NUMBER: _ClassVar[int]
    LOG_INDEX_FIELD_NUMBER: _ClassVar[int]
    TERM_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_MS_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_BYTES_FIELD_NUMBER: _ClassVar[int]
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    CHAIN_FIELD_NUMBER: _ClassVar[int]
    BUILD_VERSION_FIELD_NUMBER: _ClassVar[int]
    backup_format: int
    snapshot_format: int
    log_index: int
    term: int
    node_id: str
    created_ms: int
    payload_bytes: int
    entries: int
    chain: str
    build_version: str
    def __init__(self, backup_format: _Optional[int] = ..., snapshot_format: _Optional[int] = ..., log_index: _Optional[int] = ..., term: _Optional[int] = ..., node_id: _Optional[str] = ..., created_ms: _Optional[int] = ..., payload_bytes: _Optional[int] = ..., entries: _Optional[int] = ..., chain: _Optional[str] = ..., build_version: _Optional[str] = ...) -> None: ...

class BackupChunk(_message.Message):
    __slots__ = ("header", "data", "sha256")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    header: BackupHeader
    data: bytes
    sha256: bytes
    def __init__(self, header: _Optional[_Union[BackupHeader, _Mapping]] = ..., data: _Optional[bytes] = ..., sha256: _Optional[bytes] = ...) -> None: ...

class ListExecutorsReply(_message.Message):
    __slots__ = ("executors", "node_id", "leader_view")
    EXECUTORS_FIELD_NUMBER: _ClassVar[int]
    NODE_ID_FIELD_NUMBER: _ClassVar[int]
    LEADER_VIEW_FIELD_NUMBER: _ClassVar[int]
    executors: _containers.RepeatedCompositeFieldContainer[ExecutorInfo]
    node_id: str
    leader_view: bool
    def __init__(self, executors: _Optional[_Iterable[_Union[ExecutorInfo, _Mapping]]] = ..., node_id: _Optional[str] = ..., leader_view: _Optional[bool] = ...) -> None: ...

class EmitEventRequest(_message.Message):
    __slots__ = ("name", "key", "payload_json", "namespace", "idempotency_key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    PAYLOAD_JSON_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    key: str
    payload_json: str
    namespace: str
    idempotency_key: str
    def __init__(self, name: _Optional[str] = ..., key: _Optional[str] = ..., payload_json: _Optional[str] = ..., namespace: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class EmitEventReply(_message.Message):
    __slots__ = ("event", "duplicate")
    EVENT_FIELD_NUMBER: _ClassVar[int]
    DUPLICATE_FIELD_NUMBER: _ClassVar[int]
    event: _records_pb2.EventRecord
    duplicate: bool
    def __init__(self, event: _Optional[_Union[_records_pb2.EventRecord, _Mapping]] = ..., duplicate: _Optional[bool] = ...) -> None: ...

class ListEventsRequest(_message.Message):
    __slots__ = ("name", "limit")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    name: str
    limit: int
    def __init__(self, name: _Optional[str] = ..., limit: _Optional[int] = ...) -> None: ...

class ListEventsReply(_message.Message):
    __slots__ = ("events",)
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[_records_pb2.EventRecord]
    def __init__(self, events: _Optional[_Iterable[_Union[_records_pb2.EventRecord, _Mapping]]] = ...) -> None: ...

class SetCalendarRequest(_message.Message):
    __slots__ = ("spec", "idempotency_key")
    SPEC_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    spec: _records_pb2.CalendarSpec
    idempotency_key: str
    def __init__(self, spec: _Optional[_Union[_records_pb2.CalendarSpec, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class CalendarReply(_message.Message):
    __slots__ = ("calendar", "used_by")
    CALENDAR_FIELD_NUMBER: _ClassVar[int]
    USED_BY_FIELD_NUMBER: _ClassVar[int]
    calendar: _records_pb2.CalendarRecord
    used_by: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, calendar: _Optional[_Union[_records_pb2.CalendarRecord, _Mapping]] = ..., used_by: _Optional[_Iterable[str]] = ...) -> None: ...

class GetCalendarRequest(_message.Message):
    __slots__ = ("name",)
    NAME_FIELD_NUMBER: _ClassVar[int]
    name: str
    def __init__(self, name: _Optional[str] = ...) -> None: ...

class ListCalendarsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ListCalendarsReply(_message.Message):
    __slots__ = ("calendars",)
    CALENDARS_FIELD_NUMBER: _ClassVar[int]
    calendars: _containers.RepeatedCompositeFieldContainer[_records_pb2.CalendarRecord]
    def __init__(self, calendars: _Optional[_Iterable[_Union[_records_pb2.CalendarRecord, _Mapping]]] = ...) -> None: ...

class DeleteCalendarRequest(_message.Message):
    __slots__ = ("name", "idempotency_key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    idempotency_key: str
    def __init__(self, name: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class DeleteCalendarReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class RegisterRequest(_message.Message):
    __slots__ = ("name", "slots", "labels", "cpu", "memory_mb")
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
    CPU_FIELD_NUMBER: _ClassVar[int]
    MEMORY_MB_FIELD_NUMBER: _ClassVar[int]
    name: str
    slots: int
    labels: _containers.ScalarMap[str, str]
    cpu: float
    memory_mb: int
    def __init__(self, name: _Optional[str] = ..., slots: _Optional[int] = ..., labels: _Optional[_Mapping[str, str]] = ..., cpu: _Optional[float] = ..., memory_mb: _Optional[int] = ...) -> None: ...

class RegisterReply(_message.Message):
    __slots__ = ("epoch", "lease_ms", "heartbeat_ms", "leader_now_ms", "health_drained", "partial_heartbeats", "session_version")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    LEASE_MS_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_MS_FIELD_NUMBER: _ClassVar[int]
    LEADER_NOW_MS_FIELD_NUMBER: _ClassVar[int]
    HEALTH_DRAINED_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_HEARTBEATS_FIELD_NUMBER: _ClassVar[int]
    SESSION_VERSION_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    lease_ms: int
    heartbeat_ms: int
    leader_now_ms: int
    health_drained: bool
    partial_heartbeats: bool
    session_version: int
    def __init__(self, epoch: _Optional[int] = ..., lease_ms: _Optional[int] = ..., heartbeat_ms: _Optional[int] = ..., leader_now_ms: _Optional[int] = ..., health_drained: _Optional[bool] = ..., partial_heartbeats: _Optional[bool] = ..., session_version: _Optional[int] = ...) -> None: ...

class DispatchRequest(_message.Message):
    __slots__ = ("name", "log_channel")
    NAME_FIELD_NUMBER: _ClassVar[int]
    LOG_CHANNEL_FIELD_NUMBER: _ClassVar[int]
    name: str
    log_channel: bool
    def __init__(self, name: _Optional[str] = ..., log_channel: _Optional[bool] = ...) -> None: ...

class WorkItem(_message.Message):
    __slots__ = ("execution_id", "run_id", "task", "nominal_ms", "shard", "shards", "attempt", "epoch", "command", "handler", "params_json", "timeout_ms", "task_version", "env", "cancel", "runner", "log_request", "cancel_reason")
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
    RUNNER_FIELD_NUMBER: _ClassVar[int]
    LOG_REQUEST_FIELD_NUMBER: _ClassVar[int]
    CANCEL_REASON_FIELD_NUMBER: _ClassVar[int]
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
    runner: str
    log_request: LogRequest
    cancel_reason: str
    def __init__(self, execution_id: _Optional[str] = ..., run_id: _Optional[str] = ..., task: _Optional[str] = ..., nominal_ms: _Optional[int] = ..., shard: _Optional[int] = ..., shards: _Optional[int] = ..., attempt: _Optional[int] = ..., epoch: _Optional[int] = ..., command: _Optional[str] = ..., handler: _Optional[str] = ..., params_json: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., task_version: _Optional[int] = ..., env: _Optional[_Mapping[str, str]] = ..., cancel: _Optional[bool] = ..., runner: _Optional[str] = ..., log_request: _Optional[_Union[LogRequest, _Mapping]] = ..., cancel_reason: _Optional[str] = ...) -> None: ...

class WorkBatch(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[WorkItem]
    def __init__(self, items: _Optional[_Iterable[_Union[WorkItem, _Mapping]]] = ...) -> None: ...

class HeartbeatRequest(_message.Message):
    __slots__ = ("name", "running", "free_slots", "started", "reports_started", "finished", "clock_offset_ms", "disk_used", "log_used", "partial")
    NAME_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    FREE_SLOTS_FIELD_NUMBER: _ClassVar[int]
    STARTED_FIELD_NUMBER: _ClassVar[int]
    REPORTS_STARTED_FIELD_NUMBER: _ClassVar[int]
    FINISHED_FIELD_NUMBER: _ClassVar[int]
    CLOCK_OFFSET_MS_FIELD_NUMBER: _ClassVar[int]
    DISK_USED_FIELD_NUMBER: _ClassVar[int]
    LOG_USED_FIELD_NUMBER: _ClassVar[int]
    PARTIAL_FIELD_NUMBER: _ClassVar[int]
    name: str
    running: _containers.RepeatedScalarFieldContainer[str]
    free_slots: int
    started: _containers.RepeatedScalarFieldContainer[str]
    reports_started: bool
    finished: _containers.RepeatedScalarFieldContainer[str]
    clock_offset_ms: int
    disk_used: float
    log_used: float
    partial: bool
    def __init__(self, name: _Optional[str] = ..., running: _Optional[_Iterable[str]] = ..., free_slots: _Optional[int] = ..., started: _Optional[_Iterable[str]] = ..., reports_started: _Optional[bool] = ..., finished: _Optional[_Iterable[str]] = ..., clock_offset_ms: _Optional[int] = ..., disk_used: _Optional[float] = ..., log_used: _Optional[float] = ..., partial: _Optional[bool] = ...) -> None: ...

class HeartbeatReply(_message.Message):
    __slots__ = ("epoch", "registered", "leader_now_ms")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_FIELD_NUMBER: _ClassVar[int]
    LEADER_NOW_MS_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    registered: bool
    leader_now_ms: int
    def __init__(self, epoch: _Optional[int] = ..., registered: _Optional[bool] = ..., leader_now_ms: _Optional[int] = ...) -> None: ...

class ExecResult(_message.Message):
    __slots__ = ("execution_id", "success", "exit_code", "error", "stdout_tail", "stderr_tail", "timed_out", "duration_ms", "start_lateness_ms")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    SUCCESS_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    STDERR_TAIL_FIELD_NUMBER: _ClassVar[int]
    TIMED_OUT_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    START_LATENESS_MS_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    success: bool
    exit_code: int
    error: str
    stdout_tail: str
    stderr_tail: str
    timed_out: bool
    duration_ms: int
    start_lateness_ms: int
    def __init__(self, execution_id: _Optional[str] = ..., success: _Optional[bool] = ..., exit_code: _Optional[int] = ..., error: _Optional[str] = ..., stdout_tail: _Optional[str] = ..., stderr_tail: _Optional[str] = ..., timed_out: _Optional[bool] = ..., duration_ms: _Optional[int] = ..., start_lateness_ms: _Optional[int] = ...) -> None: ...

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

class DrainRequest(_message.Message):
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

class DrainReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class SessionOpen(_message.Message):
    __slots__ = ("name", "session_version", "log_channel")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SESSION_VERSION_FIELD_NUMBER: _ClassVar[int]
    LOG_CHANNEL_FIELD_NUMBER: _ClassVar[int]
    name: str
    session_version: int
    log_channel: bool
    def __init__(self, name: _Optional[str] = ..., session_version: _Optional[int] = ..., log_channel: _Optional[bool] = ...) -> None: ...

class SessionAccept(_message.Message):
    __slots__ = ("session_version", "epoch")
    SESSION_VERSION_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    session_version: int
    epoch: int
    def __init__(self, session_version: _Optional[int] = ..., epoch: _Optional[int] = ...) -> None: ...

class SessionTaskDef(_message.Message):
    __slots__ = ("ref", "task", "version", "shards", "command", "handler", "params_json", "timeout_ms", "runner")
    REF_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    HANDLER_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    RUNNER_FIELD_NUMBER: _ClassVar[int]
    ref: int
    task: str
    version: int
    shards: int
    command: str
    handler: str
    params_json: str
    timeout_ms: int
    runner: str
    def __init__(self, ref: _Optional[int] = ..., task: _Optional[str] = ..., version: _Optional[int] = ..., shards: _Optional[int] = ..., command: _Optional[str] = ..., handler: _Optional[str] = ..., params_json: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., runner: _Optional[str] = ...) -> None: ...

class SessionWork(_message.Message):
    __slots__ = ("epoch", "defs", "task_ref", "nominal_ms", "shard", "attempt", "cold", "acked_through", "heartbeat")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    DEFS_FIELD_NUMBER: _ClassVar[int]
    TASK_REF_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_MS_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    COLD_FIELD_NUMBER: _ClassVar[int]
    ACKED_THROUGH_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    defs: _containers.RepeatedCompositeFieldContainer[SessionTaskDef]
    task_ref: _containers.RepeatedScalarFieldContainer[int]
    nominal_ms: _containers.RepeatedScalarFieldContainer[int]
    shard: _containers.RepeatedScalarFieldContainer[int]
    attempt: _containers.RepeatedScalarFieldContainer[int]
    cold: _containers.RepeatedCompositeFieldContainer[WorkItem]
    acked_through: int
    heartbeat: HeartbeatReply
    def __init__(self, epoch: _Optional[int] = ..., defs: _Optional[_Iterable[_Union[SessionTaskDef, _Mapping]]] = ..., task_ref: _Optional[_Iterable[int]] = ..., nominal_ms: _Optional[_Iterable[int]] = ..., shard: _Optional[_Iterable[int]] = ..., attempt: _Optional[_Iterable[int]] = ..., cold: _Optional[_Iterable[_Union[WorkItem, _Mapping]]] = ..., acked_through: _Optional[int] = ..., heartbeat: _Optional[_Union[HeartbeatReply, _Mapping]] = ...) -> None: ...

class SessionReport(_message.Message):
    __slots__ = ("report_id", "execution_id", "duration_ms", "start_lateness_ms", "cold")
    REPORT_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    START_LATENESS_MS_FIELD_NUMBER: _ClassVar[int]
    COLD_FIELD_NUMBER: _ClassVar[int]
    report_id: int
    execution_id: _containers.RepeatedScalarFieldContainer[str]
    duration_ms: _containers.RepeatedScalarFieldContainer[int]
    start_lateness_ms: _containers.RepeatedScalarFieldContainer[int]
    cold: _containers.RepeatedCompositeFieldContainer[ExecResult]
    def __init__(self, report_id: _Optional[int] = ..., execution_id: _Optional[_Iterable[str]] = ..., duration_ms: _Optional[_Iterable[int]] = ..., start_lateness_ms: _Optional[_Iterable[int]] = ..., cold: _Optional[_Iterable[_Union[ExecResult, _Mapping]]] = ...) -> None: ...

class SessionUp(_message.Message):
    __slots__ = ("open", "report", "heartbeat")
    OPEN_FIELD_NUMBER: _ClassVar[int]
    REPORT_FIELD_NUMBER: _ClassVar[int]
    HEARTBEAT_FIELD_NUMBER: _ClassVar[int]
    open: SessionOpen
    report: SessionReport
    heartbeat: HeartbeatRequest
    def __init__(self, open: _Optional[_Union[SessionOpen, _Mapping]] = ..., report: _Optional[_Union[SessionReport, _Mapping]] = ..., heartbeat: _Optional[_Union[HeartbeatRequest, _Mapping]] = ...) -> None: ...

class SessionDown(_message.Message):
    __slots__ = ("accept", "work")
    ACCEPT_FIELD_NUMBER: _ClassVar[int]
    WORK_FIELD_NUMBER: _ClassVar[int]
    accept: SessionAccept
    work: SessionWork
    def __init__(self, accept: _Optional[_Union[SessionAccept, _Mapping]] = ..., work: _Optional[_Union[SessionWork, _Mapping]] = ...) -> None: ...

class LogRequest(_message.Message):
    __slots__ = ("request_id", "execution_id", "stderr", "follow", "since_line", "tail_bytes")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    SINCE_LINE_FIELD_NUMBER: _ClassVar[int]
    TAIL_BYTES_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    execution_id: str
    stderr: bool
    follow: bool
    since_line: int
    tail_bytes: int
    def __init__(self, request_id: _Optional[str] = ..., execution_id: _Optional[str] = ..., stderr: _Optional[bool] = ..., follow: _Optional[bool] = ..., since_line: _Optional[int] = ..., tail_bytes: _Optional[int] = ...) -> None: ...

class LogUpload(_message.Message):
    __slots__ = ("header", "data", "end")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    header: LogUploadHeader
    data: bytes
    end: LogEnd
    def __init__(self, header: _Optional[_Union[LogUploadHeader, _Mapping]] = ..., data: _Optional[bytes] = ..., end: _Optional[_Union[LogEnd, _Mapping]] = ...) -> None: ...

class LogUploadHeader(_message.Message):
    __slots__ = ("request_id", "executor", "found", "problem", "running")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    FOUND_FIELD_NUMBER: _ClassVar[int]
    PROBLEM_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    executor: str
    found: bool
    problem: str
    running: bool
    def __init__(self, request_id: _Optional[str] = ..., executor: _Optional[str] = ..., found: _Optional[bool] = ..., problem: _Optional[str] = ..., running: _Optional[bool] = ...) -> None: ...

class LogEnd(_message.Message):
    __slots__ = ("bytes", "capped", "complete")
    BYTES_FIELD_NUMBER: _ClassVar[int]
    CAPPED_FIELD_NUMBER: _ClassVar[int]
    COMPLETE_FIELD_NUMBER: _ClassVar[int]
    bytes: int
    capped: bool
    complete: bool
    def __init__(self, bytes: _Optional[int] = ..., capped: _Optional[bool] = ..., complete: _Optional[bool] = ...) -> None: ...

class SendLogsReply(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ReadLogsRequest(_message.Message):
    __slots__ = ("run_id", "shard", "attempt", "stderr", "follow", "since_line", "tail_bytes")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    STDERR_FIELD_NUMBER: _ClassVar[int]
    FOLLOW_FIELD_NUMBER: _ClassVar[int]
    SINCE_LINE_FIELD_NUMBER: _ClassVar[int]
    TAIL_BYTES_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    shard: int
    attempt: int
    stderr: bool
    follow: bool
    since_line: int
    tail_bytes: int
    def __init__(self, run_id: _Optional[str] = ..., shard: _Optional[int] = ..., attempt: _Optional[int] = ..., stderr: _Optional[bool] = ..., follow: _Optional[bool] = ..., since_line: _Optional[int] = ..., tail_bytes: _Optional[int] = ...) -> None: ...

class LogsHeader(_message.Message):
    __slots__ = ("execution_id", "executor", "source", "note", "running")
    EXECUTION_ID_FIELD_NUMBER: _ClassVar[int]
    EXECUTOR_FIELD_NUMBER: _ClassVar[int]
    SOURCE_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    RUNNING_FIELD_NUMBER: _ClassVar[int]
    execution_id: str
    executor: str
    source: str
    note: str
    running: bool
    def __init__(self, execution_id: _Optional[str] = ..., executor: _Optional[str] = ..., source: _Optional[str] = ..., note: _Optional[str] = ..., running: _Optional[bool] = ...) -> None: ...

class ReadLogsChunk(_message.Message):
    __slots__ = ("header", "data", "end")
    HEADER_FIELD_NUMBER: _ClassVar[int]
    DATA_FIELD_NUMBER: _ClassVar[int]
    END_FIELD_NUMBER: _ClassVar[int]
    header: LogsHeader
    data: bytes
    end: LogEnd
    def __init__(self, header: _Optional[_Union[LogsHeader, _Mapping]] = ..., data: _Optional[bytes] = ..., end: _Optional[_Union[LogEnd, _Mapping]] = ...) -> None: ...

class SetPoolRequest(_message.Message):
    __slots__ = ("pool", "idempotency_key")
    POOL_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    pool: _records_pb2.PoolRecord
    idempotency_key: str
    def __init__(self, pool: _Optional[_Union[_records_pb2.PoolRecord, _Mapping]] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class PoolReply(_message.Message):
    __slots__ = ("pool",)
    POOL_FIELD_NUMBER: _ClassVar[int]
    pool: _records_pb2.PoolRecord
    def __init__(self, pool: _Optional[_Union[_records_pb2.PoolRecord, _Mapping]] = ...) -> None: ...

class DeletePoolRequest(_message.Message):
    __slots__ = ("name", "idempotency_key")
    NAME_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    name: str
    idempotency_key: str
    def __init__(self, name: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class ListPoolsRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class PoolInfo(_message.Message):
    __slots__ = ("pool", "used", "waiting", "holders")
    POOL_FIELD_NUMBER: _ClassVar[int]
    USED_FIELD_NUMBER: _ClassVar[int]
    WAITING_FIELD_NUMBER: _ClassVar[int]
    HOLDERS_FIELD_NUMBER: _ClassVar[int]
    pool: _records_pb2.PoolRecord
    used: int
    waiting: int
    holders: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, pool: _Optional[_Union[_records_pb2.PoolRecord, _Mapping]] = ..., used: _Optional[int] = ..., waiting: _Optional[int] = ..., holders: _Optional[_Iterable[str]] = ...) -> None: ...

class ListPoolsReply(_message.Message):
    __slots__ = ("pools",)
    POOLS_FIELD_NUMBER: _ClassVar[int]
    pools: _containers.RepeatedCompositeFieldContainer[PoolInfo]
    def __init__(self, pools: _Optional[_Iterable[_Union[PoolInfo, _Mapping]]] = ...) -> None: ...

class TaskBackfillRequest(_message.Message):
    __slots__ = ("task", "from_ms", "to_ms", "params_json", "idempotency_key")
    TASK_FIELD_NUMBER: _ClassVar[int]
    FROM_MS_FIELD_NUMBER: _ClassVar[int]
    TO_MS_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    task: str
    from_ms: int
    to_ms: int
    params_json: str
    idempotency_key: str
    def __init__(self, task: _Optional[str] = ..., from_ms: _Optional[int] = ..., to_ms: _Optional[int] = ..., params_json: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class CancelRunRequest(_message.Message):
    __slots__ = ("run_id", "reason", "shard", "idempotency_key")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    reason: str
    shard: int
    idempotency_key: str
    def __init__(self, run_id: _Optional[str] = ..., reason: _Optional[str] = ..., shard: _Optional[int] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class CancelRunsRequest(_message.Message):
    __slots__ = ("task", "namespace", "owner", "state", "dry_run", "reason", "idempotency_key")
    TASK_FIELD_NUMBER: _ClassVar[int]
    NAMESPACE_FIELD_NUMBER: _ClassVar[int]
    OWNER_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    task: str
    namespace: str
    owner: str
    state: str
    dry_run: bool
    reason: str
    idempotency_key: str
    def __init__(self, task: _Optional[str] = ..., namespace: _Optional[str] = ..., owner: _Optional[str] = ..., state: _Optional[str] = ..., dry_run: _Optional[bool] = ..., reason: _Optional[str] = ..., idempotency_key: _Optional[str] = ...) -> None: ...

class CancelRunsReply(_message.Message):
    __slots__ = ("run_ids", "dry_run")
    RUN_IDS_FIELD_NUMBER: _ClassVar[int]
    DRY_RUN_FIELD_NUMBER: _ClassVar[int]
    run_ids: _containers.RepeatedScalarFieldContainer[str]
    dry_run: bool
    def __init__(self, run_ids: _Optional[_Iterable[str]] = ..., dry_run: _Optional[bool] = ...) -> None: ...

class ExplainWorkflowTaskRequest(_message.Message):
    __slots__ = ("run_id", "task")
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    run_id: str
    task: str
    def __init__(self, run_id: _Optional[str] = ..., task: _Optional[str] = ...) -> None: ...

class WorkflowTaskWait(_message.Message):
    __slots__ = ("upstream", "upstream_task", "upstream_logical_ms", "condition", "since_ms", "timeout_at_ms", "on_timeout", "warn_at_ms", "note")
    UPSTREAM_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_TASK_FIELD_NUMBER: _ClassVar[int]
    UPSTREAM_LOGICAL_MS_FIELD_NUMBER: _ClassVar[int]
    CONDITION_FIELD_NUMBER: _ClassVar[int]
    SINCE_MS_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_AT_MS_FIELD_NUMBER: _ClassVar[int]
    ON_TIMEOUT_FIELD_NUMBER: _ClassVar[int]
    WARN_AT_MS_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    upstream: str
    upstream_task: str
    upstream_logical_ms: int
    condition: str
    since_ms: int
    timeout_at_ms: int
    on_timeout: str
    warn_at_ms: int
    note: str
    def __init__(self, upstream: _Optional[str] = ..., upstream_task: _Optional[str] = ..., upstream_logical_ms: _Optional[int] = ..., condition: _Optional[str] = ..., since_ms: _Optional[int] = ..., timeout_at_ms: _Optional[int] = ..., on_timeout: _Optional[str] = ..., warn_at_ms: _Optional[int] = ..., note: _Optional[str] = ...) -> None: ...

class ExplainWorkflowTaskReply(_message.Message):
    __slots__ = ("verdict", "details", "waits")
    VERDICT_FIELD_NUMBER: _ClassVar[int]
    DETAILS_FIELD_NUMBER: _ClassVar[int]
    WAITS_FIELD_NUMBER: _ClassVar[int]
    verdict: str
    details: _containers.RepeatedScalarFieldContainer[str]
    waits: _containers.RepeatedCompositeFieldContainer[WorkflowTaskWait]
    def __init__(self, verdict: _Optional[str] = ..., details: _Optional[_Iterable[str]] = ..., waits: _Optional[_Iterable[_Union[WorkflowTaskWait, _Mapping]]] = ...) -> None: ...
