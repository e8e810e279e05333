"""Depth relations in the embedded world (issue 19, "behind" / "in front of"): read by the
simulator's reader, drawn as occlusion + scale by the generator, separated and ordered by the
inspector, flipped sometimes by the internal detector, planned by the layout planner, and
left ``uncertain`` by a box-only detector backend — GenEval's prompts take none of it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness.evidence import EvidenceStatus
from evoharness.program import Program
from evoharness.runtime.layout import plan_layout
from evoharness.sim import SimGenerator, SimInspector
from evoharness.sim.detector import DetectorParams, perturb_scene
from evoharness.sim.generator import DEPTH_OCCLUSION, DEPTH_SCALE
from evoharness.sim.inspector import Detection, Scene
from evoharness.sim.profiles import load_profile
from evoharness.sim.reader import read_prompt
from evoharness.tasks.models import Constraint, ConstraintType
from services.verification.backends.base import ScoreThresholds
from services.verification.backends.owlv2 import Detection as OwlDetection
from services.verification.backends.owlv2 import judge as owl_judge
from services.verification.backends.vlm import question

PARAMS = {"steps": 30, "guidance_scale": 5.0, "width": 512, "height": 512}
PAIRS = [("cat", "dog"), ("pizza", "umbrella"), ("cup", "bicycle"), ("apple", "backpack")]


def _pos(subject: str, relation: str, value: str, cid: str = "p") -> Constraint:
    return Constraint(
        constraint_id=cid,
        type=ConstraintType.position,
        subject=subject,
        relation=relation,
        value=value,
    )


def _gen(**rates: float) -> SimGenerator:
    return SimGenerator(load_profile("sdxl-like").model_copy(update=rates))


@pytest.fixture(scope="module")
def inspector() -> SimInspector:
    return SimInspector(ocr=False)


def _area(b: list[float]) -> float:
    return (b[2] - b[0]) * (b[3] - b[1])


def _inter(a: list[float], b: list[float]) -> float:
    ix = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    iy = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    return ix * iy


# ---------------------------------------------------------------------------- reader
@pytest.mark.parametrize(
    ("prompt", "relation"),
    [
        ("a cat behind a dog", "behind"),
        ("a cat hidden by a dog", "behind"),
        ("a red cup partially hidden by a blue bench", "behind"),
        ("a cat in front of a dog", "in front of"),
        ("a cat to the left of a dog", "left of"),
    ],
)
def test_reader_reads_depth_words(prompt: str, relation: str) -> None:
    r = read_prompt(prompt)
    assert [(x.subject, x.relation, x.target) for x in r.relations] == [(0, relation, 1)]
    assert len(r.objects) == 2


def test_reader_leaves_background_scenes_alone() -> None:
    assert read_prompt("a dog in the background of a park").relations == []


def test_no_geneval_prompt_has_a_depth_relation(shared_dir: Path) -> None:
    rows = (shared_dir / "data" / "geneval" / "evaluation_metadata.jsonl").read_text()
    prompts = [json.loads(x)["prompt"] for x in rows.splitlines() if x.strip()]
    assert len(prompts) == 553
    rels = {r.relation for p in prompts for r in read_prompt(p).relations}
    assert rels <= {"left of", "right of", "above", "below"} and rels


# ---------------------------------------------------------------------------- generator
def test_honoured_depth_draws_back_first_smaller_and_overlapped() -> None:
    gen = _gen(relation_honoured=1.0, composition_default=0.0)  # unhonoured: apart
    drawn = 0
    for seed in range(12):
        for back, front, prompt in (
            ("cat", "dog", "a photo of a cat behind a dog"),
            ("dog", "cat", "a photo of a cat in front of a dog"),
        ):
            objs = gen.generate(Program(prompt=prompt, seed=seed, params=PARAMS)).manifest[
                "objects"
            ]
            pair = [o for o in objs if "in_front_of" in o]
            if not pair:
                continue
            f = pair[0]
            b = objs[f["in_front_of"]]
            assert (b["class"], f["class"]) == (back, front)
            assert objs.index(b) < objs.index(f)  # painted first: the front one is on top
            cover = _inter(b["box"], f["box"]) / _area(b["box"])
            assert DEPTH_OCCLUSION[0] - 0.08 <= cover <= DEPTH_OCCLUSION[1] + 0.08, cover
            assert f["box"][3] > b["box"][3]  # the front one reaches lower
            long_b = max(b["box"][2] - b["box"][0], b["box"][3] - b["box"][1])
            long_f = max(f["box"][2] - f["box"][0], f["box"][3] - f["box"][1])
            assert abs(long_b / long_f - DEPTH_SCALE) < 0.05, (long_b, long_f)
            drawn += 1
    assert drawn >= 14  # of 24: f >= 1 and a full frame let some pairs fall apart


def test_unhonoured_depth_is_swapped_or_apart() -> None:
    prompt = "a photo of a cat behind a dog"
    swapped = _gen(relation_honoured=0.0, composition_default=1.0, composition_swap=1.0)
    apart = _gen(relation_honoured=0.0, composition_default=0.0)
    n_swapped = 0
    for seed in range(10):
        objs = swapped.generate(Program(prompt=prompt, seed=seed, params=PARAMS)).manifest[
            "objects"
        ]
        for o in objs:
            if "in_front_of" in o:
                assert (o["class"], objs[o["in_front_of"]]["class"]) == ("cat", "dog")
                n_swapped += 1
        objs = apart.generate(Program(prompt=prompt, seed=seed, params=PARAMS)).manifest["objects"]
        assert all("in_front_of" not in o for o in objs)
        if len(objs) == 2:
            assert _inter(objs[0]["box"], objs[1]["box"]) == 0.0
    assert n_swapped >= 7


def test_depth_draws_leave_other_relations_unchanged() -> None:
    """Depth draws are keyed anew: a left-of prompt renders the same bytes whatever the
    depth numbers' thresholds are."""
    prompt = "a photo of a cat left of a dog"
    a = _gen().generate(Program(prompt=prompt, seed=3, params=PARAMS))
    b = _gen(composition_default=0.45).generate(Program(prompt=prompt, seed=3, params=PARAMS))
    assert a.png == b.png


