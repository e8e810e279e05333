"""``evoharness evolve status`` against a real Temporal dev server: a failed run is reported
as failed, with its error, and exits non-zero; a finished run shows its result; an unknown
run is bad input; the command's import path carries no scipy/numpy (it must answer fast)."""

from __future__ import annotations

import asyncio
import json
import os
import subprocess
import sys
import uuid
from typing import Any

import pytest
from temporalio.client import WorkflowFailureError

from tests.workflows.conftest import ROOT, make_params, run_in_process, settings_for
from workflows.params import HarnessRef


def _cli(*argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    return subprocess.run(
        [sys.executable, "-m", "evoharness_app", *argv],
        capture_output=True,
        text=True,
        timeout=120,
        env=env,
        cwd=ROOT,
    )


def test_status_imports_no_scipy_or_numpy() -> None:
    code = (
        "import sys\n"
        "from evoharness_app.cli import app\n"
        "import evoharness_app.commands.evolve, workflows.status, services.stack\n"
        "heavy = sorted(m for m in ('scipy', 'numpy', 'workflows.evolution') if m in sys.modules)\n"
        "print(heavy)\n"
    )
    out = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        timeout=120,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        check=True,
    )
    assert out.stdout.strip() == "[]", out.stdout + out.stderr


@pytest.mark.asyncio(loop_scope="session")
async def test_failed_run_is_reported_failed_with_its_error(
    temporal_env: Any, s3_server: Any, split: Any
) -> None:
    from services.storage.s3 import S3ArtifactStore

    bucket = f"evo-st-{uuid.uuid4().hex[:10]}"
    settings = settings_for(s3_server, bucket)
    S3ArtifactStore.from_settings(settings.s3).ensure_bucket()
    rid = f"stfail-{uuid.uuid4().hex[:6]}"
    params = make_params(rid, split)
    params = params.model_copy(update={"harness": HarnessRef(uri="file:///nonexistent/harness")})
    with pytest.raises(WorkflowFailureError):
        await asyncio.wait_for(run_in_process(temporal_env.client, settings, params), 60)
    address = temporal_env.client.service_client.config.target_host
    proc = await asyncio.to_thread(_cli, "evolve", "status", rid, "--address", address)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    state = json.loads(proc.stdout)
    assert state["status"] == "failed" and state["run_id"] == rid
    assert "does not exist" in state["error"] and "/nonexistent/harness" in state["error"]
    assert f"run {rid} failed" in proc.stderr

    proc = await asyncio.to_thread(_cli, "evolve", "status", "never-started", "--address", address)
    assert proc.returncode == 1 and "no run 'never-started'" in proc.stderr


def test_progress_has_no_scores_until_a_round_finished() -> None:
    """The starting harness enters the frontier unmeasured (pass rate 0.0): while round 1
    runs the query has no scores, and ``evolve status`` says no round finished yet (a worker
    from before reported ``best_target_pass_rate: 0.0``)."""
    from evoharness.trace.frontier import FrontierEntry
    from workflows.evolution import EvolutionWorkflow
    from workflows.status import NO_ROUND_YET, run_status

    wf = EvolutionWorkflow()
    entry = FrontierEntry(harness_id="a" * 64, document={}, target_pass_rate=0.0, round=0)
    wf.state.frontier = wf.state.frontier.push(entry)
    wf.phase = "round"
    p = wf.progress()
    assert p.round == 1 and p.scores == {}
    wf.state.round = 1
    wf.state.frontier = wf.state.frontier.push(entry.model_copy(update={"target_pass_rate": 0.4}))
    assert wf.progress().scores == {"best_target_pass_rate": 0.4}

    class Handle:  # what run_status reads of a running run's handle
        def __init__(self, progress: dict[str, Any]) -> None:
            self.progress = progress

        async def describe(self) -> Any:
            from temporalio.client import WorkflowExecutionStatus

            return type("D", (), {"status": WorkflowExecutionStatus.RUNNING})()

        async def query(self, name: str, rpc_timeout: Any = None) -> dict[str, Any]:
            assert name == "progress"
            return self.progress

    class Client:
        def __init__(self, progress: dict[str, Any]) -> None:
            self.handle = Handle(progress)

        def get_workflow_handle(self, wid: str) -> Handle:
            return self.handle

    old_worker = {"round": 1, "phase": "execute", "scores": {"best_target_pass_rate": 0.0}}
    state = asyncio.run(run_status(Client({**old_worker, "decisions": []}), "r"))  # type: ignore[arg-type]
    assert state["note"] == NO_ROUND_YET and state["progress"]["scores"] == {}
    done = {"round": 2, "scores": {"best_target_pass_rate": 0.4}, "decisions": [{"round": 1}]}
    state = asyncio.run(run_status(Client(done), "r"))  # type: ignore[arg-type]
    assert "note" not in state and state["progress"]["scores"] == {"best_target_pass_rate": 0.4}
