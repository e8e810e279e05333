"""The price of cost (issue 29, "a fix at the cause beats a mask"): a candidate that buys the
same final pass rate with more generations loses to one that restores first attempts at no
extra cost; the cost weight and a per-request generator budget are explicit settings."""

from __future__ import annotations

import pytest

from evoharness.trace.gates import GateConfig, evaluate_gate, rank_key


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
        first_attempt=(PARENT, first),
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
            first_attempt=first,
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
