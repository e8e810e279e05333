"""``SimGenerator``: the embedded CPU world's text-to-image *simulator*.

A frozen, seeded behavioural model of a diffusion generator (not a neural network). It reads
the prompt like a text encoder would (``evoharness.sim.reader``), decides what to draw,
including the mistakes real generators make, and paints the scene: a smooth two-colour
gradient background, the world's classes (``vocab.WORLD_CLASSES``: GenEval's 80 and the extra
ones) as "stickers" (``evoharness.sim.library``, Noto Color Emoji pictures + 15 drawn icons,
bodies recoloured to GenEval colours), text on
white sign panels, composited reference images, and Gaussian noise.

Every number is in the profile's ``SimParams`` (``evoharness.sim.profiles``); the generator id
is ``sim/<profile>@<sha256(params)[:12]>``.

**Common random numbers.** Every random draw is keyed by (seed, failure mode, the object
phrase it concerns — its class and occurrence — or the layout box, text, relation), hashed with
the profile's name (not its parameter digest, so retuning one rate moves only the outcomes near
that threshold); there is no RNG seeded by the whole program. So a candidate program that
changes one part of its parent's program draws the same numbers for everything else on the
same seed: the two images differ only where the change acts (the background and noise depend
on the seed alone). This is what makes small paired gains testable.

Behaviour (f = ``SimParams.adherence(guidance, steps)``, ≥ 1, multiplies failure rates):

1. Token limit: only the first ``capabilities.max_prompt_tokens - 2`` content tokens are read; what is named past
   the cut is not drawn (``manifest["dropped"]``).
2. Colour: with m >= 2 coloured objects in one clause, each takes another's colour w.p.
   ``min(leak_cap, leak_per_object·(m−1))·f``; across clauses ×``leak_cross_factor``; a lone
   coloured object drifts w.p. ``color_drift·f``. Prompts longer than ``attr_drop_start``
   content tokens drop each colour w.p. ``attr_drop_per_token`` per extra token (capped).
   Textures and materials ("a wooden chair", ``vocab.TEXTURES``) bind the same way (leak
   inside a clause, long-prompt drop; draws keyed ``tex_*``) and are painted on the body as
   patterns (``evoharness.sim.texture``); shapes ("a round clock", ``vocab.SHAPES``) bind
   alike (draws ``shape_*``) and are drawn as dashed outlines around the sticker
   (``evoharness.sim.shape``). A prompt without such words paints as before.
3. Counting: an explicit count n >= 2 is right w.p. ``1 − (1 − c[n])·f``; otherwise ±1 (±2).
4. Spatial relations: honoured w.p. ``relation_honoured / f``; otherwise, w.p.
   ``composition_default``, drawn in the model's default composition (swapped, or stacked on
   the other axis so that no relation holds), else placed at random. Proximity ("next to",
   "near") is honoured w.p. ``relation_honoured / f`` too (draws ``proximity*``, so prompts
   without these words draw nothing new): the pair in one horizontal band, close by
   T2I-CompBench's rule (``evoharness.tasks.proximity``); else far apart, in opposite corners
   (``evoharness.sim.planning._proximity_regions``).
   Depth ("A behind B", "A in front of B"; draws keyed ``depth*``): honoured w.p.
   ``relation_honoured / f`` — the back object is drawn first at ``DEPTH_SCALE`` of the front
   object's size (long side),
   higher in the frame, and the front object's box covers ``DEPTH_OCCLUSION`` of the back
   one's box, offset diagonally downwards; otherwise w.p. ``composition_default ·
   composition_swap`` the order is swapped (the opposite relation is drawn), else the two are
   placed apart (no occlusion). Without room for the overlap the pair is placed apart.
5. Negation: "no X" draws X w.p. ``negation_draws``. A class in ``negative_prompt`` is drawn
   only w.p. ``negative_keep`` of its usual probability, for every phrase and layout box of
   that class (a negative prompt is global).
6. Text: each character corrupted w.p. ``min(char_cap, char_base + char_per_char·len)·f``
   (×``unquoted_factor`` unquoted; ×(1 + ``text_guidance_gain``·(g − ``guidance_best``))
   above the best guidance); layout text ×``layout_text_factor``.
7. Guidance above ``guidance_best`` saturates colours (chroma ×(1 + ``saturation_gain`` per
   unit)); above ``guidance_saturate`` and below ``steps_min`` steps it adds noise. Guidance
   below ``guidance_floor`` collapses adherence (``SimParams.adherence``). Below ``steps_min``
   the image is blurred (``steps_blur`` px per missing step) and small objects (long side
   under ``steps_small_frac``) are lost w.p. ``steps_small_miss`` per missing step (draws
   ``steps_small``). Palette / style words ("black and white", "sepia", "shades of blue":
   ``reader.palette_of``) recolour each object, prompt or layout, w.p. ``palette_override·f``
   (draws ``palette``). Sources for each in ``SimParams``; all are nil at the profiles'
   default parameters (guidance ≥ the floor, steps ≥ ``steps_min``, no palette word).
8. Missed objects: each phrase missed w.p. ``min(miss_cap, miss_base + miss_per_object·(k−1))·f``.
9. Layout (refused when the profile's capabilities say ``none``): each box's object lands in
   its box w.p. ``layout_in_box − layout_in_box_per_box·(n−1)`` (less ``layout_small_penalty``
   for small boxes), else it is missed or drawn at random; its colour holds w.p.
   ``layout_color_holds``, and so do its texture and shape (``LayoutItem.attributes``, the
   box's grounding phrase "a wooden chair"; draws ``box_tex*`` / ``box_shape*``, painted as a
   prompt object's are); overlapping boxes merge (one dropped w.p. ``layout_merge``); layout
   objects look pasted (nearest-neighbour scaled to ``layout_paste_scale`` of the box, hard
   aliased edges, without the image grain: ``layout_paste_flatness`` of the noise removed).
   Prompt objects whose class is a layout label are not drawn again. The box's failure
   rate is multiplied by ``SimParams.layout_adherence`` (1 above ``guidance_floor`` and at
   ``steps_min`` or more); with training-free layout guidance (``layout_needs_token``) a
   box whose label the prompt does not name (read part) is lost (draws ``layout_token``).
10. References (issue 32; ``SimParams`` class doc, "References";
    ``evoharness.sim.planning.plan_references``): an object phrase bound to program
    reference *i* ("the cup from image 1", "image 2's cat", "the car (reference 3)";
    ``evoharness.sim.reader``) is drawn as the reference's subject — class, colour and
    texture read from the reference's pixels by the inspector's perception
    (``evoharness.sim.subject``, imported on the first reference), drawn upright — not as
    the phrase's glyph; the subject is omitted w.p. ``ref_omit_base + ref_omit_per_ref·(n−1)``
    (×f, cap ``ref_omit_cap``) with n references, drawn twice w.p. ``ref_duplicate``, else
    the phrase's glyph is drawn beside it w.p. ``ref_glyph_beside``, and it looks pasted
    (hard edges, no grain) w.p. ``ref_pasted``. A reference no phrase binds is not drawn
    w.p. ``ref_unmentioned_ignored``, else its subject is drawn like a bound one. A
    reference whose pixels show no subject the world knows is pasted whole on a white card.
    Draws are keyed ``ref_*``: programs without references draw nothing new.
11. Cost: ``GeneratedImage.seconds`` is ``evoharness.sim.cost.generator_seconds`` (modelled GPU
    seconds of the real model, never wall time).

A program needing conditioning the profile does not honour
(``GeneratorCapabilities.unsupported``) is refused with
``evoharness.capabilities.UnsupportedConditioning`` naming the capability.

Placement: objects get boxes of ``min_object_frac``..``max_object_frac`` of the image side
(smaller when there are many), at random positions at least ``gap_px`` apart; never
overlapping unless no free spot is left (then ``manifest["overlap"]`` is true) or a depth
relation asks for it. **Drawing order**: items are painted in list order, later on top —
prompt objects (a depth pair's back object first), text panels, then layout items in the
layout's order, so of two overlapping layout boxes the later item is drawn over the earlier
one (a layout lists objects back to front).

Manifest (tests only; verifiers never read it)::

    {"objects": [{"class", "color" (GenEval name or None = picture's own colours),
                  "box": [x0, y0, x1, y1] in 0..1, "text": str | None, "source": "prompt" |
                  "layout" | "reference", "pasted": bool, "reference": its reference's
                  index (reference subjects only), "in_front_of": index of the object it overlaps
                  (only on the front object of a depth pair drawn overlapping)}],
     "texts": [{"text" (as drawn), "intended", "quoted", "box"}],
     "references": [{"index", "box"}] (references pasted whole, as cards),
     "reference_outcomes": [{"index", "phrase", "subject": {"class", "color", "texture",
                  "pose"} | None, "outcome": "drawn" | "omitted" | "ignored" | "card",
                  "duplicated", "glyph_beside", "pasted"}] (only with references),
     "dropped": [classes past the token limit],
     "missed": [classes not drawn], "layout_missed": [labels of boxes not drawn],
     "adherence": f, "overlap": bool, "width", "height"}

Where each part lives: what to draw (steps 1–9) is ``evoharness.sim.planning``, where it goes
(placement) ``evoharness.sim.placement``, how one sticker or panel is painted
``evoharness.sim.raster``, the keyed draws ``evoharness.sim.draws`` and the PNG encoder
``evoharness.sim.png``; this module checks the program, paints the scene (background, outlines,
items in order, blur, saturation, noise) and writes the manifest.

Imports only numpy, Pillow, pydantic and evoharness core (it also runs in a numpy<2 venv).
"""

