"""The simulator's picture library: the committed class pictures turned into "stickers".

Each class picture (``assets/<slug>.png``, 96 px on its longer side, see ``build_assets``)
is drawn as a die-cut sticker: the picture on a light fill (``STICKER_FILL``) grown by
``FILL_PX`` around it, ringed by a dark outline (``OUTLINE``, ``OUTLINE_PX`` wide). The
sticker makes a picture in several pieces one connected shape and keeps every part visible
on any background. The body (``assets/<slug>_body.png``) can be recoloured to a GenEval
colour: in CIELAB, ``a*, b*`` become the colour's and ``L* = L*_colour + k·(L* − mean L*)``
keeps some shading (``SHADING`` = k), so the body's mean colour is the GenEval anchor.

numpy + Pillow only (used by the generator, which also runs in a numpy<2 Triton venv).
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from functools import cache
from pathlib import Path

import numpy as np
from PIL import Image, ImageFilter

from evoharness.sim.colorspace import lab_to_rgb, rgb_to_lab
from evoharness.vocab import COLORS, WORLD_CLASSES

ASSET_DIR = Path(__file__).resolve().parent / "assets"
PAD = 8
FILL_PX = 4
OUTLINE_PX = 5
STICKER_FILL = (242, 242, 238)
OUTLINE = (28, 28, 34)
SHADING = 0.35

_lock = threading.Lock()


def slug(name: str) -> str:
    """Asset file stem of a class: ``"wine glass"`` → ``"wine_glass"``."""
    return name.replace(" ", "_")


@dataclass(frozen=True)
class Sticker:
    """A rendered sticker at canonical size: ``rgba`` (H, W, 4) uint8; ``body`` (H, W) bool,
    the recolourable body; ``mask`` (H, W) bool, the whole sticker silhouette."""

    rgba: np.ndarray
    body: np.ndarray
    mask: np.ndarray

    @property
    def aspect(self) -> float:
        """Width / height."""
        return self.rgba.shape[1] / self.rgba.shape[0]


@cache
def _raw(cls: str) -> tuple[np.ndarray, np.ndarray]:
    path = ASSET_DIR / f"{slug(cls)}.png"
    if not path.is_file():
        raise FileNotFoundError(f"simulator asset missing: {path}")
    with Image.open(path) as im:
        rgba = np.asarray(im.convert("RGBA")).copy()
    with Image.open(ASSET_DIR / f"{slug(cls)}_body.png") as im:
        body = np.asarray(im.convert("L")) >= 128
    return rgba, body


def recolor(rgba: np.ndarray, body: np.ndarray, color: str) -> np.ndarray:
    """Copy of ``rgba`` with the ``body`` pixels recoloured to GenEval colour ``color``."""
    out = rgba.copy()
    if not body.any():
        return out
    px = out[body][:, :3].astype(np.float64) / 255.0
    lab = rgb_to_lab(px)
    anchor = rgb_to_lab(np.array(COLORS[color], dtype=np.float64) / 255.0)
    new = np.empty_like(lab)
    new[:, 0] = anchor[0] + SHADING * (lab[:, 0] - lab[:, 0].mean())
    new[:, 1] = anchor[1]
    new[:, 2] = anchor[2]
    out[body, :3] = np.round(lab_to_rgb(new) * 255.0).astype(np.uint8)
    return out


def sticker(cls: str, color: str | None = None) -> Sticker:
    """The sticker of class ``cls`` with its body in GenEval colour ``color`` (None: the
    picture's own colours). Cached; thread-safe. Raises KeyError for an unknown class or
    colour."""
    if cls not in WORLD_CLASSES:
        raise KeyError(f"unknown class {cls!r}")
    if color is not None and color not in COLORS:
        raise KeyError(f"unknown colour {color!r}")
    with _lock:
        return _sticker(cls, color)


@cache
def _sticker(cls: str, color: str | None) -> Sticker:
    rgba, body = _raw(cls)
    if color is not None:
        rgba = recolor(rgba, body, color)
    h, w = body.shape
    H, W = h + 2 * PAD, w + 2 * PAD
    glyph = np.zeros((H, W, 4), np.uint8)
    glyph[PAD : PAD + h, PAD : PAD + w] = rgba
    bmask = np.zeros((H, W), bool)
    bmask[PAD : PAD + h, PAD : PAD + w] = body
    alpha = Image.fromarray(((glyph[..., 3] > 100) * 255).astype(np.uint8), "L")
    fill = alpha.filter(ImageFilter.MaxFilter(2 * FILL_PX + 1))
    ring = fill.filter(ImageFilter.MaxFilter(2 * OUTLINE_PX + 1))
    fill_m = np.asarray(fill) > 0
    ring_m = np.asarray(ring) > 0
    out = np.zeros((H, W, 4), np.uint8)
    out[ring_m, :3] = OUTLINE
    out[fill_m, :3] = STICKER_FILL
    a = glyph[..., 3:4].astype(np.float32) / 255.0
    out[..., :3] = np.round(glyph[..., :3] * a + out[..., :3] * (1.0 - a)).astype(np.uint8)
    out[..., 3] = np.where(ring_m, 255, 0).astype(np.uint8)
    # crop to the ring
    ys, xs = np.nonzero(ring_m)
    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
    return Sticker(
        rgba=out[y0:y1, x0:x1].copy(),
        body=bmask[y0:y1, x0:x1].copy(),
        mask=ring_m[y0:y1, x0:x1].copy(),
    )
