"""``sim``: the embedded world's pixel-level inspector (``evoharness.sim.SimInspector``).

Judges every constraint type the inspector supports; its evidence is returned unchanged
except that an empty ``decided_by`` becomes ``sim``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evoharness.evidence import Evidence
from evoharness.tasks.models import Constraint, ConstraintType


class SimBackend:
    """``VerifierBackend`` over ``SimInspector(**options)`` (built lazily on first use:
    the inspector loads OpenCV and OCR models)."""

    name = "sim"
    capabilities = frozenset(t.value for t in ConstraintType)

    def __init__(self, inspector: Any = None, **options: Any) -> None:
        self._inspector = inspector
        self._options = options

    @property
    def inspector(self) -> Any:
        """The wrapped ``SimInspector``."""
        if self._inspector is None:
            from evoharness.sim import SimInspector

            self._inspector = SimInspector(**self._options)
        return self._inspector

    def verify(
        self, png: bytes, constraints: Sequence[Constraint], prompt: str = ""
    ) -> list[Evidence]:
        """The inspector's evidence for ``constraints``."""
        out = self.inspector.verify(png, list(constraints), prompt)
        return [e if e.decided_by else e.model_copy(update={"decided_by": self.name}) for e in out]
