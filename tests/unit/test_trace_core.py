"""Aggregation, clustering, attribution, proposal checks, frontier, budget and one in-process
round of the pure TRACE core, on the deterministic stand-in world of ``_trace_world``."""

from __future__ import annotations

import pytest

from evoharness.evidence import EvidenceStatus
from evoharness.harness.io import harness_id
from evoharness.harness.schema import Harness
from evoharness.trace.aggregate import IncompleteSeedsError, aggregate
from evoharness.trace.attribution import attribute
from evoharness.trace.budget import BudgetConfig, estimate_budget, load_prices
from evoharness.trace.checks import check_proposal
from evoharness.trace.cluster import cluster_failures
from evoharness.trace.frontier import Frontier, FrontierEntry
from evoharness.trace.models import Attribution, DecisionKind
from evoharness.trace.round import RoundConfig, RoundPorts
from evoharness.trace.round_driver import run_round
from tests.unit._trace_world import compile_program, execute, task

SEEDS = [0, 1, 2, 3]
T_COUNT = task(
    "t-count", "three cats", ("c0", "count", {"subject": "cat", "min_count": 3, "max_count": 3})
)
T_OBJ = task("t-obj", "a dog", ("o0", "object", {"subject": "dog"}))
T_COLOR = task(
    "t-color",
    "a red car and a blue dog",
    ("k0", "color", {"subject": "car", "value": "red"}),
    ("k1", "color", {"subject": "dog", "value": "blue"}),
)


def _execs(h, tasks):
    return [execute(h, t, s) for t in tasks for s in SEEDS]


def test_aggregate_counts_rates_and_contrast() -> None:
    h = Harness()
    stats = aggregate(_execs(h, [T_COUNT, T_OBJ]), [T_COUNT, T_OBJ], SEEDS)
    by = {s.constraint_id: s for s in stats}
    assert by["c0"].n_fail == 4 and by["c0"].failure_rate == 1.0
    assert by["c0"].failure_ci95[0] > 0.4  # Wilson lower bound for 4/4
    # object flips with the seed of one unchanged program: no contrast
    assert (by["o0"].n_pass, by["o0"].n_fail) == (3, 1)
    assert by["o0"].program_varies is False and by["o0"].contrast == {}


def test_contrast_names_the_field_that_separates_pass_from_fail() -> None:
    h = Harness()
    with_layout = Harness.model_validate(
        {"tools": {"tools": [{"kind": "layout_planner", "name": "layout"}]}}
    )
    execs = [execute(with_layout if s < 2 else h, T_COUNT, s) for s in SEEDS]
    [st] = aggregate(execs, [T_COUNT], SEEDS)
    assert st.program_varies and "program.layout.len" in st.contrast
    assert st.contrast["program.layout.len"] == {"pass": ["1"], "fail": ["0"]}


def test_incomplete_seed_set_is_an_error() -> None:
    execs = _execs(Harness(), [T_COUNT])[:-1]
    with pytest.raises(IncompleteSeedsError, match=r"t-count: missing seeds \[3\]"):
        aggregate(execs, [T_COUNT], SEEDS)
    with pytest.raises(IncompleteSeedsError, match="duplicate"):
        aggregate(_execs(Harness(), [T_COUNT]) + [execute(Harness(), T_COUNT, 0)], [T_COUNT], SEEDS)


