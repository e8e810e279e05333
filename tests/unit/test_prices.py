"""``Prices.generator_usd`` and ``Prices.llm_usd``: the one formulas that turn generator-seconds,
generator calls and LLM tokens into USD (budget estimate, run budget, the workflows' round,
search and proposer costs). The values below are worked by hand from their docstrings:
seconds × ``generator_second_usd`` + calls × ``verifier_call_usd`` (one verifier call per
generated image); tokens / 1000 × the per-1k price."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoharness.trace.budget import BudgetConfig, Prices, estimate_budget, load_prices
from evoharness.trace.run_budget import RunSpend

ROOT = Path(__file__).resolve().parents[2]


def test_default_prices_charge_an_h100_hour_and_free_verifier_calls() -> None:
    # DEFAULT_PRICES (evoharness/trace/budget.py): an on-demand H100 at $3/h, verifier $0.
    p = Prices()
    assert p.generator_usd(3600.0, 500.0) == pytest.approx(3.0)  # one hour, calls free
    assert p.generator_usd(90.0, 0.0) == pytest.approx(0.075)  # 90 s × $3/3600 s
    assert p.generator_usd(0.0, 1000.0) == 0.0


def test_the_price_table_of_the_repository() -> None:
    # configs/prices.yaml: generator_second_usd 0.00083, verifier_call_usd 0.0
    p = load_prices(ROOT / "configs" / "prices.yaml")
    assert p.generator_usd(1000.0, 7.0) == pytest.approx(0.83)
    assert p.generator_usd(12.5, 3.0) == pytest.approx(0.010375)


def test_verifier_calls_are_priced_per_generator_call() -> None:
    p = Prices(generator_second_usd=0.001, verifier_call_usd=0.002)
    assert p.generator_usd(120.0, 40.0) == pytest.approx(0.12 + 0.08)
    assert p.generator_usd(0.0, 40.0) == pytest.approx(0.08)
    assert p.generator_usd(120.0, 0.0) == pytest.approx(0.12)


def test_the_budget_estimate_and_the_run_budget_price_with_it() -> None:
    p = Prices(
        generator_second_usd=0.001,
        verifier_call_usd=0.002,
        llm_prompt_per_1k_usd=0.0,
        llm_completion_per_1k_usd=0.0,
    )
    est = estimate_budget(
        BudgetConfig(n_target=6, n_heldout=4, rounds=2, proposer="rule"), prices=p
    ).upper
    assert est.cost_usd == p.generator_usd(est.generator_seconds, est.generator_calls) > 0
    spend = RunSpend().add_round(
        {"generator_seconds": 120.0, "generator_calls": 40.0, "llm_usd": 0.5}, False, p
    )
    assert spend.usd == pytest.approx(0.2 + 0.5)


def test_llm_tokens_are_priced_per_thousand() -> None:
    """Hand-worked: 2,000 prompt tokens at $0.00015/1k and 500 completion tokens at
    $0.0006/1k cost $0.0003 + $0.0003."""
    p = Prices()
    assert p.llm_usd(2000, 500) == pytest.approx(0.0006)
    assert p.llm_usd(0, 0) == 0.0
    q = Prices(llm_prompt_per_1k_usd=0.01, llm_completion_per_1k_usd=0.03)
    assert q.llm_usd(1500, 1000) == pytest.approx(0.015 + 0.03)
