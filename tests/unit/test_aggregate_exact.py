"""Exact behaviour of evidence aggregation (``evoharness.trace.aggregate``): the Wilson
interval against its closed form, volatile-key stripping and field flattening, how attempts
are read from a runtime-shaped trace, contrast, the seed-set check's messages, and every
count of ``ConstraintStats``. Hand-built executions; no runtime, no generator."""

from __future__ import annotations

import math

import pytest

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.program import LayoutItem, Program
from evoharness.trace.aggregate import (
    VOLATILE_KEYS,
    AggregationError,
    Attempt,
    IncompleteSeedsError,
    _flatten,
    _strip,
    aggregate,
    attempts,
    check_seed_sets,
    contrast,
    decision_fields,
    pass_rate,
    trajectory_fields,
    wilson_interval,
)
from evoharness.trace.counterfactual import pair_outcome
from evoharness.trace.models import Execution
from tests.unit._trace_world import task

P = EvidenceStatus.passed
F = EvidenceStatus.failed
U = EvidenceStatus.uncertain
T2 = task(
    "t2",
    "a dog and a cat",
    ("d", "object", {"subject": "dog"}),
    ("c", "object", {"subject": "cat"}),
)


def _ev(cid: str, status: EvidenceStatus, observed: object = None) -> Evidence:
    return Evidence(constraint_id=cid, status=status, confidence=0.9, observed=observed)


def _ex(tid: str, seed: int, *evidence: Evidence, prompt: str = "a dog", **kw) -> Execution:
    return Execution(
        task_id=tid,
        seed=seed,
        harness_id="h",
        execution_key=f"{tid}-{seed}",
        program=Program(prompt=prompt, seed=seed),
        evidence=list(evidence),
        **kw,
    )


def _wilson(k: int, n: int, z: float = 1.959963984540054) -> tuple[float, float]:
    """Wilson (1927) score interval, closed form."""
    p = k / n
    centre = (p + z * z / (2 * n)) / (1 + z * z / n)
    half = z / (1 + z * z / n) * math.sqrt(p * (1 - p) / n + z * z / (4 * n * n))
    return centre - half, centre + half


# -------------------------------------------------------------------------- wilson_interval


@pytest.mark.parametrize(("k", "n"), [(1, 4), (3, 4), (0, 4), (4, 4), (7, 20)])
def test_wilson_interval_is_the_95_percent_score_interval(k: int, n: int) -> None:
    lo, hi = wilson_interval(k, n)
    want = _wilson(k, n)
    assert lo == pytest.approx(max(want[0], 0.0), abs=1e-9)
    assert hi == pytest.approx(min(want[1], 1.0), abs=1e-9)
    assert type(lo) is float and type(hi) is float


def test_wilson_interval_without_trials_is_everything() -> None:
    assert wilson_interval(0, 0) == (0.0, 1.0)


# ------------------------------------------------------------------------ _strip, _flatten


def test_strip_removes_volatile_keys_at_every_level_and_reduces_sources() -> None:
    assert {"seed", "execution_key", "status", "score", "chosen", "note"} <= VOLATILE_KEYS
    value = {
        "step": "rewrite",
        "seed": 3,
        "source": "repair:1:c0",
        "items": [{"score": 0.5, "label": "dog", "source": "memory"}, 7],
        "inner": {"status": "pass", "keep": {"attempt": 2, "x": 1}},
        "n": {"source": 5},
    }
    assert _strip(value) == {
        "step": "rewrite",
        "source": "repair",
        "items": [{"label": "dog", "source": "memory"}, 7],
        "inner": {"keep": {"x": 1}},
        "n": {"source": 5},
    }
    assert _strip([{"seed": 1}, "a"]) == [{}, "a"]
    assert _strip("seed") == "seed"


def test_flatten_joins_paths_and_encodes_values() -> None:
    out: dict[str, str] = {}
    _flatten(
        {
            "a": {"b": 1.5, "c": "text", "d": None, "e": True},
            "boxes": [{"x": 1}, {"x": 2}],
            "tags": ["p", "q"],
            "none": [],
        },
        "",
        out,
    )
    assert out == {
        "a.b": "1.5",
        "a.c": "text",
        "a.d": "null",
        "a.e": "true",
        "boxes.len": "2",
        "boxes": '[{"x":1},{"x":2}]',
        "tags": '["p","q"]',
        "none": "[]",
    }
    prefixed: dict[str, str] = {}
    _flatten({"k": [1, {"x": 1}]}, "p", prefixed)
    assert prefixed == {"p.k": '[1,{"x":1}]'}  # a mixed list is one value, no length


