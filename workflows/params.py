"""Inputs, outputs and state of the evolution workflows (pydantic; they cross Temporal's
pydantic data converter unchanged).

``EvolutionParams`` is what ``temporal workflow start --type EvolutionWorkflow --input-file
params.json`` takes. A minimal ``params.json``::

    {"run_id": "demo",
     "harness": {"uri": "file:///abs/harnesses/baseline"},
     "splits": {"target": {"uri": "s3://evoharness/splits/target.jsonl"},
                "heldout": {"uri": "file:///abs/splits/heldout.jsonl"},
                "preservation": {"tasks": [ ...inline Task objects... ]}},
     "seeds": [0, 1, 2, 3], "max_rounds": 3}
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

from evoharness.harness.schema import Harness
from evoharness.search.protocols import SearchConfig, SearchSettings
from evoharness.tasks.models import Task
from evoharness.tasks.overlap import OverlapConfig
from evoharness.trace.frontier import Frontier, FrontierEntry
from evoharness.trace.gates import GateConfig
from evoharness.trace.models import (
    DEFAULT_MAX_ROUNDS,
    CounterfactualRecord,
    Execution,
    GateReport,
    RoundReport,
)
from evoharness.trace.preservation import PreservationConfig, PreservationSet
from evoharness.trace.round import Analysis, ProposedCandidate, RoundConfig, RoundSettings
from evoharness.trace.round_core import Analyze, RunKey
from evoharness.trace.run_budget import RunBudget, SpendBudget, StopKind
from services.tracking import Tracker
from workflows.store_keys import RUN_ID_PATTERN

TASK_QUEUE = "evoharness"


class _M(BaseModel):
    model_config = ConfigDict(extra="forbid")


class HarnessRef(_M):
    """The starting harness: inline ``document``, or ``uri`` = ``file:///dir`` (a harness
    directory or JSON file) or ``s3://bucket/key`` (a JSON document)."""

    document: dict[str, Any] | None = None
    uri: str | None = None

    @model_validator(mode="after")
    def _one(self) -> HarnessRef:
        if (self.document is None) == (self.uri is None):
            raise ValueError("harness: give exactly one of 'document' or 'uri'")
        return self


class TaskSource(_M):
    """One split: inline ``tasks``, or ``uri`` (``file:///x.jsonl`` or ``s3://bucket/x.jsonl``,
    one Task JSON per line)."""

    tasks: list[Task] | None = None
    uri: str | None = None

    @model_validator(mode="after")
    def _one(self) -> TaskSource:
        if (self.tasks is None) == (self.uri is None):
            raise ValueError("split: give exactly one of 'tasks' or 'uri'")
        return self


class Splits(_M):
    """The three disjoint splits (held-out and preservation may be omitted: empty)."""

    target: TaskSource
    heldout: TaskSource = Field(default_factory=lambda: TaskSource(tasks=[]))
    preservation: TaskSource = Field(default_factory=lambda: TaskSource(tasks=[]))


class Backends(_M):
    """Config names of the backends; the worker resolves them (``workflows.backends``):
    ``sim`` = the embedded CPU world in-process, ``grpc`` = the gRPC services at the worker's
    configured addresses; verifier ``sim-detector`` (default: the embedded world's internal
    verifier, which errs like a real detector + VLM) or ``sim`` (the exact inspector);
    proposer ``rule`` (embedded) or ``grpc``."""

    generator: str = "sim"
    verifier: str = "sim-detector"
    proposer: str = "rule"


