"""Behaviour under load (``bench/load_bench.py`` functions against the real stack of
``evoharness serve`` subprocesses and the test S3 server): no errors under 8 concurrent
clients, bounded server memory growth, and a burst past ``max_concurrent_rpcs`` shed with
RESOURCE_EXHAUSTED (only that) while the admitted renders succeed. No timing assertions:
the figures are printed by the benchmark."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from bench.load_bench import burst, run_load

#: Server RSS may grow this much over a load level (caches, allocator arenas), not more.
MAX_RSS_GROWTH = 200 * 2**20


@pytest.fixture(scope="module")
def load_stack(services_stack: dict[str, Any], tmp_path_factory: Any) -> Iterator[dict[str, Any]]:
    """The session's services (``tests/services/conftest.py``: the baseline promoted on
    ``prod``) plus a second runtime on the same backends with 2 handler threads and
    ``max_concurrent_rpcs=4`` (``limited``) for the burst."""
    from tests.fixtures.services import start_service

    s3 = services_stack["_s3"]
    cfg = yaml.safe_load(services_stack["runtime"].config_path.read_text())
    cfg["server"] = {"max_workers": 2, "limits": {"max_concurrent_rpcs": 4}}
    env = {
        "EVOHARNESS_S3__ACCESS_KEY": s3.access_key.get_secret_value(),
        "EVOHARNESS_S3__SECRET_KEY": s3.secret_key.get_secret_value(),
    }
    work = tmp_path_factory.mktemp("load")
    limited = start_service("runtime", cfg, env=env, workdir=work)
    try:
        yield {**services_stack, "limited": limited}
    finally:
        limited.stop()


def test_eight_clients_without_errors_and_bounded_memory(load_stack: dict[str, Any]) -> None:
    rt = load_stack["runtime"]
    # a warm-up level first: what the server loads once on first use (the open reading's word
    # lists, sticker assets of the prompts' classes) is not growth under load
    run_load(rt.channel(), 8, 1.0, rt.process.pid)
    res = run_load(rt.channel(), 8, 3.0, rt.process.pid)
    print(res.line())
    assert not res.errors and len(res.latencies) >= 8
    assert res.rss_after - res.rss_before < MAX_RSS_GROWTH
    assert rt.process.alive()


def test_burst_past_capacity_is_shed(load_stack: dict[str, Any]) -> None:
    rt = load_stack["limited"]
    res = burst(rt.channel(), 48, rt.process.pid)
    print(res.line())
    assert set(res.errors) == {"RESOURCE_EXHAUSTED"}
    assert res.errors["RESOURCE_EXHAUSTED"] >= 1  # refused at once, not queued
    assert len(res.latencies) >= 1  # the admitted ones are served
    assert len(res.latencies) + res.errors["RESOURCE_EXHAUSTED"] == 48
