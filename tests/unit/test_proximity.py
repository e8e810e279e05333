"""Proximity relations ("next to", "near"; issue 19): T2I-CompBench's rule
(``evoharness.tasks.proximity``), read by the simulator's reader, drawn by the generator
(close when honoured, apart when not), judged by the exact inspector and the internal
``SimDetector``, planned by the layout planner, and judged by the OWLv2 backend — and
GenEval's prompts take none of the new paths."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.evidence import EvidenceStatus
from evoharness.program import Program
from evoharness.runtime.layout import plan_layout
from evoharness.runtime.reading import RELATION_PHRASES, read_open
from evoharness.sim import SimDetector, SimGenerator, SimInspector
from evoharness.sim.detector import DetectorParams, perturb_scene
from evoharness.sim.generator import Draws
from evoharness.sim.inspector import Detection, Scene
from evoharness.sim.profiles import load_profile
from evoharness.sim.reader import read_prompt
from evoharness.tasks.models import PROXIMITY_RELATIONS, Constraint
from evoharness.tasks.proximity import PROXIMITY_THRESHOLD, proximity
from services.verification.backends.base import ScoreThresholds
from services.verification.backends.owlv2 import Detection as OwlDetection
from services.verification.backends.owlv2 import judge as owl_judge

PARAMS = {"steps": 30, "guidance_scale": 7.5, "width": 512, "height": 512}


def _box(cx: float, cy: float, half: float = 0.05) -> tuple[float, float, float, float]:
    return (cx - half, cy - half, cx + half, cy + half)


def _near(subject: str, value: str, relation: str = "next to", cid: str = "p") -> Constraint:
    return Constraint(
        constraint_id=cid, type="position", subject=subject, relation=relation, value=value
    )


# ---------------------------------------------------------------- the rule


def test_threshold_is_150_px_of_t2icompbench_479_px_detector_frame() -> None:
    assert PROXIMITY_THRESHOLD == pytest.approx(150 / 479)
    # 149 px / 151 px apart on both axes in T2I-CompBench's frame
    f = 479.0
    assert proximity(_box(100 / f, 100 / f), _box(249 / f, 249 / f)).holds
    assert not proximity(_box(100 / f, 100 / f), _box(251 / f, 251 / f)).holds


@pytest.mark.parametrize(
    ("dx", "dy", "holds"),
    [
        (PROXIMITY_THRESHOLD - 0.002, 0.8, True),  # close across, far down
        (0.8, PROXIMITY_THRESHOLD - 0.002, True),  # close down, far across
        (PROXIMITY_THRESHOLD + 0.002, PROXIMITY_THRESHOLD + 0.002, False),
        (0.9, 0.0, True),  # one row at opposite edges: lenient as published
        (0.5, 0.5, False),
    ],
)
def test_rule_edges(dx: float, dy: float, holds: bool) -> None:
    a, b = _box(0.05, 0.05, 0.04), _box(0.05 + dx, 0.05 + dy, 0.04)
    p = proximity(a, b)
    assert p.holds is holds
    assert proximity(b, a) == p  # symmetric
    assert p.dx == pytest.approx(dx) and p.dy == pytest.approx(dy)
    if holds:
        assert p.score == 1.0
    else:
        assert p.score == pytest.approx(PROXIMITY_THRESHOLD / max(dx, dy))
        assert p.score < 1.0


def test_rule_rejects_bad_input() -> None:
    with pytest.raises(ValueError, match="4 numbers"):
        proximity((0.1, 0.1, 0.2), (0.1, 0.1, 0.2, 0.2))
    with pytest.raises(ValueError, match="positive"):
        proximity(_box(0.2, 0.2), _box(0.3, 0.3), threshold=0.0)


# ---------------------------------------------------------------- the reader


@pytest.mark.parametrize(
    ("phrase", "relation"),
    [
        ("next to", "next to"),
        ("beside", "next to"),
        ("on side of", "next to"),
        ("on the side of", "next to"),
        ("by the side of", "next to"),
        ("near", "near"),
        ("close to", "near"),
    ],
)
def test_reader_reads_proximity_phrases_as_the_open_reading_does(
    phrase: str, relation: str
) -> None:
    prompt = f"a photo of a red cat {phrase} two dogs"
    r = read_prompt(prompt)
    assert [
        (r.objects[x.subject].cls, x.relation, r.objects[x.target].cls) for x in r.relations
    ] == [("cat", relation, "dog")]
    assert RELATION_PHRASES[tuple(phrase.split())] == relation
    assert [x.relation for x in read_open(prompt).relations] == [relation]
    assert relation in PROXIMITY_RELATIONS


def test_no_geneval_prompt_reads_a_proximity_relation(shared_dir: Path) -> None:
    """So the generator draws nothing new on GenEval (its renders stay byte-identical:
    ``test_sim_attributes.py``'s golden hashes)."""
    rows = (shared_dir / "data" / "geneval" / "evaluation_metadata.jsonl").read_text()
    prompts = [json.loads(x)["prompt"] for x in rows.splitlines() if x.strip()]
    assert len(prompts) == 553
    rels = {r.relation for p in prompts for r in read_prompt(p).relations}
    assert rels and not rels & set(PROXIMITY_RELATIONS)


# ---------------------------------------------------------------- generator and inspector


def _honoured(profile, prompt: str, seed: int) -> bool:
    """Whether the generator's keyed draw honours the prompt's one proximity relation."""
    r = read_prompt(prompt)
    (rel,) = r.relations
    key = lambda i: (r.objects[i].cls, 0)  # noqa: E731 (first occurrence of each class)
    f = profile.adherence(PARAMS["guidance_scale"], PARAMS["steps"])
    return Draws(profile.profile, seed).u("proximity", key(rel.subject), key(rel.target)) < (
        profile.relation_honoured / f
    )


@pytest.mark.parametrize(
    ("prompt", "a", "b", "relation"),
    [
        ("a photo of a cat next to a dog", "cat", "dog", "next to"),
        ("a photo of a red apple near a blue cup", "apple", "cup", "near"),
    ],
)
def test_generator_places_close_when_honoured_apart_when_not(
    prompt: str, a: str, b: str, relation: str
) -> None:
    profile = load_profile("sdxl-like").model_copy(update={"relation_honoured": 0.5})
    gen = SimGenerator(profile)
    inspector = SimInspector(ocr=False)
    seen = {True: 0, False: 0}
    for seed in range(30):
        img = gen.generate(Program(prompt=prompt, params=PARAMS, seed=seed))
        sa = [o for o in img.manifest["objects"] if o["class"] == a]
        sb = [o for o in img.manifest["objects"] if o["class"] == b]
        if not sa or not sb:
            continue  # a missed object (the profile's miss rate)
        honoured = _honoured(profile, prompt, seed)
        drawn = proximity(sa[0]["box"], sb[0]["box"])
        assert drawn.holds is honoured, (seed, drawn)
        if not honoured:  # far apart: beyond the rule on both axes
            assert min(drawn.dx, drawn.dy) > PROXIMITY_THRESHOLD + 0.02
        if seen[honoured] < 3:  # the inspector agrees, from the pixels
            ev = inspector.verify(img.png, [_near(a, b, relation)])[0]
            assert ev.passed is honoured, (seed, ev.note)
            assert f"{PROXIMITY_THRESHOLD:.3f}" in ev.note
            assert ev.observed[0]["threshold"] == pytest.approx(PROXIMITY_THRESHOLD, abs=1e-4)
        seen[honoured] += 1
    assert seen[True] >= 3 and seen[False] >= 3


def test_default_profile_honours_proximity_at_its_relation_rate() -> None:
    """The real profile's rate: relation_honoured / f of the pairs are drawn close."""
    profile = load_profile("sdxl-like")
    gen = SimGenerator(profile)
    prompt = "a photo of a cat next to a dog"
    close = n = 0
    for seed in range(60):
        img = gen.generate(Program(prompt=prompt, params=PARAMS, seed=seed))
        sa = [o for o in img.manifest["objects"] if o["class"] == "cat"]
        sb = [o for o in img.manifest["objects"] if o["class"] == "dog"]
        if sa and sb:
            n += 1
            holds = proximity(sa[0]["box"], sb[0]["box"]).holds
            assert holds is _honoured(profile, prompt, seed)
            close += holds
    assert n >= 30 and close <= n // 4  # sdxl-like honours 8 % / f


def test_inspector_judges_proximity_from_boxes() -> None:
    inspector = SimInspector(ocr=False)
    det = lambda cls, cx, cy: Detection(cls, _box(cx, cy, 0.08), "red", 10.0, 0.9)  # noqa: E731
    same_row = Scene(detections=[det("cat", 0.1, 0.5), det("dog", 0.9, 0.55)])
    diagonal = Scene(detections=[det("cat", 0.15, 0.15), det("dog", 0.85, 0.85)])
    assert inspector.judge(_near("cat", "dog"), same_row).status is EvidenceStatus.passed
    ev = inspector.judge(_near("cat", "dog", "near"), diagonal)
    assert ev.status is EvidenceStatus.failed
    assert "0.700 apart across" in ev.note and "0.313" in ev.note
    missing = inspector.judge(_near("cat", "bird"), same_row)
    assert missing.status is EvidenceStatus.failed and "no bird" in missing.note
    # k = min_count subject boxes must all be close to the target
    two = _near("cat", "dog").model_copy(update={"min_count": 2})
    mixed = Scene(detections=[det("cat", 0.1, 0.5), det("cat", 0.45, 0.1), det("dog", 0.6, 0.5)])
    assert inspector.judge(two, mixed).status is EvidenceStatus.passed
    far = Scene(detections=[det("cat", 0.1, 0.5), det("cat", 0.1, 0.1), det("dog", 0.6, 0.9)])
    assert inspector.judge(two, far).status is EvidenceStatus.failed


def test_detector_jitter_flips_only_near_threshold_pairs() -> None:
    """SimDetector's box jitter acts on proximity as on GenEval's relations: a pair just
    inside the rule sometimes reads apart, a pair well inside it never does."""
    inspector = SimInspector(ocr=False)
    params = DetectorParams(miss_small=0, miss_medium=0, miss_large=0, box_jitter=0.2)
    det = lambda cls, cx, cy: Detection(cls, _box(cx, cy, 0.15), "red", 10.0, 0.9)  # noqa: E731
    edge = Scene(detections=[det("cat", 0.2, 0.2), det("dog", 0.2 + 0.31, 0.8)])
    inside = Scene(detections=[det("cat", 0.2, 0.2), det("dog", 0.3, 0.8)])
    c = _near("cat", "dog")
    edge_pass = sum(
        inspector.judge(c, perturb_scene(edge, f"{i:064x}", params)).passed for i in range(40)
    )
    inside_pass = sum(
        inspector.judge(c, perturb_scene(inside, f"{i:064x}", params)).passed for i in range(40)
    )
    assert 0 < edge_pass < 40
    assert inside_pass == 40
    still = DetectorParams(miss_small=0, miss_medium=0, miss_large=0, box_jitter=0.0)
    assert inspector.judge(c, perturb_scene(edge, "0" * 64, still)).passed


def test_sim_detector_verifies_proximity() -> None:
    gen = SimGenerator(load_profile("sdxl-like").model_copy(update={"relation_honoured": 1.0}))
    img = gen.generate(Program(prompt="a photo of a cat next to a dog", params=PARAMS, seed=3))
    ev = SimDetector(inspector=SimInspector(ocr=False)).verify(img.png, [_near("cat", "dog")])[0]
    assert ev.decided_by == "sim-detector"
    assert ev.status is not EvidenceStatus.uncertain and "T2I-CompBench" in ev.note


# ---------------------------------------------------------------- layout planner


def _objects(*classes: str) -> list[Constraint]:
    return [Constraint(constraint_id=f"o:{c}", type="object", subject=c) for c in classes]


@pytest.mark.parametrize(
    "relations",
    [
        [("cat", "next to", "dog")],
        [("cat", "near", "dog"), ("bird", "next to", "cat")],
        [("cat", "above", "car"), ("dog", "next to", "car")],
        [("cat", "left of", "dog"), ("dog", "near", "cat")],  # reversed: dog stays right
        [("car", "below", "cat"), ("dog", "next to", "car"), ("bird", "near", "cat")],
    ],
)
def test_layout_puts_proximity_pairs_side_by_side(relations: list[tuple[str, str, str]]) -> None:
    classes = list(dict.fromkeys(x for a, _, b in relations for x in (a, b)))
    cs = _objects(*classes) + [
        _near(a, b, rel, f"p{i}")
        if rel in PROXIMITY_RELATIONS
        else Constraint(constraint_id=f"p{i}", type="position", subject=a, relation=rel, value=b)
        for i, (a, rel, b) in enumerate(relations)
    ]
    items, details = plan_layout(cs)
    box = {i.label: i.box for i in items}
    assert details["dropped_relations"] == []
    for a, rel, b in relations:
        if rel in PROXIMITY_RELATIONS:
            p = proximity(box[a], box[b])
            assert p.holds and p.dy < 1e-9, (a, b, details)  # one row
            ka, kb = classes.index(a), classes.index(b)
            assert abs(details["columns"][ka] - details["columns"][kb]) == 1  # adjacent
    if ("cat", "left of", "dog") in relations:
        assert box["cat"][2] <= box["dog"][0]


def test_layout_keeps_a_stacked_proximity_pair_in_one_column() -> None:
    """ "cat above dog" and "cat next to dog": the above edge wins, and the two stay vertical
    neighbours in one column (close by the rule) rather than going diagonal."""
    cs = _objects("cat", "dog", "car") + [
        Constraint(
            constraint_id="a", type="position", subject="cat", relation="above", value="dog"
        ),
        _near("cat", "dog"),
        _near("car", "dog", "near", "q"),
    ]
    items, details = plan_layout(cs)
    box = {i.label: i.box for i in items}
    assert box["cat"][3] <= box["dog"][1]  # above
    assert proximity(box["cat"], box["dog"]).dx < 1e-9  # one column
    assert proximity(box["car"], box["dog"]).dy < 1e-9  # car beside dog, in dog's row
    assert details["dropped_relations"] == []
    # left of *and* above *and* next to: the directional edges win, the proximity is reported
    left = Constraint(
        constraint_id="l", type="position", subject="cat", relation="left of", value="dog"
    )
    _, details = plan_layout([*cs, left])
    assert {"axis": "x", "edge": [0, 1]} in details["dropped_relations"]


# ---------------------------------------------------------------- OWLv2 backend


def test_owlv2_judges_proximity_by_the_same_rule() -> None:
    th = ScoreThresholds()
    d = lambda s, cx, cy: [OwlDetection(s, _box(cx, cy, 0.1))]  # noqa: E731
    c = _near("dog", "cat", "near")
    ok = owl_judge(c, {"dog": d(0.9, 0.2, 0.5), "cat": d(0.9, 0.85, 0.5)}, th)
    assert ok.status is EvidenceStatus.passed and ok.observed["dy"] == 0.0
    apart = owl_judge(c, {"dog": d(0.9, 0.15, 0.15), "cat": d(0.9, 0.85, 0.85)}, th)
    assert apart.status is EvidenceStatus.failed
    assert apart.observed["threshold"] == pytest.approx(PROXIMITY_THRESHOLD, abs=1e-4)
    assert owl_judge(c, {"dog": d(0.9, 0.2, 0.5)}, th).status is EvidenceStatus.failed
    weak = owl_judge(c, {"dog": d(0.9, 0.2, 0.5), "cat": d(0.25, 0.3, 0.5)}, th)
    assert weak.status is EvidenceStatus.uncertain
