"""Counterfactual attribution (issue 29): the schema's components, the probe measure and the
cause rule, and one round on the real embedded world where a harmful memory guideline is
found by taking it out."""

from __future__ import annotations

import pytest

from evoharness.harness.io import load_dir
from evoharness.harness.patch import apply_patch
from evoharness.harness.schema import Guideline, Harness, Memory
from evoharness.trace.counterfactual import (
    CounterfactualConfig,
    PairOutcome,
    is_cause,
    measure,
)
from evoharness.trace.counterfactual_judge import (
    Measure,
    _strength,
    broken_tolerance,
    saving_strength,
)
from evoharness.trace.models import ProbeRecord
from evoharness.trace.schema_levers import components, levers


def _harness() -> Harness:
    h = load_dir("harnesses/reference")
    mem = Memory(
        enabled=True,
        guidelines=[Guideline(trigger="a", text="in a busy street crowded with people")],
    )
    return h.model_copy(update={"memory": mem})


def test_components_cover_every_section_and_stay_in_their_responsibility() -> None:
    h = _harness()
    comps = components(h)
    paths = {c.path for c in comps}
    assert "/memory/guidelines/0" in paths  # each guideline
    assert "/memory/enabled" in paths  # a non-default field back to its default
    assert "/tools/tools/0/when" in paths and "/middleware/stages/1" in paths
    # the reference's skills run the layout tool: taking it out would not compile, so it is
    # no component to probe (the runtime's static check, as for the rule templates)
    assert "/tools/tools/0" not in paths
    assert any(p.startswith("/policy/rewrites/") for p in paths)
    for c in comps:
        assert c.patch.responsibility.value == c.path.split("/")[1]
        child = apply_patch(h, c.patch)  # applies and changes the document
        assert child != h
    # a harness at its defaults has no component to take out
    assert components(Harness()) == []


def test_levers_step_toward_default_and_toward_passing_values() -> None:
    h = _harness()
    pol = levers(h, "policy", toward={"/policy/params/steps": 50})
    labels = [lv.label for lv in pol]
    assert any("guidance_scale from 7.5 to 6.25" in x for x in labels), labels
    assert any("steps from 30 to 40" in x for x in labels), labels
    mem = levers(h, "memory")
    assert {lv.path for lv in mem} >= {"/memory/guidelines/0", "/memory/enabled"}
    assert all(lv.patch.responsibility.value == "memory" for lv in mem)


def _o(final: dict[str, bool], first: dict[str, bool] | None = None, g: int = 1) -> PairOutcome:
    return PairOutcome(final, first if first is not None else final, g)


def test_measure_discounts_what_redrawing_gives() -> None:
    cfg = CounterfactualConfig()
    parent = {("t1", 0): _o({"c": False}), ("t2", 0): _o({"c": False}), ("t3", 0): _o({"c": True})}
    child = {("t1", 0): _o({"c": True}), ("t2", 0): _o({"c": True}), ("t3", 0): _o({"c": True})}
    systematic = {("t1", 0, "c"): 0.0, ("t2", 0, "c"): 0.0, ("t3", 0, "c"): 1.0}
    m = measure(parent, child, systematic, systematic)
    assert (m.failing, m.recovered, m.broken) == (2, 2, 0)
    assert m.excess_recovered == 2 and is_cause(m, cfg)
    # the same recoveries of flaky failures (passing on 3 of 4 other seeds) are no evidence
    flaky = {("t1", 0, "c"): 0.75, ("t2", 0, "c"): 0.75, ("t3", 0, "c"): 1.0}
    m2 = measure(parent, child, flaky, flaky)
    assert m2.excess_recovered == 0.5 and not is_cause(m2, cfg)


def test_a_removal_that_breaks_passing_verdicts_is_no_cause() -> None:
    cfg = CounterfactualConfig()
    parent = {(f"t{i}", 0): _o({"c": i >= 3}) for i in range(8)}
    child = {(f"t{i}", 0): _o({"c": i < 3}) for i in range(8)}
    rates = {(f"t{i}", 0, "c"): float(i >= 3) for i in range(8)}
    m = measure(parent, child, rates, rates)
    assert m.recovered == 3 and m.broken == 5
    assert not is_cause(m, cfg)


