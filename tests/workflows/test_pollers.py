"""The worker's health in ``evoharness status`` is Temporal's own view of its task queue
(issue 27 item 13f: the worker row showed Temporal's address and a health column that only
said its PID existed). Against the real Temporal dev server (``temporal_env``) with a real
in-process ``Worker``: no poller before it runs, both sides polled while it runs; the CLI's
worker row names the task queue and the pollers, and says so when Temporal does not answer."""

from __future__ import annotations

import asyncio
import os
import time
import uuid
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from temporalio import activity, workflow
from temporalio.worker import Worker

from evoharness_app.cli import main
from services import stack
from services.common.process import free_port
from workflows.params import TASK_QUEUE


@activity.defn
async def _noop() -> str:
    return "ok"


@workflow.defn(sandboxed=False)
class _Noop:
    @workflow.run
    async def run(self) -> str:
        return str(
            await workflow.execute_activity(_noop, start_to_close_timeout=timedelta(seconds=10))
        )


async def _until_healthy(client: Any, queue: str, timeout: float = 60.0) -> Any:
    from workflows.pollers import describe_pollers

    deadline = time.monotonic() + timeout
    while True:
        seen = await describe_pollers(client, queue)
        if seen.healthy or time.monotonic() > deadline:
            return seen
        await asyncio.sleep(0.2)


@pytest.mark.asyncio(loop_scope="session")
async def test_pollers_of_a_queue_with_and_without_a_worker(temporal_env: Any) -> None:
    from workflows.pollers import describe_pollers

    client = temporal_env.client
    queue = f"pollers-{uuid.uuid4().hex[:8]}"
    idle = await describe_pollers(client, queue)
    assert (idle.workflow, idle.activity, idle.healthy) == (0, 0, False)
    assert "NOT polling" in idle.summary() and queue in idle.summary()
    async with Worker(client, task_queue=queue, workflows=[_Noop], activities=[_noop]):
        seen = await _until_healthy(client, queue)
        assert seen.healthy and seen.workflow >= 1 and seen.activity >= 1, seen
        assert seen.summary().startswith("polling:") and seen.identities
    # a poller long gone no longer counts (the server keeps listing it for minutes)
    later = await describe_pollers(client, queue, now=_utc_in(3600))
    assert not later.healthy


def _utc_in(seconds: float) -> Any:
    from datetime import UTC, datetime

    return datetime.now(UTC) + timedelta(seconds=seconds)


def _worker_state(run_dir: Path, temporal_address: str) -> None:
    state = stack.StackState(run_dir=str(run_dir), started_at=0.0)
    state.components["worker"] = stack.Component("worker", os.getpid(), temporal_address)
    (run_dir / stack.STATE_FILE).write_text(state.to_json())


@pytest.mark.asyncio(loop_scope="session")
async def test_status_shows_the_worker_queue_and_its_pollers(
    temporal_env: Any, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    client = temporal_env.client
    address = client.service_client.config.target_host
    _worker_state(tmp_path, address)
    async with Worker(client, task_queue=TASK_QUEUE, workflows=[_Noop], activities=[_noop]):
        assert (await _until_healthy(client, TASK_QUEUE)).healthy
        rc = await asyncio.to_thread(main, ["status", "--run-dir", str(tmp_path)])
    out = capsys.readouterr().out
    assert rc == 0, out
    row = next(line for line in out.splitlines() if line.startswith("worker"))
    assert f"task queue {TASK_QUEUE}" in row and address in row, row
    assert "polling:" in row and "workflow" in row and "activity" in row, row


def test_status_says_when_temporal_does_not_answer(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _worker_state(tmp_path, f"127.0.0.1:{free_port()}")  # nothing listens there
    assert main(["status", "--run-dir", str(tmp_path)]) == 1
    row = next(line for line in capsys.readouterr().out.splitlines() if line.startswith("worker"))
    assert "Temporal" in row and "not answer" in row, row
