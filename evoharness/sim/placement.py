"""Where the simulator's items go: boxes in the image for the planned items
(``evoharness.sim.planning``), apart from each other, in their relation's region, and a depth
pair's front object overlapping its back one (``Placement`` in ``evoharness.sim.generator``'s
docstring). Imports only numpy, Pillow, pydantic and the evoharness core.
"""

from __future__ import annotations

import math

import numpy as np

from evoharness.sim.draws import Draws
from evoharness.sim.params import SimParams
from evoharness.sim.planning import Item
from evoharness.sim.raster import font


def place(p: SimParams, items: list[Item], draws: Draws, W: int, H: int) -> bool:
    """Give every unplaced item a box (pixels) in a W×H image: sizes of
    ``min_object_frac``..``max_object_frac`` of the side (smaller when there are many), inside
    the item's ``region`` when it has one, at least ``gap_px`` apart from every placed box; a
    depth pair's front object overlapping its back one (``overlap_box``). Draws ``place``
    keyed by the item. Returns whether any box had to overlap another (no free spot left)."""
    fixed = [it.box for it in items if it.box is not None]
    todo = [it for it in items if it.box is None]
    n = max(1, len(todo) + len(fixed))
    side = min(W, H)
    max_frac = min(p.max_object_frac, 0.78 / math.ceil(math.sqrt(n)))
    min_frac = min(p.min_object_frac, max_frac * 0.8)
    placed: list[tuple[int, int, int, int]] = list(fixed)  # type: ignore[arg-type]
    overlap = False
    gap = p.gap_px
    for it in todo:
        rng = draws.rng("place", *it.key)
        if it.kind == "panel":
            fs = max(18, round(side * 0.055))
            tw = font(fs).getlength(it.text or "") + fs
            w, h = min(W - 8, int(tw)), int(fs * 1.9)
        else:
            s = rng.uniform(min_frac, max_frac) * side
            if it.front is not None:  # a back object: DEPTH_SCALE of its front object
                s = draws.rng("place", *it.front.key).uniform(min_frac, max_frac) * side
                s *= it.scale
            w, h = (int(s), int(s / it.aspect)) if it.aspect >= 1 else (int(s * it.aspect), int(s))
        box = None
        if it.over is not None and it.over.box is not None:
            box = overlap_box(it, (w, h), rng, placed, W, H, gap)
            if box is not None:
                it.box = box
                it.overlapping = True
                placed.append(box)
                continue
        for attempt in range(120):
            if attempt and attempt % 40 == 0 and it.kind != "panel":
                w, h = int(w * 0.85), int(h * 0.85)
            cx0, cy0, cx1, cy1 = it.region or (0.0, 0.0, 1.0, 1.0)
            lo_x = max(2, int(cx0 * W - w / 2))
            hi_x = min(W - w - 2, int(cx1 * W - w / 2))
            lo_y = max(2, int(cy0 * H - h / 2))
            hi_y = min(H - h - 2, int(cy1 * H - h / 2))
            if hi_x < lo_x or hi_y < lo_y:
                lo_x, hi_x, lo_y, hi_y = 2, max(2, W - w - 2), 2, max(2, H - h - 2)
            x = int(rng.integers(lo_x, hi_x + 1))
            y = int(rng.integers(lo_y, hi_y + 1))
            cand = (x, y, x + w, y + h)
            if all(apart(cand, q, gap) for q in placed):
                box = cand
                break
        if box is None:
            overlap = True
            box = cand
        it.box = box
        placed.append(box)
    return overlap


def overlap_box(
    it: Item,
    size: tuple[int, int],
    rng: np.random.Generator,
    placed: list[tuple[int, int, int, int]],
    W: int,
    H: int,
    gap: int,
) -> tuple[int, int, int, int] | None:
    """A box of ``size`` (w, h px) covering ``it.occlusion`` of the back object's box
    (``it.over.box``), offset diagonally down-left or down-right (the front box reaches
    past the back box's bottom and one side), inside the image and ``gap`` px apart from
    every other placed box. None when no such spot is found in 40 tries."""
    assert it.over is not None and it.over.box is not None
    bx0, by0, bx1, by1 = it.over.box
    bw, bh = bx1 - bx0, by1 - by0
    w, h = size
    want = it.occlusion * bw * bh
    others = [q for q in placed if q != it.over.box]
    for _ in range(40):
        right = rng.random() < 0.5
        # how far down the front box's top sits inside the back box: a share of its height
        ov_h = int(bh * rng.uniform(0.45, 0.85))
        ov_w = int(min(bw, w, max(4.0, want / max(1, ov_h))))
        ov_h = int(min(bh, h, max(4.0, want / max(1, ov_w))))
        x = bx1 - ov_w if right else bx0 + ov_w - w
        y = by1 - ov_h
        cand = (x, y, x + w, y + h)
        if x < 2 or y < 2 or x + w > W - 2 or y + h > H - 2:
            continue
        if (right and cand[2] <= bx1) or (not right and cand[0] >= bx0) or cand[3] <= by1:
            continue  # must reach past the back box's side and bottom
        if all(apart(cand, q, gap) for q in others):
            return cand
    return None


def apart(a: tuple[int, int, int, int], b: tuple[int, int, int, int], gap: int) -> bool:
    """Whether boxes ``a`` and ``b`` (pixels) are at least ``gap`` px apart on some axis."""
    return a[2] + gap <= b[0] or b[2] + gap <= a[0] or a[3] + gap <= b[1] or b[3] + gap <= a[1]
