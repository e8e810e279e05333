"""The agent's ``image_search`` tool: a reference library searched by text.

``ReferenceLibrary`` is the port: ``search(query, top_k)`` returns captioned images
(``LibraryImage``: an ``ImageRef``, its caption and a score). ``CaptionedLibrary`` is the
implementation over a list of (image ref, caption) entries, ranked by the captions' cosine
similarity to the query (``EmbeddedKnowledgeBase``'s scorers: sentence embeddings when an
``embed`` function is given, else TF-IDF). ``library_from_index`` reads a library's index
from an ``ArtifactStore`` (S3 in production): a JSON document ``{"images": [{"key",
"bucket"?, "sha256"?, "caption"}]}``; the images themselves stay where they are, and the
generator reads them by reference. The agent sees found images under transient ids
(``IMG_001`` …, numbered after the request's own references), never their keys.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Protocol, runtime_checkable

from evoharness.agent.search import Embed, EmbeddedKnowledgeBase
from evoharness.ports import ArtifactStore
from evoharness.program import ImageRef


@dataclass(frozen=True)
class LibraryImage:
    """One library image: where it is (``ref``), what it shows (``caption``) and how well
    it matches the query (``score``, cosine 0..1)."""

    ref: ImageRef
    caption: str
    score: float


@runtime_checkable
class ReferenceLibrary(Protocol):
    """Reference images searched by text; ``cost_per_call`` in the agent's cost units."""

    @property
    def name(self) -> str: ...

    @property
    def cost_per_call(self) -> float: ...

    def search(self, query: str, top_k: int) -> list[LibraryImage]: ...


class CaptionedLibrary:
    """``ReferenceLibrary`` over ``entries`` (image ref, caption). Raises ``ValueError`` for
    no entries or an empty caption (naming its index)."""

    def __init__(
        self,
        entries: Sequence[tuple[ImageRef, str]],
        embed: Embed | None = None,
        *,
        name: str = "library",
        cost_per_call: float = 1.0,
    ) -> None:
        if not entries:
            raise ValueError("a reference library needs at least one image")
        for i, (_, caption) in enumerate(entries):
            if not caption.strip():
                raise ValueError(f"library image {i}: empty caption")
        self.entries = list(entries)
        self._kb = EmbeddedKnowledgeBase(
            [(i, c.strip()) for i, (_, c) in enumerate(self.entries)], embed, min_score=0.05
        )
        self.name = f"{name}:{self._kb.name.split(':')[-1]}"
        self.cost_per_call = cost_per_call

    def search(self, query: str, top_k: int) -> list[LibraryImage]:
        """The ``top_k`` images whose captions best match ``query``, best first."""
        out = []
        for i, score in self._kb.ranked(query, top_k):  # i indexes entries: same order
            ref, caption = self.entries[i]
            out.append(LibraryImage(ref, caption, score))
        return out


def library_from_index(
    store: ArtifactStore, key: str, embed: Embed | None = None, *, cost_per_call: float = 1.0
) -> CaptionedLibrary:
    """The library whose index is the JSON document at ``key`` in ``store`` (module
    docstring). Raises ``ValueError`` naming the key and entry for a malformed index."""
    try:
        doc = json.loads(store.get(key))
    except ValueError as exc:
        raise ValueError(f"library index {key}: not JSON: {exc}") from None
    images = doc.get("images") if isinstance(doc, dict) else None
    if not isinstance(images, list):
        raise ValueError(f"library index {key}: no 'images' list")
    entries = []
    for i, item in enumerate(images):
        if not isinstance(item, dict) or not isinstance(item.get("caption"), str):
            raise ValueError(f"library index {key}: images[{i}] needs a 'caption' string")
        try:
            ref = ImageRef.model_validate({k: v for k, v in item.items() if k != "caption"})
        except ValueError as exc:
            raise ValueError(f"library index {key}: images[{i}]: {exc}") from None
        entries.append((ref, item["caption"]))
    return CaptionedLibrary(entries, embed, name=f"index:{key}", cost_per_call=cost_per_call)


__all__ = ["CaptionedLibrary", "LibraryImage", "ReferenceLibrary", "library_from_index"]
