"""The chart's migration hook Job, run as the Job runs it (its args after the image's
``evoharness`` entrypoint, the DSN from the env var the Job sets) against a fresh PostgreSQL
database: it migrates to head, and a second run (helm upgrade) is a no-op."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.chart.helpers import by_kind, render
from tests.conftest import require

ROOT = Path(__file__).resolve().parents[2]
ADMIN_DSN = os.environ.get("EVOHARNESS_TEST_PG", "postgresql://postgres@127.0.0.1:5432/test")


@pytest.fixture
def database() -> Iterator[str]:
    psycopg = pytest.importorskip("psycopg")
    name = f"evoh_chart_{uuid.uuid4().hex[:10]}"
    try:
        admin = psycopg.connect(ADMIN_DSN, autocommit=True, connect_timeout=3)
    except psycopg.OperationalError as exc:
        require(False, f"PostgreSQL at {ADMIN_DSN} is not reachable: {exc}")
        raise
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            base = ADMIN_DSN.rsplit("/", 1)[0].replace("postgresql://", "postgresql+psycopg://")
            yield f"{base}/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def test_migration_job_migrates_a_fresh_database(database: str) -> None:
    (job,) = by_kind(render("default"), "Job")
    c = job["spec"]["template"]["spec"]["containers"][0]
    (env_name,) = [e["name"] for e in c["env"]]
    env = {**os.environ, "PYTHONPATH": str(ROOT), env_name: database}
    env = {k: v for k, v in env.items() if not k.startswith("EVOHARNESS_REGISTRY__")}
    revisions = []
    for _ in range(2):  # install, then upgrade
        out = subprocess.run(
            [sys.executable, "-m", "evoharness_app", *c["args"]],
            capture_output=True,
            text=True,
            timeout=120,
            env=env,
            cwd=ROOT,
        )
        assert out.returncode == 0, out.stdout + out.stderr
        result = json.loads(out.stdout)
        assert result["revision"], result
        assert result["url"].endswith(database.rsplit("/", 1)[1]), result
        revisions.append(result["revision"])
    assert revisions[0] == revisions[1]
