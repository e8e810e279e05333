"""The preservation set (issue 16): prompts the parent passes, selected on the analysis seeds
and gated on fresh ones, with a per-family regression check where a family has >= 5 tasks."""

from __future__ import annotations

import pytest

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.harness.schema import Harness
from evoharness.tasks.models import Task
from evoharness.tasks.splits import prompt_classes
from evoharness.trace.gates import GateConfig, evaluate_gate, family_regressions
from evoharness.trace.models import Attribution, CandidateStatus, DecisionKind
from evoharness.trace.preservation import (
    PreservationConfig,
    passed_map,
    select_preservation,
)
from evoharness.trace.round import RoundConfig, RoundPorts, run_round
from tests.unit._trace_world import compile_program, execute, task

SEEDS = [0, 1, 2, 3]


def _fam(t: Task, family: str) -> Task:
    return t.model_copy(update={"task_family": family})


def test_selection_keeps_tasks_passed_on_enough_selection_seeds() -> None:
    pool = [
        _fam(task("a", "a photo of a dog", ("o", "object", {"subject": "dog"})), "f1"),
        _fam(task("b", "two cats and a bicycle", ("o", "object", {"subject": "cat"})), "f2"),
        _fam(task("c", "a photo of a horse", ("o", "object", {"subject": "horse"})), "f2"),
    ]
    passed = {("a", s): True for s in SEEDS}
    passed.update({("b", s): s != 2 for s in SEEDS})  # 3 of 4
    passed.update({("c", 0): True})  # 1 of 4; the other seeds missing = not passed
    strict = select_preservation(pool, passed, SEEDS)
    assert strict.task_ids == ["a"] and strict.families == {"f1": 1}
    assert strict.pool == 3 and strict.pool_families == {"f1": 1, "f2": 2}
    assert strict.classes == 1 and strict.pool_classes == 4  # dog | cat, bicycle, horse
    loose = select_preservation(pool, passed, SEEDS, PreservationConfig(min_pass_rate=0.75))
    assert loose.task_ids == ["a", "b"] and loose.classes == 3
    off = select_preservation(pool, passed, SEEDS, PreservationConfig(enabled=False))
    assert off.task_ids == ["a", "b", "c"]
    with pytest.raises(ValueError, match="no selection seeds"):
        select_preservation(pool, passed, [])


def test_prompt_classes_come_from_the_prompt_not_the_labels() -> None:
    assert prompt_classes("a red car and two dogs, no bicycle") == {"car", "dog"}
    assert prompt_classes("an abstract painting") == set()


def test_passed_map_reads_executions_and_refs() -> None:
    h = Harness()
    t = task("x", "a dog", ("o0", "object", {"subject": "dog"}))
    es = [execute(h, t, s) for s in (1, 2)]  # the stand-in world: odd seeds pass
    assert passed_map(es) == {("x", 1): True, ("x", 2): False}

    class Ref:
        def __init__(self, seed: int, n_pass: int) -> None:
            self.task_id, self.seed, self.n_pass, self.n_verdicts = "y", seed, n_pass, 2

    assert passed_map([Ref(0, 2), Ref(1, 1)]) == {("y", 0): True, ("y", 1): False}


def _verdicts(tasks: dict[str, int], seeds: int, lose: dict[str, int]):
    """Parent passes every verdict; the candidate loses ``lose[task]`` of its seeds."""
    par, can = {}, {}
    for t in tasks:
        for s in range(seeds):
            par[(t, s, "c")] = True
            can[(t, s, "c")] = s >= lose.get(t, 0)
    return par, can


