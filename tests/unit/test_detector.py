"""``SimDetector``, evolution's internal verifier: its error rates measured on generated
images are near the documented rates (binomial tests with enough samples, not exact numbers),
verdicts are a function of the image bytes only, and it is the evolution default."""

from __future__ import annotations

import hashlib

import pytest
from scipy.stats import binomtest

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.program import Program
from evoharness.sim import SimDetector, SimGenerator, SimInspector
from evoharness.sim.detector import (
    HUE_NEIGHBOURS,
    MEDIUM_AREA,
    SMALL_AREA,
    DetectorParams,
    perturb_scene,
)
from evoharness.sim.inspector import Detection, Scene
from evoharness.tasks.models import Constraint
from evoharness.vocab import CLASSES

ALPHA = 1e-3  # each rate test: a documented rate this far off would pass once in 1,000 draws
COLOURED = ("red", "orange", "yellow", "green", "blue", "purple", "pink", "brown")


def _near(k: int, n: int, p: float) -> None:
    assert n >= 80, f"only {n} samples"
    assert binomtest(k, n, p).pvalue > ALPHA, f"{k}/{n} = {k / n:.3f}, documented {p}"


@pytest.fixture(scope="module")
def inspector() -> SimInspector:
    return SimInspector(ocr=False)


@pytest.fixture(scope="module")
def scenes(inspector: SimInspector) -> list[tuple[str, Scene]]:
    """(sha256, exact scene) of 160 generated images: coloured objects, pairs, groups."""
    gen = SimGenerator()
    out = []
    for seed in range(160):
        a, b = CLASSES[(7 * seed) % 80], CLASSES[(7 * seed + 31) % 80]
        col = COLOURED[seed % len(COLOURED)]
        prompt = (
            f"a photo of a {col} {a}",
            f"a photo of a {a} and a {b}",
            f"a photo of six {a}s",
            f"a photo of a {col} {a} and a {COLOURED[(seed + 3) % 8]} {b}",
        )[seed % 4]
        png = gen.generate(Program(prompt=prompt, seed=seed)).png
        out.append((hashlib.sha256(png).hexdigest(), inspector.inspect(png, read_text=False)))
    return out


def test_recall_by_size_and_crowding_matches_the_documented_rates(
    scenes: list[tuple[str, Scene]],
) -> None:
    p = DetectorParams()
    # generated images: every detection's miss is drawn at the documented rate for its size
    by_bucket: dict[str, list[int]] = {"medium": [0, 0], "large": [0, 0]}
    for sha, scene in scenes:
        if len(scene.detections) > p.crowd_start:
            continue
        seen = perturb_scene(scene, sha, p.model_copy(update={"box_jitter": 0.0}))
        kept = {(d.cls, d.box) for d in seen.detections}
        for d in scene.detections:
            area = (d.box[2] - d.box[0]) * (d.box[3] - d.box[1])
            if area < SMALL_AREA:
                continue
            b = by_bucket["medium" if area < MEDIUM_AREA else "large"]
            b[0] += (d.cls, d.box) not in kept
            b[1] += 1
    _near(*by_bucket["large"], p.miss_large)
    _near(*by_bucket["medium"], p.miss_medium)
    # small objects and crowded scenes (the simulator rarely draws them): synthetic scenes
    no_drift = p.model_copy(update={"count_drift": 0.0})
    small, crowd = [0, 0], [0, 0]
    for i in range(400):
        dets = [
            Detection("cat", (0.1 * k, 0.1, 0.1 * k + 0.04, 0.14), "red", 10.0, 0.9)
            for k in range(2)
        ]
        out = perturb_scene(Scene(detections=dets), f"small-{i}", p)
        small[0] += 2 - len(out.detections)
        small[1] += 2
        many = [  # 8 large objects (0.1 × 0.4 of the image each)
            Detection("dog", (0.12 * k, 0.5, 0.12 * k + 0.1, 0.9), "red", 10.0, 0.9)
            for k in range(8)
        ]
        out = perturb_scene(Scene(detections=many), f"crowd-{i}", no_drift)
        crowd[0] += 8 - len(out.detections)
        crowd[1] += 8
    _near(small[0], small[1], p.miss_small)
    crowded = p.miss_rate(0.04, 8)
    assert crowded == pytest.approx(p.miss_large * (1 + p.crowd_gain * 4))
    assert crowded > p.miss_large
    _near(crowd[0], crowd[1], crowded)


