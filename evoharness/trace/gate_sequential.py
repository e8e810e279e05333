"""Group-sequential boundaries of the gate's looks: alpha spending and stage-wise p-values.

A candidate is tested at up to L looks; look k has seen k/L of the fresh validation seeds the
design can buy (each look adds K seeds per task: ``gate_config.validation_seeds``), so its
*information fraction* is t_k = k/L. Under H0 the looks' standardised statistics are taken as
jointly normal with Cov(Z_j, Z_k) = √(t_j/t_k), j ≤ k (the canonical joint distribution,
Jennison & Turnbull, *Group Sequential Methods with Applications to Clinical Trials*, 2000,
§3.1). The gate's unit is the task and every look tests the same tasks, so a task-level effect
that persists across seeds makes the looks *more* correlated than √(t_j/t_k); a larger
correlation only lowers P(any look rejects) (the union of the looks' rejection regions
shrinks), so the boundaries below keep the type-I error at or under α there too.

- **Spending** (Lan & DeMets 1983, "Discrete sequential boundaries for clinical trials",
  Biometrika 70:659, eq. 2): the one-sided O'Brien–Fleming-type function
  α*(t) = 2 − 2Φ(z_{1−α/2} / √t) spends α*(t_k) − α*(t_{k−1}) at look k; at t = 1/2 and
  α = 0.05 that is 0.0056 at the first look (O'Brien & Fleming 1979, Biometrics 35:549: early
  looks stop only on overwhelming evidence, the last one keeps almost all of α). The Pocock-type
  function α log(1 + (e − 1)t) (same paper) is offered for comparison.
- **Boundaries**: the critical values z_k solve, look by look,
  P(Z_1 < z_1, …, Z_{k−1} < z_{k−1}, Z_k ≥ z_k) = α*(t_k) − α*(t_{k−1}) (Jennison & Turnbull
  2000, §7.2, eq. 7.3; multivariate normal probabilities by ``scipy.stats.multivariate_normal``,
  root by ``scipy.optimize.brentq``); the gate compares each look's exact p-value with the
  *nominal* level c_k = 1 − Φ(z_k). Stopping for futility (p ≥ ``extend_below`` at a look before
  the last) is non-binding: the boundaries are computed as if every look were taken, so
  stopping early only lowers the type-I error.
- **Stage-wise p-value** (Jennison & Turnbull 2000, §8.4, stage-wise ordering): a test that
  rejects at look k with statistic z has overall p = Σ_{j<k} (spent at j) +
  P(Z_1 < z_1, …, Z_{k−1} < z_{k−1}, Z_k ≥ z); it is < α exactly when the look rejects, and it
  is a valid p-value, so Holm's correction across candidates (``gate_holm.apply_holm``) runs on
  it at the family-wise α.
"""

from __future__ import annotations

import math
from functools import lru_cache

import numpy as np
from pydantic import BaseModel, ConfigDict
from scipy.optimize import brentq
from scipy.stats import multivariate_normal, norm

#: The spending functions (module docstring).
SPENDING = ("obrien_fleming", "pocock")


def spent(alpha: float, t: float, spending: str = "obrien_fleming") -> float:
    """α*(t): the type-I error spent by information fraction ``t`` ∈ (0, 1] (Lan & DeMets 1983,
    module docstring), in [0, ``alpha``]; α*(1) = ``alpha``. Raises ``ValueError`` for ``alpha``
    outside (0, 1), ``t`` outside (0, 1] or an unknown ``spending``."""
    if not 0 < alpha < 1:
        raise ValueError(f"spent: alpha={alpha} must lie in (0, 1)")
    if not 0 < t <= 1:
        raise ValueError(f"spent: information fraction t={t} must lie in (0, 1]")
    if spending == "obrien_fleming":
        return float(2.0 - 2.0 * norm.cdf(norm.ppf(1.0 - alpha / 2.0) / math.sqrt(t)))
    if spending == "pocock":
        return float(alpha * math.log(1.0 + (math.e - 1.0) * t))
    raise ValueError(f"spent: spending={spending!r} is not one of {SPENDING}")


