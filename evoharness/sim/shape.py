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
outline never becomes part of a half-size blob (a darker line survived the 2×2 opening where
it ran diagonally or close to a sticker and cost crowded scenes presence and counts). At
full size it is over the threshold, so where a neighbour's dash touches a sticker the
inspector leaves the dash out of the sticker's silhouette (``dash_pixels``: dark by the
outline's contrast, in no 2×2 block of foreground); without that, the dash grew the box and
silhouette by up to 3 px and crowded scenes lost counts to misclassified stickers (a pair
of renders of the same scene with and without outlines gives the same classes and counts,
``tests/unit/test_sim_attributes.py``; boxes may still differ by 1 px where a dash meets a
sticker's antialiased edge).

Reading (``read``): for each shape, the fraction of its path's visible points (``path``, 1 px
apart, inside the image, more than ``COVER_PX`` from any sticker or sign — stickers cover
the outlines, and a neighbouring dark sticker under the path read as a dash) that lie
within 2 px of a pixel darker than the background by more than ``DARK`` and at most
``DASH_MAX`` in every channel (``outline_map``; the background model is a plane fitted at
quarter size, so ``DARK`` sits well below ``CONTRAST``); the best shape wins when its
fraction is at least ``MIN_HIT`` over at least ``MIN_POINTS`` visible points (a fully
visible dashed path scores ≈ ``DASH_ON / (DASH_ON + DASH_OFF)``), else no outline (None).
Before visibility, a crowded scene without any outline read a shape on 6 of 30 images
(a neighbour's dark body on a candidate path); explaining away neighbours' read paths was
tried on top and measured no gain (1473 vs 1471 of 1476 on 200 crowded images), so it is
not done.
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
#: A shape is read from at least this many visible, unclaimed points of its path.
MIN_POINTS = 20
#: Path points within this many pixels of a sticker or sign are hidden (``outline_map``).
COVER_PX = 3
#: A dash pixel is at most this much darker than the background in any channel (``CONTRAST``
#: plus the generator's noise and the background plane's error, with room to spare).
DASH_MAX = CONTRAST + 25.0

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


def dash_pixels(rgb: np.ndarray, background: np.ndarray, fg: np.ndarray) -> np.ndarray:
    """(h, w) bool: the pixels of the full-size foreground ``fg`` ((h, w), nonzero = fore)
    that look like an outline's dashes rather than a sticker, so blob segmentation can leave
    them out: darker than ``background`` ((h, w, 3) float, the inspector's background model
    at the pixels of ``rgb`` (h, w, 3) uint8) by more than ``DARK`` and at most ``DASH_MAX``
    in every channel (the outline is the background darkened by ``CONTRAST``), and in no 2×2
    block of foreground (a 1-px line; a sticker's edge is thicker: its dark ring is
    ``library.OUTLINE_PX`` wide at the picture's scale). A neighbour's dash that touches a
    sticker's edge would otherwise join the sticker at full size and grow its box and
    silhouette by the few pixels the half-size blob is dilated by (issue 19: crowded
    counts)."""
    f = fg != 0
    d = background - rgb.astype(np.float32)
    band = (d.min(axis=2) > DARK) & (d.max(axis=2) <= DASH_MAX)
    # blocks[y, x]: the 2×2 block with top-left (y, x) is all foreground (an explicit
    # opening: OpenCV's even-sized kernels are anchored off-centre and shift it by a pixel)
    blocks = f[:-1, :-1] & f[1:, :-1] & f[:-1, 1:] & f[1:, 1:]
    thick = np.zeros_like(f)
    thick[:-1, :-1] |= blocks
    thick[1:, :-1] |= blocks
    thick[:-1, 1:] |= blocks
    thick[1:, 1:] |= blocks
    return f & band & ~thick


def outline_map(
    rgb: np.ndarray, background: np.ndarray, cover: np.ndarray | None = None
) -> tuple[np.ndarray, np.ndarray]:
    """(outline, visible), two (H, W) bool maps. ``outline``: pixels within 2 px of one
    darker than ``background`` (H, W, 3, the inspector's background model) by more than
    ``DARK`` and at most ``DASH_MAX`` in every channel and not under ``cover`` — where an
    outline may be (the path may sit a pixel or two off a box the inspector measured).
    ``visible``: pixels more than ``COVER_PX`` from ``cover`` ((H, W), nonzero = a sticker or
    sign, the inspector's foreground; None = nothing covers the background). Stickers are
    pasted over every outline, so a path point near one is hidden: it is neither evidence
    for a shape (a dark sticker there would read as a dash) nor against it."""
    import cv2

    d = background - rgb.astype(np.float32)
    dark = (d.min(axis=2) > DARK) & (d.max(axis=2) <= DASH_MAX)
    if cover is None:
        visible = np.ones(dark.shape, bool)
    else:
        k = 2 * COVER_PX + 1
        visible = cv2.dilate((cover != 0).astype(np.uint8), np.ones((k, k), np.uint8)) == 0
    dark &= visible
    return cv2.dilate(dark.astype(np.uint8), np.ones((5, 5), np.uint8)).astype(bool), visible


def _points(name: str, box: Box, shape: tuple[int, int]) -> tuple[np.ndarray, np.ndarray]:
    """Integer pixels (xs, ys) of shape ``name``'s path around ``box`` inside an image of
    ``shape`` (H, W)."""
    H, W = shape
    xs, ys = path(name, box)
    xi, yi = np.round(xs).astype(np.int64), np.round(ys).astype(np.int64)
    inside = (xi >= 0) & (xi < W) & (yi >= 0) & (yi < H)
    return xi[inside], yi[inside]


def read(outline: np.ndarray, box: Box, visible: np.ndarray | None = None) -> str | None:
    """The shape outlined around the sticker drawn in ``box`` (image pixels), given
    ``outline`` and ``visible`` (``outline_map``; None: all visible): for each shape, the
    fraction of its path's visible points that are on ``outline``. The best shape wins when
    its fraction is at least ``MIN_HIT`` over at least ``MIN_POINTS`` visible points; else
    None (no outline, or too little of it visible)."""
    best, best_hit = None, 0.0
    for name in SHAPES:
        xi, yi = _points(name, box, outline.shape)
        use = np.ones(len(xi), bool)
        if visible is not None:
            use &= visible[yi, xi]
        if use.sum() < MIN_POINTS:
            continue
        hit = float(outline[yi[use], xi[use]].mean())
        if hit > best_hit:
            best, best_hit = name, hit
    return best if best_hit >= MIN_HIT else None


__all__ = [
    "CONTRAST",
    "DASH_OFF",
    "DASH_ON",
    "GAP",
    "dash_pixels",
    "dashes",
    "outline_map",
    "path",
    "read",
]