def test_clusters_and_attribution_lean_no_patch_on_noise() -> None:
    h = Harness()
    tasks = [T_COUNT, T_OBJ, T_COLOR]
    execs = _execs(h, tasks)
    stats = aggregate(execs, tasks, SEEDS)
    clusters = cluster_failures(stats, tasks, execs)
    ids = {c.cluster_id for c in clusters}
    assert ids == {
        "tools/count/count_wrong",
        "tools/object/missing_object",
        "policy/color/color_leak",
    }
    # a localizer that (wrongly) blames tools for the noisy object cluster is outvoted only
    # partially; with evidence alone the noisy cluster is no_patch.
    attrs = {a.cluster_id: a for a in attribute(clusters, stats, [], 0.5)}
    assert attrs["tools/object/missing_object"].chosen == "no_patch"
    assert attrs["tools/count/count_wrong"].chosen == "tools"
    assert attrs["policy/color/color_leak"].chosen == "policy"
    assert all(abs(sum(a.scores.values()) - 1) < 1e-6 for a in attrs.values())
    loc = [
        Attribution(
            cluster_id="tools/count/count_wrong",
            scores={"policy": 1.0},
            chosen="policy",
            reasons=["x"],
        )
    ]
    mixed = {a.cluster_id: a for a in attribute(clusters, stats, loc, 0.5)}
    assert any("localizer chose policy" in r for r in mixed["tools/count/count_wrong"].reasons)
    with pytest.raises(ValueError, match="unknown labels"):
        attribute(
            clusters,
            stats,
            [
                Attribution(
                    cluster_id="tools/count/count_wrong",
                    scores={"generator": 1.0},
                    chosen="generator",
                )
            ],
        )


def test_proposal_checks_reject_each_kind_before_generation() -> None:
    h = Harness()
    good = {
        "responsibility": "tools",
        "ops": [
            {
                "op": "add",
                "path": "/tools/tools/-",
                "value": {"kind": "layout_planner", "name": "layout"},
            }
        ],
    }
    r = check_proposal(good, h, [T_COUNT], SEEDS, compile_program)
    assert r.ok and r.changed_tasks == ["t-count"] and r.child_id == harness_id(r.child)
    cases = {
        "schema": {"responsibility": "generator", "ops": [{"op": "add", "path": "/x", "value": 1}]},
        "contract": {
            "responsibility": "tools",
            "ops": [{"op": "replace", "path": "/policy/template", "value": "x {prompt}"}],
        },
        "apply": {"responsibility": "tools", "ops": [{"op": "remove", "path": "/tools/tools/5"}]},
        "harness_schema": {
            "responsibility": "policy",
            "ops": [{"op": "add", "path": "/policy/generator", "value": "sdxl"}],
        },
        # changes the document but no compiled program of the target tasks
        "no_op": {
            "responsibility": "memory",
            "ops": [{"op": "replace", "path": "/memory/top_k", "value": 3}],
        },
    }
    for reason, raw in cases.items():
        res = check_proposal(raw, h, [T_COUNT], SEEDS, compile_program)
        assert not res.ok and res.reason == reason, (reason, res)
    assert check_proposal("{not json", h, [T_COUNT], SEEDS, compile_program).reason == "schema"


def test_frontier_keeps_the_best_two() -> None:
    f = Frontier(beam=2)
    f = f.push(FrontierEntry(harness_id="a", document={}, target_pass_rate=0.5))
    f = f.push(FrontierEntry(harness_id="b", document={}, target_pass_rate=0.7, round=1))
    f = f.push(FrontierEntry(harness_id="c", document={}, target_pass_rate=0.6, round=2))
    assert [e.harness_id for e in f.entries] == ["b", "c"] and f.head.harness_id == "b"


