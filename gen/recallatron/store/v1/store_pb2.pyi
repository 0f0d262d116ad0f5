import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.rpc import status_pb2 as _status_pb2
from recallatron.memory.v1 import memory_pb2 as _memory_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ImportMemoriesRequest(_message.Message):
    __slots__ = ("workspace_id", "entities", "memories", "validate_only")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    VALIDATE_ONLY_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    entities: _containers.RepeatedCompositeFieldContainer[_memory_pb2.ImportedEntity]
    memories: _containers.RepeatedCompositeFieldContainer[_memory_pb2.ImportedMemory]
    validate_only: bool
    def __init__(self, workspace_id: _Optional[str] = ..., entities: _Optional[_Iterable[_Union[_memory_pb2.ImportedEntity, _Mapping]]] = ..., memories: _Optional[_Iterable[_Union[_memory_pb2.ImportedMemory, _Mapping]]] = ..., validate_only: _Optional[bool] = ...) -> None: ...

class ImportMemoriesResponse(_message.Message):
    __slots__ = ("entities", "memories")
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    entities: _containers.RepeatedCompositeFieldContainer[_memory_pb2.ImportResult]
    memories: _containers.RepeatedCompositeFieldContainer[_memory_pb2.ImportResult]
    def __init__(self, entities: _Optional[_Iterable[_Union[_memory_pb2.ImportResult, _Mapping]]] = ..., memories: _Optional[_Iterable[_Union[_memory_pb2.ImportResult, _Mapping]]] = ...) -> None: ...

class ImportHistoryRequest(_message.Message):
    __slots__ = ("workspace_id", "member_id", "turns")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    member_id: str
    turns: _containers.RepeatedCompositeFieldContainer[HistoryTurn]
    def __init__(self, workspace_id: _Optional[str] = ..., member_id: _Optional[str] = ..., turns: _Optional[_Iterable[_Union[HistoryTurn, _Mapping]]] = ...) -> None: ...

class ImportHistoryResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AppendHistoryResult]
    def __init__(self, results: _Optional[_Iterable[_Union[AppendHistoryResult, _Mapping]]] = ...) -> None: ...

class PinMemoryRequest(_message.Message):
    __slots__ = ("caller", "memory_id")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    memory_id: str
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., memory_id: _Optional[str] = ...) -> None: ...

class PinMemoryResponse(_message.Message):
    __slots__ = ("memory_id", "pinned_at", "already_pinned")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    PINNED_AT_FIELD_NUMBER: _ClassVar[int]
    ALREADY_PINNED_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    pinned_at: _timestamp_pb2.Timestamp
    already_pinned: bool
    def __init__(self, memory_id: _Optional[str] = ..., pinned_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., already_pinned: _Optional[bool] = ...) -> None: ...

class UnpinMemoryRequest(_message.Message):
    __slots__ = ("caller", "memory_id")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    memory_id: str
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., memory_id: _Optional[str] = ...) -> None: ...

class UnpinMemoryResponse(_message.Message):
    __slots__ = ("was_pinned",)
    WAS_PINNED_FIELD_NUMBER: _ClassVar[int]
    was_pinned: bool
    def __init__(self, was_pinned: _Optional[bool] = ...) -> None: ...

class GetContextRequest(_message.Message):
    __slots__ = ("caller", "purpose", "expiry_days", "occurred_after", "occurred_before", "as_of", "known_at")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    EXPIRY_DAYS_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AFTER_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AT_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    purpose: _memory_pb2.Purpose
    expiry_days: int
    occurred_after: _timestamp_pb2.Timestamp
    occurred_before: _timestamp_pb2.Timestamp
    as_of: _timestamp_pb2.Timestamp
    known_at: _timestamp_pb2.Timestamp
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., purpose: _Optional[_Union[_memory_pb2.Purpose, str]] = ..., expiry_days: _Optional[int] = ..., occurred_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., occurred_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ContextEntry(_message.Message):
    __slots__ = ("part", "memory", "entities")
    PART_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    part: _memory_pb2.ContextPart
    memory: _memory_pb2.Memory
    entities: _containers.RepeatedCompositeFieldContainer[_memory_pb2.MentionedEntity]
    def __init__(self, part: _Optional[_Union[_memory_pb2.ContextPart, str]] = ..., memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., entities: _Optional[_Iterable[_Union[_memory_pb2.MentionedEntity, _Mapping]]] = ...) -> None: ...

class GetContextResponse(_message.Message):
    __slots__ = ("entries",)
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[ContextEntry]
    def __init__(self, entries: _Optional[_Iterable[_Union[ContextEntry, _Mapping]]] = ...) -> None: ...

class CaptureRequest(_message.Message):
    __slots__ = ("caller", "purpose", "turn", "proposals", "request_id")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    PROPOSALS_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    purpose: _memory_pb2.Purpose
    turn: str
    proposals: _containers.RepeatedCompositeFieldContainer[_memory_pb2.CaptureProposal]
    request_id: str
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., purpose: _Optional[_Union[_memory_pb2.Purpose, str]] = ..., turn: _Optional[str] = ..., proposals: _Optional[_Iterable[_Union[_memory_pb2.CaptureProposal, _Mapping]]] = ..., request_id: _Optional[str] = ...) -> None: ...

class CaptureResponse(_message.Message):
    __slots__ = ("results", "replayed")
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[_memory_pb2.CaptureResult]
    replayed: bool
    def __init__(self, results: _Optional[_Iterable[_Union[_memory_pb2.CaptureResult, _Mapping]]] = ..., replayed: _Optional[bool] = ...) -> None: ...

class ListDuplicateProposalsRequest(_message.Message):
    __slots__ = ("caller", "purpose", "page_size", "page_token", "input_version")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    INPUT_VERSION_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    purpose: _memory_pb2.Purpose
    page_size: int
    page_token: str
    input_version: str
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., purpose: _Optional[_Union[_memory_pb2.Purpose, str]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., input_version: _Optional[str] = ...) -> None: ...

