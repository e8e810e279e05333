"""``SimDetector``: an internal verifier that errs the way an open-vocabulary detector + VLM do.

Evolution must not be judged by a perfect oracle: a real verification stack (OWLv2 or
GroundingDINO for objects, counts and positions; CLIP or a VLM for colours; an OCR model for
text) misses small objects, loses recall in crowded scenes, miscounts large groups, confuses
neighbouring hues and misreads characters, so a harness can learn to please it without
pleasing a human. ``SimDetector`` models that: it takes what the exact ``SimInspector`` saw in
the pixels (its ``Scene``), perturbs that scene with the error model below, and judges every
constraint with the inspector's own rules (GenEval's position rule etc.). Official scoring
keeps the exact inspector (``evoharness eval geneval``, a report's "official" columns).

**Determinism.** Every draw comes from a generator seeded by the image's sha256 and a tag
naming the draw (detection index, class, sign index; textures and shapes have tags of their
own, so their rates change no other verdict), never a global RNG: the same PNG bytes get the
same verdicts, whichever other constraints are asked with it and in whichever order.

**Error model** (``DetectorParams``; box areas are fractions of the image area; COCO's size
buckets, small < 32² and medium < 96² px on COCO's ≈ 640×480 images, are 0.0033 and 0.030):

- *Recall by size*: a detection is dropped with probability ``miss_small`` / ``miss_medium`` /
  ``miss_large`` by its box area. COCO detectors of the OWLv2 / GroundingDINO / Mask2Former
  class reach roughly half their large-object AP on small objects (the APs vs APl columns of
  their COCO tables); recall at GenEval's detection threshold 0.3 is modelled as 0.60 /
  0.88 / 0.97.
- *Crowding*: with more than ``crowd_start`` detections in the image, each miss probability
  is multiplied by ``1 + crowd_gain · (n − crowd_start)`` (capped at ``miss_cap``): occlusion
  and suppression of touching boxes (dense-scene detection, e.g. CrowdHuman, loses recall
  with density).
- *Counts beyond four*: when more than ``count_drift_above`` (4) instances of a class are
  detected, the count drifts by ±1 with probability ``count_drift`` (a merged or a duplicate
  box): GenEval's counting task uses a stricter 0.9 confidence threshold for this reason
  (geneval/evaluation/evaluate_images.py, ``COUNTING_THRESHOLD``), and counting accuracy of
  detectors and VLMs falls sharply past 4–5 objects (CountBench, Paiss et al. 2023).
- *Spurious detections*: a class asked about but absent is "detected" with probability
  ``false_positive`` (open-vocabulary detectors fire on the queried phrase; GenEval's 0.3
  threshold trades this against recall), at a random box — this is what makes a negative
  ("no X") constraint fail on a clean image.
- *Box jitter*: each box edge moves by N(0, ``box_jitter`` × box size) (localisation error:
  the AP50 vs AP75 gap of COCO tables); GenEval's position rule and T2I-CompBench's
  proximity rule ("next to", "near": ``evoharness.tasks.proximity``) then run on the jittered
  boxes, so near-threshold relations flip.
- *Near hues*: a detected object's colour name is replaced by a neighbour on the hue circle
  (``HUE_NEIGHBOURS``: red–orange–yellow–green–blue–purple–pink–red, brown–orange/red) with
  probability ``hue_confusion``; black and white, named by lightness, are not confused. CLIP
  zero-shot colour classification, GenEval's colour judge, errs mostly between adjacent hues.
- *Depth order*: the order of two overlapping objects (which occludes which, what a
  ``behind`` / ``in front of`` constraint is judged on) is reversed with probability
  ``depth_flip``. T2I-CompBench's 3D-spatial evaluation compares the mean of a monocular
  depth map (DPT-Hybrid / MiDaS) over the two detector boxes (UniDet_eval/3D_spatial_eval.py,
  ``determine_position``); such models order point pairs wrongly about a fifth of the time
  in the wild (WHDR of single-image depth, Chen et al. 2016, "Single-Image Depth Perception
  in the Wild"), less for two objects that visibly occlude each other; 0.10 is modelled,
  not fitted.
- *OCR misreads*: each character of a read sign is substituted with probability
  ``ocr_char_error`` (scene-text recognisers' character error rates on clean crops are a few
  percent; one misread character fails an exact-match text constraint).
- *Texture and shape misreads* (issue 19): a detected object's texture reading (a
  ``vocab.TEXTURES`` name or ``plain``) is replaced by another of those values, uniformly,
  with probability ``texture_error``; its shape reading (a ``vocab.SHAPES`` name or no
  outline), when the outlines were read, likewise with ``shape_error``. A body too small
  to read stays unread. Both 0.15 are **assumptions**, not measurements: the judge of these
  attributes in a real stack is a VLM asked per object ("is the chair wooden?", T2I-CompBench's
  BLIP-VQA scoring of its texture and shape categories), no per-answer accuracy for that is
  published that we know of, and material and shape answers are taken to err somewhat more
  often than the hue confusion above (0.10). A misread fails a true attribute constraint;
  one read as the asked value passes a false one. Set them per deployment.

The rates are modelled on the published behaviour named above, not fitted to one model; they
are parameters so a deployment can set its own (``verifier_id`` carries their digest and the inspector's id, so
cached evidence of other settings is never reused). ``DetectorParams`` fields are
probabilities in 0..1 unless named otherwise; an unknown or out-of-range field raises
``pydantic.ValidationError`` naming it.
"""

