"""The task-level gate (issue 16, finding 4): fresh validation seeds, the sign-flip permutation
test on per-task differences, two looks at Pocock's boundary, Holm's correction, and the
utility/regression/cost/bootstrap figures with exact expected values."""

from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import binomtest

from evoharness.trace.gate_stats import holm_adjust, sign_flip_test
from evoharness.trace.gates import (
    GateConfig,
    apply_holm,
    evaluate_gate,
    task_deltas,
    validation_seeds,
)

CFG = GateConfig.before_spending(n_bootstrap=200)


def _tasks(prefix: str, per_task: list[list[bool]]) -> dict:
    """Verdicts ``(prefix<i>, seed, "c0")`` for task i over its seeds."""
    return {
        (f"{prefix}{i}", s, "c0"): v for i, row in enumerate(per_task) for s, v in enumerate(row)
    }


def _improve(n_tasks: int, n_better: int, k: int = 4) -> tuple[dict, dict]:
    """Parent fails every verdict; the candidate passes every seed of the first n_better."""
    par = _tasks("t", [[False] * k for _ in range(n_tasks)])
    can = _tasks("t", [[i < n_better] * k for i in range(n_tasks)])
    return par, can


def test_validation_seeds_are_fresh_blocks_after_the_analysis_seeds() -> None:
    assert validation_seeds([0, 1, 2, 3]) == [4, 5, 6, 7]
    assert validation_seeds([0, 1, 2, 3], look=2) == [8, 9, 10, 11]
    assert validation_seeds([5, 9]) == [10, 11]
    assert validation_seeds([5, 9], 2) == [12, 13]
    with pytest.raises(ValueError, match="empty"):
        validation_seeds([])
    assert validation_seeds([0, 1, 2, 3], look=3) == [12, 13, 14, 15]
    for bad in (0, 4):
        with pytest.raises(ValueError, match="look"):
            validation_seeds([0], look=bad)


def test_task_deltas_average_over_seeds_and_constraints() -> None:
    par = {("a", 0, "c0"): False, ("a", 1, "c0"): False, ("a", 0, "c1"): True, ("a", 1, "c1"): True}
    par.update({("b", 0, "c0"): True, ("b", 1, "c0"): True})
    can = dict(par)
    can[("a", 0, "c0")] = True  # +1 of 4 verdicts
    can[("b", 1, "c0")] = False  # -1 of 2
    assert task_deltas(par, can) == {"a": pytest.approx(0.25), "b": pytest.approx(-0.5)}


@pytest.mark.parametrize(
    ("d", "p"),
    [
        ([1.0] * 6, 1 / 64),
        ([1.0] * 5, 1 / 32),
        ([0.5, -0.25, 0.25], 3 / 8),
        ([0.5, -0.25, 0.25, 0.0, 0.0], 3 / 8),  # zero differences do not change the test
        ([-1.0, -1.0], 1.0),
        ([0.25, 0.5, 1.0], 1 / 8),
        ([1.0, -1.0], 3 / 4),
    ],
)
def test_sign_flip_test_exact_values(d: list[float], p: float) -> None:
    r = sign_flip_test(d)
    assert r.p_value == pytest.approx(p)
    assert r.method == "exact" and r.n_draws == 2 ** sum(1 for x in d if x)
    assert r.n_tasks == len(d) and r.n_nonzero == sum(1 for x in d if x)
    assert r.statistic == pytest.approx(sum(d))


def test_sign_flip_test_of_no_change_is_one() -> None:
    r = sign_flip_test([0.0, 0.0, 0.0])
    assert (r.p_value, r.n_tasks, r.n_nonzero, r.method) == (1.0, 3, 0, "exact")


def test_sign_flip_test_matches_the_binomial_for_equal_magnitudes() -> None:
    # with |d_t| all equal the sign-flip test is the exact sign test over tasks
    d = [1.0] * 9 + [-1.0] * 3
    want = binomtest(9, 12, 0.5, alternative="greater").pvalue
    assert sign_flip_test(d).p_value == pytest.approx(want)


