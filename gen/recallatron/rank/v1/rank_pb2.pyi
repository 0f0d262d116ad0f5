from google.protobuf.internal import containers as _containers
from google.protobuf.internal import enum_type_wrapper as _enum_type_wrapper
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class Arm(int, metaclass=_enum_type_wrapper.EnumTypeWrapper):
    __slots__ = ()
    ARM_UNSPECIFIED: _ClassVar[Arm]
    ARM_LEXICAL: _ClassVar[Arm]
    ARM_DENSE: _ClassVar[Arm]
ARM_UNSPECIFIED: Arm
ARM_LEXICAL: Arm
ARM_DENSE: Arm

class ArmRanking(_message.Message):
    __slots__ = ("arm", "memory_ids")
    ARM_FIELD_NUMBER: _ClassVar[int]
    MEMORY_IDS_FIELD_NUMBER: _ClassVar[int]
    arm: Arm
    memory_ids: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, arm: _Optional[_Union[Arm, str]] = ..., memory_ids: _Optional[_Iterable[str]] = ...) -> None: ...

class FusedCandidate(_message.Message):
    __slots__ = ("memory_id", "fused_score", "lexical_rank", "dense_rank", "identifier_matches", "all_terms")
    MEMORY_ID_FIELD_NUMBER: _ClassVar[int]
    FUSED_SCORE_FIELD_NUMBER: _ClassVar[int]
    LEXICAL_RANK_FIELD_NUMBER: _ClassVar[int]
    DENSE_RANK_FIELD_NUMBER: _ClassVar[int]
    IDENTIFIER_MATCHES_FIELD_NUMBER: _ClassVar[int]
    ALL_TERMS_FIELD_NUMBER: _ClassVar[int]
    memory_id: str
    fused_score: float
    lexical_rank: int
    dense_rank: int
    identifier_matches: int
    all_terms: bool
    def __init__(self, memory_id: _Optional[str] = ..., fused_score: _Optional[float] = ..., lexical_rank: _Optional[int] = ..., dense_rank: _Optional[int] = ..., identifier_matches: _Optional[int] = ..., all_terms: _Optional[bool] = ...) -> None: ...

class Precedence(_message.Message):
    __slots__ = ("identifier_matches", "all_terms")
    IDENTIFIER_MATCHES_FIELD_NUMBER: _ClassVar[int]
    ALL_TERMS_FIELD_NUMBER: _ClassVar[int]
    identifier_matches: int
    all_terms: bool
    def __init__(self, identifier_matches: _Optional[int] = ..., all_terms: _Optional[bool] = ...) -> None: ...

class FuseAndWalkRequest(_message.Message):
    __slots__ = ("arms", "readable_ids", "limit", "k", "precedence")
    class PrecedenceEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: Precedence
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[Precedence, _Mapping]] = ...) -> None: ...
    ARMS_FIELD_NUMBER: _ClassVar[int]
    READABLE_IDS_FIELD_NUMBER: _ClassVar[int]
    LIMIT_FIELD_NUMBER: _ClassVar[int]
    K_FIELD_NUMBER: _ClassVar[int]
    PRECEDENCE_FIELD_NUMBER: _ClassVar[int]
    arms: _containers.RepeatedCompositeFieldContainer[ArmRanking]
    readable_ids: _containers.RepeatedScalarFieldContainer[str]
    limit: int
    k: int
    precedence: _containers.MessageMap[str, Precedence]
    def __init__(self, arms: _Optional[_Iterable[_Union[ArmRanking, _Mapping]]] = ..., readable_ids: _Optional[_Iterable[str]] = ..., limit: _Optional[int] = ..., k: _Optional[int] = ..., precedence: _Optional[_Mapping[str, Precedence]] = ...) -> None: ...

class FuseAndWalkResponse(_message.Message):
    __slots__ = ("candidates",)
    CANDIDATES_FIELD_NUMBER: _ClassVar[int]
    candidates: _containers.RepeatedCompositeFieldContainer[FusedCandidate]
    def __init__(self, candidates: _Optional[_Iterable[_Union[FusedCandidate, _Mapping]]] = ...) -> None: ...