def test_a_family_regression_is_caught_where_the_aggregate_is_within_epsilon() -> None:
    # 5 tasks of family "small" lose 2 of their 20 verdicts (0.10 > 1/20); 95 other tasks are
    # unchanged: aggregate regression 2/400 = 0.005 <= epsilon 0.01
    fams = {f"s{i}": "small" for i in range(5)} | {f"b{i}": "big" for i in range(95)}
    par, can = _verdicts({t: 1 for t in fams}, 4, {"s0": 2})
    tgt_p = {(f"t{i}", s, "c"): False for i in range(8) for s in range(4)}
    tgt_c = dict.fromkeys(tgt_p, True)
    cost = {t: 1.0 for t in [*fams, *(f"t{i}" for i in range(8))]}
    parent = {"target": tgt_p, "preservation": par}
    cand = {"target": tgt_c, "preservation": can}
    agg = evaluate_gate(parent, cand, cost, cost, GateConfig())
    assert agg.accepted and agg.regression == pytest.approx(0.005)
    assert agg.family_regressions == {}
    rep = evaluate_gate(parent, cand, cost, cost, GateConfig(), families=fams)
    assert not rep.accepted
    assert rep.family_regressions["small"]["regression"] == pytest.approx(0.1)
    assert rep.family_regressions["small"]["epsilon"] == pytest.approx(0.05)
    assert rep.family_regressions["big"]["regression"] == 0.0
    assert any(r.startswith("regression in family small 0.1000 > epsilon") for r in rep.reasons)
    # a family below min_family_tasks counts in the aggregate only
    small4 = {t: f for t, f in fams.items() if t != "s4"}
    par4 = {k: v for k, v in par.items() if k[0] != "s4"}
    can4 = {k: v for k, v in can.items() if k[0] != "s4"}
    fr = family_regressions(par4, can4, small4, 5, 0.01)
    assert set(fr) == {"big"}
    fr3 = family_regressions(par4, can4, small4, 4, 0.01)
    assert fr3["small"]["tasks"] == 4 and fr3["small"]["verdicts"] == 16


def _localize(clusters, h):
    return [
        Attribution(cluster_id=c.cluster_id, scores={"tools": 1.0}, chosen="tools")
        for c in clusters
    ]


def _layout(cluster, attr, h, n):
    return [
        {
            "responsibility": "tools",
            "ops": [
                {
                    "op": "add",
                    "path": "/tools/tools/-",
                    "value": {"kind": "layout_planner", "name": "layout"},
                }
            ],
        }
    ]


def test_a_round_rejects_a_patch_that_breaks_one_preservation_family() -> None:
    """The layout tool fixes every counting task of the target split but breaks the five
    "fragile" preservation prompts (passed by the parent on every seed): the gate names the
    family, and the preservation set was chosen on the analysis seeds only."""
    target = [
        task(f"cnt{i}", f"{i + 2} cats", ("c0", "count", {"subject": "cat", "min_count": i + 2}))
        for i in range(6)
    ]
    pres = [
        _fam(task(f"fr{i}", f"a photo of a dog {i}", ("o0", "object", {"subject": "dog"})), "fr")
        for i in range(5)
    ] + [
        _fam(task(f"st{i}", f"a photo of a cow {i}", ("o0", "object", {"subject": "cow"})), "st")
        for i in range(5)
    ]

    def world(h: Harness, t: Task, seed: int):
        e = execute(h, t, seed)
        if t.task_id.startswith(("fr", "st")):
            broken = t.task_id.startswith("fr") and e.program.layout is not None
            st = EvidenceStatus.failed if broken else EvidenceStatus.passed
            e = e.model_copy(
                update={"evidence": [Evidence(constraint_id="o0", status=st, confidence=0.9)]}
            )
        return e

    ports = RoundPorts(
        execute=world, compile_program=compile_program, localize=_localize, propose=_layout
    )
    splits = {"target": target, "heldout": [], "preservation": pres}
    cfg = RoundConfig(seeds=SEEDS, scope={"enabled": False})
    res = run_round(ports, Harness(), splits, cfg)
    assert res.report.preservation is not None
    assert res.report.preservation.task_ids == [t.task_id for t in pres]
    assert res.report.preservation.families == {"fr": 5, "st": 5}
    [cand] = [c for c in res.report.candidates if c.gate is not None]
    assert cand.gate is not None and cand.status is CandidateStatus.validated
    assert cand.gate.family_regressions["fr"]["regression"] == 1.0
    assert cand.gate.family_regressions["st"]["regression"] == 0.0
    assert any("regression in family fr" in r for r in cand.gate.reasons)
    assert res.report.decision.kind is DecisionKind.no_patch
