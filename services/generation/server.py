"""``evoharness.v1.GenerationService``: the deployed generator behind one gRPC port.

Generate(program):
1. validates the program (INVALID_ARGUMENT naming the field), the deployment's size bounds and
   the requested backend; refuses conditioning the deployed generator cannot honour
   (FAILED_PRECONDITION naming the capability, see ``Describe``'s ``capabilities``); checks
   reference images exist (NOT_FOUND naming the field);
2. computes ``execution_key(program, generator_id)`` and, holding that key's single-flight lock,
   looks its record up in the one execution cache (``evoharness.execution_cache``:
   ``<key_prefix>/<key[:2]>/<key>.json`` beside the ``.png``); when it exists the image is
   returned with ``cached=true``, ``generator_seconds=0`` and ``nominal_seconds``, the cost
   recorded when it was generated;
3. otherwise generates, refuses PNGs over ``max_image_bytes`` (RESOURCE_EXHAUSTED), checks
   the caller's deadline (DEADLINE_EXCEEDED, nothing written), then writes the PNG and the
   execution's record (the record last: its existence marks a complete execution).

This service owns the execution cache of every generator it serves: the worker asks it and
keeps no record of its own (``workflows.backends.CachingGenerator``). An execution stored before
records existed (the record in the PNG's S3 metadata) is served as a hit and gets its record
on first use (``_legacy_record``), so an upgrade regenerates nothing.

Run: ``evoharness serve generation --config configs/generation.yaml``.
"""

from __future__ import annotations

import base64
import dataclasses
import io
import json
import re
import threading
import time
import zlib

import grpc
from PIL import Image

from evoharness.canonical import canonical_json
from evoharness.capabilities import GeneratorCapabilities, UnsupportedConditioning
from evoharness.execution_cache import ExecutionCache, ExecutionRecord
from evoharness.ports import GeneratedImage, Generator
from evoharness.program import PARAM_BOUNDS, Program, execution_key
from services.common import metrics
from services.common.errors import FailedPrecondition, InvalidField, NotFound, ResourceExhausted
from services.common.limits import check_reference_size
from services.common.server import (
    RunningServer,
    ServiceRegistration,
    build_server,
    check_deadline,
    serve_until_signal,
    status_for,
)
from services.generation.backends import (
    BACKENDS,
    UnknownBackend,
    build_backend,
    declared_capabilities,
)
from services.generation.settings import GenerationSettings
from services.protos import convert
from services.protos.evoharness.v1 import common_pb2, generation_pb2, generation_pb2_grpc
from services.storage.s3 import ArtifactNotFound, S3ArtifactStore

Settings = GenerationSettings
SERVICE_NAME = "evoharness.v1.GenerationService"
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
_FIELD_MSG = re.compile(r"^([A-Za-z_][\w\[\].]*)(?: \([^)]*\))?: (.*)$", re.DOTALL)


def png_size(png: bytes) -> tuple[int, int]:
    """(width, height) of PNG bytes; ``ValueError`` when they are not a PNG."""
    if not png.startswith(PNG_SIGNATURE):
        raise ValueError(f"not a PNG (first bytes {png[:8]!r})")
    with Image.open(io.BytesIO(png)) as im:
        return int(im.width), int(im.height)


#: Status codes a Generate call can fail with; their error counters exist from the start.
ERROR_CODES = (
    "INVALID_ARGUMENT",
    "NOT_FOUND",
    "DEADLINE_EXCEEDED",
    "RESOURCE_EXHAUSTED",
    "FAILED_PRECONDITION",
    "UNAVAILABLE",
    "INTERNAL",
)