def test_monte_carlo_is_seeded_and_bounded_away_from_zero() -> None:
    rng = np.random.default_rng(7)
    d = list(rng.normal(0.05, 0.3, size=40))
    a = sign_flip_test(d, n_permutations=2000, seed=1)
    b = sign_flip_test(d, n_permutations=2000, seed=1)
    c = sign_flip_test(d, n_permutations=2000, seed=2)
    assert a.method == "monte_carlo" and a.n_draws == 2000
    assert a.p_value == b.p_value and a.p_value != c.p_value
    assert abs(a.p_value - c.p_value) < 0.05
    # every draw below the observed sum: p = 1/(1 + draws), never 0 (Phipson & Smyth 2010)
    assert sign_flip_test([1.0] * 30, n_permutations=1000).p_value == pytest.approx(1 / 1001)
    # exact while 2^m <= n_permutations
    assert sign_flip_test([1.0] * 10, n_permutations=1024).method == "exact"
    assert sign_flip_test([1.0] * 11, n_permutations=1024).method == "monte_carlo"


def test_sign_flip_test_rejects_non_finite() -> None:
    with pytest.raises(ValueError, match="finite"):
        sign_flip_test([0.1, float("nan")])


def test_holm_adjusted_p_values() -> None:
    adj = holm_adjust({"a": 0.01, "b": 0.04, "c": 0.03})
    assert adj == {"a": pytest.approx(0.03), "b": pytest.approx(0.06), "c": pytest.approx(0.06)}
    assert holm_adjust({"a": 0.6, "b": 0.7}) == {"a": 1.0, "b": 1.0}
    assert holm_adjust({"x": 0.02}) == {"x": pytest.approx(0.02)}
    assert holm_adjust({}) == {}


def test_apply_holm_rejects_what_the_family_does_not_support() -> None:
    par, can = _improve(12, 12)
    strong = evaluate_gate({"target": par}, {"target": can}, {}, {}, CFG)
    assert strong.accepted and strong.p_value == pytest.approx(1 / 4096)
    weak = strong.model_copy(update={"p_value": 0.02})
    weaker = strong.model_copy(update={"p_value": 0.025})
    kept = apply_holm({"s": strong, "w": weak}, 0.0294)
    assert kept["s"].accepted and kept["w"].accepted
    assert kept["w"].p_holm == pytest.approx(0.02) and kept["s"].p_holm == pytest.approx(2 / 4096)
    out = apply_holm({"w": weak, "x": weaker}, 0.0294)
    assert not out["w"].accepted and not out["x"].accepted
    assert out["x"].p_holm == pytest.approx(0.04)
    assert any("Holm" in r for r in out["x"].reasons)
    assert "all gate conditions hold" not in out["x"].reasons
    assert weak.accepted and weak.p_holm is None  # not modified in place
    # a candidate already rejected keeps its own reasons
    rejected = strong.model_copy(update={"accepted": False, "reasons": ["delta_heldout -0.1 < 0"]})
    r = apply_holm({"a": rejected, "b": weak}, 0.0294)["a"]
    assert r.reasons == ["delta_heldout -0.1 < 0"]


def test_six_improved_tasks_are_significant_five_are_not() -> None:
    par, can = _improve(6, 6)
    r = evaluate_gate({"target": par}, {"target": can}, {}, {}, CFG)
    assert r.accepted and r.p_value == pytest.approx(1 / 64) and r.test == "sign_flip_exact"
    assert (r.n_tasks, r.n_tasks_changed, r.look, r.second_look) == (6, 6, 1, False)
    assert r.seeds == [0, 1, 2, 3]
    # the old verdict-level test called 24 correlated flips p = 2^-24; it is reported only
    assert r.sign_test_p == pytest.approx(2.0**-24) and r.n_discordant == 24
    par5, can5 = _improve(5, 5)
    r5 = evaluate_gate({"target": par5}, {"target": can5}, {}, {}, CFG)
    assert not r5.accepted and r5.p_value == pytest.approx(1 / 32)


