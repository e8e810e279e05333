"""Database fixtures for the registry tests.

``db_url`` is parametrised over SQLite (always) and PostgreSQL (when a server answers on
127.0.0.1:5432 or ``EVOHARNESS_TEST_DATABASE_URL`` names one; required under ``CI=true``).
Every test gets a fresh database of its own: a new SQLite file, or ``CREATE DATABASE
evoh_test_<random>`` on the server, dropped afterwards.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from services.common.process import tcp_ready
from tests.conftest import require

DEFAULT_PG = "postgresql+psycopg://postgres@127.0.0.1:5432/test"


def pg_admin_url() -> str | None:
    """URL of a PostgreSQL database to create test databases from, or None."""
    env = os.environ.get("EVOHARNESS_TEST_DATABASE_URL")
    if env:
        url = make_url(env)
        if url.drivername in ("postgresql", "postgres"):
            url = url.set(drivername="postgresql+psycopg")
        return url.render_as_string(hide_password=False)
    if tcp_ready("127.0.0.1", 5432):
        return DEFAULT_PG
    return None


def _pg_fresh_db() -> Iterator[str]:
    admin = pg_admin_url()
    require(
        admin is not None,
        "PostgreSQL is not reachable on 127.0.0.1:5432 and EVOHARNESS_TEST_DATABASE_URL is unset",
    )
    assert admin is not None
    name = f"evoh_test_{secrets.token_hex(6)}"
    eng = create_engine(admin, isolation_level="AUTOCOMMIT")
    try:
        with eng.connect() as conn:
            conn.execute(text(f'CREATE DATABASE "{name}"'))
        yield make_url(admin).set(database=name).render_as_string(hide_password=False)
    finally:
        with eng.connect() as conn:
            conn.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        eng.dispose()


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    """A URL of a fresh, empty database on each backend."""
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'registry.db'}"
    else:
        yield from _pg_fresh_db()


@pytest.fixture
def pg_url() -> Iterator[str]:
    """A fresh PostgreSQL database (skips without a server; fails under CI=true)."""
    yield from _pg_fresh_db()


@pytest.fixture
def registry(db_url: str, tmp_path: Path):  # type: ignore[no-untyped-def]
    """A migrated ``Registry`` on a fresh database with a filesystem blob store."""
    from evoharness.local_store import LocalArtifactStore
    from harness_registry import open_registry

    reg = open_registry(db_url, LocalArtifactStore(tmp_path / "blobs"))
    yield reg
    reg.engine.dispose()
