"""The core's round (``evoharness.trace.round_core``): the requests it makes, in order, and the
children it admits to the beam — read from the finalized report's gates, after Holm's
correction (issue 27 item 1), driven here by a driver whose gates are given."""

from __future__ import annotations

from typing import Any

from evoharness.harness.io import harness_id
from evoharness.harness.schema import Harness
from evoharness.trace.gates import GateConfig
from evoharness.trace.models import Candidate, DecisionKind, GateReport
from evoharness.trace.preservation import PreservationConfig, PreservationSet
from evoharness.trace.round import Analysis, ProposedCandidate, ReportHeader, finalize
from evoharness.trace.round_analyze import Proposals
from evoharness.trace.round_core import (
    Analyze,
    Execute,
    Finalize,
    Gate,
    Look,
    RunKey,
    Select,
    round_steps,
)
from evoharness.trace.round_driver import drive
from tests.unit._trace_world import task

ALPHA = 0.05


def _gate(p: float) -> GateReport:
    return GateReport(
        delta_target=0.2,
        delta_heldout=0.0,
        delta_preservation=0.0,
        regression=0.0,
        delta_cost=0.0,
        utility=0.2 - p,
        p_value=p,
        n_discordant=5,
        epsilon=0.01,
        accepted=p < ALPHA,
        reasons=["all gate conditions hold"] if p < ALPHA else ["p too large"],
    )


def test_holm_takes_back_a_raw_acceptance_and_the_child_stays_out_of_the_beam() -> None:
    parent = Harness()
    children = [Harness(description=f"child {i}") for i in range(3)]
    # raw p: 0.01 and 0.03 pass alpha 0.05; Holm over three: 0.03, 0.06 (≥ alpha), 0.2
    raw = {"r1-c0": 0.01, "r1-c1": 0.03, "r1-c2": 0.2}
    proposed = [
        ProposedCandidate(
            candidate=Candidate(candidate_id=f"r1-c{i}", cluster_id="k", harness_id=harness_id(h)),
            child=h,
        )
        for i, h in enumerate(children)
    ]
    t = task("t0", "two cats", ("c0", "count", {"subject": "cat", "min_count": 2}))
    seen: list[type] = []

    def perform(batch: list[Any]) -> list[Any]:
        out: list[Any] = []
        for r in batch:
            seen.append(type(r))
            if isinstance(r, Execute):
                assert r.seeds == r.key.seeds([0, 1])
                out.append([])
            elif isinstance(r, Select):
                assert r.pool == [] and r.executions.split == "preservation"
                out.append(PreservationSet(task_ids=[]))
            elif isinstance(r, Analyze):
                assert r.executions == RunKey(harness_id(parent), "target", Look.analysis)
                out.append(
                    Proposals(Analysis(stats=[], clusters=[], attributions=[]), proposed, [])
                )
            elif isinstance(r, Gate):
                assert r.look == 1
                out.append(_gate(raw[r.candidate_id]))
            else:
                assert isinstance(r, Finalize)
                out.append(
                    finalize(
                        ReportHeader("run", 1, harness_id(parent), {}, (), r.preservation),
                        r.analysis.analysis,
                        r.candidates,
                        {},
                        r.target,
                        r.alpha,
                    )
                )
        return out

    steps = round_steps(
        parent,
        {"target": [t], "heldout": [], "preservation": []},
        [0, 1],
        GateConfig(alpha=ALPHA, max_looks=1),
        PreservationConfig(),
    )
    outcome = drive(steps, perform)
    # the order of the round: analysis runs, analyze, validation runs, gates, finalize
    assert seen[:4] == [Execute, Execute, Select, Analyze]
    assert seen[-4:] == [Gate, Gate, Gate, Finalize]
    assert outcome.report.decision.kind is DecisionKind.accepted
    assert outcome.decision is not None and outcome.decision.candidate_id == "r1-c0"
    taken_back = next(c for c in outcome.report.candidates if c.candidate_id == "r1-c1")
    assert taken_back.gate is not None and not taken_back.gate.accepted
    assert any("Holm" in r for r in taken_back.gate.reasons)
    assert outcome.others == []  # raw-accepted r1-c1 is not admitted
