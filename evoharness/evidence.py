"""Evidence: the verifier's verdict on one constraint of one image.

Shape (docs/architecture.md): ``{status: pass|fail|uncertain, confidence, boxes, observed, note,
decided_by}``. ``boxes`` are ``[x0, y0, x1, y1]`` fractions of the image (0..1).
"""

from __future__ import annotations

import enum
from typing import Any

from pydantic import BaseModel, ConfigDict, Field


class EvidenceStatus(enum.StrEnum):
    """A verdict. ``uncertain`` is used for low confidence or disagreement, never a guess."""

    passed = "pass"
    failed = "fail"
    uncertain = "uncertain"


class Evidence(BaseModel):
    """The verdict on one constraint. ``confidence`` is in 0..1."""

    model_config = ConfigDict(extra="forbid")

    constraint_id: str
    status: EvidenceStatus
    confidence: float = Field(ge=0.0, le=1.0)
    boxes: list[tuple[float, float, float, float]] = Field(default_factory=list)
    observed: Any = None
    note: str = ""
    decided_by: str = ""

    @property
    def passed(self) -> bool:
        """True when the status is ``pass``."""
        return self.status is EvidenceStatus.passed
