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
   (``_proximity_regions``).
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
10. Cost: ``GeneratedImage.seconds`` is ``evoharness.sim.cost.generator_seconds`` (modelled GPU
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
                  "layout", "pasted": bool, "in_front_of": index of the object it overlaps
                  (only on the front object of a depth pair drawn overlapping)}],
     "texts": [{"text" (as drawn), "intended", "quoted", "box"}],
     "references": [{"index", "box"}], "dropped": [classes past the token limit],
     "missed": [classes not drawn], "layout_missed": [labels of boxes not drawn],
     "adherence": f, "overlap": bool, "width", "height"}

Imports only numpy, Pillow, pydantic and evoharness core (it also runs in a numpy<2 venv).
"""

from __future__ import annotations

import hashlib
import io
import math
import struct
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFilter, ImageFont

from evoharness.capabilities import GeneratorCapabilities, UnsupportedConditioning
from evoharness.ports import GeneratedImage
from evoharness.program import ImageRef, Program
from evoharness.sim import library
from evoharness.sim.colorspace import lab_to_rgb
from evoharness.sim.cost import generator_seconds
from evoharness.sim.params import SimParams
from evoharness.sim.reader import Reading, class_names_in, palette_of, read_prompt
from evoharness.sim.shape import CONTRAST as SHAPE_CONTRAST
from evoharness.sim.shape import dashes as shape_dashes
from evoharness.sim.texture import paint as texture_paint
from evoharness.tasks.models import DEPTH_RELATIONS, PROXIMITY_RELATIONS
from evoharness.vocab import COLORS, WORLD_CLASSES

#: Layout labels that mean "a sign panel with this item's text" rather than an object class.
TEXT_LABELS = frozenset({"text", "sign", "panel", "board", "label", "signboard"})
PANEL_FILL = (255, 244, 188)
PANEL_BORDER = (20, 20, 20)
#: A layout item's picture is fitted inside its box inset by max(3 px, 3% of the box side), so
#: pictures in adjacent boxes stay apart (the manifest box is the drawn box, inside the item's).
LAYOUT_INSET = 0.03
LAYOUT_INSET_PX = 3
_LETTERS = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_DIGITS = "0123456789"
_OPPOSITE = {"left of": "right of", "right of": "left of", "above": "below", "below": "above"}
#: Depth (issue 19, "behind" / "in front of"): the back object is placed at ``DEPTH_SCALE`` of
#: the front object's size (long side) and drawn first; the front object's box covers ``DEPTH_OCCLUSION`` (drawn
#: uniformly) of the back object's box, offset diagonally downwards (left or right), so the
#: front sticker hides part of the back one. Farther is smaller and higher in a photograph.
DEPTH_SCALE = 0.7
DEPTH_OCCLUSION = (0.25, 0.45)


class Draws:
    """Keyed random numbers (common random numbers across programs).

    ``Draws(profile, seed)``; ``u(mode, *key)`` is a uniform in [0, 1) and
    ``rng(mode, *key)`` a ``numpy.random.Generator``, both fixed by (profile name, seed, mode,
    key) alone — blake2b over those, so a draw never depends on the rest of the program.

    The key holds the profile's *name*, not the generator id (which carries a digest of every
    parameter): changing one rate of a profile changes only the outcomes whose draw crosses
    the moved threshold, so calibration converges instead of re-drawing all noise. Caching is
    unaffected — execution keys hold the generator id, so a changed profile never reuses an
    old execution.
    """

    def __init__(self, profile: str, seed: int) -> None:
        self._base = hashlib.sha256(f"sim/{profile}|{seed}".encode()).digest()

    def _h(self, parts: tuple[Any, ...]) -> int:
        h = hashlib.blake2b(repr(parts).encode("utf-8"), digest_size=8, key=self._base[:32])
        return int.from_bytes(h.digest(), "little")

    def u(self, *key: Any) -> float:
        """A uniform draw in [0, 1) keyed by ``key`` (mode first)."""
        return (self._h(key) >> 11) / float(1 << 53)

    def rng(self, *key: Any) -> np.random.Generator:
        """A numpy generator keyed by ``key`` (for a sequence of draws: placement, pixels)."""
        return np.random.default_rng(self._h(key))


def _substitute(ch: str, u: float) -> str:
    """A corrupted character: a random letter for a letter, a random digit for a digit."""
    pool = _DIGITS if ch.isdigit() else _LETTERS
    return pool[min(len(pool) - 1, int(u * len(pool)))]


def _pick(options: list[Any], u: float) -> Any:
    return options[min(len(options) - 1, int(u * len(options)))]


@dataclass
class _Item:
    kind: str  # "object" | "panel" | "reference"
    key: tuple[Any, ...] = ()
    cls: str | None = None
    color: str | None = None
    text: str | None = None
    intended: str | None = None
    quoted: bool = True
    source: str = "prompt"
    aspect: float = 1.0
    box: tuple[int, int, int, int] | None = None  # pixels x0, y0, x1, y1
    region: tuple[float, float, float, float] | None = None  # allowed centre region (fractions)
    image: Image.Image | None = None
    ref_index: int = -1
    pasted: bool = False
    texture: str | None = None  # a ``vocab.TEXTURES`` name painted on the body
    shape: str | None = None  # a ``vocab.SHAPES`` name outlined around the sticker
    scale: float = 1.0  # size factor of the placement (``DEPTH_SCALE`` for a back object)
    over: _Item | None = None  # the back object this one is drawn overlapping (depth)
    front: _Item | None = None  # the front object of this back object (depth)
    occlusion: float = 0.0  # share of ``over``'s box this one's box covers
    overlapping: bool = False  # placed overlapping ``over`` (else there was no room)


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


def _iou(a: tuple[float, ...], b: tuple[float, ...]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = ix * iy
    union = (a[2] - a[0]) * (a[3] - a[1]) + (b[2] - b[0]) * (b[3] - b[1]) - inter
    return inter / union if union > 0 else 0.0


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
        items, missed, dropped, layout_missed = self._plan(program, draws, f, refs)
        overlap = self._place(items, draws, W, H)
        self._lose_small(items, draws, program, missed, layout_missed)
        img = self._paint(items, draws, W, H, program)
        png = encode_png(np.asarray(img))
        manifest = self._manifest(items, W, H, missed, dropped, f, overlap)
        manifest["layout_missed"] = layout_missed
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
                    refs.append(im.convert("RGB"))
            except (OSError, ValueError) as exc:
                raise ValueError(
                    f"references[{i}] ({ref.bucket}/{ref.key}): not a readable image: {exc}"
                ) from exc
        return refs

    # ------------------------------------------------------------------ what to draw
    def _text_rate(self, n_chars: int, f: float, guidance: float) -> float:
        p = self.params
        rate = min(p.char_cap, p.char_base + p.char_per_char * n_chars) * f
        if guidance > p.guidance_best:
            rate *= 1.0 + p.text_guidance_gain * (guidance - p.guidance_best)
        return rate

    def _corrupt(self, text: str, rate: float, draws: Draws, key: tuple[Any, ...]) -> str:
        out = []
        for j, ch in enumerate(text):
            if ch.isalnum() and draws.u("char", *key, j) < rate:
                d = _substitute(ch, draws.u("char_pick", *key, j))
                out.append(d.lower() if ch.islower() else d)
            else:
                out.append(ch)
        return "".join(out)

    def _plan(
        self, program: Program, draws: Draws, f: float, refs: list[Image.Image]
    ) -> tuple[list[_Item], list[str], list[str], list[str]]:
        p = self.params
        g = program.params.guidance_scale
        reading = read_prompt(program.prompt, p.capabilities.max_prompt_tokens)
        negative = class_names_in(program.negative_prompt) if program.negative_prompt else set()
        layout = program.layout or []
        layout_classes = {it.label for it in layout}
        items: list[_Item] = []
        missed: list[str] = []
        k = len({o.cls for o in reading.objects if not o.negated})
        p_miss = min(p.miss_cap, (p.miss_base + p.miss_per_object * max(0, k - 1)) * f)

        # a phrase's key: its class and occurrence, so unrelated edits keep its draws
        seen: dict[str, int] = {}
        keys: list[tuple[str, int]] = []
        for o in reading.objects:
            keys.append((o.cls, seen.get(o.cls, 0)))
            seen[o.cls] = seen.get(o.cls, 0) + 1

        # colours: leak inside a clause, weaker across clauses, drift, long-prompt drop
        colors: list[str | None] = [o.colors[-1] if o.colors else None for o in reading.objects]
        drawn_colors = list(colors)
        coloured = [i for i, o in enumerate(reading.objects) if colors[i] and not o.negated]
        by_clause: dict[int, list[int]] = {}
        for i in coloured:
            by_clause.setdefault(reading.objects[i].clause, []).append(i)
        p_drop = min(
            p.attr_drop_cap, p.attr_drop_per_token * max(0, reading.n_read - p.attr_drop_start)
        )
        for i in coloured:
            key = keys[i]
            members = by_clause[reading.objects[i].clause]
            inside = [colors[j] for j in members if j != i and colors[j] != colors[i]]
            across = [colors[j] for j in coloured if j not in members and colors[j] != colors[i]]
            m = len(members)
            p_in = min(p.leak_cap, p.leak_per_object * (m - 1) * f) if m >= 2 else 0.0
            p_across = p.leak_cross_factor * min(
                p.leak_cap, p.leak_per_object * max(1, len(coloured) - 1) * f
            )
            if inside and draws.u("leak", key) < p_in:
                drawn_colors[i] = _pick(inside, draws.u("leak_pick", key))
            elif across and draws.u("leak_across", key) < p_across:
                drawn_colors[i] = _pick(across, draws.u("leak_pick", key))
            elif m == 1 and draws.u("drift", key) < p.color_drift * f:
                if draws.u("drift_kind", key) < 0.5:
                    drawn_colors[i] = None
                else:
                    alt = [c for c in COLORS if c != colors[i]]
                    drawn_colors[i] = _pick(alt, draws.u("drift_pick", key))
            if p_drop and draws.u("attr_drop", key) < p_drop:
                drawn_colors[i] = None

        palette = palette_of(program.prompt, p.capabilities.max_prompt_tokens)
        p_palette = min(0.95, p.palette_override * f) if palette else 0.0
        for i, o in enumerate(reading.objects):
            if p_palette and not o.negated and draws.u("palette", keys[i]) < p_palette:
                drawn_colors[i] = _pick(list(palette), draws.u("palette_pick", keys[i]))

        drawn_textures = self._bind_textures(reading, keys, f, draws, p_drop)
        drawn_shapes = self._bind_textures(reading, keys, f, draws, p_drop, "shapes")

        drawn_phrase: dict[int, list[_Item]] = {}
        for i, o in enumerate(reading.objects):
            key = keys[i]
            if o.cls in layout_classes:
                continue
            if o.negated and draws.u("negation", key) >= p.negation_draws:
                continue
            if o.cls in negative and draws.u("negative", key) >= p.negative_keep:
                continue
            if draws.u("miss", key) < p_miss:
                missed.append(o.cls)
                continue
            n = o.count if o.count is not None else 2 + int(draws.u("plural", key) * 2)
            if o.count is not None and n >= 2:
                table = p.count_correct
                c = table[min(n, len(table) - 1)] - (p.digit_penalty if o.digit else 0.0)
                if draws.u("count", key) < min(0.95, (1.0 - c) * f):
                    step = 2 if n >= 5 and draws.u("count_far", key) < p.count_far else 1
                    n = max(1, n + (step if draws.u("count_dir", key) < 0.5 else -step))
            n = max(0, min(n, 12))
            st = library.sticker(o.cls, drawn_colors[i])
            drawn_phrase[i] = []
            for j in range(n):
                it = _Item(
                    "object",
                    key=(*key, j),
                    cls=o.cls,
                    color=drawn_colors[i],
                    aspect=st.aspect,
                    texture=drawn_textures[i],
                    shape=drawn_shapes[i],
                )
                items.append(it)
                drawn_phrase[i].append(it)

        # spatial relations: honoured, else the default composition (swapped / stacked), else random
        for rel in reading.relations:
            a, b = drawn_phrase.get(rel.subject), drawn_phrase.get(rel.target)
            if not a or not b:
                continue
            rkey = (keys[rel.subject], keys[rel.target])
            if rel.relation in DEPTH_RELATIONS:
                self._plan_depth(rel.relation, a[0], b[0], rkey, draws, f, items)
                continue
            if rel.relation in PROXIMITY_RELATIONS:
                honoured = draws.u("proximity", *rkey) < p.relation_honoured / f
                ra, rb = _proximity_regions(honoured, draws.u("proximity_corner", *rkey))
            elif draws.u("relation", *rkey) < p.relation_honoured / f:
                ra, rb = _regions(rel.relation)
            elif draws.u("composition", *rkey) < p.composition_default:
                if draws.u("composition_swap", *rkey) < p.composition_swap:
                    ra, rb = _regions(_OPPOSITE[rel.relation])
                else:
                    ra, rb = _stacked(rel.relation)
            else:
                continue
            for it in a:
                it.region = ra
            for it in b:
                it.region = rb

        # text (a layout item carrying the same text covers it, as a layout label covers a
        # prompt object: the layout's panel is drawn instead of a second one)
        layout_texts = {(li.text or "").strip().lower() for li in layout if li.text}
        for ti, t in enumerate(reading.texts):
            rate = self._text_rate(len(t.text), f, g)
            if not t.quoted:
                rate = min(0.9, rate * p.unquoted_factor)
            drawn = self._corrupt(t.text, rate, draws, ("text", ti))
            if t.text.strip().lower() not in layout_texts:
                items.append(
                    _Item("panel", key=("text", ti), text=drawn, intended=t.text, quoted=t.quoted)
                )

        read_classes = {o.cls for o in reading.objects if not o.negated}
        layout_missed = self._plan_layout(
            program, draws, f, negative, items, read_classes, palette, p_palette
        )
        for i, im in enumerate(refs):
            items.append(
                _Item(
                    "reference", key=("ref", i), image=im, aspect=im.width / im.height, ref_index=i
                )
            )
        return items, missed, list(reading.dropped), layout_missed

    def _plan_depth(
        self,
        relation: str,
        a: _Item,
        b: _Item,
        rkey: tuple[Any, ...],
        draws: Draws,
        f: float,
        items: list[_Item],
    ) -> None:
        """ "``a`` behind / in front of ``b``" (module doc, 4b): honoured w.p.
        ``relation_honoured / f``: the back object (``a`` for "behind") is placed at
        ``DEPTH_SCALE`` of the front object's size (long side) and drawn first, the front one overlaps it (``_place``); otherwise,
        w.p. ``composition_default · composition_swap`` the order is swapped (the opposite
        relation is drawn), else the two are placed apart as usual (no occlusion). Draws are
        keyed ``depth*`` (new names: no other draw moves). Only the first instance of each
        phrase takes part."""
        p = self.params
        back, front = (a, b) if relation == "behind" else (b, a)
        if draws.u("depth", *rkey) >= p.relation_honoured / f:
            swap = p.composition_default * p.composition_swap
            if draws.u("depth_composition", *rkey) >= swap:
                return
            back, front = front, back
        if back.over is not None or front.over is not None or front.scale != 1.0:
            return  # already in another depth pair: one pair per object
        back.scale = DEPTH_SCALE
        back.front = front
        if back.region is None:  # farther is higher: room below it for the front object
            back.region = (0.15, 0.1, 0.85, 0.55)
        front.over = back
        lo, hi = DEPTH_OCCLUSION
        front.occlusion = lo + (hi - lo) * draws.u("depth_occlusion", *rkey)
        # painted in list order: the back object before the front one
        ib, i_f = items.index(back), items.index(front)
        if ib > i_f:
            items.insert(i_f, items.pop(ib))

    def _bind_textures(
        self,
        reading: Reading,
        keys: list[tuple[str, int]],
        f: float,
        draws: Draws,
        p_drop: float,
        kind: str = "textures",
    ) -> list[str | None]:
        """The texture (``kind="textures"``) or shape (``"shapes"``) drawn for each phrase
        (issue 19): its last such word, bound like a colour — inside a clause of m ≥ 2 such
        objects it takes another's w.p. min(leak_cap, leak_per_object·(m−1))·f, and long
        prompts drop it w.p. ``p_drop`` (the profile's colour-binding numbers: binding is one
        failure). Draws are keyed ``tex_*`` / ``shape_*`` by the phrase, so a prompt without
        such words draws nothing new."""
        p = self.params
        tag = "tex" if kind == "textures" else "shape"
        values = [getattr(o, kind)[-1] if getattr(o, kind) else None for o in reading.objects]
        drawn = list(values)
        marked = [i for i, o in enumerate(reading.objects) if values[i] and not o.negated]
        for i in marked:
            key = keys[i]
            clause = reading.objects[i].clause
            members = [j for j in marked if reading.objects[j].clause == clause]
            inside = [values[j] for j in members if j != i and values[j] != values[i]]
            m = len(members)
            p_in = min(p.leak_cap, p.leak_per_object * (m - 1) * f) if m >= 2 else 0.0
            if inside and draws.u(f"{tag}_leak", key) < p_in:
                drawn[i] = _pick(inside, draws.u(f"{tag}_leak_pick", key))
            if p_drop and draws.u(f"{tag}_drop", key) < p_drop:
                drawn[i] = None
        return drawn

    def _plan_layout(
        self,
        program: Program,
        draws: Draws,
        f: float,
        negative: set[str],
        items: list[_Item],
        read_classes: set[str] | None = None,
        palette: tuple[str, ...] = (),
        p_palette: float = 0.0,
    ) -> list[str]:
        """Layout boxes, followed the way layout-to-image models do (see module doc, 9).
        ``read_classes``: the object classes read from the prompt (a box whose label is not
        among them is dropped w.p. ``layout_needs_token``; None: not checked); ``palette``:
        the colours a palette / style word imposes, taken w.p. ``p_palette`` per box."""
        p = self.params
        layout = program.layout or []
        if not layout:
            return []
        W, H = program.params.width, program.params.height
        f_layout = p.layout_adherence(program.params.guidance_scale, program.params.steps)
        seen: dict[str, int] = {}
        lkeys: list[tuple[str, str, int]] = []
        for li in layout:
            lkeys.append(("layout", li.label, seen.get(li.label, 0)))
            seen[li.label] = seen.get(li.label, 0) + 1
        objects = [i for i, li in enumerate(layout) if li.label.lower() not in TEXT_LABELS]
        n = len(objects)
        dropped: set[int] = set()
        for a in range(len(objects)):
            for b in range(a + 1, len(objects)):
                i, j = objects[a], objects[b]
                if i in dropped or j in dropped:
                    continue
                if _iou(layout[i].box, layout[j].box) > p.layout_overlap_iou:
                    if draws.u("merge", lkeys[i], lkeys[j]) < p.layout_merge:
                        dropped.add(j)
        colours = [li.color for li in layout if li.color]
        # a box's texture and shape: the last of its attributes of that kind (as a phrase's)
        textures = [li.textures[-1] if li.textures else None for li in layout]
        shapes = [li.shapes[-1] if li.shapes else None for li in layout]
        missed: list[str] = []
        g = program.params.guidance_scale
        for i, li in enumerate(layout):
            key = lkeys[i]
            x0, y0, x1, y1 = li.box
            box = (round(x0 * W), round(y0 * H), round(x1 * W), round(y1 * H))
            text = None
            if li.text:
                rate = self._text_rate(len(li.text), f, g) * p.layout_text_factor
                text = self._corrupt(li.text, rate, draws, key)
            if li.label.lower() in TEXT_LABELS:
                items.append(
                    _Item("panel", key=key, text=text, intended=li.text, source="layout", box=box)
                )
                continue
            if i in dropped or (
                li.label in negative and draws.u("negative", key) >= p.negative_keep
            ):
                missed.append(li.label)
                continue
            if (
                read_classes is not None
                and p.layout_needs_token
                and li.label not in read_classes
                and draws.u("layout_token", key) < p.layout_needs_token
            ):
                missed.append(li.label)  # guidance has no token of this object to steer
                continue
            p_in = p.layout_in_box - p.layout_in_box_per_box * (n - 1)
            if (x1 - x0) * (y1 - y0) < p.layout_small_box:
                p_in -= p.layout_small_penalty
            p_in = 1.0 - (1.0 - p_in) * f_layout  # collapse / too few steps (SimParams)
            in_box = draws.u("in_box", key) < p_in
            if not in_box and draws.u("box_miss", key) < p.layout_miss_share:
                missed.append(li.label)
                continue
            color = self._box_attribute(li.color, colours, draws, "box_color", key)
            if p_palette and draws.u("palette", key) < p_palette:
                color = _pick(list(palette), draws.u("palette_pick", key))
            texture = self._box_attribute(
                textures[i], [t for t in textures if t], draws, "box_tex", key
            )
            shape = self._box_attribute(
                shapes[i], [s for s in shapes if s], draws, "box_shape", key
            )
            items.append(
                _Item(
                    "object",
                    key=key,
                    cls=li.label,
                    color=color,
                    text=text,
                    source="layout",
                    box=box if in_box else None,
                    aspect=library.sticker(li.label, color).aspect,
                    pasted=True,
                    texture=texture,
                    shape=shape,
                )
            )
        return missed

    def _box_attribute(
        self,
        value: str | None,
        values: list[str],
        draws: Draws,
        tag: str,
        key: tuple[Any, ...],
    ) -> str | None:
        """A layout box's colour (``tag="box_color"``), texture (``"box_tex"``) or shape
        (``"box_shape"``) as drawn: ``value`` holds w.p. ``layout_color_holds``, else it is
        another of the layout's ``values`` (w.p. 1/2, when there is one) or none. Draws are
        keyed ``tag`` / ``tag_pick`` by the box, so a box without the attribute draws nothing."""
        if value is None or draws.u(tag, key) < self.params.layout_color_holds:
            return value
        others = [v for v in values if v != value]
        u = draws.u(f"{tag}_pick", key)
        return _pick(others, u) if others and u < 0.5 else None

    def _lose_small(
        self,
        items: list[_Item],
        draws: Draws,
        program: Program,
        missed: list[str],
        layout_missed: list[str],
    ) -> None:
        """Below ``steps_min`` steps, each placed object (prompt or layout) whose long side is
        under ``steps_small_frac`` of the image side is removed w.p. ``min(0.9,
        steps_small_miss · missing steps)`` (draws ``steps_small``) and listed as missed: fine
        detail is denoised last (``SimParams``). Nothing happens at ``steps_min`` or more."""
        p = self.params
        missing = p.steps_min - program.params.steps
        if missing <= 0 or not p.steps_small_miss or not p.steps_small_frac:
            return
        rate = min(0.9, p.steps_small_miss * missing)
        side = min(program.params.width, program.params.height)
        for it in list(items):
            if it.kind != "object" or it.box is None or it.cls is None:
                continue
            if it.over is not None or it.front is not None:
                continue  # a depth pair is drawn as one occlusion
            long_side = max(it.box[2] - it.box[0], it.box[3] - it.box[1])
            if long_side < p.steps_small_frac * side and draws.u("steps_small", *it.key) < rate:
                items.remove(it)
                (layout_missed if it.source == "layout" else missed).append(it.cls)

    # ------------------------------------------------------------------ where
    def _place(self, items: list[_Item], draws: Draws, W: int, H: int) -> bool:
        p = self.params
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
                tw = _font(fs).getlength(it.text or "") + fs
                w, h = min(W - 8, int(tw)), int(fs * 1.9)
            else:
                s = rng.uniform(min_frac, max_frac) * side
                if it.front is not None:  # a back object: DEPTH_SCALE of its front object
                    s = draws.rng("place", *it.front.key).uniform(min_frac, max_frac) * side
                    s *= it.scale
                w, h = (
                    (int(s), int(s / it.aspect)) if it.aspect >= 1 else (int(s * it.aspect), int(s))
                )
            box = None
            if it.over is not None and it.over.box is not None:
                box = self._overlap_box(it, (w, h), rng, placed, W, H, gap)
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
                if all(_apart(cand, q, gap) for q in placed):
                    box = cand
                    break
            if box is None:
                overlap = True
                box = cand
            it.box = box
            placed.append(box)
        return overlap

    @staticmethod
    def _overlap_box(
        it: _Item,
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
            if all(_apart(cand, q, gap) for q in others):
                return cand
        return None

    # ------------------------------------------------------------------ paint
    def _paint(
        self,
        items: list[_Item],
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
                drawn = self._fit(library.sticker(it.cls, it.color), self._object_box(it)[0])
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
                obj_box, panel_box = self._object_box(it)
                if panel_box is not None:
                    self._panel(draw, panel_box, it.text or "")
                it.box = self._paste_sticker(
                    img, it.cls, it.color, obj_box, pasted if it.pasted else None, it.texture
                )
                if it.text:
                    it.box = (min(it.box[0], x0), it.box[1], max(it.box[2], x1), y1)
            elif it.kind == "panel":
                self._panel(draw, (x0, y0, x1, y1), it.text or "")
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
        bank = _noise_bank(H + 64, W + 64)
        nrng = draws.rng("noise")
        ox, oy = int(nrng.integers(64)), int(nrng.integers(64))
        noise = (bank[oy : oy + H, ox : ox + W].astype(np.int32) * round(sigma * 16)) >> 10
        if p.layout_paste_flatness > 0 and pasted.getbbox() is not None:
            keep = 1.0 - p.layout_paste_flatness * (np.asarray(pasted, np.float32) / 255.0)
            noise = (noise * keep[:, :, None]).astype(np.int32)
        out = np.asarray(img).astype(np.int32) + noise
        return Image.fromarray(np.clip(out, 0, 255).astype(np.uint8), "RGB")

    def _object_box(
        self, it: _Item
    ) -> tuple[tuple[int, int, int, int], tuple[int, int, int, int] | None]:
        """``(box the sticker is fitted into, its text panel's box or None)`` of a placed
        object (pixels). A pasted layout object is inset so stickers in adjacent boxes do not
        touch, then scaled by ``layout_paste_scale`` (the adapter's scale mismatch: the
        picture fills only part of its box); an object carrying text keeps its lower 30 % for
        the panel."""
        assert it.box is not None
        x0, y0, x1, y1 = it.box
        obj_box = (x0, y0, x1, y1)
        if it.source == "layout" and it.pasted:
            m = max(LAYOUT_INSET_PX, round(LAYOUT_INSET * min(x1 - x0, y1 - y0)))
            if x1 - x0 > 4 * m and y1 - y0 > 4 * m:
                obj_box = (x0 + m, y0 + m, x1 - m, y1 - m)
            s = self.params.layout_paste_scale
            if s < 1.0:
                cx, cy = (obj_box[0] + obj_box[2]) / 2, (obj_box[1] + obj_box[3]) / 2
                hw, hh = (obj_box[2] - obj_box[0]) * s / 2, (obj_box[3] - obj_box[1]) * s / 2
                obj_box = (round(cx - hw), round(cy - hh), round(cx + hw), round(cy + hh))
        if not it.text:
            return obj_box, None
        split = obj_box[1] + int(0.7 * (y1 - obj_box[1]))
        return (obj_box[0], obj_box[1], obj_box[2], split), (x0, split + 2, x1, y1)

    def _paste_sticker(
        self,
        img: Image.Image,
        cls: str,
        color: str | None,
        box: tuple[int, int, int, int],
        pasted: Image.Image | None = None,
        texture: str | None = None,
    ) -> tuple[int, int, int, int]:
        """Paste the class's picture fitted (aspect kept, centred) in ``box``; a layout object
        (``pasted`` mask given) is scaled nearest-neighbour with a hard alpha edge, and its
        pixels are marked in ``pasted``; ``texture`` (a ``vocab.TEXTURES`` name) is painted
        on its body (``evoharness.sim.texture``). Returns the drawn box (pixels)."""
        st = library.sticker(cls, color)
        ox, oy, ox1, oy1 = self._fit(st, box)
        w, h = ox1 - ox, oy1 - oy
        if pasted is None:
            sprite = Image.fromarray(st.rgba, "RGBA").resize((w, h), Image.Resampling.BILINEAR)
            if texture is not None:
                sprite = self._textured(sprite, st, texture, (ox, oy))
            img.paste(sprite, (ox, oy), sprite)
        else:
            sprite = Image.fromarray(st.rgba, "RGBA").resize((w, h), Image.Resampling.NEAREST)
            if texture is not None:
                sprite = self._textured(sprite, st, texture, (ox, oy))
            alpha = sprite.getchannel("A").point(lambda a: 255 if a >= 128 else 0)
            img.paste(sprite.convert("RGB"), (ox, oy), alpha)
            pasted.paste(alpha, (ox, oy), alpha)
        return (ox, oy, ox + w, oy + h)

    @staticmethod
    def _fit(st: library.Sticker, box: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
        """Where sticker ``st`` is drawn in ``box``: fitted, aspect kept, centred (pixels)."""
        x0, y0, x1, y1 = box
        bw, bh = max(4, x1 - x0), max(4, y1 - y0)
        scale = min(bw / st.rgba.shape[1], bh / st.rgba.shape[0])
        w = max(4, round(st.rgba.shape[1] * scale))
        h = max(4, round(st.rgba.shape[0] * scale))
        ox, oy = x0 + (bw - w) // 2, y0 + (bh - h) // 2
        return (ox, oy, ox + w, oy + h)

    @staticmethod
    def _textured(
        sprite: Image.Image, st: library.Sticker, texture: str, origin: tuple[int, int]
    ) -> Image.Image:
        """``sprite`` (RGBA at its drawn size) with ``texture`` painted on the body pixels."""
        body = (
            np.asarray(
                Image.fromarray(st.body.astype(np.uint8) * 255, "L").resize(
                    sprite.size, Image.Resampling.NEAREST
                )
            )
            >= 128
        )
        arr = np.asarray(sprite).copy()
        arr[..., :3] = texture_paint(arr[..., :3], body, texture, origin)
        return Image.fromarray(arr, "RGBA")

    def _panel(self, draw: ImageDraw.ImageDraw, box: tuple[int, int, int, int], text: str) -> None:
        x0, y0, x1, y1 = box
        draw.rectangle((x0, y0, x1 - 1, y1 - 1), fill=PANEL_FILL, outline=PANEL_BORDER, width=3)
        h = y1 - y0
        fs = max(8, int(h / 1.9))
        font = _font(fs)
        while fs > 8 and font.getlength(text) > (x1 - x0) - fs * 0.6:
            fs -= 1
            font = _font(fs)
        draw.text(((x0 + x1) / 2, (y0 + y1) / 2), text, fill=(0, 0, 0), font=font, anchor="mm")

    # ------------------------------------------------------------------ manifest
    def _manifest(
        self,
        items: list[_Item],
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


def _chunk(kind: bytes, data: bytes) -> bytes:
    return (
        struct.pack(">I", len(data))
        + kind
        + data
        + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)
    )


def encode_png(rgb: np.ndarray) -> bytes:
    """PNG bytes of an (H, W, 3) uint8 image: 8-bit RGB, every row with the PNG "Sub" filter
    (type 1, ISO/IEC 15948 §9.2), deflated Huffman-only at level 1. Three times faster than
    Pillow's adaptive filtering on noisy images at the same size; deterministic."""
    h, w, _ = rgb.shape
    flat = rgb.reshape(h, w * 3).astype(np.int16)
    sub = flat.copy()
    sub[:, 3:] -= flat[:, :-3]
    raw = np.empty((h, w * 3 + 1), np.uint8)
    raw[:, 0] = 1
    raw[:, 1:] = (sub & 0xFF).astype(np.uint8)
    comp = zlib.compressobj(1, zlib.DEFLATED, 15, 8, zlib.Z_HUFFMAN_ONLY)
    data = comp.compress(raw.tobytes()) + comp.flush()
    ihdr = struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0)
    return (
        b"\x89PNG\r\n\x1a\n" + _chunk(b"IHDR", ihdr) + _chunk(b"IDAT", data) + _chunk(b"IEND", b"")
    )


