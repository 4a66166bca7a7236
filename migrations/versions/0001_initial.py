"""The initial store schema: runs, checkpoints, channel data, task writes, steps, requests.

Revision ID: 0001
Revises:
Create Date: 2024-11-21

Times are BIGINT microseconds since the epoch (UTC); payloads are BLOBs of
orjson bytes; small metadata is JSON text. See durable_flow/store/sql/_tables.py.
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None

_OPEN = sa.text("answer IS NULL")


def _key(*names: str) -> list[sa.Column[str]]:
    return [sa.Column(name, sa.String(), nullable=False) for name in names]


def _when() -> sa.Column[int]:
    return sa.Column("created_at", sa.BigInteger(), nullable=False)


def upgrade() -> None:
    op.create_table(
        "runs",
        *_key("run_id", "workflow_name", "status"),
        sa.Column("created_at", sa.BigInteger(), nullable=False),
        sa.Column("updated_at", sa.BigInteger(), nullable=False),
        sa.Column("head_checkpoint_id", sa.String(), nullable=True),
        sa.Column("signature", sa.String(), nullable=False),
        sa.Column("max_supersteps", sa.Integer(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("forked_from", sa.Text(), nullable=True),
        sa.Column("workflow_ref", sa.String(), nullable=True),
        sa.Column("lease_owner", sa.String(), nullable=True),
        sa.Column("lease_epoch", sa.Integer(), nullable=False),
        sa.Column("lease_expires_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("run_id"),
    )
    op.create_index("ix_runs_created", "runs", ["created_at", "run_id"])
    op.create_index("ix_runs_status", "runs", ["status", "created_at", "run_id"])
    op.create_index("ix_runs_workflow", "runs", ["workflow_name", "created_at", "run_id"])

    op.create_table(
        "checkpoints",
        *_key("run_id", "checkpoint_id", "thread", "namespace"),
        sa.Column("parent_id", sa.String(), nullable=True),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("superstep", sa.Integer(), nullable=False),
        _when(),
        *_key("status", "source"),
        sa.Column("nodes", sa.Text(), nullable=False),
        sa.Column("routing_reason", sa.Text(), nullable=True),
        sa.Column("next_tasks", sa.Text(), nullable=False),
        sa.Column("joins", sa.Text(), nullable=False),
        sa.Column("value_versions", sa.Text(), nullable=False),
        sa.Column("log_lengths", sa.Text(), nullable=False),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("size", sa.Integer(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "checkpoint_id"),
    )
    op.create_index("ux_checkpoints_thread_seq", "checkpoints", ["run_id", "thread", "seq"],
                    unique=True)
    op.create_index("ix_checkpoints_namespace", "checkpoints",
                    ["run_id", "namespace", "checkpoint_id"])

    op.create_table(
        "channel_values",
        *_key("run_id", "thread", "channel"),
        sa.Column("seq", sa.Integer(), nullable=False),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "thread", "channel", "seq"),
    )
    op.create_table(
        "log_chunks",
        *_key("run_id", "thread"),
        sa.Column("seq", sa.Integer(), nullable=False),
        *_key("channel"),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        sa.PrimaryKeyConstraint("run_id", "thread", "seq", "channel"),
    )
    op.create_table(
        "task_writes",
        *_key("run_id", "checkpoint_id", "node"),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        _when(),
        sa.PrimaryKeyConstraint("run_id", "checkpoint_id", "node"),
    )
    op.create_table(
        "steps",
        *_key("run_id", "checkpoint_id", "node", "name"),
        sa.Column("data", sa.LargeBinary(), nullable=False),
        _when(),
        sa.PrimaryKeyConstraint("run_id", "checkpoint_id", "node", "name"),
    )

    op.create_table(
        "requests",
        *_key("run_id", "request_id", "workflow_name", "thread", "checkpoint_id", "node"),
        sa.Column("request_index", sa.Integer(), nullable=False),
        sa.Column("payload", sa.LargeBinary(), nullable=False),
        sa.Column("response_schema", sa.LargeBinary(), nullable=False),
        _when(),
        sa.Column("answer", sa.LargeBinary(), nullable=True),
        sa.Column("answered_at", sa.BigInteger(), nullable=True),
        sa.PrimaryKeyConstraint("run_id", "request_id"),
    )
    op.create_index("ix_requests_checkpoint", "requests", ["run_id", "checkpoint_id"])
    # Partial: the inbox only ever reads open requests.
    op.create_index("ix_requests_open", "requests", ["created_at", "run_id", "request_id"],
                    sqlite_where=_OPEN, postgresql_where=_OPEN)
    op.create_index("ix_requests_open_workflow", "requests",
                    ["workflow_name", "created_at", "run_id", "request_id"],
                    sqlite_where=_OPEN, postgresql_where=_OPEN)


def downgrade() -> None:
    for table in ("requests", "steps", "task_writes", "log_chunks", "channel_values",
                  "checkpoints", "runs"):
        op.drop_table(table)
