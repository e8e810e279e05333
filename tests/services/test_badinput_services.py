"""``evoharness serve`` with bad settings: one-line error naming the file:line / field /
environment variable, exit 1 (bad input) or 2 (bad usage), no traceback, nothing started."""

from __future__ import annotations

from pathlib import Path

import pytest

from evoharness_app.cli import main


def _serve(argv: list[str], capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    rc = main(["serve", *argv])
    cap = capsys.readouterr()
    assert "Traceback" not in cap.out + cap.err
    return rc, cap.err


@pytest.mark.parametrize(
    "service", ["generation", "verification", "proposer", "registry", "runtime"]
)
def test_malformed_yaml_names_file_and_line(
    service: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "bad.yaml"
    cfg.write_text("server:\n  port: [1\n")
    rc, err = _serve([service, "--config", str(cfg)], capsys)
    assert rc == 1 and "bad.yaml:3: invalid YAML" in err
    assert len(err.strip().splitlines()) == 1


def test_config_that_is_a_directory(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    rc, err = _serve(["generation", "--config", str(tmp_path)], capsys)
    assert rc == 1 and "is a directory" in err


def test_not_utf8_config(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    cfg = tmp_path / "x.yaml"
    cfg.write_bytes(b"\xff\xfe")
    rc, err = _serve(["generation", "--config", str(cfg)], capsys)
    assert rc == 1 and "x.yaml: not UTF-8" in err


@pytest.mark.parametrize(
    "argv",
    [["--port", "99999"], ["--port", "-5"], ["--metrics-port", "-2"], ["--log-level", "LOUD"]],
    ids=["port-high", "port-negative", "metrics-port", "log-level"],
)
def test_bad_options_are_usage_errors(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    rc, err = _serve(["generation", *argv], capsys)
    assert rc == 2 and argv[0] in err


def test_bad_env_override_names_the_variable(
    repo_root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EVOHARNESS_SERVER__PORT", "abc")
    rc, err = _serve(
        ["generation", "--config", str(repo_root / "configs" / "generation.yaml")], capsys
    )
    assert rc == 1 and err.startswith("error: EVOHARNESS_SERVER__PORT: server.port:")


def test_unknown_generation_backend_fails_before_touching_s3(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "g.yaml"
    # an S3 endpoint nobody listens on: reaching it would fail with "unreachable"
    cfg.write_text("backend: nope\ns3:\n  endpoint: 127.0.0.1:1\n")
    rc, err = _serve(["generation", "--config", str(cfg), "--metrics-port", "-1"], capsys)
    assert rc == 1 and "backend: 'nope' is not one of" in err and "unreachable" not in err


def test_database_url_with_password_in_yaml_is_refused(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    cfg = tmp_path / "r.yaml"
    cfg.write_text('registry:\n  database_url: "postgresql://u:hunter2@127.0.0.1:1/db"\n')
    rc, err = _serve(["registry", "--config", str(cfg), "--metrics-port", "-1"], capsys)
    assert rc == 1 and "registry.database_url is a URL with a password" in err
    assert "EVOHARNESS_REGISTRY__DATABASE_URL" in err and "hunter2" not in err


def test_unreachable_registry_database_is_one_line_without_password(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    # port 1 on loopback: connection refused at once
    monkeypatch.setenv(
        "EVOHARNESS_REGISTRY__DATABASE_URL", "postgresql+psycopg://u:hunter2@127.0.0.1:1/db"
    )
    cfg = tmp_path / "r.yaml"
    cfg.write_text(f"registry:\n  local_root: {tmp_path / 'blobs'}\n")
    rc, err = _serve(["registry", "--config", str(cfg), "--metrics-port", "-1"], capsys)
    lines = [ln for ln in err.splitlines() if ln.startswith("error:")]
    assert rc == 1 and len(lines) == 1 and "cannot connect" in lines[0]
    assert "hunter2" not in err


@pytest.mark.parametrize("which", ["--port", "--metrics-port"])
def test_port_in_use_is_one_line_error(
    which: str, repo_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = str(busy.getsockname()[1])
        other = {"--port": ["--metrics-port", "-1"], "--metrics-port": ["--port", "0"]}[which]
        cfg = str(repo_root / "configs" / "verification.yaml")
        rc, err = _serve(["verification", "--config", cfg, which, port, *other], capsys)
    assert rc == 1 and f":{port}" in err and "in use" in err.lower()


@pytest.mark.timeout(120)  # before the fix, serve started and ran until stopped
def test_port_held_by_another_grpc_server_is_in_use(
    repo_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """gRPC binds with SO_REUSEPORT by default, so a second server on the port of a running
    one (another service of the stack) used to start and silently share its traffic; now it is
    refused like any port in use."""
    from concurrent import futures

    import grpc

    other = grpc.server(futures.ThreadPoolExecutor(max_workers=1))  # gRPC's defaults
    port = str(other.add_insecure_port("127.0.0.1:0"))
    other.start()
    try:
        cfg = str(repo_root / "configs" / "verification.yaml")
        rc, err = _serve(
            ["verification", "--config", cfg, "--port", port, "--metrics-port", "-1"], capsys
        )
    finally:
        other.stop(None)
    assert rc == 1 and f":{port}" in err and "in use" in err.lower()


def test_tls_files_that_are_not_pem_name_the_setting(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    junk = tmp_path / "junk.pem"
    junk.write_text("not a certificate\n")
    cfg = tmp_path / "tls.yaml"
    cfg.write_text(f"server:\n  tls_cert_file: {junk}\n  tls_key_file: {junk}\n")
    rc, err = _serve(
        ["verification", "--config", str(cfg), "--port", "0", "--metrics-port", "-1"], capsys
    )
    assert rc == 1 and "server.tls_cert_file/tls_key_file: not a matching PEM" in err
    assert "in use" not in err