_NOISE: dict[str, np.ndarray] = {}


def _noise_bank(h: int, w: int) -> np.ndarray:
    """A fixed bank of N(0, 1) noise ×64 as int16 (seed 0), at least h×w×3."""
    bank = _NOISE.get("bank")
    if bank is None or bank.shape[0] < h or bank.shape[1] < w:
        size = max(1088, h, w, 0 if bank is None else bank.shape[0])
        gen = np.random.default_rng(0)
        bank = np.round(gen.standard_normal((size, size, 3), dtype=np.float32) * 64).astype(
            np.int16
        )
        _NOISE["bank"] = bank
    return bank


def _apart(a: tuple[int, int, int, int], b: tuple[int, int, int, int], gap: int) -> bool:
    return a[2] + gap <= b[0] or b[2] + gap <= a[0] or a[3] + gap <= b[1] or b[3] + gap <= a[1]


def _regions(
    relation: str,
) -> tuple[tuple[float, float, float, float], tuple[float, float, float, float]]:
    """Allowed centre regions (x0, y0, x1, y1 fractions) for subject and target."""
    if relation == "left of":
        return (0.0, 0.1, 0.38, 0.9), (0.62, 0.1, 1.0, 0.9)
    if relation == "right of":
        return (0.62, 0.1, 1.0, 0.9), (0.0, 0.1, 0.38, 0.9)
    if relation == "above":
        return (0.1, 0.0, 0.9, 0.38), (0.1, 0.62, 0.9, 1.0)
    return (0.1, 0.62, 0.9, 1.0), (0.1, 0.0, 0.9, 0.38)


