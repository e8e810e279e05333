"""The durable driver of a non-TRACE search protocol (issue 31), run by ``EvolutionWorkflow``
when ``EvolutionParams.protocol`` is not ``trace``.

Each step of ``evoharness.search.protocols`` (step 0: the start; then one iteration) is one
``search_step`` activity (``workflows.search_activities``) over the serialisable
``SearchState``; the workflow keeps the state between steps, so a run whose worker dies
resumes from its last completed step (Temporal replays the completed activities' results)
and a step cut short is retried whole, its completed executions the cache's hits. The
splits are TRACE's: feedback = the target split, selection = held-out + preservation (the
tasks TRACE's gate reads); the test split stays untouched. Every harness that joins the
frontier is registered as it joins, with its parent and patch (the same registrar and
lineage as TRACE's), and the run's result is an ``EvolutionResult`` like a TRACE run's,
one decision per step.

The run's spend budgets (``budget_usd``, ``budget_generator_calls``,
``budget_generator_seconds``, ``budget_wall_s``; ``EvolutionParams.search_config``) are
checked by each step before it runs anything (``search_step``, with the seconds since the
run started by ``workflow.now()``): a step that finds one reached ends the search, and
``RunState.stopped_by`` is the ``stopped_by`` the step decided. With a budget of 0 the
search stops before step 0 and the result is the starting harness, unmeasured (the
frontier ``EvolutionWorkflow`` starts every run with, TRACE's as well).

Workflow code: deterministic, no I/O; the rules are the core's (``search_step``,
``SearchState.joined``/``candidate``).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from temporalio import workflow

with workflow.unsafe.imports_passed_through():
    from evoharness.harness.schema import Harness
    from evoharness.search.protocols import SearchState, new_search
    from evoharness.tasks.models import Task
    from evoharness.trace.frontier import FrontierEntry
    from workflows.activities import TraceActivities
    from workflows.activity_options import activity_options
    from workflows.params import EvolutionParams, LoadedInputs, RegisterRequest
    from workflows.search_activities import SearchActivities, SearchStepRequest, SearchStepResult
    from workflows.store_keys import search_report_key

if TYPE_CHECKING:
    from workflows.evolution import EvolutionWorkflow


def search_splits(splits: dict[str, list[Task]]) -> tuple[list[Task], list[Task]]:
    """The feedback and selection tasks of a run's splits (``LoadedInputs.splits``; module
    docstring)."""
    return list(splits["target"]), [*splits.get("heldout", []), *splits.get("preservation", [])]


async def drive_search(wf: EvolutionWorkflow, p: EvolutionParams, inputs: LoadedInputs) -> str:
    """Run ``p.protocol`` to its end (or the ``stop`` signal, or ``stop_graceful`` after the
    current step) on ``wf``'s state: frontier,
    decisions, registrations and spend as a TRACE run keeps them (``RunState``; ``round``
    counts completed steps after the start). Returns why the search stopped."""
    feedback, selection = search_splits(inputs.splits)
    state: SearchState = new_search(p.search_config(), feedback, selection)
    s = wf.state
    key = search_report_key(p.run_id)
    while not state.done and not wf.stop_reason and not wf.graceful_reason:
        it = state.next_iteration
        wf.phase = "search"
        wall = 0.0
        if p.budget_wall_s is not None and s.started_at is not None:  # workflow time
            wall = max(0.0, workflow.now().timestamp() - s.started_at)
        res: SearchStepResult = await workflow.execute_activity_method(
            SearchActivities.search_step,
            SearchStepRequest(
                run_id=p.run_id,
                state=state,
                start=inputs.harness,
                feedback=feedback,
                selection=selection,
                backends=p.backends,
                proposer=p.backends.proposer,
                wall_s=wall,
            ),
            **activity_options(p),
        )
        before = s.frontier.entries[0].harness_id if s.frontier.entries else ""
        state = res.state
        s.spend_usd = res.cost.get("spend_usd", 0.0)
        s.generator_calls = int(res.cost.get("generator_calls", 0))
        s.generator_seconds = float(res.cost.get("generator_seconds", 0.0))
        s.cache_hits = int(res.cost.get("cache_hits", 0))
        s.executions = int(res.cost.get("executions", 0))
        if not state.run.points or state.run.points[-1].iteration != it:
            break  # the step found a budget spent and ended the search without running
        for e in state.joined(it):
            if e.harness_id not in s.registered:
                await _register(wf, p, state, e, it, key)
        assert state.frontier is not None
        s.frontier = state.frontier.model_copy(deep=True)
        s.round = it
        if it > 0:
            _record(wf, state, it, s.frontier.entries[0], before, key)
    if wf.stop_reason:
        s.stopped_by = "stop"
        return f"stopped: {wf.stop_reason}"
    if wf.graceful_reason and not state.done:
        s.stopped_by = "graceful_stop"
        return f"stopped after step {s.round}: {wf.graceful_reason}"
    s.stopped_by = state.run.stopped_by
    return state.run.stopped


async def _register(
    wf: EvolutionWorkflow,
    p: EvolutionParams,
    state: SearchState,
    e: FrontierEntry,
    it: int,
    key: str,
) -> None:
    """Register frontier entry ``e`` (joined in step ``it``) with its parent and patch."""
    found = state.candidate(e.harness_id)
    idx, rec = found if found is not None else (0, None)
    why = rec.rationale if rec is not None else ""
    wf.phase = "register"
    wf.state.registered[e.harness_id] = await workflow.execute_activity_method(
        TraceActivities.register_result,
        RegisterRequest(
            run_id=p.run_id,
            round=it,
            harness=Harness.model_validate(e.document),
            parent_harness_id=e.parent_harness_id,
            # no round report: the patch is given here, the search report named in the note
            report_key="",
            candidate_id=f"i{it}-c{idx}",
            patch=rec.patch if rec is not None else None,
            note=f"{p.protocol} search of run {p.run_id}, iteration {it}: {why or 'a patch'} "
            f"(search report {key})",
            # the generator and verifier it was found with (the proposer is the search's)
            backends=p.backends.model_copy(update={"proposer": "rule"}),
        ),
        **activity_options(p),
    )


def _record(
    wf: EvolutionWorkflow,
    state: SearchState,
    it: int,
    head: FrontierEntry,
    before: str,
    key: str,
) -> None:
    """One decision per step: ``accepted`` when the frontier's head is a harness that joined
    in this step, else ``no_patch``; ``pass_rates`` holds its selection score."""
    new = head.harness_id != before and head.round == it and bool(head.parent_harness_id)
    if new:  # what ``promote_channel`` may promote: a harness that led the frontier
        wf.state.accepted.append(head.harness_id)
    found = state.candidate(head.harness_id) if new else None
    pt = state.run.points[-1]
    wf.state.decisions.append(
        {
            "round": it,
            "kind": "accepted" if new else "no_patch",
            "reason": (
                f"{state.run.config.protocol} step {it}: best selection score "
                f"{pt.best_score:.3f} after {pt.generator_calls:.0f} generator calls"
                + ("" if new else " (the best harness did not change)")
            ),
            "harness_id": head.harness_id if new else None,
            "parent_harness_id": head.parent_harness_id,
            "candidate_id": f"i{it}-c{found[0]}" if found else None,
            "report_key": key,
            "pass_rates": {"selection": pt.best_score},
        }
    )
