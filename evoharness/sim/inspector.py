"""``SimInspector``: the embedded world's verifier. It sees PIXELS ONLY, never the manifest.

Pipeline (classical computer vision, OpenCV + scikit-image + rapidocr):

1. Background model: the simulator paints a linear colour gradient, so a least-squares plane
   per channel models it, fitted robustly on a 1/4-size image: each round refits on the
   pixels whose residual is below the next threshold of ``BG_SCHEDULE``. Foreground = max channel difference > ``FG_THRESHOLD`` at
   half size, specks opened away, 1-px gaps closed, holes filled (every sticker and sign has a
   closed dark outline); connected components are the blobs.
2. Sign panels: a blob whose bounding box it fills (extent >= 0.85) and whose inside is mostly
   the panel fill colour is a sign; its text is read by OCR (``rapidocr-onnxruntime``
   recogniser on the crop; full detection + recognition when no panel is found).
3. Objects: each other blob's crop is scaled (aspect kept) into a ``GRID``×``GRID`` cell and
   compared with the templates of every world class (``vocab.WORLD_CLASSES``) in each of 11 body colourings (picture's own + the 10
   GenEval colours), the mean CIE76 ΔE over the union of the two silhouettes (``MISS_PENALTY``
   where only one has a pixel) — analysis by synthesis. Best score <= ``MAX_SCORE`` is a
   detection. Candidates are first ranked by silhouette mismatch alone and only the best
   ``SHAPE_CANDIDATES`` are compared in colour. A blob that fits no template (touching
   stickers) is split coarse-to-fine: eroded by ``SPLIT_ERODE[level]`` half-size px, each
   core grown back inside the blob and classified again (up to ``SPLIT_DEPTH`` levels).
   Each blob yields at most one detection per piece, so no extra suppression is needed.
3b. Occlusion (issue 19, depth): a blob that fits no template, or fits one only weakly
   (score > ``OCCLUSION_TRY_ABOVE``), is tried as two overlapping stickers, by analysis by
   synthesis (``evoharness.sim.occlusion.separate``): the *front* sticker is whole, a template in a window anchored
   at a corner of the blob's box whose whole silhouette lies on the blob, scored on its
   silhouette only; the front sticker owns the overlap's pixels (its silhouette grown by
   ``OCCLUSION_HIDE_PX`` is hidden), and the *back* sticker is the corner-anchored template
   that best explains the remaining pixels on its visible mask. The other order is scored on
   the same two windows and the better explanation wins. Both detections are kept when both
   scores are under ``MAX_SCORE`` (under ``OCCLUSION_GAIN`` × a weak whole fit) and together
   they explain ``MIN_COVER`` of the blob; the back one's ``occluders`` names the front one.
   An occluder inside the other's box span (anchored at no corner) is not separated.
4. Colour: the detected class's body mask, mapped onto the crop and eroded, selects the body
   pixels; their mean CIELAB (scikit-image ``rgb2lab``) is named by the smallest CIEDE2000
   (``skimage.color.deltaE_ciede2000``) to the GenEval colour anchors (``evoharness.vocab``).
5. Position: GenEval's rule on box centres (``evoharness.tasks.position``, shared with the
   OWLv2 verifier; geneval/evaluation/evaluate_images.py, ``relative_position`` with
   ``POSITION_THRESHOLD = 0.1``): the centre offset, shrunk by 0.1
   × the summed box sizes per axis, normalised by the raw offset's length; "left of" when
   dx < −0.5, "right of" dx > 0.5, "above" dy < −0.5, "below" dy > 0.5. As in GenEval, the
   ``k`` most confident subject boxes (k = ``min_count`` or 1) must all hold it against the
   most confident target box; colour likewise needs ``k`` of the top-``k`` subject boxes in
   the colour.
   Proximity ("next to", "near": ``PROXIMITY_RELATIONS``): T2I-CompBench's rule on box
   centres (``UniDet_eval/2D_spatial_eval.py``, ``determine_position``, distance_threshold
   150 px on its 479-px detector frame = 0.313 of the side: ``evoharness.tasks.proximity``):
   the pair is close when the centres are less than 0.313 apart across *or* down — lenient as
   published: one row or one column passes at any distance. The same ``k`` top subject boxes
   against the most confident target box; the note gives the distances and the threshold.
5b. Depth ("behind", "in front of"; ``tasks.models.DEPTH_RELATIONS``): by occlusion order —
   "A behind B" holds when each of the ``k`` most confident A detections is occluded by a B
   detection (step 3b), "A in front of B" when it occludes one. T2I-CompBench's 3D-spatial
   rule (T2I-CompBench++, UniDet_eval/3D_spatial_eval.py, ``determine_position``) compares
   the mean of a DPT depth map over the two detector boxes and credits only overlapping boxes
   (1 at IoU > 0.5, IoU/0.5 below, 0 apart); with no depth map here, the occlusion the
   generator draws is the depth cue, and its soft score is reported in ``observed``.
6. Text: normalised edit distance (Levenshtein / longer length) between the
   ``canonical_text`` forms (case folded, spaces removed, 0/O and 1/I resolved by word
   context); pass when it is 0 (exact), confidence 1 − distance.

7. Quality (only when a ``quality`` constraint is asked): ``evoharness.sim.quality`` on the
   pixels, with the object blobs of step 1 (sign panels excluded) as the seam masks; passes
   when the score is at least the constraint's threshold; ``observed`` holds every component.

8. Texture (issue 19): the residual of the body pixels against the clean sticker of the
   detected class and colouring, read by ``evoharness.sim.texture.read`` (a coherent
   matched filter: least squares on every pattern at its known phase). An ``attribute`` constraint whose value is a
   ``vocab.TEXTURES`` name needs ``k`` of the top-``k`` subject boxes in that texture, like
   colour; a body too small to read (``texture.MIN_BODY_PX``) makes it ``uncertain``.
9. Shape (issue 19; only when asked, ``inspect(..., shapes=True)``): the dashed outline
   around each detection, read by ``evoharness.sim.shape.read`` against the background
   plane, on the path points no sticker or sign covers; an ``attribute`` constraint whose
   value is a ``vocab.SHAPES`` name is judged like a texture (no outline = fail). Outline
   dashes are never part of a silhouette: step 3's full-size refinement leaves out
   ``shape.dash_pixels`` (a neighbour's dash touching a sticker).

10. Distinct instances (``judge_all``, which ``verify`` uses): constraints of one kind on one
   subject class — several ``object`` constraints ("a car and a car"), several colours ("a red
   car and a blue car"), several textures, several shapes — are satisfied by distinct
   detections, assigned by ``evoharness.tasks.instances.match_instances`` (a maximum bipartite
   matching; detections tried in scene order, the most confident first). A constraint passes
   iff it is matched: an ``object`` constraint to any free instance, a colour / texture /
   shape to a free instance of that value, ``min_count`` k of them. The pool is every
   detection of the class, not only the top ones; the note names the instance used or why
   none is free. A class and kind with one constraint keeps the single-constraint rule above
   (GenEval's verdicts are unchanged).

Evidence is one per constraint, in order; ``decided_by`` is ``"sim-inspector"`` (``"sim-ocr"``
for text). Other ``attribute`` values and ``vqa`` constraints are ``uncertain``: a note says why; so is an
object, count, colour, negative or position constraint naming a class outside
``vocab.WORLD_CLASSES`` (the inspector cannot see it — never a silent pass or fail).
This module is the perception (steps 1–4, 7–9: what is in the image); the templates of step 3
are ``evoharness.sim.templates`` (``GRID``, ``MISS_PENALTY``, ``MAX_SCORE``), step 3b is
``evoharness.sim.occlusion`` (its ``OCCLUSION_*`` constants), and the verdicts (steps 5–10) are
``evoharness.sim.judging``. ``inspect`` gives the ``Scene``, ``judge`` one constraint's verdict
on a scene and ``judge_all`` a list's (step 10), so another verifier
(``evoharness.sim.detector``) can judge a perturbed scene with the same rules.
"""

