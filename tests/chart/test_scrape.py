"""Prometheus (the Debian binary) scrapes a running generation service (sim backend) on
loopback; after a few Generate calls the generation counter and latency histogram are
queried through Prometheus's HTTP API, and every dashboard and alert expression evaluates
there without error. The scrape is awaited by polling the API (no fixed sleep)."""

from __future__ import annotations

import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest

from evoharness.program import GenerationParams, Program
from tests.chart.test_metrics import _substitute, alert_exprs, dashboard_exprs
from tests.fixtures.prometheus import poll, query, running_prometheus, value
from tests.fixtures.services import ServiceHandle, s3_config

CALLS = 4


@pytest.fixture(scope="module")
def bucket(s3_server: Any) -> str:
    from services.storage.s3 import S3ArtifactStore

    name = f"scrape-{uuid.uuid4().hex[:12]}"
    S3ArtifactStore.from_settings(s3_server.settings, bucket=name).ensure_bucket()
    return name


@pytest.fixture(scope="module")
def generation(service_factory: Any, s3_server: Any, bucket: str) -> ServiceHandle:
    s3, env = s3_config(s3_server, bucket)
    return service_factory("generation", {"backend": "sim", "s3": s3}, env=env)


@pytest.fixture(scope="module")
def prometheus(
    generation: ServiceHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    target = urllib.parse.urlparse(generation.metrics_url).netloc
    d = tmp_path_factory.mktemp("prometheus")
    with running_prometheus(d, {"evoharness-generation": [target]}) as base:
        yield base


def test_prometheus_scrapes_generation_counters_and_latency(
    generation: ServiceHandle, prometheus: str, s3_server: Any, bucket: str
) -> None:
    from services.generation.client import GenerationClient
    from services.storage.s3 import S3ArtifactStore

    store = S3ArtifactStore.from_settings(s3_server.settings, bucket=bucket)
    params = GenerationParams(steps=20, guidance_scale=6.0, width=128, height=128)
    with GenerationClient(generation.address, store, backend="sim") as client:
        for seed in range(CALLS):
            ref = client.generate_ref(
                Program(prompt="a photo of a red apple", params=params, seed=seed)
            )
            assert ref is not None
    poll(prometheus, 'up{job="evoharness-generation"}', lambda r: value(r) == 1.0)
    requests = poll(
        prometheus,
        'sum(evoharness_generation_requests_total{backend="sim", code="OK"})',
        lambda r: value(r) == CALLS,
    )
    assert value(requests) == CALLS
    count = query(prometheus, 'sum(evoharness_generation_latency_seconds_count{backend="sim"})')
    assert value(count) == CALLS
    total = value(
        query(prometheus, 'sum(evoharness_generation_latency_seconds_sum{backend="sim"})')
    )
    p50 = value(
        query(
            prometheus,
            'histogram_quantile(0.5, sum by (le) (evoharness_generation_latency_seconds_bucket{backend="sim"}))',
        )
    )
    assert 0 < total and 0 < p50 <= 60
    images = query(prometheus, 'sum(evoharness_images_generated_total{backend="sim"})')
    assert value(images) == CALLS


def test_every_dashboard_and_alert_query_evaluates(prometheus: str) -> None:
    """Real Prometheus accepts every expression (Grafana variables substituted)."""
    for where, expr in dashboard_exprs() + alert_exprs():
        try:
            query(prometheus, _substitute(expr))
        except urllib.error.HTTPError as exc:  # 400 bad_data names the parse error
            pytest.fail(f"{where}: {exc.read().decode()[:300]}")
