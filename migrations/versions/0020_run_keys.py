"""Per-key run concurrency: a run's concurrency key and how many runs of it may execute.

Revision ID: 0020
Revises: 0019
Create Date: 2026-12-03

``runs.concurrency_key`` is the key a run was submitted with
(``Runtime.submit(..., concurrency_key=...)``), NULL for none;
``runs.max_per_key`` is its workflow's ``max_runs_per_key`` when it was
submitted (NULL: no limit). A worker's claim starts a run with a key only while
fewer than ``max_per_key`` runs of that key are ``running``, oldest first;
``ix_runs_concurrency_key`` finds the runs of a key by status for that count.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0020"
down_revision = "0019"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("concurrency_key", sa.String(), nullable=True))
    op.add_column("runs", sa.Column("max_per_key", sa.Integer(), nullable=True))
    op.create_index("ix_runs_concurrency_key", "runs", ["concurrency_key", "status"])


def downgrade() -> None:
    op.drop_index("ix_runs_concurrency_key", table_name="runs")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("max_per_key")
        batch.drop_column("concurrency_key")
