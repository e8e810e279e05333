"""The price of cost (issue 29, "a fix at the cause beats a mask"): a candidate that buys the
same final pass rate with more generations loses to one that restores first attempts at no
extra cost; the cost weight and a per-request generator budget are explicit settings."""

from __future__ import annotations

import pytest

from evoharness.trace.gates import GateConfig, GateEvidence, charged_cost, evaluate_gate, rank_key


def _verdicts(per_task: list[list[bool]]) -> dict:
    return {(f"t{i}", s, "c0"): v for i, row in enumerate(per_task) for s, v in enumerate(row)}


PARENT = _verdicts([[False] * 4 for _ in range(8)])
FIXED = _verdicts([[True] * 4 for _ in range(8)])
COST = {f"t{i}": 4.0 for i in range(8)}


def _gate(cost: float, first: dict, cfg: GateConfig | None = None):
    return evaluate_gate(
        {"target": PARENT},
        {"target": FIXED},
        COST,
        {t: cost for t in COST},
        cfg or GateConfig.before_spending(n_bootstrap=0),
        evidence=GateEvidence(first_attempt=(PARENT, first)),
    )


def test_a_fix_at_the_cause_ranks_above_a_mask_with_the_same_final_pass_rate() -> None:
    cause = _gate(4.0, FIXED)  # first attempts pass, no extra generation
    mask = _gate(7.2, PARENT)  # first attempts still fail; +80% generator-seconds repair them
    assert cause.accepted and mask.accepted
    assert cause.delta_target == mask.delta_target == 1.0
    assert cause.delta_first_attempt == 1.0 and mask.delta_first_attempt == 0.0
    # the stated price: 20 pp per +100% generator-seconds, so +80% costs 16 pp
    assert mask.utility == pytest.approx(1.0 - 0.2 * 0.8)
    assert rank_key(cause) > rank_key(mask)
    assert cause.cost_per_request == {"parent": 1.0, "candidate": 1.0}
    assert mask.cost_per_request == {"parent": 1.0, "candidate": pytest.approx(1.8)}
    # at equal cost and equal utility the first-attempt gain still decides
    free_mask = _gate(4.0, PARENT)
    assert free_mask.utility == cause.utility and rank_key(cause) > rank_key(free_mask)


def test_a_per_request_generator_budget_refuses_a_costlier_candidate() -> None:
    cfg = GateConfig.before_spending(n_bootstrap=0, max_cost_increase=0.5)
    mask = _gate(7.2, PARENT, cfg)
    assert not mask.accepted
    assert any("per-request generator budget" in r for r in mask.reasons), mask.reasons
    assert _gate(5.6, PARENT, cfg).accepted  # +40% is inside the budget


def test_a_fault_masked_by_repair_is_judged_on_first_attempts_too() -> None:
    """Verify-and-repair fixes the final images of a harness fault at extra cost; the patch at
    the cause restores the first attempts while the final verdicts barely move. Final
    verdicts alone give the gate no power; first attempts do."""
    final_parent = _verdicts([[True, True, True, i % 4 != 0] for i in range(8)])
    final_child = _verdicts([[True] * 4 for _ in range(8)])
    first_parent = _verdicts([[False, True, False, True] for _ in range(8)])
    first_child = _verdicts([[True, True, True, True] for _ in range(8)])
    cfg = GateConfig.before_spending(n_bootstrap=0)

    def gate(first: tuple | None, cost: float = 4.4):
        return evaluate_gate(
            {"target": final_parent},
            {"target": final_child},
            COST,
            {t: cost for t in COST},
            cfg,
            evidence=GateEvidence(first_attempt=first),
        )

    blind = gate(None)  # 2 of 8 tasks changed, +10% generator-seconds: no power, no utility
    assert not blind.accepted
    seen = gate((first_parent, first_child))
    assert seen.accepted, seen.reasons
    assert seen.delta_first_attempt == 0.5
    assert seen.utility == pytest.approx(0.5 * (1 / 16 + 0.5) - 0.2 * 0.1)
    # first attempts that got worse count against the patch in the same test
    worse = gate((first_child, first_parent))
    assert not worse.accepted


def test_restoring_a_default_is_not_charged_as_new_spending() -> None:
    """Cost is priced against a reference: a candidate whose spending stays within the
    reference cost (the schema defaults' configuration) is charged nothing for it, one that
    spends beyond it is charged the excess, and a user's per-request budget still counts the
    whole increase."""
    few = _verdicts([[i >= 6] * 4 for i in range(8)])  # 6 of 8 tasks fail at 6 steps
    cheap = {t: 1.0 for t in COST}  # the faulty parent: fewer steps, cheaper
    restored = {t: 2.2 for t in COST}  # back to the default: +120%

    def gate(cost: dict, reference: dict | None, cfg: GateConfig | None = None):
        return evaluate_gate(
            {"target": few},
            {"target": FIXED},
            cheap,
            cost,
            cfg or GateConfig(n_bootstrap=0, mu=1.0),
            evidence=GateEvidence(reference_cost=reference),
        )

    parent_priced = gate(restored, None)  # gain 0.75 - 1.0 * 1.2 < 0
    assert not parent_priced.accepted and parent_priced.delta_cost_charged is None
    assert any("utility" in r and "delta_cost +1.2000" in r for r in parent_priced.reasons)
    default_priced = gate(restored, restored)
    assert default_priced.accepted, default_priced.reasons
    assert default_priced.delta_cost == pytest.approx(1.2)
    assert default_priced.delta_cost_charged == 0.0
    assert default_priced.utility == pytest.approx(0.75)
    # beyond the reference the excess is charged: 3.0 against a reference of 2.2 is +0.8
    beyond = gate({t: 3.0 for t in COST}, restored)
    assert beyond.delta_cost_charged == pytest.approx(0.8) and not beyond.accepted
    assert any("charged delta_cost +0.8000 of +2.0000" in r for r in beyond.reasons)
    # a saving counts whole whatever the reference
    assert gate({t: 0.5 for t in COST}, restored).delta_cost_charged == pytest.approx(-0.5)
    # the user's budget is not the reference: +120% over a +50% budget is refused
    budget = gate(restored, restored, GateConfig(n_bootstrap=0, max_cost_increase=0.5))
    assert any("per-request generator budget" in r for r in budget.reasons), budget.reasons


def test_charged_cost_is_the_spending_above_parent_and_reference() -> None:
    assert charged_cost(1.0, 2.0, None) == pytest.approx(1.0)
    assert charged_cost(1.0, 2.0, 2.5) == 0.0
    assert charged_cost(1.0, 2.0, 0.5) == pytest.approx(1.0)  # a cheaper reference: parent's
    assert charged_cost(2.0, 1.0, 4.0) == pytest.approx(-0.5)