def _stacked(
    relation: str,
) -> tuple[tuple[float, float, float, float], tuple[float, float, float, float]]:
    """The default composition of an unhonoured relation that is not swapped: the pair on the
    other axis, centred, so that GenEval's rule finds no relation of the asked kind."""
    if relation in ("left of", "right of"):
        return (0.4, 0.0, 0.6, 0.4), (0.4, 0.6, 0.6, 1.0)
    return (0.0, 0.4, 0.4, 0.6), (0.6, 0.4, 1.0, 0.6)


#: Proximity placement (``_proximity_regions``): the band of centre heights of an honoured
#: pair and the corner size of an unhonoured one, as fractions of the image side. Centres in
#: the band are at most 0.24 apart down, in opposite corners at least 1 − 2·0.32 = 0.36 apart
#: on both axes: each at least 0.047 of the side (24 px at 512) from T2I-CompBench's 0.313.
PROXIMITY_BAND = (0.38, 0.62)
PROXIMITY_CORNER = 0.32


def _proximity_regions(
    honoured: bool, u: float
) -> tuple[tuple[float, float, float, float], tuple[float, float, float, float]]:
    """Allowed centre regions (x0, y0, x1, y1 fractions) for the subject and target of a
    proximity relation. Honoured: both in one horizontal band (``PROXIMITY_BAND``) across the
    middle 80 %, so side by side and close by T2I-CompBench's rule (``tasks.proximity``).
    Not honoured: opposite corners of ``PROXIMITY_CORNER``, apart on both axes by more than
    the rule's threshold; ``u`` (a uniform in [0, 1)) picks the subject's corner."""
    if honoured:
        band = (0.1, PROXIMITY_BAND[0], 0.9, PROXIMITY_BAND[1])
        return band, band
    a = PROXIMITY_CORNER
    corners = [
        (0.0, 0.0, a, a),
        (1 - a, 0.0, 1.0, a),
        (1 - a, 1 - a, 1.0, 1.0),
        (0.0, 1 - a, a, 1.0),
    ]
    k = min(3, int(u * 4))
    return corners[k], corners[(k + 2) % 4]
