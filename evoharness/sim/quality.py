"""A no-reference, pixel-level image quality score: noise, clipping, pasted-object seams.

What a layout adapter, a too-high guidance scale or too few sampling steps do to an image is
visible in its pixels even when every object is right: grain, blown-out or crushed colours,
and objects that look cut out and pasted onto the scene. Each component below is a raw
measure (reported as evidence) and a component score in 0..1 (1 = clean) that falls linearly
from its ``*_OK`` level to 0 at its ``*_BAD`` level. The overall ``score`` is the worst
component (one defect is enough to make an image unusable). The ``quality`` constraint
(``evoharness.tasks.models``) passes when ``score >= threshold``.

Components (all on 8-bit RGB, H×W×3 uint8):

- **noise** ``noise_sigma`` (8-bit grey levels, 0..~128): the standard deviation of additive
  Gaussian noise, estimated per channel with Immerkær's Laplacian-difference mask (J. Immerkær,
  "Fast Noise Variance Estimation", CVIU 64(2), 1996) and, instead of his mean, the median
  absolute response scaled to σ (MAD, Donoho & Johnstone 1994: σ = 1.4826·median|r| / 6, the
  mask's response having standard deviation 6σ), so object edges do not inflate it; mean over
  the three channels. ``NOISE_OK`` = 4, ``NOISE_BAD`` = 12: measured on the simulator (whose
  clean images carry σ = 3 by construction), a clean image at steps 30 / guidance 5 reads
  2.97–3.13 and guidance 14 reads 6.9–7.2 (component ≈ 0.62); σ ≈ 4 is about where grain
  becomes visible on flat regions of an 8-bit picture.
- **clipping** ``clipped_fraction`` (0..1): the fraction of pixels with a channel at the 8-bit
  limits (≤ 1 or ≥ 254), i.e. highlight/shadow clipping as exposure meters count it, which is
  also where over-saturated colours end up (chroma pushed past the gamut clips a channel).
  ``CLIP_OK`` = 0.03, ``CLIP_BAD`` = 0.20: clean simulator images read 0.000–0.021 (white
  objects such as clock faces are legitimately at 255), guidance 14 reads 0.005–0.046.
- **seams** ``seam_fraction`` (0..1): for each foreground object (sign panels excluded, they are
  flat boards by design) that does not carry the scene's grain, the fraction of its strong
  boundary edges (a 3-px intensity span > ``SEAM_CONTRAST`` grey levels) whose whole
  transition happens in one pixel step (the largest 1-px step ≥ ``SEAM_HARD`` × the 3-px
  span): an object rendered into the scene is anti-aliased / blended at its outline, a
  hard-pasted one has a 1-px step edge all round (the edge-width idea of Marziliano et al., "A
  no-reference perceptual blur metric", ICIP 2002; blur/sharpness inconsistency as the cue of
  splicing). The value is the worst object. An object is judged only when its interior grain
  (``_grain`` over the object's mask eroded by ``SEAM_RING_PX``, ≥ ``SEAM_GRAIN_MIN_PX``
  unclipped pixels) is below ``SEAM_GRAIN_RATIO`` × the whole image's (clipped pixels carry
  no grain and are left out of both): a spliced object carries a
  different noise level than the picture it was pasted into (noise inconsistency as the cue of
  splicing: B. Mahdian and S. Saic, "Using noise inconsistencies for blind image forensics",
  Image and Vision Computing 27(10), 2009); without it, straight-edged objects whose outline
  falls on pixel boundaries (tv, microwave, book, ...) looked hard-pasted too. The grain check
  is skipped when the image's own grain is under ``SEAM_GRAIN_IMAGE_MIN`` grey levels (no
  cue). ``SEAM_OK`` = 0.55, ``SEAM_BAD`` = 0.90: measured on 8 simulator prompts, clean
  stickers read 0.31–0.47 on their edges, a hard-pasted flat rectangle 0.63–1.0.
  Measured 2026-12-02 on "a photo of a <class>", 80 classes × seeds 0–1 (``SimInspector``;
  seams component < 0.5): clean images (``sdxl-like``, no layout) 7 / 160 (4.4%) before the
  grain check, 1 / 160 (0.6%) after; the same prompts with one layout box (pasted objects):
  ``sd15-like`` 150 → 147 / 160 flagged, ``sdxl-like`` (less grain removed) 147 → 134 / 160.
  The measure separates a hard paste without grain from a blended object, not a well-blended
  paste that keeps the grain.

This module only measures; ``SimInspector`` supplies the object masks and judges constraints.
It imports numpy and OpenCV only.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass

import cv2
import numpy as np

NOISE_OK, NOISE_BAD = 4.0, 12.0  # grey levels (8-bit)
CLIP_OK, CLIP_BAD = 0.03, 0.20  # fraction of pixels
SEAM_OK, SEAM_BAD = 0.55, 0.90  # fraction of an object's strong boundary edges
SEAM_CONTRAST = 40.0  # grey levels over a 3-px span
SEAM_HARD = 0.9  # largest 1-px step / 3-px span
SEAM_MIN_EDGES = 40  # boundary edge pixels an object needs to be judged
SEAM_RING_PX = 3  # half-width of the boundary ring, px
GRAIN_Q25 = 0.3186  # lower quartile of |N(0, 1)|
# an object is judged when its interior grain is below this × the image's: clean stickers read
# 1.0–2.6 × (lowest of 40), pasted layout objects 0.33–0.6 (sd15-like), 0.5–0.92 (sdxl-like)
SEAM_GRAIN_RATIO = 0.95
SEAM_GRAIN_MIN_PX = 200  # interior pixels needed to measure an object's grain
SEAM_GRAIN_IMAGE_MIN = 1.0  # image grain (grey levels) below which grain is no cue
_LAPLACE_DIFF = np.array([[1, -2, 1], [-2, 4, -2], [1, -2, 1]], np.float32)  # Immerkær 1996


@dataclass(frozen=True)
class QualityScore:
    """Raw measures and component scores (see the module docstring for units and sources).

    ``score`` = min(``noise``, ``clipping``, ``seams``), each in 0..1, 1 = clean."""

    noise_sigma: float
    clipped_fraction: float
    seam_fraction: float
    noise: float
    clipping: float
    seams: float
    score: float

    def as_observed(self) -> dict[str, float]:
        """The evidence ``observed`` value: every field, rounded to 4 decimals."""
        return {k: round(v, 4) for k, v in asdict(self).items()}


def _ramp(value: float, ok: float, bad: float) -> float:
    """1 at or below ``ok``, 0 at or above ``bad``, linear between."""
    return float(np.clip((bad - value) / (bad - ok), 0.0, 1.0))


def noise_sigma(rgb: np.ndarray) -> float:
    """Estimated σ of additive Gaussian noise in grey levels (Immerkær mask, MAD; see the
    module docstring). ``rgb``: H×W×C uint8 (or H×W), at least 3×3. Raises ``ValueError``
    for a smaller image."""
    if rgb.shape[0] < 3 or rgb.shape[1] < 3:
        raise ValueError(f"image: {rgb.shape[1]}x{rgb.shape[0]} px is too small for noise")
    chans = rgb[..., None] if rgb.ndim == 2 else rgb
    sig = []
    for k in range(chans.shape[2]):
        r = cv2.filter2D(chans[..., k].astype(np.float32), -1, _LAPLACE_DIFF)[1:-1, 1:-1]
        sig.append(1.4826 * float(np.median(np.abs(r))) / 6.0)
    return float(np.mean(sig))


def clipped_fraction(rgb: np.ndarray) -> float:
    """Fraction of pixels (0..1) with any channel ≤ 1 or ≥ 254. ``rgb``: H×W×3 uint8."""
    return float(((rgb <= 1) | (rgb >= 254)).any(axis=-1).mean())


def _hard_edges(grey: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per pixel (H×W bool): a strong edge centred here (horizontal or vertical 3-px span >
    ``SEAM_CONTRAST``, the middle 1-px step the largest), and whether it is a hard one."""
    strong = np.zeros(grey.shape, bool)
    hard = np.zeros(grey.shape, bool)
    for g, s, h in ((grey, strong, hard), (grey.T, strong.T, hard.T)):
        a = g[:, 1:-2] - g[:, :-3]
        b = g[:, 2:-1] - g[:, 1:-2]
        c = g[:, 3:] - g[:, 2:-1]
        span = np.abs(a + b + c)
        step = np.maximum(np.maximum(np.abs(a), np.abs(b)), np.abs(c))
        sel = (span > SEAM_CONTRAST) & (np.abs(b) >= step)
        s[:, 1:-2] |= sel
        h[:, 1:-2] |= sel & (step >= SEAM_HARD * span)
    return strong, hard


