"""Approvals: who may answer a request, the decisions taken, the notification outbox, users.

Revision ID: 0008
Revises: 0007
Create Date: 2026-12-01

``requests.approval`` holds a request's title, assignees, roles and
escalation (JSON); ``decisions`` every answer, policy answer, escalation,
reassignment and timeout, hash-chained per run; ``notifications`` the outbox
of requests that opened or were escalated; ``users`` the web app's people.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"

down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.add_column("requests", sa.Column("approval", sa.LargeBinary(), nullable=True))
    op.create_table(
        "decisions",
        sa.Column("run_id", sa.String(), primary_key=True),
        sa.Column("seq", sa.Integer(), primary_key=True),
        sa.Column("request_id", sa.String(), nullable=False),
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("answer", sa.Text(), nullable=False),
        sa.Column("by", sa.String(), nullable=True),
        sa.Column("via", sa.String(), nullable=False),
        sa.Column("at", sa.BigInteger(), nullable=False),
        sa.Column("comment", sa.Text(), nullable=True),
        sa.Column("payload_digest", sa.String(), nullable=False),
        sa.Column("digest", sa.String(), nullable=False),
    )
    op.create_table(
        "notifications",
        sa.Column("id", sa.String(), primary_key=True),
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("request_id", sa.String(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("body", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("attempts", sa.Integer(), nullable=False, server_default="0"),
        sa.Column("due_at", sa.BigInteger(), nullable=False),
        sa.Column("delivered_at", sa.BigInteger(), nullable=True),
        sa.Column("last_error", sa.Text(), nullable=True),
    )
    op.create_index("ix_notifications_due", "notifications", ["delivered_at", "due_at"])
    op.create_table(
        "users",
        sa.Column("name", sa.String(), primary_key=True),
        sa.Column("password_hash", sa.String(), nullable=False),
        sa.Column("roles", sa.Text(), nullable=False),
        sa.Column("email", sa.String(), nullable=True),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
    )


def downgrade() -> None:
    op.drop_table("users")
    op.drop_index("ix_notifications_due", table_name="notifications")
    op.drop_table("notifications")
    op.drop_table("decisions")
    with op.batch_alter_table("requests") as batch:
        batch.drop_column("approval")