class EvolutionMode(_M):
    """How a run reads its tasks (stated in every report): ``benchmark_labels`` False =
    label-free (constraints from ``extractor``, an id with the digest of its source, frozen for
    the run); ``overlap``: how the evolution splits were checked against ``scored_on`` (empty:
    no scored-on prompts given); ``scored_on``: how many prompts; ``dropped``: tasks without
    any constraint the extractor could read (left out: nothing checkable, issue 19);
    ``read``: how many prompts the extractor read (every split), the denominator of
    ``dropped`` (0 with benchmark labels, and in modes recorded before it was counted);
    ``uncertain``: per kind (object, attribute, action, relation, …), what those prompts state
    that no constraint checks — each marked ``uncertain``, none dropped silently (issue 30;
    empty with benchmark labels and in modes recorded before it was counted)."""

    benchmark_labels: bool = False
    extractor: str = ""
    overlap: str = ""
    scored_on: int = 0
    dropped: list[str] = Field(default_factory=list)
    read: int = 0
    uncertain: dict[str, int] = Field(default_factory=dict)

    def nothing_checkable(self) -> str:
        """The count of prompts from which the extractor read nothing checkable, as one
        clause for reports ("" with benchmark labels: nothing was extracted)."""
        if self.benchmark_labels:
            return ""
        of = f" of {self.read}" if self.read else ""
        marks = ""
        if self.uncertain:
            per_kind = ", ".join(f"{k} {n}" for k, n in sorted(self.uncertain.items()))
            marks = f"; stated but not checked (marked uncertain), per kind: {per_kind}"
        return (
            f"nothing checkable read from {len(self.dropped)}{of} prompt(s) "
            f"(left out of evolution, never counted as passes){marks}"
        )

    def describe(self) -> str:
        """One line for reports."""
        if self.benchmark_labels:
            head = "benchmark labels (evolution's verifier checks the tasks' own constraints)"
        else:
            head = (
                f"label-free (constraints read from each prompt by {self.extractor}; "
                f"{self.nothing_checkable()})"
            )
        if self.scored_on:
            return (
                f"{head}; no overlap with the {self.scored_on} scored-on prompts ({self.overlap})"
            )
        return f"{head}; no scored-on prompts given, overlap not checked"


def run_mode_key(run_id: str) -> str:
    """Store key of a run's ``EvolutionMode`` (``runs/<run_id>/mode.json``, written by the
    ``load_inputs`` activity): how it read its tasks and from how many prompts nothing
    checkable was read; ``evoharness evolve report`` reads it."""
    return f"runs/{run_id}/mode.json"


class TrackingStatus(_M):
    """Where a run is tracked (``EvolutionParams.tracking``; ``workflows.tracking_activities``):
    the tracker's ``run_id`` of the evolution run at ``uri``; ``error``: why tracking stopped
    (set once, when the tracker first failed; nothing is logged after it)."""

    run_id: str = ""
    uri: str = ""
    error: str = ""


class RunState(_M):
    """What one run carries across ``continue_as_new``."""

    round: int = 0
    frontier: Frontier = Field(default_factory=Frontier)
    consecutive_no_patch: int = 0
    spend_usd: float = 0.0
    generator_calls: int = 0
    generator_seconds: float = 0.0
    #: when the run started (POSIX seconds of ``workflow.now()``; None: not yet, or a state
    #: recorded before wall-time budgets)
    started_at: float | None = None
    cache_hits: int = 0
    executions: int = 0
    decisions: list[dict[str, Any]] = Field(default_factory=list)
    report_keys: list[str] = Field(default_factory=list)
    accepted: list[str] = Field(default_factory=list)
    stopped: str = ""
    #: what stopped the run (``evoharness.trace.run_budget.StopKind``; "" while it runs)
    stopped_by: StopKind | Literal[""] = ""
    #: harness ids already expanded as a round's parent (the beam expands each entry once:
    #: the same parent on the same seeds would propose and gate the same candidates again)
    expanded: list[str] = Field(default_factory=list)
    #: the mode of the first load (the extractor is frozen: a continuation must match it)
    mode: EvolutionMode | None = None
    #: harness id → the registrar's reference of every harness the run registered
    registered: dict[str, str] = Field(default_factory=dict)
    #: experiment tracking's status (None: not tracked)
    tracking: TrackingStatus | None = None


