"""Reference-conditioned and multi-reference generation in the embedded world (issue 32):
the reader's reference mentions, the embedded reference library, subjects read from a
reference's pixels, the world's failure modes, the ``multiref`` tasks and the inspector's
per-reference verdicts on hand-built composites."""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from evoharness.agent.library import library_from_index
from evoharness.local_store import LocalArtifactStore
from evoharness.program import ImageRef, Program
from evoharness.runtime.runtime import task_references
from evoharness.sim import SimGenerator, SimInspector
from evoharness.sim import reference_library as rl
from evoharness.sim.profiles import DEFAULT_PROFILE, load_profile
from evoharness.sim.raster import paste_sticker
from evoharness.sim.reader import read_prompt
from evoharness.sim.subject import read_subject
from evoharness.tasks.builders import build_tasks
from evoharness.tasks.builders.multiref import build_multiref, constraints_for, prompt_for
from evoharness.tasks.models import Constraint

PROMPT3 = "the red cup from image 1, the striped yellow cat from image 2 and the blue car from image 3 on a table"
ENTRIES3 = [
    rl.LibraryEntry("cup", "red"),
    rl.LibraryEntry("cat", "yellow", "striped"),
    rl.LibraryEntry("car", "blue", None, "mirrored"),
]


@pytest.fixture(scope="module")
def inspector() -> SimInspector:
    return SimInspector(ocr=False)


@pytest.fixture(scope="module")
def lib(tmp_path_factory: pytest.TempPathFactory) -> tuple[LocalArtifactStore, Path, str]:
    root = tmp_path_factory.mktemp("reflib")
    store = LocalArtifactStore(root)
    return store, root, rl.build(store)


def _refs(root: Path, entries: list[rl.LibraryEntry]) -> list[ImageRef]:
    """Local-path refs of library entries (a SimGenerator without fetch reads them)."""
    return [ImageRef(key=str(root / e.key(rl.DEFAULT_PREFIX))) for e in entries]


# ------------------------------------------------------------------ reader
@pytest.mark.parametrize(
    ("prompt", "bound"),
    [
        ("the cup from image 1", {"cup": 1}),
        ("the cat in image 2 next to a dog", {"cat": 2, "dog": None}),
        ("image 3's car and a dog", {"car": 3, "dog": None}),
        ("the car (reference 2) on a table", {"car": 2, "dining table": None}),
        ("the cup from reference image 1 and the cat from image #2", {"cup": 1, "cat": 2}),
        ("a cup. image 2", {"cup": None}),  # another clause binds nothing
        (
            "a cup on a table with a dog from image two",
            {"cup": None, "dining table": None, "dog": 2},
        ),
    ],
)
def test_reader_binds_reference_mentions(prompt: str, bound: dict[str, int | None]) -> None:
    got = {o.cls: o.reference for o in read_prompt(prompt).objects}
    assert got == bound


def test_a_mention_is_not_a_count() -> None:
    objs = read_prompt(PROMPT3).objects
    assert [(o.cls, o.count, o.reference) for o in objs] == [
        ("cup", 1, 1),
        ("cat", 1, 2),
        ("car", 1, 3),
        ("dining table", 1, None),
    ]
    assert objs[1].textures == ["striped"] and objs[1].colors == ["yellow"]


# ------------------------------------------------------------------ library
def test_library_index_is_read_by_the_agent_library(lib: tuple) -> None:
    store, _, key = lib
    assert key == f"{rl.DEFAULT_PREFIX}/index.json"
    doc = json.loads(store.get(key))
    assert len(doc["images"]) == len(list(rl.LibrarySpec().entries())) == 478
    captions = {i["caption"] for i in doc["images"]}
    assert {"a red cup", "a white cat", "a blue car, mirrored"} <= captions
    assert any(c.endswith(", turned on its side") for c in captions)
    assert any(c.startswith("a striped ") for c in captions)
    library = library_from_index(store, key)
    (hit,) = library.search("a red cup", 1)
    assert hit.caption == "a red cup" and hit.ref.key.endswith("cup-red-upright.png")
    assert rl.build(store) == key  # idempotent: kept as it is


def test_library_images_are_deterministic_and_plain() -> None:
    e = rl.LibraryEntry("cat", "yellow", "striped", "turned")
    a, b = rl.render(e), rl.render(e)
    assert a == b
    im = np.asarray(Image.open(io.BytesIO(a)))
    assert im.shape == (rl.SIDE, rl.SIDE, 3)
    assert tuple(im[0, 0]) == rl.BACKGROUND and tuple(im[-1, -1]) == rl.BACKGROUND


