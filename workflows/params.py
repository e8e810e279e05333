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

from typing import Any

from pydantic import BaseModel, ConfigDict, Field, StrictInt, model_validator

from evoharness.harness.schema import Harness
from evoharness.tasks.models import Task
from evoharness.tasks.overlap import OverlapConfig
from evoharness.trace.frontier import Frontier, FrontierEntry
from evoharness.trace.gates import GateConfig
from evoharness.trace.models import DEFAULT_MAX_ROUNDS, Execution, GateReport, RoundReport
from evoharness.trace.preservation import PreservationConfig, PreservationSet
from evoharness.trace.round import Analysis, ProposedCandidate, RoundConfig, RoundSettings

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
    ``dropped`` (0 with benchmark labels, and in modes recorded before it was counted)."""

    benchmark_labels: bool = False
    extractor: str = ""
    overlap: str = ""
    scored_on: int = 0
    dropped: list[str] = Field(default_factory=list)
    read: int = 0

    def nothing_checkable(self) -> str:
        """The count of prompts from which the extractor read nothing checkable, as one
        clause for reports ("" with benchmark labels: nothing was extracted)."""
        if self.benchmark_labels:
            return ""
        of = f" of {self.read}" if self.read else ""
        return (
            f"nothing checkable read from {len(self.dropped)}{of} prompt(s) "
            "(left out of evolution, never counted as passes)"
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


class RunState(_M):
    """What one run carries across ``continue_as_new``."""

    round: int = 0
    frontier: Frontier = Field(default_factory=Frontier)
    consecutive_no_patch: int = 0
    spend_usd: float = 0.0
    generator_calls: int = 0
    cache_hits: int = 0
    executions: int = 0
    decisions: list[dict[str, Any]] = Field(default_factory=list)
    report_keys: list[str] = Field(default_factory=list)
    accepted: list[str] = Field(default_factory=list)
    stopped: str = ""
    #: harness ids already expanded as a round's parent (the beam expands each entry once:
    #: the same parent on the same seeds would propose and gate the same candidates again)
    expanded: list[str] = Field(default_factory=list)
    #: the mode of the first load (the extractor is frozen: a continuation must match it)
    mode: EvolutionMode | None = None
    #: harness id → the registrar's reference of every harness the run registered
    registered: dict[str, str] = Field(default_factory=dict)


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
    (``Dispatch``), and the run's own settings. Stops after ``max_rounds``, when the spend
    reaches ``budget_usd`` or generator calls reach ``budget_generator_calls``, after
    ``stop_after_no_patch`` consecutive No-Patch rounds (default 2), or on the ``stop``
    signal. ``promote_channel`` + ``require_approval``: wait for the ``approve_promotion``
    update (up to ``approval_timeout_s``) before registering the best harness on that
    channel. The JSON is flat (``{"run_id": ..., "seeds": [...], "gate": {...}, ...}``)."""

    model_config = ConfigDict(extra="forbid")

    run_id: str = Field(min_length=1, pattern=r"^[A-Za-z0-9._-]+$")
    harness: HarnessRef
    splits: Splits
    max_rounds: StrictInt = Field(default=DEFAULT_MAX_ROUNDS, ge=1)
    budget_usd: float | None = Field(default=None, ge=0)
    budget_generator_calls: StrictInt | None = Field(default=None, ge=0)
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
    state: RunState | None = None

    def round_config(self, round_: int) -> RoundConfig:
        """Round ``round_``'s ``RoundConfig``."""
        return RoundConfig.of(self, self.run_id, round_)


class ExecutionRef(BaseModel):
    """What workflow payloads carry about one execution: its identity, verdict counts and
    cost. The full ``Execution`` (program, evidence, trace) lives in the store under
    ``workflows.activities.execution_record_key``; activities load it when they need it.
    Keeping payloads to ~200 bytes per execution keeps every activity input far below
    Temporal's 2 MB payload limit. Extra fields are ignored and the verdict counts are
    computed from ``evidence`` when given, so a full ``Execution`` (as recorded in older
    histories) also parses."""

    model_config = ConfigDict(extra="ignore")

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

    @model_validator(mode="before")
    @classmethod
    def _counts_from_evidence(cls, data: Any) -> Any:
        if isinstance(data, dict) and "evidence" in data and "n_verdicts" not in data:
            ev = data.get("evidence") or []
            data = dict(data)
            data["n_verdicts"] = len(ev)
            data["n_pass"] = sum(
                1 for e in ev if (e.get("status") if isinstance(e, dict) else e.status) == "pass"
            )
        return data

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
    ``execution_record_key(run_id, harness_id, task_id, seed)`` for every task id × seed.
    Activity inputs carry these (a few KB) instead of one ref per execution, so a round on
    500/100/100 tasks stays far below Temporal's payload limits."""

    harness_id: str
    task_ids: list[str]
    seeds: list[int]


