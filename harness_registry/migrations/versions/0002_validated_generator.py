"""Registrations record the generator they were validated on: ``generator_id`` (the
deployment's id, "" when not recorded) and ``generator_capabilities`` (JSON of
``evoharness.capabilities.GeneratorCapabilities``, NULL when not recorded).

Existing rows get "" and NULL: their validation generator was never recorded, so the runtime
service cannot flag a mismatch for them.

Revision ID: 0002
Revises: 0001
Create Date: 2026-12-01
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("registrations") as batch:
        batch.add_column(
            sa.Column("generator_id", sa.String(300), nullable=False, server_default="")
        )
        batch.add_column(sa.Column("generator_capabilities", sa.JSON(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("registrations") as batch:
        batch.drop_column("generator_capabilities")
        batch.drop_column("generator_id")
