"""The round's shared answer to the core's ``Analyze`` request (``round_core.Analyze``):
``answer_analyze`` (the one answer both drivers give: the in-process ``round_driver`` and the
workflow's ``analyze_and_propose`` activity), what it is answered with (``Proposals``) and
the counterfactual attribution that runs after the analysis (``attribute_counterfactually``). Public, beside ``evoharness.trace.round``: a
driver (``round_driver`` in this process, the workflow's activities) imports them from here,
and this module imports no driver (issue 28).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from evoharness.harness.schema import Harness
from evoharness.tasks.models import Task
from evoharness.trace.counterfactual import (
    CounterfactualResult,
    ProbePorts,
    round_call_estimate,
)
from evoharness.trace.counterfactual import run as run_counterfactual
from evoharness.trace.models import Execution
from evoharness.trace.round import (
    Analysis,
    ProposedCandidate,
    RoundConfig,
    RoundPorts,
    analyze,
    propose_candidates,
    recording,
)
from evoharness.trace.round_core import Analyze, RunKey


@dataclass
class Proposals:
    """What an ``Analyze`` request is answered with (``answer_analyze``, both drivers): the
    analysis (attributions after counterfactual attribution), the proposed candidates, the
    scope probes' executions (counted in the round's cost) and the counterfactual step's
    result (its record and probe executions; None: not run)."""

    analysis: Analysis
    proposed: list[ProposedCandidate]
    probes: list[Execution]
    counterfactual: CounterfactualResult | None = None


def answer_analyze(
    req: Analyze,
    results: Mapping[RunKey, Sequence[Execution]],
    ports: RoundPorts,
    cfg: RoundConfig,
    experience: Sequence[Execution] = (),
) -> Proposals:
    """Answer the core's ``Analyze`` request ``req`` — the one answer both drivers give: the
    analysis of the parent's target executions (``round.analyze``), counterfactual
    attribution over ``req.evidence`` (its probes run through ``ports.execute``, the content-
    addressed execution cache making a repeated probe free), then the candidates
    (``round.propose_candidates``: the counterfactual causes first, scope probes recorded).
    ``results``: the executions of at least ``req.executions`` and ``req.evidence``;
    ``experience``: executions of earlier rounds memory mining may learn from, besides the
    parent's own target executions. Raises ``AggregationError`` for incomplete seeds."""
    own = list(results[req.executions])
    analysis = analyze(own, req.tasks, req.parent, ports.localize, cfg.seeds, cfg.w_localizer)
    cf = _attribute(
        analysis,
        req.parent,
        [*req.tasks, *req.pool],
        [e for k in req.evidence for e in results[k]],
        req.n_tasks,
        ports,
        cfg,
    )
    analysis = analysis.model_copy(update={"attributions": cf.attributions})
    probes: list[Execution] = []
    proposed = propose_candidates(
        analysis,
        req.parent,
        req.tasks,
        replace(
            ports, execute=recording(ports.execute, probes), propose=cf.proposer(ports.propose)
        ),
        cfg,
        [*experience, *own],
        req.known,
    )
    return Proposals(analysis, proposed, probes, cf)


def attribute_counterfactually(
    analysis: Analysis,
    parent: Harness,
    splits: Mapping[str, Sequence[Task]],
    executions: Mapping[tuple[str, str], Sequence[Execution]],
    parent_id: str,
    ports: RoundPorts,
    cfg: RoundConfig,
) -> CounterfactualResult:
    """Counterfactual attribution of the round's clusters (``evoharness.trace.counterfactual``)
    over the parent's analysis executions (``executions[(parent_id, split)]`` for the target
    and preservation splits, on ``cfg.seeds``), within ``cfg.counterfactual.budget_share`` of
    the round's estimated generator calls (``counterfactual.round_call_estimate``: the
    parent's generations per execution, the analysis and validation task counts,
    ``max_clusters`` × ``candidates_per_cluster`` candidates). Probes run through
    ``ports.execute`` (the round counts their cost), additive levers come from
    ``ports.propose`` and are checked against ``ports.capabilities``."""
    parent_execs = [
        e for s in ("target", "preservation") for e in executions.get((parent_id, s), [])
    ]
    tasks = [t for s in ("target", "preservation") for t in splits.get(s, [])]
    n_tasks = sum(len(v) for v in splits.values())
    return _attribute(analysis, parent, tasks, parent_execs, n_tasks, ports, cfg)


def _attribute(
    analysis: Analysis,
    parent: Harness,
    tasks: Sequence[Task],
    parent_execs: Sequence[Execution],
    n_tasks: int,
    ports: RoundPorts,
    cfg: RoundConfig,
) -> CounterfactualResult:
    """``attribute_counterfactually`` on the parent's analysis executions ``parent_execs`` of
    ``tasks`` (target and preservation pool), the budget sized by ``n_tasks`` (every split's
    tasks)."""
    gens = sum(max(1, len(e.programs)) for e in parent_execs) / max(1, len(parent_execs))
    estimate = round_call_estimate(
        gens,
        len(cfg.seeds),
        len(tasks),
        n_tasks,
        cfg.max_clusters * cfg.candidates_per_cluster,
    )
    return run_counterfactual(
        analysis.clusters,
        analysis.attributions,
        parent,
        list(tasks),
        list(parent_execs),
        ProbePorts(
            ports.execute, ports.compile_program, ports.propose, ports.capabilities, cfg.concurrency
        ),
        cfg.counterfactual,
        cfg.counterfactual.budget_share * estimate,
    )


__all__ = ["Proposals", "answer_analyze", "attribute_counterfactually"]