from __future__ import annotations

import hashlib
import io
import math
from collections.abc import Callable
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFilter

from evoharness.capabilities import GeneratorCapabilities, UnsupportedConditioning
from evoharness.ports import GeneratedImage
from evoharness.program import ImageRef, Program
from evoharness.sim import library
from evoharness.sim.colorspace import lab_to_rgb
from evoharness.sim.cost import generator_seconds
from evoharness.sim.draws import Draws
from evoharness.sim.params import SimParams
from evoharness.sim.placement import place
from evoharness.sim.planning import (
    DEPTH_OCCLUSION,
    DEPTH_SCALE,
    TEXT_LABELS,
    Item,
    ReferenceOutcome,
    lose_small,
    plan,
)
from evoharness.sim.png import encode_png
from evoharness.sim.raster import PANEL_FILL, fit, noise_bank, object_box, panel, paste_sticker
from evoharness.sim.shape import CONTRAST as SHAPE_CONTRAST
from evoharness.sim.shape import dashes as shape_dashes
from evoharness.vocab import COLORS, WORLD_CLASSES

#: The largest reference image the world reads, in pixels (4096 × 4096): a bigger one is
#: refused before it is decoded (a 200 KB PNG can hold 8000 × 8000 px, gigabytes once
#: decoded). Pillow's own decompression-bomb limit is about 89 MP.
MAX_REFERENCE_PIXELS = 4096 * 4096

