"""Outputs that would clobber an input, land in the wrong place or be silently changed: a
new user's tries through the CLI (one-line error, exit 1, nothing written)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evoharness_app.cli import main

GOOD_GENEVAL = {
    "tag": "single_object",
    "include": [{"class": "car", "count": 1}],
    "prompt": "a photo of a car",
}


def _run(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(argv)
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err
    return rc, cap.out + cap.err


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
