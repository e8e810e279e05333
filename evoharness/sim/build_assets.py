"""Build the simulator's object pictures (run once; the output is committed).

How the assets in ``evoharness/sim/assets/`` were made::

    apt-get install -y fonts-noto-color-emoji        # Debian, OFL 1.1 (see assets/CREDITS.md)
    .venv/bin/python -m evoharness.sim.build_assets   # writes assets/*.png

For each of the world's classes (``evoharness.vocab.WORLD_CLASSES``: GenEval's 80, then the
extra classes):

- 65 classes: the Noto Color Emoji glyph in ``EMOJI`` rendered by Pillow at the font's only
  bitmap size (``size=109, embedded_color=True``), cropped to its alpha box and downscaled so
  the longer side is ``ASSET_SIZE`` px (LANCZOS).
- the extra classes (``vocab.EXTRA_GLYPHS``): the glyph named there (a Unicode character name,
  resolved with ``unicodedata.lookup``), rendered the same way.
- 15 classes with no fitting emoji (``ICONS``): a simple icon drawn here with Pillow's
  ``ImageDraw`` at 4x and downscaled (anti-aliasing).

Each class gets two files: ``<slug>.png`` (RGBA picture) and ``<slug>_body.png`` (L mask,
255 = the "body": the part the simulator recolours to a GenEval colour). For emoji the body
is the glyph's largest colour region: pixels within CIE76 ΔE < ``BODY_DELTA_E`` of the most
frequent quantised Lab colour (8x8x8 bins), keeping connected pieces of at least 8% of it.
For drawn icons the body is drawn explicitly. The PNGs are written with ``optimize=True``.
A fresh machine needs none of this: the assets are committed. ``--only NAME ...`` (or
``build(classes=...)``) renders some classes only; rebuilding the 80 with the same font
package (2.042-0+deb12u1) reproduces the committed files byte for byte.
"""

from __future__ import annotations

import argparse
import sys
import unicodedata
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw, ImageFont

from evoharness.sim.colorspace import rgb_to_lab
from evoharness.vocab import EXTRA_GLYPHS, WORLD_CLASSES

ASSET_DIR = Path(__file__).resolve().parent / "assets"
FONT_PATH = "/usr/share/fonts/truetype/noto/NotoColorEmoji.ttf"
ASSET_SIZE = 96
BODY_DELTA_E = 24.0

#: class → emoji code point(s) in Noto Color Emoji.
EMOJI: dict[str, str] = {
    "person": "\U0001f9cd",
    "bicycle": "\U0001f6b2",
    "car": "\U0001f697",
    "motorcycle": "\U0001f3cd",
    "airplane": "\u2708",
    "bus": "\U0001f68c",
    "train": "\U0001f686",
    "truck": "\U0001f69a",
    "boat": "\u26f5",
    "traffic light": "\U0001f6a6",
    "stop sign": "\U0001f6d1",
    "bird": "\U0001f426",
    "cat": "\U0001f408",
    "dog": "\U0001f415",
    "horse": "\U0001f40e",
    "sheep": "\U0001f411",
    "cow": "\U0001f404",
    "elephant": "\U0001f418",
    "bear": "\U0001f43b",
    "zebra": "\U0001f993",
    "giraffe": "\U0001f992",
    "backpack": "\U0001f392",
    "umbrella": "\u2602",
    "handbag": "\U0001f45c",
    "tie": "\U0001f454",
    "suitcase": "\U0001f9f3",
    "frisbee": "\U0001f94f",
    "skis": "\U0001f3bf",
    "snowboard": "\U0001f3c2",
    "sports ball": "\u26bd",
    "kite": "\U0001fa81",
    "baseball bat": "\U0001f3cf",
    "skateboard": "\U0001f6f9",
    "bottle": "\U0001f37e",
    "wine glass": "\U0001f377",
    "cup": "\u2615",
    "knife": "\U0001f52a",
    "spoon": "\U0001f944",
    "bowl": "\U0001f963",
    "banana": "\U0001f34c",
    "apple": "\U0001f34e",
    "sandwich": "\U0001f96a",
    "orange": "\U0001f34a",
    "broccoli": "\U0001f966",
    "carrot": "\U0001f955",
    "hot dog": "\U0001f32d",
    "pizza": "\U0001f355",
    "donut": "\U0001f369",
    "cake": "\U0001f382",
    "chair": "\U0001fa91",
    "couch": "\U0001f6cb",
    "potted plant": "\U0001fab4",
    "bed": "\U0001f6cf",
    "toilet": "\U0001f6bd",
    "tv": "\U0001f4fa",
    "laptop": "\U0001f4bb",
    "computer mouse": "\U0001f5b1",
    "computer keyboard": "\u2328",
    "cell phone": "\U0001f4f1",
    "book": "\U0001f4d5",
    "clock": "\u23f0",
    "vase": "\U0001f3fa",
    "scissors": "\u2702",
    "teddy bear": "\U0001f9f8",
    "toothbrush": "\U0001faa5",
}


