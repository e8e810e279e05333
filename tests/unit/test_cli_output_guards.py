"""Outputs that would clobber an input, land in the wrong place or be silently changed: a
new user's tries through the CLI (one-line error, exit 1, nothing written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness_app.cli import main
from tests.unit.test_cli_badinput import GOOD_GENEVAL


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    """Exit code and all that ``main(argv)`` printed, stdout and stderr (no traceback)."""
    code = main(argv)
    printed = "".join(capsys.readouterr())
    assert "Traceback" not in printed
    return code, printed


def test_build_tasks_output_that_is_a_directory_is_named_before_reading(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "meta.jsonl"
    src.write_text(json.dumps(GOOD_GENEVAL) + "\n")
    out = tmp_path / "tasks"
    out.mkdir()
    argv = ["build-tasks", "--dataset", "geneval", "--input", str(src), "--output", str(out)]
    rc, err = _run(argv, capsys)
    assert rc == 1
    assert f"--output {out}: is a directory" in err and ".tmp" not in err
    assert list(out.iterdir()) == [] and sorted(p.name for p in tmp_path.iterdir()) == [
        "meta.jsonl",
        "tasks",
    ]


def _geneval_tasks(tmp_path: Path, n: int) -> Path:
    objs = ["car", "dog", "cat", "cup", "bench", "cow", "bicycle", "clock", "apple", "bird"]
    src = tmp_path / "meta.jsonl"
    rows = [
        {**GOOD_GENEVAL, "include": [{"class": o, "count": 1}], "prompt": f"a photo of a {o}"}
        for o in objs[:n]
    ]
    src.write_text("".join(json.dumps(r) + "\n" for r in rows))
    tasks = tmp_path / "g.jsonl"
    argv = ["build-tasks", "--dataset", "geneval", "--input", str(src), "--output", str(tasks)]
    assert main(argv) == 0
    return tasks


def test_prepare_splits_says_when_it_shrinks_the_sizes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = _geneval_tasks(tmp_path, 10)
    capsys.readouterr()
    out = tmp_path / "sp"
    rc, text = _run(
        ["prepare-splits", str(tasks), "--out", str(out), "--sizes", "50,50,50,50"], capsys
    )
    manifest = json.loads((out / "manifest.json").read_text())
    assert rc == 0 and manifest["sizes"] != manifest["sizes_requested"]
    flat = " ".join(text.split())
    assert "only 10 tasks for the 200 requested" in flat
    assert "sizes shrunk to " + ",".join(str(s) for s in manifest["sizes"]) in flat
    capsys.readouterr()
    argv = ["prepare-splits", str(tasks), "--out", str(out), "--sizes", "4,2,2,2", "--force"]
    rc, text = _run(argv, capsys)
    assert rc == 0 and "shrunk" not in text


def test_prepare_splits_never_replaces_existing_splits_unless_forced(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A params file points at split files (and checks their sha256): ``prepare-splits`` into
    their folder replaced them without a word. Refused naming the folder and the files
    (nothing written) unless ``--force``."""
    tasks = _geneval_tasks(tmp_path, 10)
    out = tmp_path / "sp"
    argv = ["prepare-splits", str(tasks), "--out", str(out), "--sizes", "4,2,2,2"]
    assert _run(argv, capsys)[0] == 0
    before = {p.name: p.read_bytes() for p in out.iterdir()}
    rc, err = _run([*argv[:-1], "5,1,1", "--seed", "3"], capsys)
    assert rc == 1 and f"--out {out}:" in err and "target.jsonl" in err and "--force" in err
    assert {p.name: p.read_bytes() for p in out.iterdir()} == before
    rc, _ = _run([*argv[:-1], "5,1,1", "--seed", "3", "--force"], capsys)
    manifest = json.loads((out / "manifest.json").read_text())
    assert rc == 0 and manifest["seed"] == 3 and not (out / "test.jsonl").exists()