class ListDuplicateProposalsResponse(_message.Message):
    __slots__ = ("proposals", "next_page_token", "total_size", "dense_available", "memories_considered", "memories_without_vectors")
    PROPOSALS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    DENSE_AVAILABLE_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_CONSIDERED_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_WITHOUT_VECTORS_FIELD_NUMBER: _ClassVar[int]
    proposals: _containers.RepeatedCompositeFieldContainer[_memory_pb2.DuplicateProposal]
    next_page_token: str
    total_size: int
    dense_available: bool
    memories_considered: int
    memories_without_vectors: int
    def __init__(self, proposals: _Optional[_Iterable[_Union[_memory_pb2.DuplicateProposal, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ..., dense_available: _Optional[bool] = ..., memories_considered: _Optional[int] = ..., memories_without_vectors: _Optional[int] = ...) -> None: ...

class DecideDuplicateProposalRequest(_message.Message):
    __slots__ = ("caller", "memory_a_id", "memory_b_id", "decision", "keep_id", "expected_revision", "forget_id", "reason")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    MEMORY_A_ID_FIELD_NUMBER: _ClassVar[int]
    MEMORY_B_ID_FIELD_NUMBER: _ClassVar[int]
    DECISION_FIELD_NUMBER: _ClassVar[int]
    KEEP_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    FORGET_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    memory_a_id: str
    memory_b_id: str
    decision: _memory_pb2.DuplicateDecision
    keep_id: str
    expected_revision: int
    forget_id: str
    reason: str
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., memory_a_id: _Optional[str] = ..., memory_b_id: _Optional[str] = ..., decision: _Optional[_Union[_memory_pb2.DuplicateDecision, str]] = ..., keep_id: _Optional[str] = ..., expected_revision: _Optional[int] = ..., forget_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class DecideDuplicateProposalResponse(_message.Message):
    __slots__ = ("decision", "superseded", "kept", "forgotten_ids", "conflict_flag_id")
    DECISION_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    KEPT_FIELD_NUMBER: _ClassVar[int]
    FORGOTTEN_IDS_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_FLAG_ID_FIELD_NUMBER: _ClassVar[int]
    decision: _memory_pb2.DuplicateDecision
    superseded: _memory_pb2.Memory
    kept: _memory_pb2.Memory
    forgotten_ids: _containers.RepeatedScalarFieldContainer[str]
    conflict_flag_id: str
    def __init__(self, decision: _Optional[_Union[_memory_pb2.DuplicateDecision, str]] = ..., superseded: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., kept: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., forgotten_ids: _Optional[_Iterable[str]] = ..., conflict_flag_id: _Optional[str] = ...) -> None: ...

class ListConflictFlagsRequest(_message.Message):
    __slots__ = ("caller", "page_size", "page_token", "include_resolved")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_RESOLVED_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    page_size: int
    page_token: str
    include_resolved: bool
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., include_resolved: _Optional[bool] = ...) -> None: ...

class ListConflictFlagsResponse(_message.Message):
    __slots__ = ("flags", "next_page_token", "total_size")
    FLAGS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    flags: _containers.RepeatedCompositeFieldContainer[_memory_pb2.ConflictFlag]
    next_page_token: str
    total_size: int
    def __init__(self, flags: _Optional[_Iterable[_Union[_memory_pb2.ConflictFlag, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ...) -> None: ...

class ResolveConflictFlagRequest(_message.Message):
    __slots__ = ("caller", "flag_id", "resolution", "expected_revision")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    FLAG_ID_FIELD_NUMBER: _ClassVar[int]
    RESOLUTION_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    flag_id: str
    resolution: _memory_pb2.ConflictResolution
    expected_revision: int
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., flag_id: _Optional[str] = ..., resolution: _Optional[_Union[_memory_pb2.ConflictResolution, str]] = ..., expected_revision: _Optional[int] = ...) -> None: ...

class ResolveConflictFlagResponse(_message.Message):
    __slots__ = ("flag", "restored")
    FLAG_FIELD_NUMBER: _ClassVar[int]
    RESTORED_FIELD_NUMBER: _ClassVar[int]
    flag: _memory_pb2.ConflictFlag
    restored: _memory_pb2.Memory
    def __init__(self, flag: _Optional[_Union[_memory_pb2.ConflictFlag, _Mapping]] = ..., restored: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ...) -> None: ...

class HistoryTurn(_message.Message):
    __slots__ = ("request_id", "chat_id", "role", "text", "occurred_at", "session_id")
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    request_id: str
    chat_id: str
    role: str
    text: str
    occurred_at: _timestamp_pb2.Timestamp
    session_id: str
    def __init__(self, request_id: _Optional[str] = ..., chat_id: _Optional[str] = ..., role: _Optional[str] = ..., text: _Optional[str] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., session_id: _Optional[str] = ...) -> None: ...

class AppendHistoryRequest(_message.Message):
    __slots__ = ("caller", "turns")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    TURNS_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    turns: _containers.RepeatedCompositeFieldContainer[HistoryTurn]
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., turns: _Optional[_Iterable[_Union[HistoryTurn, _Mapping]]] = ...) -> None: ...

class AppendHistoryResult(_message.Message):
    __slots__ = ("turn_id", "error", "replayed")
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    REPLAYED_FIELD_NUMBER: _ClassVar[int]
    turn_id: str
    error: _status_pb2.Status
    replayed: bool
    def __init__(self, turn_id: _Optional[str] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ..., replayed: _Optional[bool] = ...) -> None: ...

class AppendHistoryResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[AppendHistoryResult]
    def __init__(self, results: _Optional[_Iterable[_Union[AppendHistoryResult, _Mapping]]] = ...) -> None: ...

class SearchHistoryRequest(_message.Message):
    __slots__ = ("caller", "query", "start_time", "end_time", "chat_id", "session_id", "page_size", "page_token")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    CHAT_ID_FIELD_NUMBER: _ClassVar[int]
    SESSION_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    query: str
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    chat_id: str
    session_id: str
    page_size: int
    page_token: str
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., query: _Optional[str] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., chat_id: _Optional[str] = ..., session_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class HistoryEntry(_message.Message):
    __slots__ = ("turn_id", "turn", "session_computed", "score", "appended_at")
    TURN_ID_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    SESSION_COMPUTED_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    APPENDED_AT_FIELD_NUMBER: _ClassVar[int]
    turn_id: str
    turn: HistoryTurn
    session_computed: bool
    score: float
    appended_at: _timestamp_pb2.Timestamp
    def __init__(self, turn_id: _Optional[str] = ..., turn: _Optional[_Union[HistoryTurn, _Mapping]] = ..., session_computed: _Optional[bool] = ..., score: _Optional[float] = ..., appended_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class SearchHistoryResponse(_message.Message):
    __slots__ = ("entries", "next_page_token")
    ENTRIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    entries: _containers.RepeatedCompositeFieldContainer[HistoryEntry]
    next_page_token: str
    def __init__(self, entries: _Optional[_Iterable[_Union[HistoryEntry, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ForgetHistoryRequest(_message.Message):
    __slots__ = ("caller", "turn_ids", "start_time", "end_time")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    TURN_IDS_FIELD_NUMBER: _ClassVar[int]
    START_TIME_FIELD_NUMBER: _ClassVar[int]
    END_TIME_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    turn_ids: _containers.RepeatedScalarFieldContainer[str]
    start_time: _timestamp_pb2.Timestamp
    end_time: _timestamp_pb2.Timestamp
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., turn_ids: _Optional[_Iterable[str]] = ..., start_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., end_time: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ForgetHistoryResponse(_message.Message):
    __slots__ = ("forgotten_count",)
    FORGOTTEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    forgotten_count: int
    def __init__(self, forgotten_count: _Optional[int] = ...) -> None: ...

class ListMemoriesRequest(_message.Message):
    __slots__ = ("caller", "page_size", "page_token", "kind", "audience", "purpose", "entity_id", "created_after", "created_before", "updated_after", "updated_before", "superseded", "include_history", "derived_from_id", "occurred_after", "occurred_before", "as_of", "known_at")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_FIELD_NUMBER: _ClassVar[int]
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    CREATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AFTER_FIELD_NUMBER: _ClassVar[int]
    UPDATED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_HISTORY_FIELD_NUMBER: _ClassVar[int]
    DERIVED_FROM_ID_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AFTER_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AT_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    page_size: int
    page_token: str
    kind: _memory_pb2.Kind
    audience: _memory_pb2.Audience
    purpose: _memory_pb2.Purpose
    entity_id: str
    created_after: _timestamp_pb2.Timestamp
    created_before: _timestamp_pb2.Timestamp
    updated_after: _timestamp_pb2.Timestamp
    updated_before: _timestamp_pb2.Timestamp
    superseded: _memory_pb2.SupersededFilter
    include_history: bool
    derived_from_id: str
    occurred_after: _timestamp_pb2.Timestamp
    occurred_before: _timestamp_pb2.Timestamp
    as_of: _timestamp_pb2.Timestamp
    known_at: _timestamp_pb2.Timestamp
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., kind: _Optional[_Union[_memory_pb2.Kind, str]] = ..., audience: _Optional[_Union[_memory_pb2.Audience, str]] = ..., purpose: _Optional[_Union[_memory_pb2.Purpose, str]] = ..., entity_id: _Optional[str] = ..., created_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., superseded: _Optional[_Union[_memory_pb2.SupersededFilter, str]] = ..., include_history: _Optional[bool] = ..., derived_from_id: _Optional[str] = ..., occurred_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., occurred_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ListMemoriesResponse(_message.Message):
    __slots__ = ("memories", "next_page_token", "total_size")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    next_page_token: str
    total_size: int
    def __init__(self, memories: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ...) -> None: ...

class ListExpiringMemoriesRequest(_message.Message):
    __slots__ = ("caller", "page_size", "page_token", "purpose", "superseded", "expiry_days")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    EXPIRY_DAYS_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    page_size: int
    page_token: str
    purpose: _memory_pb2.Purpose
    superseded: _memory_pb2.SupersededFilter
    expiry_days: int
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., purpose: _Optional[_Union[_memory_pb2.Purpose, str]] = ..., superseded: _Optional[_Union[_memory_pb2.SupersededFilter, str]] = ..., expiry_days: _Optional[int] = ...) -> None: ...

class ListExpiringMemoriesResponse(_message.Message):
    __slots__ = ("memories", "next_page_token", "total_size", "expiry_days", "hidden_before")
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    EXPIRY_DAYS_FIELD_NUMBER: _ClassVar[int]
    HIDDEN_BEFORE_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    next_page_token: str
    total_size: int
    expiry_days: int
    hidden_before: _timestamp_pb2.Timestamp
    def __init__(self, memories: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ..., expiry_days: _Optional[int] = ..., hidden_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class KeepMemoryRequest(_message.Message):
    __slots__ = ("caller", "memory_id", "expected_revision")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    memory_id: str
    expected_revision: int
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., memory_id: _Optional[str] = ..., expected_revision: _Optional[int] = ...) -> None: ...

class KeepMemoryResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ...) -> None: ...

class UpdateWorkspaceSettingsRequest(_message.Message):
    __slots__ = ("workspace_id", "dense_floor", "default_mode", "context_bundle", "expiry_days", "expiry_off", "inject_gate", "inject_min_cosine")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    DENSE_FLOOR_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_MODE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_BUNDLE_FIELD_NUMBER: _ClassVar[int]
    EXPIRY_DAYS_FIELD_NUMBER: _ClassVar[int]
    EXPIRY_OFF_FIELD_NUMBER: _ClassVar[int]
    INJECT_GATE_FIELD_NUMBER: _ClassVar[int]
    INJECT_MIN_COSINE_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    dense_floor: float
    default_mode: _memory_pb2.RecallMode
    context_bundle: bool
    expiry_days: int
    expiry_off: bool
    inject_gate: _memory_pb2.InjectGate
    inject_min_cosine: float
    def __init__(self, workspace_id: _Optional[str] = ..., dense_floor: _Optional[float] = ..., default_mode: _Optional[_Union[_memory_pb2.RecallMode, str]] = ..., context_bundle: _Optional[bool] = ..., expiry_days: _Optional[int] = ..., expiry_off: _Optional[bool] = ..., inject_gate: _Optional[_Union[_memory_pb2.InjectGate, str]] = ..., inject_min_cosine: _Optional[float] = ...) -> None: ...

class UpdateWorkspaceSettingsResponse(_message.Message):
    __slots__ = ("settings",)
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    settings: WorkspaceSettings
    def __init__(self, settings: _Optional[_Union[WorkspaceSettings, _Mapping]] = ...) -> None: ...

class RebuildEmbeddingsRequest(_message.Message):
    __slots__ = ("all",)
    ALL_FIELD_NUMBER: _ClassVar[int]
    all: bool
    def __init__(self, all: _Optional[bool] = ...) -> None: ...

class RebuildEmbeddingsResponse(_message.Message):
    __slots__ = ("queued", "input_version")
    QUEUED_FIELD_NUMBER: _ClassVar[int]
    INPUT_VERSION_FIELD_NUMBER: _ClassVar[int]
    queued: int
    input_version: str
    def __init__(self, queued: _Optional[int] = ..., input_version: _Optional[str] = ...) -> None: ...

class WorkspaceSettings(_message.Message):
    __slots__ = ("dense_floor", "default_mode", "context_bundle", "expiry_days", "inject_gate", "inject_min_cosine")
    DENSE_FLOOR_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_MODE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_BUNDLE_FIELD_NUMBER: _ClassVar[int]
    EXPIRY_DAYS_FIELD_NUMBER: _ClassVar[int]
    INJECT_GATE_FIELD_NUMBER: _ClassVar[int]
    INJECT_MIN_COSINE_FIELD_NUMBER: _ClassVar[int]
    dense_floor: float
    default_mode: _memory_pb2.RecallMode
    context_bundle: bool
    expiry_days: int
    inject_gate: _memory_pb2.InjectGate
    inject_min_cosine: float
    def __init__(self, dense_floor: _Optional[float] = ..., default_mode: _Optional[_Union[_memory_pb2.RecallMode, str]] = ..., context_bundle: _Optional[bool] = ..., expiry_days: _Optional[int] = ..., inject_gate: _Optional[_Union[_memory_pb2.InjectGate, str]] = ..., inject_min_cosine: _Optional[float] = ...) -> None: ...

class CreateWorkspaceRequest(_message.Message):
    __slots__ = ("name", "server")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    name: str
    server: str
    def __init__(self, name: _Optional[str] = ..., server: _Optional[str] = ...) -> None: ...

class CreateWorkspaceResponse(_message.Message):
    __slots__ = ("workspace_id", "server")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    server: str
    def __init__(self, workspace_id: _Optional[str] = ..., server: _Optional[str] = ...) -> None: ...

class AddMemberRequest(_message.Message):
    __slots__ = ("workspace_id", "role", "purposes", "display_name")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    PURPOSES_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    role: _memory_pb2.Role
    purposes: _containers.RepeatedScalarFieldContainer[_memory_pb2.Purpose]
    display_name: str
    def __init__(self, workspace_id: _Optional[str] = ..., role: _Optional[_Union[_memory_pb2.Role, str]] = ..., purposes: _Optional[_Iterable[_Union[_memory_pb2.Purpose, str]]] = ..., display_name: _Optional[str] = ...) -> None: ...

class AddMemberResponse(_message.Message):
    __slots__ = ("member_id", "token")
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    member_id: str
    token: str
    def __init__(self, member_id: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...

class RevokeMemberRequest(_message.Message):
    __slots__ = ("workspace_id", "member_id", "token")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    member_id: str
    token: str
    def __init__(self, workspace_id: _Optional[str] = ..., member_id: _Optional[str] = ..., token: _Optional[str] = ...) -> None: ...

class RevokeMemberResponse(_message.Message):
    __slots__ = ("revoked",)
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    revoked: int
    def __init__(self, revoked: _Optional[int] = ...) -> None: ...

class RemoveMemberRequest(_message.Message):
    __slots__ = ("workspace_id", "member_id")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    member_id: str
    def __init__(self, workspace_id: _Optional[str] = ..., member_id: _Optional[str] = ...) -> None: ...

class RemoveMemberResponse(_message.Message):
    __slots__ = ("revoked", "forgotten_ids", "history_forgotten", "already_removed")
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    FORGOTTEN_IDS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FORGOTTEN_FIELD_NUMBER: _ClassVar[int]
    ALREADY_REMOVED_FIELD_NUMBER: _ClassVar[int]
    revoked: int
    forgotten_ids: _containers.RepeatedScalarFieldContainer[str]
    history_forgotten: int
    already_removed: bool
    def __init__(self, revoked: _Optional[int] = ..., forgotten_ids: _Optional[_Iterable[str]] = ..., history_forgotten: _Optional[int] = ..., already_removed: _Optional[bool] = ...) -> None: ...

class AuthenticateRequest(_message.Message):
    __slots__ = ("token",)
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    token: str
    def __init__(self, token: _Optional[str] = ...) -> None: ...

class AuthenticateResponse(_message.Message):
    __slots__ = ("caller", "settings")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    settings: WorkspaceSettings
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., settings: _Optional[_Union[WorkspaceSettings, _Mapping]] = ...) -> None: ...

class RememberRequest(_message.Message):
    __slots__ = ("caller", "purpose", "kind", "title", "body", "audience", "confidence", "occurred_at", "entities", "request_id", "valid_from", "relations", "attributes")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    purpose: _memory_pb2.Purpose
    kind: _memory_pb2.Kind
    title: str
    body: str
    audience: _memory_pb2.Audience
    confidence: float
    occurred_at: _timestamp_pb2.Timestamp
    entities: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityMention]
    request_id: str
    valid_from: _timestamp_pb2.Timestamp
    relations: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityRelation]
    attributes: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityAttribute]
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., purpose: _Optional[_Union[_memory_pb2.Purpose, str]] = ..., kind: _Optional[_Union[_memory_pb2.Kind, str]] = ..., title: _Optional[str] = ..., body: _Optional[str] = ..., audience: _Optional[_Union[_memory_pb2.Audience, str]] = ..., confidence: _Optional[float] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., entities: _Optional[_Iterable[_Union[_memory_pb2.EntityMention, _Mapping]]] = ..., request_id: _Optional[str] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., relations: _Optional[_Iterable[_Union[_memory_pb2.EntityRelation, _Mapping]]] = ..., attributes: _Optional[_Iterable[_Union[_memory_pb2.EntityAttribute, _Mapping]]] = ...) -> None: ...

class RememberResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ...) -> None: ...

class RememberBatchRequest(_message.Message):
    __slots__ = ("caller", "requests")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    REQUESTS_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    requests: _containers.RepeatedCompositeFieldContainer[RememberBatchEntry]
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., requests: _Optional[_Iterable[_Union[RememberBatchEntry, _Mapping]]] = ...) -> None: ...

