"""The validation gate (TRACE step 6, ARCHITECTURE.md, "Gates are statistical").

For a candidate harness and its parent, evaluated on the same matched (task, seed, constraint)
verdicts over three disjoint splits (target, held-out, preservation):

- Δsplit = mean pass rate(candidate) − mean pass rate(parent) over the matched verdicts
  (a *net* change: improvements and regressions on the same split cancel);
- Δtarget must be > 0 **and** significant under a one-sided exact sign test over the
  discordant pairs (McNemar's exact test; Dixon & Mood 1946): with b = parent fail → candidate
  pass and c = parent pass → candidate fail, p = P[Binomial(b + c, ½) ≥ b]
  (``scipy.stats.binomtest(b, b + c, 0.5, alternative="greater")``), significant when p < α
  (α = 0.05). One lucky flip gives p = 0.5 and is never a win; it takes ≥ 5 discordant pairs,
  all favourable, to reach p < 0.05;
- Δheld-out ≥ 0;
- regression = max(0, −Δpreservation) ≤ ε, with ε = max(0.01, 1/N_preservation) by default
  (one net flip on the preservation split);
- Δcost = (cost_candidate − cost_parent) / cost_parent, cost = generator-seconds per task over
  every validated task (normalised by the parent's);
- utility = Δtarget − λ·regression − μ·Δcost > 0, λ = 0.5, μ = 0.05.

λ, μ and ε = 0.01 follow the EvoGen-Harness protocol quoted in ARCHITECTURE.md. Every report
carries a paired bootstrap 95% interval for each Δ (Efron & Tibshirani 1993, percentile
method), resampling *tasks* with replacement and keeping each task's seeds and constraints
together (a cluster bootstrap: verdicts of one task are correlated), seeded for repeatability.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy.stats import binomtest

from evoharness.trace.models import GateReport, Split

#: A verdict key: (task_id, seed, constraint_id).
VerdictKey = tuple[str, int, str]
#: Verdicts of one harness on one split: key → passed.
Verdicts = Mapping[VerdictKey, bool]


class GateConfig(BaseModel):
    """Gate settings (all configurable; defaults from ARCHITECTURE.md).

    ``epsilon`` None → max(``epsilon_floor``, 1/N_preservation). ``n_bootstrap`` resamples,
    ``bootstrap_seed`` seeds them.
    """

    model_config = ConfigDict(extra="forbid")

    alpha: float = Field(default=0.05, gt=0, lt=1)
    lam: float = Field(default=0.5, ge=0)
    mu: float = Field(default=0.05, ge=0)
    epsilon: float | None = Field(default=None, ge=0)
    epsilon_floor: float = Field(default=0.01, ge=0)
    n_bootstrap: int = Field(default=1000, ge=0)
    bootstrap_seed: int = 0


class GateInputError(ValueError):
    """Verdicts that are not matched (different keys for parent and candidate) or empty."""


@dataclass(frozen=True)
class SignTest:
    """Discordant pairs and the one-sided exact sign test p-value."""

    wins: int  # parent fail -> candidate pass
    losses: int  # parent pass -> candidate fail
    p_value: float


def sign_test(parent: Verdicts, candidate: Verdicts) -> SignTest:
    """One-sided exact sign test over the discordant pairs of matched verdicts (see module
    docstring). p = 1 when there is no discordant pair."""
    wins = sum(1 for k, v in candidate.items() if v and not parent[k])
    losses = sum(1 for k, v in candidate.items() if not v and parent[k])
    n = wins + losses
    p = float(binomtest(wins, n, 0.5, alternative="greater").pvalue) if n else 1.0
    return SignTest(wins, losses, p)


def _check_matched(split: str, parent: Verdicts, candidate: Verdicts) -> None:
    if set(parent) != set(candidate):
        only_p = sorted(set(parent) - set(candidate))[:3]
        only_c = sorted(set(candidate) - set(parent))[:3]
        raise GateInputError(
            f"split {split}: verdicts are not matched (only parent: {only_p}, only candidate: "
            f"{only_c}; {len(set(parent) ^ set(candidate))} keys differ)"
        )


def _delta(parent: Verdicts, candidate: Verdicts) -> float:
    if not parent:
        return 0.0
    return (sum(candidate.values()) - sum(parent.values())) / len(parent)


def _per_task(parent: Verdicts, candidate: Verdicts) -> dict[str, tuple[int, int, int]]:
    """task → (n verdicts, parent passes, candidate passes)."""
    acc: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for k, v in parent.items():
        a = acc[k[0]]
        a[0] += 1
        a[1] += int(v)
        a[2] += int(candidate[k])
    return {t: (a[0], a[1], a[2]) for t, a in acc.items()}


def _relative_cost(parent_cost: float, cand_cost: float) -> float:
    if parent_cost > 0:
        return (cand_cost - parent_cost) / parent_cost
    return 0.0 if cand_cost <= 0 else 1.0


def _bootstrap(
    per_split: Mapping[str, dict[str, tuple[int, int, int]]],
    cost_p: Mapping[str, float],
    cost_c: Mapping[str, float],
    cfg: GateConfig,
) -> dict[str, tuple[float, float]]:
    out: dict[str, tuple[float, float]] = {}
    if cfg.n_bootstrap == 0:
        return out
    rng = np.random.default_rng(cfg.bootstrap_seed)
    for split, per_task in per_split.items():
        if not per_task:
            out[f"delta_{split}"] = (0.0, 0.0)
            continue
        arr = np.array(list(per_task.values()), dtype=float)  # (T, 3)
        idx = rng.integers(0, len(arr), size=(cfg.n_bootstrap, len(arr)))
        s = arr[idx].sum(axis=1)  # (B, 3)
        d = (s[:, 2] - s[:, 1]) / s[:, 0]
        lo, hi = np.percentile(d, [2.5, 97.5])
        out[f"delta_{split}"] = (float(lo), float(hi))
    tasks = sorted(set(cost_p) & set(cost_c))
    if tasks:
        arr = np.array([[cost_p[t], cost_c[t]] for t in tasks], dtype=float)
        idx = rng.integers(0, len(arr), size=(cfg.n_bootstrap, len(arr)))
        s = arr[idx].mean(axis=1)
        d = np.where(s[:, 0] > 0, (s[:, 1] - s[:, 0]) / np.where(s[:, 0] > 0, s[:, 0], 1), 0.0)
        lo, hi = np.percentile(d, [2.5, 97.5])
        out["delta_cost"] = (float(lo), float(hi))
    else:
        out["delta_cost"] = (0.0, 0.0)
    return out


def evaluate_gate(
    parent: Mapping[Split | str, Verdicts],
    candidate: Mapping[Split | str, Verdicts],
    parent_cost: Mapping[str, float],
    candidate_cost: Mapping[str, float],
    config: GateConfig | None = None,
) -> GateReport:
    """Gate one candidate against its parent.

    ``parent``/``candidate``: per split (``target``, ``heldout``, ``preservation``) the matched
    verdicts ``{(task_id, seed, constraint_id): passed}``; a missing split counts as empty
    (Δ = 0). ``parent_cost``/``candidate_cost``: generator-seconds per task (summed over seeds)
    for every validated task. Returns a ``GateReport`` whose ``reasons`` list every failed
    condition. Raises ``GateInputError`` when the verdicts are not matched or the target split
    is empty.
    """
    cfg = config or GateConfig()
    splits = [s.value for s in Split]
    par = {s: dict(parent.get(s, parent.get(Split(s), {}))) for s in splits}
    can = {s: dict(candidate.get(s, candidate.get(Split(s), {}))) for s in splits}
    for s in splits:
        _check_matched(s, par[s], can[s])
    if not par["target"]:
        raise GateInputError("the target split has no verdicts")
    d = {s: _delta(par[s], can[s]) for s in splits}
    st = sign_test(par["target"], can["target"])
    n_pres = len(par["preservation"])
    eps = cfg.epsilon
    if eps is None:
        eps = max(cfg.epsilon_floor, 1.0 / n_pres) if n_pres else cfg.epsilon_floor
    regression = max(0.0, -d["preservation"])
    cp = sum(parent_cost.values()) / len(parent_cost) if parent_cost else 0.0
    cc = sum(candidate_cost.values()) / len(candidate_cost) if candidate_cost else 0.0
    d_cost = _relative_cost(cp, cc)
    utility = d["target"] - cfg.lam * regression - cfg.mu * d_cost
    reasons: list[str] = []
    if not d["target"] > 0:
        reasons.append(f"delta_target {d['target']:+.4f} is not > 0")
    if not st.p_value < cfg.alpha:
        reasons.append(
            f"delta_target not significant: sign test p={st.p_value:.4f} >= alpha={cfg.alpha} "
            f"({st.wins} wins, {st.losses} losses)"
        )
    if not d["heldout"] >= 0:
        reasons.append(f"delta_heldout {d['heldout']:+.4f} < 0")
    if not regression <= eps + 1e-12:
        reasons.append(f"regression {regression:.4f} > epsilon {eps:.4f}")
    if not utility > 0:
        reasons.append(
            f"utility {utility:+.4f} <= 0 (delta_target {d['target']:+.4f} - {cfg.lam}*"
            f"regression {regression:.4f} - {cfg.mu}*delta_cost {d_cost:+.4f})"
        )
    per_split = {s: _per_task(par[s], can[s]) for s in splits}
    ci = _bootstrap(per_split, parent_cost, candidate_cost, cfg)
    rates = {
        s: {
            "parent": (sum(par[s].values()) / len(par[s])) if par[s] else 0.0,
            "candidate": (sum(can[s].values()) / len(can[s])) if can[s] else 0.0,
            "n": float(len(par[s])),
        }
        for s in splits
    }
    return GateReport(
        delta_target=d["target"],
        delta_heldout=d["heldout"],
        delta_preservation=d["preservation"],
        regression=regression,
        delta_cost=d_cost,
        utility=utility,
        p_value=st.p_value,
        n_discordant=st.wins + st.losses,
        epsilon=eps,
        ci95=ci,
        pass_rates=rates,
        accepted=not reasons,
        reasons=reasons or ["all gate conditions hold"],
    )


def rank_key(report: GateReport) -> tuple[float, float, float]:
    """Sort key for accepted candidates: highest utility, then Δtarget, then lowest p."""
    return (report.utility, report.delta_target, -report.p_value)
