"""The preservation set (issue 16): prompts the parent passes, selected on the analysis seeds
and gated on fresh ones, with a per-family regression check where a family has >= 5 tasks."""

from __future__ import annotations

import pytest

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.harness.schema import Harness
from evoharness.tasks.class_cover import prompt_classes
from evoharness.tasks.models import Task
from evoharness.trace.gates import GateConfig, GateEvidence, evaluate_gate, family_regressions
from evoharness.trace.models import CandidateStatus, DecisionKind
from evoharness.trace.preservation import (
    EMPTY_NOTE,
    PreservationConfig,
    passed_map,
    run_notes,
    select_preservation,
)
from evoharness.trace.round import RoundConfig
from evoharness.trace.round_driver import run_round
from tests.unit._trace_world import (
    count_tasks,
    execute,
    layout_ports,
    task,
)

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
    agg = evaluate_gate(parent, cand, cost, cost, GateConfig.before_spending())
    assert agg.accepted and agg.regression == pytest.approx(0.005)
    assert agg.family_regressions == {}
    rep = evaluate_gate(
        parent, cand, cost, cost, GateConfig.before_spending(), evidence=GateEvidence(families=fams)
    )
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


def test_a_round_rejects_a_patch_that_breaks_one_preservation_family() -> None:
    """The layout tool fixes every counting task of the target split but breaks the five
    "fragile" preservation prompts (passed by the parent on every seed): the gate names the
    family, and the preservation set was chosen on the analysis seeds only."""
    target = count_tasks(6)
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

    ports = layout_ports(world)
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


def _pool4() -> list[Task]:
    return [
        _fam(task(t, f"a photo of a {c}", ("o", "object", {"subject": c})), "f")
        for t, c in (("a", "dog"), ("b", "cat"), ("c", "horse"), ("d", "cow"))
    ]


def test_fallback_keeps_tasks_passed_on_half_the_seeds_when_none_pass_on_all() -> None:
    pool = _pool4()
    # a: 3 of 4 seeds, b: 2 of 4, c: 1 of 4, d: never; no task passes on every seed
    passed = {(t, s): s < n for t, n in (("a", 3), ("b", 2), ("c", 1), ("d", 0)) for s in SEEDS}
    fb = select_preservation(pool, passed, SEEDS)
    assert fb.task_ids == ["a", "b"] and fb.fallback and fb.min_pass_rate == 0.5
    assert fb.families == {"f": 2} and fb.classes == 2
    assert len(fb.notes) == 1 and fb.notes[0].startswith("preservation fallback:")
    assert "kept the 2 of 4 passed on at least 50%" in fb.notes[0]
    # the strict rule holds when one task passes on every seed: no fallback, no note
    passed[("d", 0)] = passed[("d", 1)] = passed[("d", 2)] = passed[("d", 3)] = True
    strict = select_preservation(pool, passed, SEEDS)
    assert strict.task_ids == ["d"] and not strict.fallback and strict.notes == []
    # a configured fallback rate
    passed = {(t, s): s < n for t, n in (("a", 3), ("b", 2), ("c", 1), ("d", 0)) for s in SEEDS}
    fb75 = select_preservation(pool, passed, SEEDS, PreservationConfig(fallback_pass_rate=0.75))
    assert fb75.task_ids == ["a"] and fb75.min_pass_rate == 0.75


def test_an_empty_preservation_set_says_so() -> None:
    pool = _pool4()
    passed = {(t, s): s < n for t, n in (("a", 3), ("b", 2)) for s in SEEDS}
    off = select_preservation(pool, passed, SEEDS, PreservationConfig(fallback_pass_rate=None))
    assert off.task_ids == [] and not off.fallback and off.notes == [EMPTY_NOTE]
    none = select_preservation(pool, {}, SEEDS)  # nothing passes even the fallback
    assert none.task_ids == [] and none.notes == [EMPTY_NOTE]
    assert "regression checked on held-out only" in EMPTY_NOTE
    empty_pool = select_preservation([], {}, SEEDS)
    assert empty_pool.notes and "split is empty" in empty_pool.notes[0]

    class R:
        def __init__(self, n: int, pres: object) -> None:
            self.round, self.preservation = n, pres

    fb = select_preservation(pool, passed, SEEDS)
    strict = select_preservation(pool, dict.fromkeys(passed, True), SEEDS)
    assert strict.notes == []
    assert run_notes([R(1, off), R(2, fb), R(3, strict), R(4, None)]) == [
        f"round 1: {EMPTY_NOTE}",
        f"round 2: {fb.notes[0]}",
    ]


