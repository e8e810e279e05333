"""Registrations, content addressing, channels, promotion, rollback and canary weights,
on SQLite and PostgreSQL (see conftest)."""

from __future__ import annotations

import datetime as dt

import pytest

from evoharness.canonical import sha256_hex
from evoharness.harness.io import HarnessError, canonical_bytes, harness_id, load_dir
from evoharness.harness.patch import apply_patch
from evoharness.harness.schema import Harness
from harness_registry import (
    ChannelMove,
    InvalidArgument,
    Lineage,
    NotFound,
    Registry,
    StalePromotion,
)

PATCH = {
    "responsibility": "policy",
    "ops": [{"op": "replace", "path": "/policy/params/guidance_scale", "value": 9.0}],
    "rationale": "adherence",
}


@pytest.fixture
def baseline(repo_root) -> Harness:  # type: ignore[no-untyped-def]
    return load_dir(repo_root / "harnesses" / "baseline")


def test_put_is_content_addressed_and_idempotent(registry: Registry, baseline: Harness) -> None:
    first = registry.put(baseline, Lineage(registered_by="alice"))
    assert first.created
    reg = first.registration
    assert reg.harness_id == harness_id(baseline)
    assert reg.created_at.tzinfo is not None and reg.created_at.utcoffset() == dt.timedelta(0)
    blob = registry.store.get(reg.blob_key)
    assert blob == canonical_bytes(baseline)
    assert sha256_hex(blob) == reg.harness_id

    again = registry.put(baseline, Lineage(registered_by="alice", note="ignored note"))
    assert not again.created
    assert again.registration.registration_id == reg.registration_id
    assert registry.count()["registrations"] == 1

    other = registry.put(baseline, Lineage(registered_by="bob"))
    assert other.created
    assert other.registration.registration_id != reg.registration_id
    assert other.registration.harness_id == reg.harness_id
    counts = registry.count()
    assert counts["registrations"] == 2 and counts["harness_contents"] == 1
    assert registry.get_harness(other.registration.registration_id) == baseline


def test_lineage_is_recorded(registry: Registry, baseline: Harness) -> None:
    parent = registry.put(baseline).registration
    child_h = apply_patch(baseline, PATCH)
    child = registry.put(
        child_h,
        Lineage(
            parent_id=parent.registration_id,
            patch=PATCH,
            round_report_ref="s3://runs/r1/round-1.json",
            workflow_id="evolution-42",
            registered_by="workflow:evolution-42",
        ),
    ).registration
    got = registry.get(child.registration_id)
    assert got.parent_id == parent.registration_id
    assert got.patch is not None and got.patch["ops"] == PATCH["ops"]
    assert got.round_report_ref == "s3://runs/r1/round-1.json"
    assert got.workflow_id == "evolution-42"
    assert registry.list(parent_id=parent.registration_id) == [got]
    assert [r.registration_id for r in registry.list()] == [
        child.registration_id,
        parent.registration_id,
    ]
    d = registry.diff(parent.registration_id, child.registration_id)
    assert d == {"policy": [PATCH["ops"][0]]}


def test_put_rejects_unknown_parent_and_bad_patch(registry: Registry, baseline: Harness) -> None:
    with pytest.raises(NotFound, match="parent_id"):
        registry.put(baseline, Lineage(parent_id="reg-nope"))
    with pytest.raises(InvalidArgument, match="lineage.patch"):
        registry.put(baseline, Lineage(patch={"responsibility": "generator", "ops": []}))
    assert registry.count()["registrations"] == 0


def test_tampered_blob_is_detected(registry: Registry, baseline: Harness) -> None:
    reg = registry.put(baseline).registration
    registry.store.put(reg.blob_key, canonical_bytes(baseline.model_copy(update={"name": "x"})))
    with pytest.raises(HarnessError, match="does not hash"):
        registry.get_harness(reg.registration_id)


def _three(registry: Registry, baseline: Harness) -> list[str]:
    ids = []
    for i in range(3):
        h = baseline.model_copy(update={"description": f"variant {i}"})
        ids.append(registry.put(h, Lineage(registered_by="t")).registration.registration_id)
    return ids


