"""Attribution's exact figures and messages (issue 16's mutation testing of
``trace/attribution.py``): normalisation, the noise rule's boundaries, evidence shares, the
weight's range, the combination formula, tie-breaking and rounding."""

from __future__ import annotations

import pytest

from evoharness.trace.attribution import (
    LABELS,
    NO_PATCH,
    RESAMPLE_MIN_FAILURE_RATE,
    RESAMPLE_MIN_TASKS,
    _normalize,
    attribute,
    evidence_scores,
    is_noise,
    pooled_failure_rate,
    worth_resampling,
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


def _cluster(*tids: str, kind: str = "failure") -> FailureCluster:
    return FailureCluster(
        cluster_id="k",
        responsibility_hint="tools",
        constraint_type="count",
        symptom="count_wrong",
        members=[(t, "c") for t in tids],
        kind=kind,
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


def test_the_resampling_floors_are_the_gates_and_a_tenth() -> None:
    # 5 changed tasks is the fewest the gate's exact test can call significant at its last
    # look (2^-5 = 0.031 < 0.0451, O'Brien-Fleming spending of 0.05 over three looks)
    assert RESAMPLE_MIN_TASKS == 5
    assert RESAMPLE_MIN_FAILURE_RATE == 0.1


def test_pooled_failure_rate_weights_members_by_their_decided_seeds() -> None:
    assert pooled_failure_rate([]) == 0.0
    assert pooled_failure_rate([_stats("a", 3, 1), _stats("b", 1, 3)]) == 0.5
    assert pooled_failure_rate([_stats("a", 7, 1), _stats("b", 1, 1)]) == 0.2


def test_resampling_needs_enough_distinct_tasks_and_failures() -> None:
    six = [_stats(f"t{i}", 3, 1) for i in range(6)]
    assert worth_resampling(six) and worth_resampling(six[:5])
    assert not worth_resampling(six[:4])
    # two constraints of one task are one task for the gate
    same_task = [*six[:4], six[0].model_copy(update={"constraint_id": "c2"})]
    assert not worth_resampling(same_task)
    # pooled failure rate at the floor counts, below it does not
    tenth = [_stats(f"t{i}", 9, 1) for i in range(6)]
    assert pooled_failure_rate(tenth) == 0.1 and worth_resampling(tenth)
    eleventh = [_stats(f"t{i}", 10, 1) for i in range(6)]
    assert not worth_resampling(eleventh)
    assert worth_resampling(six[:3], min_tasks=3)
    assert not worth_resampling(six, min_failure_rate=0.3)


def test_material_seed_noise_votes_middleware_not_no_patch() -> None:
    tids = [f"t{i}" for i in range(6)]
    by_key = {(t, "c"): _stats(t, 3, 1) for t in tids}
    by_key[("s", "c")] = _stats("s", 0, 4)  # one systematic member
    scores, reasons = evidence_scores(_cluster(*tids, "s"), by_key)
    assert scores == pytest.approx({NO_PATCH: 0.0, "middleware": 6 / 7, "tools": 1 / 7})
    assert reasons[2] == (
        "evidence: the noisy members span 6 task(s) at a pooled failure rate of 0.25; material "
        "(>= 5 tasks, >= 0.1): seed noise votes middleware (resampling with a verifier; the "
        "gate prices its extra generations)"
    )
    [a] = attribute([_cluster(*tids, "s")], list(by_key.values()), [], 0.5)
    assert a.chosen == "middleware" and a.scores[NO_PATCH] == 0.0
    # below the floor (four noisy tasks): the same noise is left alone
    few = {k: v for k, v in by_key.items() if k[0] not in ("t4", "t5")}
    scores, reasons = evidence_scores(_cluster(*tids[:4], "s"), few)
    assert scores == pytest.approx({NO_PATCH: 4 / 5, "tools": 1 / 5})
    assert "below the resampling floors" in reasons[2]
    [b] = attribute([_cluster(*tids[:4], "s")], list(few.values()), [], 0.5)
    assert b.chosen == NO_PATCH


def test_resampling_evidence_adds_to_a_middleware_hint_and_skips_cost_clusters() -> None:
    tids = [f"t{i}" for i in range(6)]
    by_key = {(t, "c"): _stats(t, 3, 1) for t in tids}
    mw = _cluster(*tids).model_copy(update={"responsibility_hint": "middleware"})
    scores, _ = evidence_scores(mw, by_key)
    assert scores == {NO_PATCH: 0.0, "middleware": 1.0}
    # a cost cluster is about generations a harness could stop spending, never more of them
    scores, reasons = evidence_scores(_cluster(*tids, kind="cost"), by_key)
    assert scores == {NO_PATCH: 1.0, "tools": 0.0}
    assert "or a cost cluster" in reasons[2]
