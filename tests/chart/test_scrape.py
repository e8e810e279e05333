"""Prometheus (the Debian binary) scrapes a running generation service (sim backend) on
loopback; after a few Generate calls the generation counter and latency histogram are
queried through Prometheus's HTTP API, and every dashboard and alert expression evaluates
there without error. The scrape is awaited by polling the API (no fixed sleep)."""

from __future__ import annotations

import json
import math
import time
import urllib.error
import urllib.parse
import urllib.request
import uuid
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from evoharness.program import GenerationParams, Program
from services.common.process import ManagedProcess, free_port
from tests.chart.test_metrics import _substitute, alert_exprs, dashboard_exprs
from tests.conftest import require_binary
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


def _query(base: str, promql: str) -> list[dict[str, Any]]:
    url = f"{base}/api/v1/query?" + urllib.parse.urlencode({"query": promql})
    with urllib.request.urlopen(url, timeout=5) as r:
        body = json.loads(r.read())
    assert body["status"] == "success", body
    result: list[dict[str, Any]] = body["data"]["result"]
    return result


def _ready(base: str) -> bool:
    try:
        with urllib.request.urlopen(f"{base}/-/ready", timeout=2) as r:
            return r.status == 200
    except OSError:
        return False


@pytest.fixture(scope="module")
def prometheus(
    generation: ServiceHandle, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    binary = require_binary("prometheus")
    d = tmp_path_factory.mktemp("prometheus")
    target = urllib.parse.urlparse(generation.metrics_url).netloc
    cfg = {
        "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
        "scrape_configs": [
            {"job_name": "evoharness-generation", "static_configs": [{"targets": [target]}]}
        ],
    }
    (d / "prometheus.yml").write_text(yaml.safe_dump(cfg))
    port = free_port()
    proc = ManagedProcess(
        "prometheus",
        [
            binary,
            f"--config.file={d / 'prometheus.yml'}",
            f"--storage.tsdb.path={d / 'data'}",
            f"--web.listen-address=127.0.0.1:{port}",
            "--log.level=warn",
        ],
        d / "prometheus.log",
    ).start()
    base = f"http://127.0.0.1:{port}"
    try:
        proc.wait_healthy(lambda: _ready(base), timeout=60)
        yield base
    finally:
        proc.stop()


def _poll(base: str, promql: str, ok: Any, timeout: float = 30.0) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    result: list[dict[str, Any]] = []
    while time.monotonic() < deadline:
        result = _query(base, promql)
        if ok(result):
            return result
        time.sleep(0.2)
    pytest.fail(f"{promql}: still {result} after {timeout}s")


def _value(result: list[dict[str, Any]]) -> float:
    return float(result[0]["value"][1]) if result else math.nan


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
    _poll(prometheus, 'up{job="evoharness-generation"}', lambda r: _value(r) == 1.0)
    requests = _poll(
        prometheus,
        'sum(evoharness_generation_requests_total{backend="sim", code="OK"})',
        lambda r: _value(r) == CALLS,
    )
    assert _value(requests) == CALLS
    count = _query(prometheus, 'sum(evoharness_generation_latency_seconds_count{backend="sim"})')
    assert _value(count) == CALLS
    total = _value(
        _query(prometheus, 'sum(evoharness_generation_latency_seconds_sum{backend="sim"})')
    )
    p50 = _value(
        _query(
            prometheus,
            'histogram_quantile(0.5, sum by (le) (evoharness_generation_latency_seconds_bucket{backend="sim"}))',
        )
    )
    assert 0 < total and 0 < p50 <= 60
    images = _query(prometheus, 'sum(evoharness_images_generated_total{backend="sim"})')
    assert _value(images) == CALLS


def test_every_dashboard_and_alert_query_evaluates(prometheus: str) -> None:
    """Real Prometheus accepts every expression (Grafana variables substituted)."""
    for where, expr in dashboard_exprs() + alert_exprs():
        try:
            _query(prometheus, _substitute(expr))
        except urllib.error.HTTPError as exc:  # 400 bad_data names the parse error
            pytest.fail(f"{where}: {exc.read().decode()[:300]}")
