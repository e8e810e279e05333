"""Records of a TRACE round (docs/architecture.md, "The TRACE round").

These are the shapes passed between the domain core, the proposer and the workflows, and
written into round reports (JSON in S3). All are pydantic models so they cross Temporal's
pydantic data converter and gRPC JSON fields unchanged.
"""

from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evoharness.evidence import Evidence
from evoharness.harness.patch import Patch
from evoharness.program import ImageRef, Program
from evoharness.tasks.models import Split as Split  # re-exported: defined with the tasks
from evoharness.trace.preservation import PreservationSet

#: The default K matched analysis seeds (TRACE runs every task on the same K seeds; the fresh
#: validation seeds follow them, ``gates.validation_seeds``). Every model with a seed list
#: takes its default from here (a light module: services and workflow code import it).
DEFAULT_SEEDS: tuple[int, ...] = (0, 1, 2, 3)
#: The default number of rounds of an evolution run (``workflows.params.EvolutionParams``'s
#: ``max_rounds`` and the CLI's ``--rounds``).
DEFAULT_MAX_ROUNDS = 3


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid")


class Execution(_Model):
    """One run of a harness on (task, seed).

    ``execution_key`` = sha256(program, generator id, seed) of the final program;
    ``programs`` lists every program generated (repairs, best-of-N candidates);
    ``cached`` is True when the image came from the content-addressed store;
    ``generator_seconds`` counts only generator calls actually made in this execution.
    ``trace`` is the runtime's decision trace (rules, skills, tools, repair steps).
    ``nominal_generator_seconds`` is what the execution's generator calls cost when they were
    made, whether served from the cache now or not (Δcost compares harnesses, not cache luck).
    """

    task_id: str
    seed: int
    harness_id: str
    execution_key: str
    program: Program
    programs: list[Program] = Field(default_factory=list)
    image: ImageRef | None = None
    evidence: list[Evidence] = Field(default_factory=list)
    trace: list[dict[str, Any]] = Field(default_factory=list)
    generator_seconds: float = 0.0
    generator_calls: int = 0
    cached: bool = False
    nominal_generator_seconds: float = 0.0


