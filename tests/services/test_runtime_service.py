"""The Runtime service over real gRPC, with the registry, generation (sim backend) and S3
(SeaweedFS) services running as processes: Render on ``prod``, promotion changes the next
Render without a restart, a 90/10 canary split holds within binomial tolerance."""

from __future__ import annotations

import hashlib
import json
import math
import time
import urllib.request
import uuid
from pathlib import Path
from typing import Any

import grpc
import pytest

from evoharness.harness.io import harness_id, load_dir
from evoharness.harness.patch import apply_patch
from evoharness.harness.schema import Harness
from harness_registry import Lineage
from services.protos.evoharness.v1 import runtime_pb2 as pb
from services.protos.evoharness.v1 import runtime_pb2_grpc as pb_grpc
from services.registry.client import RegistryClient
from services.storage.s3 import S3ArtifactStore
from tests.fixtures.services import ServiceHandle, runtime_stack, s3_config

#: The variant changes the compiled program visibly (negative prompt and guidance scale).
VARIANT_PATCH = {
    "responsibility": "policy",
    "ops": [
        {"op": "replace", "path": "/policy/negative_prompt", "value": "blurry, watermark"},
        {"op": "replace", "path": "/policy/params/guidance_scale", "value": 9.0},
    ],
}
SMALL = [
    {"op": "replace", "path": "/policy/params/width", "value": 128},
    {"op": "replace", "path": "/policy/params/height", "value": 128},
    {"op": "replace", "path": "/policy/params/steps", "value": 8},
]


@pytest.fixture(scope="module")
def bucket(s3_server: Any) -> str:
    name = f"rt-{uuid.uuid4().hex[:16]}"
    S3ArtifactStore.from_settings(s3_server.settings, bucket=name).ensure_bucket()
    return name


@pytest.fixture(scope="module")
def stack(
    service_factory: Any, s3_server: Any, bucket: str, tmp_path_factory: pytest.TempPathFactory
) -> dict[str, ServiceHandle]:
    from evoharness_app.commands.serve import SERVICES

    db = tmp_path_factory.mktemp("registry") / "registry.db"
    return runtime_stack(
        service_factory, s3_server, bucket, db, verification="verification" in SERVICES
    )


@pytest.fixture(scope="module")
def harnesses(repo_root: Path) -> tuple[Harness, Harness]:
    base = load_dir(repo_root / "harnesses" / "baseline")
    small = apply_patch(base, {"responsibility": "policy", "ops": SMALL})
    return small, apply_patch(small, VARIANT_PATCH)


def _registry(stack: dict[str, ServiceHandle]) -> RegistryClient:
    return RegistryClient(stack["registry"].address)


def _render(stack: dict[str, ServiceHandle], **kw: Any) -> pb.RenderResponse:
    stub = pb_grpc.RuntimeStub(stack["runtime"].channel())
    return stub.Render(pb.RenderRequest(**kw), timeout=60)


def _fresh_channel(client: RegistryClient, a: str, name: str | None = None) -> str:
    channel = name or f"c-{uuid.uuid4().hex[:10]}"
    client.promote(channel, a, expected=None, actor="test")
    return channel


def test_render_on_prod_returns_an_image(stack, harnesses, s3_server, bucket) -> None:  # type: ignore[no-untyped-def]
    base, _ = harnesses
    with _registry(stack) as client:
        a, hid, _ = client.put(base, Lineage(registered_by="test"))
        client.promote("prod", a, expected=None, actor="test")  # a fresh registry
    resp = _render(
        stack,
        prompt="a photo of two red apples",
        channel="prod",
        seed=11,
        options=pb.RenderOptions(include_trace=True),
    )
    assert resp.registration_id == a and resp.harness_id == hid == harness_id(base)
    assert resp.program.prompt and resp.program.seed == 11
    assert resp.program.params.width == 128
    assert resp.generator_id.startswith("sim")
    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    png = store.get(resp.image.key)
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    assert hashlib.sha256(png).hexdigest() == resp.image.sha256
    with urllib.request.urlopen(resp.image_url, timeout=10) as r:  # the presigned URL works
        assert r.read() == png
    trace = json.loads(resp.trace_json)
    assert any(t.get("responsibility") == "policy" for t in trace)
    assert resp.cost.generator_calls >= 1
    again = _render(stack, prompt="a photo of two red apples", channel="prod", seed=11)
    assert again.cached and again.image.key == resp.image.key


