"""Occlusion in the embedded world's inspector (step 3b of ``evoharness.sim.inspector``'s
docstring, issue 19): a blob that fits no template, or one only weakly, read as two
overlapping stickers by analysis by synthesis.

``separate`` finds the front (whole) and the back (partly hidden) sticker of a blob in
corner-anchored template windows (``windows``, ``best_window``, ``window_score``, ``hide``);
the inspector turns the two ``Piece``s into detections (the back one's ``occluders`` names
the front one). Perception only: no verdicts here.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import NamedTuple

import cv2
import numpy as np
from skimage.color import rgb2lab

from evoharness.sim import library
from evoharness.sim.templates import GRID, MAX_SCORE, MISS_PENALTY, Templates
from evoharness.vocab import WORLD_CLASSES

#: Window long side as a share of the largest that fits the blob.
OCCLUSION_RATIOS = tuple(0.97 * 0.9**i for i in range(8))  # 0.97 .. 0.46
OCCLUSION_MAX_MISS = 0.1  # share of a front template's silhouette allowed outside the blob
OCCLUSION_HIDE_PX = 3  # the front silhouette is grown by this much to hide its soft edge
MIN_VISIBLE = 0.3  # share of the back sticker's silhouette that must be visible
MIN_COVER = 0.9  # share of the blob the two stickers must explain
OCCLUSION_BAND = 0.25  # share of a front window along its anchored edges: no other sticker
OCCLUSION_CANDIDATES = 64  # window × class hypotheses scored in colour
OCCLUSION_REFINE = 4  # of which the best are refined between the scale steps:
OCCLUSION_REFINE_STEPS = (0.95, 0.975, 1.025, 1.05)  # window size factors tried
OCCLUSION_PER_WINDOW = 1  # and the best class of every window ...
OCCLUSION_WINDOW_SHARE = 0.5  # ... of the windows whose best silhouette is in this best share
#: A whole-blob fit scoring above this is also tried as two stickers. Measured: 6 of 221
#: single stickers' whole fits are above 28 (at most 32.9; ``sim_bench.py --quick``), the
#: blobs of two overlapping stickers fit none (14 of 27) or above 29 (``sim_bench.py
#: --depth``); a weak single fit is kept unless two stickers explain it far better
#: (``OCCLUSION_GAIN``).
OCCLUSION_TRY_ABOVE = 28.0
OCCLUSION_GAIN = 0.75  # ... and replaced when both stickers score under this × its score


class Piece(NamedTuple):
    """One sticker of a separated blob: class index ``k`` (in ``vocab.WORLD_CLASSES``),
    colouring ``v`` (0 = the picture's own, v ≥ 1 = ``COLORS``' v-th), ``score`` (mean ΔE),
    ``window`` (x0, y0, w, h) in the blob's crop, ``visible``: a bool mask of the window's
    size of its visible pixels (None: the front sticker, wholly visible)."""

    k: int
    v: int
    score: float
    window: tuple[int, int, int, int]
    visible: np.ndarray | None


@functools.lru_cache(maxsize=4096)
def band(w: int, h: int, left: bool, top: bool) -> np.ndarray:
    """(h, w) float mask of a window's band along its anchored edges (``left``: the left edge,
    else the right one; ``top`` likewise), ``OCCLUSION_BAND`` of its size. Cached: the same
    array is returned for the same arguments (read it, never write it)."""
    bw, bh = max(1, round(OCCLUSION_BAND * w)), max(1, round(OCCLUSION_BAND * h))
    b = np.zeros((h, w), np.float32)
    if left:
        b[:, :bw] = 1.0
    else:
        b[:, w - bw :] = 1.0
    if top:
        b[:bh] = 1.0
    else:
        b[h - bh :] = 1.0
    return b


def windows(Wc: int, Hc: int, T: Templates) -> Iterator[tuple[int, int, int, int, int]]:
    """Corner-anchored windows of a Wc×Hc blob box: for every corner, every placement
    group of the templates and every ``OCCLUSION_RATIOS`` scale, (group, x0, y0, w, h)."""
    for gi, ((_, _, gw, gh), *_rest) in enumerate(T.groups):
        big = min(Wc * GRID / gw, Hc * GRID / gh)
        for r in OCCLUSION_RATIOS:
            w, h = round(big * r * gw / GRID), round(big * r * gh / GRID)
            if w < 12 or h < 12:
                break
            for x0, y0 in ((0, 0), (Wc - w, 0), (0, Hc - h), (Wc - w, Hc - h)):
                yield gi, x0, y0, w, h


def separate(
    crop: np.ndarray, mask: np.ndarray, T: Templates, beat: float = MAX_SCORE
) -> list[Piece] | None:
    """Step 3b: a blob no template fits, read as two overlapping stickers (analysis by
    synthesis of an occlusion). The *front* sticker is whole: a template placed in a window
    anchored at a corner of the blob's box must have its whole silhouette on the blob (at
    most ``OCCLUSION_MAX_MISS`` outside it) and is scored by mean ΔE over its silhouette only
    (the rest of the window may be the other sticker). The front sticker owns the overlap's
    pixels: its silhouette, grown by ``OCCLUSION_HIDE_PX``, is hidden; the *back* sticker is
    the template (again corner-anchored) whose silhouette minus the hidden part best explains
    the blob's remaining pixels — mean ΔE over its visible silhouette, ``MISS_PENALTY`` for
    its visible silhouette off the blob and for remaining blob pixels it leaves unexplained —
    with at least ``MIN_VISIBLE`` of its silhouette visible. Both scores must be below
    ``beat`` (``MAX_SCORE``, or ``OCCLUSION_GAIN`` × the whole blob's weak fit) and the two
    must explain ``MIN_COVER`` of the blob.

    ``crop``/``mask``: the blob at full size (RGB uint8 (h, w, 3), its silhouette (h, w)).
    Returns the two stickers, front first, as ``Piece``s in the crop's pixels, or None when
    the blob is not read as two."""
    Hc, Wc = mask.shape
    if Hc < 24 or Wc < 24:
        return None
    lab = rgb2lab(crop.astype(np.float32) / 255.0).astype(np.float32)
    m = mask.astype(np.float32)
    front = best_window(lab, m, None, T)
    if front is None:
        return None
    f_score, fk, fv, (fx, fy, fw, fh) = front
    if f_score >= beat:  # the best whole template: the other order cannot do better
        return None
    hidden = hide(fk, (fx, fy, fw, fh), (Hc, Wc))
    back = best_window(lab, m, hidden, T)
    if back is None:
        return None
    b_score, bk, bv, (bx, by, bw, bh) = back
    # the other order, for the same two windows: with look-alike stickers (one colour)
    # the back one can fit whole too; the order that explains the blob better wins
    hidden_b = hide(bk, (bx, by, bw, bh), (Hc, Wc))
    gb, cb = T.where[bk]
    gf, cf = T.where[fk]
    alt_b = window_score(lab, m, None, T, gb, np.array([cb]), (bx, by, bw, bh))[0]
    rest_f = m * (hidden_b == 0)
    hid_f = (hidden_b > 0).astype(np.float32)
    alt_f = window_score(lab, rest_f, hid_f, T, gf, np.array([cf]), (fx, fy, fw, fh))[0]
    if float(alt_b.min() + alt_f.min()) < f_score + b_score:
        (fk, fv, f_score, (fx, fy, fw, fh)), (bk, bv, b_score, (bx, by, bw, bh)) = (
            (bk, int(alt_b.argmin()), float(alt_b.min()), (bx, by, bw, bh)),
            (fk, int(alt_f.argmin()), float(alt_f.min()), (fx, fy, fw, fh)),
        )
        hidden = hidden_b
    if max(f_score, b_score) >= beat:
        return None
    explained = hidden.copy()
    explained[by : by + bh, bx : bx + bw] |= hide(bk, (bx, by, bw, bh), (Hc, Wc), 0)[
        by : by + bh, bx : bx + bw
    ]
    if (explained.astype(bool) & mask.astype(bool)).sum() < MIN_COVER * mask.sum():
        return None
    return [
        Piece(fk, fv, f_score, (fx, fy, fw, fh), None),
        Piece(bk, bv, b_score, (bx, by, bw, bh), hidden[by : by + bh, bx : bx + bw] == 0),
    ]


def hide(
    k: int,
    win: tuple[int, int, int, int],
    shape: tuple[int, int],
    grow: int = OCCLUSION_HIDE_PX,
) -> np.ndarray:
    """(h, w) uint8 mask of class ``k``'s silhouette drawn in window ``win`` (x0, y0, w,
    h) of a blob of ``shape``, grown by ``grow`` px."""
    x0, y0, w, h = win
    sil = cv2.resize(
        library.sticker(WORLD_CLASSES[k]).mask.astype(np.uint8),
        (w, h),
        interpolation=cv2.INTER_NEAREST,
    )
    out: np.ndarray = np.zeros(shape, np.uint8)
    out[y0 : y0 + h, x0 : x0 + w] = sil
    if grow:
        out = cv2.dilate(out, np.ones((2 * grow + 1, 2 * grow + 1), np.uint8))
    return out


def best_window(
    lab: np.ndarray, m: np.ndarray, hidden: np.ndarray | None, T: Templates
) -> tuple[float, int, int, tuple[int, int, int, int]] | None:
    """The best corner-anchored template of a blob (``lab`` its CIELAB pixels, ``m`` its
    silhouette, full size): whole (``hidden`` None) or occluded where ``hidden`` is set
    (``separate``). Silhouettes first: every window × class gets a silhouette mismatch
    (front: its silhouette off the blob, plus, in the band along the window's anchored
    edges (``OCCLUSION_BAND`` of its size) where no other sticker can be, blob pixels it
    leaves out; back: its visible silhouette off the blob plus remaining blob pixels it
    leaves out); the ``OCCLUSION_CANDIDATES`` best are scored in colour (module doc,
    3b). Returns (score, class index, colouring, (x0, y0, w, h)) or None when no score
    is <= ``MAX_SCORE``."""
    Hc, Wc = m.shape
    rest = m if hidden is None else m * (hidden == 0)
    total_rest = float(rest.sum())
    hid = None if hidden is None else (hidden > 0).astype(np.float32)
    wins: list[tuple[int, int, int, int, int]] = []
    sil: list[np.ndarray] = []
    for gi, x0, y0, w, h in windows(Wc, Hc, T):
        (_, _, gw, gh), idx, glab, gmask = T.groups[gi]
        area = T.group_area[gi]
        gflat = T.group_flat[gi]  # (m, gh·gw): the sums below as matrix products
        wr = cv2.resize(rest[y0 : y0 + h, x0 : x0 + w], (gw, gh), interpolation=cv2.INTER_AREA)
        vis = (wr > 0.5).astype(np.float32).ravel()
        if hid is None:
            vb = vis * band(gw, gh, x0 == 0, y0 == 0).ravel()
            off = area - gflat @ vis  # its silhouette off the blob
            left_out = float(vb.sum()) - gflat @ vb  # band pixels it leaves out
            bad = np.where(off <= OCCLUSION_MAX_MISS * area, (off + left_out) / area, np.inf)
        else:
            wh = cv2.resize(hid[y0 : y0 + h, x0 : x0 + w], (gw, gh), interpolation=cv2.INTER_AREA)
            shown = (wh <= 0.5).astype(np.float32).ravel()
            n_known = gflat @ shown
            inside = float(rest[y0 : y0 + h, x0 : x0 + w].sum())
            outside = (total_rest - inside) * (gw * gh) / float(w * h)
            off = n_known - gflat @ (shown * vis)
            left_out = float(vis.sum()) - gflat @ vis + outside
            bad = np.where(
                n_known >= MIN_VISIBLE * area,
                (off + left_out) / np.maximum(n_known + left_out, 1.0),
                np.inf,
            )
        wins.append((gi, x0, y0, w, h))
        sil.append(bad)
    if not sil:
        return None
    # candidates: the best OCCLUSION_PER_WINDOW classes of the OCCLUSION_WINDOW_SHARE
    # best windows, and the
    # OCCLUSION_CANDIDATES best of all (small windows inside a solid blob fit any
    # silhouette, so a global list alone can miss the right window)
    flat = np.concatenate(sil)
    starts = np.cumsum([0] + [len(b) for b in sil])
    n = min(OCCLUSION_CANDIDATES, len(flat))
    cand: dict[int, set[int]] = {}
    for j in np.argpartition(flat, n - 1)[:n]:
        if np.isfinite(flat[j]):
            wi = int(np.searchsorted(starts, j, side="right") - 1)
            cand.setdefault(wi, set()).add(int(j - starts[wi]))
    best_of = np.array([float(b.min()) for b in sil])
    finite = best_of[np.isfinite(best_of)]
    cut = float(np.quantile(finite, OCCLUSION_WINDOW_SHARE)) if len(finite) else -1.0
    for wi, bad in enumerate(sil):
        if not best_of[wi] <= cut:
            continue
        k = min(OCCLUSION_PER_WINDOW, len(bad))
        for c in np.argpartition(bad, k - 1)[:k]:
            if np.isfinite(bad[c]):
                cand.setdefault(wi, set()).add(int(c))
    scored: list[tuple[float, int, int, int, tuple[int, int, int, int]]] = []
    for wi, cs in cand.items():
        gi, x0, y0, w, h = wins[wi]
        ci = np.array(sorted(cs))
        score = window_score(lab, rest, hid, T, gi, ci, (x0, y0, w, h))
        r, cv = (int(i) for i in np.unravel_index(int(np.argmin(score)), score.shape))
        scored.append((float(score[r, cv]), gi, int(ci[r]), cv, (x0, y0, w, h)))
    scored.sort(key=lambda x: x[0])
    # refine the best few between the scale steps (the anchored corner stays)
    refined = list(scored[:OCCLUSION_REFINE])
    for _, gi, c, _, (x0, y0, w, h) in scored[:OCCLUSION_REFINE]:
        for f in OCCLUSION_REFINE_STEPS:
            nw, nh = round(w * f), round(h * f)
            nx = 0 if x0 == 0 else Wc - nw
            ny = 0 if y0 == 0 else Hc - nh
            if nw > Wc or nh > Hc or nw < 12 or nh < 12:
                continue
            score = window_score(lab, rest, hid, T, gi, np.array([c]), (nx, ny, nw, nh))
            bv = int(np.argmin(score[0]))
            refined.append((float(score[0, bv]), gi, c, bv, (nx, ny, nw, nh)))
    if not refined:
        return None
    sc, gi, c, bv, win = min(refined, key=lambda x: x[0])
    if sc > MAX_SCORE:
        return None
    return sc, int(T.groups[gi][1][c]), bv, win


def window_score(
    lab: np.ndarray,
    rest: np.ndarray,
    hid: np.ndarray | None,
    T: Templates,
    gi: int,
    cs: np.ndarray,
    win: tuple[int, int, int, int],
) -> np.ndarray:
    """Scores (len(cs), colourings) of classes ``cs`` (indices in placement group
    ``gi``) in window ``win`` (x0, y0, w, h) of a blob (``best_window``): whole (``hid``
    None) — mean ΔE over the silhouette, ``MISS_PENALTY`` where it is off the blob — or
    occluded — over the visible silhouette, ``MISS_PENALTY`` where that is off the blob
    and for each remaining blob pixel (``rest``) it leaves out."""
    x0, y0, w, h = win
    (_, _, gw, gh), _idx, glab, gmask = T.groups[gi]
    wr = cv2.resize(rest[y0 : y0 + h, x0 : x0 + w], (gw, gh), interpolation=cv2.INTER_AREA)
    vis = (wr > 0.5).astype(np.float32)
    wl = cv2.resize(lab[y0 : y0 + h, x0 : x0 + w], (gw, gh), interpolation=cv2.INTER_AREA)
    de = np.minimum(np.sqrt(((glab[cs] - wl[None, None]) ** 2).sum(-1)), MISS_PENALTY)
    gm = gmask[cs]  # (n, gh, gw)
    if hid is None:
        tm = gm
        off = (tm * (1.0 - vis)).sum((1, 2))
        den = T.group_area[gi][cs]
    else:
        wh = cv2.resize(hid[y0 : y0 + h, x0 : x0 + w], (gw, gh), interpolation=cv2.INTER_AREA)
        tm = gm * (wh <= 0.5)
        outside = float(rest.sum() - rest[y0 : y0 + h, x0 : x0 + w].sum())
        unexplained = (vis * (1.0 - gm)).sum((1, 2)) + outside * (gw * gh) / (w * h)
        off = (tm * (1.0 - vis)).sum((1, 2)) + unexplained
        den = np.maximum(1.0, tm.sum((1, 2)) + unexplained)
    num = (de * (tm * vis)[:, None]).sum((-1, -2)) + MISS_PENALTY * off[:, None]
    return num / den[:, None]
