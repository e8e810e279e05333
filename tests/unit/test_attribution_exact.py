"""Attribution's exact figures and messages (issue 16's mutation testing of
``trace/attribution.py``): normalisation, the noise rule's boundaries, evidence shares, the
weight's range, the combination formula, tie-breaking and rounding."""

from __future__ import annotations

import pytest

from evoharness.trace.attribution import (
    LABELS,
    NO_PATCH,
    _normalize,
    attribute,
    evidence_scores,
    is_noise,
)
from evoharness.trace.models import Attribution, ConstraintStats, FailureCluster


def _stats(tid: str, n_pass: int, n_fail: int, **kw: object) -> ConstraintStats:
    n = n_pass + n_fail
    return ConstraintStats(
        task_id=tid,
        constraint_id="c",
        constraint_type="count",
        n_seeds=n,
        n_pass=n_pass,
        n_fail=n_fail,
        n_uncertain=0,
        failure_rate=n_fail / n if n else 0.0,
        **kw,  # type: ignore[arg-type]
    )


def _cluster(*tids: str) -> FailureCluster:
    return FailureCluster(
        cluster_id="k",
        responsibility_hint="tools",
        constraint_type="count",
        symptom="count_wrong",
        members=[(t, "c") for t in tids],
    )


def test_normalize_divides_by_the_total_and_is_uniform_without_mass() -> None:
    assert _normalize({"policy": 2.0, "tools": 6.0}) == {
        **dict.fromkeys(LABELS, 0.0),
        "policy": 0.25,
        "tools": 0.75,
    }
    assert _normalize({}) == dict.fromkeys(LABELS, 1.0 / 6)
    assert _normalize({"policy": -3.0}) == dict.fromkeys(LABELS, 1.0 / 6)


def test_noise_needs_a_passing_seed_and_a_failing_one() -> None:
    # never passed: not a flip, even when any failure rate would count as noise
    assert not is_noise(_stats("a", 0, 2), max_failure_rate=1.0)
    # one pass and one fail of one unchanged program: a flip
    assert is_noise(_stats("a", 1, 1), max_failure_rate=0.5)
    assert not is_noise(_stats("a", 1, 1), max_failure_rate=0.49)
    assert is_noise(_stats("a", 3, 1))  # 1 of 4 seeds: the default 0.25


def test_evidence_shares_and_reasons_are_exact() -> None:
    scores, reasons = evidence_scores(_cluster("x"), {})
    assert scores == {"tools": 1.0}
    assert reasons == ["no member stats; evidence follows the hint"]
    by_key = {("n", "c"): _stats("n", 3, 1), ("s", "c"): _stats("s", 0, 4)}
    scores, reasons = evidence_scores(_cluster("n", "s"), by_key)
    assert scores == {NO_PATCH: 0.5, "tools": 0.5}
    assert reasons[1] == (
        "evidence: 1/2 members fail systematically (hint tools, symptom count_wrong)"
    )


def test_the_weight_is_checked_and_combines_localizer_and_evidence() -> None:
    stats = [_stats("s", 0, 4)]  # systematic: evidence says tools
    loc = [Attribution(cluster_id="k", scores={"policy": 1.0}, chosen="policy", reasons=["a", "b"])]
    for w in (0.0, 1.0):
        attribute([_cluster("s")], stats, loc, w)
    for bad in (-0.1, 1.5):
        with pytest.raises(ValueError, match=r"w_localizer=.* must be in \[0, 1\]"):
            attribute([_cluster("s")], stats, loc, bad)
    [a] = attribute([_cluster("s")], stats, loc, 0.25)
    assert a.scores["policy"] == 0.25 and a.scores["tools"] == 0.75 and a.chosen == "tools"
    assert a.reasons[0] == "localizer chose policy: a; b"
    # a tie goes to the earlier label (policy before tools)
    [t] = attribute([_cluster("s")], stats, loc, 0.5)
    assert t.scores["policy"] == t.scores["tools"] == 0.5 and t.chosen == "policy"
    [e] = attribute([_cluster("s")], stats, [], 0.5)
    assert e.reasons[0] == "no localizer score for this cluster; evidence only"


def test_scores_are_rounded_to_six_decimals() -> None:
    stats = [_stats("s", 0, 4)]
    loc = [Attribution(cluster_id="k", scores={"policy": 1.0, "skills": 1.0}, chosen="policy")]
    [a] = attribute([_cluster("s")], stats, loc, 2 / 3)
    # 2/3 of the localizer's half for policy: 1/3
    assert a.scores["policy"] == 0.333333 and a.scores["tools"] == 0.333333
