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
        assert [(t["name"], t["datatype"]) for t in meta["inputs"]] == [("program", "BYTES")]
        assert [(t["name"], t["datatype"]) for t in meta["outputs"]] == [
            ("image", "BYTES"),
            ("generator_id", "BYTES"),
            ("generator_seconds", "FP64"),
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
