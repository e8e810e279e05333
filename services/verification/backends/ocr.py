"""``ocr``: text constraints read with RapidOCR (``rapidocr-onnxruntime``; its ONNX detection,
classification and recognition models ship in the wheel, nothing is downloaded).

Judgement of a ``text`` constraint with expected string ``value``:

- both strings are normalised (lower case, only letters and digits kept);
- ``similarity`` = the best ``difflib.SequenceMatcher`` ratio between the expected string and
  any window of the same length of the recognised text (each line, and all lines joined in
  reading order), so extra text around the expected string does not count against it;
- ``similarity >= pass_score`` → pass (confidence = similarity × the OCR line score);
  ``< reject_score`` → fail (confidence = 1 − similarity); else uncertain.

Defaults: pass needs an exact normalised match (1.0); below 0.75 (more than one character in
four wrong) is a fail; a near miss in between is uncertain, never a guess.
"""

from __future__ import annotations

import difflib
import re
import threading
from collections.abc import Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.tasks.models import Constraint, ConstraintType
from services.verification.backends.base import ScoreThresholds, cannot_judge, evidence

_KEEP = re.compile(r"[^0-9a-z]+")


class OcrSettings(BaseModel):
    """``thresholds`` on the similarity (see module docstring); ``min_line_score``: OCR lines
    whose recognition score is below this are ignored."""

    model_config = ConfigDict(extra="forbid")

    thresholds: ScoreThresholds = Field(
        default_factory=lambda: ScoreThresholds(pass_score=1.0, reject_score=0.75)
    )
    min_line_score: float = Field(default=0.3, ge=0.0, le=1.0)


def normalize_text(text: str) -> str:
    """Lower case, letters and digits only (``"Hello, World!"`` → ``"helloworld"``)."""
    return _KEEP.sub("", text.lower())


def best_similarity(expected: str, candidates: Sequence[str]) -> tuple[float, str]:
    """Best ratio of ``expected`` (normalised) against any same-length window of any
    candidate (normalised), and the window. ``(0.0, "")`` when there is nothing to compare."""
    exp = normalize_text(expected)
    if not exp:
        return 0.0, ""
    best, where = 0.0, ""
    for cand in candidates:
        c = normalize_text(cand)
        if not c:
            continue
        if exp in c:
            return 1.0, exp
        n = len(exp)
        windows = [c] if len(c) <= n else [c[i : i + n] for i in range(len(c) - n + 1)]
        for w in windows:
            r = difflib.SequenceMatcher(None, exp, w, autojunk=False).ratio()
            if r > best:
                best, where = r, w
    return best, where


class OcrBackend:
    """``VerifierBackend`` for ``text`` constraints (RapidOCR, built lazily, serialised:
    onnxruntime sessions are shared)."""

    name = "ocr"
    capabilities = frozenset({ConstraintType.text.value})

    def __init__(self, settings: OcrSettings | None = None, engine: Any = None) -> None:
        self.settings = settings or OcrSettings()
        self._engine = engine
        self._lock = threading.Lock()

    def read(self, png: bytes) -> list[tuple[str, float, tuple[float, float, float, float]]]:
        """Recognised lines ``(text, score, box)`` in reading order; ``box`` in pixels."""
        with self._lock:
            if self._engine is None:
                from rapidocr_onnxruntime import RapidOCR

                self._engine = RapidOCR()
            result, _ = self._engine(png)
        lines = []
        for box, text, score in result or []:
            xs = [float(p[0]) for p in box]
            ys = [float(p[1]) for p in box]
            lines.append((str(text), float(score), (min(xs), min(ys), max(xs), max(ys))))
        lines.sort(key=lambda t: (round(t[2][1] / 10), t[2][0]))
        return lines

    def verify(
        self, png: bytes, constraints: Sequence[Constraint], prompt: str = ""
    ) -> list[Evidence]:
        """Evidence for each constraint; non-text constraints are ``uncertain``."""
        todo = [c for c in constraints if c.type.value in self.capabilities]
        lines = self.read(png) if todo else []
        from io import BytesIO

        from PIL import Image

        w = h = 1.0
        if todo:
            with Image.open(BytesIO(png)) as im:
                w, h = float(im.width), float(im.height)
        kept = [ln for ln in lines if ln[1] >= self.settings.min_line_score]
        texts = [ln[0] for ln in kept]
        joined = " ".join(texts)
        out: list[Evidence] = []
        for c in constraints:
            if c.type.value not in self.capabilities:
                out.append(cannot_judge(c, self.name))
                continue
            sim, window = best_similarity(str(c.value), [*texts, joined] if texts else [])
            line = next((ln for ln in kept if window and window in normalize_text(ln[0])), None)
            boxes = [
                (b[0] / w, b[1] / h, b[2] / w, b[3] / h) for _, _, b in ([line] if line else [])
            ]
            observed = {"read": texts[:8], "similarity": round(sim, 4)}
            band = self.settings.thresholds.band(sim)
            if band == "present":
                score = line[1] if line else 1.0
                out.append(
                    evidence(
                        c,
                        EvidenceStatus.passed,
                        sim * score,
                        self.name,
                        f"ocr read {window!r} matching {c.value!r} (similarity {sim:.2f})",
                        observed,
                        boxes,
                    )
                )
            elif band == "absent":
                out.append(
                    evidence(
                        c,
                        EvidenceStatus.failed,
                        1.0 - sim,
                        self.name,
                        f"ocr found no text close to {c.value!r} (best similarity {sim:.2f})",
                        observed,
                        boxes,
                    )
                )
            else:
                out.append(
                    evidence(
                        c,
                        EvidenceStatus.uncertain,
                        sim,
                        self.name,
                        f"ocr near miss for {c.value!r}: {window!r} (similarity {sim:.2f} between "
                        f"{self.settings.thresholds.reject_score} and {self.settings.thresholds.pass_score})",
                        observed,
                        boxes,
                    )
                )
        return out
