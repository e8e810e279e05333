"""The KScore-style rubric: weights against hand-computed scores, renormalisation when the
prompt needs no text or a dimension is not measured, the inspector mapping."""

from __future__ import annotations

import pytest

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.kscore import KScore, kscore_from_evidence, level
from evoharness.tasks.models import Constraint

P, F, U = EvidenceStatus.passed, EvidenceStatus.failed, EvidenceStatus.uncertain


@pytest.mark.parametrize(
    ("dims", "needs_text", "want"),
    [
        # 0.1·1 + 0.4·0.5 + 0.4·0 + 0.1·1 = 0.4
        ((1.0, 0.5, 0.0, 1.0), True, 0.4),
        # 0.1·0.5 + 0.4·1 + 0.4·1 + 0.1·0 = 0.85
        ((0.5, 1.0, 1.0, 0.0), True, 0.85),
        # no text: (0.1·1 + 0.4·0.5 + 0.1·1) / 0.6 = 0.4 / 0.6
        ((1.0, 0.5, None, 1.0), False, 0.4 / 0.6),
        # no text, no aesthetics: (0.1·1 + 0.4·0.5) / 0.5 = 0.6
        ((1.0, 0.5, None, None), False, 0.6),
        # text but no aesthetics: (0.1·0 + 0.4·1 + 0.4·0.5) / 0.9 = 0.6 / 0.9
        ((0.0, 1.0, 0.5, None), True, 0.6 / 0.9),
        ((0.0, 0.0, 0.0, 0.0), True, 0.0),
        ((1.0, 1.0, 1.0, 1.0), True, 1.0),
    ],
)
def test_overall_matches_hand_computed_scores(
    dims: tuple[float | None, ...], needs_text: bool, want: float
) -> None:
    k = KScore(
        faithfulness=dims[0],
        visual_correctness=dims[1],
        text_accuracy=dims[2],
        aesthetics=dims[3],
        needs_text=needs_text,
    )
    assert k.overall == pytest.approx(want)


def test_levels_and_shapes_are_checked() -> None:
    with pytest.raises(ValueError, match="0, 0.5 or 1"):
        KScore(
            faithfulness=0.7,
            visual_correctness=1,
            text_accuracy=None,
            aesthetics=None,
            needs_text=False,
        )
    with pytest.raises(ValueError, match="needs no text"):
        KScore(
            faithfulness=1, visual_correctness=1, text_accuracy=1, aesthetics=None, needs_text=False
        )
    none = KScore(
        faithfulness=None,
        visual_correctness=None,
        text_accuracy=None,
        aesthetics=None,
        needs_text=False,
    )
    assert none.overall is None
    assert level([P, P, U]) == 1.0 and level([P, F]) == 0.5 and level([F, U]) == 0.0
    assert level([U]) is None and level([]) is None


def test_text_accuracy_counts_only_when_the_prompt_needs_text() -> None:
    """``measured`` drops text accuracy when ``needs_text`` is False even where validation
    was skipped: pydantic's ``model_copy(update=...)`` runs no validator."""
    k = KScore(faithfulness=1, visual_correctness=1, text_accuracy=0, aesthetics=1, needs_text=True)
    assert k.overall == pytest.approx(0.6)
    copied = k.model_copy(update={"needs_text": False})
    assert copied.text_accuracy == 0 and "text_accuracy" not in copied.measured
    assert copied.overall == pytest.approx(1.0)


def _c(cid: str, type_: str, subject: str, value: str | None = None) -> Constraint:
    return Constraint(constraint_id=cid, type=type_, subject=subject, value=value)


def _e(cid: str, status: EvidenceStatus) -> Evidence:
    return Evidence(constraint_id=cid, status=status, confidence=1.0)


def test_inspector_verdicts_map_onto_three_dimensions() -> None:
    cs = [
        _c("car", "object", "car"),
        _c("red", "color", "car", "red"),
        _c("bus", "negative", "bus"),
    ]
    k = kscore_from_evidence(cs, [_e("car", P), _e("red", P), _e("bus", F)])
    assert (k.faithfulness, k.visual_correctness, k.text_accuracy, k.aesthetics) == (
        0.5,
        1.0,
        None,
        None,
    )
    assert not k.needs_text
    # (0.1·0.5 + 0.4·1) / 0.5 = 0.9
    assert k.overall == pytest.approx(0.9)
    cs.append(_c("txt", "text", "sign", "OPEN"))
    k = kscore_from_evidence(cs, [_e("car", P), _e("red", F), _e("bus", P), _e("txt", U)])
    assert k.needs_text and k.text_accuracy is None  # uncertain: not measured
    assert k.overall == pytest.approx(0.1 / 0.5)
    k = kscore_from_evidence(cs, [_e("car", P), _e("red", F), _e("bus", P), _e("txt", P)])
    # (0.1·1 + 0.4·0 + 0.4·1) / 0.9
    assert k.overall == pytest.approx(0.5 / 0.9)
    with pytest.raises(ValueError, match="unknown constraint"):
        kscore_from_evidence(cs, [_e("nope", P)])