class Dispatch(_M):
    """How a round's work reaches the workers: executions go out in batches of
    ``batch_size`` tasks × K seeds; ``activity_timeout_s``: start-to-close limit of one
    activity; ``heartbeat_timeout_s``: how soon a dead worker's execution activity is retried
    elsewhere; ``backends``: which generator, verifier and proposer the workers use."""

    batch_size: StrictInt = Field(default=4, ge=1)
    activity_timeout_s: float = Field(default=1800, gt=0)
    heartbeat_timeout_s: float = Field(default=60, gt=0)
    backends: Backends = Field(default_factory=Backends)

    @classmethod
    def of(cls, source: Any) -> Dispatch:
        """The dispatch settings of ``source`` (e.g. ``EvolutionParams``, or a dict)."""
        get = source.get if isinstance(source, dict) else lambda k, d=None: getattr(source, k, d)
        return cls.model_validate({k: get(k) for k in cls.model_fields if get(k) is not None})


class EvolutionParams(RoundSettings, Dispatch):
    """One evolution run: the round settings every round uses (``RoundSettings``: seeds,
    sizes, gate settings, beam B, each defined there once), how rounds are dispatched
    (``Dispatch``), and the run's own settings. Stops after the round that reaches
    ``max_rounds`` or a budget (``run_budget()``, ``evoharness.trace.run_budget``: money
    ``budget_usd``, generator calls ``budget_generator_calls``, generator-seconds
    ``budget_generator_seconds``, wall time ``budget_wall_s``, and no improvement for
    ``stop_after_no_patch`` consecutive rounds, default 2), on the ``stop`` signal (after
    the current phase) or the ``stop_graceful`` signal (after the current round). ``promote_channel`` + ``require_approval``: wait for the ``approve_promotion``
    update (up to ``approval_timeout_s``) before registering the best harness on that
    channel. The JSON is flat (``{"run_id": ..., "seeds": [...], "gate": {...}, ...}``)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(min_length=1, pattern=RUN_ID_PATTERN)
    harness: HarnessRef
    splits: Splits
    max_rounds: StrictInt = Field(default=DEFAULT_MAX_ROUNDS, ge=1)
    budget_usd: float | None = Field(default=None, ge=0)
    budget_generator_calls: StrictInt | None = Field(default=None, ge=0)
    budget_generator_seconds: float | None = Field(default=None, ge=0)
    budget_wall_s: float | None = Field(default=None, ge=0)
    #: no improvement for N rounds: N consecutive rounds without an accepted child
    stop_after_no_patch: StrictInt = Field(default=2, ge=1)
    #: False (default, EvoGen's protocol): evolution verifies the constraints ``extractor``
    #: reads from each prompt, never the tasks' benchmark constraints
    #: (``evoharness.tasks.labelfree``); True: the tasks' own constraints
    benchmark_labels: bool = False
    extractor: str = "rules-v1"
    #: prompts the run's results will be scored on (a test split, a benchmark): no evolution
    #: prompt may equal or near-duplicate one (``evoharness.tasks.overlap``); never evolved on
    scored_on: list[TaskSource] = Field(default_factory=list)
    overlap: OverlapConfig = Field(default_factory=OverlapConfig)
    promote_channel: str | None = None
    require_approval: bool = False
    approval_timeout_s: float = Field(default=24 * 3600, gt=0)
    #: experiment tracking (issue 33): None = off; ``mlflow``: one MLflow run per evolution
    #: run, a nested run per round and beam branch (``workflows.tracking_activities``)
    tracking: Tracker | None = None
    #: the tracker's URI; None: the worker's ``worker.tracking_uri``, else $MLFLOW_TRACKING_URI
    tracking_uri: str | None = None
    #: the search protocol (issue 31): ``trace`` (default: attributed rounds) or one of
    #: ``evoharness.search.protocols.PROTOCOLS``, run as resumable steps
    #: (``workflows.search_driver``) on the same splits: feedback = target, selection =
    #: held-out + preservation
    protocol: Literal["trace", "autoref", "random", "best_of_n"] = "trace"
    #: a non-TRACE protocol's own settings (K ``candidates``, beam ``beam``, T
    #: ``iterations``, the mutation proposer's seed, best-of-N's N); its seeds, concurrency
    #: and spend budgets are the run's (``search_config``)
    search: SearchSettings = Field(default_factory=SearchSettings)
    state: RunState | None = None

    def search_config(self) -> SearchConfig:
        """The ``SearchConfig`` of a non-TRACE run: ``search`` with the run's protocol,
        matched seeds, concurrency and spend budgets (``budget_usd``,
        ``budget_generator_calls``, ``budget_generator_seconds``, ``budget_wall_s``, as
        given: None no limit, 0 nothing may be spent; ``max_rounds`` and
        ``stop_after_no_patch`` are TRACE's). Raises ``ValueError`` for ``protocol``
        ``trace``."""
        if self.protocol == "trace":
            raise ValueError("search_config: protocol 'trace' runs rounds, not a search")
        return SearchConfig(
            **self.search.model_dump(),
            protocol=self.protocol,
            seeds=tuple(self.seeds),
            concurrency=self.concurrency,
            budget=SpendBudget.model_validate(
                {k: getattr(self, k) for k in SpendBudget.model_fields}
            ),
        )

    def run_budget(self) -> RunBudget:
        """The run's limits (``evoharness.trace.run_budget.RunBudget``)."""
        return RunBudget.model_validate({k: getattr(self, k) for k in RunBudget.model_fields})

    def round_config(self, round_: int) -> RoundConfig:
        """Round ``round_``'s ``RoundConfig``."""
        return RoundConfig.of(self, self.run_id, round_)


class ExecutionRef(BaseModel):
    """What workflow payloads carry about one execution: its identity, verdict counts and
    cost. The full ``Execution`` (program, evidence, trace) lives in the store under
    ``workflows.store_keys.execution_record_key``; activities load it when they need it.
    Keeping payloads to ~200 bytes per execution keeps every activity input far below
    Temporal's 2 MB payload limit."""

    task_id: str
    seed: int
    harness_id: str
    execution_key: str
    n_pass: int = 0
    n_verdicts: int = 0
    generator_seconds: float = 0.0
    generator_calls: int = 0
    cached: bool = False
    nominal_generator_seconds: float = 0.0

    @classmethod
    def of(cls, e: Execution) -> ExecutionRef:
        """The ref of a full execution."""
        return cls(
            task_id=e.task_id,
            seed=e.seed,
            harness_id=e.harness_id,
            execution_key=e.execution_key,
            n_pass=sum(1 for ev in e.evidence if ev.status.value == "pass"),
            n_verdicts=len(e.evidence),
            generator_seconds=e.generator_seconds,
            generator_calls=e.generator_calls,
            cached=e.cached,
            nominal_generator_seconds=e.nominal_generator_seconds,
        )


class ExecutionSet(_M):
    """The executions of one harness on one split, by reference: the full records are at
    ``execution_record_key(run_id, harness_id, task_id, seed)`` for every task id × seed
    (several looks joined: their seeds one after another). Activity inputs carry these (a
    few KB) instead of one ref per execution, so a round on 500/100/100 tasks stays far below
    Temporal's payload limits."""

    harness_id: str
    split: str
    task_ids: list[str]
    seeds: list[int]


class LoadedInputs(_M):
    """The resolved harness and tasks per split (label-free unless the run uses benchmark
    labels) and the run's mode."""

    harness: Harness
    splits: dict[str, list[Task]]
    mode: EvolutionMode | None = None


class _RoundScoped(_M):
    """A payload of one round: carries the round's ``config`` (its run id and round)."""

    config: RoundConfig

    @property
    def run_id(self) -> str:
        """The run's id."""
        return self.config.run_id

    @property
    def round(self) -> int:
        """The round number (1-based)."""
        return self.config.round


class RoundInput(_RoundScoped):
    """Input of one ``RoundWorkflow``: one parent of the round's beam (``beam_index``: its
    place, 0 = the frontier head; names its report), the splits, the round's ``config``
    (settings, run id, round) and how its work is dispatched. A beam of B parents is B
    ``RoundWorkflow`` children with the same config."""

    parent: Harness
    splits: dict[str, list[Task]]
    dispatch: Dispatch = Field(default_factory=Dispatch)
    frontier: list[str] = Field(default_factory=list)
    beam_index: int = 0
    #: the parents of earlier rounds (``RunState.expanded``, in order): their analysis
    #: executions are memory mining's experience, as in the in-process beam
    experience: list[str] = Field(default_factory=list)


class RoundOutput(_M):
    """Result of one round: the report, its S3 key, the accepted child (None on No-Patch) and
    the target pass rates of parent and child."""

    report: RoundReport
    report_key: str
    child: Harness | None = None
    parent_target_pass_rate: float = 0.0
    child_target_pass_rate: float = 0.0
    #: every other candidate that passed the gate (the beam keeps the best B of them all),
    #: with its target pass rate
    passing: list[Harness] = Field(default_factory=list)
    passing_target_pass_rates: list[float] = Field(default_factory=list)
    passing_candidate_ids: list[str] = Field(default_factory=list)


class ExecuteRequest(_M):
    """Run ``harness`` on every (task, seed). ``phase``/``phase_total``: the round phase this
    batch belongs to and its total executions (for the progress metric)."""

    run_id: str
    harness: Harness
    tasks: list[Task]
    seeds: list[int]
    backends: Backends = Field(default_factory=Backends)
    concurrency: int = 1
    phase: str = "execute"
    phase_total: int = 0


class SelectRequest(_M):
    """Select the round's preservation set from the ``pool`` by the parent's ``executions``
    of it on the analysis seeds (``executions.seeds``;
    ``trace.preservation.select_preservation`` with ``config``)."""

    run_id: str
    pool: list[Task]
    executions: ExecutionSet
    config: PreservationConfig


class AnalyzeRequest(_RoundScoped):
    """The core's ``Analyze`` request (``request``) with the round's ``config``, the
    ``backends`` and, in ``executions``, the stored executions of ``request.executions``
    then of each of ``request.evidence`` (``AnalyzeRequest.keys``), by reference.
    ``experience``: see below."""

    request: Analyze
    executions: list[ExecutionSet]
    backends: Backends = Field(default_factory=Backends)
    beam_index: int = 0
    #: parents of earlier rounds whose analysis executions (target, then the preservation
    #: pool, on the analysis seeds) memory mining learns from (``RoundInput.experience``)
    experience: list[str] = Field(default_factory=list)

    @staticmethod
    def keys(request: Analyze) -> list[RunKey]:
        """The keys whose executions an ``AnalyzeRequest`` carries, in order."""
        return [request.executions, *request.evidence]


class AnalyzeResult(_M):
    """Analysis (attributions after counterfactual attribution) plus checked candidates
    (children only for those that passed), what the proposer cost (``llm_usage``: calls,
    prompt_tokens, completion_tokens, cost_usd), what the scope probes and the counterfactual
    probes cost (``round_cost`` of their executions) and the counterfactual record."""

    analysis: Analysis
    proposed: list[ProposedCandidate]
    llm_usage: dict[str, float] = Field(default_factory=dict)
    probe_cost: dict[str, float] = Field(default_factory=dict)
    counterfactual_cost: dict[str, float] | None = None
    counterfactual: CounterfactualRecord | None = None


class GateRequest(_M):
    """Gate one candidate: executions per split for parent and candidate."""

    parent: dict[str, ExecutionSet]
    candidate: dict[str, ExecutionSet]
    run_id: str = ""
    gate: GateConfig
    look: int = 1  # validation look (evoharness.trace.gates)
    objective: str = "quality"  # "cost" for a cost cluster's candidate
    #: task_id -> family of the preservation tasks (per-family regression); None: aggregate only
    families: dict[str, str] | None = None
    #: the target tasks: the gate reads their first attempts (``round.gate_candidate``)
    target_tasks: list[Task] | None = None
    #: the held-out tasks: their first attempts are test units too; None: not read
    heldout_tasks: list[Task] | None = None
    #: the candidate only restores schema defaults: its cost is priced against the default's
    restores_defaults: bool = False


class FinalizeRequest(_M):
    """Decide, re-localize residuals, write the round report (the core's ``Finalize``):
    ``executions``: what stands for each (harness, split) in the report, one set each;
    ``spent``: every execution the round ran (its cost); ``alpha``: Holm's level across the
    gated candidates; ``preservation``: the set the gates used."""

    run_id: str
    round: int
    parent: Harness
    analysis: AnalyzeResult
    gates: dict[str, GateReport]
    target_tasks: list[Task]
    executions: list[ExecutionSet]
    spent: list[ExecutionSet]
    alpha: float
    preservation: PreservationSet
    stopped: str = ""
    frontier: list[str] = Field(default_factory=list)
    beam_index: int = 0


class RegisterRequest(_M):
    """Register an accepted harness (or promote it to ``channel`` after approval).

    ``parent_harness``, ``patch`` and ``note`` are filled by the ``register_result`` activity
    (from the run's stored starting harness and the round report), not by the workflow: the
    parent document, the accepted candidate's patch and a description of the change.
    ``candidate_id`` (``r<round>-c<i>``) and ``beam_index`` (the parent's place in the beam)
    say which candidate of which beam parent's round the harness is: they pick its patch
    from the report and make its registration's name unique. ``backends``: the run's, from
    which the activity fills ``generator_id`` / ``generator_capabilities`` (the generator the
    harness was validated on, which the runtime service compares with the one serving it)."""

    run_id: str
    round: int
    harness: Harness
    parent_harness_id: str
    report_key: str = ""
    candidate_id: str = ""
    beam_index: int = 0
    channel: str | None = None
    parent_harness: Harness | None = None
    patch: dict[str, Any] | None = None
    note: str = ""
    backends: Backends | None = None
    generator_id: str = ""
    generator_capabilities: dict[str, Any] | None = None


class Progress(_M):
    """What the ``progress`` query returns. ``generator_calls``, ``cache_hits``: summed over
    the round reports' costs, i.e. the calls behind every execution a round used, the scope
    probes' included. An activity attempt abandoned by Temporal (heartbeat or start-to-close
    timeout) may have made calls whose images its retry then finds in the cache: those are
    spent but counted as cache hits."""

    run_id: str
    round: int
    phase: str
    done: int = 0
    total: int = 0
    scores: dict[str, float] = Field(default_factory=dict)
    spend_usd: float = 0.0
    generator_calls: int = 0
    cache_hits: int = 0
    consecutive_no_patch: int = 0
    stopped: str = ""
    #: what stopped (or is stopping) the run: a ``run_budget.StopKind``; "" while it runs
    stopped_by: str = ""
    generator_seconds: float = 0.0
    decisions: list[dict[str, Any]] = Field(default_factory=list)


class Approval(_M):
    """The ``approve_promotion`` update's argument."""

    approver: str = Field(min_length=1)
    harness_id: str | None = None
    note: str = ""


class EvolutionResult(_M):
    """The run's result. ``frontier``: the final frontier (best first; its head is the best
    harness), each entry with the parent it was gated against; ``registrations``: harness id
    → the registrar's reference, for every harness the run registered (each frontier entry
    as it joined). Both are empty in results of older runs."""

    run_id: str
    rounds: int
    best_harness_id: str
    best_harness: Harness
    decisions: list[dict[str, Any]]
    report_keys: list[str]
    stopped: str
    spend_usd: float
    generator_calls: int
    cache_hits: int
    executions: int
    promoted: str | None = None
    #: what stopped the run (``evoharness.trace.run_budget.StopKind``: the budget's parameter
    #: name, ``stop``, ``graceful_stop``, ...); "" in results of older runs
    stopped_by: str = ""
    generator_seconds: float = 0.0
    mode: EvolutionMode | None = None
    frontier: list[FrontierEntry] = Field(default_factory=list)
    registrations: dict[str, str] = Field(default_factory=dict)
    #: where the run was tracked (None: not tracked, or an older run)
    tracking: TrackingStatus | None = None
    #: a non-TRACE run's search report (``evoharness.search.protocols.SearchRun`` as JSON,
    #: ``workflows.store_keys.search_report_key``); "" for TRACE runs
    search_report_key: str = ""
