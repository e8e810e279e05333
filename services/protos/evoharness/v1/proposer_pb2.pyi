from services.protos.evoharness.v1 import common_pb2 as _common_pb2
from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class LlmUsage(_message.Message):
    __slots__ = ("calls", "prompt_tokens", "completion_tokens", "cost_usd", "model", "backend")
    CALLS_FIELD_NUMBER: _ClassVar[int]
    PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    COST_USD_FIELD_NUMBER: _ClassVar[int]
    MODEL_FIELD_NUMBER: _ClassVar[int]
    BACKEND_FIELD_NUMBER: _ClassVar[int]
    calls: int
    prompt_tokens: int
    completion_tokens: int
    cost_usd: float
    model: str
    backend: str
    def __init__(self, calls: _Optional[int] = ..., prompt_tokens: _Optional[int] = ..., completion_tokens: _Optional[int] = ..., cost_usd: _Optional[float] = ..., model: _Optional[str] = ..., backend: _Optional[str] = ...) -> None: ...

class ExtractPolicyRequest(_message.Message):
    __slots__ = ("prompt",)
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    prompt: str
    def __init__(self, prompt: _Optional[str] = ...) -> None: ...

class ExtractPolicyResponse(_message.Message):
    __slots__ = ("constraints", "usage", "rejected")
    CONSTRAINTS_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    constraints: _containers.RepeatedCompositeFieldContainer[_common_pb2.Constraint]
    usage: LlmUsage
    rejected: _containers.RepeatedCompositeFieldContainer[RejectedProposal]
    def __init__(self, constraints: _Optional[_Iterable[_Union[_common_pb2.Constraint, _Mapping]]] = ..., usage: _Optional[_Union[LlmUsage, _Mapping]] = ..., rejected: _Optional[_Iterable[_Union[RejectedProposal, _Mapping]]] = ...) -> None: ...

class LocalizeRequest(_message.Message):
    __slots__ = ("harness_json", "clusters_json", "context_json")
    HARNESS_JSON_FIELD_NUMBER: _ClassVar[int]
    CLUSTERS_JSON_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_JSON_FIELD_NUMBER: _ClassVar[int]
    harness_json: str
    clusters_json: str
    context_json: str
    def __init__(self, harness_json: _Optional[str] = ..., clusters_json: _Optional[str] = ..., context_json: _Optional[str] = ...) -> None: ...

class LocalizeResponse(_message.Message):
    __slots__ = ("attributions_json", "usage", "rejected")
    ATTRIBUTIONS_JSON_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    attributions_json: str
    usage: LlmUsage
    rejected: _containers.RepeatedCompositeFieldContainer[RejectedProposal]
    def __init__(self, attributions_json: _Optional[str] = ..., usage: _Optional[_Union[LlmUsage, _Mapping]] = ..., rejected: _Optional[_Iterable[_Union[RejectedProposal, _Mapping]]] = ...) -> None: ...

class ProposePatchesRequest(_message.Message):
    __slots__ = ("harness_json", "responsibility", "cluster_json", "n", "context_json", "attribution_json")
    HARNESS_JSON_FIELD_NUMBER: _ClassVar[int]
    RESPONSIBILITY_FIELD_NUMBER: _ClassVar[int]
    CLUSTER_JSON_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    CONTEXT_JSON_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTION_JSON_FIELD_NUMBER: _ClassVar[int]
    harness_json: str
    responsibility: str
    cluster_json: str
    n: int
    context_json: str
    attribution_json: str
    def __init__(self, harness_json: _Optional[str] = ..., responsibility: _Optional[str] = ..., cluster_json: _Optional[str] = ..., n: _Optional[int] = ..., context_json: _Optional[str] = ..., attribution_json: _Optional[str] = ...) -> None: ...

class ValidatePatchesRequest(_message.Message):
    __slots__ = ("harness_json", "responsibility", "answer")
    HARNESS_JSON_FIELD_NUMBER: _ClassVar[int]
    RESPONSIBILITY_FIELD_NUMBER: _ClassVar[int]
    ANSWER_FIELD_NUMBER: _ClassVar[int]
    harness_json: str
    responsibility: str
    answer: str
    def __init__(self, harness_json: _Optional[str] = ..., responsibility: _Optional[str] = ..., answer: _Optional[str] = ...) -> None: ...

class ProposeSearchRequest(_message.Message):
    __slots__ = ("input_json", "n")
    INPUT_JSON_FIELD_NUMBER: _ClassVar[int]
    N_FIELD_NUMBER: _ClassVar[int]
    input_json: str
    n: int
    def __init__(self, input_json: _Optional[str] = ..., n: _Optional[int] = ...) -> None: ...

class RejectedProposal(_message.Message):
    __slots__ = ("reason", "raw", "detail", "index", "role")
    REASON_FIELD_NUMBER: _ClassVar[int]
    RAW_FIELD_NUMBER: _ClassVar[int]
    DETAIL_FIELD_NUMBER: _ClassVar[int]
    INDEX_FIELD_NUMBER: _ClassVar[int]
    ROLE_FIELD_NUMBER: _ClassVar[int]
    reason: str
    raw: str
    detail: str
    index: int
    role: str
    def __init__(self, reason: _Optional[str] = ..., raw: _Optional[str] = ..., detail: _Optional[str] = ..., index: _Optional[int] = ..., role: _Optional[str] = ...) -> None: ...

class ProposePatchesResponse(_message.Message):
    __slots__ = ("patches_json", "rejected", "usage")
    PATCHES_JSON_FIELD_NUMBER: _ClassVar[int]
    REJECTED_FIELD_NUMBER: _ClassVar[int]
    USAGE_FIELD_NUMBER: _ClassVar[int]
    patches_json: _containers.RepeatedScalarFieldContainer[str]
    rejected: _containers.RepeatedCompositeFieldContainer[RejectedProposal]
    usage: LlmUsage
    def __init__(self, patches_json: _Optional[_Iterable[str]] = ..., rejected: _Optional[_Iterable[_Union[RejectedProposal, _Mapping]]] = ..., usage: _Optional[_Union[LlmUsage, _Mapping]] = ...) -> None: ...
