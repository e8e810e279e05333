"""``RoundWorkflow``: one TRACE round as a Temporal child workflow of ``EvolutionWorkflow``
(``workflows.evolution``), one per parent of the round's beam.

The round is ``evoharness.trace.round_core.round_steps``, the same generator the in-process
driver (``evoharness.trace.round_driver.run_round``) drives: this workflow answers each request it
yields with an activity (``TraceActivities``, referenced by method), the requests of one
batch together. Executions fan out as batches of ``batch_size`` tasks × K seeds, at most
``concurrency`` batches in flight. Workflow code is deterministic and does no I/O.

Interaction: query ``progress`` → ``{phase, done, total}``; signal ``stop(reason)`` → the
current phase finishes and the round records a No-Patch "stopped" decision (or keeps what
the gate already decided). Progress is signalled to the parent as ``round_progress``.

Versioning: see ``workflows.evolution`` (replayed against ``tests/workflows/histories/``).
"""

from __future__ import annotations

import asyncio
from typing import Any

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    # the activities' module (imported for its method references only) imports the rule
    # extractor, lemminflect and numpy: re-importing those inside the sandbox fails
    from evoharness.tasks.models import Task
    from evoharness.trace.models import GateReport, RoundReport
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
    from workflows.activity_options import activity_options
    from workflows.params import (
        AnalyzeRequest,
        AnalyzeResult,
        ExecuteRequest,
        ExecutionRef,
        ExecutionSet,
        FinalizeRequest,
        GateRequest,
        RoundInput,
        RoundOutput,
        SelectRequest,
    )
    from workflows.store_keys import report_key


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
                    **activity_options(d, long=True),
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
                if (sets[k].harness_id, sets[k].split) != (first.harness_id, first.split):
                    raise ValueError(f"cannot join executions of {keys[0]} and {k}")
            return first.model_copy(update={"seeds": [s for k in keys for s in sets[k].seeds]})

        async def execute(req: Execute) -> list[ExecutionRef]:
            refs = await self._execute(inp, req, sem)
            sets[req.key] = ExecutionSet(
                harness_id=req.key.harness_id,
                split=req.key.split,
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
                    config=req.config,
                ),
                **activity_options(d),
            )

        async def analyze(req: Analyze) -> AnalyzeResult:
            return await workflow.execute_activity_method(
                TraceActivities.analyze_and_propose,
                AnalyzeRequest(
                    config=p,
                    request=req,
                    executions=[sets[k] for k in AnalyzeRequest.keys(req)],
                    backends=d.backends,
                    beam_index=inp.beam_index,
                    experience=inp.experience,
                ),
                # counterfactual probes run in it: it heartbeats like the executions
                **activity_options(d, long=True),
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
                **activity_options(d),
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
                    executions=[joined(ks) for ks in req.executions.values()],
                    spent=[sets[k] for k in req.all_keys],
                    stopped=req.stopped,
                    frontier=inp.frontier,
                    alpha=req.alpha,
                    beam_index=inp.beam_index,
                    preservation=req.preservation,
                ),
                **activity_options(d),
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
        dec = outcome.decision
        return RoundOutput(
            report=report,
            report_key=report_key(inp.run_id, inp.round, inp.beam_index),
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
