"""The shared server module through real gRPC channels: status mapping (no stack traces),
health, reflection, message-size limits, deadline propagation, bearer-token auth and TLS
(each both ways), the Prometheus endpoint, graceful stop, and YAML/env settings."""

from __future__ import annotations

import subprocess
import threading
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import grpc
import pytest
from grpc_health.v1 import health_pb2, health_pb2_grpc
from pydantic import SecretStr

from services.common import server as srv
from services.common.channel import open_channel
from services.common.errors import InvalidField, NotFound
from services.common.settings import ServerSettings, ServiceSettings, load_settings
from services.protos.evoharness.v1 import generation_pb2, generation_pb2_grpc
from tests.conftest import require_binary

SERVICE = "evoharness.v1.GenerationService"


class ProbeServicer(generation_pb2_grpc.GenerationServiceServicer):
    """Generate(prompt=<command>) raises or reports according to the prompt."""

    def __init__(self) -> None:
        self.seen_remaining: list[float | None] = []

    def Generate(self, request: Any, context: Any) -> Any:
        cmd = request.program.prompt
        self.seen_remaining.append(srv.remaining_seconds())
        if cmd == "value":
            raise ValueError("program.seed: must be >= 0")
        if cmd == "field":
            raise InvalidField("program.params.steps", "0 is outside [1, 150]")
        if cmd == "missing":
            raise NotFound("s3://b/k does not exist")
        if cmd == "keyerror":
            raise KeyError("harness_id abc")
        if cmd == "boom":
            raise RuntimeError("secret internal detail /etc/passwd")
        if cmd == "sleep":
            time.sleep(0.5)
            srv.check_deadline("sleepy handler")
        if cmd == "big":
            return generation_pb2.GenerateResponse(png=b"x" * 3_000_000)
        return generation_pb2.GenerateResponse(generator_id="probe", execution_key=cmd)


def _settings(**kw: Any) -> ServerSettings:
    return ServerSettings(port=0, metrics_port=0, max_message_bytes=2_000_000, **kw)


@pytest.fixture
def running() -> Iterator[tuple[srv.RunningServer, ProbeServicer]]:
    probe = ProbeServicer()
    rs = srv.build_server(
        _settings(),
        [
            srv.ServiceRegistration(
                probe, generation_pb2_grpc.add_GenerationServiceServicer_to_server, SERVICE
            )
        ],
    )
    try:
        yield rs, probe
    finally:
        rs.stop(0)


def _call(port: int, prompt: str, timeout: float | None = 5.0, **ch: Any) -> Any:
    with open_channel(f"127.0.0.1:{port}", **ch) as channel:
        stub = generation_pb2_grpc.GenerationServiceStub(channel)
        return stub.Generate(
            generation_pb2.GenerateRequest(program={"prompt": prompt}), timeout=timeout
        )


@pytest.mark.parametrize(
    "prompt,code,message",
    [
        ("value", grpc.StatusCode.INVALID_ARGUMENT, "program.seed: must be >= 0"),
        ("field", grpc.StatusCode.INVALID_ARGUMENT, "program.params.steps: 0 is outside [1, 150]"),
        ("missing", grpc.StatusCode.NOT_FOUND, "s3://b/k does not exist"),
        ("keyerror", grpc.StatusCode.NOT_FOUND, "harness_id abc"),
        ("boom", grpc.StatusCode.INTERNAL, "internal error (RuntimeError); see the server log"),
    ],
)
def test_exceptions_map_to_status_without_trace(
    running: Any, prompt: str, code: Any, message: str
) -> None:
    rs, _ = running
    with pytest.raises(grpc.RpcError) as err:
        _call(rs.port, prompt)
    assert err.value.code() == code
    assert err.value.details() == message
    assert "Traceback" not in err.value.details() and "/etc/passwd" not in err.value.details()


