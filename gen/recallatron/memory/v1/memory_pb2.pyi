import datetime

from google.protobuf import timestamp_pb2 as _timestamp_pb2
from google.rpc import status_pb2 as _status_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Kind(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    KIND_UNSPECIFIED: _ClassVar[Kind]
    KIND_NOTE: _ClassVar[Kind]
    KIND_FACT: _ClassVar[Kind]
    KIND_DECISION: _ClassVar[Kind]
    KIND_SUMMARY: _ClassVar[Kind]

class Purpose(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    PURPOSE_UNSPECIFIED: _ClassVar[Purpose]
    PURPOSE_CONVERSATION: _ClassVar[Purpose]
    PURPOSE_TASKS: _ClassVar[Purpose]
    PURPOSE_REPORTING: _ClassVar[Purpose]
    PURPOSE_ADMINISTRATION: _ClassVar[Purpose]

class Audience(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    AUDIENCE_UNSPECIFIED: _ClassVar[Audience]
    AUDIENCE_WORKSPACE: _ClassVar[Audience]
    AUDIENCE_MEMBER: _ClassVar[Audience]

class Origin(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ORIGIN_UNSPECIFIED: _ClassVar[Origin]
    ORIGIN_TOLD: _ClassVar[Origin]
    ORIGIN_DERIVED: _ClassVar[Origin]
    ORIGIN_MIGRATED: _ClassVar[Origin]

class Role(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ROLE_UNSPECIFIED: _ClassVar[Role]
    ROLE_MEMBER: _ClassVar[Role]
    ROLE_ADMIN: _ClassVar[Role]

class LinkType(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    LINK_TYPE_UNSPECIFIED: _ClassVar[LinkType]
    LINK_TYPE_DERIVED_FROM: _ClassVar[LinkType]
    LINK_TYPE_ABOUT: _ClassVar[LinkType]

class RecallMode(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    RECALL_MODE_UNSPECIFIED: _ClassVar[RecallMode]
    RECALL_MODE_LEXICAL: _ClassVar[RecallMode]
    RECALL_MODE_DENSE: _ClassVar[RecallMode]
    RECALL_MODE_HYBRID: _ClassVar[RecallMode]

class InjectGate(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    INJECT_GATE_UNSPECIFIED: _ClassVar[InjectGate]
    INJECT_GATE_STRICT: _ClassVar[InjectGate]
    INJECT_GATE_DEFAULT: _ClassVar[InjectGate]
    INJECT_GATE_LOOSE: _ClassVar[InjectGate]

class SupersededFilter(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    SUPERSEDED_FILTER_UNSPECIFIED: _ClassVar[SupersededFilter]
    SUPERSEDED_FILTER_CURRENT: _ClassVar[SupersededFilter]
    SUPERSEDED_FILTER_SUPERSEDED: _ClassVar[SupersededFilter]
    SUPERSEDED_FILTER_ALL: _ClassVar[SupersededFilter]

class EntityResolutionOutcome(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENTITY_RESOLUTION_OUTCOME_UNSPECIFIED: _ClassVar[EntityResolutionOutcome]
    ENTITY_RESOLUTION_OUTCOME_CREATED: _ClassVar[EntityResolutionOutcome]
    ENTITY_RESOLUTION_OUTCOME_LINKED: _ClassVar[EntityResolutionOutcome]
    ENTITY_RESOLUTION_OUTCOME_CHOSEN: _ClassVar[EntityResolutionOutcome]

class EntityDuplicateReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ENTITY_DUPLICATE_REASON_UNSPECIFIED: _ClassVar[EntityDuplicateReason]
    ENTITY_DUPLICATE_REASON_SAME_NAME: _ClassVar[EntityDuplicateReason]
    ENTITY_DUPLICATE_REASON_ACCENTS: _ClassVar[EntityDuplicateReason]
    ENTITY_DUPLICATE_REASON_INITIALS: _ClassVar[EntityDuplicateReason]

class ContextPart(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONTEXT_PART_UNSPECIFIED: _ClassVar[ContextPart]
    CONTEXT_PART_PINNED: _ClassVar[ContextPart]
    CONTEXT_PART_SUMMARY: _ClassVar[ContextPart]
    CONTEXT_PART_ENTITY: _ClassVar[ContextPart]
    CONTEXT_PART_RECENT: _ClassVar[ContextPart]

class CaptureSkipReason(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CAPTURE_SKIP_REASON_UNSPECIFIED: _ClassVar[CaptureSkipReason]
    CAPTURE_SKIP_REASON_SPAN_NOT_IN_TURN: _ClassVar[CaptureSkipReason]
    CAPTURE_SKIP_REASON_EMPTY_BODY: _ClassVar[CaptureSkipReason]
    CAPTURE_SKIP_REASON_ALREADY_KNOWN: _ClassVar[CaptureSkipReason]

class ImportStatus(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    IMPORT_STATUS_UNSPECIFIED: _ClassVar[ImportStatus]
    IMPORT_STATUS_CREATED: _ClassVar[ImportStatus]
    IMPORT_STATUS_ALREADY_IMPORTED: _ClassVar[ImportStatus]
    IMPORT_STATUS_FAILED: _ClassVar[ImportStatus]

class DuplicateDecision(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    DUPLICATE_DECISION_UNSPECIFIED: _ClassVar[DuplicateDecision]
    DUPLICATE_DECISION_KEEP_BOTH: _ClassVar[DuplicateDecision]
    DUPLICATE_DECISION_SUPERSEDE: _ClassVar[DuplicateDecision]
    DUPLICATE_DECISION_FORGET: _ClassVar[DuplicateDecision]

class ConflictFlagState(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFLICT_FLAG_STATE_UNSPECIFIED: _ClassVar[ConflictFlagState]
    CONFLICT_FLAG_STATE_OPEN: _ClassVar[ConflictFlagState]
    CONFLICT_FLAG_STATE_ACKNOWLEDGED: _ClassVar[ConflictFlagState]
    CONFLICT_FLAG_STATE_UNDONE: _ClassVar[ConflictFlagState]

class ConflictResolution(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    CONFLICT_RESOLUTION_UNSPECIFIED: _ClassVar[ConflictResolution]
    CONFLICT_RESOLUTION_ACKNOWLEDGE: _ClassVar[ConflictResolution]
    CONFLICT_RESOLUTION_UNDO: _ClassVar[ConflictResolution]
KIND_UNSPECIFIED: Kind
KIND_NOTE: Kind
KIND_FACT: Kind
KIND_DECISION: Kind
KIND_SUMMARY: Kind
PURPOSE_UNSPECIFIED: Purpose
PURPOSE_CONVERSATION: Purpose
PURPOSE_TASKS: Purpose
PURPOSE_REPORTING: Purpose
PURPOSE_ADMINISTRATION: Purpose
AUDIENCE_UNSPECIFIED: Audience
AUDIENCE_WORKSPACE: Audience
AUDIENCE_MEMBER: Audience
ORIGIN_UNSPECIFIED: Origin
ORIGIN_TOLD: Origin
ORIGIN_DERIVED: Origin
ORIGIN_MIGRATED: Origin
ROLE_UNSPECIFIED: Role
ROLE_MEMBER: Role
ROLE_ADMIN: Role
LINK_TYPE_UNSPECIFIED: LinkType
LINK_TYPE_DERIVED_FROM: LinkType
LINK_TYPE_ABOUT: LinkType
RECALL_MODE_UNSPECIFIED: RecallMode
RECALL_MODE_LEXICAL: RecallMode
RECALL_MODE_DENSE: RecallMode
RECALL_MODE_HYBRID: RecallMode
INJECT_GATE_UNSPECIFIED: InjectGate
INJECT_GATE_STRICT: InjectGate
INJECT_GATE_DEFAULT: InjectGate
INJECT_GATE_LOOSE: InjectGate
SUPERSEDED_FILTER_UNSPECIFIED: SupersededFilter
SUPERSEDED_FILTER_CURRENT: SupersededFilter
SUPERSEDED_FILTER_SUPERSEDED: SupersededFilter
SUPERSEDED_FILTER_ALL: SupersededFilter
ENTITY_RESOLUTION_OUTCOME_UNSPECIFIED: EntityResolutionOutcome
ENTITY_RESOLUTION_OUTCOME_CREATED: EntityResolutionOutcome
ENTITY_RESOLUTION_OUTCOME_LINKED: EntityResolutionOutcome
ENTITY_RESOLUTION_OUTCOME_CHOSEN: EntityResolutionOutcome
ENTITY_DUPLICATE_REASON_UNSPECIFIED: EntityDuplicateReason
ENTITY_DUPLICATE_REASON_SAME_NAME: EntityDuplicateReason
ENTITY_DUPLICATE_REASON_ACCENTS: EntityDuplicateReason
ENTITY_DUPLICATE_REASON_INITIALS: EntityDuplicateReason
CONTEXT_PART_UNSPECIFIED: ContextPart
CONTEXT_PART_PINNED: ContextPart
CONTEXT_PART_SUMMARY: ContextPart
CONTEXT_PART_ENTITY: ContextPart
CONTEXT_PART_RECENT: ContextPart
CAPTURE_SKIP_REASON_UNSPECIFIED: CaptureSkipReason
CAPTURE_SKIP_REASON_SPAN_NOT_IN_TURN: CaptureSkipReason
CAPTURE_SKIP_REASON_EMPTY_BODY: CaptureSkipReason
CAPTURE_SKIP_REASON_ALREADY_KNOWN: CaptureSkipReason
IMPORT_STATUS_UNSPECIFIED: ImportStatus
IMPORT_STATUS_CREATED: ImportStatus
IMPORT_STATUS_ALREADY_IMPORTED: ImportStatus
IMPORT_STATUS_FAILED: ImportStatus
DUPLICATE_DECISION_UNSPECIFIED: DuplicateDecision
DUPLICATE_DECISION_KEEP_BOTH: DuplicateDecision
DUPLICATE_DECISION_SUPERSEDE: DuplicateDecision
DUPLICATE_DECISION_FORGET: DuplicateDecision
CONFLICT_FLAG_STATE_UNSPECIFIED: ConflictFlagState
CONFLICT_FLAG_STATE_OPEN: ConflictFlagState
CONFLICT_FLAG_STATE_ACKNOWLEDGED: ConflictFlagState
CONFLICT_FLAG_STATE_UNDONE: ConflictFlagState
CONFLICT_RESOLUTION_UNSPECIFIED: ConflictResolution
CONFLICT_RESOLUTION_ACKNOWLEDGE: ConflictResolution
CONFLICT_RESOLUTION_UNDO: ConflictResolution

class Caller(_message.Message):
    __slots__ = ("workspace_id", "member_id", "role", "granted_purposes")
    WORKSPACE_ID_FIELD_NUMBER: _ClassVar[int]
    MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    GRANTED_PURPOSES_FIELD_NUMBER: _ClassVar[int]
    workspace_id: str
    member_id: str
    role: Role
    granted_purposes: _containers.RepeatedScalarFieldContainer[Purpose]
    def __init__(self, workspace_id: _Optional[str] = ..., member_id: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., granted_purposes: _Optional[_Iterable[_Union[Purpose, str]]] = ...) -> None: ...

class Link(_message.Message):
    __slots__ = ("type", "target_memory_id", "target_entity_id", "target_entity_name")
    TYPE_FIELD_NUMBER: _ClassVar[int]
    TARGET_MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    TARGET_ENTITY_NAME_FIELD_NUMBER: _ClassVar[int]
    type: LinkType
    target_memory_id: str
    target_entity_id: str
    target_entity_name: str
    def __init__(self, type: _Optional[_Union[LinkType, str]] = ..., target_memory_id: _Optional[str] = ..., target_entity_id: _Optional[str] = ..., target_entity_name: _Optional[str] = ...) -> None: ...

class Revision(_message.Message):
    __slots__ = ("revision", "title", "body", "confidence", "replaced_at", "valid_from", "revised_by", "revised_by_name")
    REVISION_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    REPLACED_AT_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    REVISED_BY_FIELD_NUMBER: _ClassVar[int]
    REVISED_BY_NAME_FIELD_NUMBER: _ClassVar[int]
    revision: int
    title: str
    body: str
    confidence: float
    replaced_at: _timestamp_pb2.Timestamp
    valid_from: _timestamp_pb2.Timestamp
    revised_by: str
    revised_by_name: str
    def __init__(self, revision: _Optional[int] = ..., title: _Optional[str] = ..., body: _Optional[str] = ..., confidence: _Optional[float] = ..., replaced_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., revised_by: _Optional[str] = ..., revised_by_name: _Optional[str] = ...) -> None: ...

class Memory(_message.Message):
    __slots__ = ("id", "revision", "kind", "title", "body", "audience", "audience_member_id", "purpose", "confidence", "origin", "superseded_by_id", "invalidation_reason", "created_by", "created_at", "updated_at", "occurred_at", "forgotten", "links", "history", "reason", "evidence", "valid_from", "valid_until", "invalidated", "entity_resolutions", "relations", "attributes", "created_by_name", "revised_by", "revised_by_name")
    ID_FIELD_NUMBER: _ClassVar[int]
    REVISION_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDED_BY_ID_FIELD_NUMBER: _ClassVar[int]
    INVALIDATION_REASON_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    FORGOTTEN_FIELD_NUMBER: _ClassVar[int]
    LINKS_FIELD_NUMBER: _ClassVar[int]
    HISTORY_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_UNTIL_FIELD_NUMBER: _ClassVar[int]
    INVALIDATED_FIELD_NUMBER: _ClassVar[int]
    ENTITY_RESOLUTIONS_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_NAME_FIELD_NUMBER: _ClassVar[int]
    REVISED_BY_FIELD_NUMBER: _ClassVar[int]
    REVISED_BY_NAME_FIELD_NUMBER: _ClassVar[int]
    id: str
    revision: int
    kind: Kind
    title: str
    body: str
    audience: Audience
    audience_member_id: str
    purpose: Purpose
    confidence: float
    origin: Origin
    superseded_by_id: str
    invalidation_reason: str
    created_by: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    occurred_at: _timestamp_pb2.Timestamp
    forgotten: bool
    links: _containers.RepeatedCompositeFieldContainer[Link]
    history: _containers.RepeatedCompositeFieldContainer[Revision]
    reason: str
    evidence: CaptureEvidence
    valid_from: _timestamp_pb2.Timestamp
    valid_until: _timestamp_pb2.Timestamp
    invalidated: bool
    entity_resolutions: _containers.RepeatedCompositeFieldContainer[EntityResolution]
    relations: _containers.RepeatedCompositeFieldContainer[StatedRelation]
    attributes: _containers.RepeatedCompositeFieldContainer[StatedAttribute]
    created_by_name: str
    revised_by: str
    revised_by_name: str
    def __init__(self, id: _Optional[str] = ..., revision: _Optional[int] = ..., kind: _Optional[_Union[Kind, str]] = ..., title: _Optional[str] = ..., body: _Optional[str] = ..., audience: _Optional[_Union[Audience, str]] = ..., audience_member_id: _Optional[str] = ..., purpose: _Optional[_Union[Purpose, str]] = ..., confidence: _Optional[float] = ..., origin: _Optional[_Union[Origin, str]] = ..., superseded_by_id: _Optional[str] = ..., invalidation_reason: _Optional[str] = ..., created_by: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., forgotten: _Optional[bool] = ..., links: _Optional[_Iterable[_Union[Link, _Mapping]]] = ..., history: _Optional[_Iterable[_Union[Revision, _Mapping]]] = ..., reason: _Optional[str] = ..., evidence: _Optional[_Union[CaptureEvidence, _Mapping]] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., invalidated: _Optional[bool] = ..., entity_resolutions: _Optional[_Iterable[_Union[EntityResolution, _Mapping]]] = ..., relations: _Optional[_Iterable[_Union[StatedRelation, _Mapping]]] = ..., attributes: _Optional[_Iterable[_Union[StatedAttribute, _Mapping]]] = ..., created_by_name: _Optional[str] = ..., revised_by: _Optional[str] = ..., revised_by_name: _Optional[str] = ...) -> None: ...

class EntityResolution(_message.Message):
    __slots__ = ("name", "entity_id", "outcome", "other_entity_ids")
    NAME_FIELD_NUMBER: _ClassVar[int]
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    OUTCOME_FIELD_NUMBER: _ClassVar[int]
    OTHER_ENTITY_IDS_FIELD_NUMBER: _ClassVar[int]
    name: str
    entity_id: str
    outcome: EntityResolutionOutcome
    other_entity_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, name: _Optional[str] = ..., entity_id: _Optional[str] = ..., outcome: _Optional[_Union[EntityResolutionOutcome, str]] = ..., other_entity_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class EntityMerge(_message.Message):
    __slots__ = ("entity_id", "into_id", "merged_by", "merged_by_name", "reason", "merged_at", "undone_by", "undone_at", "undone_by_name")
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    INTO_ID_FIELD_NUMBER: _ClassVar[int]
    MERGED_BY_FIELD_NUMBER: _ClassVar[int]
    MERGED_BY_NAME_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    MERGED_AT_FIELD_NUMBER: _ClassVar[int]
    UNDONE_BY_FIELD_NUMBER: _ClassVar[int]
    UNDONE_AT_FIELD_NUMBER: _ClassVar[int]
    UNDONE_BY_NAME_FIELD_NUMBER: _ClassVar[int]
    entity_id: str
    into_id: str
    merged_by: str
    merged_by_name: str
    reason: str
    merged_at: _timestamp_pb2.Timestamp
    undone_by: str
    undone_at: _timestamp_pb2.Timestamp
    undone_by_name: str
    def __init__(self, entity_id: _Optional[str] = ..., into_id: _Optional[str] = ..., merged_by: _Optional[str] = ..., merged_by_name: _Optional[str] = ..., reason: _Optional[str] = ..., merged_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., undone_by: _Optional[str] = ..., undone_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., undone_by_name: _Optional[str] = ...) -> None: ...

class EntityRelation(_message.Message):
    __slots__ = ("subject", "predicate", "object")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_FIELD_NUMBER: _ClassVar[int]
    subject: EntityMention
    predicate: str
    object: EntityMention
    def __init__(self, subject: _Optional[_Union[EntityMention, _Mapping]] = ..., predicate: _Optional[str] = ..., object: _Optional[_Union[EntityMention, _Mapping]] = ...) -> None: ...

class EntityAttribute(_message.Message):
    __slots__ = ("subject", "key", "value")
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    subject: EntityMention
    key: str
    value: str
    def __init__(self, subject: _Optional[_Union[EntityMention, _Mapping]] = ..., key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class StatedRelation(_message.Message):
    __slots__ = ("subject_id", "subject_name", "predicate", "object_id", "object_name")
    SUBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_NAME_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    OBJECT_NAME_FIELD_NUMBER: _ClassVar[int]
    subject_id: str
    subject_name: str
    predicate: str
    object_id: str
    object_name: str
    def __init__(self, subject_id: _Optional[str] = ..., subject_name: _Optional[str] = ..., predicate: _Optional[str] = ..., object_id: _Optional[str] = ..., object_name: _Optional[str] = ...) -> None: ...

class StatedAttribute(_message.Message):
    __slots__ = ("subject_id", "subject_name", "key", "value")
    SUBJECT_ID_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_NAME_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    subject_id: str
    subject_name: str
    key: str
    value: str
    def __init__(self, subject_id: _Optional[str] = ..., subject_name: _Optional[str] = ..., key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class ImportedRelation(_message.Message):
    __slots__ = ("subject_key", "predicate", "object_key")
    SUBJECT_KEY_FIELD_NUMBER: _ClassVar[int]
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    OBJECT_KEY_FIELD_NUMBER: _ClassVar[int]
    subject_key: str
    predicate: str
    object_key: str
    def __init__(self, subject_key: _Optional[str] = ..., predicate: _Optional[str] = ..., object_key: _Optional[str] = ...) -> None: ...

class ImportedAttribute(_message.Message):
    __slots__ = ("subject_key", "key", "value")
    SUBJECT_KEY_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    subject_key: str
    key: str
    value: str
    def __init__(self, subject_key: _Optional[str] = ..., key: _Optional[str] = ..., value: _Optional[str] = ...) -> None: ...

class EntityAttributeClaim(_message.Message):
    __slots__ = ("key", "value", "memory_id", "valid_from", "created_by", "created_by_name")
    KEY_FIELD_NUMBER: _ClassVar[int]
    VALUE_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_NAME_FIELD_NUMBER: _ClassVar[int]
    key: str
    value: str
    memory_id: str
    valid_from: _timestamp_pb2.Timestamp
    created_by: str
    created_by_name: str
    def __init__(self, key: _Optional[str] = ..., value: _Optional[str] = ..., memory_id: _Optional[str] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_by: _Optional[str] = ..., created_by_name: _Optional[str] = ...) -> None: ...

class EntityRelationClaim(_message.Message):
    __slots__ = ("predicate", "entity_id", "entity_name", "memory_id", "valid_from", "created_by", "created_by_name")
    PREDICATE_FIELD_NUMBER: _ClassVar[int]
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    ENTITY_NAME_FIELD_NUMBER: _ClassVar[int]
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_FIELD_NUMBER: _ClassVar[int]
    CREATED_BY_NAME_FIELD_NUMBER: _ClassVar[int]
    predicate: str
    entity_id: str
    entity_name: str
    memory_id: str
    valid_from: _timestamp_pb2.Timestamp
    created_by: str
    created_by_name: str
    def __init__(self, predicate: _Optional[str] = ..., entity_id: _Optional[str] = ..., entity_name: _Optional[str] = ..., memory_id: _Optional[str] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., created_by: _Optional[str] = ..., created_by_name: _Optional[str] = ...) -> None: ...

class CaptureEvidence(_message.Message):
    __slots__ = ("span", "turn")
    SPAN_FIELD_NUMBER: _ClassVar[int]
    TURN_FIELD_NUMBER: _ClassVar[int]
    span: str
    turn: str
    def __init__(self, span: _Optional[str] = ..., turn: _Optional[str] = ...) -> None: ...

class MentionedEntity(_message.Message):
    __slots__ = ("entity_id", "name", "mentions")
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    MENTIONS_FIELD_NUMBER: _ClassVar[int]
    entity_id: str
    name: str
    mentions: int
    def __init__(self, entity_id: _Optional[str] = ..., name: _Optional[str] = ..., mentions: _Optional[int] = ...) -> None: ...

class CaptureProposal(_message.Message):
    __slots__ = ("span", "kind", "title", "body", "audience", "confidence", "entities")
    SPAN_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    span: str
    kind: Kind
    title: str
    body: str
    audience: Audience
    confidence: float
    entities: _containers.RepeatedCompositeFieldContainer[EntityMention]
    def __init__(self, span: _Optional[str] = ..., kind: _Optional[_Union[Kind, str]] = ..., title: _Optional[str] = ..., body: _Optional[str] = ..., audience: _Optional[_Union[Audience, str]] = ..., confidence: _Optional[float] = ..., entities: _Optional[_Iterable[_Union[EntityMention, _Mapping]]] = ...) -> None: ...

class CaptureSkip(_message.Message):
    __slots__ = ("reason", "message", "known_memory_id")
    REASON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    KNOWN_MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    reason: CaptureSkipReason
    message: str
    known_memory_id: str
    def __init__(self, reason: _Optional[_Union[CaptureSkipReason, str]] = ..., message: _Optional[str] = ..., known_memory_id: _Optional[str] = ...) -> None: ...

class CaptureResult(_message.Message):
    __slots__ = ("memory", "skipped")
    MEMORY_FIELD_NUMBER: _ClassVar[int]
    SKIPPED_FIELD_NUMBER: _ClassVar[int]
    memory: Memory
    skipped: CaptureSkip
    def __init__(self, memory: _Optional[_Union[Memory, _Mapping]] = ..., skipped: _Optional[_Union[CaptureSkip, _Mapping]] = ...) -> None: ...

class EntityMention(_message.Message):
    __slots__ = ("entity_id", "name")
    ENTITY_ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    entity_id: str
    name: str
    def __init__(self, entity_id: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ImportedEntity(_message.Message):
    __slots__ = ("import_key", "name")
    IMPORT_KEY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    import_key: str
    name: str
    def __init__(self, import_key: _Optional[str] = ..., name: _Optional[str] = ...) -> None: ...

class ImportedRevision(_message.Message):
    __slots__ = ("title", "body", "confidence", "replaced_at", "valid_from")
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    REPLACED_AT_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    title: str
    body: str
    confidence: float
    replaced_at: _timestamp_pb2.Timestamp
    valid_from: _timestamp_pb2.Timestamp
    def __init__(self, title: _Optional[str] = ..., body: _Optional[str] = ..., confidence: _Optional[float] = ..., replaced_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...

class ImportedMemory(_message.Message):
    __slots__ = ("import_key", "author_member_id", "kind", "title", "body", "audience", "purpose", "origin", "confidence", "reason", "created_at", "updated_at", "occurred_at", "entities", "entity_keys", "revisions", "derived_from_keys", "supersedes_key", "valid_from", "valid_until", "invalidation_reason", "relations", "attributes")
    IMPORT_KEY_FIELD_NUMBER: _ClassVar[int]
    AUTHOR_MEMBER_ID_FIELD_NUMBER: _ClassVar[int]
    KIND_FIELD_NUMBER: _ClassVar[int]
    TITLE_FIELD_NUMBER: _ClassVar[int]
    BODY_FIELD_NUMBER: _ClassVar[int]
    AUDIENCE_FIELD_NUMBER: _ClassVar[int]
    PURPOSE_FIELD_NUMBER: _ClassVar[int]
    ORIGIN_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    OCCURRED_AT_FIELD_NUMBER: _ClassVar[int]
    ENTITIES_FIELD_NUMBER: _ClassVar[int]
    ENTITY_KEYS_FIELD_NUMBER: _ClassVar[int]
    REVISIONS_FIELD_NUMBER: _ClassVar[int]
    DERIVED_FROM_KEYS_FIELD_NUMBER: _ClassVar[int]
    SUPERSEDES_KEY_FIELD_NUMBER: _ClassVar[int]
    VALID_FROM_FIELD_NUMBER: _ClassVar[int]
    VALID_UNTIL_FIELD_NUMBER: _ClassVar[int]
    INVALIDATION_REASON_FIELD_NUMBER: _ClassVar[int]
    RELATIONS_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    import_key: str
    author_member_id: str
    kind: Kind
    title: str
    body: str
    audience: Audience
    purpose: Purpose
    origin: Origin
    confidence: float
    reason: str
    created_at: _timestamp_pb2.Timestamp
    updated_at: _timestamp_pb2.Timestamp
    occurred_at: _timestamp_pb2.Timestamp
    entities: _containers.RepeatedCompositeFieldContainer[EntityMention]
    entity_keys: _containers.RepeatedScalarFieldContainer[str]
    revisions: _containers.RepeatedCompositeFieldContainer[ImportedRevision]
    derived_from_keys: _containers.RepeatedScalarFieldContainer[str]
    supersedes_key: str
    valid_from: _timestamp_pb2.Timestamp
    valid_until: _timestamp_pb2.Timestamp
    invalidation_reason: str
    relations: _containers.RepeatedCompositeFieldContainer[ImportedRelation]
    attributes: _containers.RepeatedCompositeFieldContainer[ImportedAttribute]
    def __init__(self, import_key: _Optional[str] = ..., author_member_id: _Optional[str] = ..., kind: _Optional[_Union[Kind, str]] = ..., title: _Optional[str] = ..., body: _Optional[str] = ..., audience: _Optional[_Union[Audience, str]] = ..., purpose: _Optional[_Union[Purpose, str]] = ..., origin: _Optional[_Union[Origin, str]] = ..., confidence: _Optional[float] = ..., reason: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., updated_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., occurred_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., entities: _Optional[_Iterable[_Union[EntityMention, _Mapping]]] = ..., entity_keys: _Optional[_Iterable[str]] = ..., revisions: _Optional[_Iterable[_Union[ImportedRevision, _Mapping]]] = ..., derived_from_keys: _Optional[_Iterable[str]] = ..., supersedes_key: _Optional[str] = ..., valid_from: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., valid_until: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., invalidation_reason: _Optional[str] = ..., relations: _Optional[_Iterable[_Union[ImportedRelation, _Mapping]]] = ..., attributes: _Optional[_Iterable[_Union[ImportedAttribute, _Mapping]]] = ...) -> None: ...

class ImportResult(_message.Message):
    __slots__ = ("import_key", "id", "status", "error")
    IMPORT_KEY_FIELD_NUMBER: _ClassVar[int]
    ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    ERROR_FIELD_NUMBER: _ClassVar[int]
    import_key: str
    id: str
    status: ImportStatus
    error: _status_pb2.Status
    def __init__(self, import_key: _Optional[str] = ..., id: _Optional[str] = ..., status: _Optional[_Union[ImportStatus, str]] = ..., error: _Optional[_Union[_status_pb2.Status, _Mapping]] = ...) -> None: ...

class DuplicateProposal(_message.Message):
    __slots__ = ("memory_a", "memory_b", "cosine")
    MEMORY_A_FIELD_NUMBER: _ClassVar[int]
    MEMORY_B_FIELD_NUMBER: _ClassVar[int]
    COSINE_FIELD_NUMBER: _ClassVar[int]
    memory_a: Memory
    memory_b: Memory
    cosine: float
    def __init__(self, memory_a: _Optional[_Union[Memory, _Mapping]] = ..., memory_b: _Optional[_Union[Memory, _Mapping]] = ..., cosine: _Optional[float] = ...) -> None: ...

class ConflictFlag(_message.Message):
    __slots__ = ("id", "older", "newer", "flagged_at", "state", "resolved_at", "resolved_by", "resolved_by_name", "restored_memory_id")
    ID_FIELD_NUMBER: _ClassVar[int]
    OLDER_FIELD_NUMBER: _ClassVar[int]
    NEWER_FIELD_NUMBER: _ClassVar[int]
    FLAGGED_AT_FIELD_NUMBER: _ClassVar[int]
    STATE_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_AT_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_BY_FIELD_NUMBER: _ClassVar[int]
    RESOLVED_BY_NAME_FIELD_NUMBER: _ClassVar[int]
    RESTORED_MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    id: str
    older: Memory
    newer: Memory
    flagged_at: _timestamp_pb2.Timestamp
    state: ConflictFlagState
    resolved_at: _timestamp_pb2.Timestamp
    resolved_by: str
    resolved_by_name: str
    restored_memory_id: str
    def __init__(self, id: _Optional[str] = ..., older: _Optional[_Union[Memory, _Mapping]] = ..., newer: _Optional[_Union[Memory, _Mapping]] = ..., flagged_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., state: _Optional[_Union[ConflictFlagState, str]] = ..., resolved_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., resolved_by: _Optional[str] = ..., resolved_by_name: _Optional[str] = ..., restored_memory_id: _Optional[str] = ...) -> None: ...

class WorkspaceSummary(_message.Message):
    __slots__ = ("id", "name", "created_at", "member_count", "removed_member_count", "dense_floor", "default_mode", "context_bundle", "expiry_days", "inject_gate", "inject_min_cosine", "renamed_from", "server", "moving_to", "moved_from", "move_running")
    ID_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    MEMBER_COUNT_FIELD_NUMBER: _ClassVar[int]
    REMOVED_MEMBER_COUNT_FIELD_NUMBER: _ClassVar[int]
    DENSE_FLOOR_FIELD_NUMBER: _ClassVar[int]
    DEFAULT_MODE_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_BUNDLE_FIELD_NUMBER: _ClassVar[int]
    EXPIRY_DAYS_FIELD_NUMBER: _ClassVar[int]
    INJECT_GATE_FIELD_NUMBER: _ClassVar[int]
    INJECT_MIN_COSINE_FIELD_NUMBER: _ClassVar[int]
    RENAMED_FROM_FIELD_NUMBER: _ClassVar[int]
    SERVER_FIELD_NUMBER: _ClassVar[int]
    MOVING_TO_FIELD_NUMBER: _ClassVar[int]
    MOVED_FROM_FIELD_NUMBER: _ClassVar[int]
    MOVE_RUNNING_FIELD_NUMBER: _ClassVar[int]
    id: str
    name: str
    created_at: _timestamp_pb2.Timestamp
    member_count: int
    removed_member_count: int
    dense_floor: float
    default_mode: RecallMode
    context_bundle: bool
    expiry_days: int
    inject_gate: InjectGate
    inject_min_cosine: float
    renamed_from: str
    server: str
    moving_to: str
    moved_from: str
    move_running: bool
    def __init__(self, id: _Optional[str] = ..., name: _Optional[str] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., member_count: _Optional[int] = ..., removed_member_count: _Optional[int] = ..., dense_floor: _Optional[float] = ..., default_mode: _Optional[_Union[RecallMode, str]] = ..., context_bundle: _Optional[bool] = ..., expiry_days: _Optional[int] = ..., inject_gate: _Optional[_Union[InjectGate, str]] = ..., inject_min_cosine: _Optional[float] = ..., renamed_from: _Optional[str] = ..., server: _Optional[str] = ..., moving_to: _Optional[str] = ..., moved_from: _Optional[str] = ..., move_running: _Optional[bool] = ...) -> None: ...

class DatabaseServerStatus(_message.Message):
    __slots__ = ("name", "serving", "workspaces", "control_plane")
    NAME_FIELD_NUMBER: _ClassVar[int]
    SERVING_FIELD_NUMBER: _ClassVar[int]
    WORKSPACES_FIELD_NUMBER: _ClassVar[int]
    CONTROL_PLANE_FIELD_NUMBER: _ClassVar[int]
    name: str
    serving: bool
    workspaces: int
    control_plane: bool
    def __init__(self, name: _Optional[str] = ..., serving: _Optional[bool] = ..., workspaces: _Optional[int] = ..., control_plane: _Optional[bool] = ...) -> None: ...

class MemberSummary(_message.Message):
    __slots__ = ("id", "display_name", "role", "purposes", "token_count", "removed", "created_at", "removed_at")
    ID_FIELD_NUMBER: _ClassVar[int]
    DISPLAY_NAME_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    PURPOSES_FIELD_NUMBER: _ClassVar[int]
    TOKEN_COUNT_FIELD_NUMBER: _ClassVar[int]
    REMOVED_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    REMOVED_AT_FIELD_NUMBER: _ClassVar[int]
    id: str
    display_name: str
    role: Role
    purposes: _containers.RepeatedScalarFieldContainer[Purpose]
    token_count: int
    removed: bool
    created_at: _timestamp_pb2.Timestamp
    removed_at: _timestamp_pb2.Timestamp
    def __init__(self, id: _Optional[str] = ..., display_name: _Optional[str] = ..., role: _Optional[_Union[Role, str]] = ..., purposes: _Optional[_Iterable[_Union[Purpose, str]]] = ..., token_count: _Optional[int] = ..., removed: _Optional[bool] = ..., created_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ..., removed_at: _Optional[_Union[datetime.datetime, _timestamp_pb2.Timestamp, _Mapping]] = ...) -> None: ...
