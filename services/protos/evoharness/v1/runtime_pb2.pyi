from services.protos.evoharness.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class RenderOptions(_message.Message):
    __slots__ = ("include_trace", "url_expires_seconds", "references", "verify")
    INCLUDE_TRACE_FIELD_NUMBER: _ClassVar[int]
    URL_EXPIRES_SECONDS_FIELD_NUMBER: _ClassVar[int]
    REFERENCES_FIELD_NUMBER: _ClassVar[int]
    VERIFY_FIELD_NUMBER: _ClassVar[int]
    include_trace: bool
    url_expires_seconds: int
    references: _containers.RepeatedCompositeFieldContainer[_common_pb2.ImageRef]
    verify: bool
    def __init__(self, include_trace: _Optional[bool] = ..., url_expires_seconds: _Optional[int] = ..., references: _Optional[_Iterable[_Union[_common_pb2.ImageRef, _Mapping]]] = ..., verify: _Optional[bool] = ...) -> None: ...

class RenderRequest(_message.Message):
    __slots__ = ("prompt", "channel", "registration_id", "seed", "options")
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_ID_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    OPTIONS_FIELD_NUMBER: _ClassVar[int]
    prompt: str
    channel: str
    registration_id: str
    seed: int
    options: RenderOptions
    def __init__(self, prompt: _Optional[str] = ..., channel: _Optional[str] = ..., registration_id: _Optional[str] = ..., seed: _Optional[int] = ..., options: _Optional[_Union[RenderOptions, _Mapping]] = ...) -> None: ...

class RenderResponse(_message.Message):
    __slots__ = ("image", "image_url", "program", "trace_json", "evidence", "cost", "registration_id", "harness_id", "generator_id", "cached", "capability_mismatch")
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    IMAGE_URL_FIELD_NUMBER: _ClassVar[int]
    PROGRAM_FIELD_NUMBER: _ClassVar[int]
    TRACE_JSON_FIELD_NUMBER: _ClassVar[int]
    EVIDENCE_FIELD_NUMBER: _ClassVar[int]
    COST_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_ID_FIELD_NUMBER: _ClassVar[int]
    HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_ID_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    CAPABILITY_MISMATCH_FIELD_NUMBER: _ClassVar[int]
    image: _common_pb2.ImageRef
    image_url: str
    program: _common_pb2.Program
    trace_json: str
    evidence: _containers.RepeatedCompositeFieldContainer[_common_pb2.Evidence]
    cost: _common_pb2.Cost
    registration_id: str
    harness_id: str
    generator_id: str
    cached: bool
    capability_mismatch: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, image: _Optional[_Union[_common_pb2.ImageRef, _Mapping]] = ..., image_url: _Optional[str] = ..., program: _Optional[_Union[_common_pb2.Program, _Mapping]] = ..., trace_json: _Optional[str] = ..., evidence: _Optional[_Iterable[_Union[_common_pb2.Evidence, _Mapping]]] = ..., cost: _Optional[_Union[_common_pb2.Cost, _Mapping]] = ..., registration_id: _Optional[str] = ..., harness_id: _Optional[str] = ..., generator_id: _Optional[str] = ..., cached: _Optional[bool] = ..., capability_mismatch: _Optional[_Iterable[str]] = ...) -> None: ...