from __future__ import annotations

import io
import os
import threading
from collections.abc import Sequence
from typing import Any

import cv2
import numpy as np
from PIL import Image
from skimage.color import deltaE_ciede2000, rgb2lab

from evoharness.evidence import Evidence
from evoharness.ports import GeneratedImage
from evoharness.sim import judging, library, shape, texture
from evoharness.sim.occlusion import OCCLUSION_GAIN, OCCLUSION_TRY_ABOVE, Piece, separate
from evoharness.sim.quality import quality_score
from evoharness.sim.raster import PANEL_FILL
from evoharness.sim.scene import Detection, Scene
from evoharness.sim.templates import MAX_SCORE, MISS_PENALTY, Templates, fit_cell, templates
from evoharness.tasks.models import Constraint, ConstraintType
from evoharness.vocab import COLORS, SHAPES, WORLD_CLASSES

BG_SCHEDULE = (60.0, 35.0, 20.0, 12.0)
FG_THRESHOLD = 26.0
SHAPE_CANDIDATES = 12
SPLIT_DEPTH = 2
SPLIT_ERODE = (2, 4)  # half-size px per split level
MIN_BLOB_PX = 120  # at full size
_COLOR_NAMES = list(COLORS)
_COLOR_LAB = rgb2lab(np.array([[COLORS[c] for c in _COLOR_NAMES]], dtype=np.float64) / 255.0)[0]


