"""Sampled traffic (issue 34): the prompt filter, the stored batch format, task sets built from
traffic, the drift measure, and the runtime's sampler with a real local artifact store."""

from __future__ import annotations

import datetime as dt
from types import SimpleNamespace
from typing import Any

import pytest

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.local_store import LocalArtifactStore
from evoharness.ports import Cost
from evoharness.runtime.extract import RuleExtractor
from evoharness.tasks.models import Constraint, ConstraintType
from evoharness.traffic.drift import TrafficProfile, drift, failure_rates, js_distance
from evoharness.traffic.records import (
    PromptFilter,
    TrafficReadError,
    TrafficRecord,
    TrafficVerdict,
    batch_key,
    dump_batch,
    load_batch,
    read_window,
    reference_key,
)
from evoharness.traffic.tasks import family_of, tasks_from_records
from services.common import metrics
from services.runtime.sampling import TrafficSampler, TrafficSection

T0 = dt.datetime(2026, 12, 6, 23, 59, 0, tzinfo=dt.UTC)
EX = RuleExtractor()


def _record(prompt: str, when: dt.datetime = T0, fail: bool = False, **kw: Any) -> TrafficRecord:
    cons = EX.extract(prompt)
    status = "fail" if fail else "pass"
    return TrafficRecord(
        time=when,
        channel=kw.get("channel", "prod"),
        registration_id=kw.get("registration_id", "reg-1"),
        harness_id="h-1",
        prompt=prompt,
        constraints=cons,
        verdicts=[
            TrafficVerdict(constraint_id=c.constraint_id, type=c.type.value, status=status)
            for c in cons
        ],
        generations=1,
    )


def _sample_value(name: str, labels: dict[str, str]) -> float:
    from prometheus_client import REGISTRY

    return REGISTRY.get_sample_value(name, labels) or 0.0


@pytest.mark.parametrize(
    ("prompt", "reason"),
    [
        ("a photo of a dog", None),
        ("three cats on a 1980s sofa", None),
        ("a sign saying 'route 66, exit 1234'", None),  # digit runs under 7 are kept
        ("a cat, for jane.doe@example.com", "redacted"),
        ("a poster with +44 20 7946 0958 on it", "redacted"),
        ("a dog, call me at (555) 123-4567", "redacted"),
        ("x" * 201, "too_long"),
    ],
)
def test_prompt_filter(prompt: str, reason: str | None) -> None:
    assert PromptFilter(max_chars=200).reason(prompt) == reason


def test_prompt_filter_names_a_bad_pattern() -> None:
    with pytest.raises(ValueError, match=r"redact_patterns\[1\]"):
        PromptFilter(10, [r"ok", r"(unclosed"])


def test_batches_round_trip_and_name_the_bad_line() -> None:
    recs = [_record("a photo of a dog"), _record("two red apples")]
    assert load_batch(dump_batch(recs), "k") == recs
    bad = dump_batch(recs[:1]) + b'{"prompt": "x"}\n'
    with pytest.raises(TrafficReadError, match=r"^traffic/x\.jsonl:2: not a traffic record"):
        load_batch(bad, "traffic/x.jsonl")
    key = batch_key("traffic", "prod", T0)
    assert key.startswith("traffic/prod/2026-12-06/235900.000000-") and key.endswith(".jsonl")


