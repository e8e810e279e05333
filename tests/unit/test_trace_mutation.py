"""Tests written against the survivors of ``make mutate`` (bench/mutation.md): attribution's
noise rule, contrast over decision-trace fields of hand-built runtime-shaped traces, and the
attempt bookkeeping, each with exact expected values."""

from __future__ import annotations

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.program import Program
from evoharness.trace.aggregate import aggregate, attempts, decision_fields, is_decision_entry
from evoharness.trace.attribution import NOISE_MAX_FAILURE_RATE, is_noise
from evoharness.trace.models import Execution
from tests.unit._trace_world import constraint_stats, task

T = task("t", "a dog and no cat", ("c0", "negative", {"subject": "cat"}))


def test_noise_rule_needs_a_flip_and_no_contrast_and_a_low_rate() -> None:
    assert NOISE_MAX_FAILURE_RATE == 0.25
    assert is_noise(constraint_stats())
    # the program varied but no field separates: still noise (the rule's `or`)
    assert is_noise(constraint_stats(program_varies=True))
    # the program varied and a field separates: systematic
    assert not is_noise(constraint_stats(program_varies=True, contrast={"program.prompt": {}}))
    # contrast without a varying program still counts as unchanged program: noise
    assert is_noise(constraint_stats(contrast={"program.prompt": {}}))
    assert not is_noise(constraint_stats(n_pass=0, n_fail=4, failure_rate=1.0))  # no flip
    assert not is_noise(constraint_stats(n_pass=4, n_fail=0, failure_rate=0.0))
    assert not is_noise(constraint_stats(n_pass=2, n_fail=2, failure_rate=0.5))  # too often
    assert is_noise(constraint_stats(n_pass=2, n_fail=2, failure_rate=0.5), max_failure_rate=0.5)


def _entry(resp: str, step: str, **kw) -> dict:
    return {"responsibility": resp, "step": step, **kw}


def _attempt(i: int, seed: int, prompt: str, neg: str, status: str, moved: bool) -> list[dict]:
    out = [
        _entry(
            "middleware",
            "candidate",
            index=i,
            seed=seed,
            reason="initial" if i == 0 else "repair 1/1",
        ),
        _entry(
            "policy",
            "extract",
            input="a dog and no cat",
            constraints=[{"constraint_id": "negative:cat", "type": "negative", "subject": "cat"}],
        ),
    ]
    if moved:
        out.append(
            _entry(
                "middleware",
                "repair.compile",
                attempt=1,
                failing=[{"x": 1}],
                rewrites=["move_negations"],
            )
        )
        out.append(
            _entry(
                "policy",
                "rewrite",
                kind="move_negations",
                source="repair:1:negative:cat",
                output=prompt,
            )
        )
    out += [
        _entry("policy", "program", output={"prompt": prompt, "seed": seed}),
        _entry("middleware", "generate", index=i, execution_key=f"k{seed}", generator_id="g"),
        _entry("middleware", "verify", index=i, statuses={"negative:cat": status}, score=0.5),
    ]
    return out


def _execution(seed: int, repaired: bool) -> Execution:
    p0 = Program(prompt="a dog and no cat", seed=seed)
    trace = _attempt(0, seed, p0.prompt, "", "fail", False)
    programs = [p0]
    final = EvidenceStatus.failed
    if repaired:
        p1 = Program(prompt="a dog", negative_prompt="cat", seed=seed + 1000)
        trace += _attempt(1, seed + 1000, p1.prompt, "cat", "pass", True)
        programs.append(p1)
        final = EvidenceStatus.passed
    trace.append(
        _entry("middleware", "select", chosen=len(programs) - 1, scores=[0.5] * len(programs))
    )
    return Execution(
        task_id="t",
        seed=seed,
        harness_id="h",
        execution_key=f"k{seed}",
        program=programs[-1],
        programs=programs,
        trace=trace,
        evidence=[Evidence(constraint_id="c0", status=final, confidence=0.9)],
    )


def test_decision_entries() -> None:
    assert is_decision_entry(_entry("policy", "rewrite"))
    assert is_decision_entry(_entry("tools", "layout_planner"))
    assert is_decision_entry(_entry("skills", "route"))
    assert is_decision_entry(_entry("memory", "guideline"))
    assert is_decision_entry(_entry("middleware", "repair.compile"))
    assert not is_decision_entry(_entry("policy", "program"))
    for step in ("candidate", "generate", "verify", "select"):
        assert not is_decision_entry(_entry("middleware", step))
    assert not is_decision_entry(_entry("other", "rewrite"))


def test_decision_fields_strip_volatile_keys_everywhere() -> None:
    e = _execution(0, repaired=True)
    [a0, a1] = attempts(e)
    f1 = decision_fields(a1.program, a1.entries)
    assert f1["program.prompt"] == "a dog" and f1["program.negative_prompt"] == "cat"
    assert f1["program.layout.len"] == "0" and "program.seed" not in f1
    assert (
        f1["trace.middleware.repair.compile"]
        == '{"responsibility":"middleware","rewrites":["move_negations"],"step":"repair.compile"}'
    )
    rw = f1["trace.policy.rewrite.move_negations"]
    assert '"source":"repair"' in rw and "repair:1" not in rw
    assert {k for k in f1 if k.startswith("trace.")} == {
        "trace.policy.extract",
        "trace.middleware.repair.compile",
        "trace.policy.rewrite.move_negations",
    }
    f0 = decision_fields(a0.program, a0.entries)
    assert "trace.middleware.repair.compile" not in f0
    # a repeated entry is joined with |
    twice = decision_fields(a0.program, [*a0.entries, *a0.entries])
    assert (
        twice["trace.policy.extract"]
        == f0["trace.policy.extract"] + "|" + f0["trace.policy.extract"]
    )


def test_attempts_and_first_attempt_failures_from_a_trace() -> None:
    e = _execution(0, repaired=True)
    [a0, a1] = attempts(e)
    assert (a0.index, a0.selected, a1.index, a1.selected) == (0, False, 1, True)
    assert a0.statuses == {("negative", "cat"): "fail"} and a1.statuses == {
        ("negative", "cat"): "pass"
    }
    # no candidate steps: one attempt, the whole trace
    bare = e.model_copy(update={"trace": [_entry("policy", "rewrite", kind="x")]})
    [only] = attempts(bare)
    assert only.selected and only.program == e.program and len(only.entries) == 1
    execs = [_execution(s, repaired=s % 2 == 0) for s in range(4)]
    [st] = aggregate(execs, [T], range(4))
    assert (st.n_pass, st.n_fail, st.n_first_fail, st.n_attempts, st.n_attempts_failed) == (
        2,
        2,
        4,
        6,
        4,
    )
    assert st.contrast["program.negative_prompt"] == {"pass": ["cat"], "fail": [""]}
    assert st.program_varies
    # without repairs the same program fails on every seed: no contrast, nothing varies
    [plain] = aggregate([_execution(s, repaired=False) for s in range(4)], [T], range(4))
    assert plain.contrast == {} and not plain.program_varies and plain.n_first_fail == 4