def test_library_spec_rejects_unknown_names() -> None:
    with pytest.raises(ValueError, match=r"LibrarySpec.classes: \['gryphon'\]"):
        rl.LibrarySpec(classes=("gryphon",))
    with pytest.raises(ValueError, match="LibrarySpec.textures"):
        rl.LibrarySpec(textures=("velvet",))


@pytest.mark.parametrize("entry", [*ENTRIES3, rl.LibraryEntry("dog", "pink", "spotted", "turned")])
def test_subject_read_from_the_pixels(entry: rl.LibraryEntry) -> None:
    sub = read_subject(Image.open(io.BytesIO(rl.render(entry))))
    assert sub is not None
    assert (sub.cls, sub.color, sub.texture) == (entry.cls, entry.color, entry.texture)


def test_a_blank_card_has_no_subject() -> None:
    assert read_subject(Image.new("RGB", (96, 96), (250, 250, 250))) is None


# ------------------------------------------------------------------ the world
def _gen(**over: float) -> SimGenerator:
    base = load_profile(DEFAULT_PROFILE)
    return SimGenerator(base.model_copy(update=over))


def _outcomes(root: Path, gen: SimGenerator, prompt: str, seed: int, entries=ENTRIES3) -> dict:
    out = gen.generate(Program(prompt=prompt, seed=seed, references=_refs(root, entries)))
    return out.manifest


def test_bound_objects_are_drawn_from_the_references(lib: tuple, inspector: SimInspector) -> None:
    _, root, _ = lib
    gen = _gen(ref_omit_base=0.0, ref_omit_per_ref=0.0, ref_duplicate=0.0, ref_glyph_beside=0.0)
    gen = SimGenerator(gen.params.model_copy(update={"ref_pasted": 0.0}))
    # the prompt says "red cup" etc., but a *green* cup reference wins: identity from pixels
    entries = [rl.LibraryEntry("cup", "green"), *ENTRIES3[1:]]
    out = gen.generate(Program(prompt=PROMPT3, seed=1, references=_refs(root, entries)))
    refs = [o for o in out.manifest["objects"] if o["source"] == "reference"]
    assert [(o["class"], o["color"], o.get("texture"), o["reference"]) for o in refs] == [
        ("cup", "green", None, 0),
        ("cat", "yellow", "striped", 1),
        ("car", "blue", None, 2),
    ]
    assert [r["outcome"] for r in out.manifest["reference_outcomes"]] == ["drawn"] * 3
    assert out.manifest["reference_outcomes"][2]["subject"]["pose"] == "mirrored"
    ev = inspector.verify(out.png, constraints_for(entries))
    assert [e.status.value for e in ev] == ["pass"] * len(ev), [e.note for e in ev]


@pytest.mark.parametrize(
    ("over", "flag"),
    [
        ({"ref_omit_base": 1.0, "ref_omit_cap": 1.0}, "omitted"),
        ({"ref_duplicate": 1.0}, "duplicated"),
        ({"ref_duplicate": 0.0, "ref_glyph_beside": 1.0}, "glyph_beside"),
        ({"ref_pasted": 1.0}, "pasted"),
    ],
)
def test_failure_modes(lib: tuple, over: dict, flag: str) -> None:
    _, root, _ = lib
    base = {"ref_omit_base": 0.0, "ref_omit_per_ref": 0.0, "ref_duplicate": 0.0}
    base |= {"ref_glyph_beside": 0.0, "ref_pasted": 0.0}
    m = _outcomes(root, _gen(**(base | over)), PROMPT3, 0)
    outs = m["reference_outcomes"]
    if flag == "omitted":
        assert [r["outcome"] for r in outs] == ["omitted"] * 3
        assert not [o for o in m["objects"] if o["source"] == "reference"]
    else:
        assert all(r[flag] for r in outs)
    if flag == "duplicated":
        assert len([o for o in m["objects"] if o["source"] == "reference"]) == 6
    if flag == "glyph_beside":  # the prompt's own glyphs, bound as the words bind them
        glyphs = {o["class"] for o in m["objects"] if o["source"] == "prompt"}
        assert {"cup", "cat", "car"} <= glyphs
    if flag == "pasted":
        assert all(o["pasted"] for o in m["objects"] if o["source"] == "reference")