def test_counts_beyond_four_drift_and_near_hues_are_confused(
    scenes: list[tuple[str, Scene]],
) -> None:
    no_miss = DetectorParams(miss_small=0, miss_medium=0, miss_large=0, box_jitter=0)
    drift, hues = [0, 0], [0, 0]
    for sha, scene in scenes:
        seen = perturb_scene(scene, sha, no_miss)
        for cls in {d.cls for d in scene.detections}:
            n = sum(d.cls == cls for d in scene.detections)
            m = sum(d.cls == cls for d in seen.detections)
            if n > no_miss.count_drift_above:
                drift[0] += m != n
                drift[1] += 1
            else:
                assert m == n  # no drift at 4 or fewer
        for d, e in zip(scene.detections, seen.detections[: len(scene.detections)], strict=False):
            if d.color in HUE_NEIGHBOURS and (d.cls, d.box) == (e.cls, e.box):
                hues[0] += e.color != d.color
                hues[1] += 1
                assert e.color == d.color or e.color in HUE_NEIGHBOURS[d.color]
            elif d.color in ("black", "white") and (d.cls, d.box) == (e.cls, e.box):
                assert e.color == d.color  # lightness-named colours are not confused
    _near(hues[0], hues[1], no_miss.hue_confusion)
    # the simulator draws too few large groups for a tight test: synthetic groups of 6
    for i in range(300):
        six = [
            Detection("cup", (0.15 * k, 0.2, 0.15 * k + 0.12, 0.4), "red", 10.0, 0.9)
            for k in range(6)
        ]
        out = perturb_scene(Scene(detections=six), f"six-{i}", no_miss)
        drift[0] += len(out.detections) != 6
        drift[1] += 1
    _near(drift[0], drift[1], no_miss.count_drift)


def test_spurious_detections_and_ocr_misreads(scenes: list[tuple[str, Scene]]) -> None:
    p = DetectorParams()
    fp = [0, 0]
    for sha, scene in scenes:
        present = {d.cls for d in scene.detections}
        absent = [c for c in CLASSES[:40] if c not in present]
        seen = perturb_scene(scene, sha, p, absent)
        fp[0] += len({d.cls for d in seen.detections} & set(absent))
        fp[1] += len(absent)
    _near(fp[0], fp[1], p.false_positive)
    chars = [0, 0]
    text = "open 24 hours daily"
    for i in range(100):
        out = perturb_scene(Scene(signs=[(text, (0.1, 0.1, 0.5, 0.3))]), f"sign-{i}", p)
        got = out.signs[0][0]
        assert len(got) == len(text)
        chars[0] += sum(a != b for a, b in zip(got, text, strict=True))
        chars[1] += sum(c.isalnum() for c in text)
    # a substitution may draw the same character (1 in 36)
    _near(chars[0], chars[1], p.ocr_char_error * 35 / 36)


