"""``python -m services.common.healthcheck`` (the image's HEALTHCHECK) against a real
generation service: exit 0 when SERVING, 1 with the reason for a closed port or an unknown
health service, and the default address from EVOHARNESS_SERVER__PORT."""

from __future__ import annotations

import os
import subprocess
import sys
import uuid
from typing import Any

import pytest

from services.common.healthcheck import default_address
from services.common.process import free_port
from tests.fixtures.services import ServiceHandle, s3_config

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.fixture(scope="module")
def generation(service_factory: Any, s3_server: Any) -> ServiceHandle:
    s3, env = s3_config(s3_server, f"hc-{uuid.uuid4().hex[:12]}")
    return service_factory("generation", {"backend": "sim", "s3": s3}, env=env)


def _probe(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    full = {**os.environ, "PYTHONPATH": ROOT, **(env or {})}
    return subprocess.run(
        [sys.executable, "-m", "services.common.healthcheck", *args],
        capture_output=True,
        text=True,
        timeout=60,
        env=full,
    )


def test_serving_service_exits_0(generation: ServiceHandle) -> None:
    out = _probe(generation.address)
    assert out.returncode == 0, out.stderr
    assert "SERVING" in out.stdout
    named = _probe(generation.address, "--service", "evoharness.v1.GenerationService")
    assert named.returncode == 0, named.stderr


def test_default_address_comes_from_the_server_port_env(generation: ServiceHandle) -> None:
    port = generation.address.rsplit(":", 1)[1]
    assert default_address({"EVOHARNESS_SERVER__PORT": port}) == generation.address
    assert default_address({}) == "127.0.0.1:50051"
    out = _probe(env={"EVOHARNESS_SERVER__PORT": port})
    assert out.returncode == 0, out.stderr


def test_closed_port_and_unknown_service_exit_1(generation: ServiceHandle) -> None:
    closed = _probe(f"127.0.0.1:{free_port()}", "--timeout", "1")
    assert closed.returncode == 1 and "UNAVAILABLE" in closed.stderr
    unknown = _probe(generation.address, "--service", "no.such.Service")
    assert unknown.returncode == 1 and "NOT_FOUND" in unknown.stderr


def test_bad_timeout_is_a_usage_error() -> None:
    out = _probe("127.0.0.1:1", "--timeout", "0")
    assert out.returncode == 2 and "--timeout" in out.stderr
