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
