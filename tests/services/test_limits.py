"""Request limits (``server.limits``, ``services.common.limits``) through a real gRPC channel
to a server built by ``build_server``: each over-limit request is refused with
INVALID_ARGUMENT / RESOURCE_EXHAUSTED naming the field and the limit, the handler never
runs for it, and a request at the limit passes. The reference-size limit is tested against
the real generation service in ``tests/services/test_generation.py``."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import grpc
import pytest

from evoharness.tasks.models import MAX_PROMPT_CHARS
from services.common import server as srv
from services.common.channel import open_channel
from services.common.settings import RequestLimits, ServerSettings, ServiceSettings, load_settings
from services.protos.evoharness.v1 import (
    common_pb2,
    generation_pb2,
    generation_pb2_grpc,
    runtime_pb2,
    runtime_pb2_grpc,
)

GEN = "evoharness.v1.GenerationService"
RUNTIME = "evoharness.v1.Runtime"


class Probe(generation_pb2_grpc.GenerationServiceServicer, runtime_pb2_grpc.RuntimeServicer):
    """Counts handler runs; ``Generate(prompt="block")`` waits for ``release``."""

    def __init__(self) -> None:
        self.calls = 0
        self.entered = threading.Semaphore(0)
        self.release = threading.Event()

    def Generate(self, request: Any, context: Any) -> Any:
        self.calls += 1
        if request.program.prompt == "block":
            self.entered.release()
            self.release.wait(30)
        return generation_pb2.GenerateResponse(generator_id="probe")

    def Render(self, request: Any, context: Any) -> Any:
        self.calls += 1
        return runtime_pb2.RenderResponse(generator_id="probe")


@pytest.fixture
def probe_server(request: Any) -> Iterator[tuple[int, Probe]]:
    limits = getattr(request, "param", {})
    probe = Probe()
    rs = srv.build_server(
        ServerSettings(port=0, metrics_port=-1, max_workers=4, limits=RequestLimits(**limits)),
        [
            srv.ServiceRegistration(
                probe, generation_pb2_grpc.add_GenerationServiceServicer_to_server, GEN
            ),
            srv.ServiceRegistration(probe, runtime_pb2_grpc.add_RuntimeServicer_to_server, RUNTIME),
        ],
    )
    try:
        yield rs.port, probe
    finally:
        probe.release.set()
        rs.stop(0)


def _refused(call: Any, code: grpc.StatusCode, *needles: str) -> str:
    with pytest.raises(grpc.RpcError) as err:
        call()
    assert err.value.code() == code, err.value.details()
    for n in needles:
        assert n in err.value.details()
    return str(err.value.details())


def _generate(port: int, program: dict[str, Any], **kw: Any) -> Any:
    with open_channel(f"127.0.0.1:{port}") as ch:
        return generation_pb2_grpc.GenerationServiceStub(ch).Generate(
            generation_pb2.GenerateRequest(program=program), timeout=10, **kw
        )


def _ref(i: int) -> dict[str, str]:
    return {"key": f"refs/{i}.png"}


def test_defaults_are_the_documented_ones() -> None:
    lim = ServerSettings().limits
    assert (lim.max_references, lim.max_reference_bytes) == (8, 16 * 1024 * 1024)
    assert (lim.max_layout_items, lim.max_metadata_bytes, lim.max_concurrent_rpcs) == (
        64,
        64 * 1024,
        64,
    )


def test_limits_from_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("EVOHARNESS_SERVER__LIMITS__MAX_REFERENCES", "3")
    assert load_settings(ServiceSettings).server.limits.max_references == 3
    monkeypatch.setenv("EVOHARNESS_SERVER__LIMITS__MAX_REFERENCES", "-1")
    with pytest.raises(ValueError, match="max_references"):
        load_settings(ServiceSettings)


def test_the_prompt_limit_is_not_a_server_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    """One prompt limit, ``MAX_PROMPT_CHARS``: a deployment cannot set another one."""
    monkeypatch.setenv("EVOHARNESS_SERVER__LIMITS__MAX_PROMPT_BYTES", "100")
    with pytest.raises(ValueError, match="max_prompt_bytes"):
        load_settings(ServiceSettings)


def test_prompt_at_limit_passes_over_is_refused(probe_server: Any) -> None:
    """Issue 27 item 13c: the server counts the prompt in characters against the Task model's
    ``MAX_PROMPT_CHARS``, as the CLI does (it counted UTF-8 bytes against 8 KiB: a
    10,000-character prompt the CLI accepted was refused by the server)."""
    port, probe = probe_server
    assert _generate(port, {"prompt": "a" * MAX_PROMPT_CHARS}).generator_id == "probe"
    # three UTF-8 bytes each: the limit counts characters, not bytes
    assert _generate(port, {"prompt": "\u20ac" * MAX_PROMPT_CHARS}).generator_id == "probe"
    assert probe.calls == 2
    for program, field in (
        ({"prompt": "a" * (MAX_PROMPT_CHARS + 1)}, "program.prompt"),
        (
            {"prompt": "ok", "negative_prompt": "\u20ac" * (MAX_PROMPT_CHARS + 1)},
            "program.negative_prompt",
        ),
    ):
        msg = _refused(
            lambda p=program: _generate(port, p),  # type: ignore[misc]
            grpc.StatusCode.INVALID_ARGUMENT,
            field,
            f"{MAX_PROMPT_CHARS + 1} characters, over the limit of {MAX_PROMPT_CHARS}",
        )
        assert msg.startswith(field + ":")
    assert probe.calls == 2  # the handler never ran for a refused request


def test_runtime_render_prompt_and_references(probe_server: Any) -> None:
    port, probe = probe_server
    with open_channel(f"127.0.0.1:{port}") as ch:
        stub = runtime_pb2_grpc.RuntimeStub(ch)
        _refused(
            lambda: stub.Render(runtime_pb2.RenderRequest(prompt="x" * 100_000), timeout=10),
            grpc.StatusCode.INVALID_ARGUMENT,
            "prompt: the prompt has 100000 characters",
            f"limit of {MAX_PROMPT_CHARS}",
        )
        many = runtime_pb2.RenderRequest(
            prompt="a cat", options={"references": [_ref(i) for i in range(9)]}
        )
        _refused(
            lambda: stub.Render(many, timeout=10),
            grpc.StatusCode.INVALID_ARGUMENT,
            "options.references: 9 items, over server.limits.max_references=8",
        )
        eight = runtime_pb2.RenderRequest(
            prompt="a cat", options={"references": [_ref(i) for i in range(8)]}
        )
        assert stub.Render(eight, timeout=10).generator_id == "probe"
    assert probe.calls == 1


def test_program_references_and_layout(probe_server: Any) -> None:
    port, probe = probe_server
    _refused(
        lambda: _generate(
            port, {"prompt": "p", "references": {"items": [_ref(i) for i in range(9)]}}
        ),
        grpc.StatusCode.INVALID_ARGUMENT,
        "program.references: 9 items, over server.limits.max_references=8",
    )
    item = common_pb2.LayoutItem(label="cat", box=[0.1, 0.1, 0.5, 0.5])
    _refused(
        lambda: _generate(port, {"prompt": "p", "layout": {"items": [item] * 65}}),
        grpc.StatusCode.INVALID_ARGUMENT,
        "program.layout.items: 65 items, over server.limits.max_layout_items=64",
    )
    assert _generate(port, {"prompt": "p", "layout": {"items": [item] * 64}}).generator_id
    assert probe.calls == 1


def test_metadata_over_limit_is_resource_exhausted(probe_server: Any) -> None:
    port, probe = probe_server
    big = [("x-note", "n" * (65 * 1024))]
    _refused(
        lambda: _generate(port, {"prompt": "p"}, metadata=big),
        grpc.StatusCode.RESOURCE_EXHAUSTED,
        "metadata:",
        "server.limits.max_metadata_bytes=65536",
    )
    assert _generate(port, {"prompt": "p"}, metadata=[("x-note", "n" * 60_000)]).generator_id
    assert probe.calls == 1


@pytest.mark.parametrize("probe_server", [{"max_concurrent_rpcs": 2}], indirect=True)
def test_concurrency_limit_sheds_with_resource_exhausted(probe_server: Any) -> None:
    port, probe = probe_server
    with open_channel(f"127.0.0.1:{port}") as ch:
        stub = generation_pb2_grpc.GenerationServiceStub(ch)
        req = generation_pb2.GenerateRequest(program={"prompt": "block"})
        held = [stub.Generate.future(req, timeout=60) for _ in range(2)]
        for _ in held:
            assert probe.entered.acquire(timeout=30)  # both are inside the handler
        _refused(
            lambda: stub.Generate(
                generation_pb2.GenerateRequest(program={"prompt": "p"}), timeout=30
            ),
            grpc.StatusCode.RESOURCE_EXHAUSTED,
        )
        assert probe.calls == 2
        probe.release.set()
        assert [f.result(timeout=30).generator_id for f in held] == ["probe", "probe"]
        # capacity is back once the held calls finished
        assert stub.Generate(generation_pb2.GenerateRequest(program={"prompt": "p"}), timeout=30)
