"""Durable time and events: timers and event waits as requests, deadlines, a mailbox, graphs.

Revision ID: 0004
Revises: 0003
Create Date: 2026-12-01

A recorded wait of a task is a row of ``requests`` of a ``kind``: a request
to a person (every row before this revision), a timer or an event wait.
``expires_at`` (BIGINT microseconds) is a deadline or a wake time;
``timed_out`` marks a wait its time closed. ``mailbox`` keeps the events
sent to a run until a wait takes them; ``graphs`` keeps the description of
every graph runs were started with, so a changed workflow can be told apart
node by node. ``ix_runs_wake`` lets workers find waiting runs whose time
has come.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    # plain ADD COLUMN (constant defaults): SQLite need not copy the table
    op.add_column("requests", sa.Column("kind", sa.String(), nullable=False,
                                        server_default="request"))
    op.add_column("requests", sa.Column("expires_at", sa.BigInteger(), nullable=True))
    op.add_column("requests", sa.Column("timed_out", sa.Boolean(), nullable=False,
                                        server_default=sa.false()))
    op.create_index("ix_runs_wake", "runs", ["status", "wake_at"])
    op.create_table(
        "mailbox",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("sent_at", sa.BigInteger(), nullable=False),
        sa.Column("request_id", sa.String(), nullable=True),
        sa.Column("delivered_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", "seq"),
    )
    op.create_table(
        "graphs",
        sa.Column("signature", sa.String(), nullable=False),
        sa.Column("workflow_name", sa.String(), nullable=False),
        sa.Column("workflow_version", sa.String(), nullable=False),
        sa.Column("description", sa.Text(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("signature"),
    )


def downgrade() -> None:
    op.drop_table("graphs")
    op.drop_table("mailbox")
    op.drop_index("ix_runs_wake", table_name="runs")
    with op.batch_alter_table("requests") as batch:
        for column in ("timed_out", "expires_at", "kind"):
            batch.drop_column(column)
