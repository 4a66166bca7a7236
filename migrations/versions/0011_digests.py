"""Digests of the bytes a checkpoint reads, so a load can trust them instead of re-validating.

Revision ID: 0011
Revises: 0009
Create Date: 2026-12-01

``checkpoints.digests`` is JSON text, ``{channel: [crc32, length]}``: for a
value channel, of the bytes of its value; for a log channel, of its chunks'
items joined (``","`` between chunks, the brackets left out), the same bytes a
merged segment holds. NULL for checkpoints written before (read as before:
every item validated).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0011"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("checkpoints") as batch:
        batch.add_column(sa.Column("digests", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("checkpoints") as batch:
        batch.drop_column("digests")
