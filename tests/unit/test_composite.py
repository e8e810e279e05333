"""Composite verifier: routing per constraint type, thresholds and merge logic; and the pure
judgements of the detector (OWLv2) and OCR backends."""

from __future__ import annotations

from collections.abc import Sequence

import pytest
from prometheus_client import REGISTRY

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.tasks.models import Constraint, ConstraintType
from evoharness.tasks.position import relative_position as relations
from services.verification.backends.base import Instrumented, ScoreThresholds
from services.verification.backends.composite import CompositeBackend, CompositeSettings
from services.verification.backends.ocr import best_similarity, normalize_text
from services.verification.backends.owlv2 import Detection, judge, nms

OBJ = Constraint(constraint_id="o", type="object", subject="dog")
CNT = Constraint(constraint_id="n", type="count", subject="cat", min_count=2, max_count=2)
POS = Constraint(constraint_id="p", type="position", subject="dog", relation="left of", value="cat")
NEG = Constraint(constraint_id="x", type="negative", subject="car")
COL = Constraint(constraint_id="c", type="color", subject="dog", value="red")
TXT = Constraint(constraint_id="t", type="text", subject="text", value="open")
ALL = [OBJ, CNT, POS, NEG, COL, TXT]


class Scripted:
    """A stand-in backend returning scripted (status, confidence) per constraint id."""

    def __init__(self, name: str, verdicts: dict[str, tuple[str, float]]):
        self.name = name
        self.capabilities = frozenset(t.value for t in ConstraintType)
        self.verdicts = verdicts
        self.calls: list[list[str]] = []

    def verify(
        self, png: bytes, constraints: Sequence[Constraint], prompt: str = ""
    ) -> list[Evidence]:
        self.calls.append([c.constraint_id for c in constraints])
        out = []
        for c in constraints:
            status, conf = self.verdicts.get(c.constraint_id, ("uncertain", 0.0))
            out.append(
                Evidence(
                    constraint_id=c.constraint_id,
                    status=status,
                    confidence=conf,
                    note=f"{self.name} says {status}",
                    decided_by=self.name,
                    observed={"by": self.name},
                )
            )
        return out


def composite(det, ocr, vlm, **kw) -> CompositeBackend:
    return CompositeBackend(CompositeSettings(**kw), {"owlv2": det, "ocr": ocr, "vlm": vlm})


def test_routing_per_constraint_type():
    det = Scripted("owlv2", {k: ("pass", 0.9) for k in "onpx"})
    ocr = Scripted("ocr", {"t": ("fail", 0.8)})
    vlm = Scripted("vlm", {"c": ("pass", 0.95)})
    ev = composite(det, ocr, vlm).verify(b"png", ALL)
    assert [e.constraint_id for e in ev] == [c.constraint_id for c in ALL]
    by = {e.constraint_id: e for e in ev}
    for cid in "onpx":
        assert by[cid].decided_by == "composite/owlv2" and by[cid].status is EvidenceStatus.passed
    assert by["t"].decided_by == "composite/ocr" and by["t"].status is EvidenceStatus.failed
    assert by["c"].decided_by == "composite/vlm"
    assert "routed color → vlm" in by["c"].note
    # one batched call per backend, only with the constraints it owns
    assert det.calls == [["o", "n", "p", "x"]] and ocr.calls == [["t"]] and vlm.calls == [["c"]]


def test_low_confidence_falls_back_then_uncertain():
    det = Scripted("owlv2", {"o": ("pass", 0.35), "n": ("uncertain", 0.2)})
    vlm = Scripted("vlm", {"o": ("pass", 0.9), "n": ("fail", 0.3)})
    ev = composite(det, Scripted("ocr", {}), vlm).verify(b"png", [OBJ, CNT])
    assert ev[0].status is EvidenceStatus.passed and ev[0].decided_by == "composite/vlm"
    assert "fallback vlm" in ev[0].note and "owlv2 pass (0.35" in ev[0].note
    # the fallback is not confident either: uncertain, never a guess
    assert ev[1].status is EvidenceStatus.uncertain and ev[1].decided_by == "composite"
    assert ev[1].confidence == 0.0
    assert vlm.calls == [["o", "n"]]


def test_disagreement_is_uncertain_and_not_escalated():
    det = Scripted("owlv2", {"o": ("pass", 0.9)})
    vlm = Scripted("vlm", {"o": ("fail", 0.9)})
    settings = dict(routes={"object": ["owlv2", "vlm"]}, fallbacks={})
    ev = composite(det, Scripted("ocr", {}), vlm, **settings).verify(b"png", [OBJ])
    assert ev[0].status is EvidenceStatus.uncertain
    assert "disagreement" in ev[0].note and "owlv2 pass" in ev[0].note and "vlm fail" in ev[0].note


