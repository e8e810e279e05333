"""What the embedded world's inspector observed (``Scene``: detections, sign texts, quality).

Perception (``evoharness.sim.inspector``) fills a ``Scene`` from pixels; judging
(``evoharness.sim.judging``) turns it into one verdict per constraint; another verifier
(``evoharness.sim.detector``) perturbs a scene and judges it with the same rules. Holds data
only, imports no perception and no judging.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from evoharness.sim.quality import QualityScore


@dataclass
class Detection:
    """One detected object: ``cls``, ``box`` (x0, y0, x1, y1 in 0..1), ``color`` (GenEval
    name), ``score`` (mean ΔE, lower is better), ``confidence`` in 0..1, ``texture``."""

    cls: str
    box: tuple[float, float, float, float]
    color: str
    score: float
    confidence: float
    #: a ``vocab.TEXTURES`` name, ``texture.PLAIN``, or None (body too small to read)
    texture: str | None = None
    #: the ``vocab.SHAPES`` name outlined around it; None: no outline, or not read
    #: (``Scene.shapes_read``)
    shape: str | None = None
    #: its number in the scene (order of discovery; -1: not from the inspector)
    ident: int = -1
    #: ``ident`` of each detection drawn over part of it (occlusion: those are in front)
    occluders: tuple[int, ...] = ()


@dataclass
class Scene:
    """What the inspector saw: detections and sign texts (text, box); ``quality`` when it was
    asked for (``inspect(..., quality=True)``)."""

    detections: list[Detection] = field(default_factory=list)
    signs: list[tuple[str, tuple[float, float, float, float]]] = field(default_factory=list)
    panels: list[np.ndarray] = field(default_factory=list)
    unknown: int = 0
    quality: QualityScore | None = None
    #: whether the detections' outlines were read (``inspect(..., shapes=True)``)
    shapes_read: bool = False