class Boundaries(BaseModel):
    """A design's boundaries: per look k (0-based here) its information fraction
    ``fractions[k]``, critical value ``z[k]``, nominal one-sided level ``nominal[k]`` = 1 − Φ(z_k)
    and the type-I error ``spent[k]`` spent there (Σ ``spent`` = ``alpha``)."""

    model_config = ConfigDict(frozen=True)

    alpha: float
    spending: str
    fractions: tuple[float, ...]
    z: tuple[float, ...]
    nominal: tuple[float, ...]
    spent: tuple[float, ...]

    def stagewise_p(self, p: float, look: int) -> float:
        """The overall (stage-wise) p-value of an exact one-sided look-``look`` p-value ``p``
        (1-based look; module docstring): ``p`` itself at look 1, else the error spent before
        plus P(no earlier look rejects, Z_look ≥ Φ⁻¹(1 − p)). Monotone in ``p``; < ``alpha``
        exactly when ``p`` < ``nominal[look − 1]``. Raises ``ValueError`` for a look outside
        1..L or ``p`` outside [0, 1]."""
        if not 1 <= look <= len(self.z):
            raise ValueError(f"stagewise_p: look={look} outside 1..{len(self.z)}")
        if not 0 <= p <= 1:
            raise ValueError(f"stagewise_p: p={p} outside [0, 1]")
        if look == 1:
            return p
        before = sum(self.spent[: look - 1])
        z = float(norm.isf(p)) if p > 0 else math.inf
        return min(1.0, before + _cross(self.fractions[:look], self.z[: look - 1], z))


def _cov(fractions: tuple[float, ...]) -> np.ndarray:
    """Cov(Z_j, Z_k) = √(t_j / t_k) for j ≤ k (module docstring); shape (L, L)."""
    t = np.asarray(fractions, dtype=float)
    return np.sqrt(np.minimum.outer(t, t) / np.maximum.outer(t, t))


def _below(fractions: tuple[float, ...], z: tuple[float, ...]) -> float:
    """P(Z_j < z_j for every look j in ``z``) under the canonical joint distribution."""
    if not z:
        return 1.0
    if len(z) == 1:
        return float(norm.cdf(z[0]))
    cov = _cov(fractions[: len(z)])
    mvn = multivariate_normal(mean=np.zeros(len(z)), cov=cov, seed=0)
    return float(mvn.cdf(np.asarray(z, dtype=float)))


def _cross(fractions: tuple[float, ...], z_before: tuple[float, ...], z: float) -> float:
    """P(Z_j < z_j for the looks before, Z_k ≥ z) at look k = len(z_before) + 1."""
    if math.isinf(z):
        return 0.0
    return max(0.0, _below(fractions, z_before) - _below(fractions, (*z_before, z)))


def _excess(
    x: float, fractions: tuple[float, ...], z_before: tuple[float, ...], target: float
) -> float:
    """The root of this in x is look len(z_before) + 1's critical value (``boundaries``)."""
    return _cross(fractions, z_before, x) - target


@lru_cache(maxsize=64)
def boundaries(alpha: float, looks: int, spending: str = "obrien_fleming") -> Boundaries:
    """The boundaries of ``looks`` equally spaced looks (t_k = k/``looks``) spending ``alpha``
    one-sided by ``spending`` (module docstring). One look: the fixed-sample test at ``alpha``.
    Cached. Raises ``ValueError`` for ``looks`` < 1 or the arguments ``spent`` refuses."""
    if looks < 1:
        raise ValueError(f"boundaries: looks={looks} must be >= 1")
    fractions = tuple(k / looks for k in range(1, looks + 1))
    cum = [spent(alpha, t, spending) for t in fractions]
    cum[-1] = alpha
    per = [cum[0]] + [cum[k] - cum[k - 1] for k in range(1, looks)]
    z: list[float] = []
    for k in range(looks):
        args = (fractions[: k + 1], tuple(z), per[k])
        z.append(float(brentq(_excess, -1.0, 12.0, args=args, xtol=1e-10)))
    nominal = tuple(float(norm.sf(x)) for x in z)
    return Boundaries(
        alpha=alpha,
        spending=spending,
        fractions=fractions,
        z=tuple(z),
        nominal=nominal,
        spent=tuple(per),
    )