def test_render_without_a_client_deadline(stack, harnesses) -> None:  # type: ignore[no-untyped-def]
    """gRPC's default (and grpcurl's) is no deadline: the server must not pass gRPC's
    "infinite" time_remaining (~9.2e18 s) on to the generation call (issue 14, item 1)."""
    base, _ = harnesses
    with _registry(stack) as client:
        a, _, _ = client.put(base, Lineage(registered_by="no-deadline-test"))
        channel = _fresh_channel(client, a)
    stub = pb_grpc.RuntimeStub(stack["runtime"].channel())
    call = stub.Render.future(pb.RenderRequest(prompt="a photo of a red cup", channel=channel))
    resp = call.result(timeout=300)  # guards the test only; the RPC itself has no deadline
    assert resp.registration_id == a and resp.image.key and resp.cost.generator_calls >= 1


def test_promotion_changes_the_next_render(stack, harnesses) -> None:  # type: ignore[no-untyped-def]
    base, variant = harnesses
    with _registry(stack) as client:
        a, _, _ = client.put(base, Lineage(registered_by="promotion-test"))
        b, hb, _ = client.put(variant, Lineage(parent_id=a, patch=VARIANT_PATCH))
        channel = _fresh_channel(client, a)
        first = _render(stack, prompt="a cat left of a dog", channel=channel, seed=3)
        assert first.registration_id == a
        assert first.program.negative_prompt != "blurry, watermark"
        client.promote(channel, b, expected=a, reason="accepted by gate")
        second = _render(stack, prompt="a cat left of a dog", channel=channel, seed=3)
        assert second.registration_id == b and second.harness_id == hb
        assert "blurry" in second.program.negative_prompt
        assert second.program.params.guidance_scale == pytest.approx(9.0)
        client.rollback(channel, expected=b)
        third = _render(stack, prompt="a cat left of a dog", channel=channel, seed=3)
        assert third.registration_id == a and third.program == first.program


def test_canary_split_is_honoured(stack, harnesses) -> None:  # type: ignore[no-untyped-def]
    base, variant = harnesses
    n, w = 500, 0.1
    with _registry(stack) as client:
        a, _, _ = client.put(base, Lineage(registered_by="canary-test"))
        b, _, _ = client.put(variant, Lineage(parent_id=a, registered_by="canary-test"))
        channel = _fresh_channel(client, a)
        client.promote(channel, a, expected=a, canary_registration_id=b, canary_weight=w)
    stub = pb_grpc.RuntimeStub(stack["runtime"].channel())
    served = [
        stub.Render(
            pb.RenderRequest(prompt="a photo of a bench", channel=channel, seed=5), timeout=60
        ).registration_id
        for _ in range(n)
    ]
    assert set(served) == {a, b}
    k = served.count(b)
    sd = math.sqrt(n * w * (1 - w))  # binomial standard deviation, 6.7 requests
    assert abs(k - n * w) <= 4.5 * sd, (
        f"canary served {k}/{n}, expected {n * w:.0f} ± {4.5 * sd:.0f}"
    )
    metrics = stack["runtime"].metrics_text()
    assert f'registration="{b}"' in metrics  # which registration served is recorded


def test_errors_are_named(stack) -> None:  # type: ignore[no-untyped-def]
    stub = pb_grpc.RuntimeStub(stack["runtime"].channel())
    with pytest.raises(grpc.RpcError) as exc:
        stub.Render(pb.RenderRequest(prompt="x", channel="never-promoted"), timeout=30)
    assert exc.value.code() is grpc.StatusCode.NOT_FOUND
    assert "never-promoted" in (exc.value.details() or "")
    with pytest.raises(grpc.RpcError) as exc:
        stub.Render(pb.RenderRequest(prompt="  ", channel="prod"), timeout=30)
    assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT
    assert "prompt" in (exc.value.details() or "")
    with pytest.raises(grpc.RpcError) as exc:
        stub.Render(pb.RenderRequest(prompt="a dog", registration_id="reg-nope"), timeout=30)
    assert exc.value.code() is grpc.StatusCode.NOT_FOUND


def test_render_by_registration_id_and_verify(stack, harnesses) -> None:  # type: ignore[no-untyped-def]
    base, variant = harnesses
    with _registry(stack) as client:
        b, hb, _ = client.put(variant, Lineage(registered_by="direct-test"))
    resp = _render(stack, prompt="a photo of a blue cup", registration_id=b, seed=1)
    assert resp.registration_id == b and resp.harness_id == hb and not resp.evidence
    if "verification" not in stack:
        pytest.skip("the verification service is not registered in `evoharness serve` yet")
    resp = _render(
        stack,
        prompt="a photo of a blue cup",
        registration_id=b,
        seed=1,
        options=pb.RenderOptions(verify=True),
    )
    assert resp.evidence and {e.status for e in resp.evidence} <= {"pass", "fail", "uncertain"}
    assert resp.cost.verifier_calls >= 1