# --------------------------------------------------------------------------- decision_fields


def test_decision_fields_name_entries_by_tool_skill_or_kind() -> None:
    prog = Program(
        prompt="a dog",
        seed=9,
        layout=[LayoutItem(label="dog", box=(0.1, 0.2, 0.5, 0.6))],
    )
    entries = [
        {"responsibility": "tools", "step": "run", "tool": "layout", "kind": "k", "seed": 1},
        {"responsibility": "skills", "step": "fire", "skill": "count"},
        {"responsibility": "policy", "step": "rewrite", "kind": "bind"},
        {"responsibility": "policy", "step": "rewrite", "kind": 3},
        {"responsibility": "policy", "step": "rewrite", "kind": 3, "n": 2},
        {"responsibility": "policy", "step": "program", "prompt": "x"},
        {"responsibility": "middleware", "step": "verify", "statuses": {}},
    ]
    f = decision_fields(prog, entries)
    assert f["program.prompt"] == "a dog"
    assert f["program.layout.len"] == "1"
    # None fields are left out (exclude_none): an unset colour is not a value
    assert f["program.layout"] == '[{"box":[0.1,0.2,0.5,0.6],"label":"dog"}]'
    assert "program.seed" not in f and "program.references" not in f
    assert {k: v for k, v in f.items() if k.startswith("trace.")} == {
        "trace.tools.run.layout": '{"kind":"k","responsibility":"tools","step":"run","tool":"layout"}',
        "trace.skills.fire.count": '{"responsibility":"skills","skill":"count","step":"fire"}',
        "trace.policy.rewrite.bind": '{"kind":"bind","responsibility":"policy","step":"rewrite"}',
        "trace.policy.rewrite": '{"kind":3,"responsibility":"policy","step":"rewrite"}'
        + "|"
        + '{"kind":3,"n":2,"responsibility":"policy","step":"rewrite"}',
    }


# ---------------------------------------------------------------------------------- attempts


def _cand(i: int) -> dict:
    return {"responsibility": "middleware", "step": "candidate", "index": i}


def _extract(*cons: tuple[str, str, str]) -> dict:
    return {
        "responsibility": "policy",
        "step": "extract",
        "constraints": [{"constraint_id": c, "type": t, "subject": s} for c, t, s in cons],
    }


def _verify(**statuses: str) -> dict:
    return {"responsibility": "middleware", "step": "verify", "statuses": statuses}


def test_attempts_read_verdicts_by_constraint_type_and_subject() -> None:
    p0, p1, p2 = (Program(prompt=f"p{i}", seed=i) for i in range(3))
    trace = [
        _cand(0),
        _extract(("r0", "object", "dog"), ("r1", "object", "cat"), ("r0", "count", "dog")),
        _verify(r0="fail", r1="pass", r9="pass"),
        _verify(r0="pass"),  # a later verdict on the same constraint does not overwrite
        _cand(1),
        {"responsibility": "policy", "step": "extract", "constraints": None},
        _verify(r0="pass"),  # no extract in this attempt maps r0: ignored
        _cand(2),
        _extract(("r0", "object", "dog")),
        _verify(r0="pass"),
        {"responsibility": "middleware", "step": "select", "chosen": "1"},
    ]
    ex = _ex("t", 0, programs=[p0, p1, p2], trace=trace)
    a = attempts(ex)
    assert [x.index for x in a] == [0, 1, 2]
    assert [x.program for x in a] == [p0, p1, p2]
    assert [x.selected for x in a] == [False, True, False]  # "chosen" read as an int
    assert a[0].statuses == {("object", "dog"): "fail", ("object", "cat"): "pass"}
    assert a[1].statuses == {}
    assert a[2].statuses == {("object", "dog"): "pass"}
    assert a[0].entries == tuple(trace[0:4]) and a[2].entries == tuple(trace[7:])
    assert trajectory_fields(ex)["program.prompt"] == "p1"


def test_without_a_select_the_last_attempt_is_chosen() -> None:
    p0, p1 = Program(prompt="p0"), Program(prompt="p1")
    trace = [_cand(0), _cand(1), {"responsibility": "middleware", "step": "select"}]
    a = attempts(_ex("t", 0, programs=[p0, p1], trace=trace))
    assert [x.selected for x in a] == [False, True]