def test_read_window_reads_only_the_days_asked(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = LocalArtifactStore(tmp_path)
    days = [T0 - dt.timedelta(days=2), T0 - dt.timedelta(days=1), T0]
    for i, when in enumerate(days):
        store.put(batch_key("traffic", "prod", when), dump_batch([_record(f"{i + 2} cats", when)]))
    store.put(batch_key("traffic", "other", T0), dump_batch([_record("a dog", T0)]))
    recs, batches = read_window(store, "traffic", "prod", days[1].date(), T0.date())
    assert [r.prompt for r in recs] == ["3 cats", "4 cats"] and batches == 2
    with pytest.raises(ValueError, match="before"):
        read_window(store, "traffic", "prod", T0.date(), days[0].date())


def test_tasks_from_traffic_deduplicate_and_read_with_the_fixed_extractor() -> None:
    recs = [
        _record("A photo of two red apples.", T0),
        _record("a photo of two red apples", T0 + dt.timedelta(minutes=1)),
        _record("a photo of a dog", T0 - dt.timedelta(minutes=1)),
        _record("a cat to the left of a dog", T0 + dt.timedelta(minutes=2)),
        _record("hello", T0 + dt.timedelta(minutes=3)),  # nothing checkable
    ]
    tasks, m = tasks_from_records(recs, channel="prod", since=T0.date(), until=T0.date())
    assert [t.prompt for t in tasks] == [
        "a photo of a dog",
        "A photo of two red apples.",
        "a cat to the left of a dog",
    ]
    assert m.records == 5 and m.unique_prompts == 4 and m.tasks == 3
    assert len(m.dropped_nothing_checkable) == 1
    apples = tasks[1]
    assert apples.metadata["seen"] == 2 and apples.metadata["source"] == "traffic:prod"
    assert apples.task_id.startswith("traffic-") and apples.task_family == "color+count"
    assert {c.type for c in apples.constraints} >= {ConstraintType.count, ConstraintType.color}
    assert tasks[0].task_family == "single_object" and tasks[2].task_family == "position"
    again, _ = tasks_from_records(recs[::-1], channel="prod", since=T0.date(), until=T0.date())
    assert {t.task_id for t in again} == {t.task_id for t in tasks}  # ids from the prompt
    assert m.profile.n == 3 and m.profile.kinds == {
        "object": 2,
        "count": 1,
        "color": 1,
        "position": 1,
    }


def test_family_of_names_only_objects_by_how_many() -> None:
    obj = [Constraint(constraint_id="o", type=ConstraintType.object, subject="dog")]
    two = obj + [Constraint(constraint_id="p", type=ConstraintType.object, subject="cat")]
    assert family_of(obj) == "single_object" and family_of(two) == "multi_object"


def test_drift_is_zero_for_the_same_mix_and_grows_with_the_shift() -> None:
    singles = [EX.extract(f"a photo of a {c}") for c in ("dog", "cat", "car", "cup")]
    counts = [EX.extract(f"a photo of {n} {c}s") for n in ("two", "three") for c in ("dog", "cat")]
    ref = TrafficProfile.of(singles)
    assert drift(ref, TrafficProfile.of(singles)) == {"kinds": 0.0, "classes": 0.0}
    half = drift(ref, TrafficProfile.of(singles[:2] + counts[:2]))["kinds"]
    full = drift(ref, TrafficProfile.of(counts))["kinds"]
    assert 0 < half < full <= 1
    assert js_distance({"a": 1}, {"b": 5}) == pytest.approx(1.0)
    assert js_distance({}, {"b": 5}) is None


def test_failure_rates_ignore_uncertain_verdicts() -> None:
    r = _record("two red apples", fail=True)
    r.verdicts.append(TrafficVerdict(constraint_id="u", type="position", status="uncertain"))
    ok = _record("three dogs")
    rates = failure_rates([r, ok])
    assert rates["count"] == pytest.approx(0.5) and "position" not in rates


# --------------------------------------------------------------------------- the sampler


def _result(prompt: str, status: EvidenceStatus = EvidenceStatus.passed) -> Any:
    cons = EX.extract(prompt)
    ev = [Evidence(constraint_id=c.constraint_id, status=status, confidence=0.9) for c in cons]
    return SimpleNamespace(constraints=cons, evidence=ev, cost=Cost(generator_calls=2))


def _section(**kw: Any) -> TrafficSection:
    base: dict[str, Any] = {"channels": ["prod"], "rate": 1.0, "seed": 0, "flush_seconds": 0.2}
    return TrafficSection(**{**base, **kw})


def test_sampler_stores_sampled_requests_with_their_evidence(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = LocalArtifactStore(tmp_path)
    s = TrafficSampler(_section(drift_window=20), store, clock=lambda: T0)
    s.start()
    try:
        before = _sample_value("evoharness_traffic_sampled_total", {"channel": "prod"})
        for i in range(5):
            assert s.offer("prod", f"a photo of {i + 2} dogs", "reg-1", "h-1", _result("two dogs"))
        assert not s.offer("staging", "a dog", "reg-1", "h-1", _result("a dog"))  # not opted in
        assert s.flush(10)
    finally:
        s.close()
    recs, _ = read_window(store, "traffic", "prod", T0.date(), T0.date())
    assert len(recs) == 5 and all(r.generations == 2 for r in recs)
    assert recs[0].verdicts and {v.status for v in recs[0].verdicts} == {"pass"}
    after = _sample_value("evoharness_traffic_sampled_total", {"channel": "prod"})
    assert after - before == 5
    assert store.list_keys("traffic/staging") == []


def test_sampler_sets_drift_against_the_channel_reference(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = LocalArtifactStore(tmp_path)
    ref = TrafficProfile.of([EX.extract(f"a photo of a {c}") for c in ("dog", "cat", "car")])
    store.put(reference_key("traffic", "drifty"), ref.model_dump_json().encode())
    s = TrafficSampler(_section(channels=["drifty"], drift_window=10), store, clock=lambda: T0)
    s.start()
    try:
        for c in ("dog", "cat", "car"):
            s.offer("drifty", f"a photo of a {c}", "r", "h", _result(f"a photo of a {c}"))
        assert s.flush(10)
        low = _sample_value(
            "evoharness_traffic_drift", {"channel": "drifty", "distribution": "kinds"}
        )
        for n in range(2, 12):
            p = f"a photo of {n} cats"
            s.offer("drifty", p, "r", "h", _result(p, EvidenceStatus.failed))
        assert s.flush(10)
    finally:
        s.close()
    high = _sample_value("evoharness_traffic_drift", {"channel": "drifty", "distribution": "kinds"})
    assert low == pytest.approx(0.0) and high > 0.3
    fail = _sample_value(
        "evoharness_traffic_failure_rate", {"channel": "drifty", "feature": "count"}
    )
    assert fail == pytest.approx(1.0)


def test_a_full_queue_drops_and_counts_and_never_blocks(tmp_path) -> None:  # type: ignore[no-untyped-def]
    s = TrafficSampler(_section(channels=["full"], queue_size=2), LocalArtifactStore(tmp_path))
    # the writer is not started: nothing drains the queue
    dropped = {"channel": "full", "reason": "queue_full"}
    before = _sample_value("evoharness_traffic_dropped_total", dropped)
    results = [s.offer("full", "a dog", "r", "h", _result("a dog")) for _ in range(5)]
    assert results == [True, True, False, False, False]
    assert _sample_value("evoharness_traffic_dropped_total", dropped) - before == 3


def test_filtered_prompts_are_counted_not_stored(tmp_path) -> None:  # type: ignore[no-untyped-def]
    store = LocalArtifactStore(tmp_path)
    s = TrafficSampler(_section(channels=["pii"], max_prompt_chars=40), store)
    s.start()
    try:
        assert not s.offer("pii", "a dog for bob@example.org", "r", "h", _result("a dog"))
        assert not s.offer("pii", "a dog " * 20, "r", "h", _result("a dog"))
        assert s.flush(5)
    finally:
        s.close()
    assert store.list_keys("traffic/pii") == []
    for reason in ("redacted", "too_long"):
        assert (
            _sample_value("evoharness_traffic_dropped_total", {"channel": "pii", "reason": reason})
            >= 1
        )


def test_sampling_rate_is_honoured() -> None:
    s = TrafficSampler(_section(rate=0.25, seed=3), store=object())
    hits = sum(s.wants("prod") for _ in range(4000))
    assert abs(hits / 4000 - 0.25) < 0.03  # binomial sd 0.0068: > 4 sd
    off = TrafficSampler(_section(rate=0.0), store=object())
    assert not any(off.wants("prod") for _ in range(100))
    assert metrics.TRAFFIC_SAMPLED is not None


# --------------------------------------------------------------------------- canary


def _arm(reg: str, passed: int, failed: int) -> list[TrafficRecord]:
    return [
        _record("two red apples", registration_id=reg, fail=i >= passed)
        for i in range(passed + failed)
    ]


def test_a_worse_canary_is_found_and_an_equal_one_is_not() -> None:
    from evoharness.traffic.canary import compare_canary

    worse = compare_canary(_arm("can", 20, 40) + _arm("st", 45, 15), "can", "st")
    assert worse.n_canary == worse.n_stable == 60
    assert worse.pass_rate_canary == pytest.approx(1 / 3) and worse.pass_rate_stable == 0.75
    assert worse.p_value < 0.001 and worse.worse
    same = compare_canary(_arm("can", 44, 16) + _arm("st", 45, 15), "can", "st")
    assert not same.worse and same.p_value > 0.3
    better = compare_canary(_arm("can", 55, 5) + _arm("st", 45, 15), "can", "st")
    assert not better.worse
    small = compare_canary(_arm("can", 0, 10) + _arm("st", 10, 0), "can", "st")
    assert small.p_value < 0.001 and not small.enough and not small.worse
    with pytest.raises(ValueError, match="same registration"):
        compare_canary([], "a", "a")


def test_requests_with_nothing_decided_are_left_out() -> None:
    from evoharness.traffic.canary import request_passed

    r = _record("two red apples")
    assert request_passed(r) is True
    for v in r.verdicts:
        v.status = "uncertain"
    assert request_passed(r) is None
    r.verdicts[0].status = "pass"
    assert request_passed(r) is False  # a constraint left undecided: not a pass


def test_only_requests_served_since_the_promotion_count() -> None:
    """Before the promotion the stable arm served other traffic (here: it failed everything);
    with ``since`` those requests are left out and the canary is no longer judged against
    them."""
    from evoharness.traffic.canary import compare_canary

    later = T0 + dt.timedelta(hours=1)
    before = [_record("two red apples", T0, fail=True, registration_id="st") for _ in range(60)]
    after = [
        _record("two red apples", later, fail=i >= k, registration_id=reg)
        for reg, k in (("can", 20), ("st", 45))
        for i in range(60)
    ]
    mixed = compare_canary(before + after, "can", "st")
    assert mixed.n_stable == 120 and not mixed.worse  # the old failures hide a worse canary
    since = compare_canary(before + after, "can", "st", since=later)
    assert since.n_stable == since.n_canary == 60 and since.worse
    lo, hi = since.ci95_canary
    assert lo < 1 / 3 < hi and since.ci95_stable[0] > hi  # the Wilson intervals do not overlap
    with pytest.raises(ValueError, match="time zone"):
        compare_canary(after, "can", "st", since=dt.datetime(2026, 12, 1))


def test_fisher_less_is_the_hypergeometric_tail() -> None:
    """One-sided Fisher by hand: 0 of 3 passes in A against 3 of 3 in B has probability
    1 / C(6, 3) = 0.05 under the margins; it is symmetric in which side is called less."""
    from evoharness.trace.gate_stats import fisher_less

    assert fisher_less(0, 3, 3, 3) == pytest.approx(0.05)
    assert fisher_less(3, 3, 0, 3) == pytest.approx(1.0)
    assert fisher_less(2, 4, 2, 4) > 0.5
    assert fisher_less(0, 0, 5, 5) == 1.0
    with pytest.raises(ValueError, match="sample a has 4 passed of 3"):
        fisher_less(4, 3, 0, 3)


def test_a_scheduled_run_refuses_bad_canary_check_settings_at_creation() -> None:
    """A bad threshold or a field the run sets itself is refused when the schedule is
    created, not after an evolution has run."""
    from pydantic import ValidationError

    from workflows.traffic_evolution import TrafficEvolutionInput

    assert TrafficEvolutionInput(channel="p", canary_check={"min_requests": 50}).canary_check
    assert TrafficEvolutionInput(channel="p", canary_check=None).canary_check is None
    with pytest.raises(ValidationError, match="alpha"):
        TrafficEvolutionInput(channel="p", canary_check={"alpha": 2})
    with pytest.raises(ValidationError, match="set by the run"):
        TrafficEvolutionInput(channel="p", canary_check={"channel_version": 3})
