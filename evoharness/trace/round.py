"""One TRACE round as plain functions over ports (docs/architecture.md, "The TRACE round").

execute → inspect → aggregate → localize → propose → validate → re-localize → decide.

The Temporal activities in ``workflows/activities.py`` call exactly these functions, and
``run_round`` (``evoharness.trace.round_driver``, which imports this module) composes them in
one process (benchmarks, tests), so the durable and the in-process round make the same
decisions. No I/O happens here: the ports do it.

Ports (``RoundPorts``):

- ``execute(harness, task, seed) -> Execution``: run the harness runtime on the task's prompt
  (the harness never sees the constraints) and inspect the image against the task's
  constraints (steps 1–2); content-addressed caching lives behind this port;
- ``compile_program(harness, task, seed) -> Program``: compile without generating;
- ``localize(clusters, harness) -> list[Attribution]``;
- ``propose(cluster, attribution, harness, n) -> list[raw patch]`` (untrusted).
"""

from __future__ import annotations

import contextvars
import threading
from collections.abc import Callable, Iterable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, field_validator

from evoharness.canonical import content_hash
from evoharness.capabilities import GeneratorCapabilities
from evoharness.harness.io import harness_id
from evoharness.harness.schema import Harness
from evoharness.memory.bundles import memory_patch, mine
from evoharness.tasks.models import Task
from evoharness.tasks.splits import EVOLUTION_SPLITS
from evoharness.trace.aggregate import aggregate, pass_rate
from evoharness.trace.attribution import NO_PATCH, attribute
from evoharness.trace.checks import (
    CompileFn,
    check_proposal,
    compiled_plan,
    cost_increase,
    lever_key,
)
from evoharness.trace.cluster import cluster_failures, cost_clusters
from evoharness.trace.counterfactual import (
    CounterfactualConfig,
)
from evoharness.trace.gate_config import GateConfig, validation_seeds
from evoharness.trace.gate_holm import rank_key
from evoharness.trace.models import (
    DEFAULT_SEEDS,
    Attribution,
    Candidate,
    CandidateStatus,
    ConstraintStats,
    Decision,
    DecisionKind,
    ExecCost,
    Execution,
    FailureCluster,
    RoundReport,
)
from evoharness.trace.preservation import (
    PreservationConfig,
    PreservationSet,
)
from evoharness.trace.round_validate import (  # noqa: F401 - re-exported (issue 28)
    calls_per_task,
    correct_gates,
    cost_per_task,
    first_attempt_verdicts,
    gate_candidate,
    verdicts,
)
from evoharness.trace.scope import ScopeConfig, run_scope_probes, scope_summary

#: How many raw proposals per requested candidate are checked at most.
MAX_RAW_FACTOR = 4

ExecuteFn = Callable[[Harness, Task, int], Execution]
LocalizeFn = Callable[[list[FailureCluster], Harness], list[Attribution]]
ProposeFn = Callable[[FailureCluster, Attribution, Harness, int], list[Any]]


@dataclass
class RoundPorts:
    """The adapters a round runs through (see the module docstring)."""

    execute: ExecuteFn
    compile_program: CompileFn
    localize: LocalizeFn
    propose: ProposeFn
    #: the deployed generator's capabilities (None: everything honoured); patches whose effect
    #: it would drop are rejected (``unsupported_by_generator``)
    capabilities: GeneratorCapabilities | None = None


