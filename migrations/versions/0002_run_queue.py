"""Runs for a worker fleet: input digest, priority, workflow version, wake time.

Revision ID: 0002
Revises: 0001
Create Date: 2026-11-24

``input_digest`` lets starting one run id again tell the same input from a
different one; ``priority``, ``workflow_version`` and ``wake_at`` (BIGINT
microseconds, like every time) drive the workers' claims, which read
``ix_runs_claim`` in priority-then-age order.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        batch.add_column(sa.Column("input_digest", sa.String(), nullable=True))
        batch.add_column(sa.Column("workflow_version", sa.String(), nullable=False,
                                   server_default="1"))
        batch.add_column(sa.Column("priority", sa.Integer(), nullable=False,
                                   server_default="0"))
        batch.add_column(sa.Column("wake_at", sa.BigInteger(), nullable=True))
    op.create_index("ix_runs_claim", "runs",
                    ["workflow_name", "status", "priority", "created_at", "run_id"])


def downgrade() -> None:
    op.drop_index("ix_runs_claim", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        for column in ("wake_at", "priority", "workflow_version", "input_digest"):
            batch.drop_column(column)
