from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class HarnessVersion(_message.Message):
    __slots__ = ("harness_id", "harness_json", "parent_id", "created_at", "report_json", "message", "run_id")
    HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    HARNESS_JSON_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_AT_FIELD_NUMBER: _ClassVar[int]
    REPORT_JSON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    harness_id: str
    harness_json: str
    parent_id: str
    created_at: str
    report_json: str
    message: str
    run_id: str
    def __init__(self, harness_id: _Optional[str] = ..., harness_json: _Optional[str] = ..., parent_id: _Optional[str] = ..., created_at: _Optional[str] = ..., report_json: _Optional[str] = ..., message: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class PutRequest(_message.Message):
    __slots__ = ("harness_json", "parent_id", "report_json", "message", "run_id")
    HARNESS_JSON_FIELD_NUMBER: _ClassVar[int]
    PARENT_ID_FIELD_NUMBER: _ClassVar[int]
    REPORT_JSON_FIELD_NUMBER: _ClassVar[int]
    MESSAGE_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    harness_json: str
    parent_id: str
    report_json: str
    message: str
    run_id: str
    def __init__(self, harness_json: _Optional[str] = ..., parent_id: _Optional[str] = ..., report_json: _Optional[str] = ..., message: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class PutResponse(_message.Message):
    __slots__ = ("harness_id", "created")
    HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    CREATED_FIELD_NUMBER: _ClassVar[int]
    harness_id: str
    created: bool
    def __init__(self, harness_id: _Optional[str] = ..., created: _Optional[bool] = ...) -> None: ...

class GetRequest(_message.Message):
    __slots__ = ("harness_id",)
    HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    harness_id: str
    def __init__(self, harness_id: _Optional[str] = ...) -> None: ...

class ListRequest(_message.Message):
    __slots__ = ("page_size", "page_token", "run_id")
    PAGE_SIZE_FIELD_NUMBER: _ClassVar[int]
    PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    RUN_ID_FIELD_NUMBER: _ClassVar[int]
    page_size: int
    page_token: str
    run_id: str
    def __init__(self, page_size: _Optional[int] = ..., page_token: _Optional[str] = ..., run_id: _Optional[str] = ...) -> None: ...

class ListResponse(_message.Message):
    __slots__ = ("versions", "next_page_token")
    VERSIONS_FIELD_NUMBER: _ClassVar[int]
    NEXT_PAGE_TOKEN_FIELD_NUMBER: _ClassVar[int]
    versions: _containers.RepeatedCompositeFieldContainer[HarnessVersion]
    next_page_token: str
    def __init__(self, versions: _Optional[_Iterable[_Union[HarnessVersion, _Mapping]]] = ..., next_page_token: _Optional[str] = ...) -> None: ...

class ChannelEvent(_message.Message):
    __slots__ = ("channel", "harness_id", "previous_harness_id", "registration_id", "at", "reason", "actor")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    PREVIOUS_HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_ID_FIELD_NUMBER: _ClassVar[int]
    AT_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    channel: str
    harness_id: str
    previous_harness_id: str
    registration_id: str
    at: str
    reason: str
    actor: str
    def __init__(self, channel: _Optional[str] = ..., harness_id: _Optional[str] = ..., previous_harness_id: _Optional[str] = ..., registration_id: _Optional[str] = ..., at: _Optional[str] = ..., reason: _Optional[str] = ..., actor: _Optional[str] = ...) -> None: ...

class HistoryRequest(_message.Message):
    __slots__ = ("channel", "harness_id")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    channel: str
    harness_id: str
    def __init__(self, channel: _Optional[str] = ..., harness_id: _Optional[str] = ...) -> None: ...

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
    __slots__ = ("channel", "harness_id", "expected_current_id", "reason", "gate_report_json", "actor")
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    EXPECTED_CURRENT_ID_FIELD_NUMBER: _ClassVar[int]
    REASON_FIELD_NUMBER: _ClassVar[int]
    GATE_REPORT_JSON_FIELD_NUMBER: _ClassVar[int]
    ACTOR_FIELD_NUMBER: _ClassVar[int]
    channel: str
    harness_id: str
    expected_current_id: str
    reason: str
    gate_report_json: str
    actor: str
    def __init__(self, channel: _Optional[str] = ..., harness_id: _Optional[str] = ..., expected_current_id: _Optional[str] = ..., reason: _Optional[str] = ..., gate_report_json: _Optional[str] = ..., actor: _Optional[str] = ...) -> None: ...

class PromoteResponse(_message.Message):
    __slots__ = ("event",)
    EVENT_FIELD_NUMBER: _ClassVar[int]
    event: ChannelEvent
    def __init__(self, event: _Optional[_Union[ChannelEvent, _Mapping]] = ...) -> None: ...

class ResolveRequest(_message.Message):
    __slots__ = ("channel",)
    CHANNEL_FIELD_NUMBER: _ClassVar[int]
    channel: str
    def __init__(self, channel: _Optional[str] = ...) -> None: ...

class ResolveResponse(_message.Message):
    __slots__ = ("harness_id", "harness_json", "registration_id")
    HARNESS_ID_FIELD_NUMBER: _ClassVar[int]
    HARNESS_JSON_FIELD_NUMBER: _ClassVar[int]
    REGISTRATION_ID_FIELD_NUMBER: _ClassVar[int]
    harness_id: str
    harness_json: str
    registration_id: str
    def __init__(self, harness_id: _Optional[str] = ..., harness_json: _Optional[str] = ..., registration_id: _Optional[str] = ...) -> None: ...
