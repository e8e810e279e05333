"""``evoharness.v1.Runtime``: ``Render(prompt, channel | registration_id, seed?, options)``.

For each request the service

1. resolves the channel through the registry (``ChannelCache``: reused for
   ``resolve_ttl_seconds``, then re-resolved by version, so a promotion changes what is served
   without a restart), and draws the canary: a channel with ``canary_weight`` w serves its
   canary registration to a share w of requests (one uniform draw per request);
2. loads the registration's harness document (immutable, cached by registration id);
3. runs ``evoharness.runtime.HarnessRuntime`` — the same code the evolution activities run —
   with the generation service as ``Generator`` and, when configured and needed (``options.
   verify`` or verifier-driven middleware in the harness), the verification service as
   ``Verifier``;
4. returns the image reference and a presigned GET URL, the program, the trace (when
   ``options.include_trace``), the evidence, the cost and the registration that served.

The runtime compiles against the deployed generator's capabilities (``Describe``): what it
cannot honour is dropped before the call (a ``capability_drop`` trace record). A registration
validated on a generator that honours more than the deployed one is served, but flagged, not
silently degraded: ``capability_mismatch`` in the response and a trace record of that step,
``evoharness_runtime_capability_mismatch_total{registration, capability}`` and a warning log.

Every request is counted in ``evoharness_render_requests{channel, registration, code}`` and
timed in ``evoharness_render_latency_seconds{channel}``.

Channels listed in ``runtime.traffic.channels`` have a share of their requests sampled into the
artifact store with their verification evidence (``services.runtime.sampling``), off the
request path: sampling never slows or fails a Render.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc

from evoharness.capabilities import GeneratorCapabilities
from evoharness.evidence import EvidenceStatus
from evoharness.harness.schema import BestOfNStage, Harness, VerifyAndRepairStage
from evoharness.ports import GeneratedImage, MemoryStore, Verifier
from evoharness.program import ImageRef, Program
from evoharness.runtime import HarnessRuntime
from evoharness.runtime.tool_backends import ToolBackends
from evoharness.sim import reference_library
from harness_registry import errors as rerr
from services.common import metrics
from services.common.errors import InvalidField, NotFound, Unavailable
from services.common.server import (
    RunningServer,
    ServiceRegistration,
    build_server,
    remaining_seconds,
)
from services.generation.client import GenerationClient, image_from_response
from services.proposer.backends.agent_chat import ChatAgentBackend
from services.protos import convert
from services.protos.evoharness.v1 import runtime_pb2 as pb
from services.protos.evoharness.v1 import runtime_pb2_grpc as pb_grpc
from services.registry.client import RegistryClient, Resolved
from services.runtime.sampling import TrafficSampler
from services.runtime.search import build_providers
from services.runtime.settings import RuntimeSettings
from services.storage.s3 import S3ArtifactStore

log = logging.getLogger("evoharness.runtime")
SERVICE_NAME = "evoharness.v1.Runtime"
#: Seeds are drawn in [0, 2**31) when a request gives none (sha256 of the prompt).
SEED_SPACE = 2**31


def default_seed(prompt: str) -> int:
    """The seed of a request without one: the first 8 bytes of sha256(prompt) mod 2**31, so
    repeating a prompt repeats its image (and hits the content-addressed cache)."""
    return int.from_bytes(hashlib.sha256(prompt.encode("utf-8")).digest()[:8], "big") % SEED_SPACE


def _registry_call(fn: Callable[[], Any]) -> Any:
    try:
        return fn()
    except rerr.NotFound as exc:
        raise NotFound(str(exc)) from exc
    except rerr.InvalidArgument as exc:
        raise InvalidField("channel", str(exc)) from exc
    except rerr.RegistryError as exc:
        raise Unavailable(f"registry: {exc}") from exc


class ChannelCache:
    """Resolved channels, reused for ``ttl`` seconds (0 = resolve on every request)."""

    def __init__(self, registry: RegistryClient, ttl: float) -> None:
        self.registry = registry
        self.ttl = ttl
        self._lock = threading.Lock()
        self._entries: dict[str, tuple[float, Resolved]] = {}

    def get(self, channel: str) -> Resolved:
        """The channel's current state (from cache when fresh)."""
        now = time.monotonic()
        with self._lock:
            hit = self._entries.get(channel)
        if hit is not None and now - hit[0] < self.ttl:
            return hit[1]
        res: Resolved = _registry_call(lambda: self.registry.resolve(channel, with_document=False))
        with self._lock:
            old = self._entries.get(channel)
            if old is not None and old[1].version != res.version:
                log.info(
                    "channel %s moved: version %d -> %d (%s -> %s)",
                    channel,
                    old[1].version,
                    res.version,
                    old[1].registration_id,
                    res.registration_id,
                )
            self._entries[channel] = (now, res)
        return res