from __future__ import annotations

import hashlib
import random
from collections import Counter
from collections.abc import Sequence
from dataclasses import replace
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from evoharness.canonical import content_hash
from evoharness.evidence import Evidence
from evoharness.ports import GeneratedImage
from evoharness.sim.inspector import Detection, Scene, SimInspector, scene_needs
from evoharness.sim.texture import PLAIN
from evoharness.tasks.models import Constraint, ConstraintType
from evoharness.vocab import COLORS, SHAPES, TEXTURES, WORLD_CLASSES

#: COCO's object-size buckets as fractions of a 640×480 image (32², 96² px).
SMALL_AREA, MEDIUM_AREA = 32 * 32 / (640 * 480), 96 * 96 / (640 * 480)

#: Hue-circle neighbours a colour judge confuses (see the module docstring).
HUE_NEIGHBOURS: dict[str, tuple[str, ...]] = {
    "red": ("orange", "pink"),
    "orange": ("red", "yellow", "brown"),
    "yellow": ("orange", "green"),
    "green": ("yellow", "blue"),
    "blue": ("green", "purple"),
    "purple": ("blue", "pink"),
    "pink": ("purple", "red"),
    "brown": ("orange", "red"),
}
_OCR_ALPHABET = "abcdefghijklmnopqrstuvwxyz0123456789"
#: What a texture / shape reading can be misread as (``texture.PLAIN``; None = no outline).
_TEXTURE_READS: tuple[str | None, ...] = (*TEXTURES, PLAIN)
_SHAPE_READS: tuple[str | None, ...] = (*SHAPES, None)
_P = Field(ge=0.0, le=1.0)


class DetectorParams(BaseModel):
    """The error rates of ``SimDetector`` (module docstring: meaning and source of each)."""

    model_config = ConfigDict(extra="forbid", frozen=True)

    miss_small: float = Field(default=0.40, ge=0.0, le=1.0)
    miss_medium: float = Field(default=0.12, ge=0.0, le=1.0)
    miss_large: float = Field(default=0.03, ge=0.0, le=1.0)
    crowd_start: int = Field(default=4, ge=0)
    crowd_gain: float = Field(default=0.25, ge=0.0)
    miss_cap: float = Field(default=0.6, ge=0.0, le=1.0)
    count_drift_above: int = Field(default=4, ge=0)
    count_drift: float = Field(default=0.30, ge=0.0, le=1.0)
    false_positive: float = Field(default=0.03, ge=0.0, le=1.0)
    box_jitter: float = Field(default=0.04, ge=0.0, le=0.5)
    hue_confusion: float = Field(default=0.10, ge=0.0, le=1.0)
    ocr_char_error: float = Field(default=0.02, ge=0.0, le=1.0)
    texture_error: float = Field(default=0.15, ge=0.0, le=1.0)
    shape_error: float = Field(default=0.15, ge=0.0, le=1.0)
    depth_flip: float = Field(default=0.10, ge=0.0, le=1.0)

    def miss_rate(self, area: float, n_detections: int) -> float:
        """Probability that a true object of box ``area`` (fraction of the image) is missed
        in an image with ``n_detections`` objects."""
        base = (
            self.miss_small
            if area < SMALL_AREA
            else self.miss_medium
            if area < MEDIUM_AREA
            else self.miss_large
        )
        crowd = 1.0 + self.crowd_gain * max(0, n_detections - self.crowd_start)
        return min(self.miss_cap, base * crowd) if crowd > 1.0 else base


