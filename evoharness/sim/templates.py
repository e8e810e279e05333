"""The inspector's templates: every world class's sticker in each of its 11 body colourings,
scaled into a ``GRID``×``GRID`` cell (CIELAB) with its silhouette, for analysis by synthesis
(steps 3 and 3b of ``evoharness.sim.inspector``'s docstring).

``fit_cell`` scales a crop into a cell as the templates are; ``templates()`` builds them once
per process (thread-safe) from ``evoharness.sim.library``. ``MISS_PENALTY`` and ``MAX_SCORE``
are the scores a template match is read with (mean CIE76 ΔE; ``MISS_PENALTY`` where only one
silhouette has a pixel, a fit above ``MAX_SCORE`` is no detection).
"""

from __future__ import annotations

import threading

import cv2
import numpy as np
from skimage.color import rgb2lab

from evoharness.sim import library
from evoharness.vocab import COLORS, WORLD_CLASSES

GRID = 24
MISS_PENALTY = 60.0
MAX_SCORE = 40.0


def fit_cell(img: np.ndarray, interp: int = cv2.INTER_AREA) -> tuple[np.ndarray, tuple]:
    """Scale ``img`` (h, w[, c]) into a GRID×GRID cell, aspect kept, centred, zero padded.
    Returns the cell and (ox, oy, w, h) of the placed image."""
    h, w = img.shape[:2]
    s = GRID / max(h, w)
    nw, nh = max(1, round(w * s)), max(1, round(h * s))
    small = cv2.resize(img, (nw, nh), interpolation=interp)
    out = np.zeros((GRID, GRID) + img.shape[2:], img.dtype)
    ox, oy = (GRID - nw) // 2, (GRID - nh) // 2
    out[oy : oy + nh, ox : ox + nw] = small
    return out, (ox, oy, nw, nh)


class Templates:
    """The world classes × 11 colourings as GRID cells (CIELAB) with silhouettes."""

    def __init__(self) -> None:
        n = len(WORLD_CLASSES)
        nv = len(COLORS) + 1
        self.lab = np.zeros((n, nv, GRID, GRID, 3), np.float32)
        self.mask = np.zeros((n, GRID, GRID), np.float32)
        anchors = rgb2lab(np.array([list(COLORS.values())], np.float64) / 255.0)[0]
        self.place: list[tuple] = []
        for k, cls in enumerate(WORLD_CLASSES):
            st = library.sticker(cls)
            cell, place = fit_cell(st.rgba[..., :3].astype(np.float32) / 255.0)
            self.place.append(place)
            lab = rgb2lab(cell).astype(np.float32)
            m, _ = fit_cell(st.mask.astype(np.float32))
            self.mask[k] = (m > 0.5).astype(np.float32)
            b, _ = fit_cell(st.body.astype(np.float32))
            body = b > 0.5
            self.lab[k, 0] = lab
            mean_l = float(lab[..., 0][body].mean()) if body.any() else 0.0
            for v, anchor in enumerate(anchors, start=1):
                rec = lab.copy()
                rec[body, 0] = anchor[0] + library.SHADING * (lab[body, 0] - mean_l)
                rec[body, 1] = anchor[1]
                rec[body, 2] = anchor[2]
                self.lab[k, v] = rec
        # classes by placement in the cell (ox, oy, w, h): the occlusion search crops one
        # window per placement and compares it with every class of that placement at once
        self.groups: list[tuple[tuple, np.ndarray, np.ndarray, np.ndarray]] = []
        by: dict[tuple, list[int]] = {}
        for k, pl in enumerate(self.place):
            by.setdefault(pl, []).append(k)
        for pl, ks in sorted(by.items()):
            ox, oy, w, h = pl
            idx = np.array(ks)
            sub_lab = np.ascontiguousarray(self.lab[idx][:, :, oy : oy + h, ox : ox + w])
            sub_mask = np.ascontiguousarray(self.mask[idx][:, oy : oy + h, ox : ox + w])
            self.groups.append((pl, idx, sub_lab, sub_mask))
        self.group_area = [g[3].sum((1, 2)) for g in self.groups]
        #: class index -> (placement group, index in the group)
        self.where = {
            int(k): (gi, j) for gi, g in enumerate(self.groups) for j, k in enumerate(g[1])
        }
        self.group_flat = [np.ascontiguousarray(g[3].reshape(len(g[1]), -1)) for g in self.groups]


_TEMPLATES: Templates | None = None
_TLOCK = threading.Lock()


def templates() -> Templates:
    """The process's ``Templates``, built on first use (thread-safe)."""
    global _TEMPLATES
    with _TLOCK:
        if _TEMPLATES is None:
            _TEMPLATES = Templates()
        return _TEMPLATES
