"""Bad input to the local-stack verbs: one-line errors, exit 1, nothing started."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoharness.cli import main


@pytest.mark.parametrize("verb", ["status", "down", "env"])
def test_corrupt_state_file_is_named(verb: str, tmp_path: Path, capsys) -> None:
    (tmp_path / "state.json").write_text("{not json")
    assert main([verb, "--run-dir", str(tmp_path)]) == 1
    err = capsys.readouterr().err
    assert "state.json is not a stack state file" in err and "Traceback" not in err


def test_run_dir_that_is_a_file_is_refused(tmp_path: Path, capsys) -> None:
    f = tmp_path / "file"
    f.write_text("x")
    assert main(["up", "--run-dir", str(f)]) == 1
    assert "is not a directory" in capsys.readouterr().err
    assert f.read_text() == "x"


def test_status_and_env_without_a_stack(tmp_path: Path, capsys) -> None:
    assert main(["status", "--run-dir", str(tmp_path)]) == 1
    assert "no stack is running" in capsys.readouterr().out
    assert main(["env", "--run-dir", str(tmp_path)]) == 1
    assert "no stack is running" in capsys.readouterr().err
    assert main(["down", "--run-dir", str(tmp_path)]) == 0