# ---------------------------------------------------------------------------- inspector
@pytest.mark.parametrize(
    ("back", "front"),
    # the first pair in the default run, the rest with the slow tests (about 15 s each)
    [PAIRS[0], *(pytest.param(*p, marks=pytest.mark.slow) for p in PAIRS[1:])],
)
def test_inspector_separates_overlapping_stickers_and_reads_the_order(
    inspector: SimInspector, back: str, front: str
) -> None:
    gen = _gen(relation_honoured=1.0, composition_default=0.0)  # unhonoured: apart
    checked = right = misread = 0
    for seed in range(8):
        img = gen.generate(
            Program(prompt=f"a photo of a {back} behind a {front}", seed=seed, params=PARAMS)
        )
        objs = img.manifest["objects"]
        if not any("in_front_of" in o for o in objs):
            continue
        checked += 1
        behind, ahead = inspector.verify(
            img, [_pos(back, "behind", front, "b"), _pos(front, "in front of", back, "f")]
        )
        scene = inspector.inspect(img.png, read_text=False)
        classes = sorted(d.cls for d in scene.detections)
        if classes == sorted([back, front]) and behind.status is EvidenceStatus.passed:
            assert ahead.status is EvidenceStatus.passed
            occluded = [d for d in scene.detections if d.occluders]
            assert [d.cls for d in occluded] == [back]
            right += 1
        # the opposite relation is (almost) never read from an honoured picture
        wrong = inspector.verify(img, [_pos(back, "in front of", front)])[0]
        misread += wrong.status is EvidenceStatus.passed
    assert checked >= 4
    assert right >= checked - 2, (right, checked)
    assert misread <= 1, misread


def test_depth_verdict_fails_without_occlusion(inspector: SimInspector) -> None:
    img = _gen(relation_honoured=0.0, composition_default=0.0).generate(
        Program(prompt="a photo of a cat behind a dog", seed=1, params=PARAMS)
    )
    ev = inspector.verify(img, [_pos("cat", "behind", "dog")])[0]
    assert ev.status is EvidenceStatus.failed
    assert "occlude" in ev.note or "no " in ev.note


def test_depth_verdict_from_a_scene() -> None:
    back = Detection("cat", (0.1, 0.1, 0.3, 0.3), "red", 10.0, 0.8, ident=1, occluders=(0,))
    front = Detection("dog", (0.2, 0.2, 0.5, 0.5), "red", 5.0, 0.9, ident=0)
    scene = Scene(detections=[front, back])
    ins = SimInspector.__new__(SimInspector)
    assert ins.judge(_pos("cat", "behind", "dog"), scene).status is EvidenceStatus.passed
    assert ins.judge(_pos("dog", "in front of", "cat"), scene).status is EvidenceStatus.passed
    assert ins.judge(_pos("dog", "behind", "cat"), scene).status is EvidenceStatus.failed
    ev = ins.judge(_pos("cat", "behind", "bird"), scene)
    assert ev.status is EvidenceStatus.failed and ev.note == "no bird detected"


