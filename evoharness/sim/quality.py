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
  flat boards by design), the fraction of its strong boundary edges (a 3-px intensity span
  > ``SEAM_CONTRAST`` grey levels) whose whole transition happens in one pixel step
  (the largest 1-px step ≥ ``SEAM_HARD`` × the 3-px span): an object rendered into the scene is
  anti-aliased / blended at its outline, a hard-pasted one has a 1-px step edge all round
  (the edge-width idea of Marziliano et al., "A no-reference perceptual blur metric", ICIP
  2002; blur/sharpness inconsistency as the cue of splicing). The value is the worst object.
  ``SEAM_OK`` = 0.55, ``SEAM_BAD`` = 0.90: measured on 8 simulator prompts, clean stickers
  read 0.31–0.47 (the flat drawn stop-sign icon 0.66), a hard-pasted flat rectangle 0.63–1.0
  (the low end when it touches an object and the two merge into one blob). The seam measure
  is the weakest of the three: it separates a hard paste from a blended object, not a
  well-blended paste, and straight-edged objects whose outline falls on pixel boundaries
  look hard too: on 160 clean single-object images (80 classes × 2 seeds) the median is
  0.30, 20 exceed 0.55 (tv, microwave, oven, book, traffic light, ...) and 4 exceed 0.9, so
  about 4% of clean images score below 0.5. The same program draws the same image, so such
  an image fails for parent and candidate alike and is no regression; a harness change that
  makes objects look pasted moves many images at once, which is what the gate sees.

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
    worst = 0.0
    for mask, (x0, y0) in objects:
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
