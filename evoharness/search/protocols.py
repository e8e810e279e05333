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
  failing constraints are drawn more often); an LLM proposer fits the same
  ``feedback.SearchProposer`` type.
- ``random``: the same beam with the blind mutation proposer (``blind_mutations``): no
  feedback split is run and the proposer is given the parent only; blind search.
- ``best_of_n``: no evolution: the starting harness with a best-of-N middleware stage
  (``harness.schema.BestOfNStage``) for each N of ``best_of_n`` in turn, ranked on the
  selection split (the test-time-scaling baseline: Ma et al. 2025, "Inference-time scaling
  for diffusion models beyond scaling denoising steps"; SANA 1.5).

Every protocol runs through the same execution port as a TRACE round (``RoundPorts.execute``:
the worker's content-addressed execution cache) and the same proposal checks
(``trace.checks.check_proposal``: a patch that fails them costs no generation). The budget is
counted in generator calls (``trace.round.round_cost``: cache hits apart); each (harness,
task, seed) runs once per search (``Ledger``). ``SearchConfig.max_calls`` stops a search
before an iteration once that many calls are spent (a matched budget); the last iteration
may overrun it, and the run records what it spent. A ``SearchPoint`` after the start and
after every iteration records the spend so far and the best harness (the frontier's head,
ranked by selection pass rate); the untouched test split is never run here (the bench scores
each point's harness on it, ``bench/protocols.py``).

Nothing here reads the simulator, benchmark labels or the test split.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Final, Literal

from pydantic import BaseModel, ConfigDict, Field

from evoharness.capabilities import GeneratorCapabilities
from evoharness.harness.io import harness_id
from evoharness.harness.patch import Patch
from evoharness.harness.schema import Harness
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
from evoharness.trace.checks import CompileFn, check_proposal
from evoharness.trace.frontier import Frontier, FrontierEntry
from evoharness.trace.models import Execution
from evoharness.trace.round import ExecuteFn, execute_all, round_cost
from evoharness.trace.schema_levers import Lever, features_of

ProtocolName = Literal["autoref", "random", "best_of_n"]
PROTOCOLS: Final = ("autoref", "random", "best_of_n")
#: A parent's proposer is asked for this many times its quota of candidates; the first
#: ``quota`` that pass the proposal checks run (K counts candidates that cost generations).
OVERDRAW: Final = 3
#: How much likelier ``guided_mutations`` draws an edit on a failing prompt feature.
GUIDED_WEIGHT: Final = 4.0


class SearchConfig(BaseModel):
    """One search's settings (module docstring). ``seeds``: the matched seeds every
    candidate runs on (feedback and selection alike); ``max_calls``: the generator-call
    budget (None: ``iterations`` only); ``proposer_seed`` and ``max_edits``: the mutation
    proposer's (``search.mutation.MutationProposer``); ``best_of_n``: the N tried, in
    order; ``concurrency``: executions in flight."""

    model_config = ConfigDict(extra="forbid")

    protocol: ProtocolName = "autoref"
    candidates: int = Field(default=4, ge=1)
    beam: int = Field(default=2, ge=1)
    iterations: int = Field(default=5, ge=1)
    seeds: tuple[int, ...] = Field(default=(0, 1), min_length=1)
    max_calls: int | None = Field(default=None, ge=1)
    proposer_seed: int = 0
    max_edits: int = Field(default=2, ge=1)
    best_of_n: tuple[int, ...] = Field(default=(1, 2, 4, 8, 16), min_length=1)
    concurrency: int = Field(default=2, ge=1)


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

    @property
    def best(self) -> Harness:
        """The last point's best harness. Raises ``IndexError`` before the first point."""
        return Harness.model_validate(self.harnesses[self.points[-1].best_harness_id])


@dataclass(frozen=True)
class SearchPorts:
    """What a search runs candidates through: ``execute`` (one harness on one task and
    seed), ``compile_program`` (the proposal checks' compile) and the deployed generator's
    ``capabilities`` (None: everything honoured)."""

    execute: ExecuteFn
    compile_program: CompileFn
    capabilities: GeneratorCapabilities | None = None


@dataclass
class _Search:
    """One search under way: its settings, its record, its executions, its ports and the
    callback that sees every ``SearchPoint``."""

    cfg: SearchConfig
    run: SearchRun
    ledger: Ledger
    ports: SearchPorts
    on_point: Callable[[SearchPoint], None]


class Ledger:
    """The executions of one search, each (harness, task, seed) run once through
    ``execute`` (thread-safe), and what they cost (``trace.round.round_cost``)."""

    def __init__(self, execute: ExecuteFn, concurrency: int) -> None:
        self._execute = execute
        self._concurrency = concurrency
        self._runs: dict[tuple[str, str, int], Execution] = {}
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
                with self._lock:
                    self._runs[key] = done
            return done

        return execute_all(once, harness, tasks, seeds, self._concurrency)

    def cost(self) -> dict[str, float]:
        """``round_cost`` over every execution so far."""
        with self._lock:
            runs = list(self._runs.values())
        return round_cost([runs])


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


def run_search(
    cfg: SearchConfig,
    ports: SearchPorts,
    start: Harness,
    feedback: Sequence[Task],
    selection: Sequence[Task],
    proposer: SearchProposer | None = None,
    on_point: Callable[[SearchPoint], None] = lambda p: None,
) -> SearchRun:
    """Run ``cfg.protocol`` from ``start`` through ``ports`` (module docstring). ``feedback``/``selection``:
    the disjoint splits (``SplitManifest`` raises ``ValueError`` when they share a task or
    one is empty); ``proposer``: replaces the protocol's default (``guided_mutations`` for
    ``autoref``, ``blind_mutations`` for ``random``; unused by ``best_of_n``); in ``random``
    it is given no feedback. ``on_point`` is called with every ``SearchPoint``."""
    manifest = SplitManifest.of(feedback, selection)
    run = SearchRun(config=cfg, manifest=manifest)
    ledger = Ledger(ports.execute, cfg.concurrency)
    search = _Search(cfg, run, ledger, ports, on_point)
    if cfg.protocol == "best_of_n":
        _best_of_n(search, start, selection)
        return run
    blind = cfg.protocol == "random"
    if proposer is None:
        make = blind_mutations if blind else guided_mutations
        proposer = make(cfg.proposer_seed, cfg.max_edits)
    _beam(search, start, feedback, selection, proposer, blind)
    return run


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


def _over_budget(cfg: SearchConfig, ledger: Ledger) -> bool:
    return cfg.max_calls is not None and ledger.cost()["generator_calls"] >= cfg.max_calls


def _beam(
    search: _Search,
    start: Harness,
    feedback: Sequence[Task],
    selection: Sequence[Task],
    proposer: SearchProposer,
    blind: bool,
) -> None:
    """The ``autoref``/``random`` beam (module docstring); fills ``search.run``. The
    frontier's ``target_pass_rate`` holds each entry's selection pass rate (the ranking
    score)."""
    cfg, run, ledger, on_point = search.cfg, search.run, search.ledger, search.on_point
    fb_tasks = {t.task_id: t for t in feedback}
    results: dict[str, FeedbackResult] = {}

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

    frontier = Frontier(beam=cfg.beam).push(evaluate(start, "", "", 0))
    on_point(_point(run, ledger, 0, frontier))
    run.stopped = f"{cfg.iterations} iterations"
    for it in range(1, cfg.iterations + 1):
        if _over_budget(cfg, ledger):
            run.stopped = f"budget of {cfg.max_calls} generator calls spent"
            break
        parents = frontier.entries
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
            for patch in proposer(view, quota * OVERDRAW):
                if ran == quota:
                    break
                rec = _checked(search, patch, parent, entry.harness_id, it, feedback)
                if rec is None:
                    continue
                ran += 1
                child, record = rec
                e = evaluate(child, entry.harness_id, patch.rationale, it)
                fb = results.get(e.harness_id)
                record.feedback_pass_rate = fb.pass_rate if fb else None
                record.selection_score = e.target_pass_rate
                entries.append(e)
        frontier = frontier.push(*entries)
        on_point(_point(run, ledger, it, frontier))


def _checked(
    search: _Search,
    patch: Patch,
    parent: Harness,
    parent_id: str,
    it: int,
    feedback: Sequence[Task],
) -> tuple[Harness, CandidateRecord] | None:
    """``patch`` through the proposal checks on the feedback tasks; recorded in
    ``search.run``. Returns the child and its record, or None when a check failed or the
    child was already evaluated by this search (it would cost nothing and tell nothing new)."""
    run, ports = search.run, search.ports
    res = check_proposal(
        patch.model_dump(mode="json"),
        parent,
        feedback,
        search.cfg.seeds,
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


def _best_of_n(search: _Search, start: Harness, selection: Sequence[Task]) -> None:
    """``best_of_n``: one "iteration" per N of ``cfg.best_of_n`` (module docstring)."""
    cfg, run, ledger, on_point = search.cfg, search.run, search.ledger, search.on_point
    frontier = Frontier(beam=1)
    run.stopped = f"every N of {list(cfg.best_of_n)} tried"
    for it, n in enumerate(cfg.best_of_n):
        if it and _over_budget(cfg, ledger):
            run.stopped = f"budget of {cfg.max_calls} generator calls spent"
            break
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
            )
        )
        entry = FrontierEntry(
            harness_id=hid, document=run.harnesses[hid], target_pass_rate=score, round=it
        )
        frontier = frontier.push(entry)
        on_point(_point(run, ledger, it, frontier))


__all__ = [
    "CandidateRecord",
    "GUIDED_WEIGHT",
    "Ledger",
    "PROTOCOLS",
    "ProtocolName",
    "SearchConfig",
    "SearchPoint",
    "SearchPorts",
    "SearchRun",
    "blind_mutations",
    "guided_mutations",
    "run_search",
    "with_best_of_n",
]
