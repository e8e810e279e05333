from services.protos.evoharness.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HarnessVersion(_message.Message):
    __slots__ = ("harness_id", "harness_json", "parent_id", "created_at", "report_json", "message", "run_id", "registration_id", "patch_json", "round_report_ref", "registered_by", "name", "generator_id", "generator_capabilities", "description")
    HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    HARNESS_JSON_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    REPORT_JSON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_ID_FIELD_NUMBER: _ClassVar[int]
    PATCH_JSON_FIELD_NUMBER: _ClassVar[int]
    ROUND_REPORT_REF_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_BY_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    harness_id: str
    harness_json: str
    parent_id: str
    created_at: str
    report_json: str
    message: str
    run_id: str
    registration_id: str
    patch_json: str
    round_report_ref: str
    registered_by: str
    name: str
    generator_id: str
    generator_capabilities: _common_pb2.GeneratorCapabilities
    description: str
    def __init__(self, harness_id: _Optional[str] = ..., harness_json: _Optional[str] = ..., parent_id: _Optional[str] = ..., created_at: _Optional[str] = ..., report_json: _Optional[str] = ..., message: _Optional[str] = ..., run_id: _Optional[str] = ..., registration_id: _Optional[str] = ..., patch_json: _Optional[str] = ..., round_report_ref: _Optional[str] = ..., registered_by: _Optional[str] = ..., name: _Optional[str] = ..., generator_id: _Optional[str] = ..., generator_capabilities: _Optional[_Union[_common_pb2.GeneratorCapabilities, _Mapping]] = ..., description: _Optional[str] = ...) -> None: ...

class PutRequest(_message.Message):
    __slots__ = ("harness_json", "parent_id", "report_json", "message", "run_id", "patch_json", "round_report_ref", "registered_by", "generator_id", "generator_capabilities", "name", "description")
    HARNESS_JSON_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    REPORT_JSON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    PATCH_JSON_FIELD_NUMBER: _ClassVar[int]
    ROUND_REPORT_REF_FIELD_NUMBER: _ClassVar[int]
    REGISTERED_BY_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_ID_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_CAPABILITIES_FIELD_NUMBER: _ClassVar[int]
    NAME_FIELD_NUMBER: _ClassVar[int]
    DESCRIPTION_FIELD_NUMBER: _ClassVar[int]
    harness_json: str
    parent_id: str
    report_json: str
    message: str
    run_id: str
    patch_json: str
    round_report_ref: str
    registered_by: str
    generator_id: str
    generator_capabilities: _common_pb2.GeneratorCapabilities
    name: str
    description: str
    def __init__(self, harness_json: _Optional[str] = ..., parent_id: _Optional[str] = ..., report_json: _Optional[str] = ..., message: _Optional[str] = ..., run_id: _Optional[str] = ..., patch_json: _Optional[str] = ..., round_report_ref: _Optional[str] = ..., registered_by: _Optional[str] = ..., generator_id: _Optional[str] = ..., generator_capabilities: _Optional[_Union[_common_pb2.GeneratorCapabilities, _Mapping]] = ..., name: _Optional[str] = ..., description: _Optional[str] = ...) -> None: ...

