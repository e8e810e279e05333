"""``evoharness evolve main`` (``make evolve``) as a separate process: bad input is refused
before anything starts (issue 27 item 11), and two jobs on one stack folder do not collide
(item 10). Each test checks that no process, stack state or run folder is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _evolve_main(cwd: Path, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[str]:
    """``python -m evoharness_app evolve main ARGS`` started in ``cwd`` (so ``runs/`` and the
    default stack folder ``runs/stack`` are under it)."""
    return subprocess.Popen(
        [sys.executable, "-m", "evoharness_app", "evolve", "main", "--run-id", "r1", *args],
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})},
    )


def test_a_missing_shared_folder_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """`EVOHARNESS_SHARED=/nonexistent make evolve` started the whole stack (25 s), then died
    with a traceback and left the run folder: one line, exit 1, nothing started or left."""
    t0 = time.monotonic()
    proc = _evolve_main(tmp_path, env={"EVOHARNESS_SHARED": str(tmp_path / "nonexistent")})
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, (out, err)
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    assert "EVOHARNESS_SHARED" in line and str(tmp_path / "nonexistent") in line, line
    assert "starting the local stack" not in out
    assert not (tmp_path / "runs").exists(), list((tmp_path / "runs").rglob("*"))
    assert time.monotonic() - t0 < 60


def test_a_shared_folder_without_geneval_is_named(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "data").mkdir(parents=True)
    proc = _evolve_main(tmp_path, env={"EVOHARNESS_SHARED": str(shared)})
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 1, (out, err)
    [line] = err.strip().splitlines()
    assert "evaluation_metadata.jsonl" in line and "not found" in line, line
    assert not (tmp_path / "runs").exists()
