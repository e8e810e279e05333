"""``export-eval`` and ``export-trajectories`` on a small finished run (``_export_run``).

Each benchmark's export is read back by a re-implementation of that benchmark's loader
(``benchmark_loaders``, sources in its docstring): every image the loader finds is the
stored image of the run's final harness on that task and seed, and every (task, seed) is
either found or listed as missing or failed. Collisions stop the export before anything is
written. The trajectory export validates against the JSON Schema published in the docs
(``jsonschema``), which must equal the one generated from the model."""

from __future__ import annotations

import hashlib
import importlib.util
import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from evoharness.evidence import EvidenceStatus
from evoharness.tasks.io import load_tasks, write_jsonl
from evoharness_app.cli import main
from evoharness_app.exports.benchmarks import ExportCollisionError, ExportError, export_eval
from evoharness_app.exports.run import RunFolder, open_run
from evoharness_app.exports.trajectories import TrajectoryPair, build_pairs, trajectory_schema
from tests.conftest import SHARED, require
from tests.unit import benchmark_loaders as loaders
from tests.unit._export_run import GENEVAL2_ROWS, SEEDS, WISE_ROWS, make_run

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = ROOT / "docs" / "exports-trajectory.schema.json"


@pytest.fixture(scope="module")
def made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require((SHARED / "data" / "geneval").is_dir(), f"no GenEval data under {SHARED}")
    return make_run(tmp_path_factory.mktemp("runs"))


@pytest.fixture
def run(made: Path, tmp_path: Path) -> RunFolder:
    """A private copy of the run (tests may break records in it)."""
    shutil.copytree(made, tmp_path / "r1")
    return open_run(tmp_path / "r1")


def _sha(path: str | Path) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def _stored(run: RunFolder, task_id: str, seed: int) -> str:
    rec = run.record(run.final_harness_id or "", task_id, seed)
    assert rec is not None and rec.image is not None
    return hashlib.sha256(run.store.get(rec.image.key)).hexdigest()


def _tasks(run: RunFolder, source: str) -> list[Any]:
    return [t for t in run.tasks("test") if t.metadata.get("source") == source]


def test_geneval_export_reads_back_with_genevals_loader(run: RunFolder, tmp_path: Path) -> None:
    out = tmp_path / "geneval"
    res = export_eval(run, "geneval", out)
    tasks = _tasks(run, "geneval")
    got = loaders.load_geneval(str(out))
    assert len(got) == len(tasks) * len(SEEDS) == len(res.written)
    rows = [
        json.loads(line)
        for line in (SHARED / "data" / "geneval" / "evaluation_metadata.jsonl")
        .read_text()
        .splitlines()
    ]
    by_prompt = {t.prompt: t for t in tasks}
    for meta, path in got:
        t = by_prompt[meta["prompt"]]
        folder = Path(path).parent.parent.name
        assert meta == rows[int(folder)] and int(folder) == t.metadata["line"] - 1
        seed = SEEDS[int(Path(path).stem)]
        assert _sha(path) == _stored(run, t.task_id, seed)
    manifest = json.loads((out / "evoharness-export.json").read_text())
    assert manifest["counts"] == {
        "written": 6,
        "missing": 0,
        "failed": 0,
        "not_in_benchmark": len(run.tasks("test")) - len(tasks),
    }


def test_missing_and_failed_generations_are_listed_and_counted(
    run: RunFolder, tmp_path: Path
) -> None:
    tasks = _tasks(run, "geneval")
    hid = run.final_harness_id or ""
    gone = run.store.root / run.record_key(hid, tasks[0].task_id, 1)
    gone.unlink()  # a generation that never happened
    rec = run.record(hid, tasks[1].task_id, 0)
    assert rec is not None and rec.image is not None
    broken = rec.model_copy(
        update={"trace": [*rec.trace, {"kind": "generation_error", "message": "boom"}]}
    )
    run.store.put(run.record_key(hid, tasks[1].task_id, 0), broken.model_dump_json().encode())
    out = tmp_path / "geneval"
    res = export_eval(run, "geneval", out)
    assert [(t, s) for t, s, _ in res.missing] == [(tasks[0].task_id, 1)]
    assert [(t, s) for t, s, _ in res.failed] == [(tasks[1].task_id, 0)]
    assert "generation_error" in res.failed[0][2]
    assert len(loaders.load_geneval(str(out))) == len(tasks) * len(SEEDS) - 2
    manifest = json.loads((out / "evoharness-export.json").read_text())
    assert manifest["counts"]["missing"] == 1 and manifest["counts"]["failed"] == 1
    assert manifest["missing"][0]["task_id"] == tasks[0].task_id


