from raftsched.v1 import log_pb2 as _log_pb2
from raftsched.v1 import records_pb2 as _records_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union
from raftsched.v1.log_pb2 import CreateTask as CreateTask
from raftsched.v1.log_pb2 import CreateTasks as CreateTasks
from raftsched.v1.log_pb2 import UpdateTask as UpdateTask
from raftsched.v1.log_pb2 import DeleteTask as DeleteTask
from raftsched.v1.log_pb2 import SetEnabled as SetEnabled
from raftsched.v1.log_pb2 import TriggerNow as TriggerNow
from raftsched.v1.log_pb2 import RetryRun as RetryRun
from raftsched.v1.log_pb2 import Barrier as Barrier
from raftsched.v1.log_pb2 import Fire as Fire
from raftsched.v1.log_pb2 import TaskFires as TaskFires
from raftsched.v1.log_pb2 import FireBatch as FireBatch
from raftsched.v1.log_pb2 import AttemptResult as AttemptResult
from raftsched.v1.log_pb2 import ExecutorJoin as ExecutorJoin
from raftsched.v1.log_pb2 import ExecutorLeave as ExecutorLeave
from raftsched.v1.log_pb2 import Assignment as Assignment
from raftsched.v1.log_pb2 import AttemptWait as AttemptWait
from raftsched.v1.log_pb2 import AssignAttempts as AssignAttempts
from raftsched.v1.log_pb2 import SetQuota as SetQuota
from raftsched.v1.log_pb2 import DeleteQuota as DeleteQuota
from raftsched.v1.log_pb2 import SetPool as SetPool
from raftsched.v1.log_pb2 import DeletePool as DeletePool
from raftsched.v1.log_pb2 import StartTaskBackfill as StartTaskBackfill
from raftsched.v1.log_pb2 import ReportResults as ReportResults
from raftsched.v1.log_pb2 import ApplyWorkflow as ApplyWorkflow
from raftsched.v1.log_pb2 import StageWorkflowTasks as StageWorkflowTasks
from raftsched.v1.log_pb2 import WorkflowStage as WorkflowStage
from raftsched.v1.log_pb2 import StartWorkflowRun as StartWorkflowRun
from raftsched.v1.log_pb2 import StartBackfill as StartBackfill
from raftsched.v1.log_pb2 import RaiseAlerts as RaiseAlerts
from raftsched.v1.log_pb2 import AlertsDelivered as AlertsDelivered
from raftsched.v1.log_pb2 import AckAlert as AckAlert
from raftsched.v1.log_pb2 import CreateToken as CreateToken
from raftsched.v1.log_pb2 import RevokeToken as RevokeToken
from raftsched.v1.log_pb2 import AuditStamp as AuditStamp
from raftsched.v1.log_pb2 import SetWorkflowPaused as SetWorkflowPaused
from raftsched.v1.log_pb2 import DeleteWorkflow as DeleteWorkflow
from raftsched.v1.log_pb2 import DrainExecutor as DrainExecutor
from raftsched.v1.log_pb2 import SetCalendar as SetCalendar
from raftsched.v1.log_pb2 import DeleteCalendar as DeleteCalendar
from raftsched.v1.log_pb2 import SeedMembership as SeedMembership
from raftsched.v1.log_pb2 import BeginMemberChange as BeginMemberChange
from raftsched.v1.log_pb2 import EndMemberChange as EndMemberChange
from raftsched.v1.log_pb2 import EmitEvent as EmitEvent
from raftsched.v1.log_pb2 import Command as Command
from raftsched.v1.log_pb2 import CommandResult as CommandResult
from raftsched.v1.log_pb2 import ExecutorRecord as ExecutorRecord
from raftsched.v1.log_pb2 import TokenRecord as TokenRecord
from raftsched.v1.log_pb2 import TaskCounters as TaskCounters
from raftsched.v1.log_pb2 import Meta as Meta
from raftsched.v1.log_pb2 import AlertCursor as AlertCursor
from raftsched.v1.log_pb2 import SnapshotEntry as SnapshotEntry
from raftsched.v1.log_pb2 import Snapshot as Snapshot
from raftsched.v1.log_pb2 import WorkflowZone as WorkflowZone
from raftsched.v1.log_pb2 import WorkflowWaitsDue as WorkflowWaitsDue
from raftsched.v1.log_pb2 import CancelRuns as CancelRuns
from raftsched.v1.log_pb2 import FireColumns as FireColumns
from raftsched.v1.log_pb2 import AssignColumns as AssignColumns
from raftsched.v1.log_pb2 import ResultColumns as ResultColumns
from raftsched.v1.log_pb2 import NumberEntities as NumberEntities
from raftsched.v1.log_pb2 import PromoteHotRuns as PromoteHotRuns
from raftsched.v1.log_pb2 import HotFires as HotFires
from raftsched.v1.log_pb2 import HotAssigns as HotAssigns
from raftsched.v1.log_pb2 import HotResults as HotResults
from raftsched.v1.log_pb2 import HotPromoted as HotPromoted
from raftsched.v1.log_pb2 import HotCheckpoint as HotCheckpoint

DESCRIPTOR: _descriptor.FileDescriptor

class ColumnsCommand(_message.Message):
    __slots__ = ("format", "idempotency_key", "epoch", "now_ms", "origin", "fire_columns", "assign_columns", "result_columns")
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    IDEMPOTENCY_KEY_FIELD_NUMBER: _ClassVar[int]
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    NOW_MS_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    FIRE_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    ASSIGN_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    RESULT_COLUMNS_FIELD_NUMBER: _ClassVar[int]
    format: int
    idempotency_key: str
    epoch: int
    now_ms: int
    origin: str
    fire_columns: _log_pb2.FireColumns
    assign_columns: _log_pb2.AssignColumns
    result_columns: _log_pb2.ResultColumns
    def __init__(self, format: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., epoch: _Optional[int] = ..., now_ms: _Optional[int] = ..., origin: _Optional[str] = ..., fire_columns: _Optional[_Union[_log_pb2.FireColumns, _Mapping]] = ..., assign_columns: _Optional[_Union[_log_pb2.AssignColumns, _Mapping]] = ..., result_columns: _Optional[_Union[_log_pb2.ResultColumns, _Mapping]] = ...) -> None: ...

class HotShardExtra(_message.Message):
    __slots__ = ("start_lateness_ms", "duration_ms")
    START_LATENESS_MS_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    start_lateness_ms: int
    duration_ms: int
    def __init__(self, start_lateness_ms: _Optional[int] = ..., duration_ms: _Optional[int] = ...) -> None: ...

class HotRunExtra(_message.Message):
    __slots__ = ("shards",)
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    shards: _containers.RepeatedCompositeFieldContainer[HotShardExtra]
    def __init__(self, shards: _Optional[_Iterable[_Union[HotShardExtra, _Mapping]]] = ...) -> None: ...
