"""``BundleMemory``: the embedded ``evoharness.ports.MemoryStore`` over a harness's own
experience bundles, used by the runtime when no registry-backed memory store is given."""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable
from typing import Any

from evoharness.ports import MemoryHit
from evoharness.tasks.models import normalize_prompt

_WORDS = re.compile(r"[a-z0-9]+")


def _bag(text: str) -> Counter[str]:
    return Counter(_WORDS.findall(normalize_prompt(text)))


def bag_of_words_cosine(a: str, b: str) -> float:
    """Cosine similarity (0..1) of the word-count vectors of two normalised texts."""
    va, vb = _bag(a), _bag(b)
    dot = sum(va[w] * vb[w] for w in va.keys() & vb.keys())
    na = math.sqrt(sum(v * v for v in va.values()))
    nb = math.sqrt(sum(v * v for v in vb.values()))
    return 0.0 if na == 0 or nb == 0 else dot / (na * nb)


class BundleMemory:
    """``MemoryStore`` over in-harness experience bundles (``Memory.bundles``).

    Similarity: bag-of-words cosine between the prompt and the bundle's
    ``retrieval_key["source_prompt_summary"]`` (else ``["trigger"]``). Hits are sorted by
    similarity (desc) then bundle id; deterministic."""

    def __init__(self, bundles: Iterable[dict[str, Any]]) -> None:
        self._bundles = list(bundles)

    def retrieve(self, prompt: str, top_k: int, min_similarity: float) -> list[MemoryHit]:
        """Up to ``top_k`` bundles with similarity >= ``min_similarity``."""
        hits = []
        for b in self._bundles:
            key = b.get("retrieval_key") or {}
            text = key.get("source_prompt_summary") or key.get("trigger") or ""
            sim = bag_of_words_cosine(prompt, text)
            if sim >= min_similarity:
                hits.append(MemoryHit(bundle=b, similarity=round(sim, 6)))
        hits.sort(key=lambda h: (-h.similarity, str(h.bundle.get("bundle_id", ""))))
        return hits[:top_k]


__all__ = ["BundleMemory", "bag_of_words_cosine"]
