"""Counterfactual attribution, the judging of probe outcomes (issue 29; moved from
``counterfactual.py``, issue 28): a probed pair's verdicts (``pair_outcome``), the comparison
of a probe with the parent against re-drawing or the placebo (``measure``, ``placebo_of``),
the cause rule (``is_cause``), the screen that earns a confirmation (``screen_passes``), the
order of causes and the evidence sentence. The rules, thresholds and their reasons are in
``evoharness.trace.counterfactual``'s docstring ("Measure", "Cause"); ``CounterfactualConfig``
holds their settings.
"""

from __future__ import annotations

import statistics
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from evoharness.evidence import EvidenceStatus
from evoharness.tasks.models import Task
from evoharness.trace.aggregate import attempts
from evoharness.trace.models import (
    Execution,
    ProbeRecord,
)
from evoharness.trace.schema_levers import (
    COMPONENT_DEPTH,
)

#: A (task id, seed) pair and a (task id, seed, constraint id) verdict key.
Pair = tuple[str, int]
Key = tuple[str, int, str]


class CounterfactualConfig(BaseModel):
    """Settings of counterfactual attribution (module docstring gives each rule).

    ``enabled``: run it; ``budget_share``: generator calls it may spend, as a share of the
    round's estimated calls (issue 29: 25%); ``screen_pairs``: failing pairs of a first-pass
    screen, the fewest when ``screen_sizing`` is ``budget`` (``counterfactual_plan.screen_size``
    then takes as many as the first pass's budget affords; opt-in: it finds parameter faults
    that cause a minority of failures, but on the 2026-12-06 fault suite it also made one clean
    case's guidance reset look like a cause on two flaky verdicts, see docs/fault-suite.md);
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
    screen_sizing: Literal["fixed", "budget"] = "fixed"
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


def broken_tolerance(m: Measure, cfg: CounterfactualConfig) -> float:
    """The excess breakage (broken − expected) a cause may show: ``max_excess_broken``, or one
    standard deviation of re-drawing's breakage when that is larger — √expected_broken, the
    Poisson bound on the standard deviation of a sum of independent Bernoulli counts
    (Σ q(1 − q) ≤ Σ q). A fixed one verdict is a 0.6-sd rule on a passing sample that expects
    3 re-drawing losses and a 0.3-sd one at 12: it refused a saving whose breakage was noise,
    more often the larger the sample."""
    return max(cfg.max_excess_broken, m.expected_broken**0.5)


def is_cause(m: Measure, cfg: CounterfactualConfig) -> bool:
    """The cause rule of the module docstring on a confirmation measure (excess breakage
    within ``broken_tolerance``)."""
    if m.excess_broken > broken_tolerance(m, cfg) + 1e-12:
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


def saving_strength(p: ProbeRecord) -> tuple[float, float, float]:
    """Order of causes for a *cost* cluster: the largest share of generations saved, then the
    least excess breakage, then excess first-attempt recovery. A cost cluster is about
    generations, so the part whose removal or reset saves the most of them is its cause; the
    failure clusters keep ``_strength`` (recovery first)."""
    saved = (
        (p.generations_parent - p.generations) / p.generations_parent
        if p.generations_parent
        else 0.0
    )
    return (
        saved,
        -(p.broken - p.expected_broken),
        p.first_recovered - p.expected_first_recovered,
    )


def _strength(p: ProbeRecord) -> tuple[float, float, float, int]:
    """Order of causes: excess first-attempt recovery, then final, then least breakage, then
    fewest generations (a fix at the cause before a mask)."""
    return (
        p.first_recovered - p.expected_first_recovered,
        p.recovered - p.expected_recovered,
        -(p.broken - p.expected_broken),
        -p.generations,
    )