def test_agreement_takes_lowest_confidence_and_require_modes():
    det = Scripted("owlv2", {"o": ("pass", 0.9)})
    vlm = Scripted("vlm", {"o": ("pass", 0.6)})
    ev = composite(
        det, Scripted("ocr", {}), vlm, routes={"object": ["owlv2", "vlm"]}, fallbacks={}
    ).verify(b"", [OBJ])
    assert ev[0].decided_by == "composite/owlv2+vlm" and ev[0].confidence == pytest.approx(0.6)
    assert ev[0].observed == {"owlv2": {"by": "owlv2"}, "vlm": {"by": "vlm"}}
    vlm_unsure = Scripted("vlm", {"o": ("uncertain", 0.5)})
    kw = dict(routes={"object": ["owlv2", "vlm"]}, fallbacks={})
    strict = composite(det, Scripted("ocr", {}), vlm_unsure, **kw).verify(b"", [OBJ])
    assert (
        strict[0].status is EvidenceStatus.uncertain
        and "not every routed backend" in strict[0].note
    )
    lenient = composite(det, Scripted("ocr", {}), vlm_unsure, require="any", **kw).verify(
        b"", [OBJ]
    )
    assert lenient[0].status is EvidenceStatus.passed and lenient[0].decided_by == "composite/owlv2"


def test_thresholds_per_type():
    det = Scripted("owlv2", {"o": ("pass", 0.55), "n": ("pass", 0.55)})
    kw = dict(fallbacks={}, min_confidence=0.5, min_confidence_by_type={"count": 0.6})
    ev = composite(det, Scripted("ocr", {}), Scripted("vlm", {}), **kw).verify(b"", [OBJ, CNT])
    assert ev[0].status is EvidenceStatus.passed
    assert ev[1].status is EvidenceStatus.uncertain


def test_unrouted_type_and_misconfiguration():
    ev = composite(
        Scripted("owlv2", {}),
        Scripted("ocr", {}),
        Scripted("vlm", {}),
        routes={"object": ["owlv2"]},
        fallbacks={},
    ).verify(b"", [TXT])
    assert (
        ev[0].status is EvidenceStatus.uncertain and "no backend is routed for text" in ev[0].note
    )
    with pytest.raises(ValueError, match="not configured"):
        CompositeBackend(
            CompositeSettings(routes={"object": ["yolo"]}, fallbacks={}),
            {"owlv2": Scripted("owlv2", {})},
        )
    with pytest.raises(ValueError):
        ScoreThresholds(pass_score=0.2, reject_score=0.5)


def test_instrumented_records_metrics_and_checks_shape():
    inner = Scripted("unit-backend", {"o": ("pass", 0.9)})
    before = (
        REGISTRY.get_sample_value(
            "evoharness_verdicts_total", {"backend": "unit-backend", "status": "pass"}
        )
        or 0
    )
    Instrumented(inner).verify(b"", [OBJ])
    assert (
        REGISTRY.get_sample_value(
            "evoharness_verdicts_total", {"backend": "unit-backend", "status": "pass"}
        )
        == before + 1
    )
    assert (
        REGISTRY.get_sample_value(
            "evoharness_verifier_latency_seconds_count", {"backend": "unit-backend"}
        )
        >= 1
    )

    class Broken(Scripted):
        def verify(self, png, constraints, prompt=""):
            return []

    with pytest.raises(RuntimeError, match="returned evidence"):
        Instrumented(Broken("broken", {})).verify(b"", [OBJ])


# ------------------------------------------------------------------ detector judgements

TH = ScoreThresholds(pass_score=0.3, reject_score=0.1)


def d(score, box=(0.1, 0.1, 0.3, 0.3)):
    return Detection(score, box)


@pytest.mark.parametrize(
    ("scores", "status"),
    [([0.8], "pass"), ([0.2], "uncertain"), ([0.05], "fail"), ([], "fail")],
)
def test_judge_object_and_negative(scores, status):
    dets = {"dog": [d(s) for s in scores], "car": [d(s) for s in scores]}
    assert judge(OBJ, dets, TH).status.value == status
    mirror = {"pass": "fail", "fail": "pass", "uncertain": "uncertain"}[status]
    assert judge(NEG, dets, TH).status.value == mirror


@pytest.mark.parametrize(
    ("scores", "status", "note"),
    [
        ([0.9, 0.8], "pass", "counted 2"),
        ([0.9, 0.8, 0.05], "pass", "counted 2"),
        ([0.9, 0.8, 0.7], "fail", "more than 2"),
        ([0.9], "fail", "fewer than 2"),
        ([0.9, 0.2], "uncertain", "between 1 and 2"),
        ([0.9, 0.8, 0.2], "uncertain", "between 2 and 3"),
    ],
)
def test_judge_count(scores, status, note):
    dets = {"cat": [d(s, (0.1 * i, 0.1, 0.1 * i + 0.05, 0.2)) for i, s in enumerate(scores)]}
    e = judge(CNT, dets, TH)
    assert e.status.value == status and note in e.note