class RoundSettings(BaseModel):
    """The settings every round of a run shares, each defined here once (a run's parameters,
    ``workflows.params.EvolutionParams``, extend this model; a round gets them as a
    ``RoundConfig``). ``seeds``: the K matched analysis seeds (they choose the clusters;
    validation runs on the fresh seeds of ``gates.validation_seeds``); ``max_clusters``:
    clusters that get proposals (largest first); ``candidates_per_cluster``: N;
    ``concurrency``: executions (the workflow: batches) in flight; ``w_localizer``: weight of
    the localizer in attribution; ``gate``: the gate's settings (alpha, looks, epsilon, lambda,
    mu, ...); ``scope``: the scope probes every checked candidate runs before it is gated
    (``evoharness.trace.scope``); ``mine_memory``: propose, per chosen cluster, a Memory
    candidate mined from best-vs-worst executions of its tasks
    (``evoharness.memory.bundles.mine``); ``beam``: B, the frontier's width: every frontier
    entry not yet expanded (up to B) is a parent of the next round, each expanded with these
    settings (EvoGen keeps a frontier of 3); ``preservation``: how the round's preservation
    set is selected (``evoharness.trace.preservation``); ``counterfactual``: counterfactual
    attribution after the analysis (``evoharness.trace.counterfactual``). The counts are strict integers (a
    string "3" or a bool is refused, naming the field) and the seeds distinct."""

    model_config = ConfigDict(extra="forbid")

    seeds: list[StrictInt] = Field(default_factory=lambda: list(DEFAULT_SEEDS), min_length=1)
    max_clusters: StrictInt = Field(default=3, ge=1)
    candidates_per_cluster: StrictInt = Field(default=2, ge=1)
    concurrency: StrictInt = Field(default=4, ge=1)
    w_localizer: float = Field(default=0.5, ge=0, le=1)
    gate: GateConfig = Field(default_factory=GateConfig)
    scope: ScopeConfig = Field(default_factory=ScopeConfig)
    mine_memory: bool = True
    preservation: PreservationConfig = Field(default_factory=PreservationConfig)
    beam: StrictInt = Field(default=3, ge=1)
    counterfactual: CounterfactualConfig = Field(default_factory=CounterfactualConfig)

    @field_validator("seeds")
    @classmethod
    def _distinct_seeds(cls, v: list[int]) -> list[int]:
        seen: set[int] = set()
        for s in v:
            if s in seen:
                raise ValueError(f"seed {s} is given twice; the K matched seeds must differ")
            seen.add(s)
        return v


class RoundConfig(RoundSettings):
    """One round's configuration: the run's ``RoundSettings`` plus which run and round (they
    name candidates, ``r<round>-c<i>``, and the report)."""

    run_id: str = "run"
    round: int = 1

    @classmethod
    def of(cls, settings: RoundSettings, run_id: str, round_: int) -> RoundConfig:
        """The config of round ``round_`` of run ``run_id`` with ``settings`` (any
        ``RoundSettings``, e.g. a run's parameters: only the round settings are read)."""
        return cls(
            **{k: getattr(settings, k) for k in RoundSettings.model_fields},
            run_id=run_id,
            round=round_,
        )


class Analysis(BaseModel):
    """Steps 3–4: stats, clusters and attributions of the parent on the target split."""

    stats: list[ConstraintStats]
    clusters: list[FailureCluster]
    attributions: list[Attribution]


class ProposedCandidate(BaseModel):
    """A candidate with the child harness document when it passed the checks."""

    candidate: Candidate
    child: Harness | None = None


# ------------------------------------------------------------------- steps 1–2: execute


def execute_all(
    execute: ExecuteFn,
    harness: Harness,
    tasks: Sequence[Task],
    seeds: Sequence[int],
    concurrency: int = 4,
    on_done: Callable[[Execution], None] | None = None,
) -> list[Execution]:
    """Run ``execute`` for every (task, seed), ``concurrency`` at a time (threads). Returns
    executions in (task, seed) order. ``on_done`` is called after each (heartbeats)."""
    jobs = [(t, s) for t in tasks for s in seeds]

    def one(job: tuple[Task, int]) -> Execution:
        e = execute(harness, job[0], job[1])
        if on_done is not None:
            on_done(e)
        return e

    if concurrency <= 1:
        return [one(j) for j in jobs]
    # each job runs in a copy of the caller's context, so context variables (e.g. an
    # activity context used by ``on_done`` for heartbeats) reach the worker threads
    ctx = contextvars.copy_context()
    with ThreadPoolExecutor(max_workers=concurrency) as pool:
        return list(pool.map(lambda j: ctx.copy().run(one, j), jobs))


