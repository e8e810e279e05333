"""The round written once (issue 28): the same round through the in-process driver
(``evoharness.trace.round_driver.run_round``) and through ``RoundWorkflow`` on a real Temporal dev
server (the reference run's round 1) makes the same decision with the same gate reports,
pass rates and preservation set, because both drive ``round_core.round_steps``.

The in-process round runs here with the worker's backends (the same sim world, the same
hostile proposer) over a store of its own, so that its execution cache starts as cold as the
workflow's did (counterfactual probes spend budget only on uncached calls), and with
counterfactual attribution on, as the workflow's ``analyze_and_propose`` runs it: both answer
the core's ``Analyze`` request with ``round.answer_analyze``. The attributions and the
counterfactual record are compared too."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
from temporalio.testing import ActivityEnvironment

from evoharness.harness.io import harness_id
from evoharness.trace.models import RoundReport
from evoharness.trace.round_driver import run_round
from tests.workflows.conftest import Reference, settings_for
from tests.workflows.hostile import hostile_proposer
from workflows.activities import TraceActivities
from workflows.params import Dispatch, LoadedInputs

pytestmark = pytest.mark.slow
ASYNC = pytest.mark.asyncio(loop_scope="session")


def _gates(report: RoundReport) -> dict[str, dict[str, Any]]:
    return {
        c.candidate_id: c.gate.model_dump(mode="json")
        for c in report.candidates
        if c.gate is not None
    }


@ASYNC
async def test_round_one_is_the_same_in_process_and_on_temporal(
    reference: Reference, s3_server: Any
) -> None:
    params = reference.params
    assert params.counterfactual.enabled, "the reference run must attribute counterfactually"
    own = settings_for(s3_server, f"evo-two-{uuid.uuid4().hex[:10]}")
    acts = TraceActivities(own, proposers={"hostile": hostile_proposer()})
    inputs: LoadedInputs = ActivityEnvironment().run(acts.load_inputs, params)
    cfg = params.round_config(1)
    ports = acts.ports(Dispatch.of(params).backends).round_ports()
    local = run_round(
        ports, inputs.harness, inputs.splits, cfg, frontier=[harness_id(inputs.harness)]
    )
    key = reference.result.report_keys[0]
    remote = RoundReport.model_validate_json(reference.store.get(key))

    # the decision, and the gate of every gated candidate (Holm's correction applied)
    assert local.report.decision.kind == remote.decision.kind
    assert local.report.decision.candidate_id == remote.decision.candidate_id
    assert local.report.decision.harness_id == remote.decision.harness_id
    assert _gates(local.report), "round 1 gated no candidate: nothing is compared"
    assert _gates(local.report) == _gates(remote)
    # the pass rates of the report (the parent's preservation pool, the looks' executions)
    assert local.report.pass_rates == remote.pass_rates
    assert local.report.preservation == remote.preservation
    # attribution: the clusters' attributions after counterfactual attribution, and its record
    assert local.report.attributions == remote.attributions
    assert remote.counterfactual is not None, "the workflow ran no counterfactual attribution"
    # it ran (a budget, its additive levers checked); on this harness and proposer no probe
    # passes the checks, so the probes' equality rests on the record's (empty) list
    assert remote.counterfactual.budget_calls > 0
    assert remote.counterfactual.probes or remote.counterfactual.skipped
    assert local.report.counterfactual == remote.counterfactual
    # and the same work: the executions, probes included (which of two equal programs run
    # at once hits the cache is a race, so calls and hits are not compared)
    counts = [k for k in local.report.cost if k.endswith("executions")]
    assert "counterfactual_probe_executions" in counts
    assert {k: local.report.cost[k] for k in counts} == {k: remote.cost[k] for k in counts}
    # the lineage the round hands on: the accepted child, gated against the parent
    assert remote.decision.harness_id is not None
    first = reference.result.decisions[0]
    assert first["harness_id"] == local.report.decision.harness_id
    assert first["parent_harness_id"] == harness_id(inputs.harness)