def test_harness_middleware_uses_the_verifier(stack, harnesses) -> None:  # type: ignore[no-untyped-def]
    """What evolution validated is what is served: a harness with verify-and-repair
    middleware gets the verifier without the client asking for verification."""
    if "verification" not in stack:
        pytest.skip("the verification service is not registered in `evoharness serve` yet")
    base, _ = harnesses
    repairing = apply_patch(
        base,
        {
            "responsibility": "middleware",
            "ops": [
                {
                    "op": "replace",
                    "path": "/middleware/stages",
                    "value": [{"kind": "verify_and_repair", "repair_budget": 1}],
                }
            ],
        },
    )
    with _registry(stack) as client:
        rid, _, _ = client.put(repairing, Lineage(registered_by="middleware-test"))
    resp = _render(
        stack,
        prompt="a photo of three dogs",
        registration_id=rid,
        seed=2,
        options=pb.RenderOptions(include_trace=True),
    )
    assert resp.evidence and resp.cost.verifier_calls >= 1
    trace = json.loads(resp.trace_json)
    assert any(t.get("responsibility") == "middleware" for t in trace)


def test_harness_served_to_a_generator_with_fewer_capabilities_is_flagged(  # type: ignore[no-untyped-def]
    stack, repo_root, service_factory, s3_server, bucket
) -> None:
    """A registration validated on a layout-capable generator, served by a runtime whose
    generation service pins text-only capabilities: the render succeeds with the layout
    dropped (capability_drop), and is flagged (response field, trace record, metric)."""
    from evoharness.capabilities import FULL, GeneratorCapabilities
    from tests.fixtures.oip import metric_value

    s3, env = s3_config(s3_server, bucket)
    text_only = {"layout": "none", "max_references": 0}
    gen = service_factory(
        "generation", {"backend": "sim", "capabilities": text_only, "s3": s3}, env=env
    )
    runtime = service_factory(
        "runtime",
        {
            "runtime": {
                "registry_address": stack["registry"].address,
                "generation_address": gen.address,
                "resolve_ttl_seconds": 0,
            },
            "s3": s3,
        },
        env=env,
    )
    # the reference harness plans a layout for a spatial relation
    base = apply_patch(
        load_dir(repo_root / "harnesses" / "reference"), {"responsibility": "policy", "ops": SMALL}
    )
    with _registry(stack) as client:
        validated, _, _ = client.put(
            base,
            Lineage(registered_by="test", generator_id="sim/full@1", generator_capabilities=FULL),
        )
        unrecorded, _, _ = client.put(base, Lineage(registered_by="test-unrecorded"))
        reg, _ = client.get(validated)
    assert reg.generator_id == "sim/full@1" and reg.generator_capabilities == FULL
    stub = pb_grpc.RuntimeStub(runtime.channel())
    prompt = "a photo of a red cat to the left of a blue dog"
    opts = pb.RenderOptions(include_trace=True)
    resp = stub.Render(
        pb.RenderRequest(prompt=prompt, registration_id=validated, seed=3, options=opts),
        timeout=60,
    )
    lacking = GeneratorCapabilities(**text_only).shortfall(FULL)
    assert list(resp.capability_mismatch) == lacking and "layout" in lacking
    trace = json.loads(resp.trace_json)
    flag = next(t for t in trace if t["step"] == "capability_mismatch")
    assert flag["validated_on"] == "sim/full@1" and flag["lacking"] == lacking
    assert not resp.program.HasField("layout")  # dropped before the call, not refused
    assert "layout" in next(t for t in trace if t["step"] == "capability_drop")["dropped"]
    text = runtime.metrics_text()
    labels = {"registration": validated, "capability": "layout"}
    assert metric_value(text, "evoharness_runtime_capability_mismatch_total", labels) == 1.0
    # a registration that records no generator is served unflagged
    plain = stub.Render(
        pb.RenderRequest(prompt=prompt, registration_id=unrecorded, seed=3, options=opts),
        timeout=60,
    )
    assert list(plain.capability_mismatch) == []
    assert not any(t["step"] == "capability_mismatch" for t in json.loads(plain.trace_json))
    # the shared stack's generator (the default sim profile) serves a registration validated
    # on exactly its capabilities unflagged, with the layout it honours
    from evoharness.sim.profiles import DEFAULT_PROFILE, load_profile

    stack_caps = load_profile(DEFAULT_PROFILE).capabilities
    with _registry(stack) as client:
        same, _, _ = client.put(
            base,
            Lineage(
                registered_by="test-same",
                generator_id="sim/default@1",
                generator_capabilities=stack_caps,
            ),
        )
    full = _render(stack, prompt=prompt, registration_id=same, seed=3)
    assert list(full.capability_mismatch) == [] and full.program.HasField("layout")


