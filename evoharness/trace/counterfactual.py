"""Counterfactual attribution (issue 29): which part of the harness *caused* a failure.

The localizer scores responsibilities from symptoms (``trace.rule_proposer.localize``, or an
LLM); this step asks the trajectory instead. For the round's failure and cost clusters it
re-runs the parent's own failing (task, seed) pairs — and a sample of passing ones — with one
component of the harness taken out or reset at a time (``schema_levers.components``: each
policy rewrite, the template, each non-default parameter back to its schema default, each
tool, skill, middleware stage, memory guideline and bundle). Same seeds (common random
numbers): where the harness sends the same program, the execution cache serves the same
image for free; where it sends another, the verdict changes only through that component.

**Measure** (``measure``) over matched (task, seed, constraint) verdicts of the probed pairs:
failing final verdicts that now pass (``recovered``), failing first attempts that now pass
(``first_recovered``; verify-and-repair and best-of-N hide a fault from final images, not from
first attempts), passing verdicts that now fail (``broken``), and generated images. Selecting
pairs *because* they failed favours recovery under any change of program (regression to the
mean), so each count is compared with what re-drawing alone gives: the parent's own pass
rate of the same (task, constraint) on its other seeds (``expected_*``). A systematic failure
(fails on every seed) expects no recovery; a 1-in-4 flake expects 3/4. But a probe re-runs
the *same* seed, so the initial noise is shared and a change of program that is not the cause
mostly leaves a failing image failing: re-drawing overstates what such a change recovers and
hides a cause whose failures are a minority of seeds (a fault that only lowers the pass rate).
So once ``min_placebo_components`` components are screened, each failing verdict expects the
smaller of its other-seed rate and the *placebo* (``placebo_of``): the median share of failing
verdicts that the screened components recovered, each component once — what a change that
is not the cause gives at the same seed (robust while causes are fewer than half the parts).

**Cause** (``is_cause``): excess recovery (recovered − expected) of final or of first-attempt
verdicts ≥ max(``min_excess``, ``min_excess_share`` · failing), or generations saved ≥
``min_saving`` of the parent's with no excess loss; and in both cases excess breakage
(broken − expected) ≤ the larger of ``max_excess_broken`` and √expected (one Poisson
standard deviation of re-drawing's breakage, ``broken_tolerance``: a fixed verdict of slack
refused savings whose losses were noise, the more often the larger the passing sample).
Thresholds are design choices (two verdicts, a quarter of the probed failures, one verdict or
one standard deviation of slack, a tenth of the generations), stated here, not fitted.

**Plan** (``run``): levers are ordered by the localizer's scores of their responsibility
(Σ over clusters of score × failing verdicts), document order within one; a lever that changes
no compiled plan of any failing pair is skipped for free (it cannot change a verdict there).
First pass: every lever is *screened* on the same ``screen_pairs`` failing pairs (systematic
failures first, one per task), within ``SCREEN_SHARE`` of the budget; with ``screen_sizing:
budget`` (opt-in) on as many as that share affords over the levers to screen
(``counterfactual_plan.screen_size``: at least ``screen_pairs``, at most every failing pair;
a parameter fault causes a minority of the failures, and a screen of a fixed four pairs
often held none of them); the screens give the placebo.
Second pass, strongest screen first: a lever is confirmed on every probed failing pair and
the passing sample when its screen shows an excess recovery of at least one verdict or a
saving. Confirming stops when the causes found explain ``explained_share`` of the probed
failing verdicts or when the budget (``budget_share`` of the round's estimated generator
calls, ``round_call_estimate``) is spent. When no removal is a cause (a part that does too
little: a trigger or a layout ``when`` missing the failing feature, a number too far from
where prompts pass), the *widening* pass probes, screen then confirm, within the whole
budget, up to ``widenings`` levers (``widenings``: a feature trigger or ``when`` entry for a
failing feature, a skill firing on everything narrowed to it, a number stepped toward its
default or toward what the parent's passing executions used, ``toward_of``). When none of
these is a cause either (a fault of omission, or the generator's own limit), the *additive* levers are probed the same way: the proposer's first
patch in each of the ``additive_responsibilities`` best-scored responsibilities, kept only
when it passes the proposal checks for the deployed generator's capabilities (so no layout
for a generator that cannot take one).

**Result**: a cluster whose member verdicts a cause recovered (a cost cluster: every cause
that saves ``min_saving``) is attributed to the cause's responsibility — of several causes
the strongest: for a failure cluster the largest excess recovery (``_strength``), for a cost
cluster the largest saving (``saving_strength``: the cluster is about generations) —
(``CAUSE_WEIGHT`` of the score mass, the rest the old scores), with the evidence as its
first reason (the LLM proposer's prompt keeps the first reasons, ``services.proposer.prompting``) ("without memory/guidelines[0]: 9 of 12 failing verdicts pass
(0.8 expected by re-drawing), 0 of 40 passing ones fail"); the cause's removal (or the
additive lever) becomes that cluster's first candidate, followed by the schema levers that
narrow it (``schema_levers.levers`` on the same part), then the proposer's own.

No I/O: executions and compilations go through the callables the round passes in (its ports).

This module is the driver (``run``, its prober, the result); the judging of probe outcomes is
``counterfactual_judge`` and the planning of probes ``counterfactual_plan`` (issue 28).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from evoharness.capabilities import GeneratorCapabilities
from evoharness.harness.patch import Patch, apply_patch
from evoharness.harness.schema import Harness, Responsibility
from evoharness.tasks.models import Task
from evoharness.trace.checks import CompileFn, check_proposal
from evoharness.trace.counterfactual_judge import (
    CounterfactualConfig,
    Key,
    Measure,
    Pair,
    PairOutcome,
    Placebo,
    _other_seed_rates,
    _strength,
    evidence_text,
    is_cause,
    measure,
    pair_outcome,
    placebo_of,
    saving_strength,
    screen_passes,
)
from evoharness.trace.counterfactual_plan import (
    _failing_pairs,
    _passing_pairs,
    first_pass_screen,
    responsibility_weights,
    round_call_estimate,
    toward_of,
    widenings,
)
from evoharness.trace.models import (
    Attribution,
    CounterfactualRecord,
    Execution,
    FailureCluster,
    ProbeRecord,
)
from evoharness.trace.schema_levers import (
    Lever,
    components,
    features_of,
    levers,
)
from evoharness.trace.schema_levers import propose as schema_propose

#: Share of a cluster's attribution score mass a confirmed cause takes (its responsibility is
#: then the argmax whatever the other scores: 0.75 > 0.25).
CAUSE_WEIGHT = 0.75
#: Share of the probe budget the first pass (screening every component) may spend; the rest
#: confirms the screens that stand out (a design choice: a confirmation adds the remaining
#: failing pairs and the passing sample to a screen's).
SCREEN_SHARE = 0.6
NO_PATCH = "no_patch"

ExecuteFn = Callable[[Harness, Task, int], Execution]
ProposeFn = Callable[[FailureCluster, Attribution, Harness, int], list[Any]]


@dataclass
class CounterfactualResult:
    """What the step returns: ``attributions`` (every cluster's, updated where a cause was
    found), ``candidates`` (cluster id → patches to propose first, best first) and the
    ``record`` for the round report; ``executions``: every probe execution (for cost)."""

    attributions: list[Attribution]
    candidates: dict[str, list[Patch]] = field(default_factory=dict)
    record: CounterfactualRecord = field(default_factory=CounterfactualRecord)
    executions: list[Execution] = field(default_factory=list)
    schema_levers: bool = True

    def proposer(self, inner: ProposeFn) -> ProposeFn:
        """``inner`` with this step's candidates for a cluster put before its answers and the
        schema levers of the attributed responsibility after them
        (``schema_levers.propose``: a lever for every part, when the templates have none)."""

        def propose(
            cluster: FailureCluster, attribution: Attribution, harness: Harness, n: int
        ) -> list[Any]:
            first: list[Any] = list(self.candidates.get(cluster.cluster_id, []))
            feats = features_of([cluster.constraint_type])
            fallback = (
                schema_propose(harness, attribution.chosen, n, features=feats)
                if self.schema_levers
                else []
            )
            return [*first, *inner(cluster, attribution, harness, n), *fallback]

        return propose


def _onehot(resp: str) -> dict[str, float]:
    return {
        **{r.value: 0.0 for r in Responsibility},
        NO_PATCH: 0.0,
        resp: 1.0,
    }


def _reattribute(a: Attribution, probe: ProbeRecord) -> Attribution:
    scores = {
        k: (1 - CAUSE_WEIGHT) * v + (CAUSE_WEIGHT if k == probe.responsibility else 0.0)
        for k, v in a.scores.items()
    }
    scores.setdefault(probe.responsibility, CAUSE_WEIGHT)
    total = sum(scores.values()) or 1.0
    scores = {k: round(v / total, 6) for k, v in scores.items()}
    return Attribution(
        cluster_id=a.cluster_id,
        scores=scores,
        chosen=probe.responsibility,
        # first, so the LLM proposer's prompt (which keeps the first reasons) carries it
        reasons=[
            f"counterfactual: {probe.evidence}; a cause in {probe.responsibility} "
            f"(attributed there, weight {CAUSE_WEIGHT})",
            *a.reasons,
        ],
    )


@dataclass(frozen=True)
class ProbePorts:
    """What counterfactual attribution runs its probes through (the round's ports):
    ``execute`` and ``compile_program``; ``propose``: the proposer, for the additive levers
    (None: none probed); ``capabilities``: the deployed generator's (additive levers it
    cannot honour are not probed; None: everything honoured); ``concurrency``: executions in
    flight (at least 1)."""

    execute: ExecuteFn
    compile_program: CompileFn
    propose: ProposeFn | None = None
    capabilities: GeneratorCapabilities | None = None
    concurrency: int = 4


class _Prober:
    """Runs probes within the budget and records them (used by ``run`` only)."""

    def __init__(
        self,
        parent: Harness,
        tasks: Mapping[str, Task],
        outcomes: Mapping[Pair, PairOutcome],
        execute: ExecuteFn,
        cfg: CounterfactualConfig,
        budget: float,
        concurrency: int,
    ) -> None:
        self.parent = parent
        self.tasks = tasks
        self.outcomes = outcomes
        self.execute = execute
        self.cfg = cfg
        self.budget = budget
        self.concurrency = max(1, concurrency)
        self.rate_final = _other_seed_rates(outcomes, first=False)
        self.rate_first = _other_seed_rates(outcomes, first=True)
        self.record = CounterfactualRecord(budget_calls=budget)
        self.nominal_calls = 0.0  # generator calls of every probe, cached or not
        self.executions: list[Execution] = []
        self.last_keys: set[Key] = set()
        self.placebo: Placebo | None = None
        #: the first pass (screens of every component) keeps the rest for confirmations
        self.screen_budget = SCREEN_SHARE * budget
        self.gens_per_pair = (
            sum(o.generations for o in outcomes.values()) / len(outcomes) if outcomes else 1.0
        )

    def affordable(self, n_pairs: int, budget: float | None = None) -> bool:
        limit = self.budget if budget is None else budget
        # nominal calls (cache hits included): what the probes may do must not depend on what
        # the execution cache already holds (a retried activity after a killed worker finds
        # its earlier probes cached and would otherwise probe further than the first attempt)
        return self.nominal_calls + n_pairs * self.gens_per_pair <= limit

    def run_pairs(
        self, child: Harness, pairs: Sequence[Pair]
    ) -> tuple[dict[Pair, PairOutcome], int]:
        def one(p: Pair) -> Execution:
            return self.execute(child, self.tasks[p[0]], p[1])

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            done = list(pool.map(one, pairs))
        self.executions.extend(done)
        calls = sum(0 if e.cached else e.generator_calls for e in done)
        self.nominal_calls += sum(e.generator_calls for e in done)
        self.record.spent_calls += calls
        return {(e.task_id, e.seed): pair_outcome(e, self.tasks[e.task_id]) for e in done}, calls

    def measure(self, got: Mapping[Pair, PairOutcome]) -> Measure:
        """``measure`` against the parent with this round's placebo (None: re-drawing)."""
        return measure(self.outcomes, got, self.rate_final, self.rate_first, self.placebo)

    def screen(
        self,
        lever: Lever,
        failing: Sequence[Pair],
        budget: float | None = None,
        n: int | None = None,
    ) -> tuple[Harness, dict[Pair, PairOutcome], int] | None:
        """Run ``lever`` on the first ``n`` failing pairs (default ``cfg.screen_pairs``; the
        first pass passes ``screen_size``); None when the budget (``budget``; default
        ``screen_budget``, the first pass's share) does not cover them."""
        screen = list(failing[: self.cfg.screen_pairs if n is None else n])
        limit = self.screen_budget if budget is None else budget
        if not screen or not self.affordable(len(screen), limit):
            return None
        child = apply_patch(self.parent, lever.patch)
        got, calls = self.run_pairs(child, screen)
        return child, got, calls

    def finish(
        self,
        lever: Lever,
        kind: str,
        screened: tuple[Harness, dict[Pair, PairOutcome], int],
        failing: Sequence[Pair],
        passing: Sequence[Pair],
        clusters: Sequence[FailureCluster],
        confirm: bool = True,
    ) -> ProbeRecord:
        """Judge a screened lever: confirm it on every probed pair when ``confirm`` and the
        screen passes (and the budget covers it), apply the cause rule, record the probe.
        ``screened``: what ``screen`` returned (the child, its outcomes, the calls spent)."""
        child, got, calls = screened
        m = self.measure(got)
        stage = "screen"
        if confirm and screen_passes(m, self.cfg):
            rest = [p for p in [*failing, *passing] if p not in got]
            if self.affordable(len(rest)):
                more, more_calls = self.run_pairs(child, rest)
                got = {**got, **more}
                calls += more_calls
                m = self.measure(got)
                stage = "confirm"
        cause = stage == "confirm" and is_cause(m, self.cfg)
        members = {c.cluster_id: {(t, cid) for t, cid in c.members} for c in clusters}
        hit = sorted(
            cid
            for cid, mem in members.items()
            if any((k[0], k[2]) in mem for k in m.recovered_keys)
        )
        if cause and m.saving >= self.cfg.min_saving:
            hit = sorted({*hit, *(c.cluster_id for c in clusters if c.kind == "cost")})
        rec = ProbeRecord(
            label=lever.label,
            path=lever.path,
            kind=kind,
            responsibility=lever.responsibility,
            patch=lever.patch,
            stage=stage,
            n_pairs=m.n_pairs,
            failing=m.failing,
            recovered=m.recovered,
            expected_recovered=round(m.expected_recovered, 4),
            first_failing=m.first_failing,
            first_recovered=m.first_recovered,
            expected_first_recovered=round(m.expected_first_recovered, 4),
            passing=m.passing,
            broken=m.broken,
            expected_broken=round(m.expected_broken, 4),
            generations_parent=m.generations_parent,
            generations=m.generations,
            generator_calls=calls,
            cause=cause,
            clusters=hit if cause else [],
            evidence=evidence_text(lever.label, kind, m, calls, self.placebo),
        )
        self.record.probes.append(rec)
        self.last_keys = set(m.recovered_keys)
        return rec

    def probe(
        self,
        lever: Lever,
        kind: str,
        failing: Sequence[Pair],
        passing: Sequence[Pair],
        clusters: Sequence[FailureCluster],
        budget: float | None = None,
    ) -> ProbeRecord | None:
        """Screen (within ``budget``, as ``screen``), then confirm; None when the budget does
        not cover the screen."""
        s = self.screen(lever, failing, budget)
        if s is None:
            return None
        return self.finish(lever, kind, s, failing, passing, clusters)