def test_a_trace_that_does_not_match_the_programs_is_one_attempt() -> None:
    p0 = Program(prompt="p0")
    # two candidate steps but one program: not split; the final program with every entry
    trace = [_cand(0), _verify(r0="fail"), _cand(1)]
    ex = _ex("t", 0, programs=[p0], trace=trace, prompt="final")
    [only] = attempts(ex)
    assert (only.index, only.selected, only.statuses) == (0, True, {})
    assert only.program.prompt == "final" and only.entries == tuple(trace)
    # no recorded programs: one candidate step is the final program
    [one] = attempts(_ex("t", 0, trace=[_cand(0)], prompt="final"))
    assert one.program.prompt == "final" and one.selected


# ---------------------------------------------------------------------------------- contrast


def test_contrast_reports_disjoint_fields_with_sorted_values() -> None:
    passing = [{"a": "1", "b": "x", "c": "s"}, {"a": "2", "b": "y", "c": "s"}]
    failing = [{"a": "3", "b": "x"}, {"a": "0", "c": "s"}]
    assert contrast(passing, failing) == {"a": {"pass": ["1", "2"], "fail": ["0", "3"]}}
    # a field missing on one side is the value "<absent>"
    assert contrast([{"a": "1"}], [{"b": "1"}]) == {
        "a": {"pass": ["1"], "fail": ["<absent>"]},
        "b": {"pass": ["<absent>"], "fail": ["1"]},
    }
    assert contrast([], failing) == {} and contrast(passing, []) == {}


# --------------------------------------------------------------------------- check_seed_sets


def test_seed_set_messages_name_every_problem() -> None:
    execs = [_ex("a", 0), _ex("a", 0), _ex("a", 5), _ex("b", 1), _ex("z", 0)]
    with pytest.raises(IncompleteSeedsError) as exc:
        check_seed_sets(execs, ["a", "b"], [1, 0])
    assert str(exc.value) == (
        "incomplete matched seed set (K=2, seeds [0, 1]): "
        "a: missing seeds [1], extra [5], duplicate [0]; "
        "b: missing seeds [0], extra [], duplicate []; "
        "executions for unknown tasks ['z']"
    )
    # a task with no execution at all misses every seed
    with pytest.raises(IncompleteSeedsError) as exc:
        check_seed_sets([], ["a"], [0])
    assert str(exc.value).endswith("a: missing seeds [0], extra [], duplicate []")
    with pytest.raises(AggregationError, match=r"^seed list has duplicates: \[0, 1, 0\]$"):
        check_seed_sets([], [], [0, 1, 0])
    check_seed_sets([_ex("a", 1), _ex("a", 0)], ("a" for _ in range(1)), [0, 1])  # complete


# --------------------------------------------------------------------------------- aggregate


def test_aggregate_counts_each_verdict_and_orders_by_task_then_constraint() -> None:
    t1 = task("t1", "a dog", ("x", "object", {"subject": "dog"}))
    execs = [
        _ex("t2", 2, _ev("c", U), _ev("d", F, observed=0)),
        _ex("t2", 0, _ev("d", P), _ev("c", F, observed="none")),
        _ex("t2", 1, _ev("c", F, observed=2), _ev("d", F, observed=1)),
        _ex("t1", 0, _ev("x", U)),
        _ex("t1", 1, _ev("x", U)),
        _ex("t1", 2, _ev("x", U)),
    ]
    stats = aggregate(execs, {"t2": T2, "t1": t1}, [0, 1, 2])
    assert [(s.task_id, s.constraint_id) for s in stats] == [("t2", "d"), ("t2", "c"), ("t1", "x")]
    d, c, x = stats
    assert (d.n_seeds, d.n_pass, d.n_fail, d.n_uncertain) == (3, 1, 2, 0)
    assert d.failure_rate == pytest.approx(2 / 3) and d.observed == [1, 0]  # by seed
    assert d.failure_ci95 == wilson_interval(2, 3)
    assert (c.n_pass, c.n_fail, c.n_uncertain, c.failure_rate) == (0, 2, 1, 1.0)
    assert c.observed == ["none", 2] and (c.constraint_type, c.subject) == ("object", "cat")
    # nothing decided: rate 0, the uninformative interval
    assert (x.n_uncertain, x.failure_rate, x.failure_ci95) == (3, 0.0, (0.0, 1.0))
    assert (x.n_first_fail, x.n_attempts, x.n_attempts_failed) == (0, 3, 0)
    assert (d.n_first_fail, d.n_attempts, d.n_attempts_failed) == (2, 3, 2)
    assert not d.program_varies and d.contrast == {}


