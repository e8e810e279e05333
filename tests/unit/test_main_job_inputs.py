"""``evoharness evolve main`` (``make evolve``) as a separate process: bad input is refused
before anything starts (issue 27 item 11), and two jobs on one stack folder do not collide
(item 10). Each test checks that no process, stack state or run folder is left behind."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

from tests.conftest import SHARED

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


def _finish(proc: subprocess.Popen[str]) -> tuple[str, str]:
    """Its stdout and stderr once it has exited with code 1 (killed after 120 s)."""
    try:
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 1, (out, err)
    return out, err


def test_a_missing_shared_folder_is_refused_before_anything_starts(tmp_path: Path) -> None:
    """`EVOHARNESS_SHARED=/nonexistent make evolve` started the whole stack (25 s), then died
    with a traceback and left the run folder: one line, exit 1, nothing started or left."""
    t0 = time.monotonic()
    out, err = _finish(
        _evolve_main(tmp_path, env={"EVOHARNESS_SHARED": str(tmp_path / "nonexistent")})
    )
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    assert "EVOHARNESS_SHARED" in line and str(tmp_path / "nonexistent") in line, line
    assert "starting the local stack" not in out
    assert not (tmp_path / "runs").exists(), list((tmp_path / "runs").rglob("*"))
    assert time.monotonic() - t0 < 60


def test_a_shared_folder_without_geneval_is_named(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    (shared / "data").mkdir(parents=True)
    out, err = _finish(_evolve_main(tmp_path, env={"EVOHARNESS_SHARED": str(shared)}))
    [line] = err.strip().splitlines()
    assert "evaluation_metadata.jsonl" in line and "not found" in line, line
    assert not (tmp_path / "runs").exists()


def test_a_second_job_on_a_held_stack_folder_is_refused_in_one_line(tmp_path: Path) -> None:
    """Two `make evolve` at once: the second died with a 99-line traceback (SQLITE_BUSY in
    Temporal's file) and left an empty run folder. A job holds its stack folder's lock for its
    life (here this test process holds it, as a running job would); another job says so in one
    line with the holder's PID, exit 1, and starts and writes nothing."""
    from services import stack

    stack_dir = tmp_path / "runs" / "stack"
    with stack.job_lock(stack_dir):
        out, err = _finish(_evolve_main(tmp_path, env={"EVOHARNESS_SHARED": str(SHARED)}))
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    assert f"another job holds the stack folder {stack_dir}" in line, line
    assert f"pid {os.getpid()}" in line, line
    assert "starting the local stack" not in out
    assert sorted(p.name for p in (tmp_path / "runs").iterdir()) == ["stack"]  # no run folder
    assert not (stack_dir / stack.STATE_FILE).exists()
    # released with its holder: the next job takes it
    with stack.job_lock(stack_dir):
        pass


def test_the_job_lock_is_not_inherited_by_what_the_job_starts(tmp_path: Path) -> None:
    """A stack the job leaves running (--keep-stack) must not keep the lock: the next job
    reuses that stack. A child process started while the lock is held does not hold it."""
    from services import stack

    with stack.job_lock(tmp_path):
        child = subprocess.Popen([sys.executable, "-c", "import time; time.sleep(30)"])
    try:
        with stack.job_lock(tmp_path):
            pass
    finally:
        child.kill()
        child.wait()
