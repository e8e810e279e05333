"""Pixel-level image quality (``evoharness.sim.quality`` through ``SimInspector``): a clean
simulator image scores high; added noise, clipping and a hard-pasted patch each lower the
matching component; the ``quality`` constraint's model, verdict and GenEval neutrality."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from evoharness.evidence import Evidence, EvidenceStatus
from evoharness.program import Program
from evoharness.sim import SimGenerator, SimInspector
from evoharness.sim.generator import encode_png
from evoharness.tasks.geneval_score import geneval_scores
from evoharness.tasks.models import Constraint, Task

PROMPTS = (
    "a photo of a red car and a blue dog",
    "a photo of a cat",
    "a photo of a giraffe",
    "a photo of four clocks",
)
QUALITY = Constraint(constraint_id="q", type="quality", subject="image", value=0.5)


@pytest.fixture(scope="module")
def inspector() -> SimInspector:
    return SimInspector(ocr=False)


@pytest.fixture(scope="module")
def clean() -> list[np.ndarray]:
    gen = SimGenerator()
    out = []
    for seed, prompt in enumerate(PROMPTS):
        png = gen.generate(Program(prompt=prompt, seed=seed)).png
        out.append(np.asarray(Image.open(io.BytesIO(png)).convert("RGB")).copy())
    return out


def _quality(inspector: SimInspector, rgb: np.ndarray) -> Evidence:
    return inspector.verify(encode_png(rgb), [QUALITY])[0]


def test_clean_images_score_high(inspector: SimInspector, clean: list[np.ndarray]) -> None:
    for rgb in clean:
        ev = _quality(inspector, rgb)
        assert ev.status is EvidenceStatus.passed, ev.note
        assert ev.observed["score"] >= 0.9, ev.observed
        assert set(ev.observed) >= {"noise", "clipping", "seams", "noise_sigma", "score"}


def test_noise_lowers_the_noise_component(inspector: SimInspector, clean: list[np.ndarray]) -> None:
    rng = np.random.default_rng(0)
    for rgb in clean:
        base = _quality(inspector, rgb).observed
        noisy = np.clip(rgb + rng.normal(0, 12, rgb.shape), 0, 255).astype(np.uint8)
        ev = _quality(inspector, noisy)
        assert ev.observed["noise_sigma"] > base["noise_sigma"] + 6
        assert ev.observed["noise"] < 0.3 < base["noise"]
        assert ev.status is EvidenceStatus.failed


def test_clipping_lowers_the_clipping_component(
    inspector: SimInspector, clean: list[np.ndarray]
) -> None:
    for rgb in clean:
        base = _quality(inspector, rgb).observed
        # over-exposed: gain 1.8 pushes the bright third of the picture to 255
        blown = np.clip(rgb.astype(np.float32) * 1.8, 0, 255).astype(np.uint8)
        ev = _quality(inspector, blown)
        assert ev.observed["clipped_fraction"] > base["clipped_fraction"] + 0.2
        assert ev.observed["clipping"] < 0.2 < base["clipping"]
        assert ev.observed["noise"] >= base["noise"] - 0.2  # not mistaken for noise
        assert ev.status is EvidenceStatus.failed


def test_hard_pasted_patch_lowers_the_seam_component(
    inspector: SimInspector, clean: list[np.ndarray]
) -> None:
    drops = []
    for rgb in clean:
        base = _quality(inspector, rgb).observed
        pasted = rgb.copy()
        pasted[40:150, 350:470] = (200, 40, 40)  # a hard-edged object, no anti-aliasing
        ev = _quality(inspector, pasted)
        assert ev.observed["seam_fraction"] > base["seam_fraction"] + 0.15
        assert ev.observed["seams"] < base["seams"]
        assert ev.observed["seams"] < 0.85
        assert abs(ev.observed["noise_sigma"] - base["noise_sigma"]) < 1.0
        drops.append(base["seams"] - ev.observed["seams"])
    assert np.mean(drops) > 0.4


def test_an_object_with_the_scene_grain_is_not_a_seam(
    inspector: SimInspector, clean: list[np.ndarray]
) -> None:
    """A straight-edged object whose outline falls on pixel boundaries but which carries the
    picture's grain is rendered in, not pasted: the seams component does not flag it, while
    the same object without grain is flagged (the noise-inconsistency cue)."""
    rng = np.random.default_rng(1)
    for rgb in clean:
        base = _quality(inspector, rgb).observed
        flat, grainy = rgb.copy(), rgb.copy()
        flat[40:150, 350:470] = (200, 40, 40)
        patch = np.full((110, 120, 3), (200, 40, 40), np.float32) + rng.normal(0, 3, (110, 120, 3))
        grainy[40:150, 350:470] = np.clip(np.round(patch), 0, 255).astype(np.uint8)
        assert _quality(inspector, flat).observed["seams"] < 0.85
        assert _quality(inspector, grainy).observed["seams"] >= min(base["seams"], 0.95)


def test_quality_constraint_model_and_geneval_neutrality(inspector: SimInspector) -> None:
    with pytest.raises(ValueError, match="threshold in 0..1"):
        Constraint(constraint_id="q", type="quality", subject="image", value=1.5)
    with pytest.raises(ValueError, match="threshold in 0..1"):
        Constraint(constraint_id="q", type="quality", subject="image", value="high")
    assert QUALITY.value == 0.5 and Constraint(**{**QUALITY.model_dump(), "value": 1}).value == 1
    task = Task(
        task_id="t",
        prompt="a photo of a cat",
        task_family="single_object",
        constraints=[Constraint(constraint_id="c", type="object", subject="cat"), QUALITY],
    )
    ok = Evidence(constraint_id="c", status="pass", confidence=1.0)
    bad_q = Evidence(constraint_id="q", status="fail", confidence=1.0)
    # GenEval's rule has no quality requirement: a failed quality check does not change it
    assert geneval_scores([task], {"t@0": [ok, bad_q]})["overall"] == 1.0
    assert geneval_scores([task], {"t@0": [ok]})["overall"] == 1.0
