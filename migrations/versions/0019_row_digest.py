"""A digest of each checkpoint row's own columns, so a changed item count is damage.

Revision ID: 0019
Revises: 0017
Create Date: 2026-12-02

``checkpoints.row_digest`` is the CRC-32 of the row's columns as written (all but
``status`` and ``error``, which a later commit marks: ``status_digest`` covers those
two and is set with them): the channel digests of
migration 0011 vouch for the bytes, this one for the counts, versions and next
tasks that say which bytes a checkpoint sees. NULL for rows written before (read
as before).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0019"
down_revision = "0017"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("checkpoints") as batch:
        batch.add_column(sa.Column("row_digest", sa.BigInteger(), nullable=True))
        batch.add_column(sa.Column("status_digest", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("checkpoints") as batch:
        batch.drop_column("status_digest")
        batch.drop_column("row_digest")