def slug(name: str) -> str:
    """File stem of a class: ``"wine glass"`` → ``"wine_glass"``."""
    return name.replace(" ", "_")


# ----------------------------------------------------------------------------------------
# Drawn icons (4x canvas, 512 px). Each function draws the picture on ``d`` and the body on
# ``b`` (a mask canvas of the same size).

S = 512
GREY = (150, 155, 160)
DARK = (45, 45, 50)
LIGHT = (215, 225, 235)


def _fire_hydrant(d: ImageDraw.ImageDraw, b: ImageDraw.ImageDraw) -> None:
    body = (200, 40, 40)
    for t in (d, b):
        c = body if t is d else 255
        t.rounded_rectangle((170, 150, 342, 440), 30, fill=c)
        t.pieslice((170, 70, 342, 240), 180, 360, fill=c)
    d.rectangle((110, 230, 170, 290), fill=GREY)
    d.rectangle((342, 230, 402, 290), fill=GREY)
    d.rectangle((236, 40, 276, 90), fill=GREY)
    d.rectangle((140, 440, 372, 480), fill=DARK)
    d.ellipse((226, 300, 286, 360), fill=GREY)


def _parking_meter(d: ImageDraw.ImageDraw, b: ImageDraw.ImageDraw) -> None:
    body = (70, 110, 150)
    d.rectangle((236, 260, 276, 490), fill=DARK)
    for t in (d, b):
        t.rounded_rectangle((150, 30, 362, 280), 60, fill=body if t is d else 255)
    d.rounded_rectangle((185, 70, 327, 150), 12, fill=LIGHT)
    d.rectangle((240, 180, 272, 240), fill=DARK)


def _bench(d: ImageDraw.ImageDraw, b: ImageDraw.ImageDraw) -> None:
    body = (150, 95, 45)
    for y in (140, 220, 320):
        for t in (d, b):
            t.rectangle((30, y, 482, y + 50), fill=body if t is d else 255)
    for x in (70, 420):
        d.rectangle((x, 370, x + 24, 470), fill=DARK)
        d.rectangle((x, 120, x + 24, 330), fill=DARK)


def _baseball_glove(d: ImageDraw.ImageDraw, b: ImageDraw.ImageDraw) -> None:
    body = (170, 100, 40)
    for t in (d, b):
        c = body if t is d else 255
        t.rounded_rectangle((140, 60, 420, 430), 120, fill=c)
        t.ellipse((50, 200, 210, 360), fill=c)
    for x in (210, 270, 330):
        d.line((x, 80, x, 260), fill=DARK, width=12)
    d.rectangle((170, 420, 390, 480), fill=(110, 60, 25))
    d.ellipse((230, 280, 330, 380), fill=(235, 225, 200))


def _surfboard(d: ImageDraw.ImageDraw, b: ImageDraw.ImageDraw) -> None:
    body = (40, 170, 190)
    for t in (d, b):
        t.ellipse((170, 10, 342, 502), fill=body if t is d else 255)
    d.rectangle((246, 30, 266, 480), fill=(235, 235, 235))
    d.polygon([(256, 400), (220, 470), (292, 470)], fill=DARK)


def _tennis_racket(d: ImageDraw.ImageDraw, b: ImageDraw.ImageDraw) -> None:
    body = (40, 120, 60)
    for t in (d, b):
        t.ellipse((110, 10, 400, 330), outline=body if t is d else 255, width=30)
        t.polygon([(225, 320), (285, 320), (270, 380), (240, 380)], fill=body if t is d else 255)
    for x in range(160, 380, 36):
        d.line((x, 40, x, 300), fill=LIGHT, width=6)
    for y in range(60, 310, 36):
        d.line((130, y, 380, y), fill=LIGHT, width=6)
    d.rounded_rectangle((235, 370, 275, 500), 10, fill=DARK)


def _dining_table(d: ImageDraw.ImageDraw, b: ImageDraw.ImageDraw) -> None:
    body = (120, 70, 30)
    for t in (d, b):
        c = body if t is d else 255
        t.rectangle((20, 130, 492, 190), fill=c)
        t.rectangle((50, 190, 90, 420), fill=c)
        t.rectangle((422, 190, 462, 420), fill=c)
    d.polygon([(60, 130), (452, 130), (400, 90), (112, 90)], fill=(230, 225, 210))
    d.ellipse((230, 50, 290, 100), fill=(200, 60, 60))


