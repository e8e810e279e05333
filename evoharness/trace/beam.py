"""The beam in one process: B parents expanded per round, like the durable workflow
(``workflows.evolution.EvolutionWorkflow._beam_round``), with the same rules, written once here
(``beam_parents``, ``best_accepted``) and called by both.

A round over the beam:

1. parents = every entry of the frontier's best B not yet expanded (each parent is expanded
   once: the same parent on the same seeds would propose and gate the same candidates); when
   all were expanded, the run stops before the round (``frontier_exhausted``: it would
   repeat the last round's decisions on the same seeds; histories recorded before this rule
   expanded the head again and recorded the same No-Patch);
2. each parent runs one TRACE round (``round_driver.run_round``), its round report keyed by its
   place in the beam;
3. the round's decision is the accepted child with the highest gate utility (ties: the
   earlier parent); every child that passed a gate — accepted or not chosen — enters the
   frontier with its target pass rate on the fresh validation seeds (each parent with its
   analysis-seed rate), and the frontier keeps the best B (``frontier.Frontier.push``).

EvoGen keeps a frontier of 3 (B = 3 is the default of ``workflows.params.EvolutionParams``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from evoharness.harness.io import harness_id
from evoharness.harness.schema import Harness
from evoharness.tasks.models import Task
from evoharness.trace.aggregate import pass_rate
from evoharness.trace.budget import Prices
from evoharness.trace.frontier import Frontier, FrontierEntry
from evoharness.trace.models import DecisionKind, Execution
from evoharness.trace.round import RoundConfig, RoundPorts
from evoharness.trace.round_driver import RoundResult, run_round
from evoharness.trace.run_budget import RunBudget, RunSpend, crossed, round_costs


def beam_parents(
    entries: Sequence[FrontierEntry], expanded: Sequence[str], beam: int
) -> list[FrontierEntry]:
    """The parents of the next round (module docstring, step 1): the entries among the first
    ``beam`` of ``entries`` (best first) whose harness id is not in ``expanded``, or the head
    when every one was expanded. Raises ``IndexError`` for an empty frontier."""
    top = list(entries[:beam])
    if not top:
        raise IndexError("the frontier is empty")
    return [e for e in top if e.harness_id not in set(expanded)] or [top[0]]


def frontier_exhausted(
    entries: Sequence[FrontierEntry], expanded: Sequence[str], beam: int
) -> bool:
    """True when every entry among the first ``beam`` of ``entries`` was expanded: the next
    round's only parent would be the head again, whose round on the same seeds and tasks makes
    the same proposals, gates and decision as before (wasted work). False for an empty
    frontier (``beam_parents`` raises for it)."""
    done = set(expanded)
    top = list(entries[:beam])
    return bool(top) and all(e.harness_id in done for e in top)


#: Why a run stops when ``frontier_exhausted``.
EXHAUSTED_REASON = (
    "every frontier entry was expanded: another round would repeat the last one's decisions "
    "on the same seeds"
)


def best_accepted(utilities: Sequence[float | None]) -> int | None:
    """Index of the round's decision among the beam parents' results (module docstring, step
    3): ``utilities[i]`` is the gate utility of parent i's accepted child, None when it
    accepted nothing. The highest utility wins, ties to the earlier parent; None when no
    parent accepted a child."""
    best: int | None = None
    top = 0.0
    for i, u in enumerate(utilities):
        if u is not None and (best is None or u > top):
            best, top = i, u
    return best


@dataclass
class BeamRound:
    """One round over the beam: ``parents`` (frontier entries, beam order), their
    ``results``, ``best`` = index of the parent whose accepted child is the round's decision
    (None: No-Patch on every parent), and the ``frontier`` after the round."""

    round: int
    parents: list[FrontierEntry]
    results: list[RoundResult]
    best: int | None
    frontier: Frontier


@dataclass
class BeamRun:
    """An in-process evolution: every ``BeamRound``, the final frontier (its head is the best
    harness) and why it stopped."""

    rounds: list[BeamRound] = field(default_factory=list)
    frontier: Frontier = field(default_factory=Frontier)
    stopped: str = ""
    #: what stopped it (``run_budget.StopKind``)
    stopped_by: str = ""
    #: what it used (``run_budget.RunSpend``)
    spend: RunSpend = field(default_factory=RunSpend)

    @property
    def best(self) -> Harness:
        """The frontier head's harness."""
        return Harness.model_validate(self.frontier.head.document)


def _rate(execs: Sequence[Execution]) -> float:
    return pass_rate(execs)


