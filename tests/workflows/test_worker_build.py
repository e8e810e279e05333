"""``workflows.worker.build_worker``: the one construction of an evolution worker (the
deployed worker, ``evolve local``, the benches and the tests): its task queue and an activity
thread pool as large as the activities it takes at once."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from workflows.worker import build_worker, local_worker_settings, running_worker

pytestmark = pytest.mark.asyncio(loop_scope="session")


async def test_build_worker_polls_the_queue_asked_for_with_one_thread_per_activity(
    temporal_env: Any, tmp_path: Path
) -> None:
    settings = local_worker_settings(tmp_path / "store", threads=3)
    worker, ex = build_worker(temporal_env.client, settings)
    try:
        assert worker.task_queue == settings.worker.task_queue == "evoharness"
        cfg = worker.config()
        assert cfg["max_concurrent_activities"] == 3 == ex._max_workers
        assert cfg["activity_executor"] is ex
    finally:
        ex.shutdown()
    queue = f"q-{uuid.uuid4().hex[:8]}"
    async with running_worker(temporal_env.client, settings, task_queue=queue) as running:
        assert running.task_queue == queue and not running.is_shutdown
    assert running.is_shutdown
    # None keeps WorkerSection's defaults, which are equal too
    default = local_worker_settings(tmp_path / "d").worker
    assert default.activity_threads == default.max_concurrent_activities
