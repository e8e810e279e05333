"""The gate side of issue 29: held-out first attempts as test units, the second look on the
held-out split too, Holm's correction over testable candidates only (Tarone 1990), and a cost
candidate that adds generator calls is no saving."""

from __future__ import annotations

import pytest

from evoharness.harness.patch import apply_patch
from evoharness.harness.schema import Harness
from evoharness.trace.gate_stats import min_attainable_p, tarone_testable
from evoharness.trace.gates import (
    GateConfig,
    GateEvidence,
    GateInputError,
    apply_holm,
    evaluate_gate,
    rank_key,
)
from evoharness.trace.round import RoundConfig, gate_candidate
from evoharness.trace.round_driver import run_round
from tests.unit._trace_world import LAYOUT_OP, count_tasks, execute, layout_ports
from tests.unit.test_round_gates import Recorder

CFG = GateConfig(n_bootstrap=0)


def _v(prefix: str, rows: list[list[bool]]) -> dict:
    return {(f"{prefix}{i}", s, "c0"): v for i, row in enumerate(rows) for s, v in enumerate(row)}


# --------------------------------------------------------------- held-out first attempts

#: final verdicts: repair masks the fault everywhere (parent and child pass finally), except
#: one target task where the child's final verdict improves
FINAL_T_PARENT = _v("t", [[True] * 4 for _ in range(4)] + [[False, True, True, True]])
FINAL_T_CHILD = _v("t", [[True] * 4 for _ in range(5)])
FINAL_H = _v("h", [[True] * 4 for _ in range(4)])
FIRST_T_PARENT = _v("t", [[False, True, False, True] for _ in range(5)])
FIRST_T_CHILD = _v("t", [[True] * 4 for _ in range(5)])
FIRST_H_PARENT = _v("h", [[False, True, False, True] for _ in range(4)])
FIRST_H_CHILD = _v("h", [[True] * 4 for _ in range(4)])


def _masked(first: tuple | None):
    return evaluate_gate(
        {"target": FINAL_T_PARENT, "heldout": FINAL_H},
        {"target": FINAL_T_CHILD, "heldout": FINAL_H},
        {},
        {},
        CFG,
        evidence=GateEvidence(first_attempt=first),
    )


def test_held_out_first_attempts_are_test_units_too() -> None:
    # target first attempts only: 5 changed units, p = 2^-5 = 0.031 >= 0.0294
    target_only = _masked((FIRST_T_PARENT, FIRST_T_CHILD))
    assert target_only.n_tasks_changed == 5 and target_only.p_value == pytest.approx(1 / 32)
    assert not target_only.accepted and target_only.delta_first_attempt_heldout is None
    # the cause-fix restores held-out first attempts as well: 9 changed units, p = 2^-9
    both = _masked(({**FIRST_T_PARENT, **FIRST_H_PARENT}, {**FIRST_T_CHILD, **FIRST_H_CHILD}))
    assert both.accepted, both.reasons
    assert both.n_tasks_changed == 9 and both.p_value == pytest.approx(1 / 512)
    assert both.delta_first_attempt == 0.5 and both.delta_first_attempt_heldout == 0.5


def test_a_fix_restoring_held_out_first_attempts_ranks_above_one_that_does_not() -> None:
    cause = _masked(({**FIRST_T_PARENT, **FIRST_H_PARENT}, {**FIRST_T_CHILD, **FIRST_H_CHILD}))
    local = _masked(({**FIRST_T_PARENT, **FIRST_H_PARENT}, {**FIRST_T_CHILD, **FIRST_H_PARENT}))
    assert local.delta_first_attempt_heldout == 0.0
    assert cause.utility == local.utility and rank_key(cause) > rank_key(local)


def test_first_attempts_of_a_task_in_no_test_split_are_refused() -> None:
    stray = {("x0", 0, "c0"): False}
    with pytest.raises(GateInputError, match="neither the target nor the held-out"):
        _masked(({**FIRST_T_PARENT, **stray}, {**FIRST_T_CHILD, **stray}))


def test_the_round_gate_reads_held_out_first_attempts() -> None:
    tasks = count_tasks(6)
    child = apply_patch(
        Harness(),
        {"responsibility": "tools", "ops": [LAYOUT_OP], "rationale": "", "expected_effect": ""},
    )
    split = {"target": tasks[:3], "heldout": tasks[3:]}

    def run(h: Harness) -> dict:
        return {s: [execute(h, t, seed) for t in ts for seed in (4, 5)] for s, ts in split.items()}

    par, can = run(Harness()), run(child)
    with_h = gate_candidate(par, can, CFG, tasks={t.task_id: t for t in tasks})
    assert with_h.delta_first_attempt_heldout is not None
    assert with_h.delta_first_attempt_heldout == with_h.delta_heldout  # one attempt each
    target_only = gate_candidate(par, can, CFG, tasks={t.task_id: t for t in tasks[:3]})
    assert target_only.delta_first_attempt_heldout is None
    # single-attempt executions: one generator call per request on both sides
    assert with_h.calls_per_request == {"parent": 1.0, "candidate": 1.0}
    # a candidate that only restores defaults is priced against its own cost (the default's)
    assert with_h.delta_cost_charged is None
    restored = gate_candidate(par, can, CFG, restores_defaults=True)
    assert restored.delta_cost_charged == pytest.approx(min(0.0, restored.delta_cost))


