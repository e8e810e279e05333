"""Budgets and stop conditions of the durable run (issue 33) on a real Temporal dev server
and SeaweedFS: a generator-call budget stops the run after the round that crosses it and the
result says which budget; a graceful stop lets the running round finish (gate, decision,
registration) and then ends the run, as ``evoharness evolve status`` shows."""

from __future__ import annotations

import asyncio
import json
import uuid
from pathlib import Path
from typing import Any

import pytest

from tests.workflows.conftest import Reference, make_params, run_in_process, settings_for
from tests.workflows.splits import small_split
from workflows.evolution import EvolutionWorkflow
from workflows.params import Progress

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_a_generator_call_budget_stops_after_the_round_that_crosses_it(
    temporal_env: Any, s3_server: Any, shared_dir: Path
) -> None:
    """A fresh bucket (every call is made, none served from a cache) and a small split on 2
    seeds (cheap): round 1 makes far more than one generator call, so a budget of 1 lets it
    finish and stops the run before round 2 of the 3 allowed, whatever round 1 decided (the
    budget is checked before the frontier's exhaustion); that decision is kept."""
    settings = settings_for(s3_server, f"evo-bud-{uuid.uuid4().hex[:10]}")
    params = make_params(
        f"bud-{uuid.uuid4().hex[:6]}",
        small_split(shared_dir, n_target=4, n_synthetic=0),
        seeds=[0, 1],
        max_rounds=3,
        budget_generator_calls=1,
    )
    _, res = await run_in_process(temporal_env.client, settings, params)
    assert res.rounds == 1 and len(res.decisions) == 1
    assert res.generator_calls > 1 and res.generator_seconds > 0
    assert res.stopped_by == "budget_generator_calls"
    assert res.stopped == f"generator-call budget exhausted ({res.generator_calls} of 1)"
    if res.decisions[0]["kind"] == "accepted":  # the accepted child is the result, registered
        assert res.best_harness_id == res.decisions[0]["harness_id"]
        assert res.best_harness_id in res.registrations


async def test_a_graceful_stop_finishes_its_round_and_registers_the_result(
    reference: Reference, temporal_env: Any, split: Any
) -> None:
    """Signalled once round 1 runs (the reference's bucket: every execution is a cache hit),
    the stop lets round 1 finish with the reference's decision and registration, and ends
    the run before round 2 of 3; ``evolve status`` reports it completed, stopped by
    ``graceful_stop``."""
    from workflows.status import run_status

    params = make_params(f"grace-{uuid.uuid4().hex[:6]}", split, max_rounds=3)
    seen: dict[str, Any] = {}

    async def stop_in_round(handle: Any) -> None:
        for _ in range(2400):
            p = await handle.query(EvolutionWorkflow.progress, result_type=Progress)
            if p.round == 1 and p.phase not in ("start", "load"):
                break
            await asyncio.sleep(0.05)
        await handle.signal(EvolutionWorkflow.stop_graceful, "enough for today")
        seen["progress"] = await handle.query(EvolutionWorkflow.progress, result_type=Progress)

    _, res = await run_in_process(
        temporal_env.client, reference.settings, params, on_handle=stop_in_round
    )
    assert seen["progress"].stopped_by == "graceful_stop"  # said while the round still runs
    assert res.rounds == 1
    assert res.stopped_by == "graceful_stop"
    assert res.stopped == "stopped after round 1: enough for today"
    # the round was not cut short: the reference's round-1 decision, its report, registered
    first = reference.result.decisions[0]
    [d] = res.decisions
    assert (d["kind"], d["harness_id"]) == (first["kind"], first["harness_id"])
    assert json.loads(reference.store.get(d["report_key"]))["decision"]["kind"] == d["kind"]
    assert res.best_harness_id == first["harness_id"]
    assert res.best_harness_id in res.registrations
    assert reference.store.exists(f"runs/{res.run_id}/registered/{res.best_harness_id}.json")
    status = await run_status(temporal_env.client, res.run_id)
    assert status["status"] == "completed"
    assert status["result"]["stopped_by"] == "graceful_stop"


async def test_a_search_protocol_stops_on_the_runs_budgets(
    temporal_env: Any, s3_server: Any, shared_dir: Path
) -> None:
    """A ``random`` search (issue 31) through the workflow, on a fresh bucket and one seed: a
    generator-call budget of 0 runs nothing (it is zero, not "no limit") and the result is
    the starting harness; a money budget below step 0's cost at the worker's prices lets
    step 0 (the start on the selection split: held-out + preservation) run whole and stops
    before step 1. Each result's ``stopped_by`` names its budget."""
    from evoharness.harness.io import harness_id, load_dir
    from evoharness.search.protocols import SearchSettings
    from tests.workflows.conftest import ROOT

    settings = settings_for(s3_server, f"evo-sbud-{uuid.uuid4().hex[:10]}")
    split = small_split(shared_dir, n_target=2, n_synthetic=0)
    search = {"protocol": "random", "search": SearchSettings(iterations=2), "seeds": [0]}

    def params(name: str, **budget: Any) -> Any:
        return make_params(f"{name}-{uuid.uuid4().hex[:6]}", split, **search, **budget)

    _, zero = await run_in_process(
        temporal_env.client, settings, params("sbud0", budget_generator_calls=0)
    )
    assert zero.stopped_by == "budget_generator_calls"
    assert zero.stopped == "generator-call budget exhausted (0 of 0)"
    assert (zero.generator_calls, zero.executions, zero.rounds) == (0, 0, 0)
    assert zero.decisions == [] and zero.registrations == {}
    assert zero.best_harness_id == harness_id(load_dir(ROOT / "harnesses" / "baseline"))

    _, usd = await run_in_process(temporal_env.client, settings, params("sbudusd", budget_usd=1e-9))
    selection = len(split["heldout"]) + len(split["preservation"])
    assert usd.stopped_by == "budget_usd" and usd.stopped.startswith("budget exhausted (spent $")
    assert usd.generator_calls == usd.executions == selection  # step 0 only, one seed
    assert usd.spend_usd > 1e-9 and usd.rounds == 0 and usd.decisions == []
