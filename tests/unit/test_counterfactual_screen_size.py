"""The first pass's screen size (``counterfactual_plan.screen_size``, issue 29): bounds,
monotone in the budget, and the hypergeometric chance it is chosen to raise."""

from __future__ import annotations

import itertools
import math

import pytest

from evoharness.trace.counterfactual_plan import p_screen_includes_cause, screen_size


def test_screen_size_takes_what_the_budget_affords() -> None:
    # 10 levers at 1.5 calls a pair: 120 calls afford 8 pairs each
    assert screen_size(12, 10, 120.0, 1.5) == 8


@pytest.mark.parametrize(
    ("n_failing", "n_levers", "budget", "per_pair", "want"),
    [
        (12, 10, 0.0, 1.0, 4),  # no budget: still the minimum
        (12, 10, 1e9, 1.0, 12),  # plenty: every failing pair, never more
        (3, 10, 0.0, 1.0, 3),  # fewer failing pairs than the minimum: all of them
        (3, 10, 1e9, 1.0, 3),
        (0, 10, 1e9, 1.0, 0),
        (12, 0, 0.0, 1.0, 12),  # no lever to share the budget with
    ],
)
def test_screen_size_bounds(
    n_failing: int, n_levers: int, budget: float, per_pair: float, want: int
) -> None:
    assert screen_size(n_failing, n_levers, budget, per_pair) == want


def test_screen_size_is_within_bounds_and_monotone_in_budget() -> None:
    for n_failing, n_levers, per_pair in itertools.product(
        [0, 1, 4, 7, 12, 30], [1, 3, 17], [1.0, 1.7, 4.0]
    ):
        sizes = [screen_size(n_failing, n_levers, b, per_pair) for b in range(0, 2100, 7)]
        lo = min(4, n_failing)
        assert all(lo <= n <= n_failing for n in sizes), (n_failing, n_levers, per_pair)
        assert sizes == sorted(sizes), (n_failing, n_levers, per_pair)
        assert sizes[-1] == n_failing  # enough budget reaches every failing pair


def test_screen_size_shrinks_with_more_levers_or_dearer_pairs() -> None:
    assert screen_size(30, 5, 100.0, 1.0) > screen_size(30, 10, 100.0, 1.0)
    assert screen_size(30, 5, 100.0, 1.0) > screen_size(30, 5, 100.0, 2.0)


def test_screen_size_minimum_is_the_config_floor() -> None:
    assert screen_size(12, 10, 0.0, 1.0, minimum=2) == 2


@pytest.mark.parametrize(
    "args",
    [(-1, 1, 1.0, 1.0), (1, -1, 1.0, 1.0), (1, 1, -1.0, 1.0), (1, 1, 1.0, 0.0)],
)
def test_screen_size_rejects_bad_input(args: tuple[int, int, float, float]) -> None:
    with pytest.raises(ValueError, match="screen_size"):
        screen_size(*args)


def test_p_screen_includes_cause_matches_enumeration() -> None:
    # 12 failing pairs, the first 3 caused: count the draws of n that hold one of them
    for n in range(0, 13):
        draws = list(itertools.combinations(range(12), n))
        hit = sum(any(i < 3 for i in d) for d in draws) / len(draws)
        assert p_screen_includes_cause(12, 3, n) == pytest.approx(hit)
    assert p_screen_includes_cause(12, 3, 4) == pytest.approx(
        1 - math.comb(9, 4) / math.comb(12, 4)
    )
    # the reason for screen_size: a larger screen holds a caused pair more often
    assert p_screen_includes_cause(12, 3, 8) > p_screen_includes_cause(12, 3, 4)
    with pytest.raises(ValueError, match="p_screen_includes_cause"):
        p_screen_includes_cause(5, 6, 1)


def test_budget_sized_screens_are_opt_in() -> None:
    from evoharness.trace.counterfactual_judge import CounterfactualConfig
    from evoharness.trace.counterfactual_plan import first_pass_screen

    # default: the fixed screen, whatever the budget affords
    assert first_pass_screen(CounterfactualConfig(), 12, 10, 120.0, 1.5) == 4
    fixed6 = CounterfactualConfig(screen_pairs=6)
    assert first_pass_screen(fixed6, 12, 10, 1000.0, 1.0) == 6
    budget = CounterfactualConfig(screen_sizing="budget")
    assert first_pass_screen(budget, 12, 10, 120.0, 1.5) == screen_size(12, 10, 120.0, 1.5) == 8
    with pytest.raises(ValueError):
        CounterfactualConfig(screen_sizing="large")  # type: ignore[arg-type]