def run(
    clusters: Sequence[FailureCluster],
    attributions: Sequence[Attribution],
    parent: Harness,
    tasks: Sequence[Task],
    parent_executions: Sequence[Execution],
    ports: ProbePorts,
    cfg: CounterfactualConfig,
    budget_calls: float,
) -> CounterfactualResult:
    """Counterfactual attribution for one round (module docstring).

    ``clusters``/``attributions``: the round's analysis; ``tasks``: every task the parent ran
    in ``parent_executions`` (target, and preservation for the passing sample), on the
    analysis seeds; ``ports``: what the probes run through (``ProbePorts``); ``budget_calls``:
    generator calls it may spend (``cfg.budget_share`` × ``round_call_estimate``, by the
    caller). Returns a ``CounterfactualResult``; with ``cfg.enabled`` false or no cluster,
    the attributions unchanged and an empty record."""
    attrs = list(attributions)
    if not cfg.enabled or not clusters:
        return CounterfactualResult(
            attrs,
            record=CounterfactualRecord(stopped="no_failures"),
            schema_levers=cfg.schema_levers,
        )
    by_id = {t.task_id: t for t in tasks}
    outcomes = {
        (e.task_id, e.seed): pair_outcome(e, by_id[e.task_id])
        for e in parent_executions
        if e.task_id in by_id
    }
    compile_program = ports.compile_program
    prober = _Prober(parent, by_id, outcomes, ports.execute, cfg, budget_calls, ports.concurrency)
    cluster_tasks = {m[0] for c in clusters for m in c.members}
    failing = _failing_pairs(outcomes, cluster_tasks, prober.rate_final, cfg.max_failing_pairs)
    passing = _passing_pairs(outcomes, cfg.passing_pairs)
    rec = prober.record
    if not failing:
        rec.stopped = "no_failures"
        return CounterfactualResult(attrs, record=rec, schema_levers=cfg.schema_levers)
    weights = responsibility_weights(clusters, attrs)
    comps = sorted(
        enumerate(components(parent)), key=lambda ic: (-weights[ic[1].responsibility], ic[0])
    )
    fail_tasks = [by_id[t] for t in dict.fromkeys(p[0] for p in failing)]
    fail_seeds = sorted({p[1] for p in failing})
    failing_keys = {
        (t, s, cid)
        for (t, s) in failing
        for o in (outcomes[(t, s)].final, outcomes[(t, s)].first)
        for cid, ok in o.items()
        if not ok
    }
    explained: set[Key] = set()
    causes: list[ProbeRecord] = []
    rec.stopped = "exhausted"
    # first pass: screen every component (in the localizer's order) within SCREEN_SHARE of
    # the budget; the screens give the placebo (what a change that is not the cause recovers)
    # on as many failing pairs as that share affords over the levers to screen (screen_size)
    screenable: list[Lever] = []
    for _, lever in comps:
        chk = check_proposal(lever.patch, parent, fail_tasks, fail_seeds, compile_program)
        if not chk.ok:
            rec.skipped.append(f"{lever.label}: {chk.reason}")
            continue
        screenable.append(lever)
    n_screen = first_pass_screen(
        cfg, len(failing), len(screenable), prober.screen_budget, prober.gens_per_pair
    )
    rec.screen_pairs = n_screen
    screened: list[tuple[Lever, Harness, dict[Pair, PairOutcome], int]] = []
    for lever in screenable:
        s = prober.screen(lever, failing, n=n_screen)
        if s is None:
            rec.stopped = "budget"
            break
        screened.append((lever, *s))
    prober.placebo = placebo_of(
        [
            (lv.path, measure(outcomes, got, prober.rate_final, prober.rate_first))
            for lv, _, got, _ in screened
        ],
        cfg.min_placebo_components,
    )
    rec.placebo_final = prober.placebo.final if prober.placebo else None
    rec.placebo_first = prober.placebo.first if prober.placebo else None
    # second pass: confirm the screens that stand out against the placebo, strongest first
    order = {id(lv): i for i, (lv, _, _, _) in enumerate(screened)}

    def standing(item: tuple[Lever, Harness, dict[Pair, PairOutcome], int]) -> tuple[float, int]:
        m = prober.measure(item[2])
        return (-(max(m.excess_first, m.excess_recovered) + m.saving), order[id(item[0])])

    done = False
    for lever, child, got, calls in sorted(screened, key=standing):
        p = prober.finish(
            lever, lever.kind, (child, got, calls), failing, passing, clusters, confirm=not done
        )
        if p.cause:
            causes.append(p)
            explained |= prober.last_keys & failing_keys
            if len(explained) >= cfg.explained_share * len(failing_keys):
                rec.stopped = "explained"
                done = True
    if not causes and cfg.widenings and rec.stopped != "budget":
        toward = toward_of(parent, parent_executions, outcomes)
        feats = features_of(c.constraint_type for c in clusters if c.kind == "failure")
        probed = 0
        for lever in widenings(parent, weights, feats, toward):
            if probed >= cfg.widenings:
                break
            chk = check_proposal(lever.patch, parent, fail_tasks, fail_seeds, compile_program)
            if not chk.ok:
                rec.skipped.append(f"{lever.label}: {chk.reason}")
                continue
            wp = prober.probe(lever, lever.kind, failing, passing, clusters, budget_calls)
            if wp is None:
                rec.stopped = "budget"
                break
            probed += 1
            if wp.cause:
                causes.append(wp)
                explained |= prober.last_keys & failing_keys
                if len(explained) >= cfg.explained_share * len(failing_keys):
                    rec.stopped = "explained"
                    break
    if not causes and ports.propose is not None and rec.stopped != "budget":
        causes = _additive(clusters, attrs, failing, passing, prober, ports)
    causes.sort(key=_strength, reverse=True)
    rec.causes = [c.label for c in causes]
    out = CounterfactualResult(
        attrs, record=rec, executions=prober.executions, schema_levers=cfg.schema_levers
    )
    kinds = {c.cluster_id: c.kind for c in clusters}
    for i, a in enumerate(attrs):
        mine = [c for c in causes if a.cluster_id in c.clusters]
        if kinds.get(a.cluster_id) == "cost":
            mine.sort(key=saving_strength, reverse=True)
        best = mine[0] if mine else None
        if best is None or best.patch is None:
            continue
        attrs[i] = _reattribute(a, best)
        out.candidates[a.cluster_id] = [best.patch, *_narrowing(parent, best)]
    return out


