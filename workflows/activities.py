"""Temporal activities of the TRACE round. Each is a thin wrapper over a function of
``evoharness.trace.round`` (the same functions the in-process round calls), run in the
worker's thread pool (synchronous activities).

- ``load_inputs``: the run's harness and task splits (``workflows.inputs``);
- ``execute_batch``: steps 1–2 for (harness, tasks × seeds); heartbeats after every
  execution; idempotent through the content-addressed cache (``workflows.backends``); stores
  each full execution record (``runs/<run>/executions/<harness>/<task>/<seed>.json``) and
  returns slim records (no trace) to keep workflow payloads small;
- ``analyze_and_propose``: steps 3–5 (aggregate, cluster, localize + evidence, propose, check);
- ``gate_candidate``: step 6's gate for one candidate;
- ``finalize_round``: steps 7–8 (decide, re-localize the residual), the round report JSON to
  S3 and the worker metrics;
- ``register_result``: the "register result" port (``workflows.registrar``).

Bad input raises ``workflows.errors.bad_input`` (non-retryable); everything else is retried
with backoff by the workflows' retry policy (``workflows.activity_options``). Store keys are
``workflows.store_keys``'s, the round's metrics ``workflows.round_metrics``'.
"""

from __future__ import annotations

import threading
import time
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from types import SimpleNamespace
from typing import Any

from temporalio import activity

