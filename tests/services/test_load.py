"""Behaviour under load (``bench/load_bench.py`` functions against the real stack of
``evoharness serve`` subprocesses and the test S3 server): no errors under 8 concurrent
clients, bounded server memory growth, and a burst past ``max_concurrent_rpcs`` shed with
RESOURCE_EXHAUSTED (only that) while the admitted renders succeed. No timing assertions:
the figures are printed by the benchmark."""

from __future__ import annotations

import uuid
from pathlib import Path
from typing import Any

import pytest

from bench.load_bench import burst, run_load, start_stack
from services.storage.s3 import S3ArtifactStore

#: Server RSS may grow this much over a load level (caches, allocator arenas), not more.
MAX_RSS_GROWTH = 200 * 2**20


@pytest.fixture(scope="module")
def s3(s3_server: Any) -> Any:
    settings = s3_server.settings.model_copy(update={"bucket": f"load-{uuid.uuid4().hex[:12]}"})
    S3ArtifactStore.from_settings(settings).ensure_bucket()
    return settings


def test_eight_clients_without_errors_and_bounded_memory(s3: Any, tmp_path: Path) -> None:
    handles, stop = start_stack(s3, tmp_path)
    try:
        rt = handles["runtime"]
        res = run_load(rt.channel(), 8, 3.0, rt.process.pid)
        print(res.line())
        assert not res.errors and len(res.latencies) >= 8
        assert res.rss_after - res.rss_before < MAX_RSS_GROWTH
        assert rt.process.alive()
    finally:
        stop()


def test_burst_past_capacity_is_shed(s3: Any, tmp_path: Path) -> None:
    handles, stop = start_stack(
        s3, tmp_path, {"max_workers": 2, "limits": {"max_concurrent_rpcs": 4}}
    )
    try:
        rt = handles["runtime"]
        res = burst(rt.channel(), 48, rt.process.pid)
        print(res.line())
        assert set(res.errors) == {"RESOURCE_EXHAUSTED"}
        assert res.errors["RESOURCE_EXHAUSTED"] >= 1  # refused at once, not queued
        assert len(res.latencies) >= 1  # the admitted ones are served
        assert len(res.latencies) + res.errors["RESOURCE_EXHAUSTED"] == 48
    finally:
        stop()
