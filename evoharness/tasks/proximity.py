"""T2I-CompBench's proximity rule: whether box A is "next to" / "near" box B.

Source: T2I-CompBench (Huang et al. 2023, github.com/Karine-Huang/T2I-CompBench, commit
6d58bed), ``UniDet_eval/2D_spatial_eval.py``, ``determine_position(locality, box1, box2,
iou_threshold=0.1, distance_threshold=150)``. For ``locality`` in ``['next to', 'on side of',
'near']`` (one rule for all three) it takes the two box centres and their horizontal and
vertical distances ``x_distance``, ``y_distance`` in pixels, and scores::

    1                                   if |x_distance| < 150 or |y_distance| < 150
    150 / max(|x_distance|, |y_distance|) otherwise (a soft score)

(``UniDet_eval/determine_position_for_eval.py`` has the same rule.) The 150 px are in the
detector's frame, not the 512×512 image's: ``UniDet_eval/experts/model_bank.py`` resizes the
image for UniDet with ``transforms.Resize(size=479, max_size=480)`` and
``experts/obj_detection/generate_dataset.py`` hands the resized height and width to detectron2,
which returns boxes at that size. So the threshold is 150 / 479 = 0.313 of the image side
(``PROXIMITY_THRESHOLD``; 150 / 512 = 0.293 would be the reading without the resize).

**The published rule is lenient**: it is an *or*, so two objects in one row (or one column)
pass at any distance — a cat at the left edge and a dog at the right edge are "next to" each
other. Only a pair whose centres are apart by at least 0.313 of the side on *both* axes
(diagonally apart) fails. It is implemented here as published, because it is the official
check of T2I-CompBench's 2D-spatial category; a verifier wanting a stricter sense of "near"
must say so under its own name. ``holds`` is the rule's score-1 branch (T2I-CompBench then
averages the soft score with the two detection confidences; a binary verdict takes score 1
as the pass).

Boxes are ``(x0, y0, x1, y1)`` normalised to the image (x by width, y by height), as every
verifier in this project reports them; the threshold is a fraction of the side, exact for
square images (T2I-CompBench's and this project's default 512×512).

Pure standard library (the simulator's generator, the exact inspector and the OWLv2 backend
all import it); imports nothing else.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

#: T2I-CompBench's ``distance_threshold`` (150 px) over its detector frame (479 px).
PROXIMITY_THRESHOLD = 150 / 479


@dataclass(frozen=True)
class Proximity:
    """The proximity of two boxes. ``dx``, ``dy``: absolute distances of their centres as
    fractions of the image width / height; ``threshold``: the rule's; ``holds``: dx or dy
    below it; ``score``: T2I-CompBench's soft score in (0, 1], 1 when it holds."""

    dx: float
    dy: float
    threshold: float
    holds: bool
    score: float

    def describe(self) -> str:
        """One line for an evidence note: the distances, the threshold and the verdict."""
        verdict = "close" if self.holds else "apart"
        return (
            f"centres {self.dx:.3f} apart across, {self.dy:.3f} down (fractions of the image "
            f"side); {verdict} by T2I-CompBench's rule (either < {self.threshold:.3f})"
        )


def proximity(
    box_a: Sequence[float], box_b: Sequence[float], threshold: float = PROXIMITY_THRESHOLD
) -> Proximity:
    """T2I-CompBench's ``next to`` / ``near`` rule on two boxes (module docstring).

    ``box_a``, ``box_b``: ``(x0, y0, x1, y1)`` normalised to the image. The rule is symmetric.
    Raises ``ValueError`` for a box without four numbers or a threshold that is not positive."""
    if len(box_a) != 4 or len(box_b) != 4:
        raise ValueError(f"proximity: boxes need 4 numbers, got {list(box_a)}, {list(box_b)}")
    if not threshold > 0:
        raise ValueError(f"proximity: threshold {threshold!r} must be positive")
    dx = float(abs((box_a[0] + box_a[2]) / 2 - (box_b[0] + box_b[2]) / 2))
    dy = float(abs((box_a[1] + box_a[3]) / 2 - (box_b[1] + box_b[3]) / 2))
    holds = dx < threshold or dy < threshold
    score = 1.0 if holds else threshold / max(dx, dy)
    return Proximity(dx=dx, dy=dy, threshold=threshold, holds=holds, score=score)


__all__ = ["PROXIMITY_THRESHOLD", "Proximity", "proximity"]
