"""The openai-images backend through the generation service, against a local HTTP server
started here that speaks the OpenAI images API (``POST /v1/images/generations``)."""

from __future__ import annotations

import base64
import io
import json
import threading
import uuid
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import grpc
import pytest
from pydantic import SecretStr

from evoharness.program import GenerationParams, LayoutItem, Program
from services.common.errors import FailedPrecondition, InvalidField
from services.common.process import free_port
from services.generation.backends.openai_images import OpenAIImagesGenerator
from services.generation.client import GenerationClient
from services.generation.settings import OpenAIImagesSettings
from services.storage.s3 import S3ArtifactStore
from tests.fixtures.services import s3_config

API_KEY = "sk-test-images"
LAYOUT_ITEM = LayoutItem(label="bus", box=(0.1, 0.1, 0.9, 0.9))


def _multipart(ctype: str, raw: bytes) -> dict[str, Any]:
    """Form fields of a multipart body (``/images/edits``); files become a list under their
    field name of ``{"filename", "content_type", "sha256"}``."""
    import hashlib
    from email.parser import BytesParser
    from email.policy import HTTP

    msg = BytesParser(policy=HTTP).parsebytes(f"Content-Type: {ctype}\r\n\r\n".encode() + raw)
    out: dict[str, Any] = {}
    for part in msg.iter_parts():
        name = part.get_param("name", header="content-disposition")
        data = part.get_payload(decode=True) or b""
        if part.get_filename():
            out.setdefault(name, []).append(
                {
                    "filename": part.get_filename(),
                    "content_type": part.get_content_type(),
                    "sha256": hashlib.sha256(data).hexdigest(),
                }
            )
        else:
            out[name] = data.decode()
    return out


class ImagesAPI:
    """A local OpenAI-compatible images server: answers with a solid image whose colour
    comes from the request's seed (JPEG when the prompt says so), 401 for another key, 400
    for prompts containing "forbidden"; records every request."""

    def __init__(self) -> None:
        self.requests: list[dict[str, Any]] = []
        api = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: dict[str, Any]) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_POST(self) -> None:  # noqa: N802
                raw = self.rfile.read(int(self.headers["content-length"]))
                ctype = self.headers.get("content-type", "")
                body = _multipart(ctype, raw) if ctype.startswith("multipart/") else json.loads(raw)
                api.requests.append(
                    {"path": self.path, "auth": self.headers.get("authorization"), "body": body}
                )
                if self.path not in ("/v1/images/generations", "/v1/images/edits"):
                    return self._send(404, {"error": {"message": "no route", "type": "not_found"}})
                if self.headers.get("authorization") != f"Bearer {API_KEY}":
                    return self._send(
                        401,
                        {
                            "error": {
                                "message": "Incorrect API key",
                                "type": "invalid_request_error",
                                "code": "invalid_api_key",
                            }
                        },
                    )
                if "forbidden" in body["prompt"]:
                    return self._send(
                        400,
                        {
                            "error": {
                                "message": "Your request was rejected by the safety system",
                                "type": "invalid_request_error",
                                "code": "content_policy_violation",
                            }
                        },
                    )
                from PIL import Image

                w, h = (int(v) for v in body["size"].split("x"))
                seed = int(body.get("seed", 0))
                img = Image.new("RGB", (w, h), (seed * 37 % 256, seed * 91 % 256, 128))
                buf = io.BytesIO()
                img.save(buf, format="JPEG" if "jpeg" in body["prompt"] else "PNG")
                self._send(
                    200,
                    {
                        "created": 1,
                        "data": [{"b64_json": base64.b64encode(buf.getvalue()).decode()}],
                    },
                )

        self.port = free_port()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", self.port), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"


@pytest.fixture(scope="module")
def images_api() -> Iterator[ImagesAPI]:
    api = ImagesAPI()
    api.thread.start()
    try:
        yield api
    finally:
        api.httpd.shutdown()
        api.httpd.server_close()


@pytest.fixture(scope="module")
def bucket(s3_server: Any) -> str:
    name = f"oai-{uuid.uuid4().hex[:16]}"
    S3ArtifactStore.from_settings(s3_server.settings, bucket=name).ensure_bucket()
    return name


PARAMS = GenerationParams(steps=20, guidance_scale=6.5, width=128, height=64)


