"""The durable stream log, and what a run's model calls used against its budget.

Revision ID: 0007
Revises: 0006
Create Date: 2026-11-27

``stream_entries`` keeps every ``model_delta``, ``tool_started`` and
``tool_finished`` a run published, numbered per run (``seq`` from 1) so a
reader resumes after the last one it saw; ``epoch`` is the lease epoch of
the execution that wrote it (a later execution of the same model round marks
the earlier attempt as cut). ``data`` is orjson bytes; ``created_at`` BIGINT
microseconds.

``runs`` gains ``input_tokens``, ``output_tokens`` and ``usd`` (the sums of
every model call of the run, ``RunInfo.usage``) and ``budget_tokens``,
``budget_usd`` (its ``Budget``; NULL: no limit).
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "stream_entries",
        sa.Column("run_id", sa.String(), nullable=False),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("epoch", sa.Integer(), nullable=False),
        sa.Column("namespace", sa.String(), nullable=False),
        sa.Column("node", sa.String(), nullable=False),
        sa.Column("superstep", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "seq"),
    )
    # plain ADD COLUMN (constant defaults): SQLite need not copy the table
    for name in ("input_tokens", "output_tokens"):
        op.add_column("runs", sa.Column(name, sa.BigInteger(), nullable=False,
                                        server_default="0"))
    op.add_column("runs", sa.Column("usd", sa.Float(), nullable=False, server_default="0"))
    op.add_column("runs", sa.Column("budget_tokens", sa.BigInteger(), nullable=True))
    op.add_column("runs", sa.Column("budget_usd", sa.Float(), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("runs") as batch:
        for column in ("budget_usd", "budget_tokens", "usd", "output_tokens", "input_tokens"):
            batch.drop_column(column)
    op.drop_table("stream_entries")