from evoharness.harness.io import harness_id, loads
from evoharness.tasks.models import Task
from evoharness.trace.aggregate import AggregationError
from evoharness.trace.budget import load_prices
from evoharness.trace.models import (
    Candidate,
    CandidateStatus,
    Execution,
    GateReport,
    RoundReport,
)
from evoharness.trace.preservation import PreservationSet, passed_map, select_preservation
from evoharness.trace.round import (
    Analysis,
    ProposedCandidate,
    ReportHeader,
    execute_all,
    finalize,
    round_cost,
)
from evoharness.trace.round import gate_candidate as _gate
from evoharness.trace.round_analyze import answer_analyze
from services.common.metrics import (
    DECISIONS,
    EVOLUTION_PROGRESS,
    PROPOSAL_FAILURES,
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
from workflows.errors import bad_input
from workflows.heartbeat import heartbeating
from workflows.inputs import InputLoader
from workflows.params import (
    AnalyzeRequest,
    AnalyzeResult,
    Backends,
    EvolutionParams,
    ExecuteRequest,
    ExecutionRef,
    ExecutionSet,
    FinalizeRequest,
    GateRequest,
    LoadedInputs,
    RegisterRequest,
    SelectRequest,
)
from workflows.registrar import ResultRegistrar, S3ResultRegistrar
from workflows.round_metrics import record_round
from workflows.store_keys import analysis_key, execution_record_key, report_key


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
        self.inputs = InputLoader(settings, self.store)

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

    def split_tasks(self, name: str, src: Any) -> list[Task]:
        """The tasks of one split source (``InputLoader.split_tasks``)."""
        return self.inputs.split_tasks(name, src)

    @activity.defn(name="load_inputs")
    def load_inputs(self, params: EvolutionParams) -> LoadedInputs:
        """Resolve the harness and the three splits (``InputLoader.load``): label-free unless
        the run uses benchmark labels, disjoint, the target split non-empty, no prompt
        overlapping ``scored_on`` (bad input otherwise)."""
        return self.inputs.load(params)

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

    def _experience(self, req: AnalyzeRequest) -> list[Any]:
        """The stored analysis executions of ``req.experience``'s parents, each on the target
        split then the preservation pool, on the round's analysis seeds (what the in-process
        beam hands ``run_round`` as ``experience``)."""
        an = req.request
        sets = [
            ExecutionSet(
                harness_id=hid,
                split=split,
                task_ids=[t.task_id for t in tasks],
                seeds=req.config.seeds,
            )
            for hid in req.experience
            for split, tasks in (("target", an.tasks), ("preservation", an.pool))
            if tasks
        ]
        return [e for s in sets for e in self._full(req.run_id, s)]

    # ----------------------------------------------------------------------- preservation

    @activity.defn(name="select_preservation")
    def select_preservation(self, req: SelectRequest) -> PreservationSet:
        """The round's preservation set (``trace.preservation.select_preservation``): the
        pool's prompts the parent passed on the analysis seeds, by its stored executions.
        Runs here, not in the workflow, because it reads prompts with the rule extractor."""
        full = self._full(req.run_id, req.executions)
        return select_preservation(req.pool, passed_map(full), req.executions.seeds, req.config)

    # -------------------------------------------------------------------------- analyze

    @activity.defn(name="analyze_and_propose")
    def analyze_and_propose(self, req: AnalyzeRequest) -> AnalyzeResult:
        """The answer to the core's ``Analyze`` request, the in-process driver's own
        (``round_analyze.answer_analyze``): steps 3–5 with counterfactual attribution, whose probes
        run here through the worker's content-addressed execution cache (a retried activity
        repeats no completed generator call); heartbeats while it runs. Answers the
        proposer's own validator dropped (gRPC/LLM proposer) become rejected candidates with
        their reason; LLM usage is returned in ``llm_usage``."""
        with heartbeating(lambda: "analyze"):
            return self._analyze_and_propose(req)

    def _analyze_and_propose(self, req: AnalyzeRequest) -> AnalyzeResult:
        cfg = req.config
        ports = self.ports(req.backends)
        keys = AnalyzeRequest.keys(req.request)
        if len(keys) != len(req.executions):
            raise bad_input(
                f"analyze: {len(req.executions)} execution sets for {len(keys)} keys {keys}"
            )
        ledger = ProposerLedger()
        token = LEDGER.set(ledger)
        try:
            results = {
                k: self._full(req.run_id, v) for k, v in zip(keys, req.executions, strict=True)
            }
            experience = self._experience(req)
            try:
                answer = answer_analyze(req.request, results, ports.round_ports(), cfg, experience)
            except AggregationError as exc:
                raise bad_input(str(exc)) from None
        finally:
            LEDGER.reset(token)
        analysis, proposed, cf = answer.analysis, answer.proposed, answer.counterfactual
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
            usd = self.prices.llm_usd(ledger.prompt_tokens, ledger.completion_tokens)
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
            analysis=slim,
            proposed=proposed,
            llm_usage=usage,
            probe_cost=round_cost([answer.probes]),
            counterfactual_cost=round_cost([cf.executions]) if cf else None,
            counterfactual=cf.record if cf else None,
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
        execs = {(v.harness_id, v.split): self._full(req.run_id, v) for v in req.executions}
        spent = [self._full(req.run_id, v) for v in req.spent]
        cost = round_cost(
            spent,
            probes=req.analysis.probe_cost,
            counterfactual=req.analysis.counterfactual_cost,
        )
        gen_usd = self.prices.generator_usd(cost["generator_seconds"], cost["generator_calls"])
        cost.update(req.analysis.llm_usage)
        cost["generator_usd"] = gen_usd
        cost["spend_usd"] = gen_usd + req.analysis.llm_usage.get("llm_usd", 0.0)
        report = finalize(
            ReportHeader(req.run_id, req.round, pid, cost, req.frontier, req.preservation),
            analysis,
            candidates,
            execs,
            req.target_tasks,
            req.alpha,
            stopped=req.stopped,
        )
        if req.analysis.counterfactual is not None:
            report = report.model_copy(update={"counterfactual": req.analysis.counterfactual})
        key = report_key(req.run_id, req.round, req.beam_index)
        self.store.put(key, report.model_dump_json(indent=2).encode(), "application/json")
        for k in [k for k in self._progress if k[0] == req.run_id]:
            del self._progress[k]
        record_round(req.run_id, req.round, report)
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
