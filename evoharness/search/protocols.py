"""Search protocols as in-process drivers (issue 31), beside TRACE's attributed rounds
(``evoharness.trace.beam``): what TRACE's sample efficiency is measured against.

- ``autoref`` (after AutoRef): each iteration a proposer writes ``candidates`` (K, default
  4) children of the beam's parents from their *feedback*-split results and the history of
  every earlier candidate's (``feedback.ProposerInput``); the children are ranked on the
  *selection* split, which the proposer never sees; the best ``beam`` (B, default 2) harnesses
  continue; ``iterations`` (T, default 5) iterations. K counts checked candidates: each
  parent's proposer is asked for ``OVERDRAW`` times its share and the first that pass the
  proposal checks run (a no-op edit costs no generation and takes no slot). The default proposer is the mutation
  proposer guided by the feedback (``guided_mutations``: edits on the prompt features of the
  failing constraints are drawn more often); the LLM proposer (``search.llm``, through the
  proposer service) fits the same ``feedback.SearchProposer`` type, and the answers it refused
  are recorded as candidates that never ran (``check``: ``proposer_<reason>: …``).
- ``random``: the same beam with the blind mutation proposer (``blind_mutations``): no
  feedback split is run and the proposer is given the parent only; blind search.
- ``best_of_n``: no evolution: the starting harness with a best-of-N middleware stage
  (``harness.schema.BestOfNStage``) for each N of ``best_of_n`` in turn, ranked on the
  selection split (the test-time-scaling baseline: Ma et al. 2025, "Inference-time scaling
  for diffusion models beyond scaling denoising steps"; SANA 1.5).

Every protocol runs through the same execution port as a TRACE round (``RoundPorts.execute``:
the worker's content-addressed execution cache) and the same proposal checks
(``trace.checks.check_proposal``: a patch that fails them costs no generation). Spend is
counted as a TRACE round counts it (``trace.round.round_cost``: cache hits cost nothing);
each (harness, task, seed) runs once per search (``Ledger``). ``SearchConfig.budget`` holds
the run's spend budgets (``trace.run_budget.SpendBudget``: USD, generator calls,
generator-seconds, wall seconds): before every step, the start's included, a search whose
spend has reached one (``trace.run_budget.exhausted``; money priced by
``trace.budget.Prices.generator_usd``, wall time from the driver's clock) stops instead, with
``SearchRun.stopped_by`` naming the budget; a budget of 0 stops it before anything runs.
The step that crosses a budget finishes (it may overrun it), and the run records what it
spent. A ``SearchPoint`` after the start and after every iteration records the spend so far
and the best harness (the frontier's head, ranked by selection pass rate); the untouched
test split is never run here (the bench scores each point's harness on it,
``bench/protocols.py``).

A search is a sequence of steps over a serialisable ``SearchState`` (``new_search``, then
``search_step`` until ``state.done``): step 0 evaluates the start, each later step one
iteration. ``run_search`` drives the steps in process; the Temporal ``EvolutionWorkflow``
runs each step as an activity (``workflows.search_activities``), so a run resumes after a
worker dies from its last completed step. A step is deterministic given its state (the
proposer is seeded by ``proposer_seed`` and the iteration), so a step repeated after a crash
proposes the same candidates, and their executions are the execution cache's hits.

Nothing here reads the simulator, benchmark labels or the test split.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evoharness.capabilities import GeneratorCapabilities
from evoharness.harness.io import harness_id
from evoharness.harness.patch import Patch, diff
from evoharness.harness.schema import Harness, Responsibility
from evoharness.search.feedback import (
    FeedbackResult,
    ProposerInput,
    SearchProposer,
    SplitManifest,
    feedback_of,
)
from evoharness.search.mutation import MutationProposer
from evoharness.tasks.models import Task
from evoharness.trace.aggregate import pass_rate
from evoharness.trace.budget import Prices
from evoharness.trace.checks import CompileFn, check_proposal
from evoharness.trace.frontier import Frontier, FrontierEntry
from evoharness.trace.models import ExecCost, Execution
from evoharness.trace.round import ExecuteFn, execute_all, spent_cost
from evoharness.trace.run_budget import RunSpend, SpendBudget, StopKind, exhausted
from evoharness.trace.schema_levers import Lever, features_of

ProtocolName = Literal["autoref", "random", "best_of_n"]
PROTOCOLS: Final = ("autoref", "random", "best_of_n")
#: A parent's proposer is asked for this many times its quota of candidates; the first
#: ``quota`` that pass the proposal checks run (K counts candidates that cost generations).
OVERDRAW: Final = 3
#: How much likelier ``guided_mutations`` draws an edit on a failing prompt feature.
GUIDED_WEIGHT: Final = 4.0


class SearchSettings(BaseModel):
    """A search's own settings (module docstring): K ``candidates``, beam ``beam``, T
    ``iterations``; ``proposer_seed`` and ``max_edits``: the mutation proposer's
    (``search.mutation.MutationProposer``); ``best_of_n``: the N tried, in order. A durable
    run's parameters carry these (``workflows.params.EvolutionParams.search``)."""

    model_config = ConfigDict(extra="forbid")

    candidates: int = Field(default=4, ge=1)
    beam: int = Field(default=2, ge=1)
    iterations: int = Field(default=5, ge=1)
    proposer_seed: int = 0
    max_edits: int = Field(default=2, ge=1)
    best_of_n: tuple[int, ...] = Field(default=(1, 2, 4, 8, 16), min_length=1)