# ------------------------------------------------------------------ Tarone's modified Holm


def test_min_attainable_p() -> None:
    assert min_attainable_p(0) == 1.0 and min_attainable_p(5) == 1 / 32
    assert min_attainable_p(20, "monte_carlo", 2000) == pytest.approx(1 / 2001)
    with pytest.raises(ValueError, match="n_nonzero"):
        min_attainable_p(-1)


def test_tarone_counts_only_the_candidates_that_can_reach_alpha() -> None:
    # two candidates can reach 0.05/2, one (m = 3 changed tasks: 1/8) never can
    k, testable = tarone_testable({"a": 1 / 256, "b": 1 / 64, "c": 1 / 8}, 0.05)
    assert (k, testable) == (2, ["a", "b"])
    # every candidate can reach alpha / 3: plain Bonferroni's count
    assert tarone_testable({"a": 1e-4, "b": 1e-4, "c": 1e-4}, 0.05) == (3, ["a", "b", "c"])
    assert tarone_testable({"a": 0.5}, 0.05) == (1, [])


def _report(p: float, p_min: float | None):
    base = _masked(({**FIRST_T_PARENT, **FIRST_H_PARENT}, {**FIRST_T_CHILD, **FIRST_H_CHILD}))
    assert base.accepted
    return base.model_copy(update={"p_value": p, "p_min": p_min})


def test_an_untestable_candidate_does_not_inflate_holm() -> None:
    # "a" (9 changed units, p = 0.02) beside "b", whose test changed one task (p_min = 0.5)
    reps = {"a": _report(0.02, 1 / 512), "b": _report(0.5, 0.5)}
    out = apply_holm(reps, 0.0294)
    assert out["a"].accepted and out["a"].p_holm == pytest.approx(0.02)
    assert out["b"].p_holm == 1.0
    # plain Holm (p_min unknown: every candidate counted) doubles a's p past alpha
    plain = apply_holm({k: r.model_copy(update={"p_min": None}) for k, r in reps.items()}, 0.0294)
    assert not plain["a"].accepted and plain["a"].p_holm == pytest.approx(0.04)


def test_an_untestable_candidate_is_not_accepted() -> None:
    reps = {f"c{i}": _report(1 / 512, 1 / 512) for i in range(3)}
    reps["u"] = _report(0.02, 0.02)  # reaches alpha alone, not alpha / K* = 0.0294 / 3
    out = apply_holm(reps, 0.0294)
    assert all(out[f"c{i}"].accepted for i in range(3))
    assert not out["u"].accepted
    assert any("not testable" in r for r in out["u"].reasons), out["u"].reasons


def test_the_gate_records_its_smallest_attainable_p() -> None:
    rep = _masked((FIRST_T_PARENT, FIRST_T_CHILD))
    assert rep.p_min == pytest.approx(1 / 32)


# ------------------------------------------------------- a cost saving adds no generator calls

PARENT_COST = {f"t{i}": 8.0 for i in range(8)}
CHEAPER = {f"t{i}": 6.0 for i in range(8)}
SAME = _v("t", [[True] * 4 for _ in range(8)])


def _cost_gate(parent_calls: float, child_calls: float):
    return evaluate_gate(
        {"target": SAME},
        {"target": SAME},
        PARENT_COST,
        CHEAPER,
        CFG,
        objective="cost",
        evidence=GateEvidence(
            calls=(
                {t: parent_calls for t in PARENT_COST},
                {t: child_calls for t in PARENT_COST},
            )
        ),
    )


def test_a_cost_saving_that_adds_generator_calls_is_refused() -> None:
    fewer_seconds_more_calls = _cost_gate(5.0, 6.0)
    assert not fewer_seconds_more_calls.accepted
    assert any("must not add generator calls" in r for r in fewer_seconds_more_calls.reasons)
    assert fewer_seconds_more_calls.calls_per_request == {"parent": 1.25, "candidate": 1.5}
    assert _cost_gate(5.0, 5.0).accepted  # the same calls, fewer seconds: a saving


def test_a_quality_candidate_may_add_generator_calls() -> None:
    rep = evaluate_gate(
        {"target": _v("t", [[False] * 4 for _ in range(8)])},
        {"target": SAME},
        PARENT_COST,
        PARENT_COST,
        CFG,
        evidence=GateEvidence(calls=({t: 4.0 for t in PARENT_COST}, {t: 8.0 for t in PARENT_COST})),
    )
    assert rep.accepted and rep.calls_per_request == {"parent": 1.0, "candidate": 2.0}


# ------------------------------------------------------------- the second look, held-out too