def test_budget_upper_and_expected(tmp_path) -> None:
    cfg = BudgetConfig(
        n_target=10,
        n_heldout=5,
        n_preservation=5,
        seeds=4,
        rounds=2,
        max_clusters=2,
        candidates_per_cluster=2,
        proposer="llm",
        expected_cache_hit_rate=0.5,
        second_look_share=0.25,
        further_looks=1,
    )
    est = estimate_budget(cfg)
    # the default three-look gate: up to two further looks, each as large as one
    three = estimate_budget(cfg.model_copy(update={"further_looks": 2}))
    assert three.per_round_executions["second_look"] == 600.0
    # per parent-round: 40 execute on the target + 20 on the preservation pool (the selection
    # of the preservation set) + parent on 20 tasks x 4 fresh seeds (80) + 4 candidates * 20
    # tasks * 4 seeds (320) + second look: (4 candidates + parent) * (10 target + 5 held-out
    # tasks: the gate's test units) * 4 (300)
    assert est.upper.generator_calls == 2 * (60 + 80 + 320 + 300)
    assert est.per_round_executions == {
        "execute": 60.0,
        "validate_parent": 80.0,
        "validate_candidates": 320.0,
        "second_look": 300.0,
    }
    # expected: round 1 all but half the candidates' executions and 1/4 of the second looks;
    # round 2 the parent's validation is a cache hit, its analysis seeds are not
    assert est.expected.generator_calls == (60 + 80 + 160 + 75) + (60 + 160 + 75)
    none = estimate_budget(cfg.model_copy(update={"second_look_share": 0.0}))
    assert none.expected.generator_calls == (60 + 80 + 160) + (60 + 160)
    assert est.upper.llm_calls == 2 * 3 and est.expected.cost_usd < est.upper.cost_usd
    # a beam of 3: every round after the first expands three parents
    b3 = estimate_budget(cfg.model_copy(update={"beam": 3, "rounds": 3}))
    assert b3.upper.generator_calls == (1 + 2 * 3) * (60 + 80 + 320 + 300)
    assert b3.expected.generator_calls == (60 + 80 + 160 + 75) + 6 * (60 + 160 + 75)
    assert b3.upper.llm_calls == 7 * 3
    p = tmp_path / "prices.yaml"
    p.write_text("generator:\n  usd_per_generator_second: 0.01\nllm:\n  prompt_usd_per_1m: 1.0\n")
    pr = load_prices(p)
    assert pr.generator_second_usd == 0.01 and pr.llm_prompt_per_1k_usd == pytest.approx(0.001)
    with pytest.raises(ValueError, match="does not exist"):
        load_prices(tmp_path / "nope.yaml")


def _localize(clusters, h):
    return [
        Attribution(
            cluster_id=c.cluster_id,
            scores={c.responsibility_hint: 1.0},
            chosen=c.responsibility_hint,
        )
        for c in clusters
    ]


def _propose(cluster, attr, h, n):
    if attr.chosen == "tools":
        return [
            {
                "responsibility": "tools",
                "ops": [{"op": "replace", "path": "/policy/template", "value": "{prompt}!"}],
            },
            {
                "responsibility": "tools",
                "ops": [
                    {
                        "op": "add",
                        "path": "/tools/tools/-",
                        "value": {"kind": "layout_planner", "name": "layout"},
                    }
                ],
            },
        ]
    return [
        {
            "responsibility": "policy",
            "ops": [
                {"op": "add", "path": "/policy/rewrites/-", "value": {"kind": "bind_attributes"}}
            ],
        }
    ]


def test_run_round_accepts_a_patch_then_no_patch() -> None:
    target = [
        task(
            f"cnt{i}",
            f"{i + 2} cats",
            ("c0", "count", {"subject": "cat", "min_count": i + 2, "max_count": i + 2}),
        )
        for i in range(8)  # 8 tasks: the task-level test reaches p = 1/256 < 0.0294
    ]
    pres = [task("keep", "a dog", ("o0", "object", {"subject": "dog"}))]
    ports = RoundPorts(
        execute=execute, compile_program=compile_program, localize=_localize, propose=_propose
    )
    cfg = RoundConfig(seeds=SEEDS, concurrency=2)
    res = run_round(ports, Harness(), {"target": target, "heldout": [], "preservation": pres}, cfg)
    rep = res.report
    assert rep.decision.kind is DecisionKind.accepted and res.child is not None
    reasons = [c.reject_reason.split(":")[0] for c in rep.candidates if c.reject_reason]
    assert "contract" in reasons  # out-of-contract proposal never reached the harness
    assert rep.pass_rates["target"] == 1.0 and rep.residual_clusters == []
    again = run_round(
        ports,
        res.child,
        {"target": target, "heldout": [], "preservation": pres},
        cfg.model_copy(update={"round": 2}),
    )
    assert again.report.decision.kind is DecisionKind.no_patch
    assert again.report.decision.reason == "no failures on the target split"
    assert all(
        ev.status is EvidenceStatus.passed
        for e in again.executions[(harness_id(res.child), "target")]
        for ev in e.evidence
    )