class SearchConfig(SearchSettings):
    """One search's settings: its own (``SearchSettings``) and those a durable run takes
    from the run: the ``protocol``, the matched ``seeds`` every candidate runs on (feedback
    and selection alike), ``budget``: the run's spend budgets (module docstring; the
    default: none, ``iterations`` only), ``concurrency``: executions in flight.

    A config serialised before ``budget`` (issue 31) had ``max_calls`` (the generator-call
    budget, None: none); it loads as ``budget.budget_generator_calls``."""

    protocol: ProtocolName = "autoref"
    seeds: tuple[int, ...] = Field(default=(0, 1), min_length=1)
    budget: SpendBudget = Field(default_factory=SpendBudget)
    concurrency: int = Field(default=2, ge=1)

    @model_validator(mode="before")
    @classmethod
    def _legacy_max_calls(cls, data: Any) -> Any:
        """``max_calls`` of a state recorded before ``budget`` → ``budget``."""
        if isinstance(data, dict) and "max_calls" in data:
            data = dict(data)
            calls = data.pop("max_calls")
            if calls is not None and "budget" not in data:
                data["budget"] = {"budget_generator_calls": calls}
        return data


class SearchPoint(BaseModel):
    """The search after ``iteration`` (0: the start): cumulative ``generator_calls``,
    ``cache_hits`` and ``executions``, the best harness so far and its selection score."""

    model_config = ConfigDict(extra="forbid")

    iteration: int
    generator_calls: float
    cache_hits: float
    executions: float
    best_harness_id: str
    best_score: float


class CandidateRecord(BaseModel):
    """One proposed candidate: ``check`` is ``ok`` or the failed check's reason (then it
    never ran); the pass rates are None when not run (no feedback run in ``random``)."""

    model_config = ConfigDict(extra="forbid")

    iteration: int
    harness_id: str
    parent_id: str
    rationale: str
    check: str
    feedback_pass_rate: float | None = None
    selection_score: float | None = None
    #: the patch (``harness.patch.Patch`` as JSON) that made the candidate from its parent
    patch: dict[str, Any] | None = None


class SearchRun(BaseModel):
    """A whole search: its settings, split manifest, points, candidates, every harness it
    ran (id → document) and why it stopped."""

    model_config = ConfigDict(extra="forbid")

    config: SearchConfig
    manifest: SplitManifest
    points: list[SearchPoint] = Field(default_factory=list)
    candidates: list[CandidateRecord] = Field(default_factory=list)
    harnesses: dict[str, dict[str, Any]] = Field(default_factory=dict)
    stopped: str = ""
    #: what stopped it, decided with the stop: ``max_rounds`` (its iterations, or every N
    #: of best-of-N, ran) or a spend budget's name (``SearchConfig.budget``); "" while it
    #: runs (and in a run recorded before issue 31's budgets)
    stopped_by: StopKind | Literal[""] = ""

    @property
    def best(self) -> Harness:
        """The last point's best harness. Raises ``IndexError`` before the first point."""
        return Harness.model_validate(self.harnesses[self.points[-1].best_harness_id])