def test_health_reflection_and_metrics(running: Any) -> None:
    rs, _ = running
    assert _call(rs.port, "ok").execution_key == "ok"
    with open_channel(f"127.0.0.1:{rs.port}") as ch:
        h = health_pb2_grpc.HealthStub(ch)
        for name in ("", SERVICE):
            assert h.Check(health_pb2.HealthCheckRequest(service=name), timeout=5).status == 1
        with pytest.raises(grpc.RpcError) as err:
            h.Check(health_pb2.HealthCheckRequest(service="nope.Service"), timeout=5)
        assert err.value.code() == grpc.StatusCode.NOT_FOUND
        from grpc_reflection.v1alpha import reflection_pb2, reflection_pb2_grpc

        refl = reflection_pb2_grpc.ServerReflectionStub(ch)
        answers = list(
            refl.ServerReflectionInfo(
                iter([reflection_pb2.ServerReflectionRequest(list_services="")]), timeout=5
            )
        )
        names = {s.name for s in answers[0].list_services_response.service}
        assert {SERVICE, "grpc.health.v1.Health"} <= names
    with pytest.raises(grpc.RpcError):
        _call(rs.port, "boom")
    text = (
        urllib.request.urlopen(f"http://127.0.0.1:{rs.metrics_port}/metrics", timeout=5)
        .read()
        .decode()
    )
    assert (
        f'evoharness_grpc_requests_total{{code="OK",method="Generate",service="{SERVICE}"}}' in text
    )
    assert (
        f'evoharness_grpc_requests_total{{code="INTERNAL",method="Generate",service="{SERVICE}"}}'
        in text
    )
    assert "evoharness_grpc_latency_seconds_bucket" in text


def test_max_message_size_enforced(running: Any) -> None:
    rs, _ = running
    with pytest.raises(grpc.RpcError) as err:  # response over the server's send limit
        _call(rs.port, "big")
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED
    with pytest.raises(grpc.RpcError) as err:  # request over the server's receive limit
        _call(rs.port, "x" * 2_100_000, max_message_bytes=8_000_000)
    assert err.value.code() == grpc.StatusCode.RESOURCE_EXHAUSTED


def test_deadline_propagates_to_handler(running: Any) -> None:
    rs, probe = running
    _call(rs.port, "ok", timeout=3.0)
    seen = probe.seen_remaining[-1]
    assert seen is not None and 2.0 < seen <= 3.05  # grpc rounds the deadline
    with pytest.raises(grpc.RpcError) as err:
        _call(rs.port, "sleep", timeout=0.2)
    assert err.value.code() == grpc.StatusCode.DEADLINE_EXCEEDED


def test_no_client_deadline_runs_under_the_server_cap() -> None:
    """A call without a deadline (gRPC's default) is served under ``max_request_seconds``,
    never with gRPC's ~9.2e18 s "infinite" remaining time; a nearer deadline is kept."""
    probe = ProbeServicer()
    rs = srv.build_server(
        _settings(max_request_seconds=120.0),
        [
            srv.ServiceRegistration(
                probe, generation_pb2_grpc.add_GenerationServiceServicer_to_server, SERVICE
            )
        ],
    )
    try:
        assert _call(rs.port, "ok", timeout=None).execution_key == "ok"
        seen = probe.seen_remaining[-1]
        assert seen is not None and 100.0 < seen <= 120.0
        _call(rs.port, "ok", timeout=3.0)
        seen = probe.seen_remaining[-1]
        assert seen is not None and seen <= 3.05
        _call(rs.port, "ok", timeout=1000.0)  # further away than the cap
        seen = probe.seen_remaining[-1]
        assert seen is not None and seen <= 120.0
    finally:
        rs.stop(0)
    assert srv.effective_timeout(None, 0) is None
    assert srv.effective_timeout(9.2e18, 0) is None
    assert srv.effective_timeout(9.2e18, 60) == 60
    assert srv.effective_timeout(5.0, 60) == 5.0


def test_bearer_token_both_ways() -> None:
    probe = ProbeServicer()
    rs = srv.build_server(
        _settings(auth_token=SecretStr("s3cr3t")),
        [
            srv.ServiceRegistration(
                probe, generation_pb2_grpc.add_GenerationServiceServicer_to_server, SERVICE
            )
        ],
    )
    try:
        for token in (None, "wrong"):
            with pytest.raises(grpc.RpcError) as err:
                _call(rs.port, "ok", token=token)
            assert err.value.code() == grpc.StatusCode.UNAUTHENTICATED
            assert "bearer token" in err.value.details()
        assert _call(rs.port, "ok", token="s3cr3t").generator_id == "probe"
        assert len(probe.seen_remaining) == 1  # rejected calls never reached the handler
        with open_channel(f"127.0.0.1:{rs.port}") as ch:  # health needs no token
            assert (
                health_pb2_grpc.HealthStub(ch)
                .Check(health_pb2.HealthCheckRequest(), timeout=5)
                .status
                == 1
            )
    finally:
        rs.stop(0)


