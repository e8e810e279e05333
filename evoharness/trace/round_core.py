"""One TRACE round written once, as a functional core: ``round_steps`` decides everything and
does no I/O; a driver performs what it asks for (issue 28, "functional core, imperative
shell").

``round_steps`` is a generator. Each ``yield`` hands the driver a batch of independent
requests; the driver performs them (in any order, in parallel if it likes) and sends back
their results in the same order; the generator's return value (``StopIteration.value``) is
the ``RoundOutcome``. The requests, in order:

1. ``Execute`` the parent on the target split and on the preservation pool (analysis seeds);
   ``Select`` the preservation set from the pool's results
   (``preservation.select_preservation``: it reads the prompts with the rule extractor, which
   a Temporal workflow must not run, so it is a request like the others);
2. ``Analyze``: steps 3–5 (aggregate, cluster, localize, propose, check) on the parent's
   target executions; the result holds the analysis and the proposed candidates;
3. ``Execute`` the parent and every checked candidate on every split on the fresh seeds of
   look 1 (``gates.validation_seeds``), then ``Gate`` each candidate at look 1;
4. for the candidates whose gate asks for a further look (``GateReport.second_look``), look
   by look up to ``GateConfig.max_looks``: ``Execute`` parent and those on the target and
   held-out splits (the gate's test units, ``GateConfig.test_splits``) on that look's seeds,
   then ``Gate`` them at that look over every look so far;
5. ``Finalize``: Holm's correction across the gated candidates, the decision, the residual
   and the report (``round.finalize``), whose result is the ``RoundReport``.

The outcome's children that joined the beam are read from the *finalized* report's gates
(after Holm's correction), never from the raw gates.

Executions are named by ``RunKey`` (harness, split, look), never by strings. What a driver
returns for an ``Execute`` is opaque to the core except for its verdict counts
(``aggregate.pass_rate`` and ``preservation.passed_map`` read both ``Execution`` and the
workflows' slim ``ExecutionRef``).

Drivers: ``round_driver.run_round`` (in this process; the fault suite, benches, ``evolve local``).
This module imports nothing outside the core and performs no I/O.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Generator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evoharness.harness.io import harness_id
from evoharness.harness.schema import Harness
from evoharness.tasks.models import Task
from evoharness.trace.aggregate import pass_rate
from evoharness.trace.gate_config import GateConfig, validation_seeds
from evoharness.trace.gate_holm import apply_holm
from evoharness.trace.models import Candidate, DecisionKind, GateReport, RoundReport, Split
from evoharness.trace.preservation import PreservationSet
from evoharness.trace.schema_levers import restores_defaults

#: The three splits, in the order every request lists them.
SPLITS: tuple[str, ...] = tuple(s.value for s in Split)


class Look(enum.IntEnum):
    """Which seeds a ``RunKey``'s executions ran on: the K analysis seeds, or the fresh
    seeds of validation look 1, 2 or 3 (``gate_config.validation_seeds``)."""

    analysis = 0
    first = 1
    second = 2
    third = 3


@dataclass(frozen=True, order=True)
class RunKey:
    """One harness on one split on one look's seeds: the typed key of a set of executions
    (was the string ``"<harness>/<split>@v1"``, built and parsed in two places)."""

    harness_id: str
    split: str
    look: Look = Look.analysis

    def seeds(self, analysis_seeds: Sequence[int]) -> list[int]:
        """The seeds of this key's look for the round's ``analysis_seeds``."""
        if self.look is Look.analysis:
            return list(analysis_seeds)
        return validation_seeds(analysis_seeds, int(self.look))


@dataclass(frozen=True)
class Execute:
    """Run ``harness`` on every (task, seed) of ``tasks`` × ``seeds``; the result is the
    list of executions (any records with verdict counts), in (task, seed) order."""

    key: RunKey
    harness: Harness
    tasks: list[Task]
    seeds: list[int]


@dataclass(frozen=True)
class Select:
    """Select the round's preservation set from ``pool`` by the parent's executions
    ``executions`` of it on the analysis ``seeds`` (``preservation.select_preservation`` with
    ``config``, a ``PreservationConfig``). The result is the ``PreservationSet``."""

    pool: list[Task]
    executions: RunKey
    seeds: list[int]
    config: Any


@dataclass(frozen=True)
class Analyze:
    """Steps 3–5 on ``executions`` (the parent's target split on the analysis seeds):
    aggregate, cluster, localize, attribute counterfactually, propose and check candidates
    (``round_analyze.answer_analyze``, both drivers). ``known``: harness ids already on the frontier
    (a child that re-creates one is a duplicate). Counterfactual attribution reads
    ``evidence`` (the parent's analysis-seed keys: target and preservation pool) on the tasks
    ``tasks`` + ``pool`` (the whole preservation pool), and sizes its budget by ``n_tasks``
    (the tasks of every split, as validated). The result satisfies ``AnalyzeOutcome``."""

    parent: Harness
    tasks: list[Task]
    executions: RunKey
    known: list[str]
    evidence: list[RunKey] = field(default_factory=list)
    pool: list[Task] = field(default_factory=list)
    n_tasks: int = 0


@dataclass(frozen=True)
class Gate:
    """Gate candidate ``candidate_id`` at validation ``look``: ``parent``/``candidate`` map a
    split to the keys whose executions it is judged on (look 2: the target split's look-1
    and look-2 keys); ``objective``: ``cost`` for a cost cluster's candidate, else
    ``quality``; ``families``: task → family of the preservation set; ``target`` and
    ``heldout``: the target and held-out tasks (the gate reads their first attempts:
    ``round.gate_candidate``'s ``tasks``); ``restores_defaults``: the candidate only puts
    settings back to their schema defaults (``schema_levers.restores_defaults``), so its cost
    is priced against the default's (``round.gate_candidate``). The result is a
    ``GateReport`` (``round.gate_candidate``)."""

    candidate_id: str
    parent: dict[str, list[RunKey]]
    candidate: dict[str, list[RunKey]]
    look: int
    objective: str
    families: dict[str, str]
    target: list[Task]
    heldout: list[Task] = field(default_factory=list)
    restores_defaults: bool = False


@dataclass(frozen=True)
class Finalize:
    """Steps 7–8 and the report (``round.finalize``): ``candidates`` with their raw gates
    (Holm's correction runs at ``alpha`` there); ``executions``: (harness, split) → the keys
    that stand for it in the report (validation looks where it has them, else the analysis
    seeds; the parent's preservation split is the whole pool it ran); ``all_keys``: every
    key the round ran (the cost); ``stopped``: a No-Patch "stopped: …" when non-empty. The
    result is the ``RoundReport``."""

    analysis: Any
    candidates: list[Candidate]
    executions: dict[tuple[str, str], list[RunKey]]
    all_keys: list[RunKey]
    target: list[Task]
    alpha: float
    stopped: str
    preservation: PreservationSet


Request = Execute | Select | Analyze | Gate | Finalize


class AnalyzeOutcome(Protocol):
    """What an ``Analyze`` request's result offers the core: ``analysis`` (its ``clusters``,
    each with ``cluster_id`` and ``kind``) and ``proposed`` (``ProposedCandidate``s)."""

    analysis: Any
    proposed: list[Any]


@dataclass
class Admitted:
    """A child that passed its gate after Holm's correction: its harness, the candidate it
    came from and its target pass rate on the fresh validation seeds (both looks)."""

    harness: Harness
    candidate_id: str
    target_pass_rate: float


@dataclass
class RoundOutcome:
    """A finished round: its ``report``; ``parent_target_pass_rate`` (analysis seeds);
    ``decision``: the accepted child (None on No-Patch); ``others``: every other child that
    passed its gate after Holm's correction (the beam keeps the best B of all of them);
    ``executions``: every result by key; ``analysis``: the ``Analyze`` result."""

    report: RoundReport
    parent_target_pass_rate: float
    decision: Admitted | None
    others: list[Admitted] = field(default_factory=list)
    executions: dict[RunKey, list[Any]] = field(default_factory=dict)
    analysis: Any = None


RoundSteps = Generator[list[Request], list[Any], RoundOutcome]


def gate_objective_of(analysis: Any, cluster_id: str) -> str:
    """``cost`` for a candidate proposed for a cost cluster, else ``quality``."""
    kind = next((c.kind for c in analysis.clusters if c.cluster_id == cluster_id), "failure")
    return "cost" if kind == "cost" else "quality"


def round_steps(
    parent: Harness,
    splits: Mapping[str, Sequence[Task]],
    seeds: Sequence[int],
    gate: GateConfig,
    preservation: Any,
    frontier: Sequence[str] = (),
    stop: Callable[[], str] = lambda: "",
) -> RoundSteps:
    """The round (module docstring) for ``parent`` on ``splits`` (``target`` must be
    non-empty; ``heldout``/``preservation`` may be empty) with the K analysis ``seeds``, the
    ``gate`` settings and the ``preservation`` selection settings
    (``preservation.PreservationConfig``). ``frontier``: the beam's harness ids when the
    round starts; ``stop()``: the reason to stop ("" to go on), read before validation (a
    stopped round validates nothing and records a No-Patch "stopped: <reason>"). Raises
    ``ValueError`` for an empty target split."""
    target = list(splits.get(Split.target.value, []))
    if not target:
        raise ValueError("the target split is empty")
    pid = harness_id(parent)
    pool = list(splits.get(Split.preservation.value, []))
    runs = _Runs({s: list(splits.get(s, [])) for s in SPLITS}, list(seeds))
    view, results, execute, keep = runs.view, runs.results, runs.execute, runs.keep

    # 1. the parent on the analysis seeds; the preservation set from the pool
    ptarget = RunKey(pid, Split.target.value)
    ppool = RunKey(pid, Split.preservation.value)
    batch = execute([(parent, ptarget), (parent, ppool)])
    keep(batch, (yield list(batch)))
    (pres,) = yield [Select(pool, ppool, list(seeds), preservation)]
    chosen = set(pres.task_ids)
    view[Split.preservation.value] = [t for t in pool if t.task_id in chosen]
    families = {t.task_id: t.task_family for t in view[Split.preservation.value]}

    # 2. analyze and propose
    n_tasks = sum(len(splits.get(s, [])) for s in SPLITS)
    analyze = Analyze(parent, target, ptarget, list(frontier), [ptarget, ppool], pool, n_tasks)
    (proposal,) = yield [analyze]
    valid = [pc for pc in proposal.proposed if pc.child is not None]
    stopped = stop()
    gates: dict[str, GateReport] = {}
    if valid and not stopped:
        gates = yield from _validate(parent, valid, proposal.analysis, runs, families, gate)

    # 5. finalize: the report keys of each (harness, split)
    by_hs: dict[tuple[str, str], list[RunKey]] = {}
    for key in sorted(results):
        by_hs.setdefault((key.harness_id, key.split), []).append(key)
    executions = {hs: ([k for k in ks if k.look] or ks) for hs, ks in by_hs.items()}
    # the parent ran the whole preservation pool on the analysis seeds to select the set:
    # the pool's pass rate is reported, not the selected set's (1.0 by construction)
    executions[(pid, Split.preservation.value)] = [ppool]
    candidates = []
    for pc in proposal.proposed:
        c = pc.candidate
        if c.candidate_id in gates:
            c = c.model_copy(update={"gate": gates[c.candidate_id]})
        candidates.append(c)
    fin = Finalize(
        analysis=proposal,
        candidates=candidates,
        executions=executions,
        all_keys=sorted(results),
        target=target,
        alpha=gate.alpha,
        stopped=stopped if not gates else "",
        preservation=pres,
    )
    (report,) = yield [fin]
    return _outcome(report, proposal, results, pid)


@dataclass
class _Runs:
    """The round's executions so far: ``view`` (split → the tasks a harness runs there),
    the analysis ``seeds`` and ``results`` (key → what the driver returned)."""

    view: dict[str, list[Task]]
    seeds: list[int]
    results: dict[RunKey, list[Any]] = field(default_factory=dict)

    def execute(self, jobs: list[tuple[Harness, RunKey]]) -> list[Execute]:
        """The ``Execute`` requests for the (harness, key) ``jobs`` not run yet, each once."""
        todo: list[Execute] = []
        for h, key in jobs:
            if key not in self.results and all(r.key != key for r in todo):
                todo.append(Execute(key, h, self.view[key.split], key.seeds(self.seeds)))
        return todo

    def keep(self, done: list[Execute], got: list[Any]) -> None:
        """Record the driver's results ``got`` of the requests ``done`` (same order)."""
        for req, res in zip(done, got, strict=True):
            self.results[req.key] = list(res)


def _validate(
    parent: Harness,
    valid: list[Any],
    analysis: Any,
    runs: _Runs,
    families: dict[str, str],
    gate: GateConfig,
) -> Generator[list[Request], list[Any], dict[str, GateReport]]:
    """Steps 3–4 of the module docstring: look 1 on every split, the gate, look 2 on the
    target split, and the held-out split when it has tasks and is among the test units
    (``gate.test_splits``), for the second-look zone, the gate again. Returns the raw
    gates."""
    execute, keep, view = runs.execute, runs.keep, runs.view
    target = view[Split.target.value]
    heldout = view[Split.heldout.value]
    # the second look's splits: the test units' (target, and held-out when it has tasks)
    looked = [Split.target.value]
    if heldout and Split.heldout.value in gate.test_splits:
        looked.append(Split.heldout.value)
    pid = harness_id(parent)
    jobs = [(parent, RunKey(pid, s, Look.first)) for s in SPLITS]
    for pc in valid:
        jobs += [(pc.child, RunKey(pc.candidate.harness_id, s, Look.first)) for s in SPLITS]
    batch = execute(jobs)
    keep(batch, (yield list(batch)))

    def keys(hid: str, look: int) -> dict[str, list[RunKey]]:
        out = {s: [RunKey(hid, s, Look.first)] for s in SPLITS}
        for later in range(2, look + 1):
            for s in looked:
                out[s].append(RunKey(hid, s, Look(later)))
        return out

    def gate_of(pc: Any, look: int) -> Gate:
        c = pc.candidate
        return Gate(
            candidate_id=c.candidate_id,
            parent=keys(pid, look),
            candidate=keys(c.harness_id, look),
            look=look,
            objective=gate_objective_of(analysis, c.cluster_id),
            families=families,
            target=target,
            heldout=heldout,
            restores_defaults=c.patch is not None and restores_defaults(parent, c.patch),
        )

    got = yield [gate_of(pc, 1) for pc in valid]
    gates: dict[str, GateReport] = {
        pc.candidate.candidate_id: g for pc, g in zip(valid, got, strict=True)
    }
    for look in range(2, gate.max_looks + 1):
        # a further look (group-sequential, gate_sequential): K more fresh seeds on the test
        # units' splits for the candidates whose last look asked for one and, at look 2, those
        # held back only by Holm's correction (``held_back``)
        more = [pc for pc in valid if gates[pc.candidate.candidate_id].second_look]
        if look == 2:
            held = held_back(gates, gate)
            more += [
                pc
                for pc in valid
                if pc.candidate.candidate_id in held
                and not gates[pc.candidate.candidate_id].second_look
            ]
        if not more:
            break
        jobs = [(parent, RunKey(pid, s, Look(look))) for s in looked]
        jobs += [
            (pc.child, RunKey(pc.candidate.harness_id, s, Look(look)))
            for pc in more
            for s in looked
        ]
        batch = execute(jobs)
        keep(batch, (yield list(batch)))
        got = yield [gate_of(pc, look) for pc in more]
        gates.update({pc.candidate.candidate_id: g for pc, g in zip(more, got, strict=True)})
    return gates


def held_back(gates: dict[str, GateReport], cfg: GateConfig) -> set[str]:
    """The look-1 candidates that hold every gate condition on their own but not after Holm's
    correction across the round (``apply_holm``), with the adjusted p below
    ``cfg.extend_below``: they earn the second look as a candidate whose own p fell in that
    zone does — the p that decides is the adjusted one. (Before 2026-12-06 only the raw p
    was read: a candidate at raw p = 0.014, adjusted 0.055 over four, ended with no more
    seeds.) Continuing any hypothesis not rejected at look 1 keeps Pocock's per-look level,
    and Holm's correction over the final looks keeps the family-wise error (``gates``)."""
    if cfg.max_looks < 2:
        return set()
    look1 = {k: g for k, g in gates.items() if g.look == 1}
    fixed = apply_holm(look1, cfg.alpha)
    adjusted = {k: r.p_holm if r.p_holm is not None else 1.0 for k, r in fixed.items()}
    return {
        k
        for k, g in look1.items()
        if g.accepted and not fixed[k].accepted and adjusted[k] < cfg.extend_below
    }


def _outcome(
    report: RoundReport, proposal: Any, results: dict[RunKey, list[Any]], pid: str
) -> RoundOutcome:
    """The outcome of a finalized round: the decision's child and every other child whose
    gate passed after Holm's correction (the report's gates), with their target pass rates
    on the validation looks."""
    children = {pc.candidate.harness_id: pc.child for pc in proposal.proposed if pc.child}
    t = Split.target.value

    def admitted(c: Candidate) -> Admitted:
        val = [
            e
            for look in Look
            if look is not Look.analysis
            for e in results.get(RunKey(c.harness_id, t, look), [])
        ]
        return Admitted(children[c.harness_id], c.candidate_id, pass_rate(val))

    decision = None
    others: list[Admitted] = []
    for c in report.candidates:
        if c.gate is None or not c.gate.accepted or c.harness_id not in children:
            continue
        if (
            report.decision.kind is DecisionKind.accepted
            and c.candidate_id == report.decision.candidate_id
        ):
            decision = admitted(c)
        else:
            others.append(admitted(c))
    return RoundOutcome(
        report=report,
        parent_target_pass_rate=pass_rate(results.get(RunKey(pid, t), [])),
        decision=decision,
        others=others,
        executions=results,
        analysis=proposal,
    )


__all__ = [
    "SPLITS",
    "Admitted",
    "Analyze",
    "AnalyzeOutcome",
    "Execute",
    "Finalize",
    "Gate",
    "Look",
    "Request",
    "RoundOutcome",
    "RoundSteps",
    "RunKey",
    "Select",
    "gate_objective_of",
    "round_steps",
]
