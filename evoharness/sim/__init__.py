"""The embedded CPU world: a behavioural text-to-image *simulator* and a pixel-level inspector.

``SimGenerator`` (``evoharness.sim.generator``) imports only numpy, Pillow, pydantic and the
evoharness core, so it also runs in a numpy<2 Triton virtualenv; ``SimInspector``
(``evoharness.sim.inspector``: OpenCV, scikit-image, rapidocr) and ``SimDetector``
(``evoharness.sim.detector``: the inspector with a real detector's error model, evolution's
internal verifier) are imported lazily.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evoharness.sim.generator import SimGenerator
from evoharness.sim.params import SimParams

if TYPE_CHECKING:
    from evoharness.sim.detector import SimDetector
    from evoharness.sim.inspector import SimInspector

__all__ = ["SimDetector", "SimGenerator", "SimInspector", "SimParams"]


def __getattr__(name: str) -> Any:
    if name == "SimInspector":
        from evoharness.sim.inspector import SimInspector

        return SimInspector
    if name == "SimDetector":
        from evoharness.sim.detector import SimDetector

        return SimDetector
    raise AttributeError(name)