def test_pasted_subjects_show_seams(lib: tuple, inspector: SimInspector) -> None:
    """The pasted look is what the quality score sees: seams 1.0 → 0.0 on seeds 0–1."""
    _, root, _ = lib
    q = Constraint(constraint_id="q", type="quality", subject="image", value=0.5)
    clean = {"ref_omit_base": 0.0, "ref_omit_per_ref": 0.0, "ref_duplicate": 0.0}
    clean |= {"ref_glyph_beside": 0.0}
    for pasted, status, seams in ((0.0, "pass", 1.0), (1.0, "fail", 0.0)):
        gen = _gen(**(clean | {"ref_pasted": pasted}))
        for seed in (0, 1):
            out = gen.generate(Program(prompt=PROMPT3, seed=seed, references=_refs(root, ENTRIES3)))
            (ev,) = inspector.verify(out.png, [q])
            assert (ev.status.value, ev.observed["seams"]) == (status, seams), ev.note


def test_unmentioned_references_are_mostly_ignored(lib: tuple) -> None:
    _, root, _ = lib
    refs = _refs(root, ENTRIES3[:1])
    ignored = 0
    for seed in range(12):
        out = _gen().generate(Program(prompt="a dog on a table", seed=seed, references=refs))
        (r,) = out.manifest["reference_outcomes"]
        assert r["phrase"] is None and r["outcome"] in ("ignored", "drawn", "omitted")
        ignored += r["outcome"] == "ignored"
    assert 6 <= ignored <= 12  # sdxl-like: 0.8


def test_omission_grows_with_the_number_of_references(lib: tuple) -> None:
    _, root, _ = lib
    entries = [ENTRIES3[0], ENTRIES3[1], ENTRIES3[2], rl.LibraryEntry("dog", "white")]
    rates = {}
    for n in (2, 4):
        prompt = prompt_for(entries[:n])
        omitted = 0
        for seed in range(40):
            m = _outcomes(
                root, _gen(ref_omit_base=0.1, ref_omit_per_ref=0.2), prompt, seed, entries[:n]
            )
            omitted += sum(r["outcome"] == "omitted" for r in m["reference_outcomes"])
        rates[n] = omitted / (40 * n)
    assert rates[4] > rates[2] + 0.15


def test_programs_without_references_draw_as_before() -> None:
    """No reference draw happens without references: the manifest has no outcomes, and a
    prompt that mentions "image 2" draws no more objects than its words name."""
    out = SimGenerator().generate(Program(prompt="the cup from image 2 on a table", seed=0))
    assert "reference_outcomes" not in out.manifest
    assert sorted(o["class"] for o in out.manifest["objects"]) in (
        ["cup", "dining table"],
        ["cup"],
        ["dining table"],
        [],
    )


# ------------------------------------------------------------------ tasks
def test_multiref_tasks(lib: tuple) -> None:
    tasks = build_multiref(seed=3, count=6)
    assert [t.task_family for t in tasks] == ["multiref_2", "multiref_3", "multiref_4"] * 2
    for t in tasks:
        refs = task_references(t)
        k = int(t.task_family[-1])
        assert len(refs) == k and all(r.key.startswith(rl.DEFAULT_PREFIX) for r in refs)
        for i in range(1, k + 1):
            assert f"from image {i}" in t.prompt
        counts = [c for c in t.constraints if c.type.value == "count"]
        assert len(counts) == k and all(c.min_count == c.max_count == 1 for c in counts)
        assert len({c.subject for c in counts}) == k  # distinct classes
    assert build_multiref(seed=3, count=6) == tasks
    assert [t.task_id for t in build_tasks("multiref", seed=3, count=3).tasks] == [
        "multiref/3/0",
        "multiref/3/1",
        "multiref/3/2",
    ]
    with pytest.raises(ValueError, match="refs: 12 is outside"):
        build_multiref(refs=(12,))


def test_prompt_and_constraints_of_three_references() -> None:
    assert prompt_for(ENTRIES3) == PROMPT3
    cs = constraints_for(ENTRIES3)
    assert [c.constraint_id for c in cs] == [
        "ref1-count",
        "ref1-color",
        "ref2-count",
        "ref2-color",
        "ref2-texture",
        "ref3-count",
        "ref3-color",
    ]