class PutResponse(_message.Message):
    __slots__ = ("harness_id", "created", "registration_id")
    HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_ID_FIELD_NUMBER: _ClassVar[int]
    harness_id: str
    created: bool
    registration_id: str
    def __init__(self, harness_id: _Optional[str] = ..., created: _Optional[bool] = ..., registration_id: _Optional[str] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("harness_id", "registration_id")
    HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_ID_FIELD_NUMBER: _ClassVar[int]
    harness_id: str
    registration_id: str
    def __init__(self, harness_id: _Optional[str] = ..., registration_id: _Optional[str] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "run_id", "harness_id", "parent_id")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    run_id: str
    harness_id: str
    parent_id: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., run_id: _Optional[str] = ..., harness_id: _Optional[str] = ..., parent_id: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("versions", "next_page_token")
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[HarnessVersion]
    next_page_token: str
    def __init__(self, versions: _Optional[_Iterable[_Union[HarnessVersion, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ChannelEvent(_message.Message):
    __slots__ = ("channel", "harness_id", "previous_harness_id", "registration_id", "at", "reason", "actor", "version", "previous_registration_id", "canary_registration_id", "canary_weight", "action")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_REGISTRATION_ID_FIELD_NUMBER: _ClassVar[int]
    CANARY_REGISTRATION_ID_FIELD_NUMBER: _ClassVar[int]
    CANARY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    ACTION_FIELD_NUMBER: _ClassVar[int]
    channel: str
    harness_id: str
    previous_harness_id: str
    registration_id: str
    at: str
    reason: str
    actor: str
    version: int
    previous_registration_id: str
    canary_registration_id: str
    canary_weight: float
    action: str
    def __init__(self, channel: _Optional[str] = ..., harness_id: _Optional[str] = ..., previous_harness_id: _Optional[str] = ..., registration_id: _Optional[str] = ..., at: _Optional[str] = ..., reason: _Optional[str] = ..., actor: _Optional[str] = ..., version: _Optional[int] = ..., previous_registration_id: _Optional[str] = ..., canary_registration_id: _Optional[str] = ..., canary_weight: _Optional[float] = ..., action: _Optional[str] = ...) -> None: ...

class HistoryRequest(_message.Message):
    __slots__ = ("channel", "harness_id", "registration_id")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_ID_FIELD_NUMBER: _ClassVar[int]
    channel: str
    harness_id: str
    registration_id: str
    def __init__(self, channel: _Optional[str] = ..., harness_id: _Optional[str] = ..., registration_id: _Optional[str] = ...) -> None: ...

class HistoryResponse(_message.Message):
    __slots__ = ("events", "lineage")
    EVENTS_FIELD_NUMBER: _ClassVar[int]
    LINEAGE_FIELD_NUMBER: _ClassVar[int]
    events: _containers.RepeatedCompositeFieldContainer[ChannelEvent]
    lineage: _containers.RepeatedCompositeFieldContainer[HarnessVersion]
    def __init__(self, events: _Optional[_Iterable[_Union[ChannelEvent, _Mapping]]] = ..., lineage: _Optional[_Iterable[_Union[HarnessVersion, _Mapping]]] = ...) -> None: ...

class DiffRequest(_message.Message):
    __slots__ = ("from_harness_id", "to_harness_id")
    FROM_HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    TO_HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    from_harness_id: str
    to_harness_id: str
    def __init__(self, from_harness_id: _Optional[str] = ..., to_harness_id: _Optional[str] = ...) -> None: ...

class DiffResponse(_message.Message):
    __slots__ = ("ops_json",)
    OPS_JSON_FIELD_NUMBER: _ClassVar[int]
    ops_json: str
    def __init__(self, ops_json: _Optional[str] = ...) -> None: ...

class PromoteRequest(_message.Message):
    __slots__ = ("channel", "harness_id", "expected_current_id", "reason", "gate_report_json", "actor", "registration_id", "expected_version", "canary_registration_id", "canary_weight", "rollback")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_CURRENT_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    GATE_REPORT_JSON_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_VERSION_FIELD_NUMBER: _ClassVar[int]
    CANARY_REGISTRATION_ID_FIELD_NUMBER: _ClassVar[int]
    CANARY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    ROLLBACK_FIELD_NUMBER: _ClassVar[int]
    channel: str
    harness_id: str
    expected_current_id: str
    reason: str
    gate_report_json: str
    actor: str
    registration_id: str
    expected_version: int
    canary_registration_id: str
    canary_weight: float
    rollback: bool
    def __init__(self, channel: _Optional[str] = ..., harness_id: _Optional[str] = ..., expected_current_id: _Optional[str] = ..., reason: _Optional[str] = ..., gate_report_json: _Optional[str] = ..., actor: _Optional[str] = ..., registration_id: _Optional[str] = ..., expected_version: _Optional[int] = ..., canary_registration_id: _Optional[str] = ..., canary_weight: _Optional[float] = ..., rollback: _Optional[bool] = ...) -> None: ...

class PromoteResponse(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: ChannelEvent
    def __init__(self, event: _Optional[_Union[ChannelEvent, _Mapping]] = ...) -> None: ...

class ResolveRequest(_message.Message):
    __slots__ = ("channel", "omit_document")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    OMIT_DOCUMENT_FIELD_NUMBER: _ClassVar[int]
    channel: str
    omit_document: bool
    def __init__(self, channel: _Optional[str] = ..., omit_document: _Optional[bool] = ...) -> None: ...

class ResolveResponse(_message.Message):
    __slots__ = ("harness_id", "harness_json", "registration_id", "version", "canary_registration_id", "canary_harness_id", "canary_weight", "updated_at")
    HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    HARNESS_JSON_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_ID_FIELD_NUMBER: _ClassVar[int]
    VERSION_FIELD_NUMBER: _ClassVar[int]
    CANARY_REGISTRATION_ID_FIELD_NUMBER: _ClassVar[int]
    CANARY_HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    CANARY_WEIGHT_FIELD_NUMBER: _ClassVar[int]
    UPDATED_AT_FIELD_NUMBER: _ClassVar[int]
    harness_id: str
    harness_json: str
    registration_id: str
    version: int
    canary_registration_id: str
    canary_harness_id: str
    canary_weight: float
    updated_at: str
    def __init__(self, harness_id: _Optional[str] = ..., harness_json: _Optional[str] = ..., registration_id: _Optional[str] = ..., version: _Optional[int] = ..., canary_registration_id: _Optional[str] = ..., canary_harness_id: _Optional[str] = ..., canary_weight: _Optional[float] = ..., updated_at: _Optional[str] = ...) -> None: ...