class RememberBatchEntry(_message.Message):
    __slots__ = ("purpose", "kind", "title", "body", "audience", "confidence", "occurred_at", "entities", "request_id", "valid_from", "relations", "attributes")
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    purpose: _memory_pb2.Purpose
    kind: _memory_pb2.Kind
    title: str
    body: str
    audience: _memory_pb2.Audience
    confidence: float
    occurred_at: _timestamp_pb2.Timestamp
    entities: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityMention]
    request_id: str
    valid_from: _timestamp_pb2.Timestamp
    relations: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityRelation]
    attributes: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityAttribute]
    def __init__(self, purpose: _Optional[_Union[_memory_pb2.Purpose, str]] = ..., kind: _Optional[_Union[_memory_pb2.Kind, str]] = ..., title: _Optional[str] = ..., body: _Optional[str] = ..., audience: _Optional[_Union[_memory_pb2.Audience, str]] = ..., confidence: _Optional[float] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., entities: _Optional[_Iterable[_Union[_memory_pb2.EntityMention, _Mapping]]] = ..., request_id: _Optional[str] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., relations: _Optional[_Iterable[_Union[_memory_pb2.EntityRelation, _Mapping]]] = ..., attributes: _Optional[_Iterable[_Union[_memory_pb2.EntityAttribute, _Mapping]]] = ...) -> None: ...

