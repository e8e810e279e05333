"""Durable TRACE evolution on Temporal: ``EvolutionWorkflow`` (one round per run, then
``continue_as_new``) and ``RoundWorkflow`` (a child workflow per round).

Workflow code is deterministic and does no I/O: every step of the round is an activity
(``workflows.activities``). Executions fan out as batches of ``batch_size`` tasks × K seeds,
at most ``concurrency`` batches in flight. Executions are content-addressed, so an activity
retried after a worker crash repeats no completed generator call.

Interaction:

- query ``progress`` → ``Progress`` (round, phase, done/total, scores, spend);
- signal ``stop(reason)`` → the current phase finishes, the round records a No-Patch
  "stopped" decision (or keeps an accepted one if the gate already ran), and the run ends;
- update ``approve_promotion(Approval)`` → when ``promote_channel`` and ``require_approval``
  are set, the run waits in phase ``awaiting_approval`` until a human approves.

Stops after ``max_rounds``, when ``budget_usd``/``budget_generator_calls`` is reached, after
``stop_after_no_patch`` consecutive No-Patch rounds, when every frontier entry was expanded
(another round would repeat the last one, ``trace.beam.frontier_exhausted``), or on ``stop``.

The round is ``evoharness.trace.round_core.round_steps``, the same generator the in-process
driver (``evoharness.trace.round.run_round``) drives: ``RoundWorkflow`` answers each request
it yields with an activity (``TraceActivities``, referenced by method), the requests of one
batch together.

Versioning: one ``workflow.patched`` branch, ``SECOND_LOOK_HELDOUT`` (the gate's second look
also runs the held-out split, 2026-12-06; histories recorded before it replay without it).
It is checked by replaying the histories in ``tests/workflows/histories/``. Any other change
to the commands this file issues needs a patch id like it, or new histories and an upgrade as
in ``docs/evolution.md`` ("Upgrading workers").
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    # the activities' module (imported for its method references only) imports the rule
    # extractor, lemminflect and numpy: re-importing those inside the sandbox fails
    from evoharness.harness.io import harness_id
    from evoharness.harness.schema import Harness
    from evoharness.tasks.models import Task
    from evoharness.trace.beam import (
        EXHAUSTED_REASON,
        beam_parents,
        best_accepted,
        frontier_exhausted,
    )
    from evoharness.trace.frontier import FrontierEntry
    from evoharness.trace.models import DecisionKind, GateReport, RoundReport
    from evoharness.trace.preservation import PreservationSet
    from evoharness.trace.round_core import (
        Analyze,
        Execute,
        Finalize,
        Gate,
        Request,
        RoundOutcome,
        RunKey,
        Select,
        round_steps,
    )
    from workflows.activities import TraceActivities
    from workflows.params import (
        AnalyzeRequest,
        AnalyzeResult,
        Approval,
        Dispatch,
        EvolutionParams,
        EvolutionResult,
        ExecuteRequest,
        ExecutionRef,
        ExecutionSet,
        FinalizeRequest,
        GateRequest,
        LoadedInputs,
        Progress,
        RegisterRequest,
        RoundInput,
        RoundOutput,
        RunState,
        SelectRequest,
    )


#: ``workflow.patched`` id: the second look adds fresh seeds on the held-out split too
#: (``round_core.round_steps``'s ``second_look_heldout``; issue 29)
SECOND_LOOK_HELDOUT = "second-look-heldout-v1"

RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=6,
    non_retryable_error_types=["BadInput"],
)


def _opts(d: Dispatch, long: bool = False) -> dict[str, Any]:
    o: dict[str, Any] = {
        "start_to_close_timeout": timedelta(seconds=d.activity_timeout_s),
        "retry_policy": RETRY,
    }
    if long:
        o["heartbeat_timeout"] = timedelta(seconds=d.heartbeat_timeout_s)
    return o


@workflow.defn
class RoundWorkflow:
    """One TRACE round (child of ``EvolutionWorkflow``)."""

    def __init__(self) -> None:
        self.phase = "start"
        self.done = 0
        self.total = 0
        self.stop_reason = ""

    @workflow.signal
    def stop(self, reason: str = "stop requested") -> None:
        """Finish the current phase, then end the round."""
        self.stop_reason = reason or "stop requested"

    @workflow.query
    def progress(self) -> dict[str, Any]:
        """``{phase, done, total}`` of this round."""
        return {"phase": self.phase, "done": self.done, "total": self.total}

    async def _report(self, inp: RoundInput) -> None:
        parent = workflow.info().parent
        if parent is None:
            return
        h = workflow.get_external_workflow_handle(parent.workflow_id, run_id=parent.run_id)
        try:
            await h.signal(
                "round_progress", {"phase": self.phase, "done": self.done, "total": self.total}
            )
        except Exception:  # noqa: BLE001 - progress is best effort
            workflow.logger.debug("progress signal not delivered")

    async def _execute(
        self, inp: RoundInput, req: Execute, sem: asyncio.Semaphore
    ) -> list[ExecutionRef]:
        """Answer an ``Execute`` request: its tasks in batches of ``batch_size`` × its seeds,
        one ``execute_batch`` activity each, at most ``concurrency`` in flight."""
        d = inp.dispatch
        tasks = req.tasks
        batches = [tasks[i : i + d.batch_size] for i in range(0, len(tasks), d.batch_size)]

        async def one(batch: list[Task]) -> list[ExecutionRef]:
            async with sem:
                res = await workflow.execute_activity_method(
                    TraceActivities.execute_batch,
                    ExecuteRequest(
                        run_id=inp.run_id,
                        harness=req.harness,
                        tasks=batch,
                        seeds=req.seeds,
                        backends=d.backends,
                        concurrency=1,
                        phase=self.phase,
                        phase_total=self.total,
                    ),
                    **_opts(d, long=True),
                )
                self.done += len(res)
                return list(res)

        parts = await asyncio.gather(*(one(b) for b in batches))
        return [e for part in parts for e in part]

    @workflow.run
    async def run(self, inp: RoundInput) -> RoundOutput:
        """The round of ``evoharness.trace.round_core`` (execute → analyze/propose →
        validate → gate → finalize), every request answered by an activity; the requests of
        one batch run together."""
        p, d = inp.config, inp.dispatch
        sem = asyncio.Semaphore(p.concurrency)
        sets: dict[RunKey, ExecutionSet] = {}

        def joined(keys: list[RunKey]) -> ExecutionSet:
            """One ``ExecutionSet`` for the executions of ``keys`` (one harness on one split:
            the same tasks, the looks' seeds one after another)."""
            first = sets[keys[0]]
            for k in keys[1:]:
                if sets[k].task_ids != first.task_ids or sets[k].harness_id != first.harness_id:
                    raise ValueError(f"cannot join executions of {keys[0]} and {k}")
            return first.model_copy(update={"seeds": [s for k in keys for s in sets[k].seeds]})

        async def execute(req: Execute) -> list[ExecutionRef]:
            refs = await self._execute(inp, req, sem)
            sets[req.key] = ExecutionSet(
                harness_id=req.key.harness_id,
                task_ids=[t.task_id for t in req.tasks],
                seeds=list(req.seeds),
            )
            return refs

        async def select(req: Select) -> PreservationSet:
            return await workflow.execute_activity_method(
                TraceActivities.select_preservation,
                SelectRequest(
                    run_id=inp.run_id,
                    pool=req.pool,
                    executions=sets[req.executions],
                    seeds=req.seeds,
                    config=req.config,
                ),
                **_opts(d),
            )

        async def analyze(req: Analyze) -> AnalyzeResult:
            return await workflow.execute_activity_method(
                TraceActivities.analyze_and_propose,
                AnalyzeRequest(
                    parent=req.parent,
                    tasks=req.tasks,
                    executions=sets[req.executions],
                    config=p,
                    backends=d.backends,
                    beam_index=inp.beam_index,
                    frontier=req.known,
                ),
                **_opts(d),
            )

        async def gate(req: Gate) -> GateReport:
            return await workflow.execute_activity_method(
                TraceActivities.gate_candidate,
                GateRequest(
                    run_id=inp.run_id,
                    parent={s: joined(ks) for s, ks in req.parent.items()},
                    candidate={s: joined(ks) for s, ks in req.candidate.items()},
                    gate=p.gate,
                    look=req.look,
                    objective=req.objective,
                    families=req.families,
                    target_tasks=req.target,
                    heldout_tasks=req.heldout or None,
                    restores_defaults=req.restores_defaults,
                ),
                **_opts(d),
            )

        async def finalize(req: Finalize) -> RoundReport:
            return await workflow.execute_activity_method(
                TraceActivities.finalize_round,
                FinalizeRequest(
                    run_id=inp.run_id,
                    round=inp.round,
                    parent=inp.parent,
                    analysis=req.analysis,
                    gates={c.candidate_id: c.gate for c in req.candidates if c.gate},
                    target_tasks=req.target,
                    executions={f"{h}/{s}": joined(ks) for (h, s), ks in req.executions.items()},
                    spent=[sets[k] for k in req.all_keys],
                    stopped=req.stopped,
                    frontier=inp.frontier,
                    alpha=req.alpha,
                    beam_index=inp.beam_index,
                    preservation=req.preservation,
                ),
                **_opts(d),
            )

        async def answer(req: Request) -> Any:
            if isinstance(req, Execute):
                return await execute(req)
            if isinstance(req, Select):
                return await select(req)
            if isinstance(req, Analyze):
                return await analyze(req)
            if isinstance(req, Gate):
                return await gate(req)
            return await finalize(req)

        steps = round_steps(
            inp.parent,
            inp.splits,
            p.seeds,
            p.gate,
            p.preservation,
            inp.frontier,
            stop=lambda: self.stop_reason,
            # histories recorded before 2026-12-06 took the second look on the target split
            # only (docs/evolution.md, "Upgrading workers")
            second_look_heldout=workflow.patched(SECOND_LOOK_HELDOUT),
        )
        validating = False
        try:
            batch = next(steps)
            while True:
                await self._enter(inp, batch, validating)
                validating = validating or isinstance(batch[0], Analyze)
                batch = steps.send(list(await asyncio.gather(*(answer(r) for r in batch))))
        except StopIteration as end:
            outcome: RoundOutcome = end.value
        self.phase = "done"
        report = outcome.report
        suffix = f"-b{inp.beam_index}" if inp.beam_index else ""
        dec = outcome.decision
        return RoundOutput(
            report=report,
            report_key=f"runs/{inp.run_id}/round-{inp.round:03d}{suffix}.json",
            child=dec.harness if dec else None,
            parent_target_pass_rate=outcome.parent_target_pass_rate,
            child_target_pass_rate=dec.target_pass_rate if dec else 0.0,
            passing=[a.harness for a in outcome.others],
            passing_candidate_ids=[a.candidate_id for a in outcome.others],
            passing_target_pass_rates=[a.target_pass_rate for a in outcome.others],
        )

    async def _enter(self, inp: RoundInput, batch: list[Request], validating: bool) -> None:
        """Set the phase (``execute``, ``select``, ``analyze``, ``validate``, ``gate``,
        ``finalize``) of the next ``batch`` and report it to the parent. A batch of executions
        starts its own count (done 0 of its executions); the phases between keep the last
        count (the gate reports the validation that fed it)."""
        first = batch[0]
        if isinstance(first, Execute):
            phase = "validate" if validating else "execute"
        elif isinstance(first, Select):
            phase = "select"
        elif isinstance(first, Analyze):
            phase = "analyze"
        elif isinstance(first, Gate):
            phase = "gate"
        else:
            phase = "finalize"
        self.phase = phase
        if isinstance(first, Execute):
            self.done = 0
            self.total = sum(len(r.tasks) * len(r.seeds) for r in batch if isinstance(r, Execute))
        await self._report(inp)


@workflow.defn
class EvolutionWorkflow:
    """A whole evolution run; one round per workflow run, ``continue_as_new`` between."""

    def __init__(self) -> None:
        self.params: EvolutionParams | None = None
        self.state = RunState()
        self.phase = "start"
        self._round_progress: dict[str, Any] = {}
        self.stop_reason = ""
        self.approval: Approval | None = None
        self.awaiting_approval = False
        self.child: Any = None
        self.children: list[Any] = []

    # ---------------------------------------------------------------------- handlers

    @workflow.query
    def progress(self) -> Progress:
        """Round, phase, done/total, scores, spend, decisions so far. ``scores`` is empty
        until a round has finished (the starting harness enters the frontier unmeasured)."""
        rp = self._round_progress
        entries = self.state.frontier.entries
        scores = (
            {"best_target_pass_rate": entries[0].target_pass_rate}
            if entries and self.state.round > 0
            else {}
        )
        return Progress(
            run_id=self.params.run_id if self.params else "",
            round=self.state.round + (1 if self.phase == "round" else 0),
            phase=rp.get("phase", self.phase) if self.phase == "round" else self.phase,
            done=int(rp.get("done", 0)),
            total=int(rp.get("total", 0)),
            scores=scores,
            spend_usd=self.state.spend_usd,
            generator_calls=self.state.generator_calls,
            cache_hits=self.state.cache_hits,
            consecutive_no_patch=self.state.consecutive_no_patch,
            stopped=self.stop_reason or self.state.stopped,
            decisions=self.state.decisions,
        )

    @workflow.signal
    def round_progress(self, value: dict[str, Any]) -> None:
        """Progress reported by the running round (internal)."""
        self._round_progress = dict(value)

    @workflow.signal
    async def stop(self, reason: str = "stop requested") -> None:
        """Stop after the current phase (forwarded to the running round)."""
        self.stop_reason = reason or "stop requested"
        for child in self.children or ([self.child] if self.child is not None else []):
            try:
                await child.signal(RoundWorkflow.stop, self.stop_reason)
            except Exception:  # noqa: BLE001 - the round may just have ended
                workflow.logger.info("stop not forwarded: round already finished")

    @workflow.update
    def approve_promotion(self, approval: Approval) -> str:
        """Approve promoting the best harness to ``promote_channel``; returns its id."""
        self.approval = approval
        assert self.state.frontier.entries
        return self.state.frontier.entries[0].harness_id

    @approve_promotion.validator
    def _validate_approval(self, approval: Approval) -> None:
        if not self.awaiting_approval:
            raise ValueError("the run is not waiting for a promotion approval")
        head = self.state.frontier.entries[0].harness_id
        if approval.harness_id is not None and approval.harness_id != head:
            raise ValueError(f"approval names {approval.harness_id}, the candidate is {head}")

    # ------------------------------------------------------------------------- run

    @workflow.run
    async def run(self, params: EvolutionParams) -> EvolutionResult:
        """One round, then ``continue_as_new`` or finish (see the module docstring)."""
        self.params = params
        self.state = params.state.model_copy(deep=True) if params.state else RunState()
        self.state.frontier.beam = params.beam
        self.phase = "load"
        inputs: LoadedInputs = await workflow.execute_activity_method(
            TraceActivities.load_inputs, params, **_opts(params)
        )
        if inputs.mode is not None and self.state.mode is None:
            self.state.mode = inputs.mode  # state only (no command): replay-safe
        if not self.state.frontier.entries:
            self.state.frontier = self.state.frontier.push(
                FrontierEntry(
                    harness_id=harness_id(inputs.harness),
                    document=inputs.harness.to_document(),
                    target_pass_rate=0.0,
                    round=0,
                )
            )
        done_reason = self._finished(params)
        if not done_reason:
            await self._beam_round(params, inputs)
            done_reason = self._finished(params)
        if not done_reason:
            await workflow.wait_condition(workflow.all_handlers_finished)
            workflow.continue_as_new(params.model_copy(update={"state": self.state}))
        self.state.stopped = done_reason
        promoted = await self._promote(params)
        self.phase = "done"
        await workflow.wait_condition(workflow.all_handlers_finished)
        head = self.state.frontier.entries[0]
        return EvolutionResult(
            run_id=params.run_id,
            rounds=self.state.round,
            best_harness_id=head.harness_id,
            best_harness=Harness.model_validate(head.document),
            decisions=self.state.decisions,
            report_keys=self.state.report_keys,
            stopped=done_reason,
            spend_usd=self.state.spend_usd,
            generator_calls=self.state.generator_calls,
            cache_hits=self.state.cache_hits,
            executions=self.state.executions,
            promoted=promoted,
            mode=self.state.mode,
            frontier=list(self.state.frontier.entries),
            registrations=dict(self.state.registered),
        )

    def _finished(self, p: EvolutionParams) -> str:
        s = self.state
        if self.stop_reason or s.stopped:
            return f"stopped: {self.stop_reason or s.stopped}"
        if s.round >= p.max_rounds:
            return f"max rounds ({p.max_rounds}) reached"
        if p.budget_usd is not None and s.spend_usd >= p.budget_usd:
            return f"budget exhausted (spent ${s.spend_usd:.4f} of ${p.budget_usd:.4f})"
        if p.budget_generator_calls is not None and s.generator_calls >= p.budget_generator_calls:
            return f"generator-call budget exhausted ({s.generator_calls} of {p.budget_generator_calls})"
        if s.consecutive_no_patch >= p.stop_after_no_patch:
            return f"{s.consecutive_no_patch} consecutive No-Patch rounds"
        if s.round > 0 and frontier_exhausted(s.frontier.entries, s.expanded, p.beam):
            return EXHAUSTED_REASON
        return ""

    def _account(self, out: RoundOutput) -> None:
        s, rep = self.state, out.report
        s.spend_usd += rep.cost.get("spend_usd", 0.0)
        s.generator_calls += int(rep.cost.get("generator_calls", 0))
        s.cache_hits += int(rep.cost.get("cache_hits", 0))
        s.executions += int(rep.cost.get("executions", 0))

    def _record_decision(
        self, n: int, out: RoundOutput, beam: list[dict[str, Any]] | None = None
    ) -> None:
        rep = out.report
        d: dict[str, Any] = {
            "round": n,
            "kind": rep.decision.kind.value,
            "reason": rep.decision.reason,
            "harness_id": rep.decision.harness_id,
            "parent_harness_id": rep.decision.parent_harness_id,
            "candidate_id": rep.decision.candidate_id,
            "report_key": out.report_key,
            "pass_rates": rep.pass_rates,
        }
        if beam:
            d["beam"] = beam
        if rep.preservation is not None and rep.preservation.notes:
            d["preservation"] = list(rep.preservation.notes)
        self.state.decisions.append(d)

    async def _accept(
        self,
        p: EvolutionParams,
        n: int,
        parent: FrontierEntry,
        child: Harness,
        out: RoundOutput,
        beam_index: int = 0,
    ) -> FrontierEntry:
        """Register a round's accepted child and return its frontier entry."""
        self.state.accepted.append(harness_id(child))
        return await self._admit(
            p,
            n,
            parent,
            child,
            out.child_target_pass_rate,
            out,
            out.report.decision.candidate_id or "",
            beam_index,
        )

    async def _admit(
        self,
        p: EvolutionParams,
        n: int,
        parent: FrontierEntry,
        child: Harness,
        rate: float,
        out: RoundOutput,
        candidate_id: str,
        beam_index: int,
    ) -> FrontierEntry:
        """Register ``child`` (candidate ``candidate_id`` of beam parent ``beam_index``'s
        round ``n``, gated against ``parent``) and return its frontier entry. Every entry is
        registered as it joins the frontier, so a parent is registered before its children;
        the registrar makes a retried registration a no-op."""
        hid = harness_id(child)
        self.phase = "register"
        self.state.registered[hid] = await workflow.execute_activity_method(
            TraceActivities.register_result,
            RegisterRequest(
                run_id=p.run_id,
                round=n,
                harness=child,
                parent_harness_id=parent.harness_id,
                report_key=out.report_key,
                candidate_id=candidate_id,
                beam_index=beam_index,
                backends=p.backends,
            ),
            **_opts(p),
        )
        return FrontierEntry(
            harness_id=hid,
            document=child.to_document(),
            target_pass_rate=rate,
            round=n,
            parent_harness_id=parent.harness_id,
        )

    async def _beam_round(self, p: EvolutionParams, inputs: LoadedInputs) -> None:
        """One round over the beam: every frontier entry (up to B) not yet expanded is a
        parent, each in its own ``RoundWorkflow`` (when all were expanded the run has stopped,
        ``_finished``). The round's decision is the accepted child with the best gate utility (ties:
        the earlier parent); every child that passed a gate enters the frontier, which keeps
        the best B. The rules are ``evoharness.trace.beam``'s (the in-process beam)."""
        s = self.state
        n = s.round + 1
        parents = beam_parents(s.frontier.entries, s.expanded, p.beam)
        self.phase = "round"
        self._round_progress = {"phase": "execute", "done": 0, "total": 0}
        wid = workflow.info().workflow_id
        frontier_ids = [e.harness_id for e in s.frontier.entries]
        self.children = []
        for i, entry in enumerate(parents):
            self.children.append(
                await workflow.start_child_workflow(
                    RoundWorkflow.run,
                    RoundInput(
                        parent=Harness.model_validate(entry.document),
                        splits=inputs.splits,
                        config=p.round_config(n),
                        dispatch=Dispatch.of(p),
                        frontier=frontier_ids,
                        beam_index=i,
                    ),
                    id=f"{wid}-round-{n}" + (f"-b{i}" if i else ""),
                )
            )
        self.child = self.children[0]
        if self.stop_reason:
            for c in self.children:
                await c.signal(RoundWorkflow.stop, self.stop_reason)
        outs: list[RoundOutput] = list(await asyncio.gather(*self.children))
        self.children, self.child = [], None
        s.round = n
        for e in parents:
            if e.harness_id not in s.expanded:
                s.expanded.append(e.harness_id)
        for out in outs:
            s.report_keys.append(out.report_key)
            self._account(out)

        def utility(o: RoundOutput) -> float | None:
            rep = o.report
            if rep.decision.kind is not DecisionKind.accepted or o.child is None:
                return None
            c = next(
                (c for c in rep.candidates if c.candidate_id == rep.decision.candidate_id), None
            )
            return c.gate.utility if c is not None and c.gate is not None else 0.0

        utilities = [utility(o) for o in outs]
        accepted = [i for i, u in enumerate(utilities) if u is not None]
        best = best_accepted(utilities) or 0
        beam = [
            {
                "parent_harness_id": o.report.parent_harness_id,
                "kind": o.report.decision.kind.value,
                "harness_id": o.report.decision.harness_id,
                "report_key": o.report_key,
            }
            for o in outs
        ]
        self._record_decision(n, outs[best], beam if len(outs) > 1 else None)
        entries = [
            e.model_copy(update={"target_pass_rate": o.parent_target_pass_rate})
            for e, o in zip(parents, outs, strict=True)
        ]
        order = [best, *[i for i in accepted if i != best]]
        for i in order:
            o, parent = outs[i], parents[i]
            if o.report.decision.kind is DecisionKind.accepted and o.child is not None:
                entries.append(await self._accept(p, n, parent, o.child, o, i))
            for h, rate, cid in zip(
                o.passing, o.passing_target_pass_rates, o.passing_candidate_ids, strict=True
            ):
                entries.append(await self._admit(p, n, parent, h, rate, o, cid, i))
        if accepted:
            s.consecutive_no_patch = 0
        else:
            s.consecutive_no_patch += 1
        s.frontier = s.frontier.push(*entries)
        self.phase = "between_rounds"

    async def _promote(self, p: EvolutionParams) -> str | None:
        if not p.promote_channel or not self.state.accepted:
            return None
        head = self.state.frontier.entries[0]
        if p.require_approval:
            self.phase = "awaiting_approval"
            self.awaiting_approval = True
            try:
                await workflow.wait_condition(
                    lambda: self.approval is not None or bool(self.stop_reason),
                    timeout=timedelta(seconds=p.approval_timeout_s),
                )
            except TimeoutError:
                self.awaiting_approval = False
                return None
            self.awaiting_approval = False
            if self.approval is None:
                return None
        self.phase = "promote"
        return await workflow.execute_activity_method(  # type: ignore[no-any-return]
            TraceActivities.register_result,
            RegisterRequest(
                run_id=p.run_id,
                round=self.state.round,
                harness=Harness.model_validate(head.document),
                parent_harness_id=head.parent_harness_id,
                channel=p.promote_channel,
            ),
            **_opts(p),
        )
