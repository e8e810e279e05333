"""Durable TRACE evolution on Temporal: ``EvolutionWorkflow``, one round per workflow run,
then ``continue_as_new``. Each round runs one ``RoundWorkflow`` child per parent of the beam
(``workflows.round_workflow``).

Workflow code is deterministic and does no I/O: every side effect is an activity
(``workflows.activities``). Executions are content-addressed, so an activity retried after
a worker crash repeats no completed generator call.

Interaction:

- query ``progress`` → ``Progress`` (round, phase, done/total, scores, spend);
- signal ``stop(reason)`` → the current phase finishes, the round records a No-Patch
  "stopped" decision (or keeps an accepted one if the gate already ran), and the run ends;
- signal ``stop_graceful(reason)`` → the current round finishes (gate, decision and
  registration), then the run ends as when a budget stops it;
- update ``approve_promotion(Approval)`` → when ``promote_channel`` and ``require_approval``
  are set, the run waits in phase ``awaiting_approval`` until a human approves.

Stops after the round that reaches ``max_rounds`` or a budget (``trace.run_budget.crossed``,
the rules the in-process beam uses too), when every frontier entry was expanded (another
round would repeat the last one, ``trace.beam.frontier_exhausted``), or on ``stop`` /
``stop_graceful``; the result's ``stopped_by`` names which.

Versioning: no ``workflow.patched`` branch is live (the last, ``second-look-heldout-v1``, was
retired on 2026-12-06 with an upgrade: runs started before it are drained or terminated,
docs/evolution.md, "Upgrading workers"). The workflows are checked by replaying the histories
in ``tests/workflows/histories/``, recorded by this version. Any change to the commands this
file or ``round_workflow`` issues needs a ``workflow.patched`` id, or new histories and the
same upgrade.
"""

from __future__ import annotations

import asyncio
from datetime import timedelta
from typing import Any, Literal

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    # the activities' module (imported for its method references only) imports the rule
    # extractor, lemminflect and numpy: re-importing those inside the sandbox fails
    from evoharness.harness.io import harness_id
    from evoharness.harness.schema import Harness
    from evoharness.trace.beam import (
        EXHAUSTED_REASON,
        beam_parents,
        best_accepted,
        frontier_exhausted,
    )
    from evoharness.trace.frontier import FrontierEntry
    from evoharness.trace.models import DecisionKind
    from evoharness.trace.run_budget import RunSpend, StopKind, crossed
    from workflows.activities import TraceActivities
    from workflows.activity_options import activity_options
    from workflows.params import (
        Approval,
        Dispatch,
        EvolutionParams,
        EvolutionResult,
        LoadedInputs,
        Progress,
        RegisterRequest,
        RoundInput,
        RoundOutput,
        RunState,
    )
    from workflows.round_workflow import RoundWorkflow
    from workflows.search_driver import drive_search
    from workflows.store_keys import search_report_key
    from workflows.tracking_activities import track_round


@workflow.defn
class EvolutionWorkflow:
    """A whole evolution run; one round per workflow run, ``continue_as_new`` between."""

    def __init__(self) -> None:
        self.params: EvolutionParams | None = None
        self.state = RunState()
        self.phase = "start"
        self._round_progress: dict[str, Any] = {}
        self.stop_reason = ""
        self.graceful_reason = ""
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
            stopped=self.stop_reason or self.graceful_reason or self.state.stopped,
            stopped_by=self.state.stopped_by
            or ("stop" if self.stop_reason else "graceful_stop" if self.graceful_reason else ""),
            generator_seconds=self.state.generator_seconds,
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

    @workflow.signal
    def stop_graceful(self, reason: str = "graceful stop requested") -> None:
        """Stop after the current round (not forwarded: the round finishes, gate and all)."""
        self.graceful_reason = reason or "graceful stop requested"

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
        if self.state.started_at is None:  # state only (no command): replay-safe
            self.state.started_at = workflow.now().timestamp()
        self.phase = "load"
        inputs: LoadedInputs = await workflow.execute_activity_method(
            TraceActivities.load_inputs, params, **activity_options(params)
        )
        if inputs.mode is not None and self.state.mode is None:
            self.state.mode = inputs.mode  # state only (no command): replay-safe
        if not self.state.frontier.entries:  # the starting harness, unmeasured
            self.state.frontier = self.state.frontier.push(
                FrontierEntry(
                    harness_id=harness_id(inputs.harness),
                    document=inputs.harness.to_document(),
                    target_pass_rate=0.0,
                    round=0,
                )
            )
        if params.protocol != "trace":  # issue 31: a search protocol, as resumable steps
            return await self._finish(params, await drive_search(self, params, inputs))
        done_reason = self._finished(params)
        if not done_reason:
            await self._beam_round(params, inputs)
            done_reason = self._finished(params)
            await track_round(params, inputs, self.state, done_reason)  # no-op untracked
        if not done_reason:
            await workflow.wait_condition(workflow.all_handlers_finished)
            done_reason = self._finished(params)  # a stop signalled meanwhile
        if not done_reason:
            workflow.continue_as_new(params.model_copy(update={"state": self.state}))
        return await self._finish(params, done_reason)

    async def _finish(self, params: EvolutionParams, done_reason: str) -> EvolutionResult:
        """Promote (when asked) and return the run's result."""
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
            stopped_by=self.state.stopped_by,
            generator_seconds=self.state.generator_seconds,
            mode=self.state.mode,
            frontier=list(self.state.frontier.entries),
            registrations=dict(self.state.registered),
            tracking=self.state.tracking,
            search_report_key=""
            if params.protocol == "trace"
            else search_report_key(params.run_id),
        )

    def _finished(self, p: EvolutionParams) -> str:
        """Why the run stops before another round ("" when it goes on); sets
        ``state.stopped_by``. Budgets are ``trace.run_budget.crossed``'s."""
        s = self.state
        s.stopped_by, reason = self._stop(p)
        return reason

    def _stop(self, p: EvolutionParams) -> tuple[StopKind | Literal[""], str]:
        s = self.state
        if self.stop_reason or s.stopped:
            return "stop", f"stopped: {self.stop_reason or s.stopped}"
        if self.graceful_reason:
            return "graceful_stop", f"stopped after round {s.round}: {self.graceful_reason}"
        wall = 0.0
        if p.budget_wall_s is not None:  # workflow time, read only when a wall budget is set
            now = workflow.now().timestamp()
            wall = now - (s.started_at if s.started_at is not None else now)
        spend = RunSpend(
            rounds=s.round,
            usd=s.spend_usd,
            generator_calls=s.generator_calls,
            generator_seconds=s.generator_seconds,
            wall_s=wall,
            no_improvement=s.consecutive_no_patch,
        )
        hit = crossed(p.run_budget(), spend)
        if hit is not None:
            return hit.by, hit.reason
        if s.round > 0 and frontier_exhausted(s.frontier.entries, s.expanded, p.beam):
            return "frontier_exhausted", EXHAUSTED_REASON
        return "", ""

    def _account(self, out: RoundOutput) -> None:
        s, rep = self.state, out.report
        s.spend_usd += rep.cost.get("spend_usd", 0.0)
        s.generator_calls += int(rep.cost.get("generator_calls", 0))
        s.generator_seconds += float(rep.cost.get("generator_seconds", 0.0))
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
            **activity_options(p),
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
                        experience=list(s.expanded),
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
            **activity_options(p),
        )
