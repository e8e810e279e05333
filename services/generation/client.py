"""``GenerationClient``: the ``evoharness.ports.Generator`` adapter over the generation
service. Workflows and the runtime use it; it returns ``GeneratedImage`` with the PNG fetched
from S3 (by the reference the service returned, sha256-checked), the reference and the
``cached`` flag."""

from __future__ import annotations

import json
from typing import Any

import grpc

from evoharness.capabilities import FULL, GeneratorCapabilities
from evoharness.ports import GeneratedImage
from evoharness.program import ImageRef, Program
from services.common.channel import error_from_rpc, open_channel
from services.protos import convert
from services.protos.evoharness.v1 import generation_pb2, generation_pb2_grpc
from services.storage.s3 import S3ArtifactStore


def nominal_seconds(resp: generation_pb2.GenerateResponse) -> float:
    """What the execution of ``resp`` cost when it was generated (generator-seconds): the
    service's ``nominal_seconds`` (the recorded figure on a cache hit); from a service older
    than that field, ``generator_seconds`` (0 on a hit: unknown)."""
    if resp.HasField("nominal_seconds"):
        return float(resp.nominal_seconds)
    return float(resp.generator_seconds)


def image_ref(resp: generation_pb2.GenerateResponse) -> ImageRef:
    """Where the service stored the image of ``resp``."""
    return ImageRef(bucket=resp.image.bucket, key=resp.image.key, sha256=resp.image.sha256)


def image_from_response(resp: generation_pb2.GenerateResponse, png: bytes = b"") -> GeneratedImage:
    """The ``GeneratedImage`` of a Generate answer, carrying what the service computed and
    recorded: the execution key, the ``cached`` flag and ``nominal_seconds``. ``png``: the
    image bytes when the caller has them (empty when only the reference is needed)."""
    manifest: dict[str, Any] | None = json.loads(resp.manifest_json) if resp.manifest_json else None
    return GeneratedImage(
        png=png,
        generator_id=resp.generator_id,
        seconds=resp.generator_seconds,
        manifest=manifest,
        width=resp.width,
        height=resp.height,
        ref=image_ref(resp),
        cached=resp.cached,
        execution_key=resp.execution_key,
        nominal_seconds=nominal_seconds(resp),
    )


class GenerationClient:
    """``Generator`` backed by a remote ``GenerationService``, which owns the execution cache
    (``caches_executions``: callers keep no cache or record of their own in front of it).

    Args:
        address: ``host:port`` of the service.
        store: the artifact store the service writes to (the PNG is read from it); None
            makes ``generate`` ask for the PNG inline instead.
        token: bearer token (``EVOHARNESS_SERVER__AUTH_TOKEN`` of the service).
        tls_ca_file: CA of the service's certificate (enables TLS).
        timeout: per-call deadline in seconds (propagated to the service).
        backend: expected backend name; the service refuses a mismatch (INVALID_ARGUMENT).
        include_manifest: ask for the simulator's scene manifest (tests).
        channel: an existing channel (then address/token/TLS are ignored).

    Errors: ``services.common.errors.InvalidField`` (bad program; ``.field`` names it),
    ``NotFound``, ``TimeoutError``, ``Unavailable``, ``ResourceExhausted``, ``PermissionError``
    (see ``services.common.channel.error_from_rpc``); store errors from ``S3ArtifactStore``.
    Thread-safe.
    """

    #: The service computes each execution's key and keeps its one record
    #: (``evoharness.execution_cache``); ``workflows.backends.CachingGenerator`` asks it
    #: directly instead of caching in front of it.
    caches_executions = True

    def __init__(
        self,
        address: str,
        store: S3ArtifactStore | None = None,
        *,
        token: str | None = None,
        tls_ca_file: str | None = None,
        timeout: float = 300.0,
        backend: str = "",
        include_manifest: bool = False,
        channel: grpc.Channel | None = None,
    ) -> None:
        self.address = address
        self.store = store
        self.timeout = timeout
        self.backend = backend
        self.include_manifest = include_manifest
        self._own_channel = channel is None
        self._channel = channel or open_channel(address, token=token, tls_ca_file=tls_ca_file)
        self._stub = generation_pb2_grpc.GenerationServiceStub(self._channel)
        self._describe: generation_pb2.DescribeResponse | None = None

    def describe(self) -> generation_pb2.DescribeResponse:
        """The deployed backend, generator id, parameter bounds and capabilities (cached after
        one call)."""
        if self._describe is None:
            try:
                self._describe = self._stub.Describe(
                    generation_pb2.DescribeRequest(), timeout=self.timeout
                )
            except grpc.RpcError as err:
                raise error_from_rpc(err, f"generation service {self.address}") from err
        return self._describe

    @property
    def generator_id(self) -> str:
        """The deployed generator's id (from the service's deployment config)."""
        return str(self.describe().generator_id)

    @property
    def capabilities(self) -> GeneratorCapabilities:
        """What the deployed generator honours (``Describe``); the runtime reads this to drop
        conditioning the generator would refuse. A service too old to report them: ``FULL``."""
        d = self.describe()
        if not d.HasField("capabilities"):
            return FULL
        return convert.capabilities_from_proto(d.capabilities, "capabilities")

    def generate_ref(
        self, program: Program, include_png: bool = False, timeout: float | None = None
    ) -> generation_pb2.GenerateResponse:
        """Run ``program`` and return the raw response (image reference, execution key,
        cached flag, generator-seconds) without downloading the image."""
        req = generation_pb2.GenerateRequest(
            program=convert.program_to_proto(program),
            backend=self.backend,
            include_png=include_png,
            include_manifest=self.include_manifest,
        )
        try:
            return self._stub.Generate(req, timeout=timeout or self.timeout)
        except grpc.RpcError as err:
            raise error_from_rpc(err, f"generation service {self.address}") from err

    def generate(self, program: Program) -> GeneratedImage:
        """Generate (or fetch from the content-addressed store) the image of ``program``."""
        resp = self.generate_ref(program, include_png=self.store is None)
        png = resp.png if self.store is None else self.store.get_ref(image_ref(resp))
        return image_from_response(resp, png)

    def close(self) -> None:
        """Close the channel (when this client opened it)."""
        if self._own_channel:
            self._channel.close()

    def __enter__(self) -> GenerationClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
