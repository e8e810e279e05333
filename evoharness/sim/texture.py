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
not texture) — is fitted by least squares with a constant plus every texture's pattern at
the body's absolute pixel coordinates (``fit``: a coherent matched filter; the patterns are
anchored at the image's origin, so their phase is known). The texture of largest fitted
amplitude wins when that amplitude is at least ``MIN_AMPLITUDE`` × ``AMPLITUDE`` (a clipped
white or black body keeps half of it) and at least ``MIN_Z`` standard errors (the fit's
residual — picture detail the clean sticker does not explain, noise — sets the error); else
the body is ``PLAIN``. Bodies under ``MIN_BODY_PX`` pixels are not read (``None``; the
inspector makes their constraints ``uncertain``).

Why coherent: the first reader compared the amplitude spectrum at every pattern's frequency
with each pattern's own by cosine (≥ 0.8); picture detail at those frequencies, with any
phase, pulled the cosine under the bar on small and detailed bodies, which read ``plain``
(textured ones right 805 / 872 on the tuning scenes below). Knowing the phase rejects
detail out of phase. ``MIN_AMPLITUDE`` and ``MIN_Z`` were chosen on bench scenes of a seed
the bench does not use (``sim_bench.programs(…, seed=777, textures=True)``: GenEval classes
200 images, world classes 200, crowded 60; 872 textured and 1100 plain matched objects):
textured right 855 / 872, plain right 1093 / 1100 (was 1083), 2 read as another texture;
any amplitude bar in 0.3–0.5 and z bar in 3–8 scored within 0.3% of it. ``MIN_BODY_PX``
stays 60: bodies under it were 7 of 1972 there, too few to set a bar on.

numpy only; the generator and the inspector both import it.
"""

from __future__ import annotations

import math

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
#: The fitted amplitude a texture needs, as a fraction of ``AMPLITUDE``.
MIN_AMPLITUDE = 0.45
#: The fitted amplitude a texture needs, in standard errors of the fit.
MIN_Z = 5.0
MIN_BODY_PX = 60
#: The textures in the order ``fit`` returns them.
NAMES: tuple[str, ...] = tuple(PATTERNS)

if set(PATTERNS) != set(TEXTURES):
    raise RuntimeError("sim.texture: PATTERNS must draw exactly vocab.TEXTURES")


def _freqs(name: str) -> list[tuple[float, float]]:
    period, angles = PATTERNS[name]
    return [
        (math.cos(math.radians(a)) / period, math.sin(math.radians(a)) / period) for a in angles
    ]


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


def fit(residual: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(amplitude, standard error), each (len(NAMES),) in grey levels: the least-squares fit
    of ``residual`` (n,) at absolute pixels ``xs``, ``ys`` (n,) by a constant plus ``AMPLITUDE``-
    free copies of every texture's ``pattern`` (``NAMES`` order), and the standard error of
    each amplitude from the fit's residual variance. A pattern constant on the body (a body
    too small for its period) gets amplitude 0 and an infinite error."""
    r = residual.astype(np.float64)
    xs, ys = xs.astype(np.float64), ys.astype(np.float64)
    A = np.column_stack([np.ones(len(r))] + [pattern(n, xs, ys) for n in NAMES])
    G = A.T @ A
    b = A.T @ r
    Ginv = np.linalg.pinv(G)
    coef = Ginv @ b
    dof = max(1, len(r) - A.shape[1])
    s2 = max(0.0, float(r @ r - coef @ b)) / dof
    var = np.diag(Ginv)[1:] * s2
    flat = A[:, 1:].std(axis=0) < 1e-9
    amp = np.where(flat, 0.0, coef[1:])
    se = np.where(flat, np.inf, np.sqrt(np.maximum(var, 1e-12)))
    return amp, se


def read(residual: np.ndarray, xs: np.ndarray, ys: np.ndarray) -> str | None:
    """The texture of a body whose residual grey levels (crop minus clean sticker) are
    ``residual`` (n,) at absolute pixels ``xs``, ``ys`` (n,): a ``TEXTURES`` name,
    ``PLAIN``, or None when the body is too small to read (< ``MIN_BODY_PX`` pixels)."""
    if len(residual) < MIN_BODY_PX:
        return None
    amp, se = fit(residual, xs, ys)
    j = int(np.argmax(amp))
    if amp[j] >= MIN_AMPLITUDE * AMPLITUDE and amp[j] >= MIN_Z * se[j]:
        return NAMES[j]
    return PLAIN


__all__ = ["AMPLITUDE", "NAMES", "PATTERNS", "PLAIN", "fit", "paint", "pattern", "read"]