class ExecCost(BaseModel):
    """What one (harness, task, seed) execution cost now: ``generator_calls`` and
    ``generator_seconds`` made (0 when ``cached``: a hit of the content-addressed store costs
    nothing). ``ExecCost.of`` reads it off an ``Execution``; ``trace.round.spent_cost`` totals
    them (``round_cost`` for a round, ``search.protocols.Ledger`` for a search)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    generator_calls: float = 0.0
    generator_seconds: float = 0.0
    cached: bool = False

    @classmethod
    def of(cls, e: Execution) -> ExecCost:
        """The cost of execution ``e``."""
        return cls(
            generator_calls=0.0 if e.cached else e.generator_calls,
            generator_seconds=0.0 if e.cached else e.generator_seconds,
            cached=e.cached,
        )


class ConstraintStats(_Model):
    """Aggregate over the K matched seeds of one (task, constraint).

    ``failure_rate`` = n_fail / (n_pass + n_fail) (uncertain verdicts excluded, counted in
    ``n_uncertain``). ``contrast`` maps program/trace fields to the values seen in passing vs
    failing attempts, only for fields a harness decides whose values separate them
    (trajectory-relative contrast, ``aggregate.decision_fields``); empty when one unchanged
    program both passed and failed. ``n_first_fail``: seeds whose first attempt failed;
    ``n_attempts``: generation attempts over all seeds (repairs, best-of-N candidates);
    ``n_attempts_failed``: attempts that failed this constraint. ``failure_ci95`` is the Wilson
    score 95% interval of ``failure_rate`` (the uncertainty over K seeds; (0, 1) when no
    seed was decided). ``observed`` lists the verifier's ``observed`` values of failing seeds.
    """

    task_id: str
    constraint_id: str
    constraint_type: str
    subject: str = ""
    n_seeds: int
    n_pass: int
    n_fail: int
    n_uncertain: int
    failure_rate: float
    failure_ci95: tuple[float, float] = (0.0, 1.0)
    program_varies: bool = False
    contrast: dict[str, Any] = Field(default_factory=dict)
    observed: list[Any] = Field(default_factory=list)
    n_first_fail: int = 0
    n_attempts: int = 0
    n_attempts_failed: int = 0


class FailureCluster(_Model):
    """Failures grouped by (responsibility hint, constraint type, symptom).

    ``symptom`` is a short machine-readable tag (e.g. ``count_wrong``, ``color_leak``,
    ``missing_object``, ``negation_drawn``, ``text_garbled``, ``relation_wrong``,
    ``object_dropped_long_prompt``); ``members`` are the (task_id, constraint_id) pairs;
    ``flip_rate`` is the share of members that pass on some seeds and fail on others.
    ``kind``: ``failure`` (final images fail) or ``cost`` (final images pass, but only after
    repairs or extra candidates: the first attempt failed; ``extra_attempts`` = mean extra
    generations per execution of the member tasks).
    """

    cluster_id: str
    responsibility_hint: str
    constraint_type: str
    symptom: str
    members: list[tuple[str, str]] = Field(default_factory=list)
    n_failures: int = 0
    failure_rate: float = 0.0
    flip_rate: float = 0.0
    examples: list[dict[str, Any]] = Field(default_factory=list)
    kind: str = "failure"
    extra_attempts: float = 0.0


class Attribution(_Model):
    """Scores over the five responsibilities plus ``no_patch`` for one cluster (sum to 1).
    ``chosen`` is the argmax; ``reasons`` record why (localizer output and evidence signals)."""

    cluster_id: str
    scores: dict[str, float]
    chosen: str
    reasons: list[str] = Field(default_factory=list)


class ProbeRecord(_Model):
    """One counterfactual probe (``evoharness.trace.counterfactual``): the parent with one
    part taken out, reset or added, re-run on the parent's own (task, seed) pairs.

    ``label``/``path``/``kind``: the lever (``remove``, ``reset``, ... or ``add`` for an
    additive lever); ``patch``: the change; ``stage``: ``screen`` (a few failing pairs) or
    ``confirm`` (every probed failing pair and the passing sample). Counts are over matched
    (task, seed, constraint) verdicts: ``failing``/``recovered``: parent's final verdicts that
    failed / now pass; ``first_failing``/``first_recovered``: the same for first attempts;
    ``passing``/``broken``: parent's passing final verdicts / now failing; ``expected_*``:
    what re-drawing alone would give (the parent's pass or fail rate of the same
    (task, constraint) on its other seeds). ``generations_parent``/``generations``: generated
    images over the probed pairs; ``generator_calls``: what the probe cost (cache hits free);
    ``cause``: the lever is a cause (module rule); ``clusters``: clusters whose member verdicts
    it recovered; ``evidence``: the same in words."""

    label: str
    path: str
    kind: str
    responsibility: str
    patch: Patch | None = None
    stage: str = "screen"
    n_pairs: int = 0
    failing: int = 0
    recovered: int = 0
    expected_recovered: float = 0.0
    first_failing: int = 0
    first_recovered: int = 0
    expected_first_recovered: float = 0.0
    passing: int = 0
    broken: int = 0
    expected_broken: float = 0.0
    generations_parent: int = 0
    generations: int = 0
    generator_calls: int = 0
    cause: bool = False
    clusters: list[str] = Field(default_factory=list)
    evidence: str = ""


class CounterfactualRecord(_Model):
    """What counterfactual attribution did in one round: ``probes`` in the order run;
    ``skipped``: levers not run because they change no compiled plan of a failing pair
    (free); ``budget_calls``/``spent_calls``: generator calls allowed / made; ``stopped``:
    ``explained`` (the causes found explain enough failing verdicts), ``budget``,
    ``exhausted`` (every lever probed) or ``no_failures``; ``causes``: labels of the levers
    found to be causes, best first; ``placebo_*``: the null the probes were judged
    against; ``screen_pairs``: failing pairs each lever of the first pass was screened on
    (``counterfactual_plan.screen_size``; 0: no first pass)."""

    probes: list[ProbeRecord] = Field(default_factory=list)
    skipped: list[str] = Field(default_factory=list)
    budget_calls: float = 0.0
    spent_calls: float = 0.0
    stopped: str = ""
    causes: list[str] = Field(default_factory=list)
    #: the placebo's shares of failing final / first-attempt verdicts recovered by changing a
    #: component that is not the cause (``counterfactual.placebo_of``; None: re-drawing)
    placebo_final: float | None = None
    placebo_first: float | None = None
    screen_pairs: int = 0


class CandidateStatus(enum.StrEnum):
    """Where a candidate patch ended."""

    proposed = "proposed"
    rejected = "rejected"  # failed a proposal check (schema, contract, no-op); never generated
    validated = "validated"  # ran through the gate, not accepted
    accepted = "accepted"


class Candidate(_Model):
    """A proposed patch and what happened to it. ``source``: ``rule``, ``llm`` or ``memory``.
    ``scope_probes``: the scope probes it ran before the gate (``trace.scope``): ``ok``,
    ``detail``, ``scope`` (what the patch touches), ``groups`` (probe group → [parent rate,
    candidate rate, verdicts lost, verdicts]); empty when none ran."""

    candidate_id: str
    cluster_id: str
    patch: Patch | None = None
    raw: Any = None
    source: str = "rule"
    status: CandidateStatus = CandidateStatus.proposed
    reject_reason: str = ""
    harness_id: str = ""
    gate: GateReport | None = None
    scope_probes: dict[str, Any] = Field(default_factory=dict)


class GateReport(_Model):
    """Validation of one candidate against its parent on matched (task, seed, constraint)
    verdicts over the three splits, on fresh validation seeds. Δ = net change in mean pass
    rate. Formulae in ``evoharness.trace.gates``. ``p_value``: the task-level sign-flip test
    (``test`` names the method) at validation look ``look``; ``second_look``: the p fell in the
    zone that earns K more fresh seeds; ``p_holm``: Holm-adjusted across the round's
    candidates whose test can reach α (Tarone 1990; ``gates.apply_holm``); ``sign_test_p``:
    the old verdict-level sign test, reported only; ``seeds``:
    the target split's validation seeds; ``family_regressions``: the per-family regression
    check of the preservation set (``gates.family_regressions``)."""

    delta_target: float
    delta_heldout: float
    delta_preservation: float
    regression: float
    delta_cost: float
    utility: float
    p_value: float
    n_discordant: int
    epsilon: float
    ci95: dict[str, tuple[float, float]] = Field(default_factory=dict)
    pass_rates: dict[str, dict[str, float]] = Field(default_factory=dict)
    accepted: bool
    reasons: list[str] = Field(default_factory=list)
    test: str = "sign_test"
    objective: str = "quality"
    look: int = 1
    second_look: bool = False
    p_holm: float | None = None
    #: the look's own exact sign-flip p and the nominal level it was compared with (None:
    #: not recorded, reports before 2026-12-06)
    p_look: float | None = None
    nominal_alpha: float | None = None
    n_tasks: int = 0
    n_tasks_changed: int = 0
    sign_test_p: float | None = None
    seeds: list[int] = Field(default_factory=list)
    #: per preservation family with enough tasks: {tasks, verdicts, delta, regression, epsilon}
    family_regressions: dict[str, dict[str, float]] = Field(default_factory=dict)
    #: net change of the target split's first-attempt pass rate (None: not measured)
    delta_first_attempt: float | None = None
    #: net change of the held-out split's first-attempt pass rate (None: not measured)
    delta_first_attempt_heldout: float | None = None
    #: the smallest p the exact test could reach with this report's units (2^-m for m
    #: changed units; Tarone 1990, ``gates.apply_holm``); None: not recorded (counts as 0)
    p_min: float | None = None
    #: generator calls per request (task, seed), cache-independent (programs generated):
    #: parent, candidate (empty: not measured)
    calls_per_request: dict[str, float] = Field(default_factory=dict)
    #: generator-seconds per request (task, seed) over the validated tasks: parent, candidate
    cost_per_request: dict[str, float] = Field(default_factory=dict)
    #: the Δcost the utility charged: ``delta_cost`` less the spending up to the reference
    #: cost (``gates.charged_cost``); None: the same as ``delta_cost`` (no reference)
    delta_cost_charged: float | None = None
    #: what the gate could not check, not a failed condition (an empty preservation set:
    #: regression checked on held-out only; no family large enough: aggregate only)
    notes: list[str] = Field(default_factory=list)


class DecisionKind(enum.StrEnum):
    """The outcome of a round."""

    accepted = "accepted"
    no_patch = "no_patch"


class Decision(_Model):
    """The round's decision: the accepted harness, or an explicit No-Patch with its reason."""

    kind: DecisionKind
    reason: str
    harness_id: str
    parent_harness_id: str
    candidate_id: str | None = None


class RoundReport(_Model):
    """Everything a round did, written to S3 as JSON. ``residual_clusters``: the accepted
    candidate's remaining target failures, re-localized for the next round;
    ``frontier``: harness ids on the beam when the round started, best first (its head is
    the parent); ``preservation``: the round's preservation set
    (``evoharness.trace.preservation``)."""

    run_id: str
    round: int
    parent_harness_id: str
    stats: list[ConstraintStats] = Field(default_factory=list)
    clusters: list[FailureCluster] = Field(default_factory=list)
    attributions: list[Attribution] = Field(default_factory=list)
    candidates: list[Candidate] = Field(default_factory=list)
    decision: Decision
    pass_rates: dict[str, float] = Field(default_factory=dict)
    cost: dict[str, float] = Field(default_factory=dict)
    residual_clusters: list[FailureCluster] = Field(default_factory=list)
    frontier: list[str] = Field(default_factory=list)
    #: the parent-passing preservation set the gates used (None: the whole split, old runs)
    preservation: PreservationSet | None = None
    #: counterfactual attribution's probes and causes (None: not run, old runs)
    counterfactual: CounterfactualRecord | None = None


Candidate.model_rebuild()
