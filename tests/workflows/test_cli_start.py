"""``evoharness evolve start`` as a new user runs it: the installed command in its own process,
against a real Temporal dev server (issue 14, tried from the README)."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from pathlib import Path
from typing import Any

import pytest

from evoharness.harness import load_dir
from evoharness.tasks.synthetic import build_synthetic
from workflows.params import EvolutionParams, HarnessRef, Splits, TaskSource

pytestmark = pytest.mark.asyncio(loop_scope="session")


def _params(path: Path, run_id: str, repo_root: Path) -> Path:
    tasks = build_synthetic(seed=0, count=1)
    p = EvolutionParams(
        run_id=run_id,
        harness=HarnessRef(document=load_dir(repo_root / "harnesses" / "baseline").to_document()),
        splits=Splits(target=TaskSource(tasks=tasks)),
        seeds=[0],
        max_rounds=1,
    )
    path.write_text(p.model_dump_json())
    return path


def _evoharness(*args: str) -> subprocess.CompletedProcess[str]:
    """``python -m evoharness_app ARGS`` in a process of its own (as the installed script runs)."""
    return subprocess.run(
        [sys.executable, "-m", "evoharness_app", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )


async def test_start_exits_cleanly_and_a_second_start_is_named(
    temporal_env: Any, tmp_path: Path, repo_root: Path
) -> None:
    """A started run exits 0 without CPython aborting at shutdown (the Temporal client's core
    threads crashed finalization about half the time: exit 134, "Fatal Python error"); starting
    the same run again is a one-line error naming the run, not a traceback. The task queue has
    no worker, so nothing runs; the runs are terminated at the end."""
    address = temporal_env.client.service_client.config.target_host
    queue = f"nobody-{uuid.uuid4().hex[:8]}"
    run_ids = [f"start-{uuid.uuid4().hex[:8]}" for _ in range(4)]
    try:
        for rid in run_ids:
            params = _params(tmp_path / f"{rid}.json", rid, repo_root)
            res = _evoharness(
                "evolve", "start", str(params), "--address", address, "--task-queue", queue
            )
            assert res.returncode == 0, res.stderr[-2000:]
            assert "Fatal Python error" not in res.stderr
            assert f"started evolve-{rid}" in res.stdout
        again = _evoharness(
            "evolve",
            "start",
            str(tmp_path / f"{run_ids[0]}.json"),
            "--address",
            address,
            "--task-queue",
            queue,
        )
        assert again.returncode == 1
        assert f"run '{run_ids[0]}' was already started" in again.stderr
        assert "Traceback" not in again.stderr and "Fatal Python error" not in again.stderr
    finally:
        for rid in run_ids:
            try:
                await temporal_env.client.get_workflow_handle(f"evolve-{rid}").terminate("test")
            except Exception:  # noqa: BLE001 - never started
                pass
