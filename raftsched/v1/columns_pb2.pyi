from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

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
    fire_columns: FireColumns
    assign_columns: AssignColumns
    result_columns: ResultColumns
    def __init__(self, format: _Optional[int] = ..., idempotency_key: _Optional[str] = ..., epoch: _Optional[int] = ..., now_ms: _Optional[int] = ..., origin: _Optional[str] = ..., fire_columns: _Optional[_Union[FireColumns, _Mapping]] = ..., assign_columns: _Optional[_Union[AssignColumns, _Mapping]] = ..., result_columns: _Optional[_Union[ResultColumns, _Mapping]] = ...) -> None: ...

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
