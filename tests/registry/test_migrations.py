"""Alembic upgrade and downgrade on SQLite and PostgreSQL; the migrated schema matches the
models and names every constraint by the naming convention."""

from __future__ import annotations

import datetime as dt
from pathlib import Path
from typing import Any

import pytest
from alembic.autogenerate import compare_metadata
from alembic.migration import MigrationContext
from sqlalchemy import insert, inspect, select

from harness_registry.db import current_revision, downgrade, head_revision, make_engine, upgrade
from harness_registry.models import Base, HarnessContent


def _insert_old_registration(engine: Any, rid: str, hid: str, name: str, key: str) -> None:
    """A content row and a registration row with only the columns of migration 0001 (what a
    registry written before later migrations holds)."""
    from sqlalchemy import column, table

    now = dt.datetime(2026, 11, 30, tzinfo=dt.UTC)
    cols = (
        "registration_id",
        "harness_id",
        "round_report_ref",
        "workflow_id",
        "registered_by",
        "note",
        "lineage_key",
        "created_at",
    )
    with engine.begin() as conn:
        conn.execute(
            insert(HarnessContent).values(
                harness_id=hid, name=name, blob_key="k", size_bytes=1, created_at=now
            )
        )
        conn.execute(
            insert(table("registrations", *(column(c) for c in cols))).values(
                registration_id=rid,
                harness_id=hid,
                round_report_ref="",
                workflow_id="",
                registered_by="",
                note="",
                lineage_key=key,
                created_at=now.replace(tzinfo=None),
            )
        )


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


def test_0002_records_the_validation_generator_and_keeps_old_rows(
    db_url: str, tmp_path: Path
) -> None:
    """A registration written under 0001 survives 0002 with no generator recorded; a new one
    records the generator id and capabilities it was validated on, read back as models."""

    from evoharness.capabilities import GeneratorCapabilities
    from evoharness.harness.schema import Harness
    from evoharness.local_store import LocalArtifactStore
    from harness_registry.registry import Lineage, Registry

    engine = make_engine(db_url)
    try:
        upgrade(engine, "0001")
        _insert_old_registration(engine, "reg-old", "b" * 64, "old", "c" * 64)
        upgrade(engine)
        assert current_revision(engine) == head_revision()
        reg = Registry(engine, LocalArtifactStore(tmp_path / "blobs"))
        old = reg.get("reg-old")
        assert old.generator_id == "" and old.generator_capabilities is None
        caps = GeneratorCapabilities(layout="adapter", max_references=1)
        lineage = Lineage(registered_by="t", generator_id="sim/x@1", generator_capabilities=caps)
        put = reg.put(Harness(), lineage)
        got = reg.get(put.registration.registration_id)
        assert got.generator_id == "sim/x@1" and got.generator_capabilities == caps
        # the validation generator is part of the lineage identity only when recorded
        other = reg.put(Harness(), lineage.model_copy(update={"generator_id": "sim/y@1"}))
        assert other.created
        assert reg.put(Harness(), Lineage(registered_by="t")).created
        downgrade(engine, "0001")
        cols = {c["name"] for c in inspect(engine).get_columns("registrations")}
        assert "generator_id" not in cols and "generator_capabilities" not in cols
    finally:
        engine.dispose()


def test_0003_registrations_have_a_name_and_description_and_old_rows_keep_working(
    db_url: str, tmp_path: Path
) -> None:
    """A registration written under 0002 survives 0003 showing its document's name and no
    description; a new one keeps its own name and description, which are not part of the
    lineage identity; downgrading removes the columns again."""

    from evoharness.harness.schema import Harness
    from evoharness.local_store import LocalArtifactStore
    from harness_registry.registry import Lineage, Registry

    engine = make_engine(db_url)
    try:
        upgrade(engine, "0002")
        _insert_old_registration(engine, "reg-v2", "d" * 64, "old-doc", "e" * 64)
        upgrade(engine)
        reg = Registry(engine, LocalArtifactStore(tmp_path / "blobs"))
        old = reg.get("reg-v2")
        assert old.name == "old-doc" and old.description == ""
        lineage = Lineage(registered_by="t", name="h+run.r1", description="Evolved by run.")
        put = reg.put(Harness(), lineage)
        got = reg.get(put.registration.registration_id)
        assert (got.name, got.description) == ("h+run.r1", "Evolved by run.")
        assert [r.name for r in reg.list()] == ["h+run.r1", "old-doc"]
        # not part of the identity: the same lineage under another name is the same registration
        again = reg.put(Harness(), lineage.model_copy(update={"name": "other"}))
        assert not again.created and again.registration.name == "h+run.r1"
        unnamed = reg.put(Harness(), Lineage(registered_by="u"))
        assert unnamed.registration.name == Harness().name
        downgrade(engine, "0002")
        cols2 = {c["name"] for c in inspect(engine).get_columns("registrations")}
        assert "name" not in cols2 and "description" not in cols2
        assert "generator_id" in cols2
    finally:
        engine.dispose()
