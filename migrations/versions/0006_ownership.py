"""Ownership at the edges: claim tokens and start attempts.

Revision ID: 0006
Revises: 0005
Create Date: 2026-11-27

``runs.claim_token`` names the worker claim (one ``claim_next`` transaction)
that took a run's lease, so a claim whose COMMIT reply was lost finds its
own runs when it is tried again instead of stranding them. A run that cannot
be started (its head damaged, its graph changed without a new version) is
counted in ``runs.start_attempts`` and not claimed again before
``runs.start_after`` (BIGINT microseconds): retried with backoff, never in a
loop.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # plain ADD COLUMN (constant defaults): SQLite need not copy the table
    op.add_column("runs", sa.Column("claim_token", sa.String(), nullable=True))
    op.add_column("runs", sa.Column("start_attempts", sa.Integer(), nullable=False,
                                    server_default="0"))
    op.add_column("runs", sa.Column("start_after", sa.BigInteger(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for column in ("start_after", "start_attempts", "claim_token"):
            batch.drop_column(column)
