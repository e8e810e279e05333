"""LLM price table: tokens → estimated USD (``configs/prices.yaml``, key ``llm_models``).

Shape::

    llm_prompt_per_1k_usd: 0.00015        # default, for models not listed
    llm_completion_per_1k_usd: 0.0006
    llm_models:
      gpt-4o-mini: {prompt_per_1m: 0.15, completion_per_1m: 0.60}

A model's price is the entry whose key is the longest prefix of the model name; else the
defaults. cost = prompt_tokens · prompt_per_1m / 1e6 + completion_tokens · completion_per_1m / 1e6.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import yaml


@dataclass(frozen=True)
class ModelPrice:
    """USD per one million prompt / completion tokens."""

    prompt_per_1m: float
    completion_per_1m: float


@dataclass(frozen=True)
class PriceTable:
    """Per-model LLM prices with a default for unknown models."""

    default: ModelPrice = ModelPrice(0.15, 0.60)
    models: dict[str, ModelPrice] = field(default_factory=dict)

    @classmethod
    def load(cls, path: str | Path) -> PriceTable:
        """Read ``path``. Raises ``ValueError`` naming the file and key for a missing file,
        invalid YAML or a non-numeric / negative price."""
        p = Path(path)
        if not p.is_file():
            raise ValueError(f"price table {p} does not exist")
        try:
            doc = yaml.safe_load(p.read_text(encoding="utf-8")) or {}
        except yaml.YAMLError as exc:
            raise ValueError(f"{p}: not valid YAML: {exc}") from None
        if not isinstance(doc, dict):
            raise ValueError(f"{p}: top level must be a mapping")

        def num(v: object, where: str) -> float:
            if isinstance(v, bool) or not isinstance(v, int | float) or v < 0:
                raise ValueError(f"{p}: {where} must be a non-negative number, got {v!r}")
            return float(v)

        default = ModelPrice(
            num(doc.get("llm_prompt_per_1k_usd", 0.00015), "llm_prompt_per_1k_usd") * 1000,
            num(doc.get("llm_completion_per_1k_usd", 0.0006), "llm_completion_per_1k_usd") * 1000,
        )
        models: dict[str, ModelPrice] = {}
        table = doc.get("llm_models") or {}
        if not isinstance(table, dict):
            raise ValueError(f"{p}: llm_models must be a mapping of model → prices")
        for name, entry in table.items():
            if not isinstance(entry, dict):
                raise ValueError(f"{p}: llm_models.{name} must be a mapping")
            models[str(name)] = ModelPrice(
                num(entry.get("prompt_per_1m"), f"llm_models.{name}.prompt_per_1m"),
                num(entry.get("completion_per_1m"), f"llm_models.{name}.completion_per_1m"),
            )
        return cls(default=default, models=models)

    def price(self, model: str) -> ModelPrice:
        """The price of ``model`` (longest matching prefix, else the default)."""
        best = max((k for k in self.models if model.startswith(k)), key=len, default=None)
        return self.models[best] if best is not None else self.default

    def cost(self, model: str, prompt_tokens: int, completion_tokens: int) -> float:
        """Estimated USD of one call."""
        pr = self.price(model)
        return (prompt_tokens * pr.prompt_per_1m + completion_tokens * pr.completion_per_1m) / 1e6
