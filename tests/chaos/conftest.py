"""Shared pieces of the chaos tests: a small one-round run on a real Temporal dev server and
SeaweedFS (the *control*, run once per session without faults), and restartable real servers
(a Temporal dev server persisted in its SQLite file, a SeaweedFS gateway on fixed ports and
data folder, a TCP relay in front of PostgreSQL) that a test kills by PID and starts again on
the same address.

Every fault test runs the control's parameters on a fresh bucket (so every generator call is
made again and the call log counts them), injects one fault, and compares the decisions and
the calls with the control's.
"""

from __future__ import annotations

import json
import sys
import uuid
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import pytest_asyncio

from evoharness.tasks.models import Task
from services.common.process import ManagedProcess, free_port, tcp_ready
from services.common.settings import S3Settings
from tests.workflows.conftest import log_keys, make_params, run_in_process, settings_for
from tests.workflows.splits import small_split
from workflows.params import EvolutionParams, EvolutionResult

ROOT = Path(__file__).resolve().parents[2]


def chaos_params(run_id: str, split: dict[str, list[Task]], **kw: Any) -> EvolutionParams:
    """One round (K=2 seeds, 1 cluster × 2 candidates) on the chaos split; ``kw`` overrides."""
    base: dict[str, Any] = {"max_rounds": 1, "seeds": [0, 1]}
    base.update(kw)
    return make_params(run_id, split, **base)


@pytest.fixture(scope="session")
def chaos_split(shared_dir: Path) -> dict[str, list[Task]]:
    """A small split (4 GenEval counting + 1 synthetic target tasks, 3 held-out, 6
    preservation; ``tests.workflows.splits``): small enough for a round in well under a
    minute of CPU, too small for a significant gain (the decision is No-Patch after gating)."""
    return small_split(shared_dir, n_target=4, n_synthetic=1)


@dataclass
class Control:
    """The uninterrupted run: its result, its bucket and the generator calls it made."""

    result: EvolutionResult
    bucket: str
    calls: list[str]
    params: EvolutionParams


@pytest_asyncio.fixture(scope="session", loop_scope="session")
async def control(
    temporal_env: Any, s3_server: Any, chaos_split: Any, tmp_path_factory: Any
) -> Control:
    """One round without faults (in-process worker, rule proposer, fresh bucket)."""
    bucket = f"chaos-ctl-{uuid.uuid4().hex[:8]}"
    calls = tmp_path_factory.mktemp("control") / "calls.log"
    params = chaos_params(f"ctl-{uuid.uuid4().hex[:6]}", chaos_split)
    _, result = await run_in_process(
        temporal_env.client, settings_for(s3_server, bucket, calls), params
    )
    return Control(result, bucket, log_keys(calls), params)


def decisions(result: EvolutionResult) -> list[tuple[str, str]]:
    """(kind, harness id) of every round's decision."""
    return [(d["kind"], d["harness_id"]) for d in result.decisions]


# ------------------------------------------------------------------ restartable servers


@dataclass
class Restartable:
    """A server process that a test kills (SIGKILL, by PID) and starts again with the same
    argv (same ports, same data); ``healthy`` is its readiness probe."""

    proc: ManagedProcess
    healthy: Any
    timeout: float = 120.0

    def kill(self) -> None:
        """SIGKILL the process group."""
        self.proc.kill()

    def restart(self) -> None:
        """Start it again and await its probe."""
        self.proc.start()
        self.proc.wait_healthy(self.healthy, timeout=self.timeout)

    def stop(self) -> None:
        """Stop it by PID (SIGTERM, then SIGKILL)."""
        self.proc.stop()


@pytest.fixture
def restartable_s3(tmp_path: Path) -> Iterator[tuple[Restartable, S3Settings]]:
    """A SeaweedFS gateway of this test's own (the session's server is shared), restartable on
    the same ports and data folder."""
    from minio import Minio

    from services.storage.seaweed import SeaweedNotFound, start_seaweedfs
    from tests.conftest import require

    try:
        proc, settings = start_seaweedfs(tmp_path / "s3", tmp_path / "s3.log")
    except SeaweedNotFound as exc:
        require(False, str(exc))
        raise
    import urllib3

    probe = Minio(
        settings.endpoint,
        settings.access_key.get_secret_value(),
        settings.secret_key.get_secret_value(),
        secure=False,
        http_client=urllib3.PoolManager(
            timeout=urllib3.Timeout(connect=1.0, read=2.0), retries=urllib3.Retry(total=0)
        ),
    )

    def healthy() -> bool:
        probe.list_buckets()
        return True

    r = Restartable(proc, healthy)
    try:
        yield r, settings
    finally:
        r.stop()


def temporal_dev_server(tmp_path: Path) -> tuple[Restartable, str]:
    """``temporal server start-dev`` persisted in ``tmp_path/temporal.db`` (as ``evoharness
    up`` runs it: ``services.stack.start_temporal_dev``), restartable on the same port.
    Returns it and its address."""
    from services.stack import start_temporal_dev, temporal_healthy

    proc, address = start_temporal_dev(tmp_path / "temporal.log", tmp_path / "temporal.db")
    return Restartable(proc, lambda: temporal_healthy(address)), address


def tcp_relay(tmp_path: Path, target: str) -> tuple[Restartable, int]:
    """A TCP relay process (``tests.chaos.relay``) on a free loopback port forwarding to
    ``target`` (host:port); killing it makes the target unreachable through it."""
    port = free_port()
    proc = ManagedProcess(
        "relay",
        [sys.executable, "-m", "tests.chaos.relay", "--port", str(port), "--target", target],
        tmp_path / "relay.log",
        cwd=str(ROOT),
        env={"PYTHONPATH": str(ROOT)},
    ).start()
    r = Restartable(proc, lambda: tcp_ready("127.0.0.1", port), timeout=30)
    try:
        proc.wait_healthy(r.healthy, timeout=30)
    except BaseException:
        proc.stop()
        raise
    return r, port


def objects_are_whole(store: Any) -> int:
    """Read every object of ``store``'s bucket back and check it is whole: JSON parses, PNGs
    decode to the end, and each execution record's image has the sha256 it names. Returns
    the number of objects checked; ``AssertionError`` names a partial one."""
    import hashlib
    import io

    from PIL import Image

    keys = store.list_keys("")
    for key in keys:
        data = store.get(key)
        if key.endswith(".json"):
            doc = json.loads(data)
            if key.startswith("executions/"):
                png = store.get(doc["key"])
                assert hashlib.sha256(png).hexdigest() == doc["sha256"], key
        elif key.endswith(".png"):
            with Image.open(io.BytesIO(data)) as im:
                im.load()
    return len(keys)
