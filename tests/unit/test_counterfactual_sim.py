"""Counterfactual attribution on the real embedded world (issue 29), on the shipped fault case
``memory-guideline-fires-everywhere``: a memory guideline that fires on every prompt and
crowds the scene is found by taking it out, and the clusters the symptom table sends to
Tools and No-Patch are attributed to Memory, with the removal proposed first. Slow (minutes
on two shared cores): the parent runs 8 target and 6 preservation tasks on 4 seeds."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.faults.case import CaseError, load_case
from bench.faults.run import ports_for
from evoharness.harness.io import harness_id
from evoharness.trace.round import RoundConfig, analyze, execute_all
from evoharness.trace.round_analyze import attribute_counterfactually

CASE = Path(__file__).parents[2] / "bench/faults/cases/memory-guideline-fires-everywhere.yaml"


@pytest.mark.slow
def test_a_guideline_that_fires_everywhere_is_found_by_removing_it(tmp_path: Path) -> None:
    try:
        lc = load_case(CASE)
    except CaseError as exc:  # the GeneVal metadata lives in the shared data folder
        pytest.skip(f"fault case unavailable: {exc}")
    ports, _ = ports_for(lc.case.profile, str(tmp_path))
    rp = ports.round_ports()
    cfg = RoundConfig(seeds=[0, 1, 2, 3], concurrency=2)
    pid = harness_id(lc.faulted)
    execs = {
        (pid, s): execute_all(rp.execute, lc.faulted, lc.splits[s], cfg.seeds, 2)
        for s in ("target", "preservation")
    }
    an = analyze(execs[(pid, "target")], lc.splits["target"], lc.faulted, rp.localize, cfg.seeds)
    assert an.clusters and all(a.chosen != "memory" for a in an.attributions)
    cf = attribute_counterfactually(an, lc.faulted, lc.splits, execs, pid, rp, cfg)
    rec = cf.record
    assert rec.causes, rec
    cause = next(p for p in rec.probes if p.cause)
    assert cause.responsibility == "memory" and cause.path.startswith("/memory"), cause.evidence
    assert cause.recovered - cause.expected_recovered >= 2
    assert cause.broken <= cause.expected_broken + 1
    assert 0 < rec.spent_calls <= rec.budget_calls
    assert {a.chosen for a in cf.attributions} == {"memory"}
    for a in cf.attributions:
        assert a.reasons[0].startswith("counterfactual: ")
        assert cf.candidates[a.cluster_id][0].responsibility.value == "memory"