# ------------------------------------------------------------------ the inspector's verdicts
def _composite(stickers: list[tuple[str, str, str | None, tuple[int, int, int, int]]]) -> bytes:
    """A hand-built 512² picture: stickers pasted on a plain gradient, light noise."""
    img = Image.new("RGB", (512, 512))
    ramp = np.linspace(150, 200, 512, dtype=np.float32)
    bg = np.stack(
        [ramp[None, :].repeat(512, 0), ramp[:, None].repeat(512, 1), np.full((512, 512), 170)], -1
    )
    img = Image.fromarray(bg.astype(np.uint8), "RGB")
    for cls, color, texture, box in stickers:
        paste_sticker(img, cls, color, box, None, texture)
    noise = np.random.default_rng(0).normal(0, 2.0, (512, 512, 3))
    arr = np.clip(np.asarray(img).astype(np.float32) + noise, 0, 255).astype(np.uint8)
    buf = io.BytesIO()
    Image.fromarray(arr).save(buf, "PNG")
    return buf.getvalue()


CUP = ("cup", "red", None, (20, 40, 170, 190))
CAT = ("cat", "yellow", "striped", (190, 40, 340, 190))
CAR = ("car", "blue", None, (350, 60, 500, 210))


@pytest.mark.parametrize(
    ("stickers", "failing"),
    [
        ([CUP, CAT, CAR], []),
        ([CUP, CAT], ["ref3-count", "ref3-color"]),  # omitted
        ([CUP, CAT, CAR, ("car", "blue", None, (300, 300, 450, 450))], ["ref3-count"]),  # twice
        ([CUP, ("cat", "green", "striped", CAT[3]), CAR], ["ref2-color"]),  # recoloured
        ([CUP, ("cat", "yellow", None, CAT[3]), CAR], ["ref2-texture"]),  # texture lost
    ],
    ids=["correct", "omitted", "duplicated", "recoloured", "untextured"],
)
def test_inspector_checks_each_reference(
    inspector: SimInspector, stickers: list, failing: list[str]
) -> None:
    ev = inspector.verify(_composite(stickers), constraints_for(ENTRIES3))
    got = [e.constraint_id for e in ev if e.status.value != "pass"]
    assert got == failing, [(e.constraint_id, e.status.value, e.note) for e in ev]


def test_oversized_and_unreadable_references_are_refused(
    lib: tuple, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A reference over ``MAX_REFERENCE_PIXELS`` is refused before it is decoded, naming
    the reference, its size and the limit; a file that is not an image says so without
    Python object reprs."""
    from evoharness.sim import generator as sim_generator

    _, root, _ = lib
    gen = _gen()
    monkeypatch.setattr(sim_generator, "MAX_REFERENCE_PIXELS", 100 * 100)
    with pytest.raises(ValueError, match=r"references\[0\] \(.*\): 128×128 px is over the limit"):
        _outcomes(root, gen, "the cup from image 1", 0, ENTRIES3[:1])
    monkeypatch.undo()
    text = tmp_path / "notes.png"
    text.write_text("not an image")
    prog = Program(prompt="the cup from image 1", seed=0, references=[ImageRef(key=str(text))])
    with pytest.raises(ValueError) as exc:
        gen.generate(prog)
    msg = str(exc.value)
    assert msg.startswith(f"references[0] ({text}): not a readable image") and "0x" not in msg


def test_large_references_are_read_at_the_encoder_side(tmp_path: Path) -> None:
    """A 1024 px reference is shrunk to ``REFERENCE_SIDE`` before it is read (in seconds, not
    the minutes a full-size read took): its class and colour are read as from the 128 px
    library image (the world's texture reader is tuned to the library's scale: a stripe
    rendered at 1024 px and shrunk is not read as striped at any side tried, 128–512)."""
    from evoharness.sim.generator import REFERENCE_SIDE

    entry = ENTRIES3[1]  # the striped yellow cat
    big = tmp_path / "big.png"
    big.write_bytes(rl.render(entry, side=1024))
    assert REFERENCE_SIDE < 1024
    out = _gen(ref_omit_base=0.0, ref_omit_per_ref=0.0, ref_duplicate=0.0).generate(
        Program(prompt="the cat from image 1", seed=0, references=[ImageRef(key=str(big))])
    )
    [o] = out.manifest["reference_outcomes"]
    sub = o["subject"]
    assert (sub["class"], sub["color"]) == ("cat", "yellow")
