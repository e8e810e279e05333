"""Overlap between the prompts evolution reads and the prompts a run is scored on (issue 16,
"Label-free by default": EvoGen's protocol refuses evolution splits that contain the
evaluation prompts or near-duplicates of them).

Two prompts overlap when their normalised forms (``normalize_prompt``: lower case,
punctuation removed, whitespace collapsed) are equal (``exact``), or when the cosine
similarity of their embeddings is at least ``threshold`` (``near``).

Embeddings (``PromptEmbedder``), chosen by ``OverlapConfig.method``:

- ``minilm``: sentence-transformers/all-MiniLM-L6-v2 (Reimers & Gurevych 2019, "Sentence-BERT",
  EMNLP; the model card's recipe: mean pooling over the last hidden state with the attention
  mask, then L2 normalisation) loaded with ``transformers`` from a *local* folder
  (``model_path`` or ``EVOHARNESS_MINILM_PATH``); nothing is downloaded. The issue's
  threshold 0.95 is for this model.
- ``tfidf-char`` (the stand-in used when no MiniLM folder is configured, which is the case on
  machines without model weights): TF-IDF over character 3–5-grams within word boundaries
  (scikit-learn ``TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5),
  sublinear_tf=True)``, fitted on both prompt sets), L2-normalised, so cosine = dot product.
  It is a lexical measure: it scores word-order swaps ("a dog left of a cat" / "a cat left of
  a dog") as 1.0, and one extra word in a short prompt ("a photo of a parking meter" / "a
  photo of a red parking meter") about 0.94. At 0.95 on GenEval's 553 prompts it flags one
  pair ("an orange" / "an orange orange"); MiniLM would flag more paraphrases, this flags
  fewer, so it is a floor on the overlap, not a replacement (docs/evolution.md, "Label-free").
- ``auto`` (default): ``minilm`` when a local model folder is configured, else
  ``tfidf-char``.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol

import numpy as np
from pydantic import BaseModel, ConfigDict, Field

from evoharness.tasks.models import Task, normalize_prompt

#: Environment variable naming a local all-MiniLM-L6-v2 folder (config.json, tokenizer, weights).
MINILM_ENV = "EVOHARNESS_MINILM_PATH"


class OverlapError(ValueError):
    """Evolution prompts overlap the prompts the run is scored on; the message lists them."""


class OverlapConfig(BaseModel):
    """How overlap is detected. ``method``: ``auto`` | ``minilm`` | ``tfidf-char`` (module
    docstring); ``threshold``: cosine at or above which two prompts are near-duplicates (0.95,
    the issue's MiniLM threshold); ``model_path``: local MiniLM folder (else
    ``EVOHARNESS_MINILM_PATH``)."""

    model_config = ConfigDict(extra="forbid")

    method: Literal["auto", "minilm", "tfidf-char"] = "auto"
    threshold: float = Field(default=0.95, gt=0, le=1)
    model_path: str | None = None


class PromptEmbedder(Protocol):
    """Maps prompts to L2-normalised vectors: ``embed(a, b)`` → two arrays of shape
    ``(len(a), d)`` and ``(len(b), d)`` in one space (an embedder may fit on both)."""

    name: str

    def embed(self, a: Sequence[str], b: Sequence[str]) -> tuple[Any, Any]: ...


class TfidfCharEmbedder:
    """The stand-in (module docstring): character 3–5-gram TF-IDF, fitted on both sets."""

    name = "tfidf-char(3-5)"

    def embed(self, a: Sequence[str], b: Sequence[str]) -> tuple[Any, Any]:
        """Sparse L2-normalised rows for ``a`` and ``b``."""
        from sklearn.feature_extraction.text import TfidfVectorizer

        vec = TfidfVectorizer(
            analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True, lowercase=True
        )
        vec.fit([*a, *b])
        return vec.transform(list(a)), vec.transform(list(b))


class MiniLMEmbedder:
    """all-MiniLM-L6-v2 (or any BERT-like sentence encoder) from a local folder: mean pooling
    over tokens with the attention mask, L2-normalised (the model card's recipe). Raises
    ``OverlapError`` naming the folder when it cannot be loaded; never downloads."""

    def __init__(self, model_path: str) -> None:
        try:
            from transformers import AutoModel, AutoTokenizer

            self.tokenizer = AutoTokenizer.from_pretrained(model_path, local_files_only=True)
            self.model = AutoModel.from_pretrained(model_path, local_files_only=True)
        except (OSError, ValueError) as exc:
            raise OverlapError(f"MiniLM model folder {model_path}: cannot load: {exc}") from None
        self.model.eval()
        self.name = f"minilm({os.path.basename(os.path.normpath(model_path))})"

    def _encode(self, texts: Sequence[str]) -> np.ndarray:
        import torch

        out = []
        for i in range(0, len(texts), 64):
            batch = self.tokenizer(
                list(texts[i : i + 64]),
                padding=True,
                truncation=True,
                max_length=256,
                return_tensors="pt",
            )
            with torch.no_grad():
                hidden = self.model(**batch).last_hidden_state  # (B, T, H)
            mask = batch["attention_mask"].unsqueeze(-1).to(hidden.dtype)
            pooled = (hidden * mask).sum(1) / mask.sum(1).clamp(min=1e-9)
            pooled = torch.nn.functional.normalize(pooled, p=2, dim=1)
            out.append(pooled.cpu().numpy())
        return np.concatenate(out) if out else np.zeros((0, 1), dtype=np.float32)

    def embed(self, a: Sequence[str], b: Sequence[str]) -> tuple[Any, Any]:
        """Dense L2-normalised rows for ``a`` and ``b``."""
        return self._encode(a), self._encode(b)


def embedder(config: OverlapConfig | None = None) -> PromptEmbedder:
    """The embedder ``config`` names (``auto``: MiniLM when ``model_path`` or
    ``EVOHARNESS_MINILM_PATH`` is set, else the TF-IDF stand-in). Raises ``OverlapError`` when
    ``minilm`` is asked for without a local folder."""
    cfg = config or OverlapConfig()
    path = cfg.model_path or os.environ.get(MINILM_ENV) or None
    if cfg.method == "minilm" or (cfg.method == "auto" and path):
        if not path:
            raise OverlapError(
                f"overlap method minilm needs a local model folder (model_path or {MINILM_ENV})"
            )
        return MiniLMEmbedder(path)
    return TfidfCharEmbedder()


@dataclass(frozen=True)
class Overlap:
    """One evolution prompt that overlaps a scored prompt: ``kind`` ``exact`` (equal after
    ``normalize_prompt``) or ``near`` (cosine ≥ threshold)."""

    split: str
    task_id: str
    prompt: str
    scored_task_id: str
    scored_prompt: str
    kind: str
    cosine: float

    def line(self) -> str:
        """One line for an error message or a report."""
        return (
            f"{self.split} {self.task_id} {self.prompt!r} ~ {self.scored_task_id} "
            f"{self.scored_prompt!r} ({self.kind}, cosine {self.cosine:.3f})"
        )


def find_overlaps(
    evolution: Mapping[str, Sequence[Task]],
    scored: Sequence[Task],
    config: OverlapConfig | None = None,
    embed: PromptEmbedder | None = None,
) -> list[Overlap]:
    """Every evolution task (``evolution``: split name → tasks) whose prompt overlaps a
    ``scored`` prompt (module docstring), each with its most similar scored prompt, in split
    then task order. ``embed`` overrides the embedder ``config`` names."""
    cfg = config or OverlapConfig()
    items = [(s, t) for s, ts in evolution.items() for t in ts]
    if not items or not scored:
        return []
    norm_scored: dict[str, Task] = {}
    for t in scored:
        norm_scored.setdefault(normalize_prompt(t.prompt), t)
    a = [normalize_prompt(t.prompt) for _, t in items]
    b = [normalize_prompt(t.prompt) for t in scored]
    ea, eb = (embed or embedder(cfg)).embed(a, b)
    sim = ea @ eb.T
    sim = sim.toarray() if hasattr(sim, "toarray") else np.asarray(sim)
    best = sim.argmax(axis=1)
    out: list[Overlap] = []
    for i, (split, t) in enumerate(items):
        exact = norm_scored.get(a[i])
        j = int(best[i])
        cos = float(sim[i, j])
        if exact is not None:
            out.append(
                Overlap(split, t.task_id, t.prompt, exact.task_id, exact.prompt, "exact", 1.0)
            )
        elif cos >= cfg.threshold - 1e-9:
            s = scored[j]
            out.append(Overlap(split, t.task_id, t.prompt, s.task_id, s.prompt, "near", cos))
    return out


def refuse_overlap(
    evolution: Mapping[str, Sequence[Task]],
    scored: Sequence[Task],
    config: OverlapConfig | None = None,
    embed: PromptEmbedder | None = None,
    show: int = 20,
) -> str:
    """Raise ``OverlapError`` listing (up to ``show``) overlaps when any evolution prompt
    overlaps a scored prompt; else return the method used (``exact + <embedder name> >=
    <threshold>``), for the run's report."""
    cfg = config or OverlapConfig()
    emb = embed or embedder(cfg)
    found = find_overlaps(evolution, scored, cfg, emb)
    if found:
        lines = "\n".join("  " + o.line() for o in found[:show])
        more = f"\n  … and {len(found) - show} more" if len(found) > show else ""
        raise OverlapError(
            f"{len(found)} evolution prompt(s) overlap the prompts the run is scored on "
            f"(normalised exact match, or {emb.name} cosine >= {cfg.threshold}); remove them "
            f"from the evolution splits:\n{lines}{more}"
        )
    return f"exact + {emb.name} >= {cfg.threshold}"


__all__ = [
    "MINILM_ENV",
    "MiniLMEmbedder",
    "Overlap",
    "OverlapConfig",
    "OverlapError",
    "PromptEmbedder",
    "TfidfCharEmbedder",
    "embedder",
    "find_overlaps",
    "refuse_overlap",
]
