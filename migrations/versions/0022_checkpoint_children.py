"""The copies a run went on from, by the checkpoint they copy: ``ix_checkpoints_resumed``.

Revision ID: 0022
Revises: 0021
Create Date: 2026-12-07

``get_state`` of an older checkpoint needs what came after it: its children
(when the next checkpoint was written, and the copies a run went on from).
The next checkpoint of its thread is one row of ``ux_checkpoints_thread_seq``;
the copies (``source = 'resume'``, in threads of their own) are rows of this
partial index on ``(run_id, parent_id)``, which holds those copies only, so
the supersteps' own checkpoints pay nothing for it. Without them every
checkpoint of the run was read.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0022"
down_revision = "0021"
branch_labels = None
depends_on = None

_RESUMED = sa.text("source = 'resume'")


def upgrade() -> None:
    op.create_index("ix_checkpoints_resumed", "checkpoints", ["run_id", "parent_id"],
                    sqlite_where=_RESUMED, postgresql_where=_RESUMED)


def downgrade() -> None:
    op.drop_index("ix_checkpoints_resumed", table_name="checkpoints")