def test_program_varies_ignores_the_seed_but_not_the_prompt() -> None:
    same = [_ex("t2", s, _ev("d", P), _ev("c", P)) for s in (0, 1)]
    [d, _] = aggregate(same, [T2], [0, 1])
    assert not d.program_varies
    other = [same[0], _ex("t2", 1, _ev("d", F), _ev("c", P), prompt="a dog.")]
    [d, c] = aggregate(other, [T2], [0, 1])
    assert d.program_varies and c.program_varies
    assert d.contrast["program.prompt"] == {"pass": ["a dog"], "fail": ["a dog."]}
    assert c.contrast == {}  # c passed on both: no failing group


def test_earlier_attempts_count_by_their_runtime_verdicts() -> None:
    p0, p1 = Program(prompt="first", seed=0), Program(prompt="second", seed=1000)
    trace = [
        _cand(0),
        _extract(("r0", "object", "dog"), ("r1", "object", "cat")),
        _verify(r0="fail", r1="uncertain"),
        _cand(1),
        _extract(("r0", "object", "dog"), ("r1", "object", "cat")),
        _verify(r0="pass", r1="fail"),
        {"responsibility": "middleware", "step": "select", "chosen": 1},
    ]
    repaired = _ex("t2", 0, _ev("d", P), _ev("c", F), programs=[p0, p1], trace=trace)
    plain = _ex("t2", 1, _ev("d", F), _ev("c", F), prompt="first")
    d, c = aggregate([repaired, plain], [T2], [0, 1])
    # d: seed 0 failed first and passed on repair; seed 1 failed its only attempt
    assert (d.n_pass, d.n_fail, d.n_first_fail, d.n_attempts, d.n_attempts_failed) == (
        1,
        1,
        2,
        3,
        2,
    )
    assert d.contrast["program.prompt"] == {"pass": ["second"], "fail": ["first"]}
    # c: the first attempt was uncertain (not a first-attempt failure), the repair failed
    assert (c.n_first_fail, c.n_attempts_failed) == (1, 2)


def test_missing_evidence_names_task_seed_and_constraint() -> None:
    execs = [_ex("t2", 0, _ev("d", P), _ev("c", P)), _ex("t2", 1, _ev("d", P))]
    with pytest.raises(AggregationError) as exc:
        aggregate(execs, [T2], [0, 1])
    assert str(exc.value) == "task t2 seed 1: no evidence for constraint 'c'"


# --------------------------------------------------------------------------------- pass_rate


def test_pass_rate_counts_uncertain_as_not_passed() -> None:
    execs = [_ex("t", 0, _ev("a", P), _ev("b", U)), _ex("t", 1, _ev("a", P), _ev("b", F))]
    assert pass_rate(execs) == 0.5
    assert pass_rate([_ex("t", 0, _ev("a", P))]) == 1.0
    assert pass_rate([]) == 0.0 and pass_rate([_ex("t", 0)]) == 0.0


# ------------------------------------------------------- verdicts matched by constraint type


def test_status_of_falls_back_to_the_only_constraint_of_its_type() -> None:
    a = Attempt(0, Program(prompt="p"), (), {("count", "3 dogs"): "fail"}, False)
    assert a.status_of("count", "3 dogs", 1) == "fail"  # exact
    # the compiled prompt renamed the subject: one count constraint on each side lines up
    assert a.status_of("count", "three dogs", 1) == "fail"
    # two count constraints in the task: ambiguous, nothing guessed
    assert a.status_of("count", "three dogs", 2) is None
    assert a.status_of("object", "dog", 1) is None  # no verdict of that type
    two = Attempt(
        0, Program(prompt="p"), (), {("count", "a"): "fail", ("count", "b"): "pass"}, False
    )
    assert two.status_of("count", "c", 1) is None  # the attempt has two of the type


def test_an_attempt_whose_subject_changed_still_counts_as_a_first_attempt_failure() -> None:
    t = task("t3", "three dogs", ("n", "count", {"subject": "dog", "min_count": 3, "max_count": 3}))
    p0, p1 = Program(prompt="3 dogs", seed=0), Program(prompt="3 dogs", seed=1000)
    trace = [
        _cand(0),
        _extract(("r0", "count", "3 dogs")),  # the runtime's subject differs from the task's
        _verify(r0="fail"),
        _cand(1),
        _extract(("r0", "count", "3 dogs")),
        _verify(r0="pass"),
        {"responsibility": "middleware", "step": "select", "chosen": 1},
    ]
    [s] = aggregate([_ex("t3", 0, _ev("n", P), programs=[p0, p1], trace=trace)], [t], [0])
    assert (s.n_pass, s.n_first_fail, s.n_attempts_failed) == (1, 1, 1)
    o = pair_outcome(_ex("t3", 0, _ev("n", P), programs=[p0, p1], trace=trace), t)
    assert o.final == {"n": True} and o.first == {"n": False}