def test_saving_generations_without_losing_verdicts_is_a_cost_cause() -> None:
    cfg = CounterfactualConfig()
    parent = {("t1", s): _o({"c": True}, {"c": False}, g=3) for s in range(4)}
    child = {("t1", s): _o({"c": True}, {"c": False}, g=1) for s in range(4)}
    rates = {("t1", s, "c"): 1.0 for s in range(4)}
    m = measure(parent, child, rates, {k: 0.0 for k in rates})
    assert m.saving > 0.6 and is_cause(m, cfg)


def test_the_round_proposer_puts_causes_first_and_schema_levers_last() -> None:
    from evoharness.harness.patch import Patch
    from evoharness.trace.counterfactual import CounterfactualResult
    from evoharness.trace.models import Attribution, FailureCluster

    h = _harness()
    cause = Patch(responsibility="memory", ops=[{"op": "remove", "path": "/memory/guidelines/0"}])
    res = CounterfactualResult(attributions=[], candidates={"k0": [cause]})
    cluster = FailureCluster(
        cluster_id="k0", responsibility_hint="tools", constraint_type="object", symptom="x"
    )
    attr = Attribution(cluster_id="k0", scores={"memory": 1.0}, chosen="memory")
    # an inner proposer (the rule templates) with no lever for memory
    out = res.proposer(lambda c, a, hh, n: [])(cluster, attr, h, 2)
    assert out[0] == cause
    assert len(out) == 3 and all(p.responsibility.value == "memory" for p in out[1:])
    nothing = Attribution(cluster_id="k1", scores={"no_patch": 1.0}, chosen="no_patch")
    assert (
        res.proposer(lambda c, a, hh, n: [])(
            cluster.model_copy(update={"cluster_id": "k1"}), nothing, h, 2
        )
        == []
    )


def test_a_cause_of_minority_seed_failures_stands_out_against_the_placebo() -> None:
    """At the same seed a change of program that is not the cause leaves failing images
    failing; re-drawing (the other seeds' rate) expects every failure of a 1-in-4 fault to
    recover and hides its cause. Against the placebo of the other components it is a cause."""
    from evoharness.trace.counterfactual import Placebo, placebo_of

    cfg = CounterfactualConfig()
    tasks = [f"t{i}" for i in range(6)]
    parent = {(t, 0): _o({"c": False}) for t in tasks}
    cause = {(t, 0): _o({"c": i < 5}) for i, t in enumerate(tasks)}
    neutral = {(t, 0): _o({"c": i == 0}) for i, t in enumerate(tasks)}
    other_seeds = {(t, 0, "c"): 1.0 for t in tasks}  # each fails on seed 0 only
    assert not is_cause(measure(parent, cause, other_seeds, other_seeds), cfg)
    # the screens: three neutral components (one of them with two levers) and the cause
    screens = [
        ("/middleware/stages/1", measure(parent, neutral, other_seeds, other_seeds)),
        ("/middleware/stages/1/repair_budget", measure(parent, cause, other_seeds, other_seeds)),
        ("/policy/negative_prompt", measure(parent, neutral, other_seeds, other_seeds)),
        ("/skills/skills/3", measure(parent, cause, other_seeds, other_seeds)),
        ("/skills/skills/3/priority", measure(parent, cause, other_seeds, other_seeds)),
        ("/skills/skills/4", measure(parent, cause, other_seeds, other_seeds)),
        ("/policy/params/guidance_scale", measure(parent, neutral, other_seeds, other_seeds)),
    ]
    placebo = placebo_of(screens, cfg.min_placebo_components)
    # five components, one each: shares 1/6, 1/6, 5/6, 5/6, 1/6 -> median 1/6
    assert placebo == Placebo(final=pytest.approx(1 / 6), first=pytest.approx(1 / 6), n=5)
    m = measure(parent, cause, other_seeds, other_seeds, placebo)
    assert m.expected_recovered == pytest.approx(1.0) and is_cause(m, cfg)
    assert not is_cause(measure(parent, neutral, other_seeds, other_seeds, placebo), cfg)
    # too few components: no placebo, re-drawing stays the null
    assert placebo_of(screens[:2], cfg.min_placebo_components) is None


