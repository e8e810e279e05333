"""The validation gate's settings (``GateConfig``) and its fresh validation seeds.

The rule these settings parameterise, and the sources of their defaults, are in
``evoharness.trace.gates`` (moved from there, issue 29).
"""

from __future__ import annotations

from collections.abc import Sequence

from pydantic import BaseModel, ConfigDict, Field, field_validator

#: The reason recorded when every gate condition holds.
ALL_HOLD = "all gate conditions hold"


#: What a candidate is gated for: fixing failures, or saving cost at equal quality.
OBJECTIVES = ("quality", "cost")


class GateConfig(BaseModel):
    """Gate settings (all configurable; defaults from the sources in ``gates``).

    ``alpha``: per-look level (Pocock's two-look boundary 0.0294 for an overall 0.05);
    ``extend_below``: upper end of the zone ``alpha`` ≤ p < ``extend_below`` that earns a
    second look with K more fresh seeds; ``max_looks``: 1 disables the second look.
    ``n_permutations``: the sign-flip test is exact while 2^m ≤ this (m nonzero task
    differences; m ≤ 14 by default), else this many Monte Carlo draws seeded by
    ``permutation_seed`` (20,000 draws: the Monte Carlo standard error of p near 0.0294 is
    0.0012). ``epsilon`` None → max(``epsilon_floor``, 1/N_preservation).
    ``n_bootstrap`` resamples, ``bootstrap_seed`` seeds them. ``test_splits``: the splits
    whose tasks are the units of the significance test (``gates``, "Pooled units");
    ``["target"]`` is the rule before 2026-12-02. ``min_family_tasks``: a preservation
    family with at least this many tasks is also checked on its own for regression (issue
    16: 5). ``mu``: the cost weight, utility per +100% generator-seconds per request (0.2 =
    20 pp; ``gates``); ``max_cost_increase``: the per-request generator budget as a
    share above the parent's (0.5: at most +50%; None: no budget).
    """

    model_config = ConfigDict(extra="forbid")

    alpha: float = Field(default=0.0294, gt=0, lt=1)
    extend_below: float = Field(default=0.2, gt=0, le=1)
    max_looks: int = Field(default=2, ge=1, le=2)
    n_permutations: int = Field(default=20000, ge=100)
    permutation_seed: int = 0
    lam: float = Field(default=0.5, ge=0)
    mu: float = Field(default=0.2, ge=0)
    max_cost_increase: float | None = Field(default=None, ge=0)
    epsilon: float | None = Field(default=None, ge=0)
    epsilon_floor: float = Field(default=0.01, ge=0)
    n_bootstrap: int = Field(default=1000, ge=0)
    bootstrap_seed: int = 0
    min_family_tasks: int = Field(default=5, ge=1)
    test_splits: list[str] = Field(default_factory=lambda: ["target", "heldout"])

    @field_validator("test_splits")
    @classmethod
    def _test_splits(cls, v: list[str]) -> list[str]:
        allowed = ("target", "heldout")
        if "target" not in v or not set(v) <= set(allowed) or len(set(v)) != len(v):
            raise ValueError(
                f"test_splits {v!r}: must hold 'target' and may add 'heldout' (no repeats); "
                "preservation tasks are the regression check, never test units"
            )
        return v


def validation_seeds(seeds: Sequence[int], look: int = 1) -> list[int]:
    """The fresh seeds of validation look ``look`` (1 or 2) for analysis ``seeds`` (K of them):
    the K consecutive seeds after the previous block, starting past ``max(seeds)`` — seeds
    K..2K−1 (look 1) and 2K..3K−1 (look 2) for the usual 0..K−1. Never overlaps ``seeds``.
    Raises ``ValueError`` for an empty seed list or a look outside 1..2."""
    if not seeds:
        raise ValueError("validation_seeds: the analysis seed list is empty")
    if look not in (1, 2):
        raise ValueError(f"validation_seeds: look={look} must be 1 or 2")
    k = len(seeds)
    start = max(seeds) + 1 + (look - 1) * k
    return list(range(start, start + k))
