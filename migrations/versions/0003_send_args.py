"""The arguments of ``Send`` instances, stored with the checkpoint that schedules them.

Revision ID: 0003
Revises: 0002
Create Date: 2026-12-01

``checkpoints.task_args`` is JSON text, ``{task id: argument}``, for the
instances (``summarize[3]``) among a checkpoint's next tasks; NULL when it
schedules none.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("checkpoints") as batch:
        batch.add_column(sa.Column("task_args", sa.Text(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("checkpoints") as batch:
        batch.drop_column("task_args")
