from google.protobuf.internal import containers as _containers
from google.protobuf import descriptor as _descriptor
from google.protobuf import message as _message
from collections.abc import Iterable as _Iterable, Mapping as _Mapping
from typing import ClassVar as _ClassVar, Optional as _Optional, Union as _Union

DESCRIPTOR: _descriptor.FileDescriptor

class ImageRef(_message.Message):
    __slots__ = ("bucket", "key", "sha256")
    BUCKET_FIELD_NUMBER: _ClassVar[int]
    KEY_FIELD_NUMBER: _ClassVar[int]
    SHA256_FIELD_NUMBER: _ClassVar[int]
    bucket: str
    key: str
    sha256: str
    def __init__(self, bucket: _Optional[str] = ..., key: _Optional[str] = ..., sha256: _Optional[str] = ...) -> None: ...

class GenerationParams(_message.Message):
    __slots__ = ("steps", "guidance_scale", "width", "height")
    STEPS_FIELD_NUMBER: _ClassVar[int]
    GUIDANCE_SCALE_FIELD_NUMBER: _ClassVar[int]
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    steps: int
    guidance_scale: float
    width: int
    height: int
    def __init__(self, steps: _Optional[int] = ..., guidance_scale: _Optional[float] = ..., width: _Optional[int] = ..., height: _Optional[int] = ...) -> None: ...

class LayoutItem(_message.Message):
    __slots__ = ("label", "box", "color", "text", "attributes")
    LABEL_FIELD_NUMBER: _ClassVar[int]
    BOX_FIELD_NUMBER: _ClassVar[int]
    COLOR_FIELD_NUMBER: _ClassVar[int]
    TEXT_FIELD_NUMBER: _ClassVar[int]
    ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    label: str
    box: _containers.RepeatedScalarFieldContainer[float]
    color: str
    text: str
    attributes: _containers.RepeatedScalarFieldContainer[str]
    def __init__(self, label: _Optional[str] = ..., box: _Optional[_Iterable[float]] = ..., color: _Optional[str] = ..., text: _Optional[str] = ..., attributes: _Optional[_Iterable[str]] = ...) -> None: ...