def test_second_look_adds_fresh_seeds_on_held_out_tasks_too() -> None:
    rec = Recorder()
    tasks = count_tasks(5)
    # three improved target tasks and two held-out ones: p = 1/32, the second-look zone
    splits = {"target": tasks[:3], "heldout": tasks[3:], "preservation": []}
    cfg = RoundConfig(seeds=[0, 1, 2, 3], counterfactual={"enabled": False})
    res = run_round(layout_ports(rec), Harness(), splits, cfg)
    [cand] = [c for c in res.report.candidates if c.gate is not None]
    assert cand.gate is not None and cand.gate.look == 2
    held = {t.task_id for t in tasks[3:]}
    runs = [(h, t, s) for h, t, s in rec.calls if not t.startswith("probe/")]
    assert {s for h, t, s in runs if h == cand.harness_id and t in held} == set(range(4, 12))
    # 5 changed tasks over both looks: p = 1/32 still, yet the held-out verdicts doubled
    assert cand.gate.pass_rates["heldout"]["n"] == 2 * 4 * 2


# ------------------------------------------- a cost cluster's candidate adds no generator calls


def _cost_round(kind: str, patch_value: dict) -> list:
    stage = {"op": "add", "path": "/middleware/stages/-", "value": patch_value}
    return _round_with(kind, [("middleware", stage)])


def _round_with(kind: str, patches: list[tuple[str, dict]]) -> list:
    """``propose_candidates`` for one cluster of ``kind`` whose proposer answers one patch
    per (responsibility, op) of ``patches``."""
    from evoharness.trace.models import Attribution, FailureCluster
    from evoharness.trace.round import Analysis, propose_candidates

    tasks = count_tasks(2)
    parent = Harness.model_validate(
        {"middleware": {"stages": [{"kind": "verify_and_repair", "repair_budget": 1}]}}
    )
    cluster = FailureCluster(
        cluster_id=f"{kind}/middleware/count/miss",
        responsibility_hint="middleware",
        constraint_type="count",
        symptom="miss",
        members=[(t.task_id, "c0") for t in tasks],
        kind=kind,
    )
    attr = Attribution(
        cluster_id=cluster.cluster_id, scores={"middleware": 1.0}, chosen="middleware"
    )

    def propose(c, a, h, n):
        return [
            {"responsibility": r, "ops": [op], "rationale": "r", "expected_effect": "e"}
            for r, op in patches
        ]

    cfg = RoundConfig(seeds=[0, 1], scope={"enabled": False}, mine_memory=False)
    analysis = Analysis(stats=[], clusters=[cluster], attributions=[attr])
    return propose_candidates(analysis, parent, tasks, layout_ports(None, propose), cfg)


def test_max_generator_calls_reads_best_of_n_and_the_repair_budget() -> None:
    from evoharness.trace.checks import max_generator_calls

    assert max_generator_calls(Harness()) == 1
    h = Harness.model_validate(
        {
            "middleware": {
                "stages": [
                    {"kind": "best_of_n", "n": 3},
                    {"kind": "verify_and_repair", "repair_budget": 2},
                ]
            }
        }
    )
    assert max_generator_calls(h) == 5


def test_a_cost_cluster_candidate_adding_best_of_n_is_rejected() -> None:
    [pc] = _cost_round("cost", {"kind": "best_of_n", "n": 2})
    assert pc.child is None
    assert pc.candidate.reject_reason.startswith("adds_generator_calls"), pc.candidate
    # the same patch for a failure cluster is a quality candidate: it may add calls
    [pc] = _cost_round("failure", {"kind": "best_of_n", "n": 2})
    assert pc.child is not None, pc.candidate.reject_reason


def _param(name: str, value: float) -> tuple[str, dict]:
    return ("policy", {"op": "replace", "path": f"/policy/params/{name}", "value": value})


def test_a_cost_cluster_candidate_adding_sampling_work_is_rejected() -> None:
    """More steps (or pixels) per call is more generation, not a saving; fewer is a saving a
    cost cluster may gate; a failure cluster may buy quality with more steps."""
    more, fewer = _round_with("cost", [_param("steps", 40), _param("steps", 20)])
    assert more.child is None
    assert more.candidate.reject_reason.startswith("adds_generator_work"), more.candidate
    assert fewer.child is not None, fewer.candidate.reject_reason
    [quality] = _round_with("failure", [_param("steps", 40)])
    assert quality.child is not None, quality.candidate.reject_reason


def test_one_number_moved_the_same_way_is_gated_once() -> None:
    """guidance 5 → 7.5 and → 9 are one lever at two values: the second is not gated (Holm's
    correction is spent on distinct levers); the other direction is another lever."""
    first, same, other = _round_with(
        "failure",
        [
            _param("guidance_scale", 7.5),
            _param("guidance_scale", 9.0),
            _param("guidance_scale", 3.0),
        ],
    )
    assert first.child is not None and other.child is not None
    assert same.child is None
    assert same.candidate.reject_reason == (
        f"same_lever: moves /policy/params/guidance_scale the same way as "
        f"{first.candidate.candidate_id}"
    )
