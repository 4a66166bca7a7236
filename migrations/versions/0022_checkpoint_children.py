"""A checkpoint's children found through an index: ``ix_checkpoints_parent``.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07

``get_state`` of an older checkpoint needs what came after it: its children
(when the next checkpoint was written, and the copies a run went on from).
``(run_id, parent_id)`` finds them in a few index rows, however long the run;
without it every checkpoint of the run was read.
"""

from __future__ import annotations

from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_index("ix_checkpoints_parent", "checkpoints", ["run_id", "parent_id"])


def downgrade() -> None:
    op.drop_index("ix_checkpoints_parent", table_name="checkpoints")
