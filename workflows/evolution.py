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

Versioning: changes to this file are guarded with ``workflow.patched`` (see ``PATCH_*``) and
checked by replaying the histories in ``tests/workflows/histories/``.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any

from temporalio import workflow
from temporalio.common import RetryPolicy

with workflow.unsafe.imports_passed_through():
    # the rule extractor (preservation selection reads prompts with it) imports lemminflect,
    # which imports numpy: re-importing those inside the sandbox fails (os.putenv)
    import evoharness.runtime.extract  # noqa: F401
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
    from evoharness.trace.gates import validation_seeds
    from evoharness.trace.models import DecisionKind, GateReport, RoundReport
    from evoharness.trace.preservation import PreservationSet, passed_map, select_preservation
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
    )

#: ``workflow.patched`` ids. Gate candidates in parallel (was: one after another).
PATCH_PARALLEL_GATES = "parallel-gates-v1"
#: Validate on fresh seeds (K..2K-1, a second look on 2K..3K-1), gate cost clusters for their
#: saving, Holm's correction in finalize (was: the analysis seeds served as the gate's baseline).
PATCH_FRESH_SEEDS = "fresh-validation-seeds-v1"
#: A real beam: every unexpanded frontier entry (up to B) is a parent of the round, each in
#: its own ``RoundWorkflow``; the round's decision is the best accepted child (was: the head
#: only).
PATCH_BEAM = "beam-v1"
#: The preservation set: the parent also runs the preservation split on the analysis seeds,
#: and only the tasks it passes there are validated and gated (on the fresh seeds), with a
#: per-family regression check (was: the whole preservation split).
PATCH_PRESERVATION = "preservation-set-v1"
#: The preservation fallback: when no pool task passes on every selection seed, the tasks
#: passed on ``PreservationConfig.fallback_pass_rate`` of them are kept (was: an empty set,
#: and the gate's regression check checked nothing). Changes which tasks are validated.
PATCH_PRESERVATION_FALLBACK = "preservation-fallback-v1"
#: Register every child that joins the frontier (was: only each round's decision), so a
#: beam parent is registered before its children; registrations carry their candidate and
#: beam branch (unique names).
PATCH_REGISTER_FRONTIER = "register-frontier-v1"
#: Stop when every frontier entry among the best B was expanded: the next round would expand
#: the head again on the same seeds and repeat its decisions (was: the repeat ran, and its
#: No-Patch counted towards ``stop_after_no_patch``).
PATCH_NO_REPEAT = "no-repeat-round-v1"