def recording(execute: ExecuteFn, into: list[Execution]) -> ExecuteFn:
    """``execute`` that also appends every execution it returns to ``into`` (thread-safe).
    The proposal step runs its scope probes through the ``execute`` port; wrapping the port
    this way counts those executions in the round's cost (``round_cost(..., probes=...)``)."""
    lock = threading.Lock()

    def run(harness: Harness, task: Task, seed: int) -> Execution:
        e = execute(harness, task, seed)
        with lock:
            into.append(e)
        return e

    return run


# ------------------------------------------------------------- steps 3–4: aggregate, localize


def analyze(
    executions: Sequence[Execution],
    tasks: Sequence[Task],
    harness: Harness,
    localize: LocalizeFn,
    seeds: Sequence[int],
    w_localizer: float = 0.5,
) -> Analysis:
    """Aggregate over the matched seeds (every attempt is evidence), cluster the failures, then
    the cost clusters after them (final images pass only after repairs or extra candidates;
    quality first), and attribute each cluster (localizer + evidence). Raises
    ``IncompleteSeedsError`` for a missing seed."""
    stats = aggregate(executions, tasks, seeds)
    clusters = cluster_failures(stats, tasks, executions)
    clusters += cost_clusters(stats, tasks, executions)
    loc = localize(list(clusters), harness) if clusters else []
    return Analysis(
        stats=stats,
        clusters=clusters,
        attributions=attribute(clusters, stats, loc, w_localizer),
    )


# ------------------------------------------------------------------------ step 5: propose