class RememberBatchResult(_message.Message):
    __slots__ = ("memory", "error")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    error: _status_pb2.Status
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class RememberBatchResponse(_message.Message):
    __slots__ = ("results",)
    RESULTS_FIELD_NUMBER: _ClassVar[int]
    results: _containers.RepeatedCompositeFieldContainer[RememberBatchResult]
    def __init__(self, results: _Optional[_Iterable[_Union[RememberBatchResult, _Mapping]]] = ...) -> None: ...

class ReadRequest(_message.Message):
    __slots__ = ("caller", "memory_id", "include_history")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_HISTORY_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    memory_id: str
    include_history: bool
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., memory_id: _Optional[str] = ..., include_history: _Optional[bool] = ...) -> None: ...

class ReadResponse(_message.Message):
    __slots__ = ("memory", "may_change")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    MAY_CHANGE_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    may_change: bool
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., may_change: _Optional[bool] = ...) -> None: ...

class GetMemoriesRequest(_message.Message):
    __slots__ = ("caller", "memory_ids", "known_at")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AT_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    known_at: _timestamp_pb2.Timestamp
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., memory_ids: _Optional[_Iterable[str]] = ..., known_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class GetMemoriesResponse(_message.Message):
    __slots__ = ("memories",)
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    memories: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    def __init__(self, memories: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ...) -> None: ...

