"""``sim-detector``: the embedded world's internal verifier (``evoharness.sim.SimDetector``):
the pixel inspector's view perturbed by a real detector + VLM's error model (small and
crowded objects missed, counts beyond four drifting, near hues confused, OCR misreads),
seeded per image. The default verifier for evolution; official scoring keeps ``sim``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evoharness.evidence import Evidence
from evoharness.tasks.models import Constraint, ConstraintType


class SimDetectorBackend:
    """``VerifierBackend`` over ``SimDetector`` (built lazily on first use). ``options``:
    ``params`` (a ``DetectorParams`` field mapping; unknown or out-of-range fields raise
    ``pydantic.ValidationError`` naming them) and ``SimInspector`` keyword options
    (``threads``, ``ocr``)."""

    name = "sim-detector"
    capabilities = frozenset(t.value for t in ConstraintType)

    def __init__(self, detector: Any = None, **options: Any) -> None:
        from evoharness.sim.detector import DetectorParams

        options = dict(options)
        self.params = DetectorParams.model_validate(options.pop("params", None) or {})
        self._options = options
        self._detector = detector

    @property
    def detector(self) -> Any:
        """The wrapped ``SimDetector``."""
        if self._detector is None:
            from evoharness.sim.detector import SimDetector

            self._detector = SimDetector(self.params, **self._options)
        return self._detector

    @property
    def verifier_id(self) -> str:
        """``evoharness.sim.detector.detector_verifier_id`` of the params (no detector built)."""
        from evoharness.sim.detector import detector_verifier_id

        return detector_verifier_id(self.params)

    def verify(
        self, png: bytes, constraints: Sequence[Constraint], prompt: str = ""
    ) -> list[Evidence]:
        """The detector's evidence for ``constraints``."""
        return list(self.detector.verify(png, list(constraints), prompt))
