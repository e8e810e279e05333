"""The gate's thresholds at their exact boundaries (``evoharness.trace.gates``): the fewest
changed tasks that can pass, and each acceptance condition at a tie."""

from __future__ import annotations

import warnings

import pytest

from evoharness.trace.gates import (
    GateConfig,
    GateEvidence,
    apply_holm,
    evaluate_gate,
    family_regressions,
    min_changed_tasks,
    validation_seeds,
)


@pytest.mark.parametrize(
    ("alpha", "n_candidates", "m"),
    [
        (0.0294, 1, 6),  # 2^-5 = 0.031 >= 0.0294 > 2^-6
        (0.0294, 2, 7),  # Holm over two: 0.0147 < 2^-6 = 0.0156
        (0.0294, 4, 8),
        (0.25, 1, 3),  # a tie: 2^-2 = 0.25 is not < 0.25
        (0.5, 1, 2),
        (0.6, 1, 1),
        (0.99, 1, 1),
    ],
)
def test_min_changed_tasks_is_the_smallest_m_with_two_to_the_minus_m_below_the_level(
    alpha: float, n_candidates: int, m: int
) -> None:
    got = min_changed_tasks(alpha, n_candidates)
    assert got == m
    assert 2.0**-got < alpha / n_candidates <= 2.0 ** -(got - 1)


def test_min_changed_tasks_refuses_a_level_outside_the_unit_interval() -> None:
    for alpha, n in ((0.0, 1), (1.0, 1), (1.5, 1), (-0.1, 1), (0.05, 0)):
        with pytest.raises(ValueError) as exc:
            min_changed_tasks(alpha, n)
        assert str(exc.value) == f"min_changed_tasks: alpha={alpha}, n_candidates={n}"
    assert min_changed_tasks(0.05) == 5  # the default is one candidate


# ------------------------------------------------------------------------ family regressions

#: Preservation verdicts (task, seed, "c"): family "" (tasks x0..x2, not in FAMILIES), "a"
#: (a0..a2) and "0small" (two tasks), two seeds each.
FAMILIES = {"a0": "a", "a1": "a", "a2": "a", "s0": "0small", "s1": "0small"}


def _pres(passes: dict[str, tuple[bool, bool]]) -> dict[tuple[str, int, str], bool]:
    return {(t, s, "c"): v for t, vs in passes.items() for s, v in enumerate(vs)}


PRES_PARENT = _pres(
    {
        "x0": (True, True),
        "x1": (True, True),
        "x2": (True, False),
        "a0": (False, False),
        "a1": (False, True),
        "a2": (False, False),
        "s0": (True, True),
        "s1": (True, True),
    }
)
PRES_CAND = _pres(
    {
        "x0": (True, False),
        "x1": (False, True),
        "x2": (True, False),
        "a0": (True, True),
        "a1": (False, True),
        "a2": (True, False),
        "s0": (False, False),
        "s1": (False, False),
    }
)


def test_family_regressions_exact_figures_per_family() -> None:
    fr = family_regressions(PRES_PARENT, PRES_CAND, FAMILIES, 3, 0.01)
    # "0small" has two tasks < 3: left out (it sorts before "a", which is still reported)
    assert list(fr) == ["", "a"]
    assert fr[""] == {
        "tasks": 3.0,
        "verdicts": 6.0,
        "delta": pytest.approx(-2 / 6),
        "regression": pytest.approx(2 / 6),
        "epsilon": pytest.approx(1 / 6),
    }
    assert fr["a"] == {
        "tasks": 3.0,
        "verdicts": 6.0,
        "delta": pytest.approx(3 / 6),
        "regression": 0.0,
        "epsilon": pytest.approx(1 / 6),
    }
    # the floor wins over one net flip when it is larger
    assert family_regressions(PRES_PARENT, PRES_CAND, FAMILIES, 3, 0.5)["a"]["epsilon"] == 0.5
    # at min_tasks = 2 the small family counts: it lost all four verdicts
    small = family_regressions(PRES_PARENT, PRES_CAND, FAMILIES, 2, 0.01)["0small"]
    assert (small["tasks"], small["verdicts"], small["delta"], small["regression"]) == (
        2.0,
        4.0,
        -1.0,
        1.0,
    )
    assert family_regressions(PRES_PARENT, PRES_CAND, FAMILIES, 4, 0.01) == {}


