"""The generation service through real gRPC channels to a subprocess started with
``evoharness serve generation``, writing to a real SeaweedFS S3 server: content-addressed
caching, the client adapter, bad requests (status code + field name, nothing half-written),
metrics, bearer token and TLS both ways. Backend: the deterministic test backend
(``tests.fixtures.services:pattern_generator``); real backends have their own test files."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest

from evoharness.canonical import sha256_hex
from evoharness.ports import Generator
from evoharness.program import GenerationParams, ImageRef, Program, execution_key
from services.common.errors import InvalidField, NotFound
from services.generation.client import GenerationClient
from services.protos import convert
from services.protos.evoharness.v1 import generation_pb2, generation_pb2_grpc
from services.storage.s3 import S3ArtifactStore
from tests.fixtures.services import ServiceHandle, s3_config

BACKEND = "tests.fixtures.services:pattern_generator"
SMALL = GenerationParams(steps=4, guidance_scale=5.0, width=64, height=64)


@pytest.fixture(scope="module")
def gen_bucket(s3_server: Any) -> str:
    bucket = f"gen-{uuid.uuid4().hex[:16]}"
    S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket).ensure_bucket()
    return bucket


@pytest.fixture(scope="module")
def store(s3_server: Any, gen_bucket: str) -> S3ArtifactStore:
    return S3ArtifactStore.from_settings(s3_server.settings, bucket=gen_bucket)


@pytest.fixture(scope="module")
def gen_service(service_factory: Any, s3_server: Any, gen_bucket: str) -> ServiceHandle:
    s3, env = s3_config(s3_server, gen_bucket)
    return service_factory(
        "generation",
        {
            "backend": BACKEND,
            "generator_id": "pattern@deploy-7",
            "max_image_bytes": 20_000,
            "max_width": 512,
            "sim": {"delay": 1.0},
            "s3": s3,
            "server": {"limits": {"max_reference_bytes": 4096}},
        },
        env=env,
    )


def _stub(h: ServiceHandle, **kw: Any) -> Any:
    return generation_pb2_grpc.GenerationServiceStub(h.channel(**kw))


def _req(program: Program, **kw: Any) -> generation_pb2.GenerateRequest:
    return generation_pb2.GenerateRequest(program=convert.program_to_proto(program), **kw)


def test_generate_then_cached(gen_service: ServiceHandle, store: S3ArtifactStore) -> None:
    stub = _stub(gen_service)
    program = Program(prompt=f"a red cube {uuid.uuid4().hex}", params=SMALL, seed=3)
    first = stub.Generate(_req(program, include_png=True, include_manifest=True), timeout=30)
    assert not first.cached and first.generator_seconds > 0
    assert first.generator_id == "pattern@deploy-7"  # deployment config, not the backend
    assert first.execution_key == execution_key(program, "pattern@deploy-7")
    assert first.image.key.endswith(first.execution_key + ".png")
    assert (first.width, first.height) == (64, 64)
    stored = store.get(first.image.key)
    assert stored == first.png and sha256_hex(stored) == first.image.sha256
    assert '"prompt"' in first.manifest_json
    second = stub.Generate(_req(program, include_png=True, include_manifest=True), timeout=30)
    assert second.cached and second.generator_seconds == 0.0
    # the cost recorded when it was generated rides on every answer (proto field 11)
    assert first.nominal_seconds == first.generator_seconds == second.nominal_seconds
    assert second.image == first.image and second.png == first.png
    assert second.manifest_json == first.manifest_json and (second.width, second.height) == (64, 64)
    other_seed = stub.Generate(_req(program.model_copy(update={"seed": 4})), timeout=30)
    assert not other_seed.cached and other_seed.execution_key != first.execution_key


def test_large_manifest_kept_whole_in_the_record(
    gen_service: ServiceHandle, store: S3ArtifactStore
) -> None:
    program = Program(prompt=f"bigmanifest {uuid.uuid4().hex}", params=SMALL)
    with GenerationClient(gen_service.address, store, include_manifest=True) as client:
        img = client.generate(program)
        again = client.generate(program)
    assert img.manifest is not None and len(img.manifest["objects"]) == 64
    assert again.cached and again.manifest == img.manifest
    key = execution_key(program, "pattern@deploy-7")
    record = json.loads(store.get(f"executions/{key[:2]}/{key}.json"))
    assert record["manifest"] == img.manifest and record["execution_key"] == key


def test_client_adapter_is_a_generator(gen_service: ServiceHandle, store: S3ArtifactStore) -> None:
    with GenerationClient(gen_service.address, store, include_manifest=True) as client:
        assert isinstance(client, Generator)
        assert client.generator_id == "pattern@deploy-7"
        program = Program(prompt=f"two cats {uuid.uuid4().hex}", params=SMALL)
        img = client.generate(program)
        again = client.generate(program)
    assert not img.cached and again.cached and again.seconds == 0.0
    assert img.png.startswith(b"\x89PNG") and img.png == again.png
    assert img.ref is not None and img.ref.bucket == store.bucket
    assert sha256_hex(img.png) == img.ref.sha256 and (img.width, img.height) == (64, 64)
    assert img.manifest == {"prompt": program.prompt, "objects": []}


def test_describe(gen_service: ServiceHandle, gen_bucket: str) -> None:
    d = _stub(gen_service).Describe(generation_pb2.DescribeRequest(), timeout=10)
    assert d.generator_id == "pattern@deploy-7" and d.bucket == gen_bucket
    assert d.param_bounds["width"].max == 512 and d.param_bounds["steps"].max == 150


def _error(stub: Any, req: Any, timeout: float = 30) -> grpc.RpcError:
    with pytest.raises(grpc.RpcError) as err:
        stub.Generate(req, timeout=timeout)
    return err.value


def test_bad_requests_name_the_field(gen_service: ServiceHandle, store: S3ArtifactStore) -> None:
    stub = _stub(gen_service)
    before = set(store.list_keys())
    cases = [
        (
            generation_pb2.GenerateRequest(program={"prompt": "   "}),
            "INVALID_ARGUMENT",
            "program.prompt",
        ),
        (generation_pb2.GenerateRequest(), "INVALID_ARGUMENT", "program: is missing"),
        (
            _req(Program(prompt="x", params=SMALL), backend="dall-e-9"),
            "INVALID_ARGUMENT",
            "backend",
        ),
        (
            generation_pb2.GenerateRequest(
                program={
                    "prompt": "x",
                    "params": {"steps": 500, "guidance_scale": 5, "width": 64, "height": 64},
                }
            ),
            "INVALID_ARGUMENT",
            "program.params",
        ),
        (
            _req(Program(prompt="x", params=GenerationParams(width=1024, height=64))),
            "INVALID_ARGUMENT",
            "program.params.width",
        ),
        (
            _req(
                Program(
                    prompt="x",
                    params=SMALL,
                    references=[ImageRef(bucket=store.bucket, key="refs/missing.png")],
                )
            ),
            "NOT_FOUND",
            "program.references.0",
        ),
        (
            _req(Program(prompt="noise", params=GenerationParams(width=256, height=256))),
            "RESOURCE_EXHAUSTED",
            "image",
        ),
    ]
    for req, code, field in cases:
        err = _error(stub, req)
        assert err.code().name == code, (field, err.details())
        assert err.details().startswith(field) or field in err.details(), err.details()
        assert "Traceback" not in err.details()
    assert set(store.list_keys()) == before  # nothing written by any bad request
    # a backend that is known but not deployed here is also named
    err = _error(stub, _req(Program(prompt="x", params=SMALL), backend="diffusers"))
    assert "this deployment serves" in err.details()


def test_client_raises_typed_errors(gen_service: ServiceHandle, store: S3ArtifactStore) -> None:
    with GenerationClient(gen_service.address, store) as client:
        with pytest.raises(InvalidField) as err:
            client.generate(Program(prompt="x", params=GenerationParams(width=1024, height=64)))
        assert err.value.field == "program.params.width"
        with pytest.raises(NotFound, match="program.references.0"):
            client.generate(
                Program(prompt="x", params=SMALL, references=[ImageRef(key="nope.png")])
            )


def test_reference_that_exists_is_accepted(
    gen_service: ServiceHandle, store: S3ArtifactStore
) -> None:
    ref = store.put_content(b"reference image bytes", prefix="refs", suffix=".png")
    resp = _stub(gen_service).Generate(
        _req(Program(prompt=f"with ref {uuid.uuid4().hex}", params=SMALL, references=[ref])),
        timeout=30,
    )
    assert not resp.cached and store.exists(resp.image.key)


def test_reference_over_size_limit_is_refused(
    gen_service: ServiceHandle, store: S3ArtifactStore
) -> None:
    small = store.put_content(b"r" * 4096, prefix="refs", suffix=".png")
    big = store.put_content(b"R" * 4097, prefix="refs", suffix=".png")
    program = Program(prompt=f"big ref {uuid.uuid4().hex}", params=SMALL, references=[small, big])
    with pytest.raises(grpc.RpcError) as err:
        _stub(gen_service).Generate(_req(program), timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details() == (
        "program.references.1: the reference image has 4097 bytes, over "
        "server.limits.max_reference_bytes=4096"
    )
    key = execution_key(program, "pattern@deploy-7")
    assert not store.exists(f"executions/{key[:2]}/{key}.png")


def _metric(text: str, name: str, **labels: str) -> float:
    total = 0.0
    for line in text.splitlines():
        if not line.startswith(name + "{") and line.split(" ")[0] != name:
            continue
        if all(f'{k}="{v}"' in line for k, v in labels.items()):
            total += float(line.rsplit(" ", 1)[1])
    return total


def test_expired_deadline_writes_nothing(
    gen_service: ServiceHandle, store: S3ArtifactStore
) -> None:
    program = Program(prompt=f"slow {uuid.uuid4().hex}", params=SMALL)
    key = execution_key(program, "pattern@deploy-7")
    before = _metric(
        gen_service.metrics_text(), "evoharness_generation_errors_total", code="DEADLINE_EXCEEDED"
    )
    err = _error(_stub(gen_service), _req(program), timeout=0.3)
    assert err.code() == grpc.StatusCode.DEADLINE_EXCEEDED
    deadline = time.monotonic() + 10  # the server finishes its 1 s generation, then gives up
    while time.monotonic() < deadline:
        if (
            _metric(
                gen_service.metrics_text(),
                "evoharness_generation_errors_total",
                code="DEADLINE_EXCEEDED",
            )
            > before
        ):
            break
        time.sleep(0.05)
    else:
        pytest.fail("server never recorded the DEADLINE_EXCEEDED")
    assert not any(key in k for k in store.list_keys())


def test_metrics_exported(gen_service: ServiceHandle) -> None:
    stub = _stub(gen_service)
    program = Program(prompt=f"metric probe {uuid.uuid4().hex}", params=SMALL)
    text0 = gen_service.metrics_text()
    stub.Generate(_req(program), timeout=30)
    stub.Generate(_req(program), timeout=30)
    _error(stub, generation_pb2.GenerateRequest(program={"prompt": ""}))
    text = gen_service.metrics_text()

    def delta(name: str, **labels: str) -> float:
        return _metric(text, name, **labels) - _metric(text0, name, **labels)

    assert delta("evoharness_generation_requests_total", code="OK") == 2
    assert delta("evoharness_generation_errors_total", code="INVALID_ARGUMENT") == 1
    assert delta("evoharness_images_generated_total") == 1
    assert delta("evoharness_cache_hits_total") == 1
    assert delta("evoharness_generator_seconds_total") > 0
    assert delta("evoharness_generation_latency_seconds_count") == 3
    assert re.search(r'evoharness_grpc_requests_total\{code="OK",method="Generate"', text)


def test_bearer_token_and_tls_through_the_service(
    service_factory: Any, s3_server: Any, gen_bucket: str, store: S3ArtifactStore, tmp_path: Path
) -> None:
    from tests.services.test_server import _make_certs

    certs = _make_certs(tmp_path)
    s3, env = s3_config(s3_server, gen_bucket)
    h = service_factory(
        "generation",
        {
            "backend": BACKEND,
            "s3": s3,
            "server": {
                "tls_cert_file": str(certs["server.pem"]),
                "tls_key_file": str(certs["server.key"]),
                "tls_ca_file": str(certs["ca.pem"]),
            },
        },
        env={**env, "EVOHARNESS_SERVER__AUTH_TOKEN": "tok-123"},
    )
    program = Program(prompt=f"secure {uuid.uuid4().hex}", params=SMALL)
    for token in (None, "bad"):
        err = _error(_stub(h, token=token), _req(program))
        assert err.code() == grpc.StatusCode.UNAUTHENTICATED
    plain = generation_pb2_grpc.GenerationServiceStub(grpc.insecure_channel(h.address))
    assert _error(plain, _req(program), timeout=3).code() == grpc.StatusCode.UNAVAILABLE
    with GenerationClient(h.address, store, token="tok-123", tls_ca_file=str(certs["ca.pem"])) as c:
        img = c.generate(program)
    assert img.png.startswith(b"\x89PNG") and not img.cached


def test_unknown_backend_in_config_fails_to_start(
    tmp_path: Path, s3_server: Any, gen_bucket: str
) -> None:
    import yaml

    cfg = tmp_path / "g.yaml"
    s3, env = s3_config(s3_server, gen_bucket)
    cfg.write_text(yaml.safe_dump({"backend": "nonexistent", "s3": s3}))
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "evoharness_app",
            "serve",
            "generation",
            "--config",
            str(cfg),
            "--port",
            "0",
        ],
        capture_output=True,
        text=True,
        timeout=120,
        env={**env, "PATH": "/usr/bin:/bin"},
    )
    assert out.returncode == 1, out.stderr[-2000:]
    assert "backend: 'nonexistent' is not one of" in out.stderr
    assert "Traceback" not in out.stderr


def test_describe_reports_capabilities_and_generate_refuses_what_they_lack(
    service_factory: Any, s3_server: Any, gen_bucket: str, store: S3ArtifactStore
) -> None:
    """A deployment pinning text-only capabilities: Describe reports them, the client exposes
    them, Generate refuses a layout (FAILED_PRECONDITION naming it, nothing stored), and the
    runtime over the client drops the layout before the call with a capability_drop record."""
    from pathlib import Path

    from evoharness.capabilities import GeneratorCapabilities
    from evoharness.harness.io import load_dir
    from evoharness.program import LayoutItem
    from evoharness.runtime.runtime import HarnessRuntime
    from services.common.errors import FailedPrecondition

    s3, env = s3_config(s3_server, gen_bucket)
    pinned = {"layout": "none", "max_references": 0, "negative_prompt": False}
    h = service_factory(
        "generation",
        {"backend": BACKEND, "generator_id": "pattern@text-only", "capabilities": pinned, "s3": s3},
        env=env,
    )
    d = _stub(h).Describe(generation_pb2.DescribeRequest(), timeout=10)
    caps = convert.capabilities_from_proto(d.capabilities)
    assert caps == GeneratorCapabilities(**pinned)
    laid_out = Program(
        prompt="a cat left of a dog",
        params=SMALL,
        layout=[LayoutItem(label="cat", box=(0.0, 0.2, 0.5, 0.8))],
    )
    err = _error(_stub(h), _req(laid_out))
    assert err.code() == grpc.StatusCode.FAILED_PRECONDITION and "layout" in (err.details() or "")
    key = execution_key(laid_out, "pattern@text-only")
    assert not store.exists(f"executions/{key[:2]}/{key}.png")

    harness = load_dir(Path(__file__).resolve().parents[2] / "harnesses" / "reference")
    with GenerationClient(h.address, store) as client:
        assert client.capabilities == caps
        with pytest.raises(FailedPrecondition, match="negative_prompt"):
            client.generate(Program(prompt="a cat", negative_prompt="blurry", params=SMALL))
        result = HarnessRuntime(harness, client).run("a photo of a red cat to the left of a dog", 3)
    assert result.program.layout is None and result.program.negative_prompt == ""
    drop = next(r for r in result.trace if r["step"] == "capability_drop")
    assert "layout" in drop["dropped"]


def test_describe_defaults_to_full_capabilities_for_a_backend_declaring_none(
    gen_service: ServiceHandle,
) -> None:
    from evoharness.capabilities import FULL

    d = _stub(gen_service).Describe(generation_pb2.DescribeRequest(), timeout=10)
    assert d.HasField("capabilities") and convert.capabilities_from_proto(d.capabilities) == FULL


def test_error_counters_start_at_zero(
    service_factory: Any, s3_server: Any, gen_bucket: str
) -> None:
    """A fresh generation service exports its error counters at 0, before any error, so
    dashboards and rate() alerts have data (issue 14 item 12)."""
    s3, env = s3_config(s3_server, gen_bucket)
    fresh = service_factory("generation", {"backend": "sim", "s3": s3}, env=env)
    text = fresh.metrics_text()
    for code in ("INTERNAL", "UNAVAILABLE", "DEADLINE_EXCEEDED", "INVALID_ARGUMENT"):
        assert f'evoharness_generation_errors_total{{backend="sim",code="{code}"}} 0.0' in text
