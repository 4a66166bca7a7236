"""Server-side web sessions: a login is a row, ended by logout and by changes to its user.

Revision ID: 0013
Revises: 0012
Create Date: 2026-12-02

``sessions.id_hash`` is the sha256 (hex) of the random session id the
browser holds; the id itself is never stored. ``user_name`` is NULL for a
login with the admin token. ``created_at`` and ``expires_at`` are
microseconds since the epoch, like every time column.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0013"
down_revision = "0012"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "sessions",
        sa.Column("id_hash", sa.String(), nullable=False),
        sa.Column("user_name", sa.String(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("expires_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("id_hash"),
    )
    op.create_index("ix_sessions_user", "sessions", ["user_name"])


def downgrade() -> None:
    op.drop_index("ix_sessions_user", table_name="sessions")
    op.drop_table("sessions")
