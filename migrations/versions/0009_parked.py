"""Parked tasks: waits that let other branches go on (``waits="branch"``).

Revision ID: 0009
Revises: 0008
Create Date: 2026-12-01

``checkpoints.parked`` is JSON text, a list of ``{task, anchor, superstep,
arg}``: the tasks parked at that checkpoint, each with the checkpoint its
rows are recorded at; NULL when none is parked. ``requests.parked`` marks a
request asked by a task that may park: it is answerable while its run runs.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("checkpoints", sa.Column("parked", sa.Text(), nullable=True))
    op.add_column("requests", sa.Column("parked", sa.Boolean(), nullable=False,
                                        server_default=sa.false()))


def downgrade() -> None:
    with op.batch_alter_table("requests") as batch:
        batch.drop_column("parked")
    with op.batch_alter_table("checkpoints") as batch:
        batch.drop_column("parked")
