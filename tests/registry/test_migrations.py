"""Alembic upgrade and downgrade on SQLite and PostgreSQL; the migrated schema matches the
models and names every constraint by the naming convention."""

from __future__ import annotations

import datetime as dt

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import insert, inspect, select

from harness_registry.db import current_revision, downgrade, head_revision, make_engine, upgrade
from harness_registry.models import Base, HarnessContent


def test_upgrade_downgrade_upgrade(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        assert current_revision(engine) is None
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        tables = set(inspect(engine).get_table_names())
        assert {"harness_contents", "registrations", "channels", "channel_events"} <= tables
        downgrade(engine, "base")
        assert current_revision(engine) is None
        left = set(inspect(engine).get_table_names()) - {"alembic_version"}
        assert left == set()
        upgrade(engine)
        assert current_revision(engine) == head_revision()
    finally:
        engine.dispose()


def test_migrated_schema_matches_models(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        upgrade(engine)
        with engine.connect() as conn:
            ctx = MigrationContext.configure(conn, opts={"compare_type": True})
            diffs = compare_metadata(ctx, Base.metadata)
        assert diffs == []
    finally:
        engine.dispose()


def test_constraint_names_follow_convention(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        upgrade(engine)
        insp = inspect(engine)
        fks = {fk["name"] for fk in insp.get_foreign_keys("registrations")}
        assert fks == {
            "fk_registrations_harness_id_harness_contents",
            "fk_registrations_parent_id_registrations",
        }
        uqs = {u["name"] for u in insp.get_unique_constraints("channel_events")}
        assert "uq_channel_events_channel_version" in uqs
        idx = {i["name"] for i in insp.get_indexes("registrations")}
        assert {"ix_registrations_harness_id", "ix_registrations_created_at"} <= idx
        if engine.dialect.name == "postgresql":  # SQLite does not report PK names
            assert insp.get_pk_constraint("channels")["name"] == "pk_channels"
    finally:
        engine.dispose()


def test_times_are_aware_utc(db_url: str) -> None:
    engine = make_engine(db_url)
    try:
        upgrade(engine)
        plus2 = dt.timezone(dt.timedelta(hours=2))
        local = dt.datetime(2026, 3, 1, 12, 30, 15, 123456, tzinfo=plus2)
        with engine.begin() as conn:
            conn.execute(
                insert(HarnessContent).values(
                    harness_id="a" * 64, name="x", blob_key="k", size_bytes=1, created_at=local
                )
            )
        with engine.connect() as conn:
            got = conn.scalar(select(HarnessContent.created_at))
        assert got is not None
        assert got.utcoffset() == dt.timedelta(0)
        assert got == local
        assert got.hour == 10
        with pytest.raises(Exception, match="naive datetime"), engine.begin() as conn:
            conn.execute(
                insert(HarnessContent).values(
                    harness_id="b" * 64,
                    name="x",
                    blob_key="k",
                    size_bytes=1,
                    created_at=dt.datetime(2026, 1, 1),
                )
            )
    finally:
        engine.dispose()
