"""A power model of the validation gate on simulated, correlated verdicts (issue 16, finding 4).

What it simulates, per run (``simulate``):

- T target tasks × C constraints; a task's difficulty is shared by its constraints and seeds:
  logit P(pass) = μ_t + ν_tc + u_ts with μ_t ~ N(``base_logit``, ``task_sd``), ν_tc ~ N(0,
  ``constraint_sd``) and a per-image effect u_ts ~ N(0, ``image_sd``) shared by every
  constraint of one (task, seed) image — so verdicts of one task are correlated across seeds
  and constraints, as real ones are;
- the parent runs on the K analysis seeds; the *cluster* is every task with a failing verdict
  there (what localization would choose); the candidate changes the programs of the cluster's
  tasks only: there it draws new images (independent noise), elsewhere its images — and so its
  verdicts — are the parent's (same program, same seed: the content-addressed world);
- a useful patch additionally turns each failing verdict of a cluster task into a pass with
  probability r, calibrated so the expected Δ pass rate over the target split is ``effect``
  (``effect`` 0: a useless patch).

Rules (``RULES``):

- ``reused`` — the gate before issue 16: the parent's analysis executions are the baseline and
  the candidate runs on the same seeds; one-sided exact sign test over discordant
  (task, seed, constraint) pairs at α = 0.05 (``gate_stats.sign_test``) and Δtarget > 0;
- ``task_sign`` — fresh seeds, a plain one-sided sign test over tasks (d_t > 0 vs d_t < 0,
  ``scipy.stats.binomtest``) at α = 0.05, one look;
- ``fresh`` — the gate of 2026-12-01 (``gates.evaluate_gate`` with ``test_splits=["target"]``):
  fresh seeds, the task-level sign-flip test over target tasks at 0.0294, a second look with K
  more fresh seeds when 0.0294 ≤ p < 0.2;
- ``pocock`` — the gate before 2026-12-06 (``GateConfig(spending="fixed")``): target and
  held-out tasks as test units, both looks at Pocock's 0.0294; its second look draws K more
  fresh seeds on the held-out tasks too, as ``round_core`` does;
- ``pooled`` — the gate as implemented (``GateConfig()`` defaults): the same units and looks,
  with O'Brien–Fleming-type alpha spending (``gate_sequential``: 0.0056, then 0.0482).

Held-out tasks (``n_heldout``) are drawn like target tasks; the patch touches those that would
have failed on K hypothetical analysis seeds (a patch aimed at a failure pattern triggers where
the pattern is) and helps them with the same r — it generalises as well as it works. With
``n_heldout`` 0 only the target split is simulated (a patch touching only the cluster leaves
held-out and preservation verdicts unchanged, so those conditions hold).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from pydantic import BaseModel, ConfigDict, Field
from scipy.stats import binomtest, norm

from evoharness.trace.aggregate import wilson_interval
from evoharness.trace.gate_config import GateConfig
from evoharness.trace.gate_inputs import task_deltas
from evoharness.trace.gate_stats import Verdicts, sign_test
from evoharness.trace.gates import evaluate_gate
from evoharness.trace.models import Split

#: The gate rules the model compares (module docstring).
RULES = ("reused", "task_sign", "fresh", "pocock", "pooled")

#: Fixed normal quantiles for E_u[sigmoid(x + u)] (midpoint rule over 64 equal-mass bins).
_U = norm.ppf((np.arange(64) + 0.5) / 64)


class PowerScenario(BaseModel):
    """One simulated setting (units: tasks, seeds, constraints per task; ``effect`` is an
    absolute Δ in mean pass rate over the target split, e.g. 0.03 = +3 pp)."""

    model_config = ConfigDict(extra="forbid")

    n_tasks: int = Field(default=60, ge=2)
    n_heldout: int = Field(default=0, ge=0)
    seeds: int = Field(default=4, ge=1)
    constraints: int = Field(default=2, ge=1)
    effect: float = Field(default=0.0, ge=0.0, le=1.0)
    base_logit: float = 1.2
    task_sd: float = Field(default=1.5, ge=0.0)
    constraint_sd: float = Field(default=0.75, ge=0.0)
    image_sd: float = Field(default=1.0, ge=0.0)


@dataclass(frozen=True)
class PowerResult:
    """Acceptance rate of ``rule`` over ``n_sims`` simulated runs with its Wilson 95% interval,
    the mean observed Δtarget and the share of runs that took a second look."""

    rule: str
    accepted: int
    n_sims: int
    rate: float
    ci95: tuple[float, float]
    mean_delta: float
    second_looks: float


def _sigmoid(x: np.ndarray) -> np.ndarray:
    return np.asarray(1.0 / (1.0 + np.exp(-x)))


def _draw(logit: np.ndarray, k: int, sd: float, rng: np.random.Generator) -> np.ndarray:
    """Verdicts (T, K, C) for per-(task, constraint) logits (T, C) on k new images per task."""
    t, c = logit.shape
    u = rng.normal(0.0, sd, size=(t, k, 1))
    return np.asarray(rng.random((t, k, c)) < _sigmoid(logit[:, None, :] + u))


def _verdicts(v: np.ndarray, seed0: int) -> dict[tuple[str, int, str], bool]:
    t, k, c = v.shape
    return {
        (f"t{i}", seed0 + s, f"c{j}"): bool(v[i, s, j])
        for i in range(t)
        for s in range(k)
        for j in range(c)
    }


def _uplift(
    base: np.ndarray, cluster: np.ndarray, r: float, rng: np.random.Generator
) -> np.ndarray:
    """Candidate verdicts on cluster tasks: each failure becomes a pass with probability r."""
    fix = (rng.random(base.shape) < r) & cluster[:, None, None]
    return np.asarray(base | fix)


def _candidate(
    parent: np.ndarray,
    logit: np.ndarray,
    cluster: np.ndarray,
    r: float,
    image_sd: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Candidate verdicts: new images on the cluster's tasks (uplifted by r), the parent's
    verdicts elsewhere."""
    new = _draw(logit, parent.shape[1], image_sd, rng)
    c = np.asarray(np.where(cluster[:, None, None], new, parent))
    return _uplift(c, cluster, r, rng) if r > 0 else c