class Candidate(_message.Message):
    __slots__ = ("memory_id", "score", "chain_readable", "identifier_matches", "all_terms", "memory")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    CHAIN_READABLE_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_MATCHES_FIELD_NUMBER: _ClassVar[int]
    ALL_TERMS_FIELD_NUMBER: _ClassVar[int]
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    score: float
    chain_readable: bool
    identifier_matches: int
    all_terms: bool
    memory: _memory_pb2.Memory
    def __init__(self, memory_id: _Optional[str] = ..., score: _Optional[float] = ..., chain_readable: _Optional[bool] = ..., identifier_matches: _Optional[int] = ..., all_terms: _Optional[bool] = ..., memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ...) -> None: ...

class LexicalCandidatesRequest(_message.Message):
    __slots__ = ("caller", "purpose", "query", "limit", "include_superseded", "entity_ids", "expiry_days", "memories_top", "occurred_after", "occurred_before", "as_of", "known_at", "held_memory_ids", "wanted_memory_ids", "token", "narrowed_purposes")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    QUERY_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_SUPERSEDED_FIELD_NUMBER: _ClassVar[int]
    ENTITY_IDS_FIELD_NUMBER: _ClassVar[int]
    EXPIRY_DAYS_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_TOP_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AFTER_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AT_FIELD_NUMBER: _ClassVar[int]
    HELD_MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    WANTED_MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    NARROWED_PURPOSES_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    purpose: _memory_pb2.Purpose
    query: str
    limit: int
    include_superseded: bool
    entity_ids: _containers.RepeatedScalarFieldContainer[str]
    expiry_days: int
    memories_top: int
    occurred_after: _timestamp_pb2.Timestamp
    occurred_before: _timestamp_pb2.Timestamp
    as_of: _timestamp_pb2.Timestamp
    known_at: _timestamp_pb2.Timestamp
    held_memory_ids: _containers.RepeatedScalarFieldContainer[str]
    wanted_memory_ids: _containers.RepeatedScalarFieldContainer[str]
    token: str
    narrowed_purposes: _containers.RepeatedScalarFieldContainer[_memory_pb2.Purpose]
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., purpose: _Optional[_Union[_memory_pb2.Purpose, str]] = ..., query: _Optional[str] = ..., limit: _Optional[int] = ..., include_superseded: _Optional[bool] = ..., entity_ids: _Optional[_Iterable[str]] = ..., expiry_days: _Optional[int] = ..., memories_top: _Optional[int] = ..., occurred_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., occurred_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., held_memory_ids: _Optional[_Iterable[str]] = ..., wanted_memory_ids: _Optional[_Iterable[str]] = ..., token: _Optional[str] = ..., narrowed_purposes: _Optional[_Iterable[_Union[_memory_pb2.Purpose, str]]] = ...) -> None: ...

class LexicalCandidatesResponse(_message.Message):
    __slots__ = ("candidates", "caller", "settings")
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    CALLER_FIELD_NUMBER: _ClassVar[int]
    SETTINGS_FIELD_NUMBER: _ClassVar[int]
    candidates: _containers.RepeatedCompositeFieldContainer[Candidate]
    caller: _memory_pb2.Caller
    settings: WorkspaceSettings
    def __init__(self, candidates: _Optional[_Iterable[_Union[Candidate, _Mapping]]] = ..., caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., settings: _Optional[_Union[WorkspaceSettings, _Mapping]] = ...) -> None: ...

class DenseCandidatesRequest(_message.Message):
    __slots__ = ("caller", "purpose", "vector", "input_version", "floor", "limit", "entity_ids", "expiry_days", "memories_top", "occurred_after", "occurred_before", "as_of", "known_at", "held_memory_ids", "wanted_memory_ids")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    VECTOR_FIELD_NUMBER: _ClassVar[int]
    INPUT_VERSION_FIELD_NUMBER: _ClassVar[int]
    FLOOR_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    ENTITY_IDS_FIELD_NUMBER: _ClassVar[int]
    EXPIRY_DAYS_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_TOP_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AFTER_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_BEFORE_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AT_FIELD_NUMBER: _ClassVar[int]
    HELD_MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    WANTED_MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    purpose: _memory_pb2.Purpose
    vector: _containers.RepeatedScalarFieldContainer[float]
    input_version: str
    floor: float
    limit: int
    entity_ids: _containers.RepeatedScalarFieldContainer[str]
    expiry_days: int
    memories_top: int
    occurred_after: _timestamp_pb2.Timestamp
    occurred_before: _timestamp_pb2.Timestamp
    as_of: _timestamp_pb2.Timestamp
    known_at: _timestamp_pb2.Timestamp
    held_memory_ids: _containers.RepeatedScalarFieldContainer[str]
    wanted_memory_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., purpose: _Optional[_Union[_memory_pb2.Purpose, str]] = ..., vector: _Optional[_Iterable[float]] = ..., input_version: _Optional[str] = ..., floor: _Optional[float] = ..., limit: _Optional[int] = ..., entity_ids: _Optional[_Iterable[str]] = ..., expiry_days: _Optional[int] = ..., memories_top: _Optional[int] = ..., occurred_after: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., occurred_before: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., held_memory_ids: _Optional[_Iterable[str]] = ..., wanted_memory_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class DenseCandidatesResponse(_message.Message):
    __slots__ = ("candidates", "stamp_current")
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    STAMP_CURRENT_FIELD_NUMBER: _ClassVar[int]
    candidates: _containers.RepeatedCompositeFieldContainer[Candidate]
    stamp_current: bool
    def __init__(self, candidates: _Optional[_Iterable[_Union[Candidate, _Mapping]]] = ..., stamp_current: _Optional[bool] = ...) -> None: ...