def test_promote_stale_rollback_history(registry: Registry, baseline: Harness) -> None:
    a, b, c = _three(registry, baseline)
    with pytest.raises(NotFound):
        registry.resolve("prod")
    s1 = registry.promote("prod", a, expected_registration_id=None, move=ChannelMove(actor="ci"))
    assert (s1.registration_id, s1.version) == (a, 1)
    s2 = registry.promote("prod", b, expected_registration_id=a)
    assert (s2.registration_id, s2.version) == (b, 2)

    with pytest.raises(StalePromotion) as exc:
        registry.promote("prod", c, expected_registration_id=a)
    assert exc.value.current_registration_id == b and exc.value.current_version == 2
    with pytest.raises(StalePromotion):  # channel exists: "create" expectation is stale
        registry.promote("prod", c, expected_registration_id=None)
    with pytest.raises(StalePromotion):
        registry.promote("prod", c, expected_registration_id=b, expected_version=1)
    assert registry.resolve("prod").registration_id == b
    assert len(registry.history("prod")) == 2

    rb = registry.rollback("prod", expected_registration_id=b, actor="oncall")
    assert rb.registration_id == a and rb.version == 3
    hist = registry.history("prod")
    assert [(h.version, h.action, h.from_registration_id, h.registration_id) for h in hist] == [
        (3, "rollback", b, a),
        (2, "promote", a, b),
        (1, "promote", None, a),
    ]
    assert all(h.created_at.utcoffset() == dt.timedelta(0) for h in hist)
    with pytest.raises(NotFound, match="'staging' has no registration"):  # as resolve says
        registry.history("staging")
    with pytest.raises(NotFound, match="'staging' has no registration"):
        registry.resolve("staging")
    with pytest.raises(NotFound):  # a is the first registration prod served: nothing before
        registry.rollback("prod", expected_registration_id=a)


def test_second_rollback_walks_back_one_more_step(registry: Registry, baseline: Harness) -> None:
    a, b, c = _three(registry, baseline)
    registry.promote("prod", a, expected_registration_id=None)
    registry.promote("prod", b, expected_registration_id=a)
    registry.promote("prod", c, expected_registration_id=b)
    registry.promote(
        "prod", c, expected_registration_id=c, canary_registration_id=a, canary_weight=0.1
    )
    assert registry.rollback("prod", expected_registration_id=c).registration_id == b
    assert registry.rollback("prod", expected_registration_id=b).registration_id == a
    with pytest.raises(NotFound):
        registry.rollback("prod", expected_registration_id=a)
    registry.promote("prod", c, expected_registration_id=a)  # a new promotion, then back
    assert registry.rollback("prod", expected_registration_id=c).registration_id == a


def test_canary_weights(registry: Registry, baseline: Harness) -> None:
    a, b, _ = _three(registry, baseline)
    registry.promote("prod", a, expected_registration_id=None)
    st = registry.promote(
        "prod", a, expected_registration_id=a, canary_registration_id=b, canary_weight=0.1
    )
    assert st.canary_registration_id == b and st.canary_weight == pytest.approx(0.1)
    res = registry.resolve("prod")
    assert res == st.model_copy(update={"updated_at": res.updated_at})
    assert res.pick(0.05) == b and res.pick(0.5) == a and res.pick(0.1) == a
    with pytest.raises(InvalidArgument, match="canary_weight"):
        registry.promote("prod", a, expected_registration_id=a, canary_weight=0.5)
    with pytest.raises(InvalidArgument, match="outside"):
        registry.promote(
            "prod", a, expected_registration_id=a, canary_registration_id=b, canary_weight=1.5
        )
    with pytest.raises(InvalidArgument, match="equals"):
        registry.promote(
            "prod", a, expected_registration_id=a, canary_registration_id=a, canary_weight=0.5
        )
    with pytest.raises(InvalidArgument, match="channel"):
        registry.promote("Prod!", a, expected_registration_id=None)
    with pytest.raises(NotFound, match="reg-missing"):
        registry.promote("dev", "reg-missing", expected_registration_id=None)
    # finishing the canary: promote it fully
    done = registry.promote("prod", b, expected_registration_id=a, expected_version=2)
    assert done.canary_registration_id is None and done.canary_weight == 0.0
    assert [c.channel for c in registry.channels()] == ["prod"]
