"""Temporal activities of the TRACE round. Each is a thin wrapper over a function of
``evoharness.trace.round`` (the same functions the in-process round calls), run in the
worker's thread pool (synchronous activities).

- ``load_inputs``: resolve the harness and the task splits (``file://`` or ``s3://``); in
  label-free mode (the default) replace every task's constraints by the frozen extractor's
  reading of its prompt; refuse evolution prompts that overlap ``scored_on``;
- ``execute_batch``: steps 1–2 for (harness, tasks × seeds); heartbeats after every
  execution; idempotent through the content-addressed cache (``workflows.backends``); stores
  each full execution record (``runs/<run>/executions/<harness>/<task>/<seed>.json``) and
  returns slim records (no trace) to keep workflow payloads small;
- ``analyze_and_propose``: steps 3–5 (aggregate, cluster, localize + evidence, propose, check);
- ``gate_candidate``: step 6's gate for one candidate;
- ``finalize_round``: steps 7–8 (decide, re-localize the residual), the round report JSON to
  S3 and the worker metrics;
- ``register_result``: the "register result" port (default: the harness document to S3 under
  ``harnesses/<id>.json``; the registry engineer replaces ``ResultRegistrar``).

Bad input raises ``ApplicationError(non_retryable=True)``; everything else is retried with
backoff by the workflow's retry policy.
"""

from __future__ import annotations

import contextvars
import json
import re
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from types import SimpleNamespace
from typing import Any, Protocol
from urllib.parse import urlparse

from pydantic import ValidationError
from temporalio import activity
from temporalio.exceptions import ApplicationError

from evoharness.canonical import canonical_json
from evoharness.harness.io import HarnessError, from_document, harness_id, load_dir, loads
from evoharness.tasks.io import load_tasks
from evoharness.tasks.labelfree import LabelFreeError, extractor_id, label_free
from evoharness.tasks.models import Task
from evoharness.tasks.overlap import OverlapError, refuse_overlap
from evoharness.tasks.splits import EVOLUTION_SPLITS
from evoharness.trace.aggregate import AggregationError
from evoharness.trace.budget import load_prices
from evoharness.trace.models import (
    Candidate,
    CandidateStatus,
    DecisionKind,
    GateReport,
    RoundReport,
)
from evoharness.trace.preservation import PreservationSet, passed_map, select_preservation
from evoharness.trace.round import (
    Analysis,
    ProposedCandidate,
    analyze,
    execute_all,
    finalize,
    propose_candidates,
    recording,
    round_cost,
)
from evoharness.trace.round import gate_candidate as _gate
from services.common.metrics import (
    BUDGET_USD,
    DECISIONS,
    EVOLUTION_PROGRESS,
    EVOLUTION_ROUND,
    PASS_RATE,
    PROPOSAL_FAILURES,
    REGRESSION,
    ROUNDS,
    RUN_NOTHING_CHECKABLE,
    SPEND_USD,
    WORKFLOW_LAST_PROGRESS,
)
from workflows.backends import (
    LEDGER,
    Proposer,
    ProposerLedger,
    TracePorts,
    WorkerSettings,
    build_store,
)
from workflows.params import (
    AnalyzeRequest,
    AnalyzeResult,
    Backends,
    EvolutionMode,
    EvolutionParams,
    ExecuteRequest,
    ExecutionRef,
    ExecutionSet,
    FinalizeRequest,
    GateRequest,
    LoadedInputs,
    RegisterRequest,
    SelectRequest,
    run_mode_key,
)


def bad_input(message: str) -> ApplicationError:
    """A non-retryable activity error for bad input."""
    return ApplicationError(message, type="BadInput", non_retryable=True)


class ResultRegistrar(Protocol):
    """Where accepted harnesses go. ``register`` returns a reference (registry version id or
    S3 key). ``channel`` set = promote after human approval."""

    def register(self, req: RegisterRequest) -> str: ...