RETRY = RetryPolicy(
    initial_interval=timedelta(seconds=1),
    backoff_coefficient=2.0,
    maximum_interval=timedelta(seconds=30),
    maximum_attempts=6,
    non_retryable_error_types=["BadInput"],
)
SPLITS = ("target", "heldout", "preservation")


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
        self,
        inp: RoundInput,
        harness: Harness,
        tasks: list[Task],
        sem: asyncio.Semaphore,
        seeds: list[int] | None = None,
    ) -> list[ExecutionRef]:
        d = inp.dispatch
        run_seeds = list(inp.config.seeds) if seeds is None else seeds
        batches = [tasks[i : i + d.batch_size] for i in range(0, len(tasks), d.batch_size)]

        async def one(batch: list[Task]) -> list[ExecutionRef]:
            async with sem:
                res = await workflow.execute_activity(
                    "execute_batch",
                    ExecuteRequest(
                        run_id=inp.run_id,
                        harness=harness,
                        tasks=batch,
                        seeds=run_seeds,
                        backends=d.backends,
                        concurrency=1,
                        phase=self.phase,
                        phase_total=self.total,
                    ),
                    result_type=list[ExecutionRef],
                    **_opts(d, long=True),
                )
                self.done += len(res)
                return list(res)

        parts = await asyncio.gather(*(one(b) for b in batches))
        return [e for part in parts for e in part]

    @workflow.run
    async def run(self, inp: RoundInput) -> RoundOutput:
        """Execute → analyze/propose → validate → gate → finalize."""
        p, d = inp.config, inp.dispatch
        pid = harness_id(inp.parent)
        sem = asyncio.Semaphore(p.concurrency)
        k = len(p.seeds)
        target = inp.splits["target"]
        execs: dict[str, list[ExecutionRef]] = {}

        def by_ref(hid: str, split: str) -> ExecutionSet:
            return ExecutionSet(
                harness_id=hid, task_ids=[t.task_id for t in inp.splits[split]], seeds=p.seeds
            )

        pres: PreservationSet | None = None
        pool = inp.splits["preservation"]
        if workflow.patched(PATCH_PRESERVATION):
            # selection on the analysis seeds; gating (below) on the fresh seeds only
            self.phase, self.done, self.total = "execute", 0, (len(target) + len(pool)) * k
            await self._report(inp)
            execs[f"{pid}/target"], execs[f"{pid}/preservation"] = await asyncio.gather(
                self._execute(inp, inp.parent, target, sem),
                self._execute(inp, inp.parent, pool, sem),
            )
            pcfg = p.preservation
            if not workflow.patched(PATCH_PRESERVATION_FALLBACK):
                pcfg = pcfg.model_copy(update={"fallback_pass_rate": None})
            pres = select_preservation(
                pool, passed_map(execs[f"{pid}/preservation"]), p.seeds, pcfg
            )
            keep = set(pres.task_ids)
            inp = inp.model_copy(
                update={
                    "splits": {
                        **inp.splits,
                        "preservation": [t for t in pool if t.task_id in keep],
                    }
                }
            )
        else:
            self.phase, self.done, self.total = "execute", 0, len(target) * k
            await self._report(inp)
            execs[f"{pid}/target"] = await self._execute(inp, inp.parent, target, sem)

        self.phase = "analyze"
        await self._report(inp)
        analysis: AnalyzeResult = await workflow.execute_activity(
            "analyze_and_propose",
            AnalyzeRequest(
                parent=inp.parent,
                tasks=target,
                executions=by_ref(pid, "target"),
                config=p,
                backends=d.backends,
                beam_index=inp.beam_index,
                frontier=inp.frontier,
            ),
            result_type=AnalyzeResult,
            **_opts(d),
        )
        valid = [pc for pc in analysis.proposed if pc.child is not None]
        gates: dict[str, GateReport] = {}
        fresh = False
        if valid and not self.stop_reason and workflow.patched(PATCH_FRESH_SEEDS):
            fresh = True
            gates = await self._validate_fresh(inp, analysis, valid, execs, sem)
        elif valid and not self.stop_reason:
            self.phase = "validate"
            n_all = sum(len(inp.splits[s]) for s in SPLITS)
            self.done = 0
            self.total = k * (len(inp.splits["heldout"]) + len(inp.splits["preservation"]))
            self.total += k * n_all * len(valid)
            await self._report(inp)

            async def run_split(h: Harness, hid: str, split: str) -> None:
                key = f"{hid}/{split}"
                if key not in execs:
                    execs[key] = []  # reserve: no duplicate fan-out for a shared harness
                    execs[key] = await self._execute(inp, h, inp.splits[split], sem)

            jobs = [run_split(inp.parent, pid, s) for s in ("heldout", "preservation")]
            for pc in valid:
                assert pc.child is not None
                for s in SPLITS:
                    jobs.append(run_split(pc.child, pc.candidate.harness_id, s))
            await asyncio.gather(*jobs)

            self.phase = "gate"
            await self._report(inp)

            async def gate(pc: Any) -> tuple[str, GateReport]:
                cid = pc.candidate.candidate_id
                hid = pc.candidate.harness_id
                rep = await workflow.execute_activity(
                    "gate_candidate",
                    GateRequest(
                        run_id=inp.run_id,
                        parent={s: by_ref(pid, s) for s in SPLITS},
                        candidate={s: by_ref(hid, s) for s in SPLITS},
                        gate=p.gate,
                    ),
                    result_type=GateReport,
                    **_opts(inp.dispatch),
                )
                return cid, rep

            if workflow.patched(PATCH_PARALLEL_GATES):
                gates = dict(await asyncio.gather(*(gate(pc) for pc in valid)))
            else:
                for pc in valid:
                    cid, rep = await gate(pc)
                    gates[cid] = rep

        self.phase = "finalize"
        await self._report(inp)
        executions: dict[str, list[ExecutionRef] | ExecutionSet] = {
            k: (self._set(inp, k) if fresh else by_ref(*k.split("/", 1))) for k in execs
        }
        if pres is not None:
            # the parent ran the whole preservation pool on the analysis seeds to select the
            # set: every one of those executions is counted (cost, calls) and the pool's pass
            # rate is reported, not the selected set's (1.0 by construction)
            executions[f"{pid}/preservation"] = ExecutionSet(
                harness_id=pid, task_ids=[t.task_id for t in pool], seeds=p.seeds
            )
        report: RoundReport = await workflow.execute_activity(
            "finalize_round",
            FinalizeRequest(
                run_id=inp.run_id,
                round=inp.round,
                parent=inp.parent,
                analysis=analysis,
                gates=gates,
                target_tasks=target,
                executions=executions,
                seeds=p.seeds,
                stopped=self.stop_reason if not gates else "",
                frontier=inp.frontier,
                alpha=p.gate.alpha if fresh else None,
                beam_index=inp.beam_index,
                preservation=pres,
            ),
            result_type=RoundReport,
            **_opts(d),
        )
        child = None
        if report.decision.kind is DecisionKind.accepted:
            child = next(
                pc.child for pc in valid if pc.candidate.harness_id == report.decision.harness_id
            )
        # the beam's other children: those whose gate passed after Holm's correction, i.e.
        # the finalized report's gates (issue 27: the raw gates let a candidate Holm had
        # taken back into the beam and the promoted harness's lineage)
        final = {c.candidate_id: c.gate for c in report.candidates}
        passing = [
            pc
            for pc in valid
            if (g := final.get(pc.candidate.candidate_id)) is not None
            and g.accepted
            and pc.candidate.harness_id != report.decision.harness_id
        ]
        self.phase = "done"
        suffix = f"-b{inp.beam_index}" if inp.beam_index else ""
        return RoundOutput(
            report=report,
            report_key=f"runs/{inp.run_id}/round-{inp.round:03d}{suffix}.json",
            child=child,
            parent_target_pass_rate=_rate(execs.get(f"{pid}/target", [])),
            child_target_pass_rate=_rate(
                (fresh and execs.get(f"{report.decision.harness_id}/target@v1"))
                or execs.get(f"{report.decision.harness_id}/target", [])
            ),
            passing=[pc.child for pc in passing if pc.child is not None],
            passing_candidate_ids=[pc.candidate.candidate_id for pc in passing if pc.child],
            passing_target_pass_rates=[
                _rate(
                    (fresh and execs.get(f"{pc.candidate.harness_id}/target@v1"))
                    or execs.get(f"{pc.candidate.harness_id}/target", [])
                )
                for pc in passing
            ],
        )

    @staticmethod
    def _set(inp: RoundInput, key: str) -> ExecutionSet:
        """The ``ExecutionSet`` of an execution key ``<harness>/<split>[@v1|@v2]``: the
        analysis seeds without a tag, else the validation look's fresh seeds."""
        hid, rest = key.split("/", 1)
        split, _, tag = rest.partition("@")
        p = inp.config
        seeds = {"v1": validation_seeds(p.seeds, 1), "v2": validation_seeds(p.seeds, 2)}.get(
            tag, list(p.seeds)
        )
        return ExecutionSet(
            harness_id=hid, task_ids=[t.task_id for t in inp.splits[split]], seeds=seeds
        )

    async def _validate_fresh(
        self,
        inp: RoundInput,
        analysis: AnalyzeResult,
        valid: list[Any],
        execs: dict[str, list[ExecutionRef]],
        sem: asyncio.Semaphore,
    ) -> dict[str, GateReport]:
        """Validation on fresh seeds (``evoharness.trace.gates``): parent and candidates on
        every split with seeds K..2K-1 (keys ``<harness>/<split>@v1``), the gate; candidates
        whose p fell in the second-look zone run the target split once more with 2K..3K-1
        (``@v2``) beside the parent and are gated again at look 2 over both blocks."""
        p = inp.config
        pid = harness_id(inp.parent)
        v1 = validation_seeds(p.seeds, 1)
        self.phase = "validate"
        self.done = 0
        n_all = sum(len(inp.splits[s]) for s in SPLITS)
        self.total = len(v1) * n_all * (1 + len(valid))
        await self._report(inp)

        async def run_split(h: Harness, hid: str, split: str, tag: str) -> None:
            key = f"{hid}/{split}@{tag}"
            if key not in execs:
                execs[key] = []  # reserve: no duplicate fan-out for a shared harness
                seeds = self._set(inp, key).seeds
                execs[key] = await self._execute(inp, h, inp.splits[split], sem, seeds)

        jobs = [run_split(inp.parent, pid, s, "v1") for s in SPLITS]
        for pc in valid:
            jobs += [run_split(pc.child, pc.candidate.harness_id, s, "v1") for s in SPLITS]
        await asyncio.gather(*jobs)
        self.phase = "gate"
        await self._report(inp)
        kinds = {c.cluster_id: c.kind for c in analysis.analysis.clusters}
        families = {t.task_id: t.task_family for t in inp.splits["preservation"]}

        def sets(hid: str, look: int) -> dict[str, list[ExecutionRef] | ExecutionSet]:
            out: dict[str, list[ExecutionRef] | ExecutionSet] = {
                s: self._set(inp, f"{hid}/{s}@v1") for s in SPLITS
            }
            if look == 2:
                t = self._set(inp, f"{hid}/target@v1")
                out["target"] = t.model_copy(
                    update={"seeds": t.seeds + self._set(inp, f"{hid}/target@v2").seeds}
                )
            return out

        async def gate(pc: Any, look: int) -> tuple[str, GateReport]:
            hid = pc.candidate.harness_id
            rep = await workflow.execute_activity(
                "gate_candidate",
                GateRequest(
                    run_id=inp.run_id,
                    parent=sets(pid, look),
                    candidate=sets(hid, look),
                    gate=p.gate,
                    look=look,
                    objective="cost" if kinds.get(pc.candidate.cluster_id) == "cost" else "quality",
                    families=families,
                ),
                result_type=GateReport,
                **_opts(inp.dispatch),
            )
            return pc.candidate.candidate_id, rep

        gates = dict(await asyncio.gather(*(gate(pc, 1) for pc in valid)))
        second = [pc for pc in valid if gates[pc.candidate.candidate_id].second_look]
        if second:
            # the second look is a phase of its own, counted against its own total (it used
            # to keep look 1's total and count on past it: 280/176)
            self.phase, self.done = "validate", 0
            v2 = validation_seeds(p.seeds, 2)
            self.total = len(v2) * len(inp.splits["target"]) * (1 + len(second))
            await self._report(inp)
            jobs = [run_split(inp.parent, pid, "target", "v2")]
            jobs += [run_split(pc.child, pc.candidate.harness_id, "target", "v2") for pc in second]
            await asyncio.gather(*jobs)
            self.phase = "gate"
            await self._report(inp)
            gates.update(dict(await asyncio.gather(*(gate(pc, 2) for pc in second))))
        return gates