@dataclass(frozen=True)
class SearchPorts:
    """What a search runs candidates through: ``execute`` (one harness on one task and
    seed), ``compile_program`` (the proposal checks' compile), the deployed generator's
    ``capabilities`` (None: everything honoured) and the ``prices`` its spend is priced at
    for ``budget_usd`` (the worker's; default: ``Prices()``'s defaults)."""

    execute: ExecuteFn
    compile_program: CompileFn
    capabilities: GeneratorCapabilities | None = None
    prices: Prices = field(default_factory=Prices)


class Ledger:
    """The executions of one search, each (harness, task, seed) run once through
    ``execute`` (thread-safe), and what they cost. ``spent``: the cost of every execution
    so far by ``"<harness>/<task>/<seed>"`` (a ``SearchState``'s, updated in place); an
    execution already in it keeps its first cost when it runs again (after a resume it is
    the cache's hit)."""

    def __init__(
        self, execute: ExecuteFn, concurrency: int, spent: dict[str, ExecCost] | None = None
    ) -> None:
        self._execute = execute
        self._concurrency = concurrency
        self._runs: dict[tuple[str, str, int], Execution] = {}
        self.spent: dict[str, ExecCost] = {} if spent is None else spent
        self._lock = threading.Lock()

    def run(self, harness: Harness, tasks: Sequence[Task], seeds: Sequence[int]) -> list[Execution]:
        """``harness`` on every (task, seed), in (task, seed) order; earlier runs reused."""
        hid = harness_id(harness)

        def once(h: Harness, t: Task, s: int) -> Execution:
            key = (hid, t.task_id, s)
            with self._lock:
                done = self._runs.get(key)
            if done is None:
                done = self._execute(h, t, s)
                cost = ExecCost.of(done)
                with self._lock:
                    self._runs[key] = done
                    self.spent.setdefault(f"{hid}/{t.task_id}/{s}", cost)
            return done

        return execute_all(once, harness, tasks, seeds, self._concurrency)

    def cost(self) -> dict[str, float]:
        """``spent_cost`` of ``spent``."""
        with self._lock:
            costs = list(self.spent.values())
        return spent_cost(costs)


class SearchState(BaseModel):
    """A search between steps (module docstring): the run so far, the next step's number
    (0: the start), the frontier (None before step 0; its ``target_pass_rate`` holds each
    entry's selection score), every evaluated harness's feedback result, the cost of every
    execution (``Ledger.spent``) and whether the search is over (``run.stopped`` says why).
    Plain JSON: a Temporal payload."""

    model_config = ConfigDict(extra="forbid")

    run: SearchRun
    next_iteration: int = 0
    frontier: Frontier | None = None
    feedback: dict[str, FeedbackResult] = Field(default_factory=dict)
    spent: dict[str, ExecCost] = Field(default_factory=dict)
    done: bool = False

    def cost(self) -> dict[str, float]:
        """What the search has cost so far (``spent_cost``)."""
        return spent_cost(list(self.spent.values()))

    def spend(self, prices: Prices, wall_s: float = 0.0) -> RunSpend:
        """What the search has spent so far, as the run budgets read it: ``cost()`` with its
        money at ``prices`` (``Prices.generator_usd``: a search asks no LLM) and ``wall_s``,
        the seconds since the search started by the driver's clock."""
        cost = self.cost()
        return RunSpend(
            usd=prices.generator_usd(cost["generator_seconds"], cost["generator_calls"]),
            generator_calls=round(cost["generator_calls"]),
            generator_seconds=cost["generator_seconds"],
            wall_s=wall_s,
        )

    def joined(self, iteration: int) -> list[FrontierEntry]:
        """The frontier entries that joined it in step ``iteration`` (best first; the
        start, which has no parent, never)."""
        entries = self.frontier.entries if self.frontier is not None else []
        return [e for e in entries if e.round == iteration and e.parent_harness_id]

    def candidate(self, hid: str) -> tuple[int, CandidateRecord] | None:
        """The index and record of the checked candidate that made harness ``hid``."""
        for i, c in enumerate(self.run.candidates):
            if c.harness_id == hid and c.check == "ok":
                return i, c
        return None