def _tv_remote(d: ImageDraw.ImageDraw, b: ImageDraw.ImageDraw) -> None:
    body = (60, 60, 70)
    for t in (d, b):
        t.rounded_rectangle((186, 10, 326, 502), 40, fill=body if t is d else 255)
    d.ellipse((231, 40, 281, 90), fill=(220, 40, 40))
    for y in range(130, 420, 60):
        for x in (210, 282):
            d.ellipse((x, y, x + 30, y + 30), fill=LIGHT)
    d.ellipse((221, 430, 291, 490), fill=(60, 160, 220))


def _microwave(d: ImageDraw.ImageDraw, b: ImageDraw.ImageDraw) -> None:
    body = (225, 225, 225)
    for t in (d, b):
        t.rounded_rectangle((20, 110, 492, 410), 24, fill=body if t is d else 255)
    d.rounded_rectangle((50, 140, 340, 380), 14, fill=(40, 50, 60))
    d.rectangle((370, 150, 460, 190), fill=(40, 180, 90))
    for y in (220, 270, 320):
        d.ellipse((395, y, 435, y + 36), fill=DARK)


def _oven(d: ImageDraw.ImageDraw, b: ImageDraw.ImageDraw) -> None:
    body = (230, 230, 230)
    for t in (d, b):
        t.rectangle((60, 40, 452, 490), fill=body if t is d else 255)
    d.rectangle((60, 40, 452, 120), fill=DARK)
    for x in (110, 200, 290, 380):
        d.ellipse((x, 60, x + 40, 100), fill=(220, 120, 40))
    d.rounded_rectangle((110, 190, 402, 420), 16, fill=(60, 45, 40))
    d.rectangle((120, 150, 392, 170), fill=GREY)


def _toaster(d: ImageDraw.ImageDraw, b: ImageDraw.ImageDraw) -> None:
    body = (190, 195, 205)
    d.rounded_rectangle((150, 60, 230, 220), 12, fill=(215, 160, 90))
    d.rounded_rectangle((282, 80, 362, 220), 12, fill=(215, 160, 90))
    for t in (d, b):
        t.rounded_rectangle((60, 180, 452, 470), 70, fill=body if t is d else 255)
    d.rectangle((140, 200, 240, 220), fill=DARK)
    d.rectangle((272, 200, 372, 220), fill=DARK)
    d.rectangle((452, 280, 500, 310), fill=DARK)
    d.rectangle((90, 470, 150, 500), fill=DARK)
    d.rectangle((362, 470, 422, 500), fill=DARK)


def _sink(d: ImageDraw.ImageDraw, b: ImageDraw.ImageDraw) -> None:
    body = (235, 235, 240)
    d.rectangle((236, 60, 276, 200), fill=GREY)
    d.rectangle((236, 60, 356, 100), fill=GREY)
    d.rectangle((326, 60, 356, 150), fill=GREY)
    for t in (d, b):
        t.chord((40, 60, 472, 470), 0, 180, fill=body if t is d else 255)
        t.rectangle((20, 240, 492, 280), fill=body if t is d else 255)
    d.ellipse((226, 330, 286, 370), fill=DARK)


def _refrigerator(d: ImageDraw.ImageDraw, b: ImageDraw.ImageDraw) -> None:
    body = (220, 228, 235)
    for t in (d, b):
        t.rounded_rectangle((120, 10, 392, 502), 24, fill=body if t is d else 255)
    d.rectangle((120, 170, 392, 182), fill=DARK)
    d.rectangle((340, 60, 360, 140), fill=GREY)
    d.rectangle((340, 220, 360, 340), fill=GREY)
    d.rectangle((140, 490, 372, 502), fill=DARK)


def _hair_drier(d: ImageDraw.ImageDraw, b: ImageDraw.ImageDraw) -> None:
    body = (230, 110, 160)
    for t in (d, b):
        c = body if t is d else 255
        t.rounded_rectangle((60, 100, 400, 240), 70, fill=c)
        t.polygon([(220, 220), (300, 220), (280, 460), (220, 460)], fill=c)
    d.rectangle((400, 130, 480, 210), fill=DARK)
    d.ellipse((80, 120, 180, 220), fill=LIGHT)
    d.rectangle((250, 290, 270, 330), fill=DARK)


def _fork(d: ImageDraw.ImageDraw, b: ImageDraw.ImageDraw) -> None:
    body = (175, 180, 190)
    for t in (d, b):
        c = body if t is d else 255
        t.rounded_rectangle((230, 230, 282, 500), 20, fill=c)
        t.rounded_rectangle((170, 150, 342, 250), 40, fill=c)
        for x in (170, 214, 258, 302):
            t.rectangle((x, 20, x + 40, 190), fill=c)
    d.rounded_rectangle((236, 320, 276, 480), 16, fill=(110, 80, 60))


