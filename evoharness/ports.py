"""Ports: the interfaces the domain core uses to reach generators, verifiers, proposers,
artifact storage and memory. Adapters live in ``services/`` (gRPC clients, S3) and in
``evoharness.sim`` (the embedded CPU world). The core never does network I/O itself.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

from evoharness.evidence import Evidence
from evoharness.program import ImageRef, Program
from evoharness.tasks.models import Constraint


@dataclass(frozen=True)
class GeneratedImage:
    """One generated image.

    ``png``: PNG bytes. ``generator_id``: the frozen generator's identity (model, revision,
    dtype, scheduler; from deployment config). ``seconds``: generator-seconds spent (wall time
    of the generator call, the unit of Δcost; 0 when ``cached``). ``manifest``: the scene the
    simulator actually drew (sim only, for tests; verifiers never read it). ``ref``: where the
    image is stored, when it is (S3). ``cached``: served from the content-addressed store.
    ``execution_key``: the execution's content address (``evoharness.program.execution_key``),
    set by whoever computed it (the execution cache, the generation service) and carried from
    there, never recomputed; "" when no cache stood in front of the generator.
    ``nominal_seconds``: what the image cost when it was generated (= ``seconds`` on a real
    call; the stored figure on a cache hit; 0 unknown).
    """

    png: bytes
    generator_id: str
    seconds: float
    manifest: dict[str, Any] | None = None
    width: int = 0
    height: int = 0
    ref: ImageRef | None = None
    cached: bool = False
    execution_key: str = ""
    nominal_seconds: float = 0.0


@runtime_checkable
class Generator(Protocol):
    """A frozen text-to-image generator. ``generate`` is deterministic per program.

    A generator that owns the execution cache itself (the generation service's client) sets a
    class attribute ``caches_executions = True`` and answers ``cached``, ``execution_key`` and
    ``nominal_seconds`` itself; the worker then keeps no cache in front of it
    (``evoharness.execution_cache``, docs/architecture.md)."""

    @property
    def generator_id(self) -> str: ...

    def generate(self, program: Program) -> GeneratedImage: ...


@runtime_checkable
class Verifier(Protocol):
    """Checks an image against constraints, from pixels only.

    ``png``: the image's PNG bytes (positional). Returns one ``Evidence`` per constraint, in
    the order given. ``prompt`` is informational (e.g. for a VLM). Constraints come from the
    task when evaluating, or from the policy extractor when the harness's own verify-and-repair
    middleware checks its output — never from the harness. (The gRPC adapter also offers
    ``verify_image`` / ``verify_ref``, which send an S3 reference instead of the bytes.)
    """

    def verify(
        self, png: bytes, /, constraints: Sequence[Constraint], prompt: str = ""
    ) -> list[Evidence]: ...


@runtime_checkable
class PolicyExtractor(Protocol):
    """Reads a prompt into the constraints it states (objects, counts, colours, relations,
    quoted text, negations). The harness uses this to read prompts; it sees only the prompt."""

    def extract(self, prompt: str) -> list[Constraint]: ...


@runtime_checkable
class ArtifactStore(Protocol):
    """Content-addressed blob storage (S3 in production)."""

    def put(self, key: str, data: bytes, content_type: str = "application/octet-stream") -> str:
        """Store ``data`` at ``key`` (idempotent); return its sha256 hex."""
        ...

    def get(self, key: str) -> bytes: ...

    def exists(self, key: str) -> bool: ...


def store_fetch(store: ArtifactStore) -> Callable[[ImageRef], bytes]:
    """A reader of reference images for an in-process generator: a reference that names
    ``store``'s bucket is read from ``store``, one without a bucket from the file at its key
    (as the generator reads it by itself); another bucket raises ``ValueError`` naming both.
    The generator checks ``sha256``."""

    def fetch(ref: ImageRef) -> bytes:
        if not ref.bucket:
            with open(ref.key, "rb") as fh:
                return fh.read()
        bucket = getattr(store, "bucket", "")
        if ref.bucket != bucket:
            raise ValueError(f"bucket {ref.bucket!r} is not the store's bucket {bucket!r}")
        return store.get(ref.key)

    return fetch


@dataclass
class MemoryHit:
    """A retrieved experience bundle and its similarity (cosine, -1..1)."""

    bundle: dict[str, Any]
    similarity: float


@runtime_checkable
class MemoryStore(Protocol):
    """Retrieves experience bundles for a prompt by source-prompt similarity."""

    def retrieve(self, prompt: str, top_k: int, min_similarity: float) -> list[MemoryHit]: ...


@dataclass
class Cost:
    """Cost of one request: generator-seconds, generator calls, verifier calls, LLM tokens."""

    generator_seconds: float = 0.0
    generator_calls: int = 0
    verifier_calls: int = 0
    llm_calls: int = 0
    llm_prompt_tokens: int = 0
    llm_completion_tokens: int = 0
    extra: dict[str, float] = field(default_factory=dict)

    def add(self, other: Cost) -> Cost:
        """Sum of two costs (a new object)."""
        return Cost(
            generator_seconds=self.generator_seconds + other.generator_seconds,
            generator_calls=self.generator_calls + other.generator_calls,
            verifier_calls=self.verifier_calls + other.verifier_calls,
            llm_calls=self.llm_calls + other.llm_calls,
            llm_prompt_tokens=self.llm_prompt_tokens + other.llm_prompt_tokens,
            llm_completion_tokens=self.llm_completion_tokens + other.llm_completion_tokens,
            extra={
                k: self.extra.get(k, 0.0) + other.extra.get(k, 0.0)
                for k in set(self.extra) | set(other.extra)
            },
        )
