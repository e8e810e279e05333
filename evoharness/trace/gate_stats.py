"""The gate's statistics (TRACE step 6): the exact tests, the multiplicity corrections and the
bootstrap interval that ``evoharness.trace.gates`` decides with (moved from ``gates.py``,
issue 28; the gate's rule and every threshold's source are in that module's docstring).

- ``sign_flip_test``: the one-sided paired sign-flip permutation test on the task differences
  d_t (Fisher 1935, ch. 21; Good 2005, §3.1; Monte Carlo p as in Phipson & Smyth 2010), exact
  over the 2^m sign vectors when they are few enough; ``min_attainable_p`` its floor 2^−m and
  ``min_changed_tasks`` the fewest changed tasks that can pass at a level;
- ``sign_test``: the exact sign test over discordant (task, seed, constraint) pairs, reported
  but no longer deciding (it treats correlated verdicts as independent);
- ``holm_adjust`` (Holm 1979) and ``tarone_testable`` (Tarone 1990): the multiplicity
  correction across one round's candidates, counting only the testable ones;
- ``fisher_less``: Fisher's exact test on a 2×2 table of two *independent* samples (one-sided:
  the first passes less often), for arms that do not share units — a canary and a stable
  harness serving different requests (``evoharness.traffic.canary``);
- ``task_bootstrap``: the task-level (cluster) percentile bootstrap interval (Efron &
  Tibshirani 1993; Davison & Hinkley 1997, §3.8), shared by the gate and the run report.

No function here knows about harnesses or reports: inputs are verdict maps, differences and
p-values.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

import numpy as np
from scipy.stats import binomtest, fisher_exact, permutation_test

#: A verdict key: (task_id, seed, constraint_id).
VerdictKey = tuple[str, int, str]
#: Verdicts of one harness on one split: key → passed.
Verdicts = Mapping[VerdictKey, bool]


@dataclass(frozen=True)
class SignTest:
    """Discordant pairs and the one-sided exact sign test p-value."""

    wins: int  # parent fail -> candidate pass
    losses: int  # parent pass -> candidate fail
    p_value: float


def sign_test(parent: Verdicts, candidate: Verdicts) -> SignTest:
    """One-sided exact sign test over the discordant pairs of matched verdicts (see the gates
    docstring). p = 1 when there is no discordant pair."""
    wins = sum(1 for k, v in candidate.items() if v and not parent[k])
    losses = sum(1 for k, v in candidate.items() if not v and parent[k])
    n = wins + losses
    p = float(binomtest(wins, n, 0.5, alternative="greater").pvalue) if n else 1.0
    return SignTest(wins, losses, p)


@dataclass(frozen=True)
class PermutationTest:
    """The task-level sign-flip test: ``statistic`` = Σ d_t over ``n_tasks`` tasks of which
    ``n_nonzero`` have d_t ≠ 0; ``method`` is ``exact`` or ``monte_carlo``; ``n_draws`` the
    number of sign vectors evaluated (2^m when exact)."""

    p_value: float
    statistic: float
    n_tasks: int
    n_nonzero: int
    method: str
    n_draws: int


def _sum_stat(x: np.ndarray, axis: int) -> np.ndarray:
    return np.sum(x, axis=axis)


def sign_flip_test(
    d: Sequence[float], *, n_permutations: int = 20000, seed: int = 0
) -> PermutationTest:
    """One-sided paired sign-flip permutation test of H0 "d_t symmetric about 0" against
    "Σ d_t > 0" (module docstring; Fisher 1935, Good 2005 §3.1, Phipson & Smyth 2010), computed
    by ``scipy.stats.permutation_test(..., permutation_type="samples")`` over the m nonzero
    d_t: exact over all 2^m sign vectors when 2^m ≤ ``n_permutations``, otherwise
    ``n_permutations`` draws seeded by ``seed`` with p = (1 + hits) / (1 + draws). p = 1 when
    every d_t is 0. Raises ``ValueError`` for a non-finite difference."""
    arr = np.asarray(list(d), dtype=float)
    if not np.all(np.isfinite(arr)):
        raise ValueError("sign_flip_test: task differences must be finite")
    nz = arr[arr != 0.0]
    m = int(nz.size)
    t_obs = float(arr.sum())
    if m == 0:
        return PermutationTest(1.0, t_obs, int(arr.size), 0, "exact", 1)
    if m == 1:  # scipy needs two observations; the two sign vectors by hand
        return PermutationTest(0.5 if t_obs > 0 else 1.0, t_obs, int(arr.size), 1, "exact", 2)
    exact = 2**m <= n_permutations
    res = permutation_test(
        (nz,),
        _sum_stat,
        permutation_type="samples",
        vectorized=True,
        n_resamples=n_permutations,
        alternative="greater",
        rng=np.random.default_rng(seed),
    )
    return PermutationTest(
        float(res.pvalue),
        t_obs,
        int(arr.size),
        m,
        "exact" if exact else "monte_carlo",
        2**m if exact else n_permutations,
    )


def fisher_less(passed_a: int, n_a: int, passed_b: int, n_b: int) -> float:
    """One-sided p-value of Fisher's exact test (Fisher 1935, *The Design of Experiments*,
    §2; ``scipy.stats.fisher_exact`` with ``alternative="less"``) that sample A, ``passed_a`` of
    ``n_a`` units passing, passes less often than the independent sample B, ``passed_b`` of
    ``n_b``: conditional on the margins, P(at most ``passed_a`` of the passes fall in A) under
    the hypergeometric law. Unpaired: use it only when A and B hold different units (the sign
    tests above are for matched pairs). 1.0 when either sample is empty. Raises ``ValueError``
    when a count is negative or ``passed`` exceeds ``n``."""
    for name, k, n in (("a", passed_a, n_a), ("b", passed_b, n_b)):
        if n < 0 or not 0 <= k <= n:
            raise ValueError(f"fisher_less: sample {name} has {k} passed of {n}")
    if n_a == 0 or n_b == 0:
        return 1.0
    table = [[passed_a, n_a - passed_a], [passed_b, n_b - passed_b]]
    return float(fisher_exact(table, alternative="less").pvalue)


def min_changed_tasks(alpha: float, n_candidates: int = 1) -> int:
    """The fewest target tasks that must change for a patch to pass the sign-flip test: the
    smallest m with 2^-m < alpha / n_candidates. With m nonzero task differences the exact
    one-sided test's smallest p is 2^-m (every one of the m for the better; ``sign_flip_test``),
    and Holm's correction over n candidates multiplies the smallest p by n (``holm_adjust``).
    6 at the default alpha 0.0294 for one candidate. Raises ``ValueError`` for alpha outside
    (0, 1) or n_candidates < 1."""
    if not 0 < alpha < 1 or n_candidates < 1:
        raise ValueError(f"min_changed_tasks: alpha={alpha}, n_candidates={n_candidates}")
    m = 1
    while 2.0**-m >= alpha / n_candidates:
        m += 1
    return m


def holm_adjust(p_values: Mapping[str, float]) -> dict[str, float]:
    """Holm's step-down adjusted p-values (Holm 1979): over the m p-values in ascending order,
    adjusted p_(i) = max_{j≤i} min(1, (m − j + 1)·p_(j)) (1-based i). Rejecting where the
    adjusted p < α controls the family-wise error at α. Ties keep key order."""
    order = sorted(p_values, key=lambda k: p_values[k])
    m = len(order)
    out: dict[str, float] = {}
    running = 0.0
    for i, k in enumerate(order):
        running = max(running, min(1.0, (m - i) * p_values[k]))
        out[k] = running
    return {k: out[k] for k in p_values}


def min_attainable_p(n_nonzero: int, method: str = "exact", n_draws: int = 0) -> float:
    """The smallest p-value the one-sided sign-flip test (``sign_flip_test``) can return with
    ``n_nonzero`` (m) nonzero units, whatever their signs: 2^-m exactly (only the all-positive
    sign vector reaches the observed Σ|d_t|), and at least 1 / (1 + ``n_draws``) when the p
    is a Monte Carlo estimate (Phipson & Smyth 2010); 1 when m = 0. Tarone (1990) calls a
    hypothesis whose test cannot reach the level at its sample size untestable
    (``tarone_testable``). Raises ``ValueError`` for m < 0 or an unknown ``method``."""
    if n_nonzero < 0:
        raise ValueError(f"min_attainable_p: n_nonzero={n_nonzero} must be >= 0")
    if method not in ("exact", "monte_carlo"):
        raise ValueError(f"min_attainable_p: method={method!r} must be exact or monte_carlo")
    if n_nonzero == 0:
        return 1.0
    p = 2.0**-n_nonzero
    if method == "monte_carlo":
        p = max(p, 1.0 / (1.0 + n_draws))
    return p


def tarone_testable(p_min: Mapping[str, float], alpha: float) -> tuple[int, list[str]]:
    """Tarone's modified Bonferroni for discrete tests (Tarone 1990, "A modified Bonferroni
    method for discrete data", Biometrics 46:526-529): over M hypotheses with smallest
    attainable p-values ``p_min`` (``min_attainable_p``), K* = the smallest k in 1..M with
    m(k) ≤ k, where m(k) = #{i : p_min_i < α/k}; the testable hypotheses are those with
    p_min < α/K*. A hypothesis outside that set can never be rejected at α/K* and so is not
    counted in the multiplicity correction. Returns (K*, the testable keys in ``p_min``'s
    order); (1, []) when ``p_min`` is empty. Raises ``ValueError`` for alpha outside (0, 1)."""
    if not 0 < alpha < 1:
        raise ValueError(f"tarone_testable: alpha={alpha} must be in (0, 1)")
    m = len(p_min)
    k_star = 1
    for k in range(1, max(m, 1) + 1):
        if sum(1 for v in p_min.values() if v < alpha / k) <= k:
            k_star = k
            break
    return k_star, [key for key, v in p_min.items() if v < alpha / k_star]


def task_bootstrap(
    n_tasks: int,
    statistic: Callable[[np.ndarray], np.ndarray],
    *,
    n_resamples: int = 1000,
    seed: int | np.random.Generator = 0,
    level: float = 0.95,
) -> tuple[float, float]:
    """A task-level (cluster) percentile bootstrap interval: the one bootstrap of the gates
    and of the run report.

    Resamples the ``n_tasks`` tasks with replacement ``n_resamples`` times, each task keeping
    all its seeds and constraints together (verdicts of one task are correlated; Davison &
    Hinkley 1997, *Bootstrap Methods and their Application*, §3.8, resampling clusters), and
    returns the (1 − ``level``)/2 and (1 + ``level``)/2 percentiles of the statistic over the
    resamples (the percentile method, Efron & Tibshirani 1993, *An Introduction to the
    Bootstrap*, ch. 13). ``statistic`` maps an index matrix (``n_resamples``, ``n_tasks``) of
    resampled task positions to one value per resample, shape (``n_resamples``,); a paired
    difference is computed on the same resampled tasks for both harnesses, which is what
    makes it paired. ``seed``: an int (reproducible) or a ``numpy.random.Generator`` to draw
    from (the gate draws its splits from one generator in turn).

    Raises ``ValueError`` when ``n_tasks`` < 1, ``n_resamples`` < 1 or ``level`` is not in
    (0, 1).
    """
    if n_tasks < 1 or n_resamples < 1 or not 0.0 < level < 1.0:
        raise ValueError(
            f"task_bootstrap: n_tasks {n_tasks} and n_resamples {n_resamples} must be >= 1 "
            f"and level {level} in (0, 1)"
        )
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, n_tasks, size=(n_resamples, n_tasks))
    tail = 50.0 * (1.0 - level)
    lo, hi = np.percentile(statistic(idx), [tail, 100.0 - tail])
    return float(lo), float(hi)