def _rng(digest: str, *tag: Any) -> random.Random:
    """A generator for one named draw of one image: seeded by sha256(image digest, tag)."""
    seed = hashlib.sha256(repr((digest, *tag)).encode("utf-8")).digest()
    return random.Random(int.from_bytes(seed[:16], "big"))


def _jitter(box: tuple[float, float, float, float], rng: random.Random, s: float) -> tuple:
    x0, y0, x1, y1 = box
    w, h = x1 - x0, y1 - y0
    nx0, nx1 = x0 + rng.gauss(0, s * w), x1 + rng.gauss(0, s * w)
    ny0, ny1 = y0 + rng.gauss(0, s * h), y1 + rng.gauss(0, s * h)
    clamp = lambda v: min(1.0, max(0.0, v))  # noqa: E731
    nx0, nx1 = sorted((clamp(nx0), clamp(nx1)))
    ny0, ny1 = sorted((clamp(ny0), clamp(ny1)))
    return (nx0, ny0, nx1, ny1)


def _misread(
    value: str | None, choices: Sequence[str | None], rng: random.Random, p: float
) -> str | None:
    """``value``, or w.p. ``p`` another of ``choices`` drawn uniformly (one draw, then a
    second only on a misread)."""
    if rng.random() >= p:
        return value
    return rng.choice([c for c in choices if c != value])


def perturb_scene(
    scene: Scene, digest: str, params: DetectorParams, queried: Sequence[str] = ()
) -> Scene:
    """The scene as the modelled detector sees it (module docstring). ``digest``: the image's
    sha256 hex (seeds every draw); ``queried``: classes constraints ask about (candidates for
    spurious detections). Returns a new ``Scene``; ``scene`` is not changed."""
    dets = scene.detections
    n = len(dets)
    kept: list[Detection] = []
    for i, d in enumerate(dets):
        rng = _rng(digest, "det", i)
        area = (d.box[2] - d.box[0]) * (d.box[3] - d.box[1])
        if rng.random() < params.miss_rate(area, n):
            continue
        color = d.color
        if color in HUE_NEIGHBOURS and rng.random() < params.hue_confusion:
            color = rng.choice(HUE_NEIGHBOURS[color])
        tex, shp = d.texture, d.shape
        if tex is not None:
            tex = _misread(tex, _TEXTURE_READS, _rng(digest, "texture", i), params.texture_error)
        if scene.shapes_read:
            shp = _misread(shp, _SHAPE_READS, _rng(digest, "shape", i), params.shape_error)
        kept.append(
            replace(
                d,
                box=_jitter(d.box, rng, params.box_jitter),
                color=color,
                texture=tex,
                shape=shp,
            )
        )
    per_class = Counter(d.cls for d in kept)
    for cls in sorted(per_class):
        if per_class[cls] <= params.count_drift_above:
            continue
        rng = _rng(digest, "count", cls)
        if rng.random() >= params.count_drift:
            continue
        mine = [d for d in kept if d.cls == cls]
        if rng.random() < 0.5:  # a merged / suppressed box
            kept.remove(mine[-1])
        else:  # a duplicate box on one instance
            src = rng.choice(mine)
            kept.append(replace(src, box=_jitter(src.box, rng, 2 * params.box_jitter)))
    present = {d.cls for d in dets}
    for cls in sorted(set(queried) - present):
        if cls not in WORLD_CLASSES:
            continue
        rng = _rng(digest, "fp", cls)
        if rng.random() >= params.false_positive:
            continue
        w, h = rng.uniform(0.1, 0.3), rng.uniform(0.1, 0.3)
        x0, y0 = rng.uniform(0, 1 - w), rng.uniform(0, 1 - h)
        color = rng.choice(list(COLORS))
        kept.append(Detection(cls, (x0, y0, x0 + w, y0 + h), color, 39.0, 0.3))
    kept = _flip_depth(kept, digest, params.depth_flip)
    kept.sort(key=lambda d: d.score)
    signs = []
    for j, (text, box) in enumerate(scene.signs):
        rng = _rng(digest, "sign", j)
        chars = [
            rng.choice(_OCR_ALPHABET) if c.isalnum() and rng.random() < params.ocr_char_error else c
            for c in text
        ]
        signs.append(("".join(chars), box))
    return Scene(
        detections=kept,
        signs=signs,
        panels=scene.panels,
        unknown=scene.unknown,
        quality=scene.quality,
        shapes_read=scene.shapes_read,
    )