@dataclass
class Loaded:
    """A registration ready to serve: its harness and memory store."""

    registration_id: str
    harness_id: str
    harness: Harness
    memory: MemoryStore | None
    needs_verifier: bool
    validated_id: str = ""
    validated_capabilities: GeneratorCapabilities | None = None


class RefGenerator:
    """``Generator`` over the generation service that leaves the image in S3 (no download):
    the served response needs only the reference. Used when no verifier runs."""

    def __init__(self, client: GenerationClient) -> None:
        self.client = client

    @property
    def generator_id(self) -> str:
        return self.client.generator_id

    @property
    def capabilities(self) -> GeneratorCapabilities:
        """The deployed generator's (``Describe``): the runtime drops what it cannot honour."""
        return self.client.capabilities

    def generate(self, program: Program) -> GeneratedImage:
        resp = self.client.generate_ref(program, include_png=False, timeout=remaining_seconds())
        return image_from_response(resp)


class RefTracker:
    """Remembers the S3 reference of each image the generator returned (by the sha256 of its
    PNG, bounded LRU), so the verifier can send the reference instead of the bytes."""

    def __init__(self, size: int = 1024) -> None:
        self._refs: OrderedDict[str, ImageRef] = OrderedDict()
        self._size = size
        self._lock = threading.Lock()

    def add(self, png: bytes, ref: ImageRef | None) -> None:
        if ref is None:
            return
        with self._lock:
            self._refs[hashlib.sha256(png).hexdigest()] = ref
            while len(self._refs) > self._size:
                self._refs.popitem(last=False)

    def find(self, png: bytes) -> ImageRef | None:
        with self._lock:
            return self._refs.get(hashlib.sha256(png).hexdigest())


class TrackingGenerator:
    """``Generator`` over the generation service that downloads the PNG (the verifier needs
    it) and records its reference in ``tracker``."""

    def __init__(self, client: GenerationClient, tracker: RefTracker) -> None:
        self.client = client
        self.tracker = tracker

    @property
    def generator_id(self) -> str:
        return self.client.generator_id

    @property
    def capabilities(self) -> GeneratorCapabilities:
        """The deployed generator's (``Describe``)."""
        return self.client.capabilities

    def generate(self, program: Program) -> GeneratedImage:
        image = self.client.generate(program)
        self.tracker.add(image.png, image.ref)
        return image


class RefVerifier:
    """``Verifier`` over the verification service that verifies by S3 reference when the
    image came from ``TrackingGenerator`` (no re-upload), else sends the bytes."""

    def __init__(self, client: Any, tracker: RefTracker) -> None:
        self.client = client
        self.tracker = tracker

    def verify(self, png: bytes, constraints: Any, prompt: str = "") -> Any:
        ref = self.tracker.find(png)
        if ref is not None:
            return self.client.verify_ref(ref, constraints, prompt)
        return self.client.verify(png, constraints, prompt)


