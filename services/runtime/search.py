"""The agent's search providers as the runtime service builds them (``runtime.search``).

``HttpSearchProvider`` is the ``evoharness.agent.search.SearchProvider`` over an HTTP search
API: ``GET <endpoint>?q=<query>&count=<top_k>`` with ``Authorization: Bearer <key>`` (the key
from the environment variable ``api_key_env``, or ``api_key`` in the settings), answering
JSON ``{"results": [{"title"?, "snippet" | "content" | "description" | "text", "url"?,
"score"?}]}`` — the common shape of web-search APIs' result lists. Its answer is untrusted:
results without text are skipped, text is cut to ``max_chars``; a transport error or a non-2xx
status raises ``SearchError`` (the agent loop records it as a ``tool_error`` observation).

``build_providers`` — used by the runtime service (``runtime.search``) and by the evolution
worker (``workflows.backends.TracePorts``, ``worker.search``) alike, so a harness is evolved
against the search it is served with — returns the providers a harness's ``search`` tool may
name: ``embedded`` always (the offline knowledge base, ranked with MiniLM embeddings when the
packaged model loads — ``embeddings: auto`` or ``minilm`` —, TF-IDF otherwise, or always with
``tfidf``) and ``http`` when an endpoint is configured. The embedded base is built on first use, so a
runtime whose harnesses never search never loads the model.
"""

from __future__ import annotations

import logging
import os
import threading
from typing import Any, Literal

import httpx
from pydantic import BaseModel, ConfigDict, Field, SecretStr

from evoharness.agent.search import EmbeddedKnowledgeBase, SearchHit, SearchProvider

log = logging.getLogger(__name__)


class SearchError(RuntimeError):
    """The search API failed (transport error, non-2xx status, or an answer that is not
    the documented JSON)."""


class SearchSection(BaseModel):
    """``runtime.search`` settings. ``endpoint``: the HTTP search API's URL ("" = no ``http``
    provider); ``api_key_env``: the environment variable holding its key (``api_key`` wins
    when set); ``timeout_s``: per call; ``cost_per_call``: cost units per call of either
    provider (``http`` and ``embedded``) against the agent's budget; ``max_chars``: text kept per result; ``embeddings``: how the embedded
    knowledge base ranks (``auto`` = MiniLM when it loads, else TF-IDF)."""

    model_config = ConfigDict(extra="forbid")

    endpoint: str = ""
    api_key_env: str = "EVOHARNESS_SEARCH_API_KEY"
    api_key: SecretStr = SecretStr("")
    timeout_s: float = Field(default=10.0, gt=0)
    cost_per_call: float = Field(default=1.0, ge=0)
    max_chars: int = Field(default=500, ge=16)
    embeddings: Literal["auto", "minilm", "tfidf"] = "auto"


class HttpSearchProvider:
    """``SearchProvider`` over an HTTP search API (see the module docstring)."""

    def __init__(self, settings: SearchSection, client: httpx.Client | None = None) -> None:
        if not settings.endpoint:
            raise ValueError("runtime.search.endpoint is empty: no HTTP search API configured")
        self.settings = settings
        self.name = f"http:{httpx.URL(settings.endpoint).host}"
        self.cost_per_call = settings.cost_per_call
        key = settings.api_key.get_secret_value() or os.environ.get(settings.api_key_env, "")
        headers = {"accept": "application/json"}
        if key:
            headers["authorization"] = f"Bearer {key}"
        self._client = client or httpx.Client(timeout=settings.timeout_s, headers=headers)

    def search(self, query: str, top_k: int) -> list[SearchHit]:
        """At most ``top_k`` hits for ``query``, in the API's order. Raises ``ValueError``
        for an empty query and ``SearchError`` when the API fails."""
        if not query or not query.strip():
            raise ValueError("search query is empty")
        try:
            resp = self._client.get(self.settings.endpoint, params={"q": query, "count": top_k})
        except httpx.HTTPError as exc:
            raise SearchError(f"search API {self.name}: {type(exc).__name__}: {exc}") from None
        if resp.status_code // 100 != 2:
            raise SearchError(f"search API {self.name} answered HTTP {resp.status_code}")
        try:
            body: Any = resp.json()
        except ValueError:
            raise SearchError(
                f"search API {self.name} answered something that is not JSON"
            ) from None
        results = body.get("results") if isinstance(body, dict) else None
        if not isinstance(results, list):
            raise SearchError(f"search API {self.name}: the answer has no 'results' list")
        hits: list[SearchHit] = []
        for i, r in enumerate(results):
            if not isinstance(r, dict):
                continue
            text = next(
                (
                    r[k]
                    for k in ("snippet", "content", "description", "text")
                    if isinstance(r.get(k), str) and r[k].strip()
                ),
                None,
            )
            if text is None:
                continue
            score = r.get("score")
            hits.append(
                SearchHit(
                    text=text.strip()[: self.settings.max_chars],
                    score=float(score)
                    if isinstance(score, int | float) and not isinstance(score, bool)
                    else 1.0 / (i + 1),
                    source=str(r.get("url") or self.name)[:300],
                )
            )
            if len(hits) >= top_k:
                break
        return hits

    def close(self) -> None:
        """Close the HTTP client."""
        self._client.close()


class LazyEmbeddedKnowledgeBase:
    """The embedded knowledge base, built on the first search (``SearchProvider``).
    ``embeddings``: ``auto`` tries MiniLM and falls back to TF-IDF (logged), ``minilm``
    requires it (the first search raises when it does not load), ``tfidf`` never loads it.
    ``cost_per_call``: cost units per search against the agent's budget
    (``SearchSection.cost_per_call``), the same before and after the base is built."""

    def __init__(
        self,
        embeddings: Literal["auto", "minilm", "tfidf"] = "auto",
        *,
        cost_per_call: float = 1.0,
    ) -> None:
        self.embeddings = embeddings
        self.cost_per_call = cost_per_call
        self._kb: EmbeddedKnowledgeBase | None = None
        self._lock = threading.Lock()

    @property
    def name(self) -> str:
        """The scorer once built (``embedded:minilm`` / ``embedded:tfidf``)."""
        return self._kb.name if self._kb is not None else f"embedded:{self.embeddings}"

    def _build(self) -> EmbeddedKnowledgeBase:
        with self._lock:
            if self._kb is None:
                embed = None
                if self.embeddings != "tfidf":
                    try:
                        from harness_registry.memory_store import default_embedder

                        embed = default_embedder().embed  # the process's one model
                    except Exception as exc:  # noqa: BLE001 - optional model
                        if self.embeddings == "minilm":
                            raise
                        log.warning("search: MiniLM unavailable (%s); ranking with TF-IDF", exc)
                self._kb = EmbeddedKnowledgeBase(embed=embed, cost_per_call=self.cost_per_call)
            return self._kb

    def search(self, query: str, top_k: int) -> list[SearchHit]:
        """``EmbeddedKnowledgeBase.search`` on the base built on first use."""
        return self._build().search(query, top_k)


def build_providers(settings: SearchSection) -> dict[str, SearchProvider]:
    """The providers a ``search`` tool's ``provider`` may name (see the module docstring)."""
    providers: dict[str, SearchProvider] = {
        "embedded": LazyEmbeddedKnowledgeBase(
            settings.embeddings, cost_per_call=settings.cost_per_call
        )
    }
    if settings.endpoint:
        providers["http"] = HttpSearchProvider(settings)
    return providers


__all__ = [
    "HttpSearchProvider",
    "LazyEmbeddedKnowledgeBase",
    "SearchError",
    "SearchSection",
    "build_providers",
]
