"""The agent's ``search`` tool: text evidence through a provider port.

``SearchProvider`` is the port (an HTTP search API in production,
``services.runtime.search.HttpSearchProvider``); ``EmbeddedKnowledgeBase`` is the default: the
offline facts of ``facts.txt`` (one short fact a line: colours of well-known things, typical
counts, which object is used with which), ranked by cosine similarity of either sentence
embeddings (an injected ``embed`` function, the MiniLM model where the runtime service has
it) or, without one, TF-IDF vectors (scikit-learn's ``TfidfVectorizer``: sublinear term
frequency, smooth idf, unigrams and bigrams, English stop words removed). This module does no
network I/O.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Protocol, runtime_checkable

import numpy as np

#: The shipped fact file.
FACTS_PATH = Path(__file__).with_name("facts.txt")

#: ``embed(texts) -> array (len(texts), d)`` of unit-norm sentence embeddings.
Embed = Callable[[Sequence[str]], np.ndarray]


@dataclass(frozen=True)
class SearchHit:
    """One piece of text evidence: ``text``, its ``score`` (cosine 0..1 for the embedded
    base; the provider's own relevance otherwise) and ``source`` (``kb:<line>`` or a URL)."""

    text: str
    score: float
    source: str

    def as_observation(self) -> dict[str, object]:
        """The JSON shape an agent sees."""
        return {"text": self.text, "score": round(self.score, 4), "source": self.source}


@runtime_checkable
class SearchProvider(Protocol):
    """Text search. ``search(query, top_k)`` returns at most ``top_k`` hits, best first.
    ``cost_per_call``: what one call costs against the agent's cost budget (units of the
    agent's ``max_cost``). ``name`` identifies the provider and its scorer in traces."""

    @property
    def name(self) -> str: ...

    @property
    def cost_per_call(self) -> float: ...

    def search(self, query: str, top_k: int) -> list[SearchHit]: ...


def load_facts(path: Path = FACTS_PATH) -> list[tuple[int, str]]:
    """``(line number, fact)`` for every non-empty, non-comment line of ``path``.
    Raises ``ValueError`` naming the file when it holds no fact."""
    facts = []
    for i, line in enumerate(path.read_text(encoding="utf-8").splitlines(), start=1):
        s = line.strip()
        if s and not s.startswith("#"):
            facts.append((i, s))
    if not facts:
        raise ValueError(f"{path}: no facts")
    return facts


class EmbeddedKnowledgeBase:
    """The offline knowledge base (``SearchProvider``).

    ``facts``: ``(line, text)`` pairs (default: ``facts.txt``); ``embed``: a sentence
    embedder (unit-norm rows); None ranks with TF-IDF. ``cost_per_call`` defaults to 1 (one
    unit of the agent's cost budget per search). Hits below ``min_score`` are dropped."""

    def __init__(
        self,
        facts: Sequence[tuple[int, str]] | None = None,
        embed: Embed | None = None,
        *,
        cost_per_call: float = 1.0,
        min_score: float = 0.05,
    ) -> None:
        self.facts = list(facts) if facts is not None else load_facts()
        self.cost_per_call = cost_per_call
        self.min_score = min_score
        self._embed = embed
        texts = [t for _, t in self.facts]
        if embed is not None:
            self.name = "embedded:minilm"
            self._matrix = np.asarray(embed(texts), dtype=np.float32)
            self._vectorizer = None
        else:
            from sklearn.feature_extraction.text import TfidfVectorizer

            self.name = "embedded:tfidf"
            self._vectorizer = TfidfVectorizer(
                sublinear_tf=True, ngram_range=(1, 2), stop_words="english"
            )
            self._matrix = self._vectorizer.fit_transform(texts)

    def _query_vector(self, query: str) -> np.ndarray:
        if self._embed is not None:
            return np.asarray(self._embed([query]), dtype=np.float32)[0]
        assert self._vectorizer is not None
        return self._vectorizer.transform([query])

    def ranked(self, query: str, top_k: int) -> list[tuple[int, float]]:
        """``(index into facts, cosine score)`` of the ``top_k`` facts most similar to
        ``query``, best first, ties by position; those scoring below ``min_score`` are left
        out. Raises ``ValueError`` for an empty query or ``top_k`` < 1."""
        if not query or not query.strip():
            raise ValueError("search query is empty")
        if top_k < 1:
            raise ValueError(f"top_k must be >= 1, got {top_k}")
        q = self._query_vector(query)
        if self._embed is not None:
            scores = np.asarray(self._matrix @ q).ravel()
        else:
            scores = np.asarray((self._matrix @ q.T).todense()).ravel()
        order = sorted(range(len(scores)), key=lambda i: (-float(scores[i]), i))
        out = []
        for i in order[:top_k]:
            if float(scores[i]) < self.min_score:
                break
            out.append((i, float(scores[i])))
        return out

    def search(self, query: str, top_k: int) -> list[SearchHit]:
        """``ranked`` as hits: each fact's text, score and source ``kb:<line>``. Raises
        ``ValueError`` for an empty query or ``top_k`` < 1."""
        return [
            SearchHit(text=self.facts[i][1], score=score, source=f"kb:{self.facts[i][0]}")
            for i, score in self.ranked(query, top_k)
        ]


__all__ = ["FACTS_PATH", "EmbeddedKnowledgeBase", "SearchHit", "SearchProvider", "load_facts"]
