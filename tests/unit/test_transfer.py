"""The transfer set and its figures (``evoharness_app.transfer``; issue 30 item 4): seeded,
label-free (constraints only from the fixed extractor), disjoint by dataset family from every
evolution split, a clear error naming missing data; gain kept = transfer gain / test gain in
summary.json, on the console and in the report."""

from __future__ import annotations

import shutil
from pathlib import Path
from typing import Any

import pytest

from evoharness.report import render_report
from evoharness.report.models import PassRate, TransferScores
from evoharness.tasks.models import Constraint, ConstraintType, Task
from evoharness_app.job_defaults import MAIN_JOB_TRANSFER
from evoharness_app.transfer import (
    SOURCES,
    TransferError,
    build_transfer_set,
    check_disjoint,
    dataset_family,
    transfer_inputs,
)
from tests.conftest import SHARED, require
from tests.report.sample import make_run


@pytest.fixture(scope="module")
def shared() -> Path:
    for rel in SOURCES.values():
        require((SHARED / rel).exists(), f"shared data {SHARED / rel} is missing")
    return SHARED


def _geneval_split() -> dict[str, list[Task]]:
    t = Task(
        task_id="geneval/evaluation_metadata/1",
        prompt="a photo of a dog",
        task_family="single_object",
    )
    s = Task(task_id="synthetic/synthetic/1", prompt='a sign that says "open"', task_family="text")
    return {
        "target": [t],
        "heldout": [s],
        "test": [t.model_copy(update={"task_id": "geneval/x/2"})],
    }


def test_the_set_is_seeded_and_split_between_the_two_datasets(shared: Path) -> None:
    a = build_transfer_set(shared, 11, 0, _geneval_split())
    again = build_transfer_set(shared, 11, 0, _geneval_split())
    other = build_transfer_set(shared, 11, 1, _geneval_split())
    ids = [t.task_id for t in a.tasks]
    assert ids == [t.task_id for t in again.tasks]
    assert ids != [t.task_id for t in other.tasks]
    assert len(set(ids)) == 11
    assert a.sources == {"t2icompbench": 6, "partiprompts": 5}
    assert {dataset_family(t) for t in a.tasks} == {"t2icompbench", "partiprompts"}
    # the sample spreads over T2I-CompBench's categories (round-robin over them)
    assert len({t.task_family for t in a.tasks if dataset_family(t) == "t2icompbench"}) == 6
    assert a.evolution_sources == {"geneval": 2, "synthetic": 1}


#: The main job's default transfer set (``--transfer 60``, split seed 0) on the shared
#: data, as drawn before the seeded order shared ``splits.family_groups`` (issue 28): the
#: order must not change silently. New data or a new extractor re-pins it.
DEFAULT_SET = """
t2icompbench/3d_spatial_train/589
t2icompbench/color_train/270
t2icompbench/complex_train/108
t2icompbench/non_spatial_train/555
t2icompbench/numeracy_train/304
t2icompbench/shape_train/294
t2icompbench/spatial_train/659
t2icompbench/texture_train/241
t2icompbench/3d_spatial_train/101
t2icompbench/color_train/111
t2icompbench/complex_train/516
t2icompbench/numeracy_train/83
t2icompbench/spatial_train/613
t2icompbench/texture_train/598
t2icompbench/3d_spatial_train/227
t2icompbench/color_train/643
t2icompbench/complex_train/522
t2icompbench/non_spatial_train/52
t2icompbench/numeracy_train/577
t2icompbench/spatial_train/148
t2icompbench/texture_train/296
t2icompbench/3d_spatial_train/621
t2icompbench/color_train/330
t2icompbench/complex_train/429
t2icompbench/non_spatial_train/612
t2icompbench/numeracy_train/215
t2icompbench/shape_train/673
t2icompbench/spatial_train/93
t2icompbench/color_train/528
t2icompbench/complex_train/400
partiprompts/PartiPrompts/182
partiprompts/PartiPrompts/713
partiprompts/PartiPrompts/1506
partiprompts/PartiPrompts/1085
partiprompts/PartiPrompts/467
partiprompts/PartiPrompts/1091
partiprompts/PartiPrompts/1290
partiprompts/PartiPrompts/972
partiprompts/PartiPrompts/62
partiprompts/PartiPrompts/780
partiprompts/PartiPrompts/248
partiprompts/PartiPrompts/299
partiprompts/PartiPrompts/317
partiprompts/PartiPrompts/1546
partiprompts/PartiPrompts/1471
partiprompts/PartiPrompts/370
partiprompts/PartiPrompts/1575
partiprompts/PartiPrompts/1361
partiprompts/PartiPrompts/900
partiprompts/PartiPrompts/762
partiprompts/PartiPrompts/202
partiprompts/PartiPrompts/1459
partiprompts/PartiPrompts/1226
partiprompts/PartiPrompts/651
partiprompts/PartiPrompts/711
partiprompts/PartiPrompts/1078
partiprompts/PartiPrompts/1140
partiprompts/PartiPrompts/1430
partiprompts/PartiPrompts/1225
partiprompts/PartiPrompts/1406
""".split()


def test_the_default_set_keeps_its_prompts(shared: Path) -> None:
    tset = build_transfer_set(shared, MAIN_JOB_TRANSFER, 0, _geneval_split())
    assert [t.task_id for t in tset.tasks] == DEFAULT_SET