class LoadedInputs(_M):
    """The resolved harness and tasks per split (label-free unless the run uses benchmark
    labels) and the run's mode."""

    harness: Harness
    splits: dict[str, list[Task]]
    mode: EvolutionMode | None = None


def _legacy_round(data: Any) -> Any:
    """Inputs recorded before ``RoundConfig`` carried the whole ``EvolutionParams`` as
    ``params`` beside ``run_id`` and ``round``: read them as ``config`` (+ ``dispatch``)."""
    if not isinstance(data, dict) or "params" not in data:
        return data
    data = dict(data)
    params = data.pop("params")
    params = params.model_dump() if isinstance(params, BaseModel) else dict(params)
    config = {k: params[k] for k in RoundSettings.model_fields if k in params}
    config["run_id"] = data.pop("run_id", params.get("run_id", "run"))
    config["round"] = data.pop("round", 1)
    data["config"] = config
    data["dispatch"] = Dispatch.of(params)
    return data


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
    ``RoundWorkflow`` children with the same config. Inputs recorded with the whole
    ``params`` still parse (``_legacy_round``)."""

    parent: Harness
    splits: dict[str, list[Task]]
    dispatch: Dispatch = Field(default_factory=Dispatch)
    frontier: list[str] = Field(default_factory=list)
    beam_index: int = 0

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        return _legacy_round(data)


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
    of it on the analysis ``seeds`` (``trace.preservation.select_preservation``)."""

    run_id: str
    pool: list[Task]
    executions: ExecutionSet
    seeds: list[int]
    config: PreservationConfig


class AnalyzeRequest(_RoundScoped):
    """Aggregate, localize and propose for the parent's target executions, with the round's
    ``config`` through the ``backends`` (requests recorded with the whole ``params`` still
    parse)."""

    parent: Harness
    tasks: list[Task]
    executions: list[ExecutionRef] | ExecutionSet
    backends: Backends = Field(default_factory=Backends)
    beam_index: int = 0
    #: harness ids on the frontier: a candidate that would re-create one is a duplicate
    frontier: list[str] = Field(default_factory=list)

    @model_validator(mode="before")
    @classmethod
    def _legacy(cls, data: Any) -> Any:
        data = _legacy_round(data)
        if isinstance(data, dict) and "dispatch" in data:
            data = dict(data)
            data["backends"] = data.pop("dispatch").backends
        return data


class AnalyzeResult(_M):
    """Analysis plus checked candidates (children only for those that passed), what the
    proposer cost (``llm_usage``: calls, prompt_tokens, completion_tokens, cost_usd) and what
    the scope probes cost (``probe_cost``)."""

    analysis: Analysis
    proposed: list[ProposedCandidate]
    llm_usage: dict[str, float] = Field(default_factory=dict)
    #: ``round_cost`` of the scope probes' executions (run inside this activity); empty in
    #: histories recorded before they were counted
    probe_cost: dict[str, float] = Field(default_factory=dict)


class GateRequest(_M):
    """Gate one candidate: executions per split for parent and candidate."""

    parent: dict[str, list[ExecutionRef] | ExecutionSet]
    candidate: dict[str, list[ExecutionRef] | ExecutionSet]
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
    """Decide, re-localize residuals, write the round report. ``executions``: what stands
    for each ``<harness_id>/<split>`` in the report (the core's ``Finalize.executions``);
    ``spent``: every execution the round ran (its cost; None: ``executions``)."""

    run_id: str
    round: int
    parent: Harness
    analysis: AnalyzeResult
    gates: dict[str, GateReport]
    target_tasks: list[Task]
    # "<harness_id>/<split>" -> its executions
    executions: dict[str, list[ExecutionRef] | ExecutionSet]
    spent: list[ExecutionSet] | None = None
    stopped: str = ""
    frontier: list[str] = Field(default_factory=list)
    # Holm's correction across the gated candidates at this level; None: none (old histories)
    alpha: float | None = None
    beam_index: int = 0
    #: the preservation set the gates used (None: the whole split, old histories)
    preservation: PreservationSet | None = None


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
    mode: EvolutionMode | None = None
    frontier: list[FrontierEntry] = Field(default_factory=list)
    registrations: dict[str, str] = Field(default_factory=dict)