class GenerationServicer(generation_pb2_grpc.GenerationServiceServicer):
    """Serves one ``Generator`` and content-addresses its executions in ``store``.

    ``backend``: the deployment's backend name (metrics label, checked against requests).
    ``generator_id``: fixed by deployment config; defaults to the generator's own id.
    ``capabilities``: pinned by config, else the generator's (``declared_capabilities``).
    Thread-safe: ``max_concurrent`` generations run at once (default 1: most generators,
    e.g. a torch pipeline, are not re-entrant).
    """

    def __init__(
        self,
        settings: GenerationSettings,
        generator: Generator,
        store: S3ArtifactStore,
        max_concurrent: int = 1,
    ) -> None:
        self.settings = settings
        self.generator = generator
        self.store = store
        self.backend = settings.backend if settings.backend in BACKENDS else "custom"
        self.generator_id = settings.generator_id or generator.generator_id
        self._capabilities: GeneratorCapabilities | None = None
        self._gate = threading.BoundedSemaphore(max_concurrent)
        self.cache = ExecutionCache(store, settings.key_prefix)
        # Counters start at zero (a series absent until the first error shows as "no data"
        # on the dashboard and in rate() alerts).
        for code in ERROR_CODES:
            metrics.GENERATION_ERRORS.labels(self.backend, code)

    @property
    def capabilities(self) -> GeneratorCapabilities:
        """What the deployed generator honours (``declared_capabilities``), resolved on first
        use: a remote model server is asked only once it is needed, so the service starts
        while it is down."""
        if self._capabilities is None:
            self._capabilities = declared_capabilities(self.settings, self.generator)
        return self._capabilities

    # --- validation -----------------------------------------------------------------------
    def _check_request(self, request: generation_pb2.GenerateRequest) -> Program:
        if request.backend and request.backend != self.settings.backend:
            known = "" if request.backend in BACKENDS else f" (known: {sorted(BACKENDS)})"
            raise InvalidField(
                "backend",
                f"{request.backend!r} is not served here{known}; this deployment serves "
                f"{self.settings.backend!r} (the deployment, not the caller, picks the generator)",
            )
        if not request.HasField("program"):
            raise InvalidField("program", "is missing")
        program = convert.program_from_proto(request.program)
        for name, cap in (("width", self.settings.max_width), ("height", self.settings.max_height)):
            v = getattr(program.params, name)
            if v > cap:
                raise InvalidField(
                    f"program.params.{name}",
                    f"{v} exceeds this deployment's maximum {cap} (PARAM_BOUNDS {PARAM_BOUNDS[name]})",
                )
        missing = self.capabilities.unsupported(program)
        if missing:
            raise FailedPrecondition(
                f"program: generator {self.generator_id} cannot honour {', '.join(missing)} "
                f"(capabilities: {self.capabilities.model_dump_json()}); drop it before the "
                "call (the runtime does, with a capability_drop trace record)"
            )
        for i, ref in enumerate(program.references or []):
            if ref.bucket and ref.bucket != self.store.bucket:
                raise InvalidField(
                    f"program.references.{i}.bucket",
                    f"{ref.bucket!r} is not the artifact bucket {self.store.bucket!r}",
                )
            try:
                size = self.store.stat(ref.key).size
            except ArtifactNotFound:
                raise NotFound(
                    f"program.references.{i}: s3://{self.store.bucket}/{ref.key} does not exist"
                ) from None
            check_reference_size(size, f"program.references.{i}", self.settings.server.limits)
        return program

    # --- RPCs -----------------------------------------------------------------------------
    def Describe(
        self, request: generation_pb2.DescribeRequest, context: grpc.ServicerContext
    ) -> generation_pb2.DescribeResponse:
        bounds = dict(PARAM_BOUNDS)
        bounds["width"] = (bounds["width"][0], min(bounds["width"][1], self.settings.max_width))
        bounds["height"] = (bounds["height"][0], min(bounds["height"][1], self.settings.max_height))
        return generation_pb2.DescribeResponse(
            backend=self.settings.backend,
            generator_id=self.generator_id,
            param_bounds={
                k: generation_pb2.ParamBound(min=float(lo), max=float(hi))
                for k, (lo, hi) in bounds.items()
            },
            bucket=self.store.bucket,
            max_image_bytes=self.settings.max_image_bytes,
            capabilities=convert.capabilities_to_proto(self.capabilities),
        )

    def Generate(
        self, request: generation_pb2.GenerateRequest, context: grpc.ServicerContext
    ) -> generation_pb2.GenerateResponse:
        t0 = time.perf_counter()
        code = "OK"
        try:
            return self._generate(request)
        except Exception as exc:
            code = status_for(exc).name
            metrics.GENERATION_ERRORS.labels(self.backend, code).inc()
            raise
        finally:
            metrics.GENERATION_REQUESTS.labels(self.backend, code).inc()
            metrics.GENERATION_LATENCY.labels(self.backend).observe(time.perf_counter() - t0)

    def _generate(self, request: generation_pb2.GenerateRequest) -> generation_pb2.GenerateResponse:
        program = self._check_request(request)
        key = execution_key(program, self.generator_id)
        with self.cache.single_flight(key):
            rec = self.cache.lookup(key) or self._legacy_record(key)
            if rec is not None:
                metrics.CACHE_HITS.inc()
                return self._response(request, rec, cached=True)
            metrics.CACHE_MISSES.inc()
            return self._generate_and_record(request, program, key)

    def _legacy_record(self, key: str) -> ExecutionRecord | None:
        """An execution this service stored before execution records existed: its PNG at the
        image key carried the record in S3 user metadata (``execution-key``, ``width``,
        ``height``, ``generator-seconds``; the manifest zlib+base64 in ``manifest-z``, or in
        the object at the record's key when ``manifest=1``). Writes its record once, so the
        next lookup finds it, and returns it; None when no such PNG is stored (one HEAD, on a
        miss only)."""
        try:
            info = self.store.stat(self.cache.image_key(key))
        except ArtifactNotFound:
            return None
        meta = info.metadata
        if meta.get("execution-key") != key or "generator-seconds" not in meta:
            return None
        manifest = None
        if "manifest-z" in meta:
            manifest = json.loads(zlib.decompress(base64.b64decode(meta["manifest-z"])))
        elif meta.get("manifest") == "1":
            manifest = json.loads(self.store.get(self.cache.record_key(key)))
        return self.cache.write_record(
            ExecutionRecord(
                execution_key=key,
                key=info.key,
                sha256=info.sha256,
                generator_id=self.generator_id,
                seconds=float(meta["generator-seconds"]),
                width=int(meta.get("width", 0)),
                height=int(meta.get("height", 0)),
                manifest=manifest,
            )
        )

    def _response(
        self,
        request: generation_pb2.GenerateRequest,
        rec: ExecutionRecord,
        *,
        cached: bool,
        png: bytes = b"",
    ) -> generation_pb2.GenerateResponse:
        """The answer for execution ``rec`` (``generator_seconds`` 0 when ``cached``; the PNG
        read back only when asked for and not at hand)."""
        resp = generation_pb2.GenerateResponse(
            image=common_pb2.ImageRef(bucket=self.store.bucket, key=rec.key, sha256=rec.sha256),
            generator_id=rec.generator_id,
            generator_seconds=0.0 if cached else rec.seconds,
            nominal_seconds=rec.seconds,
            cached=cached,
            execution_key=rec.execution_key,
            width=rec.width,
            height=rec.height,
            backend=self.settings.backend,
        )
        if request.include_png:
            resp.png = png or self.store.get(rec.key)
        if request.include_manifest and rec.manifest is not None:
            resp.manifest_json = canonical_json(rec.manifest).decode()
        return resp

    def _generate_and_record(
        self, request: generation_pb2.GenerateRequest, program: Program, key: str
    ) -> generation_pb2.GenerateResponse:
        check_deadline("generate")
        with self._gate:
            check_deadline("generate")
            image = self._run_generator(program)
        png = image.png
        if len(png) > self.settings.max_image_bytes:
            raise ResourceExhausted(
                f"image: the generated PNG has {len(png)} bytes, over max_image_bytes="
                f"{self.settings.max_image_bytes}; nothing was stored"
            )
        try:
            width, height = png_size(png)
        except ValueError as exc:
            raise RuntimeError(f"backend {self.settings.backend} returned {exc}") from exc
        check_deadline("store image")  # an abandoned request writes nothing
        # the image first, then the execution's one record (its existence marks a complete
        # execution): evoharness.execution_cache
        rec = self.cache.record(
            key,
            png,
            generator_id=self.generator_id,
            seconds=image.seconds,
            width=width,
            height=height,
            manifest=image.manifest,
            program=program.model_dump(mode="json", exclude_none=True),
        )
        metrics.IMAGES_GENERATED.labels(self.backend).inc()
        metrics.GENERATOR_SECONDS.labels(self.backend).inc(image.seconds)
        return self._response(request, rec, cached=False, png=png)

    def _run_generator(self, program: Program) -> GeneratedImage:
        t = time.perf_counter()
        try:
            image = self.generator.generate(program)
        except InvalidField:
            raise
        except UnsupportedConditioning as exc:
            raise FailedPrecondition(
                f"program needs {', '.join(exc.missing)}, which generator {exc.generator_id} "
                "does not honour (capabilities); nothing was generated"
            ) from exc
        except ValueError as exc:
            # backend messages name program fields ("layout[0].label: ..."); prefix "program."
            m = _FIELD_MSG.match(str(exc))
            if m and m.group(1).split("[")[0].split(".")[0] in Program.model_fields:
                raise InvalidField(f"program.{m.group(1)}", m.group(2)) from exc
            raise
        if not image.seconds:
            # backends that do not time themselves: wall time of the call
            image = dataclasses.replace(image, seconds=time.perf_counter() - t)
        return image


