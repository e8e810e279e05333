"""The validation gate (TRACE step 6, docs/architecture.md, "Gates are statistical").

For a candidate harness and its parent, evaluated on the same matched (task, seed, constraint)
verdicts over three disjoint splits (target, held-out, preservation), on **fresh seeds**
(``validation_seeds``: seeds K..2K−1 for the first look, 2K..3K−1 for the second, 3K..4K−1
for the third; never the
seeds whose executions chose the cluster, so selection does not fake the improvement — the
same reason AutoRef separates feedback from selection tasks):

- Δsplit = mean pass rate(candidate) − mean pass rate(parent) over the matched verdicts
  (a *net* change: improvements and regressions on the same split cancel);
- the unit of evidence is the **task** (verdicts of one task's seeds and constraints are
  correlated): d_t = mean over the task's (seed, constraint) verdicts of candidate − parent;
  Δtarget must be > 0 **and** significant under the one-sided paired sign-flip permutation
  test on the d_t (Fisher 1935, ch. 21; Good, *Permutation, Parametric and Bootstrap Tests of
  Hypotheses*, 2005, §3.1): T = Σ d_t, p = P[Σ s_t·d_t ≥ T] over independent random signs
  s_t = ±1 (``scipy.stats.permutation_test``) — by exact enumeration of the 2^m sign vectors
  when 2^m ≤ ``n_permutations`` (m nonzero d_t), else by that many seeded Monte Carlo draws with
  p = (1 + #{T* ≥ T}) / (1 + draws) (Phipson & Smyth 2010, an exact-level estimate). Zero d_t
  contribute nothing to any T*, so they are left out;
- **up to three looks, alpha spending** (group-sequential; ``evoharness.trace.gate_sequential``):
  the overall one-sided α = 0.05 is spent over the looks by the Lan–DeMets
  O'Brien–Fleming-type function (Lan & DeMets 1983, Biometrika 70:659; O'Brien & Fleming
  1979, Biometrics 35:549): look k has seen kK of 3K validation seeds per test task
  (information fraction k/3) and rejects when p < 0.0007, 0.0161, 0.0451 (Jennison &
  Turnbull 2000, §7.2). While a look misses significance with nominal ≤ p < ``extend_below``
  (0.7) and only conditions that more seeds measure again fail (significance, Δtarget,
  Δheld-out, utility — not a preservation regression or a cost budget), the caller adds K
  more fresh seeds on the splits whose tasks are test units (target, and held-out under the
  default ``test_splits``) and tests again over every look so far (``GateReport.second_look``
  says when); p ≥ ``extend_below`` stops for futility (non-binding: the boundaries assume
  every look is taken, so stopping only lowers the type-I error). A report's ``p_value`` is
  the stage-wise overall p (Jennison & Turnbull 2000, §8.4), < α exactly when its look
  rejects, so Holm runs on it; the look's own p is ``p_look``. Before 2026-12-06
  (``GateConfig.before_spending()``) two looks tested at Pocock's constant 0.0294 (Pocock
  1977, Biometrika 64:191, table 1), the second only when significance alone was missing and
  p < 0.2: at 8 + 6 tasks × 4 seeds a +10 pp repair was found with power 0.56 (0.82 now; 4.0%
  false accepts, 2.5% before; ``bench/gate_power.py --setting 8+6x4 --sims 400``,
  bench/results/gate-power-2026-12-06-gate29p-after.txt). The extra looks cost generations:
  a useless patch takes at least one further look in 62% of runs (14% before);
- **Holm's correction** (Holm 1979, "A simple sequentially rejective multiple test
  procedure", Scand. J. Statist. 6:65) across the round's gated candidates
  (``apply_holm``): adjusted p_(i) = max_{j≤i} min(1, (m − j + 1)·p_(j)) over the ascending
  p-values, significant when < ``alpha`` — counting only the **testable** candidates
  (Tarone 1990, "A modified Bonferroni method for discrete data", Biometrics 46:526): the
  exact test of a candidate that changed m units cannot go below 2^−m
  (``min_attainable_p``), so a candidate whose test cannot reach α/K* (``tarone_testable``)
  is never significant and does not inflate the others' correction;
- **pooled units** (``GateConfig.test_splits``, default target + held-out): the test's units
  are the tasks of the target *and* held-out splits. With m changed tasks the smallest p an
  exact sign-flip test can reach is 2^−m, so on the target split alone a patch that changes
  five tasks can never pass 0.0294 (2^−5 = 0.031) however large its effect — the fault suite's
  8-task targets hit that floor again and again. Held-out tasks are disjoint from the tasks
  that chose the cluster and are validated on the same fresh seeds, so under H0 their d_t are
  symmetric too and the test stays exact; a patch that helps where it was aimed and also where
  it was not gains power, one that hurts held-out tasks loses it (``bench/gate_power.py``
  compares both rules; ``["target"]`` restores the old one). The second look adds K seeds
  on every test split (before 2026-12-06 on the target split only, while held-out tasks
  kept their K: half the look's new evidence was never drawn);
- **first attempts** (when the caller passes them): a target or held-out task's test unit
  is d_t plus its first-attempt d_t, so a patch at the cause, which restores first attempts
  where it was aimed and on held-out tasks alike, gains power over a resampling stage that
  only buys final passes (issue 29);
- a **cost** candidate (``objective="cost"``) must not add generator calls per request
  (``calls``): fewer generator-seconds bought with more calls is a trade, not a saving;
- Δheld-out ≥ 0;
- regression = max(0, −Δpreservation) ≤ ε, with ε = max(0.01, 1/N_preservation) by default
  (one net flip on the preservation split), and — when ``families`` (task → family) is
  given — per family with at least ``min_family_tasks`` (5) preservation tasks, regression_f
  = max(0, −Δ_f) ≤ ε_f = max(ε floor, 1/N_f) (one net flip among the family's N_f verdicts);
  smaller families count in the aggregate only (``evoharness.trace.preservation``). An empty
  preservation split checks nothing: the report says so in ``GateReport.notes`` (regression
  checked on held-out only), as it does when no family is large enough for its own check;
- Δcost = (cost_candidate − cost_parent) / cost_parent, cost = generator-seconds per task over
  every validated task (normalised by the parent's);
- **cost is priced against a reference** (``charged_cost``): the utility charges only the
  spending above max(parent's cost, reference cost), and every saving below the parent's.
  The reference is the cost of the configuration a user gets without asking — the schema's
  defaults; the caller knows it without running it only for a candidate that puts settings
  back to (or toward) their defaults and adds nothing (``schema_levers.restores_defaults``),
  whose own cost is then the reference (``reference_cost``). A parent that saved by leaving
  the defaults (6 sampling steps where the schema says 30) is not a budget the user set:
  restoring the default is not new spending, and charging it as such refused the fix at the
  cause (+8 pp at "+120% generations") while a resampling stage was free to mask the fault.
  A user's per-request budget (``max_cost_increase``) still counts the whole increase;
- utility = Δtarget − λ·regression − μ·Δcost_charged > 0, λ = 0.5, μ = 0.2: the **price of cost**
  is stated in pass-rate points per +100% generator-seconds per request (μ = 0.2: doubling
  the generations costs 20 pp; issue 29: at the protocol's 0.05 a resampling stage bought
  +80% generations for 4 pp and won over fixes at the cause). ``max_cost_increase`` is an
  optional per-request generator budget: a candidate whose generator-seconds per request
  exceed the parent's by more than that share is refused whatever its gain;
- **a fix at the cause beats a mask**: among accepted candidates ``rank_key`` prefers the
  higher utility, then the larger first-attempt gain (``delta_first_attempt``, when the
  caller passes first-attempt verdicts), then Δtarget: a patch that restores first attempts
  at no extra cost ranks above one that buys the same final pass rate with more
  generations. Every report carries the cost per request (``cost_per_request``).

λ and ε = 0.01 follow the EvoGen-Harness protocol quoted in docs/architecture.md (its μ was
0.05). Every report
carries a paired bootstrap 95% interval for each Δ (Efron & Tibshirani 1993, percentile
method), resampling *tasks* with replacement and keeping each task's seeds and constraints
together (a cluster bootstrap), seeded for repeatability. The exact sign test over discordant
(task, seed, constraint) pairs is still reported (``n_discordant``) but no longer decides: it
treats correlated verdicts as independent (``bench/gate_power.py`` measures both rules).

The tests, the corrections and the bootstrap are computed in ``evoharness.trace.gate_stats``.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from evoharness.trace.gate_config import ALL_HOLD, OBJECTIVES, GateConfig, validation_seeds
from evoharness.trace.gate_holm import apply_holm, rank_key
from evoharness.trace.gate_inputs import (
    GateEvidence,
    GateInputError,
    check_matched,
    cost_savings,
    family_regressions,
    net_delta,
    per_task_counts,
    task_deltas,
)
from evoharness.trace.gate_stats import (
    Verdicts,
    min_attainable_p,
    min_changed_tasks,
    sign_flip_test,
    sign_test,
    task_bootstrap,
)
from evoharness.trace.models import GateReport, Split

#: The gate's public names; those defined in gate_config, gate_inputs, gate_holm and gate_stats
#: are re-exported for callers that import them from here.
__all__ = [
    "GateConfig",
    "GateEvidence",
    "GateInputError",
    "apply_holm",
    "cost_savings",
    "evaluate_gate",
    "family_regressions",
    "min_changed_tasks",
    "quality_gain",
    "rank_key",
    "task_deltas",
    "validation_seeds",
]


def _relative_cost(parent_cost: float, cand_cost: float) -> float:
    if parent_cost > 0:
        return (cand_cost - parent_cost) / parent_cost
    return 0.0 if cand_cost <= 0 else 1.0


def charged_cost(parent_cost: float, cand_cost: float, reference_cost: float | None) -> float:
    """The relative Δcost the utility charges (module docstring, "cost is priced against a
    reference"): a saving (``cand_cost`` ≤ ``parent_cost``) counts whole; an increase only
    above max(``parent_cost``, ``reference_cost``), as a share of ``parent_cost``. Costs are
    generator-seconds per task; ``reference_cost`` None: the parent is the reference."""
    if reference_cost is None or cand_cost <= parent_cost:
        return _relative_cost(parent_cost, cand_cost)
    return max(
        0.0,
        _relative_cost(parent_cost, cand_cost)
        - _relative_cost(parent_cost, max(parent_cost, reference_cost)),
    )


def _bootstrap(
    per_split: Mapping[str, dict[str, tuple[int, int, int]]],
    cost_p: Mapping[str, float],
    cost_c: Mapping[str, float],
    cfg: GateConfig,
) -> dict[str, tuple[float, float]]:
    """Each split's Δ and Δcost interval (``task_bootstrap``, one generator drawn in turn)."""
    out: dict[str, tuple[float, float]] = {}
    if cfg.n_bootstrap == 0:
        return out
    rng = np.random.default_rng(cfg.bootstrap_seed)
    for split, per_task in per_split.items():
        if not per_task:
            out[f"delta_{split}"] = (0.0, 0.0)
            continue
        arr = np.array(list(per_task.values()), dtype=float)  # (T, 3)

        def delta(idx: np.ndarray, arr: np.ndarray = arr) -> np.ndarray:
            s = arr[idx].sum(axis=1)  # (B, 3)
            return np.asarray((s[:, 2] - s[:, 1]) / s[:, 0])

        out[f"delta_{split}"] = task_bootstrap(
            len(arr), delta, n_resamples=cfg.n_bootstrap, seed=rng
        )
    tasks = sorted(set(cost_p) & set(cost_c))
    if tasks:
        arr = np.array([[cost_p[t], cost_c[t]] for t in tasks], dtype=float)

        def cost(idx: np.ndarray) -> np.ndarray:
            s = arr[idx].mean(axis=1)
            return np.where(
                s[:, 0] > 0, (s[:, 1] - s[:, 0]) / np.where(s[:, 0] > 0, s[:, 0], 1), 0.0
            )

        out["delta_cost"] = task_bootstrap(len(arr), cost, n_resamples=cfg.n_bootstrap, seed=rng)
    else:
        out["delta_cost"] = (0.0, 0.0)
    return out


def quality_gain(delta_target: float, delta_first_attempt: float | None) -> float:
    """The quality a candidate adds, for the utility: Δtarget (final verdicts) or, when
    first attempts are known and say more, the mean of Δtarget and Δfirst-attempt. A first
    attempt the repair loop fixes still cost a repair, so restoring it is worth half a final
    verdict (a design choice, not fitted); the larger reading is taken so that a mask
    (Δfirst ≈ 0) is not charged twice — its extra generations are priced by μ already."""
    if delta_first_attempt is None:
        return delta_target
    return max(delta_target, 0.5 * (delta_target + delta_first_attempt))


def evaluate_gate(
    parent: Mapping[Split | str, Verdicts],
    candidate: Mapping[Split | str, Verdicts],
    parent_cost: Mapping[str, float],
    candidate_cost: Mapping[str, float],
    config: GateConfig | None = None,
    look: int = 1,
    objective: str = "quality",
    evidence: GateEvidence | None = None,
) -> GateReport:
    """Gate one candidate against its parent at validation look ``look`` (1..``max_looks``).

    ``evidence`` (``GateEvidence``; None: none of it known) holds ``families``,
    ``first_attempt``, ``calls`` and ``reference_cost``, read as follows.

    ``first_attempt``: (parent, candidate) matched verdicts of the *first* attempts (before
    verify-and-repair or best-of-N) of the target split's tasks and, when given, of the
    held-out split's tasks (a key belongs to the split whose verdicts hold its task); their
    net changes are reported as ``delta_first_attempt`` (target) and
    ``delta_first_attempt_heldout`` (held-out, None without held-out keys) and rank accepted
    candidates (``rank_key``); None: not known. When known, a ``quality`` candidate's test
    unit of a target or held-out task is d_t plus its first-attempt d_t (a fault masked by
    verify-and-repair shows in first attempts, not in final verdicts: testing final verdicts
    alone has no power there; a fix at the cause restores first attempts on held-out tasks
    too, a resampling stage leaves them as they were), Δtarget ≥ 0 is required instead of
    > 0, and the utility's quality term is ``quality_gain``. A first-attempt key of a task
    in neither split raises ``GateInputError``.

    ``calls``: (parent, candidate) generator calls per task (cache-independent: programs
    generated, summed over seeds) over the validated tasks; reported per request in
    ``calls_per_request``. A ``cost`` candidate whose calls per request exceed the parent's is
    refused: a saving of generator-seconds bought with more generator calls (a best-of-N
    stage that spares a costlier repair) is a trade, not a saving. None: not checked.

    ``reference_cost``: generator-seconds per task (as ``parent_cost``) of the reference
    configuration; the utility charges only the spending above it (``charged_cost``,
    reported as ``delta_cost_charged``). None: the parent is the reference.

    ``objective`` ``quality`` (a failure cluster's candidate): Δtarget > 0 and the sign-flip
    test runs on the per-task pass-rate differences d_t. ``cost`` (a cost cluster's
    candidate, ``cluster.cost_clusters``): the patch must save generator-seconds without
    losing quality — Δtarget ≥ 0, and the sign-flip test runs on the per-task relative savings
    s_t = (cost_parent_t − cost_candidate_t) / mean_t cost_parent_t over the target tasks; the
    other conditions (held-out, regression, utility, where −μ·Δcost is the gain) are the same.

    ``parent``/``candidate``: per split (``target``, ``heldout``, ``preservation``) the matched
    verdicts ``{(task_id, seed, constraint_id): passed}`` on fresh validation seeds (at a later
    look the test splits hold every look's seeds so far); a missing split counts as empty (Δ = 0).
    ``parent_cost``/``candidate_cost``: generator-seconds per task (summed over seeds) for
    every validated task. ``families`` (task_id → family of the preservation tasks): also
    check regression per family with at least ``min_family_tasks`` tasks
    (``family_regressions``; reported in ``GateReport.family_regressions``, a failing family
    is named in ``reasons``). Returns a ``GateReport`` whose ``reasons`` list every failed
    condition and whose ``notes`` say what could not be checked (no preservation verdicts;
    no family large enough for its own check); ``second_look`` is True (a further look) when
    significance is missing with nominal ≤ p < ``extend_below`` at a look before
    ``max_looks`` and no failed condition is one more seeds cannot change (module docstring;
    under ``spending="fixed"``: significance is the only one missing). Raises
    ``GateInputError`` when the verdicts are not matched or the target split is empty,
    ``ValueError`` for a look outside 1..``max_looks``.
    """
    cfg = config or GateConfig()
    ev = evidence or GateEvidence()
    families, first_attempt, calls = ev.families, ev.first_attempt, ev.calls
    reference_cost = ev.reference_cost
    if not 1 <= look <= cfg.max_looks:
        raise ValueError(f"evaluate_gate: look={look} must be in 1..{cfg.max_looks}")
    if objective not in OBJECTIVES:
        raise ValueError(f"evaluate_gate: objective={objective!r} must be one of {OBJECTIVES}")
    splits = [s.value for s in Split]
    par = {s: dict(parent.get(s, parent.get(Split(s), {}))) for s in splits}
    can = {s: dict(candidate.get(s, candidate.get(Split(s), {}))) for s in splits}
    for s in splits:
        check_matched(s, par[s], can[s])
    if not par[Split.target]:
        raise GateInputError("the target split has no verdicts")
    d = {s: net_delta(par[s], can[s]) for s in splits}
    st = sign_test(par[Split.target], can[Split.target])
    test_par = {k: v for s in cfg.test_splits for k, v in par[s].items()}
    test_can = {k: v for s in cfg.test_splits for k, v in can[s].items()}
    first_d: dict[str, float] = {}
    d_first = None
    d_first_h = None
    if first_attempt is not None:
        fp, fc = first_attempt
        check_matched("first attempts", fp, fc)
        split_of = {k[0]: s for s in (Split.heldout, Split.target) for k in par[s]}
        stray = sorted({k[0] for k in fp if k[0] not in split_of})[:3]
        if stray:
            raise GateInputError(
                f"first attempts of tasks in neither the target nor the held-out split: {stray}"
            )
        by = {
            s: (
                {k: v for k, v in fp.items() if split_of[k[0]] == s},
                {k: v for k, v in fc.items() if split_of[k[0]] == s},
            )
            for s in (Split.target, Split.heldout)
        }
        d_first = net_delta(*by[Split.target])
        if by[Split.heldout][0]:
            d_first_h = net_delta(*by[Split.heldout])
        first_d = task_deltas(fp, fc)
    if objective == "cost":
        units = list(cost_savings(test_par, parent_cost, candidate_cost).values())
    else:
        units = [v + first_d.get(t, 0.0) for t, v in task_deltas(test_par, test_can).items()]
    pt = sign_flip_test(units, n_permutations=cfg.n_permutations, seed=cfg.permutation_seed)
    n_pres = len(par[Split.preservation])
    eps = cfg.epsilon
    if eps is None:
        eps = max(cfg.epsilon_floor, 1.0 / n_pres) if n_pres else cfg.epsilon_floor
    regression = max(0.0, -d[Split.preservation])
    cp = sum(parent_cost.values()) / len(parent_cost) if parent_cost else 0.0
    cc = sum(candidate_cost.values()) / len(candidate_cost) if candidate_cost else 0.0
    d_cost = _relative_cost(cp, cc)
    cr = sum(reference_cost.values()) / len(reference_cost) if reference_cost else None
    charged = charged_cost(cp, cc, cr)
    gain = quality_gain(d[Split.target], d_first if objective == "quality" else None)
    utility = gain - cfg.lam * regression - cfg.mu * charged
    reasons: list[str] = []
    if objective == "cost" or d_first is not None:
        if not d[Split.target] >= 0:
            reasons.append(f"delta_target {d['target']:+.4f} < 0: the patch must not lose quality")
    if objective == "quality" and not gain > 0:
        reasons.append(
            f"delta_target {d['target']:+.4f} is not > 0"
            if d_first is None
            else f"quality gain {gain:+.4f} is not > 0 (delta_target {d['target']:+.4f}, "
            f"delta_first_attempt {d_first:+.4f})"
        )
    nominal = cfg.nominal(look)
    significant = pt.p_value < nominal
    p_overall = cfg.overall_p(pt.p_value, look)
    p_min = cfg.overall_p(min_attainable_p(pt.n_nonzero, pt.method, pt.n_draws), look)
    if not significant:
        what = "cost saving" if objective == "cost" else "delta_target"
        design = "" if cfg.spending == "fixed" else f", {cfg.spending} spending of {cfg.alpha}"
        reasons.append(
            f"{what} not significant at look {look}: task-level sign-flip test "
            f"p={pt.p_value:.4f} >= alpha={nominal:.4g} (look {look} of {cfg.max_looks}"
            f"{design}; {pt.n_nonzero} of {pt.n_tasks} tasks "
            f"of {'+'.join(cfg.test_splits)} changed, {pt.method})"
        )
    if not d[Split.heldout] >= 0:
        reasons.append(f"delta_heldout {d['heldout']:+.4f} < 0")
    # the reasons so far are the quality conditions that more fresh seeds on the test splits
    # measure again (a further look may settle them); those after, not (preservation, cost)
    n_remeasured = len(reasons)
    if not regression <= eps + 1e-12:
        reasons.append(f"regression {regression:.4f} > epsilon {eps:.4f}")
    fam = (
        family_regressions(
            par[Split.preservation],
            can[Split.preservation],
            families,
            cfg.min_family_tasks,
            cfg.epsilon_floor,
        )
        if families is not None
        else {}
    )
    for f, r in fam.items():
        if not r["regression"] <= r["epsilon"] + 1e-12:
            reasons.append(
                f"regression in family {f or '(none)'} {r['regression']:.4f} > epsilon "
                f"{r['epsilon']:.4f} ({int(r['tasks'])} tasks)"
            )
    notes: list[str] = []
    if not n_pres:
        notes.append(
            "preservation set empty: no preservation verdicts, so regression was checked on "
            "held-out only (delta_heldout >= 0)"
        )
    elif families is not None and not fam:
        n_tasks = len({k[0] for k in par[Split.preservation]})
        notes.append(
            f"no preservation family has >= {cfg.min_family_tasks} tasks ({n_tasks} tasks in "
            "all): regression checked in aggregate only"
        )
    calls_pr: dict[str, float] = {}
    if calls is not None:
        n_req = max(1, len({(k[0], k[1]) for sp in splits for k in par[sp]}))
        calls_pr = {
            "parent": sum(calls[0].values()) / n_req,
            "candidate": sum(calls[1].values()) / n_req,
        }
        if objective == "cost" and calls_pr["candidate"] > calls_pr["parent"] + 1e-12:
            reasons.append(
                f"generator calls per request {calls_pr['parent']:.3f} -> "
                f"{calls_pr['candidate']:.3f}: a cost saving must not add generator calls"
            )
    if cfg.max_cost_increase is not None and d_cost > cfg.max_cost_increase + 1e-12:
        reasons.append(
            f"delta_cost {d_cost:+.4f} over the per-request generator budget "
            f"+{cfg.max_cost_increase:.4f}"
        )
    hard = len(reasons) > n_remeasured
    if not utility > 0:
        priced = (
            f"delta_cost {d_cost:+.4f}"
            if charged == d_cost
            else f"charged delta_cost {charged:+.4f} of {d_cost:+.4f} above the reference"
        )
        reasons.append(
            f"utility {utility:+.4f} <= 0 (quality gain {gain:+.4f} - {cfg.lam}*"
            f"regression {regression:.4f} - {cfg.mu}*{priced})"
        )
    second = (
        look < cfg.max_looks
        and not significant
        and pt.p_value < cfg.extend_below
        and (len(reasons) == 1 if cfg.spending == "fixed" else not hard)
    )
    if second:
        reasons.append(
            f"p={pt.p_value:.4f} in [{nominal:.4g}, {cfg.extend_below}): {'second' if look == 1 else 'third'} look with K "
            "more fresh seeds"
        )
    per_split = {s: per_task_counts(par[s], can[s]) for s in splits}
    ci = _bootstrap(per_split, parent_cost, candidate_cost, cfg)
    rates = {
        s: {
            "parent": (sum(par[s].values()) / len(par[s])) if par[s] else 0.0,
            "candidate": (sum(can[s].values()) / len(can[s])) if can[s] else 0.0,
            "n": float(len(par[s])),
        }
        for s in splits
    }
    n_seeds = max(1, len({k[1] for k in par[Split.target]}))
    return GateReport(
        delta_first_attempt=d_first,
        delta_first_attempt_heldout=d_first_h,
        p_min=p_min,
        calls_per_request=calls_pr,
        cost_per_request={"parent": cp / n_seeds, "candidate": cc / n_seeds},
        delta_cost_charged=None if cr is None else charged,
        delta_target=d[Split.target],
        delta_heldout=d[Split.heldout],
        delta_preservation=d[Split.preservation],
        regression=regression,
        delta_cost=d_cost,
        utility=utility,
        p_value=p_overall,
        p_look=pt.p_value,
        nominal_alpha=nominal,
        n_discordant=st.wins + st.losses,
        epsilon=eps,
        ci95=ci,
        pass_rates=rates,
        accepted=not reasons,
        reasons=reasons or [ALL_HOLD],
        notes=notes,
        test=f"sign_flip_{pt.method}",
        objective=objective,
        look=look,
        second_look=second,
        n_tasks=pt.n_tasks,
        n_tasks_changed=pt.n_nonzero,
        sign_test_p=st.p_value,
        seeds=sorted({k[1] for k in par[Split.target]}),
        family_regressions=fam,
    )