def test_second_look_zone() -> None:
    par, can = _improve(3, 3)  # p = 1/8: in [0.0294, 0.2)
    r1 = evaluate_gate({"target": par}, {"target": can}, {}, {}, CFG)
    assert r1.second_look and not r1.accepted
    assert any("second look" in x for x in r1.reasons)
    r2 = evaluate_gate({"target": par}, {"target": can}, {}, {}, CFG, look=2)
    assert not r2.second_look and not r2.accepted and r2.look == 2
    one_look = GateConfig.before_spending(n_bootstrap=0, max_looks=1)
    assert not evaluate_gate({"target": par}, {"target": can}, {}, {}, one_look).second_look
    # p = 1/4 >= 0.2: the decision stands
    par2, can2 = _improve(2, 2)
    assert not evaluate_gate({"target": par2}, {"target": can2}, {}, {}, CFG).second_look
    # p = 1/8 but below a configured extension bound of 0.1: no second look
    low = GateConfig.before_spending(n_bootstrap=0, extend_below=0.1)
    assert not evaluate_gate({"target": par}, {"target": can}, {}, {}, low).second_look
    # p just at alpha is not significant (strict <)
    at = GateConfig.before_spending(n_bootstrap=0, alpha=1 / 8)
    assert evaluate_gate({"target": par}, {"target": can}, {}, {}, at).second_look
    above = GateConfig.before_spending(n_bootstrap=0, alpha=0.13)
    assert evaluate_gate({"target": par}, {"target": can}, {}, {}, above).accepted
    # another failed condition: no second look either (more seeds cannot fix held-out)
    held_p = _tasks("h", [[True] * 4])
    held_c = _tasks("h", [[True, True, True, False]])
    r = evaluate_gate(
        {"target": par, "heldout": held_p}, {"target": can, "heldout": held_c}, {}, {}, CFG
    )
    assert not r.second_look and not r.accepted
    with pytest.raises(ValueError, match="look"):
        evaluate_gate({"target": par}, {"target": can}, {}, {}, CFG, look=3)


def test_utility_penalises_regression_and_relative_cost() -> None:
    par, can = _improve(8, 8)  # delta_target = 1
    pres_p = _tasks("p", [[True] * 4 for _ in range(10)])  # 40 verdicts
    pres_c = dict(pres_p)
    pres_c[("p0", 0, "c0")] = False  # regression 1/40
    cfg = GateConfig.before_spending(n_bootstrap=0, lam=0.5, mu=0.05, epsilon=0.05)
    r = evaluate_gate(
        {"target": par, "preservation": pres_p},
        {"target": can, "preservation": pres_c},
        {"t0": 2.0, "t1": 2.0},
        {"t0": 3.0, "t1": 3.0},
        cfg,
    )
    assert r.regression == pytest.approx(1 / 40) and r.delta_preservation == pytest.approx(-1 / 40)
    assert r.delta_cost == pytest.approx(0.5)  # (3 - 2) / 2, normalised by the parent's
    assert r.utility == pytest.approx(1.0 - 0.5 / 40 - 0.05 * 0.5)
    assert r.epsilon == pytest.approx(0.05) and r.accepted
    # a configured epsilon is honoured, both ways
    tight = cfg.model_copy(update={"epsilon": 0.0})
    r0 = evaluate_gate(
        {"target": par, "preservation": pres_p},
        {"target": can, "preservation": pres_c},
        {},
        {},
        tight,
    )
    assert not r0.accepted and r0.epsilon == 0.0
    assert any("regression" in x and "epsilon" in x for x in r0.reasons)
    # a big lambda turns the regression into a negative utility
    heavy = cfg.model_copy(update={"lam": 50.0})
    rh = evaluate_gate(
        {"target": par, "preservation": pres_p},
        {"target": can, "preservation": pres_c},
        {},
        {},
        heavy,
    )
    assert rh.utility == pytest.approx(1.0 - 50 / 40) and not rh.accepted
    # a saving counts for the candidate: cost halves, utility rises by mu/2
    cheap = evaluate_gate({"target": par}, {"target": can}, {"t0": 4.0}, {"t0": 2.0}, cfg)
    assert cheap.delta_cost == pytest.approx(-0.5)
    assert cheap.utility == pytest.approx(1.0 + 0.025)


def test_cost_from_nothing_and_improvement_in_preservation_is_no_regression() -> None:
    par, can = _improve(8, 8)
    pres_p = _tasks("p", [[False] * 4])
    pres_c = _tasks("p", [[True] * 4])
    r = evaluate_gate(
        {"target": par, "preservation": pres_p},
        {"target": can, "preservation": pres_c},
        {"t0": 0.0},
        {"t0": 1.0},
        CFG,
    )
    assert r.regression == 0.0 and r.delta_preservation == pytest.approx(1.0)
    assert r.delta_cost == 1.0
    free = evaluate_gate({"target": par}, {"target": can}, {"t0": 0.0}, {"t0": 0.0}, CFG)
    assert free.delta_cost == 0.0


def _reference_ci(per_task: list[tuple[int, int, int]], b: int, seed: int) -> tuple[float, float]:
    arr = np.array(per_task, dtype=float)
    rng = np.random.default_rng(seed)
    idx = rng.integers(0, len(arr), size=(b, len(arr)))
    s = arr[idx].sum(axis=1)
    d = (s[:, 2] - s[:, 1]) / s[:, 0]
    lo, hi = np.percentile(d, [2.5, 97.5])
    return float(lo), float(hi)


