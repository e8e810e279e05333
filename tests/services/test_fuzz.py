"""Property-based fuzzing (hypothesis) of every public RPC over real gRPC channels to the real
services (``evoharness serve`` subprocesses: generation and verification on the sim backend,
the rule-based proposer, the registry on SQLite + S3, the runtime in front of them).

Requests are drawn generically from each method's proto descriptor (every field, nested
messages, repeated fields, oneofs, random text including non-ASCII), so a new field or RPC is
fuzzed without changing this file. Property: the answer is OK or a deliberate status, never
UNKNOWN / INTERNAL (an unhandled exception) nor a stack trace, and every server is still alive
and healthy afterwards. Examples are bounded: ``QUICK_EXAMPLES`` per RPC in the default run
(``make test``), ``DEEP_EXAMPLES`` per RPC in the ``slow`` variant (``make test-all``), so
every RPC is fuzzed in both and the default suite stays fast.
"""

from __future__ import annotations

from typing import Any

import grpc
import pytest
from google.protobuf import message_factory
from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from services.protos.evoharness.v1 import (
    generation_pb2,
    proposer_pb2,
    registry_pb2,
    runtime_pb2,
    verification_pb2,
)
from tests.fixtures.services import ServiceHandle, health_ok

#: examples per RPC: the default run (every RPC still fuzzed) and the slow, deeper run
QUICK_EXAMPLES = 6
DEEP_EXAMPLES = 30
EXAMPLES = [
    pytest.param(QUICK_EXAMPLES, id="quick"),
    pytest.param(DEEP_EXAMPLES, id="deep", marks=pytest.mark.slow),
]
FORBIDDEN = {grpc.StatusCode.UNKNOWN, grpc.StatusCode.INTERNAL}

_TEXT = st.one_of(
    st.text(max_size=40),
    st.sampled_from(["", " ", "{}", "[]", "null", '{"a": 1}', "a red cube", "policy", "0", "-1"]),
)
_INT = {
    FieldDescriptor.TYPE_INT32: st.integers(-(2**31), 2**31 - 1),
    FieldDescriptor.TYPE_INT64: st.integers(-(2**63), 2**63 - 1),
    FieldDescriptor.TYPE_UINT32: st.integers(0, 2**32 - 1),
    FieldDescriptor.TYPE_UINT64: st.integers(0, 2**64 - 1),
}


def _scalar(fd: Any) -> st.SearchStrategy[Any]:
    if fd.type == FieldDescriptor.TYPE_STRING:
        return _TEXT
    if fd.type == FieldDescriptor.TYPE_BYTES:
        return st.binary(max_size=64)
    if fd.type == FieldDescriptor.TYPE_BOOL:
        return st.booleans()
    if fd.type in (FieldDescriptor.TYPE_DOUBLE, FieldDescriptor.TYPE_FLOAT):
        return st.floats(allow_nan=True, allow_infinity=True, width=32)
    if fd.type in _INT:
        return st.one_of(_INT[fd.type], st.sampled_from([0, 1]))
    if fd.type == FieldDescriptor.TYPE_ENUM:
        return st.sampled_from([v.number for v in fd.enum_type.values])
    raise TypeError(f"no strategy for field {fd.full_name} (type {fd.type})")


def _cls(desc: Any) -> type[Message]:
    return message_factory.GetMessageClass(desc)