def blind_mutations(seed: int = 0, max_edits: int = 2) -> SearchProposer:
    """The ``random`` protocol's proposer: the mutation proposer on the parent alone, draw =
    the iteration (it reads no feedback, whatever the view holds)."""
    prop = MutationProposer(seed=seed, max_edits=max_edits)

    def propose(view: ProposerInput, n: int) -> list[Patch]:
        return prop.propose(view.parent, n, draw=view.iteration)

    return propose


def guided_mutations(seed: int = 0, max_edits: int = 2) -> SearchProposer:
    """``autoref``'s default proposer without a model: the mutation proposer drawing edits
    on the prompt features of the parent's failing feedback constraints
    (``schema_levers.features_of``) ``GUIDED_WEIGHT`` times likelier than others."""
    prop = MutationProposer(seed=seed, max_edits=max_edits)

    def propose(view: ProposerInput, n: int) -> list[Patch]:
        fb = view.parent_feedback
        wanted = set(features_of(fb.failing_types)) if fb else set()

        def weight(lv: Lever) -> float:
            return GUIDED_WEIGHT if lv.feature in wanted else 1.0

        return prop.propose(view.parent, n, draw=view.iteration, weight=weight)

    return propose


def default_proposer(cfg: SearchConfig) -> SearchProposer:
    """The protocol's default proposer: ``guided_mutations`` for ``autoref``,
    ``blind_mutations`` for ``random`` (and for ``best_of_n``, which proposes nothing)."""
    make = guided_mutations if cfg.protocol == "autoref" else blind_mutations
    return make(cfg.proposer_seed, cfg.max_edits)


def new_search(
    cfg: SearchConfig, feedback: Sequence[Task], selection: Sequence[Task]
) -> SearchState:
    """A search not yet started. Raises ``ValueError`` (pydantic) when ``feedback`` and
    ``selection`` share a task or one is empty (``SplitManifest``)."""
    return SearchState(run=SearchRun(config=cfg, manifest=SplitManifest.of(feedback, selection)))


def search_step(
    state: SearchState,
    ports: SearchPorts,
    start: Harness,
    feedback: Sequence[Task],
    selection: Sequence[Task],
    proposer: SearchProposer | None = None,
    wall_s: float = 0.0,
) -> SearchState:
    """The state after the next step (module docstring; ``state`` is not changed): step 0
    evaluates ``start``, step i ≥ 1 runs iteration i; when a spend budget of
    ``state.run.config.budget`` is reached (``SearchState.spend`` at ``ports.prices`` and
    ``wall_s``, the seconds since the search started by the driver's clock) the step ends
    the search instead, running nothing (``run.stopped``/``run.stopped_by`` say which
    budget). ``feedback``/``selection`` must be the tasks of ``state.run.manifest``
    (``ValueError`` otherwise); ``proposer``: replaces the protocol's default
    (``default_proposer``); in ``random`` it is given no feedback."""
    state = state.model_copy(deep=True)
    if state.done:
        return state
    run, cfg = state.run, state.run.config
    if SplitManifest.of(feedback, selection) != run.manifest:
        raise ValueError("search_step: feedback/selection tasks differ from the run's manifest")
    hit = exhausted(cfg.budget, state.spend(ports.prices, wall_s))
    if hit is not None:
        run.stopped, run.stopped_by, state.done = hit.reason, hit.by, True
        return state
    ledger = Ledger(ports.execute, cfg.concurrency, state.spent)
    it = state.next_iteration
    if cfg.protocol == "best_of_n":
        _best_of_n_step(state, ledger, start, selection)
        last, why = len(cfg.best_of_n) - 1, f"every N of {list(cfg.best_of_n)} tried"
    else:
        blind = cfg.protocol == "random"
        _beam_step(
            state, ledger, start, feedback, selection, proposer or default_proposer(cfg),
            blind, ports,
        )  # fmt: skip
        last, why = cfg.iterations, f"{cfg.iterations} iterations"
    state.next_iteration = it + 1
    if state.next_iteration > last:
        run.stopped, run.stopped_by, state.done = why, "max_rounds", True
    return state


