"""The embedded reference library (issue 32): the world's objects rendered as small
reference images in many colours, textures and poses, with captions, written to an
``ArtifactStore`` together with the index ``evoharness.agent.library.library_from_index``
reads (``{"images": [{key, bucket?, sha256?, caption}]}``).

Each image is ``SIDE``×``SIDE`` px: one sticker of a world class (``evoharness.sim.library``,
its body recoloured to a GenEval colour, ``vocab.COLORS``; optionally a texture painted on
it, ``evoharness.sim.texture``, through ``evoharness.sim.raster.paste_sticker``) centred on
a plain ``BACKGROUND``, then posed: ``upright``, ``mirrored`` (flipped left–right) or
``turned`` (rotated 90° counter-clockwise, "turned on its side"). Captions say what a person
would: "a red cup", "a striped blue cat", "a red cup, mirrored", "a green car, turned on its
side". What the images show is read back from their pixels only (``evoharness.sim.subject``);
the captions are for the agent's ``image_search``.

The default set (``LibrarySpec()``): ``CLASSES`` (12) × the 10 colours upright, plus each
class mirrored and turned in two colours, plus each of ``CLASSES`` and ``MATERIAL_CLASSES``
(19 everyday objects T2I-CompBench's texture prompts name most) in every texture
(``vocab.TEXTURES``: 10 materials and patterns, in a colour chosen by a fixed rotation):
12·(10 + 4) + 31·10 = 478 images, about 2 MB, built in about 2 s. Deterministic: the same
spec gives the same bytes, keys and index.

Keys: ``<prefix>/<class>-<colour>[-<texture>]-<pose>.png`` (spaces as ``_``) and the index
at ``<prefix>/index.json`` (``index_key``). ``build`` skips the images and index already in
the store (the keys carry ``LIBRARY_VERSION``, bumped whenever the pictures change).

Imports numpy, Pillow and the core (the generator's dependencies).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from dataclasses import dataclass, field

import numpy as np
from PIL import Image

from evoharness.agent.library import CaptionedLibrary, library_from_index
from evoharness.ports import ArtifactStore
from evoharness.sim import library
from evoharness.sim.png import encode_png
from evoharness.sim.raster import paste_sticker
from evoharness.vocab import COLORS, TEXTURES, WORLD_CLASSES, article

#: Bumped whenever the pictures or captions change (part of the default prefix).
LIBRARY_VERSION = 2
#: Side of each reference image (px).
SIDE = 128
#: Margin around the sticker (px).
MARGIN = 10
#: The plain background of every reference image (RGB).
BACKGROUND = (250, 250, 250)
#: The default classes: common, distinct silhouettes the inspector reads reliably.
CLASSES: tuple[str, ...] = (
    "cup",
    "cat",
    "car",
    "dog",
    "umbrella",
    "clock",
    "vase",
    "bird",
    "chair",
    "suitcase",
    "apple",
    "teddy bear",
)
#: Everyday objects drawn in every texture only (no plain colours, no poses): the classes
#: T2I-CompBench's texture prompts (``texture_train.txt``) name most after ``CLASSES``, less
#: ``handbag`` (the subject reader misreads 7 of its 10 textures at 128 px).
MATERIAL_CLASSES: tuple[str, ...] = (
    "dining table",
    "spoon",
    "bottle",
    "watch",
    "fork",
    "knife",
    "mirror",
    "shirt",
    "sports ball",
    "dress",
    "key",
    "window",
    "cell phone",
    "hat",
    "couch",
    "bicycle",
    "backpack",
    "bowl",
    "laptop",
)
#: The default textures: every material and pattern the world draws (``vocab.TEXTURES``),
#: the four of library v1 first (their images keep their colours).
DEFAULT_TEXTURES: tuple[str, ...] = (
    "striped",
    "spotted",
    "wooden",
    "metallic",
    *(t for t in TEXTURES if t not in ("striped", "spotted", "wooden", "metallic")),
)
#: Poses: name → caption suffix (the pixels: ``render``; mirrored = flipped left–right,
#: turned = rotated 90° counter-clockwise).
POSES = {
    "upright": "",
    "mirrored": ", mirrored",
    "turned": ", turned on its side",
}
DEFAULT_PREFIX = f"reference-library/embedded-v{LIBRARY_VERSION}"


@dataclass(frozen=True)
class LibraryEntry:
    """One reference image to render: ``cls``, ``color`` (GenEval name), ``texture`` (a
    ``vocab.TEXTURES`` name or None) and ``pose`` (a ``POSES`` name)."""

    cls: str
    color: str
    texture: str | None = None
    pose: str = "upright"

    @property
    def caption(self) -> str:
        """ "a striped blue cat, mirrored"."""
        words = " ".join(w for w in (self.texture, self.color, self.cls) if w)
        return f"{article(words)} {words}{POSES[self.pose]}"

    def key(self, prefix: str) -> str:
        """The image's key under ``prefix``."""
        parts = [self.cls, self.color] + ([self.texture] if self.texture else []) + [self.pose]
        return f"{prefix}/" + "-".join(library.slug(p) for p in parts) + ".png"


