"""VerificationService through real gRPC channels, a real S3 server (SeaweedFS) and the
``evoharness serve verification`` process: the sim inspector's evidence over gRPC equals the
in-process result; refs vs uploads; status codes; extraction for prompts without metadata;
metrics."""

from __future__ import annotations

import grpc
import pytest

from evoharness.ports import GeneratedImage
from evoharness.program import ImageRef, LayoutItem, Program
from evoharness.sim import SimGenerator, SimInspector
from evoharness.tasks.models import Constraint
from services.common.errors import InvalidField, NotFound
from services.protos.evoharness.v1 import verification_pb2, verification_pb2_grpc
from services.storage.s3 import S3ArtifactStore, content_key
from services.verification.client import VerificationClient
from tests.fixtures.services import s3_config

BUCKET = "verify-sim"

PROGRAMS = [
    Program(prompt="a photo of two cats and a red dog", seed=3),
    Program(
        prompt="a photo of a blue car left of a yellow bus",
        seed=7,
        layout=[
            LayoutItem(label="car", box=(0.05, 0.4, 0.35, 0.7), color="blue"),
            LayoutItem(label="bus", box=(0.6, 0.35, 0.95, 0.75), color="yellow"),
        ],
    ),
    Program(prompt='a photo of a sign that says "open"', seed=1),
]
CONSTRAINTS = [
    [
        Constraint(constraint_id="c0", type="count", subject="cat", min_count=2, max_count=2),
        Constraint(constraint_id="c1", type="color", subject="dog", value="red"),
        Constraint(constraint_id="c2", type="negative", subject="car"),
    ],
    [
        Constraint(
            constraint_id="p0", type="position", subject="car", relation="left of", value="bus"
        ),
        Constraint(constraint_id="p1", type="color", subject="bus", value="yellow"),
        Constraint(constraint_id="p2", type="object", subject="giraffe"),
    ],
    [Constraint(constraint_id="t0", type="text", subject="text", value="open")],
]


@pytest.fixture(scope="module")
def sim_service(service_factory, s3_server):
    s3, env = s3_config(s3_server, BUCKET)
    return service_factory("verification", {"backend": "sim", "s3": s3}, env=env)


@pytest.fixture(scope="module")
def store(s3_server):
    st = S3ArtifactStore.from_settings(s3_server.settings, bucket=BUCKET)
    st.ensure_bucket()
    return st


@pytest.fixture(scope="module")
def images():
    gen = SimGenerator()
    return [gen.generate(p).png for p in PROGRAMS]


def test_sim_evidence_over_grpc_equals_in_process(sim_service, store, images):
    local = SimInspector()
    with VerificationClient(sim_service.address, store) as client:
        for png, cs in zip(images, CONSTRAINTS, strict=True):
            remote = client.verify(png, cs, prompt="")
            assert remote == local.verify(png, cs)
            assert client.last_response.verifier_id == "sim"
    # the decisive verdicts are real: the layout-drawn relation holds, the giraffe is absent
    with VerificationClient(sim_service.address, store) as client:
        ev = client.verify(images[1], CONSTRAINTS[1])
    assert [e.status.value for e in ev][0] == "pass" and ev[2].status.value == "fail"


def test_ref_is_used_without_upload_and_inline_png_works(sim_service, store):
    png = SimGenerator().generate(Program(prompt="a photo of two cats", seed=99)).png
    ref = store.put_content(png, prefix="executions", suffix=".png")
    image = GeneratedImage(png=png, generator_id="sim", seconds=0.0, ref=ref)
    cs = CONSTRAINTS[0][:1]
    with VerificationClient(sim_service.address, store) as client:
        by_ref = client.verify_image(image, cs)
    assert not store.exists(content_key(png, "verify", ".png"))  # sent by reference
    with VerificationClient(sim_service.address, None) as inline:
        assert inline.verify(png, cs) == by_ref
    with VerificationClient(sim_service.address, store) as client:
        assert client.verify(png, cs) == by_ref
    assert store.exists(content_key(png, "verify", ".png"))  # no ref: uploaded


def test_status_codes_name_the_field(sim_service, store, images):
    with VerificationClient(sim_service.address, store) as client:
        with pytest.raises(NotFound):
            client.verify_ref(ImageRef(bucket=BUCKET, key="nope/missing.png"), CONSTRAINTS[0])
        with pytest.raises(InvalidField) as exc:
            client.verify_ref(ImageRef(bucket="other-bucket", key="x.png"), CONSTRAINTS[0])
        assert exc.value.field == "image.bucket"
    stub = verification_pb2_grpc.VerificationServiceStub(sim_service.channel())
    bad = verification_pb2.VerifyRequest(png=images[0])
    bad.constraints.add(constraint_id="x", type="count", subject="cat")  # no min_count
    with pytest.raises(grpc.RpcError) as err:
        stub.Verify(bad, timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT
    assert err.value.details().startswith("constraints.0")
    with pytest.raises(grpc.RpcError) as err:
        stub.Verify(verification_pb2.VerifyRequest(), timeout=30)
    assert err.value.code() == grpc.StatusCode.INVALID_ARGUMENT and "image" in err.value.details()


def test_prompt_without_metadata_is_read_by_the_extractor(sim_service, images):
    stub = verification_pb2_grpc.VerificationServiceStub(sim_service.channel())
    resp = stub.Verify(
        verification_pb2.VerifyRequest(png=images[0], prompt="a photo of two cats and a red dog"),
        timeout=60,
    )
    kinds = [(c.type, c.subject) for c in resp.constraints]
    assert ("count", "cat") in kinds and ("color", "dog") in kinds
    assert [e.constraint_id for e in resp.evidence] == [c.constraint_id for c in resp.constraints]


def test_metrics_count_verdicts_and_latency(sim_service, images):
    with VerificationClient(sim_service.address, None) as client:
        client.verify(images[2], CONSTRAINTS[2])
    text = sim_service.metrics_text()
    assert 'evoharness_verifier_latency_seconds_count{backend="sim"}' in text
    assert 'evoharness_verdicts_total{backend="sim",status=' in text


def test_sim_detector_service_errs_per_image_and_carries_quality(
    service_factory, s3_server, store, images
):
    """The local stack's default backend: ``sim-detector`` over gRPC gives the in-process
    ``SimDetector``'s verdicts (a float ``quality`` threshold crosses the wire), and reports
    its parameter digest as the verifier id (the client learns it before any verdict)."""
    from evoharness.sim import SimDetector

    s3, env = s3_config(s3_server, BUCKET)
    svc = service_factory("verification", {"backend": "sim-detector", "s3": s3}, env=env)
    local = SimDetector()
    quality = Constraint(constraint_id="q", type="quality", subject="image", value=0.45)
    with VerificationClient(svc.address, store) as client:
        assert client.verifier_id == local.verifier_id  # probed, nothing judged
        for png, cs in zip(images, CONSTRAINTS, strict=True):
            remote = client.verify(png, [*cs, quality])
            assert remote == local.verify(png, [*cs, quality])
            assert all(e.decided_by == "sim-detector" for e in remote)
            # the threshold crossed the wire: the verdict is the score against 0.45 (layout
            # images of the v2 world may look pasted and score low; that is the score's job)
            assert remote[-1].passed == (remote[-1].observed["score"] >= 0.45)
        assert client.last_response.constraints[-1].value_float == pytest.approx(0.45)