def simulate(
    scenario: PowerScenario,
    rule: str,
    n_sims: int = 500,
    seed: int = 0,
    gate: GateConfig | None = None,
) -> PowerResult:
    """Acceptance rate of ``rule`` (one of ``RULES``) on ``scenario`` over ``n_sims`` seeded
    runs (module docstring). ``gate`` configures the ``fresh`` rule (default: ``GateConfig``
    without bootstrap). Raises ``ValueError`` for an unknown rule."""
    if rule not in RULES:
        raise ValueError(f"simulate: rule {rule!r} is not one of {RULES}")
    cfg = gate or GateConfig(n_bootstrap=0)
    tgt, held = Split.target.value, Split.heldout.value
    splits = [tgt, held] if rule in ("pooled", "pocock") else [tgt]
    if rule in ("pocock", "fresh"):
        cfg = GateConfig.before_spending(
            n_bootstrap=cfg.n_bootstrap,
            n_permutations=cfg.n_permutations,
            permutation_seed=cfg.permutation_seed,
        )
    cfg = cfg.model_copy(update={"test_splits": splits})
    rng = np.random.default_rng(seed)
    sc = scenario
    k = sc.seeds
    accepted = 0
    deltas: list[float] = []
    second = 0
    for _ in range(n_sims):
        mu = rng.normal(sc.base_logit, sc.task_sd, size=(sc.n_tasks, 1))
        logit = mu + rng.normal(0.0, sc.constraint_sd, size=(sc.n_tasks, sc.constraints))
        analysis = _draw(logit, k, sc.image_sd, rng)
        cluster = np.asarray(~analysis.all(axis=(1, 2)))
        # r such that E[Δ] = effect: expected failures of cluster tasks per target verdict
        p_pass = _sigmoid(logit[:, :, None] + sc.image_sd * _U[None, None, :]).mean(axis=2)
        fail_mass = float(((1 - p_pass) * cluster[:, None]).mean())
        r = min(1.0, sc.effect / fail_mass) if sc.effect > 0 and fail_mass > 0 else 0.0

        def candidate(parent: np.ndarray) -> np.ndarray:
            return _candidate(parent, logit, cluster, r, sc.image_sd, rng)  # noqa: B023

        # held-out tasks: drawn like target tasks, touched where they would have failed
        mu_h = rng.normal(sc.base_logit, sc.task_sd, size=(sc.n_heldout, 1))
        logit_h = mu_h + rng.normal(0.0, sc.constraint_sd, size=(sc.n_heldout, sc.constraints))
        touched_h = np.asarray(~_draw(logit_h, k, sc.image_sd, rng).all(axis=(1, 2)))
        ph = _draw(logit_h, k, sc.image_sd, rng)
        ch = _candidate(ph, logit_h, touched_h, r, sc.image_sd, rng)
        par_h = {("h" + t, s, c): v for (t, s, c), v in _verdicts(ph, k).items()}
        can_h = {("h" + t, s, c): v for (t, s, c), v in _verdicts(ch, k).items()}

        if rule == "reused":
            par = _verdicts(analysis, 0)
            can = _verdicts(candidate(analysis), 0)
            st = sign_test(par, can)
            d = (sum(can.values()) - sum(par.values())) / len(par)
            ok = d > 0 and st.p_value < 0.05
        else:
            pv = _draw(logit, k, sc.image_sd, rng)
            par, can = _verdicts(pv, k), _verdicts(candidate(pv), k)
            if rule == "task_sign":
                dt = list(task_deltas(par, can).values())
                wins, losses = sum(x > 0 for x in dt), sum(x < 0 for x in dt)
                n = wins + losses
                p = binomtest(wins, n, 0.5, alternative="greater").pvalue if n else 1.0
                d = float(np.mean(dt))
                ok = d > 0 and p < 0.05
            else:
                pp: dict[Split | str, Verdicts] = {Split.target: par, Split.heldout: par_h}
                cc: dict[Split | str, Verdicts] = {Split.target: can, Split.heldout: can_h}
                rep = evaluate_gate(pp, cc, {}, {}, cfg)
                second += rep.second_look
                look = 1
                while rep.second_look:
                    # K more fresh seeds on every test split (round_core's further looks)
                    look += 1
                    pv2 = _draw(logit, k, sc.image_sd, rng)
                    par.update(_verdicts(pv2, look * k))
                    can.update(_verdicts(candidate(pv2), look * k))
                    if Split.heldout in cfg.test_splits and sc.n_heldout:
                        ph2 = _draw(logit_h, k, sc.image_sd, rng)
                        ch2 = _candidate(ph2, logit_h, touched_h, r, sc.image_sd, rng)
                        par_h.update(
                            {
                                ("h" + t, s, c): v
                                for (t, s, c), v in _verdicts(ph2, look * k).items()
                            }
                        )
                        can_h.update(
                            {
                                ("h" + t, s, c): v
                                for (t, s, c), v in _verdicts(ch2, look * k).items()
                            }
                        )
                    rep = evaluate_gate(pp, cc, {}, {}, cfg, look=look)
                d = rep.delta_target
                ok = rep.accepted
        accepted += bool(ok)
        deltas.append(d)
    return PowerResult(
        rule=rule,
        accepted=accepted,
        n_sims=n_sims,
        rate=accepted / n_sims,
        ci95=wilson_interval(accepted, n_sims),
        mean_delta=float(np.mean(deltas)),
        second_looks=second / n_sims,
    )
