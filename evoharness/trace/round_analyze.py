"""The round's shared answer to the core's ``Analyze`` request (``round_core.Analyze``):
what it is answered with (``Proposals``) and the counterfactual attribution that runs after
the analysis (``attribute_counterfactually``). Public, beside ``evoharness.trace.round``: a
driver (``round_driver`` in this process, the workflow's activities) imports them from here,
and this module imports no driver (issue 28).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from evoharness.harness.schema import Harness
from evoharness.tasks.models import Task
from evoharness.trace.counterfactual import CounterfactualResult, round_call_estimate
from evoharness.trace.counterfactual import run as run_counterfactual
from evoharness.trace.models import Execution
from evoharness.trace.round import Analysis, ProposedCandidate, RoundConfig, RoundPorts


@dataclass
class Proposals:
    """What the in-process driver returns for an ``Analyze`` request: the analysis, the
    proposed candidates and the scope probes' executions (counted in the round's cost)."""

    analysis: Analysis
    proposed: list[ProposedCandidate]
    probes: list[Execution]


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
    gens = sum(max(1, len(e.programs)) for e in parent_execs) / max(1, len(parent_execs))
    estimate = round_call_estimate(
        gens,
        len(cfg.seeds),
        len(tasks),
        sum(len(v) for v in splits.values()),
        cfg.max_clusters * cfg.candidates_per_cluster,
    )
    return run_counterfactual(
        analysis.clusters,
        analysis.attributions,
        parent,
        tasks,
        parent_execs,
        ports.execute,
        ports.compile_program,
        cfg.counterfactual,
        cfg.counterfactual.budget_share * estimate,
        propose=ports.propose,
        capabilities=ports.capabilities,
        concurrency=cfg.concurrency,
    )


__all__ = ["Proposals", "attribute_counterfactually"]