def propose_candidates(
    analysis: Analysis,
    parent: Harness,
    tasks: Sequence[Task],
    ports: RoundPorts,
    cfg: RoundConfig,
    experience: Sequence[Execution] = (),
    known: Sequence[str] = (),
) -> list[ProposedCandidate]:
    """For the ``max_clusters`` largest clusters not attributed to ``no_patch``, ask the
    proposer for N patches and run the proposal checks on each (at most
    ``MAX_RAW_FACTOR``·N answers are read; checking stops after N valid ones); rejected
    candidates keep their reason and never get a harness. Duplicates (same child harness) are
    rejected as ``duplicate``; a checked candidate whose scope probes show a requested object
    broken (``evoharness.trace.scope.run_scope_probes``, when ``cfg.scope.enabled``; the probes
    run on the first ``cfg.scope.seeds`` of the fresh seeds ``validation_seeds(cfg.seeds, 1)``,
    never on the analysis seeds) is rejected as ``scope_regression``; a cost cluster's
    candidate that raises ``checks.max_generator_calls`` or ``checks.work_per_call`` is
    rejected (``checks.cost_increase``); one that moves the same number the same way as an
    earlier candidate of the round (``checks.lever_key``) as ``same_lever``. With ``cfg.mine_memory``, each chosen cluster also gets one
    Memory candidate (``source="memory"``) mined from best-vs-worst ``experience`` executions
    (the parent's own and any earlier harness's on these tasks) of its tasks, through the same
    checks. A child whose harness id is in ``known`` (the frontier) is a ``duplicate``.
    Candidate ids are ``r<round>-c<i>``."""
    by_task = {t.task_id: t for t in tasks}
    attr = {a.cluster_id: a for a in analysis.attributions}
    chosen = [c for c in analysis.clusters if attr[c.cluster_id].chosen != NO_PATCH]
    out: list[ProposedCandidate] = []
    seen: set[str] = set(known) - {harness_id(parent)}
    plans_seen: dict[str, str] = {}
    levers_seen: dict[tuple[str, int], str] = {}
    for cluster in chosen[: cfg.max_clusters]:
        a = attr[cluster.cluster_id]
        try:
            raws = ports.propose(cluster, a, parent, cfg.candidates_per_cluster)
        except Exception as exc:  # noqa: BLE001 - a failing proposer is recorded, not fatal
            raws = []
            out.append(
                ProposedCandidate(
                    candidate=Candidate(
                        candidate_id=f"r{cfg.round}-c{len(out)}",
                        cluster_id=cluster.cluster_id,
                        status=CandidateStatus.rejected,
                        reject_reason=f"proposer_error: {exc}",
                    )
                )
            )
        targets = [by_task[t] for t in dict.fromkeys(m[0] for m in cluster.members)]
        queue: list[tuple[Any, str]] = [
            (r, "rule") for r in raws[: MAX_RAW_FACTOR * cfg.candidates_per_cluster]
        ]
        if cfg.mine_memory and experience:
            mined = mine(targets, experience, created_round=cfg.round)
            mp = memory_patch(parent.memory, mined, f"cluster {cluster.cluster_id}: ")
            if mp is not None:
                queue.append((mp, "memory"))
        n_valid = 0
        for raw, source in queue:
            if n_valid >= cfg.candidates_per_cluster and source != "memory":
                continue
            cid = f"r{cfg.round}-c{len(out)}"
            res = check_proposal(
                raw, parent, targets, cfg.seeds, ports.compile_program, ports.capabilities
            )
            raw_json = raw.model_dump(mode="json") if isinstance(raw, BaseModel) else raw
            cand = Candidate(
                candidate_id=cid,
                cluster_id=cluster.cluster_id,
                patch=res.patch,
                raw=raw_json if not res.ok else None,
                source=source,
            )
            if not res.ok:
                cand.status = CandidateStatus.rejected
                cand.reject_reason = f"{res.reason}: {res.detail}"
                out.append(ProposedCandidate(candidate=cand))
                continue
            assert res.child is not None and res.patch is not None
            lever = lever_key(parent, res.patch)
            why = cost_increase(parent, res.child) if cluster.kind == "cost" else None
            if why is None and res.child_id in seen:
                why = "duplicate: same child harness as an earlier candidate or a frontier entry"
            if why is None and lever is not None and lever in levers_seen:
                why = f"same_lever: moves {lever[0]} the same way as {levers_seen[lever]}"
            if why is not None:
                cand.status = CandidateStatus.rejected
                cand.reject_reason = why
                out.append(ProposedCandidate(candidate=cand))
                continue
            seen.add(res.child_id)
            # Two different patches that compile to the same plans on every target task and
            # analysis seed cannot be told apart by this round's evidence (their target verdicts
            # are the same draws): gate the first only, so Holm's correction does not count one
            # effect twice.
            signature = content_hash(
                [
                    compiled_plan(res.child, ports.compile_program(res.child, t, s))
                    for t in targets
                    for s in cfg.seeds
                ]
            )
            if signature in plans_seen:
                cand.status = CandidateStatus.rejected
                cand.reject_reason = (
                    f"duplicate: same plans on every target task as {plans_seen[signature]}"
                )
                out.append(ProposedCandidate(candidate=cand))
                continue
            plans_seen[signature] = cid
            if cfg.scope.enabled:
                # probes are a pre-acceptance check of the candidate: like the gate, they run
                # on fresh seeds (look 1's), never on the analysis seeds that chose the cluster
                sr = run_scope_probes(
                    ports.execute,
                    parent,
                    res.child,
                    res.patch,
                    validation_seeds(cfg.seeds, 1),
                    cfg.scope,
                )
                cand.scope_probes = scope_summary(sr)
                if not sr.ok:
                    cand.status = CandidateStatus.rejected
                    cand.reject_reason = f"scope_regression: {sr.detail}"
                    out.append(ProposedCandidate(candidate=cand))
                    continue
            n_valid += 1
            if lever is not None:
                levers_seen[lever] = cid
            cand.harness_id = res.child_id
            out.append(ProposedCandidate(candidate=cand, child=res.child))
    return out


