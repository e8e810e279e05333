"""Runtime service settings (``configs/runtime.yaml``; environment overrides
``EVOHARNESS_RUNTIME__REGISTRY_ADDRESS`` etc.)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field

from services.common.settings import ServiceSettings
from services.proposer.backends.openai_chat import ChatSettings
from services.runtime.sampling import TrafficSection
from services.runtime.search import SearchSection


class RuntimeSection(BaseModel):
    """Where the runtime's dependencies are and how it serves.

    ``registry_address`` / ``generation_address`` / ``verification_address``: ``host:port`` of
    the services (verification optional: without it ``options.verify`` and verifier-driven
    middleware are unavailable). ``default_channel``: served when a request names neither a
    channel nor a registration. ``resolve_ttl_seconds``: how long a resolved channel is
    reused before asking the registry again (0 = every request: a promotion changes the very
    next Render). ``url_expires_seconds``: default presigned-URL lifetime.
    ``memory_embeddings``: retrieve experience bundles with MiniLM embeddings
    (``harness_registry.memory_store``) instead of the runtime's bag-of-words fallback.
    ``canary_seed``: seed of the canary draw (None = OS entropy). ``harness_cache_size``:
    registrations kept compiled in memory (documents are immutable).
    ``traffic``: sampling of served requests for evolution from traffic (off by default;
    ``services.runtime.sampling.TrafficSection``).
    ``search``: the agent's search providers (``services.runtime.search.SearchSection``: the
    HTTP search API's endpoint and key, how the embedded knowledge base ranks).
    ``agent_llm``: the chat endpoint of harnesses whose agent says ``backend: llm`` (None:
    they fall back to the rule planner, traced). ``library_index``: the key, in the
    runtime's S3 bucket, of the reference library's index for the agent's ``image_search``
    (``evoharness.agent.library.library_from_index``; read at start; "" = no library;
    ``embedded``: the embedded reference library, ``evoharness.sim.reference_library``, is
    built into the runtime's bucket at start — a few seconds, skipped when its index is
    already there — and read).
    """

    model_config = ConfigDict(extra="forbid")

    registry_address: str = "127.0.0.1:50054"
    generation_address: str = "127.0.0.1:50051"
    verification_address: str = ""
    default_channel: str = "prod"
    resolve_ttl_seconds: float = Field(default=1.0, ge=0)
    url_expires_seconds: int = Field(default=3600, ge=1, le=7 * 24 * 3600)
    call_timeout_seconds: float = Field(default=120.0, gt=0)
    memory_embeddings: bool = False
    canary_seed: int | None = None
    harness_cache_size: int = Field(default=64, ge=1)
    traffic: TrafficSection = Field(default_factory=TrafficSection)
    search: SearchSection = Field(default_factory=SearchSection)
    agent_llm: ChatSettings | None = None
    library_index: str = ""


class RuntimeSettings(ServiceSettings):
    """Runtime service settings: ``server``, ``s3`` and ``runtime`` sections."""

    runtime: RuntimeSection = Field(default_factory=RuntimeSection)