def run_beam_round(
    ports: RoundPorts,
    frontier: Frontier,
    splits: Mapping[str, Sequence[Task]],
    cfg: RoundConfig,
    expanded: list[str],
    experience: Sequence[Execution] = (),
) -> BeamRound:
    """One round over the beam (module docstring); ``cfg.round`` numbers it. Parents are
    appended to ``expanded``. Every parent's round sees the frontier's ids (a candidate that
    re-creates one is a duplicate)."""
    parents = beam_parents(frontier.entries, expanded, frontier.beam)
    known = [e.harness_id for e in frontier.entries]
    results: list[RoundResult] = []
    for entry in parents:
        parent = Harness.model_validate(entry.document)
        results.append(run_round(ports, parent, splits, cfg, experience, known))
    for e in parents:
        if e.harness_id not in expanded:
            expanded.append(e.harness_id)
    utilities: list[float | None] = []
    for r in results:
        c = next(
            (c for c in r.report.candidates if c.candidate_id == r.report.decision.candidate_id),
            None,
        )
        accepted = r.report.decision.kind is DecisionKind.accepted and r.child is not None
        utilities.append(c.gate.utility if accepted and c and c.gate else None)
    best = best_accepted(utilities)
    entries = [
        e.model_copy(
            update={"target_pass_rate": _rate(r.executions.get((e.harness_id, "target"), []))}
        )
        for e, r in zip(parents, results, strict=True)
    ]
    for e, r in zip(parents, results, strict=True):
        for c in r.report.candidates:
            child = r.children.get(c.harness_id)
            if c.gate is None or not c.gate.accepted or child is None:
                continue
            entries.append(
                FrontierEntry(
                    harness_id=harness_id(child),
                    document=child.to_document(),
                    target_pass_rate=_rate(r.validation.get((c.harness_id, "target"), [])),
                    round=cfg.round,
                    parent_harness_id=e.harness_id,
                )
            )
    return BeamRound(cfg.round, parents, results, best, frontier.push(*entries))


@dataclass(frozen=True)
class RunControl:
    """How a run is observed from outside: ``clock`` (seconds, for the wall-time budget) and
    ``stop_requested`` (a graceful stop once it returns True, read after each round)."""

    clock: Callable[[], float] = time.monotonic
    stop_requested: Callable[[], bool] = lambda: False


def run_beam(
    ports: RoundPorts,
    harness: Harness,
    splits: Mapping[str, Sequence[Task]],
    cfg: RoundConfig,
    limits: RunBudget,
    beam: int = 3,
    prices: Prices | None = None,
    control: RunControl | None = None,
) -> BeamRun:
    """Evolve ``harness`` in this process for up to ``limits.max_rounds`` rounds over a beam
    of ``beam`` parents (``run_beam_round``), stopping after the round that reaches a limit of
    ``limits`` (``run_budget.crossed``, the workflow's rules: ``max_rounds``,
    ``stop_after_no_patch`` consecutive rounds without an accepted child, the budgets),
    after the round during which ``control.stop_requested()`` turned true (a graceful stop),
    or before a round that would only repeat the last one (``frontier_exhausted``).
    ``control``: the clock and the stop request (``RunControl``; None: the monotonic clock,
    no stop); ``prices``: what the money budget is counted in (None: no money counted,
    ``RunSpend.add_round``). Rounds are numbered from ``cfg.round``; executions of earlier
    rounds are memory mining's experience. Raises ``ValueError`` for ``beam`` below 1."""
    if beam < 1:
        raise ValueError(f"run_beam: beam={beam} must be >= 1")
    clock = (control or RunControl()).clock
    stop_requested = (control or RunControl()).stop_requested
    t0 = clock()
    run = BeamRun(
        frontier=Frontier(beam=beam).push(
            FrontierEntry(
                harness_id=harness_id(harness), document=harness.to_document(), target_pass_rate=0.0
            )
        )
    )
    expanded: list[str] = []
    experience: list[Execution] = []
    spend = RunSpend()
    for n in range(cfg.round, cfg.round + limits.max_rounds):
        br = run_beam_round(
            ports, run.frontier, splits, cfg.model_copy(update={"round": n}), expanded, experience
        )
        run.rounds.append(br)
        run.frontier = br.frontier
        for r in br.results:
            for execs in r.executions.values():
                experience.extend(execs)
        spend = spend.add_round(
            round_costs([r.report.cost for r in br.results]), br.best is not None, prices
        ).model_copy(update={"wall_s": clock() - t0})
        run.spend = spend
        hit = crossed(limits, spend)
        if hit is None and stop_requested():
            run.stopped, run.stopped_by = f"stopped after round {n}", "graceful_stop"
            return run
        if hit is None and frontier_exhausted(run.frontier.entries, expanded, beam):
            run.stopped, run.stopped_by = EXHAUSTED_REASON, "frontier_exhausted"
            return run
        if hit is not None:
            run.stopped, run.stopped_by = hit.reason, hit.by
            return run
    raise AssertionError("unreachable: crossed() stops at max_rounds")


__all__ = [
    "BeamRound",
    "BeamRun",
    "EXHAUSTED_REASON",
    "RunControl",
    "beam_parents",
    "best_accepted",
    "frontier_exhausted",
    "run_beam",
    "run_beam_round",
]