class S3ResultRegistrar:
    """Default registrar: writes ``harnesses/<harness_id>.json`` (canonical JSON) plus a
    lineage record ``runs/<run_id>/registered/<harness_id>.json``; a promotion writes
    ``channels/<channel>.json`` pointing at the harness."""

    def __init__(self, store: Any) -> None:
        self.store = store

    def register(self, req: RegisterRequest) -> str:
        """Store the document and lineage; return the document's key."""
        hid = harness_id(req.harness)
        key = f"harnesses/{hid}.json"
        self.store.put(key, canonical_json(req.harness.to_document()), "application/json")
        lineage = {
            "harness_id": hid,
            "parent_harness_id": req.parent_harness_id,
            "run_id": req.run_id,
            "round": req.round,
            "report_key": req.report_key,
            "patch": req.patch,
            "note": req.note,
        }
        self.store.put(
            f"runs/{req.run_id}/registered/{hid}.json", canonical_json(lineage), "application/json"
        )
        if req.channel:
            self.store.put(
                f"channels/{req.channel}.json",
                canonical_json({**lineage, "channel": req.channel, "key": key}),
                "application/json",
            )
        return key


@contextmanager
def heartbeating(details: Callable[[], Any]) -> Iterator[None]:
    """Heartbeat ``details()`` from a background thread every third of the activity's heartbeat
    timeout while the body runs; a no-op when the activity has no heartbeat timeout.

    The heartbeat timeout says how soon a *dead* worker's activity is retried. Heartbeating only
    after each finished execution made a slow execution on a loaded machine (or the first
    set-up of a worker's backends) read as a dead worker, and the attempt was cancelled and
    retried. The thread lives in the worker process, so a killed worker still stops
    heartbeating and is retried after the timeout (the liveness ticker of Temporal's
    long-running-activity samples). Temporal's SDK throttles heartbeats to 80% of the timeout.
    """
    timeout = activity.info().heartbeat_timeout
    if not timeout:
        yield
        return
    interval = max(0.05, timeout.total_seconds() / 3)
    stop = threading.Event()
    ctx = contextvars.copy_context()  # the activity context, for activity.heartbeat

    def tick() -> None:
        while not stop.wait(interval):
            ctx.run(activity.heartbeat, details())

    thread = threading.Thread(target=tick, name="heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join()


class TraceActivities:
    """The activities, sharing one worker's settings, store and ports (one ``TracePorts``
    per backend combination, built on first use). ``proposers``: extra proposer backends by
    name (in addition to ``rule``/``grpc``); ``registrar``: the "register result" port."""

    def __init__(
        self,
        settings: WorkerSettings,
        registrar: ResultRegistrar | None = None,
        proposers: dict[str, Proposer] | None = None,
    ):
        self.settings = settings
        self.proposers = dict(proposers or {})
        self.store = build_store(settings)
        self.registrar = registrar or S3ResultRegistrar(self.store)
        self._ports: dict[tuple[str, str, str], TracePorts] = {}
        self._progress: Counter[tuple[str, str]] = Counter()
        self._lock = threading.Lock()
        self.prices = load_prices(settings.worker.prices_path)

    def ports(self, b: Backends) -> TracePorts:
        """The ``TracePorts`` for backends ``b``; bad backend names are bad input."""
        key = (b.generator, b.verifier, b.proposer)
        with self._lock:
            if key not in self._ports:
                try:
                    self._ports[key] = TracePorts(
                        self.settings,
                        *key,
                        store=self.store,
                        proposer_impl=self.proposers.get(b.proposer),
                    )
                except ValueError as exc:
                    raise bad_input(str(exc)) from None
            return self._ports[key]

    # --------------------------------------------------------------------------- inputs

    def _read_uri(self, uri: str, what: str) -> tuple[bytes | None, Path | None]:
        u = urlparse(uri)
        if u.scheme == "file":
            p = Path(u.path)
            if not p.exists():
                raise bad_input(f"{what}: {uri} does not exist")
            return None, p
        if u.scheme == "s3":
            from services.storage.s3 import S3ArtifactStore

            store = S3ArtifactStore.from_settings(self.settings.s3, bucket=u.netloc)
            key = u.path.lstrip("/")
            if not store.exists(key):
                raise bad_input(f"{what}: {uri} does not exist")
            return store.get(key), None
        raise bad_input(f"{what}: unsupported URI scheme in {uri!r} (file:// or s3://)")

    def split_tasks(self, name: str, src: Any) -> list[Task]:
        """The tasks of one split source: ``src.tasks`` when inline, else the JSONL at
        ``src.uri`` (a ``file:`` or ``s3:`` URI, the latter read through S3). ``name``
        (e.g. ``"preservation"``, ``"scored_on[0]"``) names the split in errors. Raises a
        non-retryable bad-input error naming the split, the URI and the line of an invalid
        task."""
        if src.tasks is not None:
            return list(src.tasks)
        data, path = self._read_uri(src.uri, f"split {name}")
        try:
            if path is not None:
                return load_tasks(path)
            tasks = []
            for i, line in enumerate((data or b"").decode("utf-8").splitlines(), 1):
                if line.strip():
                    try:
                        tasks.append(Task.model_validate_json(line))
                    except ValidationError as exc:
                        raise ValueError(f"{src.uri}:{i}: {exc.errors()[0]['msg']}") from None
            return tasks
        except ValueError as exc:
            raise bad_input(f"split {name}: {exc}") from None

    @activity.defn(name="load_inputs")
    def load_inputs(self, params: EvolutionParams) -> LoadedInputs:
        """Resolve the harness and the three splits; check the splits are disjoint and the
        target split non-empty (bad input otherwise)."""
        ref = params.harness
        try:
            if ref.document is not None:  # strict types, as a harness file (issue 14 item 15)
                harness = from_document(ref.document, "harness.document")
            else:
                assert ref.uri is not None
                data, path = self._read_uri(ref.uri, "harness")
                if path is not None:
                    harness = (
                        load_dir(path) if path.is_dir() else loads(path.read_bytes(), str(path))
                    )
                else:
                    harness = loads(data or b"", ref.uri)
        except (HarnessError, ValidationError, ValueError) as exc:
            raise bad_input(f"harness: {exc}") from None
        splits = {
            name: self.split_tasks(name, getattr(params.splits, name)) for name in EVOLUTION_SPLITS
        }
        if not splits["target"]:
            raise bad_input("split target is empty")
        mode = self._mode(params, splits)
        if not params.benchmark_labels:
            dropped: list[str] = []
            for name in list(splits):
                mode.read += len(splits[name])
                splits[name], summary = label_free(splits[name], params.extractor)
                dropped += summary.dropped
            mode.dropped = dropped
            RUN_NOTHING_CHECKABLE.labels(run_id=params.run_id).set(len(dropped))
            if not splits["target"]:
                raise bad_input(
                    f"split target: the extractor {mode.extractor} reads no constraint from "
                    "any of its prompts (label-free mode)"
                )
        seen: dict[str, str] = {}
        for name, tasks in splits.items():
            for t in tasks:
                if t.task_id in seen and seen[t.task_id] != name:
                    raise bad_input(
                        f"task {t.task_id} is in both {seen[t.task_id]} and {name}: splits must be disjoint"
                    )
                seen[t.task_id] = name
        if params.budget_usd is not None:
            BUDGET_USD.labels(run_id=params.run_id).set(params.budget_usd)
        WORKFLOW_LAST_PROGRESS.labels(run_id=params.run_id).set(time.time())
        # the mode beside the round reports, for a report rendered from the bucket alone
        # (``evoharness evolve report``: the extractor, the nothing-checkable count)
        self.store.put(
            run_mode_key(params.run_id), mode.model_dump_json(indent=2).encode(), "application/json"
        )
        # the starting document, so that registrations can link to it (lineage, item 6)
        self.store.put(
            f"harnesses/{harness_id(harness)}.json",
            canonical_json(harness.to_document()),
            "application/json",
        )
        return LoadedInputs(harness=harness, splits=splits, mode=mode)

    def _mode(self, params: EvolutionParams, splits: dict[str, list[Task]]) -> EvolutionMode:
        """The run's mode: the frozen extractor id (bad input if a continuation finds another)
        and the overlap check of the evolution splits against ``params.scored_on`` (bad input,
        listing the prompts, when any overlaps)."""
        try:
            eid = "" if params.benchmark_labels else extractor_id(params.extractor)
        except LabelFreeError as exc:
            raise bad_input(f"extractor: {exc}") from None
        before = params.state.mode if params.state is not None else None
        if before is not None and before.extractor and eid and before.extractor != eid:
            raise bad_input(
                f"extractor changed during the run: it started with {before.extractor}, the "
                f"worker now has {eid} (the extractor is frozen for a run)"
            )
        scored = [
            t
            for i, src in enumerate(params.scored_on)
            for t in self.split_tasks(f"scored_on[{i}]", src)
        ]
        method = ""
        if scored:
            try:
                method = refuse_overlap(splits, scored, params.overlap)
            except OverlapError as exc:
                raise bad_input(str(exc)) from None
        return EvolutionMode(
            benchmark_labels=params.benchmark_labels,
            extractor=eid,
            overlap=method,
            scored_on=len(scored),
        )

    # -------------------------------------------------------------------------- execute

    @activity.defn(name="execute_batch")
    def execute_batch(self, req: ExecuteRequest) -> list[ExecutionRef]:
        """Steps 1–2 for every (task, seed) of the request; heartbeats ``done`` after each and,
        in between, from a background thread (``heartbeating``)."""
        done = [0]
        with heartbeating(lambda: done[0]):
            return self._execute_batch(req, done)

    def _execute_batch(self, req: ExecuteRequest, done: list[int]) -> list[ExecutionRef]:
        ports = self.ports(req.backends)
        lock = threading.Lock()

        def beat(_: Any) -> None:
            with lock:
                done[0] += 1
                n = done[0]
                self._progress[(req.run_id, req.phase)] += 1
                seen = self._progress[(req.run_id, req.phase)]
            activity.heartbeat(n)
            WORKFLOW_LAST_PROGRESS.labels(run_id=req.run_id).set(time.time())
            if req.phase_total:
                # approximate with several workers: each counts what it ran
                EVOLUTION_PROGRESS.labels(run_id=req.run_id, phase=req.phase).set(
                    min(1.0, seen / req.phase_total)
                )

        try:
            full = execute_all(
                ports.execute, req.harness, req.tasks, req.seeds, req.concurrency, on_done=beat
            )
        except ValueError as exc:  # HarnessCompileError and bad programs are bad input
            raise bad_input(f"execute: {exc}") from None
        for e in full:
            self.store.put(
                execution_record_key(req.run_id, e),
                e.model_dump_json().encode(),
                "application/json",
            )
        # Workflow payloads carry refs (identity, verdict counts, cost); the full records are
        # read back from the store by the activities that need them.
        return [ExecutionRef.of(e) for e in full]

    def _full(self, run_id: str, executions: list[Any] | ExecutionSet) -> list[Any]:
        """The full ``Execution`` records of ``executions`` (refs), read from the store in
        parallel, in order."""
        from concurrent.futures import ThreadPoolExecutor

        from evoharness.trace.models import Execution

        if isinstance(executions, ExecutionSet):
            executions = [
                SimpleNamespace(harness_id=executions.harness_id, task_id=t, seed=seed)
                for t in executions.task_ids
                for seed in executions.seeds
            ]

        def load(e: Any) -> Any:
            return Execution.model_validate_json(self.store.get(execution_record_key(run_id, e)))

        if len(executions) < 16:
            return [load(e) for e in executions]
        with ThreadPoolExecutor(8) as pool:
            return list(pool.map(load, executions))

    # ----------------------------------------------------------------------- preservation

    @activity.defn(name="select_preservation")
    def select_preservation(self, req: SelectRequest) -> PreservationSet:
        """The round's preservation set (``trace.preservation.select_preservation``): the
        pool's prompts the parent passed on the analysis seeds, by its stored executions.
        Runs here, not in the workflow, because it reads prompts with the rule extractor."""
        full = self._full(req.run_id, req.executions)
        return select_preservation(req.pool, passed_map(full), req.seeds, req.config)

    # -------------------------------------------------------------------------- analyze

    @activity.defn(name="analyze_and_propose")
    def analyze_and_propose(self, req: AnalyzeRequest) -> AnalyzeResult:
        """Steps 3–5 on the parent's target executions. Answers the proposer's own validator
        dropped (gRPC/LLM proposer) become rejected candidates with their reason; LLM usage
        is returned in ``llm_usage``."""
        cfg = req.config
        ports = self.ports(req.backends)
        ledger = ProposerLedger()
        token = LEDGER.set(ledger)
        try:
            try:
                full = self._full(req.run_id, req.executions)
                analysis = analyze(
                    full,
                    req.tasks,
                    req.parent,
                    ports.localize,
                    cfg.seeds,
                    cfg.w_localizer,
                )
            except AggregationError as exc:
                raise bad_input(str(exc)) from None
            # memory mining learns from the parent's own target executions (every attempt);
            # the scope probes' executions are recorded so the round counts their calls
            probes: list[Any] = []
            rp = ports.round_ports()
            rp.execute = recording(rp.execute, probes)
            proposed = propose_candidates(
                analysis, req.parent, req.tasks, rp, cfg, full, req.frontier
            )
        finally:
            LEDGER.reset(token)
        if ledger.model:  # the proposer's patches came from a language model, not rules
            for pc in proposed:
                if pc.candidate.source == "rule":
                    pc.candidate.source = "llm"
        for cluster_id, reason, detail, excerpt in ledger.failures:
            proposed.append(
                ProposedCandidate(
                    candidate=Candidate(
                        candidate_id=f"r{req.round}-x{len(proposed)}",
                        cluster_id=cluster_id,
                        source="llm",
                        status=CandidateStatus.rejected,
                        reject_reason=f"{reason}: {detail}",
                        raw=excerpt or None,  # the model's answer, shown in the report
                    )
                )
            )
        usd = ledger.cost_usd
        if usd == 0.0 and ledger.prompt_tokens:
            usd = (
                ledger.prompt_tokens / 1000 * self.prices.llm_prompt_per_1k_usd
                + ledger.completion_tokens / 1000 * self.prices.llm_completion_per_1k_usd
            )
        usage = {
            "llm_calls": float(ledger.calls),
            "llm_prompt_tokens": float(ledger.prompt_tokens),
            "llm_completion_tokens": float(ledger.completion_tokens),
            "llm_usd": usd,
        }
        for pc in proposed:
            if pc.candidate.reject_reason:
                reason = pc.candidate.reject_reason.split(":")[0]
                DECISIONS.labels(kind="candidate_rejected", reason=reason).inc()
                PROPOSAL_FAILURES.labels(reason=reason).inc()
        # The per-(task, constraint) stats are the bulk of the analysis; they go to the store
        # and finalize_round reads them back, so the payload stays small.
        self.store.put(
            analysis_key(req.run_id, req.round, req.beam_index),
            analysis.model_dump_json().encode(),
            "application/json",
        )
        slim = analysis.model_copy(update={"stats": []})
        return AnalyzeResult(
            analysis=slim, proposed=proposed, llm_usage=usage, probe_cost=round_cost([probes])
        )

    @activity.defn(name="gate_candidate")
    def gate_candidate(self, req: GateRequest) -> GateReport:
        """Step 6's gate for one candidate at validation look ``req.look``."""
        try:
            return _gate(
                {s: self._full(req.run_id, v) for s, v in req.parent.items()},
                {s: self._full(req.run_id, v) for s, v in req.candidate.items()},
                req.gate,
                req.look,
                req.objective,
                req.families,
                None
                if req.target_tasks is None
                else {t.task_id: t for t in [*req.target_tasks, *(req.heldout_tasks or [])]},
                req.restores_defaults,
            )
        except ValueError as exc:
            raise bad_input(f"gate: {exc}") from None

    # ------------------------------------------------------------------------- finalize

    @activity.defn(name="finalize_round")
    def finalize_round(self, req: FinalizeRequest) -> RoundReport:
        """Steps 7–8: decide, re-localize the residual, write ``runs/<run>/round-<n>.json``,
        update metrics. Returns the report (its key is deterministic)."""
        pid = harness_id(req.parent)
        analysis = req.analysis.analysis
        akey = analysis_key(req.run_id, req.round, req.beam_index)
        if not analysis.stats and self.store.exists(akey):
            analysis = Analysis.model_validate_json(self.store.get(akey))
        candidates = []
        for pc in req.analysis.proposed:
            c = pc.candidate
            if c.candidate_id in req.gates:
                c = c.model_copy(update={"gate": req.gates[c.candidate_id]})
            candidates.append(c)
        execs = {k: self._full(req.run_id, v) for k, v in req.executions.items()}
        spent = (
            execs.values() if req.spent is None else [self._full(req.run_id, v) for v in req.spent]
        )
        cost = round_cost(spent, probes=req.analysis.probe_cost)
        gen_usd = (
            cost["generator_seconds"] * self.prices.generator_second_usd
            + cost["generator_calls"] * self.prices.verifier_call_usd
        )
        cost.update(req.analysis.llm_usage)
        cost["generator_usd"] = gen_usd
        cost["spend_usd"] = gen_usd + req.analysis.llm_usage.get("llm_usd", 0.0)
        report = finalize(
            req.run_id,
            req.round,
            pid,
            analysis,
            candidates,
            _by_harness_split(execs),
            req.target_tasks,
            req.alpha,
            cost=cost,
            stopped=req.stopped,
            frontier=req.frontier,
            preservation=req.preservation,
        )
        decision, candidates, rates = report.decision, report.candidates, report.pass_rates
        key = report_key(req.run_id, req.round, req.beam_index)
        self.store.put(key, report.model_dump_json(indent=2).encode(), "application/json")
        ROUNDS.labels(run_id=req.run_id).inc()
        WORKFLOW_LAST_PROGRESS.labels(run_id=req.run_id).set(time.time())
        EVOLUTION_PROGRESS.labels(run_id=req.run_id, phase="finalize").set(1.0)
        for k in [k for k in self._progress if k[0] == req.run_id]:
            del self._progress[k]
        EVOLUTION_ROUND.labels(run_id=req.run_id).set(req.round)
        reason = (
            "accepted"
            if decision.kind is DecisionKind.accepted
            else _reason_tag(decision.reason, candidates)
        )
        DECISIONS.labels(kind=decision.kind.value, reason=reason).inc()
        for s, v in rates.items():
            PASS_RATE.labels(run_id=req.run_id, split=s).set(v)
        gates = [c.gate for c in candidates if c.gate is not None]
        if gates:
            REGRESSION.labels(run_id=req.run_id).set(min(g.regression for g in gates))
        SPEND_USD.labels(run_id=req.run_id, kind="generator").inc(gen_usd)
        if cost.get("llm_usd"):
            SPEND_USD.labels(run_id=req.run_id, kind="llm").inc(cost["llm_usd"])
        return report

    @activity.defn(name="register_result")
    def register_result(self, req: RegisterRequest) -> str:
        """Register an accepted harness (or promote it); returns the registrar's reference.
        The request is completed with its lineage first (``with_lineage``)."""
        return self.registrar.register(self.with_lineage(req))

    def with_lineage(self, req: RegisterRequest) -> RegisterRequest:
        """``req`` with the parent document (``harnesses/<parent_harness_id>.json``, stored
        by ``load_inputs`` or an earlier registration), the patch of candidate
        ``candidate_id`` (else of the round's decision) and a note describing the change
        (from the round report at ``report_key``), and the generator of the run's backends
        (``generator_id``, ``generator_capabilities``). Whatever is not stored stays unset."""
        update: dict[str, Any] = {}
        key = f"harnesses/{req.parent_harness_id}.json"
        if req.parent_harness is None and req.parent_harness_id and self.store.exists(key):
            update["parent_harness"] = loads(self.store.get(key), key)
        if req.report_key and req.patch is None and self.store.exists(req.report_key):
            rep = RoundReport.model_validate_json(self.store.get(req.report_key))
            cid = req.candidate_id or rep.decision.candidate_id
            cand = next((c for c in rep.candidates if c.candidate_id == cid), None)
            if cand is not None and cand.patch is not None:
                update["patch"] = cand.patch.model_dump(mode="json")
                what = cand.patch.rationale or cand.patch.expected_effect or "a patch"
                update["note"] = req.note or (
                    f"evolved by run {req.run_id}, round {req.round}: "
                    f"{cand.patch.responsibility.value} — {what}"
                )
        if req.backends is not None and not req.generator_id:
            gen = self.ports(req.backends).generator
            caps = getattr(getattr(gen, "inner", None), "capabilities", None)
            update["generator_id"] = gen.generator_id
            update["generator_capabilities"] = (
                caps.model_dump(mode="json") if caps is not None else None
            )
        return req.model_copy(update=update) if update else req

    def all(self) -> list[Any]:
        """Every activity callable, for ``Worker(activities=...)``."""
        return [
            self.load_inputs,
            self.execute_batch,
            self.select_preservation,
            self.analyze_and_propose,
            self.gate_candidate,
            self.finalize_round,
            self.register_result,
        ]


def _by_harness_split(execs: dict[str, list[Any]]) -> dict[tuple[str, str], list[Any]]:
    """Executions keyed ``<harness>/<split>[@v1|@v2]`` grouped by (harness, split): the
    validation looks' executions (fresh seeds, both looks together) where a harness has them
    on a split, else its analysis-seed executions."""
    tagged: dict[tuple[str, str], list[Any]] = {}
    plain: dict[tuple[str, str], list[Any]] = {}
    for k in sorted(execs):
        hid, rest = k.split("/", 1)
        split, _, tag = rest.partition("@")
        into = tagged if tag else plain
        into.setdefault((hid, split), []).extend(execs[k])
    return {**plain, **tagged}


def analysis_key(run_id: str, round_: int, beam_index: int = 0) -> str:
    """Store key of a round's full ``Analysis`` (with the per-constraint stats); a beam
    parent other than the head gets ``-b<i>``."""
    return f"runs/{run_id}/analysis-{round_:03d}{_beam_suffix(beam_index)}.json"


def _beam_suffix(beam_index: int) -> str:
    return f"-b{beam_index}" if beam_index else ""


def execution_record_key(run_id: str, e: Any) -> str:
    """Store key of the full record of execution ``e`` (with its trace) in run ``run_id``."""
    return f"runs/{run_id}/executions/{e.harness_id}/{e.task_id}/{e.seed}.json"


def report_key(run_id: str, round_: int, beam_index: int = 0) -> str:
    """S3 key of a round report (``round-NNN.json``; ``round-NNN-b<i>.json`` for the i-th
    beam parent other than the head)."""
    return f"runs/{run_id}/round-{round_:03d}{_beam_suffix(beam_index)}.json"


def _slug(text: str) -> str:
    """``"Δtarget not significant (p=0.41 ≥ 0.05)"`` → ``"target_not_significant"``: the words
    before the first figure or parenthesis (a bounded label value)."""
    head = re.match(r"^[^\d(]*", text)
    return re.sub(r"[^a-z]+", "_", (head.group(0) if head else "").lower()).strip("_")[:40]


def _reason_tag(reason: str, candidates: Sequence[Any] = ()) -> str:
    """The ``reason`` label of ``evoharness_decisions_total`` for a No-Patch decision: which
    rule said no (``no_failures``, ``attributed_no_patch``, ``proposal_checks``), and for
    the gate the check most candidates failed (``gate:regression``,
    ``gate:target_not_significant``, ...)."""
    if "no failures" in reason:
        return "no_failures"
    if "no_patch" in reason:
        return "attributed_no_patch"
    if "proposal checks" in reason:
        return "proposal_checks"
    if "gate" in reason:
        why = Counter(
            _slug(c.gate.reasons[0])
            for c in candidates
            if getattr(c, "gate", None) is not None and c.gate.reasons
        )
        top = why.most_common(1)[0][0] if why else ""
        return f"gate:{top}" if top else "gate"
    if "stopped" in reason:
        return "stopped"
    return "other"


def dump_json(value: Any) -> str:
    """Compact JSON for logs."""
    return json.dumps(value, default=str, sort_keys=True)