def _grain(response: np.ndarray) -> float:
    """Grain σ (grey levels) from Immerkær-mask responses: their lower quartile scaled to σ
    (the response of pure noise is N(0, 6σ), whose absolute value's lower quartile is
    0.3186·6σ), so texture and edges — which only add large responses — barely move it."""
    return float(np.percentile(response, 25)) / (GRAIN_Q25 * 6.0)


def seam_fraction(rgb: np.ndarray, objects: Sequence[tuple[np.ndarray, tuple[int, int]]]) -> float:
    """The worst object's fraction of hard boundary edges (0..1; 0 with no judged object).

    ``objects``: (mask, (x0, y0)) per object — a uint8/bool mask in full-image pixels and its
    top-left corner. Objects with fewer than ``SEAM_MIN_EDGES`` strong boundary edges are
    skipped (too small to judge)."""
    if not objects:
        return 0.0
    grey = rgb.astype(np.float32).mean(axis=-1)
    strong, hard = _hard_edges(grey)
    H, W = grey.shape
    k = np.ones((2 * SEAM_RING_PX + 1, 2 * SEAM_RING_PX + 1), np.uint8)
    grain = np.abs(cv2.filter2D(grey, -1, _LAPLACE_DIFF, borderType=cv2.BORDER_REFLECT))
    # clipped pixels (a channel at 0/255, e.g. a white clock face) carry no grain to measure
    clip = np.asarray(((rgb <= 1) | (rgb >= 254)).any(axis=-1), dtype=np.uint8)
    measurable = cv2.dilate(clip, np.ones((3, 3), np.uint8)) == 0
    image_grain = _grain(grain[measurable]) if measurable.any() else 0.0
    worst = 0.0
    for mask, (x0, y0) in objects:
        if image_grain >= SEAM_GRAIN_IMAGE_MIN:
            inner = cv2.erode(mask.astype(np.uint8), k) > 0
            h, w = inner.shape
            window = grain[y0 : y0 + h, x0 : x0 + w]
            inner = inner[: window.shape[0], : window.shape[1]]
            inner &= measurable[y0 : y0 + h, x0 : x0 + w]
            if int(inner.sum()) >= SEAM_GRAIN_MIN_PX:
                own = _grain(window[inner])
                if own >= SEAM_GRAIN_RATIO * image_grain:
                    continue  # it carries the scene's grain: rendered in, not pasted
        m = np.pad(mask.astype(np.uint8), SEAM_RING_PX + 1)
        ring = (cv2.dilate(m, k) - cv2.erode(m, k)) > 0
        ox, oy = x0 - SEAM_RING_PX - 1, y0 - SEAM_RING_PX - 1
        # clip the ring's window to the image
        X0, Y0 = max(0, ox), max(0, oy)
        X1, Y1 = min(W, ox + ring.shape[1]), min(H, oy + ring.shape[0])
        if X1 <= X0 or Y1 <= Y0:
            continue
        r = ring[Y0 - oy : Y1 - oy, X0 - ox : X1 - ox]
        n = int((strong[Y0:Y1, X0:X1] & r).sum())
        if n < SEAM_MIN_EDGES:
            continue
        worst = max(worst, float((hard[Y0:Y1, X0:X1] & r).sum()) / n)
    return worst


def quality_score(
    rgb: np.ndarray, objects: Sequence[tuple[np.ndarray, tuple[int, int]]] = ()
) -> QualityScore:
    """All components of ``rgb`` (H×W×3 uint8) with the object masks ``objects`` (see
    ``seam_fraction``). Raises ``ValueError`` for an image under 3×3 px."""
    sigma = noise_sigma(rgb)
    clip = clipped_fraction(rgb)
    seam = seam_fraction(rgb, objects)
    comps = (
        _ramp(sigma, NOISE_OK, NOISE_BAD),
        _ramp(clip, CLIP_OK, CLIP_BAD),
        _ramp(seam, SEAM_OK, SEAM_BAD),
    )
    return QualityScore(sigma, clip, seam, *comps, score=min(comps))
