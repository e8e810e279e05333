"""The verifier-backend interface, shared thresholds and the metrics wrapper.

A backend judges the constraint types in its ``capabilities`` from pixels only and returns one
``Evidence`` per constraint, in order; for a type it cannot judge it returns ``uncertain``
with confidence 0 (never a guess). ``decided_by`` names the backend; ``note`` says why.

``confidence`` of a pass/fail verdict is how sure the backend is of that verdict (0..1); of an
``uncertain`` verdict it is the backend's raw score in the undecided band (informational).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

from pydantic import BaseModel, ConfigDict, Field, model_validator

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.tasks.models import Constraint
from services.common.metrics import VERDICTS, VERIFIER_LATENCY


@runtime_checkable
class VerifierBackend(Protocol):
    """A verifier backend. ``name``: metrics label and ``decided_by`` value;
    ``capabilities``: the constraint types (``ConstraintType`` values) it can judge."""

    name: str
    capabilities: frozenset[str]

    def verify(
        self, png: bytes, constraints: Sequence[Constraint], prompt: str = ""
    ) -> list[Evidence]: ...


class ScoreThresholds(BaseModel):
    """Score bands of a scored judgement (detector score, OCR similarity, VLM confidence).

    ``score >= pass_score``: the thing is there (decisive); ``score < reject_score``: it is
    not (decisive); in between: ``uncertain``. Defaults follow GenEval's detector threshold
    0.3 (Ghosh et al. 2023, ``evaluate_images.py`` THRESHOLD) and treat below 0.1 as absent.
    """

    model_config = ConfigDict(extra="forbid")

    pass_score: float = Field(default=0.3, ge=0.0, le=1.0)
    reject_score: float = Field(default=0.1, ge=0.0, le=1.0)

    @model_validator(mode="after")
    def _ordered(self) -> ScoreThresholds:
        if self.reject_score > self.pass_score:
            raise ValueError(
                f"reject_score {self.reject_score} must be <= pass_score {self.pass_score}"
            )
        return self

    def band(self, score: float) -> str:
        """``present`` / ``absent`` / ``unsure`` for ``score``."""
        if score >= self.pass_score:
            return "present"
        if score < self.reject_score:
            return "absent"
        return "unsure"


def evidence(
    c: Constraint,
    status: EvidenceStatus | str,
    confidence: float,
    decided_by: str,
    note: str,
    observed: Any = None,
    boxes: Sequence[Sequence[float]] = (),
) -> Evidence:
    """An ``Evidence`` with confidence clamped to 0..1 and boxes clamped to the unit square."""
    return Evidence(
        constraint_id=c.constraint_id,
        status=EvidenceStatus(status),
        confidence=min(1.0, max(0.0, float(confidence))),
        boxes=[
            (
                min(1.0, max(0.0, float(b[0]))),
                min(1.0, max(0.0, float(b[1]))),
                min(1.0, max(0.0, float(b[2]))),
                min(1.0, max(0.0, float(b[3]))),
            )
            for b in boxes
        ],
        observed=observed,
        note=note,
        decided_by=decided_by,
    )


def cannot_judge(c: Constraint, backend: str) -> Evidence:
    """``uncertain``, confidence 0: ``backend`` has no capability for ``c.type``."""
    return evidence(
        c,
        EvidenceStatus.uncertain,
        0.0,
        backend,
        f"{backend} cannot judge {c.type.value} constraints",
    )


class Instrumented:
    """Wraps a backend: records ``evoharness_verifier_latency_seconds{backend}`` per call and
    ``evoharness_verdicts{backend,status}`` per verdict. Checks the backend returned one
    evidence per constraint with matching ids (``RuntimeError`` otherwise)."""

    def __init__(self, inner: VerifierBackend) -> None:
        self.inner = inner
        self.name = inner.name
        self.capabilities = inner.capabilities

    def verify(
        self, png: bytes, constraints: Sequence[Constraint], prompt: str = ""
    ) -> list[Evidence]:
        """``inner.verify`` with metrics and a shape check."""
        t0 = time.perf_counter()
        try:
            out = self.inner.verify(png, constraints, prompt)
        finally:
            VERIFIER_LATENCY.labels(self.name).observe(time.perf_counter() - t0)
        if [e.constraint_id for e in out] != [c.constraint_id for c in constraints]:
            raise RuntimeError(
                f"verifier backend {self.name} returned evidence for "
                f"{[e.constraint_id for e in out]}, expected {[c.constraint_id for c in constraints]}"
            )
        for e in out:
            VERDICTS.labels(self.name, e.status.value).inc()
        return out