def test_render_naming_no_target_names_both_fields(stack) -> None:  # type: ignore[no-untyped-def]
    """Issue 27 item 13b: an empty channel (or registration id) said only
    "registration_id: is empty"; the answer names both ways to say what to serve."""
    stub = pb_grpc.RuntimeStub(stack["runtime"].channel())
    for req in (
        pb.RenderRequest(prompt="a dog", channel=""),
        pb.RenderRequest(prompt="a dog", registration_id=""),
    ):
        assert req.WhichOneof("target") is not None  # the empty field is set, not absent
        with pytest.raises(grpc.RpcError) as exc:
            stub.Render(req, timeout=30)
        assert exc.value.code() is grpc.StatusCode.INVALID_ARGUMENT
        details = exc.value.details() or ""
        assert "channel" in details and "registration_id" in details, details
        assert "required" in details, details


@pytest.fixture(scope="module")
def slow_runtime(stack, service_factory, s3_server, bucket) -> ServiceHandle:  # type: ignore[no-untyped-def]
    """A runtime whose generator (``pattern_generator``) takes 5 s for a prompt saying
    "slow", so a 1 s client deadline always passes while the harness renders."""
    s3, env = s3_config(s3_server, bucket)
    backend = "tests.fixtures.services:pattern_generator"
    gen = service_factory(
        "generation", {"backend": backend, "sim": {"delay": 5.0}, "s3": s3}, env=env
    )
    cfg = {
        "registry_address": stack["registry"].address,
        "generation_address": gen.address,
        "resolve_ttl_seconds": 0,
    }
    return service_factory("runtime", {"runtime": cfg, "s3": s3}, env=env)  # type: ignore[no-any-return]


@pytest.mark.parametrize(
    ("which", "timeout"),
    [("runtime", 0.001), ("slow", 1.0)],
    ids=["before-the-handler", "while-rendering"],
)
def test_render_timed_out_at_the_client_is_counted(  # type: ignore[no-untyped-def]
    stack, harnesses, slow_runtime, which, timeout
) -> None:
    """Issue 27 item 13e: a Render whose client deadline passes is in
    ``evoharness_render_requests`` with the code the client saw (DEADLINE_EXCEEDED or
    CANCELLED), never as OK and never missing. With 1 ms the deadline has passed when a handler
    thread takes the call and the shared interceptor refuses it before ``Render`` runs (it was
    missing from the counter: only ``evoharness_grpc_requests`` had it); with 1 s it passes
    while the generator takes 5 s.

    With 1 ms a loaded client can give up before the call leaves it, and then no server can
    count it (CI saw this once): such a try is repeated on a fresh channel, up to 5 tries; a
    server that never counts a call that reached it still fails every try."""
    from tests.fixtures.oip import metric_value

    runtime = slow_runtime if which == "slow" else stack["runtime"]
    base, _ = harnesses
    name = "evoharness_render_requests_total"
    tries = 5 if which == "runtime" else 1
    counted: dict[str, float] = {}
    for _ in range(tries):
        with _registry(stack) as client:
            a, _, _ = client.put(base, Lineage(registered_by="deadline-test"))
            channel = _fresh_channel(client, a)
        stub = pb_grpc.RuntimeStub(runtime.channel())
        prompt = f"a slow photo of a red cup and a {uuid.uuid4().hex[:8]} sign"
        with pytest.raises(grpc.RpcError) as exc:
            stub.Render(pb.RenderRequest(prompt=prompt, channel=channel, seed=9), timeout=timeout)
        assert exc.value.code() is grpc.StatusCode.DEADLINE_EXCEEDED
        # the handler may still be running: a bounded wait for the count
        deadline = time.monotonic() + (30 if tries == 1 else 10)
        while time.monotonic() < deadline:
            text = runtime.metrics_text()
            counted = {
                code: metric_value(text, name, {"channel": channel, "code": code})
                for code in ("OK", "DEADLINE_EXCEEDED", "CANCELLED")
            }
            if any(counted.values()):
                break
            time.sleep(0.2)
        if any(counted.values()):
            break
    assert counted["OK"] == 0, counted
    assert counted["DEADLINE_EXCEEDED"] + counted["CANCELLED"] == 1, counted