class DeriveRequest(_message.Message):
    __slots__ = ("caller", "source_ids", "kind", "title", "body", "confidence", "entities", "request_id", "valid_from", "relations", "attributes")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    SOURCE_IDS_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    source_ids: _containers.RepeatedScalarFieldContainer[str]
    kind: _memory_pb2.Kind
    title: str
    body: str
    confidence: float
    entities: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityMention]
    request_id: str
    valid_from: _timestamp_pb2.Timestamp
    relations: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityRelation]
    attributes: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityAttribute]
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., source_ids: _Optional[_Iterable[str]] = ..., kind: _Optional[_Union[_memory_pb2.Kind, str]] = ..., title: _Optional[str] = ..., body: _Optional[str] = ..., confidence: _Optional[float] = ..., entities: _Optional[_Iterable[_Union[_memory_pb2.EntityMention, _Mapping]]] = ..., request_id: _Optional[str] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., relations: _Optional[_Iterable[_Union[_memory_pb2.EntityRelation, _Mapping]]] = ..., attributes: _Optional[_Iterable[_Union[_memory_pb2.EntityAttribute, _Mapping]]] = ...) -> None: ...

class DeriveResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ...) -> None: ...

class CorrectRequest(_message.Message):
    __slots__ = ("caller", "memory_id", "expected_revision", "title", "body", "confidence", "valid_from")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    memory_id: str
    expected_revision: int
    title: str
    body: str
    confidence: float
    valid_from: _timestamp_pb2.Timestamp
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., memory_id: _Optional[str] = ..., expected_revision: _Optional[int] = ..., title: _Optional[str] = ..., body: _Optional[str] = ..., confidence: _Optional[float] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class CorrectResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ...) -> None: ...

class SupersedeRequest(_message.Message):
    __slots__ = ("caller", "memory_id", "expected_revision", "kind", "title", "body", "audience", "confidence", "request_id", "valid_from", "entities", "relations", "attributes")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    REQUEST_ID_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    memory_id: str
    expected_revision: int
    kind: _memory_pb2.Kind
    title: str
    body: str
    audience: _memory_pb2.Audience
    confidence: float
    request_id: str
    valid_from: _timestamp_pb2.Timestamp
    entities: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityMention]
    relations: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityRelation]
    attributes: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityAttribute]
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., memory_id: _Optional[str] = ..., expected_revision: _Optional[int] = ..., kind: _Optional[_Union[_memory_pb2.Kind, str]] = ..., title: _Optional[str] = ..., body: _Optional[str] = ..., audience: _Optional[_Union[_memory_pb2.Audience, str]] = ..., confidence: _Optional[float] = ..., request_id: _Optional[str] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., entities: _Optional[_Iterable[_Union[_memory_pb2.EntityMention, _Mapping]]] = ..., relations: _Optional[_Iterable[_Union[_memory_pb2.EntityRelation, _Mapping]]] = ..., attributes: _Optional[_Iterable[_Union[_memory_pb2.EntityAttribute, _Mapping]]] = ...) -> None: ...

class SupersedeResponse(_message.Message):
    __slots__ = ("memory", "conflict_flag_id")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    CONFLICT_FLAG_ID_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    conflict_flag_id: str
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ..., conflict_flag_id: _Optional[str] = ...) -> None: ...

class InvalidateRequest(_message.Message):
    __slots__ = ("caller", "memory_id", "expected_revision", "reason", "at")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    memory_id: str
    expected_revision: int
    reason: str
    at: _timestamp_pb2.Timestamp
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., memory_id: _Optional[str] = ..., expected_revision: _Optional[int] = ..., reason: _Optional[str] = ..., at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class InvalidateResponse(_message.Message):
    __slots__ = ("memory",)
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    memory: _memory_pb2.Memory
    def __init__(self, memory: _Optional[_Union[_memory_pb2.Memory, _Mapping]] = ...) -> None: ...

class ForgetRequest(_message.Message):
    __slots__ = ("caller", "memory_id", "reason", "expected_revision")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_REVISION_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    memory_id: str
    reason: str
    expected_revision: int
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., memory_id: _Optional[str] = ..., reason: _Optional[str] = ..., expected_revision: _Optional[int] = ...) -> None: ...

class ForgetResponse(_message.Message):
    __slots__ = ("forgotten_ids",)
    FORGOTTEN_IDS_FIELD_NUMBER: _ClassVar[int]
    forgotten_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, forgotten_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class Entity(_message.Message):
    __slots__ = ("id", "name", "aliases", "mentions", "merges")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    ALIASES_FIELD_NUMBER: _ClassVar[int]
    MENTIONS_FIELD_NUMBER: _ClassVar[int]
    MERGES_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    aliases: _containers.RepeatedScalarFieldContainer[str]
    mentions: int
    merges: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityMerge]
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., aliases: _Optional[_Iterable[str]] = ..., mentions: _Optional[int] = ..., merges: _Optional[_Iterable[_Union[_memory_pb2.EntityMerge, _Mapping]]] = ...) -> None: ...

class MergeEntityRequest(_message.Message):
    __slots__ = ("caller", "entity_id", "into_id", "reason")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    INTO_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    entity_id: str
    into_id: str
    reason: str
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., entity_id: _Optional[str] = ..., into_id: _Optional[str] = ..., reason: _Optional[str] = ...) -> None: ...

class MergeEntityResponse(_message.Message):
    __slots__ = ("merge",)
    MERGE_FIELD_NUMBER: _ClassVar[int]
    merge: _memory_pb2.EntityMerge
    def __init__(self, merge: _Optional[_Union[_memory_pb2.EntityMerge, _Mapping]] = ...) -> None: ...

class UnmergeEntityRequest(_message.Message):
    __slots__ = ("caller", "entity_id")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    entity_id: str
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., entity_id: _Optional[str] = ...) -> None: ...