def test_openai_images_through_the_service(
    images_api: ImagesAPI, service_factory: Any, s3_server: Any, bucket: str
) -> None:
    s3, env = s3_config(s3_server, bucket)
    h = service_factory(
        "generation",
        {
            "backend": "openai-images",
            "openai": {"base_url": images_api.base_url, "model": "img-model-1", "max_retries": 0},
            "s3": s3,
        },
        env={**env, "EVOHARNESS_OPENAI__API_KEY": API_KEY},
    )
    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    program = Program(prompt="a jpeg of a red bus", negative_prompt="text", params=PARAMS, seed=5)
    n0 = len(images_api.requests)
    with GenerationClient(h.address, store) as client:
        assert client.generator_id == f"openai-images/img-model-1@127.0.0.1:{images_api.port}"
        caps = client.capabilities  # Describe: text only, negative prompt and seed sent
        assert (caps.layout, caps.max_references, caps.negative_prompt) == ("none", 0, True)
        with pytest.raises(FailedPrecondition, match="layout"):
            client.generate(program.model_copy(update={"layout": [LAYOUT_ITEM]}))
        img = client.generate(program)
        again = client.generate(program)
        with pytest.raises(InvalidField) as err:
            client.generate(Program(prompt="something forbidden", params=PARAMS))
    assert err.value.field == "program" and "safety system" in str(err.value)
    assert img.png.startswith(b"\x89PNG") and (img.width, img.height) == (128, 64)  # JPEG -> PNG
    assert again.cached and again.png == img.png
    sent = images_api.requests[n0:]
    assert len(sent) == 2  # the cached call never reached the API
    body = sent[0]["body"]
    assert sent[0]["auth"] == f"Bearer {API_KEY}"
    assert body["model"] == "img-model-1" and body["size"] == "128x64" and body["n"] == 1
    assert (
        body["seed"],
        body["negative_prompt"],
        body["num_inference_steps"],
        body["guidance_scale"],
    ) == (5, "text", 20, 6.5)
    assert body["response_format"] == "b64_json"


def _gen(base_url: str, key: str, **kw: Any) -> OpenAIImagesGenerator:
    """A generator for model ``m`` at ``base_url`` with ``key`` and settings ``kw``."""
    settings = OpenAIImagesSettings(base_url=base_url, model="m", api_key=SecretStr(key), **kw)
    return OpenAIImagesGenerator(settings)


def test_wrong_key_and_unreachable_endpoint(images_api: ImagesAPI) -> None:
    from services.common.errors import Unavailable

    with pytest.raises(PermissionError, match="API key refused"):
        _gen(images_api.base_url, "sk-wrong", max_retries=0).generate(
            Program(prompt="x", params=PARAMS)
        )
    dead = f"http://127.0.0.1:{free_port()}/v1"
    with pytest.raises(Unavailable):
        _gen(dead, API_KEY, max_retries=0, timeout=5).generate(Program(prompt="x", params=PARAMS))
    with pytest.raises(ValueError, match="openai.api_key"):
        _gen(images_api.base_url, "")


def test_missing_key_status_code(
    images_api: ImagesAPI, service_factory: Any, s3_server: Any, bucket: str
) -> None:
    """A service whose key is refused answers PERMISSION_DENIED, not INTERNAL."""
    s3, env = s3_config(s3_server, bucket)
    h = service_factory(
        "generation",
        {
            "backend": "openai-images",
            "openai": {"base_url": images_api.base_url, "max_retries": 0},
            "s3": s3,
        },
        env={**env, "EVOHARNESS_OPENAI__API_KEY": "sk-revoked"},
    )
    from services.protos import convert
    from services.protos.evoharness.v1 import generation_pb2, generation_pb2_grpc

    stub = generation_pb2_grpc.GenerationServiceStub(h.channel())
    with pytest.raises(grpc.RpcError) as err:
        stub.Generate(
            generation_pb2.GenerateRequest(
                program=convert.program_to_proto(Program(prompt="y", params=PARAMS))
            ),
            timeout=30,
        )
    assert err.value.code() == grpc.StatusCode.PERMISSION_DENIED


def test_reference_images_go_to_the_edits_endpoint_where_it_takes_them(
    images_api: ImagesAPI, service_factory: Any, s3_server: Any, bucket: str
) -> None:
    """``image_inputs: 2``: Describe says 2 references; a program with references is sent to
    ``/images/edits`` with the images (read from S3) in program order; three are refused."""
    from PIL import Image

    from evoharness.canonical import sha256_hex

    s3, env = s3_config(s3_server, bucket)
    h = service_factory(
        "generation",
        {
            "backend": "openai-images",
            "openai": {
                "base_url": images_api.base_url,
                "model": "img-edit-1",
                "max_retries": 0,
                "image_inputs": 2,
            },
            "s3": s3,
        },
        env={**env, "EVOHARNESS_OPENAI__API_KEY": API_KEY},
    )
    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    pngs = []
    for colour in ((200, 30, 30), (20, 40, 220)):
        buf = io.BytesIO()
        Image.new("RGB", (16, 16), colour).save(buf, format="PNG")
        pngs.append(buf.getvalue())
    refs = [store.put_content(p, prefix="refs", suffix=".png") for p in pngs]
    program = Program(prompt="the same cat, in a hat", params=PARAMS, seed=2, references=refs)
    n0 = len(images_api.requests)
    with GenerationClient(h.address, store) as client:
        assert client.capabilities.max_references == 2
        img = client.generate(program)
        with pytest.raises(FailedPrecondition, match="references"):
            client.generate(program.model_copy(update={"references": [*refs, refs[0]]}))
    assert img.png.startswith(b"\x89PNG")
    [sent] = images_api.requests[n0:]
    assert sent["path"] == "/v1/images/edits"
    assert sent["body"]["prompt"] == "the same cat, in a hat" and sent["body"]["size"] == "128x64"
    files = sent["body"]["image[]"]
    assert [f["sha256"] for f in files] == [sha256_hex(p) for p in pngs]
    assert {f["content_type"] for f in files} == {"image/png"}