def test_bootstrap_interval_is_the_seeded_task_cluster_percentile_interval() -> None:
    gen = np.random.default_rng(3)
    rows = [[bool(x) for x in gen.random(4) < (i % 5) / 4] for i in range(15)]
    par = _tasks("t", [[False] * 4 for _ in rows])
    can = _tasks("t", rows)
    per_task = [(4, 0, sum(r)) for r in rows]
    for seed in (0, 5):
        cfg = GateConfig.before_spending(n_bootstrap=400, bootstrap_seed=seed)
        r = evaluate_gate({"target": par}, {"target": can}, {}, {}, cfg)
        assert r.ci95["delta_target"] == pytest.approx(_reference_ci(per_task, 400, seed))
    a = evaluate_gate(
        {"target": par}, {"target": can}, {}, {}, GateConfig.before_spending(bootstrap_seed=0)
    )
    b = evaluate_gate(
        {"target": par}, {"target": can}, {}, {}, GateConfig.before_spending(bootstrap_seed=1)
    )
    assert a.ci95["delta_target"] != b.ci95["delta_target"]
    assert (
        evaluate_gate(
            {"target": par}, {"target": can}, {}, {}, GateConfig.before_spending(n_bootstrap=0)
        ).ci95
        == {}
    )


def test_cost_objective_gates_the_saving_at_equal_quality() -> None:
    from evoharness.trace.gates import cost_savings

    same = _tasks("t", [[True] * 4 for _ in range(8)])
    par_cost = {f"t{i}": 4.0 for i in range(8)}
    can_cost = {f"t{i}": 2.0 for i in range(8)}
    assert cost_savings(same, par_cost, can_cost) == {f"t{i}": 0.5 for i in range(8)}
    assert cost_savings(same, {}, can_cost) == {f"t{i}": 0.0 for i in range(8)}
    assert cost_savings({}, par_cost, can_cost) == {}
    cfg = GateConfig.before_spending(n_bootstrap=0)
    r = evaluate_gate({"target": same}, {"target": same}, par_cost, can_cost, cfg, objective="cost")
    assert r.accepted and r.objective == "cost" and r.p_value == pytest.approx(1 / 256)
    assert r.delta_target == 0.0 and r.delta_cost == pytest.approx(-0.5)
    assert r.utility == pytest.approx(0.1)  # mu 0.2 (20 pp per +100%) x the 50% saving
    # the quality objective rejects the same candidate: nothing improved
    q = evaluate_gate({"target": same}, {"target": same}, par_cost, can_cost, cfg)
    assert not q.accepted and q.objective == "quality" and q.p_value == 1.0
    # a saving that loses quality is rejected
    worse = dict(same)
    worse[("t0", 0, "c0")] = False
    w = evaluate_gate(
        {"target": same}, {"target": worse}, par_cost, can_cost, cfg, objective="cost"
    )
    assert not w.accepted and any("must not lose quality" in x for x in w.reasons)
    # no saving on most tasks: not significant
    few = dict(par_cost)
    few["t0"] = 2.0
    n = evaluate_gate({"target": same}, {"target": same}, par_cost, few, cfg, objective="cost")
    assert not n.accepted and n.p_value == pytest.approx(0.5)
    assert any("cost saving not significant" in x for x in n.reasons)
    with pytest.raises(ValueError, match="objective"):
        evaluate_gate({"target": same}, {"target": same}, {}, {}, cfg, objective="speed")


def test_gate_permutation_settings_reach_the_test() -> None:
    rng = np.random.default_rng(11)
    rows = [[bool(x) for x in rng.random(4) < 0.5] for _ in range(30)]
    par = _tasks("t", [[False, True, False, True] for _ in rows])
    can = _tasks("t", rows)
    a = evaluate_gate(
        {"target": par},
        {"target": can},
        {},
        {},
        GateConfig.before_spending(n_bootstrap=0, n_permutations=500),
    )
    b = evaluate_gate(
        {"target": par},
        {"target": can},
        {},
        {},
        GateConfig.before_spending(n_bootstrap=0, n_permutations=500, permutation_seed=9),
    )
    assert a.test == "sign_flip_monte_carlo" and a.p_value != b.p_value
    assert (a.p_value * 501) == pytest.approx(round(a.p_value * 501))  # (1 + hits) / 501