class UnmergeEntityResponse(_message.Message):
    __slots__ = ("merge", "also_undone")
    MERGE_FIELD_NUMBER: _ClassVar[int]
    ALSO_UNDONE_FIELD_NUMBER: _ClassVar[int]
    merge: _memory_pb2.EntityMerge
    also_undone: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityMerge]
    def __init__(self, merge: _Optional[_Union[_memory_pb2.EntityMerge, _Mapping]] = ..., also_undone: _Optional[_Iterable[_Union[_memory_pb2.EntityMerge, _Mapping]]] = ...) -> None: ...

class EntityDuplicate(_message.Message):
    __slots__ = ("entity_a", "entity_b", "reason", "score")
    ENTITY_A_FIELD_NUMBER: _ClassVar[int]
    ENTITY_B_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    entity_a: Entity
    entity_b: Entity
    reason: _memory_pb2.EntityDuplicateReason
    score: float
    def __init__(self, entity_a: _Optional[_Union[Entity, _Mapping]] = ..., entity_b: _Optional[_Union[Entity, _Mapping]] = ..., reason: _Optional[_Union[_memory_pb2.EntityDuplicateReason, str]] = ..., score: _Optional[float] = ...) -> None: ...

class ListEntityDuplicatesRequest(_message.Message):
    __slots__ = ("caller", "page_size", "page_token")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    page_size: int
    page_token: str
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListEntityDuplicatesResponse(_message.Message):
    __slots__ = ("proposals", "next_page_token", "total_size")
    PROPOSALS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TOTAL_SIZE_FIELD_NUMBER: _ClassVar[int]
    proposals: _containers.RepeatedCompositeFieldContainer[EntityDuplicate]
    next_page_token: str
    total_size: int
    def __init__(self, proposals: _Optional[_Iterable[_Union[EntityDuplicate, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., total_size: _Optional[int] = ...) -> None: ...

class GetEntityRequest(_message.Message):
    __slots__ = ("caller", "entity", "as_of", "known_at", "page_size", "page_token")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    AS_OF_FIELD_NUMBER: _ClassVar[int]
    KNOWN_AT_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    entity: str
    as_of: _timestamp_pb2.Timestamp
    known_at: _timestamp_pb2.Timestamp
    page_size: int
    page_token: str
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., entity: _Optional[str] = ..., as_of: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., known_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class GetEntityResponse(_message.Message):
    __slots__ = ("entity", "other_entity_ids", "attributes", "relations_out", "relations_in", "timeline", "next_page_token", "timeline_size", "claims_left_out", "undone_merges")
    ENTITY_FIELD_NUMBER: _ClassVar[int]
    OTHER_ENTITY_IDS_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_OUT_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_IN_FIELD_NUMBER: _ClassVar[int]
    TIMELINE_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    TIMELINE_SIZE_FIELD_NUMBER: _ClassVar[int]
    CLAIMS_LEFT_OUT_FIELD_NUMBER: _ClassVar[int]
    UNDONE_MERGES_FIELD_NUMBER: _ClassVar[int]
    entity: Entity
    other_entity_ids: _containers.RepeatedScalarFieldContainer[str]
    attributes: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityAttributeClaim]
    relations_out: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityRelationClaim]
    relations_in: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityRelationClaim]
    timeline: _containers.RepeatedCompositeFieldContainer[_memory_pb2.Memory]
    next_page_token: str
    timeline_size: int
    claims_left_out: int
    undone_merges: _containers.RepeatedCompositeFieldContainer[_memory_pb2.EntityMerge]
    def __init__(self, entity: _Optional[_Union[Entity, _Mapping]] = ..., other_entity_ids: _Optional[_Iterable[str]] = ..., attributes: _Optional[_Iterable[_Union[_memory_pb2.EntityAttributeClaim, _Mapping]]] = ..., relations_out: _Optional[_Iterable[_Union[_memory_pb2.EntityRelationClaim, _Mapping]]] = ..., relations_in: _Optional[_Iterable[_Union[_memory_pb2.EntityRelationClaim, _Mapping]]] = ..., timeline: _Optional[_Iterable[_Union[_memory_pb2.Memory, _Mapping]]] = ..., next_page_token: _Optional[str] = ..., timeline_size: _Optional[int] = ..., claims_left_out: _Optional[int] = ..., undone_merges: _Optional[_Iterable[_Union[_memory_pb2.EntityMerge, _Mapping]]] = ...) -> None: ...

class FindEntitiesRequest(_message.Message):
    __slots__ = ("caller", "name")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    name: str
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., name: _Optional[str] = ...) -> None: ...

class FindEntitiesResponse(_message.Message):
    __slots__ = ("entities",)
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    entities: _containers.RepeatedCompositeFieldContainer[Entity]
    def __init__(self, entities: _Optional[_Iterable[_Union[Entity, _Mapping]]] = ...) -> None: ...

class GetStatusRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class GetStatusResponse(_message.Message):
    __slots__ = ("database_ok", "embedding_backlog", "workspaces", "database_servers")
    DATABASE_OK_FIELD_NUMBER: _ClassVar[int]
    EMBEDDING_BACKLOG_FIELD_NUMBER: _ClassVar[int]
    WORKSPACES_FIELD_NUMBER: _ClassVar[int]
    DATABASE_SERVERS_FIELD_NUMBER: _ClassVar[int]
    database_ok: bool
    embedding_backlog: int
    workspaces: int
    database_servers: _containers.RepeatedCompositeFieldContainer[_memory_pb2.DatabaseServerStatus]
    def __init__(self, database_ok: _Optional[bool] = ..., embedding_backlog: _Optional[int] = ..., workspaces: _Optional[int] = ..., database_servers: _Optional[_Iterable[_Union[_memory_pb2.DatabaseServerStatus, _Mapping]]] = ...) -> None: ...

class SessionMemory(_message.Message):
    __slots__ = ("memory_id", "revision")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    revision: int
    def __init__(self, memory_id: _Optional[str] = ..., revision: _Optional[int] = ...) -> None: ...

class ShownInSessionRequest(_message.Message):
    __slots__ = ("caller", "session_key_sha256", "memories")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_SHA256_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    session_key_sha256: bytes
    memories: _containers.RepeatedCompositeFieldContainer[SessionMemory]
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., session_key_sha256: _Optional[bytes] = ..., memories: _Optional[_Iterable[_Union[SessionMemory, _Mapping]]] = ...) -> None: ...