def test_prepare_splits_refuses_a_folder_verify_splits_would_refuse(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Another file in ``--out`` made ``prepare-splits`` succeed and ``verify-splits`` fail
    ("unknown file in a split folder"): refused up front, forced or not; the task file
    itself may lie there."""
    tasks = _geneval_tasks(tmp_path, 10)
    out = tmp_path / "sp"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    argv = ["prepare-splits", str(tasks), "--out", str(out), "--sizes", "4,2,2,2"]
    for extra in ([], ["--force"]):
        rc, err = _run([*argv, *extra], capsys)
        assert rc == 1 and "holds other files (notes.txt)" in err, err
        assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    (out / "notes.txt").unlink()
    inside = out / tasks.name
    inside.write_bytes(tasks.read_bytes())
    assert _run(["prepare-splits", str(inside), *argv[2:]], capsys)[0] == 0
    assert _run(["verify-splits", str(out)], capsys)[0] == 0


@pytest.mark.parametrize("where", ["same", "symlink", "inside"])
def test_apply_patch_never_writes_over_or_into_its_input_harness(
    where: str, repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    src = tmp_path / "h"
    shutil.copytree(repo_root / "harnesses" / "baseline", src)
    before = {p.relative_to(src): p.read_bytes() for p in src.rglob("*") if p.is_file()}
    patch = tmp_path / "patch.json"
    patch.write_text(
        json.dumps(
            {
                "responsibility": "policy",
                "ops": [{"op": "replace", "path": "/policy/params/steps", "value": 40}],
                "rationale": "more steps",
                "expected_effect": "finer detail",
            }
        )
    )
    out = {"same": src, "symlink": tmp_path / "link", "inside": src / "new"}[where]
    if where == "symlink":
        out.symlink_to(src, target_is_directory=True)
    rc, err = _run(["harness", "apply-patch", str(src), str(patch), "--output", str(out)], capsys)
    assert rc == 1 and f"--output {out}:" in err and "input harness" in err
    after = {p.relative_to(src): p.read_bytes() for p in src.rglob("*") if p.is_file()}
    assert after == before and sorted(p.name for p in src.iterdir()) == sorted(
        str(p) for p in before
    )


def test_eval_geneval_refuses_an_out_that_is_its_task_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = _geneval_tasks(tmp_path, 2)
    images = tmp_path / "images"
    images.mkdir()
    before = tasks.read_bytes()
    capsys.readouterr()
    argv = ["eval", "geneval", "--images", str(images), "--tasks", str(tasks)]
    rc, err = _run([*argv, "--out", str(tasks)], capsys)
    assert rc == 1 and f"--out {tasks}: output is the input file" in err
    assert tasks.read_bytes() == before


@pytest.mark.parametrize("where", ["split-manifest", "inside-harness"])
def test_evolve_init_never_writes_into_its_split_folder_or_harness(
    where: str, repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    tasks = _geneval_tasks(tmp_path, 7)
    splits = tmp_path / "sp"
    assert main(["prepare-splits", str(tasks), "--out", str(splits), "--sizes", "5,1,1"]) == 0
    harness = tmp_path / "h"
    shutil.copytree(repo_root / "harnesses" / "baseline", harness)
    watched = {p: p.read_bytes() for d in (splits, harness) for p in d.rglob("*") if p.is_file()}
    out = splits / "manifest.json" if where == "split-manifest" else harness / "params.json"
    capsys.readouterr()
    argv = ["evolve", "init", "--splits", str(splits), "--harness", str(harness), "--force"]
    rc, err = _run([*argv, "--out", str(out)], capsys)
    assert rc == 1 and f"--out {out}:" in err and "nothing written" in err
    now = {p: p.read_bytes() for d in (splits, harness) for p in d.rglob("*") if p.is_file()}
    assert now == watched


@pytest.mark.parametrize(
    ("line", "replacement", "needle"),
    [
        ("  max_prompt_tokens: 77", '  max_prompt_tokens: "77"', "capabilities.max_prompt_tokens"),
        ("  seedable: true", '  seedable: "yes"', "capabilities.seedable"),
        ("miss_cap: 0.6", "miss_cap: true", "miss_cap"),
    ],
    ids=["string-for-int", "string-for-bool", "bool-for-float"],
)
def test_sim_profile_wrong_type_fails_at_load_naming_file_line_field(
    line: str,
    replacement: str,
    needle: str,
    repo_root: Path,
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
) -> None:
    text = (repo_root / "evoharness" / "sim" / "profiles" / "sdxl-like.yaml").read_text()
    assert text.count(f"\n{line}\n") == 1
    lineno = text.split("\n").index(line) + 1
    prof = tmp_path / "p.yaml"
    prof.write_text(text.replace(f"\n{line}\n", f"\n{replacement}\n"))
    out = tmp_path / "x.png"
    rc, err = _run(
        ["sim", "render", "--prompt", "a car", "--out", str(out), "--profile", str(prof)], capsys
    )
    assert rc == 1 and f"{prof}:{lineno}: field {needle}:" in err
    assert not out.exists()


def test_sim_profile_exponent_float_still_reads(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evoharness.sim.profiles import load_profile

    text = (repo_root / "evoharness" / "sim" / "profiles" / "sdxl-like.yaml").read_text()
    prof = tmp_path / "p.yaml"
    prof.write_text(text.replace("\nmiss_base: 0.01\n", "\nmiss_base: 1e-2\n"))
    assert load_profile(prof) == load_profile("sdxl-like")


@pytest.mark.parametrize("where", ["same", "inside"])
def test_run_never_writes_its_results_into_the_harness(
    where: str, repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import shutil

    harness = tmp_path / "h"
    shutil.copytree(repo_root / "harnesses" / "baseline", harness)
    before = sorted(p.name for p in harness.rglob("*"))
    out = harness if where == "same" else harness / "results"
    argv = ["run", "--harness", str(harness), "--prompt", "a photo of a car", "--out", str(out)]
    rc, err = _run(argv, capsys)
    assert rc == 1 and f"--out {out}:" in err and "harness" in err
    assert sorted(p.name for p in harness.rglob("*")) == before


def test_sim_render_refuses_a_manifest_path_equal_to_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    out = tmp_path / "car.png"
    argv = ["sim", "render", "--prompt", "a photo of a car", "--out", str(out)]
    rc, err = _run([*argv, "--manifest", str(tmp_path / "." / "car.png")], capsys)
    assert rc == 2 and "--manifest" in err and "--out" in err
    assert not out.exists()


def test_sim_render_never_writes_over_its_layout(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    layout = tmp_path / "layout.json"
    layout.write_text(json.dumps([{"label": "car", "box": [0.1, 0.1, 0.6, 0.6]}]))
    before = layout.read_bytes()
    argv = ["sim", "render", "--prompt", "a photo of a car", "--layout", str(layout)]
    rc, err = _run([*argv, "--out", str(layout)], capsys)
    assert rc == 2 and "--layout" in err and layout.read_bytes() == before


def test_eval_geneval_stdout_is_only_the_json_scores(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    tasks = _geneval_tasks(tmp_path, 1)
    images = tmp_path / "images"
    images.mkdir()
    png = images / "geneval__meta__1__0.png"
    argv = ["sim", "render", "--prompt", "a photo of a car", "--out", str(png)]
    assert main(argv) == 0
    capsys.readouterr()
    assert main(["eval", "geneval", "--images", str(images), "--tasks", str(tasks)]) == 0
    out = capsys.readouterr().out
    assert out.startswith("{") and json.loads(out)["images"] == 1


def _output_argvs(tmp_path: Path, repo_root: Path, out: Path) -> dict[str, list[str]]:
    src = tmp_path / "meta.jsonl"
    src.write_text(json.dumps(GOOD_GENEVAL) + "\n")
    tasks = tmp_path / "g.jsonl"
    assert (
        main(["build-tasks", "--dataset", "geneval", "--input", str(src), "--output", str(tasks)])
        == 0
    )
    patch = tmp_path / "p.json"
    op = {"op": "replace", "path": "/policy/params/steps", "value": 20}
    patch.write_text(json.dumps({"responsibility": "policy", "ops": [op]}))
    base = str(repo_root / "harnesses" / "baseline")
    return {
        "build-tasks": [
            "build-tasks",
            "--dataset",
            "geneval",
            "--input",
            str(src),
            "--output",
            str(out),
        ],
        "prepare-splits": ["prepare-splits", str(tasks), "--out", str(out), "--sizes", "1,0,0"],
        "run": ["run", "--harness", base, "--prompt", "a cat", "--out", str(out), "--no-verify"],
        "apply-patch": ["harness", "apply-patch", base, str(patch), "--output", str(out)],
        "sim render": ["sim", "render", "--prompt", "a cat", "--out", str(out)],
        "evolve init": [
            "evolve",
            "init",
            "--splits",
            str(tmp_path),
            "--out",
            str(out.with_suffix(".json")),
        ],
    }


@pytest.mark.parametrize(
    "command",
    ["build-tasks", "prepare-splits", "run", "apply-patch", "sim render", "evolve init"],
)
def test_an_output_whose_parent_folder_is_missing_is_refused(
    tmp_path: Path, repo_root: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    """``--output /nonexistent_dir/x`` created ``/nonexistent_dir`` silently: every command's
    output (file or folder) needs its parent folder to exist; one line names it, nothing is
    created."""
    missing = tmp_path / "nonexistent_dir"
    out = missing / "x.jsonl"
    argv = _output_argvs(tmp_path, repo_root, out)[command]
    out = Path(argv[argv.index("--out" if "--out" in argv else "--output") + 1])
    capsys.readouterr()
    rc, err = _run(argv, capsys)
    assert rc == 1, err
    [line] = [ln for ln in err.strip().splitlines() if ln.startswith("error:")]
    assert f"{out}: the folder {missing} does not exist" in line, err
    assert not missing.exists()


def test_evolve_report_out_needs_an_existing_parent(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """``evolve report --out`` is refused before S3 is read when its folder's parent is
    missing, like every other CLI output (no folder tree is created)."""
    monkeypatch.setenv("EVOHARNESS_S3__ENDPOINT", "127.0.0.1:9")  # never reached
    out = tmp_path / "missing" / "report"
    rc, err = _run(["evolve", "report", "r1", "--out", str(out)], capsys)
    assert rc == 1 and f"--out {out}: the folder {out.parent} does not exist" in err
    assert not out.parent.exists()


def test_run_refuses_a_non_empty_out_that_is_not_a_previous_run(
    repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``run --out DIR`` wrote into a folder of other files, mixing its results with them:
    refused naming the folder (nothing written) unless ``--force``; a previous run's own
    output folder is replaced without asking."""
    out = tmp_path / "results"
    out.mkdir()
    (out / "notes.txt").write_text("mine\n")
    base = str(repo_root / "harnesses" / "baseline")
    argv = ["run", "--harness", base, "--prompt", "a cat", "--out", str(out), "--no-verify"]
    rc, err = _run(argv, capsys)
    assert rc == 1 and f"--out {out}:" in err and "notes.txt" in err and "--force" in err
    assert sorted(p.name for p in out.iterdir()) == ["notes.txt"]
    rc, _ = _run([*argv, "--force"], capsys)
    assert rc == 0 and (out / "result.json").is_file() and (out / "notes.txt").read_text()
    again = tmp_path / "again"
    assert _run([*argv[:-2], str(again), "--no-verify"], capsys)[0] == 0
    assert _run([*argv[:-2], str(again), "--no-verify"], capsys)[0] == 0  # a previous run's
    assert sorted(p.name for p in again.iterdir()) == sorted(
        ["image.png", "program.json", "trace.json", "result.json"]
    )
