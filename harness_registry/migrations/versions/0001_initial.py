"""Initial registry schema: harness contents, registrations, channels, channel events.

Every constraint and index is named explicitly, following
``harness_registry.models.NAMING_CONVENTION``, so later migrations can address them by name
on PostgreSQL and SQLite alike.

Revision ID: 0001
Revises:
Create Date: 2026-11-29
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_TS = sa.DateTime(timezone=True)


def upgrade() -> None:
    op.create_table(
        "harness_contents",
        sa.Column("harness_id", sa.String(64), nullable=False),
        sa.Column("name", sa.String(200), nullable=False),
        sa.Column("blob_key", sa.String(500), nullable=False),
        sa.Column("size_bytes", sa.Integer(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.PrimaryKeyConstraint("harness_id", name="pk_harness_contents"),
    )
    op.create_table(
        "registrations",
        sa.Column("registration_id", sa.String(64), nullable=False),
        sa.Column("harness_id", sa.String(64), nullable=False),
        sa.Column("parent_id", sa.String(64), nullable=True),
        sa.Column("patch", sa.JSON(), nullable=True),
        sa.Column("round_report_ref", sa.String(500), nullable=False),
        sa.Column("workflow_id", sa.String(200), nullable=False),
        sa.Column("registered_by", sa.String(200), nullable=False),
        sa.Column("note", sa.Text(), nullable=False),
        sa.Column("lineage_key", sa.String(64), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.PrimaryKeyConstraint("registration_id", name="pk_registrations"),
        sa.ForeignKeyConstraint(
            ["harness_id"],
            ["harness_contents.harness_id"],
            name="fk_registrations_harness_id_harness_contents",
        ),
        sa.ForeignKeyConstraint(
            ["parent_id"],
            ["registrations.registration_id"],
            name="fk_registrations_parent_id_registrations",
        ),
        sa.UniqueConstraint("lineage_key", name="uq_registrations_lineage_key"),
    )
    op.create_index("ix_registrations_harness_id", "registrations", ["harness_id"])
    op.create_index("ix_registrations_parent_id", "registrations", ["parent_id"])
    op.create_index("ix_registrations_created_at", "registrations", ["created_at"])
    op.create_table(
        "channels",
        sa.Column("name", sa.String(64), nullable=False),
        sa.Column("registration_id", sa.String(64), nullable=False),
        sa.Column("canary_registration_id", sa.String(64), nullable=True),
        sa.Column("canary_weight", sa.Float(), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("updated_at", _TS, nullable=False),
        sa.PrimaryKeyConstraint("name", name="pk_channels"),
        sa.ForeignKeyConstraint(
            ["registration_id"],
            ["registrations.registration_id"],
            name="fk_channels_registration_id_registrations",
        ),
        sa.ForeignKeyConstraint(
            ["canary_registration_id"],
            ["registrations.registration_id"],
            name="fk_channels_canary_registration_id_registrations",
        ),
    )
    op.create_table(
        "channel_events",
        sa.Column("event_id", sa.Integer(), autoincrement=True, nullable=False),
        sa.Column("channel", sa.String(64), nullable=False),
        sa.Column("version", sa.Integer(), nullable=False),
        sa.Column("action", sa.String(32), nullable=False),
        sa.Column("from_registration_id", sa.String(64), nullable=True),
        sa.Column("registration_id", sa.String(64), nullable=False),
        sa.Column("canary_registration_id", sa.String(64), nullable=True),
        sa.Column("canary_weight", sa.Float(), nullable=False),
        sa.Column("actor", sa.String(200), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("created_at", _TS, nullable=False),
        sa.PrimaryKeyConstraint("event_id", name="pk_channel_events"),
        sa.ForeignKeyConstraint(
            ["registration_id"],
            ["registrations.registration_id"],
            name="fk_channel_events_registration_id_registrations",
        ),
        sa.UniqueConstraint("channel", "version", name="uq_channel_events_channel_version"),
    )
    op.create_index(
        "ix_channel_events_channel_created_at", "channel_events", ["channel", "created_at"]
    )


def downgrade() -> None:
    op.drop_index("ix_channel_events_channel_created_at", table_name="channel_events")
    op.drop_table("channel_events")
    op.drop_table("channels")
    op.drop_index("ix_registrations_created_at", table_name="registrations")
    op.drop_index("ix_registrations_parent_id", table_name="registrations")
    op.drop_index("ix_registrations_harness_id", table_name="registrations")
    op.drop_table("registrations")
    op.drop_table("harness_contents")
