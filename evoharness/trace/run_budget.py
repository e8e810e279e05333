"""Budgets and stop conditions of an evolution run, written once for both drivers: the
durable workflow (``workflows.evolution.EvolutionWorkflow``) and the in-process beam
(``evoharness.trace.beam.run_beam``). No I/O and no clock: the drivers pass the elapsed wall
time (the workflow from ``workflow.now()``, which replays deterministically). The search
protocols (``evoharness.search.protocols``) stop on the same spend budgets
(``SpendBudget``, ``exhausted``) before each step.

A run stops *after* the round that crosses a budget (a round is never cut short by one):
before each round the driver asks ``crossed(budget, spend)``; the first limit reached names
the stop, in this order:

- ``max_rounds``: rounds run ≥ ``max_rounds``;
- ``budget_usd``: money spent (the report's cost model: generator-seconds × the price per
  generator-second + verifier calls × their price + the LLM proposer's tokens × their prices,
  ``evoharness.trace.budget.Prices``) ≥ the budget;
- ``budget_generator_calls``: generator calls actually made (cache hits cost none,
  ``round.round_cost``) ≥ the budget;
- ``budget_generator_seconds``: generator-seconds actually spent ≥ the budget;
- ``budget_wall_s``: wall-clock seconds since the run started ≥ the budget;
- ``stop_after_no_patch``: N consecutive rounds without improvement, i.e. without a child
  accepted by a gate (an accepted child beat its parent on the gate's test units and joins
  the frontier; a round whose children only pass gates without being chosen keeps counting).

Other stops, decided by the drivers and named here so reports say one word for each:
``stop`` (the hard stop signal: the current phase finishes), ``graceful_stop`` (the current
round finishes, gate and all) and ``frontier_exhausted`` (``trace.beam.frontier_exhausted``).

``refuse_too_small`` refuses, before a run starts, a budget smaller than the dry-run
estimate of one round (``trace.budget.estimate_budget`` with ``rounds=1``, its *expected*
figure: with the cache hits a first round can have). Wall time and no-improvement rounds
have no such estimate and are not checked.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt

from evoharness.trace.budget import BudgetFigures, Prices

#: What stopped a run: a budget's parameter name, or one of the drivers' stops.
StopKind = Literal[
    "max_rounds",
    "budget_usd",
    "budget_generator_calls",
    "budget_generator_seconds",
    "budget_wall_s",
    "stop_after_no_patch",
    "stop",
    "graceful_stop",
    "frontier_exhausted",
]

#: The budgets a run may be given (the run parameters' names), for docs and errors.
BUDGETS: tuple[StopKind, ...] = (
    "budget_usd",
    "budget_generator_calls",
    "budget_generator_seconds",
    "budget_wall_s",
    "stop_after_no_patch",
)


class SpendBudget(BaseModel):
    """The budgets on what a run spends (None: no limit; 0: nothing may be spent): money in
    USD, generator calls, generator-seconds, wall-clock seconds. The budgets every driver
    honours, TRACE's rounds and the search protocols' steps alike (``exhausted``)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    budget_usd: float | None = Field(default=None, ge=0)
    budget_generator_calls: StrictInt | None = Field(default=None, ge=0)
    budget_generator_seconds: float | None = Field(default=None, ge=0)
    budget_wall_s: float | None = Field(default=None, ge=0)


class RunBudget(SpendBudget):
    """The limits of one TRACE run: its spend budgets (``SpendBudget``), ``max_rounds`` ≥ 1
    and ``stop_after_no_patch`` ≥ 1, which always apply."""

    max_rounds: StrictInt = Field(ge=1)
    stop_after_no_patch: StrictInt = Field(default=2, ge=1)


class RunSpend(BaseModel):
    """What a run has used so far: ``rounds`` finished, money (USD), generator calls and
    seconds actually spent, wall seconds since it started, and ``no_improvement``: the
    consecutive rounds since the last one that accepted a child."""

    model_config = ConfigDict(extra="forbid")

    rounds: int = 0
    usd: float = 0.0
    generator_calls: int = 0
    generator_seconds: float = 0.0
    wall_s: float = 0.0
    no_improvement: int = 0

    def add_round(
        self, cost: Mapping[str, float], improved: bool, prices: Prices | None = None
    ) -> RunSpend:
        """This spend after one more round (of a beam: call once per round with the
        parents' costs summed, ``round_costs``) whose report ``cost`` holds the
        ``round.round_cost`` totals and, from the workflow, ``spend_usd``; ``improved``: a
        gate accepted a child. Without ``spend_usd`` the money is priced here with
        ``prices`` (generator-seconds and verifier calls, as the workflow's finalize does;
        None: no money counted). ``wall_s`` is left as it is (the driver sets it)."""
        usd = cost.get("spend_usd")
        if usd is None and prices is not None:
            usd = prices.generator_usd(
                float(cost.get("generator_seconds", 0.0)), float(cost.get("generator_calls", 0.0))
            ) + float(cost.get("llm_usd", 0.0))
        return self.model_copy(
            update={
                "rounds": self.rounds + 1,
                "usd": self.usd + float(usd or 0.0),
                "generator_calls": self.generator_calls + int(cost.get("generator_calls", 0)),
                "generator_seconds": self.generator_seconds
                + float(cost.get("generator_seconds", 0.0)),
                "no_improvement": 0 if improved else self.no_improvement + 1,
            }
        )