def test_cost_interval_and_split_keys() -> None:
    from evoharness.trace.models import Split

    par, can = _improve(8, 8)
    pc = {f"t{i}": float(i + 1) for i in range(8)}
    cc = {f"t{i}": float(2 * i + 1) for i in range(8)}
    cfg = GateConfig.before_spending(n_bootstrap=300, bootstrap_seed=2)
    r = evaluate_gate({Split.target: par}, {Split.target: can}, pc, cc, cfg)
    assert r.delta_target == 1.0 and r.ci95["delta_heldout"] == (0.0, 0.0)
    # reference: the target resample is drawn first, then the two empty splits, then cost
    rng = np.random.default_rng(2)
    rng.integers(0, 8, size=(300, 8))
    arr = np.array([[pc[t], cc[t]] for t in sorted(pc)])
    s = arr[rng.integers(0, 8, size=(300, 8))].mean(axis=1)
    d = (s[:, 1] - s[:, 0]) / s[:, 0]
    assert r.ci95["delta_cost"] == pytest.approx(tuple(np.percentile(d, [2.5, 97.5])))
    lo, hi = r.ci95["delta_cost"]
    assert lo < r.delta_cost < hi
    none = evaluate_gate({"target": par}, {"target": can}, {}, {}, cfg)
    assert none.ci95["delta_cost"] == (0.0, 0.0)
    with pytest.raises(Exception, match="split heldout"):
        evaluate_gate(
            {"target": par, "heldout": _tasks("h", [[True]])}, {"target": can}, {}, {}, cfg
        )


def test_single_changed_task_and_report_figures() -> None:
    from evoharness.trace.gates import rank_key

    up = sign_flip_test([0.0, 0.25])
    assert (up.p_value, up.statistic, up.n_tasks, up.n_nonzero, up.method, up.n_draws) == (
        0.5,
        0.25,
        2,
        1,
        "exact",
        2,
    )
    assert sign_flip_test([-0.25]).p_value == 1.0
    zero = sign_flip_test([0.0])
    assert (zero.statistic, zero.n_draws) == (0.0, 1)
    par = _tasks("t", [[False, False, True, True]] * 2)
    can = _tasks("t", [[True, False, True, True]] * 2)
    r = evaluate_gate(
        {"target": par}, {"target": can}, {}, {}, GateConfig.before_spending(n_bootstrap=0)
    )
    assert r.pass_rates["target"] == {"parent": 0.5, "candidate": 0.75, "n": 8.0}
    assert r.pass_rates["heldout"] == {"parent": 0.0, "candidate": 0.0, "n": 0.0}
    better = r.model_copy(update={"p_value": 0.01})
    assert rank_key(better) > rank_key(r)
    # a task missing from the candidate's cost map costs nothing there
    from evoharness.trace.gates import cost_savings

    assert cost_savings(par, {"t0": 2.0}, {}) == {"t0": 2.0, "t1": 0.0}  # mean cost 1


def test_held_out_tasks_are_test_units_by_default() -> None:
    """Five improved target tasks sit on the exact test's floor (p = 2^-5 > 0.0294); three
    improved held-out tasks lift it to 2^-8. A held-out task that got worse counts against."""
    par, can = _improve(5, 5)
    hp, hc = _improve(3, 3)
    hp = {("h" + t, s, c): v for (t, s, c), v in hp.items()}
    hc = {("h" + t, s, c): v for (t, s, c), v in hc.items()}
    pooled = evaluate_gate(
        {"target": par, "heldout": hp}, {"target": can, "heldout": hc}, {}, {}, CFG
    )
    assert pooled.accepted and pooled.p_value == pytest.approx(1 / 256)
    assert (pooled.n_tasks, pooled.n_tasks_changed) == (8, 8)
    only = GateConfig.before_spending(n_bootstrap=0, test_splits=["target"])
    old = evaluate_gate(
        {"target": par, "heldout": hp}, {"target": can, "heldout": hc}, {}, {}, only
    )
    assert not old.accepted and old.p_value == pytest.approx(1 / 32)
    assert any("of target changed" in r for r in old.reasons)
    # the held-out tasks got worse instead: they count against the target's gain
    worse = evaluate_gate(
        {"target": par, "heldout": hc}, {"target": can, "heldout": hp}, {}, {}, CFG
    )
    assert not worse.accepted and worse.p_value > 0.2


def test_test_splits_must_hold_the_target_and_never_preservation() -> None:
    for bad in (["heldout"], ["target", "preservation"], ["target", "target"], []):
        with pytest.raises(ValueError, match="test_splits"):
            GateConfig.before_spending(test_splits=bad)
