"""How the simulator paints one thing: a sticker fitted in its box (optionally textured,
or pasted as a layout-to-image adapter pastes), a text panel, the fixed noise bank, and the
box an object's sticker and panel take. The scene as a whole (background, outlines, order,
noise, blur) is painted by ``evoharness.sim.generator``. Imports only numpy, Pillow and the
evoharness core.
"""

from __future__ import annotations

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from evoharness.sim import library
from evoharness.sim.params import SimParams
from evoharness.sim.planning import Item
from evoharness.sim.texture import paint as texture_paint

PANEL_FILL = (255, 244, 188)
PANEL_BORDER = (20, 20, 20)
#: A layout item's picture is fitted inside its box inset by max(3 px, 3% of the box side), so
#: pictures in adjacent boxes stay apart (the manifest box is the drawn box, inside the item's).
LAYOUT_INSET = 0.03
LAYOUT_INSET_PX = 3


def font(size: int) -> ImageFont.FreeTypeFont | ImageFont.ImageFont:
    """Pillow's default font at ``size`` px (text panels and their placement)."""
    return ImageFont.load_default(size=size)


def object_box(
    p: SimParams, it: Item
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
        s = p.layout_paste_scale
        if s < 1.0:
            cx, cy = (obj_box[0] + obj_box[2]) / 2, (obj_box[1] + obj_box[3]) / 2
            hw, hh = (obj_box[2] - obj_box[0]) * s / 2, (obj_box[3] - obj_box[1]) * s / 2
            obj_box = (round(cx - hw), round(cy - hh), round(cx + hw), round(cy + hh))
    if not it.text:
        return obj_box, None
    split = obj_box[1] + int(0.7 * (y1 - obj_box[1]))
    return (obj_box[0], obj_box[1], obj_box[2], split), (x0, split + 2, x1, y1)


def paste_sticker(
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
    ox, oy, ox1, oy1 = fit(st, box)
    w, h = ox1 - ox, oy1 - oy
    if pasted is None:
        sprite = Image.fromarray(st.rgba, "RGBA").resize((w, h), Image.Resampling.BILINEAR)
        if texture is not None:
            sprite = textured(sprite, st, texture, (ox, oy))
        img.paste(sprite, (ox, oy), sprite)
    else:
        sprite = Image.fromarray(st.rgba, "RGBA").resize((w, h), Image.Resampling.NEAREST)
        if texture is not None:
            sprite = textured(sprite, st, texture, (ox, oy))
        alpha = sprite.getchannel("A").point(lambda a: 255 if a >= 128 else 0)
        img.paste(sprite.convert("RGB"), (ox, oy), alpha)
        pasted.paste(alpha, (ox, oy), alpha)
    return (ox, oy, ox + w, oy + h)


def fit(st: library.Sticker, box: tuple[int, int, int, int]) -> tuple[int, int, int, int]:
    """Where sticker ``st`` is drawn in ``box``: fitted, aspect kept, centred (pixels)."""
    x0, y0, x1, y1 = box
    bw, bh = max(4, x1 - x0), max(4, y1 - y0)
    scale = min(bw / st.rgba.shape[1], bh / st.rgba.shape[0])
    w = max(4, round(st.rgba.shape[1] * scale))
    h = max(4, round(st.rgba.shape[0] * scale))
    ox, oy = x0 + (bw - w) // 2, y0 + (bh - h) // 2
    return (ox, oy, ox + w, oy + h)


def textured(
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


def panel(draw: ImageDraw.ImageDraw, box: tuple[int, int, int, int], text: str) -> None:
    """A sign panel in ``box`` (pixels): ``PANEL_FILL`` with a ``PANEL_BORDER`` frame, and
    ``text`` centred in black, in the largest default font size (from 1/1.9 of the panel's
    height, at least 8) that fits its width."""
    x0, y0, x1, y1 = box
    draw.rectangle((x0, y0, x1 - 1, y1 - 1), fill=PANEL_FILL, outline=PANEL_BORDER, width=3)
    h = y1 - y0
    fs = max(8, int(h / 1.9))
    face = font(fs)
    while fs > 8 and face.getlength(text) > (x1 - x0) - fs * 0.6:
        fs -= 1
        face = font(fs)
    draw.text(((x0 + x1) / 2, (y0 + y1) / 2), text, fill=(0, 0, 0), font=face, anchor="mm")


_NOISE: dict[str, np.ndarray] = {}


def noise_bank(h: int, w: int) -> np.ndarray:
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