def _rate(executions: list[ExecutionRef]) -> float:
    n = sum(e.n_verdicts for e in executions)
    k = sum(e.n_pass for e in executions)
    return k / n if n else 0.0


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
        inputs: LoadedInputs = await workflow.execute_activity(
            "load_inputs", params, result_type=LoadedInputs, **_opts(params)
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
            await self._round(params, inputs)
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
        if (
            s.round > 0
            and frontier_exhausted(s.frontier.entries, s.expanded, p.beam)
            and workflow.patched(PATCH_NO_REPEAT)
        ):
            return EXHAUSTED_REASON
        return ""

    async def _round(self, p: EvolutionParams, inputs: LoadedInputs) -> None:
        if workflow.patched(PATCH_BEAM):
            await self._beam_round(p, inputs)
            return
        s = self.state
        n = s.round + 1
        head = s.frontier.entries[0]
        parent = Harness.model_validate(head.document)
        self.phase = "round"
        self._round_progress = {"phase": "execute", "done": 0, "total": 0}
        self.child = await workflow.start_child_workflow(
            RoundWorkflow.run,
            RoundInput(
                parent=parent,
                splits=inputs.splits,
                config=p.round_config(n),
                dispatch=Dispatch.of(p),
                frontier=[e.harness_id for e in s.frontier.entries],
            ),
            id=f"{workflow.info().workflow_id}-round-{n}",
        )
        if self.stop_reason:
            await self.child.signal(RoundWorkflow.stop, self.stop_reason)
        out: RoundOutput = await self.child
        self.child = None
        rep = out.report
        s.round = n
        s.report_keys.append(out.report_key)
        self._account(out)
        self._record_decision(n, out)
        entries = [head.model_copy(update={"target_pass_rate": out.parent_target_pass_rate})]
        if rep.decision.kind is DecisionKind.accepted and out.child is not None:
            s.consecutive_no_patch = 0
            entries.append(await self._accept(p, n, head, out.child, out))
        else:
            s.consecutive_no_patch += 1
        s.frontier = s.frontier.push(*entries)
        self.phase = "between_rounds"

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
        self.state.registered[hid] = await workflow.execute_activity(
            "register_result",
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
            result_type=str,
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
        parent, each in its own ``RoundWorkflow``; when all were expanded, the head is
        expanded again (only in histories recorded before ``PATCH_NO_REPEAT``: since then
        the run stops before such a round). The round's decision is the accepted child with the best gate utility (ties:
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
        register_all = workflow.patched(PATCH_REGISTER_FRONTIER)
        for i in order:
            o, parent = outs[i], parents[i]
            if o.report.decision.kind is DecisionKind.accepted and o.child is not None:
                entries.append(await self._accept(p, n, parent, o.child, o, i))
            if register_all:
                for h, rate, cid in zip(
                    o.passing, o.passing_target_pass_rates, o.passing_candidate_ids, strict=True
                ):
                    entries.append(await self._admit(p, n, parent, h, rate, o, cid, i))
                continue
            for h, rate in zip(o.passing, o.passing_target_pass_rates, strict=True):
                entries.append(
                    FrontierEntry(
                        harness_id=harness_id(h),
                        document=h.to_document(),
                        target_pass_rate=rate,
                        round=n,
                        parent_harness_id=parent.harness_id,
                    )
                )
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
        return await workflow.execute_activity(  # type: ignore[no-any-return]
            "register_result",
            RegisterRequest(
                run_id=p.run_id,
                round=self.state.round,
                harness=Harness.model_validate(head.document),
                parent_harness_id=head.parent_harness_id,
                channel=p.promote_channel,
            ),
            result_type=str,
            **_opts(p),
        )