def round_costs(costs: list[Mapping[str, float]]) -> dict[str, float]:
    """The summed ``cost`` of a round's reports (one per beam parent)."""
    out: dict[str, float] = {}
    for c in costs:
        for k, v in c.items():
            out[k] = out.get(k, 0.0) + float(v)
    return out


class Stop(BaseModel):
    """Why a run stopped: ``by`` (a ``StopKind``) and the sentence reports print."""

    model_config = ConfigDict(frozen=True)

    by: StopKind
    reason: str


def crossed(budget: RunBudget, spend: RunSpend) -> Stop | None:
    """The first limit of ``budget`` that ``spend`` has reached (module docstring, in its
    order), or None when another round may run."""
    b, s = budget, spend
    if s.rounds >= b.max_rounds:
        return Stop(by="max_rounds", reason=f"max rounds ({b.max_rounds}) reached")
    hit = exhausted(b, s)
    if hit is not None:
        return hit
    if s.no_improvement >= b.stop_after_no_patch:
        return Stop(
            by="stop_after_no_patch",
            reason=f"{s.no_improvement} consecutive No-Patch rounds",
        )
    return None


def exhausted(budget: SpendBudget, spend: RunSpend) -> Stop | None:
    """The first spend budget of ``budget`` that ``spend`` has reached (``budget_usd``,
    ``budget_generator_calls``, ``budget_generator_seconds``, ``budget_wall_s``, in that
    order; reached: spent ≥ the budget, so a budget of 0 is reached before anything is
    spent), or None. ``spend``'s ``rounds`` and ``no_improvement`` are not read."""
    b, s = budget, spend
    if b.budget_usd is not None and s.usd >= b.budget_usd:
        return Stop(
            by="budget_usd",
            reason=f"budget exhausted (spent ${s.usd:.4f} of ${b.budget_usd:.4f})",
        )
    if b.budget_generator_calls is not None and s.generator_calls >= b.budget_generator_calls:
        return Stop(
            by="budget_generator_calls",
            reason=f"generator-call budget exhausted ({s.generator_calls} of "
            f"{b.budget_generator_calls})",
        )
    if b.budget_generator_seconds is not None and s.generator_seconds >= b.budget_generator_seconds:
        return Stop(
            by="budget_generator_seconds",
            reason=f"generator-seconds budget exhausted ({s.generator_seconds:.1f} s of "
            f"{b.budget_generator_seconds:.1f} s)",
        )
    if b.budget_wall_s is not None and s.wall_s >= b.budget_wall_s:
        return Stop(
            by="budget_wall_s",
            reason=f"wall-time budget exhausted ({s.wall_s:.0f} s of {b.budget_wall_s:.0f} s)",
        )
    return None


class BudgetTooSmall(ValueError):
    """A budget below the estimate of one round (``refuse_too_small``)."""


def refuse_too_small(budget: RunBudget, one_round: BudgetFigures | None) -> None:
    """Raise ``BudgetTooSmall`` naming the budget, its value and the one-round estimate
    when ``budget_usd``, ``budget_generator_calls`` or ``budget_generator_seconds`` is below
    ``one_round`` (the expected figures of ``estimate_budget`` with ``rounds=1``): such a
    run would stop after its first round having spent more than it was allowed. The
    estimate has no wall time: ``budget_wall_s`` is refused when it is not above 0 s (the
    run would stop at its first check). ``one_round`` None (the splits cannot be counted):
    only that wall-time check."""
    wall = budget.budget_wall_s
    if wall is not None and wall <= 0:
        raise BudgetTooSmall(
            f"budget_wall_s = {wall} is too small for one round: a wall-time budget must be "
            "above 0 s (the dry-run estimate has no wall time); raise it, or leave it out"
        )
    if one_round is None:
        return
    checks = (
        ("budget_usd", budget.budget_usd, one_round.cost_usd, "${:.4f}"),
        (
            "budget_generator_calls",
            budget.budget_generator_calls,
            one_round.generator_calls,
            "{:.0f} generator calls",
        ),
        (
            "budget_generator_seconds",
            budget.budget_generator_seconds,
            one_round.generator_seconds,
            "{:.1f} generator-seconds",
        ),
    )
    for name, value, need, fmt in checks:
        if value is not None and value < need:
            raise BudgetTooSmall(
                f"{name} = {value} is too small for one round: the dry-run estimate of one "
                f"round is {fmt.format(need)} (expected, with cache hits; "
                "`evoharness evolve start --dry-run-budget` shows the figures); raise it, or "
                "shrink the splits, seeds or candidates"
            )


__all__ = [
    "BUDGETS",
    "BudgetTooSmall",
    "RunBudget",
    "RunSpend",
    "SpendBudget",
    "Stop",
    "StopKind",
    "crossed",
    "exhausted",
    "refuse_too_small",
    "round_costs",
]