def test_geneval2_export_reads_back_with_its_loader(run: RunFolder, tmp_path: Path) -> None:
    out = tmp_path / "g2"
    export_eval(run, "geneval2", out, seed=1)
    got = loaders.load_geneval2(str(out / "geneval2_data.jsonl"), str(out / "image_paths.json"))
    assert [row["prompt"] for row, _ in got] == [r["prompt"] for r in GENEVAL2_ROWS]
    for (row, path), src in zip(got, GENEVAL2_ROWS, strict=True):
        assert row["vqa_list"] == src["vqa_list"] and row["skills"] == src["skills"]
        assert row["atom_count"] == src["atom_count"]
        t = next(t for t in _tasks(run, "geneval2") if t.prompt == row["prompt"])
        assert _sha(path) == _stored(run, t.task_id, 1)


def test_t2icompbench_export_reads_back_with_blip_vqas_loader(
    run: RunFolder, tmp_path: Path
) -> None:
    out = tmp_path / "compbench"
    export_eval(run, "t2icompbench", out)
    tasks = _tasks(run, "t2icompbench")
    ann = loaders.load_t2icompbench(str(out / "color"))
    assert [a["question_id"] for a in ann] == list(range(len(tasks) * len(SEEDS)))
    expected = [(t, s) for t in tasks for s in SEEDS]  # written in this order
    for a, (t, s) in zip(ann, expected, strict=True):
        assert a["prompt"] == t.prompt
        assert _sha(a["image"]) == _stored(run, t.task_id, s)


def test_wise_export_reads_back_with_wises_loader(run: RunFolder, tmp_path: Path) -> None:
    out = tmp_path / "wise"
    export_eval(run, "wise", out)
    got = loaders.load_wise(str(out / "prompts.json"), str(out / "images"))
    assert [(d["prompt_id"], d["Prompt"], d["Explanation"], d["Subcategory"]) for d, _ in got] == [
        (r["prompt_id"], r["Prompt"], r["Explanation"], r["Subcategory"]) for r in WISE_ROWS
    ]
    for d, path in got:
        t = next(t for t in _tasks(run, "wise") if t.metadata["prompt_id"] == d["prompt_id"])
        assert _sha(path) == _stored(run, t.task_id, SEEDS[0])


def _add_test_task(run: RunFolder, source: str, **change: Any) -> str:
    """Copy the first ``source`` task of the test split under a new id with ``change``d
    fields (metadata keys merged); returns the new task id."""
    tasks = run.tasks("test")
    t = next(t for t in tasks if t.metadata.get("source") == source)
    meta = {**t.metadata, **change.pop("metadata", {})}
    copy = t.model_copy(update={"task_id": t.task_id + "-copy", "metadata": meta, **change})
    write_jsonl([*tasks, copy], run.folder / "splits" / "test.jsonl")
    return copy.task_id


@pytest.mark.parametrize(
    ("benchmark", "change", "needle"),
    [
        ("geneval", {"metadata": {"file": "other.jsonl"}}, "folder '00000'"),
        ("geneval2", {}, "prompt 'four white bicycles"),
        ("wise", {"prompt": "another prompt"}, "image 'images/1.png'"),
        ("t2icompbench", {"prompt": "a red_car"}, "contains '_'"),
    ],
)
def test_a_collision_stops_the_export_and_lists_the_tasks(
    run: RunFolder, tmp_path: Path, benchmark: str, change: dict[str, Any], needle: str
) -> None:
    new_id = _add_test_task(run, benchmark, **change)
    out = tmp_path / "out"
    with pytest.raises(ExportCollisionError) as err:
        export_eval(run, benchmark, out)
    assert needle in str(err.value) and new_id in str(err.value)
    assert not out.exists()  # nothing written


def test_bad_requests_name_what_is_wrong(run: RunFolder, tmp_path: Path) -> None:
    with pytest.raises(ExportError, match="expected one of geneval, geneval2"):
        export_eval(run, "mscoco", tmp_path / "a")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "x").write_text("x")
    with pytest.raises(ExportError, match="exists and is not an empty folder"):
        export_eval(run, "wise", tmp_path / "full")
    with pytest.raises(ExportError, match=r"--seed 7: the run used seeds \[0, 1\]"):
        export_eval(run, "wise", tmp_path / "b", seed=7)
    with pytest.raises(ExportError, match="GenEval row not found"):
        export_eval(run, "geneval", tmp_path / "c", source_dir=tmp_path)