def _saving(broken: int, expected_broken: float, passing: int = 35) -> Measure:
    """A probe that saves a quarter of the generations and recovers nothing."""
    return Measure(
        n_pairs=15,
        failing=0,
        recovered=0,
        expected_recovered=0.0,
        first_failing=14,
        first_recovered=0,
        expected_first_recovered=0.0,
        passing=passing,
        broken=broken,
        expected_broken=expected_broken,
        generations_parent=60,
        generations=45,
        recovered_keys=frozenset(),
    )


def test_a_saving_whose_breakage_is_within_redrawing_noise_is_a_cost_cause() -> None:
    """Excess breakage is judged against one Poisson standard deviation of re-drawing's
    breakage (√expected), not a fixed verdict: 4 broken where re-drawing expects 2.67 is
    +1.33, inside √2.67 = 1.63; 5 broken (+2.33) is not; with few expected losses the floor
    of one verdict still holds."""
    cfg = CounterfactualConfig()
    assert broken_tolerance(_saving(4, 2.6667), cfg) == pytest.approx(2.6667**0.5)
    assert is_cause(_saving(4, 2.6667), cfg)
    assert not is_cause(_saving(5, 2.6667), cfg)
    assert broken_tolerance(_saving(1, 0.25), cfg) == cfg.max_excess_broken
    assert is_cause(_saving(1, 0.25), cfg) and not is_cause(_saving(2, 0.25), cfg)


def test_a_cost_cluster_goes_to_the_cause_that_saves_most() -> None:
    """Of several causes, a failure cluster takes the one that recovers most (first
    attempts first); a cost cluster the one that saves most generations."""
    fixes = ProbeRecord(
        label="reset a parameter",
        path="/policy/params/guidance_scale",
        kind="reset",
        responsibility="policy",
        first_recovered=4,
        generations_parent=60,
        generations=49,
    )
    saves = ProbeRecord(
        label="remove a resampling stage",
        path="/middleware/stages/1",
        kind="remove",
        responsibility="middleware",
        broken=4,
        expected_broken=2.67,
        generations_parent=60,
        generations=35,
    )
    assert max([fixes, saves], key=_strength) is fixes
    assert max([fixes, saves], key=saving_strength) is saves


def test_restores_defaults_knows_a_setting_put_back_toward_its_schema_default() -> None:
    from evoharness.harness.patch import Patch
    from evoharness.trace.schema_levers import default_at, restores_defaults

    h = apply_patch(
        _harness(),
        Patch(
            responsibility="policy",
            ops=[{"op": "replace", "path": "/policy/params/steps", "value": 6}],
        ),
    )
    assert default_at(h, "/policy/params/steps") == 30
    assert default_at(h, "/middleware/stages/1/repair_budget") == 1  # inside a list item
    assert str(default_at(h, "/policy/nothing")) == "PydanticUndefined"

    def patch(resp: str, *ops: dict[str, object]) -> Patch:
        return Patch(responsibility=resp, ops=list(ops))

    def steps(v: object) -> dict[str, object]:
        return {"op": "replace", "path": "/policy/params/steps", "value": v}

    assert restores_defaults(h, patch("policy", steps(30)))  # onto the default
    assert restores_defaults(h, patch("policy", steps(18)))  # a step toward it
    assert not restores_defaults(h, patch("policy", steps(40)))  # past it
    assert not restores_defaults(h, patch("policy", steps(4)))  # away from it
    reset_budget = {"op": "replace", "path": "/middleware/stages/1/repair_budget", "value": 1}
    assert restores_defaults(h, patch("middleware", reset_budget))
    # anything added or removed is not a restored default
    assert not restores_defaults(
        h, patch("memory", {"op": "remove", "path": "/memory/guidelines/0"})
    )
    assert not restores_defaults(
        h,
        patch(
            "policy",
            steps(30),
            {"op": "replace", "path": "/policy/params/guidance_scale", "value": 9.0},
        ),
    )