class RuntimeServicer(pb_grpc.RuntimeServicer):
    """The Runtime servicer. Dependencies are injected so tests and the benchmark can build
    it in-process; ``build`` wires them from settings."""

    def __init__(
        self,
        settings: RuntimeSettings,
        registry: RegistryClient,
        generation: GenerationClient,
        store: S3ArtifactStore | None,
        verifier: Verifier | None = None,
        memory_factory: Callable[[Harness], MemoryStore | None] | None = None,
    ) -> None:
        self.settings = settings
        self.cfg = settings.runtime
        self.registry = registry
        self.generation = generation
        self.ref_generator = RefGenerator(generation)
        tracker = RefTracker()
        self.tracking_generator = TrackingGenerator(generation, tracker)
        self.store = store
        self.verifier = RefVerifier(verifier, tracker) if verifier is not None else None
        self.memory_factory = memory_factory
        self.channels = ChannelCache(registry, self.cfg.resolve_ttl_seconds)
        self._rng = random.Random(self.cfg.canary_seed)
        self._rng_lock = threading.Lock()
        self._loaded: OrderedDict[str, Loaded] = OrderedDict()
        self._loaded_lock = threading.Lock()
        self._stores: dict[str, S3ArtifactStore] = {}
        self.sampler = TrafficSampler(self.cfg.traffic, store)
        self.sampler.start()
        #: The agent's ports (issue 32): search providers by name and the LLM backend.
        self.search_providers = build_providers(self.cfg.search)
        self.agent_backend = (
            ChatAgentBackend(self.cfg.agent_llm) if self.cfg.agent_llm is not None else None
        )
        self.reference_library = None
        if self.cfg.library_index:
            if store is None:
                raise ValueError("runtime.library_index is set but the runtime has no S3 store")
            self.reference_library = reference_library.open_library(store, self.cfg.library_index)

    # ---------------------------------------------------------------------- helpers
    def _draw(self) -> float:
        with self._rng_lock:
            return self._rng.random()

    def load(self, registration_id: str) -> Loaded:
        """The registration's harness (cached; documents are immutable)."""
        with self._loaded_lock:
            hit = self._loaded.get(registration_id)
            if hit is not None:
                self._loaded.move_to_end(registration_id)
                return hit
        reg, harness = _registry_call(lambda: self.registry.get(registration_id))
        memory = self.memory_factory(harness) if self.memory_factory else None
        needs = any(
            isinstance(s, VerifyAndRepairStage | BestOfNStage) for s in harness.middleware.stages
        )
        loaded = Loaded(
            reg.registration_id,
            reg.harness_id,
            harness,
            memory,
            needs,
            reg.generator_id,
            reg.generator_capabilities,
        )
        with self._loaded_lock:
            self._loaded[registration_id] = loaded
            while len(self._loaded) > self.cfg.harness_cache_size:
                self._loaded.popitem(last=False)
        return loaded

    def mismatch(self, loaded: Loaded) -> list[str]:
        """What the deployed generator lacks of the one ``loaded`` was validated on
        (``GeneratorCapabilities.shortfall``); empty when none was recorded."""
        if loaded.validated_capabilities is None:
            return []
        return self.generation.capabilities.shortfall(loaded.validated_capabilities)

    def _presign(self, ref: ImageRef, expires: int) -> str:
        if self.store is None:
            return ""
        store = self.store
        if ref.bucket and ref.bucket != store.bucket:
            store = self._stores.setdefault(
                ref.bucket, S3ArtifactStore(store.client, ref.bucket, store.endpoint)
            )
        return store.presigned_get(ref.key, expires)

    def _sample(self, channel: str, prompt: str, loaded: Loaded, result: Any) -> None:
        """Offer a served request to the traffic sampler; sampling never fails a Render."""
        try:
            self.sampler.offer(channel, prompt, loaded.registration_id, loaded.harness_id, result)
        except Exception:  # noqa: BLE001 - counted and logged, never raised to the client
            metrics.TRAFFIC_DROPPED.labels(channel, "error").inc()
            log.exception("traffic sampling failed for a Render on %s", channel)

    # ---------------------------------------------------------------------------- RPC
    def _channel_of(self, request: pb.RenderRequest) -> str:
        """The channel a Render request is served from: its ``channel``, the configured
        ``default_channel`` when it names neither a channel nor a registration, else ""."""
        target = request.WhichOneof("target")
        if target is None:
            return self.cfg.default_channel
        return request.channel if target == "channel" else ""

    def refused(self, method: str, request: Any, code: grpc.StatusCode) -> None:
        """Count a Render the shared interceptor refused before ``Render`` ran (a deadline
        that passed while it waited for a handler thread, a bad token) in
        ``evoharness_render_requests``, registration ``none`` (``ServiceRegistration.on_refused``)."""
        if method == "Render" and isinstance(request, pb.RenderRequest):
            label = self._channel_of(request) or "direct"
            metrics.RENDER_REQUESTS.labels(label, "none", code.name).inc()

    def Render(self, request: pb.RenderRequest, context: grpc.ServicerContext) -> pb.RenderResponse:
        start = time.perf_counter()
        channel = self._channel_of(request)
        label = channel or "direct"
        served = ""
        code = "OK"
        try:
            if not request.prompt.strip():
                raise InvalidField("prompt", "is empty")
            if channel:
                state = self.channels.get(channel)
                served = state.pick(self._draw())
            else:
                served = request.registration_id
                if not served:
                    raise InvalidField(
                        "channel / registration_id",
                        "a channel or a registration_id is required (this request sets one of "
                        "them empty; a request that sets neither is served from "
                        "runtime.default_channel)",
                    )
            loaded = self.load(served)
            opts = request.options
            want_verify = opts.verify or loaded.needs_verifier
            if opts.verify and self.verifier is None:
                raise InvalidField(
                    "options.verify", "this runtime has no verification service configured"
                )
            verifier = self.verifier if want_verify else None
            generator = self.tracking_generator if verifier is not None else self.ref_generator
            rt = HarnessRuntime(
                loaded.harness,
                generator,
                verifier,
                memory=loaded.memory,
                tools=ToolBackends(
                    search_providers=self.search_providers,
                    agent_backend=self.agent_backend,
                    reference_library=self.reference_library,
                ),
            )
            seed = request.seed if request.HasField("seed") else default_seed(request.prompt)
            if seed >= SEED_SPACE * 2:
                raise InvalidField("seed", f"{seed} is too large (max {SEED_SPACE * 2 - 1})")
            refs = [
                convert.image_ref_from_proto(r, f"options.references[{i}]")
                for i, r in enumerate(opts.references)
            ]
            result = rt.run(request.prompt, int(seed), refs or None)
            if result.nothing_checked:
                metrics.RENDER_NOTHING_CHECKED.labels(label, loaded.registration_id).inc()
            types = {c.constraint_id: c.type.value for c in result.constraints}
            for e in result.evidence:
                if e.status is EvidenceStatus.uncertain:
                    metrics.RENDER_UNCERTAIN_CONSTRAINTS.labels(
                        label, types.get(e.constraint_id, "unknown")
                    ).inc()
            lacking = self.mismatch(loaded)
            if lacking:
                for name in lacking:
                    metrics.CAPABILITY_MISMATCH.labels(loaded.registration_id, name).inc()
                log.warning(
                    "registration %s was validated on %s but is served by %s, which lacks %s",
                    loaded.registration_id,
                    loaded.validated_id or "an unnamed generator",
                    self.generation.generator_id,
                    ", ".join(lacking),
                )
                result.trace.append(
                    {
                        "responsibility": "runtime",
                        "step": "capability_mismatch",
                        "registration_id": loaded.registration_id,
                        "validated_on": loaded.validated_id,
                        "served_by": self.generation.generator_id,
                        "lacking": lacking,
                    }
                )
            image = result.image
            if image.ref is None:
                raise Unavailable("generation service returned no image reference")
            expires = int(opts.url_expires_seconds or self.cfg.url_expires_seconds)
            resp = pb.RenderResponse(
                image=convert.image_ref_to_proto(image.ref),
                image_url=self._presign(image.ref, expires),
                program=convert.program_to_proto(result.program),
                trace_json=json.dumps(result.trace, default=str) if opts.include_trace else "",
                evidence=[convert.evidence_to_proto(e) for e in result.evidence],
                cost=convert.cost_to_proto(result.cost),
                registration_id=loaded.registration_id,
                harness_id=loaded.harness_id,
                generator_id=image.generator_id,
                cached=image.cached,
                capability_mismatch=lacking,
            )
            if channel:
                self._sample(channel, request.prompt, loaded, result)
            return resp
        except Exception as exc:
            from services.common.server import status_for

            code = status_for(exc).name
            raise
        finally:
            if code == "OK" and not context.is_active():  # the client gave up meanwhile
                left = context.time_remaining()
                code = "DEADLINE_EXCEEDED" if left is not None and left <= 0 else "CANCELLED"
            metrics.RENDER_REQUESTS.labels(label, served or "none", code).inc()
            metrics.RENDER_LATENCY.labels(label).observe(time.perf_counter() - start)