# ---------------------------------------------------------------------------- detector
def test_detector_flips_depth_order_with_its_rate() -> None:
    back = Detection("cat", (0.1, 0.1, 0.3, 0.3), "red", 10.0, 0.8, ident=1, occluders=(0,))
    front = Detection("dog", (0.2, 0.2, 0.5, 0.5), "red", 5.0, 0.9, ident=0)
    scene = Scene(detections=[front, back])
    ins = SimInspector.__new__(SimInspector)
    c = _pos("cat", "behind", "dog")
    quiet = DetectorParams(miss_small=0, miss_medium=0, miss_large=0, box_jitter=0)
    for digest in ("a", "b", "c"):
        kept = perturb_scene(scene, digest, quiet.model_copy(update={"depth_flip": 0.0}))
        assert ins.judge(c, kept).status is EvidenceStatus.passed
        flipped = perturb_scene(scene, digest, quiet.model_copy(update={"depth_flip": 1.0}))
        assert ins.judge(c, flipped).status is EvidenceStatus.failed
        assert ins.judge(_pos("dog", "behind", "cat"), flipped).status is EvidenceStatus.passed
    n = sum(
        ins.judge(c, perturb_scene(scene, f"d{i}", quiet)).status is EvidenceStatus.failed
        for i in range(400)
    )
    assert 20 <= n <= 65  # depth_flip 0.10 of 400: 40 expected


# ---------------------------------------------------------------------------- layout
@pytest.mark.parametrize("relation", ["behind", "in front of"])
def test_layout_planner_overlaps_a_depth_pair_back_to_front(relation: str) -> None:
    cs = [
        Constraint(constraint_id="a", type=ConstraintType.object, subject="cat"),
        Constraint(constraint_id="b", type=ConstraintType.object, subject="dog"),
        _pos("cat", relation, "dog"),
    ]
    items, details = plan_layout(cs)
    back, front = ("cat", "dog") if relation == "behind" else ("dog", "cat")
    assert [i.label for i in items] == [back, front]  # listed back to front
    b, f = list(items[0].box), list(items[1].box)
    assert _area(b) < _area(f) and b[1] < f[1]  # smaller and higher
    cover = _inter(b, f) / _area(b)
    assert 0.25 <= cover <= 0.5
    iou = _inter(b, f) / (_area(b) + _area(f) - _inter(b, f))
    assert iou < 0.3  # under the generators' merge threshold for overlapping boxes
    assert details["depth_pairs"] == [
        {"back": 0 if back == "cat" else 1, "front": 1 if back == "cat" else 0}
    ]


def test_layout_pair_is_drawn_in_depth_order(inspector: SimInspector) -> None:
    cs = [
        Constraint(constraint_id="a", type=ConstraintType.object, subject="cat"),
        Constraint(constraint_id="b", type=ConstraintType.object, subject="dog"),
        _pos("cat", "in front of", "dog"),
    ]
    items, _ = plan_layout(cs)
    gen = SimGenerator()
    overlapping = 0
    for seed in range(8):
        img = gen.generate(
            Program(
                prompt="a photo of a cat in front of a dog", seed=seed, params=PARAMS, layout=items
            )
        )
        objs = img.manifest["objects"]
        if len(objs) == 2 and _inter(objs[0]["box"], objs[1]["box"]) > 0:
            # both landed in their boxes: drawn back (dog) first, the cat over it
            assert [o["class"] for o in objs] == ["dog", "cat"]
            assert inspector.verify(img, [cs[2]])[0].status is EvidenceStatus.passed
            overlapping += 1
    assert overlapping >= 2


# ---------------------------------------------------------------------------- backends
def test_box_detector_backend_is_uncertain_about_depth() -> None:
    th = ScoreThresholds()
    dets = {
        "cat": [OwlDetection(0.9, (0.1, 0.1, 0.3, 0.3))],
        "dog": [OwlDetection(0.9, (0.2, 0.2, 0.5, 0.5))],
    }
    ev = owl_judge(_pos("cat", "behind", "dog"), dets, th)
    assert ev.status is EvidenceStatus.uncertain and "depth" in ev.note
    ev = owl_judge(_pos("cat", "behind", "bird"), dets, th)
    assert ev.status is EvidenceStatus.failed
    apart = {**dets, "dog": [OwlDetection(0.9, (0.6, 0.1, 0.8, 0.3))]}
    assert owl_judge(_pos("cat", "left of", "dog"), apart, th).status is EvidenceStatus.passed
    assert question(_pos("cat", "behind", "dog")) == "Is the cat behind the dog in the image?"