ICONS: dict[str, Callable[[ImageDraw.ImageDraw, ImageDraw.ImageDraw], None]] = {
    "fire hydrant": _fire_hydrant,
    "parking meter": _parking_meter,
    "bench": _bench,
    "baseball glove": _baseball_glove,
    "surfboard": _surfboard,
    "tennis racket": _tennis_racket,
    "dining table": _dining_table,
    "tv remote": _tv_remote,
    "microwave": _microwave,
    "oven": _oven,
    "toaster": _toaster,
    "sink": _sink,
    "refrigerator": _refrigerator,
    "hair drier": _hair_drier,
    "fork": _fork,
}


def _fit(img: Image.Image, mask: Image.Image) -> tuple[Image.Image, Image.Image]:
    box = img.getbbox()
    assert box is not None
    img, mask = img.crop(box), mask.crop(box)
    scale = ASSET_SIZE / max(img.size)
    size = (max(1, round(img.width * scale)), max(1, round(img.height * scale)))
    img = img.resize(size, Image.Resampling.LANCZOS)
    mask = mask.resize(size, Image.Resampling.LANCZOS).point(lambda v: 255 if v >= 128 else 0)
    return img, mask


#: Hand-picked body colours (sRGB) where the most frequent colour is not the object's body
#: (the carrot's leaves, the snowboarder's snow, the bottle's label).
BODY_SEED: dict[str, tuple[int, int, int]] = {
    "carrot": (240, 130, 30),
    "bottle": (48, 112, 48),
    "snowboard": (240, 80, 80),
    "person": (240, 140, 20),
    "truck": (240, 176, 48),
}


def _emoji_body(img: Image.Image, name: str) -> Image.Image:
    arr = np.asarray(img.convert("RGBA")).astype(np.float32)
    alpha = arr[..., 3] > 200
    lab = rgb_to_lab(arr[..., :3] / 255.0)
    if name in BODY_SEED:
        seed = rgb_to_lab(np.array(BODY_SEED[name], dtype=np.float64) / 255.0)
        ref = lab[alpha & (np.linalg.norm(lab - seed, axis=-1) < 20)].mean(axis=0)
    else:
        q = np.floor((lab + np.array([0.0, 128.0, 128.0])) / np.array([100 / 8, 256 / 8, 256 / 8]))
        keys = (q[..., 0] * 64 + q[..., 1] * 8 + q[..., 2]).astype(np.int64)
        vals, counts = np.unique(keys[alpha], return_counts=True)
        top = vals[np.argmax(counts)]
        ref = lab[alpha & (keys == top)].mean(axis=0)
    near = alpha & (np.linalg.norm(lab - ref, axis=-1) < BODY_DELTA_E)
    from scipy import ndimage  # build-time only

    lbl, n = ndimage.label(near)
    sizes = ndimage.sum(near, lbl, range(1, n + 1))
    keep = np.isin(lbl, [i + 1 for i, s in enumerate(sizes) if s >= 0.08 * near.sum()])
    return Image.fromarray((keep * 255).astype(np.uint8), "L")


def _glyph(name: str) -> str:
    if name in EMOJI:
        return EMOJI[name]
    return unicodedata.lookup(EXTRA_GLYPHS[name])


def build(out: Path = ASSET_DIR, classes: Sequence[str] = WORLD_CLASSES) -> None:
    """Render ``classes`` (default: every world class) into ``out`` (overwrites their files).
    Raises ``SystemExit`` naming classes without a picture."""
    out.mkdir(parents=True, exist_ok=True)
    missing = set(classes) - set(EMOJI) - set(EXTRA_GLYPHS) - set(ICONS)
    if missing:
        raise SystemExit(f"classes without a picture: {sorted(missing)}")
    font = ImageFont.truetype(FONT_PATH, 109)
    for name in classes:
        if name in EMOJI or name in EXTRA_GLYPHS:
            img = Image.new("RGBA", (200, 200), (0, 0, 0, 0))
            ImageDraw.Draw(img).text((30, 30), _glyph(name), font=font, embedded_color=True)
            box = img.getbbox()
            assert box is not None, name
            img = img.crop(box)
            body = _emoji_body(img, name)
        else:
            img = Image.new("RGBA", (S, S), (0, 0, 0, 0))
            body = Image.new("L", (S, S), 0)
            ICONS[name](ImageDraw.Draw(img), ImageDraw.Draw(body))
        img, body = _fit(img, body)
        img.save(out / f"{slug(name)}.png", optimize=True)
        body.convert("1").save(out / f"{slug(name)}_body.png", optimize=True)
    print(f"wrote {len(classes)} classes to {out}", file=sys.stderr)


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, default=ASSET_DIR)
    ap.add_argument("--only", nargs="+", help="render these classes only")
    args = ap.parse_args()
    build(args.out, args.only or WORLD_CLASSES)
