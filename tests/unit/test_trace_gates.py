"""Gate properties (docs/architecture.md "Gates are statistical")."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evoharness.trace.gates import GateConfig, GateInputError, evaluate_gate, sign_test

CFG = GateConfig.before_spending(n_bootstrap=200)


def _split(prefix: str, bits: list[bool]) -> dict:
    return {(f"{prefix}{i // 4}", i % 4, "c0"): b for i, b in enumerate(bits)}


pairs = st.lists(st.tuples(st.booleans(), st.booleans()), min_size=1, max_size=40)


def _verdicts(t, h, p):
    par = {
        "target": _split("t", [a for a, _ in t]),
        "heldout": _split("h", [a for a, _ in h]),
        "preservation": _split("p", [a for a, _ in p]),
    }
    can = {
        "target": _split("t", [b for _, b in t]),
        "heldout": _split("h", [b for _, b in h]),
        "preservation": _split("p", [b for _, b in p]),
    }
    return par, can


@settings(max_examples=60, deadline=None)
@given(pairs, pairs, pairs)
def test_swapping_parent_and_candidate_flips_every_delta(t, h, p) -> None:
    par, can = _verdicts(t, h, p)
    cost = {"t0": 1.0}
    a = evaluate_gate(par, can, cost, cost, CFG)
    b = evaluate_gate(can, par, cost, cost, CFG)
    assert a.delta_target == pytest.approx(-b.delta_target)
    assert a.delta_heldout == pytest.approx(-b.delta_heldout)
    assert a.delta_preservation == pytest.approx(-b.delta_preservation)
    assert a.n_discordant == b.n_discordant
    assert not (a.accepted and b.accepted)


@settings(max_examples=60, deadline=None)
@given(pairs, pairs, pairs)
def test_accepted_implies_every_condition(t, h, p) -> None:
    par, can = _verdicts(t, h, p)
    r = evaluate_gate(par, can, {"t0": 1.0}, {"t0": 1.0}, CFG)
    if r.accepted:
        assert r.delta_target > 0 and r.p_value < 0.05
        assert r.delta_heldout >= 0 and r.regression <= r.epsilon and r.utility > 0
    for k in ("delta_target", "delta_heldout", "delta_preservation", "delta_cost"):
        lo, hi = r.ci95[k]
        assert lo <= hi


@settings(max_examples=40, deadline=None)
@given(st.integers(min_value=4, max_value=60), st.integers(min_value=0))
def test_one_lucky_flip_is_never_significant(n: int, where: int) -> None:
    base = [False] * n
    lucky = list(base)
    lucky[where % n] = True
    par = {"target": _split("t", base)}
    can = {"target": _split("t", lucky)}
    r = evaluate_gate(par, can, {}, {}, CFG)
    assert r.n_discordant == 1 and r.p_value == pytest.approx(0.5)
    assert not r.accepted
    assert any("not significant" in x for x in r.reasons)


def test_five_clean_wins_are_significant_and_four_are_not() -> None:
    assert sign_test(_split("t", [False] * 5), _split("t", [True] * 5)).p_value == pytest.approx(
        1 / 32
    )
    assert sign_test(_split("t", [False] * 4), _split("t", [True] * 4)).p_value == pytest.approx(
        1 / 16
    )


def test_regression_epsilon_defaults_to_one_net_flip() -> None:
    tgt_p, tgt_c = [False] * 32, [True] * 32  # 8 tasks, all improved: p = 1/256
    pres = [True] * 50
    pres_one = [True] * 49 + [False]
    pres_two = [True] * 48 + [False, False]
    par = {"target": _split("t", tgt_p), "preservation": _split("p", pres)}
    ok = evaluate_gate(
        par, {"target": _split("t", tgt_c), "preservation": _split("p", pres_one)}, {}, {}, CFG
    )
    assert ok.epsilon == pytest.approx(1 / 50) and ok.regression == pytest.approx(1 / 50)
    assert ok.accepted
    bad = evaluate_gate(
        par, {"target": _split("t", tgt_c), "preservation": _split("p", pres_two)}, {}, {}, CFG
    )
    assert not bad.accepted and any("regression" in x for x in bad.reasons)
    # with a big preservation split the floor 0.01 applies
    big = evaluate_gate(
        {"target": _split("t", tgt_p), "preservation": _split("p", [True] * 400)},
        {"target": _split("t", tgt_c), "preservation": _split("p", [True] * 400)},
        {},
        {},
        CFG,
    )
    assert big.epsilon == pytest.approx(0.01)


def test_heldout_drop_and_cost_rejects() -> None:
    par = {"target": _split("t", [False] * 8), "heldout": _split("h", [True] * 8)}
    can = {"target": _split("t", [True] * 8), "heldout": _split("h", [True] * 7 + [False])}
    r = evaluate_gate(par, can, {}, {}, CFG)
    assert not r.accepted and any("heldout" in x for x in r.reasons)
    # utility: delta_target 1/8 with cost x4 -> 0.125 - 0.05*3 < 0
    par2 = {"target": _split("t", [False] * 7 + [True])}
    can2 = {"target": _split("t", [True] * 8)}
    r2 = evaluate_gate(
        {"target": _split("t", [False] * 5 + [True] * 35)},
        {"target": _split("t", [True] * 40)},
        {"t0": 1.0},
        {"t0": 4.0},
        GateConfig.before_spending(n_bootstrap=0, mu=0.05),
    )
    assert r2.delta_cost == pytest.approx(3.0)
    assert r2.utility == pytest.approx(5 / 40 - 0.15)
    assert not r2.accepted and any("utility" in x for x in r2.reasons)
    assert evaluate_gate(par2, can2, {}, {}, CFG).delta_target == pytest.approx(7 / 8)


def test_unmatched_verdicts_are_an_error() -> None:
    with pytest.raises(GateInputError, match="not matched"):
        evaluate_gate(
            {"target": _split("t", [True] * 4)}, {"target": _split("t", [True] * 3)}, {}, {}, CFG
        )
    with pytest.raises(GateInputError, match="target"):
        evaluate_gate({}, {}, {}, {}, CFG)


def test_bootstrap_is_seeded() -> None:
    par = {"target": _split("t", [False, True] * 20)}
    can = {"target": _split("t", [True, True] * 20)}
    a = evaluate_gate(par, can, {}, {}, GateConfig.before_spending(bootstrap_seed=3))
    b = evaluate_gate(par, can, {}, {}, GateConfig.before_spending(bootstrap_seed=3))
    assert a.ci95 == b.ci95
    lo, hi = a.ci95["delta_target"]
    assert lo <= a.delta_target <= hi and lo > 0