@st.composite
def proto_messages(draw: Any, desc: Any, depth: int = 0) -> Message:
    """A random ``desc`` message: each field set or not, repeated fields 0..3 long (maps
    0..2 entries), nesting cut off at depth 3."""
    msg = _cls(desc)()
    fd: Any
    for fd in desc.fields:
        if not draw(st.booleans()):
            continue
        if fd.type == FieldDescriptor.TYPE_MESSAGE:
            if depth >= 3:
                continue
            if fd.message_type.GetOptions().map_entry:
                key_fd, val_fd = (
                    fd.message_type.fields_by_name["key"],
                    fd.message_type.fields_by_name["value"],
                )
                for _ in range(draw(st.integers(0, 2))):
                    k = draw(_scalar(key_fd))
                    if val_fd.type == FieldDescriptor.TYPE_MESSAGE:
                        getattr(msg, fd.name)[k].CopyFrom(
                            draw(proto_messages(val_fd.message_type, depth + 1))
                        )
                    else:
                        getattr(msg, fd.name)[k] = draw(_scalar(val_fd))
            elif fd.is_repeated:
                for _ in range(draw(st.integers(0, 3))):
                    getattr(msg, fd.name).add().CopyFrom(
                        draw(proto_messages(fd.message_type, depth + 1))
                    )
            else:
                getattr(msg, fd.name).CopyFrom(draw(proto_messages(fd.message_type, depth + 1)))
        elif fd.is_repeated:
            getattr(msg, fd.name).extend(draw(st.lists(_scalar(fd), max_size=5)))
        else:
            setattr(msg, fd.name, draw(_scalar(fd)))
    return msg


def _call(handle: ServiceHandle, method: Any, request: Message) -> None:
    out = _cls(method.output_type)
    rpc = handle.channel().unary_unary(
        f"/{method.containing_service.full_name}/{method.name}",
        request_serializer=lambda m: m.SerializeToString(),
        response_deserializer=out.FromString,
    )
    try:
        rpc(request, timeout=60)
    except grpc.RpcError as err:
        code, details = err.code(), err.details() or ""
        assert code not in FORBIDDEN, f"{method.full_name} -> {code.name}: {details}\n{request}"
        assert "Traceback" not in details and 'File "' not in details, details


@pytest.fixture(scope="module")
def stack(services_stack: dict[str, ServiceHandle]) -> dict[str, ServiceHandle]:
    """The session's five services (``tests/services/conftest.py``)."""
    return {k: v for k, v in services_stack.items() if not k.startswith("_")}


SERVICES = {
    "generation": generation_pb2.DESCRIPTOR.services_by_name["GenerationService"],
    "verification": verification_pb2.DESCRIPTOR.services_by_name["VerificationService"],
    "proposer": proposer_pb2.DESCRIPTOR.services_by_name["ProposerService"],
    "registry": registry_pb2.DESCRIPTOR.services_by_name["HarnessRegistry"],
    "runtime": runtime_pb2.DESCRIPTOR.services_by_name["Runtime"],
}
CASES = [(name, m.name) for name, svc in SERVICES.items() for m in svc.methods]


@pytest.mark.parametrize("examples", EXAMPLES)
@pytest.mark.parametrize("service", list(SERVICES))
def test_undecodable_request_bytes_are_invalid_argument(
    stack: dict[str, ServiceHandle], service: str, examples: int
) -> None:
    handle = stack[service]

    @settings(max_examples=examples, deadline=None, database=None)
    @given(
        data=st.binary(min_size=1, max_size=64),
        method=st.sampled_from(list(SERVICES[service].methods)),
    )
    def check(data: bytes, method: Any) -> None:
        rpc = handle.channel().unary_unary(f"/{method.containing_service.full_name}/{method.name}")
        try:
            rpc(data, timeout=60)
        except grpc.RpcError as err:
            assert err.code() not in FORBIDDEN, f"{method.full_name} {data!r}: {err.details()}"

    check()
    assert handle.process.alive(), handle.process.log_tail()


@pytest.mark.parametrize("examples", EXAMPLES)
@pytest.mark.parametrize("service,method", CASES, ids=[f"{s}.{m}" for s, m in CASES])
def test_fuzzed_requests_never_crash(
    stack: dict[str, ServiceHandle], service: str, method: str, examples: int
) -> None:
    handle = stack[service]
    md = SERVICES[service].methods_by_name[method]

    @settings(
        max_examples=examples,
        deadline=None,
        database=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture],
    )
    @given(request=proto_messages(md.input_type))
    def check(request: Message) -> None:
        _call(handle, md, request)

    check()
    assert handle.process.alive(), handle.process.log_tail()
    assert health_ok(handle.address)