#: References are read at most this long side (px), as image-conditioned generators resize
#: a reference to their encoder's input (IP-Adapter's CLIP image encoder takes 224 px;
#: Ye et al. 2023): a larger one is shrunk (Lanczos) before its subject is read or pasted.
REFERENCE_SIDE = 512


#: Names other modules import from here (the generator's public face).
__all__ = [
    "DEPTH_OCCLUSION",
    "DEPTH_SCALE",
    "PANEL_FILL",
    "TEXT_LABELS",
    "Draws",
    "SimGenerator",
    "encode_png",
]


class SimGenerator:
    """The simulator generator (implements ``evoharness.ports.Generator``).

    ``params``: the frozen behavioural model (default: the ``sdxl-like`` profile,
    ``evoharness.sim.profiles.DEFAULT_PROFILE``). ``fetch``: reads a reference image's bytes
    from its ``ImageRef`` (e.g. an ``ArtifactStore.get`` on its key); without it, a reference
    with an empty bucket is read as a local file path.
    """

    def __init__(
        self,
        params: SimParams | None = None,
        fetch: Callable[[ImageRef], bytes] | None = None,
    ) -> None:
        if params is None:
            from evoharness.sim.profiles import DEFAULT_PROFILE, load_profile

            params = load_profile(DEFAULT_PROFILE)
        self.params = params
        self._fetch = fetch
        self._id = params.generator_id

    @property
    def generator_id(self) -> str:
        """``"sim/<profile>@<12 hex of sha256(SimParams)>"``."""
        return self._id

    @property
    def capabilities(self) -> GeneratorCapabilities:
        """What this profile honours (the runtime drops the rest before calling)."""
        return self.params.capabilities

    # ------------------------------------------------------------------ public
    def generate(self, program: Program) -> GeneratedImage:
        """Draw ``program``; returns PNG bytes (``program.params`` width×height), the modelled
        generator-seconds in ``seconds`` (``evoharness.sim.cost``) and the ``manifest``.

        Raises ``UnsupportedConditioning`` (naming the capabilities) for conditioning the
        profile does not honour, ``ValueError`` naming the field for an unknown layout label or
        colour, a layout box outside 0..1, or a reference that is missing or not an image.
        """
        if not isinstance(program, Program):
            program = Program.model_validate(program)
        missing = self.params.capabilities.unsupported(program)
        if missing:
            raise UnsupportedConditioning(missing, self._id)
        refs = self._check(program)
        W, H = program.params.width, program.params.height
        draws = Draws(self.params.profile, program.seed)
        f = self.params.adherence(program.params.guidance_scale, program.params.steps)
        outcomes: list[ReferenceOutcome] = []
        items, missed, dropped, layout_missed = plan(self.params, program, draws, f, refs, outcomes)
        overlap = place(self.params, items, draws, W, H)
        lose_small(self.params, items, draws, program, missed, layout_missed)
        img = self._paint(items, draws, W, H, program)
        png = encode_png(np.asarray(img))
        manifest = self._manifest(items, W, H, missed, dropped, f, overlap)
        manifest["layout_missed"] = layout_missed
        if outcomes:  # only then: manifests of programs without references stay as they were
            manifest["reference_outcomes"] = [o.as_json() for o in outcomes]
        return GeneratedImage(
            png=png,
            generator_id=self._id,
            seconds=generator_seconds(self.params, program),
            manifest=manifest,
            width=W,
            height=H,
        )

    # ------------------------------------------------------------------ checks
    def _check(self, program: Program) -> list[Image.Image]:
        for i, item in enumerate(program.layout or []):
            if item.label not in WORLD_CLASSES and item.label.lower() not in TEXT_LABELS:
                raise ValueError(
                    f"layout[{i}].label: {item.label!r} is not one of the world's object classes "
                    f"(or a text panel label {sorted(TEXT_LABELS)})"
                )
            if item.label.lower() in TEXT_LABELS and not item.text:
                raise ValueError(f"layout[{i}].text: a {item.label!r} item needs text")
            if item.color is not None and item.color not in COLORS:
                raise ValueError(
                    f"layout[{i}].color: {item.color!r} is not a GenEval colour {list(COLORS)}"
                )
            if not all(0.0 <= v <= 1.0 for v in item.box):
                raise ValueError(f"layout[{i}].box: {list(item.box)} is outside 0..1")
        refs: list[Image.Image] = []
        for i, ref in enumerate(program.references or []):
            where = f"{ref.bucket}/{ref.key}" if ref.bucket else ref.key
            try:
                if self._fetch is not None:
                    data = self._fetch(ref)
                elif not ref.bucket:
                    with open(ref.key, "rb") as fh:
                        data = fh.read()
                else:
                    raise ValueError("no fetch function to read S3 references")
                if ref.sha256 and hashlib.sha256(data).hexdigest() != ref.sha256:
                    raise ValueError("sha256 does not match the bytes")
                with Image.open(io.BytesIO(data)) as im:
                    w, h = im.size
                    if w * h > MAX_REFERENCE_PIXELS:
                        raise ValueError(
                            f"{w}×{h} px is over the limit of {MAX_REFERENCE_PIXELS:,} px "
                            "(MAX_REFERENCE_PIXELS)"
                        )
                    rgb = im.convert("RGB")
            except Image.UnidentifiedImageError:
                raise ValueError(
                    f"references[{i}] ({where}): not a readable image (not a format Pillow reads)"
                ) from None
            except (OSError, ValueError) as exc:
                raise ValueError(f"references[{i}] ({where}): {exc}") from exc
            if max(rgb.size) > REFERENCE_SIDE:
                rgb.thumbnail((REFERENCE_SIDE, REFERENCE_SIDE), Image.Resampling.LANCZOS)
            refs.append(rgb)
        return refs

    # ------------------------------------------------------------------ what to draw
    # ------------------------------------------------------------------ paint
    def _paint(
        self,
        items: list[Item],
        draws: Draws,
        W: int,
        H: int,
        program: Program,
    ) -> Image.Image:
        p = self.params
        # background: gradient between two muted colours (CIELAB L 58..85, chroma <= 28),
        # keyed by the seed alone (common random numbers)
        rng = draws.rng("background")
        hues = rng.uniform(0, 2 * math.pi, 2)
        Ls = rng.uniform(58, 85, 2)
        chroma = rng.uniform(4, 28, 2)
        lab = np.stack([Ls, chroma * np.cos(hues), chroma * np.sin(hues)], axis=-1)
        c0, c1 = (lab_to_rgb(lab) * 255.0).astype(np.float32)
        theta = rng.uniform(0, 2 * math.pi)
        xs = np.linspace(-0.5, 0.5, W, dtype=np.float32)
        ys = np.linspace(-0.5, 0.5, H, dtype=np.float32)
        px, py = np.cos(theta) * xs, np.sin(theta) * ys
        lo = float(px.min() + py.min())
        span = max(1e-6, float(px.max() + py.max()) - lo)
        d = (c1 - c0)[None, :] / np.float32(span)
        gx = c0[None, :] + (px - lo)[:, None] * d  # (W, 3)
        gy = py[:, None] * d  # (H, 3)
        bg = gy[:, None, :] + gx[None, :, :]
        img = Image.fromarray((bg + 0.5).astype(np.uint8), "RGB")
        draw = ImageDraw.Draw(img)
        pasted = Image.new("L", (W, H), 0)  # where layout objects were pasted (no grain)
        # shape outlines first, under every sticker, around the box the sticker is fitted to
        for it in items:
            if it.kind == "object" and it.shape is not None and it.box is not None:
                assert it.cls is not None
                drawn = fit(library.sticker(it.cls, it.color), object_box(p, it)[0])
                xs, ys = shape_dashes(it.shape, drawn)
                ok = (xs >= 0) & (xs < W) & (ys >= 0) & (ys < H)
                for x, y in zip(xs[ok].tolist(), ys[ok].tolist(), strict=True):
                    dark = np.maximum(bg[y, x] - SHAPE_CONTRAST, 0.0) + 0.5
                    draw.point((x, y), fill=tuple(int(c) for c in dark))
        for it in items:
            assert it.box is not None
            x0, y0, x1, y1 = it.box
            if it.kind == "object":
                assert it.cls is not None
                obj_box, panel_box = object_box(p, it)
                if panel_box is not None:
                    panel(draw, panel_box, it.text or "")
                it.box = paste_sticker(
                    img, it.cls, it.color, obj_box, pasted if it.pasted else None, it.texture
                )
                if it.text:
                    it.box = (min(it.box[0], x0), it.box[1], max(it.box[2], x1), y1)
            elif it.kind == "panel":
                panel(draw, (x0, y0, x1, y1), it.text or "")
            else:
                assert it.image is not None
                bw, bh = x1 - x0, y1 - y0
                draw.rectangle((x0, y0, x1 - 1, y1 - 1), fill=(255, 255, 255))
                inner = it.image.resize((max(1, bw - 8), max(1, bh - 8)), Image.Resampling.BILINEAR)
                img.paste(inner, (x0 + 4, y0 + 4))
        g = program.params.guidance_scale
        sigma = p.noise_sigma
        if program.params.steps < p.steps_min:
            sigma += p.noise_per_step * (p.steps_min - program.params.steps)
            if p.steps_blur > 0:  # under-resolved: fine detail comes last (SimParams)
                radius = p.steps_blur * (p.steps_min - program.params.steps) * min(W, H) / 512
                img = img.filter(ImageFilter.GaussianBlur(radius))
        if g > p.guidance_best and p.saturation_gain > 0:
            arr = np.asarray(img).astype(np.float32)
            gain = 1.0 + p.saturation_gain * (g - p.guidance_best)
            grey = arr.mean(axis=-1, keepdims=True)
            arr = np.clip(grey + (arr - grey) * gain + 0.5, 0, 255)
            img = Image.fromarray(arr.astype(np.uint8), "RGB")
        if g > p.guidance_saturate:
            sigma += p.noise_per_guidance * (g - p.guidance_saturate)
        # light Gaussian noise: a window of a fixed N(0, 1) bank at a seeded offset
        bank = noise_bank(H + 64, W + 64)
        nrng = draws.rng("noise")
        ox, oy = int(nrng.integers(64)), int(nrng.integers(64))
        noise = (bank[oy : oy + H, ox : ox + W].astype(np.int32) * round(sigma * 16)) >> 10
        if p.layout_paste_flatness > 0 and pasted.getbbox() is not None:
            keep = 1.0 - p.layout_paste_flatness * (np.asarray(pasted, np.float32) / 255.0)
            noise = (noise * keep[:, :, None]).astype(np.int32)
        out = np.asarray(img).astype(np.int32) + noise
        return Image.fromarray(np.clip(out, 0, 255).astype(np.uint8), "RGB")

    # ------------------------------------------------------------------ manifest
    def _manifest(
        self,
        items: list[Item],
        W: int,
        H: int,
        missed: list[str],
        dropped: list[str],
        f: float,
        overlap: bool,
    ) -> dict[str, Any]:
        def frac(b: tuple[int, int, int, int]) -> list[float]:
            return [round(b[0] / W, 4), round(b[1] / H, 4), round(b[2] / W, 4), round(b[3] / H, 4)]

        objects, texts, refs = [], [], []
        index = {id(it): n for n, it in enumerate(x for x in items if x.kind == "object")}
        for it in items:
            assert it.box is not None
            if it.kind == "object":
                obj: dict[str, Any] = {
                    "class": it.cls,
                    "color": it.color,
                    "box": frac(it.box),
                    "text": it.text,
                    "source": it.source,
                    "pasted": it.pasted,
                }
                if it.texture is not None:  # only then: other manifests stay as they were
                    obj["texture"] = it.texture
                if it.shape is not None:
                    obj["shape"] = it.shape
                if it.overlapping and it.over is not None:  # only then, as textures
                    obj["in_front_of"] = index[id(it.over)]
                if it.source == "reference":
                    obj["reference"] = it.ref_index
                objects.append(obj)
            elif it.kind == "panel":
                texts.append(
                    {
                        "text": it.text,
                        "intended": it.intended,
                        "quoted": it.quoted,
                        "box": frac(it.box),
                    }
                )
            else:
                refs.append({"index": it.ref_index, "box": frac(it.box)})
        return {
            "objects": objects,
            "texts": texts,
            "references": refs,
            "dropped": dropped,
            "missed": missed,
            "adherence": round(f, 4),
            "overlap": overlap,
            "width": W,
            "height": H,
        }
