"""The calibration benchmark (bench/calibration_bench.py): it renders the baseline program on
GenEval prompts, scores them officially and prints measured vs published per tag; the slow
test checks the shipped profiles against the published targets on the ``--quick`` subset."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench import calibration_bench as cb

DATA = Path(cb.DEFAULT_DATA)
pytestmark = pytest.mark.skipif(not DATA.is_file(), reason=f"{DATA} (GenEval metadata) missing")


def test_select_is_stratified_and_report_prints_every_tag() -> None:
    from evoharness.tasks.builders import build_geneval
    from evoharness.tasks.geneval_score import task_tag

    tasks = build_geneval(DATA)
    assert len(cb.select(tasks, quick=False)) == len(tasks) == 553
    idx = cb.select(tasks, quick=True, per_tag=2)
    tags = [task_tag(tasks[i]) for i in idx]
    assert sorted(tags) == sorted(cb.TAGS * 2)
    # a tiny real run: two prompts per tag, one seed, scored by the exact inspector
    res = cb.run_profile("sdxl-like", str(DATA), quick=False, seeds=1, workers=1, per_tag=2)
    assert sum(n for _k, n in res["tally"].values()) == res["images"] == 12
    lines = cb.report("sdxl-like", res)
    rows = {ln.split("|")[1].strip(): ln for ln in lines if ln.startswith("| ") and "---" not in ln}
    assert set(rows) == {"tag", *cb.TAGS, "overall"}
    for tag, target in zip(cb.TAGS, cb.TARGETS["sdxl-like"], strict=True):
        cells = [c.strip() for c in rows[tag].split("|")]
        measured, delta = float(cells[2]), float(cells[5])
        k, n = res["tally"][tag]
        assert measured == pytest.approx(k / n, abs=5e-4) and n == 2
        assert delta == pytest.approx(measured - target, abs=1e-3)


@pytest.mark.slow
@pytest.mark.parametrize("profile", sorted(cb.TARGETS))
def test_quick_calibration_is_near_the_published_scores(profile: str) -> None:
    """The ``--quick`` subset (24 prompts per tag × 4 seeds = 96 images per tag) lands near
    the published per-tag score: the target lies within the tag's Wilson 95% interval widened
    by the ±0.05 calibration tolerance (the full run is in docs/simulator.md)."""
    from evoharness.trace.aggregate import wilson_interval

    os.environ.setdefault("OMP_NUM_THREADS", "1")
    res = cb.run_profile(profile, str(DATA), quick=True, seeds=4, workers=1)
    for tag, target in zip(cb.TAGS, cb.TARGETS[profile], strict=True):
        k, n = res["tally"][tag]
        lo, hi = wilson_interval(k, n)
        assert lo - 0.05 <= target <= hi + 0.05, (profile, tag, k, n, target)