@dataclass(frozen=True)
class LibrarySpec:
    """Which images the library holds (module docstring): ``classes`` × every colour
    upright, ``textures`` per class of ``classes`` and ``material_classes``, and the posed
    copies of ``classes`` in ``posed_colors`` colours. Raises ``ValueError`` naming the field
    for an unknown class, texture or colour."""

    classes: tuple[str, ...] = CLASSES
    textures: tuple[str, ...] = DEFAULT_TEXTURES
    material_classes: tuple[str, ...] = MATERIAL_CLASSES
    colors: tuple[str, ...] = field(default_factory=lambda: tuple(COLORS))
    posed_colors: int = 2

    def __post_init__(self) -> None:
        for name, values, known in (
            ("classes", self.classes, WORLD_CLASSES),
            ("material_classes", self.material_classes, WORLD_CLASSES),
            ("textures", self.textures, TEXTURES),
            ("colors", self.colors, COLORS),
        ):
            bad = [v for v in values if v not in known]
            if bad:
                raise ValueError(f"LibrarySpec.{name}: {bad} unknown (see evoharness.vocab)")
        if not self.classes or not self.colors:
            raise ValueError("LibrarySpec: needs at least one class and one colour")
        if self.posed_colors < 0:
            raise ValueError(f"LibrarySpec.posed_colors: {self.posed_colors} < 0")

    def entries(self) -> Iterator[LibraryEntry]:
        """Every entry, in a fixed order."""
        nc = len(self.colors)
        for ci, cls in enumerate(self.classes):
            for color in self.colors:
                yield LibraryEntry(cls, color)
            for ti, tex in enumerate(self.textures):
                yield LibraryEntry(cls, self.colors[(ci + 3 * ti + 1) % nc], tex)
            for k in range(self.posed_colors):
                color = self.colors[(ci + 5 * k + 2) % nc]
                yield LibraryEntry(cls, color, None, "mirrored")
                yield LibraryEntry(cls, color, None, "turned")
        for ci, cls in enumerate(self.material_classes, start=len(self.classes)):
            if cls in self.classes:
                continue
            for ti, tex in enumerate(self.textures):
                yield LibraryEntry(cls, self.colors[(ci + 3 * ti + 1) % nc], tex)


def render(entry: LibraryEntry, side: int = SIDE) -> bytes:
    """The PNG bytes (``side``×``side`` RGB) of one reference image. Raises ``KeyError`` for
    an unknown class or colour, ``ValueError`` for an unknown pose or a side under 48 px."""
    if entry.pose not in POSES:
        raise ValueError(f"pose {entry.pose!r}: not one of {sorted(POSES)}")
    if side < 48:
        raise ValueError(f"side {side}: under 48 px (a texture needs a larger body)")
    img = Image.new("RGB", (side, side), BACKGROUND)
    m = round(MARGIN * side / SIDE)
    paste_sticker(img, entry.cls, entry.color, (m, m, side - m, side - m), None, entry.texture)
    arr = np.asarray(img)
    if entry.pose == "mirrored":
        arr = arr[:, ::-1]
    elif entry.pose == "turned":
        arr = np.rot90(arr, 1)
    return encode_png(np.ascontiguousarray(arr))


def index_key(prefix: str = DEFAULT_PREFIX) -> str:
    """The key of the library's index under ``prefix``."""
    return f"{prefix.rstrip('/')}/index.json"


def build(
    store: ArtifactStore,
    *,
    prefix: str = DEFAULT_PREFIX,
    bucket: str = "",
    spec: LibrarySpec | None = None,
) -> str:
    """Write the library's images and index to ``store`` under ``prefix``; returns the
    index's key. ``bucket``: written into each index entry (the S3 bucket the generator
    reads references from; "" for a local store, whose keys the generator then reads as
    paths relative to the store root only through a ``fetch``). Idempotent: an index already
    at the key is kept as it is (nothing is rendered). Errors of the store propagate."""
    prefix = prefix.rstrip("/")
    if not prefix:
        raise ValueError("prefix: empty")
    key = index_key(prefix)
    if store.exists(key):
        return key
    images = []
    for entry in (spec or LibrarySpec()).entries():
        png = render(entry)
        k = entry.key(prefix)
        sha = store.put(k, png, "image/png")
        item: dict[str, str] = {"key": k, "sha256": sha, "caption": entry.caption}
        if bucket:
            item["bucket"] = bucket
        images.append(item)
    doc = {"library": f"embedded-v{LIBRARY_VERSION}", "images": images}
    store.put(key, json.dumps(doc, indent=1).encode(), "application/json")
    return key


#: The library setting (``runtime.library_index``, ``worker.library_index``) that builds the
#: embedded library into the store before it is read (``open_library``).
EMBEDDED = "embedded"


def open_library(store: ArtifactStore, index: str) -> CaptionedLibrary:
    """The reference library a deployment setting names: ``EMBEDDED`` builds the embedded
    library into ``store`` (idempotent: a few seconds the first time, nothing once its index
    is there; entries carry ``store.bucket`` so a generator reads them from that store) and
    reads it; any other value is the key of an index in ``store``
    (``evoharness.agent.library.library_from_index``). Raises ``ValueError`` for an empty
    ``index`` or a malformed index, and what the store raises for a missing one."""
    if not index:
        raise ValueError("library index: empty (say 'embedded' or an index key)")
    if index == EMBEDDED:
        index = build(store, bucket=getattr(store, "bucket", "") or "")
    return library_from_index(store, index)


__all__ = [
    "DEFAULT_PREFIX",
    "EMBEDDED",
    "LIBRARY_VERSION",
    "LibraryEntry",
    "LibrarySpec",
    "build",
    "index_key",
    "open_library",
    "render",
]
