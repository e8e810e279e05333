"""The in-process round's gate (issue 16, finding 4): validation on fresh seeds, the second
look, Holm's correction across candidates, and identical decisions for identical inputs."""

from __future__ import annotations

import threading

from evoharness.harness.io import harness_id
from evoharness.harness.patch import apply_patch
from evoharness.harness.schema import Harness
from evoharness.trace.gate_config import GateConfig
from evoharness.trace.models import CandidateStatus, DecisionKind
from evoharness.trace.round import RoundConfig
from evoharness.trace.round_driver import run_round
from tests.unit._trace_world import (
    LAYOUT_OP,
    count_tasks,
    execute,
    layout_ports,
    task,
)

SEEDS = [0, 1, 2, 3]
#: these tests follow the gate's seeds; counterfactual probes (analysis seeds) are left out
NO_CF = {"enabled": False}
#: these tests follow the looks of the two-look rule before 2026-12-06 (0.0294 per look); the
#: default three-look design runs in test_gate_trace29
POCOCK = GateConfig.before_spending()


class Recorder:
    """An execute port that records which (harness, task, seed) it ran."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int]] = []
        self._lock = threading.Lock()

    def __call__(self, h, t, seed):
        with self._lock:
            self.calls.append((harness_id(h), t.task_id, seed))
        return execute(h, t, seed)


def test_validation_runs_on_fresh_seeds_only() -> None:
    rec = Recorder()
    target = count_tasks(8)
    pres = [task("keep", "a dog", ("o0", "object", {"subject": "dog"}))]
    # the parent fails this one on every seed: it is not in the preservation set
    failing = task("drop", "3 dogs", ("c0", "count", {"subject": "dog", "min_count": 3}))
    splits = {"target": target, "heldout": [], "preservation": [*pres, failing]}
    # "a dog" passes on seeds 0, 1, 3 of the analysis seeds (the stand-in world): kept at 3/4
    cfg = RoundConfig(seeds=SEEDS, preservation={"min_pass_rate": 0.75}, gate=POCOCK)
    res = run_round(layout_ports(rec), Harness(), splits, cfg)
    pid = harness_id(Harness())
    assert res.report.decision.kind is DecisionKind.accepted
    child = res.report.decision.harness_id
    probes = [(h, t, s) for h, t, s in rec.calls if t.startswith("probe/")]
    runs = [(h, t, s) for h, t, s in rec.calls if not t.startswith("probe/")]
    # the analysis seeds run the parent on the target split and the preservation pool (which
    # selects the preservation set), and, besides it, only counterfactual probes (issue 29:
    # the parent's own pairs with one lever changed, common random numbers), never a gate
    cf = res.report.counterfactual
    assert cf is not None and cf.probes
    probed = {harness_id(apply_patch(Harness(), p.patch)) for p in cf.probes if p.patch}
    assert {h for h, _t, s in rec.calls if s in SEEDS} - {pid} <= probed
    assert {(h, t, s) for h, t, s in rec.calls if s in SEEDS and h == pid} == {
        (pid, t.task_id, s) for t in [*target, *pres, failing] for s in SEEDS
    }
    assert res.report.preservation is not None
    assert res.report.preservation.task_ids == ["keep"]
    assert res.report.preservation.pool == 2 and res.report.preservation.selection_seeds == SEEDS
    assert not any(t == "drop" and s not in SEEDS for _h, t, s in runs)
    # the scope probes (the layout tool touches every prompt) ran parent and candidate on the
    # first two fresh validation seeds, never on an analysis seed
    assert probes and {h for h, _t, _s in probes} == {pid, child}
    assert {s for _h, _t, s in probes} == {4, 5}
    # gate validation: parent and candidate share the fresh seeds 4..7 on every split; the
    # candidate ran on analysis seeds only as a counterfactual (additive) probe
    assert {s for h, _t, s in runs if h == child} - set(SEEDS) == {4, 5, 6, 7}
    assert child in probed or all(s not in SEEDS for h, _t, s in runs if h == child)
    assert {(t, s) for h, t, s in runs if h == child and s not in SEEDS} == {
        (t.task_id, s) for t in [*target, *pres] for s in (4, 5, 6, 7)
    }
    # the parent ran the preservation set on the selection (analysis) seeds and the fresh ones
    assert {s for h, t, s in runs if h == pid and t == "keep"} == {0, 1, 2, 3, 4, 5, 6, 7}
    [acc] = [c for c in res.report.candidates if c.status is CandidateStatus.accepted]
    assert acc.gate is not None and acc.gate.seeds == [4, 5, 6, 7] and acc.gate.look == 1
    assert acc.gate.p_holm is not None
    assert sorted({e.seed for e in res.validation[(child, "target")]}) == [4, 5, 6, 7]
    assert res.report.residual_clusters == []


def test_second_look_adds_k_fresh_seeds_and_tests_again() -> None:
    rec = Recorder()
    target = count_tasks(3)  # three improved tasks: p = 1/8, the second-look zone
    splits = {"target": target, "heldout": [], "preservation": []}
    res = run_round(
        layout_ports(rec),
        Harness(),
        splits,
        RoundConfig(seeds=SEEDS, counterfactual=NO_CF, gate=POCOCK),
    )
    [cand] = [c for c in res.report.candidates if c.gate is not None]
    assert cand.gate is not None
    assert cand.gate.look == 2 and cand.gate.seeds == list(range(4, 12))
    assert cand.gate.p_value == 1 / 8 and not cand.gate.accepted
    assert res.report.decision.kind is DecisionKind.no_patch
    child = cand.harness_id
    runs = [(h, t, s) for h, t, s in rec.calls if not t.startswith("probe/")]
    # the candidate's gate runs: look 1 on 4..7, the second look on 8..11; its scope probes
    # ran on fresh seeds only (4, 5), never on the analysis seeds 0..3
    assert {s for h, _t, s in runs if h == child} == set(range(4, 12))
    assert {(h, s) for h, t, s in rec.calls if t.startswith("probe/")} == {
        (h, s) for h in (harness_id(Harness()), child) for s in (4, 5)
    }
    assert {s for h, _t, s in rec.calls if h == child} == set(range(4, 12))
    one_look = RoundConfig(
        seeds=SEEDS, gate=GateConfig.before_spending(max_looks=1), counterfactual=NO_CF
    )
    rec1 = Recorder()
    r1 = run_round(layout_ports(rec1), Harness(), splits, one_look)
    [c1] = [c for c in r1.report.candidates if c.gate is not None]
    assert c1.gate is not None and c1.gate.look == 1
    assert max(s for _h, _t, s in rec1.calls) == 7


def test_two_candidates_with_the_same_plans_are_gated_once() -> None:
    """Two patches that compile to the same plans on every target task are indistinguishable
    on this round's evidence: the second is a ``duplicate`` and only the first is gated, so
    Holm's correction does not count one effect twice (it would turn p = 1/64 into 2/64 >=
    0.0294 and reject a real improvement; Holm itself: test_gate_stats.py)."""

    def two(cluster, attr, h, n):
        named = {**LAYOUT_OP, "value": {"kind": "layout_planner", "name": "layout2"}}
        return [
            {"responsibility": "tools", "ops": [LAYOUT_OP]},
            {"responsibility": "tools", "ops": [named]},
        ]

    splits = {"target": count_tasks(6), "heldout": [], "preservation": []}
    res = run_round(
        layout_ports(Recorder(), two),
        Harness(),
        splits,
        RoundConfig(seeds=SEEDS, counterfactual=NO_CF, gate=POCOCK),
    )
    gated = [c for c in res.report.candidates if c.gate is not None]
    assert len(gated) == 1
    [c] = gated
    assert c.gate is not None and c.gate.p_value == 1 / 64 and c.gate.p_holm == 1 / 64
    assert c.gate.accepted and c.status is CandidateStatus.accepted
    dup = [c for c in res.report.candidates if (c.reject_reason or "").startswith("duplicate")]
    assert len(dup) == 1 and "same plans on every target task" in (dup[0].reject_reason or "")


def test_a_candidate_held_back_by_holm_earns_the_second_look() -> None:
    """At look 1 a candidate significant alone (p = 0.014) but not after Holm's correction
    over four (0.055) gets the second look, as one whose own p is in the zone does; one
    far out (adjusted ≥ 0.2) or failing another condition does not; none with one look."""
    from evoharness.trace.gate_config import GateConfig
    from evoharness.trace.models import GateReport
    from evoharness.trace.round_core import held_back

    def report(p: float, accepted: bool, look: int = 1) -> GateReport:
        return GateReport(
            delta_target=0.1,
            delta_heldout=0.0,
            delta_preservation=0.0,
            regression=0.0,
            delta_cost=0.0,
            utility=0.1,
            p_value=p,
            n_discordant=4,
            epsilon=0.01,
            accepted=accepted,
            look=look,
        )

    gates = {
        "near": report(0.0137, True),
        "loses": report(0.02, False),  # another condition fails: no more seeds for it
        "a": report(0.5, False),
        "b": report(0.9, False),
    }
    assert held_back(gates, GateConfig()) == {"near"}
    far = {**gates, "near": report(0.09, True)}  # 3 × 0.09 = 0.27 >= extend_below
    assert held_back(far, GateConfig()) == set()
    assert held_back(gates, GateConfig(max_looks=1)) == set()
    assert held_back({**gates, "near": report(0.0137, True, look=2)}, GateConfig()) == set()
