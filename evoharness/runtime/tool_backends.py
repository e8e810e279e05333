"""Runtime-only ports: the hooks tools call when a harness configures them.

Adapters (an LLM layout planner, a reference-image index, a knowledge base) live outside the
core; the runtime calls them through these protocols and never does I/O itself. When a tool
is configured but its port is not given, the runtime falls back (deterministic planner) or
skips the tool, and says so in the trace.

``BundleMemory`` is the embedded ``evoharness.ports.MemoryStore`` over a harness's own
experience bundles, used when no registry-backed memory store is given.
"""

from __future__ import annotations

import math
import re
from collections import Counter
from collections.abc import Iterable, Sequence
from typing import Any, Protocol, runtime_checkable

from evoharness.ports import MemoryHit
from evoharness.program import ImageRef, LayoutItem
from evoharness.tasks.models import Constraint, normalize_prompt


@runtime_checkable
class LayoutPlanner(Protocol):
    """Plans layout boxes for a prompt (e.g. an LLM planner, LayoutGPT-style)."""

    def plan(
        self, prompt: str, constraints: Sequence[Constraint], margin: float
    ) -> list[LayoutItem]: ...


@runtime_checkable
class ReferenceRetriever(Protocol):
    """Finds up to ``top_k`` reference images for a prompt in ``source``."""

    def retrieve(
        self, prompt: str, constraints: Sequence[Constraint], source: str, top_k: int
    ) -> list[ImageRef]: ...


@runtime_checkable
class KnowledgeLookup(Protocol):
    """Returns a short description of what the prompt depicts, or None."""

    def lookup(self, prompt: str, source: str) -> str | None: ...


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


__all__ = [
    "BundleMemory",
    "KnowledgeLookup",
    "LayoutPlanner",
    "ReferenceRetriever",
    "bag_of_words_cosine",
]