# ------------------- steps 7–8: re-localize, decide (step 6, validate, is ``round_validate``'s)


def decide(candidates: Sequence[Candidate], analysis: Analysis, parent_id: str) -> Decision:
    """The round's decision: the accepted candidate with the best ``rank_key`` (utility, then
    Δtarget, then p), or an explicit No-Patch with the reason (no failures; every cluster
    attributed to no_patch; every proposal rejected; or every gate failed, with its reasons)."""
    gated = [c for c in candidates if c.gate is not None]
    accepted = [c for c in gated if c.gate is not None and c.gate.accepted]
    if accepted:
        best = max(accepted, key=lambda c: rank_key(c.gate))  # type: ignore[arg-type]
        g = best.gate
        assert g is not None
        return Decision(
            kind=DecisionKind.accepted,
            reason=(
                f"{best.candidate_id} ({best.cluster_id}) passed the gate: delta_target "
                f"{g.delta_target:+.4f} (p={g.p_value:.4g}), delta_heldout {g.delta_heldout:+.4f}, "
                f"regression {g.regression:.4f} <= {g.epsilon:.4f}, utility {g.utility:+.4f}"
            ),
            harness_id=best.harness_id,
            parent_harness_id=parent_id,
            candidate_id=best.candidate_id,
        )
    if not analysis.clusters:
        reason = "no failures on the target split"
    elif all(a.chosen == NO_PATCH for a in analysis.attributions):
        reason = "every failure cluster is attributed to no_patch (generator noise)"
    elif not gated:
        why = sorted({c.reject_reason.split(":")[0] for c in candidates if c.reject_reason})
        reason = f"no candidate passed the proposal checks (rejected: {', '.join(why) or 'none proposed'})"
    else:
        reason = "no candidate passed the gate: " + " | ".join(
            f"{c.candidate_id}: {'; '.join(c.gate.reasons)}" for c in gated if c.gate is not None
        )
    return Decision(
        kind=DecisionKind.no_patch, reason=reason, harness_id=parent_id, parent_harness_id=parent_id
    )


def relocalize(
    executions: Sequence[Execution], tasks: Sequence[Task], seeds: Sequence[int]
) -> list[FailureCluster]:
    """Residual failures of a harness (step 7): its target executions aggregated and
    clustered, for the next round's localization."""
    stats = aggregate(executions, tasks, seeds)
    return cluster_failures(stats, tasks, executions)


@dataclass(frozen=True)
class ReportHeader:
    """What a round report records as given, copied in unchanged by ``finalize``: the run id,
    the round number (1-based), the parent harness id, the round's cost totals
    (``round_cost``, plus whatever the caller prices), the beam's harness ids when the round
    started (``frontier``) and the round's preservation set."""

    run_id: str
    round: int
    parent_id: str
    cost: Mapping[str, float]
    frontier: Sequence[str] = ()
    preservation: PreservationSet | None = None


