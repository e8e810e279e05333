"""The validation gate's settings (``GateConfig``) and its fresh validation seeds.

The rule these settings parameterise, and the sources of their defaults, are in
``evoharness.trace.gates`` (moved from there, issue 29).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator

from evoharness.tasks.models import Split
from evoharness.trace.gate_sequential import boundaries

#: A spending design's own defaults (``GateConfig.alpha_spending``).
_SPENDING_DEFAULTS: dict[str, Any] = {"alpha": 0.05, "max_looks": 3, "extend_below": 0.7}

#: The reason recorded when every gate condition holds.
ALL_HOLD = "all gate conditions hold"


#: What a candidate is gated for: fixing failures, or saving cost at equal quality.
OBJECTIVES = ("quality", "cost")


class GateConfig(BaseModel):
    """Gate settings (all configurable; defaults from the sources in ``gates``).

    ``spending``: how the looks share the type-I error (``gate_sequential``): ``fixed`` (the
    default: every look at the nominal ``alpha``, Pocock's 1977 two-look constant 0.0294; a
    report's ``p_value`` is then the look's own p), ``obrien_fleming`` (opt-in since
    2026-12-06, ``alpha_spending()``, until the fault suite is re-run on it: Lan–DeMets O'Brien–Fleming-type spending of an overall one-sided
    ``alpha`` = 0.05 over ``max_looks`` looks: nominal 0.0007, 0.0161, 0.0451 for three looks,
    0.0056, 0.0482 for two), or ``pocock`` (Lan–DeMets Pocock-type spending). ``alpha``: the overall
    level (the spending designs) or the per-look level (``fixed``); unset, 0.05 or 0.0294.
    ``extend_below``: upper end of the zone nominal ≤ p < ``extend_below`` that earns a
    further look with K more fresh seeds (p ≥ it stops for futility, non-binding);
    ``max_looks``: the most looks (2 by default, 3 under spending: 3K fresh seeds per test
    task at most; 1 disables further looks).
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

    spending: Literal["obrien_fleming", "pocock", "fixed"] = "fixed"
    alpha: float = Field(default=0.0294, gt=0, lt=1)
    extend_below: float = Field(default=0.2, gt=0, le=1)
    max_looks: int = Field(default=2, ge=1, le=3)
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
    test_splits: list[str] = Field(
        default_factory=lambda: [Split.target.value, Split.heldout.value]
    )

    @model_validator(mode="before")
    @classmethod
    def _alpha_of_design(cls, data: Any) -> Any:
        """A spending design (``obrien_fleming``, ``pocock``) with ``alpha``, ``max_looks`` or
        ``extend_below`` unset takes its own defaults (overall 0.05, three looks, 0.7:
        ``alpha_spending``); ``fixed`` keeps the two-look rule's (0.0294, 2, 0.2)."""
        if isinstance(data, dict) and data.get("spending", "fixed") != "fixed":
            return {**_SPENDING_DEFAULTS, **data}
        return data

    @classmethod
    def alpha_spending(cls, **overrides: Any) -> GateConfig:
        """The opt-in group-sequential gate (2026-12-06, ``gate_sequential``): up to three
        looks with Lan–DeMets O'Brien–Fleming-type spending of an overall one-sided 0.05, a
        further look while nominal <= p < 0.7; ``overrides`` are further fields."""
        return cls(**{"spending": "obrien_fleming", **_SPENDING_DEFAULTS, **overrides})

    @classmethod
    def before_spending(cls, **overrides: Any) -> GateConfig:
        """The default rule (explicitly), for comparison and for tests of the other conditions:
        two looks at Pocock's per-look 0.0294, a second look when 0.0294 ≤ p < 0.2 and
        significance is the only condition missing; ``overrides`` are further fields."""
        legacy = {"spending": "fixed", "alpha": 0.0294, "max_looks": 2, "extend_below": 0.2}
        return cls(**{**legacy, **overrides})

    def nominal(self, look: int) -> float:
        """The nominal one-sided level look ``look`` (1-based) compares its exact p with:
        ``alpha`` under ``fixed``, else the spending design's (``gate_sequential.boundaries``).
        Raises ``ValueError`` for a look outside 1..``max_looks``."""
        if not 1 <= look <= self.max_looks:
            raise ValueError(f"GateConfig.nominal: look={look} outside 1..{self.max_looks}")
        if self.spending == "fixed":
            return self.alpha
        return boundaries(self.alpha, self.max_looks, self.spending).nominal[look - 1]

    def overall_p(self, p: float, look: int) -> float:
        """The p-value a report carries for an exact look-``look`` p ``p``, compared with
        ``alpha`` by Holm's correction: ``p`` itself under ``fixed``; else the stage-wise
        p-value (``gate_sequential.Boundaries.stagewise_p``) when the look rejects or is the
        last, and max(``p``, ``alpha``) at an earlier look that does not reject (the test has
        not ended there: never significant). < ``alpha`` exactly when the look rejects."""
        if self.spending == "fixed":
            return p
        b = boundaries(self.alpha, self.max_looks, self.spending)
        if p < b.nominal[look - 1] or look == self.max_looks:
            return b.stagewise_p(p, look)
        return max(p, self.alpha)

    @field_validator("test_splits")
    @classmethod
    def _test_splits(cls, v: list[str]) -> list[str]:
        allowed = (Split.target, Split.heldout)
        if Split.target not in v or not set(v) <= set(allowed) or len(set(v)) != len(v):
            raise ValueError(
                f"test_splits {v!r}: must hold 'target' and may add 'heldout' (no repeats); "
                "preservation tasks are the regression check, never test units"
            )
        return v


#: The most validation looks any design takes (``GateConfig.max_looks``).
MAX_LOOKS = 3


def validation_seeds(seeds: Sequence[int], look: int = 1) -> list[int]:
    """The fresh seeds of validation look ``look`` (1..``MAX_LOOKS``) for analysis ``seeds``
    (K of them): the K consecutive seeds after the previous block, starting past
    ``max(seeds)`` — seeds K..2K−1 (look 1), 2K..3K−1 (look 2) and 3K..4K−1 (look 3) for the
    usual 0..K−1. Never overlaps ``seeds``. Raises ``ValueError`` for an empty seed list or a
    look outside 1..``MAX_LOOKS``."""
    if not seeds:
        raise ValueError("validation_seeds: the analysis seed list is empty")
    if not 1 <= look <= MAX_LOOKS:
        raise ValueError(f"validation_seeds: look={look} must be in 1..{MAX_LOOKS}")
    k = len(seeds)
    start = max(seeds) + 1 + (look - 1) * k
    return list(range(start, start + k))
