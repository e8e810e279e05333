"""CLI exit codes: 0 ok, 1 bad input, 2 bad usage (build-tasks, splits, harness verbs)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from evoharness.harness import harness_id, load_dir
from evoharness.tasks.io import load_tasks
from evoharness_app.cli import main

VERBS = [
    ["build-tasks"],
    ["prepare-splits"],
    ["verify-splits"],
    ["harness"],
    ["harness", "validate"],
    ["harness", "hash"],
    ["harness", "diff"],
    ["harness", "apply-patch"],
]


@pytest.mark.parametrize("verb", VERBS, ids=" ".join)
def test_help_on_every_verb(verb: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    assert main([*verb, "--help"]) == 0
    assert "Usage" in capsys.readouterr().out


def test_build_tasks_and_splits_end_to_end(
    shared_dir: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = shared_dir / "data"
    g, p = tmp_path / "g.jsonl", tmp_path / "p.jsonl"
    rc = main(
        [
            "build-tasks",
            "--dataset",
            "geneval",
            "--input",
            str(data / "geneval" / "evaluation_metadata.jsonl"),
            "--output",
            str(g),
        ]
    )
    assert rc == 0 and len(load_tasks(g)) == 553
    rc = main(
        [
            "build-tasks",
            "--dataset",
            "partiprompts",
            "--input",
            str(data / "partiprompts" / "PartiPrompts.tsv"),
            "--output",
            str(p),
        ]
    )
    out = capsys.readouterr().out
    assert rc == 0 and "read 1632 rows" in out and "dropped 1 duplicate" in out
    assert main(["prepare-splits", str(g), str(p), "--out", str(tmp_path / "s")]) == 0
    assert main(["verify-splits", str(tmp_path / "s")]) == 0
    assert "ok: target 500, heldout 100, preservation 100, test 100" in capsys.readouterr().out
    with open(tmp_path / "s" / "preservation.jsonl", "r+b") as fh:
        fh.seek(20)
        b = fh.read(1)
        fh.seek(20)
        fh.write(b"x" if b != b"x" else b"y")
    assert main(["verify-splits", str(tmp_path / "s" / "manifest.json")]) == 1
    assert "preservation.jsonl" in capsys.readouterr().err
    # three sizes: no test split, and the command says what that means
    assert main(["prepare-splits", str(g), "--out", str(tmp_path / "t3"), "--sizes", "6,2,2"]) == 0
    out = capsys.readouterr().out
    assert "no test split (three sizes given)" in " ".join(out.split())
    assert not (tmp_path / "t3" / "test.jsonl").exists()


def test_malformed_input_exits_1_and_writes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    src = tmp_path / "meta.jsonl"
    row = {"tag": "single_object", "include": [{"class": "cup", "count": 1}], "prompt": "a cup"}
    src.write_text(json.dumps(row) + "\n{broken\n", encoding="utf-8")
    out = tmp_path / "tasks.jsonl"
    rc = main(["build-tasks", "--dataset", "geneval", "--input", str(src), "--output", str(out)])
    assert rc == 1
    assert f"{src}:2: invalid JSON" in capsys.readouterr().err
    assert not out.exists() and sorted(p.name for p in tmp_path.iterdir()) == ["meta.jsonl"]
    # An existing output is left as it was.
    out.write_text("previous\n")
    assert (
        main(["build-tasks", "--dataset", "geneval", "--input", str(src), "--output", str(out)])
        == 1
    )
    assert out.read_text() == "previous\n"


@pytest.mark.parametrize(
    "argv",
    [
        ["build-tasks", "--dataset", "nope", "--input", "x", "--output", "y"],
        ["build-tasks", "--dataset", "geneval", "--output", "y"],  # --input missing
        ["build-tasks", "--input", "x"],
        ["prepare-splits", "a.jsonl", "--out", "o", "--sizes", "5,1"],
        ["harness", "frobnicate"],
        ["no-such-verb"],
    ],
)
def test_bad_usage_exits_2(argv: list[str]) -> None:
    assert main(argv) == 2


def test_harness_verbs(repo_root: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    base = repo_root / "harnesses" / "baseline"
    assert main(["harness", "validate", str(base)]) == 0
    assert main(["harness", "hash", str(base)]) == 0
    out = capsys.readouterr().out
    assert out.strip().splitlines()[-1] == harness_id(load_dir(base))

    patch = tmp_path / "p.json"
    patch.write_text(
        json.dumps(
            {
                "responsibility": "middleware",
                "ops": [
                    {"op": "add", "path": "/middleware/stages/-", "value": {"kind": "best_of_n"}}
                ],
            }
        )
    )
    new = tmp_path / "new"
    assert main(["harness", "apply-patch", str(base), str(patch), "--output", str(new)]) == 0
    assert load_dir(new).middleware.stages[0].kind == "best_of_n"
    capsys.readouterr()
    assert main(["harness", "diff", str(base), str(new)]) == 0
    grouped = json.loads(capsys.readouterr().out)
    assert list(grouped) == ["middleware"]

    patch.write_text(
        json.dumps(
            {"responsibility": "memory", "ops": [{"op": "add", "path": "/policy/x", "value": 1}]}
        )
    )
    assert main(["harness", "apply-patch", str(base), str(patch)]) == 1
    assert "outside the boundary contract of memory" in capsys.readouterr().err
    bad = tmp_path / "bad"
    bad.mkdir()
    (bad / "harness.yaml").write_text("schema_version: 0\n")
    assert main(["harness", "validate", str(bad)]) == 1
    assert "schema_version 0" in capsys.readouterr().err


def test_console_script_subprocess(repo_root: Path, tmp_path: Path) -> None:
    exe = repo_root / ".venv" / "bin" / "evoharness"
    if not exe.exists():
        pytest.skip(f"{exe} not installed (make venv)")
    ok = subprocess.run(
        [str(exe), "harness", "hash", str(repo_root / "harnesses" / "baseline")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert ok.returncode == 0, ok.stderr
    assert len(ok.stdout.strip()) == 64
    bad = subprocess.run(
        [str(exe), "verify-splits", str(tmp_path / "missing")],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert bad.returncode == 1 and "cannot read" in bad.stderr
    usage = subprocess.run([str(exe), "build-tasks"], capture_output=True, text=True, timeout=120)
    assert usage.returncode == 2


def test_build_tasks_multiref_is_generated(tmp_path: Path) -> None:
    """``build-tasks --dataset multiref`` as the docs write it: no ``--input`` (refused with
    exit 2 when given), ``--count`` defaults to 12 and ``--seed`` drives it."""
    out = tmp_path / "mr.jsonl"
    assert main(["build-tasks", "--dataset", "multiref", "--output", str(out)]) == 0
    tasks = load_tasks(out)
    assert len(tasks) == 12 and all(t.references for t in tasks)
    rc = main(["build-tasks", "--dataset", "multiref", "--count", "3", "--seed", "5",
               "--output", str(out)])  # fmt: skip
    assert rc == 0 and [t.task_id for t in load_tasks(out)] == [f"multiref/5/{i}" for i in range(3)]
    given = tmp_path / "x.jsonl"
    given.write_text("{}\n")
    rc = main(["build-tasks", "--dataset", "multiref", "--input", str(given),
               "--output", str(tmp_path / "y.jsonl")])  # fmt: skip
    assert rc == 2 and not (tmp_path / "y.jsonl").exists()


@pytest.mark.parametrize("dataset", ["synthetic", "multiref"])
def test_build_tasks_count_above_the_limit_is_refused(
    dataset: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """``--count 1000000`` ran for minutes without a word: above ``MAX_GENERATED_COUNT`` it is a
    usage error (exit 2) naming the flag and the limit, before anything is generated."""
    from evoharness_app.commands.tasks import MAX_GENERATED_COUNT

    out = tmp_path / "t.jsonl"
    argv = ["build-tasks", "--dataset", dataset, "--count", "1000000", "--output", str(out)]
    assert main(argv) == 2
    err = " ".join(capsys.readouterr().err.replace("│", " ").split())
    assert "--count" in err and str(MAX_GENERATED_COUNT) in err and not out.exists()