def _flip_depth(dets: list[Detection], digest: str, p: float) -> list[Detection]:
    """``dets`` with each occlusion pair (back ``d``, front ``o`` in ``d.occluders``)
    reversed w.p. ``p`` (a draw named by the two detections' ``ident``)."""
    out = list(dets)
    pos = {d.ident: i for i, d in enumerate(out) if d.ident >= 0}
    for d in dets:
        for o in d.occluders:
            if o not in pos or _rng(digest, "depth", d.ident, o).random() >= p:
                continue
            i, j = pos[d.ident], pos[o]
            back, front = out[i], out[j]
            out[i] = replace(back, occluders=tuple(x for x in back.occluders if x != o))
            out[j] = replace(front, occluders=(*front.occluders, d.ident))
    return out


def detector_verifier_id(
    params: DetectorParams, inspector_id: str = SimInspector.verifier_id
) -> str:
    """``sim-detector@<12 hex of sha256(params + the inspector's verifier id)>``: the key of
    cached evidence, so other error-model settings or an older inspector's verdict rules never
    share a record (`workflows.backends`)."""
    digest = content_hash({"params": params.model_dump(), "inspector": inspector_id})
    return f"sim-detector@{digest[:12]}"


class SimDetector:
    """The embedded world's *internal* verifier (implements ``evoharness.ports.Verifier``):
    ``SimInspector``'s view of the pixels, perturbed by ``DetectorParams`` (module docstring),
    judged by the inspector's rules (``SimInspector.judge_all``: constraints of one kind on one
    class on distinct detections). ``decided_by`` is ``"sim-detector"``.

    ``params``: the error rates (default ``DetectorParams()``); ``inspector``: the exact
    inspector to start from (default ``SimInspector(**inspector_options)``)."""

    name = "sim-detector"

    def __init__(
        self,
        params: DetectorParams | None = None,
        inspector: SimInspector | None = None,
        **inspector_options: Any,
    ) -> None:
        self.params = params or DetectorParams()
        self.inspector = inspector or SimInspector(**inspector_options)
        self.verifier_id = detector_verifier_id(self.params, self.inspector.verifier_id)

    def verify(
        self,
        image: GeneratedImage | bytes | None = None,
        constraints: Sequence[Constraint] = (),
        prompt: str = "",
        *,
        png: bytes | None = None,
    ) -> list[Evidence]:
        """One ``Evidence`` per constraint, in order (``SimInspector.verify``'s arguments and
        errors: ``ValueError`` for no image or undecodable bytes)."""
        if image is None:
            image = png
        if image is None:
            raise ValueError("image: no image given")
        data = image.png if isinstance(image, GeneratedImage) else image
        scene = self.inspector.inspect(data, **scene_needs(constraints))
        queried = sorted(
            {c.subject for c in constraints if c.type is not ConstraintType.quality}
            | {str(c.value) for c in constraints if c.type is ConstraintType.position}
        )
        seen = perturb_scene(scene, hashlib.sha256(data).hexdigest(), self.params, queried)
        return [
            e.model_copy(update={"decided_by": self.name})
            for e in self.inspector.judge_all(constraints, seen)
        ]
