"""What a reference image shows, read from its pixels: the subject a reference-conditioned
generator carries into the picture (issue 32).

A reference-conditioned generator (IP-Adapter, a multi-reference editor) encodes the
reference *image*; it never sees a caption or a file name. The embedded world models this by
reading the reference's pixels with its own inspector (``evoharness.sim.inspector``, the same
perception the verifier uses): the most confident detection gives the subject's class, colour
(a GenEval name) and texture (``vocab.TEXTURES`` or None). The image encoder is taken to be
indifferent to the subject's pose: the reference is read as given, mirrored, and turned by
±90°, and the best template fit wins (``POSES``); the subject is then drawn upright in the
picture (the pose is reported, not reproduced — the inspector reads upright stickers only).

The inspector (OpenCV, scikit-image) is imported on the first read, so a generator that
never gets a reference never imports it. Reads are cached by the image's bytes (sha256).
"""

from __future__ import annotations

import hashlib
import threading
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image

from evoharness.sim.png import encode_png

#: The poses tried, as (name, transform of the reference's pixels back to upright).
POSES: tuple[tuple[str, Any], ...] = (
    ("upright", lambda a: a),
    ("mirrored", lambda a: a[:, ::-1]),
    ("turned left", lambda a: np.rot90(a, -1)),
    ("turned right", lambda a: np.rot90(a, 1)),
)
#: The canvas a reference is read on, in multiples of its size (``_on_canvas``).
CANVAS = 3
#: Poses whose fit is within this (mean ΔE) of the best one count as fitting as well.
POSE_MARGIN = 4.0
#: A reference smaller than this (either side, px) is not read (no subject).
MIN_SIDE = 16

_lock = threading.Lock()
_inspector: Any = None
_cache: dict[str, Subject | None] = {}
_CACHE_MAX = 512


@dataclass(frozen=True)
class Subject:
    """The subject of a reference image: ``cls`` (a ``vocab.WORLD_CLASSES`` name), ``color``
    (a GenEval colour name), ``texture`` (a ``vocab.TEXTURES`` name; None: plain or not
    read), ``pose`` (the ``POSES`` name it was read in) and the template ``score`` (mean ΔE,
    lower is better)."""

    cls: str
    color: str
    texture: str | None
    pose: str
    score: float


def _get_inspector() -> Any:
    global _inspector
    with _lock:
        if _inspector is None:
            from evoharness.sim.inspector import SimInspector

            _inspector = SimInspector(ocr=False)
        return _inspector


def _on_canvas(rgb: np.ndarray) -> np.ndarray:
    """``rgb`` at the top-left corner of a canvas ``CANVAS`` times its size, filled with the
    median colour of its border: the inspector models the background from the whole picture,
    so a subject filling most of a small card would be taken for background; at the origin,
    a texture keeps its phase (its patterns are anchored at the image's origin)."""
    h, w = rgb.shape[:2]
    border = np.concatenate([rgb[0], rgb[-1], rgb[:, 0], rgb[:, -1]])
    fill = np.median(border, axis=0).astype(np.uint8)
    canvas = np.empty((h * CANVAS, w * CANVAS, 3), np.uint8)
    canvas[...] = fill
    canvas[:h, :w] = rgb
    return canvas


def read_subject(image: Image.Image) -> Subject | None:
    """The subject of ``image`` (any mode; read as RGB): the best-fitting detection over the
    ``POSES``, or None when nothing in it fits a template (a photo, an empty card) or it is
    under ``MIN_SIDE`` px. Of the poses that fit the best fit's class within
    ``POSE_MARGIN``, the first in ``POSES`` order that reads a texture wins, else the first
    (a symmetric subject fits mirrored as well as upright, but its texture's phase holds in
    one pose only). Deterministic; cached by the pixels' sha256."""
    rgb = np.asarray(image.convert("RGB"))
    if min(rgb.shape[:2]) < MIN_SIDE:
        return None
    digest = hashlib.sha256(rgb.tobytes() + repr(rgb.shape).encode()).hexdigest()
    with _lock:
        if digest in _cache:
            return _cache[digest]
    inspector = _get_inspector()
    reads: list[Subject] = []
    for pose, undo in POSES:
        arr = _on_canvas(np.ascontiguousarray(undo(rgb)))
        scene = inspector.inspect(encode_png(arr), read_text=False)
        for d in scene.detections:
            texture = d.texture if d.texture not in (None, "plain") else None
            reads.append(Subject(d.cls, d.color, texture, pose, float(d.score)))
    best = min(reads, key=lambda r: r.score) if reads else None
    if best is not None:
        # a symmetric subject fits in several poses about equally well, but its texture's
        # phase (and a diagonal's direction) holds in one only: among the poses that fit the
        # best class within ``POSE_MARGIN``, the first in ``POSES`` order that reads a
        # texture wins, else the first (upright before mirrored before turned)
        near = [r for r in reads if r.cls == best.cls and r.score <= best.score + POSE_MARGIN]
        textured = [r for r in near if r.texture is not None]
        best = (textured or near)[0]
    with _lock:
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _cache[digest] = best
    return best


__all__ = ["POSES", "Subject", "read_subject"]
