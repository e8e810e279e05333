"""The KServe backend through a real ``kserve.ModelServer`` (``kserve_predictor``) on loopback:
generation over the Open Inference Protocol v2 gRPC with ``OIPGenerator``, byte-for-byte equal
to in-process generation, plus error paths and metrics (``OIPServerContract``)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import tritonclient.grpc as grpcclient
from tritonclient.utils import InferenceServerException

from tests.conftest import require
from tests.fixtures.oip import OIPServer, OIPServerContract, raw_infer, sample_programs

pytestmark = pytest.mark.timeout(300)


class TestKServeModelServer(OIPServerContract):
    backend = "kserve"

    @pytest.fixture(scope="class")
    @classmethod
    def server(cls, kserve_server: OIPServer) -> OIPServer:
        return kserve_server

    def test_malformed_program_has_grpc_status_invalid_argument(self, server: OIPServer) -> None:
        with pytest.raises(InferenceServerException) as info:
            raw_infer(server.grpc_url, server.model_name, b"{not json")
        assert info.value.status() == "StatusCode.INVALID_ARGUMENT"
        assert info.value.message().startswith("program: not valid JSON")

    def test_model_metadata_declares_the_tensor_contract(self, server: OIPServer) -> None:
        client = grpcclient.InferenceServerClient(server.grpc_url)
        try:
            meta = client.get_model_metadata(server.model_name, as_json=True)
        finally:
            client.close()
        assert [(t["name"], t["datatype"]) for t in meta["inputs"]] == [
            ("program", "BYTES"),
            ("layout", "BYTES"),
            ("references", "BYTES"),
        ]
        assert [(t["name"], t["datatype"]) for t in meta["outputs"]] == [
            ("image", "BYTES"),
            ("generator_id", "BYTES"),
            ("generator_seconds", "FP64"),
            ("capabilities", "BYTES"),
        ]

    def test_outputs_travel_as_raw_binary(self, server: OIPServer) -> None:
        program = sample_programs()[0]
        result = raw_infer(server.grpc_url, server.model_name, program.canonical())
        response = result.get_response()
        assert len(response.raw_output_contents) == 3  # image, generator_id, seconds: binary
        assert response.outputs[0].contents.bytes_contents == []
        png = result.as_numpy("image").reshape(-1)[0]
        assert png.startswith(b"\x89PNG")
        assert result.as_numpy("generator_seconds").dtype == np.float64


def _unknown_fields(doc: Any, schema: dict[str, Any], path: str = "") -> list[str]:
    """Paths in ``doc`` that the CRD's structural schema does not declare (what
    ``kubectl apply`` with field validation Strict would reject)."""
    found: list[str] = []
    if isinstance(doc, dict) and "properties" in schema:
        for key, value in doc.items():
            sub = schema["properties"].get(key)
            if sub is None:
                if not schema.get("x-kubernetes-preserve-unknown-fields") and not schema.get(
                    "additionalProperties"
                ):
                    found.append(f"{path}/{key}")
                continue
            found += _unknown_fields(value, sub, f"{path}/{key}")
    elif isinstance(doc, list) and "items" in schema:
        for i, item in enumerate(doc):
            found += _unknown_fields(item, schema["items"], f"{path}/{i}")
    return found


@pytest.mark.parametrize(
    "path", ["deploy/kserve/inferenceservice.yaml", "deploy/triton/inferenceservice.yaml"]
)
def test_example_inferenceservice_matches_the_crd_schema(
    path: str, repo_root: Path, shared_dir: Path
) -> None:
    import jsonschema
    import yaml

    crd = shared_dir / "schemas/kserve/inferenceservice.crd-schema.json"
    require(crd.is_file(), f"KServe CRD schema {crd} is missing")
    schema = json.loads(crd.read_text())["versions"]["v1beta1"]
    doc = yaml.safe_load((repo_root / path).read_text())
    assert doc["apiVersion"] == "serving.kserve.io/v1beta1" and doc["kind"] == "InferenceService"
    errors = [e.message for e in jsonschema.Draft202012Validator(schema).iter_errors(doc)]
    assert errors == []
    assert _unknown_fields(doc, schema) == []


def test_generation_service_answers_unavailable_when_the_model_server_is_down(
    service_factory: Any, s3_server: Any
) -> None:
    """backend: kserve with a pinned generator id and nothing listening at the OIP url: the
    service starts, and Generate answers UNAVAILABLE naming the server (no stack trace)."""
    import uuid

    import grpc

    from services.common.process import free_port
    from services.protos import convert
    from services.protos.evoharness.v1 import generation_pb2, generation_pb2_grpc
    from services.storage.s3 import S3ArtifactStore
    from tests.fixtures.services import s3_config

    bucket = f"oip-down-{uuid.uuid4().hex[:12]}"
    S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket).ensure_bucket()
    s3, env = s3_config(s3_server, bucket)
    dead = f"127.0.0.1:{free_port()}"
    handle = service_factory(
        "generation",
        {
            "backend": "kserve",
            "generator_id": "pinned/model@rev:float16:euler",
            "oip": {"url": dead, "model_name": "evoharness-generator", "timeout": 5},
            "s3": s3,
        },
        env=env,
    )
    stub = generation_pb2_grpc.GenerationServiceStub(handle.channel())
    request = generation_pb2.GenerateRequest(program=convert.program_to_proto(sample_programs()[0]))
    with pytest.raises(grpc.RpcError) as info:
        stub.Generate(request, timeout=30)
    assert info.value.code() == grpc.StatusCode.UNAVAILABLE
    assert dead in info.value.details() and "Traceback" not in info.value.details()


def test_predictor_refuses_several_workers_clearly(repo_root: Path) -> None:
    """``--workers 2`` crashed at start (``cannot pickle '_thread.lock'``); it is refused as
    bad usage, saying how to scale instead (issue 14 item 20). A subprocess: kserve's protos
    clash with tritonclient's in one interpreter."""
    import os
    import subprocess
    import sys

    mod = "services.generation.backends.kserve_predictor"
    proc = subprocess.run(
        [sys.executable, "-m", mod, "--workers", "2", "--backend", "sim"],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=repo_root,
        env={**os.environ, "PYTHONPATH": str(repo_root)},
    )
    assert proc.returncode == 2, proc.stderr
    assert "--workers 2" in proc.stderr and "replicas" in proc.stderr
    assert "Traceback" not in proc.stderr
