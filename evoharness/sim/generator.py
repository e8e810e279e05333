"""``SimGenerator``: the embedded CPU world's text-to-image *simulator*.

A frozen, seeded behavioural model of a diffusion generator (not a neural network). It reads
the prompt like a CLIP text encoder would (``evoharness.sim.reader``), decides what to draw,
including the mistakes real generators make, and paints the scene: a smooth two-colour
gradient background, the 80 GenEval/COCO classes as "stickers" (``evoharness.sim.library``,
Noto Color Emoji pictures + 15 drawn icons, bodies recoloured to GenEval colours), text on
white sign panels, composited reference images, and Gaussian noise.

Behaviour (numbers in ``SimParams``; contract in ``/work/sim_contract.md``), all random draws
from one RNG seeded by sha256(canonical(program) | SimParams digest), so the same program
always gives the same PNG bytes:

1. Token limit: only the first 75 content tokens are read; objects, colours, counts and text
   past the cut are not drawn (``manifest["dropped"]``).
2. Attribute binding: with m >= 2 coloured objects in one clause, each object takes another
   object's colour with probability ``min(leak_cap, leak_per_object·(m−1))·f``. Objects in
   separate clauses do not leak. A lone coloured object is drawn in another colour (half the
   time its picture's own colour) with probability ``color_drift·f``.
3. Counting: an explicit count n >= 2 is right with probability ``1 − (1 − c[n])·f`` where
   ``c = count_correct`` (``digit_penalty`` less for digits); otherwise off by ±1 (±2 with
   probability ``count_far`` for n >= 5), never below 1. Plurals without a count draw 2–3.
4. Spatial relations: honoured on purpose with probability ``relation_honoured / f``; else both
   objects are placed at random (GenEval's rule then holds by chance).
5. Negation: "no X" / "without X" draws X with probability ``negation_draws``; a class named
   anywhere in ``negative_prompt`` is never drawn from the prompt (a layout item still is).
6. Text: each character of quoted text is replaced with probability
   ``min(char_cap, char_base + char_per_char·len)·f`` (×``unquoted_factor`` after "saying" /
   "that says", which is also upper-cased); a corrupted letter becomes a random letter, a
   digit a random digit. Layout text is drawn exactly.
7. Guidance/steps: ``f = SimParams.adherence(guidance_scale, steps)`` (1.2 at the defaults,
   1.0 for guidance 7.5–10 with >= 20 steps); over-saturation above guidance 10 boosts chroma
   and noise; fewer than 20 steps add noise.
8. Missed objects: each object phrase is dropped with probability
   ``min(miss_cap, miss_base + miss_per_object·(k−1))·f`` for k distinct objects.
9. Layout: each item is drawn exactly in its box (picture fitted, aspect kept, centred, inset
   by ``LAYOUT_INSET``) with
   its colour; an item with ``text`` gets a sign panel across the lower 30% of its box (the
   picture in the upper 70%); a label in ``TEXT_LABELS`` is a sign panel filling the box.
   Prompt objects whose class is a layout label are not drawn again. References are fetched
   through ``fetch`` (bytes) and composited as framed insets.

Default numbers (``SimParams()``): max_tokens 77; miss 0.03 + 0.12·(k−1), cap 0.5;
count_correct n=2..8: 0.80, 0.65, 0.50, 0.44, 0.38, 0.34, 0.30, digits −0.15, ±2 w.p. 0.3
for n >= 5; leak 0.25·(m−1), cap 0.6; colour drift 0.12; relation honoured 0.25; negation
draws 0.7; text 0.02 + 0.01·len, cap 0.4, ×2 unquoted; f: +0.6·(1 − g/7.5) below guidance
7.5, +0.06 per unit above 10, +0.03 per step below 20; noise σ 3 (+0.4 per missing step, +1
per guidance unit above 10); chroma ×(1 + 0.08 per guidance unit above 10). With these, the
naive program (prompt verbatim, defaults) scores on GenEval's 553 prompts × 2 seeds:
single_object 0.944, two_object 0.626, counting 0.537, colors 0.819, position 0.325,
color_attr 0.350 (overall 0.600), roughly an SD-class model.

Placement: objects get boxes of ``min_object_frac``..``max_object_frac`` of the image side
(smaller when there are many), at random positions at least ``gap_px`` apart; never
overlapping unless no free spot is left (then ``manifest["overlap"]`` is true).

Manifest (tests only; verifiers never read it)::

    {"objects": [{"class", "color" (GenEval name or None = picture's own colours),
                  "box": [x0, y0, x1, y1] in 0..1, "text": str | None, "source": "prompt" |
                  "layout"}],
     "texts": [{"text" (as drawn), "intended", "quoted", "box"}],
     "references": [{"index", "box"}], "dropped": [classes past the token limit],
     "missed": [classes not drawn], "adherence": f, "overlap": bool, "width", "height"}

Imports only numpy, Pillow, pydantic and evoharness core (it also runs in a numpy<2 venv).
"""

