"""``evoharness evolve start`` as a new user runs it: the installed command in its own process,
against a real Temporal dev server (issue 14, tried from the README)."""

from __future__ import annotations

import asyncio
import contextlib
import os
import subprocess
import sys
import uuid
from collections.abc import AsyncIterator
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


@pytest.mark.slow  # minutes on 2 cores; `make test-all` runs it (15-minute default run)
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


async def _evoharness_async(*args: str) -> asyncio.subprocess.Process:
    """``python -m evoharness_app ARGS`` started in its own process, without blocking the loop
    (the test's worker and client share it)."""
    return await asyncio.create_subprocess_exec(
        sys.executable,
        "-m",
        "evoharness_app",
        *args,
        stdout=asyncio.subprocess.PIPE,
        stderr=asyncio.subprocess.PIPE,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )


@contextlib.asynccontextmanager
async def _worker(client: Any, queue: str, store_dir: Path) -> AsyncIterator[None]:
    """A real worker of the evolution workflows on ``queue`` (embedded world, local store in
    ``store_dir``) for the ``async with`` block."""
    from workflows.worker import local_worker_settings, running_worker

    async with running_worker(
        client, local_worker_settings(store_dir, threads=2), task_queue=queue
    ):
        yield


async def _finish(proc: asyncio.subprocess.Process) -> tuple[int, str, str]:
    out, err = await asyncio.wait_for(proc.communicate(), 120)
    assert proc.returncode is not None
    return proc.returncode, out.decode(), err.decode()


async def test_start_wait_on_a_terminated_run_says_so_in_one_line(
    temporal_env: Any, tmp_path: Path, repo_root: Path
) -> None:
    """``evolve start --wait`` on a run terminated while it waits: exit 1 and one line with the
    run id and the termination reason (it printed the WorkflowFailureError's traceback)."""
    address = temporal_env.client.service_client.config.target_host
    rid = f"term-{uuid.uuid4().hex[:8]}"
    params = _params(tmp_path / "p.json", rid, repo_root)
    queue = f"nobody-{uuid.uuid4().hex[:8]}"  # no worker: the run waits until terminated
    proc = await _evoharness_async(
        "evolve", "start", str(params), "--address", address, "--task-queue", queue, "--wait"
    )
    handle = temporal_env.client.get_workflow_handle(f"evolve-{rid}")
    try:
        for _ in range(600):
            try:
                await handle.describe()
                break
            except Exception:  # noqa: BLE001 - not started yet
                await asyncio.sleep(0.1)
        await handle.terminate(reason="operator ended it")
        rc, out, err = await _finish(proc)
    finally:
        if proc.returncode is None:
            proc.kill()
    assert rc == 1, err[-2000:]
    assert "Traceback" not in err
    assert err.strip().splitlines() == [f"error: run {rid} was terminated: operator ended it"]
    assert f"started evolve-{rid}" in out


async def test_start_wait_on_a_failed_run_says_why_in_one_line(
    temporal_env: Any, tmp_path: Path, repo_root: Path
) -> None:
    """A run that fails (its harness does not exist: the worker's non-retryable bad input):
    ``--wait`` exits 1 with one line naming the run and the failure's chain of causes."""
    address = temporal_env.client.service_client.config.target_host
    rid = f"fail-{uuid.uuid4().hex[:8]}"
    doc = EvolutionParams.model_validate_json(
        _params(tmp_path / "p.json", rid, repo_root).read_text()
    )
    doc = doc.model_copy(update={"harness": HarnessRef(uri="file:///nonexistent/harness")})
    params = tmp_path / "bad.json"
    params.write_text(doc.model_dump_json())
    queue = f"fail-{uuid.uuid4().hex[:8]}"
    async with _worker(temporal_env.client, queue, tmp_path / "s"):
        proc = await _evoharness_async(
            "evolve",
            "start",
            str(params),
            "--address",
            address,
            "--task-queue",
            queue,
            "--wait",
            "--remote-paths",
        )
        try:
            rc, out, err = await _finish(proc)
        finally:
            if proc.returncode is None:
                proc.kill()
    assert rc == 1, err[-2000:]
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    assert line.startswith(f"error: run {rid} failed: ") and "does not exist" in line, line


async def test_a_completed_run_cannot_be_started_again(
    temporal_env: Any, tmp_path: Path, repo_root: Path
) -> None:
    """Issue 27 item 4: ``evolve start`` on a run that has completed started a second Temporal
    run of it (the SDK's default id reuse policy allows a closed id again), though the README
    says it refuses. The run completes on a real worker (1 task, 1 seed, 1 round in the
    embedded world); the second start exits 1 with one line naming the run and that it
    completed, and Temporal holds one run of it."""
    address = temporal_env.client.service_client.config.target_host
    rid = f"done-{uuid.uuid4().hex[:8]}"
    params = _params(tmp_path / "p.json", rid, repo_root)
    queue = f"done-{uuid.uuid4().hex[:8]}"
    args = ("evolve", "start", str(params), "--address", address, "--task-queue", queue)
    async with _worker(temporal_env.client, queue, tmp_path / "s"):
        rc, out, err = await _finish(await _evoharness_async(*args, "--wait"))
        assert rc == 0, err[-2000:]
        rc, out, err = await _finish(await _evoharness_async(*args))
    assert rc == 1, out
    assert "Traceback" not in err
    [line] = err.strip().splitlines()
    assert f"run '{rid}' was already started" in line and "completed" in line, line
    runs = [w async for w in temporal_env.client.list_workflows(f"WorkflowId = 'evolve-{rid}'")]
    assert len(runs) == 1, [r.run_id for r in runs]
