from services.protos.evoharness.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class GenerateRequest(_message.Message):
    __slots__ = ("program", "backend", "include_png", "include_manifest")
    PROGRAM_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_PNG_FIELD_NUMBER: _ClassVar[int]
    INCLUDE_MANIFEST_FIELD_NUMBER: _ClassVar[int]
    program: _common_pb2.Program
    backend: str
    include_png: bool
    include_manifest: bool
    def __init__(self, program: _Optional[_Union[_common_pb2.Program, _Mapping]] = ..., backend: _Optional[str] = ..., include_png: _Optional[bool] = ..., include_manifest: _Optional[bool] = ...) -> None: ...

class GenerateResponse(_message.Message):
    __slots__ = ("image", "generator_id", "generator_seconds", "cached", "execution_key", "width", "height", "backend", "png", "manifest_json", "nominal_seconds")
    IMAGE_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_SECONDS_FIELD_NUMBER: _ClassVar[int]
    CACHED_FIELD_NUMBER: _ClassVar[int]
    EXECUTION_KEY_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    PNG_FIELD_NUMBER: _ClassVar[int]
    MANIFEST_JSON_FIELD_NUMBER: _ClassVar[int]
    NOMINAL_SECONDS_FIELD_NUMBER: _ClassVar[int]
    image: _common_pb2.ImageRef
    generator_id: str
    generator_seconds: float
    cached: bool
    execution_key: str
    width: int
    height: int
    backend: str
    png: bytes
    manifest_json: str
    nominal_seconds: float
    def __init__(self, image: _Optional[_Union[_common_pb2.ImageRef, _Mapping]] = ..., generator_id: _Optional[str] = ..., generator_seconds: _Optional[float] = ..., cached: _Optional[bool] = ..., execution_key: _Optional[str] = ..., width: _Optional[int] = ..., height: _Optional[int] = ..., backend: _Optional[str] = ..., png: _Optional[bytes] = ..., manifest_json: _Optional[str] = ..., nominal_seconds: _Optional[float] = ...) -> None: ...

class DescribeRequest(_message.Message):
    __slots__ = ()
    def __init__(self) -> None: ...

class ParamBound(_message.Message):
    __slots__ = ("min", "max")
    MIN_FIELD_NUMBER: _ClassVar[int]
    MAX_FIELD_NUMBER: _ClassVar[int]
    min: float
    max: float
    def __init__(self, min: _Optional[float] = ..., max: _Optional[float] = ...) -> None: ...

class DescribeResponse(_message.Message):
    __slots__ = ("backend", "generator_id", "param_bounds", "bucket", "max_image_bytes", "capabilities")
    class ParamBoundsEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: ParamBound
        def __init__(self, key: _Optional[str] = ..., value: _Optional[_Union[ParamBound, _Mapping]] = ...) -> None: ...
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_ID_FIELD_NUMBER: _ClassVar[int]
    PARAM_BOUNDS_FIELD_NUMBER: _ClassVar[int]
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    MAX_IMAGE_BYTES_FIELD_NUMBER: _ClassVar[int]
    CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    backend: str
    generator_id: str
    param_bounds: _containers.MessageMap[str, ParamBound]
    bucket: str
    max_image_bytes: int
    capabilities: _common_pb2.GeneratorCapabilities
    def __init__(self, backend: _Optional[str] = ..., generator_id: _Optional[str] = ..., param_bounds: _Optional[_Mapping[str, ParamBound]] = ..., bucket: _Optional[str] = ..., max_image_bytes: _Optional[int] = ..., capabilities: _Optional[_Union[_common_pb2.GeneratorCapabilities, _Mapping]] = ...) -> None: ...
