"""Textures on stickers: how the embedded world draws a texture or material
(``vocab.TEXTURES``) on a sticker's body, and how its inspector reads it back (issue 19).

Drawing (``paint``): a texture is a square-wave pattern of lightness, ±``AMPLITUDE`` grey
levels added to the three channels of the body pixels (the recolourable part of the picture;
the white margin and the dark outline are left alone, so the silhouette is unchanged). Each
texture has its own period (pixels of the final image) and orientation(s) (``PATTERNS``);
``spotted`` is a lattice of dark dots. The pattern is anchored at the image's origin. A code
for "made of X" the inspector can read, not a photo-real material.

Reading (``read``): the residual of the body pixels — the crop's grey minus the grey of the
class's clean sticker at the crop's size (analysis by synthesis: the picture's own detail is
not texture), minus its mean — is projected on the complex exponential of every probe
frequency (the fundamentals of all patterns, ``PROBES``): amplitude ``2 |Σ r e^{-2πi f·p}| / n``
in grey levels. The measured amplitude vector is compared by cosine with each texture's own
profile (the same projection of its pattern on a ``PROFILE_PX`` square); the best texture
wins when its cosine is at least ``MIN_COSINE`` and the vector's length at least
``MIN_FRACTION`` of the profile's (a clipped white or black body keeps part of its
amplitude), else the body is ``PLAIN``. Bodies under ``MIN_BODY_PX`` pixels are not read
(``None``).

numpy only; the generator and the inspector both import it.
"""

from __future__ import annotations

import math
from functools import cache

import numpy as np

from evoharness.vocab import TEXTURES

#: Grey levels added (+) and removed (−) by a pattern's light and dark halves.
AMPLITUDE = 22
#: name → (period in image pixels, orientations in degrees: 0 varies along x, 90 along y).
#: Periods 4, 6, 10 and 16 px and four orientations keep every pair of fundamentals at least
#: 1/30 cycle/px apart (a 30-px body resolves them).
PATTERNS: dict[str, tuple[int, tuple[int, ...]]] = {
    "wooden": (10, (0,)),
    "striped": (10, (90,)),
    "metallic": (10, (45,)),
    "glass": (10, (135,)),
    "fabric": (6, (0,)),
    "plastic": (6, (90,)),
    "rubber": (6, (45,)),
    "leather": (6, (135,)),
    "fluffy": (4, (0, 90)),
    "spotted": (16, (0, 90)),
}
#: What a body without a texture is read as.
PLAIN = "plain"
PROFILE_PX = 96
MIN_COSINE = 0.8
MIN_FRACTION = 0.3
MIN_BODY_PX = 60

if set(PATTERNS) != set(TEXTURES):
    raise RuntimeError("sim.texture: PATTERNS must draw exactly vocab.TEXTURES")


def _freqs(name: str) -> list[tuple[float, float]]:
    period, angles = PATTERNS[name]
    return [
        (math.cos(math.radians(a)) / period, math.sin(math.radians(a)) / period) for a in angles
    ]


#: The probe frequencies (cycles per pixel, (fx, fy)): every pattern's fundamentals.
PROBES: tuple[tuple[float, float], ...] = tuple(
    dict.fromkeys(f for name in PATTERNS for f in _freqs(name))
)


def pattern(name: str, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """The pattern of texture ``name`` at absolute pixel coordinates ``xs``, ``ys`` (same
    shape): +1 light, −1 dark (``spotted``: −1 in the dots, 0 elsewhere). Raises KeyError
    for an unknown texture."""
    fr = _freqs(name)
    phase = [np.cos(2 * math.pi * (fx * xs + fy * ys)) for fx, fy in fr]
    if name == "spotted":
        return np.where(phase[0] + phase[1] > 1.0, -1.0, 0.0)
    return np.where(sum(phase) >= 0, 1.0, -1.0)


def paint(rgb: np.ndarray, body: np.ndarray, name: str, origin: tuple[int, int]) -> np.ndarray:
    """``rgb`` (h, w, 3) uint8 with texture ``name`` painted on the ``body`` pixels ((h, w)
    bool); ``origin`` = (x, y) of ``rgb``'s top-left pixel in the image, so every sticker's
    pattern lies on one grid. Returns a new array."""
    h, w = body.shape
    ys, xs = np.mgrid[0:h, 0:w]
    pat = pattern(name, xs + origin[0], ys + origin[1])
    out = rgb.astype(np.int16)
    out[body] += (AMPLITUDE * pat[body]).astype(np.int16)[:, None]
    return np.clip(out, 0, 255).astype(np.uint8)


def amplitudes(residual: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> np.ndarray:
    """Amplitude (grey levels) of ``residual`` (n,) at pixels ``xs``, ``ys`` (n,) on each of
    ``PROBES``: ``2 |Σ r e^{-2πi f·p}| / n``, after removing the mean. Shape (len(PROBES),)."""
    r = residual - residual.mean()
    f = np.array(PROBES)  # (P, 2)
    ph = 2 * math.pi * (np.outer(f[:, 0], xs) + np.outer(f[:, 1], ys))  # (P, n)
    z = (np.cos(ph) @ r) ** 2 + (np.sin(ph) @ r) ** 2
    return 2.0 * np.sqrt(z) / max(1, len(r))


@cache
def _profiles() -> dict[str, np.ndarray]:
    ys, xs = np.mgrid[0:PROFILE_PX, 0:PROFILE_PX]
    xs, ys = xs.ravel().astype(np.float64), ys.ravel().astype(np.float64)
    return {n: amplitudes(AMPLITUDE * pattern(n, xs, ys), xs, ys) for n in PATTERNS}


def read(residual: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> str | None:
    """The texture of a body whose residual grey levels (crop minus clean sticker) are
    ``residual`` (n,) at absolute pixels ``xs``, ``ys`` (n,): a ``TEXTURES`` name,
    ``PLAIN``, or None when the body is too small to read (< ``MIN_BODY_PX`` pixels)."""
    if len(residual) < MIN_BODY_PX:
        return None
    a = amplitudes(residual.astype(np.float64), xs.astype(np.float64), ys.astype(np.float64))
    na = float(np.linalg.norm(a))
    best, best_cos, best_norm = PLAIN, 0.0, 1.0
    for name, prof in _profiles().items():
        npf = float(np.linalg.norm(prof))
        cos = float(a @ prof) / max(1e-9, na * npf)
        if cos > best_cos:
            best, best_cos, best_norm = name, cos, npf
    if best_cos < MIN_COSINE or na < MIN_FRACTION * best_norm:
        return PLAIN
    return best


__all__ = ["AMPLITUDE", "PATTERNS", "PLAIN", "PROBES", "amplitudes", "paint", "pattern", "read"]
