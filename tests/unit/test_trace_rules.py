"""Symptoms and hints, noise detection, aggregation errors, the compile check and the budget
defaults of the pure TRACE core."""

from __future__ import annotations

import pytest

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.harness.schema import Harness
from evoharness.program import LayoutItem, Program
from evoharness.trace.aggregate import AggregationError, aggregate, wilson_interval
from evoharness.trace.attribution import is_noise
from evoharness.trace.budget import BudgetConfig, Prices, estimate_budget
from evoharness.trace.checks import check_proposal
from evoharness.trace.cluster import approx_tokens, symptom_and_hint
from evoharness.trace.models import ConstraintStats, Execution
from tests.unit._trace_world import compile_program, task


def _stats(ctype: str, subject: str = "dog", **kw) -> ConstraintStats:
    base = dict(
        task_id="t",
        constraint_id="c",
        constraint_type=ctype,
        subject=subject,
        n_seeds=4,
        n_pass=2,
        n_fail=2,
        n_uncertain=0,
        failure_rate=0.5,
    )
    base.update(kw)
    return ConstraintStats(**base)


def _exec(prompt: str, negative: str = "", layout: bool = False) -> Execution:
    return Execution(
        task_id="t",
        seed=0,
        harness_id="h",
        execution_key="k",
        program=Program(
            prompt=prompt,
            negative_prompt=negative,
            layout=[LayoutItem(label="dog", box=(0.1, 0.1, 0.4, 0.4))] if layout else None,
        ),
    )


def test_symptoms_and_hints_follow_the_program() -> None:
    t = task("t", "a cat with no dog", ("c", "negative", {"subject": "dog"}))
    assert symptom_and_hint(_stats("negative"), t, [_exec(t.prompt)]) == (
        "negation_drawn",
        "policy",
    )
    # the negative prompt already names it: a skill, not the policy rewrite
    assert symptom_and_hint(_stats("negative"), t, [_exec("a cat", "dog")]) == (
        "negation_drawn",
        "skills",
    )
    tc = task("t", "three dogs", ("c", "count", {"subject": "dog", "min_count": 3}))
    assert symptom_and_hint(_stats("count"), tc, [_exec(tc.prompt)]) == ("count_wrong", "tools")
    assert symptom_and_hint(_stats("count"), tc, [_exec(tc.prompt, layout=True)]) == (
        "count_wrong",
        "middleware",
    )
    long = " ".join(["a very detailed ornate scene"] * 20) + " and a dog"
    assert approx_tokens(long) > 77
    to = task("t", long, ("c", "object", {"subject": "dog"}))
    assert symptom_and_hint(_stats("object"), to, [_exec(long)]) == (
        "object_dropped_long_prompt",
        "policy",
    )
    tt = task("t", 'a sign that says "hi"', ("c", "text", {"subject": "sign", "value": "hi"}))
    assert symptom_and_hint(_stats("text"), tt, [_exec(tt.prompt)]) == (
        "text_garbled",
        "middleware",
    )


def test_noise_needs_flips_no_contrast_and_a_minority_of_failing_seeds() -> None:
    assert is_noise(_stats("object", n_pass=3, n_fail=1, failure_rate=0.25))
    assert not is_noise(_stats("object", n_pass=2, n_fail=2, failure_rate=0.5))  # systematic
    assert not is_noise(_stats("object", n_pass=0, n_fail=4, failure_rate=1.0))  # always fails
    assert not is_noise(
        _stats(
            "object",
            n_pass=3,
            n_fail=1,
            failure_rate=0.25,
            program_varies=True,
            contrast={"program.layout.len": {"pass": ["1"], "fail": ["0"]}},
        )
    )


def test_wilson_interval() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)
    lo, hi = wilson_interval(2, 4)
    assert lo < 0.5 < hi and lo > 0.1


def test_missing_evidence_is_an_error() -> None:
    t = task(
        "t", "a dog", ("c0", "object", {"subject": "dog"}), ("c1", "object", {"subject": "cat"})
    )
    execs = [
        Execution(
            task_id="t",
            seed=s,
            harness_id="h",
            execution_key=str(s),
            program=Program(prompt="a dog", seed=s),
            evidence=[Evidence(constraint_id="c0", status=EvidenceStatus.passed, confidence=1.0)],
        )
        for s in (0, 1)
    ]
    with pytest.raises(AggregationError, match="no evidence for constraint 'c1'"):
        aggregate(execs, [t], [0, 1])


def test_a_patch_that_breaks_compilation_is_rejected() -> None:
    def compile_or_fail(h: Harness, t, seed: int) -> Program:
        if "{prompt}!" in h.policy.template:
            raise ValueError("template renders badly")
        return compile_program(h, t, seed)

    t = task("t", "two cats", ("c", "count", {"subject": "cat", "min_count": 2}))
    raw = {
        "responsibility": "policy",
        "ops": [{"op": "replace", "path": "/policy/template", "value": "{prompt}!"}],
    }
    res = check_proposal(raw, Harness(), [t], [0], compile_or_fail)
    assert not res.ok and res.reason == "compile" and "template renders badly" in res.detail


def test_budget_counts_middleware_calls_and_prices() -> None:
    cfg = BudgetConfig(
        n_target=2,
        seeds=1,
        rounds=1,
        max_clusters=1,
        candidates_per_cluster=1,
        generator_calls_per_execution=3,
        generator_seconds_per_call=2.0,
    )
    est = estimate_budget(cfg, Prices(generator_second_usd=1.0))
    # execute 2 + parent and one candidate on 2 fresh-seed tasks + two further looks for both
    # = 14 executions x 3 calls x 2 s x $1
    assert est.upper.generator_calls == 42 and est.upper.cost_usd == 84.0
    assert est.upper.llm_calls == 0
