"""The world's vocabulary beyond GenEval's 80 (issue 19): one class table, one synonym table,
read alike by the simulator's reader, the rule extractor and the open reading; every class
has committed pictures; the simulator draws a new class and the inspector sees it."""

from __future__ import annotations

import unicodedata

import pytest

from evoharness.program import Program
from evoharness.runtime.extract import RuleExtractor
from evoharness.runtime.reading import read_open
from evoharness.sim import SimGenerator, SimInspector
from evoharness.sim.build_assets import EMOJI, ICONS
from evoharness.sim.library import ASSET_DIR, slug, sticker
from evoharness.sim.reader import read_prompt
from evoharness.tasks.models import ConstraintType
from evoharness.vocab import (
    CLASSES,
    EXTRA_CLASSES,
    EXTRA_GLYPHS,
    SYNONYMS,
    WORLD_CLASSES,
    class_of,
    plural,
)


def test_world_has_300_classes_coco_first_and_each_has_its_pictures() -> None:
    assert len(CLASSES) == 80
    assert len(WORLD_CLASSES) >= 300
    assert WORLD_CLASSES[:80] == CLASSES
    assert len(set(WORLD_CLASSES)) == len(WORLD_CLASSES)
    for c in WORLD_CLASSES:
        assert (ASSET_DIR / f"{slug(c)}.png").is_file(), c
        assert (ASSET_DIR / f"{slug(c)}_body.png").is_file(), c
        assert c in EMOJI or c in EXTRA_GLYPHS or c in ICONS, c
    for c in EXTRA_CLASSES:
        assert len(unicodedata.lookup(EXTRA_GLYPHS[c])) == 1, c


def test_synonyms_and_plurals_name_one_class() -> None:
    assert class_of("women") == "person"
    assert class_of("Television") == "tv"
    assert class_of("strawberries") == "strawberry"
    assert class_of("teeth") == "tooth"
    assert class_of("glasses") == "glasses"  # a plurale tantum is its own class
    assert class_of("persons") == "person"  # GenEval's naive plural still reads
    assert class_of("unobtainium") is None
    for word, cls in SYNONYMS.items():
        assert class_of(word) == cls
        assert class_of(plural(word)) == cls, word
    for c in EXTRA_CLASSES:
        assert class_of(plural(c)) == c, c


def test_reader_extractor_and_open_reading_share_the_table() -> None:
    prompt = "a photo of two penguins left of a red guitar. three women"
    r = read_prompt(prompt)
    assert [(o.cls, o.count, o.colors) for o in r.objects] == [
        ("penguin", 2, []),
        ("guitar", 1, ["red"]),
        ("person", 3, []),
    ]
    cons = RuleExtractor().extract(prompt)
    got = {(c.type, c.subject, str(c.value)) for c in cons}
    assert (ConstraintType.count, "penguin", "2") in got
    assert (ConstraintType.color, "guitar", "red") in got
    assert (ConstraintType.count, "person", "3") in got
    assert any(c.type is ConstraintType.position and c.relation == "left of" for c in cons)
    classes = {o.cls for o in read_open(prompt).objects}
    assert {"penguin", "guitar", "person"} <= classes


def test_longest_name_wins_so_geneval_names_keep_their_reading() -> None:
    for prompt, cls in [
        ("a photo of a fire hydrant", "fire hydrant"),
        ("a photo of a computer mouse", "computer mouse"),
        ("a photo of a baseball bat", "baseball bat"),
        ("a photo of a toilet", "toilet"),
        ("a photo of a baby bottle", "baby bottle"),
    ]:
        assert [o.cls for o in read_prompt(prompt).objects] == [cls]


def test_unknown_class_and_colour_in_sticker_raise() -> None:
    with pytest.raises(KeyError, match="unobtainium"):
        sticker("unobtainium")
    assert sticker("penguin", "blue").body.any()


@pytest.fixture(scope="module")
def inspector() -> SimInspector:
    return SimInspector(ocr=False)


@pytest.mark.parametrize("seed", range(4))
def test_new_classes_are_drawn_and_seen(inspector: SimInspector, seed: int) -> None:
    """What the simulator drew of new classes (its manifest) is what the inspector sees."""
    gen = SimGenerator()
    prompt = "a photo of a blue guitar. two penguins. a yellow violin. a strawberry"
    img = gen.generate(Program(prompt=prompt, seed=seed))
    drawn = sorted((o["class"], o["color"] or "") for o in img.manifest["objects"])
    assert drawn, "the simulator drew nothing"
    scene = inspector.inspect(img.png, read_text=False)
    seen = sorted(d.cls for d in scene.detections)
    assert seen == sorted(c for c, _ in drawn)
    for d in scene.detections:
        colours = {col for c, col in drawn if c == d.cls and col}
        if colours:
            assert d.color in colours


def test_inspector_says_uncertain_for_a_class_it_cannot_see(inspector: SimInspector) -> None:
    """An object outside the world's vocabulary is never a silent pass or fail."""
    from evoharness.evidence import EvidenceStatus
    from evoharness.tasks.models import Constraint

    img = SimGenerator().generate(Program(prompt="a photo of a cat", seed=0))
    cs = [
        Constraint(constraint_id="a", type="object", subject="bagpipe"),
        Constraint(constraint_id="b", type="negative", subject="bagpipe"),
        Constraint(
            constraint_id="c", type="position", subject="cat", relation="above", value="bagpipe"
        ),
        Constraint(constraint_id="d", type="object", subject="cat"),
    ]
    got = [e.status for e in inspector.verify(img, cs)]
    U = EvidenceStatus.uncertain
    assert got[:3] == [U, U, U]
    assert got[3] is not U
