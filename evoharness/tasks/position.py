"""GenEval's position rule: which of "left of", "right of", "above", "below" box A is of box B.

Source: GenEval (Ghosh et al. 2023, github.com/djghosh13/geneval),
``evaluation/evaluate_images.py``, ``relative_position(obj1, obj2)`` with
``POSITION_THRESHOLD = 0.1``. The centre offset of A from B is shrunk towards zero by the
threshold × the two boxes' summed sizes on each axis, then divided by the raw offset's length;
"left of" when dx < −0.5, "right of" when dx > 0.5, "above" when dy < −0.5, "below" when
dy > 0.5 (y grows down). Boxes too close (every shrunk component under 1e-3) have no relation.

This is judging, not perception: the embedded world's inspector (``evoharness.sim``) and the
OWLv2 verifier (``services.verification.backends.owlv2``) both apply it to the boxes they
detect, so both read a relation the same way. Boxes are ``(x0, y0, x1, y1)`` in any common
unit (the verifiers use coordinates normalised to the image).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

#: GenEval's ``POSITION_THRESHOLD`` (evaluation/evaluate_images.py).
POSITION_THRESHOLD = 0.1


def relative_position(
    box_a: Sequence[float], box_b: Sequence[float], threshold: float = POSITION_THRESHOLD
) -> set[str]:
    """Relations of box A to box B by GenEval's rule (module docstring): a subset of
    {"left of", "right of", "above", "below"}, empty when the boxes are too close or share a
    centre. ``threshold``: the share of the summed box sizes the offset is shrunk by."""
    ax0, ay0, ax1, ay1 = (float(v) for v in box_a)
    bx0, by0, bx1, by1 = (float(v) for v in box_b)
    off = ((ax0 + ax1) / 2 - (bx0 + bx1) / 2, (ay0 + ay1) / 2 - (by0 + by1) / 2)
    dims = (abs(ax1 - ax0) + abs(bx1 - bx0), abs(ay1 - ay0) + abs(by1 - by0))
    revised = [
        math.copysign(max(abs(o) - threshold * d, 0.0), o) for o, d in zip(off, dims, strict=True)
    ]
    norm = math.hypot(*off)
    if norm == 0 or all(abs(r) < 1e-3 for r in revised):
        return set()
    dx, dy = revised[0] / norm, revised[1] / norm
    rels = set()
    if dx < -0.5:
        rels.add("left of")
    if dx > 0.5:
        rels.add("right of")
    if dy < -0.5:
        rels.add("above")
    if dy > 0.5:
        rels.add("below")
    return rels