class Layout(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[LayoutItem]
    def __init__(self, items: _Optional[_Iterable[_Union[LayoutItem, _Mapping]]] = ...) -> None: ...

class ImageRefList(_message.Message):
    __slots__ = ("items",)
    ITEMS_FIELD_NUMBER: _ClassVar[int]
    items: _containers.RepeatedCompositeFieldContainer[ImageRef]
    def __init__(self, items: _Optional[_Iterable[_Union[ImageRef, _Mapping]]] = ...) -> None: ...

class Program(_message.Message):
    __slots__ = ("prompt", "negative_prompt", "params", "seed", "layout", "references")
    PROMPT_FIELD_NUMBER: _ClassVar[int]
    NEGATIVE_PROMPT_FIELD_NUMBER: _ClassVar[int]
    PARAMS_FIELD_NUMBER: _ClassVar[int]
    SEED_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    REFERENCES_FIELD_NUMBER: _ClassVar[int]
    prompt: str
    negative_prompt: str
    params: GenerationParams
    seed: int
    layout: Layout
    references: ImageRefList
    def __init__(self, prompt: _Optional[str] = ..., negative_prompt: _Optional[str] = ..., params: _Optional[_Union[GenerationParams, _Mapping]] = ..., seed: _Optional[int] = ..., layout: _Optional[_Union[Layout, _Mapping]] = ..., references: _Optional[_Union[ImageRefList, _Mapping]] = ...) -> None: ...

class Resolution(_message.Message):
    __slots__ = ("width", "height")
    WIDTH_FIELD_NUMBER: _ClassVar[int]
    HEIGHT_FIELD_NUMBER: _ClassVar[int]
    width: int
    height: int
    def __init__(self, width: _Optional[int] = ..., height: _Optional[int] = ...) -> None: ...

class GeneratorCapabilities(_message.Message):
    __slots__ = ("layout", "layout_attributes", "max_references", "reference_roles", "negative_prompt", "max_prompt_tokens", "seedable", "resolutions")
    LAYOUT_FIELD_NUMBER: _ClassVar[int]
    LAYOUT_ATTRIBUTES_FIELD_NUMBER: _ClassVar[int]
    MAX_REFERENCES_FIELD_NUMBER: _ClassVar[int]
    REFERENCE_ROLES_FIELD_NUMBER: _ClassVar[int]
    NEGATIVE_PROMPT_FIELD_NUMBER: _ClassVar[int]
    MAX_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    SEEDABLE_FIELD_NUMBER: _ClassVar[int]
    RESOLUTIONS_FIELD_NUMBER: _ClassVar[int]
    layout: str
    layout_attributes: _containers.RepeatedScalarFieldContainer[str]
    max_references: int
    reference_roles: _containers.RepeatedScalarFieldContainer[str]
    negative_prompt: bool
    max_prompt_tokens: int
    seedable: bool
    resolutions: _containers.RepeatedCompositeFieldContainer[Resolution]
    def __init__(self, layout: _Optional[str] = ..., layout_attributes: _Optional[_Iterable[str]] = ..., max_references: _Optional[int] = ..., reference_roles: _Optional[_Iterable[str]] = ..., negative_prompt: _Optional[bool] = ..., max_prompt_tokens: _Optional[int] = ..., seedable: _Optional[bool] = ..., resolutions: _Optional[_Iterable[_Union[Resolution, _Mapping]]] = ...) -> None: ...

class Constraint(_message.Message):
    __slots__ = ("constraint_id", "type", "subject", "value_str", "value_int", "value_float", "relation", "min_count", "max_count", "ref")
    CONSTRAINT_ID_FIELD_NUMBER: _ClassVar[int]
    TYPE_FIELD_NUMBER: _ClassVar[int]
    SUBJECT_FIELD_NUMBER: _ClassVar[int]
    VALUE_STR_FIELD_NUMBER: _ClassVar[int]
    VALUE_INT_FIELD_NUMBER: _ClassVar[int]
    VALUE_FLOAT_FIELD_NUMBER: _ClassVar[int]
    RELATION_FIELD_NUMBER: _ClassVar[int]
    MIN_COUNT_FIELD_NUMBER: _ClassVar[int]
    MAX_COUNT_FIELD_NUMBER: _ClassVar[int]
    REF_FIELD_NUMBER: _ClassVar[int]
    constraint_id: str
    type: str
    subject: str
    value_str: str
    value_int: int
    value_float: float
    relation: str
    min_count: int
    max_count: int
    ref: int
    def __init__(self, constraint_id: _Optional[str] = ..., type: _Optional[str] = ..., subject: _Optional[str] = ..., value_str: _Optional[str] = ..., value_int: _Optional[int] = ..., value_float: _Optional[float] = ..., relation: _Optional[str] = ..., min_count: _Optional[int] = ..., max_count: _Optional[int] = ..., ref: _Optional[int] = ...) -> None: ...

class Box(_message.Message):
    __slots__ = ("x0", "y0", "x1", "y1")
    X0_FIELD_NUMBER: _ClassVar[int]
    Y0_FIELD_NUMBER: _ClassVar[int]
    X1_FIELD_NUMBER: _ClassVar[int]
    Y1_FIELD_NUMBER: _ClassVar[int]
    x0: float
    y0: float
    x1: float
    y1: float
    def __init__(self, x0: _Optional[float] = ..., y0: _Optional[float] = ..., x1: _Optional[float] = ..., y1: _Optional[float] = ...) -> None: ...

class Evidence(_message.Message):
    __slots__ = ("constraint_id", "status", "confidence", "boxes", "observed_json", "note", "decided_by")
    CONSTRAINT_ID_FIELD_NUMBER: _ClassVar[int]
    STATUS_FIELD_NUMBER: _ClassVar[int]
    CONFIDENCE_FIELD_NUMBER: _ClassVar[int]
    BOXES_FIELD_NUMBER: _ClassVar[int]
    OBSERVED_JSON_FIELD_NUMBER: _ClassVar[int]
    NOTE_FIELD_NUMBER: _ClassVar[int]
    DECIDED_BY_FIELD_NUMBER: _ClassVar[int]
    constraint_id: str
    status: str
    confidence: float
    boxes: _containers.RepeatedCompositeFieldContainer[Box]
    observed_json: str
    note: str
    decided_by: str
    def __init__(self, constraint_id: _Optional[str] = ..., status: _Optional[str] = ..., confidence: _Optional[float] = ..., boxes: _Optional[_Iterable[_Union[Box, _Mapping]]] = ..., observed_json: _Optional[str] = ..., note: _Optional[str] = ..., decided_by: _Optional[str] = ...) -> None: ...

class Cost(_message.Message):
    __slots__ = ("generator_seconds", "generator_calls", "verifier_calls", "llm_calls", "llm_prompt_tokens", "llm_completion_tokens", "extra")
    class ExtraEntry(_message.Message):
        __slots__ = ("key", "value")
        KEY_FIELD_NUMBER: _ClassVar[int]
        VALUE_FIELD_NUMBER: _ClassVar[int]
        key: str
        value: float
        def __init__(self, key: _Optional[str] = ..., value: _Optional[float] = ...) -> None: ...
    GENERATOR_SECONDS_FIELD_NUMBER: _ClassVar[int]
    GENERATOR_CALLS_FIELD_NUMBER: _ClassVar[int]
    VERIFIER_CALLS_FIELD_NUMBER: _ClassVar[int]
    LLM_CALLS_FIELD_NUMBER: _ClassVar[int]
    LLM_PROMPT_TOKENS_FIELD_NUMBER: _ClassVar[int]
    LLM_COMPLETION_TOKENS_FIELD_NUMBER: _ClassVar[int]
    EXTRA_FIELD_NUMBER: _ClassVar[int]
    generator_seconds: float
    generator_calls: int
    verifier_calls: int
    llm_calls: int
    llm_prompt_tokens: int
    llm_completion_tokens: int
    extra: _containers.ScalarMap[str, float]
    def __init__(self, generator_seconds: _Optional[float] = ..., generator_calls: _Optional[int] = ..., verifier_calls: _Optional[int] = ..., llm_calls: _Optional[int] = ..., llm_prompt_tokens: _Optional[int] = ..., llm_completion_tokens: _Optional[int] = ..., extra: _Optional[_Mapping[str, float]] = ...) -> None: ...