from __future__ import annotations

import hashlib
import io
import math
import struct
import time
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from evoharness.ports import GeneratedImage
from evoharness.program import ImageRef, Program
from evoharness.sim import library
from evoharness.sim.colorspace import lab_to_rgb
from evoharness.sim.params import SimParams
from evoharness.sim.reader import class_names_in, read_prompt
from evoharness.vocab import CLASSES, COLORS

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


def _substitute(ch: str, rng: np.random.Generator) -> str:
    """A corrupted character: a random letter for a letter, a random digit for a digit."""
    pool = _DIGITS if ch.isdigit() else _LETTERS
    return pool[int(rng.integers(len(pool)))]


@dataclass
class _Item:
    kind: str  # "object" | "panel" | "reference"
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


def _font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    return ImageFont.load_default(size=size)


class SimGenerator:
    """The simulator generator (implements ``evoharness.ports.Generator``).

    ``params``: the frozen behavioural model (default ``SimParams()``). ``fetch``: reads a
    reference image's bytes from its ``ImageRef`` (e.g. an ``ArtifactStore.get`` on its key);
    without it, a reference with an empty bucket is read as a local file path.
    """

    def __init__(
        self,
        params: SimParams | None = None,
        fetch: Callable[[ImageRef], bytes] | None = None,
    ) -> None:
        self.params = params or SimParams()
        self._fetch = fetch
        self._id = f"sim/{self.params.version}@{self.params.digest()}"

    @property
    def generator_id(self) -> str:
        """``"sim/<version>@<12 hex of sha256(SimParams)>"``."""
        return self._id

    # ------------------------------------------------------------------ public
    def generate(self, program: Program) -> GeneratedImage:
        """Draw ``program``; returns PNG bytes (``program.params`` width×height), the wall time
        in ``seconds`` and the ``manifest`` of what was drawn.

        Raises ``ValueError`` naming the field for an unknown layout label or colour, a layout
        box outside 0..1, or a reference that is missing or not an image.
        """
        t0 = time.perf_counter()
        if not isinstance(program, Program):
            program = Program.model_validate(program)
        refs = self._check(program)
        p = self.params
        W, H = program.params.width, program.params.height
        digest = hashlib.sha256(program.canonical() + b"\x00" + self._id.encode("utf-8")).digest()
        rng = np.random.default_rng(int.from_bytes(digest[:8], "little"))
        f = p.adherence(program.params.guidance_scale, program.params.steps)
        items, missed, dropped = self._plan(program, rng, f, refs)
        overlap = self._place(items, rng, W, H)
        img = self._paint(items, rng, W, H, program, f)
        png = encode_png(np.asarray(img))
        manifest = self._manifest(items, W, H, missed, dropped, f, overlap)
        return GeneratedImage(
            png=png,
            generator_id=self._id,
            seconds=time.perf_counter() - t0,
            manifest=manifest,
            width=W,
            height=H,
        )

    # ------------------------------------------------------------------ checks
    def _check(self, program: Program) -> list[Image.Image]:
        for i, item in enumerate(program.layout or []):
            if item.label not in CLASSES and item.label.lower() not in TEXT_LABELS:
                raise ValueError(
                    f"layout[{i}].label: {item.label!r} is not one of the 80 object classes "
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
    def _plan(
        self, program: Program, rng: np.random.Generator, f: float, refs: list[Image.Image]
    ) -> tuple[list[_Item], list[str], list[str]]:
        p = self.params
        reading = read_prompt(program.prompt, p.max_tokens)
        negative = class_names_in(program.negative_prompt) if program.negative_prompt else set()
        layout = program.layout or []
        layout_classes = {it.label for it in layout}
        items: list[_Item] = []
        missed: list[str] = []
        k = len({o.cls for o in reading.objects if not o.negated})
        p_miss = min(p.miss_cap, (p.miss_base + p.miss_per_object * max(0, k - 1)) * f)

        # colours, with leakage inside a clause
        colors: list[str | None] = [o.colors[-1] if o.colors else None for o in reading.objects]
        drawn_colors = list(colors)
        by_clause: dict[int, list[int]] = {}
        for i, o in enumerate(reading.objects):
            if colors[i] is not None and not o.negated:
                by_clause.setdefault(o.clause, []).append(i)
        for members in by_clause.values():
            m = len(members)
            if m >= 2:
                p_leak = min(p.leak_cap, p.leak_per_object * (m - 1) * f)
                for i in members:
                    others = [colors[j] for j in members if j != i and colors[j] != colors[i]]
                    if rng.random() < p_leak and others:
                        drawn_colors[i] = others[int(rng.integers(len(others)))]
            else:
                i = members[0]
                if rng.random() < p.color_drift * f:
                    if rng.random() < 0.5:
                        drawn_colors[i] = None
                    else:
                        alt = [c for c in COLORS if c != colors[i]]
                        drawn_colors[i] = alt[int(rng.integers(len(alt)))]

        drawn_phrase: dict[int, list[_Item]] = {}
        for i, o in enumerate(reading.objects):
            r_draw, r_miss = rng.random(), rng.random()
            if o.cls in layout_classes or o.cls in negative:
                continue
            if o.negated and r_draw >= p.negation_draws:
                continue
            if r_miss < p_miss:
                missed.append(o.cls)
                continue
            n = o.count if o.count is not None else int(rng.integers(2, 4))
            if o.count is not None and n >= 2:
                table = p.count_correct
                c = table[min(n, len(table) - 1)] - (p.digit_penalty if o.digit else 0.0)
                if rng.random() < min(0.95, (1.0 - c) * f):
                    step = 2 if n >= 5 and rng.random() < p.count_far else 1
                    n = max(1, n + (step if rng.random() < 0.5 else -step))
            n = max(0, min(n, 12))
            st = library.sticker(o.cls, drawn_colors[i])
            drawn_phrase[i] = []
            for _ in range(n):
                it = _Item("object", cls=o.cls, color=drawn_colors[i], aspect=st.aspect)
                items.append(it)
                drawn_phrase[i].append(it)

        # spatial relations
        for rel in reading.relations:
            a, b = drawn_phrase.get(rel.subject), drawn_phrase.get(rel.target)
            if not a or not b or rng.random() >= p.relation_honoured / f:
                continue
            ra, rb = _regions(rel.relation)
            for it in a:
                it.region = ra
            for it in b:
                it.region = rb

        # text (a layout item carrying the same text covers it, as a layout label covers a
        # prompt object: the layout's exact panel is drawn instead of a second, noisy one)
        layout_texts = {(li.text or "").strip().lower() for li in layout if li.text}
        for t in reading.texts:
            rate = min(p.char_cap, p.char_base + p.char_per_char * len(t.text)) * f
            if not t.quoted:
                rate = min(0.9, rate * p.unquoted_factor)
            drawn = "".join(
                (_substitute(ch, rng) if rng.random() < rate else ch) if ch.isalnum() else ch
                for ch in t.text
            )
            drawn = "".join(
                d.lower() if o.islower() else d for d, o in zip(drawn, t.text, strict=True)
            )
            if t.text.strip().lower() not in layout_texts:  # rng consumed either way
                items.append(_Item("panel", text=drawn, intended=t.text, quoted=t.quoted))

        # layout (exact) and references
        for li in layout:
            x0, y0, x1, y1 = li.box
            W, H = program.params.width, program.params.height
            box = (round(x0 * W), round(y0 * H), round(x1 * W), round(y1 * H))
            if li.label.lower() in TEXT_LABELS:
                items.append(
                    _Item("panel", text=li.text, intended=li.text, source="layout", box=box)
                )
            else:
                items.append(
                    _Item(
                        "object",
                        cls=li.label,
                        color=li.color,
                        text=li.text,
                        source="layout",
                        box=box,
                        aspect=library.sticker(li.label, li.color).aspect,
                    )
                )
        for i, im in enumerate(refs):
            items.append(_Item("reference", image=im, aspect=im.width / im.height, ref_index=i))
        dropped = list(reading.dropped)
        return items, missed, dropped

    # ------------------------------------------------------------------ where
    def _place(self, items: list[_Item], rng: np.random.Generator, W: int, H: int) -> bool:
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
            if it.kind == "panel":
                fs = max(18, round(side * 0.055))
                tw = _font(fs).getlength(it.text or "") + fs
                w, h = min(W - 8, int(tw)), int(fs * 1.9)
            else:
                s = rng.uniform(min_frac, max_frac) * side
                w, h = (
                    (int(s), int(s / it.aspect)) if it.aspect >= 1 else (int(s * it.aspect), int(s))
                )
            box = None
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

    # ------------------------------------------------------------------ paint
    def _paint(
        self,
        items: list[_Item],
        rng: np.random.Generator,
        W: int,
        H: int,
        program: Program,
        f: float,
    ) -> Image.Image:
        p = self.params
        # background: gradient between two muted colours (CIELAB L 58..85, chroma <= 28)
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
        for it in items:
            assert it.box is not None
            x0, y0, x1, y1 = it.box
            if it.kind == "object":
                assert it.cls is not None
                obj_box = (x0, y0, x1, y1)
                if it.source == "layout":
                    # inset so stickers in adjacent layout boxes do not touch
                    m = max(LAYOUT_INSET_PX, round(LAYOUT_INSET * min(x1 - x0, y1 - y0)))
                    if x1 - x0 > 4 * m and y1 - y0 > 4 * m:
                        obj_box = (x0 + m, y0 + m, x1 - m, y1 - m)
                if it.text:
                    split = y0 + int(0.7 * (y1 - y0))
                    obj_box = (obj_box[0], obj_box[1], obj_box[2], split)
                    self._panel(draw, (x0, split + 2, x1, y1), it.text)
                it.box = self._paste_sticker(img, it.cls, it.color, obj_box, it.source)
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
        if g > p.guidance_saturate:
            arr = np.asarray(img).astype(np.float32)
            gain = 1.0 + p.saturation_gain * (g - p.guidance_saturate)
            grey = arr.mean(axis=-1, keepdims=True)
            arr = np.clip(grey + (arr - grey) * gain + 0.5, 0, 255)
            img = Image.fromarray(arr.astype(np.uint8), "RGB")
            sigma += p.noise_per_guidance * (g - p.guidance_saturate)
        # light Gaussian noise: a window of a fixed N(0, 1) bank at a seeded offset
        bank = _noise_bank(H + 64, W + 64)
        ox, oy = int(rng.integers(64)), int(rng.integers(64))
        noise = (bank[oy : oy + H, ox : ox + W].astype(np.int32) * round(sigma * 16)) >> 10
        out = np.asarray(img).astype(np.int32) + noise
        return Image.fromarray(np.clip(out, 0, 255).astype(np.uint8), "RGB")

    def _paste_sticker(
        self,
        img: Image.Image,
        cls: str,
        color: str | None,
        box: tuple[int, int, int, int],
        source: str,
    ) -> tuple[int, int, int, int]:
        st = library.sticker(cls, color)
        x0, y0, x1, y1 = box
        bw, bh = max(4, x1 - x0), max(4, y1 - y0)
        scale = min(bw / st.rgba.shape[1], bh / st.rgba.shape[0])
        w = max(4, round(st.rgba.shape[1] * scale))
        h = max(4, round(st.rgba.shape[0] * scale))
        ox, oy = x0 + (bw - w) // 2, y0 + (bh - h) // 2
        sprite = Image.fromarray(st.rgba, "RGBA").resize((w, h), Image.Resampling.BILINEAR)
        img.paste(sprite, (ox, oy), sprite)
        return (ox, oy, ox + w, oy + h)

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
        for it in items:
            assert it.box is not None
            if it.kind == "object":
                objects.append(
                    {
                        "class": it.cls,
                        "color": it.color,
                        "box": frac(it.box),
                        "text": it.text,
                        "source": it.source,
                    }
                )
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