def test_constraints_are_the_extractor_s_reading_and_no_label_is_read(
    shared: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Builders that carried benchmark labels (a constraint, a challenge field) would not
    reach the transfer set: every constraint is the fixed extractor's reading of the prompt."""
    import evoharness.tasks.builders as builders
    from evoharness.runtime.extract import RuleExtractor

    real = builders.build_tasks
    label = Constraint(
        constraint_id="label-0", type=ConstraintType.count, subject="zebra", min_count=99
    )

    def labelled(dataset: str, path: Any, **kw: Any) -> Any:
        out = real(dataset, path, **kw)
        out.tasks[:] = [
            t.model_copy(
                update={
                    "constraints": [label],
                    "metadata": {**t.metadata, "challenge": "Counting", "label": "x"},
                }
            )
            for t in out.tasks
        ]
        return out

    monkeypatch.setattr(builders, "build_tasks", labelled)
    tset = build_transfer_set(shared, 8, 3, {})
    ex = RuleExtractor()
    for t in tset.tasks:
        read = [c.model_dump() for c in ex.extract(t.prompt)]
        assert read and [c.model_dump() for c in t.constraints] == read, t.task_id
        assert t.metadata == {"constraints_from": tset.extractor}
    assert tset.extractor.startswith("rules-v1@")


def test_a_shared_dataset_family_is_refused(shared: Path) -> None:
    tset = build_transfer_set(shared, 4, 0, {})
    parti = next(t for t in tset.tasks if dataset_family(t) == "partiprompts")
    with pytest.raises(
        TransferError, match=r"split 'heldout' share dataset family \['partiprompts'\]"
    ):
        check_disjoint(tset.tasks, {"target": _geneval_split()["target"], "heldout": [parti]})
    with pytest.raises(TransferError, match="share dataset family"):
        build_transfer_set(shared, 4, 0, {"target": [parti]})


def test_missing_data_names_the_file(shared: Path, tmp_path: Path) -> None:
    from evoharness_app.main_job import MainJobInputError, MainJobOptions, check_inputs

    fake = tmp_path / "shared"
    shutil.copytree(shared / "data" / "geneval", fake / "data" / "geneval")
    shutil.copytree(shared / "data" / "t2icompbench", fake / "data" / "t2icompbench")
    tsv = fake / "data" / "partiprompts" / "PartiPrompts.tsv"
    with pytest.raises(TransferError, match=f"{tsv}: partiprompts prompts"):
        transfer_inputs(fake)
    with pytest.raises(MainJobInputError, match=str(tsv)):
        check_inputs(MainJobOptions(shared_dir=fake))
    check_inputs(MainJobOptions(shared_dir=fake, transfer=0))  # no transfer set: not read
    shutil.rmtree(fake / "data" / "t2icompbench")
    (fake / "data" / "t2icompbench").mkdir()
    with pytest.raises(TransferError, match=r"t2icompbench/\*_train.txt: t2icompbench"):
        transfer_inputs(fake)


def _scores(test_gain: float | None) -> TransferScores:
    test = None
    if test_gain is not None:
        test = PassRate(before=0.5, after=0.5 + test_gain, n=80, tasks=20, ci_delta=(0.1, 0.3))
    return TransferScores(
        sources={"t2icompbench": 3, "partiprompts": 3},
        nothing_checkable={"t2icompbench": 0, "partiprompts": 2},
        extractor="rules-v1@abc",
        evolution_sources={"geneval": 10, "synthetic": 4},
        seeds=2,
        official=PassRate(before=0.6, after=0.75, n=40, tasks=6, ci_delta=(0.05, 0.25)),
        internal=PassRate(before=0.55, after=0.7, n=40, tasks=6),
        test_official=test,
    )


@pytest.mark.parametrize(("test_gain", "kept"), [(0.3, 0.5), (0.0, None), (-0.1, None)])
def test_gain_kept_is_the_ratio_of_the_gains(
    test_gain: float, kept: float | None, tmp_path: Path
) -> None:
    from evoharness_app.summary import transfer_doc
    from tests.unit._main_job_result import main_job_result, summary_text

    t = _scores(test_gain)
    doc = transfer_doc(t)
    assert doc is not None
    assert doc["official"]["gain"] == pytest.approx(0.15)
    assert doc["official"]["gain_ci95"] == [0.05, 0.25]
    assert doc["test_official"]["gain"] == pytest.approx(test_gain)
    assert doc["gain_kept"] == (None if kept is None else pytest.approx(kept))
    r = main_job_result(tmp_path, transfer=t)
    lines = [ln for ln in summary_text(r).splitlines() if ln.startswith("transfer")]
    assert len(lines) == 1, lines
    assert "0.600 → 0.750, gain +0.150 (95% CI +0.050..+0.250)" in lines[0]
    if kept is None:
        assert "gain kept: n/a" in lines[0]
    else:
        assert f"gain kept {100 * kept:.0f}% of the test split's +0.300" in lines[0]


def test_the_report_shows_the_transfer_figures(tmp_path: Path) -> None:
    run = make_run(tmp_path).model_copy(update={"transfer": _scores(0.3)})
    html = render_report(run, tmp_path / "out").read_text(encoding="utf-8")
    assert 'id="transfer"' in html and 'id="transfer-kpi"' in html
    assert '<strong id="gain-kept">50.0%</strong>' in html
    assert "transfer set, official" in html and "+15.0 pp" in html
    assert "<code>rules-v1@abc</code>" in html
    plain = render_report(make_run(tmp_path), tmp_path / "plain").read_text(encoding="utf-8")
    assert 'id="transfer"' not in plain