#: The settings class ``evoharness serve runtime`` loads.
Settings = RuntimeSettings


def make_servicer(settings: RuntimeSettings) -> RuntimeServicer:
    """Wire the servicer's clients from ``settings``."""
    cfg = settings.runtime
    # outgoing calls carry the deployment's token and trust ``client.tls_ca_file``
    opts = settings.client.channel_options(settings.server.auth_token)
    token, ca = opts["token"], opts["tls_ca_file"]
    store = S3ArtifactStore.from_settings(settings.s3)
    registry = RegistryClient(cfg.registry_address, token=token or "", tls_ca_file=ca, timeout=30.0)
    generation = GenerationClient(
        cfg.generation_address, store, token=token, tls_ca_file=ca, timeout=cfg.call_timeout_seconds
    )
    verifier: Verifier | None = None
    if cfg.verification_address:
        from services.verification.client import VerificationClient

        verifier = VerificationClient(
            cfg.verification_address,
            None,
            token=token,
            tls_ca_file=ca,
            timeout=cfg.call_timeout_seconds,
        )
    memory_factory = None
    if cfg.memory_embeddings:
        from harness_registry.memory_store import EmbeddingMemoryStore

        def memory_factory(h: Harness) -> MemoryStore | None:
            if not h.memory.enabled or not h.memory.bundles:
                return None
            return EmbeddingMemoryStore.from_harness(h)

    return RuntimeServicer(settings, registry, generation, store, verifier, memory_factory)


def build(settings: RuntimeSettings, servicer: RuntimeServicer | None = None) -> RunningServer:
    """Start the runtime service (returns at once; ``stop()`` the result)."""
    servicer = servicer or make_servicer(settings)
    running = build_server(
        settings.server,
        [
            ServiceRegistration(
                servicer,
                pb_grpc.add_RuntimeServicer_to_server,
                SERVICE_NAME,
                on_refused=servicer.refused,
            )
        ],
    )
    running.on_stop.append(servicer.sampler.close)
    return running


def serve(settings: RuntimeSettings) -> None:
    """Run the runtime service until SIGTERM/SIGINT (``evoharness serve runtime``)."""
    from services.common.server import serve_until_signal

    serve_until_signal(build(settings))


if __name__ == "__main__":  # python -m services.runtime.server --config ...
    import sys

    from services.common.main import service_main

    sys.exit(service_main("runtime", Settings, serve))
