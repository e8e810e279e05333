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
(broken − expected) ≤ ``max_excess_broken``. Thresholds are design choices (two verdicts, a
quarter of the probed failures, one verdict of slack, a tenth of the generations), stated
here, not fitted.

**Plan** (``run``): levers are ordered by the localizer's scores of their responsibility
(Σ over clusters of score × failing verdicts), document order within one; a lever that changes
no compiled plan of any failing pair is skipped for free (it cannot change a verdict there).
First pass: every lever is *screened* on ``screen_pairs`` failing pairs (systematic failures
first, one per task), within ``SCREEN_SHARE`` of the budget; the screens give the placebo.
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

**Result**: a cluster whose member verdicts a cause recovered is attributed to the cause's
responsibility (``CAUSE_WEIGHT`` of the score mass, the rest the old scores), with the
evidence as its first reason (the LLM proposer's prompt keeps the first reasons,
``services.proposer.prompting``) ("without memory/guidelines[0]: 9 of 12 failing verdicts pass
(0.8 expected by re-drawing), 0 of 40 passing ones fail"); the cause's removal (or the
additive lever) becomes that cluster's first candidate, followed by the schema levers that
narrow it (``schema_levers.levers`` on the same part), then the proposer's own.

No I/O: executions and compilations go through the callables the round passes in (its ports).
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evoharness.canonical import content_hash
from evoharness.capabilities import GeneratorCapabilities
from evoharness.evidence import EvidenceStatus
from evoharness.harness.patch import Patch, apply_patch
from evoharness.harness.schema import Harness, Responsibility
from evoharness.tasks.models import Task
from evoharness.trace.aggregate import attempts
from evoharness.trace.checks import CompileFn, check_proposal
from evoharness.trace.models import (
    Attribution,
    CounterfactualRecord,
    Execution,
    FailureCluster,
    ProbeRecord,
)
from evoharness.trace.schema_levers import (
    COMPONENT_DEPTH,
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
#: confirms the screens that stand out (a design choice: screens are 4 pairs, a
#: confirmation about three times that).
SCREEN_SHARE = 0.6
NO_PATCH = "no_patch"

ExecuteFn = Callable[[Harness, Task, int], Execution]
ProposeFn = Callable[[FailureCluster, Attribution, Harness, int], list[Any]]
#: A (task id, seed) pair and a (task id, seed, constraint id) verdict key.
Pair = tuple[str, int]
Key = tuple[str, int, str]


class CounterfactualConfig(BaseModel):
    """Settings of counterfactual attribution (module docstring gives each rule).

    ``enabled``: run it; ``budget_share``: generator calls it may spend, as a share of the
    round's estimated calls (issue 29: 25%); ``screen_pairs``: failing pairs of the screen;
    ``max_failing_pairs``/``passing_pairs``: failing pairs and passing sample of a
    confirmation; ``min_excess``/``min_excess_share``/``max_excess_broken``/``min_saving``:
    the cause rule; ``explained_share``: stop when the causes explain this share of the
    probed failing verdicts; ``additive_responsibilities``: responsibilities whose additive
    lever is probed when no removal is a cause (0: none); ``schema_levers``: the round's
    proposer also offers the attributed responsibility's schema levers
    (``CounterfactualResult.proposer``), whether or not probes ran;
    ``min_placebo_components``: screened components needed before their median recovery
    (``placebo``) replaces re-drawing as the null (fewer: re-drawing alone); ``widenings``:
    at most this many widening levers (``widenings``) probed when no removal is a cause (0:
    none)."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool = True
    budget_share: float = Field(default=0.25, ge=0, le=1)
    screen_pairs: int = Field(default=4, ge=1)
    max_failing_pairs: int = Field(default=12, ge=1)
    passing_pairs: int = Field(default=6, ge=0)
    min_excess: float = Field(default=2.0, ge=0)
    min_excess_share: float = Field(default=0.25, ge=0, le=1)
    max_excess_broken: float = Field(default=1.0, ge=0)
    min_saving: float = Field(default=0.1, gt=0, le=1)
    explained_share: float = Field(default=0.5, gt=0, le=1)
    additive_responsibilities: int = Field(default=3, ge=0, le=5)
    schema_levers: bool = True
    min_placebo_components: int = Field(default=3, ge=1)
    widenings: int = Field(default=8, ge=0)


# ------------------------------------------------------------------------ outcomes of pairs


@dataclass(frozen=True)
class PairOutcome:
    """One execution's verdicts: ``final`` and ``first`` (first attempt) per constraint id
    (uncertain = not passed, the gate's convention) and ``generations`` (images generated)."""

    final: Mapping[str, bool]
    first: Mapping[str, bool]
    generations: int


def pair_outcome(execution: Execution, task: Task) -> PairOutcome:
    """Final and first-attempt verdicts of ``execution`` on ``task``'s constraints. The first
    attempt's verdicts are the runtime's own (``aggregate.attempts``), matched by (type,
    subject) or by type alone when the task has one constraint of it (``Attempt.status_of``); a constraint the runtime did not verify on it, or an execution of one attempt,
    takes the final verdict."""
    final = {ev.constraint_id: ev.status is EvidenceStatus.passed for ev in execution.evidence}
    tries = attempts(execution)
    first = dict(final)
    if len(tries) > 1 and not tries[0].selected:
        n_of_type = Counter(c.type.value for c in task.constraints)
        for c in task.constraints:
            st = tries[0].status_of(c.type.value, c.subject, n_of_type[c.type.value])
            if st is not None and c.constraint_id in first:
                first[c.constraint_id] = st == EvidenceStatus.passed.value
    return PairOutcome(final, first, max(1, len(execution.programs)))


def _other_seed_rates(outcomes: Mapping[Pair, PairOutcome], first: bool) -> dict[Key, float]:
    """Per verdict key, the pass rate of its (task, constraint) on the *other* seeds (0.5
    when there is no other seed)."""
    per: dict[tuple[str, str], dict[int, bool]] = {}
    for (tid, seed), o in outcomes.items():
        for cid, ok in (o.first if first else o.final).items():
            per.setdefault((tid, cid), {})[seed] = ok
    out: dict[Key, float] = {}
    for (tid, cid), by_seed in per.items():
        n = len(by_seed)
        total = sum(by_seed.values())
        for seed, ok in by_seed.items():
            out[(tid, seed, cid)] = (total - ok) / (n - 1) if n > 1 else 0.5
    return out


@dataclass(frozen=True)
class Placebo:
    """What a change of program *at the same seed* recovers when it is not the cause: the
    median, over the screened components, of the share of failing final (``final``) and
    first-attempt (``first``) verdicts that passed after the change; ``n``: components it
    is the median of. Module docstring, "Measure"."""

    final: float
    first: float
    n: int


@dataclass(frozen=True)
class Measure:
    """Counts of one probe (``ProbeRecord`` documents each field) and the recovered keys."""

    n_pairs: int
    failing: int
    recovered: int
    expected_recovered: float
    first_failing: int
    first_recovered: int
    expected_first_recovered: float
    passing: int
    broken: int
    expected_broken: float
    generations_parent: int
    generations: int
    recovered_keys: frozenset[Key]

    @property
    def excess_recovered(self) -> float:
        return self.recovered - self.expected_recovered

    @property
    def excess_first(self) -> float:
        return self.first_recovered - self.expected_first_recovered

    @property
    def excess_broken(self) -> float:
        return self.broken - self.expected_broken

    @property
    def saving(self) -> float:
        """Generations saved as a share of the parent's on the probed pairs."""
        if not self.generations_parent:
            return 0.0
        return (self.generations_parent - self.generations) / self.generations_parent


def measure(
    parent: Mapping[Pair, PairOutcome],
    child: Mapping[Pair, PairOutcome],
    pass_rate_final: Mapping[Key, float],
    pass_rate_first: Mapping[Key, float],
    placebo: Placebo | None = None,
) -> Measure:
    """Compare ``child`` with ``parent`` on the pairs ``child`` ran (module docstring,
    "Measure"). ``pass_rate_*``: the parent's other-seed pass rate per verdict key (final and
    first attempt); a key missing there expects 0.5. ``placebo``: when given, a failing
    verdict's expected recovery is the smaller of its other-seed rate and the placebo's share
    (same seed: a change of program is not a fresh draw). Raises ``KeyError`` when ``child``
    ran a pair ``parent`` did not."""
    cap_final = placebo.final if placebo is not None else 1.0
    cap_first = placebo.first if placebo is not None else 1.0
    failing = recovered = first_failing = first_recovered = passing = broken = 0
    exp_rec = exp_first = exp_broken = 0.0
    gens_p = gens_c = 0
    keys: set[Key] = set()
    for pair, c in child.items():
        p = parent[pair]
        gens_p += p.generations
        gens_c += c.generations
        for cid, ok in p.final.items():
            key = (pair[0], pair[1], cid)
            now = c.final.get(cid, False)
            if ok:
                passing += 1
                exp_broken += 1.0 - pass_rate_final.get(key, 0.5)
                broken += not now
            else:
                failing += 1
                exp_rec += min(cap_final, pass_rate_final.get(key, 0.5))
                if now:
                    recovered += 1
                    keys.add(key)
        for cid, ok in p.first.items():
            if ok:
                continue
            key = (pair[0], pair[1], cid)
            first_failing += 1
            exp_first += min(cap_first, pass_rate_first.get(key, 0.5))
            if c.first.get(cid, False):
                first_recovered += 1
                keys.add(key)
    return Measure(
        n_pairs=len(child),
        failing=failing,
        recovered=recovered,
        expected_recovered=exp_rec,
        first_failing=first_failing,
        first_recovered=first_recovered,
        expected_first_recovered=exp_first,
        passing=passing,
        broken=broken,
        expected_broken=exp_broken,
        generations_parent=gens_p,
        generations=gens_c,
        recovered_keys=frozenset(keys),
    )


def is_cause(m: Measure, cfg: CounterfactualConfig) -> bool:
    """The cause rule of the module docstring on a confirmation measure."""
    if m.excess_broken > cfg.max_excess_broken:
        return False
    need = max(cfg.min_excess, cfg.min_excess_share * m.failing)
    need_first = max(cfg.min_excess, cfg.min_excess_share * m.first_failing)
    if m.failing and m.excess_recovered >= need:
        return True
    if m.first_failing and m.excess_first >= need_first:
        return True
    return m.saving >= cfg.min_saving and m.excess_recovered >= 0


def component_of(path: str) -> str:
    """The component a lever's path belongs to: its first ``COMPONENT_DEPTH`` segments
    (``/skills/skills/3/priority`` → ``/skills/skills/3``; ``/memory/enabled`` stays)."""
    return "/".join(path.split("/")[: COMPONENT_DEPTH + 1])


def placebo_of(screens: Sequence[tuple[str, Measure]], min_components: int) -> Placebo | None:
    """The placebo (``Placebo``) of a round from its screens: ``screens`` are (lever path,
    screen measure) in the order run; each component counts once (its first lever), so a
    component with several levers does not outvote the others. The median share of failing
    verdicts recovered per component, final and first attempt, over the components that had
    such verdicts. None when fewer than ``min_components`` components were screened (the
    median of two is no robust null).

    Why: probes re-run the parent's own seeds, so the initial noise is the same and a change
    of program that is not the cause mostly leaves a failing image failing; the other seeds'
    pass rate (re-drawing) expects far more recovery than such a change gives and hides a
    real cause whose failures are a minority of seeds. The median is robust while fewer
    than half the components are causes (one broken part among many)."""
    first_by: dict[str, Measure] = {}
    for path, m in screens:
        first_by.setdefault(component_of(path), m)
    if len(first_by) < min_components:
        return None
    fin = [m.recovered / m.failing for m in first_by.values() if m.failing]
    fst = [m.first_recovered / m.first_failing for m in first_by.values() if m.first_failing]
    return Placebo(
        final=statistics.median(fin) if fin else 1.0,
        first=statistics.median(fst) if fst else 1.0,
        n=len(first_by),
    )


def screen_passes(m: Measure, cfg: CounterfactualConfig) -> bool:
    """Worth confirming: the screen recovered at least one verdict more than re-drawing
    would (final or first attempt), or saved ``min_saving`` of the generations."""
    return m.excess_recovered >= 1 or m.excess_first >= 1 or m.saving >= cfg.min_saving


def evidence_text(
    label: str, kind: str, m: Measure, calls: int, placebo: Placebo | None = None
) -> str:
    """The probe in words (the issue's form: "without guideline g1: 9 of 12 failing verdicts
    pass, 0 of 40 passing ones fail"); ``placebo``: the null the expectations used."""
    what = f"with {label}" if kind == "add" else f"after '{label}'"
    null = (
        "by re-drawing"
        if placebo is None
        else f"by changing another component, median of {placebo.n}"
    )
    return (
        f"{what}: {m.recovered} of {m.failing} failing verdicts pass "
        f"({m.expected_recovered:.1f} expected {null}), {m.first_recovered} of "
        f"{m.first_failing} failing first attempts pass ({m.expected_first_recovered:.1f} "
        f"expected), {m.broken} of {m.passing} passing verdicts fail "
        f"({m.expected_broken:.1f} expected); generations {m.generations_parent} -> "
        f"{m.generations} over {m.n_pairs} (task, seed) pairs; probe cost {calls} "
        "generator calls"
    )


# ---------------------------------------------------------------------------- the plan


def round_call_estimate(
    generations_per_execution: float,
    n_seeds: int,
    n_analysis_tasks: int,
    n_validation_tasks: int,
    n_candidates: int,
) -> float:
    """The generator calls a round makes, estimated before its candidates exist: the
    parent's analysis executions (``n_analysis_tasks`` × ``n_seeds``) plus validation of the
    parent and ``n_candidates`` candidates on every split on as many fresh seeds, each at the
    parent's ``generations_per_execution``."""
    execs = n_seeds * (n_analysis_tasks + (1 + n_candidates) * n_validation_tasks)
    return max(0.0, generations_per_execution) * execs


def responsibility_weights(
    clusters: Sequence[FailureCluster], attributions: Sequence[Attribution]
) -> dict[str, float]:
    """Σ over clusters of the attribution score × the cluster's failing verdicts (at least
    1), per responsibility: the order in which counterfactual probes are run."""
    by_id = {a.cluster_id: a for a in attributions}
    out = {r.value: 0.0 for r in Responsibility}
    for c in clusters:
        a = by_id.get(c.cluster_id)
        if a is None:
            continue
        for r in out:
            out[r] += a.scores.get(r, 0.0) * max(1, c.n_failures)
    return out


def _failing_pairs(
    outcomes: Mapping[Pair, PairOutcome],
    tasks: set[str],
    rates: Mapping[Key, float],
    limit: int,
) -> list[Pair]:
    """Pairs of ``tasks`` with a failing final or first-attempt verdict, systematic failures
    first (lowest expected recovery), one pair per task per turn, at most ``limit``."""
    per_task: dict[str, list[tuple[float, Pair]]] = {}
    for pair, o in outcomes.items():
        if pair[0] not in tasks:
            continue
        bad = [cid for cid, ok in o.first.items() if not ok]
        bad += [cid for cid, ok in o.final.items() if not ok]
        if not bad:
            continue
        exp = min(rates.get((pair[0], pair[1], cid), 0.5) for cid in bad)
        per_task.setdefault(pair[0], []).append((exp, pair))
    queues = [sorted(v) for _, v in sorted(per_task.items(), key=lambda kv: min(kv[1]))]
    out: list[Pair] = []
    while len(out) < limit and any(queues):
        for q in queues:
            if q and len(out) < limit:
                out.append(q.pop(0)[1])
    return out


def _passing_pairs(outcomes: Mapping[Pair, PairOutcome], limit: int) -> list[Pair]:
    """Up to ``limit`` pairs whose final verdicts all pass, in a seeded hash order (a
    deterministic sample that does not favour task order)."""
    ok = [p for p, o in outcomes.items() if o.final and all(o.final.values())]
    return sorted(ok, key=lambda p: content_hash(["cf-passing", p[0], p[1]]))[:limit]


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
        return self.record.spent_calls + n_pairs * self.gens_per_pair <= limit

    def run_pairs(
        self, child: Harness, pairs: Sequence[Pair]
    ) -> tuple[dict[Pair, PairOutcome], int]:
        def one(p: Pair) -> Execution:
            return self.execute(child, self.tasks[p[0]], p[1])

        with ThreadPoolExecutor(max_workers=self.concurrency) as pool:
            done = list(pool.map(one, pairs))
        self.executions.extend(done)
        calls = sum(0 if e.cached else e.generator_calls for e in done)
        self.record.spent_calls += calls
        return {(e.task_id, e.seed): pair_outcome(e, self.tasks[e.task_id]) for e in done}, calls

    def measure(self, got: Mapping[Pair, PairOutcome]) -> Measure:
        """``measure`` against the parent with this round's placebo (None: re-drawing)."""
        return measure(self.outcomes, got, self.rate_final, self.rate_first, self.placebo)

    def screen(
        self, lever: Lever, failing: Sequence[Pair], budget: float | None = None
    ) -> tuple[Harness, dict[Pair, PairOutcome], int] | None:
        """Run ``lever`` on the first ``screen_pairs`` failing pairs; None when the budget
        (``budget``; default ``screen_budget``, the first pass's share) does not cover them."""
        screen = list(failing[: self.cfg.screen_pairs])
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
        child: Harness,
        got: dict[Pair, PairOutcome],
        calls: int,
        failing: Sequence[Pair],
        passing: Sequence[Pair],
        clusters: Sequence[FailureCluster],
        confirm: bool = True,
    ) -> ProbeRecord:
        """Judge a screened lever: confirm it on every probed pair when ``confirm`` and the
        screen passes (and the budget covers it), apply the cause rule, record the probe."""
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
        return self.finish(lever, kind, *s, failing, passing, clusters)


def _strength(p: ProbeRecord) -> tuple[float, float, float, int]:
    """Order of causes: excess first-attempt recovery, then final, then least breakage, then
    fewest generations (a fix at the cause before a mask)."""
    return (
        p.first_recovered - p.expected_first_recovered,
        p.recovered - p.expected_recovered,
        -(p.broken - p.expected_broken),
        -p.generations,
    )


def run(
    clusters: Sequence[FailureCluster],
    attributions: Sequence[Attribution],
    parent: Harness,
    tasks: Sequence[Task],
    parent_executions: Sequence[Execution],
    execute: ExecuteFn,
    compile_program: CompileFn,
    cfg: CounterfactualConfig,
    budget_calls: float,
    *,
    propose: ProposeFn | None = None,
    capabilities: GeneratorCapabilities | None = None,
    concurrency: int = 4,
) -> CounterfactualResult:
    """Counterfactual attribution for one round (module docstring).

    ``clusters``/``attributions``: the round's analysis; ``tasks``: every task the parent ran
    in ``parent_executions`` (target, and preservation for the passing sample), on the
    analysis seeds; ``execute``/``compile_program``: the round's ports; ``budget_calls``:
    generator calls it may spend (``cfg.budget_share`` × ``round_call_estimate``, by the
    caller); ``propose``: the proposer port, for the additive levers (None: none probed);
    ``capabilities``: the deployed generator's (additive levers it cannot honour are not
    probed). Returns a ``CounterfactualResult``; with ``cfg.enabled`` false or no cluster,
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
    prober = _Prober(parent, by_id, outcomes, execute, cfg, budget_calls, concurrency)
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
    screened: list[tuple[Lever, Harness, dict[Pair, PairOutcome], int]] = []
    for _, lever in comps:
        chk = check_proposal(lever.patch, parent, fail_tasks, fail_seeds, compile_program)
        if not chk.ok:
            rec.skipped.append(f"{lever.label}: {chk.reason}")
            continue
        s = prober.screen(lever, failing)
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
            lever, lever.kind, child, got, calls, failing, passing, clusters, confirm=not done
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
    if not causes and propose is not None and rec.stopped != "budget":
        causes = _additive(
            clusters,
            attrs,
            parent,
            by_id,
            failing,
            passing,
            prober,
            propose,
            compile_program,
            capabilities,
            cfg,
        )
    causes.sort(key=_strength, reverse=True)
    rec.causes = [c.label for c in causes]
    out = CounterfactualResult(
        attrs, record=rec, executions=prober.executions, schema_levers=cfg.schema_levers
    )
    for i, a in enumerate(attrs):
        best = next((c for c in causes if a.cluster_id in c.clusters), None)
        if best is None or best.patch is None:
            continue
        attrs[i] = _reattribute(a, best)
        out.candidates[a.cluster_id] = [best.patch, *_narrowing(parent, best)]
    return out


def widenings(
    parent: Harness,
    weights: Mapping[str, float],
    features: Sequence[str],
    toward: Mapping[str, float],
) -> list[Lever]:
    """The levers the widening pass probes when no removal is a cause (module docstring,
    "Plan"): in each responsibility, best-weighted first (``responsibility_weights``; ties in
    document order), its ``schema_levers.levers`` (with ``toward`` and ``features``) of kind
    ``widen``/``narrow`` that add one of the failing ``features`` (a trigger or a layout
    ``when`` that misses a failing feature; a skill firing everywhere narrowed to it), then
    its ``step`` levers (a number toward its default or toward what passing executions
    used). A removal cannot find a fault of a part that does too little; these can."""
    order = sorted(Responsibility, key=lambda r: -weights.get(r.value, 0.0))
    out: list[Lever] = []
    for resp in order:
        lvs = levers(parent, resp, toward, features)
        out += [lv for lv in lvs if lv.kind in {"widen", "narrow"} and lv.feature in features]
        out += [lv for lv in lvs if lv.kind == "step"]
    return out


def toward_of(
    parent: Harness,
    executions: Sequence[Execution],
    outcomes: Mapping[Pair, PairOutcome],
) -> dict[str, float]:
    """``{"/policy/params/<name>": value}``: per numeric generation parameter, the median value
    that the parent's *passing* executions (every final verdict passed, ``outcomes``) sent to
    the generator, where it differs from the median of the failing ones and from the
    policy's own value (a skill or memory that set it where prompts passed). Empty when no
    parameter separates them. The ``toward`` of ``schema_levers.levers``."""
    ok: dict[str, list[float]] = {}
    bad: dict[str, list[float]] = {}
    for e in executions:
        o = outcomes.get((e.task_id, e.seed))
        if o is None or not o.final:
            continue
        into = ok if all(o.final.values()) else bad
        for name, v in e.program.params.model_dump().items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                into.setdefault(name, []).append(float(v))
    own = parent.policy.params.model_dump()
    out: dict[str, float] = {}
    for name, vals in ok.items():
        med = statistics.median(vals)
        if not bad.get(name) or med == statistics.median(bad[name]) or med == own.get(name):
            continue
        out[f"/policy/params/{name}"] = int(med) if isinstance(own.get(name), int) else med
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
    parent: Harness,
    by_id: Mapping[str, Task],
    failing: Sequence[Pair],
    passing: Sequence[Pair],
    prober: _Prober,
    propose: ProposeFn,
    compile_program: CompileFn,
    capabilities: GeneratorCapabilities | None,
    cfg: CounterfactualConfig,
) -> list[ProbeRecord]:
    """Probe the proposer's first patch in each of the best-scored responsibilities of the
    largest failure cluster (module docstring, "additive levers"); returns the causes."""
    if not cfg.additive_responsibilities:
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
    "is_cause",
    "measure",
    "pair_outcome",
    "round_call_estimate",
    "run",
    "toward_of",
    "widenings",
]