def _narrowing(parent: Harness, cause: ProbeRecord) -> list[Patch]:
    """Schema levers on the cause's own part other than the cause itself (narrowing it:
    removing one trigger, resetting one field, stepping a number), at most two."""
    if cause.kind == "add":
        return []
    out: list[Patch] = []
    for lv in levers(parent, cause.responsibility):
        if lv.path != cause.path and lv.path.startswith(cause.path + "/"):
            out.append(lv.patch)
        if len(out) >= 2:
            break
    return out


def _additive(
    clusters: Sequence[FailureCluster],
    attrs: Sequence[Attribution],
    failing: Sequence[Pair],
    passing: Sequence[Pair],
    prober: _Prober,
    ports: ProbePorts,
) -> list[ProbeRecord]:
    """Probe the proposer's first patch (``ports.propose``, not None) in each of the
    best-scored responsibilities of the largest failure cluster (module docstring, "additive
    levers") on ``prober``'s parent and tasks; returns the causes."""
    parent, by_id, cfg = prober.parent, prober.tasks, prober.cfg
    propose, compile_program, capabilities = (
        ports.propose,
        ports.compile_program,
        ports.capabilities,
    )
    if propose is None or not cfg.additive_responsibilities:
        return []
    by_attr = {a.cluster_id: a for a in attrs}
    cluster = max(clusters, key=lambda c: (c.kind == "failure", c.n_failures))
    a = by_attr.get(cluster.cluster_id)
    if a is None:
        return []
    ranked = sorted((r.value for r in Responsibility), key=lambda r: -a.scores.get(r, 0.0))[
        : cfg.additive_responsibilities
    ]
    ctasks = [by_id[t] for t in dict.fromkeys(m[0] for m in cluster.members) if t in by_id]
    cpairs = [p for p in failing if p[0] in {t.task_id for t in ctasks}] or list(failing)
    seeds = sorted({p[1] for p in cpairs})
    causes: list[ProbeRecord] = []
    for resp in ranked:
        forced = Attribution(
            cluster_id=cluster.cluster_id,
            scores=_onehot(resp),
            chosen=resp,
            reasons=["counterfactual: additive lever probe"],
        )
        try:
            raws = propose(cluster, forced, parent, 1)
        except Exception:  # noqa: BLE001 - an untrusted proposer's failure skips the lever
            continue
        for raw in raws[:2]:
            chk = check_proposal(raw, parent, ctasks, seeds, compile_program, capabilities)
            if not chk.ok or chk.patch is None:
                prober.record.skipped.append(f"additive {resp}: {chk.reason}")
                continue
            lever = Lever(
                path=f"/{chk.patch.responsibility.value}",
                kind="reset",
                label=f"{chk.patch.responsibility.value} lever: {chk.patch.rationale[:80]}",
                component=False,
                patch=chk.patch,
            )
            p = prober.probe(lever, "add", cpairs, passing, clusters)
            if p is None:
                prober.record.stopped = "budget"
                return causes
            if p.cause:
                causes.append(p)
            break
    return causes


__all__ = [
    "CounterfactualConfig",
    "CounterfactualResult",
    "Measure",
    "PairOutcome",
    "Placebo",
    "ProbePorts",
    "placebo_of",
    "is_cause",
    "measure",
    "pair_outcome",
    "round_call_estimate",
    "run",
    "toward_of",
    "widenings",
]
