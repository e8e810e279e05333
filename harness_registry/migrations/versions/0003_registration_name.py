"""Registrations get a name and a description of their own: ``name`` (an evolved harness is
named after its start, run and round, e.g. ``baseline+myrun.r1``) and ``description`` (the
run, round and accepted patch). Both are metadata, not part of the lineage identity.

Existing rows get NULL for both: they keep showing the harness document's name and no
description, exactly as before.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-02
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("registrations") as batch:
        batch.add_column(sa.Column("name", sa.String(200), nullable=True))
        batch.add_column(sa.Column("description", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("registrations") as batch:
        batch.drop_column("description")
        batch.drop_column("name")