def test_judge_count_uses_genevals_counting_threshold():
    """GenEval counts only boxes scored >= 0.9 for its counting tag (COUNTING_THRESHOLD,
    evaluate_images.py): "two cats" scored 0.95, 0.93, 0.5 is correct (issue 14 item 18)."""
    from services.verification.backends.owlv2 import Owlv2Settings

    dets = {
        "cat": [d(s, (0.2 * i, 0.1, 0.2 * i + 0.1, 0.2)) for i, s in enumerate([0.95, 0.93, 0.5])]
    }
    two_cats = CNT.model_copy(update={"subject": "cat", "min_count": 2, "max_count": 2})
    s = Owlv2Settings(model_path="unused")
    e = judge(two_cats, dets, s.thresholds, count_th=s.counting_thresholds)
    assert e.status is EvidenceStatus.passed and "counted 2" in e.note
    assert judge(two_cats, dets, s.thresholds).status is EvidenceStatus.failed  # 0.3 counts 3


def test_judge_position_geneval_rule():
    left, right = (0.05, 0.4, 0.25, 0.6), (0.7, 0.4, 0.9, 0.6)
    assert (
        judge(POS, {"dog": [d(0.9, left)], "cat": [d(0.9, right)]}, TH).status
        is EvidenceStatus.passed
    )
    assert (
        judge(POS, {"dog": [d(0.9, right)], "cat": [d(0.9, left)]}, TH).status
        is EvidenceStatus.failed
    )
    overlap = judge(
        POS, {"dog": [d(0.9, (0.4, 0.4, 0.6, 0.6))], "cat": [d(0.9, (0.42, 0.4, 0.62, 0.6))]}, TH
    )
    assert overlap.status is EvidenceStatus.uncertain
    assert judge(POS, {"dog": [d(0.9, left)], "cat": []}, TH).status is EvidenceStatus.failed
    assert (
        judge(POS, {"dog": [d(0.2, left)], "cat": [d(0.9, right)]}, TH).status
        is EvidenceStatus.uncertain
    )
    assert relations((0.4, 0.0, 0.6, 0.2), (0.4, 0.7, 0.6, 0.9), 0.1) == {"above"}
    assert judge(COL, {}, TH).status is EvidenceStatus.uncertain


def test_nms_merges_overlapping_boxes():
    kept = nms(
        [
            d(0.9, (0.1, 0.1, 0.5, 0.5)),
            d(0.8, (0.12, 0.1, 0.5, 0.52)),
            d(0.7, (0.6, 0.6, 0.9, 0.9)),
        ],
        0.5,
    )
    assert [k.score for k in kept] == [0.9, 0.7]


def test_ocr_similarity():
    assert normalize_text("Hello, World!") == "helloworld"
    assert best_similarity("OPEN", ["we are open today"]) == (1.0, "open")
    sim, _ = best_similarity("bakery", ["bakcry"])
    assert 0.75 <= sim < 1.0
    assert best_similarity("bakery", [])[0] == 0.0


@pytest.mark.parametrize(
    "name",
    ["verification.yaml", "verification-composite.yaml", "proposer.yaml", "proposer-openai.yaml"],
)
def test_shipped_configs_load(name, repo_root):
    from services.common.settings import load_settings
    from services.proposer.server import ProposerSettings
    from services.verification.settings import VerificationSettings

    cls = ProposerSettings if name.startswith("proposer") else VerificationSettings
    settings = load_settings(cls, repo_root / "configs" / name)
    if name == "verification-composite.yaml":
        assert settings.composite.routes[ConstraintType.count] == ["owlv2"]
        assert settings.composite.backend_names() == {"owlv2", "ocr", "vlm"}


def test_owlv2_two_object_constraints_on_one_label_take_distinct_boxes():
    """ "a car and a car": one box passes the first object constraint only; the second is
    judged on the second-best box (unsure band → uncertain), as the sim inspector's matching."""
    from services.verification.backends.owlv2 import Owlv2Backend, Owlv2Settings

    backend = Owlv2Backend(Owlv2Settings(model_path="unused"))
    cars = [OBJ.model_copy(update={"constraint_id": f"o{i}", "subject": "car"}) for i in (1, 2)]
    boxes = {"car": []}
    backend.detect = lambda png, labels: boxes  # type: ignore[method-assign]
    boxes["car"] = [d(0.9, (0.1, 0.1, 0.3, 0.3))]
    ev = backend.verify(b"png", [*cars, OBJ])
    assert [e.status for e in ev[:2]] == [EvidenceStatus.passed, EvidenceStatus.failed]
    assert "taken by another object constraint" in ev[1].note
    boxes["car"] = [d(0.2, (0.5, 0.1, 0.7, 0.3)), d(0.9, (0.1, 0.1, 0.3, 0.3))]
    ev = backend.verify(b"png", cars)
    assert ev[0].status is EvidenceStatus.passed and ev[0].boxes == [(0.1, 0.1, 0.3, 0.3)]
    assert ev[1].status is EvidenceStatus.uncertain  # 0.2: in the unsure band
    boxes["car"].append(d(0.8, (0.5, 0.5, 0.7, 0.7)))
    assert all(e.passed for e in backend.verify(b"png", cars))
    # one object constraint per label: judged on all boxes, as before
    assert backend.verify(b"png", cars[:1])[0].status is EvidenceStatus.passed
