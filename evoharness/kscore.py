"""A KScore-style rubric (GenEvolve's judge, issue 32): four dimensions scored on
{0, 0.5, 1} and weighted.

Dimensions and weights (``WEIGHTS``): faithfulness 0.1, visual correctness 0.4, text
accuracy 0.4, aesthetics 0.1. When the prompt needs no text, text accuracy is left out and
the other three are renormalised (0.1/0.6, 0.4/0.6, 0.1/0.6). A dimension a judge did not
measure (``None``) is left out the same way, so a score is never made up: the embedded
inspector measures no aesthetics, and its overall score is the renormalised mean of what it
measured.

``kscore_from_evidence`` maps the embedded inspector's verdicts onto the first three
dimensions:

- **faithfulness** — the image holds what the prompt asks and nothing it forbids:
  ``object``, ``count``, ``position`` and ``negative`` constraints;
- **visual correctness** — each thing looks as it should (the knowledge a prompt may only
  imply: a London bus's red): ``color`` and ``attribute`` constraints;
- **text accuracy** — ``text`` constraints (the prompt needs text when it has one);
- **aesthetics** — not measured (``None``).

A dimension's level from its decided verdicts (``pass``/``fail``; ``uncertain`` ones are not
decided): all pass → 1, none → 0, some → 0.5; no decided verdict → ``None``. Other
constraint types (``quality``, ``vqa``) do not enter.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Final

from pydantic import AfterValidator, BaseModel, ConfigDict, model_validator

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.tasks.models import Constraint, ConstraintType

#: The rubric's weights (GenEvolve's KScore).
WEIGHTS: Final[dict[str, float]] = {
    "faithfulness": 0.1,
    "visual_correctness": 0.4,
    "text_accuracy": 0.4,
    "aesthetics": 0.1,
}
#: The levels a dimension may take.
LEVELS: Final = (0.0, 0.5, 1.0)


def _check_level(v: float) -> float:
    if v not in LEVELS:
        raise ValueError(f"a KScore level is 0, 0.5 or 1, got {v!r}")
    return v


#: One rubric level (a pydantic field type): exactly 0, 0.5 or 1; anything else fails
#: validation with ``ValueError``.
Level = Annotated[float, AfterValidator(_check_level)]

#: Which constraint types feed which dimension in ``kscore_from_evidence``.
DIMENSION_TYPES: Final[dict[str, frozenset[ConstraintType]]] = {
    "faithfulness": frozenset(
        {
            ConstraintType.object,
            ConstraintType.count,
            ConstraintType.position,
            ConstraintType.negative,
        }
    ),
    "visual_correctness": frozenset({ConstraintType.color, ConstraintType.attribute}),
    "text_accuracy": frozenset({ConstraintType.text}),
}


class KScore(BaseModel):
    """One image's rubric. Each dimension is 0, 0.5, 1 or ``None`` (not measured);
    ``needs_text``: whether the prompt asks for rendered text (when False, ``text_accuracy``
    must be None). Raises ``ValueError`` for any other level."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    faithfulness: Level | None
    visual_correctness: Level | None
    text_accuracy: Level | None
    aesthetics: Level | None
    needs_text: bool

    @model_validator(mode="after")
    def _text_needed(self) -> KScore:
        if not self.needs_text and self.text_accuracy is not None:
            raise ValueError("text_accuracy is scored but the prompt needs no text")
        return self

    @property
    def measured(self) -> dict[str, float]:
        """The dimensions that enter the overall score, with their levels."""
        return {
            d: v
            for d in WEIGHTS
            if (v := getattr(self, d)) is not None and (d != "text_accuracy" or self.needs_text)
        }

    @property
    def overall(self) -> float | None:
        """Σ wᵢ·sᵢ / Σ wᵢ over the measured dimensions (``WEIGHTS``), in [0, 1]; None when
        nothing was measured."""
        m = self.measured
        if not m:
            return None
        total = sum(WEIGHTS[d] for d in m)
        return sum(WEIGHTS[d] * v for d, v in m.items()) / total


def level(verdicts: Sequence[EvidenceStatus]) -> float | None:
    """A dimension's level from its verdicts: 1 all decided pass, 0 none, 0.5 some; None
    when none is decided."""
    decided = [v for v in verdicts if v in (EvidenceStatus.passed, EvidenceStatus.failed)]
    if not decided:
        return None
    passed = sum(1 for v in decided if v is EvidenceStatus.passed)
    return 1.0 if passed == len(decided) else 0.0 if passed == 0 else 0.5


def kscore_from_evidence(constraints: Sequence[Constraint], evidence: Sequence[Evidence]) -> KScore:
    """The inspector's verdicts as a KScore (see the module docstring). ``evidence`` is
    matched to ``constraints`` by ``constraint_id``; raises ``ValueError`` naming a verdict
    whose constraint is not given."""
    by_id = {c.constraint_id: c for c in constraints}
    per: dict[str, list[EvidenceStatus]] = {d: [] for d in DIMENSION_TYPES}
    for e in evidence:
        c = by_id.get(e.constraint_id)
        if c is None:
            raise ValueError(f"evidence for unknown constraint {e.constraint_id!r}")
        for dim, types in DIMENSION_TYPES.items():
            if c.type in types:
                per[dim].append(e.status)
    needs_text = any(c.type is ConstraintType.text for c in constraints)
    return KScore(
        faithfulness=level(per["faithfulness"]),
        visual_correctness=level(per["visual_correctness"]),
        text_accuracy=level(per["text_accuracy"]),  # None without a text constraint
        aesthetics=None,
        needs_text=needs_text,
    )


__all__ = [
    "DIMENSION_TYPES",
    "LEVELS",
    "WEIGHTS",
    "KScore",
    "Level",
    "kscore_from_evidence",
    "level",
]
