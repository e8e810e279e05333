"""Ctrl-C during ``evoharness evolve main``'s evolution: the job ends its run (the workflow is
terminated, so it does not carry on unseen at the next ``evoharness up``) and says so in one
line. A real SIGINT against the Temporal dev server; no worker, so the run just waits."""

from __future__ import annotations

import asyncio
import io
import signal
import uuid
from pathlib import Path
from typing import Any

import pytest
from rich.console import Console
from temporalio.client import WorkflowExecutionStatus

from evoharness.harness import load_dir
from evoharness.tasks.synthetic import build_synthetic
from evoharness_app.main_job import MainJob, MainJobOptions
from workflows.params import EvolutionParams, HarnessRef, Splits, TaskSource


class _Stack:
    """The one thing ``MainJob.evolve`` asks of the stack's state: Temporal's address."""

    def __init__(self, temporal: str) -> None:
        self.temporal = temporal

    def address(self, name: str) -> str:
        assert name == "temporal"
        return self.temporal


class _CtrlCWhenStarted(io.StringIO):
    """Console output that presses Ctrl-C (SIGINT to this process) once the job says the
    workflow has started."""

    def write(self, s: str) -> int:
        n = super().write(s)
        if "started workflow" in s:
            signal.raise_signal(signal.SIGINT)
        return n


def test_ctrl_c_terminates_the_run_and_says_so(temporal_env: Any, repo_root: Path) -> None:
    address = temporal_env.client.service_client.config.target_host
    run_id = f"ctrlc-{uuid.uuid4().hex[:8]}"
    params = EvolutionParams(
        run_id=run_id,
        harness=HarnessRef(document=load_dir(repo_root / "harnesses" / "baseline").to_document()),
        splits=Splits(target=TaskSource(tasks=build_synthetic(seed=0, count=1))),
        seeds=[0],
        max_rounds=1,
    )
    out = _CtrlCWhenStarted()
    job = MainJob(MainJobOptions(), console=Console(file=out, width=300))
    with pytest.raises(KeyboardInterrupt):
        job.evolve(_Stack(address), params)
    lines = [ln for ln in out.getvalue().splitlines() if "interrupted" in ln]
    assert lines == [
        f"interrupted: run {run_id} terminated (workflow evolve-{run_id}); nothing was "
        "evaluated or promoted"
    ], out.getvalue()

    async def status() -> Any:
        return (await temporal_env.client.get_workflow_handle(f"evolve-{run_id}").describe()).status

    assert asyncio.run(status()) is WorkflowExecutionStatus.TERMINATED