def run_search(
    cfg: SearchConfig,
    ports: SearchPorts,
    start: Harness,
    feedback: Sequence[Task],
    selection: Sequence[Task],
    proposer: SearchProposer | None = None,
    on_point: Callable[[SearchPoint], None] = lambda p: None,
    clock: Callable[[], float] = time.monotonic,
) -> SearchRun:
    """Run ``cfg.protocol`` from ``start`` in process, step after step (``search_step``),
    its candidates through ``ports`` (``SearchPorts``).
    ``feedback``/``selection``: the disjoint splits (``SplitManifest`` raises
    ``ValueError`` when they share a task or one is empty); ``proposer``: replaces the
    protocol's default (``default_proposer``; unused by ``best_of_n``); in ``random`` it
    is given no feedback. ``on_point`` is called with every ``SearchPoint``; ``clock``:
    seconds (any origin) for ``budget_wall_s``, read once at the start and before each
    step."""
    state = new_search(cfg, feedback, selection)
    t0 = clock()
    while not state.done:
        seen = len(state.run.points)
        state = search_step(state, ports, start, feedback, selection, proposer, wall_s=clock() - t0)
        for p in state.run.points[seen:]:
            on_point(p)
    return state.run


def _point(run: SearchRun, ledger: Ledger, iteration: int, frontier: Frontier) -> SearchPoint:
    cost = ledger.cost()
    point = SearchPoint(
        iteration=iteration,
        generator_calls=cost["generator_calls"],
        cache_hits=cost["cache_hits"],
        executions=cost["executions"],
        best_harness_id=frontier.head.harness_id,
        best_score=frontier.head.target_pass_rate,
    )
    run.points.append(point)
    return point


def _beam_step(
    state: SearchState,
    ledger: Ledger,
    start: Harness,
    feedback: Sequence[Task],
    selection: Sequence[Task],
    proposer: SearchProposer,
    blind: bool,
    ports: SearchPorts,
) -> None:
    """One step of the ``autoref``/``random`` beam (module docstring); updates ``state``.
    The frontier's ``target_pass_rate`` holds each entry's selection pass rate."""
    run, cfg, results = state.run, state.run.config, state.feedback
    fb_tasks = {t.task_id: t for t in feedback}

    def evaluate(h: Harness, parent_id: str, rationale: str, it: int) -> FrontierEntry:
        hid = harness_id(h)
        run.harnesses[hid] = h.to_document()
        if not blind:
            execs = ledger.run(h, feedback, cfg.seeds)
            results[hid] = feedback_of(hid, execs, fb_tasks, run.manifest, parent_id, rationale)
        score = pass_rate(ledger.run(h, selection, cfg.seeds))
        return FrontierEntry(
            harness_id=hid,
            document=run.harnesses[hid],
            target_pass_rate=score,
            round=it,
            parent_harness_id=parent_id,
        )

    it = state.next_iteration
    if state.frontier is None or it == 0:
        state.frontier = Frontier(beam=cfg.beam).push(evaluate(start, "", "", 0))
        _point(run, ledger, 0, state.frontier)
        return
    parents = state.frontier.entries
    quotas = [
        cfg.candidates // len(parents) + (i < cfg.candidates % len(parents))
        for i in range(len(parents))
    ]
    entries: list[FrontierEntry] = []
    history = () if blind else tuple(results.values())  # earlier iterations' only
    for entry, quota in zip(parents, quotas, strict=True):
        if quota == 0:
            continue
        parent = Harness.model_validate(entry.document)
        view = ProposerInput(
            iteration=it,
            parent=parent,
            parent_feedback=None if blind else results.get(entry.harness_id),
            history=history,
        )
        ran = 0
        patches = proposer(view, quota * OVERDRAW)
        _record_refused(proposer, run, entry.harness_id, it)
        for patch in patches:
            if ran == quota:
                break
            rec = _checked(patch, parent, entry.harness_id, it, feedback, cfg, run,
                           ports)  # fmt: skip
            if rec is None:
                continue
            ran += 1
            child, record = rec
            e = evaluate(child, entry.harness_id, patch.rationale, it)
            fb = results.get(e.harness_id)
            record.feedback_pass_rate = fb.pass_rate if fb else None
            record.selection_score = e.target_pass_rate
            entries.append(e)
    state.frontier = state.frontier.push(*entries)
    _point(run, ledger, it, state.frontier)