def build(settings: GenerationSettings, generator: Generator | None = None) -> RunningServer:
    """Start the generation service in this process (tests, bench); returns the running
    server. ``generator`` overrides the configured backend (in-process tests only).
    Raises ``services.storage.s3.StoreUnavailable``/``StoreAuthError`` when S3 is unreachable
    or refuses the credentials, ``UnknownBackend`` for a bad ``backend`` setting."""
    if generator is None and settings.backend not in BACKENDS and ":" not in settings.backend:
        # a typo in the config is reported before any connection to S3 is tried
        raise UnknownBackend(
            f"backend: {settings.backend!r} is not one of {sorted(BACKENDS)} or module:attr"
        )
    store = S3ArtifactStore.from_settings(settings.s3)
    store.ensure_bucket()
    gen = generator or build_backend(settings)
    servicer = GenerationServicer(settings, gen, store, settings.max_concurrent_generations)
    return build_server(
        settings.server,
        [
            ServiceRegistration(
                servicer, generation_pb2_grpc.add_GenerationServiceServicer_to_server, SERVICE_NAME
            )
        ],
    )


def serve(settings: GenerationSettings) -> None:
    """Run the generation service until SIGTERM/SIGINT (``evoharness serve generation``)."""
    serve_until_signal(build(settings))
