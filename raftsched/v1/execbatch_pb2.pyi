from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class BatchTaskDef(_message.Message):
    __slots__ = ("ref", "task", "version", "handler", "command", "params_json", "timeout_ms", "shards")
    REF_FIELD_NUMBER: _ClassVar[int]
    TASK_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    HANDLER_FIELD_NUMBER: _ClassVar[int]
    COMMAND_FIELD_NUMBER: _ClassVar[int]
    PARAMS_JSON_FIELD_NUMBER: _ClassVar[int]
    TIMEOUT_MS_FIELD_NUMBER: _ClassVar[int]
    SHARDS_FIELD_NUMBER: _ClassVar[int]
    ref: int
    task: str
    version: int
    handler: str
    command: str
    params_json: str
    timeout_ms: int
    shards: int
    def __init__(self, ref: _Optional[int] = ..., task: _Optional[str] = ..., version: _Optional[int] = ..., handler: _Optional[str] = ..., command: _Optional[str] = ..., params_json: _Optional[str] = ..., timeout_ms: _Optional[int] = ..., shards: _Optional[int] = ...) -> None: ...

class WorkColumns(_message.Message):
    __slots__ = ("epoch", "defs", "base_ms", "seq", "task_ref", "nominal_delta", "shard", "attempt", "acked_through")
    EPOCH_FIELD_NUMBER: _ClassVar[int]
    DEFS_FIELD_NUMBER: _ClassVar[int]
    BASE_MS_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    TASK_REF_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_DELTA_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    ACKED_THROUGH_FIELD_NUMBER: _ClassVar[int]
    epoch: int
    defs: _containers.RepeatedCompositeFieldContainer[BatchTaskDef]
    base_ms: int
    seq: _containers.RepeatedScalarFieldContainer[int]
    task_ref: _containers.RepeatedScalarFieldContainer[int]
    nominal_delta: _containers.RepeatedScalarFieldContainer[int]
    shard: _containers.RepeatedScalarFieldContainer[int]
    attempt: _containers.RepeatedScalarFieldContainer[int]
    acked_through: int
    def __init__(self, epoch: _Optional[int] = ..., defs: _Optional[_Iterable[_Union[BatchTaskDef, _Mapping]]] = ..., base_ms: _Optional[int] = ..., seq: _Optional[_Iterable[int]] = ..., task_ref: _Optional[_Iterable[int]] = ..., nominal_delta: _Optional[_Iterable[int]] = ..., shard: _Optional[_Iterable[int]] = ..., attempt: _Optional[_Iterable[int]] = ..., acked_through: _Optional[int] = ...) -> None: ...

class ColdResult(_message.Message):
    __slots__ = ("index", "error", "exit_code", "stdout_tail", "stderr_tail")
    INDEX_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    EXIT_CODE_FIELD_NUMBER: _ClassVar[int]
    STDOUT_TAIL_FIELD_NUMBER: _ClassVar[int]
    STDERR_TAIL_FIELD_NUMBER: _ClassVar[int]
    index: int
    error: str
    exit_code: int
    stdout_tail: str
    stderr_tail: str
    def __init__(self, index: _Optional[int] = ..., error: _Optional[str] = ..., exit_code: _Optional[int] = ..., stdout_tail: _Optional[str] = ..., stderr_tail: _Optional[str] = ...) -> None: ...

class ReportBatch(_message.Message):
    __slots__ = ("report_id", "seq", "shard", "attempt", "status", "duration_ms", "start_lateness_ms", "cold")
    REPORT_ID_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    START_LATENESS_MS_FIELD_NUMBER: _ClassVar[int]
    COLD_FIELD_NUMBER: _ClassVar[int]
    report_id: int
    seq: _containers.RepeatedScalarFieldContainer[int]
    shard: _containers.RepeatedScalarFieldContainer[int]
    attempt: _containers.RepeatedScalarFieldContainer[int]
    status: bytes
    duration_ms: _containers.RepeatedScalarFieldContainer[int]
    start_lateness_ms: _containers.RepeatedScalarFieldContainer[int]
    cold: _containers.RepeatedCompositeFieldContainer[ColdResult]
    def __init__(self, report_id: _Optional[int] = ..., seq: _Optional[_Iterable[int]] = ..., shard: _Optional[_Iterable[int]] = ..., attempt: _Optional[_Iterable[int]] = ..., status: _Optional[bytes] = ..., duration_ms: _Optional[_Iterable[int]] = ..., start_lateness_ms: _Optional[_Iterable[int]] = ..., cold: _Optional[_Iterable[_Union[ColdResult, _Mapping]]] = ...) -> None: ...

class ExecBatchRecord(_message.Message):
    __slots__ = ("format", "finish", "seq", "shard", "attempt", "state", "duration_ms", "cold")
    FORMAT_FIELD_NUMBER: _ClassVar[int]
    FINISH_FIELD_NUMBER: _ClassVar[int]
    SEQ_FIELD_NUMBER: _ClassVar[int]
    SHARD_FIELD_NUMBER: _ClassVar[int]
    ATTEMPT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    DURATION_MS_FIELD_NUMBER: _ClassVar[int]
    COLD_FIELD_NUMBER: _ClassVar[int]
    format: int
    finish: bool
    seq: _containers.RepeatedScalarFieldContainer[int]
    shard: _containers.RepeatedScalarFieldContainer[int]
    attempt: _containers.RepeatedScalarFieldContainer[int]
    state: bytes
    duration_ms: _containers.RepeatedScalarFieldContainer[int]
    cold: _containers.RepeatedCompositeFieldContainer[ColdResult]
    def __init__(self, format: _Optional[int] = ..., finish: _Optional[bool] = ..., seq: _Optional[_Iterable[int]] = ..., shard: _Optional[_Iterable[int]] = ..., attempt: _Optional[_Iterable[int]] = ..., state: _Optional[bytes] = ..., duration_ms: _Optional[_Iterable[int]] = ..., cold: _Optional[_Iterable[_Union[ColdResult, _Mapping]]] = ...) -> None: ...