def test_a_regressing_unnamed_family_is_named_none_in_the_reasons() -> None:
    tgt_p = {(f"t{i}", s, "c"): False for i in range(8) for s in range(2)}
    tgt_c = dict.fromkeys(tgt_p, True)
    cfg = GateConfig.before_spending(n_bootstrap=0, epsilon=1.0, min_family_tasks=3)
    rep = evaluate_gate(
        {"target": tgt_p, "preservation": PRES_PARENT},
        {"target": tgt_c, "preservation": PRES_CAND},
        {},
        {},
        cfg,
        evidence=GateEvidence(families=FAMILIES),
    )
    assert rep.accepted is False
    assert rep.reasons == ["regression in family (none) 0.3333 > epsilon 0.1667 (3 tasks)"]
    assert set(rep.family_regressions) == {"", "a"}


# ------------------------------------------------------------------- other exact boundaries


def test_holm_at_exactly_alpha_is_not_significant() -> None:
    tgt_p = {(f"t{i}", 0, "c"): False for i in range(8)}
    tgt_c = dict.fromkeys(tgt_p, True)
    rep = evaluate_gate(
        {"target": tgt_p}, {"target": tgt_c}, {}, {}, GateConfig.before_spending(n_bootstrap=0)
    )
    assert rep.accepted and rep.p_value == 1 / 256
    a = rep.model_copy(update={"p_value": 0.25})
    b = rep.model_copy(update={"p_value": 0.25})
    out = apply_holm({"a": a, "b": b}, 0.5)  # adjusted p = 2 * 0.25 = 0.5 = alpha
    assert out["a"].p_holm == 0.5 and out["a"].accepted is False
    assert out["a"].reasons == [
        "not significant after Holm's correction over 2 candidates: adjusted p=0.5000 >= alpha=0.5"
    ]
    assert apply_holm({"a": a, "b": b}, 0.5000001)["a"].accepted is True


def test_missing_splits_change_nothing_and_still_get_intervals() -> None:
    tgt_p = {(f"t{i}", 0, "c"): False for i in range(8)}
    tgt_c = dict.fromkeys(tgt_p, True)
    pres = {("p0", 0, "c"): True, ("p1", 0, "c"): True}
    rep = evaluate_gate(
        {"target": tgt_p, "preservation": pres},
        {"target": tgt_c, "preservation": dict(pres)},
        {"t0": 1.0},
        {"t0": 1.0},
        GateConfig.before_spending(n_bootstrap=50),
    )
    assert (rep.delta_heldout, rep.delta_preservation) == (0.0, 0.0)
    # the empty held-out split gets (0, 0) and the splits after it their own intervals
    assert rep.ci95 == {
        "delta_target": (1.0, 1.0),
        "delta_heldout": (0.0, 0.0),
        "delta_preservation": (0.0, 0.0),
        "delta_cost": (0.0, 0.0),
    }
    assert rep.pass_rates["heldout"] == {"parent": 0.0, "candidate": 0.0, "n": 0.0}


def test_validation_seeds_errors_are_exact() -> None:
    with pytest.raises(ValueError, match=r"^validation_seeds: the analysis seed list is empty$"):
        validation_seeds([])
    with pytest.raises(ValueError, match=r"^validation_seeds: look=4 must be in 1\.\.3$"):
        validation_seeds([0], look=4)


@pytest.mark.parametrize(
    ("parent_cost", "candidate_cost", "interval"),
    [
        ({"t0": 0.0}, {"t0": 2.0}, (0.0, 0.0)),  # no parent cost: no relative change
        ({"t0": 0.5}, {"t0": 1.0}, (1.0, 1.0)),  # a parent cost below 1 still divides
        ({"t0": 2.0}, {"t0": 0.0}, (-1.0, -1.0)),  # a saving, divided by the parent's cost
        # only tasks costed for both harnesses enter the interval
        ({"t0": 2.0, "t1": 5.0}, {"t0": 3.0}, (0.5, 0.5)),
    ],
)
def test_cost_interval_at_zero_and_small_parent_costs(
    parent_cost: dict[str, float], candidate_cost: dict[str, float], interval: tuple
) -> None:
    tgt_p = {(f"t{i}", 0, "c"): False for i in range(8)}
    tgt_c = dict.fromkeys(tgt_p, True)
    with warnings.catch_warnings():
        warnings.simplefilter("error", RuntimeWarning)  # the zero-cost guard divides by nothing
        rep = evaluate_gate(
            {"target": tgt_p},
            {"target": tgt_c},
            parent_cost,
            candidate_cost,
            GateConfig.before_spending(n_bootstrap=20),
        )
    assert rep.ci95["delta_cost"] == pytest.approx(interval)
