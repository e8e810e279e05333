from services.protos.evoharness.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class VerifyRequest(_message.Message):
    __slots__ = ("image", "constraints", "prompt", "png")
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    PNG_FIELD_NUMBER: _ClassVar[int]
    image: _common_pb2.ImageRef
    constraints: _containers.RepeatedCompositeFieldContainer[_common_pb2.Constraint]
    prompt: str
    png: bytes
    def __init__(self, image: _Optional[_Union[_common_pb2.ImageRef, _Mapping]] = ..., constraints: _Optional[_Iterable[_Union[_common_pb2.Constraint, _Mapping]]] = ..., prompt: _Optional[str] = ..., png: _Optional[bytes] = ...) -> None: ...

class VerifyResponse(_message.Message):
    __slots__ = ("evidence", "verifier_id", "seconds", "cost", "constraints")
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_ID_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    evidence: _containers.RepeatedCompositeFieldContainer[_common_pb2.Evidence]
    verifier_id: str
    seconds: float
    cost: _common_pb2.Cost
    constraints: _containers.RepeatedCompositeFieldContainer[_common_pb2.Constraint]
    def __init__(self, evidence: _Optional[_Iterable[_Union[_common_pb2.Evidence, _Mapping]]] = ..., verifier_id: _Optional[str] = ..., seconds: _Optional[float] = ..., cost: _Optional[_Union[_common_pb2.Cost, _Mapping]] = ..., constraints: _Optional[_Iterable[_Union[_common_pb2.Constraint, _Mapping]]] = ...) -> None: ...

class JudgeRequest(_message.Message):
    __slots__ = ("image", "constraints", "prompt", "png")
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    PNG_FIELD_NUMBER: _ClassVar[int]
    image: _common_pb2.ImageRef
    constraints: _containers.RepeatedCompositeFieldContainer[_common_pb2.Constraint]
    prompt: str
    png: bytes
    def __init__(self, image: _Optional[_Union[_common_pb2.ImageRef, _Mapping]] = ..., constraints: _Optional[_Iterable[_Union[_common_pb2.Constraint, _Mapping]]] = ..., prompt: _Optional[str] = ..., png: _Optional[bytes] = ...) -> None: ...

class JudgeFailure(_message.Message):
    __slots__ = ("role", "reason", "detail", "excerpt")
    ROLE_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    EXCERPT_FIELD_NUMBER: _ClassVar[int]
    role: str
    reason: str
    detail: str
    excerpt: str
    def __init__(self, role: _Optional[str] = ..., reason: _Optional[str] = ..., detail: _Optional[str] = ..., excerpt: _Optional[str] = ...) -> None: ...

class JudgeResponse(_message.Message):
    __slots__ = ("judged", "faithfulness", "visual_correctness", "text_accuracy", "aesthetics", "score", "needs_text", "judge", "judge_id", "failures", "constraints", "evidence", "seconds", "cost", "notes")
    JUDGED_FIELD_NUMBER: _ClassVar[int]
    FAITHFULNESS_FIELD_NUMBER: _ClassVar[int]
    VISUAL_CORRECTNESS_FIELD_NUMBER: _ClassVar[int]
    TEXT_ACCURACY_FIELD_NUMBER: _ClassVar[int]
    AESTHETICS_FIELD_NUMBER: _ClassVar[int]
    SCORE_FIELD_NUMBER: _ClassVar[int]
    NEEDS_TEXT_FIELD_NUMBER: _ClassVar[int]
    JUDGE_FIELD_NUMBER: _ClassVar[int]
    JUDGE_ID_FIELD_NUMBER: _ClassVar[int]
    FAILURES_FIELD_NUMBER: _ClassVar[int]
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    SECONDS_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    NOTES_FIELD_NUMBER: _ClassVar[int]
    judged: bool
    faithfulness: float
    visual_correctness: float
    text_accuracy: float
    aesthetics: float
    score: float
    needs_text: bool
    judge: str
    judge_id: str
    failures: _containers.RepeatedCompositeFieldContainer[JudgeFailure]
    constraints: _containers.RepeatedCompositeFieldContainer[_common_pb2.Constraint]
    evidence: _containers.RepeatedCompositeFieldContainer[_common_pb2.Evidence]
    seconds: float
    cost: _common_pb2.Cost
    notes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, judged: _Optional[bool] = ..., faithfulness: _Optional[float] = ..., visual_correctness: _Optional[float] = ..., text_accuracy: _Optional[float] = ..., aesthetics: _Optional[float] = ..., score: _Optional[float] = ..., needs_text: _Optional[bool] = ..., judge: _Optional[str] = ..., judge_id: _Optional[str] = ..., failures: _Optional[_Iterable[_Union[JudgeFailure, _Mapping]]] = ..., constraints: _Optional[_Iterable[_Union[_common_pb2.Constraint, _Mapping]]] = ..., evidence: _Optional[_Iterable[_Union[_common_pb2.Evidence, _Mapping]]] = ..., seconds: _Optional[float] = ..., cost: _Optional[_Union[_common_pb2.Cost, _Mapping]] = ..., notes: _Optional[_Iterable[str]] = ...) -> None: ...