def test_the_gate_says_when_preservation_checked_nothing() -> None:
    tgt_p = {(f"t{i}", s, "c"): False for i in range(8) for s in range(4)}
    tgt_c = dict.fromkeys(tgt_p, True)
    cost = {f"t{i}": 1.0 for i in range(8)}
    old = GateConfig.before_spending()
    rep = evaluate_gate(
        {"target": tgt_p}, {"target": tgt_c}, cost, cost, old, evidence=GateEvidence(families={})
    )
    assert rep.accepted and rep.regression == 0.0
    assert len(rep.notes) == 1 and rep.notes[0].startswith("preservation set empty")
    assert "held-out only" in rep.notes[0]
    # preservation verdicts, but no family with min_family_tasks tasks: aggregate only
    fams = {f"p{i}": f"f{i % 2}" for i in range(6)}
    par, can = _verdicts({t: 1 for t in fams}, 4, {})
    small = evaluate_gate(
        {"target": tgt_p, "preservation": par},
        {"target": tgt_c, "preservation": can},
        cost | dict.fromkeys(fams, 1.0),
        cost | dict.fromkeys(fams, 1.0),
        old,
        evidence=GateEvidence(families=fams),
    )
    assert small.notes == [
        "no preservation family has >= 5 tasks (6 tasks in all): regression checked in "
        "aggregate only"
    ]
    # a family large enough: nothing to say
    big = evaluate_gate(
        {"target": tgt_p, "preservation": par},
        {"target": tgt_c, "preservation": can},
        cost | dict.fromkeys(fams, 1.0),
        cost | dict.fromkeys(fams, 1.0),
        old,
        evidence=GateEvidence(families=dict.fromkeys(fams, "one")),
    )
    assert big.notes == [] and big.accepted


def _half_world(h: Harness, t: Task, seed: int):
    """The stand-in world, but the "hf" preservation prompts pass for the parent on half of
    any four consecutive seeds (seed % 4 < 2: analysis seeds 0, 1; validation seeds 4, 5)
    and never once the layout tool is on."""
    e = execute(h, t, seed)
    if t.task_id.startswith("hf"):
        ok = seed % 4 < 2 and e.program.layout is None
        st = EvidenceStatus.passed if ok else EvidenceStatus.failed
        e = e.model_copy(
            update={"evidence": [Evidence(constraint_id="o0", status=st, confidence=0.9)]}
        )
    return e


def _half_round(preservation: PreservationConfig):
    target = count_tasks(6)
    pres = [
        _fam(task(f"hf{i}", f"a photo of a dog {i}", ("o0", "object", {"subject": "dog"})), "hf")
        for i in range(5)
    ]
    ports = layout_ports(_half_world)
    splits = {"target": target, "heldout": [], "preservation": pres}
    cfg = RoundConfig(seeds=SEEDS, scope={"enabled": False}, preservation=preservation)
    return run_round(ports, Harness(), splits, cfg), pres


def test_a_regression_on_a_fallback_task_is_caught() -> None:
    """No preservation prompt passes on every analysis seed; the fallback keeps the five the
    parent passes on half of them, and the layout patch that breaks them is refused."""
    res, pres = _half_round(PreservationConfig())
    sel = res.report.preservation
    assert sel is not None and sel.fallback and sel.task_ids == [t.task_id for t in pres]
    [cand] = [c for c in res.report.candidates if c.gate is not None]
    assert cand.gate is not None and cand.gate.regression == pytest.approx(0.5)
    assert any(r.startswith("regression 0.5000 > epsilon") for r in cand.gate.reasons)
    assert cand.gate.family_regressions["hf"]["regression"] == pytest.approx(0.5)
    assert cand.gate.notes == []
    assert res.report.decision.kind is DecisionKind.no_patch


def test_without_the_fallback_the_empty_set_is_named_not_silent() -> None:
    """The same round with the fallback off (the rule before 2026-12-03): the set is empty,
    the patch passes, and the set, the gate and the run notes say regression was not checked
    on preservation."""
    res, _ = _half_round(PreservationConfig(fallback_pass_rate=None))
    sel = res.report.preservation
    assert sel is not None and sel.task_ids == [] and sel.notes == [EMPTY_NOTE]
    [cand] = [c for c in res.report.candidates if c.gate is not None]
    assert cand.gate is not None and cand.gate.accepted
    assert cand.gate.notes and cand.gate.notes[0].startswith("preservation set empty")
    assert res.report.decision.kind is DecisionKind.accepted
    assert run_notes([res.report]) == [f"round {res.report.round}: {EMPTY_NOTE}"]