#: Bumped whenever a verdict rule changes (3: depth and proximity relations, distinct
#: instances per constraint kind, the least-squares texture reader, 2026-12-03).
INSPECTOR_VERSION = 3


class SimInspector:
    """The simulator's pixel-level verifier (implements ``evoharness.ports.Verifier``).

    ``threads``: OpenCV/BLAS threads per process (default 1: two processes on two cores run
    slower than one when each spawns a thread pool). ``ocr``: enable the rapidocr reader.
    ``verifier_id`` (``"sim-inspector@<INSPECTOR_VERSION>"``) keys cached evidence
    (``workflows.backends``), so a verdict rule change never reuses an older verdict.
    """

    verifier_id = f"sim-inspector@{INSPECTOR_VERSION}"

    def __init__(self, threads: int = 1, ocr: bool = True) -> None:
        cv2.setNumThreads(threads)
        for var in ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS"):
            os.environ.setdefault(var, str(threads))
        self._use_ocr = ocr
        self._ocr: Any = None
        self._ocr_lock = threading.Lock()
        templates()

    # ------------------------------------------------------------------ public
    def verify(
        self,
        image: GeneratedImage | bytes | None = None,
        constraints: Sequence[Constraint] = (),
        prompt: str = "",
        *,
        png: bytes | None = None,
    ) -> list[Evidence]:
        """One ``Evidence`` per constraint, in order, from the image's pixels only.

        ``image``: a ``GeneratedImage`` (its ``png``; the manifest is never read) or PNG bytes
        (``png=`` is accepted too, as in ``evoharness.ports.Verifier``). Raises ``ValueError``
        when no image is given or the bytes are not an image.
        """
        if image is None:
            image = png
        if image is None:
            raise ValueError("image: no image given")
        png = image.png if isinstance(image, GeneratedImage) else image
        scene = self.inspect(png, **scene_needs(constraints))
        return self.judge_all(constraints, scene)

    def inspect(
        self, png: bytes, read_text: bool = True, quality: bool = False, shapes: bool = False
    ) -> Scene:
        """Detect objects (and read sign texts when ``read_text``, score pixel quality when
        ``quality``, read the shape outlined around each object when ``shapes``) in PNG/JPEG
        bytes.

        Raises ``ValueError`` for empty or undecodable bytes or an image under 8x8 px."""
        if not png:
            raise ValueError("image: empty (0 bytes)")
        arr = cv2.imdecode(np.frombuffer(png, np.uint8), cv2.IMREAD_COLOR)
        if arr is None:
            try:
                with Image.open(io.BytesIO(png)) as im:
                    arr = cv2.cvtColor(np.asarray(im.convert("RGB")), cv2.COLOR_RGB2BGR)
            except OSError:
                raise ValueError(
                    f"image: not a decodable PNG/JPEG image ({len(png)} bytes)"
                ) from None
        if min(arr.shape[:2]) < 8:
            # the background fit works on a 4x downscale, which needs a few pixels
            raise ValueError(f"image: {arr.shape[1]}x{arr.shape[0]} px is too small (min 8x8)")
        rgb = cv2.cvtColor(arr, cv2.COLOR_BGR2RGB)
        return self._inspect(rgb, read_text, quality, shapes)

    # ------------------------------------------------------------------ detection
    def _foreground(self, rgb: np.ndarray) -> tuple[np.ndarray, np.ndarray, tuple[int, int]]:
        H, W = rgb.shape[:2]
        small = cv2.resize(rgb, (W // 4, H // 4), interpolation=cv2.INTER_AREA).astype(np.float32)
        h, w = small.shape[:2]
        yy, xx = np.mgrid[0:h, 0:w].astype(np.float32)
        A = np.stack([np.ones(h * w, np.float32), xx.ravel() / w, yy.ravel() / h], axis=1)
        Y = small.reshape(-1, 3)
        keep = np.ones(h * w, bool)
        coef = np.zeros((3, 3), np.float32)
        for thr in BG_SCHEDULE:
            coef, *_ = np.linalg.lstsq(A[keep], Y[keep], rcond=None)
            resid = np.abs(A @ coef - Y).max(axis=1)
            nxt = resid < thr
            if nxt.sum() < 64:
                break
            keep = nxt
        # background at half size, evaluated at pixel centres of the full image
        hh, hw = H // 2, W // 2
        half = cv2.resize(rgb, (hw, hh), interpolation=cv2.INTER_AREA).astype(np.float32)
        ys = (np.arange(hh, dtype=np.float32) * 2 + 1) / 4 / h - 0.5 / h
        xs = (np.arange(hw, dtype=np.float32) * 2 + 1) / 4 / w - 0.5 / w
        bg = (
            coef[0][None, None, :]
            + xs[None, :, None] * coef[1][None, None, :]
            + ys[:, None, None] * coef[2][None, None, :]
        )
        diff = np.abs(half - bg).max(axis=2)
        fg = (diff > FG_THRESHOLD).astype(np.uint8)
        fg = cv2.morphologyEx(fg, cv2.MORPH_OPEN, np.ones((2, 2), np.uint8))
        fg = cv2.morphologyEx(fg, cv2.MORPH_CLOSE, np.ones((3, 3), np.uint8))
        # fill holes: flood the background from the border
        return self._fill_holes(fg), coef, (h, w)

    @staticmethod
    def _fill_holes(fg: np.ndarray) -> np.ndarray:
        h, w = fg.shape
        padded = np.zeros((h + 2, w + 2), np.uint8)
        padded[1:-1, 1:-1] = fg
        mask = np.zeros((h + 4, w + 4), np.uint8)
        cv2.floodFill(padded, mask, (0, 0), 2)
        return (padded[1:-1, 1:-1] != 2).astype(np.uint8)

    def _refine(
        self,
        rgb: np.ndarray,
        blob: np.ndarray,
        box: tuple[int, int, int, int],
        coef: np.ndarray,
        small: tuple[int, int],
    ) -> tuple[tuple[int, int, int, int], np.ndarray] | None:
        """Full-resolution box and filled silhouette of a half-resolution blob."""
        H, W = rgb.shape[:2]
        X0, Y0, X1, Y1 = box
        X0, Y0, X1, Y1 = max(0, X0 - 3), max(0, Y0 - 3), min(W, X1 + 3), min(H, Y1 + 3)
        h, w = small
        xs = ((np.arange(X0, X1, dtype=np.float32) + 0.5) / 4 - 0.5) / w
        ys = ((np.arange(Y0, Y1, dtype=np.float32) + 0.5) / 4 - 0.5) / h
        bg = (
            coef[0][None, None, :]
            + xs[None, :, None] * coef[1][None, None, :]
            + ys[:, None, None] * coef[2][None, None, :]
        )
        diff = np.abs(rgb[Y0:Y1, X0:X1].astype(np.float32) - bg).max(axis=2)
        fg = (diff > FG_THRESHOLD).astype(np.uint8)
        near = cv2.resize(blob, (box[2] - box[0], box[3] - box[1]), interpolation=cv2.INTER_NEAREST)
        near = cv2.dilate(near, np.ones((7, 7), np.uint8))
        region = np.zeros_like(fg)
        region[box[1] - Y0 : box[3] - Y0, box[0] - X0 : box[2] - X0] = near
        fg &= region
        fg[shape.dash_pixels(rgb[Y0:Y1, X0:X1], bg, fg)] = 0  # neighbours' outlines
        ys_, xs_ = np.nonzero(fg)
        if len(xs_) < MIN_BLOB_PX:
            return None
        x0, x1, y0, y1 = xs_.min(), xs_.max() + 1, ys_.min(), ys_.max() + 1
        sil = self._fill_holes(fg[y0:y1, x0:x1])
        return (X0 + int(x0), Y0 + int(y0), X0 + int(x1), Y0 + int(y1)), sil

    def _inspect(
        self, rgb: np.ndarray, read_text: bool, quality: bool = False, shapes: bool = False
    ) -> Scene:
        H, W = rgb.shape[:2]
        fg, coef, small = self._foreground(rgb)
        n, labels, stats, _ = cv2.connectedComponentsWithStats(fg, connectivity=8)
        scene = Scene()
        T = templates()
        objects: list[tuple[np.ndarray, tuple[int, int]]] = []
        for i in range(1, n):
            x, y, w, h, area = stats[i]
            if area * 4 < MIN_BLOB_PX:
                continue
            blob = (labels[y : y + h, x : x + w] == i).astype(np.uint8)
            X0, Y0, X1, Y1 = 2 * x, 2 * y, min(W, 2 * (x + w)), min(H, 2 * (y + h))
            if self._is_panel(rgb[Y0:Y1, X0:X1], area / float(w * h)):
                scene.panels.append(rgb[Y0:Y1, X0:X1])
                scene.signs.append(("", (X0 / W, Y0 / H, X1 / W, Y1 / H)))
                continue
            if quality:
                full = cv2.resize(blob, (2 * w, 2 * h), interpolation=cv2.INTER_NEAREST)
                objects.append((full[: Y1 - Y0, : X1 - X0], (X0, Y0)))
            self._detect(rgb, blob, (x, y), coef, small, T, scene, depth=0)
        if read_text:
            self._read_signs(rgb, scene)
        if quality:
            scene.quality = quality_score(rgb, objects)
        if shapes:
            self._read_shapes(rgb, coef, small, scene, fg)
        scene.detections.sort(key=lambda d: d.score)
        return scene

    @staticmethod
    def _read_shapes(
        rgb: np.ndarray, coef: np.ndarray, small: tuple[int, int], scene: Scene, fg: np.ndarray
    ) -> None:
        """Each detection's outlined shape (``evoharness.sim.shape.read``), against the
        background plane evaluated at full size (``coef`` fitted at quarter size ``small``);
        the half-size foreground ``fg`` (every sticker and sign) hides the outline paths it
        covers (``shape.outline_map``)."""
        H, W = rgb.shape[:2]
        h, w = small
        xs = ((np.arange(W, dtype=np.float32) + 0.5) / 4 - 0.5) / w
        ys = ((np.arange(H, dtype=np.float32) + 0.5) / 4 - 0.5) / h
        bg = (
            coef[0][None, None, :]
            + xs[None, :, None] * coef[1][None, None, :]
            + ys[:, None, None] * coef[2][None, None, :]
        )
        cover = cv2.resize(fg, (W, H), interpolation=cv2.INTER_NEAREST)
        outline, visible = shape.outline_map(rgb, bg, cover)
        for d in scene.detections:
            box = (d.box[0] * W, d.box[1] * H, d.box[2] * W, d.box[3] * H)
            d.shape = shape.read(outline, box, visible)
        scene.shapes_read = True

    def _detect(
        self,
        rgb: np.ndarray,
        blob: np.ndarray,
        origin: tuple[int, int],
        coef: np.ndarray,
        small: tuple[int, int],
        T: Templates,
        scene: Scene,
        depth: int,
    ) -> None:
        """Classify one half-size blob (``origin`` = its top-left at half size); a blob that
        fits no template is split coarse-to-fine by eroding it (touching stickers meet at
        thin outlines) and each piece, grown back inside the blob, is tried again."""
        H, W = rgb.shape[:2]
        x, y = origin
        h, w = blob.shape
        box = (2 * x, 2 * y, min(W, 2 * (x + w)), min(H, 2 * (y + h)))
        refined = self._refine(rgb, blob, box, coef, small)
        det = None
        if refined is not None:
            (X0, Y0, X1, Y1), mask_full = refined
            crop = rgb[Y0:Y1, X0:X1]
            det = self._classify(crop, mask_full, T)
        if det is not None and det[1] > OCCLUSION_TRY_ABOVE:
            # a weak fit of the whole blob: two overlapping stickers may explain it better
            assert refined is not None
            pieces = separate(crop, mask_full, T, OCCLUSION_GAIN * det[1])
            if pieces is not None:
                self._add_pieces(rgb, crop, (X0, Y0), pieces, scene)
                return
        if det is not None:
            k, score, place, v = det
            color = self._name_color(crop, k, place)
            conf = float(np.clip(1.0 - score / (2 * MAX_SCORE), 0.05, 1.0))
            fbox = (X0 / W, Y0 / H, X1 / W, Y1 / H)
            tex = self._read_texture(crop, (X0, Y0), k, v)
            scene.detections.append(
                Detection(
                    WORLD_CLASSES[k], fbox, color, score, conf, tex, ident=len(scene.detections)
                )
            )
            return
        if depth < SPLIT_DEPTH and blob.sum() * 4 >= 2 * MIN_BLOB_PX:
            r = SPLIT_ERODE[depth]
            kernel = cv2.getStructuringElement(cv2.MORPH_ELLIPSE, (2 * r + 1, 2 * r + 1))
            core = cv2.erode(blob, kernel)
            n, labels, stats, _ = cv2.connectedComponentsWithStats(core, connectivity=8)
            if n - 1 >= 2:
                for j in range(1, n):
                    piece = cv2.dilate((labels == j).astype(np.uint8), kernel) & blob
                    ys, xs = np.nonzero(piece)
                    if len(xs) * 4 < MIN_BLOB_PX:
                        continue
                    y0, y1, x0, x1 = ys.min(), ys.max() + 1, xs.min(), xs.max() + 1
                    self._detect(
                        rgb,
                        piece[y0:y1, x0:x1],
                        (x + int(x0), y + int(y0)),
                        coef,
                        small,
                        T,
                        scene,
                        depth + 1,
                    )
                return
        if refined is not None:
            pieces = separate(crop, mask_full, T)
            if pieces is not None:
                self._add_pieces(rgb, crop, (X0, Y0), pieces, scene)
                return
            scene.unknown += 1

    def _add_pieces(
        self,
        rgb: np.ndarray,
        crop: np.ndarray,
        origin: tuple[int, int],
        pieces: list[Piece],
        scene: Scene,
    ) -> None:
        """The two stickers of a separated blob (``evoharness.sim.occlusion.separate``, front
        first) as detections: boxes are the whole stickers' boxes (the back one's partly
        hidden), colour and texture are read on the visible body, and the back detection
        lists the front one in ``occluders``. ``crop``: the blob at full size, ``origin`` its
        top-left in ``rgb``."""
        H, W = rgb.shape[:2]
        X0, Y0 = origin
        front_id = len(scene.detections)
        for i, (k, v, score, (x, y, w, h), visible) in enumerate(pieces):
            sub = crop[y : y + h, x : x + w]
            color = self._name_color(sub, k, (), visible)
            tex = self._read_texture(sub, (X0 + x, Y0 + y), k, v, visible)
            conf = float(np.clip(1.0 - score / (2 * MAX_SCORE), 0.05, 1.0))
            box = ((X0 + x) / W, (Y0 + y) / H, (X0 + x + w) / W, (Y0 + y + h) / H)
            scene.detections.append(
                Detection(
                    WORLD_CLASSES[k],
                    box,
                    color,
                    score,
                    conf,
                    tex,
                    ident=len(scene.detections),
                    occluders=(front_id,) if i else (),
                )
            )

    def _is_panel(self, crop: np.ndarray, extent: float) -> bool:
        if extent < 0.85 or crop.shape[0] < 10 or crop.shape[1] < 10:
            return False
        inner = crop[4:-4, 4:-4].astype(np.int16)
        near = np.abs(inner - np.array(PANEL_FILL, np.int16)).max(axis=2) < 20
        return bool(near.mean() > 0.45)

    def _classify(
        self, crop: np.ndarray, mask: np.ndarray, T: Templates
    ) -> tuple[int, float, tuple, int] | None:
        """(class index, score, placement in the cell, colouring: 0 = the picture's own,
        v ≥ 1 = ``COLORS``' v-th) of the best template, or None when none fits."""
        cell, place = fit_cell(crop.astype(np.float32) / 255.0)
        mcell, _ = fit_cell(mask.astype(np.float32))
        m = (mcell > 0.5).astype(np.float32)
        lab = rgb2lab(cell).astype(np.float32)
        both = m[None] * T.mask  # (K, G, G)
        either = np.maximum(m[None], T.mask)
        only = (either - both).sum((-1, -2))
        union = np.maximum(either.sum((-1, -2)), 1.0)
        cand = np.argsort(only / union)[:SHAPE_CANDIDATES]
        # analysis by synthesis on the best silhouettes: (C, V, G, G)
        de = np.sqrt(((T.lab[cand] - lab[None, None]) ** 2).sum(-1))
        de = np.minimum(de, MISS_PENALTY)
        num = (de * both[cand][:, None]).sum((-1, -2)) + MISS_PENALTY * only[cand][:, None]
        score = num / union[cand][:, None]
        c, v = np.unravel_index(int(np.argmin(score)), score.shape)
        best = float(score[c, v])
        if best > MAX_SCORE:
            return None
        return int(cand[c]), best, place, int(v)

    def _read_texture(
        self,
        crop: np.ndarray,
        origin: tuple[int, int],
        k: int,
        v: int,
        visible: np.ndarray | None = None,
    ) -> str | None:
        """The texture of the detected object (``evoharness.sim.texture.read``): the crop's
        grey minus the grey of class ``k``'s sticker in colouring ``v`` at the crop's size,
        on the body pixels (eroded 1 px; only the ``visible`` ones when given, a bool mask of
        the crop's size), at absolute image coordinates from ``origin``."""
        st = library.sticker(WORLD_CLASSES[k], None if v == 0 else _COLOR_NAMES[v - 1])
        size = (crop.shape[1], crop.shape[0])
        clean = cv2.resize(st.rgba[..., :3], size, interpolation=cv2.INTER_LINEAR)
        body = cv2.resize(st.body.astype(np.uint8), size, interpolation=cv2.INTER_NEAREST)
        body = cv2.erode(body, np.ones((3, 3), np.uint8)).astype(bool)
        if visible is not None:
            body = body & visible
        ys, xs = np.nonzero(body)
        grey = crop[ys, xs].astype(np.float64).mean(-1) - clean[ys, xs].astype(np.float64).mean(-1)
        return texture.read(grey, xs + origin[0], ys + origin[1])

    def _name_color(
        self, crop: np.ndarray, k: int, place: tuple, visible: np.ndarray | None = None
    ) -> str:
        st = library.sticker(WORLD_CLASSES[k])
        body = cv2.resize(
            st.body.astype(np.uint8),
            (crop.shape[1], crop.shape[0]),
            interpolation=cv2.INTER_NEAREST,
        )
        if visible is not None:  # an occluded sticker: its visible body only
            body = body & visible.astype(np.uint8)
        er = cv2.erode(body, np.ones((3, 3), np.uint8))
        if er.sum() >= 8:
            body = er
        px = crop[body.astype(bool)]
        if len(px) == 0:
            px = crop.reshape(-1, 3)
        lab = rgb2lab(px[None].astype(np.float64) / 255.0)[0].mean(axis=0)
        d = deltaE_ciede2000(np.repeat(lab[None], len(_COLOR_NAMES), 0), _COLOR_LAB)
        return _COLOR_NAMES[int(np.argmin(d))]

    # ------------------------------------------------------------------ text
    def _engine(self) -> Any:
        with self._ocr_lock:
            if self._ocr is None:
                from rapidocr_onnxruntime import RapidOCR

                self._ocr = RapidOCR(intra_op_num_threads=1, inter_op_num_threads=1)
            return self._ocr

    def _read_signs(self, rgb: np.ndarray, scene: Scene) -> None:
        if not self._use_ocr:
            return
        eng = self._engine()
        if scene.panels:
            for i, crop in enumerate(scene.panels):
                bgr = cv2.cvtColor(_text_line(crop[3:-3, 3:-3]), cv2.COLOR_RGB2BGR)
                res, _ = eng(bgr, use_det=False, use_cls=False, use_rec=True)
                text = " ".join(r[0] for r in (res or []) if r and r[0]).strip()
                scene.signs[i] = (text, scene.signs[i][1])
        else:
            res, _ = eng(cv2.cvtColor(rgb, cv2.COLOR_RGB2BGR))
            H, W = rgb.shape[:2]
            for r in res or []:
                pts = np.asarray(r[0], dtype=np.float64)
                box = (
                    pts[:, 0].min() / W,
                    pts[:, 1].min() / H,
                    pts[:, 0].max() / W,
                    pts[:, 1].max() / H,
                )
                scene.signs.append((str(r[1]), box))

    # ------------------------------------------------------------------ verdicts
    def judge_all(self, constraints: Sequence[Constraint], scene: Scene) -> list[Evidence]:
        """One ``Evidence`` per constraint, in order (``evoharness.sim.judging.judge_all``)."""
        return judging.judge_all(constraints, scene)

    def judge(self, c: Constraint, scene: Scene) -> Evidence:
        """One constraint's verdict on ``scene`` (``evoharness.sim.judging.judge``)."""
        return judging.judge(c, scene)


def scene_needs(constraints: Sequence[Constraint]) -> dict[str, bool]:
    """``inspect`` keyword flags the ``constraints`` need: ``read_text`` (a ``text``
    constraint), ``quality`` (a ``quality`` constraint) and ``shapes`` (an ``attribute``
    constraint whose value is a ``vocab.SHAPES`` name)."""
    types = {c.type for c in constraints}
    return {
        "read_text": ConstraintType.text in types,
        "quality": ConstraintType.quality in types,
        "shapes": any(
            c.type is ConstraintType.attribute and str(c.value) in SHAPES for c in constraints
        ),
    }


def _text_line(panel: np.ndarray, margin: int = 6) -> np.ndarray:
    """Crop a sign panel (H×W×3 RGB) to the band of rows and columns holding its dark text,
    plus ``margin`` pixels. The OCR recogniser (run without its detector) expects one text
    line; a tall panel with a small line in it would be shrunk until the glyphs blur. Returns
    the panel unchanged when no text pixels are found."""
    h, w = panel.shape[:2]
    dy, dx = max(1, h // 12), max(1, w // 25)  # skip the panel's frame and any background
    inner = panel[dy : h - dy, dx : w - dx].mean(axis=2)
    if inner.size == 0:
        return panel
    ink = inner < min(128.0, float(np.median(inner)) - 60.0)
    rows, cols = np.flatnonzero(ink.any(axis=1)), np.flatnonzero(ink.any(axis=0))
    if rows.size == 0 or cols.size == 0:
        return panel
    y0, y1 = max(0, dy + rows[0] - margin), min(h, dy + rows[-1] + 1 + margin)
    x0, x1 = max(0, dx + cols[0] - margin), min(w, dx + cols[-1] + 1 + margin)
    return np.ascontiguousarray(panel[y0:y1, x0:x1])