def _make_certs(d: Path) -> dict[str, Path]:
    openssl = require_binary("openssl")

    def run(*args: str) -> None:
        subprocess.run([openssl, *args], check=True, capture_output=True, cwd=d)

    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "ca.key",
        "-out",
        "ca.pem",
        "-days",
        "1",
        "-subj",
        "/CN=evoharness-test-ca",
    )
    (d / "ext.cnf").write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    run(
        "req",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "server.key",
        "-out",
        "server.csr",
        "-subj",
        "/CN=localhost",
    )
    run(
        "x509",
        "-req",
        "-in",
        "server.csr",
        "-CA",
        "ca.pem",
        "-CAkey",
        "ca.key",
        "-CAcreateserial",
        "-out",
        "server.pem",
        "-days",
        "1",
        "-extfile",
        "ext.cnf",
    )
    run(
        "req",
        "-x509",
        "-newkey",
        "rsa:2048",
        "-nodes",
        "-keyout",
        "other.key",
        "-out",
        "other.pem",
        "-days",
        "1",
        "-subj",
        "/CN=other-ca",
    )
    return {k: d / k for k in ("ca.pem", "server.pem", "server.key", "other.pem")}


def test_tls_both_ways(tmp_path: Path) -> None:
    c = _make_certs(tmp_path)
    probe = ProbeServicer()
    rs = srv.build_server(
        _settings(tls_cert_file=str(c["server.pem"]), tls_key_file=str(c["server.key"])),
        [
            srv.ServiceRegistration(
                probe, generation_pb2_grpc.add_GenerationServiceServicer_to_server, SERVICE
            )
        ],
    )
    try:
        assert _call(rs.port, "ok", tls_ca_file=c["ca.pem"]).generator_id == "probe"
        with pytest.raises(grpc.RpcError) as err:  # plaintext client against a TLS server
            _call(rs.port, "ok", timeout=2)
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        with pytest.raises(grpc.RpcError) as err:  # client that does not trust the server's CA
            _call(rs.port, "ok", timeout=2, tls_ca_file=c["other.pem"])
        assert err.value.code() == grpc.StatusCode.UNAVAILABLE
        assert len(probe.seen_remaining) == 1
    finally:
        rs.stop(0)
    with pytest.raises(ValueError, match="server.tls_key_file"):
        srv.server_credentials(ServerSettings(tls_cert_file=str(c["server.pem"])))


def test_graceful_stop_lets_inflight_finish_and_flips_health() -> None:
    probe = ProbeServicer()
    rs = srv.build_server(
        _settings(grace_seconds=5),
        [
            srv.ServiceRegistration(
                probe, generation_pb2_grpc.add_GenerationServiceServicer_to_server, SERVICE
            )
        ],
    )
    result: dict[str, Any] = {}

    def slow() -> None:
        try:
            result["resp"] = _call(rs.port, "sleep", timeout=10)
        except grpc.RpcError as exc:  # pragma: no cover - reported by the assert below
            result["err"] = exc

    t = threading.Thread(target=slow)
    t.start()
    while not probe.seen_remaining:
        time.sleep(0.01)
    rs.stop()
    t.join()
    assert "resp" in result, result.get("err")
    with pytest.raises(grpc.RpcError):
        _call(rs.port, "ok", timeout=1)


def test_settings_yaml_env_and_secrets(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    cfg = tmp_path / "svc.yaml"
    cfg.write_text("server:\n  port: 6000\n  max_workers: 3\ns3:\n  bucket: from-yaml\n")
    monkeypatch.setenv("EVOHARNESS_SERVER__MAX_WORKERS", "5")
    monkeypatch.setenv("EVOHARNESS_S3__SECRET_KEY", "from-env")
    s = load_settings(ServiceSettings, cfg, server={"metrics_port": 7000})
    assert (s.server.port, s.server.max_workers, s.server.metrics_port) == (6000, 5, 7000)
    assert s.s3.bucket == "from-yaml" and s.s3.secret_key.get_secret_value() == "from-env"
    assert "from-env" not in repr(s)
    bad = tmp_path / "bad.yaml"
    bad.write_text("s3:\n  secret_key: oops\n")
    with pytest.raises(ValueError, match="s3.secret_key is a secret.*EVOHARNESS_S3__SECRET_KEY"):
        load_settings(ServiceSettings, bad)
    typo = tmp_path / "typo.yaml"
    typo.write_text("server:\n  prot: 1\n")
    with pytest.raises(ValueError, match="server.prot"):
        load_settings(ServiceSettings, typo)
    with pytest.raises(ValueError, match="does not exist"):
        load_settings(ServiceSettings, tmp_path / "missing.yaml")


def test_serve_cli_rejects_unknown_service_and_bad_config(tmp_path: Path) -> None:
    from evoharness_app.cli import main

    assert main(["serve", "no-such-service"]) == 1
    bad = tmp_path / "g.yaml"
    bad.write_text("server:\n  port: -5\n")
    assert main(["serve", "generation", "--config", str(bad)]) == 1