def finalize(
    header: ReportHeader,
    analysis: Analysis,
    candidates: Sequence[Candidate],
    executions: Mapping[tuple[str, str], Sequence[Execution]],
    target: Sequence[Task],
    alpha: float | None,
    *,
    stopped: str = "",
) -> RoundReport:
    """Steps 7–8 (decide, re-localize) and the round report: the one finalisation both the
    in-process round (``run_round``) and the ``finalize_round`` activity run.

    ``header``: what the report records as given (``ReportHeader``); the parent is
    ``header.parent_id``. ``candidates``: the round's candidates, each gated one with its
    ``gate`` set (they are copied, not changed). Every gated candidate becomes ``validated``;
    Holm's correction runs across them at ``alpha`` (``correct_gates``; None: no correction,
    as in histories recorded before it); the decision (``decide``, or a No-Patch "stopped:
    <stopped>" when the run was stopped before any gate) marks its candidate ``accepted``.
    ``executions``: ``(harness_id, split)`` → executions, on the validation seeds where a
    harness has them (else the analysis seeds); the chosen harness's (else the parent's)
    target executions give the residual clusters and pass rates."""
    parent_id = header.parent_id
    cands = [c.model_copy(deep=True) for c in candidates]
    for c in cands:
        if c.gate is not None:
            c.status = CandidateStatus.validated
    if alpha is not None:
        correct_gates(cands, alpha)
    if stopped:
        decision = Decision(
            kind=DecisionKind.no_patch,
            reason=f"stopped: {stopped}",
            harness_id=parent_id,
            parent_harness_id=parent_id,
        )
    else:
        decision = decide(cands, analysis, parent_id)
    for c in cands:
        if c.candidate_id == decision.candidate_id:
            c.status = CandidateStatus.accepted
    chosen = decision.harness_id
    res_execs = executions.get((chosen, "target")) or executions.get((parent_id, "target"), [])
    residual = (
        relocalize(res_execs, target, sorted({e.seed for e in res_execs})) if res_execs else []
    )
    return RoundReport(
        run_id=header.run_id,
        round=header.round,
        parent_harness_id=parent_id,
        stats=analysis.stats,
        clusters=analysis.clusters,
        attributions=analysis.attributions,
        candidates=cands,
        decision=decision,
        pass_rates=split_pass_rates(executions, chosen, parent_id),
        cost=dict(header.cost),
        residual_clusters=residual,
        frontier=list(header.frontier),
        preservation=header.preservation,
    )


def split_pass_rates(
    execs: Mapping[tuple[str, str], Sequence[Execution]], chosen: str, parent: str
) -> dict[str, float]:
    """Mean pass rate per split (``aggregate.pass_rate``) of the ``chosen`` harness, or of the
    ``parent`` on a split the chosen one did not run; ``execs`` is keyed by
    ``(harness_id, split)``. Splits neither ran are left out."""
    return {
        s: pass_rate(execs.get((chosen, s)) or execs[(parent, s)])
        for s in EVOLUTION_SPLITS
        if execs.get((chosen, s)) or execs.get((parent, s))
    }


def spent_cost(costs: Iterable[ExecCost]) -> dict[str, float]:
    """Totals over executions' costs (each execution once): ``executions``, ``cache_hits``,
    ``generator_calls`` and ``generator_seconds`` (actually spent: cached executions cost
    nothing now), all floats."""
    out = dict.fromkeys(("executions", "cache_hits", "generator_calls", "generator_seconds"), 0.0)
    for c in costs:
        out["executions"] += 1
        out["cache_hits"] += c.cached
        out["generator_calls"] += c.generator_calls
        out["generator_seconds"] += c.generator_seconds
    return out


def round_cost(
    groups: Any,
    probes: Mapping[str, float] | None = None,
    counterfactual: Mapping[str, float] | None = None,
) -> dict[str, float]:
    """``spent_cost`` of the executions in ``groups`` (iterables of ``Execution``; one
    (harness, task, seed) counted once however often it appears). ``probes``: the ``round_cost`` of the proposal
    step's scope-probe executions (``recording``), added to the totals and also reported on
    their own as ``scope_probe_<total>``; ``counterfactual``: the same for counterfactual
    attribution's probes (``counterfactual_probe_<total>``), so the round's generator calls
    are every call it made."""
    unique: dict[str, Execution] = {}
    for g in groups:
        for e in g:
            unique.setdefault(content_hash([e.harness_id, e.task_id, e.seed]), e)
    out = spent_cost(ExecCost.of(e) for e in unique.values())
    totals = list(out)
    for prefix, extra in (("scope_probe", probes), ("counterfactual_probe", counterfactual)):
        if extra:
            for k in totals:
                out[k] += extra.get(k, 0.0)
                out[f"{prefix}_{k}"] = extra.get(k, 0.0)
    return out
