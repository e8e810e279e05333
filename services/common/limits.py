"""Request limits for every public RPC, in one place (``RequestLimits`` is the
``server.limits`` settings section; ``build_server`` installs ``LimitsInterceptor`` on every
server, so no servicer can forget them).

- ``check_request(message, limits)`` walks a request message generically (by proto field
  names and types, so new RPCs are covered without code): every ``prompt`` /
  ``negative_prompt`` string (at most ``evoharness.tasks.models.MAX_PROMPT_CHARS``
  characters, the project's one prompt limit, checked by ``check_prompt_length``), every ``references`` list
  (``max_references``), every ``evoharness.v1.Layout`` (``max_layout_items``). It raises
  ``InvalidField`` (INVALID_ARGUMENT) naming the dotted field path and the limit.
- ``check_metadata(metadata, limits)``: request headers, keys plus values
  (``max_metadata_bytes``), ``ResourceExhausted`` (RESOURCE_EXHAUSTED).
- ``check_reference_size(size, field, limits)``: one reference image object
  (``max_reference_bytes``), for the servicer that resolves references (generation).
- request bytes that are not a valid message are refused with INVALID_ARGUMENT
  (``request: not a valid protobuf message``) instead of gRPC's INTERNAL;
- the concurrency limit is gRPC's own ``maximum_concurrent_rpcs`` (see ``build_server``): an
  RPC over it is refused with RESOURCE_EXHAUSTED before any handler runs.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import grpc
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from evoharness.tasks.models import check_prompt_length
from services.common.errors import InvalidField, ResourceExhausted
from services.common.settings import RequestLimits

#: String fields holding a prompt (compiled by the harness, read by text encoders).
PROMPT_FIELDS = frozenset({"prompt", "negative_prompt"})
#: Proto message holding layout items (``evoharness.v1.Layout.items``).
LAYOUT_MESSAGE = "evoharness.v1.Layout"

#: gRPC core counts each metadata element with 32 bytes of overhead (RFC 7541 section 4.1);
#: the core limit is set this far above ``max_metadata_bytes`` so that our check, which names
#: the limit, answers first.
_CORE_METADATA_SLACK = 2


def grpc_limit_options(limits: RequestLimits) -> list[tuple[str, Any]]:
    """Server options for the limits gRPC core enforces itself (header list size)."""
    size = limits.max_metadata_bytes * _CORE_METADATA_SLACK
    return [("grpc.max_metadata_size", size), ("grpc.absolute_max_metadata_size", size)]


def check_metadata(
    metadata: Iterable[tuple[str, str | bytes]] | None, limits: RequestLimits
) -> None:
    """Raise ``ResourceExhausted`` when the request's metadata (sum of key and value lengths,
    bytes) exceeds ``limits.max_metadata_bytes``."""
    size = sum(len(k) + len(v) for k, v in metadata or ())
    if size > limits.max_metadata_bytes:
        raise ResourceExhausted(
            f"metadata: {size} bytes, over server.limits.max_metadata_bytes="
            f"{limits.max_metadata_bytes}"
        )


def check_reference_size(size: int, field: str, limits: RequestLimits) -> None:
    """Raise ``InvalidField`` when one reference image object of ``size`` bytes exceeds
    ``limits.max_reference_bytes``; ``field`` is its dotted path (``program.references.0``)."""
    if size > limits.max_reference_bytes:
        raise InvalidField(
            field,
            f"the reference image has {size} bytes, over server.limits.max_reference_bytes="
            f"{limits.max_reference_bytes}",
        )


def _count(field: str, n: int, limit: int, name: str) -> None:
    if n > limit:
        raise InvalidField(field, f"{n} items, over server.limits.{name}={limit}")


def check_request(message: Message, limits: RequestLimits, prefix: str = "") -> None:
    """Raise ``InvalidField`` (``<dotted.field>: <size>, over server.limits.<name>=<limit>``;
    for a prompt ``<dotted.field>: the prompt has N characters, over the limit of M``) for the
    first over-limit field of request ``message``; recurses into sub-messages."""
    for fd, value in message.ListFields():
        path = f"{prefix}{fd.name}"
        repeated = bool(fd.is_repeated)
        if fd.type == FieldDescriptor.TYPE_STRING and fd.name in PROMPT_FIELDS and not repeated:
            try:
                check_prompt_length(value)
            except ValueError as exc:
                raise InvalidField(path, str(exc)) from None
        sub = fd.message_type
        if fd.type != FieldDescriptor.TYPE_MESSAGE or sub is None:
            continue
        if sub.GetOptions().map_entry:
            continue
        if fd.name == "references":
            n = len(value) if repeated else len(getattr(value, "items", ()))
            _count(path, n, limits.max_references, "max_references")
        if sub.full_name == LAYOUT_MESSAGE:
            for layout, p in (
                [(v, f"{path}.{i}") for i, v in enumerate(value)] if repeated else [(value, path)]
            ):
                _count(f"{p}.items", len(layout.items), limits.max_layout_items, "max_layout_items")
        if repeated:
            for i, item in enumerate(value):
                check_request(item, limits, f"{path}.{i}.")
        else:
            check_request(value, limits, f"{path}.")


class _Undecodable:
    """Stands in for a request whose bytes are not a valid message (gRPC would otherwise
    answer INTERNAL "Exception deserializing request!")."""

    def __init__(self, error: Exception) -> None:
        self.error = error


def _tolerant(deserializer: Callable[[bytes], Any] | None) -> Callable[[bytes], Any] | None:
    if deserializer is None:
        return None

    def deserialize(data: bytes) -> Any:
        try:
            return deserializer(data)
        except Exception as exc:  # noqa: BLE001 - reported to the client as INVALID_ARGUMENT
            return _Undecodable(exc)

    return deserialize


class LimitsInterceptor(grpc.ServerInterceptor):
    """Checks metadata and request messages of every unary-request RPC against ``limits``
    before the handler runs. Installed inside the status-mapping interceptor of
    ``services.common.server``, so its errors reach clients as INVALID_ARGUMENT /
    RESOURCE_EXHAUSTED with the message naming field and limit."""

    def __init__(self, limits: RequestLimits) -> None:
        self._limits = limits

    def intercept_service(
        self,
        continuation: Callable[[grpc.HandlerCallDetails], grpc.RpcMethodHandler | None],
        handler_call_details: grpc.HandlerCallDetails,
    ) -> grpc.RpcMethodHandler | None:
        handler = continuation(handler_call_details)
        if handler is None:
            return None
        limits = self._limits
        metadata = handler_call_details.invocation_metadata

        def wrap(fn: Callable[..., Any]) -> Callable[..., Any]:
            def checked(request: Any, context: grpc.ServicerContext) -> Any:
                if isinstance(request, _Undecodable):
                    raise InvalidField(
                        "request", f"not a valid protobuf message ({type(request.error).__name__})"
                    )
                check_metadata(metadata, limits)
                if isinstance(request, Message):
                    check_request(request, limits)
                return fn(request, context)

            return checked

        if handler.unary_unary:
            return grpc.unary_unary_rpc_method_handler(
                wrap(handler.unary_unary),
                request_deserializer=_tolerant(handler.request_deserializer),
                response_serializer=handler.response_serializer,
            )
        if handler.unary_stream:
            return grpc.unary_stream_rpc_method_handler(
                wrap(handler.unary_stream),
                request_deserializer=_tolerant(handler.request_deserializer),
                response_serializer=handler.response_serializer,
            )
        return handler  # client-streaming RPCs (reflection): gRPC's message size limit only
