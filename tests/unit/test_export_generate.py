"""``export-eval --harness DIR --tasks FILE`` (issue 33): the images are generated now, with
the embedded world, into a run folder, and the benchmark's loader reads the export back;
the generated folder is a run the export can read again; bad combinations name the option."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import pytest

from evoharness.harness import harness_id, load_dir
from evoharness.tasks.io import load_tasks, write_jsonl
from evoharness_app.cli import main
from evoharness_app.exports.run import open_run
from tests.conftest import SHARED, require
from tests.unit import benchmark_loaders as loaders
from tests.unit._export_run import make_run

ROOT = Path(__file__).resolve().parents[2]
BASELINE = ROOT / "harnesses" / "baseline"


@pytest.fixture(scope="module")
def tasks_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Two GenEval tasks and one of another benchmark, as a tasks file."""
    require((SHARED / "data" / "geneval").is_dir(), f"no GenEval data under {SHARED}")
    made = make_run(tmp_path_factory.mktemp("runs"))
    tasks = load_tasks(made / "splits" / "test.jsonl")
    geneval = [t for t in tasks if t.metadata.get("source") == "geneval"][:2]
    other = [t for t in tasks if t.metadata.get("source") != "geneval"][:1]
    path = tmp_path_factory.mktemp("tasks") / "tasks.jsonl"
    write_jsonl([*geneval, *other], path)
    return path


def test_generated_images_are_exported_and_read_by_genevals_loader(
    tasks_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    gen, out = tmp_path / "gen", tmp_path / "geneval"
    argv = ["export-eval", "--dataset", "geneval", "--harness", str(BASELINE)]
    argv += ["--tasks", str(tasks_file), "--seeds", "0,1", str(gen), "--out", str(out)]
    assert main(argv) == 0, capsys.readouterr().err
    printed = capsys.readouterr()
    assert "generated 6 image(s)" in printed.err
    assert "geneval: 4 image(s) written" in printed.out and "1 task(s) of the test split" in (
        printed.out
    )
    got = loaders.load_geneval(str(out))
    assert len(got) == 4
    run = open_run(gen)  # the generated folder is a run: it can be exported again
    hid = harness_id(load_dir(BASELINE))
    assert run.final_harness_id == hid and run.seeds == (0, 1)
    for meta, path in got:
        task = next(t for t in run.tasks("test") if t.prompt == meta["prompt"])
        rec = run.record(hid, task.task_id, int(Path(path).stem))
        assert rec is not None and rec.image is not None
        stored = hashlib.sha256(run.store.get(rec.image.key)).hexdigest()
        assert hashlib.sha256(Path(path).read_bytes()).hexdigest() == stored
    manifest = json.loads((out / "evoharness-export.json").read_text())
    assert manifest["counts"]["written"] == 4 and manifest["counts"]["missing"] == 0
    # again into the same folder (reused), another benchmark's layout
    argv2 = ["export-eval", "--dataset", "geneval2", "--harness", str(BASELINE), "--tasks"]
    argv2 += [str(tasks_file), "--seeds", "0,1", str(gen), "--out", str(tmp_path / "g2")]
    assert main(argv2) == 0


def test_bad_generation_requests_name_the_option(
    tasks_file: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    base = ["export-eval", "--dataset", "geneval", "--out", str(tmp_path / "o")]
    assert main([*base, "--harness", str(BASELINE), str(tmp_path / "g")]) == 1
    assert "--harness and --tasks go together" in capsys.readouterr().err
    both = ["--harness", str(BASELINE), "--tasks", str(tasks_file)]
    assert main([*base, *both, "--seeds", "a,b", str(tmp_path / "g")]) == 1
    assert "--seeds 'a,b'" in capsys.readouterr().err
    busy = tmp_path / "busy"
    busy.mkdir()
    (busy / "notes.txt").write_text("mine")
    assert main([*base, *both, str(busy)]) == 1
    assert "neither empty nor a folder made by --harness" in capsys.readouterr().err
    assert main([*base, "--harness", str(tmp_path), "--tasks", str(tasks_file), "x"]) == 1
    assert "--harness" in capsys.readouterr().err


def test_every_generation_failing_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Tasks whose references are not images: each generation fails, and the command says
    so and exits 1 instead of exporting nothing with exit 0 (a new-user trial)."""
    from evoharness.tasks.models import Task

    notimg = tmp_path / "notimg.png"
    notimg.write_text("not an image")
    task = Task(
        task_id="mr/0",
        prompt="the cup from image 1",
        task_family="multiref",
        references={"image_1": {"key": str(notimg)}},
    )
    tasks = write_jsonl([task], tmp_path / "mr.jsonl")
    argv = ["export-eval", "--dataset", "geneval", "--harness", str(BASELINE)]
    argv += [
        "--tasks",
        str(tasks),
        "--seeds",
        "0",
        str(tmp_path / "g"),
        "--out",
        str(tmp_path / "o"),
    ]
    assert main(argv) == 1
    err = capsys.readouterr().err
    assert "every generation failed (1), nothing to export" in err and "mr/0 seed 0" in err
    assert not (tmp_path / "o" / "evoharness-export.json").exists()