def test_same_image_same_verdict_whatever_else_is_asked(inspector: SimInspector) -> None:
    det = SimDetector(inspector=inspector)
    gen = SimGenerator()
    cs = [
        Constraint(constraint_id="a", type="object", subject="dog"),
        Constraint(constraint_id="b", type="color", subject="dog", value="blue"),
        Constraint(constraint_id="c", type="negative", subject="cat"),
        Constraint(
            constraint_id="d", type="position", subject="dog", relation="left of", value="car"
        ),
    ]
    differs = 0
    exact = 0
    for seed in range(30):
        png = gen.generate(Program(prompt="a photo of a blue dog left of a car", seed=seed)).png
        full = det.verify(png, cs)
        assert full == det.verify(png, cs) == SimDetector(inspector=inspector).verify(png, cs)
        assert all(e.decided_by == "sim-detector" for e in full)
        for i, c in enumerate(cs):
            assert det.verify(png, [c]) == [full[i]]  # alone: the same verdict
        assert det.verify(png, cs[::-1]) == full[::-1]
        truth = inspector.verify(png, cs)
        differs += any(a.status != b.status for a, b in zip(full, truth, strict=True))
        exact += all(a.status == b.status for a, b in zip(full, truth, strict=True))
    assert differs > 0 and exact > differs  # errs, but mostly agrees


def test_params_are_validated_and_part_of_the_identity() -> None:
    with pytest.raises(ValueError, match="miss_small"):
        DetectorParams(miss_small=1.5)
    with pytest.raises(ValueError, match="recall"):
        DetectorParams(recall=0.5)  # type: ignore[call-arg]
    a = SimDetector(inspector=SimInspector(ocr=False))
    b = SimDetector(DetectorParams(hue_confusion=0.2), inspector=a.inspector)
    assert a.verifier_id.startswith("sim-detector@") and a.verifier_id != b.verifier_id


def test_quality_and_text_pass_through_unperturbed_when_rates_are_zero(
    inspector: SimInspector,
) -> None:
    zero = DetectorParams(
        miss_small=0,
        miss_medium=0,
        miss_large=0,
        count_drift=0,
        false_positive=0,
        box_jitter=0,
        hue_confusion=0,
        ocr_char_error=0,
    )
    det = SimDetector(zero, inspector=inspector)
    gen = SimGenerator()
    cs = [
        Constraint(constraint_id="o", type="count", subject="cat", min_count=2, max_count=2),
        Constraint(constraint_id="q", type="quality", subject="image", value=0.5),
    ]
    for seed in range(10):
        png = gen.generate(Program(prompt="a photo of two cats", seed=seed)).png
        got = det.verify(png, cs)
        want = inspector.verify(png, cs)
        assert [replace_id(e) for e in got] == [replace_id(e) for e in want]
        assert got[1].status is EvidenceStatus.passed


def replace_id(e: Evidence) -> Evidence:
    return e.model_copy(update={"decided_by": ""})


def test_the_exact_scene_is_not_changed() -> None:
    dets = [
        Detection("cat", (0.1 * k, 0.1, 0.1 * k + 0.04, 0.14), "red", 10.0, 0.9) for k in range(9)
    ]
    scene = Scene(detections=list(dets), signs=[("stop", (0.0, 0.0, 0.2, 0.1))])
    for i in range(20):
        perturb_scene(scene, f"x{i}", DetectorParams(), ["dog"])
    assert scene.detections == dets and scene.signs == [("stop", (0.0, 0.0, 0.2, 0.1))]


def test_cached_evidence_is_keyed_by_the_verifier(inspector: SimInspector, tmp_path) -> None:
    """Evidence the exact inspector cached is never served for the detector (and back)."""
    from evoharness.local_store import LocalArtifactStore
    from workflows.backends import CachingVerifier

    store = LocalArtifactStore(tmp_path)
    exact = CachingVerifier(inspector, store)
    noisy = CachingVerifier(SimDetector(inspector=inspector), store)
    cs = [Constraint(constraint_id="c", type="color", subject="dog", value="blue")]
    gen = SimGenerator()
    pngs = [gen.generate(Program(prompt="a photo of a blue dog", seed=s)).png for s in range(40)]
    a = [exact.verify(p, cs)[0].decided_by for p in pngs]
    b = [noisy.verify(p, cs)[0].decided_by for p in pngs]
    assert set(a) == {"sim-inspector"} and set(b) == {"sim-detector"}
    assert len(list((tmp_path / "evidence").iterdir())) == 80
    # a second pass is served from the cache, each verifier its own records
    assert [exact.verify(p, cs)[0].decided_by for p in pngs] == a
    assert [noisy.verify(p, cs)[0].decided_by for p in pngs] == b
    assert len(list((tmp_path / "evidence").iterdir())) == 80


