"""Textures, materials and shapes in the embedded world (issue 19): read from the prompt by
the simulator's reader and the rule extractor, painted on sticker bodies (patterns) or around
them (dashed outlines) by the generator, read back by the inspector and judged as
``attribute`` constraints — and GenEval's renders are unchanged by any of it (the
calibration of issue 15 stands)."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from evoharness.evidence import EvidenceStatus
from evoharness.program import Program
from evoharness.runtime.explanation import explain
from evoharness.runtime.extract import RuleExtractor
from evoharness.sim import SimGenerator, SimInspector, shape, texture
from evoharness.sim.profiles import load_profile
from evoharness.sim.reader import read_prompt
from evoharness.tasks.models import Constraint, ConstraintType
from evoharness.vocab import SHAPE_WORDS, SHAPES, TEXTURE_WORDS, TEXTURES

PARAMS = {"steps": 30, "guidance_scale": 5.0, "width": 512, "height": 512}

#: sha256 of the PNG bytes of GenEval prompts (the fourth prompt of each tag), rendered by the
#: generator of commit 724e743, before textures existed. A prompt without texture words must
#: render the same bytes, so the profiles' calibration (issue 15) is not disturbed.
GOLDEN = [
    (
        "sdxl-like",
        "a photo of a yellow computer keyboard and a black sink",
        0,
        "270c6067a8c146d6b0fd0a68674fa6509513c49b58d40238cacfd81ce3ef5a65",
    ),
    (
        "sdxl-like",
        "a photo of a yellow computer keyboard and a black sink",
        1,
        "b10a52108a73b62d589b4a4c5a9e0c6124bb71b0056d45f49fe0ca43f126cef2",
    ),
    (
        "sdxl-like",
        "a photo of a blue cow",
        0,
        "5752c1d3111b0617456a6acf583d791fbac6bcce3523b097516f0baf7cfee5c8",
    ),
    (
        "sdxl-like",
        "a photo of a blue cow",
        1,
        "db718350269ca48781b558b480a2adee85825a9620fe026a3d4bad31cfb1848e",
    ),
    (
        "sdxl-like",
        "a photo of two frisbees",
        0,
        "78f8bc625ab13a4930dc0121d01973a8cfdcc87cdc563385f2eda1cc655c9291",
    ),
    (
        "sdxl-like",
        "a photo of two frisbees",
        1,
        "3defeb8e740b9faae0e293ba8df63f32733491b7dd37ae770df7e186e41fa808",
    ),
    (
        "sdxl-like",
        "a photo of a laptop left of a cow",
        0,
        "e3e5173aa037c40f8a8a1b1738bdde002a1d5d16d03c71068872b9a5fd8ec420",
    ),
    (
        "sdxl-like",
        "a photo of a laptop left of a cow",
        1,
        "05442e1b303bc90df3e911006b2a2d5c592237b67434f508aa250d80a40fc6c1",
    ),
    (
        "sdxl-like",
        "a photo of a clock",
        0,
        "ab63cba24b5dd2d55bda2463278666a14cdfc4c728fe5165353c955f927c17a0",
    ),
    (
        "sdxl-like",
        "a photo of a clock",
        1,
        "f54371d744c00ed3054882b13c30922ba2241642cfdf8710f4309497b835623e",
    ),
    (
        "sdxl-like",
        "a photo of a broccoli and a vase",
        0,
        "5e0bfc1bcae14b6f7b232c8f4b9ae148cf556803aace46b2b249e65e4724e7a1",
    ),
    (
        "sdxl-like",
        "a photo of a broccoli and a vase",
        1,
        "ac8e6a86e21148dbe67c0fdb96b2c15c5976fb46b4e168d790db1c3275ee9195",
    ),
    (
        "sd15-like",
        "a photo of a yellow computer keyboard and a black sink",
        0,
        "bc0a433d1a1427bad2bfd0e9193c373b98871de9d33c9488a079c9be6186441c",
    ),
    (
        "sd15-like",
        "a photo of a yellow computer keyboard and a black sink",
        1,
        "745d348489b9887483e07b6d9283dc3030b29b3975edb002a6dbd0530830875d",
    ),
    (
        "sd15-like",
        "a photo of a blue cow",
        0,
        "b840dae2a4d3d8e2cef28b5b8ba35c1777299aab312478443cd5d55a11c70ed4",
    ),
    (
        "sd15-like",
        "a photo of a blue cow",
        1,
        "5eca902803580a03e7ad096e91d289968116f6ea1b10297a5dd134e1048803c4",
    ),
    (
        "sd15-like",
        "a photo of two frisbees",
        0,
        "66f39639f30076732f4c4a622c74d9150a04b130e28deb5896c4fa66b290202e",
    ),
    (
        "sd15-like",
        "a photo of two frisbees",
        1,
        "e309b59250f2f85e3ff123e85f3337e929474df4f4dfdeaadc6831809952f750",
    ),
    (
        "sd15-like",
        "a photo of a laptop left of a cow",
        0,
        "655c1013c565e4e5fdcade4d97166c8ef3f316f8d99fa74bb0d2181a4d466321",
    ),
    (
        "sd15-like",
        "a photo of a laptop left of a cow",
        1,
        "5a70bfa94b4c60acf97f378d13dfa7ea9843f1f76de5664a5e0d87a4ad38a4bc",
    ),
    (
        "sd15-like",
        "a photo of a clock",
        0,
        "f0ecb0217dede397eba77e9d6252380331188c8789ebc524e7a89f37c8c720a1",
    ),
    (
        "sd15-like",
        "a photo of a clock",
        1,
        "a9abd914ff125e3290ec783a890480025f48bb64e0d8c00428fdb476b4e80f32",
    ),
    (
        "sd15-like",
        "a photo of a broccoli and a vase",
        0,
        "eeb9f57c7bd686caac92f58449eb448d0c06d7af2fca505f384266ab40676079",
    ),
    (
        "sd15-like",
        "a photo of a broccoli and a vase",
        1,
        "1fb1eaf7086f4a40d4e537eac4b6733dcd7cce53f2f70858468ec73d1daad039",
    ),
]


def _png(prompt: str, seed: int, profile: str = "sdxl-like") -> tuple[bytes, dict]:
    img = SimGenerator(load_profile(profile)).generate(
        Program(prompt=prompt, params=PARAMS, seed=seed)
    )
    return img.png, img.manifest


@pytest.mark.parametrize(("profile", "prompt", "seed", "sha"), GOLDEN)
def test_geneval_renders_are_byte_identical_to_before_textures(
    profile: str, prompt: str, seed: int, sha: str
) -> None:
    png, manifest = _png(prompt, seed, profile)
    assert hashlib.sha256(png).hexdigest() == sha
    assert all("texture" not in o and "shape" not in o for o in manifest["objects"])


def test_no_geneval_prompt_names_a_texture(shared_dir: Path) -> None:
    """The reader gives every one of GenEval's 553 prompts no texture, so the generator
    takes none of the new paths (and draws no new random numbers) on them."""
    rows = (shared_dir / "data" / "geneval" / "evaluation_metadata.jsonl").read_text()
    prompts = [json.loads(x)["prompt"] for x in rows.splitlines() if x.strip()]
    assert len(prompts) == 553
    assert all(not o.textures and not o.shapes for p in prompts for o in read_prompt(p).objects)


def test_reader_binds_texture_and_shape_words_to_their_object() -> None:
    r = read_prompt("a red wooden chair and a round metal spoon. a striped cat")
    got = [(o.cls, o.colors, o.textures, o.shapes) for o in r.objects]
    assert got == [
        ("chair", ["red"], ["wooden"], []),
        ("spoon", [], ["metallic"], ["round"]),
        ("cat", [], ["striped"], []),
    ]


@pytest.mark.parametrize("name", sorted(TEXTURES))
def test_every_texture_is_drawn_and_read_back(name: str) -> None:
    """Each texture on three classes of different shapes, each seed placing them elsewhere
    (so the pattern's phase differs): the inspector reads the drawn texture; the same
    prompt without the word reads plain."""
    word = TEXTURES[name][-1]
    for cls, seed in (("chair", 1), ("cat", 2), ("car", 3)):
        png, manifest = _png(f"a photo of a {word} {cls}", seed)
        assert [o.get("texture") for o in manifest["objects"]] == [name]
        scene = SimInspector(ocr=False).inspect(png, read_text=False)
        assert [(d.cls, d.texture) for d in scene.detections] == [(cls, name)], (cls, seed)
    png, _ = _png("a photo of a chair", 1)
    scene = SimInspector(ocr=False).inspect(png, read_text=False)
    assert [d.texture for d in scene.detections] == [texture.PLAIN]


def test_attribute_constraints_are_judged_for_textures_only() -> None:
    png, _ = _png("a photo of a wooden chair", 1)
    ins = SimInspector(ocr=False)
    scene = ins.inspect(png, read_text=False)

    def verdict(value: str, subject: str = "chair") -> EvidenceStatus:
        c = Constraint(
            constraint_id="a", type=ConstraintType.attribute, subject=subject, value=value
        )
        return ins.judge(c, scene).status

    assert verdict("wooden") is EvidenceStatus.passed
    assert verdict("metallic") is EvidenceStatus.failed
    assert verdict("wooden", "dog") is EvidenceStatus.failed  # no dog
    assert verdict("oval") is EvidenceStatus.uncertain  # a shape the world does not draw
    assert verdict("wooden", "towel") is EvidenceStatus.uncertain  # no such class


def test_read_says_nothing_about_a_body_too_small() -> None:
    import numpy as np

    n = texture.MIN_BODY_PX - 1
    assert texture.read(np.zeros(n), np.arange(n), np.zeros(n)) is None


def test_textures_bind_like_colours() -> None:
    """Two textured objects in one clause swap textures now and then (binding errors, with
    the profile's colour-leak numbers); a lone textured object keeps its texture."""
    swaps = 0
    for seed in range(40):
        _, m = _png("a wooden chair and a glass bottle", seed, "sd15-like")
        got = {o["class"]: o.get("texture") for o in m["objects"]}
        if got.get("chair") == "glass" or got.get("bottle") == "wooden":
            swaps += 1
        _, lone = _png("a wooden chair", seed, "sd15-like")
        assert all(o.get("texture") == "wooden" for o in lone["objects"])
    assert 0 < swaps < 40


def test_rule_extractor_reads_textures_as_attribute_constraints() -> None:
    cs = RuleExtractor().extract("two metal spoons and a fluffy dog")
    got = [(c.type.value, c.subject, c.value) for c in cs]
    assert ("attribute", "spoon", "metallic") in got and ("attribute", "dog", "fluffy") in got
    assert ("count", "spoon", 2) in got
    out = explain("a fluffy dog and an oval clock")
    assert not [u for u in out["uncertain"] if u.get("value") == "fluffy"]
    (oval,) = [u for u in out["uncertain"] if u.get("value") == "oval"]
    assert "textures and shapes only" in oval["reason"]


def test_texture_words_are_neither_classes_nor_colours() -> None:
    from evoharness.vocab import COLORS, class_of

    assert all(class_of(w) is None and w not in COLORS for w in (*TEXTURE_WORDS, *SHAPE_WORDS))
    assert not set(TEXTURE_WORDS) & set(SHAPE_WORDS)


@pytest.mark.parametrize("name", sorted(SHAPES))
def test_every_shape_is_outlined_and_read_back(name: str) -> None:
    """Each shape around three classes: the inspector reads the outlined shape (asked with
    ``shapes=True``); without the word there is no outline; the outline leaves the detections
    (class, box, colour, texture) as they are without it."""
    word = SHAPES[name][-1]
    ins = SimInspector(ocr=False)
    for cls, seed in (("clock", 1), ("cat", 2), ("car", 3)):
        png, manifest = _png(f"a photo of a {word} {cls}", seed)
        assert [o.get("shape") for o in manifest["objects"]] == [name]
        scene = ins.inspect(png, read_text=False, shapes=True)
        assert [(d.cls, d.shape) for d in scene.detections] == [(cls, name)], (cls, seed)
        plain_png, _ = _png(f"a photo of a {cls}", seed)
        plain = ins.inspect(plain_png, read_text=False, shapes=True)
        assert [d.shape for d in plain.detections] == [None]
        strip = [(d.cls, d.box, d.color, d.texture) for d in plain.detections]
        assert [(d.cls, d.box, d.color, d.texture) for d in scene.detections] == strip


def test_shape_constraints_need_the_outlines_read() -> None:
    png, _ = _png("a photo of a round clock", 1)
    ins = SimInspector(ocr=False)
    c = Constraint(constraint_id="s", type=ConstraintType.attribute, subject="clock", value="round")
    sq = c.model_copy(update={"value": "square"})
    # verify() asks for the outlines when a constraint needs them (scene_needs)
    assert [e.status for e in ins.verify(png, [c, sq])] == [
        EvidenceStatus.passed,
        EvidenceStatus.failed,
    ]
    assert ins.judge(c, ins.inspect(png, read_text=False)).status is EvidenceStatus.uncertain
    cs = RuleExtractor().extract("a round clock and a triangular sign")
    assert ("attribute", "clock", "round") in [(x.type.value, x.subject, x.value) for x in cs]


def test_shape_paths_are_distinct() -> None:
    """No two shapes' paths around one box share more than a fifth of their points (within
    2 px), so a drawn outline scores far less on any other shape than on its own."""
    import numpy as np

    box = (200.0, 200.0, 260.0, 250.0)
    for a in SHAPES:
        xa, ya = shape.path(a, box)
        for b in SHAPES:
            if a == b:
                continue
            xb, yb = shape.path(b, box)
            d = np.hypot(xa[:, None] - xb[None, :], ya[:, None] - yb[None, :]).min(axis=1)
            assert (d <= 2).mean() < 0.2, (a, b)


#: Crowded bench scenes (``sim_bench.programs(60, pool="world", crowded=True, ...)``, their
#: seed and guidance): with outlines, a neighbour's dash touching a sticker joined it at full
#: size and the volleyball was read as a die; without any outline, a neighbour's dark body on
#: a candidate path read as a shape.
CROWDED_OUTLINED = (
    "a photo of 2 pink stopwatches. 2 triangular wooden volleyballs. 4 white rectangular "
    "wooden ghosts. 3 hamsters. 3 yellow round wooden raccoons",
    5,
)
CROWDED_PLAIN = [
    ("a photo of 2 green caterpillars. 4 black unicorns. 4 black huts. 2 lemons. 3 rugby balls", 8),
    ("a photo of 2 blue steaks. 4 blue notebooks. 4 bowling balls. 4 showers. 4 hamsters", 10),
]


def test_outlines_leave_crowded_detections_as_they_are(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same crowded scene rendered with and without its outlines: the inspector finds
    the same classes, counts and colours, and boxes within 1 px (``shape.dash_pixels``)."""
    import numpy as np

    from evoharness.sim import generator

    prompt, seed = CROWDED_OUTLINED
    prog = Program(prompt=prompt, seed=seed, params={"guidance_scale": 7.5})
    ins = SimInspector(ocr=False)
    with_png = SimGenerator().generate(prog).png
    none = (np.zeros(0, np.int64), np.zeros(0, np.int64))
    monkeypatch.setattr(generator, "shape_dashes", lambda name, box: none)
    without_png = SimGenerator().generate(prog).png
    assert with_png != without_png
    a = sorted(ins.inspect(with_png, read_text=False).detections, key=lambda d: d.box)
    b = sorted(ins.inspect(without_png, read_text=False).detections, key=lambda d: d.box)
    assert [(d.cls, d.color) for d in a] == [(d.cls, d.color) for d in b]
    assert len(a) == 12
    for da, db in zip(a, b, strict=True):
        assert max(abs(u - v) for u, v in zip(da.box, db.box, strict=True)) * 512 <= 1.01


@pytest.mark.parametrize(("prompt", "seed"), CROWDED_PLAIN)
def test_crowded_scene_without_outlines_reads_no_shape(prompt: str, seed: int) -> None:
    png = SimGenerator().generate(Program(prompt=prompt, seed=seed, params={"guidance_scale": 7.5}))
    scene = SimInspector(ocr=False).inspect(png.png, read_text=False, shapes=True)
    assert len(scene.detections) >= 4
    assert [d.shape for d in scene.detections if d.shape is not None] == []


def test_dash_pixels_are_thin_lines_of_the_outline_contrast() -> None:
    """A 1-px line at the outline's contrast touching a block is a dash; the block, a line
    much darker than the outline's contrast and the background are not."""
    import numpy as np

    bg = np.full((40, 40, 3), 180.0, np.float32)
    rgb = np.full((40, 40, 3), 180, np.uint8)
    rgb[10:30, 10:30] = 30  # a sticker
    rgb[30:38, 20] = 180 - int(shape.CONTRAST)  # a dash touching its bottom edge
    rgb[5, 0:10] = 20  # a dark thin line, far darker than an outline
    fg = ((bg - rgb).max(axis=2) > 26).astype(np.uint8)
    got = shape.dash_pixels(rgb, bg, fg)
    assert got[30:38, 20].all()
    assert got.sum() == 8


#: Small textured objects of ``sim_bench.programs(150, textures=True)`` (prompt, seed, class,
#: texture, drawn box in px) that the first, phase-blind reader (cosine of the amplitude
#: spectrum ≥ 0.8) read ``plain``; boxes 50–73 px on a side.
SMALL_TEXTURED = [
    ("a photo of 3 orange leather surfboard", 45, "surfboard", "leather", (366, 96, 401, 174)),
    ("a photo of 1 spotted dog", 101, "dog", "spotted", (229, 232, 296, 303)),
    (
        "a photo of 3 wooden vase. 1 orange glass bicycle. 2 carrot. 2 spotted orange",
        32,
        "vase",
        "wooden",
        (455, 340, 496, 401),
    ),
    ("a photo of 1 red baseball bat. 3 striped car", 37, "car", "striped", (220, 160, 283, 203)),
    (
        "a photo of 3 black potted plant. 1 orange plastic train",
        36,
        "train",
        "plastic",
        (449, 130, 499, 195),
    ),
    ("a photo of 3 fabric oven. 1 brown spotted cake", 61, "oven", "fabric", (6, 396, 68, 466)),
]


@pytest.mark.parametrize(("prompt", "seed", "cls", "name", "box"), SMALL_TEXTURED)
def test_small_textured_bodies_are_read(
    prompt: str, seed: int, cls: str, name: str, box: tuple[int, int, int, int]
) -> None:
    """The coherent matched filter (``texture.fit``) reads these small bodies right."""
    img = SimGenerator().generate(Program(prompt=prompt, seed=seed, params={"guidance_scale": 7.5}))
    drawn = [o for o in img.manifest["objects"] if o["class"] == cls and o.get("texture") == name]
    assert any(tuple(round(v * 512) for v in o["box"]) == box for o in drawn)
    scene = SimInspector(ocr=False).inspect(img.png, read_text=False)
    x0, y0, x1, y1 = (v / 512 for v in box)
    near = [
        d
        for d in scene.detections
        if d.cls == cls
        and max(abs(a - b) for a, b in zip(d.box, (x0, y0, x1, y1), strict=True)) < 4 / 512
    ]
    assert [d.texture for d in near] == [name]


def test_fit_recovers_a_pattern_under_picture_detail() -> None:
    """On a 32×32 body, every texture is read under detail in quadrature with every
    pattern's fundamental (a sine where the patterns are cosines) plus noise, with most of
    its amplitude; the detail alone reads plain. Knowing the pattern's phase
    is what separates them (the phase-blind reader read all of these plain)."""
    import math

    import numpy as np

    rng = np.random.default_rng(0)
    ys, xs = np.mgrid[200:232, 300:332]
    xs, ys = xs.ravel().astype(float), ys.ravel().astype(float)
    freqs = {
        (1 / p * math.cos(math.radians(a)), 1 / p * math.sin(math.radians(a)))
        for p, angles in texture.PATTERNS.values()
        for a in angles
    }
    detail = sum(8 * np.sin(2 * math.pi * (fx * xs + fy * ys)) for fx, fy in freqs)
    for name in texture.NAMES:
        r = texture.AMPLITUDE * texture.pattern(name, xs, ys) + detail + rng.normal(0, 4, len(xs))
        amp, _ = texture.fit(r, xs, ys)
        assert amp[texture.NAMES.index(name)] > 0.6 * texture.AMPLITUDE, name
        assert texture.read(r, xs, ys) == name
    assert texture.read(detail + rng.normal(0, 4, len(xs)), xs, ys) == texture.PLAIN
