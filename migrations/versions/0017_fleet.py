"""Operating a fleet: paused runs and their reason, run labels.

Revision ID: 0017
Revises: 0016
Create Date: 2026-12-02

``runs.paused_from`` is the status a paused run goes back to on unpause
(``waiting`` or ``queued``; the state machine keeps it current while the run
is paused: an answer or an event can make a waiting run's way back
``queued``); ``runs.pause_reason`` says why it was paused. ``runs.labels``
is JSON text, ``{key: value}`` (strings), NULL when the run has none; the
``run_labels`` table holds one row per label so that runs are found by label
through an index.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0017"
down_revision = "0016"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("runs", sa.Column("paused_from", sa.String(), nullable=True))
    op.add_column("runs", sa.Column("pause_reason", sa.Text(), nullable=True))
    op.add_column("runs", sa.Column("labels", sa.Text(), nullable=True))
    op.create_table(
        "run_labels",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("key", sa.String(), nullable=False),
        sa.Column("value", sa.String(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "key"),
    )
    op.create_index("ix_run_labels_key_value", "run_labels", ["key", "value", "run_id"])


def downgrade() -> None:
    op.drop_index("ix_run_labels_key_value", table_name="run_labels")
    op.drop_table("run_labels")
    with op.batch_alter_table("runs") as batch:
        batch.drop_column("labels")
        batch.drop_column("pause_reason")
        batch.drop_column("paused_from")