def test_cli_export_eval_and_its_errors(run: RunFolder, tmp_path: Path, capsys) -> None:
    out = tmp_path / "cli"
    rc = main(["export-eval", str(run.folder), "--dataset", "wise", "--out", str(out)])
    captured = capsys.readouterr()
    assert rc == 0, captured.err
    assert "wise: 2 image(s) written" in captured.out and (out / "prompts.json").is_file()
    _add_test_task(run, "geneval2")
    rc = main(
        ["export-eval", str(run.folder), "--dataset", "geneval2", "--out", str(tmp_path / "x")]
    )
    assert rc == 1 and "collide" in capsys.readouterr().err
    rc = main(
        ["export-eval", str(tmp_path / "nope"), "--dataset", "wise", "--out", str(tmp_path / "y")]
    )
    assert rc == 1 and "not a run folder" in capsys.readouterr().err


# ------------------------------------------------------------------------ trajectories
def test_published_schema_is_the_models() -> None:
    assert json.loads(SCHEMA.read_text()) == trajectory_schema(), (
        "docs/exports-trajectory.schema.json is stale: regenerate it with "
        "`python -m evoharness_app.exports.trajectories`"
    )


def test_trajectory_export_validates_against_the_published_schema(
    run: RunFolder, tmp_path: Path, capsys
) -> None:
    require(importlib.util.find_spec("jsonschema") is not None, "jsonschema (dev extra)")
    import jsonschema

    out = tmp_path / "pairs.jsonl"
    rc = main(["export-trajectories", str(run.folder), "--out", str(out)])
    assert rc == 0, capsys.readouterr().err
    lines = [json.loads(line) for line in out.read_text().splitlines()]
    assert lines, "the run has tasks whose executions differ in reward"
    validator = jsonschema.Draft202012Validator(json.loads(SCHEMA.read_text()))
    target = {t.task_id: t for t in load_tasks(run.folder / "splits" / "target.jsonl")}
    for doc in lines:
        validator.validate(doc)
        assert doc["best"]["reward"] - doc["worst"]["reward"] == pytest.approx(doc["reward_gap"])
        assert doc["reward_gap"] > 0 and doc["prompt"] == target[doc["task_id"]].prompt
        for side in ("best", "worst"):
            rec = run.record(doc[side]["harness_id"], doc["task_id"], doc[side]["seed"])
            assert rec is not None and rec.image is not None
            assert doc[side]["image"]["key"] == rec.image.key
            assert doc[side]["program"]["prompt"] == rec.program.prompt
            passed = sum(v["status"] == "pass" for v in doc[side]["verdicts"])
            assert doc[side]["reward"] == pytest.approx(passed / len(doc[side]["verdicts"]))
    bad = {**lines[0], "reward_gap": 0}
    with pytest.raises(jsonschema.ValidationError):
        validator.validate(bad)


def test_min_reward_gap_and_protocol_failures_filter_pairs(run: RunFolder) -> None:
    pairs, stats = build_pairs(run)
    assert pairs and stats.pairs == len(pairs)
    # the test split's executions (stored for export-eval) never become training data
    test_ids = {t.task_id for t in run.tasks("test")}
    assert stats.test_split == len(test_ids) and not {p.task_id for p in pairs} & test_ids
    top = max(p.reward_gap for p in pairs)
    kept, _ = build_pairs(run, min_reward_gap=top)
    assert kept and all(p.reward_gap >= top for p in kept)
    assert len(kept) == sum(p.reward_gap >= top for p in pairs)
    # a perfect-looking execution that failed for protocol reasons never becomes "best"
    p = pairs[0]
    rec = run.record(p.worst.harness_id, p.task_id, p.worst.seed)
    assert rec is not None
    perfect = rec.model_copy(
        update={
            "harness_id": "f" * 64,
            "evidence": [
                e.model_copy(update={"status": EvidenceStatus.passed}) for e in rec.evidence
            ],
            "trace": [*rec.trace, {"kind": "protocol_error", "message": "verifier timed out"}],
        }
    )
    run.store.put(
        run.record_key("f" * 64, p.task_id, p.worst.seed), perfect.model_dump_json().encode()
    )
    again, stats2 = build_pairs(run)
    assert stats2.protocol_failures == stats.protocol_failures + 1
    assert all(x.best.harness_id != "f" * 64 for x in again)
    assert TrajectoryPair.model_validate_json(again[0].model_dump_json()) == again[0]
    with pytest.raises(ValueError, match="min-reward-gap 2"):
        build_pairs(run, min_reward_gap=2)