def _record_refused(proposer: SearchProposer, run: SearchRun, parent_id: str, it: int) -> None:
    """The answers an LLM proposer refused (``search.llm.LlmSearchProposer.take_failures``)
    as candidates that never ran: ``check`` is ``proposer_<reason>: <detail>``, no harness,
    the refused excerpt as rationale. A proposer without ``take_failures`` records nothing."""
    take = getattr(proposer, "take_failures", None)
    if take is None:
        return
    for f in take():
        run.candidates.append(
            CandidateRecord(
                iteration=it,
                harness_id="",
                parent_id=parent_id,
                rationale=f.excerpt,
                check=f"proposer_{f.reason}: {f.detail}"[:300],
            )
        )


def _checked(
    patch: Patch,
    parent: Harness,
    parent_id: str,
    it: int,
    feedback: Sequence[Task],
    cfg: SearchConfig,
    run: SearchRun,
    ports: SearchPorts,
) -> tuple[Harness, CandidateRecord] | None:
    """``patch`` through the proposal checks on the feedback tasks; recorded in ``run``.
    Returns the child and its record, or None when a check failed or the child was already
    evaluated by this search (it would cost nothing and tell nothing new)."""
    res = check_proposal(
        patch.model_dump(mode="json"),
        parent,
        feedback,
        cfg.seeds,
        ports.compile_program,
        ports.capabilities,
    )
    child_id = res.child_id or ""
    if res.ok and child_id in run.harnesses:
        check = "duplicate"
    else:
        check = "ok" if res.ok else f"{res.reason}: {res.detail}"[:300]
    record = CandidateRecord(
        iteration=it,
        harness_id=child_id,
        parent_id=parent_id,
        rationale=patch.rationale,
        check=check,
        patch=patch.model_dump(mode="json"),
    )
    run.candidates.append(record)
    if check != "ok" or res.child is None:
        return None
    return res.child, record


def with_best_of_n(harness: Harness, n: int) -> Harness:
    """``harness`` with one best-of-N stage of ``n`` candidates (replacing any it has;
    ``n`` = 1: none). Raises ``ValueError`` (pydantic) when ``n`` is outside the stage's
    bounds."""
    doc = harness.to_document()
    stages = [s for s in doc["middleware"]["stages"] if s.get("kind") != "best_of_n"]
    if n > 1:
        stages.append({"kind": "best_of_n", "n": n})
    doc["middleware"]["stages"] = stages
    return Harness.model_validate(doc)


def _middleware_patch(parent: Harness, child: Harness, rationale: str) -> dict[str, Any]:
    """The Middleware patch from ``parent`` to ``child`` (JSON), for the lineage of a
    best-of-N harness (``harness.patch.diff``: its only change is middleware)."""
    ops = diff(parent, child).get("middleware", [])
    mw = Responsibility.middleware
    return Patch(responsibility=mw, ops=ops, rationale=rationale).model_dump(mode="json")


def _best_of_n_step(
    state: SearchState, ledger: Ledger, start: Harness, selection: Sequence[Task]
) -> None:
    """One step of ``best_of_n``: step i tries N = ``cfg.best_of_n[i]`` (module
    docstring); updates ``state``."""
    run, cfg = state.run, state.run.config
    it = state.next_iteration
    n = cfg.best_of_n[it]
    h = with_best_of_n(start, n)
    hid = harness_id(h)
    run.harnesses[hid] = h.to_document()
    score = pass_rate(ledger.run(h, selection, cfg.seeds))
    run.candidates.append(
        CandidateRecord(
            iteration=it,
            harness_id=hid,
            parent_id=harness_id(start),
            rationale=f"best-of-{n}",
            check="ok",
            selection_score=score,
            patch=_middleware_patch(start, h, f"best-of-{n}") if n > 1 else None,
        )
    )
    entry = FrontierEntry(
        harness_id=hid,
        document=run.harnesses[hid],
        target_pass_rate=score,
        round=it,
        parent_harness_id=harness_id(start) if hid != harness_id(start) else "",
    )
    state.frontier = (state.frontier or Frontier(beam=1)).push(entry)
    _point(run, ledger, it, state.frontier)


__all__ = [
    "CandidateRecord",
    "ExecCost",
    "GUIDED_WEIGHT",
    "Ledger",
    "PROTOCOLS",
    "ProtocolName",
    "SearchConfig",
    "SearchPoint",
    "SearchRun",
    "SearchSettings",
    "SearchState",
    "blind_mutations",
    "default_proposer",
    "spent_cost",
    "guided_mutations",
    "new_search",
    "run_search",
    "search_step",
    "with_best_of_n",
]
