"""Engines and migrations.

``make_engine(url)`` returns an engine configured for the registry: on SQLite, foreign keys
on, WAL journal, a busy timeout, and every transaction opened with ``BEGIN IMMEDIATE`` so a
read-then-write transaction never fails half-way on a stale snapshot (SQLAlchemy docs,
"Serializable isolation / Savepoints / Transactional DDL" for pysqlite). On PostgreSQL,
READ COMMITTED; promotions rely on conditional ``UPDATE ... WHERE`` (compare-and-set).

``upgrade(engine)`` / ``downgrade(engine, revision)`` run the Alembic migrations shipped in
``harness_registry/migrations``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"

#: Default embedded database: ``$EVOHARNESS_HOME/registry.db`` (``~/.evoharness``).
DEFAULT_HOME = Path(os.environ.get("EVOHARNESS_HOME", Path.home() / ".evoharness"))


def default_url() -> str:
    """``EVOHARNESS_DATABASE_URL`` if set, else the embedded SQLite file."""
    env = os.environ.get("EVOHARNESS_DATABASE_URL")
    if env:
        return env
    return f"sqlite:///{DEFAULT_HOME / 'registry.db'}"


def normalize_url(url: str) -> str:
    """Use the psycopg (v3) driver for plain ``postgresql://`` URLs."""
    u = make_url(url)
    if u.drivername in ("postgresql", "postgres"):
        u = u.set(drivername="postgresql+psycopg")
    return u.render_as_string(hide_password=False)


def make_engine(url: str | None = None, **kwargs: Any) -> Engine:
    """An engine for ``url`` (default ``default_url()``); creates the SQLite file's folder."""
    url = normalize_url(url or default_url())
    u = make_url(url)
    if u.get_backend_name() == "sqlite":
        if u.database and u.database != ":memory:":
            Path(u.database).parent.mkdir(parents=True, exist_ok=True)
        connect_args = dict(kwargs.pop("connect_args", {}))
        connect_args.setdefault("timeout", 30)
        connect_args.setdefault("check_same_thread", False)
        engine = create_engine(url, connect_args=connect_args, **kwargs)

        @event.listens_for(engine, "connect")
        def _sqlite_connect(dbapi_conn: Any, _record: Any) -> None:
            dbapi_conn.isolation_level = None  # we emit BEGIN ourselves
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA foreign_keys=ON")
            if u.database and u.database != ":memory:":
                cur.execute("PRAGMA journal_mode=WAL")
            cur.close()

        @event.listens_for(engine, "begin")
        def _sqlite_begin(conn: Any) -> None:
            conn.exec_driver_sql("BEGIN IMMEDIATE")

        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, **kwargs)


def alembic_config(engine: Engine | None = None) -> Config:
    """An Alembic ``Config`` pointing at the shipped migrations (no ini file needed)."""
    cfg = Config()
    cfg.set_main_option("script_location", str(MIGRATIONS_DIR))
    if engine is not None:
        cfg.set_main_option(
            "sqlalchemy.url", engine.url.render_as_string(hide_password=False).replace("%", "%%")
        )
    return cfg


def upgrade(engine: Engine, revision: str = "head") -> None:
    """Migrate the database to ``revision`` (default: the newest)."""
    with engine.begin() as conn:
        cfg = alembic_config(engine)
        cfg.attributes["connection"] = conn
        command.upgrade(cfg, revision)


def downgrade(engine: Engine, revision: str = "base") -> None:
    """Migrate the database down to ``revision`` (default: empty)."""
    with engine.begin() as conn:
        cfg = alembic_config(engine)
        cfg.attributes["connection"] = conn
        command.downgrade(cfg, revision)


def current_revision(engine: Engine) -> str | None:
    """The database's Alembic revision, or None when it was never migrated."""
    with engine.connect() as conn:
        return MigrationContext.configure(conn).get_current_revision()


def head_revision() -> str:
    """The newest revision shipped with this code."""
    from alembic.script import ScriptDirectory

    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    assert head is not None
    return head