class ShownInSessionResponse(_message.Message):
    __slots__ = ("shown_ids",)
    SHOWN_IDS_FIELD_NUMBER: _ClassVar[int]
    shown_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, shown_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class RecordShownRequest(_message.Message):
    __slots__ = ("caller", "session_key_sha256", "memories")
    CALLER_FIELD_NUMBER: _ClassVar[int]
    SESSION_KEY_SHA256_FIELD_NUMBER: _ClassVar[int]
    MEMORIES_FIELD_NUMBER: _ClassVar[int]
    caller: _memory_pb2.Caller
    session_key_sha256: bytes
    memories: _containers.RepeatedCompositeFieldContainer[SessionMemory]
    def __init__(self, caller: _Optional[_Union[_memory_pb2.Caller, _Mapping]] = ..., session_key_sha256: _Optional[bytes] = ..., memories: _Optional[_Iterable[_Union[SessionMemory, _Mapping]]] = ...) -> None: ...

class RecordShownResponse(_message.Message):
    __slots__ = ("recorded",)
    RECORDED_FIELD_NUMBER: _ClassVar[int]
    recorded: int
    def __init__(self, recorded: _Optional[int] = ...) -> None: ...

class ListWorkspacesRequest(_message.Message):
    __slots__ = ("page_size", "page_token")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListWorkspacesResponse(_message.Message):
    __slots__ = ("workspaces", "next_page_token")
    WORKSPACES_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    workspaces: _containers.RepeatedCompositeFieldContainer[_memory_pb2.WorkspaceSummary]
    next_page_token: str
    def __init__(self, workspaces: _Optional[_Iterable[_Union[_memory_pb2.WorkspaceSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class GetWorkspaceRequest(_message.Message):
    __slots__ = ("workspace_id",)
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ...) -> None: ...

class GetWorkspaceResponse(_message.Message):
    __slots__ = ("workspace",)
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    workspace: _memory_pb2.WorkspaceSummary
    def __init__(self, workspace: _Optional[_Union[_memory_pb2.WorkspaceSummary, _Mapping]] = ...) -> None: ...

class RenameWorkspaceRequest(_message.Message):
    __slots__ = ("workspace_id", "name")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    name: str
    def __init__(self, workspace_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class RenameWorkspaceResponse(_message.Message):
    __slots__ = ("workspace",)
    WORKSPACE_FIELD_NUMBER: _ClassVar[int]
    workspace: _memory_pb2.WorkspaceSummary
    def __init__(self, workspace: _Optional[_Union[_memory_pb2.WorkspaceSummary, _Mapping]] = ...) -> None: ...

class DeleteWorkspaceRequest(_message.Message):
    __slots__ = ("workspace_id",)
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    def __init__(self, workspace_id: _Optional[str] = ...) -> None: ...

class DeleteWorkspaceResponse(_message.Message):
    __slots__ = ("workspace_id", "name", "members_deleted", "resumed")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MEMBERS_DELETED_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    name: str
    members_deleted: int
    resumed: bool
    def __init__(self, workspace_id: _Optional[str] = ..., name: _Optional[str] = ..., members_deleted: _Optional[int] = ..., resumed: _Optional[bool] = ...) -> None: ...

class MoveWorkspaceRequest(_message.Message):
    __slots__ = ("workspace_id", "server")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    server: str
    def __init__(self, workspace_id: _Optional[str] = ..., server: _Optional[str] = ...) -> None: ...

class MoveWorkspaceResponse(_message.Message):
    __slots__ = ("workspace_id", "from_server", "to_server", "write_pause_ms", "rows_copied", "resumed")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    FROM_SERVER_FIELD_NUMBER: _ClassVar[int]
    TO_SERVER_FIELD_NUMBER: _ClassVar[int]
    WRITE_PAUSE_MS_FIELD_NUMBER: _ClassVar[int]
    ROWS_COPIED_FIELD_NUMBER: _ClassVar[int]
    RESUMED_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    from_server: str
    to_server: str
    write_pause_ms: int
    rows_copied: int
    resumed: bool
    def __init__(self, workspace_id: _Optional[str] = ..., from_server: _Optional[str] = ..., to_server: _Optional[str] = ..., write_pause_ms: _Optional[int] = ..., rows_copied: _Optional[int] = ..., resumed: _Optional[bool] = ...) -> None: ...

class ListMembersRequest(_message.Message):
    __slots__ = ("workspace_id", "page_size", "page_token")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    page_size: int
    page_token: str
    def __init__(self, workspace_id: _Optional[str] = ..., page_size: _Optional[int] = ..., page_token: _Optional[str] = ...) -> None: ...

class ListMembersResponse(_message.Message):
    __slots__ = ("members", "next_page_token")
    MEMBERS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    members: _containers.RepeatedCompositeFieldContainer[_memory_pb2.MemberSummary]
    next_page_token: str
    def __init__(self, members: _Optional[_Iterable[_Union[_memory_pb2.MemberSummary, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class IssueMemberTokenRequest(_message.Message):
    __slots__ = ("workspace_id", "member_id", "purposes", "revoke_others")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    PURPOSES_FIELD_NUMBER: _ClassVar[int]
    REVOKE_OTHERS_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    member_id: str
    purposes: _containers.RepeatedScalarFieldContainer[_memory_pb2.Purpose]
    revoke_others: bool
    def __init__(self, workspace_id: _Optional[str] = ..., member_id: _Optional[str] = ..., purposes: _Optional[_Iterable[_Union[_memory_pb2.Purpose, str]]] = ..., revoke_others: _Optional[bool] = ...) -> None: ...

class IssueMemberTokenResponse(_message.Message):
    __slots__ = ("token", "member_id", "revoked")
    TOKEN_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    REVOKED_FIELD_NUMBER: _ClassVar[int]
    token: str
    member_id: str
    revoked: int
    def __init__(self, token: _Optional[str] = ..., member_id: _Optional[str] = ..., revoked: _Optional[int] = ...) -> None: ...

class RenameMemberRequest(_message.Message):
    __slots__ = ("workspace_id", "member_id", "display_name")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    member_id: str
    display_name: str
    def __init__(self, workspace_id: _Optional[str] = ..., member_id: _Optional[str] = ..., display_name: _Optional[str] = ...) -> None: ...

class RenameMemberResponse(_message.Message):
    __slots__ = ("member",)
    MEMBER_FIELD_NUMBER: _ClassVar[int]
    member: _memory_pb2.MemberSummary
    def __init__(self, member: _Optional[_Union[_memory_pb2.MemberSummary, _Mapping]] = ...) -> None: ...
