"""The in-process driver of one TRACE round (moved from ``round.py``, issue 28).

``run_round`` drives the core's round (``round_core.round_steps``, which decides everything)
in this process — the fault suite, the benches and ``evolve local`` — answering each request
with the round's shared steps (``evoharness.trace.round``: ``analyze``, ``propose_candidates``,
``gate_candidate``, ``finalize``); the Temporal workflow drives the same steps through
activities. ``drive`` sends a request batch to its performer and the results back; the
answer to an ``Analyze`` request is ``evoharness.trace.round_analyze.answer_analyze``, the
same in both drivers (the workflow's ``analyze_and_propose`` activity calls it). Import
``run_round``, ``drive`` and ``RoundResult`` from here: ``evoharness.trace.round`` holds the
steps and imports no driver.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from evoharness.harness.io import harness_id
from evoharness.harness.schema import Harness
from evoharness.tasks.models import Task
from evoharness.trace.models import (
    Execution,
    GateReport,
    RoundReport,
)
from evoharness.trace.preservation import (
    passed_map,
    select_preservation,
)
from evoharness.trace.round import (
    ReportHeader,
    RoundConfig,
    RoundPorts,
    finalize,
    gate_candidate,
    round_cost,
)
from evoharness.trace.round_analyze import Proposals, answer_analyze
from evoharness.trace.round_core import (
    Analyze,
    Execute,
    Finalize,
    Gate,
    Look,
    Request,
    RoundOutcome,
    RoundSteps,
    RunKey,
    Select,
    round_steps,
)


@dataclass
class RoundResult:
    """A round's report, the accepted child harness (None on No-Patch), the executions on the
    analysis seeds (the parent's target and preservation pool) and the validation executions
    on fresh seeds (both looks' seeds together), each keyed by ``(harness_id, split)``;
    ``children``: every child that passed the checks, by harness id; ``outcome``: the core's
    ``RoundOutcome`` (the children admitted to the beam after Holm's correction)."""

    report: RoundReport
    child: Harness | None
    executions: dict[tuple[str, str], list[Execution]] = field(default_factory=dict)
    validation: dict[tuple[str, str], list[Execution]] = field(default_factory=dict)
    children: dict[str, Harness] = field(default_factory=dict)
    outcome: RoundOutcome | None = None


def drive(steps: RoundSteps, perform: Callable[[list[Request]], list[Any]]) -> RoundOutcome:
    """Run the core's round ``steps`` to the end: every batch of requests it yields goes to
    ``perform``, whose results (same order) are sent back. Returns the ``RoundOutcome``."""
    try:
        batch = next(steps)
        while True:
            batch = steps.send(perform(batch))
    except StopIteration as done:
        outcome: RoundOutcome = done.value
        return outcome


def run_round(
    ports: RoundPorts,
    parent: Harness,
    splits: Mapping[str, Sequence[Task]],
    cfg: RoundConfig,
    experience: Sequence[Execution] = (),
    frontier: Sequence[str] = (),
) -> RoundResult:
    """One whole round in this process: the in-process driver of the core's round
    (``round_core.round_steps``, which decides everything; the Temporal workflow drives the
    same steps through activities).

    ``splits`` maps ``target``/``heldout``/``preservation`` to tasks (held-out and
    preservation may be empty). Executions of one batch run in one pool of
    ``cfg.concurrency`` threads through ``ports.execute``; the analysis, the gates and the
    finalisation are this module's functions. ``experience``: executions of earlier rounds
    (any harness) that memory mining may learn from, besides the parent's own target
    executions; ``frontier``: the beam's harness ids (a child that re-creates one is a
    duplicate; recorded in the report). Raises ``ValueError`` for an empty target split.
    Returns the ``RoundResult``.
    """
    pid = harness_id(parent)
    results: dict[RunKey, list[Execution]] = {}

    def joined(keys: Sequence[RunKey]) -> list[Execution]:
        return [e for k in keys for e in results[k]]

    def execute(batch: list[Execute]) -> list[list[Execution]]:
        jobs = [
            (r.harness, t, seed, i)
            for i, r in enumerate(batch)
            for t in r.tasks
            for seed in r.seeds
        ]
        with ThreadPoolExecutor(max_workers=cfg.concurrency) as pool:
            done = list(pool.map(lambda j: ports.execute(j[0], j[1], j[2]), jobs))
        out: list[list[Execution]] = [[] for _ in batch]
        for j, e in zip(jobs, done, strict=True):
            out[j[3]].append(e)
        for r, es in zip(batch, out, strict=True):
            results[r.key] = es
        return out

    def analyze_(req: Analyze) -> Proposals:
        return answer_analyze(req, results, ports, cfg, experience)

    def gate_(req: Gate) -> GateReport:
        return gate_candidate(
            {s: joined(ks) for s, ks in req.parent.items()},
            {s: joined(ks) for s, ks in req.candidate.items()},
            cfg.gate,
            look=req.look,
            objective=req.objective,
            families=req.families,
            tasks={t.task_id: t for t in [*req.target, *req.heldout]},
            restores_defaults=req.restores_defaults,
        )

    def finalize_(req: Finalize) -> RoundReport:
        cf = req.analysis.counterfactual
        cost = round_cost(
            [results[k] for k in req.all_keys],
            probes=round_cost([req.analysis.probes]),
            counterfactual=round_cost([cf.executions]) if cf else None,
        )
        report = finalize(
            ReportHeader(cfg.run_id, cfg.round, pid, cost, frontier, req.preservation),
            req.analysis.analysis,
            req.candidates,
            {hs: joined(ks) for hs, ks in req.executions.items()},
            req.target,
            req.alpha,
            stopped=req.stopped,
        )
        return report.model_copy(update={"counterfactual": cf.record}) if cf else report

    def perform(batch: list[Request]) -> list[Any]:
        runs = [r for r in batch if isinstance(r, Execute)]
        ran = iter(execute(runs)) if runs else iter(())
        out: list[Any] = []
        for r in batch:
            if isinstance(r, Execute):
                out.append(next(ran))
            elif isinstance(r, Select):
                out.append(
                    select_preservation(
                        r.pool, passed_map(results[r.executions]), r.seeds, r.config
                    )
                )
            elif isinstance(r, Analyze):
                out.append(analyze_(r))
            elif isinstance(r, Gate):
                out.append(gate_(r))
            else:
                out.append(finalize_(r))
        return out

    steps = round_steps(parent, splits, cfg.seeds, cfg.gate, cfg.preservation, frontier)
    outcome = drive(steps, perform)
    validation: dict[tuple[str, str], list[Execution]] = {}
    for k in sorted(results):
        if k.look is not Look.analysis:
            validation.setdefault((k.harness_id, k.split), []).extend(results[k])
    return RoundResult(
        report=outcome.report,
        child=outcome.decision.harness if outcome.decision else None,
        executions={
            (k.harness_id, k.split): v for k, v in results.items() if k.look is Look.analysis
        },
        validation=validation,
        children={
            pc.candidate.harness_id: pc.child
            for pc in outcome.analysis.proposed
            if pc.child is not None
        },
        outcome=outcome,
    )
