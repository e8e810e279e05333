"""Shapes around stickers: how the embedded world draws a shape (``vocab.SHAPES``) as a dashed
outline around a sticker, and how its inspector reads it back (issue 19).

Drawing: the outline is a 1-px dashed line (``DASH_ON`` px drawn, ``DASH_OFF`` px left out,
``CONTRAST`` grey levels darker than the background under it) along the shape's path around the sticker's drawn box grown by
``GAP`` px, ``E`` (W × H), S = max(W, H): ``round`` the circle through E's corners; ``square``
the S × S square centred on E; ``rectangular`` the 2S × 1.6S rectangle centred on E;
``triangular`` the triangle with its base on E's bottom edge, 2.5W wide, and its apex 1.5H
above E's top, centred (its sides pass W/4 outside E's top corners). Every path encloses E. All outlines are
drawn before any sticker, so stickers cover them. A 1-px line of ``CONTRAST`` = 45 is at most
22.5 grey levels at the inspector's half size, under its foreground threshold (26): the
outline never becomes part of a blob, so detections and every other reading are unchanged
(a darker line survived the 2×2 opening where it ran diagonally or close to a sticker and
cost crowded scenes presence and counts).

Reading (``read``): for each shape, the fraction of its path's points (``path``, 1 px apart,
those inside the image) within 2 px of a pixel darker than the background by more than
``DARK`` in every channel (``outline_map``; the background model is a plane fitted at
quarter size, so ``DARK`` sits well below ``CONTRAST``); the best shape wins when its fraction is at
least ``MIN_HIT`` (a fully visible dashed path scores ≈ ``DASH_ON / (DASH_ON + DASH_OFF)``),
else no outline (None).
"""

from __future__ import annotations

import math

import numpy as np

from evoharness.vocab import SHAPES

GAP = 6
DASH_ON = 6
DASH_OFF = 6
CONTRAST = 45.0
DARK = 25.0
MIN_HIT = 0.3

Box = tuple[float, float, float, float]


def _polyline(pts: list[tuple[float, float]]) -> tuple[np.ndarray, np.ndarray]:
    """Points 1 px apart along the closed polyline ``pts``."""
    xs: list[np.ndarray] = []
    ys: list[np.ndarray] = []
    for (x0, y0), (x1, y1) in zip(pts, pts[1:] + pts[:1], strict=True):
        n = max(1, math.ceil(math.hypot(x1 - x0, y1 - y0)))
        t = np.arange(n) / n
        xs.append(x0 + (x1 - x0) * t)
        ys.append(y0 + (y1 - y0) * t)
    return np.concatenate(xs), np.concatenate(ys)


def path(name: str, box: Box) -> tuple[np.ndarray, np.ndarray]:
    """(xs, ys): points 1 px apart along shape ``name``'s outline around the sticker drawn in
    ``box`` (x0, y0, x1, y1 in image pixels). Raises KeyError for an unknown shape."""
    if name not in SHAPES:
        raise KeyError(f"unknown shape {name!r}")
    x0, y0, x1, y1 = box[0] - GAP, box[1] - GAP, box[2] + GAP, box[3] + GAP
    w, h = x1 - x0, y1 - y0
    cx, cy = (x0 + x1) / 2, (y0 + y1) / 2
    if name == "round":
        r = math.hypot(w, h) / 2
        n = max(8, math.ceil(2 * math.pi * r))
        a = 2 * math.pi * np.arange(n) / n
        return cx + r * np.cos(a), cy + r * np.sin(a)
    s = max(w, h)
    if name == "square":
        hw = hh = s / 2
    elif name == "rectangular":
        hw, hh = s, 0.8 * s
    else:  # triangular
        return _polyline([(cx, y0 - 1.5 * h), (x1 + 0.75 * w, y1), (x0 - 0.75 * w, y1)])
    return _polyline(
        [(cx - hw, cy - hh), (cx + hw, cy - hh), (cx + hw, cy + hh), (cx - hw, cy + hh)]
    )


def dashes(name: str, box: Box) -> tuple[np.ndarray, np.ndarray]:
    """The integer pixels (xs, ys) of the dashed outline of shape ``name`` around ``box``."""
    xs, ys = path(name, box)
    on = (np.arange(len(xs)) % (DASH_ON + DASH_OFF)) < DASH_ON
    return np.round(xs[on]).astype(np.int64), np.round(ys[on]).astype(np.int64)


def outline_map(rgb: np.ndarray, background: np.ndarray) -> np.ndarray:
    """(H, W) bool: pixels within 2 px of one darker than ``background`` (H, W, 3, the
    inspector's background model) by more than ``DARK`` in every channel — where an outline
    may be (the path may sit a pixel or two off a box the inspector measured)."""
    import cv2

    dark = ((background - rgb.astype(np.float32)).min(axis=2) > DARK).astype(np.uint8)
    return cv2.dilate(dark, np.ones((5, 5), np.uint8)).astype(bool)


def read(outline: np.ndarray, box: Box) -> str | None:
    """The shape outlined around the sticker drawn in ``box`` (image pixels), given
    ``outline`` (``outline_map``); None when no shape's path reaches ``MIN_HIT``."""
    H, W = outline.shape
    best, best_hit = None, 0.0
    for name in SHAPES:
        xs, ys = path(name, box)
        xi, yi = np.round(xs).astype(np.int64), np.round(ys).astype(np.int64)
        inside = (xi >= 0) & (xi < W) & (yi >= 0) & (yi < H)
        if inside.sum() < 20:
            continue
        hit = float(outline[yi[inside], xi[inside]].mean())
        if hit > best_hit:
            best, best_hit = name, hit
    return best if best_hit >= MIN_HIT else None


__all__ = ["CONTRAST", "DASH_OFF", "DASH_ON", "GAP", "dashes", "outline_map", "path", "read"]