def test_texture_and_shape_readings_are_misread_at_their_rates() -> None:
    """Each texture / shape reading becomes another value w.p. ``texture_error`` /
    ``shape_error``; an unread body stays unread, and unread outlines are not invented."""
    from evoharness.vocab import SHAPES, TEXTURES

    p = DetectorParams(miss_small=0, miss_medium=0, miss_large=0, count_drift=0)
    textures = (*TEXTURES, "plain")
    shapes = (*SHAPES, None)
    tex, shp = [0, 0], [0, 0]
    for i in range(40):
        dets = [
            Detection(
                "cat",
                (0.1 * k, 0.5, 0.1 * k + 0.08, 0.6),
                "red",
                10.0,
                0.9,
                texture=textures[(i + k) % len(textures)],
                shape=shapes[(i + k) % len(shapes)],
            )
            for k in range(8)
        ]
        out = perturb_scene(Scene(detections=dets, shapes_read=True), f"attr-{i}", p)
        assert out.shapes_read
        for d, e in zip(dets, out.detections, strict=True):
            assert e.texture in textures and e.shape in shapes
            tex[0] += e.texture != d.texture
            shp[0] += e.shape != d.shape
        tex[1] += 8
        shp[1] += 8
        unread = [Detection("cat", (0.1, 0.1, 0.2, 0.2), "red", 10.0, 0.9)]  # no texture, shape
        out = perturb_scene(Scene(detections=unread), f"attr-{i}", p)
        assert (out.detections[0].texture, out.detections[0].shape) == (None, None)
    _near(tex[0], tex[1], p.texture_error)
    _near(shp[0], shp[1], p.shape_error)


def test_attribute_misreads_flip_only_attribute_verdicts(inspector: SimInspector) -> None:
    """At a fixed image set the default rates flip some texture and shape verdicts and no
    other (their draws are keyed apart); at rate 0 every verdict is the exact inspector's
    when the other rates are 0 too (shape constraints included: the perturbed scene keeps
    ``shapes_read``)."""
    gen = SimGenerator()
    cs = [
        Constraint(constraint_id="o", type="object", subject="chair"),
        Constraint(constraint_id="c", type="color", subject="chair", value="red"),
        Constraint(constraint_id="t", type="attribute", subject="chair", value="wooden"),
        Constraint(constraint_id="s", type="attribute", subject="clock", value="round"),
        Constraint(constraint_id="n", type="count", subject="clock", min_count=1, max_count=1),
        Constraint(
            constraint_id="p", type="position", subject="chair", relation="left of", value="clock"
        ),
    ]
    default = SimDetector(inspector=inspector)
    no_attr = SimDetector(DetectorParams(texture_error=0, shape_error=0), inspector=inspector)
    zero = SimDetector(
        DetectorParams(
            miss_small=0,
            miss_medium=0,
            miss_large=0,
            count_drift=0,
            false_positive=0,
            box_jitter=0,
            hue_confusion=0,
            ocr_char_error=0,
            texture_error=0,
            shape_error=0,
        ),
        inspector=inspector,
    )
    flips = 0
    for seed in range(30):
        png = gen.generate(
            Program(prompt="a photo of a red wooden chair left of a round clock", seed=seed)
        ).png
        a, b = default.verify(png, cs), no_attr.verify(png, cs)
        for c, x, y in zip(cs, a, b, strict=True):
            if c.type.value == "attribute":
                flips += x.status != y.status
            else:
                assert x == y
        exact = inspector.verify(png, cs)
        assert [replace_id(e) for e in zero.verify(png, cs)] == [replace_id(e) for e in exact]
        assert exact[3].status is not EvidenceStatus.uncertain
    assert flips > 0
